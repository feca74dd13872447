/*
 * supervise.c — the supervisor's core (supervise.h; DESIGN §2, §3, §7):
 * the interface the daemon calls, the host records (made on a worker's
 * first load or event, held across callbacks, forgotten), what waits on a
 * host (Load waiters, callbacks waiting for it to be gone, a failure that
 * lasts until a reset) and the daemon's shutdown.  The work itself is done
 * by the other files of the room (supervise.h lists them); the records,
 * their invariants and the rule of re-entrancy are described in
 * supervise_internal.h.
 *
 * The worker's observed state (w->state, w->pid) is written here and in
 * the files that see it change, always through sv_state_set(), which
 * tells hooks->on_state; the desired status (w->status) is only read.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "master/core/conf.h"
#include "master/core/engines.h"
#include "master/core/log.h"
#include "master/supervise/launcher_client.h"
#include "master/supervise/reap.h"
#include "master/supervise/supervise.h"
#include "master/supervise/supervise_internal.h"
#include "master/workers/activity.h"

/* ---- small helpers ---------------------------------------------------- */

void
sv_timer_ms(struct event *ev, uint64_t ms)
{
    struct timeval tv = {
        .tv_sec = (time_t)(ms / 1000),
        .tv_usec = (suseconds_t)(ms % 1000) * 1000,
    };

    if (evtimer_add(ev, &tv) < 0)
        log_alert("supervise: evtimer_add failed");
}

void
sv_timer_del(struct event *ev)
{
    if (ev)
        evtimer_del(ev);
}

void
sv_state_set(struct supervisor *sv, struct worker *w, enum worker_state s)
{
    enum worker_state old = w->state;

    if (old == s)
        return;
    w->state = s;
    log_debug("worker %s: host state %s -> %s", w->id, worker_state_name(old),
              worker_state_name(s));
    if (sv->hooks.on_state)
        sv->hooks.on_state(w, old, sv->arg);
}

uint32_t
sv_deadline_ms(const struct supervisor *sv, const struct worker *w)
{
    uint64_t ms = w->limits.timeout_ms ? w->limits.timeout_ms
                                       : sv->conf->message_timeout_ms;
    return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

/* ---- holding hosts ---------------------------------------------------- */

void
sv_host_hold(struct host *h)
{
    h->busy++;
}

static void
host_destroy(struct host *h)
{
    event_free(h->kick);
    event_free(h->backoff);
    free(h->restarts_at);
    free(h);
}

void
sv_host_release(struct host *h)
{
    if (--h->busy == 0 && h->forgotten)
        host_destroy(h);
}

void
sv_host_kick(struct host *h)
{
    if (!h->forgotten)
        event_active(h->kick, EV_TIMEOUT, 1);
}

static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct host *h = arg;

    (void)fd;
    (void)what;
    sv_host_hold(h);
    sv_pump(h);
    sv_host_release(h);
}

/* ---- a worker's processes --------------------------------------------- */

unsigned
sv_host_max_procs(const struct host *h)
{
    const struct worker *w = h->w;

    if (w->in_process || w->engine == NULL ||
        w->engine->concurrency != ENGINES_CONCURRENCY_PROCESSES ||
        w->limits.concurrency <= 1)
        return 1;
    return w->limits.concurrency;
}

bool
sv_host_serving_other(const struct host *h, const struct proc *skip)
{
    const struct proc *q;

    TAILQ_FOREACH (q, &h->procs, hlink)
        if (q != skip && sv_proc_serving(q))
            return true;
    return false;
}

bool
sv_host_all_current(const struct host *h)
{
    const struct proc *q;
    bool one = false;

    TAILQ_FOREACH (q, &h->procs, hlink) {
        if (!sv_proc_serving(q))
            continue;
        if (!sv_proc_current(q, h->w))
            return false;
        one = true;
    }
    return one;
}

