/*
 * uidlock.c — the lock on a daemon's range of host uids (uidlock.h).
 *
 * One file per range in host_uid_lock_dir, named FIRST-LAST (the first
 * and the last uid, inclusive), held with flock(LOCK_EX) for the
 * daemon's life and holding a line that says who the daemon is (pid,
 * state_dir, control socket) for the message of the next one.  A daemon
 * first locks its own file (a daemon with the same range fails here),
 * then tries every other file whose range overlaps its own: a file it can
 * lock too belongs to a daemon that is gone; one it cannot, to a running
 * daemon, and start-up stops.  Two daemons starting at once with
 * overlapping ranges may both refuse; neither runs with the other's uids.
 *
 * Why flock and files rather than an abstract socket: the kernel drops a
 * flock when its last holder exits, however it exits, and a file can say
 * which daemon holds it.  Files are never removed (a daemon that unlinks
 * its file could race another that just opened it); they are a few bytes
 * each, and /run is emptied at boot.
 */
#include "config.h"

#include "master/core/uidlock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/errbuf.h"
#include "master/core/conf.h"

#define WHO_MAX 512

/* mkdir -p of an absolute path, 0755. */
static int
make_dirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);

    if (n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -1;
        if (c == '\0')
            return 0;
        *p = c;
    }
}

/* FIRST-LAST from a file name: true when name is one. */
static bool
range_parse(const char *name, unsigned long long *first,
            unsigned long long *last)
{
    int used = 0;

    return sscanf(name, "%llu-%llu%n", first, last, &used) == 2 &&
           name[used] == '\0' && *first <= *last;
}

/* The line a holder wrote (who it is), or "an unknown daemon". */
static void
who_read(int fd, char *who, size_t len)
{
    ssize_t n = pread(fd, who, len - 1, 0);

    if (n <= 0) {
        snprintf(who, len, "a daemon that did not say who it is");
        return;
    }
    who[n] = '\0';
    who[strcspn(who, "\n")] = '\0';
}

/* Whether a daemon holds the lock of dir/name; its line into who. */
static bool
held(const char *dir, const char *name, char *who, size_t len)
{
    char path[4096 + 256];
    int fd;
    bool busy;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false;
    busy = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    if (busy)
        who_read(fd, who, len);
    (void)close(fd);
    return busy;
}

static int
refuse(const struct conf *c, unsigned long long first, unsigned long long last,
       const char *name, const char *who, char *err, size_t errlen)
{
    return errbuf_set(err, errlen,
                      "host_uid_base %u with host_uid_count %u (uids "
                      "%llu-%llu) overlaps the uids %s of another running "
                      "workmanagerd (%s; lock %s/%s): its hosts would run "
                      "as the same users; give each daemon on this machine "
                      "a range of its own (host_uid_base, host_uid_count)",
                      c->host_uid_base, c->host_uid_count, first, last, name,
                      who, c->host_uid_lock_dir, name);
}

int
uidlock_acquire(const struct conf *c, char *err, size_t errlen)
{
    unsigned long long first = c->host_uid_base;
    unsigned long long last = first + c->host_uid_count - 1;
    char name[64], path[4096 + 64], who[WHO_MAX];
    DIR *d = NULL;
    struct dirent *e;
    int fd = -1;

    if (c->host_uid_base == 0 || geteuid() != 0)
        return -2;
    snprintf(name, sizeof name, "%llu-%llu", first, last);
    snprintf(path, sizeof path, "%s/%s", c->host_uid_lock_dir, name);
    if (make_dirs(c->host_uid_lock_dir) < 0)
        goto sys;
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        goto sys;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK)
            goto sys;
        who_read(fd, who, sizeof who);
        refuse(c, first, last, name, who, err, errlen);
        goto fail;
    }
    int n =
        snprintf(who, sizeof who, "pid %ld, state_dir %s, control_socket %s\n",
                 (long)getpid(), c->state_dir, c->control_socket);
    if (ftruncate(fd, 0) < 0 ||
        pwrite(fd, who, (size_t)n < sizeof who ? (size_t)n : sizeof who - 1,
               0) < 0)
        goto sys;
    d = opendir(c->host_uid_lock_dir);
    if (d == NULL)
        goto sys;
    while ((e = readdir(d)) != NULL) {
        unsigned long long f, l;

        if (strcmp(e->d_name, name) == 0 || !range_parse(e->d_name, &f, &l) ||
            l < first || f > last)
            continue;
        if (held(c->host_uid_lock_dir, e->d_name, who, sizeof who)) {
            refuse(c, first, last, e->d_name, who, err, errlen);
            goto fail;
        }
    }
    closedir(d);
    return fd;
sys:
    errbuf_set(err, errlen, "host_uid_lock_dir %s: %s: %s",
               c->host_uid_lock_dir, path, strerror(errno));
fail:
    if (d)
        closedir(d);
    if (fd >= 0)
        (void)close(fd);
    return -1;
}
