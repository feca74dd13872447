/*
 * quota.h — quotas per tenant (issue 22): the limits, their overrides per
 * tenant, the usage they are held against, the publish token buckets and
 * the refusals counted for /metrics.
 *
 * One module holds every tenant's counters so that the API (refusals,
 * GET /v1/tenants/{name}), /metrics and the dispatcher's fair shares read
 * one truth.  Sizes (workers, running workers, memory, code) are counted
 * from the registry when asked, never kept beside it, so a usage cannot
 * drift from what exists: deleting a worker releases its share at once.
 * Rates are token buckets, one per tenant and rate, each holding at most
 * one second of its rate; a publish takes from both buckets or from none.
 * Backlogs (the events the broker holds for a tenant, not yet settled,
 * and their bytes) are the broker's counts, read through the source the
 * daemon sets (quota_backlog_source_set()): the broker keeps them.
 * State (the keys a tenant's workers hold through the gateway's
 * workmanager.state, and the bytes of their values) is counted here: the
 * gateway adds what each write changes (quota_state_add()) and counts it
 * all from the store once at start-up.
 *
 * A limit of 0 means unlimited.  A tenant's limit is its override when it
 * has one, else the daemon's default (the tenant_* keys of
 * workmanager.conf(5)).  The event loop is the only thread: no locks.
 */
#ifndef WM_MASTER_QUOTA_H
#define WM_MASTER_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct conf;
struct registry;

enum quota_kind {
    QUOTA_MAX_WORKERS,          /* workers the tenant has */
    QUOTA_MAX_RUNNING_HOSTS,    /* of them, those meant to run */
    QUOTA_MAX_MEMORY_MB,        /* sum of their limits.memory_mb */
    QUOTA_MAX_CODE_BYTES,       /* sum of their code in use */
    QUOTA_PUBLISH_EVENTS_PER_S, /* token bucket: events published */
    QUOTA_PUBLISH_BYTES_PER_S,  /* token bucket: their bytes */
    QUOTA_MAX_BACKLOG_EVENTS,   /* events held by the broker, unsettled */
    QUOTA_MAX_BACKLOG_BYTES,    /* their bytes */
    QUOTA_MAX_STATE_KEYS,       /* workmanager.state keys of its workers */
    QUOTA_MAX_STATE_BYTES,      /* the bytes of their values */
    QUOTA_N
};

/* The quota's name in the API ("max_workers"); its configuration key is
 * "tenant_" followed by it. */
const char *quota_kind_name(enum quota_kind k);

/* The kind named name; -1 when no quota is so named. */
int quota_kind_parse(const char *name, enum quota_kind *out);

/* Where the backlog kinds' usage comes from: fn(arg, tenant, &events,
 * &bytes) says what the broker holds for tenant (broker_tenant_backlog()).
 * Until set (and after quota_free()), backlogs count 0. */
typedef void (*quota_backlog_fn)(const void *arg, const char *tenant,
                                 uint64_t *events, uint64_t *bytes);
void quota_backlog_source_set(quota_backlog_fn fn, const void *arg);

/* Takes the defaults of c (kept, not copied: c outlives the module). */
void quota_defaults_set(const struct conf *c);

/* Sets tenant's override of k to v (0 = unlimited); v < 0 removes it (the
 * default applies again).  0, or -1 when out of memory. */
int quota_override_set(const char *tenant, enum quota_kind k, int64_t v);

/* tenant's override of k, or -1 when it has none. */
int64_t quota_override(const char *tenant, enum quota_kind k);

/* The limit of k that applies to tenant (0 = unlimited). */
uint64_t quota_limit(const char *tenant, enum quota_kind k);

/* Forgets tenant's overrides, buckets and refusals (the tenant is
 * deleted). */
void quota_tenant_forget(const char *tenant);

/* The usage of k by tenant now: sizes counted in r; for a rate, the
 * tokens spent in the current second (its limit minus what is left). */
uint64_t quota_usage(const struct registry *r, const char *tenant,
                     enum quota_kind k);

/* Whether tenant may grow its usage of size k by add once release is
 * given back (a reload gives back the old code): 0 when it may, else -1
 * with a message naming the quota, its limit and the usage in why, and
 * the refusal counted. */
int quota_size_admit(const struct registry *r, const char *tenant,
                     enum quota_kind k, uint64_t add, uint64_t release,
                     char *why, size_t whylen);

/* Whether tenant's backlog may grow by events events of bytes bytes (a
 * publish, before anything of it is accepted): 0 when it may (or the
 * limits are 0), else -1 with the quota that refused in *which, a message
 * naming it, its limit and the usage in why (nothing accepted: retry once
 * the backlog drains), and the refusal counted.  Events first. */
int quota_backlog_admit(const struct registry *r, const char *tenant,
                        uint64_t events, uint64_t bytes, enum quota_kind *which,
                        char *why, size_t whylen);

/* Whether tenant's state may grow by keys keys and bytes bytes once
 * release bytes are given back (a put over an existing key gives back
 * its old value): as quota_backlog_admit(), keys first, with a message
 * saying to delete some keys. */
int quota_state_admit(const struct registry *r, const char *tenant,
                      uint64_t keys, uint64_t bytes, uint64_t release,
                      enum quota_kind *which, char *why, size_t whylen);

/* Adds keys and bytes (negative: gives back) to tenant's state usage. */
void quota_state_add(const char *tenant, int64_t keys, int64_t bytes);

/* Sets every tenant's state usage to 0 (before counting it again from
 * the store). */
void quota_state_clear(void);

/* Takes events and bytes from tenant's publish buckets at now_ms: 0 when
 * both had enough, else -1, nothing taken, the refusal counted, the
 * quota that refused in *which, the
 * seconds after which the publish can pass in *retry_after_s (rounded up,
 * at least 1) and a message naming the quota in why.  A publish larger
 * than one second's tokens passes when the bucket is full and leaves it
 * in debt, so every publish can pass eventually. */
int quota_rate_take(const char *tenant, uint64_t events, uint64_t bytes,
                    int64_t now_ms, uint64_t *retry_after_s,
                    enum quota_kind *which, char *why, size_t whylen);

/* Adds delta (negative: gives back) to what tenant has reserved of size
 * k: a create admitted but not yet in the registry, so that concurrent
 * creates cannot all pass one quota.  quota_usage() counts it. */
void quota_reserve(const char *tenant, enum quota_kind k, int64_t delta);

/* Counts a refusal of k that tenant met elsewhere (tenant_meter.h: the
 * series workmanager_tenant_quota_refusals_total). */
void quota_refusal_note(const char *tenant, enum quota_kind k);

/* Frees everything (the daemon's exit). */
void quota_free(void);

#endif /* WM_MASTER_QUOTA_H */
