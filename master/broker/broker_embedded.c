/*
 * broker_embedded.c — the `embedded` broker backend (broker.h, DESIGN §6):
 * in-memory queues behind the write-ahead journal (journal.h).
 *
 * Objects:
 *   topic   one (tenant, topic): its active subscriptions and the durable
 *           state of every subscription name it has seen (dsub).
 *   msg     one accepted event that some durable subscription still owes
 *           a settlement: the event bytes (shared by all its deliveries)
 *           and its journal record.  Freed when the last is settled.
 *   dsub    the durable state of a name: its queue (waiting deliveries),
 *           delayed and out counts, and the subscription using it, if any.
 *           It outlives its subscription (a stopped worker; after a
 *           restart, until the worker is recovered).
 *   dl      one (msg, dsub) delivery: queued, delayed (a timer), or out
 *           (handed to the subscriber, awaiting ack or nack).
 *
 * Journal records (payloads, little-endian; `origin` is the lsn of the
 * message's first record, 0 in that first record itself, so that a record
 * rewritten by compaction names the message it replaces):
 *   MSG     u64 origin | str tenant | str topic | u16 n | n × (str name,
 *           u32 count) | u32 len | event            (LIVE)
 *   SETTLE  u64 origin | str name                   (AUX: acked, dropped)
 *   COUNT   u64 origin | str name | u32 count       (AUX: after a nack)
 * where str is u16 length | bytes.  Replay rebuilds every message with its
 * unsettled names; a message with none left is released at once.
 *
 * Storage failures (the journal cannot write): broker_storage.c.  What
 * is held for each tenant (the backlog quotas): broker_tenant.c.
 *
 * Delivery order: FIFO per subscription; a nacked delivery goes back to the
 * head of its queue once its delay has passed.  Deliveries of a
 * subscription start from a deferred "kick" event, never inside the call
 * that queued them, so subscribers may ack or nack inside their delivery
 * callback.  Live subscriptions (SSE) are called inside broker_publish().
 *
 * The operations table at the end is what broker.c dispatches to
 * (broker_backend.h); the NATS backend is broker_nats*.c.
 */
#include "config.h"

#include "master/broker/broker.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "lib/errbuf.h"
#include "master/broker/broker_embedded.h"
#include "master/broker/broker_private.h"
#include "master/broker/broker_record.h"
#include "master/broker/journal.h"
#include "master/core/log.h"

static const struct broker_ops broker_embedded_ops;
static void eb_close(struct broker *bb);

/* ---- small helpers ---------------------------------------------------- */

