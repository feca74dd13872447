/*
 * quota_http.c — quotas per tenant on the admin API: the 403
 * quota_exceeded and 429 rate_limited answers the routes give, the
 * "quotas" object of a tenant's create and PATCH (strict members), and a
 * tenant's quotas and usage in GET /v1/tenants/{name}.
 *
 * The same object carries the tenant's CPU share, cpu_weight (1-10000)
 * and cpu_max (percent of one CPU), which are no limits this module
 * counts but the weight and quota of the tenant's cgroup: they go to
 * tenant_share.h, which the host supervisor reads at each spawn.  For
 * them 0 and null alike mean the configuration's tenant_cpu_weight and
 * tenant_cpu_max.
 *
 * Why here and not in the routes: every route that grows a usage answers
 * the same way (code, members, message), so the answer is written once.
 * A refusal accepts nothing: the routes ask before they change anything.
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lib/timestamp.h"
#include "master/api/api.h"
#include "master/api/members.h"
#include "master/api/quota_http.h"
#include "master/core/daemon.h"
#include "master/core/tenant_share.h"

static const struct api_member quota_members[] = {
    { "max_workers", NULL },
    { "max_running_hosts", NULL },
    { "max_memory_mb", NULL },
    { "max_code_bytes", NULL },
    { "publish_events_per_second", NULL },
    { "publish_bytes_per_second", NULL },
    { "max_backlog_events", NULL },
    { "max_backlog_bytes", NULL },
    { "max_state_keys", NULL },
    { "max_state_bytes", NULL },
    { "cpu_weight", NULL },
    { "cpu_max", NULL },
    { NULL, NULL },
};
const struct api_object api_quota_object = {
    .what = "a tenant's quotas",
    .members = quota_members,
    .hint = "{\"max_workers\": 10, \"publish_events_per_second\": 100} "
            "(0 = unlimited, null = the daemon's default)",
};

/* Answers a refusal by tenant's quota k: the error carries quota, limit
 * and member = value. */
static void
refuse(struct api_req *rq, int status, const char *code, const char *tenant,
       enum quota_kind k, const char *member, uint64_t value, const char *why)
{
    api_error_extra(rq, status, code,
                    json_pack("{s:s, s:I, s:I}", "quota", quota_kind_name(k),
                              "limit", (json_int_t)quota_limit(tenant, k),
                              member, (json_int_t)value),
                    "%s", why);
}

bool
api_quota_refuse_size(struct api_req *rq, const char *tenant, enum quota_kind k,
                      uint64_t add, uint64_t release)
{
    char why[512];
    uint64_t used = quota_usage(rq->d->registry, tenant, k);

    if (quota_size_admit(rq->d->registry, tenant, k, add, release, why,
                         sizeof why) == 0)
        return false;
    refuse(rq, 403, "quota_exceeded", tenant, k, "usage", used, why);
    return true;
}

bool
api_quota_refuse_backlog(struct api_req *rq, const char *tenant,
                         uint64_t events, uint64_t bytes)
{
    return api_quota_refuse_size(rq, tenant, QUOTA_MAX_BACKLOG_EVENTS, events,
                                 0) ||
           api_quota_refuse_size(rq, tenant, QUOTA_MAX_BACKLOG_BYTES, bytes, 0);
}

bool
api_quota_refuse_rate(struct api_req *rq, const char *tenant, uint64_t events,
                      uint64_t bytes)
{
    char why[512], after[32];
    uint64_t s = 0;
    enum quota_kind k = QUOTA_PUBLISH_EVENTS_PER_S;

    if (quota_rate_take(tenant, events, bytes, timestamp_now_ms(), &s, &k, why,
                        sizeof why) == 0)
        return false;
    snprintf(after, sizeof after, "%" PRIu64, s);
    api_reply_header(rq, "Retry-After", after);
    refuse(rq, 429, "rate_limited", tenant, k, "retry_after_s", s, why);
    return true;
}

