/*
 * channel.h — the framed transport between the master and a host
 * (DESIGN §3, ipc/PROTOCOL.md): size-prefixed frames over one end of a
 * SOCK_STREAM socketpair, file descriptors beside them, the Hello handshake,
 * sequence numbers, calls matched to their replies, bounded send queue.
 *
 * A channel lives on a libevent event_base and reports through callbacks.
 * Everything the peer sends is verified before a callback sees it; anything
 * wrong closes the channel with a status and a human reason.  Callbacks may
 * call ipc_channel_send(), ipc_channel_call() and ipc_channel_free() on the
 * channel that called them.
 */
#ifndef WM_IPC_CHANNEL_H
#define WM_IPC_CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#include "ipc/frame.h"

struct event_base;
struct ipc_channel;

/* Descriptors that may travel with one frame. */
#define IPC_CHANNEL_MAX_FDS 8
/* Defaults of struct ipc_channel_config. */
#define IPC_CHANNEL_MAX_QUEUE_DEFAULT (8u * 1024 * 1024)
#define IPC_CHANNEL_HANDSHAKE_MS_DEFAULT 2000u

enum ipc_channel_role {
    IPC_CHANNEL_MASTER, /* waits for the host's Hello, answers it */
    IPC_CHANNEL_HOST,   /* sends its Hello at once, waits for the answer */
};

/* Why a channel closed (on_close). */
enum ipc_channel_status {
    IPC_CHANNEL_EOF = 1,   /* the peer closed its end (or died) */
    IPC_CHANNEL_PROTOCOL,  /* the peer broke the protocol */
    IPC_CHANNEL_HANDSHAKE, /* refused, mismatched or timed-out handshake */
    IPC_CHANNEL_IO,        /* a socket call failed */
    IPC_CHANNEL_CLOSED,    /* a local failure: out of memory, event loop */
};

struct ipc_channel_config {
    enum ipc_channel_role role;
    /* Largest frame accepted or sent, length prefix included; checked
     * before anything is allocated.  0 = IPC_FRAME_MAX_DEFAULT. */
    size_t max_frame;
    /* Bytes queued unsent before a send is refused with EAGAIN (an empty
     * queue always takes one frame).  0 = IPC_CHANNEL_MAX_QUEUE_DEFAULT. */
    size_t max_queue;
    /* Master: how long the host has to send its Hello.  0 = 2000.  The
     * host side has no timer: the master enforces the deadline. */
    unsigned handshake_timeout_ms;
    /* Host: what its Hello says (strings may be NULL). */
    const char *engine;
    uint32_t max_inflight;
    uint32_t prefetch; /* ipc_hello.prefetch */
    const char *confinement;
    /* Host: the protocol its Hello announces; 0 = IPC_PROTOCOL_VERSION.
     * Only tests set another. */
    uint16_t protocol;
};

struct ipc_channel_callbacks {
    /* A verified frame that is neither a reply to one of our calls nor part
     * of the handshake.  fds are the descriptors that came with it; the
     * callee keeps one by setting fds[i] = -1, the channel closes the rest
     * after the return.  The frame's views die with the return too. */
    void (*on_frame)(struct ipc_channel *ch, const struct ipc_frame *f,
                     int *fds, unsigned nfds, void *arg);
    /* Master: the host's Hello, after the protocol version check; return 0
     * to accept, or -1 with *reason set (a static or arg-owned string) to
     * refuse.  Host: the master accepted; -1 closes the channel as a
     * failed handshake.  Frames sent from here on the master side go out
     * after the answer.  May be NULL (accept). */
    int (*on_hello)(struct ipc_channel *ch, const struct ipc_hello *hello,
                    const char **reason, void *arg);
    /* Called once when the channel closes by itself (never because of
     * ipc_channel_free()), after every pending call failed.  reason names
     * the cause ("frame of 20000004 bytes (length prefix 20000000) exceeds
     * the 16777216-byte cap", "protocol 2 not supported: this master speaks
     * 1", "handshake timed out after 2000 ms", "peer closed the channel in
     * the middle of a frame (6 of 104 bytes)") and is valid during the call.
     * The descriptor is already closed; only ipc_channel_free() remains. */
    void (*on_close)(struct ipc_channel *ch, enum ipc_channel_status status,
                     const char *reason, void *arg);
    /* The queue fell below half of max_queue after a send was refused with
     * EAGAIN.  May be NULL. */
    void (*on_drain)(struct ipc_channel *ch, void *arg);
};

/* The answer to ipc_channel_call(): the reply frame and its descriptors
 * (kept by setting fds[i] = -1, as in on_frame) and error NULL, or reply
 * NULL, no descriptors and error naming why the call failed (the channel's
 * close reason, or "channel closed" from ipc_channel_free()). */
