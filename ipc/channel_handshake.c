/*
 * channel_handshake.c — the Hello exchange that opens every channel
 * (ipc/PROTOCOL.md, Handshake; channel_private.h says how the files divide
 * the transport).
 *
 * The host sends its Hello at once, as a call (seq 1 of its side) whose
 * answer this file takes.  The master waits for it under a timer
 * (handshake_timeout_ms): any other first frame, or silence, closes the
 * channel.  It answers with seq 1 of its side, reserved for that answer
 * (ipc_channel_new() starts the master's count at 1), so that frames the
 * master queued meanwhile — held in the queue until now — go after it.  A
 * refusal is written if the socket takes it at once, and the channel
 * closes with the reason; the host closes too on a refusal or a protocol
 * mismatch.  Before the handshake completes no other frame may arrive,
 * and none leaves but the Hello and its answer.
 */
#include "config.h"

#include "ipc/channel.h"
#include "ipc/channel_private.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

static void
release_held(struct ipc_channel *ch)
{
    for (struct ipc_txframe *t = ch->txhead; t; t = t->next)
        t->hold = false;
    ipc_channel_tx_schedule(ch);
}

/* Master: queues the answer to the host's Hello (seq 1, ahead of the
 * frames held meanwhile).  Returns 0 or -1 with errno. */
static int
answer_hello(struct ipc_channel *ch, uint64_t reply_to, bool accepted,
             const char *reason)
{
    struct ipc_frame f;
    struct ipc_txframe *t;
    size_t seq_pos;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_HELLO;
    f.reply_to = reply_to;
    f.u.hello.protocol = IPC_PROTOCOL_VERSION;
    f.u.hello.accepted = accepted;
    if (reason)
        f.u.hello.reason = ipc_str_c(reason);
    t = ipc_channel_tx_encode(ch, &f, &seq_pos);
    if (t == NULL)
        return -1;
    ipc_channel_tx_stamp(t, seq_pos, 1);
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
    ipc_channel_tx_drop(ch); /* the held frames never go out */
    if (answer_hello(ch, reply_to, false, reason) == 0)
        (void)ipc_channel_tx_flush(ch, true);
    ipc_channel_fail(ch, IPC_CHANNEL_HANDSHAKE, "%s", reason);
}

void
ipc_channel_hello_from_host(struct ipc_channel *ch, const struct ipc_frame *f)
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
        ipc_channel_fail(ch, IPC_CHANNEL_CLOSED,
                         "cannot queue the Hello answer: %s", strerror(errno));
        return;
    }
    ch->handshaken = true;
    event_del(ch->timer);
    release_held(ch);
}

/* Host: the master's answer to our Hello. */
void
ipc_channel_hello_from_master(struct ipc_channel *ch, const struct ipc_frame *f)
{
    const struct ipc_hello *h = &f->u.hello;
    const char *why = NULL;

    if (f->type != IPC_BODY_HELLO) {
        ipc_channel_fail(ch, IPC_CHANNEL_PROTOCOL,
                         "the master answered the Hello with %s",
                         ipc_body_name(f->type));
        return;
    }
    if (!h->accepted) {
        if (h->reason.ptr && h->reason.len)
            ipc_channel_fail(ch, IPC_CHANNEL_HANDSHAKE, "%.*s",
                             (int)h->reason.len, h->reason.ptr);
        else
            ipc_channel_fail(ch, IPC_CHANNEL_HANDSHAKE,
                             "the master refused the host");
        return;
    }
    if (h->protocol != IPC_PROTOCOL_VERSION) {
        ipc_channel_fail(ch, IPC_CHANNEL_HANDSHAKE,
                         "the master speaks protocol %u, this host %u",
                         (unsigned)h->protocol, (unsigned)IPC_PROTOCOL_VERSION);
        return;
    }
    ch->handshaken = true;
    release_held(ch);
    if (ch->cb.on_hello && ch->cb.on_hello(ch, h, &why, ch->arg) != 0 &&
        !ch->closed)
        ipc_channel_fail(ch, IPC_CHANNEL_HANDSHAKE, "%s",
                         why ? why : "the host refused the master");
}

void
ipc_channel_on_handshake_timer(evutil_socket_t fd, short what, void *arg)
{
    struct ipc_channel *ch = arg;

    (void)fd;
    (void)what;
    ipc_channel_enter(ch);
    if (!ch->handshaken)
        ipc_channel_fail(ch, IPC_CHANNEL_HANDSHAKE,
                         "handshake timed out after %u ms",
                         ch->cfg.handshake_timeout_ms);
    ipc_channel_leave(ch);
}

/* Host: the Hello, queued as a call whose answer
 * ipc_channel_hello_from_master() takes. */
int
ipc_channel_hello_send(struct ipc_channel *ch)
{
    struct ipc_frame f;
    struct ipc_txframe *t;
    struct ipc_call *c;
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
    t = ipc_channel_tx_encode(ch, &f, &seq_pos);
    if (t == NULL)
        return -1;
    c = malloc(sizeof *c);
    if (c == NULL) {
        free(t);
        errno = ENOMEM;
        return -1;
    }
    ipc_channel_tx_stamp(t, seq_pos, ++ch->tx_seq);
    ipc_channel_tx_append(ch, t);
    c->seq = ch->tx_seq;
    c->cb = NULL;
    c->arg = NULL;
    ipc_channel_pending_add(ch, c);
    ipc_channel_tx_schedule(ch);
    return 0;
}