static uint64_t
hash2(const char *a, const char *b)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *s = a; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (const char *s = b; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static struct topic *
topic_find(struct ebroker *b, const char *tenant, const char *topic)
{
    struct topic *t = b->buckets[hash2(tenant, topic) & (b->nbuckets - 1)];
    for (; t; t = t->next)
        if (strcmp(t->topic, topic) == 0 && strcmp(t->tenant, tenant) == 0)
            return t;
    return NULL;
}

static int
topics_grow(struct ebroker *b)
{
    size_t n = b->nbuckets * 2;
    struct topic **nb = calloc(n, sizeof *nb);
    if (nb == NULL)
        return -1;
    for (size_t i = 0; i < b->nbuckets; i++) {
        struct topic *t, *next;
        for (t = b->buckets[i]; t; t = next) {
            next = t->next;
            size_t k = hash2(t->tenant, t->topic) & (n - 1);
            t->next = nb[k];
            nb[k] = t;
        }
    }
    free(b->buckets);
    b->buckets = nb;
    b->nbuckets = n;
    return 0;
}

static struct topic *
topic_get(struct ebroker *b, const char *tenant, const char *topic)
{
    struct topic *t = topic_find(b, tenant, topic);
    if (t)
        return t;
    if (b->ntopics >= b->nbuckets && topics_grow(b) < 0)
        return NULL;
    t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->tenant = strdup(tenant);
    t->topic = strdup(topic);
    t->acct = tenant_backlog_get(b, tenant);
    if (t->tenant == NULL || t->topic == NULL || t->acct == NULL) {
        free(t->tenant);
        free(t->topic);
        free(t);
        return NULL;
    }
    LIST_INIT(&t->subs);
    size_t k = hash2(tenant, topic) & (b->nbuckets - 1);
    t->next = b->buckets[k];
    b->buckets[k] = t;
    b->ntopics++;
    return t;
}

static struct dsub *
dsub_find(struct topic *t, const char *name)
{
    for (struct dsub *ds = t->dsubs; ds; ds = ds->next)
        if (strcmp(ds->name, name) == 0)
            return ds;
    return NULL;
}

static struct dsub *
dsub_get(struct topic *t, const char *name)
{
    struct dsub *ds = dsub_find(t, name);
    if (ds)
        return ds;
    ds = calloc(1, sizeof *ds);
    if (ds == NULL || (ds->name = strdup(name)) == NULL) {
        free(ds);
        return NULL;
    }
    ds->t = t;
    TAILQ_INIT(&ds->queue);
    ds->next = t->dsubs;
    t->dsubs = ds;
    return ds;
}

static void
dsub_free_if_unused(struct dsub *ds)
{
    if (ds->active || ds->hold || ds->nqueued || ds->ndelayed || ds->nout)
        return;
    for (struct dsub **pp = &ds->t->dsubs; *pp; pp = &(*pp)->next) {
        if (*pp == ds) {
            *pp = ds->next;
            break;
        }
    }
    free(ds->name);
    free(ds);
}

static size_t
dsub_backlog(const struct dsub *ds)
{
    return ds->nqueued + ds->ndelayed + ds->nout;
}

/* ---- records ------------------------------------------------------- */

/* Appends m's record (a first one, or its compaction rewrite). */
static int
journal_msg(struct ebroker *b, struct msg *m, uint64_t origin,
            journal_done_cb cb, void *arg)
{
    struct brec_writer w = { 0 };
    uint16_t n = 0;

    for (struct dl *d = m->dls; d; d = d->next_in_msg)
        n++;
    brec_writer_uint(&w, origin, 8);
    brec_writer_str(&w, m->t->tenant);
    brec_writer_str(&w, m->t->topic);
    brec_writer_uint(&w, n, 2);
    for (struct dl *d = m->dls; d; d = d->next_in_msg) {
        brec_writer_str(&w, d->ds->name);
        brec_writer_uint(&w, d->pub.count, 4);
    }
    brec_writer_uint(&w, (uint32_t)m->len, 4);
    brec_writer_put(&w, m->ev, m->len);
    if (w.oom) {
        free(w.p);
        errno = ENOMEM;
        return -1;
    }
    uint64_t lsn =
        journal_append(b->j, REC_MSG, JOURNAL_LIVE, w.p, w.len, cb, arg);
    free(w.p);
    if (lsn == 0)
        return -1;
    m->lsn = lsn;
    if (origin == 0)
        m->origin = lsn;
    return 0;
}

/* Appends a SETTLE (count 0) or COUNT record of d. */
static void
journal_dl(struct ebroker *b, const struct dl *d, bool settle)
{
    struct brec_writer w = { 0 };
    uint8_t buf[128];

    if (d->m->lsn == 0 || b->replaying)
        return;
    w.p = buf;
    w.cap = sizeof buf;
    brec_writer_uint(&w, d->m->origin, 8);
    brec_writer_str(&w, d->ds->name);
    if (!settle)
        brec_writer_uint(&w, d->pub.count, 4);
    if (w.p == buf && !w.oom &&
        journal_append(b->j, settle ? REC_SETTLE : REC_COUNT, 0, w.p, w.len,
                       NULL, NULL) == 0)
        log_err("broker: cannot journal the %s of an event of %s/%s: %s",
                settle ? "settlement" : "delivery count", d->m->t->tenant,
                d->m->t->topic, strerror(errno));
    if (w.p != buf)
        free(w.p);
}

/* ---- messages and deliveries ----------------------------------------- */

static void
msg_free(struct ebroker *b, struct msg *m)
{
    if (m->lsn)
        journal_release(b->j, m->lsn);
    TAILQ_REMOVE(&b->msgs, m, link);
    b->nmsgs--;
    tenant_backlog_add(m->t->acct, -1, m->len);
    free(m->ev);
    free(m);
}

static void sub_kick(struct esub *s);

/* Settles d for good (ack or drop): journaled, unlinked, freed. */
static void
dl_settle(struct ebroker *b, struct dl *d)
{
    struct msg *m = d->m;
    struct dsub *ds = d->ds;

    journal_dl(b, d, true);
    for (struct dl **pp = &m->dls; *pp; pp = &(*pp)->next_in_msg) {
        if (*pp == d) {
            *pp = d->next_in_msg;
            break;
        }
    }
    switch (d->where) {
    case DL_QUEUED:
        TAILQ_REMOVE(&ds->queue, d, q);
        ds->nqueued--;
        break;
    case DL_DELAYED:
        ds->ndelayed--;
        break;
    case DL_OUT:
    case DL_ORPHAN: /* still counted: its dsub waits for it */
        ds->nout--;
        break;
    }
    if (d->timer)
        event_free(d->timer);
    free(d);
    b->st.pending--;
    /* Replay sweeps emptied messages at its end: by_origin points to
     * them meanwhile. */
    if (m->dls == NULL && !b->replaying)
        msg_free(b, m);
    if (ds->active)
        sub_kick(ds->active);
    else
        dsub_free_if_unused(ds);
}

static struct dl *
dl_new(struct ebroker *b, struct msg *m, struct dsub *ds, uint32_t count)
{
    struct dl *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->b = b;
    d->m = m;
    d->ds = ds;
    d->pub.count = count;
    d->pub.event = m->ev;
    d->pub.len = m->len;
    d->pub.tenant = m->t->tenant;
    d->pub.topic = m->t->topic;
    d->next_in_msg = m->dls;
    m->dls = d;
    d->where = DL_QUEUED;
    TAILQ_INSERT_TAIL(&ds->queue, d, q);
    ds->nqueued++;
    b->st.pending++;
    return d;
}

static struct msg *
msg_new(struct ebroker *b, struct topic *t, const uint8_t *ev, size_t len)
{
    struct msg *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    /* malloc's alignment keeps the FlatBuffer 8-aligned. */
    m->ev = malloc(len ? len : 1);
    if (m->ev == NULL) {
        free(m);
        return NULL;
    }
    memcpy(m->ev, ev, len);
    m->len = len;
    m->t = t;
    TAILQ_INSERT_TAIL(&b->msgs, m, link);
    b->nmsgs++;
    tenant_backlog_add(t->acct, 1, len);
    return m;
}

/* ---- subscriptions: delivering ---------------------------------------- */

static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct esub *s = arg;
    struct dsub *ds = s->ds;
    struct ebroker *b = s->b;

    (void)fd;
    (void)what;
    ds->hold++;
    while (s->mode == BROKER_SUB_ACTIVE && ds->active == s &&
           ds->nout < s->max_inflight && !TAILQ_EMPTY(&ds->queue)) {
        struct dl *d = TAILQ_FIRST(&ds->queue);
        TAILQ_REMOVE(&ds->queue, d, q);
        ds->nqueued--;
        d->where = DL_OUT;
        ds->nout++;
        d->pub.broker = &s->b->head;
        d->pub.sub = &s->head;
        d->pub.id = ++b->next_delivery_id;
        b->st.delivered++;
        /* The callback may unsubscribe s (freeing it): stop if so. */
        s->spec.deliver(&d->pub, s->spec.arg);
        if (ds->active != s)
            break;
    }
    ds->hold--;
    dsub_free_if_unused(ds);
}

