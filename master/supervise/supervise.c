/*
 * supervise.c — engine-host processes: spawn, handshake, load, events,
 * heartbeats, deadlines, idle reaping, restarts, exit classification
 * (supervise.h; DESIGN §2, §3, §7).
 *
 * Two records.  A struct host is the supervision of one worker: its event
 * queue and in-flight events, the callbacks waiting for a Load, the restart
 * history of the crash-loop window, the backoff timer.  It lives from the
 * worker's first load or event until supervise_forget() or
 * supervise_free(), across any number of processes.  A struct proc is one
 * host process: its pid, its channel, the events in flight on it and its
 * timers (handshake is the channel's, then the Load deadline, heartbeats,
 * idle reaping, the grace after Shutdown).
 *
 * Several processes (DESIGN §2): a worker whose engine says `concurrency =
 * processes` (engines.h) gets up to limits.concurrency procs, each a full
 * host; any other has at most one (a native host runs that many threads).
 * The queue is the worker's: pump() hands each event to the serving proc
 * with the fewest in flight, up to its Hello's max_inflight, and starts
 * another proc while more events wait than the starting ones will take
 * (want_more()).  Each proc reloads, is reaped when idle and dies on its
 * own; its death fails or requeues only its own events.  The worker's
 * observed state is the set's: a proc's exit sets it only when it was the
 * last, a crash makes it pending only when no other serves; the restart
 * history and backoff stay the worker's (restarts_due counts the procs the
 * backoff restarts).  A Load's waiters are answered once every serving
 * proc runs the version, and fail only with the last serving proc.
 *
 * The warm pool (supervise.h): a struct pool per engine whose descriptor
 * says warm = N holds procs with no host (p->h NULL, p->pool set, linked
 * by hlink like a worker's): spawned through the launcher without waiting
 * (p->spawning until its answer, which on_launcher() reads with the death
 * reports; the channel opens then), ready once their Hello is accepted,
 * then heartbeaten (never idle-reaped, never loaded).  pool_take() moves a
 * ready one into a host, with its worker's id, and sends the Load; the
 * rest of its life is a worker's proc's.  A pool proc's death is a
 * failure of its pool (pool_lost()); the daemon's shutdown ends them with
 * the others (sv->procs holds every proc).
 *
 * A proc ends in two steps that come in either order: its exit (reaped on
 * SIGCHLD, reap.c) and the close of its channel (EOF).  It is finalized
 * when both happened, so that the Results a host writes just before
 * exiting are read before its exit is classified.  A proc that exits while
 * a descendant keeps the socket open is given LINGER_MS; one that closes
 * its channel unasked and does not exit, the shutdown grace (at least
 * LINGER_MS), then it is killed.  Finalizing classifies the exit:
 *
 *   killed by us        the reason we killed it for (timeout, protocol,
 *                       handshake; a missed heartbeat is a timeout), even
 *                       if it exited by itself before the SIGKILL landed
 *   SIGSYS              seccomp
 *   another signal      crash
 *   exit 0, Shutdown    stopped (idle: "idle"; after a failed load:
 *                       load_error)
 *   exit 0, unasked     protocol (an error, restarted like a crash)
 *   exit code != 0      crash
 *
 * then sets the state: stopped / killed / failed / idle for exits asked
 * for; for unexpected ones, pending and a restart after
 * restart_base_delay_ms × 2^(n−1) (capped) while the worker's status is
 * running, or failed once crash_loop_max restarts happened within
 * crash_loop_window_s (no more restarts until a load or an apply of
 * "running" resets it).
 *
 * Events: queued per worker, sent as Process calls up to each proc's
 * max_inflight (its Hello), each with a deadline timer.  A host whose
 * Hello has a prefetch takes that many more once no proc is starting and
 * while its last event ran under PREFETCH_FAST_US (1 ms) (a process of
 * a `concurrency = processes` engine runs one event at a time: what else
 * its Hello's max_inflight takes counts as its prefetch): it
 * queues them and runs them in order as its running ones end, so the
 * deadline of such a waiting event starts when an earlier one's Result
 * comes (start_waiting()).  A deadline kills the proc (timeout): that
 * event fails with "timeout", the proc's other in-flight events go back
 * to the front of the queue, in order, for the next host.  Any other
 * death fails the proc's running events with the exit's reason; those it
 * had not started go back to the queue.  A Load for a new version waits
 * until nothing is in flight on a proc, and nothing is sent to it
 * meanwhile (the hot reload).
 *
 * Re-entrancy: the caller's callbacks may call back into the supervisor,
 * supervise_forget() included (not supervise_free()).  A host is held
 * (busy) by every loop callback that works on it; a forget inside marks it
 * forgotten and its memory is freed by the last to let go, so code after a
 * callback checks `h->forgotten` before going on.  Reply callbacks of the
 * channel ignore their error case entirely (their argument may be gone):
 * whoever closes or frees a channel here fails or requeues the events and
 * Loads that waited on it itself.  hooks->on_state must not call back into
 * the supervisor.
 *
 * Invariants: w->host == h and h->w == w until the forget; h->procs holds
 * the procs not finalized yet (nprocs of them, at most host_max_procs()
 * but for one started before a lower limit), p->h == h for each; every
 * event is in exactly one of h->queue and h->inflight (ninflight counts
 * the latter; ev->p is the proc it is in flight on, whose ninflight counts
 * it) or being completed; every done callback runs exactly once; every
 * child is reaped (reap.c).
 */
#include "config.h"

#include "master/supervise/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc/channel.h"
#include "master/core/conf.h"
#include "master/core/engines.h"
#include "master/core/log.h"
#include "master/supervise/inproc.h"
#include "master/supervise/launcher_client.h"
#include "master/supervise/reap.h"
#include "sandbox/sandbox.h"

/* How long the channel of an exited host may stay open (a descendant
 * holding it), and the least time a host that closed its channel unasked
 * has to exit (else shutdown_grace_ms: a dying runtime may take its time,
 * an interpreter's finalization or a sanitizer's leak check). */
#define LINGER_MS 1000u
/* The most concurrent events a host may ask for in its Hello. */
#define MAX_INFLIGHT_CAP 1024u
/* The most events a host may ask to queue beyond those (its Hello's
 * prefetch): each waits behind the running ones, so a deep queue only
 * delays them. */
#define PREFETCH_CAP 64u
/* A host gets events to queue only while its last event ran for less
 * than this: a queued event then waits at most prefetch times as long,
 * and a worker of slow events keeps them in the master's queue, where
 * whichever of its hosts is free first takes the next. */
#define PREFETCH_FAST_US 1000
/* The largest backoff exponent (2^20 × any base is past any cap). */
#define BACKOFF_SHIFT_MAX 20u

struct host;

/* One event: the caller's ABI CloudEvent buffer, borrowed until cb. */
struct sv_event {
    TAILQ_ENTRY(sv_event) link;
    struct host *h;
    const uint8_t *buf;
    size_t len;
    supervise_done_cb cb;
    void *arg;
    struct event *deadline;
    uint32_t deadline_ms;
    uint32_t delivery;
    struct proc *p; /* the host process it is in flight on */
    bool waiting;   /* in flight, prefetched: queued in its host, not started,
                       its deadline not running yet */
    int64_t started_us;     /* monotonic, when its host started it */
    struct native_job *job; /* in process: its call, while in flight */
};

TAILQ_HEAD(sv_event_list, sv_event);

/* A callback waiting for a Load (supervise_load) or for the host to be
 * gone (supervise_apply of "stopped"). */
struct waiter {
    struct waiter *next;
    supervise_done_cb load_cb;
    void (*gone_cb)(struct worker *w, void *arg);
    void *arg;
};

enum proc_stop {
    STOP_NONE = 0,
    STOP_USER,      /* status stopped: → stopped, or killed after the grace */
    STOP_IDLE,      /* idle reaping, or a failed reload: → idle */
    STOP_FAILED,    /* the first Load failed: → failed */
    STOP_DAEMON,    /* supervise_shutdown(): → stopped / killed */
    STOP_VALIDATED, /* an in-process validator whose library is open */
};

struct proc {
    LIST_ENTRY(proc) link;   /* sv->procs */
    TAILQ_ENTRY(proc) hlink; /* h->procs, until finalized */
    struct supervisor *sv;
    struct host *h; /* NULL once the worker was forgotten */
    pid_t pid;
    char worker_id[sizeof((struct worker *)0)->id];
    struct ipc_channel *ch; /* NULL once closed */
    int hold_fd;            /* a killed host's channel kept open, or -1 */
    bool validator; /* validates for the in-process path, runs nothing */
    uint32_t max_inflight;
    uint32_t prefetch;    /* events it queues beyond max_inflight (Hello) */
    int64_t last_run_us;  /* its last event's run time; -1: none yet */
    unsigned ninflight;   /* of h->inflight, the events sent to it */
    bool full;            /* its channel's queue is full (EAGAIN) */
    char confinement[16]; /* what its Hello says it applied; "" before */
    uint32_t seq;         /* its spawn's, which names it to the launcher */
    bool has_init;        /* pid is its pid namespace's init (spawn.h) */
    pid_t host_pid;       /* the host itself: pid, or its init's child */
    bool oom;             /* its cgroup's OOM killer killed in it */
    int syscall;          /* what a seccomp filter killed it for, or -1 */
    char syscall_name[32];
    int memfd; /* the code for the first Load, until sent */
    uint64_t code_len;
    uint32_t code_version; /* the version in memfd */
    bool loaded;           /* some version is loaded */
    bool load_sent;        /* a Load awaits its Loaded */
    uint32_t loaded_version;
    bool hb_outstanding;
    bool exited;
    int wstatus;
    /* A pool host (supervise.h): its pool while it waits there, its spawn
     * not answered yet, its Hello accepted, and its channel's end until
     * the spawn's answer. */
    struct pool *pool;
    bool spawning;
    bool ready;
    int chan_fd;
    enum proc_stop stop;
    bool shutdown_sent;
    uint64_t grace_ms;       /* of the Shutdown sent */
    const char *kill_reason; /* why we killed it (static), or NULL */
    char kill_msg[256];
    struct event *linger;
    struct event *grace;
    struct event *load_timer;
    struct event *hb;
    struct event *hb_timeout;
    struct event *idle;
    LIST_HEAD(, supervise_call) calls; /* GatewayCalls not answered yet */
};

/* A GatewayCall waiting for its answer: of a host process (p, NULL once
 * it is gone), or of an in-process worker (nc, NULL once its host is). */
struct supervise_call {
    LIST_ENTRY(supervise_call) link;
    struct proc *p;
    uint64_t seq;
    struct native_call *nc;
};

TAILQ_HEAD(proc_list, proc);

struct host {
    LIST_ENTRY(host) link;
    struct supervisor *sv;
    struct worker *w;
    struct proc_list procs; /* its live processes, oldest first */
    unsigned nprocs;
    struct sv_event_list queue;
    struct sv_event_list inflight;
    unsigned ninflight;
    struct waiter *loads; /* oldest first */
    struct waiter *gones;
    bool failed; /* events fail with fail_type until a reset */
    char fail_type[24];
    char fail_msg[512];
    int64_t *restarts_at; /* monotonic ms of the restarts in the window */
    unsigned nrestarts_at;
    struct event *kick; /* runs pump() on the next loop turn */
    struct event *backoff;
    unsigned restarts_due; /* crashed processes the backoff restarts */
    unsigned busy;
    bool forgotten;
    /* In process (w->in_process): the library open in the master, the
     * version it runs, its gateway calls not answered yet. */
    struct inproc *ip;
    uint32_t ip_version;
    LIST_HEAD(, supervise_call) ip_calls;
};

/* The warm pool of one engine (engines.h, warm = N): host processes
 * spawned like a worker's, handshaken, never loaded, for the next new
 * process of a worker of the engine to take. */
