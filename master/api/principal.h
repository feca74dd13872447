/*
 * principal.h — who asks (a principal: a role within a tenant, or an
 * operator) and the one decision of what a principal may do: role ×
 * action × the tenant of the object concerned (DESIGN §8, issue 22).
 *
 * The gate (router.c) makes every request's principal before any route
 * runs: on the control socket from the peer's credentials (SO_PEERCRED:
 * root, the daemon's own user and the socket's group are operators;
 * local_principals maps other users; anyone else is refused), on TCP from
 * the bearer token (token_file's is an operator's; the tokens of
 * /v1/tokens have a tenant and a role: route_tokens.c).  Routes then ask
 * api_scope_refuse() once per object, and list only what
 * api_scope_sees() allows.
 *
 * Invariant: another tenant's object is answered exactly as an object
 * that does not exist (404), never 403, so existence does not leak; 403
 * means "this object is yours (or no object is concerned) but your role
 * may not do that".
 */
#ifndef WM_MASTER_API_PRINCIPAL_H
#define WM_MASTER_API_PRINCIPAL_H

#include <stdbool.h>

#include "master/core/roles.h"

struct api_req;
struct http_peer;

struct api_principal {
    enum role role;
    /* Its tenant; "" for an operator (every tenant). */
    char tenant[ROLES_TENANT_MAX + 1];
    /* Who, for the audit trail and messages: "operator (token_file)",
     * "token 3f2a.. (acme/reader)", "uid=1001 (acme/publisher)". */
    char name[128];
};

/* What a route does, from the least to the most powerful. */
enum api_action {
    API_READ,    /* see a tenant's objects, follow its topics */
    API_PUBLISH, /* publish to its topics, invoke its workers */
    API_MANAGE,  /* create, change, delete its workers */
    API_OPERATE, /* the daemon itself: tenants, tokens, recover, metrics,
                  * health detail, tenant=*, workmanager.* topics */
};

enum api_scope {
    API_SCOPE_ALLOW,
    API_SCOPE_HIDDEN,    /* another tenant's: answer 404 */
    API_SCOPE_FORBIDDEN, /* the role may not: answer 403 */
};

/* The decision.  tenant is the object's (NULL when no tenant's object is
 * concerned: a list, the engines).  The one place that says who may do
 * what. */
enum api_scope api_principal_decide(const struct api_principal *p,
                                    enum api_action a, const char *tenant);

/* An operator's principal named name. */
void api_principal_operator(struct api_principal *p, const char *name);

/* The principal of a control socket peer into *p: 0; else -1 with a
 * message for the 403 in why (an unknown local user, a malformed
 * local_principals). */
int api_principal_of_peer(const struct http_peer *peer, const char *map,
                          const char *socket_group, struct api_principal *p,
                          char *why, size_t whylen);

/* Whether rq's principal may do a to an object of tenant; when not,
 * answers 404 "no <what>" (another tenant's: as if it did not exist) or
 * 403 forbidden naming the role and the action, and returns true. */
bool api_scope_refuse(struct api_req *rq, enum api_action a, const char *tenant,
                      const char *what);

/* Whether rq's principal may create an object in tenant; when not,
 * answers 403 (a tenant's credential acts in its own tenant only) and
 * returns true. */
bool api_scope_create_refuse(struct api_req *rq, const char *tenant);

/* Whether rq's principal sees objects of tenant (lists). */
bool api_scope_sees(const struct api_req *rq, const char *tenant);

/* The tenant a request of rq's principal means when it names none: its
 * own for a tenant's principal, "default" for an operator. */
const char *api_scope_tenant(const struct api_req *rq, const char *named);

#endif /* WM_MASTER_API_PRINCIPAL_H */
