/*
 * channel_send.c — the sending side of the framed transport (channel.h;
 * channel_private.h says how the files divide it).
 *
 * Sending.  ipc_channel_send() encodes the frame into one allocation,
 * stamps the next seq at the position ipc_frame_encode() reports and
 * queues it; the write event, activated on the first frame, sends
 * consecutive frames with one sendmsg() of up to IOV_MAX iovecs (so frames
 * sent from one callback share a system call), resumes partial writes and
 * waits for EPOLLOUT on EAGAIN.  Frames sent before the handshake completes
 * are held: the master's answer (seq 1, reserved for it) goes first.
 *
 * A frame with descriptors goes in a sendmsg() of its own, the descriptors
 * with its first byte (channel_recv.c says why: how Linux splits reads
 * around SCM_RIGHTS).  A send that would take the queue past max_queue is
 * refused with EAGAIN (an empty queue always takes one frame); the first
 * drain below half of it afterwards calls on_drain.
 */
#include "config.h"

#include "ipc/channel.h"
#include "ipc/channel_private.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <event2/event.h>

/* One iovec array per sendmsg(): IOV_MAX (1024 on Linux) frames. */
#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

/* Makes the write event run soon (this loop iteration when called from a
 * callback), so that the frames queued meanwhile share one sendmsg(). */
void
ipc_channel_tx_schedule(struct ipc_channel *ch)
{
    if (ch->closed || ch->write_armed || ch->write_active)
        return;
    if (ch->txhead == NULL || ch->txhead->hold)
        return;
    ch->write_active = true;
    event_active(ch->wev, EV_WRITE, 1);
}

int
ipc_channel_tx_flush(struct ipc_channel *ch, bool best_effort)
{
    struct iovec iov[IOV_MAX];
    union {
        char buf[CMSG_SPACE(sizeof(int) * IPC_CHANNEL_MAX_FDS)];
        struct cmsghdr align;
    } cbuf;

    while (ch->txhead && !ch->txhead->hold) {
        struct msghdr msg;
        struct ipc_txframe *t = ch->txhead;
        struct ipc_txframe *withfds = NULL;
        unsigned n = 0;

        memset(&msg, 0, sizeof msg);
        if (t->nfds) {
            /* Alone, and its descriptors with its first byte: see the
             * top of channel_recv.c. */
            struct cmsghdr *cm;
            size_t fdlen = sizeof(int) * t->nfds;

            iov[n].iov_base = t->data;
            iov[n++].iov_len = t->len;
            memset(&cbuf, 0, sizeof cbuf);
            msg.msg_control = cbuf.buf;
            msg.msg_controllen = CMSG_SPACE(fdlen);
            cm = CMSG_FIRSTHDR(&msg);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(fdlen);
            memcpy(CMSG_DATA(cm), t->fds, fdlen);
            withfds = t;
        } else {
            for (; t && n < IOV_MAX && !t->hold && t->nfds == 0; t = t->next) {
                iov[n].iov_base = t->data + t->off;
                iov[n++].iov_len = t->len - t->off;
            }
        }
        msg.msg_iov = iov;
        msg.msg_iovlen = n;

        ssize_t w = sendmsg(ch->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (best_effort)
                    return 0;
                if (!ch->write_armed) {
                    if (event_add(ch->wev, NULL) < 0)
                        return -2;
                    ch->write_armed = true;
                }
                return 0;
            }
            return -1;
        }
        if (withfds) {
            /* The kernel holds its own references now. */
            ipc_channel_fds_close(withfds->fds, withfds->nfds);
            withfds->nfds = 0;
        }
        size_t left = (size_t)w;
        ch->queued -= left;
        while (left) {
            t = ch->txhead;
            size_t rest = t->len - t->off;
            if (left < rest) {
                t->off += left;
                break;
            }
            left -= rest;
            ch->txhead = t->next;
            if (ch->txhead == NULL)
                ch->txtail = &ch->txhead;
            free(t);
        }
    }
    if (ch->write_armed) {
        event_del(ch->wev);
        ch->write_armed = false;
    }
    return 0;
}

/* The peer stopped reading (EPIPE, ECONNRESET on a write): read what it
 * left before it went, then close with EOF. */
static void
peer_gone(struct ipc_channel *ch, int err)
{
    ipc_channel_rx_read(ch);
    if (!ch->closed)
        ipc_channel_fail(ch, IPC_CHANNEL_EOF,
                         "peer stopped reading the channel (%s)",
                         strerror(err));
}

