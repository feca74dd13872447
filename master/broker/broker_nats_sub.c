/*
 * broker_nats_sub.c — subscriptions of the `nats` broker
 * (broker_nats_private.h).
 *
 * A durable subscription is a durable pull consumer of the events stream,
 * named from (tenant, topic, name), so that every instance subscribing the
 * same name binds the same consumer and JetStream spreads its events over
 * them: each is delivered to one instance at a time, and delivered again
 * (to any) when it is not acknowledged within AckWait (nats_ack_wait_ms),
 * nacked, or its instance died.  The consumer is created (or found) by a
 * JetStream API request answered in the inbox; until then nothing is
 * pulled.
 *
 * Messages.  A pulled message holds one event, or a published batch's
 * bundle of several (event_bundle.h); its events become deliveries of
 * their own sharing it (struct bn_msg), and it is settled with JetStream
 * once the last of them is.
 *
 * Pulls.  One pull request at a time per subscription, for as many
 * messages as its room (max_inflight less the events it holds) takes at
 * the events per message seen so far; a new one goes out when the last is
 * over (filled, or expired at the server after BN_PULL_EXPIRES_MS) and
 * half the room is free, or nothing is held.  Messages for a subscription
 * that ended (a pull of it still open at the server) go to the one of the
 * same name subscribed since, if any: they are its consumer's.
 * Received events wait in the subscription while it is paused and are
 * handed on (the deliver callback) while it is active, from a deferred
 * event, never inside the call that made room.
 *
 * Settlement: ack (broker_nats_pub.c: after the publishes made before
 * it), nack ("-NAK" with its delay: JetStream delivers it again, counting
 * one more), release (held here, told in progress, then handed on again
 * with the same count), term for a message none of whose events passes
 * the check.  An event of a bundle is nacked here (held, then handed on
 * again counting one more): the bundle is acked once all its events are
 * settled, and given back whole ("-NAK") when this instance lets one of
 * them go (its subscription ended with keep): its settled events are then
 * delivered again, duplicates bounded by one bundle.  A message held
 * longer than a third of AckWait is told in progress ("+WPI") so that a
 * slow handler does not get its events delivered twice.
 *
 * Live subscriptions (SSE) share one core subscription of every event
 * subject while any exists; they see events published on any instance.
 */
#include "config.h"

#include "master/broker/broker_nats_private.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/timestamp.h"
#include "master/broker/event_bundle.h"
#include "master/core/log.h"

/* The most events a consumer lets out unacknowledged, all instances
 * together. */
#define BN_MAX_ACK_PENDING 20000
#define BN_RETRY_MS 2000

static void kick(struct bn_sub *s);

/* ---- small helpers ---------------------------------------------------- */

static uint64_t
fnv64_3(const char *a, const char *b, const char *c)
{
    const char *parts[3] = { a, b, c };
    uint64_t h = 0xcbf29ce484222325ull;

    for (int i = 0; i < 3; i++) {
        for (const char *p = parts[i]; *p; p++) {
            h ^= (uint8_t)*p;
            h *= 0x100000001b3ull;
        }
        h ^= '\n';
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---- the consumer names' table (by_consumer) -------------------------- */

static size_t
cons_slot(const struct broker_nats *b, const char *c, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)c[i];
        h *= 0x100000001b3ull;
    }
    return (size_t)(h ^ (h >> 32)) & (b->cons_cap - 1);
}

/* Room for one more durable subscription: the table doubled (rebuilt in
 * the order of subs) when it would be over one per slot.  -1: no memory,
 * the table as it was. */
static int
cons_reserve(struct broker_nats *b)
{
    if (b->ncons < b->cons_cap)
        return 0;
    size_t cap = b->cons_cap ? b->cons_cap * 2 : 64;
    struct bn_sub **t = calloc(cap, sizeof *t), *s;

    if (t == NULL)
        return -1;
    free(b->by_consumer);
    b->by_consumer = t;
    b->cons_cap = cap;
    /* Each chain keeps the order of subs: appended at its tail. */
    LIST_FOREACH (s, &b->subs, link) {
        if (s->live)
            continue;
        struct bn_sub **at = &t[cons_slot(b, s->consumer, strlen(s->consumer))];
        while (*at != NULL)
            at = &(*at)->cnext;
        s->cnext = NULL;
        *at = s;
    }
    return 0;
}

