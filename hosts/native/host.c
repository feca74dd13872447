/*
 * host.c — wm-host-native: the engine host of native workers (DESIGN §3,
 * §4; issue 6).  One host process serves one worker.
 *
 * The loop thread owns the channel (fd 3, ipc/channel.h): it answers the
 * handshake, Loads, Heartbeats and Shutdown, hands each Process to a pool
 * of `concurrency` worker threads, and turns their results into Result
 * frames.  A worker thread only calls the library: its results, the
 * worker's log lines and its gateway calls travel to the loop thread
 * through queues and an eventfd, since the channel is not thread-safe.
 *
 * Load: the package arrives as a sealed memfd; package.c validates it (in
 * this process: the master parses no package format) and extracts the
 * library, which is written to a memfd of its own and opened through
 * /proc/self/fd/N (no temporary file).  The identity variables are set
 * before.  A reload arrives only when nothing is in flight (the master
 * holds events back meanwhile), so the old library is closed and the new
 * one opened in its place.
 *
 * Results: Process's WorkerResponse is verified before use; its
 * result_event becomes the Result's output, its error_message a
 * worker_error; a non-zero return or an unreadable output is a
 * worker_error too.  FreeResult runs exactly once for every non-NULL
 * output, after the Result is encoded.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <event2/event.h>

#include "hosts/native/package.h"
#include "ipc/channel.h"
#include "ipc/cloudevent.h"
#include "workmanager/worker_api.h"

#define HOST_FD 3
/* Events the master may hand us at once; the pool takes them in turn. */
#define HOST_MAX_INFLIGHT 256
#define MAX_THREADS 64

/* An event for the pool, or its result on the way back. */
struct job {
    struct job *next;
    uint64_t seq;
    uint8_t *in;
    int32_t in_len;
    int32_t rc;
    uint8_t *out;
    int32_t out_len;
    virtufin_free_result_fn free_result; /* of the library that made out */
};

/* A worker's log line or gateway call, for the loop thread. */
struct call {
    struct call *next;
    bool is_log;
    int32_t level;
    char *text; /* log: the line; gateway: "service\0method" */
    char *method;
    uint8_t *req;
    int32_t req_len;
    /* gateway: the answer, under mu */
    bool done;
    int32_t status;
    uint8_t *resp;
    int32_t resp_len;
    pthread_cond_t cv;
};

static struct event_base *base;
static struct ipc_channel *ch;
static struct event *ev_done;
static int efd = -1;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static struct job *todo, **todo_tail = &todo; /* for the pool */
static struct job *done_jobs;                 /* for the loop, LIFO */
static struct call *calls;                    /* for the loop, LIFO */

static pthread_t threads[MAX_THREADS];
static unsigned nthreads;
static unsigned inflight; /* jobs handed to the pool, not answered */
static unsigned idle;     /* pool threads waiting for work (under mu) */
static bool shutting_down;

/* The library in use. */
static void *lib;
static int lib_fd = -1;
static virtufin_process_fn process_fn;
static virtufin_free_result_fn free_fn;
static VirtufinHost host_api;

static void die(const char *what) __attribute__((noreturn));

static void
die(const char *what)
{
    fprintf(stderr, "wm-host-native[%d]: %s: %s\n", (int)getpid(), what,
            strerror(errno));
    exit(1);
}

static void
wake_loop(void)
{
    uint64_t one = 1;
    /* Fails only when the counter would overflow: the loop is awake. */
    (void)!write(efd, &one, sizeof one);
}

static void
send_frame(const struct ipc_frame *f)
{
    if (ipc_channel_send(ch, f, NULL, 0) < 0 && errno != EAGAIN)
        die("send");
}

/* A log line of the host itself. */
#define host_log(level, ...)                                                   \
    do {                                                                       \
        if (ipc_channel_log(ch, level, __VA_ARGS__) < 0 && errno != EAGAIN)    \
            die("send a Log");                                                 \
    } while (0)

/* ---- the worker's callbacks (any thread) ----------------------------- */

