/*
 * cgroup.h — resource limits per engine host (issue 7; DESIGN §10):
 * memory, pids and cpu (and v1's cpuacct, for the CPU time a tenant used),
 * in cgroup v1 hierarchies where that is what the machine offers (Debian 12
 * on the development VM: /sys/fs/cgroup/memory, pids, cpu, cpuacct) and in
 * the unified v2 hierarchy where its controllers are delegated.  Nothing
 * here knows the master.
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

/* A tenant's share of the CPU: its hosts' groups go under the group
 * PARENT/d<pid>/t-<tenant> of each hierarchy, whose cpu controller gets
 * the weight (v2 cpu.weight; v1 cpu.shares, weight * 1024 / 100) and the
 * quota (v2 cpu.max, v1 cpu.cfs_quota_us; 0: unlimited), so that the
 * kernel shares the CPU between tenants by weight, however many hosts
 * each runs. */
struct sandbox_cg_share {
    const char *tenant;       /* [A-Za-z0-9._-], at most 100 bytes */
    uint32_t cpu_weight;      /* 1 to 10000; 100 is the kernel's default */
    uint32_t cpu_max_percent; /* of one CPU, for all its hosts; 0: none */
};

/*
 * sandbox_cg_create(), the leaf under the group of share's tenant (made,
 * or its share written again, first; it stays until sandbox_cg_fini()).
 * A host's cpu_percent is held to the tenant's cpu_max_percent (cgroup
 * v1 refuses a child's quota above its parent's).
 * share NULL: sandbox_cg_create().  NULL with a message naming the file
 * when the tenant's group cannot be made or its share written.
 */
struct sandbox_cg *sandbox_cg_create_in(const struct sandbox_cg_share *share,
                                        const char *leaf,
                                        const struct sandbox_cg_limits *l,
                                        char *err, size_t errlen);

/*
 * Moves every process of from into to, hierarchy by hierarchy (through
 * cgroup.procs: whole processes, threads and all).  For an idle host
 * (a warm pool's) joining its worker's tenant.  0, or -1 with errno.
 */
int sandbox_cg_move(const struct sandbox_cg *from, const struct sandbox_cg *to);

/*
 * What the hosts of a tenant used, read from its group (made by
 * sandbox_cg_create_in()): CPU time in microseconds (v2 cpu.stat
 * usage_usec; v1 cpuacct.usage, in the cpuacct hierarchy, whether it is
 * mounted with cpu or alone)
 * and memory in bytes now (v2 memory.current, v1 memory.usage_in_bytes).
 * A figure the machine does not offer (no such controller) is left
 * unchanged and its bit not set in the result: SANDBOX_CG_CPU and/or
 * SANDBOX_CG_MEMORY; 0 when the tenant has no group.
 */
unsigned sandbox_cg_tenant_usage(const char *tenant, uint64_t *cpu_usec,
                                 uint64_t *memory_bytes);

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
