/*
 * netpool.c — network namespaces made ahead (netpool.h).
 *
 * One is made by the calling process itself: unshare(CLONE_NEWNET), its
 * /proc/self/ns/net opened, then setns() back into the namespace it was
 * in (kept open for that).  Sockets it holds are not moved: a socket
 * stays in the namespace it was made in.  The caller must be
 * single-threaded (the launcher is): unshare() acts on the calling thread
 * only.
 */
#include "config.h"

#include "sandbox/netpool.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

static int pool[SANDBOX_NETPOOL_MAX];
static int npool;

int
sandbox_netns_make(void)
{
    int self, fd, saved;

    self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0)
        return -1;
    if (unshare(CLONE_NEWNET) < 0) {
        saved = errno;
        close(self);
        errno = saved;
        return -1;
    }
    fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    saved = errno;
    /* Back where it was.  Should that fail, the process stays in the new
     * namespace (the launcher needs no network: its sockets are in the
     * old one), which then is no host's. */
    if (setns(self, CLONE_NEWNET) < 0) {
        saved = errno;
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    close(self);
    errno = saved;
    return fd;
}

bool
sandbox_netpool_fill(void)
{
    while (npool < SANDBOX_NETPOOL_MAX) {
        int fd = sandbox_netns_make();
        if (fd < 0)
            return false;
        pool[npool++] = fd;
    }
    return true;
}

int
sandbox_netpool_take(void)
{
    return npool > 0 ? pool[--npool] : -1;
}

void
sandbox_netpool_clear(void)
{
    while (npool > 0)
        close(pool[--npool]);
}
