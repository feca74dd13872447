/*
 * host.c — wm-host-native: the engine host of native workers (DESIGN §3,
 * §4; issue 6).  One host process serves one worker.
 *
 * The loop thread owns the channel (fd 3, ipc/channel.h): it answers the
 * handshake, Loads, Heartbeats and Shutdown, hands each Process to the
 * library's pool of `concurrency` threads (loader.h) and turns their
 * results into Result frames; the worker's log lines and gateway calls
 * come back from the pool the same way and go out as frames, since the
 * channel is not thread-safe.
 *
 * Load: the package arrives as a sealed memfd; package.c validates it (in
 * this process: the master parses no package format) and extracts the
 * library, which is written to a memfd of its own and opened through
 * /proc/self/fd/N (no temporary file).  A reload arrives only when nothing
 * is in flight (the master holds events back meanwhile), so the old
 * library is closed and the new one opened in its place.  A Load with
 * in_process (the master's opt-in in-process path) validates the package
 * the same way but runs nothing: the Loaded hands the library's memfd,
 * sealed, back with the manifest's names.
 *
 * Confinement (sandbox/role_native.c): before anything of the worker's
 * runs, main() takes the native role's steps (no_new_privs, MDWE, the
 * stage-1 seccomp filter on every thread), starts the opener thread and
 * then loads the stricter stage-2 filter on the loop thread alone, so
 * that the pool threads it creates later inherit both.  The opener keeps
 * stage 1 only: it is where libraries are opened (dlopen needs openat of
 * /proc/self/fd/N and executable mappings), first and reloaded, while the
 * loop thread waits for it; it runs nothing else.  Hello reports the
 * level applied ("seccomp"; "none" when built --without-sandbox, on a
 * kernel without seccomp, or in log mode, which kills nothing).
 *
 * Results: Process's WorkerResponse is verified before use; its
 * result_event becomes the Result's output, its error_message a
 * worker_error; a non-zero return or an unreadable output is a
 * worker_error too.  FreeResult runs exactly once for every non-NULL
 * output, after the Result is encoded.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <event2/event.h>

#include "hosts/native/loader.h"
#include "hosts/native/package.h"
#include "ipc/channel.h"
#include "ipc/cloudevent.h"
#include "sandbox/sandbox.h"
#include "sandbox/zygote.h"

#define HOST_FD 3
/* Events the master may hand us at once; the pool takes them in turn. */
#define HOST_MAX_INFLIGHT 256

static struct event_base *base;
static struct ipc_channel *ch;
static struct native_loader *loader;
static unsigned inflight; /* jobs handed to the pool, not answered */
/* Jobs of the frames read in this loop turn, handed to the pool at once
 * by on_flush (one lock and wake-up per batch). */
static struct native_job *pending, **pending_tail = &pending;
static struct event *ev_flush;
static bool shutting_down;

/* A library to open on the opener thread (open_library). */
struct open_call {
    int lfd;
    const char *label, *entry, *free_result;
    const struct native_identity *ident;
    char *err;
    size_t errlen;
    int rc;
};

static pthread_mutex_t opener_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t opener_cv = PTHREAD_COND_INITIALIZER;
static struct open_call *opener_call; /* under opener_mu */
static bool opener_done;              /* under opener_mu */

static void die(const char *what) __attribute__((noreturn));

static void
die(const char *what)
{
    fprintf(stderr, "wm-host-native[%d]: %s: %s\n", (int)getpid(), what,
            strerror(errno));
    exit(1);
}

static void
send_frame(const struct ipc_frame *f, const int *fds, unsigned nfds)
{
    if (ipc_channel_send(ch, f, fds, nfds) < 0 && errno != EAGAIN)
        die("send");
}

/* A log line of the host itself. */
#define host_log(level, ...)                                                   \
    do {                                                                       \
        if (ipc_channel_log(ch, level, __VA_ARGS__) < 0 && errno != EAGAIN)    \
            die("send a Log");                                                 \
    } while (0)

/* ---- the opener thread ------------------------------------------------ */

/* Opens each library asked for, under the stage-1 filter only. */
static void *
opener_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&opener_mu);
    for (;;) {
        while (opener_call == NULL || opener_done)
            pthread_cond_wait(&opener_cv, &opener_mu);
        struct open_call *c = opener_call;
        pthread_mutex_unlock(&opener_mu);
        c->rc = native_loader_open(loader, c->lfd, c->label, c->entry,
                                   c->free_result, c->ident, c->err, c->errlen);
        pthread_mutex_lock(&opener_mu);
        opener_done = true;
        pthread_cond_broadcast(&opener_cv);
    }
    return NULL;
}

