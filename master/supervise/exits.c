/*
 * exits.c — how host processes end: their exits as the launcher reports
 * them, the exit's classification, the worker's state after it, restarts
 * with backoff and the crash loop, and the launcher's own loss.
 *
 * A proc ends in two steps that come in either order: its exit (reported
 * by the launcher, which reaps it) and the close of its channel (EOF).  It
 * is finalized when both happened, so that the Results a host writes just
 * before exiting are read before its exit is classified.  A proc that
 * exits while a descendant keeps the socket open is given LINGER_MS; one
 * that closes its channel unasked and does not exit, the shutdown grace
 * (at least LINGER_MS), then it is killed (proc.c).  Finalizing
 * classifies the exit:
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
 * A death that is not the worker's fault (p->blameless) is not charged:
 * a host killed with its zygote (the launcher's death report says so), a
 * host of a launcher that died, a pool host that died killed before it
 * answered its first Load (died_in_pool()).  Its events go back to the
 * queue uncounted, its Load waiters wait for the next host, the crash-loop
 * window and last_exit are left alone, and the pump starts another host
 * at once (host_after_blameless()).  The log line says so.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "master/core/conf.h"
#include "master/core/log.h"
#include "master/supervise/launcher_client.h"
#include "master/supervise/reap.h"
#include "master/supervise/supervise_internal.h"

/* The largest backoff exponent (2^20 × any base is past any cap). */
#define BACKOFF_SHIFT_MAX 20u