/* s, just put at the head of subs, at the head of its chain (after
 * cons_reserve()). */
static void
cons_add(struct broker_nats *b, struct bn_sub *s)
{
    struct bn_sub **at =
        &b->by_consumer[cons_slot(b, s->consumer, strlen(s->consumer))];

    s->cnext = *at;
    *at = s;
    b->ncons++;
}

static void
cons_remove(struct broker_nats *b, struct bn_sub *s)
{
    struct bn_sub **at =
        &b->by_consumer[cons_slot(b, s->consumer, strlen(s->consumer))];

    while (*at != NULL && *at != s)
        at = &(*at)->cnext;
    if (*at == s) {
        *at = s->cnext;
        b->ncons--;
    }
}

/* A JetStream request whose answer comes to the inbox goes on nc, the
 * inbox's connection: the server (and, through the route, the rest of
 * a cluster) then knows the inbox before the request, also just after a
 * reconnect, when libnats has sent the subscription again.  On bulk, the
 * request could overtake it and its answer was dropped: a consumer's
 * creation then waited 6 s for the retry (4 fresh brokers in 40 beside
 * two CPU hogs), and in a 3-server cluster whose stream leader was killed
 * no creation of either daemon was answered for over a minute (2 runs of
 * test_stream_leader_killed_mid_load in 22; none in 36 on nc). */
static void
api_request(natsConnection *nc, const char *subj, const char *reply,
            const char *body)
{
    natsStatus s =
        natsConnection_PublishRequest(nc, subj, reply, body, (int)strlen(body));

    if (s != NATS_OK)
        log_warning("broker: request %s: %s", subj, natsStatus_GetText(s));
}

/* The delivery count in a JetStream ack subject: $JS.ACK.<stream>.
 * <consumer>.<delivered>.<sseq>... (9 tokens), or with a domain and an
 * account hash before the stream (12). */
static uint32_t
ack_count(const char *reply)
{
    const char *tok[13];
    int n = 0;

    if (reply == NULL)
        return 1;
    tok[n++] = reply;
    for (const char *p = reply; *p && n < 13; p++)
        if (*p == '.')
            tok[n++] = p + 1;
    if (n < 9)
        return 1;
    unsigned long c = strtoul(tok[n >= 12 ? 6 : 4], NULL, 10);
    return c == 0 ? 1 : c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
}

/* ---- subscriptions' lives --------------------------------------------- */

static void
sub_maybe_free(struct bn_sub *s)
{
    if (!s->gone || s->nout > 0 || s->ndelayed > 0 || s->hold > 0 || s->kicked)
        return;
    LIST_REMOVE(s, link);
    if (!s->live) {
        s->b->by_id[s->id] = NULL;
        cons_remove(s->b, s);
    }
    free(s->tenant);
    free(s->topic);
    free(s->name);
    free(s);
}

static void
msg_reply(struct broker_nats *b, struct bn_msg *g, const char *what)
{
    const char *reply = natsMsg_GetReply(g->m);

    if (reply != NULL)
        natsConnection_PublishString(b->bulk, reply, what);
}

/* One delivery of g is over: the last settles g with JetStream (its fate)
 * unless its consumer is deleted or the broker closes (then it is
 * delivered again after AckWait, to whoever binds the consumer). */
static void
msg_unref(struct bn_sub *s, struct bn_msg *g)
{
    struct broker_nats *b = s->b;
    const char *reply = natsMsg_GetReply(g->m);
    char what[64];

    if (--g->left > 0)
        return;
    if (reply != NULL && !(s->gone && !s->keep) && !b->closing) {
        switch (g->fate) {
        case BN_FATE_ACK:
            bn_settle_ack(b, reply, g->pub_mark);
            break;
        case BN_FATE_NAK:
            if (g->nak_delay_ms > 0)
                snprintf(what, sizeof what, "-NAK {\"delay\":%" PRIu64 "}",
                         (uint64_t)g->nak_delay_ms * 1000000);
            else
                snprintf(what, sizeof what, "-NAK");
            msg_reply(b, g, what);
            break;
        case BN_FATE_TERM:
            msg_reply(b, g, "+TERM");
            break;
        }
    }
    natsMsg_Destroy(g->m);
    free(g->buf);
    free(g);
}

/* Goes back to JetStream, delivered again (to any instance): the whole
 * message, once its other deliveries are over too. */