/* Asynchronous signals stay with the loop thread (as in the pool). */
static void
opener_start(void)
{
    static const int own[] = { SIGSEGV, SIGBUS,  SIGFPE, SIGILL,
                               SIGABRT, SIGTRAP, SIGSYS };
    sigset_t all, old;
    pthread_t t;
    int rc;

    sigfillset(&all);
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        sigdelset(&all, own[i]);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(&t, NULL, opener_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errno = rc;
        die("pthread_create (the opener)");
    }
}

/* native_loader_open() on the opener thread; the caller waits (it is the
 * loader's owner meanwhile, see loader.h). */
static int
open_library(struct open_call *c)
{
    pthread_mutex_lock(&opener_mu);
    opener_call = c;
    opener_done = false;
    pthread_cond_broadcast(&opener_cv);
    while (!opener_done)
        pthread_cond_wait(&opener_cv, &opener_mu);
    opener_call = NULL;
    pthread_mutex_unlock(&opener_mu);
    return c->rc;
}

/* ---- results and worker calls (loop thread) --------------------------- */

static void
answer(struct native_job *j)
{
    struct ipc_frame f;
    struct ipc_worker_response wr;
    char msg[4096];
    const char *type = native_job_outcome(j, &wr, msg, sizeof msg);

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_RESULT;
    f.reply_to = j->seq;
    if (wr.has_result) {
        f.u.result.outputs.n = 1;
        f.u.result.outputs.items = &wr.result_event;
    }
    if (type) {
        f.u.result.error.type = ipc_str_c(type);
        f.u.result.error.message = ipc_str_c(msg);
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
        send_frame(&e, NULL, 0);
    }
    /* After the Result is encoded: FreeResult exactly once. */
    native_job_free(j);
    inflight--;
}

static void
on_gateway_reply(struct ipc_channel *c, const struct ipc_frame *reply, int *fds,
                 unsigned nfds, const char *error, void *arg)
{
    struct native_call *gc = arg;

    (void)c;
    (void)fds;
    (void)nfds;
    if (error == NULL && reply->type == IPC_BODY_GATEWAY_REPLY) {
        const struct ipc_gateway_reply *g = &reply->u.gateway_reply;
        if (g->status == 200)
            native_call_reply(gc, 200, g->response.ptr, g->response.len);
        else
            native_call_reply(gc, g->status, (const uint8_t *)g->error.ptr,
                              g->error.len);
    } else {
        native_call_reply(gc, 500, NULL, 0);
    }
}