static void
api_log(void *engine, int32_t level, const char *msg)
{
    struct call *c = calloc(1, sizeof *c);

    (void)engine;
    if (c == NULL || (c->text = strdup(msg ? msg : "")) == NULL) {
        free(c);
        return;
    }
    c->is_log = true;
    c->level = level < 0 ? 0 : level > 4 ? 4 : level;
    pthread_mutex_lock(&mu);
    c->next = calls;
    calls = c;
    pthread_mutex_unlock(&mu);
    wake_loop();
}

static int32_t
api_gateway_call(void *engine, const char *service, const char *method,
                 const uint8_t *req, int32_t req_len, uint8_t **resp,
                 int32_t *resp_len)
{
    struct call *c = calloc(1, sizeof *c);
    int32_t status;

    (void)engine;
    *resp = NULL;
    *resp_len = 0;
    if (c == NULL || service == NULL || method == NULL || req_len < 0 ||
        (req_len > 0 && req == NULL)) {
        free(c);
        return -1;
    }
    c->text = strdup(service);
    c->method = strdup(method);
    c->req = malloc(req_len ? (size_t)req_len : 1);
    if (c->text == NULL || c->method == NULL || c->req == NULL) {
        free(c->text);
        free(c->method);
        free(c->req);
        free(c);
        return -1;
    }
    memcpy(c->req, req, (size_t)req_len);
    c->req_len = req_len;
    pthread_cond_init(&c->cv, NULL);
    pthread_mutex_lock(&mu);
    c->next = calls;
    calls = c;
    pthread_mutex_unlock(&mu);
    wake_loop();
    pthread_mutex_lock(&mu);
    while (!c->done)
        pthread_cond_wait(&c->cv, &mu);
    pthread_mutex_unlock(&mu);
    status = c->status;
    *resp = c->resp;
    *resp_len = c->resp_len;
    pthread_cond_destroy(&c->cv);
    free(c->text);
    free(c->method);
    free(c->req);
    free(c);
    return status == 200 ? 0 : status ? status : -1;
}

static void
api_free_response(void *engine, uint8_t *resp)
{
    (void)engine;
    free(resp);
}

/* ---- the pool --------------------------------------------------------- */

static void *
worker_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&mu);
        idle++;
        while (todo == NULL)
            pthread_cond_wait(&work_cv, &mu);
        idle--;
        struct job *j = todo;
        todo = j->next;
        if (todo == NULL)
            todo_tail = &todo;
        virtufin_process_fn p = process_fn;
        j->free_result = free_fn;
        pthread_mutex_unlock(&mu);

        j->out = NULL;
        j->out_len = 0;
        j->rc = p(&host_api, j->in, j->in_len, &j->out, &j->out_len);

        pthread_mutex_lock(&mu);
        /* One wake-up per batch: the loop takes every result at once. */
        bool first = done_jobs == NULL;
        j->next = done_jobs;
        done_jobs = j;
        pthread_mutex_unlock(&mu);
        if (first)
            wake_loop();
    }
    return NULL;
}

