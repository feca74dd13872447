/*
 * creds.c — a host's user, groups, capabilities and rlimits (creds.h),
 * and this process's capabilities as text (detection's report).
 *
 * libcap where it costs nothing between fork and execve: the bounding set
 * is dropped with cap_drop_bound(), once per capability this kernel has,
 * cap_max_bits() (libcap probes it with PR_CAPBSET_READ when it loads, so
 * no /proc file is read and no count is carried from before the fork);
 * the report is cap_get_proc() and cap_to_text(), outside any fork.
 *
 * Raw system calls for the rest of the drop, measured: a spawned child
 * runs async-signal-safe calls only (spawn.c), and libcap's other calls
 * are either not that or dearer there.  cap_setuid() and cap_setgroups()
 * allocate (cap_get_proc()) and pass through PR_SET_KEEPCAPS and
 * setuid(); glibc's setgroups, setresgid and setresuid broadcast the
 * change to every thread (a signal-based protocol).  Emptying the sets
 * with cap_set_proc() needs a cap_t, allocated (cap_init()), so made
 * before the fork, and libcap 2.66 locks it by writing into it: in the
 * child that write is a copy-on-write fault of a heap page;
 * cap_reset_ambient() reads every ambient bit before its
 * PR_CAP_AMBIENT_CLEAR_ALL, 41 more prctl(2)s.  Measured in forked
 * children as root (2-vCPU VM under load, 1,000 alternating forks each):
 * this drop, median 0.24 ms (p90 0.35 ms); with those two libcap calls,
 * 0.44 ms (p90 0.98 ms), for the same end state, against a whole host
 * start's budget of 2 ms (bench/README.md, "Confinement per host start").
 * cap_drop_bound() itself costs what the raw prctl(2) loop did, within
 * the noise (+0.02 ms median there: its first call is bound lazily).
 */
#include "config.h"

#include "sandbox/creds.h"

#include <errno.h>
#include <grp.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

int
sandbox_creds_drop(uid_t uid, gid_t gid)
{
    return sandbox_creds_drop_groups(uid, gid, NULL, 0);
}

int
sandbox_creds_drop_groups(uid_t uid, gid_t gid, const gid_t *groups,
                          size_t ngroups)
{
    struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = { 0 };

    /* The bounding set first: dropping needs CAP_SETPCAP, gone below. */
    for (cap_value_t cap = 0; cap < cap_max_bits(); cap++)
        if (cap_drop_bound(cap) < 0)
            return -1;
    /* EINVAL: a kernel without ambient capabilities (before 4.3). */
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

char *
sandbox_creds_caps(char *buf, size_t len)
{
    cap_t caps = cap_get_proc();
    char *text = caps ? cap_to_text(caps, NULL) : NULL;

    if (len == 0)
        return buf;
    snprintf(buf, len, "%s", text ? text : "?");
    cap_free(text);
    cap_free(caps);
    return buf;
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