static void
msg_back(struct bn_msg *g, uint32_t delay_ms)
{
    if (g->fate == BN_FATE_ACK || g->nak_delay_ms < delay_ms)
        g->nak_delay_ms = delay_ms;
    g->fate = BN_FATE_NAK;
}

static void
dl_free(struct bn_dl *dl)
{
    if (dl->timer)
        event_free(dl->timer);
    msg_unref(dl->s, dl->msg);
    free(dl);
}

static void
consumer_create(struct bn_sub *s)
{
    struct broker_nats *b = s->b;
    char subj[256], reply[160], filter[1400], *body = NULL;
    char start[TIMESTAMP_SIZE + 64] = "\"deliver_policy\":\"new\"";
    char since[TIMESTAMP_SIZE];

    if (bn_subject(b, s->tenant, s->topic, filter, sizeof filter) != 0)
        return;
    /* From the worker's creation: the consumer exists only once JetStream
     * has made it, and an event published before that (just after the
     * worker's 201) would be missed by "new". */
    if (s->spec.since_ms > 0 && timestamp_format(s->spec.since_ms, since) == 0)
        snprintf(start, sizeof start,
                 "\"deliver_policy\":\"by_start_time\","
                 "\"opt_start_time\":\"%s\"",
                 since);
    snprintf(subj, sizeof subj, "$JS.API.CONSUMER.DURABLE.CREATE.%s.%s",
             b->stream, s->consumer);
    snprintf(reply, sizeof reply, "%sc.%" PRIu32, b->inbox_prefix, s->id);
    if (asprintf(&body,
                 "{\"stream_name\":\"%s\",\"config\":{\"durable_name\":\"%s\","
                 "\"description\":\"workmanager %s/%s/%s\","
                 "%s,\"ack_policy\":\"explicit\","
                 "\"ack_wait\":%" PRIu64 ",\"max_deliver\":%d,"
                 "\"filter_subject\":\"%s\",\"max_ack_pending\":%d,"
                 "\"replay_policy\":\"instant\"}}",
                 b->stream, s->consumer, s->tenant, s->topic, s->name, start,
                 (uint64_t)b->ack_wait_ms * 1000000, b->max_deliver, filter,
                 BN_MAX_ACK_PENDING) < 0)
        return;
    s->create_after_ms = timestamp_mono_ms() + BN_RETRY_MS * 3;
    s->create_asked = true;
    log_debug("broker: consumer %s: asked for, answer to %s", s->consumer,
              reply);
    api_request(b->nc, subj, reply, body);
    free(body);
}

static void
on_created(struct bn_sub *s, natsMsg *m)
{
    const char *data = natsMsg_GetData(m), *status = NULL;

    s->create_asked = false;
    log_debug("broker: consumer %s: %.200s", s->consumer, data ? data : "");
    if (natsMsgHeader_Get(m, "Status", &status) == NATS_OK && status) {
        log_warning("broker: consumer %s of %s/%s (%s): no answer from "
                    "JetStream (status %s); trying again",
                    s->consumer, s->tenant, s->topic, s->name, status);
        s->create_after_ms = timestamp_mono_ms() + BN_RETRY_MS;
        return;
    }
    /* 10012: it exists with another start (made by an earlier version
     * with "new", or for a group by an instance whose first member was
     * another): its position is the one that counts, so it is bound as
     * it is (settings JetStream would have updated are left too). */
    if (data != NULL && strstr(data, "\"err_code\":10012") != NULL) {
        log_info("broker: consumer %s of %s/%s (%s) exists with other "
                 "settings (%.200s): bound as it is",
                 s->consumer, s->tenant, s->topic, s->name, data);
    } else if (data != NULL && strstr(data, "\"error\"") != NULL &&
               strstr(data, "already") == NULL) {
        log_warning("broker: consumer %s of %s/%s (%s): %.300s; trying "
                    "again",
                    s->consumer, s->tenant, s->topic, s->name, data);
        s->create_after_ms = timestamp_mono_ms() + BN_RETRY_MS;
        return;
    }
    s->created = true;
    kick(s);
}