static void
forward_call(struct native_call *c)
{
    struct ipc_frame f;

    memset(&f, 0, sizeof f);
    if (c->is_log) {
        f.type = IPC_BODY_LOG;
        f.u.log.level = (enum ipc_log_level)c->level;
        f.u.log.message = ipc_str_c(c->text);
        send_frame(&f, NULL, 0);
        native_call_reply(c, 0, NULL, 0);
        return;
    }
    f.type = IPC_BODY_GATEWAY_CALL;
    f.u.gateway_call.service = ipc_str_c(c->text);
    f.u.gateway_call.method = ipc_str_c(c->method);
    f.u.gateway_call.request.ptr = c->req;
    f.u.gateway_call.request.len = (uint32_t)c->req_len;
    if (ipc_channel_call(ch, &f, NULL, 0, on_gateway_reply, c) < 0)
        native_call_reply(c, 500, NULL, 0);
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
on_pool(evutil_socket_t fd, short what, void *arg)
{
    struct native_job *jobs;
    struct native_call *calls;

    (void)fd;
    (void)what;
    (void)arg;
    native_loader_take(loader, &jobs, &calls);
    while (calls) {
        struct native_call *next = calls->next;
        forward_call(calls);
        calls = next;
    }
    while (jobs) {
        struct native_job *next = jobs->next;
        answer(jobs);
        jobs = next;
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
    send_frame(&f, NULL, 0);
}

/* The in-process answer: the validated library, sealed, and its names
 * (the channel takes lfd). */
static void
reply_library(uint64_t seq, const struct native_package *pkg, int lfd)
{
    struct ipc_frame f;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_LOADED;
    f.reply_to = seq;
    f.u.loaded.ok = true;
    f.u.loaded.library_fd = 0;
    f.u.loaded.library = ipc_str_c(pkg->manifest.library);
    f.u.loaded.entry_point = ipc_str_c(pkg->manifest.entry_point);
    f.u.loaded.free_result = ipc_str_c(pkg->manifest.free_result);
    send_frame(&f, &lfd, 1);
}

/* A NUL-terminated copy of v in buf. */
static const char *
cstr(struct ipc_str v, char *buf, size_t len)
{
    snprintf(buf, len, "%.*s", (int)v.len, v.ptr ? v.ptr : "");
    return buf;
}

/* Reads and validates the package of l into *pkg.  NULL, or the reason. */
static const char *
read_package(const struct ipc_load *l, const int *fds, unsigned nfds,
             struct native_package *pkg, char *err, size_t errlen)
{
    uint8_t *zip;
    int fd, seals, need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;

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
                                 NATIVE_OS_LINUX, pkg, err, errlen);
    free(zip);
    return rc == 0 ? NULL : err;
}

/* The library of pkg in a memfd of its own (sealed when `seal`), or -1. */
static int
library_memfd(const struct native_package *pkg, bool seal)
{
    char name[NATIVE_LIBRARY_MAX + 16];
    size_t off = 0;
    int fd;

    snprintf(name, sizeof name, "lib%s.so", pkg->manifest.library);
    fd = memfd_create(name, MFD_CLOEXEC | (seal ? MFD_ALLOW_SEALING : 0));
    while (fd >= 0 && off < pkg->library_len) {
        ssize_t n = write(fd, pkg->library + off, pkg->library_len - off);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)n;
    }
    if (fd >= 0 && seal &&
        fcntl(fd, F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Validates the package and, for the in-process path, answers with its
 * library, or opens it here.  NULL once answered, or the reason. */
static const char *
load(uint64_t seq, const struct ipc_load *l, const int *fds, unsigned nfds,
     char *err, size_t errlen)
{
    struct native_package pkg;
    const char *why = read_package(l, fds, nfds, &pkg, err, errlen);
    char id[256], group[256], topic[256];

    if (why)
        return why;
    int lfd = library_memfd(&pkg, l->in_process);
    if (lfd < 0) {
        native_package_free(&pkg);
        snprintf(err, errlen, "cannot hold the library in memory: %s",
                 strerror(errno));
        return err;
    }
    if (l->in_process) {
        reply_library(seq, &pkg, lfd); /* the channel takes lfd */
        host_log(IPC_LOG_INFO,
                 "validated %s (%s, abi %d) for worker %.*s "
                 "version %u: handed to the master",
                 pkg.entry, pkg.manifest.entry_point, pkg.manifest.abi_version,
                 (int)l->worker_id.len, l->worker_id.ptr, (unsigned)l->version);
        native_package_free(&pkg);
        return NULL;
    }
    const struct native_identity ident = {
        .id = cstr(l->identity.id, id, sizeof id),
        .group = cstr(l->identity.group, group, sizeof group),
        .topic = cstr(l->identity.topic, topic, sizeof topic),
    };
    struct open_call oc = {
        .lfd = lfd,
        .label = pkg.entry,
        .entry = pkg.manifest.entry_point,
        .free_result = pkg.manifest.free_result,
        .ident = &ident,
        .err = err,
        .errlen = errlen,
    };
    if (open_library(&oc) != 0) {
        native_package_free(&pkg);
        return err;
    }
    if (native_loader_threads(loader, l->limits.present ? l->limits.concurrency
                                                        : 1) != 0)
        die("pthread_create");
    host_log(IPC_LOG_INFO, "loaded %s (%s, abi %d) for worker %.*s version %u",
             pkg.entry, pkg.manifest.entry_point, pkg.manifest.abi_version,
             (int)l->worker_id.len, l->worker_id.ptr, (unsigned)l->version);
    native_package_free(&pkg);
    reply_loaded(seq, NULL);
    return NULL;
}

static void
on_process(const struct ipc_frame *f)
{
    const struct ipc_process *pr = &f->u.process;
    struct native_job *j = native_job_new(pr->event.ptr, pr->event.len);

    if (j == NULL)
        die("malloc");
    j->seq = f->seq;
    inflight++;
    if (!native_loader_ready(loader)) {
        j->rc = -1;
        answer(j);
        return;
    }
    if (pending == NULL)
        event_active(ev_flush, EV_TIMEOUT, 1);
    *pending_tail = j;
    pending_tail = &j->next;
}

static void
on_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    native_loader_submit(loader, pending);
    pending = NULL;
    pending_tail = &pending;
}

static void
on_frame(struct ipc_channel *c, const struct ipc_frame *f, int *fds,
         unsigned nfds, void *arg)
{
    struct ipc_frame h;
    char err[1024];
    const char *why;

    (void)c;
    (void)arg;
    switch (f->type) {
    case IPC_BODY_LOAD:
        why = load(f->seq, &f->u.load, fds, nfds, err, sizeof err);
        if (why)
            reply_loaded(f->seq, why);
        break;
    case IPC_BODY_PROCESS:
        on_process(f);
        break;
    case IPC_BODY_HEARTBEAT:
        memset(&h, 0, sizeof h);
        h.type = IPC_BODY_HEARTBEAT;
        h.reply_to = f->seq;
        send_frame(&h, NULL, 0);
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

/*
 * The native role's confinement (see the top): stage 1 on every thread,
 * the opener started under it, stage 2 on this thread.  Returns the
 * confinement for the Hello; *warn says why it is less than the role's
 * (or that a debug mode is on), or is empty.
 */
static const char *
confine(char *warn, size_t len)
{
    warn[0] = '\0';
#ifdef WM_SANDBOX
    const char *debug = getenv(SANDBOX_DEBUG_ENV);
    enum sandbox_mode mode = sandbox_mode_parse(debug);
    const struct sandbox_role *role = &sandbox_role_native;
    char err[256] = "";
    int level = sandbox_role_enter(role, mode, err, sizeof err);

    if (level < 0) {
        fprintf(stderr, "wm-host-native[%d]: confinement: %s\n", (int)getpid(),
                err);
        exit(1);
    }
    opener_start();
    if (level == SANDBOX_LEVEL_NONE) {
        snprintf(warn, len, "running unconfined: %s", err);
        return "none";
    }
    if (sandbox_filter_load(role->strict, mode, false, err, sizeof err) < 0) {
        fprintf(stderr, "wm-host-native[%d]: confinement: %s\n", (int)getpid(),
                err);
        exit(1);
    }
    if (mode != SANDBOX_MODE_ENFORCE) {
        snprintf(warn, len, "seccomp in %s mode (%s=%s): %s",
                 sandbox_mode_name(mode), SANDBOX_DEBUG_ENV, debug,
                 mode == SANDBOX_MODE_LOG
                     ? "nothing is killed, the kernel's audit log names "
                       "what would be"
                     : "a refused call is named on stderr");
        if (mode == SANDBOX_MODE_LOG)
            return "none";
    }
    return sandbox_level_name(sandbox_spawned_level((enum sandbox_level)level));
#else
    (void)len;
    opener_start();
    return "none";
#endif
}

int
main(int argc, char **argv)
{
    struct ipc_channel_config cfg = {
        .role = IPC_CHANNEL_HOST,
        .engine = "native",
        .max_inflight = HOST_MAX_INFLIGHT,
    };
    const struct ipc_channel_callbacks cb = {
        .on_frame = on_frame,
        .on_close = on_close,
    };
    struct event *ev;
    char warn[512];

    if (fcntl(HOST_FD, F_GETFD) < 0)
        die("no channel on fd 3");
    /* A zygote of native hosts (`spawn = zygote`, sandbox/zygote.h): it
     * has nothing of a worker's to make ready, but its hosts skip the
     * exec, the dynamic linking and the relocations.  Each returns from
     * here, forked and confined by the spawner's steps, and goes on as
     * an exec'd host does. */
    if (argc == 2 && strcmp(argv[1], SANDBOX_ZYGOTE_ARG) == 0) {
        const struct sandbox_zygote_ops ops = { .role = &sandbox_role_native };
        if (sandbox_zygote_serve(&ops) != 0)
            return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    loader = native_loader_new();
    base = event_base_new();
    if (loader == NULL || base == NULL)
        die("start");
    ev = event_new(base, native_loader_fd(loader), EV_READ | EV_PERSIST,
                   on_pool, NULL);
    ev_flush = event_new(base, -1, 0, on_flush, NULL);
    if (ev == NULL || ev_flush == NULL || event_add(ev, NULL) < 0)
        die("event_new");
    cfg.confinement = confine(warn, sizeof warn);
    ch = ipc_channel_new(base, HOST_FD, &cfg, &cb, NULL);
    if (ch == NULL)
        die("ipc_channel_new");
    if (warn[0])
        host_log(IPC_LOG_WARN, "%s", warn);
    if (event_base_dispatch(base) < 0)
        die("event_base_dispatch");
    return 0;
}
