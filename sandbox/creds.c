/*
 * creds.c — a host's user, groups, capabilities and rlimits (creds.h).
 *
 * Raw system calls where glibc's wrappers are not async-signal-safe:
 * setgroups, setresgid and setresuid in glibc broadcast the change to
 * every thread (a signal-based protocol) — harmless in a single-threaded
 * child, but the capset of the inheritable set has no wrapper at all.
 */
#include "config.h"

#include "sandbox/creds.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

int
sandbox_cap_last(void)
{
    char buf[16];
    int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
    ssize_t n;
    int v = 0;

    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof buf - 1);
    (void)close(fd);
    if (n <= 0)
        return -1;
    for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
        v = v * 10 + (buf[i] - '0');
    return v;
}

int
sandbox_creds_drop(uid_t uid, gid_t gid, int cap_last)
{
    return sandbox_creds_drop_groups(uid, gid, NULL, 0, cap_last);
}

int
sandbox_creds_drop_groups(uid_t uid, gid_t gid, const gid_t *groups,
                          size_t ngroups, int cap_last)
{
    struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = { 0 };

    /* The bounding set first: dropping needs CAP_SETPCAP, gone below. */
    for (int cap = 0; cap <= (cap_last < 0 ? 63 : cap_last); cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
        errno != EINVAL)
        return -1;
    if (syscall(SYS_setgroups, ngroups, groups) < 0 ||
        syscall(SYS_setresgid, gid, gid, gid) < 0 ||
        syscall(SYS_setresuid, uid, uid, uid) < 0)
        return -1;
    /* Root to another uid empties permitted and effective; inheritable
     * stays unless emptied. */
    if (syscall(SYS_capset, &hdr, none) < 0)
        return -1;
    return 0;
}

/* Lowers one limit to v (never above the hard limit). */
static int
lower(int resource, uint64_t v)
{
    struct rlimit rl;

    if (getrlimit(resource, &rl) < 0)
        return -1;
    if (rl.rlim_max != RLIM_INFINITY && v > rl.rlim_max)
        v = rl.rlim_max;
    rl.rlim_cur = rl.rlim_max = (rlim_t)v;
    return setrlimit(resource, &rl);
}

int
sandbox_rlimits_apply(const struct sandbox_rlimits *r)
{
    if ((r->core_off && lower(RLIMIT_CORE, 0) < 0) ||
        (r->nofile && lower(RLIMIT_NOFILE, r->nofile) < 0) ||
        (r->nproc && lower(RLIMIT_NPROC, r->nproc) < 0) ||
        (r->fsize && lower(RLIMIT_FSIZE, r->fsize) < 0) ||
        (r->memlock && lower(RLIMIT_MEMLOCK, r->memlock) < 0) ||
        (r->as && lower(RLIMIT_AS, r->as) < 0))
        return -1;
    return 0;
}
