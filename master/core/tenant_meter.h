/*
 * tenant_meter.h — what each tenant used, counted for billing (issue 22,
 * "Metering"): events that came in for its topics, events handed out to
 * its workers, invocations of its workers, and requests refused for one
 * of its quotas.  /metrics (route_metrics.c) prints them with the CPU time
 * and memory of its hosts' cgroup (sandbox_cg_tenant_usage()).
 *
 * Counters only grow, from the daemon's start (Prometheus counters: a
 * restart is a reset the scraper handles); a deleted tenant's stay, so
 * that its last period can still be billed.  Loop thread only.
 */
#ifndef WM_MASTER_TENANT_METER_H
#define WM_MASTER_TENANT_METER_H

#include <stddef.h>
#include <stdint.h>

/* The most distinct quota names a tenant's refusals are counted under,
 * "other" included: past the others, or for a name of 32 bytes or more,
 * a refusal counts under "other". */
#define TENANT_METER_QUOTAS 16

struct tenant_meter {
    char tenant[72];
    uint64_t events_in;   /* accepted for its topics (API, gateway,
                             its workers' outputs) */
    uint64_t events_out;  /* deliveries handed to its workers */
    uint64_t invocations; /* invokes of its workers started */
    size_t nquotas;
    struct {
        char name[32];
        uint64_t refusals;
    } quotas[TENANT_METER_QUOTAS];
};

/* tenant's counters, made (zero) when new; NULL when out of memory or the
 * name is longer than a tenant's.  Valid until tenant_meter_free_all(). */
struct tenant_meter *tenant_meter_get(const char *tenant);

/* Counts one refusal of a request of tenant for its quota (a word:
 * "workers", "publish_rate", ...). */
void tenant_meter_refusal(const char *tenant, const char *quota);

/* The tenants counted so far, in the order first seen. */
size_t tenant_meter_count(void);
const struct tenant_meter *tenant_meter_at(size_t i);

void tenant_meter_free_all(void);

#endif /* WM_MASTER_TENANT_METER_H */
