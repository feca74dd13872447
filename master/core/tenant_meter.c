/*
 * tenant_meter.c — per-tenant usage counters (tenant_meter.h).
 *
 * An array of pointers, in the order tenants were first seen (so /metrics
 * prints them in a stable order), searched linearly: a daemon serves tens
 * of tenants, not thousands, and the counting sites (a publish, a
 * delivery, an invoke) cost more than the search.  Entries are never
 * freed before shutdown, so pointers handed out stay valid.
 */
#include "config.h"

#include "master/core/tenant_meter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct tenant_meter **meters;
static size_t nmeters, cmeters;

struct tenant_meter *
tenant_meter_get(const char *tenant)
{
    struct tenant_meter *m;

    for (size_t i = 0; i < nmeters; i++)
        if (strcmp(meters[i]->tenant, tenant) == 0)
            return meters[i];
    if (strlen(tenant) >= sizeof m->tenant)
        return NULL;
    if (nmeters == cmeters) {
        size_t c = cmeters ? 2 * cmeters : 16;
        struct tenant_meter **v = realloc(meters, c * sizeof *v);
        if (v == NULL)
            return NULL;
        meters = v;
        cmeters = c;
    }
    if ((m = calloc(1, sizeof *m)) == NULL)
        return NULL;
    strcpy(m->tenant, tenant);
    meters[nmeters++] = m;
    return m;
}

static size_t
quota_find(const struct tenant_meter *m, const char *quota)
{
    size_t i;

    for (i = 0; i < m->nquotas; i++)
        if (strcmp(m->quotas[i].name, quota) == 0)
            break;
    return i;
}

void
tenant_meter_refusal(const char *tenant, const char *quota)
{
    struct tenant_meter *m = tenant_meter_get(tenant);
    size_t i;

    if (m == NULL)
        return;
    i = quota_find(m, quota);
    if (i == m->nquotas && (m->nquotas >= TENANT_METER_QUOTAS - 1 ||
                            strlen(quota) >= sizeof m->quotas[0].name)) {
        quota = "other"; /* the last slot is kept for it */
        i = quota_find(m, quota);
    }
    if (i == m->nquotas) {
        snprintf(m->quotas[i].name, sizeof m->quotas[i].name, "%s", quota);
        m->nquotas++;
    }
    m->quotas[i].refusals++;
}

size_t
tenant_meter_count(void)
{
    return nmeters;
}

const struct tenant_meter *
tenant_meter_at(size_t i)
{
    return i < nmeters ? meters[i] : NULL;
}

void
tenant_meter_free_all(void)
{
    for (size_t i = 0; i < nmeters; i++)
        free(meters[i]);
    free(meters);
    meters = NULL;
    nmeters = cmeters = 0;
}
