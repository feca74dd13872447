/*
 * quota.c — quotas per tenant (quota.h): limits and overrides, usage
 * counted from the registry, publish token buckets; refusals counted in
 * tenant_meter.h.
 *
 * Why sizes are counted and not kept: the registry is the truth of what a
 * tenant has; a counter beside it would have to follow every create,
 * delete, rollback and recovery, and one missed path would leak quota
 * forever.  Counting walks the registry (thousands of workers at most) on
 * a create or start, which are rare next to events.  The one thing kept
 * beside the registry is what admitted creates not yet in it reserve
 * (quota_reserve()), given back when they end either way.  Rates are the hot
 * path: two token buckets per tenant, refilled from the clock when taken.
 *
 * Invariants: a bucket never holds more than one second of its rate; a
 * take either takes from both buckets of a tenant or from neither; a
 * tenant's record exists only once something (an override, a bucket, a
 * refusal) needs it, and quota_tenant_forget() removes all of it.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "lib/timestamp.h"
#include "master/core/conf.h"
#include "master/core/tenant_meter.h"
#include "master/workers/quota.h"
#include "master/workers/registry.h"
#include "master/workers/worker.h"

static const char *const kind_names[QUOTA_N] = {
    [QUOTA_MAX_WORKERS] = "max_workers",
    [QUOTA_MAX_RUNNING_HOSTS] = "max_running_hosts",
    [QUOTA_MAX_MEMORY_MB] = "max_memory_mb",
    [QUOTA_MAX_CODE_BYTES] = "max_code_bytes",
    [QUOTA_PUBLISH_EVENTS_PER_S] = "publish_events_per_second",
    [QUOTA_PUBLISH_BYTES_PER_S] = "publish_bytes_per_second",
    [QUOTA_MAX_BACKLOG_EVENTS] = "max_backlog_events",
    [QUOTA_MAX_BACKLOG_BYTES] = "max_backlog_bytes",
    [QUOTA_MAX_STATE_KEYS] = "max_state_keys",
    [QUOTA_MAX_STATE_BYTES] = "max_state_bytes",
};

/* A token bucket: tokens in thousandths, so that a rate of 1/s refills
 * by whole thousandths each millisecond; may be negative (a debt). */
struct bucket {
    int64_t milli;
    int64_t at_ms; /* of the last refill; 0: never taken (full) */
};

struct tenant_quota {
    LIST_ENTRY(tenant_quota) link;
    char *name;
    int64_t override[QUOTA_N]; /* -1: the default */
    struct bucket events, bytes;
    int64_t reserved[QUOTA_N];       /* admitted creates not yet registered */
    int64_t state_keys, state_bytes; /* quota_state_add() */
};

static LIST_HEAD(, tenant_quota) tenants = LIST_HEAD_INITIALIZER(tenants);
static const struct conf *defaults;
static quota_backlog_fn backlog_fn;
static const void *backlog_arg;

const char *
quota_kind_name(enum quota_kind k)
{
    return k < QUOTA_N ? kind_names[k] : "?";
}

int
quota_kind_parse(const char *name, enum quota_kind *out)
{
    for (int k = 0; k < QUOTA_N; k++)
        if (strcmp(kind_names[k], name) == 0) {
            *out = (enum quota_kind)k;
            return 0;
        }
    return -1;
}

void
quota_backlog_source_set(quota_backlog_fn fn, const void *arg)
{
    backlog_fn = fn;
    backlog_arg = arg;
}

void
quota_defaults_set(const struct conf *c)
{
    defaults = c;
}

static struct tenant_quota *
find(const char *tenant)
{
    struct tenant_quota *t;
    LIST_FOREACH (t, &tenants, link)
        if (strcmp(t->name, tenant) == 0)
            return t;
    return NULL;
}

/* tenant's record, made when absent; NULL when out of memory. */
static struct tenant_quota *
get(const char *tenant)
{
    struct tenant_quota *t = find(tenant);
    if (t)
        return t;
    if ((t = calloc(1, sizeof *t)) == NULL ||
        (t->name = strdup(tenant)) == NULL) {
        free(t);
        return NULL;
    }
    for (int k = 0; k < QUOTA_N; k++)
        t->override[k] = -1;
    LIST_INSERT_HEAD(&tenants, t, link);
    return t;
}

int
quota_override_set(const char *tenant, enum quota_kind k, int64_t v)
{
    struct tenant_quota *t = v < 0 ? find(tenant) : get(tenant);
    if (t == NULL)
        return v < 0 ? 0 : -1;
    t->override[k] = v < 0 ? -1 : v;
    return 0;
}

int64_t
quota_override(const char *tenant, enum quota_kind k)
{
    const struct tenant_quota *t = find(tenant);
    return t ? t->override[k] : -1;
}

