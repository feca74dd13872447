/*
 * broker_nats_private.h — what the files of the `nats` broker backend
 * share; nothing outside master/broker/broker_nats*.c includes it.
 *
 *   broker_nats.c      open and close, the connection's state, the
 *                      hand-off from libnats's threads to the loop, the
 *                      tick, health and statistics, the operations table;
 *   broker_nats_pub.c  publishes and their PubAcks, and settlements held
 *                      until the publishes made before them are stored;
 *   broker_nats_sub.c  subscriptions: their durable consumers, pulls,
 *                      deliveries and settlements, live subscriptions.
 *
 * Names (P is nats_bucket_prefix, "wm" by default):
 *   stream     P_events, subjects P.ev.>, limits retention: an event
 *              stays nats_stream_max_age_s (BN_MAX_AGE_S by default)
 *              whoever settled it (interest retention
 *              would drop what is published while a restarted server has
 *              its stream back but not yet its consumers: tested, two
 *              events of a few hundred answered 202 and never delivered);
 *              Duplicates two minutes (Nats-Msg-Id);
 *   subject    P.ev.<tenant>.<topic>, each name one token ("." written
 *              "=2E": topics and tenants may hold dots);
 *   consumer   P_<16 hex of FNV-1a-64 of tenant, topic, name>, durable,
 *              pull, explicit ack, filter the topic's subject; its
 *              description says "tenant/topic/name" for operators;
 *   inbox      _WM.P.<instance>.> (one core subscription): p.<seq> the
 *              PubAck of publish seq, d.<sub>.<req> the messages of
 *              pull request req of subscription sub, c.<sub> the answer
 *              to its consumer's creation, x anything else.
 *
 * Events are stored as the ABI CloudEvent buffer (ipc/cloudevent), one
 * per message, or a published batch's as bundles (event_bundle.h), as
 * many per message as max_payload allows, checked once by
 * broker_config.verify when read back.
 *
 * Threads.  libnats calls the message handlers on its own threads; they
 * only append the message to a queue under mu and wake the loop through an
 * eventfd.  Everything else runs on the loop thread (publishes and acks
 * are non-blocking writes on the connection, which libnats makes
 * thread-safe).  JetStream's management (the stream at open) is the only
 * blocking request, made before the loop runs.
 */
#ifndef WM_MASTER_BROKER_NATS_PRIVATE_H
#define WM_MASTER_BROKER_NATS_PRIVATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <nats/nats.h>

#include "master/broker/broker_backend.h"

struct event;

/* How long a pull request waits at the server for messages (ms). */
#define BN_PULL_EXPIRES_MS 5000
/* A publish not answered by its PubAck within this fails (ms). */
#define BN_PUBACK_MS 5000
/* How long the stream keeps an event by default (s). */
#define BN_MAX_AGE_S (7 * 24 * 3600)
/* The tick: publish timeouts, the connection's state, lost pulls, +WPI. */
#define BN_TICK_MS 100
/* A tick this late after the last one: the loop was held up. */
#define BN_HELD_UP_MS 1000

enum bn_where {
    BN_WAITING, /* received, not handed to the subscriber */
    BN_OUT,     /* handed, not settled */
    BN_DELAYED, /* released, waiting for its timer */
};

struct bn_sub;

/* What a pulled message becomes once every event of it is settled. */
enum bn_fate {
    BN_FATE_ACK,  /* "+ACK", after the publishes made before it */
    BN_FATE_NAK,  /* "-NAK" with nak_delay_ms: delivered again */
    BN_FATE_TERM, /* "+TERM": never again (fails the check) */
};

/* A pulled message: one event, or a bundle of several (event_bundle.h),
 * shared by the deliveries of its events and settled with JetStream once
 * the last of them is (a bundle's events are nacked and released here). */
struct bn_msg {
    natsMsg *m;    /* its reply subject acknowledges it */
    uint8_t *buf;  /* its events, copied aligned */
    uint32_t n;    /* events: 1 for a single one */
    uint32_t left; /* deliveries not yet settled */
    enum bn_fate fate;
    uint32_t nak_delay_ms;
    int64_t touched_ms; /* received, or last told in progress */
    uint64_t pub_mark;  /* the broker's last publish when it was received */
};