/* Asks for more events when there is room (see Pulls). */
static void
pull(struct bn_sub *s)
{
    struct broker_nats *b = s->b;
    size_t held = s->nwaiting + s->nout + s->ndelayed;
    char subj[256], reply[160], body[96];

    if (s->live || s->gone || !s->created || s->req != 0 ||
        s->mode != BROKER_SUB_ACTIVE || !b->connected ||
        held >= s->max_inflight)
        return;
    size_t room = s->max_inflight - held;
    if (held > 0 && room < (s->max_inflight + 1) / 2)
        return;
    /* Messages, as many as the room holds at the events per message seen
     * so far (a bundle carries many). */
    size_t msgs = room * 16 / (s->per_msg > 16 ? s->per_msg : 16);
    if (msgs == 0)
        msgs = 1;
    s->req = ++s->req_next ? s->req_next : ++s->req_next;
    s->req_left = (uint32_t)msgs;
    s->req_sent_ms = timestamp_mono_ms();
    snprintf(subj, sizeof subj, "$JS.API.CONSUMER.MSG.NEXT.%s.%s", b->stream,
             s->consumer);
    snprintf(reply, sizeof reply, "%sd.%" PRIu32 ".%" PRIu32, b->inbox_prefix,
             s->id, s->req);
    snprintf(body, sizeof body, "{\"batch\":%zu,\"expires\":%" PRIu64 "}", msgs,
             (uint64_t)BN_PULL_EXPIRES_MS * 1000000);
    log_debug("broker: pull %s %s", reply, body);
    api_request(b->nc, subj, reply, body);
}

/* Hands waiting events on while the subscription is active. */
static void
deliver_some(struct bn_sub *s)
{
    struct broker_nats *b = s->b;
    struct bn_dl *dl;

    s->hold++;
    while (!s->gone && s->mode == BROKER_SUB_ACTIVE && b->connected &&
           s->nout < s->max_inflight &&
           (dl = TAILQ_FIRST(&s->waiting)) != NULL) {
        TAILQ_REMOVE(&s->waiting, dl, link);
        s->nwaiting--;
        dl->where = BN_OUT;
        s->nout++;
        TAILQ_INSERT_TAIL(&b->out, dl, link);
        b->st.delivered++;
        s->spec.deliver(&dl->pub, s->spec.arg);
    }
    s->hold--;
    pull(s);
    sub_maybe_free(s);
}

/* The subscriptions kicked since the last run, each once, in order (a
 * kicked one is not freed before it is run: sub_maybe_free()). */
static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct broker_nats *b = arg;
    struct bn_sub *s, *next = b->kicked;

    (void)fd;
    (void)what;
    b->kicked = NULL; /* what they kick meanwhile is for the next run */
    b->kicked_tail = &b->kicked;
    while ((s = next) != NULL) {
        next = s->knext;
        s->kicked = false;
        s->hold++;
        if (!s->live)
            deliver_some(s);
        s->hold--;
        sub_maybe_free(s);
    }
}

/* Hands s's waiting events on from the loop, soon (never inside the call
 * that made room): only the subscriptions kicked are visited. */
static void
kick(struct bn_sub *s)
{
    struct broker_nats *b = s->b;

    if (b->kick == NULL) {
        b->kick = event_new(b->base, -1, 0, on_kick, b);
        if (b->kick == NULL)
            return;
    }
    if (!s->kicked) {
        s->kicked = true;
        s->knext = NULL;
        *b->kicked_tail = s;
        b->kicked_tail = &s->knext;
    }
    event_active(b->kick, 0, 0);
}