static void
sub_kick(struct esub *s)
{
    if (s->ds && s->mode == BROKER_SUB_ACTIVE && !TAILQ_EMPTY(&s->ds->queue) &&
        s->ds->nout < s->max_inflight)
        event_active(s->kick, EV_TIMEOUT, 1);
}

static void
eb_ack(struct broker_delivery *pub)
{
    struct dl *d = (struct dl *)pub;

    if (d->where != DL_OUT && d->where != DL_ORPHAN)
        return;
    d->b->st.acked++;
    dl_settle(d->b, d);
}

static void
on_redeliver(evutil_socket_t fd, short what, void *arg)
{
    struct dl *d = arg;
    struct dsub *ds = d->ds;

    (void)fd;
    (void)what;
    event_free(d->timer);
    d->timer = NULL;
    ds->ndelayed--;
    d->where = DL_QUEUED;
    TAILQ_INSERT_HEAD(&ds->queue, d, q);
    ds->nqueued++;
    if (ds->active)
        sub_kick(ds->active);
}

/* d again after delay_ms, as its next delivery (counted: its count grows
 * and is journaled) or as the same one (an attempt that did not count). */
static void
redeliver(struct broker_delivery *pub, uint32_t delay_ms, bool counted)
{
    struct dl *d = (struct dl *)pub;
    struct ebroker *b = d->b;
    struct dsub *ds = d->ds;

    if (d->where != DL_OUT && d->where != DL_ORPHAN)
        return;
    if (counted)
        b->st.nacked++;
    if (d->where == DL_ORPHAN) {
        /* Its subscription was deleted meanwhile. */
        dl_settle(b, d);
        return;
    }
    ds->nout--;
    if (counted) {
        d->pub.count++;
        journal_dl(b, d, false);
    }
    d->timer = evtimer_new(b->base, on_redeliver, d);
    struct timeval tv = { delay_ms / 1000, (delay_ms % 1000) * 1000 };
    if (d->timer == NULL || evtimer_add(d->timer, &tv) < 0) {
        if (d->timer)
            event_free(d->timer);
        d->timer = NULL;
        d->where = DL_QUEUED;
        TAILQ_INSERT_HEAD(&ds->queue, d, q);
        ds->nqueued++;
    } else {
        d->where = DL_DELAYED;
        ds->ndelayed++;
    }
    if (ds->active)
        sub_kick(ds->active);
}