static uint64_t
default_of(enum quota_kind k)
{
    if (defaults == NULL)
        return 0;
    switch (k) {
    case QUOTA_MAX_WORKERS:
        return defaults->tenant_max_workers;
    case QUOTA_MAX_RUNNING_HOSTS:
        return defaults->tenant_max_running_hosts;
    case QUOTA_MAX_MEMORY_MB:
        return defaults->tenant_max_memory_mb;
    case QUOTA_MAX_CODE_BYTES:
        return defaults->tenant_max_code_bytes;
    case QUOTA_PUBLISH_EVENTS_PER_S:
        return defaults->tenant_publish_events_per_second;
    case QUOTA_PUBLISH_BYTES_PER_S:
        return defaults->tenant_publish_bytes_per_second;
    case QUOTA_MAX_BACKLOG_EVENTS:
        return defaults->tenant_max_backlog_events;
    case QUOTA_MAX_BACKLOG_BYTES:
        return defaults->tenant_max_backlog_bytes;
    case QUOTA_MAX_STATE_KEYS:
        return defaults->tenant_max_state_keys;
    case QUOTA_MAX_STATE_BYTES:
        return defaults->tenant_max_state_bytes;
    case QUOTA_N:
        break;
    }
    return 0;
}

uint64_t
quota_limit(const char *tenant, enum quota_kind k)
{
    int64_t o = quota_override(tenant, k);
    return o >= 0 ? (uint64_t)o : default_of(k);
}

void
quota_tenant_forget(const char *tenant)
{
    struct tenant_quota *t = find(tenant);
    if (t) {
        LIST_REMOVE(t, link);
        free(t->name);
        free(t);
    }
}

/* The code w runs now, in bytes. */
static uint64_t
code_bytes(const struct worker *w)
{
    const struct worker_version *v = worker_version_find(w, w->version);
    return v ? v->size : 0;
}

/* The tokens b holds at now_ms for a rate of `rate` a second, in
 * thousandths: refilled, capped at one second's worth. */
static int64_t
refilled(struct bucket *b, uint64_t rate, int64_t now_ms)
{
    int64_t cap = (int64_t)rate * 1000;
    if (b->at_ms == 0) {
        b->milli = cap;
    } else if (now_ms > b->at_ms) {
        int64_t gain = (now_ms - b->at_ms) * (int64_t)rate;
        b->milli = gain > cap - b->milli ? cap : b->milli + gain;
    }
    b->at_ms = now_ms;
    return b->milli;
}

uint64_t
quota_usage(const struct registry *r, const char *tenant, enum quota_kind k)
{
    uint64_t sum = 0;

    if (k == QUOTA_PUBLISH_EVENTS_PER_S || k == QUOTA_PUBLISH_BYTES_PER_S) {
        struct tenant_quota *t = find(tenant);
        uint64_t rate = quota_limit(tenant, k);
        if (t == NULL || rate == 0)
            return 0;
        struct bucket *b =
            k == QUOTA_PUBLISH_EVENTS_PER_S ? &t->events : &t->bytes;
        if (b->at_ms == 0)
            return 0;
        int64_t left = refilled(b, rate, timestamp_now_ms()) / 1000;
        return left >= (int64_t)rate ? 0 : rate - (uint64_t)left;
    }
    if (k == QUOTA_MAX_BACKLOG_EVENTS || k == QUOTA_MAX_BACKLOG_BYTES) {
        uint64_t events = 0, bytes = 0;
        if (backlog_fn)
            backlog_fn(backlog_arg, tenant, &events, &bytes);
        return k == QUOTA_MAX_BACKLOG_EVENTS ? events : bytes;
    }
    const struct tenant_quota *t = find(tenant);
    if (k == QUOTA_MAX_STATE_KEYS || k == QUOTA_MAX_STATE_BYTES) {
        int64_t v = t == NULL                   ? 0
                    : k == QUOTA_MAX_STATE_KEYS ? t->state_keys
                                                : t->state_bytes;
        return v > 0 ? (uint64_t)v : 0;
    }
    if (t && t->reserved[k] > 0)
        sum = (uint64_t)t->reserved[k];
    for (size_t i = 0; i < registry_count(r); i++) {
        const struct worker *w = registry_at(r, i);
        if (strcmp(w->tenant, tenant) != 0)
            continue;
        if (k == QUOTA_MAX_WORKERS)
            sum++;
        else if (k == QUOTA_MAX_RUNNING_HOSTS)
            sum += w->status == WORKER_RUNNING;
        else if (k == QUOTA_MAX_MEMORY_MB)
            sum += w->limits.memory_mb;
        else if (k == QUOTA_MAX_CODE_BYTES)
            sum += code_bytes(w);
    }
    return sum;
}

void
quota_reserve(const char *tenant, enum quota_kind k, int64_t delta)
{
    struct tenant_quota *t = get(tenant);
    if (t)
        t->reserved[k] += delta;
}

void
quota_refusal_note(const char *tenant, enum quota_kind k)
{
    tenant_meter_refusal(tenant, kind_names[k]);
}