struct pool {
    struct supervisor *sv;
    const struct engines_entry *e;
    struct proc_list procs; /* spawning, handshaking or ready (hlink) */
    unsigned nprocs;
    unsigned failures; /* in a row: refused spawns, deaths while waiting */
    bool given_up;     /* POOL_FAILURES_MAX of them: no refill for now */
    struct event *refill;
};

struct supervisor {
    struct event_base *base;
    const struct conf *conf;
    struct supervise_hooks hooks;
    void *arg;
    struct supervise_reaper *reaper; /* of the launcher */
    /* The privileged launcher that starts, kills and reaps hosts
     * (launcher_client.h), and its death reports. */
    struct launcher_client *launcher;
    struct event *launcher_ev;
    uint32_t spawn_seq;
    LIST_HEAD(, host) hosts;
    LIST_HEAD(, proc) procs; /* every host process, pool hosts too */
    size_t nprocs;
    struct pool *pools; /* one per engine with warm > 0 */
    size_t npools;
    size_t ninproc; /* open in-process libraries */
    bool shutting_down;
    unsigned shutdown_grace_ms;
    void (*shutdown_done)(void *arg);
    void *shutdown_arg;
    struct event *shutdown_ev;
};

static void pump(struct host *h);
static void proc_finalize(struct proc *p);
static void ip_close(struct host *h);
static void ip_loaded(struct proc *p, const struct ipc_loaded *l, int *fds,
                      unsigned nfds);
static void pump_inproc(struct host *h);
static void shutdown_check(struct supervisor *sv);
static bool pool_take(struct host *h);
static void pool_worker_started(struct supervisor *sv,
                                const struct engines_entry *e);
static void pool_lost(struct proc *p, const char *reason, const char *how);

/* ---- small helpers ---------------------------------------------------- */

