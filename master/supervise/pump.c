/*
 * pump.c — the pump (what to do next for a worker's host), the worker's
 * events (queued, completed, failed, requeued, overrun) and the
 * host-process path's operations (sv_ops_procs: events delivered as
 * Process calls to the worker's host processes); the in-process path's
 * are in inproc_path.c (struct sv_host_ops, supervise_internal.h).
 *
 * Events: queued per worker, sent as Process calls up to each proc's
 * max_inflight (its Hello), each with a deadline timer.  A host whose
 * Hello has a prefetch takes that many more once no proc is starting and
 * while its last event ran under PREFETCH_FAST_US (1 ms) (a process of
 * a `concurrency = processes` engine runs one event at a time: what else
 * its Hello's max_inflight takes counts as its prefetch): it queues them
 * and runs them in order as its running ones end, so the deadline of such
 * a waiting event starts when an earlier one's Result comes
 * (start_waiting()).  A deadline kills the proc (timeout): that event
 * fails with "timeout", the proc's other in-flight events go back to the
 * front of the queue, in order, for the next host.  Any other death fails
 * the proc's running events with the exit's reason; those it had not
 * started go back to the queue.
 *
 * The pump runs on the loop turn after anything changed (sv_host_kick()),
 * through h->ops.  For host processes it reloads those that run an old
 * version (load.c), answers the Load waiters, hands out what is queued
 * (pick_proc()), starts one more proc while more events wait than the
 * starting ones will take (want_more()), prefetches, and arms the idle
 * and heartbeat timers of the procs left idle.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/event.h>

#include "ipc/channel.h"
#include "master/core/conf.h"
#include "master/core/log.h"
#include "master/supervise/inproc.h"
#include "master/supervise/supervise_internal.h"

/* A host gets events to queue only while its last event ran for less
 * than this: a queued event then waits at most prefetch times as long,
 * and a worker of slow events keeps them in the master's queue, where
 * whichever of its hosts is free first takes the next. */
#define PREFETCH_FAST_US 1000

