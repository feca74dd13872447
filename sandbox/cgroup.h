/*
 * cgroup.h — resource limits per engine host (issue 7; DESIGN §10):
 * memory, pids and cpu, in cgroup v1 hierarchies where that is what the
 * machine offers (Debian 12 on the development VM: /sys/fs/cgroup/memory,
 * pids, cpu) and in the unified v2 hierarchy where its controllers are
 * delegated.  Nothing here knows the master.
 *
 * Layout: under each hierarchy the daemon owns PARENT/d<pid> (PARENT is
 * the setting cgroup_parent, "workmanager" by default; the pid keeps
 * several daemons on one machine apart), and each host gets a leaf below
 * it, created with its limits written before any process joins.  A daemon
 * that starts removes the d<pid> directories of daemons that are gone
 * (their leaves' processes killed first).
 *
 * Limits: memory_bytes (v1 memory.limit_in_bytes and, when swap is
 * accounted, memory.memsw.limit_in_bytes; v2 memory.max and
 * memory.swap.max 0), pids_max (pids.max), cpu_percent (v1
 * cpu.cfs_quota_us over a 100 ms cpu.cfs_period_us; v2 cpu.max); 0 leaves
 * one unlimited.  A host that passes its memory limit is killed by the
 * kernel's OOM killer (SIGKILL), which the group counts: the master then
 * reports reason "oom".
 */
#ifndef WM_SANDBOX_CGROUP_H
#define WM_SANDBOX_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/sandbox.h"

struct sandbox_cg_limits {
    uint64_t memory_bytes; /* 0: none */
    uint32_t pids_max;     /* 0: none */
    uint32_t cpu_percent;  /* of one CPU; 0: none */
};

/* One host's group (a leaf in each hierarchy). */
struct sandbox_cg;

/*
 * Makes PARENT/d<getpid()> in each hierarchy s offers (the memory, pids
 * and cpu controllers of s->cgroup_ctls), after removing the directories
 * of daemons that no longer run.  Returns 0; -1 with a message naming the
 * path and errno (nothing is left half made).  Without controllers (s says
 * none) it returns 0 and every later sandbox_cg_create() returns NULL
 * with no error: hosts then run without cgroup limits.
 */
int sandbox_cg_init(const struct sandbox_support *s, const char *parent,
                    char *err, size_t errlen);

/* Whether sandbox_cg_init() set up at least one controller. */
int sandbox_cg_enabled(void);

/*
 * A new leaf named leaf ([A-Za-z0-9._-], at most 100 bytes) with limits l.
 * NULL with *err empty when cgroups are not enabled; NULL with a message
 * on failure (nothing left behind).
 */
struct sandbox_cg *sandbox_cg_create(const char *leaf,
                                     const struct sandbox_cg_limits *l,
                                     char *err, size_t errlen);

/*
 * Moves process pid (0: the caller) into cg in every hierarchy, through
 * descriptors opened by sandbox_cg_create(): async-signal-safe, so that a
 * child may join between fork() and execve(), before it runs anything
 * else.  In v1 hierarchies the descriptor is the leaf's tasks file, which
 * moves the one thread named (much faster than cgroup.procs there): call
 * it for a single-threaded process, as such a child is.  0, or -1 with
 * errno.
 */
int sandbox_cg_attach(const struct sandbox_cg *cg, pid_t pid);

/*
 * The descriptors sandbox_cg_attach() writes to, for another process to
 * join cg through (a zygote, zygote.h): up to max of them into fds (not
 * duplicated: they stay cg's); their number.
 */
unsigned sandbox_cg_join_fds(const struct sandbox_cg *cg, int *fds,
                             unsigned max);

/*
 * A group known only by the join descriptors fds[0..n) another process
 * passed (sandbox_cg_join_fds()): it can be joined, and
 * sandbox_cg_destroy() closes the descriptors and removes nothing.  Takes
 * the descriptors; NULL when out of memory (they are closed then).
 */
struct sandbox_cg *sandbox_cg_adopt(const int *fds, unsigned n);

/* How many times the kernel's OOM killer killed in cg (0 without a memory
 * controller). */
uint64_t sandbox_cg_oom_kills(const struct sandbox_cg *cg);

/* SIGKILL to every process in cg, until none is left (or about 1 s). */
void sandbox_cg_kill(const struct sandbox_cg *cg);

/* Kills what is left in cg, removes its leaves and frees it.  NULL is
 * fine. */
void sandbox_cg_destroy(struct sandbox_cg *cg);

/* Removes this daemon's d<pid> directories (at exit, once its hosts'
 * groups are destroyed). */
void sandbox_cg_fini(void);

#endif /* WM_SANDBOX_CGROUP_H */
