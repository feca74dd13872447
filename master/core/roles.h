/*
 * roles.h — the roles of the admin API's principals and the map of local
 * users to a tenant and a role (the `local_principals` key).
 *
 * Why here, in master/core/: the configuration checks the map when it
 * reads it (conf_check_local_principals), and the API resolves control
 * socket peers with the same parser; one parser, two callers.
 *
 * The map's syntax: entries separated by commas or blanks, each
 * `uid:<N>=<tenant>/<role>` or `user:<name>=<tenant>/<role>`; a tenant is
 * [a-z0-9][a-z0-9_.-]{0,63}, a role one of roles_name()'s words.
 */
#ifndef WM_MASTER_CORE_ROLES_H
#define WM_MASTER_CORE_ROLES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Ordered by power; each role may do what the ones below it may, within
 * its tenant (the operator: everything, every tenant). */
enum role {
    ROLE_READER = 0,   /* read and follow */
    ROLE_PUBLISHER,    /* publish and invoke */
    ROLE_TENANT_ADMIN, /* its workers and topics */
    ROLE_OPERATOR,     /* everything */
};

/* The longest tenant name, without its NUL. */
#define ROLES_TENANT_MAX 64

/* "reader", "publisher", "tenant-admin", "operator". */
const char *roles_name(enum role r);
/* The role named s into *r: 0, or -1 for an unknown word. */
int roles_parse(const char *s, enum role *r);
/* Whether s is a tenant name: [a-z0-9][a-z0-9_.-]{0,63}. */
bool roles_tenant_valid(const char *s);

/* One entry of the local map. */
struct roles_local {
    uid_t uid;
    enum role role;
    char tenant[ROLES_TENANT_MAX + 1];
};

/*
 * Finds uid in the map text (local_principals' value) into *out: 1 when
 * found, 0 when not, -1 with a message in why when the text is malformed
 * (then nothing is found).  `user:` names are looked up with getpwnam().
 */
int roles_local_find(const char *map, uid_t uid, struct roles_local *out,
                     char *why, size_t whylen);

/* The configuration's check of local_principals (conf.h: struct
 * conf_key's check): 0 when every entry parses. */
int conf_check_local_principals(const char *v, char *why, size_t whylen);

#endif /* WM_MASTER_CORE_ROLES_H */
