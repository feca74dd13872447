/*
 * proc.c — one host process (struct proc): made and freed, started
 * (spawned through the launcher, or taken from the warm pool), asked to
 * shut down, killed.
 *
 * A proc is killed through the launcher (launcher_client_kill(): its init
 * and so its pid namespace, its process group); until it is reaped the
 * master keeps a copy of its channel's descriptor (hold_fd), lest the
 * host see the end of the channel first and exit on its own.  Whatever
 * waits on a killed proc fails at once with the reason (its in-flight
 * events; the Load waiters with the last serving proc); the exit is
 * classified when it is reaped (exits.c).  A proc asked to shut down gets
 * the grace, then is killed; one that closed its channel unasked gets
 * sv_proc_linger_ms() to exit.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc/channel.h"
#include "master/core/conf.h"
#include "master/core/engines.h"
#include "master/core/log.h"
#include "master/core/tenant_meter.h"
#include "master/core/tenant_share.h"
#include "master/supervise/launcher_client.h"
#include "master/supervise/supervise_internal.h"
#include "master/workers/activity.h"

/* ---- what a process is ------------------------------------------------ */

bool
sv_proc_serving(const struct proc *p)
{
    return p->stop == STOP_NONE && !p->kill_reason && p->ch != NULL;
}

bool
sv_proc_current(const struct proc *p, const struct worker *w)
{
    return sv_proc_serving(p) && p->loaded && !p->load_sent &&
           p->loaded_version == w->version;
}

int
sv_proc_pid(const struct proc *p)
{
    return (int)(p->host_pid > 0 ? p->host_pid : p->pid);
}

/* ---- kill and shutdown ------------------------------------------------ */

void
sv_proc_close_channel(struct proc *p)
{
    if (p->ch) {
        struct ipc_channel *ch = p->ch;
        p->ch = NULL;
        ipc_channel_free(ch); /* pending calls fail: their callbacks
                                 ignore it */
    }
}

void
sv_proc_stop_timers(struct proc *p)
{
    sv_timer_del(p->grace);
    sv_timer_del(p->load_timer);
    sv_timer_del(p->hb);
    sv_timer_del(p->hb_timeout);
    sv_timer_del(p->idle);
    p->hb_outstanding = false;
}

void
sv_proc_kill(struct proc *p, const char *reason, const char *fmt, ...)
{
    struct host *h = p->h;
    va_list ap;

    if (p->kill_reason)
        return;
    p->kill_reason = reason;
    va_start(ap, fmt);
    vsnprintf(p->kill_msg, sizeof p->kill_msg, fmt, ap);
    va_end(ap);
    if (p->h)
        activity_log(p->h->w, LOG_WARNING, "killing host pid %d (%s): %s",
                     sv_proc_pid(p), reason, p->kill_msg);
    else
        log_warning("worker %s: killing host pid %d (%s): %s", p->worker_id,
                    sv_proc_pid(p), reason, p->kill_msg);
    if (!p->exited && launcher_client_kill(p->sv->launcher, p->seq) < 0)
        log_errno_err("worker %s: asking the launcher to kill pid %d",
                      p->worker_id, (int)p->pid);
    /* The launcher kills it in a moment: until it is reaped its channel
     * stays open, lest it see the end of it first and exit on its own
     * (its death is the SIGKILL's). */
    if (!p->exited && p->ch && p->hold_fd < 0)
        p->hold_fd = fcntl(ipc_channel_fd(p->ch), F_DUPFD_CLOEXEC, 0);
    sv_proc_close_channel(p);
    sv_proc_stop_timers(p);
    if (p->memfd >= 0) {
        close(p->memfd);
        p->memfd = -1;
    }
    if (p->exited) /* reaped already: finalize on the next loop turn */
        sv_timer_ms(p->linger, 0);
    if (h == NULL)
        return;
    sv_host_hold(h);
    sv_event_fail_inflight(h, p, reason, p->kill_msg);
    /* Load waiters wait for the version on every serving process: they
     * fail with the last. */
    if (!h->forgotten && !sv_host_serving_other(h, p))
        sv_host_finish_loads(h, reason, p->kill_msg);
    sv_host_release(h);
}

void
sv_proc_shutdown(struct proc *p, enum proc_stop stop, uint64_t grace_ms)
{
    struct host *h = p->h;
    struct ipc_frame f;

    if (p->stop == STOP_NONE || p->stop == STOP_IDLE)
        p->stop = stop;
    if (p->kill_reason || p->exited)
        return; /* dying or dead already; the exit will mean `stop` */
    /* (A validator whose library runs in the master is not the worker's
     * state.) */
    if (h && stop != STOP_FAILED && !(p->validator && h->ip) &&
        !sv_host_serving_other(h, p))
        sv_state_set(p->sv, h->w, WORKER_STATE_STOPPING);
    if (p->shutdown_sent)
        return;
    p->shutdown_sent = true;
    p->grace_ms = grace_ms;
    sv_timer_del(p->idle);
    sv_timer_del(p->hb);
    sv_timer_del(p->hb_timeout);
    p->hb_outstanding = false;
    sv_timer_ms(p->grace, grace_ms);
    if (p->ch == NULL)
        return; /* closed already: its exit is near (linger) */
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_SHUTDOWN;
    f.u.shutdown.grace_ms =
        grace_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)grace_ms;
    if (ipc_channel_send(p->ch, &f, NULL, 0) < 0)
        sv_proc_kill(p, "timeout", "cannot send Shutdown: %s", strerror(errno));
}