static void
pool_start(unsigned n)
{
    sigset_t all, old;

    if (n == 0)
        n = 1;
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    /* Asynchronous signals stay with the loop thread; a worker's own
     * faults (and abort(), raise()) must still reach it. */
    sigfillset(&all);
    static const int own[] = { SIGSEGV, SIGBUS,  SIGFPE, SIGILL,
                               SIGABRT, SIGTRAP, SIGSYS };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        sigdelset(&all, own[i]);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    while (nthreads < n) {
        if (pthread_create(&threads[nthreads], NULL, worker_main, NULL) != 0)
            die("pthread_create");
        nthreads++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ---- results (loop thread) -------------------------------------------- */

static void
answer(struct job *j)
{
    struct ipc_frame f;
    struct ipc_worker_response wr;
    struct ipc_fb_error fe;
    char msg[512];

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_RESULT;
    f.reply_to = j->seq;
    if (j->rc != 0) {
        snprintf(msg, sizeof msg, "Process returned %d", (int)j->rc);
        f.u.result.error.type = ipc_str_c("worker_error");
        f.u.result.error.message = ipc_str_c(msg);
    } else if (j->out != NULL) {
        if (j->out_len <= 0 || ipc_worker_response_read(
                                   j->out, (size_t)j->out_len, &wr, &fe) != 0) {
            char why[256];
            if (j->out_len <= 0)
                snprintf(why, sizeof why, "length %d", (int)j->out_len);
            else
                ipc_fb_error_format(&fe, why, sizeof why);
            snprintf(msg, sizeof msg,
                     "the worker's output is not a WorkerResponse: %s", why);
            f.u.result.error.type = ipc_str_c("worker_error");
            f.u.result.error.message = ipc_str_c(msg);
        } else {
            if (wr.has_result) {
                f.u.result.outputs.n = 1;
                f.u.result.outputs.items = &wr.result_event;
            }
            if (wr.error_message.ptr) {
                f.u.result.error.type = ipc_str_c("worker_error");
                f.u.result.error.message = wr.error_message;
            }
        }
    }
    if (ipc_channel_send(ch, &f, NULL, 0) < 0) {
        if (errno != EMSGSIZE)
            die("send a Result");
        struct ipc_frame e;
        memset(&e, 0, sizeof e);
        e.type = IPC_BODY_RESULT;
        e.reply_to = j->seq;
        e.u.result.error.type = ipc_str_c("output_too_large");
        e.u.result.error.message =
            ipc_str_c("the worker's output does not fit in a frame");
        send_frame(&e);
    }
    /* After the Result is encoded: exactly once per non-NULL output. */
    if (j->out != NULL && j->free_result != NULL)
        j->free_result(j->out);
    free(j->in);
    free(j);
    inflight--;
}

static void
on_gateway_reply(struct ipc_channel *c, const struct ipc_frame *reply, int *fds,
                 unsigned nfds, const char *error, void *arg)
{
    struct call *gc = arg;
    uint8_t *resp = NULL;
    int32_t len = 0, status = 500;

    (void)c;
    (void)fds;
    (void)nfds;
    if (error == NULL && reply->type == IPC_BODY_GATEWAY_REPLY) {
        const struct ipc_gateway_reply *g = &reply->u.gateway_reply;
        status = g->status;
        const void *src = status == 200 ? (const void *)g->response.ptr
                                        : (const void *)g->error.ptr;
        len = (int32_t)(status == 200 ? g->response.len : g->error.len);
        resp = malloc((size_t)len + 1);
        if (resp) {
            if (len)
                memcpy(resp, src, (size_t)len);
            resp[len] = '\0';
        } else {
            len = 0;
        }
    }
    pthread_mutex_lock(&mu);
    gc->status = status;
    gc->resp = resp;
    gc->resp_len = len;
    gc->done = true;
    pthread_cond_signal(&gc->cv);
    pthread_mutex_unlock(&mu);
}

static void
forward_call(struct call *c)
{
    struct ipc_frame f;

    memset(&f, 0, sizeof f);
    if (c->is_log) {
        f.type = IPC_BODY_LOG;
        f.u.log.level = (enum ipc_log_level)c->level;
        f.u.log.message = ipc_str_c(c->text);
        send_frame(&f);
        free(c->text);
        free(c);
        return;
    }
    f.type = IPC_BODY_GATEWAY_CALL;
    f.u.gateway_call.service = ipc_str_c(c->text);
    f.u.gateway_call.method = ipc_str_c(c->method);
    f.u.gateway_call.request.ptr = c->req;
    f.u.gateway_call.request.len = (uint32_t)c->req_len;
    if (ipc_channel_call(ch, &f, NULL, 0, on_gateway_reply, c) < 0) {
        pthread_mutex_lock(&mu);
        c->status = 500;
        c->done = true;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&mu);
    }
}

static void
maybe_exit(void)
{
    if (shutting_down && inflight == 0) {
        (void)ipc_channel_flush(ch, 2000);
        exit(0);
    }
}

static void
on_done(evutil_socket_t fd, short what, void *arg)
{
    uint64_t n;
    struct job *jobs, *rev = NULL;
    struct call *cs, *crev = NULL;

    (void)what;
    (void)arg;
    (void)!read(fd, &n, sizeof n);
    pthread_mutex_lock(&mu);
    jobs = done_jobs;
    done_jobs = NULL;
    cs = calls;
    calls = NULL;
    pthread_mutex_unlock(&mu);
    /* Oldest first. */
    while (cs) {
        struct call *next = cs->next;
        cs->next = crev;
        crev = cs;
        cs = next;
    }
    while (crev) {
        struct call *next = crev->next;
        forward_call(crev);
        crev = next;
    }
    while (jobs) {
        struct job *next = jobs->next;
        jobs->next = rev;
        rev = jobs;
        jobs = next;
    }
    while (rev) {
        struct job *next = rev->next;
        answer(rev);
        rev = next;
    }
    maybe_exit();
}

/* ---- frames (loop thread) --------------------------------------------- */

static void
reply_loaded(uint64_t seq, const char *error)
{
    struct ipc_frame f;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_LOADED;
    f.reply_to = seq;
    f.u.loaded.ok = error == NULL;
    if (error) {
        f.u.loaded.error.type = ipc_str_c("load_error");
        f.u.loaded.error.message = ipc_str_c(error);
    }
    send_frame(&f);
}

static void
set_identity(const char *name, struct ipc_str v)
{
    char buf[512];

    snprintf(buf, sizeof buf, "%.*s", (int)v.len, v.ptr ? v.ptr : "");
    setenv(name, buf, 1);
}

/* Reads the package, opens its library; NULL, or the reason. */
static const char *
load(const struct ipc_load *l, const int *fds, unsigned nfds, char *err,
     size_t errlen)
{
    struct native_package pkg;
    uint8_t *zip;
    int fd, seals, need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
    char path[64];

    if (l->code_fd < 0 || (unsigned)l->code_fd >= nfds)
        return "the Load carries no code";
    fd = fds[l->code_fd];
    seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & need) != need)
        return "the code memfd is not sealed";
    if (l->code_len > NATIVE_PACKAGE_MAX) {
        snprintf(err, errlen, "the package has %llu bytes, over %u",
                 (unsigned long long)l->code_len, NATIVE_PACKAGE_MAX);
        return err;
    }
    zip = malloc(l->code_len ? l->code_len : 1);
    if (zip == NULL)
        return "out of memory";
    if (pread(fd, zip, l->code_len, 0) != (ssize_t)l->code_len) {
        free(zip);
        return "the code memfd is shorter than Load.code_len";
    }
    int rc = native_package_open(zip, l->code_len, native_rid(),
                                 NATIVE_OS_LINUX, &pkg, err, errlen);
    free(zip);
    if (rc != 0)
        return err;

    /* The library in a memfd of its own, opened by its /proc path. */
    char name[NATIVE_LIBRARY_MAX + 16];
    snprintf(name, sizeof name, "lib%s.so", pkg.manifest.library);
    int lfd = memfd_create(name, MFD_CLOEXEC);
    size_t off = 0;
    while (lfd >= 0 && off < pkg.library_len) {
        ssize_t n = write(lfd, pkg.library + off, pkg.library_len - off);
        if (n <= 0) {
            close(lfd);
            lfd = -1;
            break;
        }
        off += (size_t)n;
    }
    if (lfd < 0) {
        native_package_free(&pkg);
        snprintf(err, errlen, "cannot hold the library in memory: %s",
                 strerror(errno));
        return err;
    }
    set_identity("VIRTUFIN_WORKER_ID", l->identity.id);
    set_identity("VIRTUFIN_WORKER_GROUP", l->identity.group);
    set_identity("VIRTUFIN_WORKER_TOPIC", l->identity.topic);
    snprintf(path, sizeof path, "/proc/self/fd/%d", lfd);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(err, errlen, "%s cannot be loaded: %s", pkg.entry, dlerror());
        close(lfd);
        native_package_free(&pkg);
        return err;
    }
    void *p = dlsym(h, pkg.manifest.entry_point);
    void *fr = dlsym(h, pkg.manifest.free_result);
    if (p == NULL || fr == NULL) {
        snprintf(err, errlen, "%s does not export %s", pkg.entry,
                 p == NULL ? pkg.manifest.entry_point
                           : pkg.manifest.free_result);
        dlclose(h);
        close(lfd);
        native_package_free(&pkg);
        return err;
    }
    /* Nothing is in flight (the master holds events back during a
     * reload): the old library goes. */
    pthread_mutex_lock(&mu);
    void *old = lib;
    int old_fd = lib_fd;
    lib = h;
    lib_fd = lfd;
    memcpy(&process_fn, &p, sizeof p);
    memcpy(&free_fn, &fr, sizeof fr);
    pthread_mutex_unlock(&mu);
    if (old) {
        dlclose(old);
        close(old_fd);
    }
    pool_start(l->limits.present ? l->limits.concurrency : 1);
    host_log(IPC_LOG_INFO, "loaded %s (%s, abi %d) for worker %.*s version %u",
             pkg.entry, pkg.manifest.entry_point, pkg.manifest.abi_version,
             (int)l->worker_id.len, l->worker_id.ptr, (unsigned)l->version);
    native_package_free(&pkg);
    return NULL;
}