void
sv_host_update_pid(struct host *h)
{
    struct proc *first = TAILQ_FIRST(&h->procs);

    if (h->ip == NULL)
        h->w->pid = first ? sv_proc_pid(first) : 0;
}

void
sv_host_shutdown_procs(struct host *h, enum proc_stop stop, uint64_t grace_ms)
{
    struct proc *q, *next;

    for (q = TAILQ_FIRST(&h->procs); q && !h->forgotten; q = next) {
        next = TAILQ_NEXT(q, hlink);
        sv_proc_shutdown(q, stop, grace_ms);
    }
}

/* ---- what waits on a host --------------------------------------------- */

void
sv_host_finish_loads(struct host *h, const char *type, const char *msg)
{
    struct waiter *wt;

    sv_host_hold(h);
    while ((wt = h->loads) != NULL) {
        h->loads = wt->next;
        wt->load_cb(h->w, NULL, type, msg, wt->arg);
        free(wt);
    }
    sv_host_release(h);
}

void
sv_host_finish_gones(struct host *h)
{
    struct waiter *wt;

    sv_host_hold(h);
    while ((wt = h->gones) != NULL) {
        h->gones = wt->next;
        wt->gone_cb(h->w, wt->arg);
        free(wt);
    }
    sv_host_release(h);
}

bool
sv_host_wait_gone(struct host *h, void (*done)(struct worker *w, void *arg),
                  void *arg)
{
    struct waiter *wt;

    if (done == NULL || (wt = calloc(1, sizeof *wt)) == NULL)
        return false;
    wt->gone_cb = done;
    wt->arg = arg;
    wt->next = h->gones;
    h->gones = wt;
    return true;
}

void
sv_host_set_failed(struct host *h, const char *type, const char *msg)
{
    h->failed = true;
    snprintf(h->fail_type, sizeof h->fail_type, "%s", type);
    snprintf(h->fail_msg, sizeof h->fail_msg, "%s", msg);
}

/* Clears a failure and the crash-loop history, cancels a backoff; a host
 * with no process becomes idle (one starts on the next event). */
static void
host_reset(struct host *h)
{
    h->failed = false;
    h->nrestarts_at = 0;
    h->restarts_due = 0;
    evtimer_del(h->backoff);
    if (h->nprocs == 0 && h->ip == NULL && h->w->state != WORKER_STATE_IDLE)
        sv_state_set(h->sv, h->w, WORKER_STATE_IDLE);
}

void
sv_host_fail(struct host *h, const char *type, const char *msg)
{
    activity_log(h->w, LOG_ERR, "%s: %s", type, msg);
    activity_error_note(h->w, type, msg, NULL);
    sv_host_set_failed(h, type, msg);
    /* Held across: a forget while its processes go would free h. */
    sv_host_hold(h);
    /* Its other processes, if any, go with it. */
    sv_host_shutdown_procs(h, STOP_FAILED, h->sv->conf->shutdown_grace_ms);
    if (h->forgotten) {
        sv_host_release(h);
        return;
    }
    sv_state_set(h->sv, h->w, WORKER_STATE_FAILED);
    sv_host_finish_loads(h, type, msg);
    if (!h->forgotten)
        sv_event_fail_queued(h, type, msg);
    if (!h->forgotten)
        sv_host_finish_gones(h);
    sv_host_release(h);
}

/* ---- the daemon's shutdown -------------------------------------------- */

void
sv_shutdown_check(struct supervisor *sv)
{
    if (sv->shutting_down && sv->nprocs == 0 && sv->ninproc == 0 &&
        sv->shutdown_done)
        event_active(sv->shutdown_ev, EV_TIMEOUT, 1);
}

static void
on_shutdown_done(evutil_socket_t fd, short what, void *arg)
{
    struct supervisor *sv = arg;
    void (*done)(void *) = sv->shutdown_done;

    (void)fd;
    (void)what;
    if (done == NULL || sv->nprocs || sv->ninproc)
        return;
    sv->shutdown_done = NULL;
    done(sv->shutdown_arg);
}

