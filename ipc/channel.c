/*
 * channel.c — framed transport over a SOCK_STREAM socketpair (channel.h).
 *
 * Why a raw event and recvmsg(): descriptors travel with SCM_RIGHTS, which
 * libevent's bufferevents cannot carry, so the socket is read with
 * recvmsg() on every read (MSG_CMSG_CLOEXEC) into one receive buffer, and
 * written with sendmsg() from a queue of encoded frames.
 *
 * Receiving.  rbuf[rstart, rend) holds unprocessed bytes; rstart is always
 * the first byte of a frame, and rbase is the stream offset of rbuf[0].
 * Each frame's length prefix is checked (at least 12, prefix included at
 * most max_frame) as soon as its 4 bytes are in, before the buffer grows
 * for it; malloc() aligns rbuf to 16, so a frame whose first byte sits at
 * an 8-aligned offset is verified in place, any other is copied to an
 * aligned scratch buffer first.  All complete frames are dispatched after
 * every read, so at most one incomplete frame sits in the buffer.
 *
 * Descriptors.  Linux ends a recvmsg() right after the skb that carried
 * SCM_RIGHTS, but it does glue earlier skbs without descriptors in front
 * of it (measured on 6.18: 100 bytes, then 100 bytes with an fd, read as
 * 200 bytes and the fd).  So a sender puts a frame with descriptors in a
 * sendmsg() of its own, starting with its first byte and holding nothing
 * after it; the receiver attaches the descriptors that came with a read to
 * the last frame that starts within the bytes of that read.  A read with
 * descriptors in which no frame starts, a truncated control message, a
 * control message other than SCM_RIGHTS or more than IPC_CHANNEL_MAX_FDS
 * descriptors are protocol violations, and every descriptor received is
 * closed.  Descriptors wait in fdq (at most two sets: one for the
 * incomplete frame left by the previous read, one from this read) until
 * their frame is dispatched.
 *
 * Sending.  ipc_channel_send() encodes the frame into one allocation,
 * stamps the next seq at the position ipc_frame_encode() reports and
 * queues it; the write event, activated on the first frame, sends
 * consecutive frames with one sendmsg() of up to IOV_MAX iovecs (so frames
 * sent from one callback share a system call), resumes partial writes and
 * waits for EPOLLOUT on EAGAIN.  Frames sent before the handshake completes
 * are held: the master's answer (seq 1, reserved for it) goes first.
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

#include <errno.h>
#include <fcntl.h>
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
#include <unistd.h>

#include <event2/event.h>

/* Receive buffer: 64 KiB takes hundreds of small frames per read; a buffer
 * grown for a large frame is given back once empty if over 1 MiB. */
#define RX_DEFAULT (64u * 1024)
#define RX_SHRINK (1024u * 1024)
/* Free space below which the buffer is compacted before a read. */
#define RX_MIN_ROOM 4096u
/* Reads per readable event before yielding to the loop (fairness). */
#define RX_ROUNDS 16
/* Smallest length prefix: the 12 bytes of the smallest FlatBuffer. */
#define FRAME_MIN_LEN 12u
/* One iovec array per sendmsg(): IOV_MAX (1024 on Linux) frames. */
#ifndef IOV_MAX
#define IOV_MAX 1024
#endif
/* The control buffer holds one descriptor more than allowed, so that a
 * peer sending too many is told so rather than truncated. */
#define RX_CMSG_FDS (IPC_CHANNEL_MAX_FDS + 1)

struct txframe {
    struct txframe *next;
    size_t len;    /* bytes of the frame, prefix included */
    size_t off;    /* bytes already written */
    unsigned nfds; /* descriptors not yet sent (only while off == 0) */
    bool hold;     /* queued before the handshake completed */
    int fds[IPC_CHANNEL_MAX_FDS];
    uint8_t data[];
};

/* A call waiting for its reply; cb NULL marks the host's Hello. */
struct call {
    struct call *next;
    struct call *prev;
    uint64_t seq;
    ipc_reply_cb cb;
    void *arg;
};

/* Descriptors waiting for the frame that starts at stream offset `at`. */
struct fdset {
    uint64_t at;
    unsigned n;
    int fds[IPC_CHANNEL_MAX_FDS];
};

