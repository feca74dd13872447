/*
 * roles.c — the roles of principals and the local users' map (roles.h).
 *
 * The map is parsed each time it is asked (a control socket connection is
 * rare next to its requests, and the text is short): no state to keep in
 * step with a SIGHUP.  Invariant: a malformed map grants nothing.
 */
#include "config.h"

#include "master/core/roles.h"

#include <ctype.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/errbuf.h"
#include "lib/name.h"

static const char *const names[] = {
    [ROLE_READER] = "reader",
    [ROLE_PUBLISHER] = "publisher",
    [ROLE_TENANT_ADMIN] = "tenant-admin",
    [ROLE_OPERATOR] = "operator",
};

const char *
roles_name(enum role r)
{
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

int
roles_parse(const char *s, enum role *r)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *r = (enum role)i;
            return 0;
        }
    return -1;
}

bool
roles_tenant_valid(const char *s)
{
    return s && name_lower_valid(s, ROLES_TENANT_MAX);
}

/* One entry "uid:N=T/R" or "user:NAME=T/R" into *e. */
static int
entry_parse(const char *s, struct roles_local *e, char *why, size_t whylen)
{
    char buf[256], *eq, *slash, *end;

    if (strlen(s) >= sizeof buf)
        return errbuf_set(why, whylen, "entry '%.40s...' is too long", s);
    snprintf(buf, sizeof buf, "%s", s);
    eq = strchr(buf, '=');
    slash = eq ? strchr(eq, '/') : NULL;
    if (eq == NULL || slash == NULL) {
        return errbuf_set(why, whylen,
                          "entry '%s' is not uid:<N>=<tenant>/<role> or "
                          "user:<name>=<tenant>/<role>",
                          s);
    }
    *eq = *slash = '\0';
    if (strncmp(buf, "uid:", 4) == 0) {
        unsigned long u = strtoul(buf + 4, &end, 10);
        if (buf[4] == '\0' || *end || !isdigit((unsigned char)buf[4]) ||
            u >= (uid_t)-1)
            return errbuf_set(why, whylen, "entry '%s': bad uid", s);
        e->uid = (uid_t)u;
    } else if (strncmp(buf, "user:", 5) == 0) {
        struct passwd *pw = getpwnam(buf + 5);
        if (pw == NULL)
            return errbuf_set(why, whylen, "entry '%s': no such user", s);
        e->uid = pw->pw_uid;
    } else {
        return errbuf_set(why, whylen,
                          "entry '%s' must begin with uid: or user:", s);
    }
    if (!roles_tenant_valid(eq + 1)) {
        return errbuf_set(why, whylen,
                          "entry '%s': the tenant must match "
                          "[a-z0-9][a-z0-9_.-]{0,63}",
                          s);
    }
    if (roles_parse(slash + 1, &e->role) != 0) {
        return errbuf_set(why, whylen,
                          "entry '%s': the role must be reader, publisher, "
                          "tenant-admin or operator",
                          s);
    }
    snprintf(e->tenant, sizeof e->tenant, "%s", eq + 1);
    return 0;
}

int
roles_local_find(const char *map, uid_t uid, struct roles_local *out, char *why,
                 size_t whylen)
{
    const char *p = map ? map : "";
    int found = 0;

    while (*p) {
        size_t n = strcspn(p, ", \t\n");
        if (n > 0) {
            char entry[256];
            struct roles_local e;
            snprintf(entry, sizeof entry, "%.*s", (int)n, p);
            if (entry_parse(entry, &e, why, whylen) != 0)
                return -1;
            if (!found && e.uid == uid) {
                *out = e;
                found = 1;
            }
        }
        p += n;
        p += strspn(p, ", \t\n");
    }
    return found;
}

int
conf_check_local_principals(const char *v, char *why, size_t whylen)
{
    struct roles_local e;
    return roles_local_find(v, (uid_t)-1, &e, why, whylen) < 0 ? -1 : 0;
}