int
quota_size_admit(const struct registry *r, const char *tenant,
                 enum quota_kind k, uint64_t add, uint64_t release, char *why,
                 size_t whylen)
{
    uint64_t limit = quota_limit(tenant, k);
    if (limit == 0)
        return 0;
    uint64_t used = quota_usage(r, tenant, k);
    uint64_t after = used - (release < used ? release : used) + add;
    if (after <= limit || add <= release)
        return 0;
    quota_refusal_note(tenant, k);
    bool backlog =
        k == QUOTA_MAX_BACKLOG_EVENTS || k == QUOTA_MAX_BACKLOG_BYTES;
    bool state = k == QUOTA_MAX_STATE_KEYS || k == QUOTA_MAX_STATE_BYTES;
    snprintf(why, whylen,
             "tenant %s is at its quota %s: limit %" PRIu64 ", usage %" PRIu64
             ", this request adds %" PRIu64 "; %s, or ask an operator to "
             "raise it (wmctl tenant set %s --quota %s=N)",
             tenant, kind_names[k], limit, used, add - release,
             backlog ? "nothing was accepted: retry once the backlog drains "
                       "(its workers settle their events)"
             : state ? "nothing was written: delete some state keys"
                     : "free some (delete or stop workers)",
             tenant, kind_names[k]);
    return -1;
}

int
quota_backlog_admit(const struct registry *r, const char *tenant,
                    uint64_t events, uint64_t bytes, enum quota_kind *which,
                    char *why, size_t whylen)
{
    *which = QUOTA_MAX_BACKLOG_EVENTS;
    if (quota_size_admit(r, tenant, *which, events, 0, why, whylen) != 0)
        return -1;
    *which = QUOTA_MAX_BACKLOG_BYTES;
    return quota_size_admit(r, tenant, *which, bytes, 0, why, whylen);
}

int
quota_state_admit(const struct registry *r, const char *tenant, uint64_t keys,
                  uint64_t bytes, uint64_t release, enum quota_kind *which,
                  char *why, size_t whylen)
{
    *which = QUOTA_MAX_STATE_KEYS;
    if (quota_size_admit(r, tenant, *which, keys, 0, why, whylen) != 0)
        return -1;
    *which = QUOTA_MAX_STATE_BYTES;
    return quota_size_admit(r, tenant, *which, bytes, release, why, whylen);
}

void
quota_state_add(const char *tenant, int64_t keys, int64_t bytes)
{
    struct tenant_quota *t = get(tenant);
    if (t) {
        t->state_keys += keys;
        t->state_bytes += bytes;
    }
}

void
quota_state_clear(void)
{
    struct tenant_quota *t;
    LIST_FOREACH (t, &tenants, link)
        t->state_keys = t->state_bytes = 0;
}

/* The seconds until b holds `need` tokens (thousandths) at `rate`. */
static uint64_t
wait_s(int64_t have, int64_t need, uint64_t rate)
{
    int64_t ms = (need - have + (int64_t)rate - 1) / (int64_t)rate;
    uint64_t s = (uint64_t)(ms + 999) / 1000;
    return s ? s : 1;
}

int
quota_rate_take(const char *tenant, uint64_t events, uint64_t bytes,
                int64_t now_ms, uint64_t *retry_after_s, enum quota_kind *which,
                char *why, size_t whylen)
{
    uint64_t erate = quota_limit(tenant, QUOTA_PUBLISH_EVENTS_PER_S);
    uint64_t brate = quota_limit(tenant, QUOTA_PUBLISH_BYTES_PER_S);
    struct tenant_quota *t;

    if (erate == 0 && brate == 0)
        return 0;
    if ((t = get(tenant)) == NULL)
        return 0; /* out of memory: an accepted publish beats a quota */
    uint64_t rate[2] = { erate, brate }, ask[2] = { events, bytes };
    struct bucket *b[2] = { &t->events, &t->bytes };
    int64_t need[2] = { 0, 0 };
    for (int i = 0; i < 2; i++) {
        if (rate[i] == 0)
            continue;
        int64_t cap = (int64_t)rate[i] * 1000;
        int64_t have = refilled(b[i], rate[i], now_ms);
        /* More than a second's worth passes on a full bucket. */
        need[i] = ask[i] * 1000 > (uint64_t)cap ? cap : (int64_t)ask[i] * 1000;
        if (have >= need[i])
            continue;
        enum quota_kind k =
            i == 0 ? QUOTA_PUBLISH_EVENTS_PER_S : QUOTA_PUBLISH_BYTES_PER_S;
        quota_refusal_note(tenant, k);
        *which = k;
        *retry_after_s = wait_s(have, need[i], rate[i]);
        snprintf(why, whylen,
                 "tenant %s is over its quota %s: limit %" PRIu64
                 " a second, this publish carries %" PRIu64
                 "; nothing was accepted, retry after %" PRIu64 " s",
                 tenant, kind_names[k], rate[i], ask[i], *retry_after_s);
        return -1;
    }
    for (int i = 0; i < 2; i++)
        if (rate[i])
            b[i]->milli -= (int64_t)ask[i] * 1000;
    return 0;
}

void
quota_free(void)
{
    struct tenant_quota *t;

    backlog_fn = NULL;
    backlog_arg = NULL;
    while ((t = LIST_FIRST(&tenants)) != NULL) {
        LIST_REMOVE(t, link);
        free(t->name);
        free(t);
    }
}
