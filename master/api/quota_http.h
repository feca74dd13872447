/*
 * quota_http.h — quotas per tenant on the admin API (quota_http.c): the
 * refusals the routes answer, and a tenant's quotas and usage as JSON.
 * The counting itself is master/workers/quota.h.
 */
#ifndef WM_MASTER_API_QUOTA_HTTP_H
#define WM_MASTER_API_QUOTA_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "master/workers/quota.h"

struct api_req;
struct daemon;

/* The members of a "quotas" object (a tenant's create or PATCH). */
extern const struct api_object api_quota_object;

/* Whether tenant's usage of size k may grow by add once release is given
 * back; when it may not, answers 403 quota_exceeded (members quota,
 * limit, usage) and returns true. */
bool api_quota_refuse_size(struct api_req *rq, const char *tenant,
                           enum quota_kind k, uint64_t add, uint64_t release);

/* Whether a publish of events carrying bytes fits tenant's backlog quotas
 * (max_backlog_events, then max_backlog_bytes); when it does not, answers
 * as api_quota_refuse_size() and returns true: nothing is accepted. */
bool api_quota_refuse_backlog(struct api_req *rq, const char *tenant,
                              uint64_t events, uint64_t bytes);

/* Takes a publish of events carrying bytes from tenant's buckets; when
 * they are short, answers 429 rate_limited with Retry-After (members
 * quota, limit, retry_after_s) and returns true: nothing is accepted. */
bool api_quota_refuse_rate(struct api_req *rq, const char *tenant,
                           uint64_t events, uint64_t bytes);

/* Checks a "quotas" object (members known, each value a non-negative
 * integer, or null for the default); 0, else answered 400 and -1. */
int api_quota_check(struct api_req *rq, json_t *quotas);

/* Applies a checked "quotas" object to tenant's overrides. */
void api_quota_apply(const char *tenant, json_t *quotas);

/* tenant's overrides as a "quotas" object to persist (new reference). */
json_t *api_quota_overrides_json(const char *tenant);

/* Sets tenant's "quotas" (each limit in force, 0 = unlimited, and which
 * are its own) and "usage" members on j. */
void api_quota_describe(struct daemon *d, const char *tenant, json_t *j);

#endif /* WM_MASTER_API_QUOTA_HTTP_H */