static int64_t
now_ms(clockid_t clock)
{
    struct timespec ts;

    if (clock_gettime(clock, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t
now_us(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void
timer_ms(struct event *ev, uint64_t ms)
{
    struct timeval tv = {
        .tv_sec = (time_t)(ms / 1000),
        .tv_usec = (suseconds_t)(ms % 1000) * 1000,
    };

    if (evtimer_add(ev, &tv) < 0)
        log_alert("supervise: evtimer_add failed");
}

static void
timer_del(struct event *ev)
{
    if (ev)
        evtimer_del(ev);
}

static void
set_state(struct supervisor *sv, struct worker *w, enum worker_state s)
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

/* The deadline of one event, and of a Load. */
static uint32_t
deadline_ms(const struct supervisor *sv, const struct worker *w)
{
    uint64_t ms = w->limits.timeout_ms ? w->limits.timeout_ms
                                       : sv->conf->message_timeout_ms;
    return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

static uint64_t
idle_timeout_ms(const struct supervisor *sv, const struct worker *w)
{
    uint64_t s =
        w->idle_timeout_s ? w->idle_timeout_s : sv->conf->idle_timeout_s;
    return s * 1000;
}

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

/* ---- holding hosts ---------------------------------------------------- */

static void
host_hold(struct host *h)
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

/* Lets go of h; frees it if it was forgotten and nobody else holds it. */
static void
host_release(struct host *h)
{
    if (--h->busy == 0 && h->forgotten)
        host_destroy(h);
}

static void
kick(struct host *h)
{
    if (!h->forgotten)
        event_active(h->kick, EV_TIMEOUT, 1);
}

/* ---- a worker's processes ------------------------------------------- */

/* How many host processes w may have: limits.concurrency for an engine
 * whose concurrency is processes (engines.h), else one (its threads are
 * the host's business; an in-process worker has one validator). */
static unsigned
host_max_procs(const struct host *h)
{
    const struct worker *w = h->w;

    if (w->in_process || w->engine == NULL ||
        w->engine->concurrency != ENGINES_CONCURRENCY_PROCESSES ||
        w->limits.concurrency <= 1)
        return 1;
    return w->limits.concurrency;
}

/* p takes work: not stopping, not killed, its channel open. */
static bool
proc_serving(const struct proc *p)
{
    return p->stop == STOP_NONE && !p->kill_reason && p->ch != NULL;
}

/* p is serving and runs w's current version. */
static bool
proc_current(const struct proc *p, const struct worker *w)
{
    return proc_serving(p) && p->loaded && !p->load_sent &&
           p->loaded_version == w->version;
}

/* Whether a process of h other than `skip` is serving. */
static bool
host_serving_other(const struct host *h, const struct proc *skip)
{
    const struct proc *q;

    TAILQ_FOREACH (q, &h->procs, hlink)
        if (q != skip && proc_serving(q))
            return true;
    return false;
}

/* Whether every serving process of h runs w's current version (and one
 * does): what a Load's waiters wait for. */
static bool
host_all_current(const struct host *h)
{
    const struct proc *q;
    bool one = false;

    TAILQ_FOREACH (q, &h->procs, hlink) {
        if (!proc_serving(q))
            continue;
        if (!proc_current(q, h->w))
            return false;
        one = true;
    }
    return one;
}

static int proc_pid(const struct proc *p);

/* w->pid: its first (oldest) process's, 0 when none runs. */
static void
host_update_pid(struct host *h)
{
    struct proc *first = TAILQ_FIRST(&h->procs);

    if (h->ip == NULL)
        h->w->pid = first ? proc_pid(first) : 0;
}

static void proc_shutdown(struct proc *p, enum proc_stop stop,
                          uint64_t grace_ms);

/* Asks every process of h to go (proc_shutdown()); the caller holds h
 * (host_hold()): a forget meanwhile must not free it under the loop. */
static void
shutdown_procs(struct host *h, enum proc_stop stop, uint64_t grace_ms)
{
    struct proc *q, *next;

    for (q = TAILQ_FIRST(&h->procs); q && !h->forgotten; q = next) {
        next = TAILQ_NEXT(q, hlink);
        proc_shutdown(q, stop, grace_ms);
    }
}

/* ---- completing callbacks -------------------------------------------- */

static void
event_free_one(struct sv_event *ev)
{
    if (ev->job) /* an in-process call still running: its outcome goes */
        inproc_abandon(ev->job);
    if (ev->deadline)
        event_free(ev->deadline);
    free(ev);
}

/* Runs ev's callback (ev already out of its list) and frees ev. */
static void
event_complete(struct host *h, struct sv_event *ev, const struct ipc_result *r,
               const char *type, const char *msg)
{
    host_hold(h);
    ev->cb(h->w, r, type, msg, ev->arg);
    event_free_one(ev);
    host_release(h);
}

/* Fails every queued event.  Callbacks may queue more: those fail too. */
static void
fail_queue(struct host *h, const char *type, const char *msg)
{
    struct sv_event *ev;

    while ((ev = TAILQ_FIRST(&h->queue)) != NULL) {
        TAILQ_REMOVE(&h->queue, ev, link);
        event_complete(h, ev, NULL, type, msg);
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
        timer_ms(first->deadline, first->deadline_ms);
    }
}

/* Puts the events in flight on p that match back at the front of the
 * queue, in their order, for the next host: all of them (its running
 * ones were not at fault), or only those it had not started. */
static void
requeue_inflight(struct host *h, const struct proc *p, bool waiting_only)
{
    struct sv_event *o, *prev;

    for (o = TAILQ_LAST(&h->inflight, sv_event_list); o; o = prev) {
        prev = TAILQ_PREV(o, sv_event_list, link);
        if (o->p != p || (waiting_only && !o->waiting))
            continue;
        inflight_remove(h, o);
        TAILQ_INSERT_HEAD(&h->queue, o, link);
    }
}

/* Fails the events in flight on p (every one when p is NULL): the
 * others go on.  Those p had only prefetched never ran: they go back to
 * the queue instead. */
static void
fail_inflight(struct host *h, struct proc *p, const char *type, const char *msg)
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
        event_complete(h, ev, NULL, type, msg);
    }
}

/* Completes the Load waiters: type NULL for success. */
static void
finish_loads(struct host *h, const char *type, const char *msg)
{
    struct waiter *wt;

    host_hold(h);
    while ((wt = h->loads) != NULL) {
        h->loads = wt->next;
        wt->load_cb(h->w, NULL, type, msg, wt->arg);
        free(wt);
    }
    host_release(h);
}

static void
finish_gones(struct host *h)
{
    struct waiter *wt;

    host_hold(h);
    while ((wt = h->gones) != NULL) {
        h->gones = wt->next;
        wt->gone_cb(h->w, wt->arg);
        free(wt);
    }
    host_release(h);
}

/* Leaves the worker failed: events and loads fail with type/msg until a
 * reset (supervise_load, supervise_apply of running). */
static void
host_set_failed(struct host *h, const char *type, const char *msg)
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
        set_state(h->sv, h->w, WORKER_STATE_IDLE);
}

/* ---- procs: channel, kill, shutdown ----------------------------------- */

static void
proc_close_channel(struct proc *p)
{
    if (p->ch) {
        struct ipc_channel *ch = p->ch;
        p->ch = NULL;
        ipc_channel_free(ch); /* pending calls fail: their callbacks
                                 ignore it */
    }
}

static void
proc_stop_timers(struct proc *p)
{
    timer_del(p->grace);
    timer_del(p->load_timer);
    timer_del(p->hb);
    timer_del(p->hb_timeout);
    timer_del(p->idle);
    p->hb_outstanding = false;
}

/* The pid the logs name: the host itself, not its init. */
static int
proc_pid(const struct proc *p)
{
    return (int)(p->host_pid > 0 ? p->host_pid : p->pid);
}

/*
 * Kills p now (SIGKILL) for `reason` (a word of DESIGN §6; the first
 * reason given wins), closes its channel, and fails what waits on it: the
 * host's in-flight events and Load waiters.  The exit itself is classified
 * when reaped.  Callers check h->forgotten afterwards.
 */
static void proc_kill(struct proc *p, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
proc_kill(struct proc *p, const char *reason, const char *fmt, ...)
{
    struct host *h = p->h;
    va_list ap;

    if (p->kill_reason)
        return;
    p->kill_reason = reason;
    va_start(ap, fmt);
    vsnprintf(p->kill_msg, sizeof p->kill_msg, fmt, ap);
    va_end(ap);
    log_warning("worker %s: killing host pid %d (%s): %s", p->worker_id,
                proc_pid(p), reason, p->kill_msg);
    if (!p->exited && launcher_client_kill(p->sv->launcher, p->seq) < 0)
        log_errno_err("worker %s: asking the launcher to kill pid %d",
                      p->worker_id, (int)p->pid);
    /* The launcher kills it in a moment: until it is reaped its channel
     * stays open, lest it see the end of it first and exit on its own
     * (its death is the SIGKILL's). */
    if (!p->exited && p->ch && p->hold_fd < 0)
        p->hold_fd = fcntl(ipc_channel_fd(p->ch), F_DUPFD_CLOEXEC, 0);
    proc_close_channel(p);
    proc_stop_timers(p);
    if (p->memfd >= 0) {
        close(p->memfd);
        p->memfd = -1;
    }
    if (p->exited) /* reaped already: finalize on the next loop turn */
        timer_ms(p->linger, 0);
    if (h == NULL)
        return;
    host_hold(h);
    fail_inflight(h, p, reason, p->kill_msg);
    /* Load waiters wait for the version on every serving process: they
     * fail with the last. */
    if (!h->forgotten && !host_serving_other(h, p))
        finish_loads(h, reason, p->kill_msg);
    host_release(h);
}

/* Asks p to drain and exit within the grace (SIGKILL after it).  Called
 * again, only upgrades what the exit will mean. */
static void
proc_shutdown(struct proc *p, enum proc_stop stop, uint64_t grace_ms)
{
    struct host *h = p->h;
    struct ipc_frame f;

    if (p->stop == STOP_NONE || p->stop == STOP_IDLE)
        p->stop = stop;
    if (p->kill_reason)
        return; /* dying already; the exit will mean `stop` */
    /* (A validator whose library runs in the master is not the worker's
     * state.) */
    if (h && stop != STOP_FAILED && !(p->validator && h->ip) &&
        !host_serving_other(h, p))
        set_state(p->sv, h->w, WORKER_STATE_STOPPING);
    if (p->shutdown_sent)
        return;
    p->shutdown_sent = true;
    p->grace_ms = grace_ms;
    timer_del(p->idle);
    timer_del(p->hb);
    timer_del(p->hb_timeout);
    p->hb_outstanding = false;
    timer_ms(p->grace, grace_ms);
    if (p->ch == NULL)
        return; /* closed already: its exit is near (linger) */
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_SHUTDOWN;
    f.u.shutdown.grace_ms =
        grace_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)grace_ms;
    if (ipc_channel_send(p->ch, &f, NULL, 0) < 0)
        proc_kill(p, "timeout", "cannot send Shutdown: %s", strerror(errno));
}

static void
on_grace(evutil_socket_t fd, short what, void *arg)
{
    struct proc *p = arg;

    (void)fd;
    (void)what;
    proc_kill(p, "timeout", "still running %llu ms after Shutdown",
              (unsigned long long)p->grace_ms);
}

static uint64_t
linger_ms(const struct supervisor *sv)
{
    return sv->conf->shutdown_grace_ms > LINGER_MS ? sv->conf->shutdown_grace_ms
                                                   : LINGER_MS;
}

static void
on_linger(evutil_socket_t fd, short what, void *arg)
{
    struct proc *p = arg;

    (void)fd;
    (void)what;
    if (p->exited) {
        if (p->ch) {
            log_warning("worker %s: host pid %d exited but its channel is "
                        "still open (a descendant holds it): closing it",
                        p->worker_id, proc_pid(p));
            proc_close_channel(p);
        }
        proc_finalize(p);
        return;
    }
    proc_kill(p, "protocol",
              "closed its channel but did not exit within %llu ms",
              (unsigned long long)linger_ms(p->sv));
}

/* ---- the Load --------------------------------------------------------- */

static int
hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The 32 bytes of a 64-digit hex SHA-256; -1 if it is not one. */
static int
sha256_bytes(const char *hex, uint8_t out[32])
{
    for (int i = 0; i < 32; i++) {
        int hi = hex_digit(hex[2 * i]), lo;
        if (hi < 0 || (lo = hex_digit(hex[2 * i + 1])) < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return hex[64] == '\0' ? 0 : -1;
}

static void on_loaded(struct ipc_channel *ch, const struct ipc_frame *reply,
                      int *fds, unsigned nfds, const char *error, void *arg);

/* Sends the Load of p->code_version with p->memfd (which the channel
 * takes).  Returns 0, or -1 with errno. */
static int
proc_send_load(struct proc *p)
{
    struct host *h = p->h;
    struct worker *w = h->w;
    const struct worker_version *v = worker_version_find(w, p->code_version);
    struct ipc_pair *pairs = NULL;
    struct ipc_frame f;
    uint8_t sha[32];
    int fd = p->memfd, rc;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_LOAD;
    f.u.load.worker_id = ipc_str_c(w->id);
    f.u.load.version = p->code_version;
    f.u.load.mime = ipc_str_c(w->mime_type ? w->mime_type : "");
    f.u.load.code_fd = 0;
    f.u.load.code_len = p->code_len;
    if (v && sha256_bytes(v->sha256, sha) == 0) {
        f.u.load.sha256.ptr = sha;
        f.u.load.sha256.len = sizeof sha;
    }
    f.u.load.identity.id = ipc_str_c(w->id);
    f.u.load.identity.group = ipc_str_c(w->group);
    f.u.load.identity.topic = ipc_str_c(w->topic);
    if (w->nconfig) {
        pairs = calloc(w->nconfig, sizeof *pairs);
        if (pairs == NULL) {
            close(fd);
            p->memfd = -1;
            errno = ENOMEM;
            return -1;
        }
        for (size_t i = 0; i < w->nconfig; i++) {
            pairs[i].name = ipc_str_c(w->config[i].name);
            pairs[i].value = ipc_str_c(w->config[i].value);
        }
        f.u.load.config.n = (uint32_t)w->nconfig;
        f.u.load.config.items = pairs;
    }
    f.u.load.limits.present = true;
    f.u.load.limits.timeout_ms = deadline_ms(p->sv, w);
    f.u.load.limits.memory_mb = w->limits.memory_mb;
    /* Each of several processes runs one event at a time: the worker's
     * concurrency is their number (host_max_procs()), not each one's. */
    f.u.load.limits.concurrency =
        w->engine && w->engine->concurrency == ENGINES_CONCURRENCY_PROCESSES
            ? 1
            : w->limits.concurrency;
    f.u.load.in_process = p->validator;

    p->memfd = -1; /* the channel's from here on, also on failure */
    rc = ipc_channel_call(p->ch, &f, &fd, 1, on_loaded, p);
    free(pairs);
    if (rc < 0)
        return -1;
    p->load_sent = true;
    timer_ms(p->load_timer, deadline_ms(p->sv, w));
    return 0;
}

/* Reads the code of w's current version into a sealed memfd for p.
 * Returns 0, or -1 with a message in err. */
static int
proc_take_code(struct proc *p, struct worker *w, char *err, size_t errlen)
{
    struct supervisor *sv = p->sv;
    uint8_t *data = NULL;
    size_t len = 0;
    char name[64];

    if (sv->hooks.code == NULL) {
        snprintf(err, errlen, "no code source");
        return -1;
    }
    if (sv->hooks.code(w, &data, &len, err, errlen, sv->arg) != 0)
        return -1;
    snprintf(name, sizeof name, "wm-code-%s-v%u", w->id, w->version);
    int fd = launcher_client_code_memfd(name, data, len);
    free(data);
    if (fd < 0) {
        snprintf(err, errlen, "memfd for the code: %s", strerror(errno));
        return -1;
    }
    if (p->memfd >= 0)
        close(p->memfd);
    p->memfd = fd;
    p->code_len = len;
    p->code_version = w->version;
    return 0;
}

/* A hot reload: the code of w's current version to the running host. */
static void
proc_reload(struct proc *p)
{
    struct host *h = p->h;
    char err[256];

    log_info("worker %s: loading version %u into host pid %d", h->w->id,
             h->w->version, proc_pid(p));
    if (proc_take_code(p, h->w, err, sizeof err) != 0) {
        /* The waiters learn why; the host goes, so that the next one
         * starts from the worker's version (or fails with the reason). */
        log_err("worker %s: reload of version %u: %s", h->w->id, h->w->version,
                err);
        host_hold(h);
        finish_loads(h, "load_error", err);
        if (!h->forgotten && p->h == h)
            proc_shutdown(p, STOP_IDLE, p->sv->conf->shutdown_grace_ms);
        host_release(h);
        return;
    }
    /* EAGAIN: the host does not read what it is sent. */
    if (proc_send_load(p) < 0)
        proc_kill(p, errno == EAGAIN ? "timeout" : "crash",
                  "cannot send the Load: %s", strerror(errno));
}

static void
on_load_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct proc *p = arg;

    (void)fd;
    (void)what;
    proc_kill(p, "timeout", "no answer to Load within %" PRIu32 " ms",
              p->h ? deadline_ms(p->sv, p->h->w) : 0);
}

static void
on_loaded(struct ipc_channel *ch, const struct ipc_frame *reply, int *fds,
          unsigned nfds, const char *error, void *arg)
{
    struct proc *p = arg;
    struct host *h = p->h;
    struct worker *w;

    (void)ch;
    (void)fds;
    (void)nfds;
    if (error || h == NULL)
        return; /* the channel closed: see the file's comment */
    w = h->w;
    host_hold(h);
    timer_del(p->load_timer);
    p->load_sent = false;
    if (reply->type != IPC_BODY_LOADED) {
        proc_kill(p, "protocol", "answered a Load with %s",
                  ipc_body_name(reply->type));
        goto out;
    }
    if (reply->u.loaded.ok && p->validator) {
        ip_loaded(p, &reply->u.loaded, fds, nfds);
        goto out;
    }
    if (reply->u.loaded.ok) {
        p->loaded = true;
        p->loaded_version = p->code_version;
        log_info("worker %s: version %u loaded in host pid %d", w->id,
                 p->loaded_version, proc_pid(p));
        pool_worker_started(p->sv, w->engine);
        /* (Another process may be on its way out meanwhile.) */
        if (w->state == WORKER_STATE_STARTING ||
            (h->nprocs > 1 && (w->state == WORKER_STATE_STOPPING ||
                               w->state == WORKER_STATE_PENDING)))
            set_state(p->sv, w,
                      w->status == WORKER_SUSPENDED ? WORKER_STATE_SUSPENDED
                                                    : WORKER_STATE_RUNNING);
        if (p->loaded_version == w->version && host_all_current(h))
            finish_loads(h, NULL, NULL);
        if (!h->forgotten && w->status == WORKER_STOPPED && h->loads == NULL &&
            p->stop == STOP_NONE)
            proc_shutdown(p, STOP_USER, p->sv->conf->shutdown_grace_ms);
        kick(h);
        goto out;
    }

    const struct ipc_error *e = &reply->u.loaded.error;
    char msg[512];
    bool was_running = p->loaded || h->ip;
    if (e->message.ptr)
        snprintf(msg, sizeof msg, "%.*s", (int)e->message.len, e->message.ptr);
    else
        snprintf(msg, sizeof msg, "the host could not load version %u",
                 p->code_version);
    log_info("worker %s: version %u failed to load: %s", w->id, p->code_version,
             msg);
    finish_loads(h, "load_error", msg);
    if (h->forgotten || p->stop != STOP_NONE)
        goto out;
    if (was_running) {
        /* A failed hot reload: what the host runs now is unsure, so it
         * goes; the next event starts one with the worker's version.  (An
         * in-process library keeps running the version it has.) */
        proc_shutdown(p, p->validator ? STOP_VALIDATED : STOP_IDLE,
                      p->sv->conf->shutdown_grace_ms);
    } else {
        host_set_failed(h, "load_error", msg);
        /* The code does not load: the worker's other processes, starting
         * with the same code, go too. */
        shutdown_procs(h, STOP_FAILED, p->sv->conf->shutdown_grace_ms);
        kick(h); /* fail the queue */
    }
out:
    host_release(h);
}

/* ---- heartbeats and idle reaping -------------------------------------- */

static void
on_hb_reply(struct ipc_channel *ch, const struct ipc_frame *reply, int *fds,
            unsigned nfds, const char *error, void *arg)
{
    struct proc *p = arg;

    (void)ch;
    (void)fds;
    (void)nfds;
    if (error || (p->h == NULL && p->pool == NULL))
        return;
    if (reply->type != IPC_BODY_HEARTBEAT) {
        proc_kill(p, "protocol", "answered a Heartbeat with %s",
                  ipc_body_name(reply->type));
        return;
    }
    if (!p->hb_outstanding)
        return; /* an event was sent meanwhile: the deadline judges now */
    p->hb_outstanding = false;
    timer_del(p->hb_timeout);
    if (p->pool) { /* waiting in its pool: the next in an interval */
        timer_ms(p->hb, p->sv->conf->heartbeat_interval_ms);
        return;
    }
    if (p->sv->hooks.heartbeat)
        p->sv->hooks.heartbeat(p->h->w, p->sv->arg);
    kick(p->h); /* rearms the interval if still idle */
}

void
supervise_call_reply(struct supervise_call *c, int32_t status,
                     const uint8_t *response, size_t len, const char *error)
{
    struct proc *p = c->p;
    struct ipc_frame r;

    if (c->nc) { /* an in-process worker's thread waits for this */
        LIST_REMOVE(c, link);
        if (status == 200)
            native_call_reply(c->nc, status, response, len);
        else
            native_call_reply(c->nc, status, (const uint8_t *)error,
                              error ? strlen(error) : 0);
    } else if (p) {
        LIST_REMOVE(c, link);
        memset(&r, 0, sizeof r);
        r.type = IPC_BODY_GATEWAY_REPLY;
        r.reply_to = c->seq;
        r.u.gateway_reply.status = status;
        r.u.gateway_reply.response.ptr = response;
        r.u.gateway_reply.response.len = (uint32_t)len;
        r.u.gateway_reply.error = ipc_str_c(error);
        if (p->ch && !p->kill_reason &&
            ipc_channel_send(p->ch, &r, NULL, 0) < 0)
            proc_kill(p, "protocol", "cannot answer its GatewayCall: %s",
                      strerror(errno));
    }
    free(c);
}

static void
on_hb(evutil_socket_t fd, short what, void *arg)
{
    struct proc *p = arg;
    struct host *h = p->h;
    struct ipc_frame f;

    (void)fd;
    (void)what;
    /* A worker's loaded host, or a pool host that said hello. */
    if ((h == NULL || !p->loaded) && !(p->pool && p->ready))
        return;
    if (p->ch == NULL || p->stop != STOP_NONE || p->ninflight ||
        p->hb_outstanding)
        return;
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_HEARTBEAT;
    if (ipc_channel_call(p->ch, &f, NULL, 0, on_hb_reply, p) < 0) {
        if (errno == EAGAIN) /* the queue is full: try next time */
            timer_ms(p->hb, p->sv->conf->heartbeat_interval_ms);
        return;
    }
    p->hb_outstanding = true;
    timer_ms(p->hb_timeout, p->sv->conf->heartbeat_timeout_ms);
}

static void
on_hb_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct proc *p = arg;

    (void)fd;
    (void)what;
    proc_kill(p, "timeout", "no answer to a Heartbeat within %llu ms",
              (unsigned long long)p->sv->conf->heartbeat_timeout_ms);
}

static void
on_idle(evutil_socket_t fd, short what, void *arg)
{
    struct proc *p = arg;
    struct host *h = p->h;

    (void)fd;
    (void)what;
    if (h == NULL || p->stop != STOP_NONE || p->ninflight ||
        !TAILQ_EMPTY(&h->queue) || h->loads || h->w->status != WORKER_RUNNING)
        return;
    log_info("worker %s: host pid %d idle for %llu s: stopping it", h->w->id,
             proc_pid(p),
             (unsigned long long)(idle_timeout_ms(p->sv, h->w) / 1000));
    proc_shutdown(p, STOP_IDLE, p->sv->conf->shutdown_grace_ms);
}

/* ---- events ----------------------------------------------------------- */

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
        return; /* the channel closed: see the file's comment */
    h = ev->h;
    host_hold(h);
    if (reply->type != IPC_BODY_RESULT) {
        /* ev stays in flight and fails with the others. */
        if (ev->p)
            proc_kill(ev->p, "protocol", "answered a Process with %s",
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
    event_complete(h, ev, r, type, type ? msg : NULL);
    kick(h);
out:
    host_release(h);
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct sv_event *ev = arg;
    struct host *h = ev->h;
    struct proc *p = ev->p;
    char msg[128];

    (void)fd;
    (void)what;
    host_hold(h);
    inflight_remove(h, ev);
    if (ev->job) {
        /* In process: nothing can stop the call; its outcome is dropped
         * when it comes, the other calls go on. */
        snprintf(msg, sizeof msg,
                 "no answer within the %" PRIu32 " ms deadline; the "
                 "in-process call cannot be stopped and goes on in its thread",
                 ev->deadline_ms);
        log_warning("worker %s: %s", h->w->id, msg);
        if (h->sv->hooks.stuck)
            h->sv->hooks.stuck(h->w, msg, h->sv->arg);
        event_complete(h, ev, NULL, "timeout", msg);
        kick(h);
        host_release(h);
        return;
    }
    /* The others of its process were not at fault: back to the front of
     * the queue, in their order, for the next host (those of the worker's
     * other processes go on). */
    requeue_inflight(h, p, false);
    snprintf(msg, sizeof msg, "no Result within the %" PRIu32 " ms deadline",
             ev->deadline_ms);
    if (p)
        proc_kill(p, "timeout", "an event had %s", msg);
    event_complete(h, ev, NULL, "timeout", msg);
    host_release(h);
}

/* Sends the first queued event.  Returns 0, or -1 when it stays queued
 * (the channel's queue is full: on_drain kicks again). */
static int
deliver_one(struct host *h, struct proc *p)
{
    struct sv_event *ev = TAILQ_FIRST(&h->queue);
    struct ipc_frame f;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_PROCESS;
    f.u.process.event.ptr = ev->buf;
    f.u.process.event.len = (uint32_t)ev->len;
    f.u.process.deadline_ms = ev->deadline_ms = deadline_ms(h->sv, h->w);
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
        event_complete(h, ev, NULL, "worker_error", msg);
        return 0;
    }
    TAILQ_REMOVE(&h->queue, ev, link);
    TAILQ_INSERT_TAIL(&h->inflight, ev, link);
    h->ninflight++;
    ev->p = p;
    /* Beyond its max_inflight the host queues it: its deadline starts
     * when it does (start_waiting()). */
    ev->waiting = p->ninflight >= p->max_inflight;
    p->ninflight++;
    if (!ev->waiting) {
        ev->started_us = now_us();
        timer_ms(ev->deadline, ev->deadline_ms);
    }
    /* A busy host is judged by its deadlines, not by heartbeats. */
    timer_del(p->hb);
    timer_del(p->hb_timeout);
    p->hb_outstanding = false;
    timer_del(p->idle);
    return 0;
}

/* ---- starting a host -------------------------------------------------- */

static void on_frame(struct ipc_channel *ch, const struct ipc_frame *f,
                     int *fds, unsigned nfds, void *arg);
static int on_hello(struct ipc_channel *ch, const struct ipc_hello *hello,
                    const char **reason, void *arg);
static void on_close(struct ipc_channel *ch, enum ipc_channel_status status,
                     const char *reason, void *arg);
static void on_drain(struct ipc_channel *ch, void *arg);

static void
proc_free(struct proc *p)
{
    struct supervise_call *c;

    while ((c = LIST_FIRST(&p->calls)) != NULL) {
        LIST_REMOVE(c, link);
        c->p = NULL; /* its answer is dropped */
    }
    proc_close_channel(p);
    if (p->hold_fd >= 0)
        close(p->hold_fd);
    if (p->memfd >= 0)
        close(p->memfd);
    if (p->chan_fd >= 0)
        close(p->chan_fd);
    struct event *evs[] = { p->linger, p->grace,      p->load_timer,
                            p->hb,     p->hb_timeout, p->idle };
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        if (evs[i])
            event_free(evs[i]);
    free(p);
}

static struct proc *
proc_new(struct supervisor *sv, struct host *h)
{
    struct proc *p = calloc(1, sizeof *p);

    if (p == NULL)
        return NULL;
    p->syscall = -1;
    p->hold_fd = -1;
    p->last_run_us = -1;
    p->sv = sv;
    p->h = h;
    p->memfd = -1;
    p->chan_fd = -1;
    LIST_INIT(&p->calls);
    if (h) /* else a pool host's: its pool names it */
        snprintf(p->worker_id, sizeof p->worker_id, "%s", h->w->id);
    p->linger = evtimer_new(sv->base, on_linger, p);
    p->grace = evtimer_new(sv->base, on_grace, p);
    p->load_timer = evtimer_new(sv->base, on_load_timeout, p);
    p->hb = evtimer_new(sv->base, on_hb, p);
    p->hb_timeout = evtimer_new(sv->base, on_hb_timeout, p);
    p->idle = evtimer_new(sv->base, on_idle, p);
    if (!p->linger || !p->grace || !p->load_timer || !p->hb || !p->hb_timeout ||
        !p->idle) {
        proc_free(p);
        return NULL;
    }
    return p;
}

/* Fails the host for good (until a reset) with type/msg: the state failed,
 * loads and queued events fail. */
static void
host_fail(struct host *h, const char *type, const char *msg)
{
    log_err("worker %s: %s: %s", h->w->id, type, msg);
    host_set_failed(h, type, msg);
    /* Held across: a forget while its processes go would free h. */
    host_hold(h);
    /* Its other processes, if any, go with it. */
    shutdown_procs(h, STOP_FAILED, h->sv->conf->shutdown_grace_ms);
    if (h->forgotten) {
        host_release(h);
        return;
    }
    set_state(h->sv, h->w, WORKER_STATE_FAILED);
    finish_loads(h, type, msg);
    if (!h->forgotten)
        fail_queue(h, type, msg);
    if (!h->forgotten)
        finish_gones(h);
    host_release(h);
}

/* Opens p's channel on fd (which it takes, also on failure): the
 * handshake's deadline runs from now.  NULL with errno. */
static struct ipc_channel *
proc_channel(struct proc *p, int fd)
{
    const struct conf *c = p->sv->conf;
    struct ipc_channel_config cfg = {
        .role = IPC_CHANNEL_MASTER,
        .max_frame = c->max_frame_bytes,
        .handshake_timeout_ms = c->handshake_timeout_ms > UINT32_MAX
                                    ? UINT32_MAX
                                    : (unsigned)c->handshake_timeout_ms,
    };
    const struct ipc_channel_callbacks cbs = {
        .on_frame = on_frame,
        .on_hello = on_hello,
        .on_close = on_close,
        .on_drain = on_drain,
    };

    return ipc_channel_new(p->sv->base, fd, &cfg, &cbs, p);
}

/* Spawns a host process for h (state starting), or takes a ready one from
 * its engine's pool; the Load follows the Hello.  On failure the worker
 * is failed with the reason. */
static void
host_start(struct host *h)
{
    struct supervisor *sv = h->sv;
    struct worker *w = h->w;
    const struct engines_entry *e = w->engine;
    char err[512];
    int sp[2] = { -1, -1 };
    struct proc *p;
    pid_t pid;

    if (e == NULL || e->host_path == NULL) {
        snprintf(err, sizeof err, "engine %s has no host binary to spawn",
                 e ? e->name : "(none)");
        host_fail(h, "engine_unavailable", err);
        return;
    }
    if (!e->available) {
        snprintf(err, sizeof err, "engine %s: %s", e->name,
                 e->reason ? e->reason : "unavailable");
        host_fail(h, "engine_unavailable", err);
        return;
    }
    if (pool_take(h))
        return;
    p = proc_new(sv, h);
    if (p == NULL) {
        host_fail(h, "crash", "out of memory");
        return;
    }
    p->validator = w->in_process;
    if (proc_take_code(p, w, err, sizeof err) != 0) {
        proc_free(p);
        host_fail(h, "load_error", err);
        return;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
        snprintf(err, sizeof err, "socketpair: %s", strerror(errno));
        proc_free(p);
        host_fail(h, "crash", err);
        return;
    }
    /* The launcher decides the rest: the binary, the user, the
     * namespaces, the cgroup's other limits (sandbox/launcher.h). */
    struct launcher_spawn q = { .type = LAUNCHER_SPAWN,
                                .seq = ++sv->spawn_seq,
                                .memory_mb = w->limits.memory_mb };
    struct launcher_spawned r;
    snprintf(q.engine, sizeof q.engine, "%s", e->name);
    snprintf(q.worker_id, sizeof q.worker_id, "%s", w->id);
    int rc =
        launcher_client_spawn(sv->launcher, &q, sp[1], &r, err, sizeof err);
    close(sp[1]);
    /* What came meanwhile (death reports, a pool host's answer) was kept:
     * read it on the next loop turn, the socket may stay quiet. */
    if (sv->launcher_ev)
        event_active(sv->launcher_ev, EV_READ, 1);
    if (rc < 0 || r.error) {
        close(sp[0]);
        proc_free(p);
        if (rc < 0)
            host_fail(h, "crash", err);
        else
            host_fail(h, r.fail_type, r.why);
        return;
    }
    pid = r.pid;
    p->seq = q.seq;
    p->pid = pid;
    p->has_init = r.init != 0;
    p->host_pid = r.host_pid > 0 ? r.host_pid : pid;
    LIST_INSERT_HEAD(&sv->procs, p, link);
    sv->nprocs++;
    TAILQ_INSERT_TAIL(&h->procs, p, hlink);
    h->nprocs++;
    p->ch = proc_channel(p, sp[0]);
    int saved = errno;
    if (p->has_init)
        log_info("worker %s: host %s started%s, pid %d (its init %d), uid %u",
                 w->id, e->host_path,
                 p->validator ? " to validate the in-process library" : "",
                 (int)p->host_pid, (int)pid, (unsigned)r.uid);
    else
        log_info("worker %s: host %s started%s, pid %d, uid %u", w->id,
                 e->host_path,
                 p->validator ? " to validate the in-process library" : "",
                 (int)pid, (unsigned)r.uid);
    if (h->ip == NULL) { /* else the library in the master still runs */
        host_update_pid(h);
        if (!host_serving_other(h, p))
            set_state(sv, w, WORKER_STATE_STARTING);
    }
    if (p->ch == NULL) /* the descriptor is closed: the exit follows */
        proc_kill(p, "crash", "cannot set up its channel: %s", strerror(saved));
}

static void
on_backoff(evutil_socket_t fd, short what, void *arg)
{
    struct host *h = arg;
    unsigned n = h->restarts_due;

    (void)fd;
    (void)what;
    h->restarts_due = 0;
    if (h->sv->shutting_down)
        return;
    host_hold(h);
    /* One new process for each that crashed (several may have crashed
     * within one backoff). */
    while (n-- > 0 && h->nprocs < host_max_procs(h) && !h->forgotten &&
           !h->failed) {
        h->w->restarts++;
        log_info("worker %s: restarting its host (restart %u)", h->w->id,
                 h->w->restarts);
        host_start(h);
    }
    host_release(h);
}

/* ---- the warm pool (supervise.h) -------------------------------------- */

/* A pool host's cgroup memory limit and RLIMIT_AS: none, as a worker's
 * that does not set limits.memory_mb, the only one that takes it. */
#define POOL_MEMORY_MB 0u
/* Failures in a row (a refused spawn, a failed handshake, a death while
 * waiting) after which an engine's pool is not refilled until a worker's
 * host of the engine loads its code. */
#define POOL_FAILURES_MAX 3u
/* How soon a refill looks again while a worker's host of the engine
 * starts (pool_busy()). */
#define POOL_BUSY_RETRY_MS 5u
/* How long after a take the replacement's spawn waits: the fork, the
 * confinement and the new host's start would otherwise take a CPU from
 * the taker's first events (bench/README.md, "The warm pool": the create
 * -> first event median went from 4.1-5.5 to 3.9-4.1 ms on 2 vCPUs). */
#define POOL_REFILL_DELAY_MS 20u

static struct pool *
pool_of(struct supervisor *sv, const struct engines_entry *e)
{
    for (size_t i = 0; i < sv->npools; i++)
        if (sv->pools[i].e == e)
            return &sv->pools[i];
    return NULL;
}

/* p waits in its pool, said hello and may be taken. */
static bool
pool_ready(const struct proc *p)
{
    return p->ready && proc_serving(p);
}

/* Refills pool after delay_ms, unless a refill (or its backoff) is due
 * already. */
static void
pool_schedule(struct pool *pool, uint64_t delay_ms)
{
    if (pool->given_up || pool->sv->shutting_down ||
        evtimer_pending(pool->refill, NULL))
        return;
    timer_ms(pool->refill, delay_ms);
}

/* One more failure in a row: the next pool host after a backoff (as a
 * worker's restart), none after POOL_FAILURES_MAX. */
static void
pool_failed(struct pool *pool, const char *why)
{
    const struct conf *c = pool->sv->conf;

    if (++pool->failures >= POOL_FAILURES_MAX) {
        if (!pool->given_up)
            log_warning("engine %s: %u pool hosts failed in a row, the last "
                        "%s: its pool is not refilled until a worker's host "
                        "of the engine starts",
                        pool->e->name, pool->failures, why);
        pool->given_up = true;
        evtimer_del(pool->refill);
        return;
    }
    uint64_t delay = c->restart_base_delay_ms << (pool->failures - 1);
    if (delay > c->restart_max_delay_ms)
        delay = c->restart_max_delay_ms;
    log_info("engine %s: a pool host failed (%s): another in %llu ms",
             pool->e->name, why, (unsigned long long)delay);
    evtimer_del(pool->refill);
    timer_ms(pool->refill, delay);
}

/* Takes p out of its pool. */
static void
pool_remove(struct proc *p)
{
    struct pool *pool = p->pool;

    TAILQ_REMOVE(&pool->procs, p, hlink);
    pool->nprocs--;
    p->pool = NULL;
    p->ready = false;
}

/* Asks the launcher for one more pool host, without waiting: its answer
 * comes with the death reports (pool_spawned()).  0, or -1 (a failure
 * counted). */
static int
pool_spawn(struct pool *pool)
{
    struct supervisor *sv = pool->sv;
    struct launcher_spawn q = { .type = LAUNCHER_SPAWN,
                                .seq = ++sv->spawn_seq,
                                .memory_mb = POOL_MEMORY_MB };
    char err[512];
    int sp[2] = { -1, -1 };
    struct proc *p = proc_new(sv, NULL);

    if (p == NULL) {
        pool_failed(pool, "out of memory");
        return -1;
    }
    snprintf(p->worker_id, sizeof p->worker_id, "%s pool", pool->e->name);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
        snprintf(err, sizeof err, "socketpair: %s", strerror(errno));
        proc_free(p);
        pool_failed(pool, err);
        return -1;
    }
    /* Confined as a worker's host (the launcher knows no difference); its
     * cgroup is pool-N. */
    snprintf(q.engine, sizeof q.engine, "%s", pool->e->name);
    snprintf(q.worker_id, sizeof q.worker_id, "pool");
    int rc =
        launcher_client_spawn_send(sv->launcher, &q, sp[1], err, sizeof err);
    close(sp[1]);
    if (rc < 0) {
        close(sp[0]);
        proc_free(p);
        pool_failed(pool, err);
        return -1;
    }
    p->seq = q.seq;
    p->chan_fd = sp[0];
    p->spawning = true;
    p->pool = pool;
    LIST_INSERT_HEAD(&sv->procs, p, link);
    sv->nprocs++;
    TAILQ_INSERT_TAIL(&pool->procs, p, hlink);
    pool->nprocs++;
    return 0;
}

/* Whether a worker's host of e is starting or loading code: a refill
 * waits for it, as the launcher answers one spawn at a time and a burst's
 * other hosts would wait behind the pool's, and as the CPUs are the
 * Load's. */
static bool
pool_busy(const struct supervisor *sv, const struct engines_entry *e)
{
    const struct proc *p;

    LIST_FOREACH (p, &sv->procs, link)
        if (p->h && p->h->w->engine == e && proc_serving(p) &&
            (!p->loaded || p->load_sent))
            return true;
    return false;
}

static void
on_pool_refill(evutil_socket_t fd, short what, void *arg)
{
    struct pool *pool = arg;
    struct supervisor *sv = pool->sv;

    (void)fd;
    (void)what;
    if (pool->nprocs < pool->e->warm && pool_busy(sv, pool->e)) {
        timer_ms(pool->refill, POOL_BUSY_RETRY_MS);
        return;
    }
    while (pool->nprocs < pool->e->warm && !pool->given_up &&
           !sv->shutting_down && sv->launcher_ev != NULL && pool->e->available)
        if (pool_spawn(pool) < 0)
            break;
}

/* The launcher's answer to a pool host's spawn. */
static void
pool_spawned(struct supervisor *sv, const struct launcher_spawned *r)
{
    struct proc *p;

    LIST_FOREACH (p, &sv->procs, link)
        if (p->spawning && p->seq == r->seq)
            break;
    if (p == NULL)
        return; /* cannot happen: only pool hosts are spawned so */
    p->spawning = false;
    if (r->error) {
        struct pool *pool = p->pool;
        char why[sizeof r->why + 64];

        snprintf(why, sizeof why, "its spawn was refused (%s): %s",
                 r->fail_type, r->why);
        log_warning("engine %s: a pool host did not start: %s", pool->e->name,
                    why);
        pool_remove(p);
        LIST_REMOVE(p, link);
        sv->nprocs--;
        proc_free(p);
        if (!sv->shutting_down)
            pool_failed(pool, why);
        shutdown_check(sv);
        return;
    }
    p->pid = r->pid;
    p->has_init = r->init != 0;
    p->host_pid = r->host_pid > 0 ? r->host_pid : r->pid;
    if (p->kill_reason)
        return; /* the launcher kills it: its death report follows */
    if (p->stop != STOP_NONE) { /* the daemon is stopping */
        proc_kill(p, "stopped", "the daemon is shutting down");
        return;
    }
    p->ch = proc_channel(p, p->chan_fd);
    p->chan_fd = -1;
    int saved = errno;
    log_info("engine %s: pool host %s started, pid %d%s, uid %u",
             p->pool->e->name, p->pool->e->host_path, proc_pid(p),
             p->has_init ? " (with its init)" : "", (unsigned)r->uid);
    if (p->ch == NULL)
        proc_kill(p, "crash", "cannot set up its channel: %s", strerror(saved));
}

/* Gives h a ready host of its engine's pool, when there is one and w's
 * limits are the pool's (its cgroup's memory limit and RLIMIT_AS were set
 * as it started): it gets its Load now, and the pool a new host once no
 * host of the engine starts (pool_busy()), off this event's path.
 * Whether it did. */
static bool
pool_take(struct host *h)
{
    struct supervisor *sv = h->sv;
    struct worker *w = h->w;
    struct pool *pool = pool_of(sv, w->engine);
    struct proc *p;
    char err[512];

    if (pool == NULL || w->limits.memory_mb != POOL_MEMORY_MB)
        return false;
    TAILQ_FOREACH (p, &pool->procs, hlink)
        if (pool_ready(p))
            break;
    if (p == NULL)
        return false;
    if (proc_take_code(p, w, err, sizeof err) != 0) {
        host_fail(h, "load_error", err); /* p stays in the pool */
        return true;
    }
    pool_remove(p);
    timer_del(p->hb);
    timer_del(p->hb_timeout);
    p->hb_outstanding = false;
    p->h = h;
    p->validator = w->in_process;
    snprintf(p->worker_id, sizeof p->worker_id, "%s", w->id);
    TAILQ_INSERT_TAIL(&h->procs, p, hlink);
    h->nprocs++;
    log_info("worker %s: takes host pid %d from the %s pool%s", w->id,
             proc_pid(p), w->engine->name,
             p->validator ? " to validate the in-process library" : "");
    if (h->ip == NULL) {
        host_update_pid(h);
        if (!host_serving_other(h, p))
            set_state(sv, w, WORKER_STATE_STARTING);
    }
    if (proc_send_load(p) < 0)
        proc_kill(p, errno == EAGAIN ? "timeout" : "crash",
                  "cannot send the Load: %s", strerror(errno));
    pool_schedule(pool, POOL_REFILL_DELAY_MS);
    return true;
}

/* A worker's host of e loaded its code: the engine's pool host failures
 * are no longer in a row, and a pool given up on is refilled. */
static void
pool_worker_started(struct supervisor *sv, const struct engines_entry *e)
{
    struct pool *pool = pool_of(sv, e);

    if (pool == NULL)
        return;
    pool->failures = 0;
    if (pool->given_up) {
        pool->given_up = false;
        log_info("engine %s: a worker's host started: refilling its pool",
                 e->name);
        pool_schedule(pool, 0);
    }
}

/* Pool host p ended (proc_finalize()): asked to (the daemon stops), or a
 * failure, replaced after a backoff. */
static void
pool_lost(struct proc *p, const char *reason, const char *how)
{
    struct pool *pool = p->pool;
    char why[256];

    pool_remove(p);
    /* (No launcher: no host starts any more, none is replaced.) */
    if (p->stop != STOP_NONE || p->sv->shutting_down ||
        p->sv->launcher_ev == NULL)
        return;
    snprintf(why, sizeof why, "pid %d ended with %s (%s)", proc_pid(p), how,
             reason);
    pool_failed(pool, why);
}

/* ---- the in-process path (DESIGN §4, inproc.h) ------------------------ */

static void
ip_on_result(void *ctx, const struct ipc_result *r, const char *type,
             const char *msg, void *arg)
{
    struct sv_event *ev = ctx;
    struct host *h = ev->h;

    (void)arg;
    host_hold(h);
    TAILQ_REMOVE(&h->inflight, ev, link);
    h->ninflight--;
    evtimer_del(ev->deadline);
    ev->job = NULL; /* done: the loader frees it after this returns */
    event_complete(h, ev, r, type, msg);
    kick(h);
    host_release(h);
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

/* Closes h's library, if open: its unanswered gateway calls get a 503 now
 * (their later answers are dropped), running calls keep it until they
 * return (inproc.h). */
static void
ip_close(struct host *h)
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

/* The validator's answer: open the library it handed back in the master,
 * in place of the one open (a reload: nothing is in flight). */
static void
ip_loaded(struct proc *p, const struct ipc_loaded *l, int *fds, unsigned nfds)
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
        proc_kill(p, "protocol",
                  "answered an in-process Load without a library and its "
                  "names");
        return;
    }
    fd = fds[l->library_fd];
    seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & need) != need) {
        proc_kill(p, "protocol", "handed back a library that is not sealed");
        return;
    }
    fds[l->library_fd] = -1; /* ours from here on */
    /* Nothing is in flight (pump_inproc starts a validator only then):
     * the old library goes first, so that its identity variables are
     * restored before the new ones are set. */
    ip_close(h);
    snprintf(label, sizeof label, "lib%s.so", lib);
    h->ip = inproc_open(sv->base, fd, label, entry, freer, &id,
                        w->limits.concurrency ? w->limits.concurrency : 1,
                        &hooks, h, err, sizeof err);
    if (h->ip == NULL) {
        log_info("worker %s: version %u failed to load in the daemon: %s",
                 w->id, p->code_version, err);
        finish_loads(h, "load_error", err);
        if (h->forgotten || p->stop != STOP_NONE)
            return;
        if (!reload)
            host_set_failed(h, "load_error", err);
        proc_shutdown(p, reload ? STOP_IDLE : STOP_FAILED,
                      sv->conf->shutdown_grace_ms);
        kick(h);
        return;
    }
    sv->ninproc++;
    h->ip_version = p->code_version;
    w->pid = getpid();
    log_info("worker %s: version %u loaded in the daemon (in-process, %s, "
             "%u threads)",
             w->id, h->ip_version, label,
             w->limits.concurrency ? w->limits.concurrency : 1);
    set_state(sv, w,
              w->status == WORKER_SUSPENDED ? WORKER_STATE_SUSPENDED
                                            : WORKER_STATE_RUNNING);
    if (h->ip_version == w->version)
        finish_loads(h, NULL, NULL);
    if (!h->forgotten && p->h == h && p->stop == STOP_NONE)
        proc_shutdown(p, STOP_VALIDATED, sv->conf->shutdown_grace_ms);
    kick(h);
}