typedef void (*ipc_reply_cb)(struct ipc_channel *ch,
                             const struct ipc_frame *reply, int *fds,
                             unsigned nfds, const char *error, void *arg);

/* Creates a channel on the connected SOCK_STREAM socket fd, which it takes
 * (made non-blocking; closed by ipc_channel_free(), also on failure here).
 * cfg and cb are copied; arg is passed to every callback.  The host role
 * queues its Hello at once; the master role starts the handshake timer.
 * Returns NULL with errno set on failure. */
struct ipc_channel *ipc_channel_new(struct event_base *base, int fd,
                                    const struct ipc_channel_config *cfg,
                                    const struct ipc_channel_callbacks *cb,
                                    void *arg);

/* Closes the descriptor, drops the queue, fails every pending call with
 * "channel closed" and frees the channel (deferred while one of its
 * callbacks runs: safe to call from any of them).  on_close is not called.
 * NULL is a no-op. */
void ipc_channel_free(struct ipc_channel *ch);

/* Queues frame f with the descriptors fds[0..nfds) (at most
 * IPC_CHANNEL_MAX_FDS), written when the event loop next runs.  f->seq is
 * ignored: the channel numbers its frames from 1; f->reply_to is sent as
 * given.  The descriptors are the channel's from here on: closed once sent,
 * or at once when the send fails.  Before the handshake completes, frames
 * are held back and go out after it.  Returns 0, or -1 with errno EAGAIN
 * (queue over max_queue: wait for on_drain), EMSGSIZE (frame over
 * max_frame), EINVAL (too many fds, bad body), EPIPE (channel closed) or
 * ENOMEM. */
int ipc_channel_send(struct ipc_channel *ch, const struct ipc_frame *f,
                     const int *fds, unsigned nfds);

/* A host's Log frame: the message formatted as printf() would (cut at
 * 1023 bytes), sent as ipc_channel_send() does, with its return. */
int ipc_channel_log(struct ipc_channel *ch, enum ipc_log_level level,
                    const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* As ipc_channel_send(), and the frame whose reply_to is this frame's seq
 * goes to cb (not on_frame), exactly once: with the reply, or with an error
 * when the channel closes first.  cb is not called when this returns -1. */
int ipc_channel_call(struct ipc_channel *ch, const struct ipc_frame *f,
                     const int *fds, unsigned nfds, ipc_reply_cb cb, void *arg);

/* A gateway call's answer as ipc_channel_gateway_call() gives it. */
struct ipc_gateway_answer {
    int32_t status; /* the reply's; 500 when the channel closed first */
    char *body;     /* the response (200) or the error (else), or why the
                       channel closed; NUL-terminated, the caller's to free() */
    size_t len;     /* of body, without the NUL */
};

/* A host's synchronous GatewayCall (DESIGN §3): sends service.method with
 * the JSON request and runs the channel's event base
 * (event_base_loop(EVLOOP_ONCE)) until the reply, whatever other frames
 * come meanwhile.  Never from inside a callback of that base: libevent
 * does not allow it.  Returns 0 with *a filled, or -1 with errno (the
 * send's, or ENOMEM) and nothing to free; EIO when the event loop failed,
 * after which the call is still registered and the host can only exit. */
int ipc_channel_gateway_call(struct ipc_channel *ch, struct ipc_str service,
                             struct ipc_str method, struct ipc_bytes request,
                             struct ipc_gateway_answer *a);

/* Writes the queue now, waiting up to timeout_ms for the socket to take
 * it: for a host about to exit (after Shutdown) whose last replies must
 * not be lost.  Runs no callback.  Returns 0 once nothing is queued, or -1
 * with errno ETIMEDOUT, ENOTCONN (frames held for the handshake), EPIPE
 * (closed) or the error of sendmsg() or poll(). */
int ipc_channel_flush(struct ipc_channel *ch, unsigned timeout_ms);

/* Bytes queued and not yet written. */
size_t ipc_channel_queued(const struct ipc_channel *ch);

/* Calls made with ipc_channel_call() and not yet answered. */
size_t ipc_channel_pending(const struct ipc_channel *ch);

/* Reads what the peer has sent as soon as the callback running now
 * returns, before the loop's next timers: for a deadline that would
 * otherwise judge a reply already waiting in the socket (the process was
 * not scheduled, or stopped, while it came). */
void ipc_channel_read_soon(struct ipc_channel *ch);

/* The channel's socket (owned by the channel: a caller that must keep it
 * open past ipc_channel_free() duplicates it). */
int ipc_channel_fd(const struct ipc_channel *ch);

/* "eof", "protocol", "handshake", "io", "closed". */
const char *ipc_channel_status_name(enum ipc_channel_status status);

#endif /* WM_IPC_CHANNEL_H */