void
ipc_channel_on_write(evutil_socket_t fd, short what, void *arg)
{
    struct ipc_channel *ch = arg;

    (void)fd;
    (void)what;
    ipc_channel_enter(ch);
    ch->write_active = false;
    int rc = ch->closed ? 0 : ipc_channel_tx_flush(ch, false);
    int err = errno;
    if (rc == -2)
        ipc_channel_fail(ch, IPC_CHANNEL_CLOSED,
                         "cannot wait for the socket to drain");
    else if (rc < 0 && (err == EPIPE || err == ECONNRESET))
        peer_gone(ch, err);
    else if (rc < 0)
        ipc_channel_fail(ch, IPC_CHANNEL_IO, "sendmsg: %s", strerror(err));
    if (!ch->closed && ch->refused && ch->queued < ch->cfg.max_queue / 2) {
        ch->refused = false;
        if (ch->cb.on_drain)
            ch->cb.on_drain(ch, ch->arg);
    }
    ipc_channel_leave(ch);
}

/* Encodes f into a queue entry (seq not stamped, not linked).  Returns it,
 * or NULL with errno ENOMEM, EINVAL or EMSGSIZE. */
struct ipc_txframe *
ipc_channel_tx_encode(struct ipc_channel *ch, const struct ipc_frame *f,
                      size_t *seq_pos)
{
    struct ipc_txframe *t = NULL;

    ipc_fb_builder_reset(&ch->b);
    if (ipc_frame_encode(&ch->b, f, seq_pos) < 0) {
        errno = ch->b.oom ? ENOMEM : EINVAL;
        goto out;
    }
    if (ch->b.len > ch->cfg.max_frame) {
        errno = EMSGSIZE;
        goto out;
    }
    t = malloc(sizeof *t + ch->b.len);
    if (t == NULL) {
        errno = ENOMEM;
        goto out;
    }
    t->next = NULL;
    t->len = ch->b.len;
    t->off = 0;
    t->nfds = 0;
    t->hold = false;
    memcpy(t->data, ch->b.buf, ch->b.len);
out:
    /* A builder grown for a large frame is not kept. */
    if (ch->b.cap > RX_SHRINK)
        ipc_fb_builder_free(&ch->b);
    return t;
}

void
ipc_channel_tx_stamp(struct ipc_txframe *t, size_t seq_pos, uint64_t seq)
{
    memcpy(t->data + seq_pos, &seq, sizeof seq);
}

void
ipc_channel_tx_append(struct ipc_channel *ch, struct ipc_txframe *t)
{
    *ch->txtail = t;
    ch->txtail = &t->next;
    ch->queued += t->len;
}

/* ipc_channel_send() and ipc_channel_call(). */
static int
submit(struct ipc_channel *ch, const struct ipc_frame *f, const int *fds,
       unsigned nfds, ipc_reply_cb cb, void *arg, bool is_call)
{
    struct ipc_txframe *t = NULL;
    struct ipc_call *c = NULL;
    size_t seq_pos;
    int err;

    if (nfds > IPC_CHANNEL_MAX_FDS || (nfds && fds == NULL) || f == NULL ||
        (is_call && cb == NULL)) {
        err = EINVAL;
        goto fail;
    }
    if (ch->closed) {
        err = EPIPE;
        goto fail;
    }
    t = ipc_channel_tx_encode(ch, f, &seq_pos);
    if (t == NULL) {
        err = errno;
        goto fail;
    }
    if (ch->queued > 0 && ch->queued + t->len > ch->cfg.max_queue) {
        ch->refused = true;
        err = EAGAIN;
        goto fail;
    }
    if (is_call) {
        c = malloc(sizeof *c);
        if (c == NULL) {
            err = ENOMEM;
            goto fail;
        }
        c->cb = cb;
        c->arg = arg;
    }
    ipc_channel_tx_stamp(t, seq_pos, ++ch->tx_seq);
    t->hold = !ch->handshaken;
    t->nfds = nfds;
    if (nfds)
        memcpy(t->fds, fds, sizeof(int) * nfds);
    ipc_channel_tx_append(ch, t);
    if (c) {
        c->seq = ch->tx_seq;
        ipc_channel_pending_add(ch, c);
    }
    ipc_channel_tx_schedule(ch);
    return 0;

fail:
    if (fds)
        ipc_channel_fds_close(fds, nfds);
    free(t);
    errno = err;
    return -1;
}

