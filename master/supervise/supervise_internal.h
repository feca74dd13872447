/*
 * supervise_internal.h — what the files of master/supervise/ share, and
 * only they (never included outside this room): the records of the
 * supervision (struct host, struct proc, struct sv_event, struct pool,
 * struct supervisor) and the functions one file of the room calls in
 * another.  supervise.h is the room's interface to the daemon.
 *
 * Names: what is shared here is sv_<object>_<verb>() (sv_proc_kill,
 * sv_pool_take), grouped below by the file that defines it; everything
 * else in the room is static to its file.
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
 * The queue is the worker's: sv_pump() hands each event to the serving
 * proc with the fewest in flight, up to its Hello's max_inflight, and
 * starts another proc while more events wait than the starting ones will
 * take (pump.c).  Each proc reloads, is reaped when idle and dies on its
 * own; its death fails or requeues only its own events.  The worker's
 * observed state is the set's: a proc's exit sets it only when it was the
 * last, a crash makes it pending only when no other serves; the restart
 * history and backoff stay the worker's (restarts_due counts the procs the
 * backoff restarts).  A Load's waiters are answered once every serving
 * proc runs the version, and fail only with the last serving proc.
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
 * the procs not finalized yet (nprocs of them, at most sv_host_max_procs()
 * but for one started before a lower limit), p->h == h for each; every
 * event is in exactly one of h->queue and h->inflight (ninflight counts
 * the latter; ev->p is the proc it is in flight on, whose ninflight counts
 * it) or being completed; every done callback runs exactly once; every
 * child is reaped (reap.c).
 */
#ifndef WM_MASTER_SUPERVISE_INTERNAL_H
#define WM_MASTER_SUPERVISE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include <event2/util.h>

#include "ipc/frame.h"
#include "master/supervise/supervise.h"
#include "master/workers/worker.h"

struct event;
struct ipc_channel;
struct launcher_spawned;
struct native_call;
struct native_job;
struct inproc;

/* How long the channel of an exited host may stay open (a descendant
 * holding it), and the least time a host that closed its channel unasked
 * has to exit (else shutdown_grace_ms: a dying runtime may take its time,
 * an interpreter's finalization or a sanitizer's leak check). */
#define LINGER_MS 1000u
/* The most concurrent events a host may ask for in its Hello (and the
 * most an in-process library is handed at once). */
#define MAX_INFLIGHT_CAP 1024u

struct host;