static void
eb_nack(struct broker_delivery *d, uint32_t delay_ms)
{
    redeliver(d, delay_ms, true);
}

static void
eb_release(struct broker_delivery *d, uint32_t delay_ms)
{
    redeliver(d, delay_ms, false);
}

/* ---- publishing ------------------------------------------------------- */

static void
deliver_live(struct esub *s, struct topic *t, const uint8_t *ev, size_t len)
{
    struct broker_delivery d;

    memset(&d, 0, sizeof d);
    d.broker = &s->b->head;
    d.sub = &s->head;
    d.event = ev;
    d.len = len;
    d.tenant = t->tenant;
    d.topic = t->topic;
    d.count = 1;
    d.id = ++s->b->next_delivery_id;
    s->spec.deliver(&d, s->spec.arg);
}

/* Unlinks and frees a message that was never journaled. */
static void
msg_unpublish(struct ebroker *b, struct msg *m)
{
    while (m->dls) {
        struct dl *d = m->dls;
        m->dls = d->next_in_msg;
        TAILQ_REMOVE(&d->ds->queue, d, q);
        d->ds->nqueued--;
        b->st.pending--;
        free(d);
    }
    TAILQ_REMOVE(&b->msgs, m, link);
    b->nmsgs--;
    tenant_backlog_add(m->t->acct, -1, m->len);
    free(m->ev);
    free(m);
}

/* The first durable subscription of t that takes new events, keeps its
 * oldest (not drop_oldest) and cannot queue n more; NULL when none. */
static struct esub *
full_sub(const struct ebroker *b, const struct topic *t, size_t n)
{
    struct esub *s;

    if (t == NULL)
        return NULL;
    LIST_FOREACH (s, &t->subs, link)
        if (!s->spec.live && s->mode != BROKER_SUB_CLOSED &&
            !s->spec.drop_oldest && dsub_backlog(s->ds) + n > b->queue_max)
            return s;
    return NULL;
}

static int
eb_admit(struct broker *bb, const char *tenant, const char *topic, size_t n,
         struct broker_sub **full)
{
    struct ebroker *b = (struct ebroker *)bb;
    struct esub *s = full_sub(b, topic_find(b, tenant, topic), n);

    if (full)
        *full = s ? &s->head : NULL;
    if (s == NULL)
        return 0;
    errno = EAGAIN;
    return -1;
}

/* A drop_oldest subscription one past its bound (the event just queued):
 * its oldest waiting event leaves through the overflow callback, settled
 * as dropped.  It is taken out of the queue first (counted out, as an
 * orphan would be) so that the callback cannot free it under us. */
static void
sub_drop_oldest(struct ebroker *b, struct esub *s)
{
    struct dsub *ds = s->ds;
    struct dl *d = TAILQ_FIRST(&ds->queue); /* the new event at least */

    TAILQ_REMOVE(&ds->queue, d, q);
    ds->nqueued--;
    d->where = DL_OUT;
    ds->nout++;
    ds->hold++;
    b->st.overflowed++;
    if (s->spec.overflow)
        s->spec.overflow(&s->head, d->m->ev, d->m->len, s->spec.arg);
    dl_settle(b, d); /* kicks the subscription, if it is still there */
    ds->hold--;
    dsub_free_if_unused(ds);
}

