/*
 * inproc_path.c — the in-process path of native workers (DESIGN §4), as
 * the supervisor runs it over inproc.c.  A worker created with
 * "isolation": "in-process" gets no serving host process: a validator
 * (a wm-host-native, confined as any host) loads each version, checks it
 * and hands the library back as a sealed memfd, which the master opens
 * (inproc_open()) and calls on the library's own threads until the worker
 * is stopped, deleted or reloaded, or the daemon stops.
 *
 * A new version waits until nothing is in flight; events wait in the
 * queue while its validator runs, then the old library closes and the new
 * one opens.  A call that overruns its deadline cannot be stopped: its
 * event fails with timeout, hooks->stuck hears of it, and its outcome is
 * dropped when it comes.  The worker's pid is the daemon's while a library
 * is open.
 */
#include "config.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include <event2/event.h>

#include "master/core/conf.h"
#include "master/core/log.h"
#include "master/supervise/inproc.h"
#include "master/supervise/supervise_internal.h"

static void
ip_on_result(void *ctx, const struct ipc_result *r, const char *type,
             const char *msg, void *arg)
{
    struct sv_event *ev = ctx;
    struct host *h = ev->h;

    (void)arg;
    sv_host_hold(h);
    TAILQ_REMOVE(&h->inflight, ev, link);
    h->ninflight--;
    evtimer_del(ev->deadline);
    ev->job = NULL; /* done: the loader frees it after this returns */
    sv_event_complete(h, ev, r, type, msg);
    sv_host_kick(h);
    sv_host_release(h);
}

static void
ip_on_log(int32_t level, const char *msg, void *arg)
{
    static const int levels[] = { LOG_DEBUG, LOG_DEBUG, LOG_INFO, LOG_WARNING,
                                  LOG_ERR };
    struct host *h = arg;

    log_host(levels[level < 0   ? 0
                    : level > 4 ? 4
                                : level],
             h->w->id, msg, strlen(msg));
}

static void
ip_on_call(struct native_call *nc, void *arg)
{
    struct host *h = arg;
    struct supervisor *sv = h->sv;
    struct supervise_call *c = calloc(1, sizeof *c);
    struct ipc_gateway_call call = {
        .service = ipc_str_c(nc->text),
        .method = ipc_str_c(nc->method),
        .request = { .ptr = nc->req, .len = (uint32_t)nc->req_len },
    };

    if (c == NULL) {
        native_call_reply(nc, 500, (const uint8_t *)"out of memory", 13);
        return;
    }
    c->nc = nc;
    LIST_INSERT_HEAD(&h->ip_calls, c, link);
    if (sv->hooks.gateway)
        sv->hooks.gateway(h->w, &call, c, sv->arg);
    else
        supervise_call_reply(c, 501, NULL, 0,
                             "no gateway services in this daemon");
}

void
sv_ip_close(struct host *h)
{
    struct supervise_call *c;

    if (h->ip == NULL)
        return;
    while ((c = LIST_FIRST(&h->ip_calls)) != NULL) {
        LIST_REMOVE(c, link);
        native_call_reply(
            c->nc, 503, (const uint8_t *)"the worker's library is closing", 31);
        c->nc = NULL;
        c->p = NULL; /* its answer, if any, only frees it */
    }
    inproc_close(h->ip);
    h->ip = NULL;
    h->sv->ninproc--;
    h->w->pid = 0;
    log_info("worker %s: in-process library of version %u closed", h->w->id,
             h->ip_version);
}

/* A NUL-terminated copy of a name from the validator's Loaded: a C symbol
 * or library name of at most 128 bytes, else NULL. */
static const char *
ip_name(struct ipc_str v, char *buf, size_t len)
{
    if (v.ptr == NULL || v.len == 0 || v.len >= len || v.len > 128 ||
        memchr(v.ptr, '\0', v.len) != NULL)
        return NULL;
    memcpy(buf, v.ptr, v.len);
    buf[v.len] = '\0';
    return buf;
}

void
sv_ip_loaded(struct proc *p, const struct ipc_loaded *l, int *fds,
             unsigned nfds)
{
    struct host *h = p->h;
    struct supervisor *sv = p->sv;
    struct worker *w = h->w;
    const struct inproc_hooks hooks = {
        .result = ip_on_result,
        .log = ip_on_log,
        .call = ip_on_call,
    };
    const struct native_identity id = {
        .id = w->id,
        .group = w->group,
        .topic = w->topic,
    };
    const int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
    char lib[160], entry[160], freer[160], label[200], err[512];
    int fd, seals;
    bool reload = h->ip != NULL;

    if (l->library_fd < 0 || (unsigned)l->library_fd >= nfds ||
        ip_name(l->library, lib, sizeof lib) == NULL ||
        ip_name(l->entry_point, entry, sizeof entry) == NULL ||
        ip_name(l->free_result, freer, sizeof freer) == NULL) {
        sv_proc_kill(p, "protocol",
                     "answered an in-process Load without a library and its "
                     "names");
        return;
    }
    fd = fds[l->library_fd];
    seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & need) != need) {
        sv_proc_kill(p, "protocol", "handed back a library that is not sealed");
        return;
    }
    fds[l->library_fd] = -1; /* ours from here on */
    /* Nothing is in flight (ip_prepare() starts a validator only then):
     * the old library goes first, so that its identity variables are
     * restored before the new ones are set. */
    sv_ip_close(h);
    snprintf(label, sizeof label, "lib%s.so", lib);
    h->ip = inproc_open(sv->base, fd, label, entry, freer, &id,
                        w->limits.concurrency ? w->limits.concurrency : 1,
                        &hooks, h, err, sizeof err);
    if (h->ip == NULL) {
        log_info("worker %s: version %u failed to load in the daemon: %s",
                 w->id, p->code_version, err);
        sv_host_finish_loads(h, "load_error", err);
        if (h->forgotten || p->stop != STOP_NONE)
            return;
        if (!reload)
            sv_host_set_failed(h, "load_error", err);
        sv_proc_shutdown(p, reload ? STOP_IDLE : STOP_FAILED,
                         sv->conf->shutdown_grace_ms);
        sv_host_kick(h);
        return;
    }
    sv->ninproc++;
    h->ip_version = p->code_version;
    w->pid = getpid();
    log_info("worker %s: version %u loaded in the daemon (in-process, %s, "
             "%u threads)",
             w->id, h->ip_version, label,
             w->limits.concurrency ? w->limits.concurrency : 1);
    sv_state_set(sv, w,
                 w->status == WORKER_SUSPENDED ? WORKER_STATE_SUSPENDED
                                               : WORKER_STATE_RUNNING);
    if (h->ip_version == w->version)
        sv_host_finish_loads(h, NULL, NULL);
    if (!h->forgotten && p->h == h && p->stop == STOP_NONE)
        sv_proc_shutdown(p, STOP_VALIDATED, sv->conf->shutdown_grace_ms);
    sv_host_kick(h);
}

