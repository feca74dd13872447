/*
 * flow_bind.c — bindings and groups (flow_private.h): a worker's place in
 * the message flow.  A worker alone subscribes to its topic under its own
 * id; the members of a group share one subscription, "group:<name>", and
 * each delivery goes to one running member, in turns (struct group in
 * flow_private.h; group_run(): a turn's first event acquires the group
 * lock, the next share its holding, sent to the same member at once;
 * group_pick(): the next turn's member, round robin).  A
 * subscription's mode follows its worker's (or its members') status:
 * running takes and delivers, suspended or failed takes and holds, stopped
 * takes nothing new.
 */
#include "config.h"

#include "master/broker/flow_private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/timestamp.h"
#include "master/broker/admit.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/log.h"
#include "master/store/grouplock.h"
#include "master/workers/worker.h"

/* ---- groups and bindings --------------------------------------------- */

static void on_delivery_solo(struct broker_delivery *d, void *arg);
static void on_delivery_group(struct broker_delivery *d, void *arg);
static void on_overflow_solo(struct broker_sub *s, const uint8_t *event,
                             size_t len, void *arg);
static void on_overflow_group(struct broker_sub *s, const uint8_t *event,
                              size_t len, void *arg);
static void on_group_kick(evutil_socket_t fd, short what, void *arg);
static struct broker_delivery *wait_pop(struct group *g);
static void turn_end(struct group *g);

/* Whether w takes events now: running, and not failed (a crash loop, a
 * load or an engine that failed: its events wait for a start). */
static bool
takes_events(const struct worker *w)
{
    return w->status == WORKER_RUNNING && w->state != WORKER_STATE_FAILED;
}

static enum broker_sub_mode
mode_of(const struct worker *w)
{
    return takes_events(w)               ? BROKER_SUB_ACTIVE
           : w->status != WORKER_STOPPED ? BROKER_SUB_PAUSED
                                         : BROKER_SUB_CLOSED;
}

/* Deliveries out at once for a worker: more than its concurrency, so that
 * the next events already wait in its host's queue (or the supervisor's)
 * when one completes, rather than one broker round trip later; and at
 * least PIPELINE_MIN, so that a burst crosses to the host in a few frames
 * written together and one wake-up of the host, rather than a wake-up per
 * handful of events (bench/README.md: the native echo worker out of
 * process went from 99,000-110,000 to 207,000-219,000 events/s at
 * concurrency 1).  A host takes no more than its Hello's max_inflight; the
 * supervisor queues the rest, in order, and they are redelivered if the
 * host dies. */
#define PIPELINE_FACTOR 16u
#define PIPELINE_MIN 128u
#define PIPELINE_MAX 1024u

static unsigned
inflight_of(const struct worker *w)
{
    unsigned c = w->limits.concurrency ? w->limits.concurrency : 1;
    unsigned n = c >= PIPELINE_MAX / PIPELINE_FACTOR ? PIPELINE_MAX
                                                     : c * PIPELINE_FACTOR;
    return n < PIPELINE_MIN ? PIPELINE_MIN : n;
}

static void
group_update(struct group *g)
{
    enum broker_sub_mode m = BROKER_SUB_CLOSED;

    for (size_t i = 0; i < g->n; i++) {
        enum broker_sub_mode mm = mode_of(g->members[i]->w);
        if (mm == BROKER_SUB_ACTIVE)
            m = mm;
        else if (mm == BROKER_SUB_PAUSED && m == BROKER_SUB_CLOSED)
            m = mm;
    }
    broker_sub_set_mode(g->sub, m);
}

static struct group *
group_get(struct flow *dp, const struct worker *w, char *err, size_t errlen)
{
    struct group *g;
    char name[300];

    LIST_FOREACH (g, &dp->groups, link)
        if (strcmp(g->tenant, w->tenant) == 0 &&
            strcmp(g->topic, w->topic) == 0 && strcmp(g->name, w->group) == 0)
            return g;
    g = calloc(1, sizeof *g);
    if (g == NULL)
        goto nomem;
    g->dp = dp;
    g->tenant = strdup(w->tenant);
    g->topic = strdup(w->topic);
    g->name = strdup(w->group);
    if (!g->tenant || !g->topic || !g->name)
        goto nomem;
    snprintf(name, sizeof name, "group:%s", w->group);
    struct broker_sub_spec spec = {
        .tenant = w->tenant,
        .topic = w->topic,
        .name = name,
        .max_inflight = GROUP_WINDOW,
        .drop_oldest = admit_drop_oldest(dp->d->conf, w->topic),
        .deliver = on_delivery_group,
        .overflow = on_overflow_group,
        .arg = g,
        .since_ms = w->created_at_ms, /* its first member's here */
    };
    g->kick = event_new(dp->d->base, -1, 0, on_group_kick, g);
    if (g->kick == NULL)
        goto nomem;
    g->sub = broker_subscribe(dp->d->broker, &spec);
    if (g->sub == NULL) {
        snprintf(err, errlen, "cannot subscribe group %s to %s: %s", w->group,
                 w->topic, strerror(errno));
        goto fail;
    }
    LIST_INSERT_HEAD(&dp->groups, g, link);
    return g;
nomem:
    snprintf(err, errlen, "out of memory");
fail:
    if (g)
        flow_group_free(g);
    return NULL;
}