static void
on_process(const struct ipc_frame *f)
{
    const struct ipc_process *pr = &f->u.process;
    struct job *j = calloc(1, sizeof *j);

    if (j == NULL ||
        (j->in = malloc(pr->event.len ? pr->event.len : 1)) == NULL)
        die("malloc");
    /* malloc's alignment keeps the FlatBuffer 8-aligned. */
    memcpy(j->in, pr->event.ptr, pr->event.len);
    j->in_len = (int32_t)pr->event.len;
    j->seq = f->seq;
    inflight++;
    if (lib == NULL) {
        j->rc = -1;
        answer(j);
        return;
    }
    pthread_mutex_lock(&mu);
    *todo_tail = j;
    todo_tail = &j->next;
    if (idle > 0) /* a busy pool takes the job when it looks again */
        pthread_cond_signal(&work_cv);
    pthread_mutex_unlock(&mu);
}

static void
on_frame(struct ipc_channel *c, const struct ipc_frame *f, int *fds,
         unsigned nfds, void *arg)
{
    struct ipc_frame h;
    char err[1024];

    (void)c;
    (void)arg;
    switch (f->type) {
    case IPC_BODY_LOAD:
        reply_loaded(f->seq, load(&f->u.load, fds, nfds, err, sizeof err));
        break;
    case IPC_BODY_PROCESS:
        on_process(f);
        break;
    case IPC_BODY_HEARTBEAT:
        memset(&h, 0, sizeof h);
        h.type = IPC_BODY_HEARTBEAT;
        h.reply_to = f->seq;
        send_frame(&h);
        break;
    case IPC_BODY_SHUTDOWN:
        shutting_down = true;
        maybe_exit();
        break;
    default:
        fprintf(stderr, "wm-host-native[%d]: unexpected %s frame\n",
                (int)getpid(), ipc_body_name(f->type));
        exit(4);
    }
}

