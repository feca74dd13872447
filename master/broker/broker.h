/*
 * broker.h — the message broker interface (DESIGN §6, §9).
 *
 * The room master/broker/: messages — this interface and its embedded
 * backend (broker_embedded.c) over the write-ahead journal (journal.c); the
 * message flow between topics and workers (flow.c: subscriptions, groups
 * under their locks, deliveries to hosts, outputs, outcomes, dead letters);
 * the pure outcome rules (outcome.c); the extensions stamped on incoming
 * events (stamp.c); the gateway services workers call (gateway.c).
 *
 * One interface, two backends: `embedded` (broker_embedded.c, the default:
 * in-memory queues behind a write-ahead journal) and later `nats`
 * (JetStream: streams for topics, durable consumers for subscriptions).
 * Callers see topics, subscriptions and deliveries, never the journal: the
 * message flow above it (flow.c: groups, locks, outcomes, routing,
 * dead letters) is the same for both backends.
 *
 * Topics are scoped by tenant: (tenant, topic) names one stream.
 *
 * Subscriptions.  A durable subscription has a name, unique within its
 * (tenant, topic): a worker's id, or "group:<group>" for the competing
 * consumers of a group.  Every event published to its topic while it
 * exists is queued for it, journaled, and delivered at least once until
 * acked; its backlog survives a master crash and waits, after a restart,
 * for the subscription of the same name to come back (broker_recovered()
 * drops what nobody claimed).  A live subscription (an SSE client) gets
 * events published while it exists, nothing journaled, and needs no
 * settlement.
 *
 * Backpressure.  Each durable subscription has a bounded queue (queue_max:
 * its events waiting, delayed and out).  A publish is accepted only if
 * every durable subscription of its topic that takes new events can hold
 * it: one whose queue is full refuses the whole publish (EAGAIN, nothing
 * queued anywhere), so that an accepted event is never dropped for want of
 * room; the API answers 503 with Retry-After.  A subscription made with
 * drop_oldest takes every event instead: when its queue is full, its
 * oldest waiting event leaves it through the overflow callback (the
 * message flow (flow.c) dead-letters it with reason backlog_overflow).
 * broker_admit() asks the question for n events at once (a batch is
 * accepted whole or not at all).  Live subscriptions (SSE clients) never
 * refuse: they drop what they cannot send.  A publish also fails when the
 * journal's budget is exhausted (ENOSPC) or when it cannot write (EIO:
 * broker_health() says why).
 *
 * Storage failures.  While the backend cannot store (a full disk),
 * publishes fail (EIO, broker_health() says why), settlements made
 * meanwhile are kept and stored first once it can, and the storage hook
 * tells the owner, which stops handing deliveries on: an event processed
 * meanwhile would be delivered again after a restart.  The backend
 * recovers by itself once it can write; the hook says so too.
 *
 * Deliveries.  Up to max_inflight deliveries of a subscription are out at
 * once; each is settled exactly once by broker_ack() (done),
 * broker_nack() (deliver again after a delay, counting one more delivery)
 * or broker_release() (deliver again, the same delivery: it did not reach
 * the worker).
 * Dead-lettering is the message flow (flow.c)'s: it publishes the dead letter,
 * then acks.
 *
 * Trust.  Deliveries carry events the daemon can decode without verifying
 * them again (ipc_cloudevent_decode_trusted()): a publisher hands over an
 * event it verified or built itself, and what the backend reads back from
 * outside the process is checked once by broker_config.verify.
 *
 * Threads: the loop thread only.  Callbacks never run inside the call that
 * caused them, except the overflow callback, which runs inside
 * broker_publish().
 */
#ifndef WM_MASTER_BROKER_H
#define WM_MASTER_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct broker;
struct broker_sub;

struct nats_link_config;