/* Hands the first queued event to the library's pool. */
static void
ip_deliver_one(struct host *h)
{
    struct sv_event *ev = TAILQ_FIRST(&h->queue);

    TAILQ_REMOVE(&h->queue, ev, link);
    ev->deadline_ms = deadline_ms(h->sv, h->w);
    ev->job = inproc_submit(h->ip, ev->buf, ev->len, ev);
    if (ev->job == NULL) {
        event_complete(h, ev, NULL, "worker_error", "out of memory");
        return;
    }
    TAILQ_INSERT_TAIL(&h->inflight, ev, link);
    h->ninflight++;
    timer_ms(ev->deadline, ev->deadline_ms);
}

/* pump() for an in-process worker: a validator host checks the code of
 * each version; the library then runs in the master until the worker is
 * stopped, deleted or reloaded, or the daemon stops. */
static void
pump_inproc(struct host *h)
{
    struct supervisor *sv = h->sv;
    struct worker *w = h->w;
    bool closing = sv->shutting_down || w->status == WORKER_STOPPED;

    if (!sv->conf->allow_in_process_native) {
        host_fail(h, "engine_unavailable",
                  "isolation in-process is disabled on this daemon "
                  "(allow_in_process_native = false)");
        return;
    }
    if (closing) {
        const char *why = sv->shutting_down ? "the daemon is shutting down"
                                            : "the worker was stopped";
        host_hold(h);
        finish_loads(h, "stopped", why);
        if (!h->forgotten)
            fail_queue(h, "stopped", why);
        if (!h->forgotten && h->ninflight == 0 && h->ip) {
            ip_close(h);
            set_state(sv, w, WORKER_STATE_STOPPED);
            finish_gones(h);
        }
        host_release(h);
        shutdown_check(sv);
        return;
    }
    if (h->nprocs || evtimer_pending(h->backoff, NULL))
        return; /* a validator runs, or the backoff starts one */
    if (h->ip == NULL || h->ip_version != w->version) {
        if (h->ninflight == 0 && (h->loads || !TAILQ_EMPTY(&h->queue)))
            host_start(h);
        return;
    }
    if (h->loads) {
        finish_loads(h, NULL, NULL);
        if (h->forgotten)
            return;
    }
    while (!TAILQ_EMPTY(&h->queue) && h->ninflight < MAX_INFLIGHT_CAP &&
           !h->forgotten && h->ip)
        ip_deliver_one(h);
    if (!h->forgotten && h->ip)
        inproc_flush(h->ip);
}