static void
on_close(struct ipc_channel *c, enum ipc_channel_status status,
         const char *reason, void *arg)
{
    (void)c;
    (void)arg;
    if (status == IPC_CHANNEL_EOF)
        _exit(0); /* the master is gone or done with us */
    fprintf(stderr, "wm-host-native[%d]: channel closed (%s): %s\n",
            (int)getpid(), ipc_channel_status_name(status), reason);
    _exit(1);
}

int
main(void)
{
    struct ipc_channel_config cfg = {
        .role = IPC_CHANNEL_HOST,
        .engine = "native",
        .max_inflight = HOST_MAX_INFLIGHT,
        .confinement = "none",
    };
    const struct ipc_channel_callbacks cb = {
        .on_frame = on_frame,
        .on_close = on_close,
    };

    if (fcntl(HOST_FD, F_GETFD) < 0)
        die("no channel on fd 3");
    signal(SIGPIPE, SIG_IGN);
    host_api.engine_ptr = &host_api;
    host_api.abi_version = VIRTUFIN_ABI_VERSION;
    host_api.log = api_log;
    host_api.gateway_call = api_gateway_call;
    host_api.free_response = api_free_response;
    efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    base = event_base_new();
    if (efd < 0 || base == NULL)
        die("start");
    ev_done = event_new(base, efd, EV_READ | EV_PERSIST, on_done, NULL);
    if (ev_done == NULL || event_add(ev_done, NULL) < 0)
        die("event_new");
    ch = ipc_channel_new(base, HOST_FD, &cfg, &cb, NULL);
    if (ch == NULL)
        die("ipc_channel_new");
    if (event_base_dispatch(base) < 0)
        die("event_base_dispatch");
    return 0;
}