struct ipc_channel {
    struct event_base *base;
    int fd;
    struct ipc_channel_config cfg;
    struct ipc_channel_callbacks cb;
    void *arg;
    struct event *rev;   /* EV_READ, always added while open */
    struct event *wev;   /* EV_WRITE, added only while the socket is full */
    struct event *timer; /* master: the handshake deadline */

    bool handshaken;
    bool closed;       /* descriptor closed; nothing more is read or sent */
    bool freed;        /* ipc_channel_free() was called */
    bool write_armed;  /* wev added */
    bool write_active; /* wev activated, its callback not yet run */
    bool refused;      /* a send met a full queue: on_drain is owed */
    unsigned depth;    /* handlers of this channel on the stack */

    uint8_t *rbuf;
    size_t rcap;
    size_t rstart;
    size_t rend;
    uint64_t rbase;
    uint8_t *scratch;
    size_t scratch_cap;
    struct fdset fdq[2];
    unsigned nfdq;
    uint64_t rx_seq; /* seq of the last frame received */

    struct txframe *txhead;
    struct txframe **txtail;
    size_t queued;
    uint64_t tx_seq; /* seq of the last frame queued */
    struct ipc_fb_builder b;

    struct call *calls; /* oldest first: replies mostly come in order */
    struct call *calls_last;
    size_t ncalls;

    char reason[512];
};

