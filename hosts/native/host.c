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
 * runs, the skeleton (hosts/common/host.h, host_confine()) takes the
 * native role's steps (no_new_privs, MDWE, the stage-1 seccomp filter on
 * every thread), this host starts the opener thread (native_ops.confined)
 * and then the stricter stage-2 filter goes on the loop thread alone, so
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

#include "hosts/common/host.h"
#include "hosts/native/loader.h"
#include "hosts/native/package.h"
#include "ipc/channel.h"
#include "ipc/cloudevent.h"
#include "lib/thread.h"
#include "sandbox/sandbox.h"
#include "sandbox/zygote.h"

/* Events the master may hand us at once; the pool takes them in turn. */
#define HOST_MAX_INFLIGHT 256

static struct native_loader *loader;
static unsigned inflight; /* jobs handed to the pool, not answered */
/* Jobs of the frames read in this loop turn, handed to the pool at once
 * by on_flush (one lock and wake-up per batch). */
static struct native_job *pending, **pending_tail = &pending;
static struct event *ev_flush;

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
    pthread_t t;
    int rc = thread_start_quiet(&t, opener_main, NULL, true);

    if (rc != 0) {
        errno = rc;
        host_die("pthread_create (the opener)");
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
    struct ipc_result r;
    struct ipc_worker_response wr;
    char msg[4096];

    (void)native_job_result(j, &r, &wr, msg, sizeof msg);
    host_result_send(j->seq, &r);
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

    if (c->is_log) {
        host_log_send((enum ipc_log_level)c->level, c->text, strlen(c->text));
        native_call_reply(c, 0, NULL, 0);
        return;
    }
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_GATEWAY_CALL;
    f.u.gateway_call.service = ipc_str_c(c->text);
    f.u.gateway_call.method = ipc_str_c(c->method);
    f.u.gateway_call.request.ptr = c->req;
    f.u.gateway_call.request.len = (uint32_t)c->req_len;
    if (ipc_channel_call(host_channel(), &f, NULL, 0, on_gateway_reply, c) < 0)
        native_call_reply(c, 500, NULL, 0);
}

/* Every event handed to the pool is answered (native_ops.idle). */
static bool
idle(void)
{
    return inflight == 0;
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
    host_exit_if_done();
}

/* ---- frames (loop thread) --------------------------------------------- */

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
    if (host_frame_send(&f, &lfd, 1) < 0)
        host_die("send a Loaded");
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
    size_t len;
    uint8_t *zip = host_code_read(l, fds, nfds, NATIVE_PACKAGE_MAX, "package",
                                  &len, err, errlen);

    if (zip == NULL)
        return err;
    int rc = native_package_open(zip, len, native_rid(), NATIVE_OS_LINUX, pkg,
                                 err, errlen);
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
        host_die("pthread_create");
    host_log(IPC_LOG_INFO, "loaded %s (%s, abi %d) for worker %.*s version %u",
             pkg.entry, pkg.manifest.entry_point, pkg.manifest.abi_version,
             (int)l->worker_id.len, l->worker_id.ptr, (unsigned)l->version);
    native_package_free(&pkg);
    host_loaded_reply(seq, NULL);
    return NULL;
}

static void
on_process(const struct ipc_frame *f)
{
    const struct ipc_process *pr = &f->u.process;
    struct native_job *j = native_job_new(pr->event.ptr, pr->event.len);

    if (j == NULL)
        host_die("malloc");
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

/* A Load: validated, then opened here or handed back (see the top). */
static void
on_load(const struct ipc_frame *f, int *fds, unsigned nfds)
{
    char err[1024];
    const char *why = load(f->seq, &f->u.load, fds, nfds, err, sizeof err);

    if (why)
        host_loaded_reply(f->seq, why);
}

static void
prepare(struct event_base *base)
{
    struct event *ev;

    if ((loader = native_loader_new()) == NULL)
        host_die("start");
    ev = event_new(base, native_loader_fd(loader), EV_READ | EV_PERSIST,
                   on_pool, NULL);
    ev_flush = event_new(base, -1, 0, on_flush, NULL);
    if (ev == NULL || ev_flush == NULL || event_add(ev, NULL) < 0)
        host_die("event_new");
}

static const struct host_ops native_ops = {
    .name = "wm-host-native",
    .engine = "native",
    .max_inflight = HOST_MAX_INFLIGHT,
    .confine = host_confine,
    .role = &sandbox_role_native,
    .confined = opener_start,
    .prepare = prepare,
    .load = on_load,
    .process = on_process,
    .idle = idle,
};

int
main(int argc, char **argv)
{
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
    host_run(&native_ops);
}