struct broker_config {
    const char *backend; /* "embedded" or "nats" */
    const char
        *state_dir; /* embedded: the journal lives in <state_dir>/journal */
    int fsync;      /* enum journal_fsync (always, batch, off) */
    uint64_t journal_max_bytes;
    uint64_t journal_segment_bytes;
    uint32_t queue_max; /* per subscription */
    /* Checks an event the backend reads from outside the process (the
     * embedded journal, as it is replayed): 0 accepts it, anything else
     * drops it (logged).  NULL accepts every event (tests of the broker
     * alone, whose events are not CloudEvents). */
    int (*verify)(const uint8_t *event, size_t len);
    /* nats (broker_nats*.c): the connection, the names' prefix (NULL or
     * "": "wm"), the stream's replicas (0: 1) and storage, how long a
     * delivery may go unacknowledged before JetStream delivers it again
     * (0: 30 s).  JetStream's count of deliveries is the flow's, which
     * dead-letters an event whose delivery fails after max_redeliveries
     * however the earlier ones ended (a crash of its instance included). */
    const struct nats_link_config *nats;
    const char *nats_prefix;
    unsigned nats_replicas;
    int nats_memory;
    uint32_t nats_ack_wait_ms;
    uint32_t nats_max_age_s; /* the stream keeps an event this long (0: 7 d) */
    /* Deliveries of an event after which JetStream stops delivering it
     * (the consumers' MaxDeliver; 0: no limit); it is then handed to the
     * exhausted hook, from the max-deliveries advisory. */
    uint32_t nats_max_deliver;
};

/* One delivery, valid until it is settled (live ones: during the
 * callback only). */
struct broker_delivery {
    struct broker *broker;  /* its backend: outlives the delivery */
    struct broker_sub *sub; /* may be gone once it is unsubscribed */
    const uint8_t *event;   /* the ABI CloudEvent buffer, 8-aligned */
    size_t len;
    const char *tenant;
    const char *topic;
    uint32_t count; /* 1 on the first delivery */
    uint64_t id;    /* unique among this run's deliveries of this event */
};

/* A delivery for sub; settle it with broker_ack() / broker_nack(). */
typedef void (*broker_deliver_cb)(struct broker_delivery *d, void *arg);
/* The oldest waiting event of a drop_oldest subscription whose queue was
 * full, leaving it for a new one (the buffer is valid during the call
 * only). */
typedef void (*broker_overflow_cb)(struct broker_sub *sub, const uint8_t *event,
                                   size_t len, void *arg);
/* A publish is durable (error 0) or failed (an errno). */
typedef void (*broker_publish_cb)(int error, void *arg);

struct broker_sub_spec {
    const char *tenant;    /* "*" for every tenant (live subscriptions only) */
    const char *topic;     /* "*" for every topic (live subscriptions only) */
    const char *name;      /* durable: unique within (tenant, topic) */
    bool live;             /* an SSE client: nothing journaled */
    unsigned max_inflight; /* durable: deliveries out at once (>= 1) */
    broker_deliver_cb deliver;
    /* durable: a full queue drops its oldest waiting event (to overflow)
     * to take a new one, instead of refusing the publish */
    bool drop_oldest;
    broker_overflow_cb overflow; /* may be NULL: dropped events vanish */
    void *arg;
    /* durable: the events published from this instant on (unix ms) are
     * its, 0 for those from the subscription on.  A backend whose
     * subscription is made at its server after the call (nats) starts
     * there, so that none published meanwhile is missed. */
    int64_t since_ms;
};

/* Opens the backend and, for `embedded`, replays the journal: the backlog
 * of every durable subscription waits for it to subscribe again.  Returns
 * NULL with a message in err naming the cause. */
struct broker *broker_open(const struct broker_config *cfg,
                           struct event_base *base, char *err, size_t errlen);
/* Waits for pending journal writes (their callbacks run), then frees. */
void broker_close(struct broker *b);