static int
eb_publish(struct broker *bb, const char *tenant, const char *topic,
           const uint8_t *event, size_t len, broker_publish_cb cb, void *arg,
           bool unhurried)
{
    struct ebroker *b = (struct ebroker *)bb;
    struct topic *t = topic_find(b, tenant, topic);
    uint64_t gen;
    struct msg *m = NULL;
    struct esub *s, *next;
    uint64_t lsn;

    (void)unhurried; /* the journal's writes are gathered anyway */

    /* Backpressure (broker.h): refused whole before anything is queued. */
    if (full_sub(b, t, 1) != NULL) {
        errno = EAGAIN;
        return -1;
    }
    gen = ++b->publish_gen;
    /* Durable subscriptions first: the journal decides whether the event
     * is accepted at all. */
    if (t) {
        LIST_FOREACH (s, &t->subs, link) {
            if (s->spec.live || s->mode == BROKER_SUB_CLOSED)
                continue;
            if (m == NULL && (m = msg_new(b, t, event, len)) == NULL)
                goto nomem;
            if (dl_new(b, m, s->ds, 1) == NULL)
                goto nomem;
            s->queued_gen = gen;
        }
    }
    /* journal_done_cb and broker_publish_cb have one shape.  An event no
     * durable subscription took still answers in append order (after the
     * events published before it): an empty marker record carries cb. */
    if (m)
        lsn = journal_msg(b, m, 0, cb, arg) < 0 ? 0 : m->lsn;
    else
        lsn = cb ? journal_append(b->j, 0, 0, NULL, 0, cb, arg) : 1;
    if (lsn == 0) {
        int e = errno;
        if (m)
            msg_unpublish(b, m);
        errno = e;
        return -1;
    }
    b->st.published++;
    /* Then the queues past their bound (drop_oldest ones only) and the
     * live subscriptions.  Callbacks may unsubscribe themselves (not
     * others). */
    if (t) {
        for (s = LIST_FIRST(&t->subs); s; s = next) {
            next = LIST_NEXT(s, link);
            if (s->spec.live)
                deliver_live(s, t, event, len);
            else if (s->queued_gen != gen)
                continue;
            else if (dsub_backlog(s->ds) > b->queue_max)
                sub_drop_oldest(b, s);
            else
                sub_kick(s);
        }
    }
    for (s = LIST_FIRST(&b->wild); s; s = next) {
        next = LIST_NEXT(s, link);
        if ((strcmp(s->tenant, "*") == 0 || strcmp(s->tenant, tenant) == 0) &&
            (strcmp(s->topic, "*") == 0 || strcmp(s->topic, topic) == 0)) {
            struct topic tt = { .tenant = (char *)(uintptr_t)tenant,
                                .topic = (char *)(uintptr_t)topic };
            deliver_live(s, &tt, event, len);
        }
    }
    return 0;
nomem:
    log_err("broker: out of memory publishing to %s/%s", tenant, topic);
    if (m)
        msg_unpublish(b, m);
    errno = ENOMEM;
    return -1;
}

/* ---- subscribing ------------------------------------------------------ */

static void
sub_free(struct esub *s)
{
    if (s->kick)
        event_free(s->kick);
    free(s->tenant);
    free(s->topic);
    free(s->name);
    free(s);
}

static struct broker_sub *
eb_subscribe(struct broker *bb, const struct broker_sub_spec *spec)
{
    struct ebroker *b = (struct ebroker *)bb;
    struct esub *s = calloc(1, sizeof *s);
    bool wild = strcmp(spec->topic, "*") == 0 || strcmp(spec->tenant, "*") == 0;

    if (s == NULL)
        return NULL;
    s->head.b = &b->head;
    s->b = b;
    s->spec = *spec;
    s->tenant = strdup(spec->tenant);
    s->topic = strdup(spec->topic);
    s->name = strdup(spec->name ? spec->name : "");
    s->kick = event_new(b->base, -1, 0, on_kick, s);
    if (s->tenant == NULL || s->topic == NULL || s->name == NULL ||
        s->kick == NULL || (wild && !spec->live))
        goto fail;
    s->spec.tenant = s->tenant;
    s->spec.topic = s->topic;
    s->spec.name = s->name;
    s->max_inflight = spec->max_inflight ? spec->max_inflight : 1;
    if (wild) {
        LIST_INSERT_HEAD(&b->wild, s, link);
        return &s->head;
    }
    if ((s->t = topic_get(b, spec->tenant, spec->topic)) == NULL)
        goto fail;
    if (!spec->live) {
        if ((s->ds = dsub_get(s->t, spec->name)) == NULL)
            goto fail;
        if (s->ds->active) {
            errno = EEXIST;
            dsub_free_if_unused(s->ds);
            goto fail;
        }
        s->ds->active = s;
    }
    LIST_INSERT_HEAD(&s->t->subs, s, link);
    if (s->ds)
        sub_kick(s);
    return &s->head;
fail:
    sub_free(s);
    return NULL;
}

static void
eb_sub_set_mode(struct broker_sub *ss, enum broker_sub_mode mode)
{
    struct esub *s = (struct esub *)ss;

    s->mode = mode;
    sub_kick(s);
}

static void
eb_sub_set_max_inflight(struct broker_sub *ss, unsigned n)
{
    struct esub *s = (struct esub *)ss;

    s->max_inflight = n ? n : 1;
    sub_kick(s);
}

/* Drops every delivery of ds that is not out; out ones become orphans,
 * settled (as dropped) by their holder's ack or nack. */