/* ---- the pump: what to do next for a host ----------------------------- */

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
        if (proc_current(q, h->w) && !q->full && q->ninflight < room &&
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
        if (proc_serving(q) && (!q->loaded || q->load_sent))
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

    if (h->nprocs >= host_max_procs(h) || evtimer_pending(h->backoff, NULL))
        return false;
    starting = starting_procs(h);
    TAILQ_FOREACH (ev, &h->queue, link)
        if (++waiting > starting)
            return true;
    return h->loads != NULL && h->nprocs == 0;
}

static void
pump(struct host *h)
{
    struct supervisor *sv = h->sv;
    struct worker *w = h->w;
    struct proc *p, *next;

    if (h->forgotten)
        return;
    if (h->failed) {
        fail_queue(h, h->fail_type, h->fail_msg);
        return;
    }
    if (w->in_process) {
        pump_inproc(h);
        return;
    }
    if (sv->shutting_down) {
        if (h->nprocs == 0) {
            finish_loads(h, "stopped", "the daemon is shutting down");
            if (!h->forgotten)
                fail_queue(h, "stopped", "the daemon is shutting down");
        }
        return;
    }
    /* A new version reaches each process once nothing is in flight on
     * it; it gets no event meanwhile (the hot reload). */
    for (p = TAILQ_FIRST(&h->procs); p; p = next) {
        next = TAILQ_NEXT(p, hlink);
        p->full = false;
        if (proc_serving(p) && p->loaded && !p->load_sent &&
            p->loaded_version != w->version && p->ninflight == 0) {
            proc_reload(p);
            if (h->forgotten)
                return;
        }
    }
    if (h->loads && host_all_current(h)) {
        finish_loads(h, NULL, NULL);
        if (h->forgotten)
            return;
    }
    while (!TAILQ_EMPTY(&h->queue) && (p = pick_proc(h, false)) != NULL) {
        deliver_one(h, p);
        if (h->forgotten)
            return;
    }
    /* Processes on their way out leave the queue to the others, or to
     * the next one. */
    while (want_more(h)) {
        unsigned n = h->nprocs;
        host_start(h);
        if (h->forgotten || h->failed || h->nprocs == n)
            return;
    }
    /* What is left waits in the hosts that prefetch (their Hello), once
     * no process is starting that would run it sooner: a host then
     * starts its next event as it sends a Result, rather than a round
     * trip later. */
    while (!TAILQ_EMPTY(&h->queue) && starting_procs(h) == 0 &&
           (p = pick_proc(h, true)) != NULL) {
        deliver_one(h, p);
        if (h->forgotten)
            return;
    }
    TAILQ_FOREACH (p, &h->procs, hlink) {
        if (!proc_current(p, w) || p->ninflight || !TAILQ_EMPTY(&h->queue))
            continue;
        uint64_t idle = idle_timeout_ms(sv, w);
        if (idle && w->status == WORKER_RUNNING &&
            !evtimer_pending(p->idle, NULL))
            timer_ms(p->idle, idle);
        if (!p->hb_outstanding && !evtimer_pending(p->hb, NULL))
            timer_ms(p->hb, sv->conf->heartbeat_interval_ms);
    }
}