static void do_read(struct ipc_channel *ch);
static void fail(struct ipc_channel *ch, enum ipc_channel_status status,
                 const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- helpers --------------------------------------------------------- */

static void
close_fds(const int *fds, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

static size_t
max_frame(const struct ipc_channel *ch)
{
    return ch->cfg.max_frame;
}

/* Handlers hold the channel: a free inside them completes on the way out. */
static void
enter(struct ipc_channel *ch)
{
    ch->depth++;
}

static void destroy(struct ipc_channel *ch);

static void
leave(struct ipc_channel *ch)
{
    if (--ch->depth == 0 && ch->freed)
        destroy(ch);
}

static void
drop_queue(struct ipc_channel *ch)
{
    struct txframe *t = ch->txhead;

    while (t) {
        struct txframe *next = t->next;
        close_fds(t->fds, t->nfds);
        free(t);
        t = next;
    }
    ch->txhead = NULL;
    ch->txtail = &ch->txhead;
    ch->queued = 0;
}

static void
drop_fdq(struct ipc_channel *ch)
{
    for (unsigned i = 0; i < ch->nfdq; i++)
        close_fds(ch->fdq[i].fds, ch->fdq[i].n);
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
    drop_queue(ch);
    drop_fdq(ch);
}

static void
unlink_call(struct ipc_channel *ch, struct call *c)
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
    struct call *c;

    while ((c = ch->calls) != NULL) {
        unlink_call(ch, c);
        if (c->cb)
            c->cb(ch, NULL, NULL, 0, error, c->arg);
        free(c);
    }
}

/* Closes the channel for good with a status and a reason: I/O stops, the
 * pending calls fail, on_close runs (unless the owner freed it). */
static void
fail(struct ipc_channel *ch, enum ipc_channel_status status, const char *fmt,
     ...)
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

/* ---- sending --------------------------------------------------------- */

/* Makes the write event run soon (this loop iteration when called from a
 * callback), so that the frames queued meanwhile share one sendmsg(). */
static void
schedule_flush(struct ipc_channel *ch)
{
    if (ch->closed || ch->write_armed || ch->write_active)
        return;
    if (ch->txhead == NULL || ch->txhead->hold)
        return;
    ch->write_active = true;
    event_active(ch->wev, EV_WRITE, 1);
}

/* Writes queued frames until the queue is empty or held, or the socket is
 * full (then, unless best_effort, the write event waits for room).
 * Returns 0; -1 with errno from sendmsg(), the unsent frames still
 * queued; -2 when the write event cannot be added. */
static int
flush(struct ipc_channel *ch, bool best_effort)
{
    struct iovec iov[IOV_MAX];
    union {
        char buf[CMSG_SPACE(sizeof(int) * IPC_CHANNEL_MAX_FDS)];
        struct cmsghdr align;
    } cbuf;

    while (ch->txhead && !ch->txhead->hold) {
        struct msghdr msg;
        struct txframe *t = ch->txhead;
        struct txframe *withfds = NULL;
        unsigned n = 0;

        memset(&msg, 0, sizeof msg);
        if (t->nfds) {
            /* Alone, and its descriptors with its first byte: see the
             * comment at the top. */
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
            close_fds(withfds->fds, withfds->nfds);
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
    do_read(ch);
    if (!ch->closed)
        fail(ch, IPC_CHANNEL_EOF, "peer stopped reading the channel (%s)",
             strerror(err));
}

static void
on_write_event(evutil_socket_t fd, short what, void *arg)
{
    struct ipc_channel *ch = arg;

    (void)fd;
    (void)what;
    enter(ch);
    ch->write_active = false;
    int rc = ch->closed ? 0 : flush(ch, false);
    int err = errno;
    if (rc == -2)
        fail(ch, IPC_CHANNEL_CLOSED, "cannot wait for the socket to drain");
    else if (rc < 0 && (err == EPIPE || err == ECONNRESET))
        peer_gone(ch, err);
    else if (rc < 0)
        fail(ch, IPC_CHANNEL_IO, "sendmsg: %s", strerror(err));
    if (!ch->closed && ch->refused && ch->queued < ch->cfg.max_queue / 2) {
        ch->refused = false;
        if (ch->cb.on_drain)
            ch->cb.on_drain(ch, ch->arg);
    }
    leave(ch);
}

/* Encodes f into a queue entry (seq not stamped, not linked).  Returns it,
 * or NULL with errno ENOMEM, EINVAL or EMSGSIZE. */
static struct txframe *
encode(struct ipc_channel *ch, const struct ipc_frame *f, size_t *seq_pos)
{
    struct txframe *t = NULL;

    ipc_fb_builder_reset(&ch->b);
    if (ipc_frame_encode(&ch->b, f, seq_pos) < 0) {
        errno = ch->b.oom ? ENOMEM : EINVAL;
        goto out;
    }
    if (ch->b.len > max_frame(ch)) {
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

static void
stamp(struct txframe *t, size_t seq_pos, uint64_t seq)
{
    memcpy(t->data + seq_pos, &seq, sizeof seq);
}

static void
append(struct ipc_channel *ch, struct txframe *t)
{
    *ch->txtail = t;
    ch->txtail = &t->next;
    ch->queued += t->len;
}

static void
add_call(struct ipc_channel *ch, struct call *c)
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

/* ipc_channel_send() and ipc_channel_call(). */
static int
submit(struct ipc_channel *ch, const struct ipc_frame *f, const int *fds,
       unsigned nfds, ipc_reply_cb cb, void *arg, bool is_call)
{
    struct txframe *t = NULL;
    struct call *c = NULL;
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
    t = encode(ch, f, &seq_pos);
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
    stamp(t, seq_pos, ++ch->tx_seq);
    t->hold = !ch->handshaken;
    t->nfds = nfds;
    if (nfds)
        memcpy(t->fds, fds, sizeof(int) * nfds);
    append(ch, t);
    if (c) {
        c->seq = ch->tx_seq;
        add_call(ch, c);
    }
    schedule_flush(ch);
    return 0;

fail:
    if (fds)
        close_fds(fds, nfds);
    free(t);
    errno = err;
    return -1;
}

/* ---- the handshake --------------------------------------------------- */

static void
release_held(struct ipc_channel *ch)
{
    for (struct txframe *t = ch->txhead; t; t = t->next)
        t->hold = false;
    schedule_flush(ch);
}

/* Master: queues the answer to the host's Hello (seq 1, ahead of the
 * frames held meanwhile).  Returns 0 or -1 with errno. */
static int
answer_hello(struct ipc_channel *ch, uint64_t reply_to, bool accepted,
             const char *reason)
{
    struct ipc_frame f;
    struct txframe *t;
    size_t seq_pos;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_HELLO;
    f.reply_to = reply_to;
    f.u.hello.protocol = IPC_PROTOCOL_VERSION;
    f.u.hello.accepted = accepted;
    if (reason)
        f.u.hello.reason = ipc_str_c(reason);
    t = encode(ch, &f, &seq_pos);
    if (t == NULL)
        return -1;
    stamp(t, seq_pos, 1);
    t->next = ch->txhead;
    ch->txhead = t;
    if (ch->txtail == &ch->txhead)
        ch->txtail = &t->next;
    ch->queued += t->len;
    return 0;
}

/* Master: refuses the host (best effort: the answer is written now if the
 * socket takes it) and closes with `reason`. */
static void
refuse(struct ipc_channel *ch, uint64_t reply_to, const char *reason)
{
    drop_queue(ch); /* the held frames never go out */
    if (answer_hello(ch, reply_to, false, reason) == 0)
        (void)flush(ch, true);
    fail(ch, IPC_CHANNEL_HANDSHAKE, "%s", reason);
}

static void
master_hello(struct ipc_channel *ch, const struct ipc_frame *f)
{
    const struct ipc_hello *h = &f->u.hello;
    char reason[sizeof ch->reason];
    const char *why = NULL;

    if (h->protocol != IPC_PROTOCOL_VERSION) {
        snprintf(reason, sizeof reason,
                 "protocol %u not supported: this master speaks %u",
                 (unsigned)h->protocol, (unsigned)IPC_PROTOCOL_VERSION);
        refuse(ch, f->seq, reason);
        return;
    }
    if (ch->cb.on_hello && ch->cb.on_hello(ch, h, &why, ch->arg) != 0) {
        if (ch->closed)
            return;
        snprintf(reason, sizeof reason, "%s",
                 why ? why : "the master refused the host");
        refuse(ch, f->seq, reason);
        return;
    }
    if (ch->closed)
        return;
    if (answer_hello(ch, f->seq, true, NULL) < 0) {
        fail(ch, IPC_CHANNEL_CLOSED, "cannot queue the Hello answer: %s",
             strerror(errno));
        return;
    }
    ch->handshaken = true;
    event_del(ch->timer);
    release_held(ch);
}

/* Host: the master's answer to our Hello. */
static void
host_answer(struct ipc_channel *ch, const struct ipc_frame *f)
{
    const struct ipc_hello *h = &f->u.hello;
    const char *why = NULL;

    if (f->type != IPC_BODY_HELLO) {
        fail(ch, IPC_CHANNEL_PROTOCOL, "the master answered the Hello with %s",
             ipc_body_name(f->type));
        return;
    }
    if (!h->accepted) {
        if (h->reason.ptr && h->reason.len)
            fail(ch, IPC_CHANNEL_HANDSHAKE, "%.*s", (int)h->reason.len,
                 h->reason.ptr);
        else
            fail(ch, IPC_CHANNEL_HANDSHAKE, "the master refused the host");
        return;
    }
    if (h->protocol != IPC_PROTOCOL_VERSION) {
        fail(ch, IPC_CHANNEL_HANDSHAKE,
             "the master speaks protocol %u, this host %u",
             (unsigned)h->protocol, (unsigned)IPC_PROTOCOL_VERSION);
        return;
    }
    ch->handshaken = true;
    release_held(ch);
    if (ch->cb.on_hello && ch->cb.on_hello(ch, h, &why, ch->arg) != 0 &&
        !ch->closed)
        fail(ch, IPC_CHANNEL_HANDSHAKE, "%s",
             why ? why : "the host refused the master");
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct ipc_channel *ch = arg;

    (void)fd;
    (void)what;
    enter(ch);
    if (!ch->handshaken)
        fail(ch, IPC_CHANNEL_HANDSHAKE, "handshake timed out after %u ms",
             ch->cfg.handshake_timeout_ms);
    leave(ch);
}

/* ---- receiving ------------------------------------------------------- */

/* Checks a length prefix before anything is allocated for its frame. */
static int
check_prefix(struct ipc_channel *ch, uint32_t len)
{
    size_t total = (size_t)len + 4;

    if (total > max_frame(ch)) {
        fail(ch, IPC_CHANNEL_PROTOCOL,
             "frame of %zu bytes (length prefix %u) exceeds the %zu-byte cap",
             total, len, max_frame(ch));
        return -1;
    }
    if (len < FRAME_MIN_LEN) {
        fail(ch, IPC_CHANNEL_PROTOCOL,
             "frame of %zu bytes (length prefix %u) is below the %u-byte "
             "minimum",
             total, len, FRAME_MIN_LEN + 4);
        return -1;
    }
    return 0;
}

static struct call *
find_call(struct ipc_channel *ch, uint64_t seq)
{
    for (struct call *c = ch->calls; c; c = c->next)
        if (c->seq == seq)
            return c;
    return NULL;
}

/* One complete frame at p (8-aligned), with the descriptors that came with
 * it (closed here unless a callback keeps them). */
static void
handle_frame(struct ipc_channel *ch, const uint8_t *p, size_t len, int *fds,
             unsigned nfds)
{
    struct ipc_frame f;
    struct ipc_fb_error err;

    if (ipc_frame_read(p, len, &f, &err) < 0) {
        char what[256];
        ipc_fb_error_format(&err, what, sizeof what);
        fail(ch, IPC_CHANNEL_PROTOCOL, "invalid frame: %s", what);
        goto out;
    }
    if (f.seq <= ch->rx_seq) {
        fail(ch, IPC_CHANNEL_PROTOCOL,
             "%s frame with seq %llu after seq %llu (must increase)",
             ipc_body_name(f.type), (unsigned long long)f.seq,
             (unsigned long long)ch->rx_seq);
        goto out;
    }
    ch->rx_seq = f.seq;

    if (f.reply_to != 0) {
        struct call *c = find_call(ch, f.reply_to);
        if (c == NULL) {
            fail(ch, IPC_CHANNEL_PROTOCOL,
                 "%s frame replies to seq %llu, which matches no pending "
                 "call (unknown, or already answered)",
                 ipc_body_name(f.type), (unsigned long long)f.reply_to);
            goto out;
        }
        if (c->cb && !ch->handshaken) {
            fail(ch, IPC_CHANNEL_PROTOCOL,
                 "%s frame replies to seq %llu before the handshake",
                 ipc_body_name(f.type), (unsigned long long)f.reply_to);
            goto out;
        }
        unlink_call(ch, c);
        if (c->cb)
            c->cb(ch, &f, fds, nfds, NULL, c->arg);
        else
            host_answer(ch, &f);
        free(c);
        goto out;
    }
    if (!ch->handshaken) {
        if (ch->cfg.role == IPC_CHANNEL_MASTER && f.type == IPC_BODY_HELLO)
            master_hello(ch, &f);
        else
            fail(ch, IPC_CHANNEL_PROTOCOL,
                 "%s frame before the handshake completed",
                 ipc_body_name(f.type));
        goto out;
    }
    if (f.type == IPC_BODY_HELLO) {
        fail(ch, IPC_CHANNEL_PROTOCOL, "Hello frame after the handshake");
        goto out;
    }
    ch->cb.on_frame(ch, &f, fds, nfds, ch->arg);
out:
    close_fds(fds, nfds);
}

/* Dispatches every complete frame in the buffer.  Returns 0, or -1 once
 * the channel is closed. */
static int
dispatch(struct ipc_channel *ch)
{
    while (!ch->closed) {
        size_t avail = ch->rend - ch->rstart;
        uint32_t len;
        int fds[IPC_CHANNEL_MAX_FDS];
        unsigned nfds = 0;

        if (avail < 4)
            break;
        len = ipc_fb_u32(ch->rbuf + ch->rstart);
        if (check_prefix(ch, len) < 0)
            return -1;
        size_t total = (size_t)len + 4;
        if (avail < total)
            break;

        if (ch->nfdq && ch->fdq[0].at == ch->rbase + ch->rstart) {
            nfds = ch->fdq[0].n;
            memcpy(fds, ch->fdq[0].fds, sizeof(int) * nfds);
            ch->fdq[0] = ch->fdq[1];
            ch->nfdq--;
        }

        const uint8_t *p = ch->rbuf + ch->rstart;
        if ((uintptr_t)p % 8 != 0) {
            if (ch->scratch_cap < total) {
                free(ch->scratch);
                ch->scratch_cap = 0;
                ch->scratch = malloc(total);
                if (ch->scratch == NULL) {
                    close_fds(fds, nfds);
                    fail(ch, IPC_CHANNEL_CLOSED,
                         "out of memory for a frame of %zu bytes", total);
                    return -1;
                }
                ch->scratch_cap = total;
            }
            memcpy(ch->scratch, p, total);
            p = ch->scratch;
        }
        /* Nothing moves rbuf until the next read: the frame's views stay
         * valid through its callbacks. */
        ch->rstart += total;
        handle_frame(ch, p, total, fds, nfds);
    }
    if (!ch->closed && ch->scratch_cap > RX_SHRINK) {
        free(ch->scratch);
        ch->scratch = NULL;
        ch->scratch_cap = 0;
    }
    return ch->closed ? -1 : 0;
}

/* Attaches the descriptors that came with the bytes rbuf[a, rend) to the
 * last frame starting among them.  Takes the descriptors.  Returns 0, or
 * -1 once the channel is closed. */
static int
attach_fds(struct ipc_channel *ch, size_t a, const int *fds, unsigned nfds)
{
    size_t pos = ch->rstart;
    size_t last = SIZE_MAX;
    struct fdset *s;

    while (pos < ch->rend) {
        if (pos >= a)
            last = pos;
        if (ch->rend - pos < 4)
            break;
        uint32_t len = ipc_fb_u32(ch->rbuf + pos);
        if (check_prefix(ch, len) < 0) {
            close_fds(fds, nfds);
            return -1;
        }
        pos += (size_t)len + 4;
    }
    if (last == SIZE_MAX) {
        close_fds(fds, nfds);
        fail(ch, IPC_CHANNEL_PROTOCOL,
             "%u file descriptor%s arrived in the middle of a frame", nfds,
             nfds == 1 ? "" : "s");
        return -1;
    }
    if (ch->nfdq == 2) { /* cannot happen: see the comment at the top */
        close_fds(fds, nfds);
        fail(ch, IPC_CHANNEL_PROTOCOL,
             "file descriptors for more than two frames at once");
        return -1;
    }
    s = &ch->fdq[ch->nfdq++];
    s->at = ch->rbase + last;
    s->n = nfds;
    memcpy(s->fds, fds, sizeof(int) * nfds);
    return 0;
}

/* Collects the descriptors of a recvmsg() into fds[RX_CMSG_FDS].  Returns
 * 0, or -1 (descriptors closed) with the channel closed. */
static int
collect_fds(struct ipc_channel *ch, struct msghdr *msg, int *fds,
            unsigned *nfds)
{
    const char *bad = NULL;
    unsigned n = 0, extra = 0;

    for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm;
         cm = CMSG_NXTHDR(msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) {
            bad = "a control message other than SCM_RIGHTS";
            continue;
        }
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
            if (n < RX_CMSG_FDS) {
                fds[n++] = fd;
            } else {
                close(fd);
                extra++;
            }
        }
    }
    *nfds = n;
    if (bad == NULL && (msg->msg_flags & MSG_CTRUNC))
        bad = "a truncated control message (too many file descriptors)";
    if (bad == NULL && n + extra > IPC_CHANNEL_MAX_FDS)
        bad = "more file descriptors than a frame may carry";
    if (bad) {
        close_fds(fds, n);
        *nfds = 0;
        fail(ch, IPC_CHANNEL_PROTOCOL, "peer sent %s (%u received, at most %u)",
             bad, n + extra, IPC_CHANNEL_MAX_FDS);
        return -1;
    }
    return 0;
}

/* Makes room for the next read: compacts, grows for a frame whose length
 * is known (and checked), gives back a large buffer once empty.  Returns
 * 0, or -1 once the channel is closed. */
static int
make_room(struct ipc_channel *ch)
{
    size_t have = ch->rend - ch->rstart;
    size_t need = 0;

    if (have == 0) {
        ch->rbase += ch->rstart;
        ch->rstart = ch->rend = 0;
        if (ch->rcap > RX_SHRINK) {
            uint8_t *nb = realloc(ch->rbuf, RX_DEFAULT);
            if (nb) {
                ch->rbuf = nb;
                ch->rcap = RX_DEFAULT;
            }
        }
        return 0;
    }
    if (have >= 4)
        need = (size_t)ipc_fb_u32(ch->rbuf + ch->rstart) + 4; /* checked */
    if (need > ch->rcap) {
        size_t cap = (need + RX_MIN_ROOM - 1) & ~(size_t)(RX_MIN_ROOM - 1);
        uint8_t *nb = malloc(cap);
        if (nb == NULL) {
            fail(ch, IPC_CHANNEL_CLOSED,
                 "out of memory for a frame of %zu bytes", need);
            return -1;
        }
        memcpy(nb, ch->rbuf + ch->rstart, have);
        free(ch->rbuf);
        ch->rbuf = nb;
        ch->rcap = cap;
        ch->rbase += ch->rstart;
        ch->rstart = 0;
        ch->rend = have;
        return 0;
    }
    if (ch->rstart > 0 &&
        (ch->rcap - ch->rend < RX_MIN_ROOM || ch->rcap - ch->rstart < need)) {
        memmove(ch->rbuf, ch->rbuf + ch->rstart, have);
        ch->rbase += ch->rstart;
        ch->rstart = 0;
        ch->rend = have;
    }
    return 0;
}

static void
on_eof(struct ipc_channel *ch)
{
    size_t have = ch->rend - ch->rstart;

    if (have == 0 && !ch->handshaken)
        fail(ch, IPC_CHANNEL_EOF,
             "peer closed the channel before the "
             "handshake completed");
    else if (have == 0)
        fail(ch, IPC_CHANNEL_EOF, "peer closed the channel");
    else if (have < 4)
        fail(ch, IPC_CHANNEL_EOF,
             "peer closed the channel in the middle of a frame (%zu of the "
             "4 bytes of its length)",
             have);
    else
        fail(ch, IPC_CHANNEL_EOF,
             "peer closed the channel in the middle of a frame (%zu of %zu "
             "bytes)",
             have, (size_t)ipc_fb_u32(ch->rbuf + ch->rstart) + 4);
}

static void
do_read(struct ipc_channel *ch)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * RX_CMSG_FDS)];
        struct cmsghdr align;
    } cbuf;

    for (unsigned round = 0; round < RX_ROUNDS && !ch->closed; round++) {
        int fds[RX_CMSG_FDS];
        unsigned nfds;
        struct iovec iov;
        struct msghdr msg;

        if (make_room(ch) < 0)
            return;
        size_t room = ch->rcap - ch->rend;
        iov.iov_base = ch->rbuf + ch->rend;
        iov.iov_len = room;
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.buf;
        msg.msg_controllen = sizeof cbuf.buf;

        ssize_t n = recvmsg(ch->fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (errno == ECONNRESET) { /* died with our data unread */
                on_eof(ch);
                return;
            }
            fail(ch, IPC_CHANNEL_IO, "recvmsg: %s", strerror(errno));
            return;
        }
        if (collect_fds(ch, &msg, fds, &nfds) < 0)
            return;
        if (n == 0) {
            close_fds(fds, nfds);
            on_eof(ch);
            return;
        }
        size_t a = ch->rend;
        ch->rend += (size_t)n;
        if (nfds && attach_fds(ch, a, fds, nfds) < 0)
            return;
        if (dispatch(ch) < 0)
            return;
        /* A short read emptied the socket, unless descriptors cut it. */
        if ((size_t)n < room && nfds == 0)
            return;
    }
}

