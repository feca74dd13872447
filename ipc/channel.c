/*
 * channel.c — framed transport over a SOCK_STREAM socketpair (channel.h).
 *
 * Why a raw event and recvmsg(): descriptors travel with SCM_RIGHTS, which
 * libevent's bufferevents cannot carry, so the socket is read with
 * recvmsg() on every read (MSG_CMSG_CLOEXEC) into one receive buffer, and
 * written with sendmsg() from a queue of encoded frames.
 *
 * The transport is four files (channel_private.h lists them): the
 * channel's life and its pending calls here, sending in channel_send.c,
 * receiving in channel_recv.c, the Hello exchange in channel_handshake.c.
 *
 * Invariants: seq per direction starts at 1 and increases by one per
 * frame; a call's entry exists from its send until its reply or the close;
 * on_close runs at most once and never after ipc_channel_free(); the
 * channel's memory outlives every callback that runs on it (depth counts
 * the handlers on the stack, and a free inside one is completed by the
 * last to return).
 */
#include "config.h"

#include "ipc/channel.h"
#include "ipc/channel_private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

static void destroy(struct ipc_channel *ch);

/* ---- helpers --------------------------------------------------------- */

void
ipc_channel_fds_close(const int *fds, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* Handlers hold the channel: a free inside them completes on the way out. */
void
ipc_channel_enter(struct ipc_channel *ch)
{
    ch->depth++;
}

void
ipc_channel_leave(struct ipc_channel *ch)
{
    if (--ch->depth == 0 && ch->freed)
        destroy(ch);
}

static void
drop_fdq(struct ipc_channel *ch)
{
    for (unsigned i = 0; i < ch->nfdq; i++)
        ipc_channel_fds_close(ch->fdq[i].fds, ch->fdq[i].n);
    ch->nfdq = 0;
}

/* Stops all I/O: events off, descriptor closed, unsent frames and
 * unclaimed descriptors dropped.  Pending calls are the caller's. */
static void
shutdown_io(struct ipc_channel *ch)
{
    ch->closed = true;
    if (ch->rev)
        event_del(ch->rev);
    if (ch->wev)
        event_del(ch->wev); /* also takes it off the active list */
    if (ch->timer)
        event_del(ch->timer);
    ch->write_armed = false;
    ch->write_active = false;
    if (ch->fd >= 0) {
        close(ch->fd);
        ch->fd = -1;
    }
    ipc_channel_tx_drop(ch);
    drop_fdq(ch);
}

void
ipc_channel_pending_add(struct ipc_channel *ch, struct ipc_call *c)
{
    c->next = NULL;
    c->prev = ch->calls_last;
    if (ch->calls_last)
        ch->calls_last->next = c;
    else
        ch->calls = c;
    ch->calls_last = c;
    ch->ncalls++;
}
void
ipc_channel_pending_unlink(struct ipc_channel *ch, struct ipc_call *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        ch->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        ch->calls_last = c->prev;
    ch->ncalls--;
}

/* Fails every pending call with `error`, one at a time so that a callback
 * may free the channel (its free fails the rest). */
static void
fail_calls(struct ipc_channel *ch, const char *error)
{
    struct ipc_call *c;

    while ((c = ch->calls) != NULL) {
        ipc_channel_pending_unlink(ch, c);
        if (c->cb)
            c->cb(ch, NULL, NULL, 0, error, c->arg);
        free(c);
    }
}

/* Closes the channel for good with a status and a reason: I/O stops, the
 * pending calls fail, on_close runs (unless the owner freed it). */
void
ipc_channel_fail(struct ipc_channel *ch, enum ipc_channel_status status,
                 const char *fmt, ...)
{
    va_list ap;

    if (ch->closed)
        return;
    va_start(ap, fmt);
    vsnprintf(ch->reason, sizeof ch->reason, fmt, ap);
    va_end(ap);
    shutdown_io(ch);
    fail_calls(ch, ch->reason);
    if (!ch->freed && ch->cb.on_close)
        ch->cb.on_close(ch, status, ch->reason, ch->arg);
}

/* ---- the API --------------------------------------------------------- */

static void
destroy(struct ipc_channel *ch)
{
    struct ipc_call *c;

    shutdown_io(ch);
    while ((c = ch->calls) != NULL) { /* only after a failed new() */
        ipc_channel_pending_unlink(ch, c);
        free(c);
    }
    if (ch->rev)
        event_free(ch->rev);
    if (ch->wev)
        event_free(ch->wev);
    if (ch->timer)
        event_free(ch->timer);
    free(ch->rbuf);
    free(ch->scratch);
    ipc_fb_builder_free(&ch->b);
    free(ch);
}

struct ipc_channel *
ipc_channel_new(struct event_base *base, int fd,
                const struct ipc_channel_config *cfg,
                const struct ipc_channel_callbacks *cb, void *arg)
{
    struct ipc_channel *ch = NULL;
    int flags, err;

    if (base == NULL || fd < 0 || cfg == NULL || cb == NULL ||
        cb->on_frame == NULL || cb->on_close == NULL) {
        err = EINVAL;
        goto fail;
    }
    flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        err = errno;
        goto fail;
    }
    ch = calloc(1, sizeof *ch);
    if (ch == NULL) {
        err = ENOMEM;
        goto fail;
    }
    ch->base = base;
    ch->fd = fd;
    ch->cfg = *cfg;
    ch->cfg.engine = NULL; /* used by ipc_channel_hello_send() below only */
    ch->cfg.confinement = NULL;
    if (ch->cfg.max_frame == 0)
        ch->cfg.max_frame = IPC_FRAME_MAX_DEFAULT;
    if (ch->cfg.max_frame > 0x7fffffffu) /* FlatBuffers' own limit */
        ch->cfg.max_frame = 0x7fffffffu;
    if (ch->cfg.max_queue == 0)
        ch->cfg.max_queue = IPC_CHANNEL_MAX_QUEUE_DEFAULT;
    if (ch->cfg.handshake_timeout_ms == 0)
        ch->cfg.handshake_timeout_ms = IPC_CHANNEL_HANDSHAKE_MS_DEFAULT;
    ch->cb = *cb;
    ch->arg = arg;
    ch->txtail = &ch->txhead;
    ipc_fb_builder_init(&ch->b);
    /* Master: seq 1 is the answer to the host's Hello, whenever frames
     * queued before it were. */
    ch->tx_seq = cfg->role == IPC_CHANNEL_MASTER ? 1 : 0;

    ch->rbuf = malloc(RX_DEFAULT);
    ch->rev =
        event_new(base, fd, EV_READ | EV_PERSIST, ipc_channel_on_read, ch);
    ch->wev =
        event_new(base, fd, EV_WRITE | EV_PERSIST, ipc_channel_on_write, ch);
    if (ch->rbuf == NULL || ch->rev == NULL || ch->wev == NULL) {
        err = ENOMEM;
        goto fail;
    }
    ch->rcap = RX_DEFAULT;
    if (event_add(ch->rev, NULL) < 0) {
        err = EIO;
        goto fail;
    }
    if (cfg->role == IPC_CHANNEL_MASTER) {
        struct timeval tv = {
            .tv_sec = ch->cfg.handshake_timeout_ms / 1000,
            .tv_usec = (ch->cfg.handshake_timeout_ms % 1000) * 1000,
        };
        ch->timer = evtimer_new(base, ipc_channel_on_handshake_timer, ch);
        if (ch->timer == NULL) {
            err = ENOMEM;
            goto fail;
        }
        if (evtimer_add(ch->timer, &tv) < 0) {
            err = EIO;
            goto fail;
        }
    } else {
        ch->cfg.engine = cfg->engine;
        ch->cfg.confinement = cfg->confinement;
        int rc = ipc_channel_hello_send(ch);
        ch->cfg.engine = NULL;
        ch->cfg.confinement = NULL;
        if (rc < 0) {
            err = errno;
            goto fail;
        }
    }
    return ch;

fail:
    if (ch)
        destroy(ch); /* closes fd */
    else if (fd >= 0)
        close(fd);
    errno = err;
    return NULL;
}