static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct host *h = arg;

    (void)fd;
    (void)what;
    host_hold(h);
    pump(h);
    host_release(h);
}

/* ---- the channel ------------------------------------------------------ */

/* Keeps what p's Hello says it applied, and says whether that is below
 * min_confinement (then *reason says so; the host is killed before it
 * gets any code). */
static bool
below_min_confinement(struct proc *p, const struct ipc_hello *hello,
                      const char **reason)
{
    static char msg[256];
    enum sandbox_level got, min;
    size_t n = hello->confinement.len;

    if (n >= sizeof p->confinement)
        n = sizeof p->confinement - 1;
    if (n > 0)
        memcpy(p->confinement, hello->confinement.ptr, n);
    p->confinement[n] = '\0';
    if (sandbox_level_parse(p->sv->conf->min_confinement, &min) != 0 ||
        min == SANDBOX_LEVEL_NONE)
        return false; /* main.c refused a bad word at start-up */
    if (sandbox_level_parse(p->confinement, &got) == 0 && got >= min)
        return false;
    snprintf(msg, sizeof msg,
             "the host reports confinement '%s', below min_confinement %s "
             "(wm-host(8), CONFINEMENT)",
             p->confinement, p->sv->conf->min_confinement);
    *reason = msg;
    return true;
}

static int
on_hello(struct ipc_channel *ch, const struct ipc_hello *hello,
         const char **reason, void *arg)
{
    struct proc *p = arg;

    (void)ch;
    if (p->h == NULL && p->pool == NULL) {
        *reason = "the worker was deleted";
        return -1;
    }
    p->max_inflight = hello->max_inflight == 0 ? 1
                      : hello->max_inflight > MAX_INFLIGHT_CAP
                          ? MAX_INFLIGHT_CAP
                          : hello->max_inflight;
    p->prefetch =
        hello->prefetch > PREFETCH_CAP ? PREFETCH_CAP : hello->prefetch;
    /* A process of a `concurrency = processes` engine is loaded with
     * concurrency 1 (proc_send_load()): it runs one event at a time, and
     * what else its Hello takes waits in it, in order.  So those are
     * prefetched events: sent only while its events are fast, their
     * deadlines started as they start; slow ones stay in the queue for
     * whichever process is free first (and make more start). */
    const struct engines_entry *e = p->h      ? p->h->w->engine
                                    : p->pool ? p->pool->e
                                              : NULL;
    if (e && e->concurrency == ENGINES_CONCURRENCY_PROCESSES &&
        p->max_inflight > 1) {
        p->prefetch += p->max_inflight - 1;
        if (p->prefetch > MAX_INFLIGHT_CAP)
            p->prefetch = MAX_INFLIGHT_CAP;
        p->max_inflight = 1;
    }
    log_debug("worker %s: host pid %d says hello (engine %.*s, max_inflight "
              "%" PRIu32 ", prefetch %" PRIu32 ", confinement %.*s)",
              p->worker_id, proc_pid(p), (int)hello->engine.len,
              hello->engine.ptr ? hello->engine.ptr : "", hello->max_inflight,
              hello->prefetch, (int)hello->confinement.len,
              hello->confinement.ptr ? hello->confinement.ptr : "");
    if (below_min_confinement(p, hello, reason))
        return -1;
    if (p->stop != STOP_NONE)
        return 0;  /* a Shutdown is queued already */
    if (p->pool) { /* ready for a worker to take; heartbeats meanwhile */
        p->ready = true;
        log_info("engine %s: pool host pid %d ready (confinement %s)",
                 p->pool->e->name, proc_pid(p), p->confinement);
        timer_ms(p->hb, p->sv->conf->heartbeat_interval_ms);
        return 0;
    }
    if (proc_send_load(p) < 0) {
        *reason = "the master could not send the Load";
        return -1;
    }
    return 0;
}

