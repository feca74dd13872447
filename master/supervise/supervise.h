/*
 * supervise.h — engine-host processes: spawn, handshake, load, events,
 * heartbeats, deadlines, restarts, reaping (DESIGN §2, §3, §7).
 *
 * The room master/supervise/: host processes — this interface and its
 * core (supervise.c: the host records, what waits on a host, the daemon's
 * shutdown) over a private header for the room's files only
 * (supervise_internal.h: struct host, struct proc and what the files
 * share); a host process started, shut down and killed (proc.c); the Load
 * and hot reloads (load.c); a worker's events and the pump that hands
 * them to its processes (pump.c); the frames a host sends (channel.c);
 * heartbeats and idle reaping (heartbeat.c); exits, their classification,
 * restarts and the crash loop (exits.c); the warm pool (pool.c); the
 * in-process path of native workers (inproc_path.c over inproc.c); the
 * launcher's client (launcher_client.c) and the reaper of the master's
 * own children (reap.c).
 *
 * One host process serves one worker; a worker of an engine whose
 * concurrency is processes (engines.h) has up to limits.concurrency of
 * them, over which its events are spread.  Hosts start lazily (on the first
 * event, or when a create or reload must validate code), are reaped after
 * the worker's idle timeout, and are restarted with exponential backoff
 * after a crash, up to a crash-loop cap; a death that is not the worker's
 * fault (with its zygote or the launcher, a pool host's before its Load)
 * is restarted at once and charges nothing (exits.c).  The supervisor owns
 * struct host and writes the observed fields of struct worker (state, pid: the
 * first host's, restarts, last_exit); it never touches the desired status or
 * the store.
 *
 * The warm pool: for an engine whose descriptor says `warm = N`
 * (engines.h), N hosts are kept started, confined and handshaken with no
 * worker (pool hosts: spawned like a worker's with no memory limit, their
 * cgroup pool-M, WM_WORKER_ID=pool), heartbeaten but never reaped as
 * idle.  A worker's new host process (its first, a restart, one more of
 * several) is taken from there when one is ready and the worker sets no
 * limits.memory_mb (its cgroup and RLIMIT_AS are the pool's then): it
 * gets the worker's Load at once, and the pool another host once no host
 * of the engine is starting, spawned without waiting for the launcher's
 * answer.  A pool host that fails (a
 * refused spawn, a failed handshake, a death) is replaced after a
 * backoff, and not after POOL_FAILURES_MAX in a row, until a worker's
 * host of the engine loads.  Pool hosts count as hosts
 * (supervise_hosts(), host_uid_count) and end with the daemon.
 *
 * Hosts are untrusted: a malformed frame, a protocol violation, a missed
 * handshake or heartbeat, or an overrun deadline gets the host killed and
 * classified, never a master crash.  Hosts are started, killed and reaped
 * by the privileged launcher (sandbox/launcher.h, through launcher_client.h),
 * which the supervisor forks as it is made: every exit, of hosts and of what
 * they started, is reaped there and reported here, logged with pid,
 * worker, signal or code and reason.
 */
#ifndef WM_MASTER_SUPERVISE_H
#define WM_MASTER_SUPERVISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/frame.h"
#include "master/workers/worker.h"

struct event_base;
struct conf;
struct engines;
struct engines_entry;
struct sandbox_support;
struct supervisor;
struct supervise_call;

struct supervise_hooks {
    /* The worker's host state changed (old → w->state).  Lifecycle events
     * are derived from here. */
    void (*on_state)(struct worker *w, enum worker_state old, void *arg);
    /* The code of w's current version, to Load: *data malloc'd, the
     * supervisor frees it.  Returns 0, or -1 with a message. */
    int (*code)(struct worker *w, uint8_t **data, size_t *len, char *err,
                size_t errlen, void *arg);
    /* A GatewayCall of w's host (may be NULL: every call is answered 501).
     * The call's fields are valid during the hook only; answer it exactly
     * once, now or later, with supervise_call_reply(). */
    void (*gateway)(struct worker *w, const struct ipc_gateway_call *call,
                    struct supervise_call *c, void *arg);
    /* w's idle host echoed a heartbeat (may be NULL). */
    void (*heartbeat)(struct worker *w, void *arg);
    /* An in-process call of w overran its deadline and goes on, as
     * nothing can stop it: no host exit will report it (may be NULL). */
    void (*stuck)(struct worker *w, const char *message, void *arg);
    /* The launcher is gone (why: "ended with signal 9 (SIGKILL)"): every
     * host died with it and none can start again; the daemon should exit
     * (may be NULL). */
    void (*launcher_lost)(const char *why, void *arg);
};

/* Answers a GatewayCall (see supervise_hooks.gateway) and frees c; a host
 * that died meanwhile gets nothing.  error NULL for none. */
void supervise_call_reply(struct supervise_call *c, int32_t status,
                          const uint8_t *response, size_t len,
                          const char *error);

/* Outcome of a load or of one event.  On success error_type is NULL (and,
 * for events, r holds the outputs, valid during the call only).  Otherwise
 * error_type is a word of DESIGN §6's vocabulary (load_error, exception,
 * worker_error, crash, timeout, oom, protocol, handshake, ...) and message
 * says why; r may carry the worker's Error (exception_type, traceback). */