static void
on_grace(evutil_socket_t fd, short what, void *arg)
{
    struct proc *p = arg;

    (void)fd;
    (void)what;
    sv_proc_kill(p, "timeout", "still running %llu ms after Shutdown",
                 (unsigned long long)p->grace_ms);
}

uint64_t
sv_proc_linger_ms(const struct supervisor *sv)
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
                        p->worker_id, sv_proc_pid(p));
            sv_proc_close_channel(p);
        }
        sv_proc_finalize(p);
        return;
    }
    sv_proc_kill(p, "protocol",
                 "closed its channel but did not exit within %llu ms",
                 (unsigned long long)sv_proc_linger_ms(p->sv));
}

/* ---- made, freed, started --------------------------------------------- */

void
sv_proc_free(struct proc *p)
{
    struct supervise_call *c;

    while ((c = LIST_FIRST(&p->calls)) != NULL) {
        LIST_REMOVE(c, link);
        c->p = NULL; /* its answer is dropped */
    }
    sv_proc_close_channel(p);
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

struct proc *
sv_proc_new(struct supervisor *sv, struct host *h)
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
    p->load_timer = evtimer_new(sv->base, sv_load_on_timeout, p);
    p->hb = evtimer_new(sv->base, sv_heartbeat_on_timer, p);
    p->hb_timeout = evtimer_new(sv->base, sv_heartbeat_on_timeout, p);
    p->idle = evtimer_new(sv->base, sv_idle_on_timer, p);
    if (!p->linger || !p->grace || !p->load_timer || !p->hb || !p->hb_timeout ||
        !p->idle) {
        sv_proc_free(p);
        return NULL;
    }
    return p;
}

void
sv_proc_start(struct host *h)
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
        sv_host_fail(h, "engine_unavailable", err);
        return;
    }
    if (!e->available) {
        snprintf(err, sizeof err, "engine %s: %s", e->name,
                 e->reason ? e->reason : "unavailable");
        sv_host_fail(h, "engine_unavailable", err);
        return;
    }
    if (sv_pool_take(h))
        return;
    p = sv_proc_new(sv, h);
    if (p == NULL) {
        sv_host_fail(h, "crash", "out of memory");
        return;
    }
    p->validator = w->in_process;
    if (sv_load_take_code(p, w, err, sizeof err) != 0) {
        sv_proc_free(p);
        sv_host_fail(h, "load_error", err);
        return;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
        snprintf(err, sizeof err, "socketpair: %s", strerror(errno));
        sv_proc_free(p);
        sv_host_fail(h, "crash", err);
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
    snprintf(q.tenant, sizeof q.tenant, "%s", w->tenant);
    tenant_share_get(sv->conf, w->tenant, &q.cpu_weight, &q.cpu_max);
    (void)tenant_meter_get(w->tenant); /* its cgroup's usage is metered */
    int rc =
        launcher_client_spawn(sv->launcher, &q, sp[1], &r, err, sizeof err);
    close(sp[1]);
    /* What came meanwhile (death reports, a pool host's answer) was kept:
     * read it on the next loop turn, the socket may stay quiet. */
    if (sv->launcher_ev)
        event_active(sv->launcher_ev, EV_READ, 1);
    if (rc < 0 || r.error) {
        close(sp[0]);
        sv_proc_free(p);
        if (rc < 0)
            sv_host_fail(h, "crash", err);
        else
            sv_host_fail(h, r.fail_type, r.why);
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
    p->ch = sv_channel_open(p, sp[0]);
    int saved = errno;
    if (p->has_init)
        activity_log(w, LOG_INFO,
                     "host %s started%s, pid %d (its init %d), uid %u",
                     e->host_path,
                     p->validator ? " to validate the in-process library" : "",
                     (int)p->host_pid, (int)pid, (unsigned)r.uid);
    else
        activity_log(w, LOG_INFO, "host %s started%s, pid %d, uid %u",
                     e->host_path,
                     p->validator ? " to validate the in-process library" : "",
                     (int)pid, (unsigned)r.uid);
    if (h->ip == NULL) { /* else the library in the master still runs */
        sv_host_update_pid(h);
        if (!sv_host_serving_other(h, p))
            sv_state_set(sv, w, WORKER_STATE_STARTING);
    }
    if (p->ch == NULL) /* the descriptor is closed: the exit follows */
        sv_proc_kill(p, "crash", "cannot set up its channel: %s",
                     strerror(saved));
}