struct broker_sub *
bn_subscribe(struct broker *bb, const struct broker_sub_spec *spec)
{
    struct broker_nats *b = (struct broker_nats *)bb;
    struct bn_sub *s;

    if (!spec->live) {
        LIST_FOREACH (s, &b->subs, link)
            if (!s->live && !s->gone && strcmp(s->tenant, spec->tenant) == 0 &&
                strcmp(s->topic, spec->topic) == 0 &&
                strcmp(s->name, spec->name) == 0) {
                errno = EEXIST;
                return NULL;
            }
    }
    s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->head.b = bb;
    s->b = b;
    s->spec = *spec;
    s->live = spec->live;
    s->tenant = strdup(spec->tenant);
    s->topic = strdup(spec->topic);
    s->name = strdup(spec->name ? spec->name : "");
    s->mode = BROKER_SUB_ACTIVE;
    s->max_inflight = spec->max_inflight ? spec->max_inflight : 1;
    s->per_msg = 16;
    TAILQ_INIT(&s->waiting);
    if (s->tenant == NULL || s->topic == NULL || s->name == NULL)
        goto fail;
    s->spec.tenant = s->tenant;
    s->spec.topic = s->topic;
    s->spec.name = s->name;
    if (s->live) {
        if (bn_live_need(b, true) != 0)
            goto fail;
        b->nlive++;
        LIST_INSERT_HEAD(&b->subs, s, link);
        return &s->head;
    }
    if (cons_reserve(b) != 0)
        goto fail;
    if (b->nids % 64 == 0) {
        struct bn_sub **ids = realloc(b->by_id, (b->nids + 64) * sizeof *ids);
        if (ids == NULL)
            goto fail;
        b->by_id = ids;
    }
    s->id = b->nids++;
    b->by_id[s->id] = s;
    snprintf(s->consumer, sizeof s->consumer, "%s_%016" PRIx64, b->prefix,
             fnv64_3(s->tenant, s->topic, s->name));
    LIST_INSERT_HEAD(&b->subs, s, link);
    cons_add(b, s);
    if (b->connected)
        consumer_create(s);
    return &s->head;
fail:
    free(s->tenant);
    free(s->topic);
    free(s->name);
    free(s);
    errno = ENOMEM;
    return NULL;
}

void
bn_set_mode(struct broker_sub *ss, enum broker_sub_mode mode)
{
    struct bn_sub *s = (struct bn_sub *)ss;

    s->mode = mode;
    if (mode == BROKER_SUB_ACTIVE)
        kick(s);
}

void
bn_set_max_inflight(struct broker_sub *ss, unsigned n)
{
    struct bn_sub *s = (struct bn_sub *)ss;

    s->max_inflight = n ? n : 1;
    kick(s);
}

void
bn_unsubscribe(struct broker_sub *ss, bool keep)
{
    struct bn_sub *s = (struct bn_sub *)ss;
    struct broker_nats *b = s->b;
    struct bn_dl *dl;

    s->gone = true;
    s->keep = keep;
    if (s->live) {
        if (--b->nlive == 0)
            bn_live_need(b, false);
        sub_maybe_free(s);
        return;
    }
    /* What it holds goes back to the consumer, for another instance or
     * its next subscribe. */
    while ((dl = TAILQ_FIRST(&s->waiting)) != NULL) {
        TAILQ_REMOVE(&s->waiting, dl, link);
        s->nwaiting--;
        msg_back(dl->msg, 0);
        dl_free(dl);
    }
    if (!keep) {
        char subj[256], reply[160];

        snprintf(subj, sizeof subj, "$JS.API.CONSUMER.DELETE.%s.%s", b->stream,
                 s->consumer);
        snprintf(reply, sizeof reply, "%sx", b->inbox_prefix);
        api_request(b->bulk, subj, reply, ""); /* after its -NAKs */
        log_info("broker: consumer %s of %s/%s (%s) deleted", s->consumer,
                 s->tenant, s->topic, s->name);
    }
    sub_maybe_free(s);
}

/* ---- settlement ------------------------------------------------------- */

/* Takes dl off the out list; frees it and maybe its subscription. */
static void
settled(struct bn_dl *dl)
{
    struct bn_sub *s = dl->s;

    TAILQ_REMOVE(&s->b->out, dl, link);
    s->nout--;
    dl_free(dl);
    kick(s);
    sub_maybe_free(s);
}

void
bn_ack(struct broker_delivery *d)
{
    struct bn_dl *dl = (struct bn_dl *)d;
    struct bn_sub *s = dl->s;

    if (!(s->gone && !s->keep))
        s->b->st.acked++;
    settled(dl);
}

static void
on_released(evutil_socket_t fd, short what, void *arg)
{
    struct bn_dl *dl = arg;
    struct bn_sub *s = dl->s;

    (void)fd;
    (void)what;
    s->ndelayed--;
    TAILQ_REMOVE(&s->b->out, dl, link);
    if (s->gone) {
        msg_back(dl->msg, 0);
        dl_free(dl);
        sub_maybe_free(s);
        return;
    }
    dl->where = BN_WAITING;
    TAILQ_INSERT_HEAD(&s->waiting, dl, link);
    s->nwaiting++;
    kick(s);
}

/* Delivers dl again from here after delay_ms (its message stays in
 * progress with JetStream meanwhile), or gives its message back. */