struct bn_dl {
    struct broker_delivery pub; /* first: broker.c hands it back */
    struct bn_sub *s;
    struct bn_msg *msg;
    enum bn_where where;
    struct event *timer;
    TAILQ_ENTRY(bn_dl) link; /* s->waiting, or b->out (out, delayed) */
};

TAILQ_HEAD(bn_dl_list, bn_dl);

/* A settlement held until the publishes made before it are stored. */
struct bn_held {
    STAILQ_ENTRY(bn_held) link;
    char *reply;    /* the delivery's ack subject */
    uint64_t after; /* the last publish issued when it was asked */
    uint64_t mark;  /* the delivery's pub_mark */
};

STAILQ_HEAD(bn_held_list, bn_held);

struct bn_sub {
    struct broker_sub head; /* first: broker.c's view */
    LIST_ENTRY(bn_sub) link;
    struct broker_nats *b;
    struct broker_sub_spec spec;
    char *tenant, *topic, *name; /* spec's strings, owned */
    bool live;
    uint32_t id;       /* in inbox subjects */
    char consumer[48]; /* durable only */
    enum broker_sub_mode mode;
    unsigned max_inflight;
    bool created;      /* its consumer's creation answered */
    bool create_asked; /* a creation is out, not answered yet */
    int64_t create_after_ms;
    uint32_t req; /* the current pull request, 0: none */
    uint32_t req_next;
    unsigned hold;     /* a loop works on it: not freed */
    uint32_t req_left; /* messages */
    uint32_t per_msg;  /* events per message received, smoothed (x16) */
    int64_t req_sent_ms;
    struct bn_dl_list waiting;
    size_t nwaiting, nout, ndelayed;
    bool gone; /* unsubscribed; freed (and unlinked) with its last
                  delivery */
    bool keep; /* unsubscribed with keep */
    /* durable: the next of its chain in b->by_consumer */
    struct bn_sub *cnext;
    bool kicked;          /* in b->kicked, to be run (kick()) */
    struct bn_sub *knext; /* the next in b->kicked */
};

LIST_HEAD(bn_sub_list, bn_sub);

/* One publish awaiting its PubAck. */
struct bn_pub {
    broker_publish_cb cb;
    void *arg;
    int64_t sent_ms;
    int error;
    bool done;
    bool unhurried; /* its failure is no batch's (broker.h) */
};

struct broker_nats {
    struct broker head; /* first: broker.c's view */
    struct event_base *base;
    natsOptions *opts, *bulk_opts;
    /* nc: publishes someone waits for (SendAsap: written at once), the
     * subscriptions, the JetStream requests answered to the inbox
     * (consumer creations, pulls: api_request()); bulk: what nobody waits
     * for within a millisecond (acknowledgements, the outputs' publishes,
     * consumer deletions), gathered by libnats's flusher into fewer
     * writes */
    natsConnection *nc, *bulk;
    natsSubscription *inbox, *live_all, *advisories;
    char *url, *prefix, *stream, *inbox_prefix; /* "_WM.P.<instance>." */
    uint32_t ack_wait_ms;
    int64_t opened_ms; /* unix time of the open, ms (broker_recovered()) */
    int max_deliver;
    int (*verify)(const uint8_t *event, size_t len);

    /* libnats threads → loop */
    pthread_mutex_t mu;
    natsMsg **q;
    size_t qn, qcap;
    bool mu_ready;
    int efd;
    struct event *wake, *tick;
    int64_t tick_ms; /* the last tick (loop thread) */

    /* loop thread only */
    struct bn_sub_list subs; /* durable and live */
    struct bn_sub **by_id;   /* id → sub, NULL when freed */
    uint32_t nids;
    /* consumer name → durable subs, chained through cnext, each chain in
     * the order of subs (newest first): what a pulled event's ack subject
     * names, found without walking every subscription */
    struct bn_sub **by_consumer;
    size_t ncons, cons_cap; /* cons_cap: 0 or a power of two */
    unsigned nlive;
    struct bn_dl_list out; /* deliveries handed out or released */
    struct event *kick;    /* deferred deliveries (broker_nats_sub.c) */
    struct bn_sub *kicked, **kicked_tail; /* the subscriptions it runs */
    uint64_t next_delivery_id;

