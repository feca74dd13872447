/*
 * tenant_share.h — each tenant's share of the CPU (issue 22): the weight
 * and the quota of the cgroup that holds all its hosts
 * (sandbox_cg_create_in()).  The defaults are the keys tenant_cpu_weight
 * and tenant_cpu_max; the tenants' API (route_tenants.c) sets a tenant's
 * own from its quotas.cpu_weight and quotas.cpu_max.  The host
 * supervisor asks at each spawn, so a change applies from a tenant's
 * next host on (and to the group itself, which each spawn writes again).
 */
#ifndef WM_MASTER_TENANT_SHARE_H
#define WM_MASTER_TENANT_SHARE_H

#include <stdint.h>

struct conf;

/* Sets tenant's own weight (1-10000) and quota (percent of one CPU);
 * 0 for either keeps the default of the configuration for it.  0, or -1
 * (out of memory: the default stays). */
int tenant_share_set(const char *tenant, uint32_t cpu_weight, uint32_t cpu_max);

/* Forgets tenant's own settings (a deleted tenant). */
void tenant_share_forget(const char *tenant);

/* The weight and quota of tenant: its own, else c's defaults. */
void tenant_share_get(const struct conf *c, const char *tenant,
                      uint32_t *cpu_weight, uint32_t *cpu_max);

/* tenant's own weight and quota, 0 for each it leaves to the defaults. */
void tenant_share_own(const char *tenant, uint32_t *cpu_weight,
                      uint32_t *cpu_max);

/* Frees every tenant's settings (shutdown). */
void tenant_share_free_all(void);

#endif /* WM_MASTER_TENANT_SHARE_H */