static void
hold_for(struct bn_dl *dl, uint32_t delay_ms)
{
    struct bn_sub *s = dl->s;
    struct timeval tv = { delay_ms / 1000, (delay_ms % 1000) * 1000 };

    if (!s->gone && dl->timer == NULL)
        dl->timer = evtimer_new(s->b->base, on_released, dl);
    if (s->gone || dl->timer == NULL) {
        msg_back(dl->msg, delay_ms);
        settled(dl);
        return;
    }
    s->nout--;
    dl->where = BN_DELAYED;
    s->ndelayed++;
    evtimer_add(dl->timer, &tv);
}

void
bn_nack(struct broker_delivery *d, uint32_t delay_ms)
{
    struct bn_dl *dl = (struct bn_dl *)d;
    struct bn_sub *s = dl->s;

    if (!(s->gone && !s->keep))
        s->b->st.nacked++;
    if (dl->msg->n == 1) {
        /* JetStream delivers it again, counting one more. */
        msg_back(dl->msg, delay_ms);
        settled(dl);
        return;
    }
    /* One event of a bundle: delivered again from here, counted here
     * (the bundle goes back whole only if this instance lets it go). */
    if (dl->pub.count < UINT32_MAX)
        dl->pub.count++;
    hold_for(dl, delay_ms);
}

void
bn_release(struct broker_delivery *d, uint32_t delay_ms)
{
    hold_for((struct bn_dl *)d, delay_ms);
}

size_t
bn_sub_backlog(const struct broker_sub *ss)
{
    const struct bn_sub *s = (const struct bn_sub *)ss;

    return s->nwaiting + s->nout + s->ndelayed;
}

const char *
bn_sub_name(const struct broker_sub *ss)
{
    return ((const struct bn_sub *)ss)->name;
}

/* ---- messages --------------------------------------------------------- */

/* The events of a message, copied aligned: one, or a bundle's. */
struct bn_events {
    uint8_t *buf;
    size_t len;
    long n; /* events in it (before the check of each) */
    bool bundle;
    struct event_bundle_iter it; /* a bundle's */
    bool given;                  /* a single event's: handed out */
};

/* Copies m's data; -1 (logged) when it is empty or a malformed bundle. */
static int
events_open(natsMsg *m, struct bn_events *e)
{
    int n = natsMsg_GetDataLength(m);

    memset(e, 0, sizeof *e);
    if (n <= 0 || (e->buf = malloc((size_t)n)) == NULL)
        return -1;
    e->len = (size_t)n;
    memcpy(e->buf, natsMsg_GetData(m), e->len);
    if (!event_bundle_is(e->buf, e->len)) {
        e->n = 1;
        return 0;
    }
    if ((e->n = event_bundle_count(e->buf, e->len)) < 1) {
        log_err("broker: a message of %s from NATS holds no well-formed "
                "bundle of events",
                natsMsg_GetSubject(m));
        free(e->buf);
        e->buf = NULL;
        return -1;
    }
    e->bundle = true;
    event_bundle_iter_init(&e->it, e->buf, e->len);
    return 0;
}

/* The next event that passes the check (the others are logged). */
static bool
events_next(struct broker_nats *b, struct bn_events *e, const char *subject,
            const uint8_t **ev, size_t *len)
{
    for (;;) {
        if (e->bundle) {
            if (!event_bundle_next(&e->it, ev, len))
                return false;
        } else {
            if (e->given)
                return false;
            e->given = true;
            *ev = e->buf;
            *len = e->len;
        }
        if (b->verify == NULL || b->verify(*ev, *len) == 0)
            return true;
        log_err("broker: an event of %s from NATS fails the check: dropped",
                subject);
    }
}

