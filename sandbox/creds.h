/*
 * creds.h — a host's identity and resource limits, set by the process
 * that spawns it between fork() and execve() (issue 7; research/sandbox.md
 * §4.1 steps 6 and 8): a user and group of its own from the daemon's
 * range (so that hosts cannot signal or ptrace one another or the daemon,
 * and RLIMIT_NPROC counts one host), no supplementary groups, no
 * capability in any set, the bounding set included, and lowered rlimits;
 * and, for detection's report, this process's capabilities.  Everything
 * here but sandbox_creds_caps() is async-signal-safe.  Nothing here knows
 * the master.
 */
#ifndef WM_SANDBOX_CREDS_H
#define WM_SANDBOX_CREDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Drops every capability from the bounding set (each one this kernel has,
 * as libcap found when it loaded: cap_max_bits(); while still
 * privileged), then no supplementary groups, gid and uid set (real,
 * effective, saved), and the inheritable and ambient sets emptied; a uid
 * change from root empties the permitted and effective sets.  Needs root
 * (CAP_SETPCAP, CAP_SETUID, CAP_SETGID).  0, or -1 with errno.
 */
int sandbox_creds_drop(uid_t uid, gid_t gid);

/* The same with groups[0..ngroups) as the supplementary groups (the
 * master's drop, DESIGN §2: it keeps the control socket's group). */
int sandbox_creds_drop_groups(uid_t uid, gid_t gid, const gid_t *groups,
                              size_t ngroups);

/*
 * This process's capabilities as libcap writes them (cap_to_text(3):
 * "=ep" for every one effective and permitted, "=" for none, else the
 * capabilities by name with their sets), "?" when they cannot be read;
 * truncated to fit buf.  Allocates: not between fork and execve.  buf.
 */
char *sandbox_creds_caps(char *buf, size_t len);

/* Limits a host runs under; 0 leaves one as it is.  Only lowered: a limit
 * above the current hard limit is left as it is. */
struct sandbox_rlimits {
    uint64_t nofile;  /* RLIMIT_NOFILE */
    uint64_t nproc;   /* RLIMIT_NPROC, per uid: per host with its own uid */
    uint64_t fsize;   /* RLIMIT_FSIZE, bytes */
    uint64_t memlock; /* RLIMIT_MEMLOCK, bytes */
    uint64_t as;      /* RLIMIT_AS, bytes (address space) */
    int core_off;     /* RLIMIT_CORE 0: a crash writes no core */
};

/* 0, or -1 with errno. */
int sandbox_rlimits_apply(const struct sandbox_rlimits *r);

#endif /* WM_SANDBOX_CREDS_H */