static void
dsub_drop(struct ebroker *b, struct dsub *ds)
{
    struct dl *d;
    ds->hold++;
    while ((d = TAILQ_FIRST(&ds->queue)) != NULL) {
        b->st.dropped++;
        dl_settle(b, d);
    }
    /* Delayed ones are reachable through their messages only. */
    for (struct msg *m = TAILQ_FIRST(&b->msgs), *mn; m && ds->ndelayed;
         m = mn) {
        mn = TAILQ_NEXT(m, link);
        for (struct dl *x = m->dls, *xn; x; x = xn) {
            xn = x->next_in_msg;
            if (x->ds != ds)
                continue;
            if (x->where == DL_DELAYED) {
                b->st.dropped++;
                dl_settle(b, x); /* may free m: stop with this message */
                break;
            }
        }
    }
    if (ds->nout) {
        for (struct msg *m = TAILQ_FIRST(&b->msgs); m; m = TAILQ_NEXT(m, link))
            for (struct dl *x = m->dls; x; x = x->next_in_msg)
                if (x->ds == ds && x->where == DL_OUT)
                    x->where = DL_ORPHAN;
    }
    ds->hold--;
}

static void
eb_unsubscribe(struct broker_sub *ss, bool keep)
{
    struct esub *s = (struct esub *)ss;
    struct ebroker *b = s->b;

    LIST_REMOVE(s, link);
    if (s->ds) {
        struct dsub *ds = s->ds;
        ds->active = NULL;
        if (!keep)
            dsub_drop(b, ds);
        dsub_free_if_unused(ds);
    }
    sub_free(s);
}

static size_t
eb_sub_backlog(const struct broker_sub *ss)
{
    const struct esub *s = (const struct esub *)ss;

    return s->ds ? dsub_backlog(s->ds) : 0;
}

static const char *
eb_sub_name(const struct broker_sub *ss)
{
    const struct esub *s = (const struct esub *)ss;

    return s->name;
}

/* ---- replay, compaction, recovery ------------------------------------ */

static struct msg *
origin_find(struct ebroker *b, uint64_t origin, size_t *pos)
{
    size_t lo = 0, hi = b->norigin;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->by_origin[mid]->origin < origin)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (pos)
        *pos = lo;
    return lo < b->norigin && b->by_origin[lo]->origin == origin
               ? b->by_origin[lo]
               : NULL;
}

static struct dl *
msg_dl(struct msg *m, const char *name)
{
    for (struct dl *d = m->dls; d; d = d->next_in_msg)
        if (strcmp(d->ds->name, name) == 0)
            return d;
    return NULL;
}

static int
replay_msg(struct ebroker *b, uint64_t lsn, struct brec_reader *r)
{
    char tenant[256], topic[256];
    uint64_t origin = brec_reader_uint(r, 8);

    if (!brec_reader_str(r, tenant, sizeof tenant) ||
        !brec_reader_str(r, topic, sizeof topic))
        return -1;
    unsigned n = (unsigned)brec_reader_uint(r, 2);
    struct {
        char name[256];
        uint32_t count;
    } *names = calloc(n ? n : 1, sizeof *names);
    if (names == NULL)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        if (!brec_reader_str(r, names[i].name, sizeof names[i].name)) {
            free(names);
            return -1;
        }
        names[i].count = (uint32_t)brec_reader_uint(r, 4);
    }
    uint32_t len = (uint32_t)brec_reader_uint(r, 4);
    const uint8_t *ev = brec_reader_take(r, len);
    if (r->bad) {
        free(names);
        return -1;
    }
    struct topic *t = topic_get(b, tenant, topic);
    struct msg *m = origin ? origin_find(b, origin, NULL) : NULL;
    if (m) {
        /* A compaction rewrite: it replaces the message's state. */
        while (m->dls) {
            struct dl *d = m->dls;
            m->dls = d->next_in_msg;
            TAILQ_REMOVE(&d->ds->queue, d, q);
            d->ds->nqueued--;
            b->st.pending--;
            free(d);
        }
        journal_release(b->j, m->lsn);
        m->lsn = lsn;
        TAILQ_REMOVE(&b->msgs, m, link);
        TAILQ_INSERT_TAIL(&b->msgs, m, link);
    } else {
        /* The journal is a file: its events are checked once, here, as
         * they come back into the process (broker.h, Trust). */
        if (t == NULL || (b->verify && b->verify(ev, len) != 0) ||
            (m = msg_new(b, t, ev, len)) == NULL) {
            free(names);
            return -1;
        }
        m->lsn = lsn;
        m->origin = origin ? origin : lsn;
        size_t pos;
        origin_find(b, m->origin, &pos);
        if (b->norigin == b->corigin) {
            size_t c = b->corigin ? b->corigin * 2 : 1024;
            struct msg **p = realloc(b->by_origin, c * sizeof *p);
            if (p == NULL) {
                free(names);
                return -1;
            }
            b->by_origin = p;
            b->corigin = c;
        }
        memmove(b->by_origin + pos + 1, b->by_origin + pos,
                (b->norigin - pos) * sizeof *b->by_origin);
        b->by_origin[pos] = m;
        b->norigin++;
    }
    for (unsigned i = 0; i < n; i++) {
        struct dsub *ds = dsub_get(t, names[i].name);
        if (ds == NULL || dl_new(b, m, ds, names[i].count) == NULL) {
            free(names);
            return -1;
        }
    }
    free(names);
    return 0;
}

