/*
 * heartbeat.c — heartbeats and idle reaping.  A host process with nothing
 * in flight (a worker's loaded one, or a pool host that said hello) gets
 * a Heartbeat every heartbeat_interval_ms and is killed (timeout) when it
 * does not answer within heartbeat_timeout_ms; a busy one is judged by its
 * events' deadlines instead (sv_pump() arms these timers, a delivery
 * disarms them).  A worker's process idle for the worker's idle timeout
 * is asked to go (STOP_IDLE); pool hosts are never reaped as idle.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/queue.h>

#include "ipc/channel.h"
#include "master/core/conf.h"
#include "master/core/log.h"
#include "master/supervise/supervise_internal.h"
#include "master/workers/activity.h"

uint64_t
sv_idle_timeout_ms(const struct supervisor *sv, const struct worker *w)
{
    uint64_t s =
        w->idle_timeout_s ? w->idle_timeout_s : sv->conf->idle_timeout_s;
    return s * 1000;
}

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
        sv_proc_kill(p, "protocol", "answered a Heartbeat with %s",
                     ipc_body_name(reply->type));
        return;
    }
    if (!p->hb_outstanding)
        return; /* an event was sent meanwhile: the deadline judges now */
    p->hb_outstanding = false;
    sv_timer_del(p->hb_timeout);
    if (p->pool) { /* waiting in its pool: the next in an interval */
        sv_timer_ms(p->hb, p->sv->conf->heartbeat_interval_ms);
        return;
    }
    if (p->sv->hooks.heartbeat)
        p->sv->hooks.heartbeat(p->h->w, p->sv->arg);
    sv_host_kick(p->h); /* rearms the interval if still idle */
}

void
sv_heartbeat_on_timer(evutil_socket_t fd, short what, void *arg)
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
            sv_timer_ms(p->hb, p->sv->conf->heartbeat_interval_ms);
        return;
    }
    p->hb_outstanding = true;
    sv_timer_ms(p->hb_timeout, p->sv->conf->heartbeat_timeout_ms);
}

void
sv_heartbeat_on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct proc *p = arg;

    (void)fd;
    (void)what;
    sv_proc_kill(p, "timeout", "no answer to a Heartbeat within %llu ms",
                 (unsigned long long)p->sv->conf->heartbeat_timeout_ms);
}

void
sv_idle_on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct proc *p = arg;
    struct host *h = p->h;

    (void)fd;
    (void)what;
    if (h == NULL || p->stop != STOP_NONE || p->ninflight ||
        !TAILQ_EMPTY(&h->queue) || h->loads || h->w->status != WORKER_RUNNING)
        return;
    activity_log(h->w, LOG_INFO, "host pid %d idle for %llu s: stopping it",
                 sv_proc_pid(p),
                 (unsigned long long)(sv_idle_timeout_ms(p->sv, h->w) / 1000));
    sv_proc_shutdown(p, STOP_IDLE, p->sv->conf->shutdown_grace_ms);
}
