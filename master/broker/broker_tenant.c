/*
 * broker_tenant.c — what the embedded broker holds for each tenant: the
 * events not yet settled and their bytes (broker_tenant_backlog(), which
 * the backlog quotas of quota.h read).
 *
 * Why counted as it goes rather than summed when asked: the quota is asked
 * at every publish, and a tenant may have many topics with long queues;
 * a counter per tenant makes the question O(tenants) at worst.  The
 * counting points are few: a msg is made (msg_new(), also by replay, so
 * a restart restores the counts) and freed (msg_free(), msg_unpublish());
 * broker_embedded.c calls tenant_backlog_add() at each.  An event held
 * for two subscriptions is one msg: it counts once, as it is stored once.
 *
 * Invariants: an account exists for every tenant that has a topic, lives
 * as long as the broker (tenants are few), and its counts equal the msgs
 * of the tenant's topics and the sum of their lengths.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "master/broker/broker_embedded.h"

static struct tenant_backlog *
find(const struct ebroker *b, const char *tenant)
{
    for (struct tenant_backlog *a = b->accts; a; a = a->next)
        if (strcmp(a->tenant, tenant) == 0)
            return a;
    return NULL;
}

struct tenant_backlog *
tenant_backlog_get(struct ebroker *b, const char *tenant)
{
    struct tenant_backlog *a = find(b, tenant);

    if (a)
        return a;
    if ((a = calloc(1, sizeof *a)) == NULL ||
        (a->tenant = strdup(tenant)) == NULL) {
        free(a);
        return NULL;
    }
    a->next = b->accts;
    b->accts = a;
    return a;
}

void
tenant_backlog_add(struct tenant_backlog *a, int sign, size_t len)
{
    if (sign > 0) {
        a->events++;
        a->bytes += len;
    } else {
        a->events--;
        a->bytes -= len;
    }
}

void
tenant_backlog_free_all(struct ebroker *b)
{
    struct tenant_backlog *a;

    while ((a = b->accts) != NULL) {
        b->accts = a->next;
        free(a->tenant);
        free(a);
    }
}

void
eb_tenant_backlog(const struct broker *bb, const char *tenant, uint64_t *events,
                  uint64_t *bytes)
{
    const struct ebroker *b = (const struct ebroker *)bb;
    const struct tenant_backlog *a = find(b, tenant);

    *events = a ? a->events : 0;
    *bytes = a ? a->bytes : 0;
}