static void
on_read_event(evutil_socket_t fd, short what, void *arg)
{
    struct ipc_channel *ch = arg;

    (void)fd;
    (void)what;
    enter(ch);
    if (!ch->closed)
        do_read(ch);
    leave(ch);
}

/* ---- the API --------------------------------------------------------- */

static void
destroy(struct ipc_channel *ch)
{
    struct call *c;

    shutdown_io(ch);
    while ((c = ch->calls) != NULL) { /* only after a failed new() */
        unlink_call(ch, c);
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

/* Host: queues the Hello as a call whose answer host_answer() takes. */
static int
send_hello(struct ipc_channel *ch)
{
    struct ipc_frame f;
    struct txframe *t;
    struct call *c;
    size_t seq_pos;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_HELLO;
    f.u.hello.protocol =
        ch->cfg.protocol ? ch->cfg.protocol : IPC_PROTOCOL_VERSION;
    f.u.hello.engine = ipc_str_c(ch->cfg.engine);
    f.u.hello.pid = (int32_t)getpid();
    f.u.hello.max_inflight = ch->cfg.max_inflight;
    f.u.hello.prefetch = ch->cfg.prefetch;
    f.u.hello.confinement = ipc_str_c(ch->cfg.confinement);
    t = encode(ch, &f, &seq_pos);
    if (t == NULL)
        return -1;
    c = malloc(sizeof *c);
    if (c == NULL) {
        free(t);
        errno = ENOMEM;
        return -1;
    }
    stamp(t, seq_pos, ++ch->tx_seq);
    append(ch, t);
    c->seq = ch->tx_seq;
    c->cb = NULL;
    c->arg = NULL;
    add_call(ch, c);
    schedule_flush(ch);
    return 0;
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
    ch->cfg.engine = NULL; /* used by send_hello() below only */
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
    ch->rev = event_new(base, fd, EV_READ | EV_PERSIST, on_read_event, ch);
    ch->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, on_write_event, ch);
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
        ch->timer = evtimer_new(base, on_timer, ch);
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
        int rc = send_hello(ch);
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
    enter(ch);
    shutdown_io(ch);
    fail_calls(ch, "channel closed");
    leave(ch);
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
        if (flush(ch, true) < 0)
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