/* Accepts an event for (tenant, topic): queued for every subscription of
 * the topic, journaled when a durable one has it; cb (may be NULL) runs
 * once it is durable, or failed (the errno of the storage: ENOSPC,
 * EDQUOT, EIO...).  Returns 0, or -1 with errno EAGAIN (a durable
 * subscription's queue is full: see Backpressure), ENOSPC (the journal's
 * budget is exhausted) or EIO (the storage cannot write now:
 * broker_health()); nothing is queued and cb is not called then. */
int broker_publish(struct broker *b, const char *tenant, const char *topic,
                   const uint8_t *event, size_t len, broker_publish_cb cb,
                   void *arg);

/* One event of a batch: the ABI CloudEvent buffer, 8-aligned. */
struct broker_event {
    const uint8_t *event;
    size_t len;
};

/* broker_publish() of n events of (tenant, topic) in their order, with one
 * callback once they are all durable (or one failed: its errno).  Returns
 * 0, or -1 with errno as broker_publish(), *accepted (when not NULL) then
 * saying how many of the first events were accepted all the same (they
 * are delivered; cb is not called).  The nats backend stores them
 * together, several events per JetStream message (event_bundle.h). */
int broker_publish_batch(struct broker *b, const char *tenant,
                         const char *topic, const struct broker_event *evs,
                         size_t n, broker_publish_cb cb, void *arg,
                         size_t *accepted);

/* broker_publish() with no callback, for a publish nobody waits for (a
 * worker's output, a dead letter, the daemon's own events): the nats
 * backend gathers its writes with others' rather than writing each at
 * once.  Among themselves such publishes keep their order; a
 * broker_publish() may overtake them. */
int broker_publish_unhurried(struct broker *b, const char *tenant,
                             const char *topic, const uint8_t *event,
                             size_t len);

/* Whether n more events for (tenant, topic) would be accepted by every
 * durable subscription of the topic (Backpressure): 0, or -1 with errno
 * EAGAIN and *full (when not NULL) set to the first subscription whose
 * queue cannot hold them.  Nothing changes; the answer holds until the
 * loop turns or something is published to the topic. */
int broker_admit(struct broker *b, const char *tenant, const char *topic,
                 size_t n, struct broker_sub **full);

/* Subscribes; a durable name seen before (its backlog from the journal, or
 * a subscription kept by broker_unsubscribe(..., true)) gets its backlog
 * back.  Returns NULL when a durable subscription of that name is active
 * already (errno EEXIST) or memory runs out. */
struct broker_sub *broker_subscribe(struct broker *b,
                                    const struct broker_sub_spec *spec);

/* What a durable subscription does with events. */
enum broker_sub_mode {
    BROKER_SUB_ACTIVE = 0, /* queues new events and delivers (running) */
    BROKER_SUB_PAUSED,     /* queues new events, delivers none (suspended) */
    BROKER_SUB_CLOSED,     /* queues nothing new, delivers none; its backlog
                              waits (stopped) */
};
void broker_sub_set_mode(struct broker_sub *s, enum broker_sub_mode mode);
void broker_sub_set_max_inflight(struct broker_sub *s, unsigned n);

/* Ends a subscription.  keep (durable only): its backlog and its
 * unsettled deliveries stay for a later subscribe of the same name (a
 * stopped worker); else they are settled as dropped (a deleted worker).
 * Deliveries out at the time must still be settled by their holders, and
 * are then no-ops. */
void broker_unsubscribe(struct broker_sub *s, bool keep);

void broker_ack(struct broker_delivery *d);
/* Delivers again after delay_ms with count + 1. */
void broker_nack(struct broker_delivery *d, uint32_t delay_ms);
/* Delivers again after delay_ms with the same count: the delivery never
 * reached its worker's code (it waited in the master while the worker
 * failed or stopped, or its host died for a cause not the worker's), so
 * it is not counted, nor journaled. */
void broker_release(struct broker_delivery *d, uint32_t delay_ms);

/* Whether a durable subscription name of (tenant, topic) still belongs to
 * a worker (broker_recovered()). */
typedef bool (*broker_known_cb)(const char *tenant, const char *topic,
                                const char *name, void *arg);

