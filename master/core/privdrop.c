/*
 * privdrop.c — the master's drop to an unprivileged user (privdrop.h).
 */
#include "config.h"

#include "master/core/privdrop.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "master/core/conf.h"
#include "master/core/log.h"
#include "sandbox/creds.h"

/* A whole number below (id_t)-1 in s: 0 and *v, else -1. */
static int
parse_id(const char *s, size_t len, unsigned long *v)
{
    char buf[16], *end;

    if (len == 0 || len >= sizeof buf || s[0] < '0' || s[0] > '9')
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    *v = strtoul(buf, &end, 10);
    return *end == '\0' && errno == 0 && *v < (unsigned long)(uid_t)-1 ? 0 : -1;
}

int
privdrop_resolve(const char *spec, struct privdrop_user *u, char *err,
                 size_t errlen)
{
    unsigned long uid, gid;
    const char *colon = strchr(spec, ':');
    struct passwd *pw;

    snprintf(u->name, sizeof u->name, "%s", spec);
    if (parse_id(spec, colon ? (size_t)(colon - spec) : strlen(spec), &uid) ==
        0) {
        gid = uid;
        if (colon && parse_id(colon + 1, strlen(colon + 1), &gid) != 0) {
            snprintf(err, errlen,
                     "user %s: the group after ':' must be a "
                     "number",
                     spec);
            return -1;
        }
        u->uid = (uid_t)uid;
        u->gid = (gid_t)gid;
        return 0;
    }
    errno = 0;
    pw = colon ? NULL : getpwnam(spec);
    if (pw == NULL) {
        snprintf(err, errlen,
                 "user %s (workmanager.conf(5) `user`, the master's after "
                 "start-up) does not exist: create it (useradd --system "
                 "--no-create-home --shell /usr/sbin/nologin %s), or set "
                 "user to another name or to uid[:gid]",
                 spec, spec);
        return -1;
    }
    u->uid = pw->pw_uid;
    u->gid = pw->pw_gid;
    return 0;
}

/* The user every entry under the tree being given away gets (nftw has no
 * argument for its callback). */
static uid_t give_uid;
static gid_t give_gid;
static unsigned given;

static int
give_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
    (void)type;
    (void)f;
    /* The control socket keeps its group (control_socket_group): the
     * master need not own it to remove it at exit. */
    if (S_ISSOCK(st->st_mode) ||
        (st->st_uid == give_uid && st->st_gid == give_gid))
        return 0;
    if (lchown(path, give_uid, give_gid) != 0)
        return errno ? errno : EIO;
    given++;
    return 0;
}

/* Gives dir and what it holds (on its own file system) to u. */
static int
give_tree(const char *dir, const struct privdrop_user *u, char *err,
          size_t errlen)
{
    int rc;

    if (strcmp(dir, "/") == 0) {
        snprintf(err, errlen, "refusing to give / to user %s", u->name);
        return -1;
    }
    give_uid = u->uid;
    give_gid = u->gid;
    given = 0;
    rc = nftw(dir, give_one, 32, FTW_PHYS | FTW_MOUNT);
    if (rc != 0) {
        snprintf(err, errlen, "giving %s to user %s: %s", dir, u->name,
                 strerror(rc > 0 ? rc : errno));
        return -1;
    }
    if (given)
        log_info("gave %u files of %s to user %s", given, dir, u->name);
    return 0;
}

/* After the drop: dir is reachable and writable by this process. */
static int
reachable(const char *key, const char *dir, const struct privdrop_user *u,
          char *err, size_t errlen)
{
    if (access(dir, R_OK | W_OK | X_OK) == 0)
        return 0;
    snprintf(err, errlen,
             "%s %s is not reachable by user %s (uid %u), the master's after "
             "start-up: %s; every directory above it must be searchable (x) "
             "by that user",
             key, dir, u->name, (unsigned)u->uid, strerror(errno));
    return -1;
}

/* The control socket's group, as a supplementary group: the master sets
 * it on the socket it binds after the drop.  0 with *n 0 or 1, or -1. */
static int
socket_group(const struct conf *c, gid_t *g, size_t *n, char *err,
             size_t errlen)
{
    const char *name = c->control_socket_group;
    unsigned long v;

    *n = 0;
    if (name == NULL || *name == '\0')
        return 0;
    struct group *gr = getgrnam(name);
    if (gr) {
        v = gr->gr_gid;
    } else if (parse_id(name, strlen(name), &v) != 0) {
        snprintf(err, errlen, "control_socket_group %s: no such group", name);
        return -1;
    }
    *g = (gid_t)v;
    *n = 1;
    return 0;
}

/* Threads of this process (from /proc/self/task), or 0 when unknown. */
static unsigned
threads(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *de;
    unsigned n = 0;

    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

int
privdrop_master(const struct conf *c, int *dropped, char *err, size_t errlen)
{
    struct privdrop_user u;
    gid_t group;
    size_t ngroups;

    *dropped = 0;
    if (geteuid() != 0)
        return 0;
    if (privdrop_resolve(c->user, &u, err, errlen) != 0)
        return -1;
    if (u.uid == 0)
        return 0;
    if (socket_group(c, &group, &ngroups, err, errlen) != 0)
        return -1;
    /* The drop's system calls change the calling thread only (as the
     * spawn's must, between fork and exec): there must be no other. */
    unsigned nthreads = threads();
    if (nthreads > 1) {
        snprintf(err, errlen,
                 "cannot drop to user %s: the master has %u threads already",
                 u.name, nthreads);
        return -1;
    }
    if (give_tree(c->state_dir, &u, err, errlen) != 0 ||
        give_tree(c->runtime_dir, &u, err, errlen) != 0)
        return -1;
    if (sandbox_creds_drop_groups(u.uid, u.gid, &group, ngroups) != 0 ||
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        snprintf(err, errlen, "cannot become user %s (uid %u, gid %u): %s",
                 u.name, (unsigned)u.uid, (unsigned)u.gid, strerror(errno));
        return -1;
    }
    /* Never back: a saved root would undo all of it. */
    if (setuid(0) == 0 || seteuid(0) == 0) {
        snprintf(err, errlen, "became user %s but could become root again",
                 u.name);
        return -1;
    }
    if (reachable("state_dir", c->state_dir, &u, err, errlen) != 0 ||
        reachable("runtime_dir", c->runtime_dir, &u, err, errlen) != 0)
        return -1;
    *dropped = 1;
    return 0;
}