static int
on_replay(uint64_t lsn, uint8_t type, unsigned flags, const uint8_t *payload,
          size_t len, void *arg)
{
    struct ebroker *b = arg;
    struct brec_reader r = { payload, len, 0, false };
    char name[256];

    (void)flags;
    if (type == REC_MSG) {
        if (replay_msg(b, lsn, &r) < 0) {
            log_err("broker: journal record %" PRIu64 " is unreadable; "
                    "skipped",
                    lsn);
            journal_release(b->j, lsn);
        }
        return 0;
    }
    if (type != REC_SETTLE && type != REC_COUNT)
        return 0; /* the empty markers of publish callbacks */
    uint64_t origin = brec_reader_uint(&r, 8);
    if (!brec_reader_str(&r, name, sizeof name))
        return 0;
    struct msg *m = origin_find(b, origin, NULL);
    struct dl *d = m ? msg_dl(m, name) : NULL;
    if (d == NULL)
        return 0; /* settled already, or its message was compacted */
    if (type == REC_COUNT) {
        uint32_t count = (uint32_t)brec_reader_uint(&r, 4);
        if (!r.bad)
            d->pub.count = count;
        return 0;
    }
    dl_settle(b, d); /* releases and frees the message with its last */
    return 0;
}

static void
on_compact(uint64_t below, void *arg)
{
    struct ebroker *b = arg;
    struct msg *m;
    size_t moved = 0;
    uint64_t live = 0;

    /* Worth it only when the old segments are mostly settled: moving
     * events that fill them would only make new segments to move again. */
    TAILQ_FOREACH (m, &b->msgs, link) {
        if (m->lsn == 0 || m->lsn >= below)
            break;
        live += m->len + 64;
    }
    if (live * 2 > b->segment_bytes)
        return;
    /* Rewritten messages go to the tail: stop at the first one at or past
     * the bound. */
    while ((m = TAILQ_FIRST(&b->msgs)) != NULL && m->lsn && m->lsn < below) {
        uint64_t old = m->lsn;
        if (journal_msg(b, m, m->origin, NULL, NULL) < 0) {
            log_err("broker: journal compaction stopped: %s", strerror(errno));
            break;
        }
        journal_release(b->j, old);
        TAILQ_REMOVE(&b->msgs, m, link);
        TAILQ_INSERT_TAIL(&b->msgs, m, link);
        moved++;
    }
    log_debug("broker: journal compaction moved %zu pending events", moved);
}

static size_t
eb_purge(struct broker *bb, const char *tenant, const char *topic)
{
    struct ebroker *b = (struct ebroker *)bb;
    size_t dropped = 0;
    for (size_t i = 0; i < b->nbuckets; i++)
        for (struct topic *t = b->buckets[i]; t; t = t->next)
            for (struct dsub *ds = t->dsubs, *next; ds; ds = next) {
                next = ds->next;
                size_t n = dsub_backlog(ds);
                if (ds->active || n == 0 ||
                    (tenant && (strcmp(t->tenant, tenant) != 0 ||
                                (topic && strcmp(t->topic, topic) != 0))))
                    continue;
                log_warning("broker: %zu pending event(s) of %s/%s for %s "
                            "dropped: %s",
                            n, t->tenant, t->topic, ds->name,
                            tenant ? "purged with their tenant"
                                   : "no such subscriber after recovery");
                dropped += n;
                dsub_drop(b, ds); /* counts them in st.dropped */
                dsub_free_if_unused(ds);
            }
    return dropped;
}

static void
eb_recovered(struct broker *bb, broker_known_cb known, void *arg)
{
    struct ebroker *b = (struct ebroker *)bb;

    /* The journal is this instance's: what no subscription claimed since
     * the replay is gone, whatever known() would say. */
    (void)known;
    (void)arg;
    (void)eb_purge(&b->head, NULL, NULL); /* each logged */
}

/* ---- open, close, stats ---------------------------------------------- */

struct journal *
broker_journal(const struct ebroker *b)
{
    return b->j;
}

