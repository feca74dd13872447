/*
 * privdrop.h — the master's drop to an unprivileged user after start-up
 * (DESIGN §2, privilege separation; issue 7).
 *
 * A daemon started as root forks its launcher (which keeps root to start
 * and confine hosts), then gives its state and runtime directories to the
 * configured user and becomes that user for good: no capability in any
 * set, the bounding set emptied, no_new_privs, the control socket's group
 * as its only supplementary group.  Everything it parses from clients
 * (requests, code packages' metadata, events) is parsed after this.
 * A daemon started as another user runs as it and drops nothing.
 */
#ifndef WM_MASTER_PRIVDROP_H
#define WM_MASTER_PRIVDROP_H

#include <stddef.h>
#include <sys/types.h>

struct conf;

/* Who the master becomes. */
struct privdrop_user {
    uid_t uid;
    gid_t gid;
    char name[64]; /* for messages: the name, or the number given */
};

/*
 * The user of `spec` (the setting user): a name from the user database,
 * or uid[:gid] as numbers (gid defaults to the uid).  0, or -1 with a
 * message naming what to do.
 */
int privdrop_resolve(const char *spec, struct privdrop_user *u, char *err,
                     size_t errlen);

/*
 * When this process is root and c's user is not: gives c's state and
 * runtime directories (and what they hold) to the user, drops to it and
 * checks that it can reach both (each directory above them searchable by
 * it).  Returns 0 and *dropped (false: nothing to drop, as root with user
 * root, or not root); -1 with a message.
 */
int privdrop_master(const struct conf *c, int *dropped, char *err,
                    size_t errlen);

#endif /* WM_MASTER_PRIVDROP_H */
