/*
 * principal.c — principals and the decision of what each may do
 * (principal.h).
 *
 * Why one function: a check forgotten in one route is a leak, and a rule
 * spread over many routes drifts.  Routes name their action and the
 * object's tenant; api_principal_decide() alone weighs role against
 * action and tenant against tenant, and the matrix test
 * (tests/integration/test_tenants_scope.py) holds every route to it.
 */
#include "config.h"

#include "master/api/principal.h"

#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/errbuf.h"
#include "master/api/api.h"
#include "master/api/http_server.h"

/* The least role that may do a within its tenant. */
static bool
role_may(enum role r, enum api_action a)
{
    switch (a) {
    case API_READ:
        return r == ROLE_READER || r >= ROLE_TENANT_ADMIN;
    case API_PUBLISH:
        return r >= ROLE_PUBLISHER;
    case API_MANAGE:
        return r >= ROLE_TENANT_ADMIN;
    case API_OPERATE:
        return r == ROLE_OPERATOR;
    }
    return false;
}

enum api_scope
api_principal_decide(const struct api_principal *p, enum api_action a,
                     const char *tenant)
{
    if (p->role == ROLE_OPERATOR)
        return API_SCOPE_ALLOW;
    /* Another tenant's object first: its existence must not show. */
    if (tenant && strcmp(tenant, p->tenant) != 0)
        return API_SCOPE_HIDDEN;
    return role_may(p->role, a) ? API_SCOPE_ALLOW : API_SCOPE_FORBIDDEN;
}

void
api_principal_operator(struct api_principal *p, const char *name)
{
    p->role = ROLE_OPERATOR;
    p->tenant[0] = '\0';
    /* "operator (name)", cut to fit; by hand: every TCP request comes
     * here (no printf on the hot path, issue 24). */
    static const char pre[] = "operator (";
    size_t n = strlen(name), room = sizeof p->name - sizeof pre - 1;

    if (n > room)
        n = room;
    memcpy(p->name, pre, sizeof pre - 1);
    memcpy(p->name + sizeof pre - 1, name, n);
    p->name[sizeof pre - 1 + n] = ')';
    p->name[sizeof pre + n] = '\0';
}

/* Whether uid belongs to gid, as its primary group or a supplementary
 * one (the socket's group grants through either). */
static bool
user_in_group(uid_t uid, gid_t peer_gid, gid_t gid)
{
    if (peer_gid == gid)
        return true;
    struct passwd *pw = getpwuid(uid);
    if (pw == NULL)
        return false;
    gid_t groups[256];
    int n = (int)(sizeof groups / sizeof groups[0]);
    if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) < 0)
        return false;
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return true;
    return false;
}

/* The socket's group: control_socket_group (a name or a gid), else the
 * daemon's. */
static gid_t
socket_gid(const char *group)
{
    if (group == NULL || *group == '\0')
        return getegid();
    struct group *g = getgrnam(group);
    char *end;
    unsigned long gid = g ? g->gr_gid : strtoul(group, &end, 10);
    return g || *end == '\0' ? (gid_t)gid : (gid_t)-1;
}

int
api_principal_of_peer(const struct http_peer *peer, const char *map,
                      const char *socket_group, struct api_principal *p,
                      char *why, size_t whylen)
{
    char who[40];
    struct roles_local e;

    if (!peer->cred) {
        return errbuf_set(why, whylen,
                          "the control socket could not read this client's "
                          "credentials (SO_PEERCRED)");
    }
    snprintf(who, sizeof who, "uid=%u", (unsigned)peer->uid);
    if (peer->uid == 0 || peer->uid == geteuid()) {
        api_principal_operator(p, who);
        return 0;
    }
    int found = roles_local_find(map, peer->uid, &e, why, whylen);
    if (found < 0)
        return -1;
    if (found) {
        p->role = e.role;
        snprintf(p->tenant, sizeof p->tenant, "%s",
                 e.role == ROLE_OPERATOR ? "" : e.tenant);
        snprintf(p->name, sizeof p->name, "%.40s (%.64s/%.12s)", who, e.tenant,
                 roles_name(e.role));
        return 0;
    }
    gid_t gid = socket_gid(socket_group);
    if (gid != (gid_t)-1 && user_in_group(peer->uid, peer->gid, gid)) {
        api_principal_operator(p, who);
        return 0;
    }
    return errbuf_set(why, whylen,
                      "local user uid=%u is not allowed on the control "
                      "socket: map it in local_principals "
                      "(uid:%u=<tenant>/<role>) or add it to the socket's "
                      "group",
                      (unsigned)peer->uid, (unsigned)peer->uid);
}

static const char *
action_text(enum api_action a)
{
    switch (a) {
    case API_READ:
        return "read";
    case API_PUBLISH:
        return "publish or invoke";
    case API_MANAGE:
        return "manage workers";
    case API_OPERATE:
        return "operate the daemon";
    }
    return "?";
}

bool
api_scope_refuse(struct api_req *rq, enum api_action a, const char *tenant,
                 const char *what)
{
    const struct api_principal *p = &rq->principal;

    switch (api_principal_decide(p, a, tenant)) {
    case API_SCOPE_ALLOW:
        return false;
    case API_SCOPE_HIDDEN:
        api_error(rq, 404, "not_found", "no %s", what);
        return true;
    case API_SCOPE_FORBIDDEN:
        break;
    }
    api_error(rq, 403, "forbidden",
              "the %s role of tenant %s may not %s here (%s %s); ask an "
              "operator for a credential with that right",
              roles_name(p->role), p->tenant, action_text(a), rq->method,
              rq->path);
    return true;
}

bool
api_scope_sees(const struct api_req *rq, const char *tenant)
{
    return api_principal_decide(&rq->principal, API_READ, tenant) ==
           API_SCOPE_ALLOW;
}

const char *
api_scope_tenant(const struct api_req *rq, const char *named)
{
    if (named && *named)
        return named;
    return rq->principal.role == ROLE_OPERATOR ? "default"
                                               : rq->principal.tenant;
}

bool
api_scope_create_refuse(struct api_req *rq, const char *tenant)
{
    const struct api_principal *p = &rq->principal;

    if (api_principal_decide(p, API_MANAGE, tenant) == API_SCOPE_ALLOW)
        return false;
    if (strcmp(tenant, p->tenant) != 0)
        api_error(rq, 403, "forbidden",
                  "a credential of tenant %s acts in tenant %s only", p->tenant,
                  p->tenant);
    else
        (void)api_scope_refuse(rq, API_MANAGE, tenant, "tenant");
    return true;
}
