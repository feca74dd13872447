/*
 * test_quota.c — unit tests of master/workers/quota.c: limits from the
 * defaults and the overrides, sizes counted from the registry and given
 * back, and the publish token buckets (refill, debt, Retry-After, both
 * buckets or neither) on a clock the test chooses.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "master/core/conf.h"
#include "master/core/tenant_meter.h"
#include "master/workers/quota.h"
#include "master/workers/registry.h"
#include "master/workers/worker.h"

#include "tests/unit/check.h"

static void
test_limits(void)
{
    struct conf c = { .tenant_max_workers = 2 };
    enum quota_kind k;

    quota_defaults_set(&c);
    CHECK(quota_limit("a", QUOTA_MAX_WORKERS) == 2);
    CHECK(quota_override_set("a", QUOTA_MAX_WORKERS, 0) == 0);
    CHECK(quota_limit("a", QUOTA_MAX_WORKERS) == 0); /* unlimited */
    CHECK(quota_limit("b", QUOTA_MAX_WORKERS) == 2);
    CHECK(quota_override_set("a", QUOTA_MAX_WORKERS, -1) == 0);
    CHECK(quota_override("a", QUOTA_MAX_WORKERS) == -1);
    CHECK(quota_kind_parse("max_code_bytes", &k) == 0 &&
          k == QUOTA_MAX_CODE_BYTES);
    CHECK(quota_kind_parse("max_code", &k) == -1);
    quota_free();
}

static void
test_sizes(void)
{
    struct conf c = { .tenant_max_workers = 1, .tenant_max_memory_mb = 100 };
    struct registry *r = registry_new();
    struct worker *w = calloc(1, sizeof *w);
    char why[512];

    quota_defaults_set(&c);
    snprintf(w->id, sizeof w->id, "%s", "7d4c8a30-5b1e-4f6a-9c2d-0e1f2a3b4c5d");
    w->name = strdup("w");
    w->tenant = strdup("a");
    w->limits.memory_mb = 60;
    CHECK(quota_size_admit(r, "a", QUOTA_MAX_WORKERS, 1, 0, why, sizeof why) ==
          0);
    CHECK(registry_add(r, w) == 0);
    CHECK(quota_usage(r, "a", QUOTA_MAX_MEMORY_MB) == 60);
    CHECK(quota_size_admit(r, "a", QUOTA_MAX_WORKERS, 1, 0, why, sizeof why) ==
          -1);
    CHECK(strstr(why, "max_workers: limit 1, usage 1") != NULL);
    CHECK(quota_size_admit(r, "b", QUOTA_MAX_WORKERS, 1, 0, why, sizeof why) ==
          0);
    CHECK(quota_size_admit(r, "a", QUOTA_MAX_MEMORY_MB, 41, 0, why,
                           sizeof why) == -1);
    CHECK(quota_size_admit(r, "a", QUOTA_MAX_MEMORY_MB, 40, 0, why,
                           sizeof why) == 0);
    /* what is given back counts: 60 - 60 + 100 */
    CHECK(quota_size_admit(r, "a", QUOTA_MAX_MEMORY_MB, 100, 60, why,
                           sizeof why) == 0);
    registry_remove(r, w);
    worker_free(w);
    CHECK(quota_size_admit(r, "a", QUOTA_MAX_WORKERS, 1, 0, why, sizeof why) ==
          0);
    registry_free(r);
    quota_free();
}

/* One tenant's count of one quota's refusals, as tenant_meter.h keeps
 * them for /metrics. */
static uint64_t
refusals_of(const char *tenant, enum quota_kind k)
{
    const struct tenant_meter *m = tenant_meter_get(tenant);
    for (size_t i = 0; m && i < m->nquotas; i++)
        if (strcmp(m->quotas[i].name, quota_kind_name(k)) == 0)
            return m->quotas[i].refusals;
    return 0;
}

static void
test_buckets(void)
{
    struct conf c = { .tenant_publish_events_per_second = 2,
                      .tenant_publish_bytes_per_second = 100 };
    uint64_t after = 0;
    enum quota_kind k = QUOTA_N;
    char why[512];
    int64_t t0 = 1000000;

    quota_defaults_set(&c);
    CHECK(quota_rate_take("a", 2, 10, t0, &after, &k, why, sizeof why) == 0);
    CHECK(quota_rate_take("a", 1, 10, t0, &after, &k, why, sizeof why) == -1);
    CHECK(k == QUOTA_PUBLISH_EVENTS_PER_S && after == 1);
    CHECK(strstr(why, "publish_events_per_second") != NULL);
    /* half a second gives one event back */
    CHECK(quota_rate_take("a", 1, 10, t0 + 499, &after, &k, why, sizeof why) ==
          -1);
    CHECK(quota_rate_take("a", 1, 10, t0 + 500, &after, &k, why, sizeof why) ==
          0);
    /* another tenant has its own buckets */
    CHECK(quota_rate_take("b", 2, 10, t0, &after, &k, why, sizeof why) == 0);
    /* bytes short: nothing is taken from the events bucket either */
    CHECK(quota_rate_take("c", 1, 101, t0, &after, &k, why, sizeof why) ==
          0); /* more than a second passes on a full bucket: a debt */
    CHECK(quota_rate_take("c", 1, 1, t0 + 5, &after, &k, why, sizeof why) ==
          -1);
    CHECK(k == QUOTA_PUBLISH_BYTES_PER_S && after == 1);
    CHECK(quota_rate_take("c", 1, 1, t0 + 30, &after, &k, why, sizeof why) ==
          0);
    CHECK(refusals_of("a", QUOTA_PUBLISH_EVENTS_PER_S) == 2);
    CHECK(refusals_of("c", QUOTA_PUBLISH_BYTES_PER_S) == 1);
    /* a forgotten (deleted) tenant's refusals stay billed */
    quota_tenant_forget("a");
    CHECK(refusals_of("a", QUOTA_PUBLISH_EVENTS_PER_S) == 2);
    quota_free();
    tenant_meter_free_all();
}

