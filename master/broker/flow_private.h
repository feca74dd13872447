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

/* Deliveries a group takes from its subscription at once: two turns'
 * worth, so that the next turn's events wait here when one ends. */
#define GROUP_TURN 32u
#define GROUP_WINDOW (2 * GROUP_TURN)

/* The competing consumers of one (tenant, topic, group).  Their events go
 * in turns (flow_bind.c): a turn is one holding of the group's lock,
 * taken by its first event and shared by the events pipelined to one
 * member (grouplocks_share()): up to GROUP_TURN, and no more than its
 * share of what waited as it opened (the waiting events over the members
 * that take events), so that a burst is spread over the members.  The
 * next turn goes to the next member once every event of this one is
 * finished. */
struct group {
    LIST_ENTRY(group) link;
    struct flow *dp;
    char *tenant, *topic, *name;
    struct broker_sub *sub;
    struct binding **members;
    size_t n, cap;
    size_t next; /* the member of the next turn (round robin) */
    /* the turn */
    struct binding *turn_bd; /* its member; NULL: no turn */
    uint64_t turn_token;     /* its holding's token; 0: being acquired */
    unsigned turn_given;     /* events given to it */
    unsigned turn_max;       /* its share of what waited as it opened */
    int64_t turn_start_us;   /* when its holding began (monotonic) */
    /* µs per event of the last turns, smoothed (0 before the first
     * ends: the member's deadline counts then): a turn takes no more
     * events than a quarter of lock_max_age_ms holds at that pace, so
     * that its lock is not left unrenewed long enough to look stale */
    int64_t event_us;
    unsigned turn_jobs; /* its jobs not yet finished */
    /* deliveries waiting for a turn, a ring of GROUP_WINDOW */
    struct broker_delivery *wait[GROUP_WINDOW];
    size_t wait_head, wait_n;
    struct event *kick; /* runs the next turn, from the loop */
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
    bool turn; /* an event of its group's turn (struct group) */
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
/* Starts delivery d on bd's worker as an event of its group's turn: under
 * token, a holding of the group's lock shared already, or (token 0)
 * acquiring it, the turn's first event (flow_group_locked() then).  false
 * when no job started (the event was settled at once). */
bool flow_deliver_turn(struct flow *dp, struct binding *bd,
                       struct broker_delivery *d, uint64_t token);

/* ---- flow_bind.c ------------------------------------------------------- */

/* Frees a group that is out of dp->groups (what it holds: its kick, its
 * names, its members' array; not its subscription, nor the deliveries
 * waiting in it). */
void flow_group_free(struct group *g);
/* The turn of bd's group has its holding under token. */
void flow_group_locked(struct binding *bd, uint64_t token);
/* A job of the turn of bd's group is finished (its lock share released). */
void flow_group_turn_done(struct binding *bd);

#endif /* WM_MASTER_FLOW_PRIVATE_H */