void
ipc_channel_free(struct ipc_channel *ch)
{
    if (ch == NULL || ch->freed)
        return;
    ch->freed = true;
    ipc_channel_enter(ch);
    shutdown_io(ch);
    fail_calls(ch, "channel closed");
    ipc_channel_leave(ch);
}

size_t
ipc_channel_queued(const struct ipc_channel *ch)
{
    return ch->queued;
}

int
ipc_channel_fd(const struct ipc_channel *ch)
{
    return ch->fd;
}

void
ipc_channel_read_soon(struct ipc_channel *ch)
{
    if (ch->rev != NULL)
        event_active(ch->rev, EV_READ, 0);
}

size_t
ipc_channel_pending(const struct ipc_channel *ch)
{
    /* The host's own Hello waits among the calls until answered. */
    bool hello = ch->cfg.role == IPC_CHANNEL_HOST && !ch->handshaken &&
                 ch->ncalls > 0 && ch->calls->cb == NULL;
    return ch->ncalls - (hello ? 1 : 0);
}

const char *
ipc_channel_status_name(enum ipc_channel_status status)
{
    switch (status) {
    case IPC_CHANNEL_EOF:
        return "eof";
    case IPC_CHANNEL_PROTOCOL:
        return "protocol";
    case IPC_CHANNEL_HANDSHAKE:
        return "handshake";
    case IPC_CHANNEL_IO:
        return "io";
    case IPC_CHANNEL_CLOSED:
        return "closed";
    }
    return "unknown";
}
