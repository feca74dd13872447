/*
 * channel_recv.c — the receiving side of the framed transport (channel.h;
 * channel_private.h says how the files divide it).  The socket is read
 * with recvmsg() on every read (MSG_CMSG_CLOEXEC), for the descriptors
 * (channel.c says why).
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
 * Every frame received is verified (ipc_frame_read()) and its seq and
 * reply_to checked before a callback sees it: replies go to their call,
 * a Hello to the handshake (channel_handshake.c), the rest to on_frame.
 */
#include "config.h"

#include "ipc/channel.h"
#include "ipc/channel_private.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* Free space below which the buffer is compacted before a read. */
#define RX_MIN_ROOM 4096u
/* Reads per readable event before yielding to the loop (fairness). */
#define RX_ROUNDS 16
/* Smallest length prefix: the 12 bytes of the smallest FlatBuffer. */
#define FRAME_MIN_LEN 12u
/* The control buffer holds one descriptor more than allowed, so that a
 * peer sending too many is told so rather than truncated. */
#define RX_CMSG_FDS (IPC_CHANNEL_MAX_FDS + 1)

/* Checks a length prefix before anything is allocated for its frame. */
static int
check_prefix(struct ipc_channel *ch, uint32_t len)
{
    size_t total = (size_t)len + 4;

    if (total > ch->cfg.max_frame) {
        ipc_channel_fail(
            ch, IPC_CHANNEL_PROTOCOL,
            "frame of %zu bytes (length prefix %u) exceeds the %zu-byte cap",
            total, len, ch->cfg.max_frame);
        return -1;
    }
    if (len < FRAME_MIN_LEN) {
        ipc_channel_fail(
            ch, IPC_CHANNEL_PROTOCOL,
            "frame of %zu bytes (length prefix %u) is below the %u-byte "
            "minimum",
            total, len, FRAME_MIN_LEN + 4);
        return -1;
    }
    return 0;
}

static struct ipc_call *
find_call(struct ipc_channel *ch, uint64_t seq)
{
    for (struct ipc_call *c = ch->calls; c; c = c->next)
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
        ipc_channel_fail(ch, IPC_CHANNEL_PROTOCOL, "invalid frame: %s", what);
        goto out;
    }
    if (f.seq <= ch->rx_seq) {
        ipc_channel_fail(
            ch, IPC_CHANNEL_PROTOCOL,
            "%s frame with seq %llu after seq %llu (must increase)",
            ipc_body_name(f.type), (unsigned long long)f.seq,
            (unsigned long long)ch->rx_seq);
        goto out;
    }
    ch->rx_seq = f.seq;

    if (f.reply_to != 0) {
        struct ipc_call *c = find_call(ch, f.reply_to);
        if (c == NULL) {
            ipc_channel_fail(
                ch, IPC_CHANNEL_PROTOCOL,
                "%s frame replies to seq %llu, which matches no pending "
                "call (unknown, or already answered)",
                ipc_body_name(f.type), (unsigned long long)f.reply_to);
            goto out;
        }
        if (c->cb && !ch->handshaken) {
            ipc_channel_fail(
                ch, IPC_CHANNEL_PROTOCOL,
                "%s frame replies to seq %llu before the handshake",
                ipc_body_name(f.type), (unsigned long long)f.reply_to);
            goto out;
        }
        ipc_channel_pending_unlink(ch, c);
        if (c->cb)
            c->cb(ch, &f, fds, nfds, NULL, c->arg);
        else
            ipc_channel_hello_from_master(ch, &f);
        free(c);
        goto out;
    }
    if (!ch->handshaken) {
        if (ch->cfg.role == IPC_CHANNEL_MASTER && f.type == IPC_BODY_HELLO)
            ipc_channel_hello_from_host(ch, &f);
        else
            ipc_channel_fail(ch, IPC_CHANNEL_PROTOCOL,
                             "%s frame before the handshake completed",
                             ipc_body_name(f.type));
        goto out;
    }
    if (f.type == IPC_BODY_HELLO) {
        ipc_channel_fail(ch, IPC_CHANNEL_PROTOCOL,
                         "Hello frame after the handshake");
        goto out;
    }
    ch->cb.on_frame(ch, &f, fds, nfds, ch->arg);
out:
    ipc_channel_fds_close(fds, nfds);
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
                    ipc_channel_fds_close(fds, nfds);
                    ipc_channel_fail(ch, IPC_CHANNEL_CLOSED,
                                     "out of memory for a frame of %zu bytes",
                                     total);
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
    struct ipc_fdset *s;

    while (pos < ch->rend) {
        if (pos >= a)
            last = pos;
        if (ch->rend - pos < 4)
            break;
        uint32_t len = ipc_fb_u32(ch->rbuf + pos);
        if (check_prefix(ch, len) < 0) {
            ipc_channel_fds_close(fds, nfds);
            return -1;
        }
        pos += (size_t)len + 4;
    }
    if (last == SIZE_MAX) {
        ipc_channel_fds_close(fds, nfds);
        ipc_channel_fail(
            ch, IPC_CHANNEL_PROTOCOL,
            "%u file descriptor%s arrived in the middle of a frame", nfds,
            nfds == 1 ? "" : "s");
        return -1;
    }
    if (ch->nfdq == 2) { /* cannot happen: see the comment at the top */
        ipc_channel_fds_close(fds, nfds);
        ipc_channel_fail(ch, IPC_CHANNEL_PROTOCOL,
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
        ipc_channel_fds_close(fds, n);
        *nfds = 0;
        ipc_channel_fail(ch, IPC_CHANNEL_PROTOCOL,
                         "peer sent %s (%u received, at most %u)", bad,
                         n + extra, IPC_CHANNEL_MAX_FDS);
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
            ipc_channel_fail(ch, IPC_CHANNEL_CLOSED,
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
        ipc_channel_fail(ch, IPC_CHANNEL_EOF,
                         "peer closed the channel before the "
                         "handshake completed");
    else if (have == 0)
        ipc_channel_fail(ch, IPC_CHANNEL_EOF, "peer closed the channel");
    else if (have < 4)
        ipc_channel_fail(
            ch, IPC_CHANNEL_EOF,
            "peer closed the channel in the middle of a frame (%zu of the "
            "4 bytes of its length)",
            have);
    else
        ipc_channel_fail(
            ch, IPC_CHANNEL_EOF,
            "peer closed the channel in the middle of a frame (%zu of %zu "
            "bytes)",
            have, (size_t)ipc_fb_u32(ch->rbuf + ch->rstart) + 4);
}

void
ipc_channel_rx_read(struct ipc_channel *ch)
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
            ipc_channel_fail(ch, IPC_CHANNEL_IO, "recvmsg: %s",
                             strerror(errno));
            return;
        }
        if (collect_fds(ch, &msg, fds, &nfds) < 0)
            return;
        if (n == 0) {
            ipc_channel_fds_close(fds, nfds);
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

void
ipc_channel_on_read(evutil_socket_t fd, short what, void *arg)
{
    struct ipc_channel *ch = arg;

    (void)fd;
    (void)what;
    ipc_channel_enter(ch);
    if (!ch->closed)
        ipc_channel_rx_read(ch);
    ipc_channel_leave(ch);
}
