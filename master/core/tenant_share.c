/*
 * tenant_share.c — each tenant's share of the CPU (tenant_share.h).
 *
 * A list of the tenants that have settings of their own: few (an
 * operator sets them one by one), looked up once per host spawn, so a
 * list is enough.  Tenants without an entry take the configuration's
 * defaults, read at each call (a reload applies to the next spawn).
 * Loop thread only.
 */
#include "config.h"

#include "master/core/tenant_share.h"

#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "master/core/conf.h"
#include "master/core/roles.h"

struct share {
    LIST_ENTRY(share) link;
    char tenant[ROLES_TENANT_MAX + 1];
    uint32_t cpu_weight; /* 0: the default */
    uint32_t cpu_max;    /* 0: the default */
};

static LIST_HEAD(, share) shares = LIST_HEAD_INITIALIZER(shares);

static struct share *
share_find(const char *tenant)
{
    struct share *s;
    LIST_FOREACH (s, &shares, link)
        if (strcmp(s->tenant, tenant) == 0)
            return s;
    return NULL;
}

int
tenant_share_set(const char *tenant, uint32_t cpu_weight, uint32_t cpu_max)
{
    struct share *s = share_find(tenant);

    if (cpu_weight == 0 && cpu_max == 0) {
        tenant_share_forget(tenant);
        return 0;
    }
    if (s == NULL) {
        if (strlen(tenant) > ROLES_TENANT_MAX ||
            (s = calloc(1, sizeof *s)) == NULL)
            return -1;
        strcpy(s->tenant, tenant);
        LIST_INSERT_HEAD(&shares, s, link);
    }
    s->cpu_weight = cpu_weight;
    s->cpu_max = cpu_max;
    return 0;
}

void
tenant_share_forget(const char *tenant)
{
    struct share *s = share_find(tenant);

    if (s) {
        LIST_REMOVE(s, link);
        free(s);
    }
}

void
tenant_share_get(const struct conf *c, const char *tenant, uint32_t *cpu_weight,
                 uint32_t *cpu_max)
{
    const struct share *s = share_find(tenant);

    *cpu_weight = s && s->cpu_weight ? s->cpu_weight : c->tenant_cpu_weight;
    *cpu_max = s && s->cpu_max ? s->cpu_max : c->tenant_cpu_max;
}

void
tenant_share_own(const char *tenant, uint32_t *cpu_weight, uint32_t *cpu_max)
{
    const struct share *s = share_find(tenant);

    *cpu_weight = s ? s->cpu_weight : 0;
    *cpu_max = s ? s->cpu_max : 0;
}

void
tenant_share_free_all(void)
{
    struct share *s;

    while ((s = LIST_FIRST(&shares)) != NULL) {
        LIST_REMOVE(s, link);
        free(s);
    }
}
