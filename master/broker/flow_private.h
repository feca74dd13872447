/*
 * flow_private.h — what the message flow's files share (flow.h is the
 * interface): the structures of a binding (a worker's place in the flow),
 * a group, a job (one event on its way through a worker) and the flow
 * itself, and the calls between the files.
 *
 *   flow.c       jobs: start, process, settle (outputs, outcomes, dead
 *                letters), the API's doors (publish, invoke, a worker's
 *                writes under its group's token), life and statistics
 *   flow_bind.c  bindings and groups: which subscription a worker's events
 *                come from, its mode as the worker's status changes, the
 *                choice of a group's member, the broker's callbacks
 *
 * Room-private (master/broker/ only).
 */
#ifndef WM_MASTER_FLOW_PRIVATE_H
#define WM_MASTER_FLOW_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <time.h>

#include "ipc/cloudevent.h"
#include "master/broker/broker.h"
#include "master/broker/flow.h"
#include "master/broker/outcome.h"

struct job;
struct group;

struct binding {
    LIST_ENTRY(binding) link; /* in dp->bindings */
    struct flow *dp;
    struct worker *w;
    struct broker_sub *sub; /* its own; NULL when grouped */
    struct group *g;
    LIST_HEAD(, job) jobs;
    size_t invokes; /* its jobs that are invokes (they share its queue) */
    uint64_t token; /* the lock token of the job processing now */
};

/* The competing consumers of one (tenant, topic, group). */
struct group {
    LIST_ENTRY(group) link;
    struct flow *dp;
    char *tenant, *topic, *name;
    struct broker_sub *sub;
    struct binding **members;
    size_t n, cap;
    size_t next, turn; /* round robin, in turns of GROUP_TURN */
};

struct out {
    char *tenant;
    char *topic;
    struct ipc_fb_builder fb;
    bool dead; /* a loop: dead-letter it (reason loop) */
};

struct job {
    LIST_ENTRY(job) link; /* in its binding's jobs */
    struct flow *dp;
    struct binding *bd;        /* NULL once its worker is gone */
    struct broker_delivery *d; /* NULL for an invoke */
    /* The event as its worker gets it: the delivery's (or the invoke's)
     * bytes, borrowed (they outlive the job: the job settles the delivery;
     * an invoke's caller frees them in its callback, the job's last use),
     * or the copy in `stamped` when the worker's config added extensions;
     * `in` decodes it. */
    const uint8_t *ev;
    size_t evlen;
    struct ipc_fb_builder stamped;
    struct ipc_cloudevent in;
    uint32_t hops;
    uint64_t token;
    bool locked;
    char tenant[128];
    char group[128];
    struct timespec start;
    flow_invoke_cb icb;
    void *iarg;
    /* Settling: what to publish, then the action. */
    struct out *outs;
    size_t nouts;
    enum outcome_action action;
    char reason[32];
};

struct flow {
    struct daemon *d;
    LIST_HEAD(, group) groups;
    LIST_HEAD(, binding) bindings;
    struct flow_stats st;
};

/* ---- flow.c ------------------------------------------------------------ */

/* Publishes a dead letter of event (of tenant/topic) to <topic>-dead.
 * Returns 0 when it is stored (or dropped by rule), -1 when the broker
 * refused it. */
int flow_dead_letter(struct flow *dp, const char *tenant, const char *topic,
                     const uint8_t *event, const char *reason, uint32_t count);
/* A delivery that cannot start: back to the queue, later, uncounted. */
void flow_delivery_refuse(struct flow *dp, struct broker_delivery *d,
                          const char *why);
/* Starts the job of delivery d on bd's worker. */
void flow_deliver_to(struct flow *dp, struct binding *bd,
                     struct broker_delivery *d);

#endif /* WM_MASTER_FLOW_PRIVATE_H */