static int64_t
now_us(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- the worker's events: queued, completed, failed, overrun ---------- */

static void
event_free_one(struct sv_event *ev)
{
    if (ev->job) /* an in-process call still running: its outcome goes */
        inproc_abandon(ev->job);
    if (ev->deadline)
        event_free(ev->deadline);
    free(ev);
}

void
sv_event_complete(struct host *h, struct sv_event *ev,
                  const struct ipc_result *r, const char *type, const char *msg)
{
    sv_host_hold(h);
    ev->cb(h->w, r, type, msg, ev->delivered, ev->arg);
    event_free_one(ev);
    sv_host_release(h);
}

void
sv_event_fail_queued(struct host *h, const char *type, const char *msg)
{
    struct sv_event *ev;

    while ((ev = TAILQ_FIRST(&h->queue)) != NULL) {
        TAILQ_REMOVE(&h->queue, ev, link);
        sv_event_complete(h, ev, NULL, type, msg);
    }
}

/* Takes ev out of h->inflight (and its process's count). */
static void
inflight_remove(struct host *h, struct sv_event *ev)
{
    TAILQ_REMOVE(&h->inflight, ev, link);
    h->ninflight--;
    if (ev->p)
        ev->p->ninflight--;
    ev->p = NULL;
    ev->waiting = false;
    ev->deadline_read = false;
    evtimer_del(ev->deadline);
}

/* After an event of p ended: the first it had prefetched starts, if it
 * runs fewer than its max_inflight now (a host with a prefetch runs them
 * in the order it got them), and its deadline with it. */
static void
start_waiting(struct host *h, struct proc *p)
{
    struct sv_event *ev, *first = NULL;
    unsigned running = 0;

    if (p->prefetch == 0)
        return;
    TAILQ_FOREACH (ev, &h->inflight, link) {
        if (ev->p != p)
            continue;
        if (!ev->waiting)
            running++;
        else if (first == NULL)
            first = ev;
    }
    if (first && running < p->max_inflight) {
        first->waiting = false;
        first->started_us = now_us();
        sv_timer_ms(first->deadline, first->deadline_ms);
    }
}

/* Puts the events in flight on p that match back at the front of the
 * queue, in their order, for the next host: all of them (its running
 * ones were not at fault), or only those it had not started.  Their
 * attempt on p does not count (supervise_event_cb). */
static void
requeue_inflight(struct host *h, const struct proc *p, bool waiting_only)
{
    struct sv_event *o, *prev;

    for (o = TAILQ_LAST(&h->inflight, sv_event_list); o; o = prev) {
        prev = TAILQ_PREV(o, sv_event_list, link);
        if (o->p != p || (waiting_only && !o->waiting))
            continue;
        inflight_remove(h, o);
        o->delivered = false;
        TAILQ_INSERT_HEAD(&h->queue, o, link);
    }
}

void
sv_event_requeue_inflight(struct host *h, struct proc *p)
{
    requeue_inflight(h, p, false);
}

void
sv_event_fail_inflight(struct host *h, struct proc *p, const char *type,
                       const char *msg)
{
    struct sv_event *ev;

    if (p)
        requeue_inflight(h, p, true);
    for (;;) {
        TAILQ_FOREACH (ev, &h->inflight, link)
            if (p == NULL || ev->p == p)
                break;
        if (ev == NULL)
            break;
        inflight_remove(h, ev);
        sv_event_complete(h, ev, NULL, type, msg);
    }
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct sv_event *ev = arg;
    struct host *h = ev->h;
    struct proc *p = ev->p;

    (void)fd;
    (void)what;
    /* A result already in the socket is read first: the master may be
     * the late one (not scheduled, or stopped, while it came).  The
     * deadline judges on the next turn if it is still in flight. */
    if (!ev->deadline_read && p != NULL && p->ch != NULL) {
        ev->deadline_read = true;
        ipc_channel_read_soon(p->ch);
        sv_timer_ms(ev->deadline, 0);
        return;
    }
    sv_host_hold(h);
    inflight_remove(h, ev);
    h->ops->overrun(h, ev, p);
    sv_host_release(h);
}

int
sv_event_queue(struct host *h, const uint8_t *event, size_t len,
               uint32_t delivery, supervise_event_cb cb, void *arg)
{
    struct sv_event *ev = calloc(1, sizeof *ev);

    if (ev == NULL)
        return -1;
    ev->h = h;
    ev->buf = event;
    ev->len = len;
    ev->deadline = evtimer_new(h->sv->base, on_deadline, ev);
    if (ev->deadline == NULL) {
        event_free_one(ev);
        return -1;
    }
    ev->delivery = delivery ? delivery : 1;
    ev->cb = cb;
    ev->arg = arg;
    TAILQ_INSERT_TAIL(&h->queue, ev, link);
    sv_host_kick(h);
    return 0;
}

/* ---- the pump: what to do next for a host ----------------------------- */

bool
sv_queue_ready(const struct host *h)
{
    const struct sv_event *ev = TAILQ_FIRST(&h->queue);

    /* A held delivery stops the queue: it keeps its order. */
    return ev != NULL && !(h->sv->hold_deliveries && ev->journaled);
}

void
sv_pump(struct host *h)
{
    const struct sv_host_ops *ops = h->ops;

    if (h->forgotten)
        return;
    if (h->failed) {
        sv_event_fail_queued(h, h->fail_type, h->fail_msg);
        return;
    }
    if (ops->closing(h) || !ops->prepare(h) || h->forgotten)
        return;
    if (h->loads && ops->current(h)) {
        sv_host_finish_loads(h, NULL, NULL);
        if (h->forgotten)
            return;
    }
    while (sv_queue_ready(h) && ops->deliver(h) == 0)
        if (h->forgotten)
            return;
    ops->settle(h);
}

/* ---- the host-process path (sv_ops_procs) ----------------------------- */

/* The error types a host may report in a Result; anything else is
 * reported as worker_error, so that a host cannot pass its failure off as
 * one of the master's (a crash, a lock contention...). */
static const char *
host_error_type(struct ipc_str t)
{
    static const char *const allowed[] = {
        "exception", "worker_error", "output_too_large", "timeout", "oom",
    };

    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (ipc_str_eq(t, allowed[i]))
            return allowed[i];
    return "worker_error";
}

static void
on_result(struct ipc_channel *ch, const struct ipc_frame *reply, int *fds,
          unsigned nfds, const char *error, void *arg)
{
    struct sv_event *ev = arg;
    struct host *h;
    const char *type = NULL;
    char msg[512];

    (void)ch;
    (void)fds;
    (void)nfds;
    if (error)
        return; /* the channel closed: see Re-entrancy, supervise_internal.h */
    h = ev->h;
    sv_host_hold(h);
    if (reply->type != IPC_BODY_RESULT) {
        /* ev stays in flight and fails with the others. */
        if (ev->p)
            sv_proc_kill(ev->p, "protocol", "answered a Process with %s",
                         ipc_body_name(reply->type));
        goto out;
    }
    struct proc *p = ev->p;
    if (p && !ev->waiting)
        p->last_run_us = now_us() - ev->started_us;
    inflight_remove(h, ev);
    if (p)
        start_waiting(h, p);
    const struct ipc_result *r = &reply->u.result;
    msg[0] = '\0';
    if (r->error.type.ptr) {
        type = host_error_type(r->error.type);
        if (r->error.message.ptr)
            snprintf(msg, sizeof msg, "%.*s", (int)r->error.message.len,
                     r->error.message.ptr);
    }
    sv_event_complete(h, ev, r, type, type ? msg : NULL);
    sv_host_kick(h);
out:
    sv_host_release(h);
}

/* Sends the first queued event.  Returns 0, or -1 when it stays queued
 * (the channel's queue is full: on_drain(), channel.c, kicks again). */
static int
deliver_one(struct host *h, struct proc *p)
{
    struct sv_event *ev = TAILQ_FIRST(&h->queue);
    struct ipc_frame f;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_PROCESS;
    f.u.process.event.ptr = ev->buf;
    f.u.process.event.len = (uint32_t)ev->len;
    f.u.process.deadline_ms = ev->deadline_ms = sv_deadline_ms(h->sv, h->w);
    f.u.process.delivery = ev->delivery;
    if (ipc_channel_call(p->ch, &f, NULL, 0, on_result, ev) < 0) {
        if (errno == EAGAIN) {
            p->full = true;
            return -1;
        }
        char msg[128];
        TAILQ_REMOVE(&h->queue, ev, link);
        if (errno == EMSGSIZE)
            snprintf(msg, sizeof msg,
                     "an event of %zu bytes does not fit in a frame", ev->len);
        else
            snprintf(msg, sizeof msg, "cannot send the event: %s",
                     strerror(errno));
        sv_event_complete(h, ev, NULL, "worker_error", msg);
        return 0;
    }
    TAILQ_REMOVE(&h->queue, ev, link);
    TAILQ_INSERT_TAIL(&h->inflight, ev, link);
    h->ninflight++;
    ev->p = p;
    ev->delivered = true; /* in its channel: this attempt counts */
    /* Beyond its max_inflight the host queues it: its deadline starts
     * when it does (start_waiting()). */
    ev->waiting = p->ninflight >= p->max_inflight;
    p->ninflight++;
    if (!ev->waiting) {
        ev->started_us = now_us();
        sv_timer_ms(ev->deadline, ev->deadline_ms);
    }
    /* A busy host is judged by its deadlines, not by heartbeats. */
    sv_timer_del(p->hb);
    sv_timer_del(p->hb_timeout);
    p->hb_outstanding = false;
    sv_timer_del(p->idle);
    return 0;
}

/* The process of h with the most room for an event (the fewest in
 * flight), or NULL when every one is full or not ready: events spread
 * over the worker's processes.  With prefetch, room counts the events a
 * process queues beyond its max_inflight too, while its events are fast
 * (PREFETCH_FAST_US). */
static struct proc *
pick_proc(struct host *h, bool prefetch)
{
    struct proc *q, *best = NULL;

    TAILQ_FOREACH (q, &h->procs, hlink) {
        uint32_t room = q->max_inflight;
        if (prefetch && q->last_run_us >= 0 &&
            q->last_run_us < PREFETCH_FAST_US)
            room += q->prefetch;
        if (sv_proc_current(q, h->w) && !q->full && q->ninflight < room &&
            (best == NULL || q->ninflight < best->ninflight))
            best = q;
    }
    return best;
}

/* The processes of h on their way to serving: started, or reloading, and
 * not taking events yet. */
static unsigned
starting_procs(const struct host *h)
{
    const struct proc *q;
    unsigned n = 0;

    TAILQ_FOREACH (q, &h->procs, hlink)
        if (sv_proc_serving(q) && (!q->loaded || q->load_sent))
            n++;
    return n;
}

/* Whether h should start one more process: it may have more, no restart
 * is due, and more events wait than its starting or reloading processes
 * will take (one each: their max_inflight is not known before their
 * Hello; a reload is short, and must not start spare processes).  So
 * processes start as the queue needs them, lazily like the first: a
 * worker that gets one event at a time keeps one process, a burst starts
 * up to limits.concurrency at once; idle ones are reaped one by one. */
static bool
want_more(struct host *h)
{
    const struct sv_event *ev;
    unsigned starting, waiting = 0;

    if (h->nprocs >= sv_host_max_procs(h) || evtimer_pending(h->backoff, NULL))
        return false;
    starting = starting_procs(h);
    if (sv_queue_ready(h)) {
        TAILQ_FOREACH (ev, &h->queue, link)
            if (++waiting > starting)
                return true;
    }
    return h->loads != NULL && h->nprocs == 0;
}

/* The daemon stops: what waits fails once no process is left. */
static bool
procs_closing(struct host *h)
{
    if (!h->sv->shutting_down)
        return false;
    if (h->nprocs == 0) {
        sv_host_finish_loads(h, "stopped", "the daemon is shutting down");
        if (!h->forgotten)
            sv_event_fail_queued(h, "stopped", "the daemon is shutting down");
    }
    return true;
}

/* A new version reaches each process once nothing is in flight on it; it
 * gets no event meanwhile (the hot reload).  The others serve on. */
static bool
procs_prepare(struct host *h)
{
    struct proc *p, *next;

    for (p = TAILQ_FIRST(&h->procs); p; p = next) {
        next = TAILQ_NEXT(p, hlink);
        p->full = false;
        if (sv_proc_serving(p) && p->loaded && !p->load_sent &&
            p->loaded_version != h->w->version &&
            p->refused_version != h->w->version && p->ninflight == 0) {
            sv_load_reload(p);
            if (h->forgotten)
                return false;
        }
    }
    return true;
}

/* To the serving process with the most room (pick_proc()). */
static int
procs_deliver(struct host *h)
{
    struct proc *p = pick_proc(h, false);

    if (p == NULL)
        return -1;
    deliver_one(h, p);
    return 0;
}

static void
procs_settle(struct host *h)
{
    struct supervisor *sv = h->sv;
    struct worker *w = h->w;
    struct proc *p;

    /* Processes on their way out leave the queue to the others, or to
     * the next one. */
    while (want_more(h)) {
        unsigned n = h->nprocs;
        sv_proc_start(h);
        if (h->forgotten || h->failed || h->nprocs == n)
            return;
    }
    /* What is left waits in the hosts that prefetch (their Hello), once
     * no process is starting that would run it sooner: a host then
     * starts its next event as it sends a Result, rather than a round
     * trip later. */
    while (sv_queue_ready(h) && starting_procs(h) == 0 &&
           (p = pick_proc(h, true)) != NULL) {
        deliver_one(h, p);
        if (h->forgotten)
            return;
    }
    TAILQ_FOREACH (p, &h->procs, hlink) {
        if (!sv_proc_current(p, w) || p->ninflight || !TAILQ_EMPTY(&h->queue))
            continue;
        uint64_t idle = sv_idle_timeout_ms(sv, w);
        if (idle && w->status == WORKER_RUNNING &&
            !evtimer_pending(p->idle, NULL))
            sv_timer_ms(p->idle, idle);
        if (!p->hb_outstanding && !evtimer_pending(p->hb, NULL))
            sv_timer_ms(p->hb, sv->conf->heartbeat_interval_ms);
    }
}

static void
procs_overrun(struct host *h, struct sv_event *ev, struct proc *p)
{
    char msg[128];

    /* The others of its process were not at fault: back to the front of
     * the queue, in their order, for the next host (those of the worker's
     * other processes go on). */
    requeue_inflight(h, p, false);
    snprintf(msg, sizeof msg, "no Result within the %" PRIu32 " ms deadline",
             ev->deadline_ms);
    if (p)
        sv_proc_kill(p, "timeout", "an event had %s", msg);
    sv_event_complete(h, ev, NULL, "timeout", msg);
}

/* Shutdown with the grace to each process (SIGKILL after it); done runs
 * once the last is gone. */
static bool
procs_stop(struct host *h, void (*done)(struct worker *w, void *arg), void *arg)
{
    bool kept;

    if (TAILQ_EMPTY(&h->procs)) {
        sv_state_set(h->sv, h->w, WORKER_STATE_STOPPED);
        return false;
    }
    kept = sv_host_wait_gone(h, done, arg);
    sv_host_shutdown_procs(h, STOP_USER, h->sv->conf->shutdown_grace_ms);
    return kept;
}

const struct sv_host_ops sv_ops_procs = {
    .closing = procs_closing,
    .prepare = procs_prepare,
    .current = sv_host_all_current,
    .deliver = procs_deliver,
    .settle = procs_settle,
    .overrun = procs_overrun,
    .stop = procs_stop,
};