void
flow_group_free(struct group *g)
{
    if (g->kick)
        event_free(g->kick);
    free(g->members);
    free(g->tenant);
    free(g->topic);
    free(g->name);
    free(g);
}

static void
group_remove(struct group *g, struct binding *bd)
{
    if (g->turn_bd == bd) {
        /* Its jobs are cut loose (flow_detach): they release their shares
         * of the lock by name; the next turn waits for the last. */
        bd->token = 0;
        turn_end(g);
    }
    for (size_t i = 0; i < g->n; i++) {
        if (g->members[i] == bd) {
            memmove(g->members + i, g->members + i + 1,
                    (g->n - i - 1) * sizeof *g->members);
            g->n--;
            break;
        }
    }
    if (g->n) {
        group_update(g);
        return;
    }
    LIST_REMOVE(g, link);
    while (g->wait_n > 0)
        flow_delivery_refuse(g->dp, wait_pop(g), "its group is gone");
    broker_unsubscribe(g->sub, false);
    flow_group_free(g);
}

int
flow_attach(struct flow *dp, struct worker *w, char *err, size_t errlen)
{
    struct binding *bd = calloc(1, sizeof *bd);

    if (bd == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    bd->dp = dp;
    bd->w = w;
    LIST_INIT(&bd->jobs);
    if (w->group) {
        struct group *g = group_get(dp, w, err, errlen);
        if (g == NULL)
            goto fail;
        if (g->n == g->cap) {
            size_t cap = g->cap ? g->cap * 2 : 4;
            struct binding **m = realloc(g->members, cap * sizeof *m);
            if (m == NULL) {
                snprintf(err, errlen, "out of memory");
                if (g->n == 0)
                    group_remove(g, bd);
                goto fail;
            }
            g->members = m;
            g->cap = cap;
        }
        g->members[g->n++] = bd;
        bd->g = g;
        w->binding = bd;
        LIST_INSERT_HEAD(&dp->bindings, bd, link);
        group_update(g);
        return 0;
    }
    struct broker_sub_spec spec = {
        .tenant = w->tenant,
        .topic = w->topic,
        .name = w->id,
        .max_inflight = inflight_of(w),
        .drop_oldest = admit_drop_oldest(dp->d->conf, w->topic),
        .deliver = on_delivery_solo,
        .overflow = on_overflow_solo,
        .arg = bd,
        .since_ms = w->created_at_ms,
    };
    bd->sub = broker_subscribe(dp->d->broker, &spec);
    if (bd->sub == NULL) {
        snprintf(err, errlen, "cannot subscribe to %s: %s", w->topic,
                 strerror(errno));
        goto fail;
    }
    broker_sub_set_mode(bd->sub, mode_of(w));
    w->binding = bd;
    LIST_INSERT_HEAD(&dp->bindings, bd, link);
    return 0;
fail:
    free(bd);
    return -1;
}

void
flow_status(struct flow *dp, struct worker *w)
{
    struct binding *bd = w->binding;

    (void)dp;
    if (bd == NULL)
        return;
    if (bd->g)
        group_update(bd->g);
    else
        broker_sub_set_mode(bd->sub, mode_of(w));
}

void
flow_detach(struct flow *dp, struct worker *w)
{
    struct binding *bd = w->binding;
    struct job *j;

    (void)dp;
    if (bd == NULL)
        return;
    /* Cut the jobs loose: each finishes its pending step without w. */
    while ((j = LIST_FIRST(&bd->jobs)) != NULL) {
        LIST_REMOVE(j, link);
        j->bd = NULL;
    }
    if (bd->g)
        group_remove(bd->g, bd);
    else
        broker_unsubscribe(bd->sub, false);
    w->binding = NULL;
    LIST_REMOVE(bd, link);
    free(bd);
}

uint64_t
flow_token(const struct worker *w)
{
    return w->binding ? w->binding->token : 0;
}

/* ---- the broker's callbacks -------------------------------------------- */

/* The next member that takes events, round robin; NULL when none does. */
static struct binding *
group_pick(struct group *g)
{
    for (size_t k = 0, i = g->next % (g->n + !g->n); k < g->n;
         k++, i = (i + 1) % g->n)
        if (takes_events(g->members[i]->w)) {
            g->next = (i + 1) % g->n;
            return g->members[i];
        }
    return NULL;
}

static struct broker_delivery *
wait_pop(struct group *g)
{
    struct broker_delivery *d = g->wait[g->wait_head];

    g->wait_head = (g->wait_head + 1) % GROUP_WINDOW;
    g->wait_n--;
    return d;
}

static void
turn_end(struct group *g)
{
    g->turn_bd = NULL;
    g->turn_token = 0;
    g->turn_start_us = 0;
    g->turn_given = g->turn_jobs = 0;
    event_active(g->kick, 0, 0);
}

/* Gives waiting deliveries to the turn: opens one (its first event
 * acquires the lock), or shares its holding with the next events while it
 * is young, its member takes events one at a time (concurrency 1: its
 * host runs them in order, so members never overlap) and its lease is
 * fresh; else they wait for the turn's end. */
static void
group_run(struct group *g)
{
    struct flow *dp = g->dp;

    while (g->wait_n > 0) {
        if (g->turn_bd == NULL) {
            struct binding *bd = group_pick(g);
            if (bd == NULL) {
                while (g->wait_n > 0)
                    flow_delivery_refuse(dp, wait_pop(g),
                                         "no member of its group is running");
                return;
            }
            size_t taking = 0;
            for (size_t i = 0; i < g->n; i++)
                taking += takes_events(g->members[i]->w);
            size_t share = (g->wait_n + taking - 1) / taking;
            /* the pace: the last turns', else (the first turn) the
             * member's deadline, the slowest an event may be */
            uint64_t pace_us = g->event_us > 0 ? (uint64_t)g->event_us
                               : bd->w->limits.timeout_ms
                                   ? (uint64_t)bd->w->limits.timeout_ms * 1000
                                   : dp->d->conf->message_timeout_ms * 1000;
            uint64_t fit = dp->d->conf->lock_max_age_ms * 1000 / 4 /
                           (pace_us ? pace_us : 1);
            if (share > fit)
                share = (size_t)fit;
            g->turn_max = share < 1            ? 1
                          : share > GROUP_TURN ? GROUP_TURN
                                               : (unsigned)share;
            g->turn_bd = bd;
            g->turn_given = 1;
            g->turn_jobs++;
            if (!flow_deliver_turn(dp, bd, wait_pop(g), 0) &&
                --g->turn_jobs == 0 && g->turn_bd == bd)
                turn_end(g);
            continue;
        }
        struct binding *bd = g->turn_bd;
        if (g->turn_token == 0 || g->turn_given >= g->turn_max ||
            !takes_events(bd->w) || bd->w->limits.concurrency > 1 ||
            grouplocks_share(dp->d->locks, g->tenant, g->name, g->turn_token) !=
                0)
            return;
        g->turn_given++;
        g->turn_jobs++;
        if (!flow_deliver_turn(dp, bd, wait_pop(g), g->turn_token)) {
            /* not started: its share goes back */
            grouplocks_release(dp->d->locks, g->tenant, g->name, g->turn_token,
                               NULL, NULL);
            flow_group_turn_done(bd);
        }
    }
}

static void
on_group_kick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    group_run(arg);
}

