/*
 * channel.c — the master's end of a host process's channel
 * (ipc/channel.h): the handshake (the host's Hello: its max_inflight, its
 * prefetch, the confinement it applied, held against min_confinement),
 * the frames a host may send unasked (Log, GatewayCall) and the answers to
 * its GatewayCalls, and the channel's close.  Anything else a host sends
 * gets it killed (protocol): nothing a host sends may crash the master.
 * The answers to the master's own calls (Loaded, Result, Heartbeat) go to
 * their callers' callbacks (load.c, pump.c, heartbeat.c).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "ipc/channel.h"
#include "master/core/conf.h"
#include "master/core/engines.h"
#include "master/core/log.h"
#include "master/supervise/inproc.h"
#include "master/supervise/supervise_internal.h"
#include "master/workers/activity.h"
#include "sandbox/sandbox.h"

/* The most events a host may ask to queue beyond those (its Hello's
 * prefetch): each waits behind the running ones, so a deep queue only
 * delays them. */
#define PREFETCH_CAP 64u

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
     * concurrency 1 (sv_load_send()): it runs one event at a time, and
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
              p->worker_id, sv_proc_pid(p), (int)hello->engine.len,
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
                 p->pool->e->name, sv_proc_pid(p), p->confinement);
        sv_timer_ms(p->hb, p->sv->conf->heartbeat_interval_ms);
        return 0;
    }
    if (sv_load_send(p) < 0) {
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
    case IPC_BODY_LOG: {
        int level = levels[clamp_level(f->u.log.level)];
        char label[160];
        if (p->h == NULL) { /* a pool host's */
            log_host(level, p->worker_id, f->u.log.message.ptr,
                     f->u.log.message.len);
            break;
        }
        log_host(level, activity_label(p->h->w, label, sizeof label),
                 f->u.log.message.ptr, f->u.log.message.len);
        activity_log_add(p->h->w, level, true, f->u.log.message.ptr,
                         f->u.log.message.len);
        break;
    }
    case IPC_BODY_GATEWAY_CALL: {
        struct supervise_call *c = calloc(1, sizeof *c);
        if (c == NULL) {
            sv_proc_kill(p, "protocol", "cannot take its GatewayCall: %s",
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
        sv_proc_kill(p, "protocol", "sent a %s frame%s", ipc_body_name(f->type),
                     nfds ? " with descriptors" : "");
        break;
    }
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
            sv_proc_kill(p, "protocol", "cannot answer its GatewayCall: %s",
                         strerror(errno));
    }
    free(c);
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
                  p->worker_id, sv_proc_pid(p), ipc_channel_status_name(status),
                  reason);
        sv_proc_close_channel(p);
        if (p->exited)
            sv_timer_ms(p->linger, 0);
        else if (!p->shutdown_sent) /* else the grace is running */
            sv_timer_ms(p->linger, sv_proc_linger_ms(p->sv));
        break;
    case IPC_CHANNEL_PROTOCOL:
        sv_proc_kill(p, "protocol", "%s", reason);
        break;
    case IPC_CHANNEL_HANDSHAKE:
        sv_proc_kill(p, "handshake", "%s", reason);
        break;
    case IPC_CHANNEL_CLOSED:
    default:
        sv_proc_kill(p, "crash", "the master's end of the channel failed: %s",
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
        sv_host_kick(p->h);
}

struct ipc_channel *
sv_channel_open(struct proc *p, int fd)
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