static void
on_pulled(struct broker_nats *b, struct bn_sub *s, uint32_t req, natsMsg *m)
{
    const char *status = NULL;
    struct bn_events e;
    struct bn_msg *g;
    const uint8_t *ev;
    size_t len;

    if (natsMsgHeader_Get(m, "Status", &status) == NATS_OK && status) {
        /* 404 no messages, 408 expired, 409 too many waiting...: the
         * request is over. */
        if (s != NULL && req == s->req && strcmp(status, "100") != 0) {
            s->req = 0;
            pull(s);
        }
        natsMsg_Destroy(m);
        return;
    }
    if (s == NULL || s->gone) {
        if (natsMsg_GetReply(m) != NULL)
            natsConnection_PublishString(b->bulk, natsMsg_GetReply(m), "-NAK");
        natsMsg_Destroy(m);
        return;
    }
    /* Events do not say which pull asked for them: they count against the
     * current one. */
    if (s->req != 0 && s->req_left > 0 && --s->req_left == 0)
        s->req = 0;
    if ((g = calloc(1, sizeof *g)) == NULL) {
        natsMsg_Destroy(m); /* delivered again after AckWait */
        return;
    }
    g->m = m;
    g->touched_ms = timestamp_mono_ms();
    g->pub_mark = b->pub_issued;
    if (events_open(m, &e) == 0) {
        g->buf = e.buf;
        g->n = (uint32_t)e.n;
        s->per_msg = (s->per_msg * 3 + g->n * 16) / 4;
    }
    g->left = 1; /* held while its deliveries are made */
    uint32_t count = ack_count(natsMsg_GetReply(m));
    while (g->buf && events_next(b, &e, natsMsg_GetSubject(m), &ev, &len)) {
        struct bn_dl *dl = calloc(1, sizeof *dl);
        if (dl == NULL) {
            msg_back(g, BN_RETRY_MS);
            break;
        }
        dl->s = s;
        dl->msg = g;
        g->left++;
        dl->pub.broker = &b->head;
        dl->pub.sub = &s->head;
        dl->pub.event = ev;
        dl->pub.len = len;
        dl->pub.tenant = s->tenant;
        dl->pub.topic = s->topic;
        dl->pub.count = count;
        dl->pub.id = ++b->next_delivery_id;
        dl->where = BN_WAITING;
        TAILQ_INSERT_TAIL(&s->waiting, dl, link);
        s->nwaiting++;
    }
    if (g->left == 1 && g->fate == BN_FATE_ACK) {
        log_err("broker: a message of %s/%s from NATS has no event that "
                "passes the check: dropped (+TERM)",
                s->tenant, s->topic);
        g->fate = BN_FATE_TERM;
    }
    msg_unref(s, g);
    deliver_some(s);
}

static void
on_live(struct broker_nats *b, natsMsg *m)
{
    char tenant[256], topic[1024];
    struct broker_delivery d;
    struct bn_events e = { 0 };
    const uint8_t *ev;
    struct bn_sub *s;
    size_t len;

    if (bn_subject_parse(b, natsMsg_GetSubject(m), tenant, sizeof tenant, topic,
                         sizeof topic) != 0 ||
        events_open(m, &e) != 0)
        goto out;
    while (events_next(b, &e, natsMsg_GetSubject(m), &ev, &len)) {
        LIST_FOREACH (s, &b->subs, link) {
            if (!s->live || s->gone ||
                (strcmp(s->tenant, "*") != 0 &&
                 strcmp(s->tenant, tenant) != 0) ||
                (strcmp(s->topic, "*") != 0 && strcmp(s->topic, topic) != 0))
                continue;
            memset(&d, 0, sizeof d);
            d.broker = &b->head;
            d.sub = &s->head;
            d.event = ev;
            d.len = len;
            d.tenant = tenant;
            d.topic = topic;
            d.count = 1;
            d.id = ++b->next_delivery_id;
            s->spec.deliver(&d, s->spec.arg);
        }
    }
out:
    free(e.buf);
    natsMsg_Destroy(m);
}

/* The subscription whose consumer a JetStream ack subject names (the
 * token after the stream's), or NULL. */
static struct bn_sub *
sub_of_ack(struct broker_nats *b, const char *reply)
{
    const char *tok[12];
    int n = 0;
    struct bn_sub *s;

    tok[n++] = reply;
    for (const char *p = reply; *p && n < 12; p++)
        if (*p == '.')
            tok[n++] = p + 1;
    if (n < 9)
        return NULL;
    const char *c = tok[n >= 12 ? 5 : 3];
    size_t len = strcspn(c, ".");
    if (b->cons_cap == 0)
        return NULL;
    /* the one subscribed now, else one that was */
    struct bn_sub *was = NULL;
    for (s = b->by_consumer[cons_slot(b, c, len)]; s != NULL; s = s->cnext)
        if (strncmp(s->consumer, c, len) == 0 && s->consumer[len] == '\0') {
            if (!s->gone)
                return s;
            was = was ? was : s;
        }
    return was;
}