void
flow_group_locked(struct binding *bd, uint64_t token)
{
    struct group *g = bd->g;

    if (g == NULL || g->turn_bd != bd)
        return;
    g->turn_token = token;
    g->turn_start_us = timestamp_mono_us();
    event_active(g->kick, 0, 0);
}

void
flow_group_turn_done(struct binding *bd)
{
    struct group *g = bd->g;

    if (g == NULL || g->turn_bd != bd || g->turn_jobs == 0)
        return;
    if (--g->turn_jobs == 0) {
        if (g->turn_start_us > 0 && g->turn_given > 0) {
            int64_t per =
                (timestamp_mono_us() - g->turn_start_us) / g->turn_given;
            g->event_us = g->event_us ? (3 * g->event_us + per) / 4 : per;
        }
        bd->token = 0;
        turn_end(g);
    }
}

static void
on_delivery_solo(struct broker_delivery *d, void *arg)
{
    struct binding *bd = arg;

    flow_deliver_to(bd->dp, bd, d);
}

static void
on_delivery_group(struct broker_delivery *d, void *arg)
{
    struct group *g = arg;

    if (g->wait_n == GROUP_WINDOW) { /* never: the window is the ring's */
        flow_delivery_refuse(g->dp, d, "its group's window is full");
        return;
    }
    g->wait[(g->wait_head + g->wait_n) % GROUP_WINDOW] = d;
    g->wait_n++;
    /* from the loop: the deliveries the broker hands on now come first,
     * so the turn knows its share of them */
    event_active(g->kick, 0, 0);
}

static void
overflow(struct flow *dp, struct worker *w, const char *tenant,
         const char *topic, const uint8_t *event)
{
    if (w)
        w->counters.dead_lettered++;
    flow_dead_letter(dp, tenant, topic, event, "backlog_overflow", 0);
}

static void
on_overflow_solo(struct broker_sub *s, const uint8_t *event, size_t len,
                 void *arg)
{
    struct binding *bd = arg;

    (void)s;
    (void)len;
    overflow(bd->dp, bd->w, bd->w->tenant, bd->w->topic, event);
}

static void
on_overflow_group(struct broker_sub *s, const uint8_t *event, size_t len,
                  void *arg)
{
    struct group *g = arg;

    (void)s;
    (void)len;
    overflow(g->dp, NULL, g->tenant, g->topic, event);
}