static int64_t
now_ms(clockid_t clock)
{
    struct timespec ts;

    if (clock_gettime(clock, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- classifying an exit ---------------------------------------------- */

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

/* ---- restarts and the crash loop -------------------------------------- */

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
            sv_state_set(sv, w, WORKER_STATE_FAILED);
        return;
    }
    if (h->restarts_at == NULL && c->crash_loop_max) {
        h->restarts_at = calloc(c->crash_loop_max, sizeof *h->restarts_at);
        if (h->restarts_at == NULL) {
            sv_host_fail(h, reason, "out of memory");
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
        sv_host_fail(h, reason, msg);
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
    sv_state_set(sv, w, WORKER_STATE_PENDING);
    if (serving) {
        const struct proc *q;
        bool loaded = false;
        TAILQ_FOREACH (q, &h->procs, hlink)
            loaded |= sv_proc_serving(q) && q->loaded;
        sv_state_set(sv, w,
                     loaded ? WORKER_STATE_RUNNING : WORKER_STATE_STARTING);
    }
    sv_timer_ms(h->backoff, delay);
}

void
sv_restart_on_backoff(evutil_socket_t fd, short what, void *arg)
{
    struct host *h = arg;
    unsigned n = h->restarts_due;

    (void)fd;
    (void)what;
    h->restarts_due = 0;
    if (h->sv->shutting_down)
        return;
    sv_host_hold(h);
    /* One new process for each that crashed (several may have crashed
     * within one backoff). */
    while (n-- > 0 && h->nprocs < sv_host_max_procs(h) && !h->forgotten &&
           !h->failed) {
        h->w->restarts++;
        log_info("worker %s: restarting its host (restart %u)", h->w->id,
                 h->w->restarts);
        sv_proc_start(h);
    }
    sv_host_release(h);
}

/* A death not the worker's fault (p->blameless): nothing is charged.  Its
 * events went back to the queue uncounted; the pump starts a process for
 * them at once (the launcher starts a new zygote if one is needed), and
 * the crash-loop window does not count it. */
static void
host_after_blameless(struct host *h, bool live)
{
    struct supervisor *sv = h->sv;
    struct worker *w = h->w;

    if (live || h->failed)
        return; /* its other processes' state, or the failure's */
    if (w->status == WORKER_SUSPENDED)
        sv_state_set(sv, w, WORKER_STATE_SUSPENDED);
    else if (w->status != WORKER_RUNNING || sv->shutting_down)
        sv_state_set(sv, w, WORKER_STATE_STOPPED);
    else
        sv_state_set(sv, w,
                     evtimer_pending(h->backoff, NULL) ? WORKER_STATE_PENDING
                                                       : WORKER_STATE_IDLE);
}

/* Whether p, taken from the warm pool, died killed before it answered
 * its first Load, by no one of the daemon (not us, not the memory
 * limit): a pool host that died before it took the worker's code (an
 * operator's kill -9 while it waited, its zygote's loss).  The worker's
 * own code can only have been reading its Load then. */
static bool
died_in_pool(const struct proc *p)
{
    return p->from_pool && !p->loaded && p->kill_reason == NULL && !p->oom &&
           WIFSIGNALED(p->wstatus) && WTERMSIG(p->wstatus) == SIGKILL;
}

/* ---- finalizing a process --------------------------------------------- */

void
sv_proc_finalize(struct proc *p)
{
    struct supervisor *sv = p->sv;
    struct host *h = p->h;
    char how[128], msg[352];
    int sig, code;
    const char *reason = classify(p, &sig, &code);
    enum proc_stop stop = p->stop;
    bool killed = p->kill_reason != NULL;
    int nr = strcmp(reason, "seccomp") == 0 ? p->syscall : -1;

    if (p->blameless == NULL && died_in_pool(p))
        p->blameless = "a pool host, it died before it took the worker's code";
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
    if (p->blameless)
        log_warning("host pid %d of worker %s exited: %s, not the worker's "
                    "fault (%s): not charged to it",
                    sv_proc_pid(p), p->worker_id, how, p->blameless);
    else
        log_write(stop == STOP_NONE || killed ? LOG_WARNING : LOG_INFO,
                  "host pid %d of worker %s exited: %s, reason %s%s%s",
                  sv_proc_pid(p), p->worker_id, how, reason, killed ? ": " : "",
                  killed ? p->kill_msg : "");
    LIST_REMOVE(p, link);
    sv->nprocs--;
    if (h == NULL) {
        if (p->pool)
            sv_pool_lost(p, reason, how);
        sv_proc_free(p);
        sv_shutdown_check(sv);
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
        sv_proc_free(p);
        sv_host_hold(h);
        if (stop == STOP_NONE)
            sv_host_finish_loads(h, reason, msg);
        sv_host_kick(h);
        sv_host_release(h);
        sv_shutdown_check(sv);
        return;
    }
    /* The worker's other processes go on: the state is the last one's
     * to set, and a Load's waiters wait for the serving ones. */
    bool live = h->nprocs > 0;
    bool serving = sv_host_serving_other(h, NULL);
    sv_host_update_pid(h);
    /* (A death not the worker's is not its last exit: the log says it.) */
    if (p->blameless == NULL) {
        w->last_exit.present = true;
        snprintf(w->last_exit.reason, sizeof w->last_exit.reason, "%s", reason);
        w->last_exit.signal = sig;
        w->last_exit.code = code;
        w->last_exit.syscall = nr;
        snprintf(w->last_exit.syscall_name, sizeof w->last_exit.syscall_name,
                 "%s", nr >= 0 ? p->syscall_name : "");
        w->last_exit.at_ms = now_ms(CLOCK_REALTIME);
    }

    sv_host_hold(h);
    if (p->blameless) /* not tried: for the next host, uncounted */
        sv_event_requeue_inflight(h, p);
    else
        sv_event_fail_inflight(h, p, reason, msg);
    /* Loads asked for after a requested stop, or whose host died for a
     * cause not the worker's, wait for the next host. */
    if (!h->forgotten && stop == STOP_NONE && !serving && !p->blameless)
        sv_host_finish_loads(h, reason, msg);
    if (h->forgotten)
        goto out;
    if (live && stop != STOP_NONE) {
        sv_host_kick(h);
        goto out;
    }
    switch (stop) {
    case STOP_USER:
    case STOP_DAEMON:
        if (killed)
            sv_state_set(sv, w, WORKER_STATE_KILLED);
        else if ((sig || code) && p->blameless == NULL)
            sv_state_set(sv, w, WORKER_STATE_FAILED);
        else
            sv_state_set(sv, w,
                         w->status == WORKER_RUNNING && stop == STOP_USER
                             ? WORKER_STATE_IDLE
                             : WORKER_STATE_STOPPED);
        break;
    case STOP_IDLE:
    case STOP_VALIDATED:
        /* (Another process of the worker that crashed meanwhile restarts
         * after its backoff.) */
        sv_state_set(sv, w,
                     w->status == WORKER_SUSPENDED ? WORKER_STATE_SUSPENDED
                     : evtimer_pending(h->backoff, NULL) ? WORKER_STATE_PENDING
                                                         : WORKER_STATE_IDLE);
        break;
    case STOP_FAILED:
        /* Failed unless a load or a start reset it meanwhile. */
        sv_state_set(sv, w,
                     h->failed ? WORKER_STATE_FAILED : WORKER_STATE_IDLE);
        break;
    case STOP_NONE:
        if (p->blameless)
            host_after_blameless(h, live);
        else
            host_after_crash(h, reason, how, live, serving);
        break;
    }
    if (!h->forgotten && !live)
        sv_host_finish_gones(h);
    sv_host_kick(h);
out:
    sv_host_release(h);
    sv_proc_free(p);
    sv_shutdown_check(sv);
}

/* ---- the launcher's reports ------------------------------------------- */

/* p ended, as the launcher reports (d) or as its loss implies. */
static void
proc_exited(struct proc *p, int wstatus)
{
    p->exited = true;
    p->wstatus = wstatus;
    /* Its timers judged a live process: the exit says how it ended. */
    sv_proc_stop_timers(p);
    if (p->ch == NULL)
        sv_proc_finalize(p);
    else /* read what it wrote before dying, then finalize */
        sv_timer_ms(p->linger, LINGER_MS);
}

/* The launcher is gone: its hosts died with it (they die with their
 * parent), and no host can start any more.  Every proc ends, its death
 * not its worker's fault (its events are not charged); the daemon is told
 * (hooks.launcher_lost). */
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
        if (p->kill_reason == NULL && p->blameless == NULL)
            p->blameless = "the launcher that started it died";
        proc_exited(p, SIGKILL); /* a wait status: killed by SIGKILL */
    }
    if (sv->hooks.launcher_lost)
        sv->hooks.launcher_lost(why, sv->arg);
}

void
sv_launcher_on_read(evutil_socket_t fd, short what, void *arg)
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
            sv_pool_spawned(sv, &m.spawned);
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
        if (d.zygote_lost && p->blameless == NULL)
            p->blameless = "its zygote died";
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

bool
sv_launcher_on_reaped(pid_t pid, int wstatus, void *arg)
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