void
ipc_channel_tx_drop(struct ipc_channel *ch)
{
    struct ipc_txframe *t = ch->txhead;

    while (t) {
        struct ipc_txframe *next = t->next;
        ipc_channel_fds_close(t->fds, t->nfds);
        free(t);
        t = next;
    }
    ch->txhead = NULL;
    ch->txtail = &ch->txhead;
    ch->queued = 0;
}

int
ipc_channel_log(struct ipc_channel *ch, enum ipc_log_level level,
                const char *fmt, ...)
{
    char msg[1024];
    struct ipc_frame f;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_LOG;
    f.u.log.level = level;
    f.u.log.message.ptr = msg;
    f.u.log.message.len = (uint32_t)strlen(msg);
    return ipc_channel_send(ch, &f, NULL, 0);
}

int
ipc_channel_send(struct ipc_channel *ch, const struct ipc_frame *f,
                 const int *fds, unsigned nfds)
{
    return submit(ch, f, fds, nfds, NULL, NULL, false);
}

int
ipc_channel_call(struct ipc_channel *ch, const struct ipc_frame *f,
                 const int *fds, unsigned nfds, ipc_reply_cb cb, void *arg)
{
    return submit(ch, f, fds, nfds, cb, arg, true);
}

/* ipc_channel_gateway_call()'s wait: the answer, and whether it came. */
struct gateway_wait {
    struct ipc_gateway_answer *a;
    bool done;
    bool nomem;
};

static void
on_gateway_reply(struct ipc_channel *c, const struct ipc_frame *reply, int *fds,
                 unsigned nfds, const char *error, void *arg)
{
    struct gateway_wait *w = arg;
    const char *p = error ? error : "not a GatewayReply";
    size_t n = strlen(p);

    (void)c;
    (void)fds;
    (void)nfds;
    w->a->status = 500;
    if (error == NULL && reply->type == IPC_BODY_GATEWAY_REPLY) {
        const struct ipc_gateway_reply *g = &reply->u.gateway_reply;
        w->a->status = g->status;
        p = g->status == 200 ? (const char *)g->response.ptr : g->error.ptr;
        n = g->status == 200 ? g->response.len : g->error.len;
        if (p == NULL)
            n = 0;
    }
    w->done = true;
    if ((w->a->body = malloc(n + 1)) == NULL) {
        w->nomem = true;
        return;
    }
    if (n)
        memcpy(w->a->body, p, n);
    w->a->body[n] = '\0';
    w->a->len = n;
}

int
ipc_channel_gateway_call(struct ipc_channel *ch, struct ipc_str service,
                         struct ipc_str method, struct ipc_bytes request,
                         struct ipc_gateway_answer *a)
{
    struct gateway_wait w = { .a = a };
    struct ipc_frame f;

    memset(a, 0, sizeof *a);
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_GATEWAY_CALL;
    f.u.gateway_call.service = service;
    f.u.gateway_call.method = method;
    f.u.gateway_call.request = request;
    /* ch is not touched after the call: a close on the way may free it. */
    struct event_base *base = ch->base;
    if (ipc_channel_call(ch, &f, NULL, 0, on_gateway_reply, &w) < 0)
        return -1;
    while (!w.done)
        if (event_base_loop(base, EVLOOP_ONCE) < 0) {
            errno = EIO;
            return -1; /* fatal for the caller (channel.h) */
        }
    if (w.nomem) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

int
ipc_channel_flush(struct ipc_channel *ch, unsigned timeout_ms)
{
    struct timespec t0, t;

    if (ch->closed) {
        errno = EPIPE;
        return -1;
    }
    if (clock_gettime(CLOCK_MONOTONIC, &t0) < 0)
        return -1;
    for (;;) {
        if (ipc_channel_tx_flush(ch, true) < 0)
            return -1;
        if (ch->txhead == NULL)
            return 0;
        if (ch->txhead->hold) {
            errno = ENOTCONN;
            return -1;
        }
        if (clock_gettime(CLOCK_MONOTONIC, &t) < 0)
            return -1;
        long long spent = (t.tv_sec - t0.tv_sec) * 1000LL +
                          (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (spent >= (long long)timeout_ms) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pfd = { .fd = ch->fd, .events = POLLOUT };
        if (poll(&pfd, 1, (int)(timeout_ms - spent)) < 0 && errno != EINTR)
            return -1;
    }
}