static enum ipc_log_level
clamp_level(enum ipc_log_level l)
{
    return l > IPC_LOG_ERROR ? IPC_LOG_ERROR : l;
}

static void
on_frame(struct ipc_channel *ch, const struct ipc_frame *f, int *fds,
         unsigned nfds, void *arg)
{
    static const int levels[] = {
        [IPC_LOG_TRACE] = LOG_DEBUG, [IPC_LOG_DEBUG] = LOG_DEBUG,
        [IPC_LOG_INFO] = LOG_INFO,   [IPC_LOG_WARN] = LOG_WARNING,
        [IPC_LOG_ERROR] = LOG_ERR,
    };
    struct proc *p = arg;

    (void)ch;
    (void)fds; /* the channel closes whatever came with these frames */
    switch (f->type) {
    case IPC_BODY_LOG:
        log_host(levels[clamp_level(f->u.log.level)], p->worker_id,
                 f->u.log.message.ptr, f->u.log.message.len);
        break;
    case IPC_BODY_GATEWAY_CALL: {
        struct supervise_call *c = calloc(1, sizeof *c);
        if (c == NULL) {
            proc_kill(p, "protocol", "cannot take its GatewayCall: %s",
                      strerror(ENOMEM));
            break;
        }
        c->p = p;
        c->seq = f->seq;
        LIST_INSERT_HEAD(&p->calls, c, link);
        if (p->h && p->sv->hooks.gateway)
            p->sv->hooks.gateway(p->h->w, &f->u.gateway_call, c, p->sv->arg);
        else
            supervise_call_reply(c, 501, NULL, 0,
                                 "no gateway services in this daemon");
        break;
    }
    default:
        /* Load, Process, Shutdown, Fork, a second Hello, an unasked
         * Result or Loaded: none is for a host to send. */
        proc_kill(p, "protocol", "sent a %s frame%s", ipc_body_name(f->type),
                  nfds ? " with descriptors" : "");
        break;
    }
}

static void
on_close(struct ipc_channel *ch, enum ipc_channel_status status,
         const char *reason, void *arg)
{
    struct proc *p = arg;

    (void)ch;
    switch (status) {
    case IPC_CHANNEL_EOF:
    case IPC_CHANNEL_IO:
        /* Its death, most likely: the exit says how (or LINGER_MS). */
        log_debug("worker %s: channel of host pid %d closed (%s): %s",
                  p->worker_id, proc_pid(p), ipc_channel_status_name(status),
                  reason);
        proc_close_channel(p);
        if (p->exited)
            timer_ms(p->linger, 0);
        else if (!p->shutdown_sent) /* else the grace is running */
            timer_ms(p->linger, linger_ms(p->sv));
        break;
    case IPC_CHANNEL_PROTOCOL:
        proc_kill(p, "protocol", "%s", reason);
        break;
    case IPC_CHANNEL_HANDSHAKE:
        proc_kill(p, "handshake", "%s", reason);
        break;
    case IPC_CHANNEL_CLOSED:
    default:
        proc_kill(p, "crash", "the master's end of the channel failed: %s",
                  reason);
        break;
    }
}

static void
on_drain(struct ipc_channel *ch, void *arg)
{
    struct proc *p = arg;

    (void)ch;
    if (p->h)
        kick(p->h);
}

/* ---- exits ------------------------------------------------------------ */

/* The exit reason of p's death (see the file's comment), with its signal
 * (0 if none) and exit code (-1 if none). */
static const char *
classify(const struct proc *p, int *sig, int *code)
{
    int st = p->wstatus;

    *sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (p->kill_reason)
        return p->kill_reason;
    /* The memory limit's OOM killer sends SIGKILL; its group counts it. */
    if (WIFSIGNALED(st) && *sig == SIGKILL && p->oom)
        return "oom";
    if (WIFSIGNALED(st))
        return *sig == SIGSYS ? "seccomp" : "crash";
    if (*code != 0)
        return "crash";
    switch (p->stop) {
    case STOP_NONE:
        return "protocol"; /* exit 0 unasked */
    case STOP_IDLE:
        return "idle";
    case STOP_FAILED:
        return "load_error";
    case STOP_VALIDATED:
        return "validated";
    default:
        return "stopped";
    }
}

/* An unexpected death of w's host: a restart after the backoff, or failed
 * (crash loop, or a status that does not call for one). */
static void
host_after_crash(struct host *h, const char *reason, const char *how, bool live,
                 bool serving)
{
    struct supervisor *sv = h->sv;
    const struct conf *c = sv->conf;
    struct worker *w = h->w;
    int64_t now = now_ms(CLOCK_MONOTONIC);
    int64_t window = (int64_t)c->crash_loop_window_s * 1000;
    char msg[256];
    unsigned n = 0;

    if (w->status != WORKER_RUNNING || sv->shutting_down) {
        if (!live)
            set_state(sv, w, WORKER_STATE_FAILED);
        return;
    }
    if (h->restarts_at == NULL && c->crash_loop_max) {
        h->restarts_at = calloc(c->crash_loop_max, sizeof *h->restarts_at);
        if (h->restarts_at == NULL) {
            host_fail(h, reason, "out of memory");
            return;
        }
    }
    /* Forget the restarts that left the window. */
    for (unsigned i = 0; i < h->nrestarts_at; i++)
        if (now - h->restarts_at[i] < window)
            h->restarts_at[n++] = h->restarts_at[i];
    h->nrestarts_at = n;
    if (n >= c->crash_loop_max) {
        snprintf(msg, sizeof msg,
                 "crash loop: %u restarts within %llu s, the last host "
                 "ended with %s (%s)",
                 n, (unsigned long long)c->crash_loop_window_s, how, reason);
        host_fail(h, reason, msg);
        return;
    }
    unsigned shift = n < BACKOFF_SHIFT_MAX ? n : BACKOFF_SHIFT_MAX;
    uint64_t delay = c->restart_base_delay_ms << shift;
    if (delay > c->restart_max_delay_ms)
        delay = c->restart_max_delay_ms;
    h->restarts_at[h->nrestarts_at++] = now;
    log_info("worker %s: host restart in %llu ms (%u of %u within %llu s)",
             w->id, (unsigned long long)delay, h->nrestarts_at,
             c->crash_loop_max, (unsigned long long)c->crash_loop_window_s);
    /* Only this process restarts.  The worker passes through pending
     * (hooks->on_state: the lifecycle's error and restarting events come
     * from there) and, while its other processes serve, back to what they
     * are. */
    h->restarts_due++;
    set_state(sv, w, WORKER_STATE_PENDING);
    if (serving) {
        const struct proc *q;
        bool loaded = false;
        TAILQ_FOREACH (q, &h->procs, hlink)
            loaded |= proc_serving(q) && q->loaded;
        set_state(sv, w, loaded ? WORKER_STATE_RUNNING : WORKER_STATE_STARTING);
    }
    timer_ms(h->backoff, delay);
}

static void
shutdown_check(struct supervisor *sv)
{
    if (sv->shutting_down && sv->nprocs == 0 && sv->ninproc == 0 &&
        sv->shutdown_done)
        event_active(sv->shutdown_ev, EV_TIMEOUT, 1);
}

/* p exited and its channel is closed: classify, log, update the worker. */
static void
proc_finalize(struct proc *p)
{
    struct supervisor *sv = p->sv;
    struct host *h = p->h;
    char how[128], msg[352];
    int sig, code;
    const char *reason = classify(p, &sig, &code);
    enum proc_stop stop = p->stop;
    bool killed = p->kill_reason != NULL;
    int nr = strcmp(reason, "seccomp") == 0 ? p->syscall : -1;

    supervise_wait_describe(p->wstatus, how, sizeof how);
    if (nr >= 0) {
        size_t n = strlen(how);
        snprintf(how + n, sizeof how - n, ", system call %s", p->syscall_name);
    }
    if (killed)
        snprintf(msg, sizeof msg, "the host was killed: %s", p->kill_msg);
    else if (strcmp(reason, "oom") == 0)
        snprintf(msg, sizeof msg,
                 "the host went past its memory limit (%" PRIu32
                 " MiB, limits.memory_mb) and the kernel's OOM killer ended "
                 "it",
                 h && h->w ? h->w->limits.memory_mb : 0);
    else
        snprintf(msg, sizeof msg, "the host ended with %s", how);
    log_write(stop == STOP_NONE || killed ? LOG_WARNING : LOG_INFO,
              "host pid %d of worker %s exited: %s, reason %s%s%s", proc_pid(p),
              p->worker_id, how, reason, killed ? ": " : "",
              killed ? p->kill_msg : "");
    LIST_REMOVE(p, link);
    sv->nprocs--;
    if (h == NULL) {
        if (p->pool)
            pool_lost(p, reason, how);
        proc_free(p);
        shutdown_check(sv);
        return;
    }

    struct worker *w = h->w;
    /* Out of the worker's list now; freed at the end, once its events
     * are failed. */
    TAILQ_REMOVE(&h->procs, p, hlink);
    h->nprocs--;
    p->h = NULL;
    if (h->ip) {
        /* The validator of a reload: the library in the master still
         * runs, its worker's state is not the validator's. */
        proc_free(p);
        host_hold(h);
        if (stop == STOP_NONE)
            finish_loads(h, reason, msg);
        kick(h);
        host_release(h);
        shutdown_check(sv);
        return;
    }
    /* The worker's other processes go on: the state is the last one's
     * to set, and a Load's waiters wait for the serving ones. */
    bool live = h->nprocs > 0;
    bool serving = host_serving_other(h, NULL);
    host_update_pid(h);
    w->last_exit.present = true;
    snprintf(w->last_exit.reason, sizeof w->last_exit.reason, "%s", reason);
    w->last_exit.signal = sig;
    w->last_exit.code = code;
    w->last_exit.syscall = nr;
    snprintf(w->last_exit.syscall_name, sizeof w->last_exit.syscall_name, "%s",
             nr >= 0 ? p->syscall_name : "");
    w->last_exit.at_ms = now_ms(CLOCK_REALTIME);

    host_hold(h);
    fail_inflight(h, p, reason, msg);
    /* Loads asked for after a requested stop wait for the next host. */
    if (!h->forgotten && stop == STOP_NONE && !serving)
        finish_loads(h, reason, msg);
    if (h->forgotten)
        goto out;
    if (live && stop != STOP_NONE) {
        kick(h);
        goto out;
    }
    switch (stop) {
    case STOP_USER:
    case STOP_DAEMON:
        if (killed)
            set_state(sv, w, WORKER_STATE_KILLED);
        else if (sig || code)
            set_state(sv, w, WORKER_STATE_FAILED);
        else
            set_state(sv, w,
                      w->status == WORKER_RUNNING && stop == STOP_USER
                          ? WORKER_STATE_IDLE
                          : WORKER_STATE_STOPPED);
        break;
    case STOP_IDLE:
    case STOP_VALIDATED:
        /* (Another process of the worker that crashed meanwhile restarts
         * after its backoff.) */
        set_state(sv, w,
                  w->status == WORKER_SUSPENDED       ? WORKER_STATE_SUSPENDED
                  : evtimer_pending(h->backoff, NULL) ? WORKER_STATE_PENDING
                                                      : WORKER_STATE_IDLE);
        break;
    case STOP_FAILED:
        /* Failed unless a load or a start reset it meanwhile. */
        set_state(sv, w, h->failed ? WORKER_STATE_FAILED : WORKER_STATE_IDLE);
        break;
    case STOP_NONE:
        host_after_crash(h, reason, how, live, serving);
        break;
    }
    if (!h->forgotten && !live)
        finish_gones(h);
    kick(h);
out:
    host_release(h);
    proc_free(p);
    shutdown_check(sv);
}