    /* publishes: seq is 1 + index from pub_head_seq */
    struct bn_pub *pubs;
    size_t pub_cap, pub_n, pub_start; /* a ring */
    uint64_t pub_head_seq;            /* seq of the oldest unfinished */
    uint64_t pub_issued;              /* last seq issued */
    uint64_t pub_failed;              /* last seq that failed */
    int pub_carry;                    /* a failure since the last cb */
    struct bn_held_list held;

    bool connected;      /* nc's state, as the tick last saw it */
    bool bulk_connected; /* bulk's (logged when it changes) */
    natsStatistics *stats;
    uint64_t nc_reconnects, bulk_reconnects; /* libnats's counts, last tick */
    bool nc_counted; /* nc_reconnects read up, no change of state since */
    bool closing;    /* bn_sub_free_all(): nothing is settled any more */
    struct broker_health health;
    broker_storage_cb storage_cb;
    void *storage_arg;
    broker_exhausted_cb exhausted_cb;
    void *exhausted_arg;
    struct broker_stats st;
};

/* ---- broker_nats.c ---------------------------------------------------- */

/* Whether the connection is up now (and the health says why not). */
bool bn_connected(struct broker_nats *b);
/* Subscribes every event subject while live subscriptions exist. */
int bn_live_need(struct broker_nats *b, bool need);

/* ---- broker_nats_pub.c ------------------------------------------------ */

int bn_publish(struct broker *bb, const char *tenant, const char *topic,
               const uint8_t *event, size_t len, broker_publish_cb cb,
               void *arg, bool unhurried);
/* Several events in one message per chunk of max_payload (a bundle). */
int bn_publish_batch(struct broker *bb, const char *tenant, const char *topic,
                     const struct broker_event *evs, size_t n,
                     broker_publish_cb cb, void *arg, size_t *accepted);
/* The answer to publish seq (its PubAck, or an error status). */
void bn_puback(struct broker_nats *b, uint64_t seq, natsMsg *m);
/* Fails the publishes unanswered for BN_PUBACK_MS (the tick), or every
 * one (all, at close). */
void bn_pub_expire(struct broker_nats *b, bool all);
/* The publishes unanswered wait BN_PUBACK_MS from now (after a held-up
 * loop: the tick). */
void bn_pub_restart(struct broker_nats *b, int64_t now);
/* Sends "+ACK" for a delivery's reply subject once every publish issued
 * before now is stored, or "-NAK" when one made since mark failed. */
void bn_settle_ack(struct broker_nats *b, const char *reply, uint64_t mark);
/* The subject of (tenant, topic), or "P.ev.*.*" with "*" names, in buf. */
int bn_subject(const struct broker_nats *b, const char *tenant,
               const char *topic, char *buf, size_t size);
/* The (tenant, topic) of an event subject; -1 when it is not one. */
int bn_subject_parse(const struct broker_nats *b, const char *subj,
                     char *tenant, size_t tsize, char *topic, size_t psize);
void bn_pub_free(struct broker_nats *b);

/* ---- broker_nats_sub.c ------------------------------------------------ */

struct broker_sub *bn_subscribe(struct broker *bb,
                                const struct broker_sub_spec *spec);
void bn_set_mode(struct broker_sub *ss, enum broker_sub_mode mode);
void bn_set_max_inflight(struct broker_sub *ss, unsigned n);
void bn_unsubscribe(struct broker_sub *ss, bool keep);
void bn_ack(struct broker_delivery *d);
void bn_nack(struct broker_delivery *d, uint32_t delay_ms);
void bn_release(struct broker_delivery *d, uint32_t delay_ms);
size_t bn_sub_backlog(const struct broker_sub *ss);
const char *bn_sub_name(const struct broker_sub *ss);
/* A message of the inbox for sub id (kind 'd': a pull's, 'c': its
 * consumer's creation), of a live subscription (kind 'l'). */
void bn_sub_message(struct broker_nats *b, natsMsg *m);
/* The tick's work for subscriptions: pulls to (re)issue, consumers to
 * create again, deliveries to keep in progress. */
void bn_sub_tick(struct broker_nats *b, int64_t now);
/* The connection came back: every pull is asked again. */
void bn_sub_reconnected(struct broker_nats *b);
/* Frees every subscription and delivery (close). */
void bn_sub_free_all(struct broker_nats *b);

#endif /* WM_MASTER_BROKER_NATS_PRIVATE_H */