int
api_quota_check(struct api_req *rq, json_t *quotas)
{
    const char *key;
    json_t *v;

    if (!json_is_object(quotas)) {
        api_error(rq, 400, "invalid_argument",
                  "quotas must be an object such as %s", api_quota_object.hint);
        return -1;
    }
    if (api_members_check(rq, quotas, &api_quota_object) != 0)
        return -1;
    json_object_foreach(quotas, key, v)
    {
        bool weight = strcmp(key, "cpu_weight") == 0,
             cpu_max = strcmp(key, "cpu_max") == 0;
        if ((weight || cpu_max) && json_is_integer(v) &&
            (json_integer_value(v) < 0 ||
             json_integer_value(v) > (weight ? 10000 : 102400))) {
            api_error(rq, 400, "invalid_argument",
                      "quotas.%s must be from 0 to %d (0 or null: the "
                      "configuration's tenant_%s)",
                      key, weight ? 10000 : 102400, key);
            return -1;
        }
        if (json_is_null(v) ||
            (json_is_integer(v) && json_integer_value(v) >= 0))
            continue;
        api_error(rq, 400, "invalid_argument",
                  "quotas.%s must be a non-negative integer (0 = unlimited) "
                  "or null (the daemon's default)",
                  key);
        return -1;
    }
    return 0;
}

void
api_quota_apply(const char *tenant, json_t *quotas)
{
    const char *key;
    json_t *v;
    enum quota_kind k;

    uint32_t weight, cpu_max;

    tenant_share_own(tenant, &weight, &cpu_max);
    json_object_foreach(quotas, key, v)
    {
        uint32_t n = json_is_integer(v) ? (uint32_t)json_integer_value(v) : 0;
        if (quota_kind_parse(key, &k) == 0)
            quota_override_set(tenant, k,
                               json_is_integer(v) ? json_integer_value(v) : -1);
        else if (strcmp(key, "cpu_weight") == 0)
            weight = n;
        else if (strcmp(key, "cpu_max") == 0)
            cpu_max = n;
    }
    /* Out of memory: the defaults stay (logged by nobody; rare). */
    (void)tenant_share_set(tenant, weight, cpu_max);
}

json_t *
api_quota_overrides_json(const char *tenant)
{
    json_t *j = json_object();
    for (int k = 0; k < QUOTA_N; k++) {
        int64_t o = quota_override(tenant, (enum quota_kind)k);
        if (o >= 0)
            json_object_set_new(j, quota_kind_name((enum quota_kind)k),
                                json_integer(o));
    }
    uint32_t weight, cpu_max;
    tenant_share_own(tenant, &weight, &cpu_max);
    if (weight)
        json_object_set_new(j, "cpu_weight", json_integer(weight));
    if (cpu_max)
        json_object_set_new(j, "cpu_max", json_integer(cpu_max));
    return j;
}

void
api_quota_describe(struct daemon *d, const char *tenant, json_t *j)
{
    json_t *quotas = json_object(), *usage = json_object();

    for (int i = 0; i < QUOTA_N; i++) {
        enum quota_kind k = (enum quota_kind)i;
        const char *name = quota_kind_name(k);
        json_object_set_new(quotas, name,
                            json_integer((json_int_t)quota_limit(tenant, k)));
        json_object_set_new(
            usage, name,
            json_integer((json_int_t)quota_usage(d->registry, tenant, k)));
    }
    uint32_t weight, cpu_max;
    tenant_share_get(d->conf, tenant, &weight, &cpu_max);
    json_object_set_new(quotas, "cpu_weight", json_integer(weight));
    json_object_set_new(quotas, "cpu_max", json_integer(cpu_max));
    json_object_set_new(j, "quotas", quotas);
    json_object_set_new(j, "quotas_overridden",
                        api_quota_overrides_json(tenant));
    json_object_set_new(j, "usage", usage);
}