/* p ended, as the launcher reports (d) or as its loss implies. */
static void
proc_exited(struct proc *p, int wstatus)
{
    p->exited = true;
    p->wstatus = wstatus;
    /* Its timers judged a live process: the exit says how it ended. */
    proc_stop_timers(p);
    if (p->ch == NULL)
        proc_finalize(p);
    else /* read what it wrote before dying, then finalize */
        timer_ms(p->linger, LINGER_MS);
}

/* The launcher is gone: its hosts died with it (they die with their
 * parent), and no host can start any more.  Every proc ends as killed;
 * the daemon is told (hooks.launcher_lost). */
static void
launcher_lost(struct supervisor *sv, const char *why)
{
    struct proc *p, *next;

    if (sv->launcher_ev == NULL)
        return; /* told already */
    event_free(sv->launcher_ev);
    sv->launcher_ev = NULL;
    log_err("the launcher (pid %d) %s: no host can be started any more",
            (int)launcher_client_pid(sv->launcher), why);
    for (p = LIST_FIRST(&sv->procs); p; p = next) {
        next = LIST_NEXT(p, link);
        if (p->exited)
            continue;
        if (p->kill_reason == NULL) {
            p->kill_reason = "crash";
            snprintf(p->kill_msg, sizeof p->kill_msg,
                     "the launcher that started it %s", why);
        }
        proc_exited(p, SIGKILL); /* a wait status: killed by SIGKILL */
    }
    if (sv->hooks.launcher_lost)
        sv->hooks.launcher_lost(why, sv->arg);
}

/* The launcher's death reports and answers to pool hosts' spawns
 * (launcher_client.h). */
static void
on_launcher(evutil_socket_t fd, short what, void *arg)
{
    struct supervisor *sv = arg;
    union launcher_client_msg m;
    int rc;

    (void)fd;
    (void)what;
    while ((rc = launcher_client_next(sv->launcher, &m)) > 0) {
        const struct launcher_death d = m.death;
        struct proc *p;

        if (rc == LAUNCHER_SPAWNED) {
            pool_spawned(sv, &m.spawned);
            if (sv->launcher_ev == NULL)
                return; /* the launcher was lost meanwhile */
            continue;
        }
        LIST_FOREACH (p, &sv->procs, link)
            if (p->seq == d.seq && !p->exited)
                break;
        if (p == NULL)
            continue; /* cannot happen: the launcher reports its own */
        p->oom = d.oom != 0;
        p->syscall = d.syscall;
        snprintf(p->syscall_name, sizeof p->syscall_name, "%s", d.syscall_name);
        proc_exited(p, d.wstatus);
    }
    if (rc < 0) {
        /* It is ending: how, when it ends within a second. */
        char how[128], why[160] = "closed its socket";
        pid_t pid = launcher_client_pid(sv->launcher);
        int st;
        for (int i = 0; i < 100; i++) {
            if (waitpid(pid, &st, WNOHANG) == pid) {
                supervise_wait_describe(st, how, sizeof how);
                snprintf(why, sizeof why, "ended with %s", how);
                break;
            }
            usleep(10 * 1000);
        }
        launcher_lost(sv, why);
    }
}

/* The master's own children: the launcher only. */
static bool
on_reaped(pid_t pid, int wstatus, void *arg)
{
    struct supervisor *sv = arg;
    char how[128];

    if (sv->launcher == NULL || pid != launcher_client_pid(sv->launcher))
        return false;
    supervise_wait_describe(wstatus, how, sizeof how);
    char why[160];
    snprintf(why, sizeof why, "ended with %s", how);
    launcher_lost(sv, why);
    return true;
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
                                EV_READ | EV_PERSIST, on_launcher, sv);
    sv->reaper = supervise_reaper_new(base, on_reaped, sv);
    /* The warm pools: npools counts those made. */
    size_t want = 0;
    bool pools_ok = true;
    for (size_t i = 0; i < engines->n; i++)
        want += engines->v[i].warm > 0;
    if (want && (sv->pools = calloc(want, sizeof *sv->pools)) == NULL)
        pools_ok = false;
    for (size_t i = 0; pools_ok && i < engines->n; i++) {
        struct pool *pool = &sv->pools[sv->npools];
        if (engines->v[i].warm == 0)
            continue;
        pool->sv = sv;
        pool->e = &engines->v[i];
        TAILQ_INIT(&pool->procs);
        pool->refill = evtimer_new(base, on_pool_refill, pool);
        if (pool->refill == NULL)
            pools_ok = false;
        else
            sv->npools++;
    }
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
    TAILQ_INIT(&h->procs);
    TAILQ_INIT(&h->queue);
    TAILQ_INIT(&h->inflight);
    LIST_INIT(&h->ip_calls);
    h->kick = event_new(sv->base, -1, 0, on_kick, h);
    h->backoff = evtimer_new(sv->base, on_backoff, h);
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
    kick(h);
    return 0;
}

int
supervise_process(struct supervisor *sv, struct worker *w, const uint8_t *event,
                  size_t len, supervise_done_cb cb, void *arg)
{
    return supervise_process_delivery(sv, w, event, len, 1, cb, arg);
}

int
supervise_process_delivery(struct supervisor *sv, struct worker *w,
                           const uint8_t *event, size_t len, uint32_t delivery,
                           supervise_done_cb cb, void *arg)
{
    struct host *h;
    struct sv_event *ev;

    if (w->status != WORKER_RUNNING || sv->shutting_down)
        return -1;
    h = host_get(sv, w);
    if (h == NULL || (ev = calloc(1, sizeof *ev)) == NULL)
        return -1;
    ev->h = h;
    ev->buf = event;
    ev->len = len;
    ev->deadline = evtimer_new(sv->base, on_deadline, ev);
    if (ev->deadline == NULL) {
        event_free_one(ev);
        return -1;
    }
    ev->delivery = delivery ? delivery : 1;
    ev->cb = cb;
    ev->arg = arg;
    TAILQ_INSERT_TAIL(&h->queue, ev, link);
    kick(h);
    return 0;
}

void
supervise_apply(struct supervisor *sv, struct worker *w,
                void (*done)(struct worker *w, void *arg), void *arg)
{
    struct host *h = w->host;
    struct proc *p = h ? TAILQ_FIRST(&h->procs) : NULL;
    struct waiter *wt;
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
                set_state(sv, w, WORKER_STATE_RUNNING);
            kick(h);
        } else if (w->state != WORKER_STATE_IDLE) {
            set_state(sv, w, WORKER_STATE_IDLE);
        }
        break;
    case WORKER_SUSPENDED:
        if (h) {
            evtimer_del(h->backoff);
            h->restarts_due = 0;
            TAILQ_FOREACH (p, &h->procs, hlink)
                timer_del(p->idle);
            if (h->nprocs == 0 || serving)
                set_state(sv, w, WORKER_STATE_SUSPENDED);
        } else {
            set_state(sv, w, WORKER_STATE_SUSPENDED);
        }
        break;
    case WORKER_STOPPED:
        if (h == NULL) {
            set_state(sv, w, WORKER_STATE_STOPPED);
            break;
        }
        host_hold(h);
        evtimer_del(h->backoff);
        finish_loads(h, "stopped", "the worker was stopped");
        if (!h->forgotten)
            fail_queue(h, "stopped", "the worker was stopped");
        if (h->forgotten) {
            host_release(h);
            break;
        }
        p = TAILQ_FIRST(&h->procs);
        if (w->in_process && h->ip) {
            /* Closed once its calls are answered (pump_inproc); a
             * validator still running is just killed. */
            if (p)
                proc_kill(p, "stopped", "the worker was stopped");
            if (done) {
                wt = calloc(1, sizeof *wt);
                if (wt) {
                    wt->gone_cb = done;
                    wt->arg = arg;
                    wt->next = h->gones;
                    h->gones = wt;
                    done = NULL;
                }
            }
            kick(h);
            host_release(h);
            break;
        }
        if (p && done) {
            wt = calloc(1, sizeof *wt);
            if (wt) {
                wt->gone_cb = done;
                wt->arg = arg;
                wt->next = h->gones;
                h->gones = wt;
                done = NULL; /* runs when the host is gone */
            }
        }
        if (p)
            shutdown_procs(h, STOP_USER, sv->conf->shutdown_grace_ms);
        else
            set_state(sv, w, WORKER_STATE_STOPPED);
        host_release(h);
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

    host_hold(h);
    TAILQ_FOREACH (p, &h->procs, hlink)
        proc_kill(p, type, "%s", msg);
    /* Callbacks may queue more: loop until everything is empty. */
    while (!TAILQ_EMPTY(&h->inflight) || !TAILQ_EMPTY(&h->queue) || h->loads ||
           h->gones) {
        fail_inflight(h, NULL, type, msg);
        fail_queue(h, type, msg);
        finish_loads(h, type, msg);
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
    ip_close(h);
    w->host = NULL;
    w->pid = 0;
    h->forgotten = true;
    LIST_REMOVE(h, link);
    event_del(h->kick);
    evtimer_del(h->backoff);
    host_release(h); /* frees it unless a caller up the stack holds it */
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
    for (size_t i = 0; i < sv->npools; i++)
        evtimer_del(sv->pools[i].refill);
    LIST_FOREACH (h, &sv->hosts, link) {
        evtimer_del(h->backoff);
        h->restarts_due = 0;
        if (h->w->state == WORKER_STATE_PENDING)
            set_state(sv, h->w, WORKER_STATE_STOPPED);
        kick(h); /* fails what is queued */
    }
    /* Pool hosts too (one still spawning is killed once started,
     * pool_spawned()). */
    LIST_FOREACH (p, &sv->procs, link)
        proc_shutdown(p, p->stop == STOP_FAILED ? STOP_FAILED : STOP_DAEMON,
                      grace_ms);
    shutdown_check(sv);
}

size_t
supervise_hosts(const struct supervisor *sv)
{
    return sv->nprocs;
}

void
supervise_pool_fill(struct supervisor *sv)
{
    for (size_t i = 0; i < sv->npools; i++) {
        struct pool *pool = &sv->pools[i];
        if (!pool->e->available || pool->nprocs >= pool->e->warm)
            continue;
        log_info("engine %s: keeping %u host%s warm", pool->e->name,
                 pool->e->warm, pool->e->warm == 1 ? "" : "s");
        pool_schedule(pool, 0);
    }
}

size_t
supervise_pool_ready(const struct supervisor *sv, const struct engines_entry *e)
{
    const struct pool *pool = NULL;
    const struct proc *p;
    size_t n = 0;

    for (size_t i = 0; i < sv->npools; i++)
        if (sv->pools[i].e == e)
            pool = &sv->pools[i];
    if (pool)
        TAILQ_FOREACH (p, &pool->procs, hlink)
            n += pool_ready(p);
    return n;
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
            pids[n] = proc_pid(p);
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
        proc_close_channel(p);
        if (!p->exited)
            log_info("host pid %d of worker %s killed: the supervisor is "
                     "going away",
                     proc_pid(p), p->worker_id);
        proc_free(p);
    }
    while ((h = LIST_FIRST(&sv->hosts)) != NULL) {
        TAILQ_INIT(&h->procs); /* freed above */
        h->nprocs = 0;
        host_forget(h, "stopped", "the supervisor is going away");
    }
    for (size_t i = 0; i < sv->npools; i++) /* their procs went above */
        event_free(sv->pools[i].refill);
    free(sv->pools);
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