/* One event: the caller's ABI CloudEvent buffer, borrowed until cb. */
struct sv_event {
    TAILQ_ENTRY(sv_event) link;
    struct host *h;
    const uint8_t *buf;
    size_t len;
    supervise_event_cb cb;
    void *arg;
    struct event *deadline;
    uint32_t deadline_ms;
    uint32_t delivery;
    struct proc *p; /* the host process it is in flight on */
    bool waiting;   /* in flight, prefetched: queued in its host, not started,
                       its deadline not running yet */
    bool delivered; /* this attempt counts (supervise_event_cb): it reached
                       a host, and was not put back in the queue since */
    int64_t started_us;     /* monotonic, when its host started it */
    struct native_job *job; /* in process: its call, while in flight */
    bool journaled;     /* a broker delivery: waits while deliveries are held */
    bool deadline_read; /* its deadline came: the channel is read first */
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
    uint32_t refused_version; /* a reload it failed: not sent again */
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
    /* Why its death is not its worker's fault (static), or NULL: it died
     * with its zygote or the launcher, or was a pool host that died
     * before it took the worker's code.  Such a death is not charged
     * (exits.c): its events go back to the queue uncounted, and the
     * crash-loop window does not count it. */
    const char *blameless;
    bool from_pool; /* taken from the warm pool (pool.c) */
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

/*
 * How a worker's code runs: in its host processes (sv_ops_procs, pump.c)
 * or as a library in the master, checked by a validator process (the
 * in-process path, sv_ops_inproc, inproc_path.c).  h->ops is chosen by
 * w->in_process as h is made.  The pump (sv_pump(): stop here if h is
 * closing, bring it to the worker's version, answer the Load waiters,
 * hand out the queue, settle), an overrun deadline and a stop of the
 * worker go through it instead of asking which path h is on.  The
 * operations may run the caller's callbacks: callers check h->forgotten
 * after each.
 */
struct sv_host_ops {
    /* Whether h is going or cannot run (the daemon stops; in process,
     * also the worker's stop, or the path disabled): then what waits is
     * failed or answered here, and the pump stops. */
    bool (*closing)(struct host *h);
    /* Brings h to the worker's current version: reloads the processes
     * that run another once nothing is in flight on them, or starts a
     * validator.  Whether events may be handed out now. */
    bool (*prepare)(struct host *h);
    /* Whether h runs the worker's current version (on every serving
     * process): the Load waiters are answered then. */
    bool (*current)(const struct host *h);
    /* Hands the first queued event on (or fails it).  0, or -1 when
     * nothing can take it now: it stays queued. */
    int (*deliver)(struct host *h);
    /* After the queue was handed out: processes to start, prefetching,
     * the idle and heartbeat timers; or the library's queue flushed. */
    void (*settle)(struct host *h);
    /* ev, in flight on p (NULL in process) and out of h->inflight now,
     * overran its deadline: it completes with "timeout", and what ran it
     * is dealt with (its process killed, its other events requeued; or,
     * as an in-process call cannot be stopped, hooks->stuck told). */
    void (*overrun)(struct host *h, struct sv_event *ev, struct proc *p);
    /* The worker was stopped (supervise_apply(); its Loads and queue
     * failed already): what runs it goes.  Keeps done (may be NULL) with
     * sv_host_wait_gone() and returns true when it runs later, once h is
     * gone; false: the caller runs it now. */
    bool (*stop)(struct host *h, void (*done)(struct worker *w, void *arg),
                 void *arg);
};

extern const struct sv_host_ops sv_ops_procs;
extern const struct sv_host_ops sv_ops_inproc;

struct host {
    LIST_ENTRY(host) link;
    struct supervisor *sv;
    struct worker *w;
    const struct sv_host_ops *ops; /* how w's code runs (w->in_process) */
    struct proc_list procs;        /* its live processes, oldest first */
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
    struct event *kick; /* runs sv_pump() on the next loop turn */
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
    size_t ninproc;       /* open in-process libraries */
    bool hold_deliveries; /* supervise_hold_deliveries() */
    bool shutting_down;
    unsigned shutdown_grace_ms;
    void (*shutdown_done)(void *arg);
    void *shutdown_arg;
    struct event *shutdown_ev;
};

/* ---- supervise.c: the interface, holding hosts, their waiters --------- */

/* Whether the head of h's queue may go to a host now: there is one, and
 * it is not a delivery held by supervise_hold_deliveries() (pump.c). */
bool sv_queue_ready(const struct host *h);

/* Arms ev to fire in ms milliseconds (an alert if libevent refuses). */
void sv_timer_ms(struct event *ev, uint64_t ms);
/* Disarms ev; NULL is fine. */
void sv_timer_del(struct event *ev);

/* Sets w's observed state to s and tells hooks->on_state (nothing when
 * it is s already). */
void sv_state_set(struct supervisor *sv, struct worker *w, enum worker_state s);

/* The deadline of one event of w, and of a Load: limits.timeout_ms, else
 * the daemon's message_timeout_ms. */
uint32_t sv_deadline_ms(const struct supervisor *sv, const struct worker *w);

/* Holds h across work that may run the caller's callbacks (see
 * Re-entrancy above); sv_host_release() lets go and frees h if it was
 * forgotten and nobody else holds it. */
void sv_host_hold(struct host *h);
void sv_host_release(struct host *h);

/* Runs sv_pump() for h on the next loop turn (not once forgotten). */
void sv_host_kick(struct host *h);

/* How many host processes w may have: limits.concurrency for an engine
 * whose concurrency is processes (engines.h), else one (its threads are
 * the host's business; an in-process worker has one validator). */
unsigned sv_host_max_procs(const struct host *h);

/* Whether a process of h other than `skip` (may be NULL) is serving. */
bool sv_host_serving_other(const struct host *h, const struct proc *skip);

/* Whether every serving process of h runs w's current version (and one
 * does): what a Load's waiters wait for. */
bool sv_host_all_current(const struct host *h);

/* w->pid: its first (oldest) process's, 0 when none runs (left alone
 * while an in-process library runs). */
void sv_host_update_pid(struct host *h);

/* Asks every process of h to go (sv_proc_shutdown()); the caller holds h
 * (sv_host_hold()): a forget meanwhile must not free it under the loop. */
void sv_host_shutdown_procs(struct host *h, enum proc_stop stop,
                            uint64_t grace_ms);

/* Completes the Load waiters: type NULL for success.  Then the callbacks
 * waiting for the host to be gone (supervise_apply of "stopped"). */
void sv_host_finish_loads(struct host *h, const char *type, const char *msg);
void sv_host_finish_gones(struct host *h);

/* Keeps done (may be NULL) to run once h is gone (sv_host_finish_gones()).
 * Whether it did: false for NULL, or when out of memory (the caller runs
 * it now then). */
bool sv_host_wait_gone(struct host *h,
                       void (*done)(struct worker *w, void *arg), void *arg);

/* Leaves the worker failed: events and loads fail with type/msg until a
 * reset (supervise_load, supervise_apply of running). */
void sv_host_set_failed(struct host *h, const char *type, const char *msg);

/* Fails the host for good (until a reset) with type/msg: its processes
 * go, the state is failed, loads and queued events fail.  Callers check
 * h->forgotten afterwards. */
void sv_host_fail(struct host *h, const char *type, const char *msg);

/* During the daemon's shutdown: once no host process and no in-process
 * library is left, runs the shutdown's done on the next loop turn. */
void sv_shutdown_check(struct supervisor *sv);

/* ---- proc.c: a host process (start, kill, shutdown, free) ------------- */

/* A new record of a host process for h (NULL: a pool host's), its timers
 * made, not started and in no list; NULL when out of memory.
 * sv_proc_free() frees one (its pending GatewayCalls are dropped, its
 * channel and descriptors closed). */
struct proc *sv_proc_new(struct supervisor *sv, struct host *h);
void sv_proc_free(struct proc *p);

/* Spawns a host process for h (state starting), or takes a ready one from
 * its engine's pool; the Load follows the Hello.  On failure the worker
 * is failed with the reason (sv_host_fail()). */
void sv_proc_start(struct host *h);

/* p takes work: not stopping, not killed, its channel open. */
bool sv_proc_serving(const struct proc *p);
/* p is serving and runs w's current version. */
bool sv_proc_current(const struct proc *p, const struct worker *w);

/* The pid the logs name: the host itself, not its init. */
int sv_proc_pid(const struct proc *p);

/* Frees p's channel, if open (pending calls fail: their callbacks ignore
 * it), and stops its timers (the Shutdown's grace, the Load's deadline,
 * heartbeats, idle reaping). */
void sv_proc_close_channel(struct proc *p);
void sv_proc_stop_timers(struct proc *p);

/*
 * Kills p now (SIGKILL) for `reason` (a word of DESIGN §6; the first
 * reason given wins), closes its channel, and fails what waits on it: the
 * host's in-flight events and Load waiters.  The exit itself is classified
 * when reaped.  Callers check h->forgotten afterwards.
 */
void sv_proc_kill(struct proc *p, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Asks p to drain and exit within the grace (SIGKILL after it).  Called
 * again, only upgrades what the exit will mean. */
void sv_proc_shutdown(struct proc *p, enum proc_stop stop, uint64_t grace_ms);

/* How long a host that closed its channel unasked has to exit: the
 * shutdown grace, at least LINGER_MS. */
uint64_t sv_proc_linger_ms(const struct supervisor *sv);

/* ---- load.c: the Load ------------------------------------------------- */

/* Reads the code of w's current version into a sealed memfd for p.
 * Returns 0, or -1 with a message in err. */
int sv_load_take_code(struct proc *p, struct worker *w, char *err,
                      size_t errlen);

/* Sends the Load of p->code_version with p->memfd (which the channel
 * takes) and starts its deadline.  Returns 0, or -1 with errno. */
int sv_load_send(struct proc *p);

/* A hot reload: the code of w's current version to the running host p
 * (nothing in flight on it); a failure to send kills it. */
void sv_load_reload(struct proc *p);

/* p->load_timer: no Loaded within the deadline kills p (timeout). */
void sv_load_on_timeout(evutil_socket_t fd, short what, void *arg);

/* ---- heartbeat.c: heartbeats and idle reaping ------------------------- */

/* p->hb: a Heartbeat to an idle loaded host (or a ready pool host), and
 * p->hb_timeout: no answer in time kills it (timeout). */
void sv_heartbeat_on_timer(evutil_socket_t fd, short what, void *arg);
void sv_heartbeat_on_timeout(evutil_socket_t fd, short what, void *arg);

/* How long a host of w may stay idle: w's idle_timeout_s, else the
 * daemon's, in ms (0: never reaped). */
uint64_t sv_idle_timeout_ms(const struct supervisor *sv,
                            const struct worker *w);
/* p->idle: a host idle that long is asked to go (STOP_IDLE). */
void sv_idle_on_timer(evutil_socket_t fd, short what, void *arg);

/* ---- pump.c: the pump and the worker's events ------------------------- */

/* What to do next for h, through h->ops (struct sv_host_ops): nothing
 * once forgotten; its queue failed while it is failed. */
void sv_pump(struct host *h);

/* Queues one event of h (a copy of event[0..len)) with its callback and
 * kicks h.  0, or -1 when out of memory (cb not called). */
int sv_event_queue(struct host *h, const uint8_t *event, size_t len,
                   uint32_t delivery, supervise_event_cb cb, void *arg);

/* Runs ev's callback (ev already out of its list) and frees ev. */
void sv_event_complete(struct host *h, struct sv_event *ev,
                       const struct ipc_result *r, const char *type,
                       const char *msg);

/* Fails every queued event.  Callbacks may queue more: those fail too. */
void sv_event_fail_queued(struct host *h, const char *type, const char *msg);

/* Fails the events in flight on p (every one when p is NULL): the
 * others go on.  Those p had only prefetched never ran: they go back to
 * the queue instead. */
void sv_event_fail_inflight(struct host *h, struct proc *p, const char *type,
                            const char *msg);

/* Puts every event in flight on p back at the front of the queue, in
 * order, uncounted (their host died for a cause not theirs). */
void sv_event_requeue_inflight(struct host *h, struct proc *p);

/* ---- pool.c: the warm pool -------------------------------------------- */

/* Makes the pools of the engines whose descriptor says warm > 0 (empty:
 * supervise_pool_fill() fills them).  0, or -1 when out of memory (the
 * pools made are counted in sv->npools, for sv_pool_free()). */
int sv_pool_init(struct supervisor *sv, const struct engines *engines);
/* No refill any more (the daemon's shutdown); sv_pool_free() frees the
 * pools (their hosts were freed with sv->procs). */
void sv_pool_stop(struct supervisor *sv);
void sv_pool_free(struct supervisor *sv);

/* Gives h a ready host of its engine's pool, when there is one and w's
 * limits are the pool's (its cgroup's memory limit and RLIMIT_AS were set
 * as it started): it gets its Load now, and the pool a new host once no
 * host of the engine starts, off this event's path.  Whether it did (a
 * failure to read the code fails h). */
bool sv_pool_take(struct host *h);

/* The launcher's answer to a pool host's spawn (sv_launcher_on_read()). */
void sv_pool_spawned(struct supervisor *sv, const struct launcher_spawned *r);

/* A worker's host of e loaded its code: the engine's pool host failures
 * are no longer in a row, and a pool given up on is refilled. */
void sv_pool_worker_started(struct supervisor *sv,
                            const struct engines_entry *e);

/* Pool host p ended (sv_proc_finalize(), before it frees p): asked to
 * (the daemon stops), or a failure, replaced after a backoff. */
void sv_pool_lost(struct proc *p, const char *reason, const char *how);

/* ---- inproc_path.c: the in-process path (DESIGN §4, inproc.h) --------- */

/* The validator p's Loaded (ok): opens the library it handed back in the
 * master, in place of the one open (a reload: nothing is in flight). */
void sv_ip_loaded(struct proc *p, const struct ipc_loaded *l, int *fds,
                  unsigned nfds);

/* Closes h's library, if open: its unanswered gateway calls get a 503 now
 * (their later answers are dropped), running calls keep it until they
 * return (inproc.h). */
void sv_ip_close(struct host *h);

/* ---- channel.c: the channel of a host process ------------------------- */

/* Opens p's channel on fd (which it takes, also on failure): the
 * handshake's deadline runs from now; its Hello, frames and close come
 * to channel.c.  NULL with errno. */
struct ipc_channel *sv_channel_open(struct proc *p, int fd);

/* ---- exits.c: exits, restarts, the launcher's reports ----------------- */

/* p exited and its channel is closed: classify, log, update the worker
 * (a restart after a backoff for an unexpected exit), free p. */
void sv_proc_finalize(struct proc *p);

/* h->backoff: one new process for each that crashed since. */
void sv_restart_on_backoff(evutil_socket_t fd, short what, void *arg);

/* The launcher's socket is readable: its death reports and answers to
 * pool hosts' spawns (launcher_client.h); its loss ends every host. */
void sv_launcher_on_read(evutil_socket_t fd, short what, void *arg);

/* The reaper's callback (reap.h): the master's own children, the
 * launcher only. */
bool sv_launcher_on_reaped(pid_t pid, int wstatus, void *arg);

#endif /* WM_MASTER_SUPERVISE_INTERNAL_H */
