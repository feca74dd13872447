/*
 * broker_storage.c — the embedded broker when its journal cannot write (a
 * full disk, a quota, an I/O error): what broker.h's Storage failures
 * promise, over journal.h's failure and recovery.
 *
 * The journal does the work: it refuses publishes (EIO) while it cannot
 * write, keeps the SETTLE and COUNT records appended meanwhile and writes
 * them first once it can, and recovers by itself.  This file tells the
 * broker's owner (the storage hook is the journal's state hook, unchanged)
 * so that it stops handing deliveries on, and says why (broker_health()).
 *
 * Why the owner holds deliveries rather than the broker: the events it
 * has taken already wait in the supervisor's queues, which the broker
 * cannot reach; holding there covers both.
 */
#include "config.h"

#include <stdio.h>

#include "master/broker/broker_embedded.h"
#include "master/broker/broker_private.h"
#include "master/broker/journal.h"

void
eb_set_storage_hook(struct broker *bb, broker_storage_cb cb, void *arg)
{
    struct ebroker *b = (struct ebroker *)bb;

    journal_set_state_hook(broker_journal(b), cb, arg);
}

void
eb_health(const struct broker *bb, struct broker_health *out)
{
    const struct ebroker *b = (const struct ebroker *)bb;
    struct journal_health h;

    journal_health(broker_journal(b), &h);
    *out = (struct broker_health){
        .writable = h.writable,
        .error = h.error,
        .since = h.since,
        .failures = h.failures,
        .recoveries = h.recoveries,
    };
    snprintf(out->message, sizeof out->message, "%s", h.message);
}