struct broker *
broker_embedded_open(const struct broker_config *cfg, struct event_base *base,
                     char *err, size_t errlen)
{
    char dir[4096];
    struct ebroker *b;

    b = calloc(1, sizeof *b);
    if (b == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return NULL;
    }
    b->head.ops = &broker_embedded_ops;
    b->base = base;
    b->verify = cfg->verify;
    b->queue_max = cfg->queue_max ? cfg->queue_max : 10000;
    b->segment_bytes =
        cfg->journal_segment_bytes ? cfg->journal_segment_bytes : 64u << 20;
    b->nbuckets = 64;
    b->buckets = calloc(b->nbuckets, sizeof *b->buckets);
    LIST_INIT(&b->wild);
    TAILQ_INIT(&b->msgs);
    if (b->buckets == NULL) {
        errbuf_set(err, errlen, "out of memory");
        goto fail;
    }
    snprintf(dir, sizeof dir, "%s/journal", cfg->state_dir);
    struct journal_config jc = {
        .dir = dir,
        .fsync = (enum journal_fsync)cfg->fsync,
        .segment_bytes = cfg->journal_segment_bytes,
        .max_bytes = cfg->journal_max_bytes,
    };
    b->j = journal_open(&jc, base, err, errlen);
    if (b->j == NULL)
        goto fail;
    b->replaying = true;
    if (journal_replay(b->j, on_replay, b, err, errlen) < 0)
        goto fail;
    b->replaying = false;
    for (struct msg *m = TAILQ_FIRST(&b->msgs), *mn; m; m = mn) {
        mn = TAILQ_NEXT(m, link);
        if (m->dls == NULL)
            msg_free(b, m);
    }
    free(b->by_origin);
    b->by_origin = NULL;
    b->norigin = b->corigin = 0;
    b->st.recovered = b->st.pending;
    journal_set_compact_hook(b->j, on_compact, b);
    if (b->st.recovered)
        log_info("broker: %" PRIu64 " pending deliveries of %" PRIu64
                 " events recovered from the journal",
                 b->st.recovered, b->nmsgs);
    return &b->head;
fail:
    eb_close(&b->head);
    return NULL;
}

static void
eb_close(struct broker *bb)
{
    struct ebroker *b = (struct ebroker *)bb;
    struct msg *m;

    if (b == NULL)
        return;
    if (b->j)
        journal_close(b->j);
    while ((m = TAILQ_FIRST(&b->msgs)) != NULL) {
        while (m->dls) {
            struct dl *d = m->dls;
            m->dls = d->next_in_msg;
            if (d->timer)
                event_free(d->timer);
            free(d);
        }
        TAILQ_REMOVE(&b->msgs, m, link);
        free(m->ev);
        free(m);
    }
    for (size_t i = 0; b->buckets && i < b->nbuckets; i++) {
        struct topic *t, *tn;
        for (t = b->buckets[i]; t; t = tn) {
            tn = t->next;
            struct esub *s;
            while ((s = LIST_FIRST(&t->subs)) != NULL) {
                LIST_REMOVE(s, link);
                sub_free(s);
            }
            for (struct dsub *ds = t->dsubs, *dn; ds; ds = dn) {
                dn = ds->next;
                free(ds->name);
                free(ds);
            }
            free(t->tenant);
            free(t->topic);
            free(t);
        }
    }
    struct esub *s;
    while ((s = LIST_FIRST(&b->wild)) != NULL) {
        LIST_REMOVE(s, link);
        sub_free(s);
    }
    tenant_backlog_free_all(b);
    free(b->buckets);
    free(b->by_origin);
    free(b);
}

static void
eb_stats(const struct broker *bb, struct broker_stats *out)
{
    const struct ebroker *b = (const struct ebroker *)bb;
    struct journal_stats js;

    *out = b->st;
    journal_stats(b->j, &js);
    out->journal_bytes = js.bytes;
    out->journal_segments = js.segments;
    out->journal_live = js.live_records;
}

/* Its journal keeps every event until it is settled: nothing is ever
 * exhausted here. */
static void
eb_set_exhausted_hook(struct broker *bb, broker_exhausted_cb cb, void *arg)
{
    (void)bb;
    (void)cb;
    (void)arg;
}

static const struct broker_ops broker_embedded_ops = {
    .name = "embedded",
    .close = eb_close,
    .publish = eb_publish,
    .admit = eb_admit,
    .subscribe = eb_subscribe,
    .set_mode = eb_sub_set_mode,
    .set_max_inflight = eb_sub_set_max_inflight,
    .unsubscribe = eb_unsubscribe,
    .ack = eb_ack,
    .nack = eb_nack,
    .release = eb_release,
    .recovered = eb_recovered,
    .purge = eb_purge,
    .stats = eb_stats,
    .tenant_backlog = eb_tenant_backlog,
    .health = eb_health,
    .set_storage_hook = eb_set_storage_hook,
    .set_exhausted_hook = eb_set_exhausted_hook,
    .sub_backlog = eb_sub_backlog,
    .sub_name = eb_sub_name,
};