typedef void (*supervise_done_cb)(struct worker *w, const struct ipc_result *r,
                                  const char *error_type, const char *message,
                                  void *arg);

/* Outcome of one event (supervise_process_delivery()): as
 * supervise_done_cb, and whether this attempt counts as a delivery of the
 * event.  It counts (delivered true) once the event reached a host: was
 * written into its channel, or handed to the in-process library.  It does
 * not when the event failed while still queued in the master (its worker
 * failed, stopped or was deleted, the daemon stops), nor when it was in a
 * host that died for a cause that is not the worker's (its zygote or the
 * launcher died, a timeout of another event of the host): such an event
 * was not tried, and its delivery count and the worker's crash-loop budget
 * stay as they were (DESIGN §6, §7). */
typedef void (*supervise_event_cb)(struct worker *w, const struct ipc_result *r,
                                   const char *error_type, const char *message,
                                   bool delivered, void *arg);

/*
 * A supervisor, and its launcher forked now with what decides how hosts
 * are confined (launcher_client.h): the engines' host binaries by name and, for
 * a build with the sandbox, s (what start-up detection found: hosts of their
 * own user get new mount (a private root), pid (an init), net, ipc, uts and
 * cgroup namespaces of the types found, and a Landlock domain of the ABI
 * found); NULL: hosts unconfined.  Made before the daemon drops its privileges.
 * NULL with a message in err.
 */
struct supervisor *supervise_new(struct event_base *base,
                                 const struct conf *conf,
                                 const struct engines *engines,
                                 const struct sandbox_support *s,
                                 const struct supervise_hooks *hooks, void *arg,
                                 char *err, size_t errlen);
void supervise_free(struct supervisor *sv);

/* Starts w's host if none runs and loads w->version's code into it (a
 * running host gets a Load: the hot reload, served after its in-flight
 * events).  cb reports the host's Loaded: ok, or load_error with the host's
 * message. */
int supervise_load(struct supervisor *sv, struct worker *w,
                   supervise_done_cb cb, void *arg);

/* Processes one event (an ABI CloudEvent buffer, 8-aligned, borrowed: it
 * must stay valid until cb runs) on w's host, starting it if needed,
 * within w's deadline.  Returns -1 (cb not called) if w's status does not
 * allow events.  An invoke: never held by supervise_hold_deliveries(). */
int supervise_process(struct supervisor *sv, struct worker *w,
                      const uint8_t *event, size_t len, supervise_event_cb cb,
                      void *arg);
/* The same for a broker delivery, telling the host which delivery of the
 * event this is (1 for the first; Process.delivery); held while
 * supervise_hold_deliveries() holds. */
int supervise_process_delivery(struct supervisor *sv, struct worker *w,
                               const uint8_t *event, size_t len,
                               uint32_t delivery, supervise_event_cb cb,
                               void *arg);

/* Holds (hold true) or lets go of the events of
 * supervise_process_delivery() not yet handed to a host: held, they wait
 * in their host's queue, in order (and what queues behind them), while
 * the broker cannot store their settlements (flow.c); let go, every host
 * goes on.  Events already in a host are not called back. */
void supervise_hold_deliveries(struct supervisor *sv, bool hold);

/* Applies w->status: running (nothing to do: hosts start lazily),
 * suspended (no new events; the host stays), stopped (Shutdown with the
 * grace, SIGKILL after it).  done, if not NULL, runs once the host is gone
 * or immediately when there is none. */
void supervise_apply(struct supervisor *sv, struct worker *w,
                     void (*done)(struct worker *w, void *arg), void *arg);

/* Kills w's host at once and forgets w (delete).  Pending callbacks run
 * with error "deleted" before it returns. */
void supervise_forget(struct supervisor *sv, struct worker *w);

/* Daemon shutdown: Shutdown to every host, SIGKILL after grace_ms, then
 * done. */
void supervise_shutdown(struct supervisor *sv, unsigned grace_ms,
                        void (*done)(void *arg), void *arg);

/* Number of live host processes, of every worker (for /health, the
 * metrics and tests). */
size_t supervise_hosts(const struct supervisor *sv);

/* Fills the warm pools of the available engines (supervise.h), in the
 * background: the daemon calls it once ready (after recovery), and again
 * whenever an engine may have become available. */
void supervise_pool_fill(struct supervisor *sv);

/* The pool hosts of e ready to be taken now (0 for an engine without a
 * pool). */
size_t supervise_pool_ready(const struct supervisor *sv,
                            const struct engines_entry *e);

/* The confinement w's running host said in its Hello it applied to itself
 * ("seccomp", ...), or NULL when no host of w has said hello. */
const char *supervise_confinement(const struct worker *w);

/* The pids of w's host processes, oldest first (w->pid is the first), the
 * first max of them in pids (NULL when max is 0); returns how many there
 * are.  None for an in-process worker (its pid is the daemon's). */
size_t supervise_pids(const struct worker *w, int *pids, size_t max);

#endif /* WM_MASTER_SUPERVISE_H */