/* Recovery is over: backlogs of durable names that did not subscribe again
 * (their worker is gone) are dropped, counted in the log.  The nats
 * backend asks known() instead, of the consumers of its stream made before
 * it opened (another instance may be making one for a worker this one has
 * not seen yet): with several instances, only the holder of the recovery
 * lease calls it (master/workers/recovery_lease.h). */
void broker_recovered(struct broker *b, broker_known_cb known, void *arg);

/* Drops the backlogs (journaled as settled) that no subscription of
 * (tenant, topic) holds: what waits for a durable name that is not
 * subscribed (before recovery, a worker not restored).  topic NULL: every
 * topic of tenant; tenant NULL: of every topic (broker_recovered()).
 * Active subscriptions keep theirs.  Returns the events
 * dropped (counted in broker_stats' dropped).  A deleted tenant's topics
 * go with it this way; a NATS backend deletes the streams' consumers that
 * no subscription binds. */
size_t broker_purge(struct broker *b, const char *tenant, const char *topic);

struct broker_stats {
    uint64_t published; /* accepted events */
    uint64_t delivered; /* deliveries started, redeliveries included */
    uint64_t acked;
    uint64_t nacked;
    uint64_t overflowed; /* oldest events dropped by drop_oldest queues */
    uint64_t dropped;    /* backlog dropped (deleted subscriptions) */
    uint64_t pending;    /* events not yet settled, all subscriptions */
    uint64_t journal_bytes;
    uint64_t journal_segments;
    uint64_t journal_live;
    uint64_t recovered; /* unsettled deliveries found in the journal */
    uint64_t exhausted; /* nats: events JetStream stopped delivering */
};
void broker_stats(const struct broker *b, struct broker_stats *out);

/* What the backend holds for tenant, not yet settled (the backlog quotas,
 * quota.h): the events stored for its topics' durable subscriptions (an
 * event held for several of them counts once) in *events, their bytes in
 * *bytes; 0 and 0 for a tenant it holds nothing for.  Counted as events
 * are stored and settled, restored by the replay at open: O(tenants). */
void broker_tenant_backlog(const struct broker *b, const char *tenant,
                           uint64_t *events, uint64_t *bytes);

/* Whether the backend can store (and so deliver), and if not why. */
struct broker_health {
    bool writable;
    int error;           /* while not writable: the errno */
    int64_t since;       /* while not writable: since when (unix s) */
    uint64_t failures;   /* times it stopped writing */
    uint64_t recoveries; /* times it wrote again */
    char message[320];   /* while not writable: the file and the error */
    bool remote;         /* a broker the daemon reaches over the network
                            (nats): not writable means not reachable */
};
void broker_health(const struct broker *b, struct broker_health *out);

/* Called when the backend stops storing (writable false) and when it
 * stores again (true): the owner holds the deliveries it has taken but
 * not yet handed on (their settlements could not be stored). */
typedef void (*broker_storage_cb)(bool writable, void *arg);
void broker_set_storage_hook(struct broker *b, broker_storage_cb cb, void *arg);

/* An event the backend stopped delivering to a subscription after
 * deliveries that all ended without a settlement (nats: JetStream's
 * MaxDeliver, nats_max_deliver, reached while the instances holding it
 * died or were cut off; the embedded backend never calls it).  The owner
 * dead-letters it; the buffer is valid during the call only. */
typedef void (*broker_exhausted_cb)(const char *tenant, const char *topic,
                                    const uint8_t *event, size_t len,
                                    uint32_t deliveries, void *arg);
void broker_set_exhausted_hook(struct broker *b, broker_exhausted_cb cb,
                               void *arg);

/* The length of a durable subscription's queue (waiting, delayed and out). */
size_t broker_sub_backlog(const struct broker_sub *s);
/* A subscription's name (its spec's: "" for a live one). */
const char *broker_sub_name(const struct broker_sub *s);

#endif /* WM_MASTER_BROKER_H */
