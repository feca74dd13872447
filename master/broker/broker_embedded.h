/*
 * broker_embedded.h — the objects of the `embedded` broker backend (topic,
 * msg, dsub, dl, the broker itself; broker_embedded.c describes them),
 * shared by the files that implement it (broker_embedded.c,
 * broker_tenant.c).  Private to master/broker/: callers of broker.h never
 * see them.
 *
 * Invariants (kept by broker_embedded.c): a msg exists while some dl of it
 * is unsettled (replay sweeps the emptied ones at its end); a topic's acct
 * is its tenant's backlog account, which counts exactly the msgs of the
 * tenant's topics and their bytes (tenant_backlog_add()).
 */
#ifndef WM_MASTER_BROKER_EMBEDDED_H
#define WM_MASTER_BROKER_EMBEDDED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "master/broker/broker_backend.h"

struct event;
struct journal;

enum { REC_MSG = 1, REC_SETTLE = 2, REC_COUNT = 3 };
enum dl_where { DL_QUEUED, DL_DELAYED, DL_OUT, DL_ORPHAN };

struct topic;
struct dsub;

struct msg {
    TAILQ_ENTRY(msg) link; /* b->msgs, in lsn order */
    struct topic *t;
    uint64_t lsn;    /* its current journal record, 0 if not journaled */
    uint64_t origin; /* the lsn of its first record */
    uint8_t *ev;
    size_t len;
    struct dl *dls; /* unsettled deliveries */
};

struct dl {
    struct broker_delivery pub; /* first: broker_ack() casts back */
    struct ebroker *b;
    struct msg *m;
    struct dsub *ds;
    struct dl *next_in_msg;
    TAILQ_ENTRY(dl) q; /* ds->queue while queued */
    enum dl_where where;
    struct event *timer; /* while delayed */
};

TAILQ_HEAD(dl_list, dl);

struct dsub {
    struct dsub *next; /* in its topic */
    struct topic *t;
    char *name;
    struct dl_list queue;
    size_t nqueued, ndelayed, nout;
    struct esub *active;
    unsigned hold; /* a delivery loop works on it: not freed */
};

struct esub {
    struct broker_sub head; /* first: broker.c's view */
    LIST_ENTRY(esub) link;  /* t->subs, or b->wild */
    struct ebroker *b;
    struct topic *t; /* NULL for a wildcard live subscription */
    struct dsub *ds; /* durable only */
    struct broker_sub_spec spec;
    char *tenant; /* spec's strings, owned */
    char *topic;
    char *name;
    enum broker_sub_mode mode;
    unsigned max_inflight;
    struct event *kick;
    uint64_t queued_gen; /* the last publish that queued for it */
};

LIST_HEAD(sub_list, esub);

struct topic {
    struct topic *next; /* hash chain */
    char *tenant;
    char *topic;
    struct sub_list subs;
    struct dsub *dsubs;
    struct tenant_backlog *acct; /* its tenant's, shared by its topics */
};

TAILQ_HEAD(msg_list, msg);

struct ebroker {
    struct broker head; /* first: broker.c's view */
    struct event_base *base;
    struct journal *j;
    uint32_t queue_max;
    struct topic **buckets;
    size_t nbuckets, ntopics;
    struct sub_list wild; /* live subscriptions to every topic */
    struct msg_list msgs;
    uint64_t nmsgs;
    bool replaying;
    /* Replay: messages by origin (sorted array; origins only grow among
     * first records, and rewrites find theirs by binary search). */
    struct msg **by_origin;
    size_t norigin, corigin;
    struct broker_stats st;
    uint64_t next_delivery_id;
    uint64_t publish_gen;
    uint64_t segment_bytes; /* the journal's, for compaction's rule */
    int (*verify)(const uint8_t *event, size_t len); /* replayed events */
    struct tenant_backlog *accts; /* one per tenant with a topic */
};

/* ---- per-tenant backlog accounts (broker_tenant.c) ------------------- */

/* What the broker holds for one tenant: its msgs and their bytes. */
struct tenant_backlog {
    struct tenant_backlog *next; /* b->accts */
    char *tenant;
    uint64_t events, bytes;
};

/* tenant's account in b, made (zero) when absent; NULL when out of
 * memory. */
struct tenant_backlog *tenant_backlog_get(struct ebroker *b,
                                          const char *tenant);

/* Counts a msg of len bytes stored (sign 1) or freed (-1) in a. */
void tenant_backlog_add(struct tenant_backlog *a, int sign, size_t len);

/* Frees every account of b (its close). */
void tenant_backlog_free_all(struct ebroker *b);

/* ---- broker_storage.c, broker_tenant.c: their operations ------------- */

void eb_set_storage_hook(struct broker *b, broker_storage_cb cb, void *arg);
void eb_health(const struct broker *b, struct broker_health *out);
void eb_tenant_backlog(const struct broker *b, const char *tenant,
                       uint64_t *events, uint64_t *bytes);

#endif /* WM_MASTER_BROKER_EMBEDDED_H */
