/*
 * channel_private.h — what the four files of the framed transport share;
 * nothing outside ipc/channel*.c includes it.
 *
 *   channel.c            the channel's life (new, free, close with a
 *                        reason), its pending calls and the small API;
 *   channel_send.c       the send queue, sendmsg(), ipc_channel_send(),
 *                        _call(), _log(), _gateway_call() and _flush();
 *   channel_recv.c       recvmsg(), the receive buffer, descriptors, and the
 *                        checks and dispatch of every frame received;
 *   channel_handshake.c  the Hello exchange, on either side.
 *
 * Every function here runs on the channel's event loop.  A function that
 * may close the channel (ipc_channel_fail()) leaves ch valid: only the
 * last handler to leave (ipc_channel_leave()) frees it.
 */
#ifndef WM_IPC_CHANNEL_PRIVATE_H
#define WM_IPC_CHANNEL_PRIVATE_H

#include "ipc/channel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

/* Receive buffer: 64 KiB takes hundreds of small frames per read; a buffer
 * grown for a large frame (and the send side's builder) is given back once
 * empty if over 1 MiB. */
#define RX_DEFAULT (64u * 1024)
#define RX_SHRINK (1024u * 1024)

/* A frame in the send queue. */
struct ipc_txframe {
    struct ipc_txframe *next;
    size_t len;    /* bytes of the frame, prefix included */
    size_t off;    /* bytes already written */
    unsigned nfds; /* descriptors not yet sent (only while off == 0) */
    bool hold;     /* queued before the handshake completed */
    int fds[IPC_CHANNEL_MAX_FDS];
    uint8_t data[];
};

/* A call waiting for its reply; cb NULL marks the host's Hello. */
struct ipc_call {
    struct ipc_call *next;
    struct ipc_call *prev;
    uint64_t seq;
    ipc_reply_cb cb;
    void *arg;
};

/* Descriptors waiting for the frame that starts at stream offset `at`. */
struct ipc_fdset {
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
    struct ipc_fdset fdq[2];
    unsigned nfdq;
    uint64_t rx_seq; /* seq of the last frame received */

    struct ipc_txframe *txhead;
    struct ipc_txframe **txtail;
    size_t queued;
    uint64_t tx_seq; /* seq of the last frame queued */
    struct ipc_fb_builder b;

    struct ipc_call *calls; /* oldest first: replies mostly come in order */
    struct ipc_call *calls_last;
    size_t ncalls;

    char reason[512];
};

/* ---- channel.c -------------------------------------------------------- */

/* Closes the n descriptors of fds (those >= 0). */
void ipc_channel_fds_close(const int *fds, unsigned n);

/* A handler of ch begins and ends: a free inside it completes on the way
 * out of the last one. */
void ipc_channel_enter(struct ipc_channel *ch);
void ipc_channel_leave(struct ipc_channel *ch);

/* Closes the channel for good with a status and a reason: I/O stops, the
 * pending calls fail, on_close runs (unless the owner freed it).  Nothing
 * when it is closed already. */
void ipc_channel_fail(struct ipc_channel *ch, enum ipc_channel_status status,
                      const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Adds c at the end of the pending calls; takes it out of them. */
void ipc_channel_pending_add(struct ipc_channel *ch, struct ipc_call *c);
void ipc_channel_pending_unlink(struct ipc_channel *ch, struct ipc_call *c);

/* ---- channel_send.c --------------------------------------------------- */

/*
 * Encodes f into a queue entry (seq not stamped, not linked), its seq
 * field at *seq_pos.  Returns it, or NULL with errno ENOMEM, EINVAL or
 * EMSGSIZE (larger than max_frame).
 */
struct ipc_txframe *ipc_channel_tx_encode(struct ipc_channel *ch,
                                          const struct ipc_frame *f,
                                          size_t *seq_pos);

/* Writes seq into t's seq field, at seq_pos from ipc_channel_tx_encode(). */
void ipc_channel_tx_stamp(struct ipc_txframe *t, size_t seq_pos, uint64_t seq);

/* Links t at the end of the send queue and counts its bytes. */
void ipc_channel_tx_append(struct ipc_channel *ch, struct ipc_txframe *t);

/* Makes the write event run soon (this loop iteration when called from a
 * callback), so that the frames queued meanwhile share one sendmsg(). */
void ipc_channel_tx_schedule(struct ipc_channel *ch);

/*
 * Writes queued frames until the queue is empty or held, or the socket is
 * full (then, unless best_effort, the write event waits for room).
 * Returns 0; -1 with errno from sendmsg(), the unsent frames still
 * queued; -2 when the write event cannot be added.
 */
int ipc_channel_tx_flush(struct ipc_channel *ch, bool best_effort);

/* Frees the send queue, closing the descriptors not sent. */
void ipc_channel_tx_drop(struct ipc_channel *ch);

/* The write event's callback (arg: the channel). */
void ipc_channel_on_write(evutil_socket_t fd, short what, void *arg);

/* ---- channel_recv.c --------------------------------------------------- */

/* Reads what the socket holds (a bounded number of rounds) and dispatches
 * every complete frame; may close the channel. */
void ipc_channel_rx_read(struct ipc_channel *ch);

/* The read event's callback (arg: the channel). */
void ipc_channel_on_read(evutil_socket_t fd, short what, void *arg);

/* ---- channel_handshake.c ---------------------------------------------- */

/* Host: queues its Hello, as a call whose answer
 * ipc_channel_hello_from_master() takes.  0, or -1 with errno. */
int ipc_channel_hello_send(struct ipc_channel *ch);

/* Master: the host's Hello, its first frame: accepted (answered, held
 * frames released) or refused (answered if the socket takes it, closed). */
void ipc_channel_hello_from_host(struct ipc_channel *ch,
                                 const struct ipc_frame *f);

/* Host: the master's answer to its Hello. */
void ipc_channel_hello_from_master(struct ipc_channel *ch,
                                   const struct ipc_frame *f);

/* Master: the handshake deadline's callback (arg: the channel). */
void ipc_channel_on_handshake_timer(evutil_socket_t fd, short what, void *arg);

#endif /* WM_IPC_CHANNEL_PRIVATE_H */
