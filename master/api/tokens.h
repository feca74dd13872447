/*
 * tokens.h — API tokens scoped to a tenant and a role (route_tokens.c),
 * and the tenants they belong to (route_tenants.c): what the gate and
 * the other routes need of them.
 */
#ifndef WM_MASTER_API_TOKENS_H
#define WM_MASTER_API_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct api_principal;
struct api_req;
struct daemon;
struct store;

/* Where the tokens and the tenants live in the store. */
#define API_TOKENS_PREFIX "workmanager/tokens/"
#define API_TENANTS_PREFIX "workmanager/tenants/"

/* Loads every token of the store (at start, after the store opened): 0,
 * or -1 with a message.  An unreadable record is logged and skipped. */
int api_tokens_load(struct store *st, char *err, size_t errlen);
/* Forgets the table (at exit). */
void api_tokens_free(void);
/* The token record key as the store's watch brings it (value NULL: it was
 * deleted; remote_workers.c): the table follows, one entry per id, and a
 * token revoked since start never comes back. */
void api_tokens_remote(const char *key, const uint8_t *value, size_t len);

enum api_token_match {
    API_TOKEN_UNKNOWN, /* no such token (or revoked) */
    API_TOKEN_EXPIRED,
    API_TOKEN_OK, /* *p is its principal */
};
/* The principal of the bearer token secret at now_ms. */
enum api_token_match api_tokens_match(const char *secret, int64_t now_ms,
                                      struct api_principal *p);
/* Revokes every token of tenant (its deletion); returns how many. */
unsigned api_tokens_revoke_tenant(struct daemon *d, const char *tenant);
/* /v1/tokens[/{id}]: operators only. */
void api_tokens_route(struct api_req *rq);

/* Loads every tenant of the store (at start): 0, or -1 with a message. */
int api_tenants_load(struct store *st, char *err, size_t errlen);
void api_tenants_free(void);
/* The same for the tenant record key: its entry replaced or removed. */
void api_tenants_remote(const char *key, const uint8_t *value, size_t len);
/* Whether tenant exists: `default` always does. */
bool api_tenants_exists(struct daemon *d, const char *tenant);
/* Whether tenant is suspended (its publishes are refused). */
bool api_tenants_suspended(const char *tenant);
/* /v1/tenants[/{name}[/{action}]]: operators only. */
void api_tenants_route(struct api_req *rq);

#endif /* WM_MASTER_API_TOKENS_H */