/* ---- the in-process path's operations (sv_ops_inproc) ---------------- */

/* The path disabled on this daemon fails the worker; the daemon's
 * shutdown or the worker's stop fails what waits and closes the library
 * once its calls are answered. */
static bool
ip_closing(struct host *h)
{
    struct supervisor *sv = h->sv;
    struct worker *w = h->w;
    bool closing = sv->shutting_down || w->status == WORKER_STOPPED;

    if (!sv->conf->allow_in_process_native) {
        sv_host_fail(h, "engine_unavailable",
                     "isolation in-process is disabled on this daemon "
                     "(allow_in_process_native = false)");
        return true;
    }
    if (!closing)
        return false;
    const char *why = sv->shutting_down ? "the daemon is shutting down"
                                        : "the worker was stopped";
    sv_host_hold(h);
    sv_host_finish_loads(h, "stopped", why);
    if (!h->forgotten)
        sv_event_fail_queued(h, "stopped", why);
    if (!h->forgotten && h->ninflight == 0 && h->ip) {
        sv_ip_close(h);
        sv_state_set(sv, w, WORKER_STATE_STOPPED);
        sv_host_finish_gones(h);
    }
    sv_host_release(h);
    sv_shutdown_check(sv);
    return true;
}

/* A validator host checks the code of each version, once nothing is in
 * flight; events wait meanwhile. */
static bool
ip_prepare(struct host *h)
{
    if (h->nprocs || evtimer_pending(h->backoff, NULL))
        return false; /* a validator runs, or the backoff starts one */
    if (h->ip == NULL || h->ip_version != h->w->version) {
        if (h->ninflight == 0 && (h->loads || !TAILQ_EMPTY(&h->queue)))
            sv_proc_start(h);
        return false;
    }
    return true;
}

static bool
ip_current(const struct host *h)
{
    return h->ip && h->ip_version == h->w->version;
}

/* Hands the first queued event to the library's pool. */
static int
ip_deliver(struct host *h)
{
    struct sv_event *ev = TAILQ_FIRST(&h->queue);

    if (h->ninflight >= MAX_INFLIGHT_CAP || h->ip == NULL)
        return -1;
    TAILQ_REMOVE(&h->queue, ev, link);
    ev->deadline_ms = sv_deadline_ms(h->sv, h->w);
    ev->job = inproc_submit(h->ip, ev->buf, ev->len, ev);
    if (ev->job == NULL) {
        sv_event_complete(h, ev, NULL, "worker_error", "out of memory");
        return 0;
    }
    ev->delivered = true; /* the library has it: this attempt counts */
    TAILQ_INSERT_TAIL(&h->inflight, ev, link);
    h->ninflight++;
    sv_timer_ms(ev->deadline, ev->deadline_ms);
    return 0;
}

/* What was handed out goes to the pool's threads at once. */
static void
ip_settle(struct host *h)
{
    if (h->ip)
        inproc_flush(h->ip);
}

/* Nothing can stop the call; its outcome is dropped when it comes, the
 * other calls go on. */
static void
ip_overrun(struct host *h, struct sv_event *ev, struct proc *p)
{
    char msg[128];

    (void)p;
    snprintf(msg, sizeof msg,
             "no answer within the %" PRIu32 " ms deadline; the "
             "in-process call cannot be stopped and goes on in its thread",
             ev->deadline_ms);
    log_warning("worker %s: %s", h->w->id, msg);
    if (h->sv->hooks.stuck)
        h->sv->hooks.stuck(h->w, msg, h->sv->arg);
    sv_event_complete(h, ev, NULL, "timeout", msg);
    sv_host_kick(h);
}

/* The library closes once its calls are answered (ip_closing()); a
 * validator still running is just killed.  With no library open, its
 * validator is a host process as any other. */
static bool
ip_stop(struct host *h, void (*done)(struct worker *w, void *arg), void *arg)
{
    struct proc *p = TAILQ_FIRST(&h->procs);
    bool kept;

    if (h->ip == NULL)
        return sv_ops_procs.stop(h, done, arg);
    if (p)
        sv_proc_kill(p, "stopped", "the worker was stopped");
    kept = sv_host_wait_gone(h, done, arg);
    sv_host_kick(h);
    return kept;
}

const struct sv_host_ops sv_ops_inproc = {
    .closing = ip_closing,
    .prepare = ip_prepare,
    .current = ip_current,
    .deliver = ip_deliver,
    .settle = ip_settle,
    .overrun = ip_overrun,
    .stop = ip_stop,
};