/* A broker's counts for test_backlog: tenant "a" holds held_events. */
static uint64_t held_events, held_bytes;

static void
held_of(const void *arg, const char *tenant, uint64_t *events, uint64_t *bytes)
{
    (void)arg;
    *events = strcmp(tenant, "a") == 0 ? held_events : 0;
    *bytes = strcmp(tenant, "a") == 0 ? held_bytes : 0;
}

/* The backlog kinds read their usage from the source; a publish that
 * would go over either is refused whole, events named first. */
static void
test_backlog(void)
{
    struct conf c = { .tenant_max_backlog_events = 3,
                      .tenant_max_backlog_bytes = 100 };
    struct registry *r = registry_new();
    enum quota_kind k;
    char why[512];

    quota_defaults_set(&c);
    CHECK(quota_usage(r, "a", QUOTA_MAX_BACKLOG_EVENTS) == 0); /* no source */
    quota_backlog_source_set(held_of, NULL);
    held_events = 2;
    held_bytes = 40;
    CHECK(quota_usage(r, "a", QUOTA_MAX_BACKLOG_EVENTS) == 2);
    CHECK(quota_usage(r, "a", QUOTA_MAX_BACKLOG_BYTES) == 40);
    CHECK(quota_backlog_admit(r, "a", 1, 60, &k, why, sizeof why) == 0);
    CHECK(quota_backlog_admit(r, "a", 2, 10, &k, why, sizeof why) == -1);
    CHECK(k == QUOTA_MAX_BACKLOG_EVENTS);
    CHECK(strstr(why, "max_backlog_events: limit 3, usage 2") != NULL);
    CHECK(strstr(why, "retry once the backlog drains") != NULL);
    CHECK(quota_backlog_admit(r, "a", 1, 61, &k, why, sizeof why) == -1);
    CHECK(k == QUOTA_MAX_BACKLOG_BYTES);
    CHECK(strstr(why, "max_backlog_bytes: limit 100, usage 40") != NULL);
    CHECK(quota_backlog_admit(r, "b", 3, 100, &k, why, sizeof why) == 0);
    CHECK(quota_override_set("a", QUOTA_MAX_BACKLOG_EVENTS, 0) == 0);
    CHECK(quota_backlog_admit(r, "a", 50, 1, &k, why, sizeof why) == 0);
    quota_free();
    CHECK(quota_usage(r, "a", QUOTA_MAX_BACKLOG_EVENTS) == 0); /* unset */
    registry_free(r);
}

/* State usage is what the gateway adds; a put over an existing key gives
 * its old value back first. */
static void
test_state(void)
{
    struct conf c = { .tenant_max_state_keys = 2,
                      .tenant_max_state_bytes = 10 };
    struct registry *r = registry_new();
    enum quota_kind k;
    char why[512];

    quota_defaults_set(&c);
    quota_state_add("a", 2, 8);
    CHECK(quota_usage(r, "a", QUOTA_MAX_STATE_KEYS) == 2);
    CHECK(quota_usage(r, "a", QUOTA_MAX_STATE_BYTES) == 8);
    CHECK(quota_state_admit(r, "a", 1, 1, 0, &k, why, sizeof why) == -1);
    CHECK(k == QUOTA_MAX_STATE_KEYS);
    CHECK(strstr(why, "delete some state keys") != NULL);
    CHECK(quota_state_admit(r, "a", 0, 6, 4, &k, why, sizeof why) == 0);
    CHECK(quota_state_admit(r, "a", 0, 7, 4, &k, why, sizeof why) == -1);
    CHECK(k == QUOTA_MAX_STATE_BYTES);
    quota_state_add("a", -1, -4);
    CHECK(quota_state_admit(r, "a", 1, 6, 0, &k, why, sizeof why) == 0);
    quota_state_clear();
    CHECK(quota_usage(r, "a", QUOTA_MAX_STATE_KEYS) == 0);
    quota_free();
    registry_free(r);
}

int
main(void)
{
    RUN(test_limits);
    RUN(test_sizes);
    RUN(test_buckets);
    RUN(test_backlog);
    RUN(test_state);
    return check_result();
}