void
bn_sub_message(struct broker_nats *b, natsMsg *m)
{
    const char *subj = natsMsg_GetSubject(m), *reply = natsMsg_GetReply(m);
    size_t pl = strlen(b->inbox_prefix);
    char *end;

    if (strncmp(subj, b->inbox_prefix, pl) != 0) {
        /* A pulled event keeps its subject; its ack subject names its
         * consumer.  Anything else is a live one. */
        if (reply != NULL && strncmp(reply, "$JS.ACK.", 8) == 0)
            on_pulled(b, sub_of_ack(b, reply), 0, m);
        else
            on_live(b, m);
        return;
    }
    char kind = subj[pl];
    unsigned long id = strtoul(subj + pl + 2, &end, 10);
    struct bn_sub *s =
        subj[pl + 1] == '.' && id < b->nids ? b->by_id[id] : NULL;
    if (kind == 'd') {
        /* a status of a pull request: 408 expired, 404... */
        uint32_t req = *end == '.' ? (uint32_t)strtoul(end + 1, NULL, 10) : 0;
        on_pulled(b, s, req, m);
        return;
    }
    if (kind == 'c' && s != NULL && !s->gone)
        on_created(s, m);
    natsMsg_Destroy(m);
}

/* ---- the tick ------------------------------------------------------- */

static void
keep_in_progress(struct broker_nats *b, struct bn_dl *dl, int64_t now)
{
    struct bn_msg *g = dl->msg;

    if (now - g->touched_ms >= (int64_t)b->ack_wait_ms / 3) {
        msg_reply(b, g, "+WPI");
        g->touched_ms = now;
    }
}

void
bn_sub_tick(struct broker_nats *b, int64_t now)
{
    struct bn_sub *s, *first = NULL;
    struct bn_dl *dl;
    size_t unanswered = 0;

    if (!b->connected)
        return;
    TAILQ_FOREACH (dl, &b->out, link)
        if (!(dl->s->gone && !dl->s->keep))
            keep_in_progress(b, dl, now);
    LIST_FOREACH (s, &b->subs, link) {
        if (s->live || s->gone)
            continue;
        TAILQ_FOREACH (dl, &s->waiting, link)
            keep_in_progress(b, dl, now);
        if (!s->created) {
            if (now < s->create_after_ms)
                continue;
            if (s->create_asked && unanswered++ == 0)
                first = s;
            consumer_create(s);
            continue;
        }
        if (s->req != 0 &&
            now - s->req_sent_ms > BN_PULL_EXPIRES_MS + BN_RETRY_MS)
            s->req = 0; /* its answer was lost */
        pull(s);
    }
    /* A lost answer is silent otherwise: the subscription gets nothing
     * until one comes.  One line a tick, however many. */
    if (unanswered > 0)
        log_warning("broker: JetStream did not answer the creation of %zu "
                    "consumer(s) within %d s (consumer %s of %s/%s, %s, "
                    "among them): asking again",
                    unanswered, BN_RETRY_MS * 3 / 1000, first->consumer,
                    first->tenant, first->topic, first->name);
}

void
bn_sub_reconnected(struct broker_nats *b)
{
    struct bn_sub *s;

    LIST_FOREACH (s, &b->subs, link) {
        s->req = 0;
        if (!s->created) {
            s->create_after_ms = 0;
            s->create_asked = false; /* not the server's silence */
        }
        kick(s);
    }
}

void
bn_sub_free_all(struct broker_nats *b)
{
    struct bn_sub *s;
    struct bn_dl *dl;

    b->closing = true; /* nothing settled: delivered again after AckWait */
    while ((dl = TAILQ_FIRST(&b->out)) != NULL) {
        TAILQ_REMOVE(&b->out, dl, link);
        dl_free(dl);
    }
    while ((s = LIST_FIRST(&b->subs)) != NULL) {
        while ((dl = TAILQ_FIRST(&s->waiting)) != NULL) {
            TAILQ_REMOVE(&s->waiting, dl, link);
            dl_free(dl);
        }
        LIST_REMOVE(s, link);
        free(s->tenant);
        free(s->topic);
        free(s->name);
        free(s);
    }
    free(b->by_id);
    b->by_id = NULL;
    free(b->by_consumer);
    b->by_consumer = NULL;
    b->ncons = b->cons_cap = 0;
    if (b->kick)
        event_free(b->kick);
}
