/*
 * admit.c — backpressure at the door (see admit.h).
 *
 * Why a file of its own: the doors (the publish route, the gateway's
 * publish, invoke) share one rule and one message; the broker knows queues
 * and subscription names only, this file turns them into the worker or
 * group an operator can act on.  Invariant: it decides and counts, and
 * changes nothing (broker_admit() only looks).
 */
#include "config.h"

#include "master/broker/admit.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "master/broker/broker.h"
#include "master/broker/flow.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/workers/registry.h"
#include "master/workers/worker.h"

static uint64_t refused[ADMIT_NREASONS];

bool
admit_drop_oldest(const struct conf *c, const char *topic)
{
    if (flow_topic_reserved(topic))
        return true;
    for (size_t i = 0; i < c->drop_oldest_topics.n; i++)
        if (fnmatch(c->drop_oldest_topics.v[i], topic, FNM_NOESCAPE) == 0)
            return true;
    return false;
}

int
admit_publish(struct daemon *d, const char *tenant, const char *topic, size_t n,
              char *why, size_t whylen, char *who, size_t wholen)
{
    struct broker_sub *full;
    unsigned max = d->conf->queue_max_events;

    if (broker_admit(d->broker, tenant, topic, n, &full) == 0)
        return 0;
    refused[ADMIT_SUBSCRIBER_FULL]++;
    const char *name = broker_sub_name(full);
    size_t backlog = broker_sub_backlog(full);
    snprintf(who, wholen, "%s", name);
    if (strncmp(name, "group:", 6) == 0) {
        snprintf(why, whylen,
                 "the queue of group %s on %s/%s holds %zu of "
                 "queue_max_events (%u)",
                 name + 6, tenant, topic, backlog, max);
    } else {
        struct worker *w = registry_lookup(d->registry, name);
        if (w)
            w->counters.refused += n;
        snprintf(why, whylen,
                 "the queue of worker %s (%s) on %s/%s holds %zu of "
                 "queue_max_events (%u)",
                 w ? w->name : name, name, tenant, topic, backlog, max);
    }
    if (n > max) {
        size_t len = strlen(why);
        snprintf(why + len, whylen - len,
                 "; a batch of %zu events never fits: send at most %u", n, max);
    } else {
        size_t len = strlen(why);
        snprintf(why + len, whylen - len,
                 "; nothing was accepted: retry once it drains");
    }
    errno = EAGAIN;
    return -1;
}

void
admit_note_refused(enum admit_reason r)
{
    refused[r]++;
}

uint64_t
admit_refused(enum admit_reason r)
{
    return refused[r];
}

const char *
admit_reason_name(enum admit_reason r)
{
    static const char *const names[ADMIT_NREASONS] = {
        [ADMIT_SUBSCRIBER_FULL] = "subscriber_full",
        [ADMIT_JOURNAL_FULL] = "journal_full",
    };
    return names[r];
}