/* ---- the interface ---------------------------------------------------- */

struct supervisor *
supervise_new(struct event_base *base, const struct conf *conf,
              const struct engines *engines, const struct sandbox_support *s,
              const struct supervise_hooks *hooks, void *arg, char *err,
              size_t errlen)
{
    struct supervisor *sv = calloc(1, sizeof *sv);

    if (sv == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sv->base = base;
    sv->conf = conf;
    if (hooks)
        sv->hooks = *hooks;
    sv->arg = arg;
    LIST_INIT(&sv->hosts);
    LIST_INIT(&sv->procs);
    sv->launcher = launcher_client_start(engines, s, conf, err, errlen);
    if (sv->launcher == NULL) {
        supervise_free(sv);
        return NULL;
    }
    sv->shutdown_ev = event_new(base, -1, 0, on_shutdown_done, sv);
    sv->launcher_ev = event_new(base, launcher_client_fd(sv->launcher),
                                EV_READ | EV_PERSIST, sv_launcher_on_read, sv);
    sv->reaper = supervise_reaper_new(base, sv_launcher_on_reaped, sv);
    /* The warm pools (pool.c), empty until supervise_pool_fill(). */
    bool pools_ok = sv_pool_init(sv, engines) == 0;
    if (sv->shutdown_ev == NULL || sv->launcher_ev == NULL ||
        sv->reaper == NULL || !pools_ok ||
        event_add(sv->launcher_ev, NULL) < 0) {
        snprintf(err, errlen, "out of memory");
        supervise_free(sv);
        return NULL;
    }
    log_info("launcher started, pid %d",
             (int)launcher_client_pid(sv->launcher));
    return sv;
}

/* w's host record, created on first use. */
static struct host *
host_get(struct supervisor *sv, struct worker *w)
{
    struct host *h = w->host;

    if (h)
        return h;
    h = calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->sv = sv;
    h->w = w;
    h->ops = w->in_process ? &sv_ops_inproc : &sv_ops_procs;
    TAILQ_INIT(&h->procs);
    TAILQ_INIT(&h->queue);
    TAILQ_INIT(&h->inflight);
    LIST_INIT(&h->ip_calls);
    h->kick = event_new(sv->base, -1, 0, on_kick, h);
    h->backoff = evtimer_new(sv->base, sv_restart_on_backoff, h);
    if (h->kick == NULL || h->backoff == NULL) {
        if (h->kick)
            event_free(h->kick);
        if (h->backoff)
            event_free(h->backoff);
        free(h);
        return NULL;
    }
    LIST_INSERT_HEAD(&sv->hosts, h, link);
    w->host = h;
    return h;
}

int
supervise_load(struct supervisor *sv, struct worker *w, supervise_done_cb cb,
               void *arg)
{
    struct host *h = host_get(sv, w);
    struct waiter *wt, **tail;

    if (h == NULL || (wt = calloc(1, sizeof *wt)) == NULL)
        return -1;
    wt->load_cb = cb;
    wt->arg = arg;
    for (tail = &h->loads; *tail; tail = &(*tail)->next)
        ;
    *tail = wt;
    host_reset(h);
    sv_host_kick(h);
    return 0;
}

/* Queues an event on w's host; journaled: a broker delivery, whose
 * settlement the journal must be able to store (held meanwhile). */
static int
queue_event(struct supervisor *sv, struct worker *w, const uint8_t *event,
            size_t len, uint32_t delivery, bool journaled,
            supervise_event_cb cb, void *arg)
{
    struct host *h;

    if (w->status != WORKER_RUNNING || sv->shutting_down)
        return -1;
    h = host_get(sv, w);
    if (h == NULL || sv_event_queue(h, event, len, delivery, cb, arg) != 0)
        return -1;
    /* Before the pump runs: sv_event_queue() only kicked it. */
    TAILQ_LAST(&h->queue, sv_event_list)->journaled = journaled;
    return 0;
}

int
supervise_process(struct supervisor *sv, struct worker *w, const uint8_t *event,
                  size_t len, supervise_event_cb cb, void *arg)
{
    return queue_event(sv, w, event, len, 1, false, cb, arg);
}

int
supervise_process_delivery(struct supervisor *sv, struct worker *w,
                           const uint8_t *event, size_t len, uint32_t delivery,
                           supervise_event_cb cb, void *arg)
{
    return queue_event(sv, w, event, len, delivery, true, cb, arg);
}

void
supervise_hold_deliveries(struct supervisor *sv, bool hold)
{
    struct host *h;

    sv->hold_deliveries = hold;
    if (!hold)
        LIST_FOREACH (h, &sv->hosts, link)
            sv_host_kick(h);
}

void
supervise_apply(struct supervisor *sv, struct worker *w,
                void (*done)(struct worker *w, void *arg), void *arg)
{
    struct host *h = w->host;
    struct proc *p = h ? TAILQ_FIRST(&h->procs) : NULL;
    bool loaded = false, serving = false;

    if (h)
        TAILQ_FOREACH (p, &h->procs, hlink) {
            loaded |= p->loaded && p->stop == STOP_NONE && !p->kill_reason;
            serving |= p->stop == STOP_NONE && !p->kill_reason;
        }
    p = h ? TAILQ_FIRST(&h->procs) : NULL;
    switch (w->status) {
    case WORKER_RUNNING:
        if (h) {
            host_reset(h);
            if (loaded || (h->ip && p == NULL))
                sv_state_set(sv, w, WORKER_STATE_RUNNING);
            sv_host_kick(h);
        } else if (w->state != WORKER_STATE_IDLE) {
            sv_state_set(sv, w, WORKER_STATE_IDLE);
        }
        break;
    case WORKER_SUSPENDED:
        if (h) {
            evtimer_del(h->backoff);
            h->restarts_due = 0;
            TAILQ_FOREACH (p, &h->procs, hlink)
                sv_timer_del(p->idle);
            if (h->nprocs == 0 || serving)
                sv_state_set(sv, w, WORKER_STATE_SUSPENDED);
        } else {
            sv_state_set(sv, w, WORKER_STATE_SUSPENDED);
        }
        break;
    case WORKER_STOPPED:
        if (h == NULL) {
            sv_state_set(sv, w, WORKER_STATE_STOPPED);
            break;
        }
        sv_host_hold(h);
        evtimer_del(h->backoff);
        sv_host_finish_loads(h, "stopped", "the worker was stopped");
        if (!h->forgotten)
            sv_event_fail_queued(h, "stopped", "the worker was stopped");
        if (h->forgotten) {
            sv_host_release(h);
            break;
        }
        if (h->ops->stop(h, done, arg))
            done = NULL; /* runs when the host is gone */
        sv_host_release(h);
        break;
    }
    if (done)
        done(w, arg);
}

/* Kills h's process, fails everything waiting with `type` and detaches h
 * from its worker; h's memory goes with the last hold. */
static void
host_forget(struct host *h, const char *type, const char *msg)
{
    struct worker *w = h->w;
    struct proc *p;
    struct waiter *wt;

    sv_host_hold(h);
    TAILQ_FOREACH (p, &h->procs, hlink)
        sv_proc_kill(p, type, "%s", msg);
    /* Callbacks may queue more: loop until everything is empty. */
    while (!TAILQ_EMPTY(&h->inflight) || !TAILQ_EMPTY(&h->queue) || h->loads ||
           h->gones) {
        sv_event_fail_inflight(h, NULL, type, msg);
        sv_event_fail_queued(h, type, msg);
        sv_host_finish_loads(h, type, msg);
        while ((wt = h->gones) != NULL) {
            h->gones = wt->next;
            wt->gone_cb(w, wt->arg);
            free(wt);
        }
    }
    while ((p = TAILQ_FIRST(&h->procs)) != NULL) {
        TAILQ_REMOVE(&h->procs, p, hlink);
        p->h = NULL; /* reaped and logged later, on its own */
    }
    h->nprocs = 0;
    sv_ip_close(h);
    w->host = NULL;
    w->pid = 0;
    h->forgotten = true;
    LIST_REMOVE(h, link);
    event_del(h->kick);
    evtimer_del(h->backoff);
    sv_host_release(h); /* frees it unless a caller up the stack holds it */
}

void
supervise_forget(struct supervisor *sv, struct worker *w)
{
    (void)sv;
    if (w->host && !w->host->forgotten)
        host_forget(w->host, "deleted", "the worker was deleted");
}

void
supervise_shutdown(struct supervisor *sv, unsigned grace_ms,
                   void (*done)(void *arg), void *arg)
{
    struct host *h;
    struct proc *p;

    sv->shutting_down = true;
    sv->shutdown_grace_ms = grace_ms;
    sv->shutdown_done = done;
    sv->shutdown_arg = arg;
    sv_pool_stop(sv);
    LIST_FOREACH (h, &sv->hosts, link) {
        evtimer_del(h->backoff);
        h->restarts_due = 0;
        if (h->w->state == WORKER_STATE_PENDING)
            sv_state_set(sv, h->w, WORKER_STATE_STOPPED);
        sv_host_kick(h); /* fails what is queued */
    }
    /* Pool hosts too (one still spawning is killed once started,
     * sv_pool_spawned()). */
    LIST_FOREACH (p, &sv->procs, link)
        sv_proc_shutdown(p, p->stop == STOP_FAILED ? STOP_FAILED : STOP_DAEMON,
                         grace_ms);
    sv_shutdown_check(sv);
}

size_t
supervise_hosts(const struct supervisor *sv)
{
    return sv->nprocs;
}

const char *
supervise_confinement(const struct worker *w)
{
    const struct proc *p = w->host ? TAILQ_FIRST(&w->host->procs) : NULL;

    return p && !p->validator && p->confinement[0] ? p->confinement : NULL;
}

size_t
supervise_pids(const struct worker *w, int *pids, size_t max)
{
    const struct proc *p;
    size_t n = 0;

    if (w->host == NULL || w->host->ip)
        return 0;
    TAILQ_FOREACH (p, &w->host->procs, hlink) {
        if (p->validator)
            continue;
        if (n < max)
            pids[n] = sv_proc_pid(p);
        n++;
    }
    return n;
}

void
supervise_free(struct supervisor *sv)
{
    struct host *h;
    struct proc *p;

    if (sv == NULL)
        return;
    /* Every host dies now: the launcher kills and reaps them when its
     * socket closes, then exits; no callback after this returns. */
    while ((p = LIST_FIRST(&sv->procs)) != NULL) {
        LIST_REMOVE(p, link);
        sv->nprocs--;
        p->h = NULL;
        sv_proc_close_channel(p);
        if (!p->exited)
            log_info("host pid %d of worker %s killed: the supervisor is "
                     "going away",
                     sv_proc_pid(p), p->worker_id);
        sv_proc_free(p);
    }
    while ((h = LIST_FIRST(&sv->hosts)) != NULL) {
        TAILQ_INIT(&h->procs); /* freed above */
        h->nprocs = 0;
        host_forget(h, "stopped", "the supervisor is going away");
    }
    sv_pool_free(sv); /* their procs went above */
    if (sv->launcher_ev)
        event_free(sv->launcher_ev);
    launcher_client_stop(sv->launcher);
    if (sv->reaper) {
        supervise_reaper_poll(sv->reaper);
        supervise_reaper_free(sv->reaper);
    }
    if (sv->shutdown_ev)
        event_free(sv->shutdown_ev);
    free(sv);
}
