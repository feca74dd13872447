/*
 * role_dotnet.c — the role of wm-host-dotnet (DESIGN §10, sandbox.h,
 * research/sandbox.md §4.4): the native role's steps up to the exec, then
 * no_new_privs and one filter on every thread, loaded by the host before
 * the runtime starts so that every thread CoreCLR makes inherits it.
 *
 * Unlike the native role: no MDWE and executable mappings allowed (the
 * JIT writes code, through a double mapping of a memfd: W^X), and the
 * verdict of every call the table does not name is ERRNO(ENOSYS), not a
 * kill.  The runtime probes and falls back (membarrier, clone3, its
 * cgroup and CPU files); a kill would turn a probe into a dead host, and
 * what it reaches is bounded by the spawner's steps (namespaces, the
 * private root holding /usr only, Landlock, the cgroup, its own uid).
 * Still killed outright: what would leave the host's confinement or reach
 * another process whatever it answered (execve, ptrace, process_vm_*,
 * mount, unshare, setns, ...); a fork is refused (EPERM, or ENOSYS for a
 * clone without CLONE_THREAD), which a worker's Process.Start sees as an
 * exception.
 *
 * Its spawner's steps differ too (sandbox.h, struct sandbox_role): its
 * Landlock domain also reads /proc and the CPUs' and cgroup's files
 * (dotnet_reads), and its private root holds its binary at its own path
 * (exe_in_root): CoreCLR resolves /proc/self/exe and reads
 * /proc/self/maps at start, and does not start without them.
 *
 * How the table was derived: the .NET integration tests
 * (tests/integration/test_dotnet*.py) run with WM_SANDBOX_DEBUG=log
 * (every kill made "log", errno answers logged too), the kernel's audit
 * records (dmesg, type=1326, exe wm-host-dotnet) read for each call the
 * table did not allow, and the same calls seen with their arguments under
 * strace -f.  Seen and now allowed: getsid, stat and lstat (the
 * framework's assemblies), sched_get_priority_max/min, get_mempolicy,
 * flock.
 * Seen and left refused: clone3 (ENOSYS: glibc falls back to clone, whose
 * flags the filter sees), openat of /proc/self/task/N/comm for writing
 * (the runtime naming its threads: they keep the host's name) and
 * sched_setscheduler (the runtime setting its threads' priorities: they
 * keep the default).
 */
#include "config.h"

#include "sandbox/rules.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/prctl.h>

/* Besides every host's rules and a threaded host's (rules.h). */
static const struct sandbox_rule dotnet_rules[] = {
    /* the wake-up eventfd, the code memfd, duplicates */
    ALLOW(readv),
    ALLOW(writev),
    ALLOW(pwrite64),
    ALLOW(dup),
    ALLOW(dup2),
    ALLOW(dup3),
    /* seals, duplicates and locks; F_SETOWN and F_SETSIG are answered by
     * the fallback */
    ALLOW_IF(fcntl, EQ(1, F_DUPFD)),
    ALLOW_IF(fcntl, EQ(1, F_DUPFD_CLOEXEC)),
    ALLOW_IF(fcntl, EQ(1, F_ADD_SEALS)),
    ALLOW_IF(fcntl, EQ(1, F_GETLK)),
    ALLOW_IF(fcntl, EQ(1, F_SETLK)),
    ALLOW_IF(fcntl, EQ(1, F_SETLKW)),
    ALLOW(flock), /* the runtime's locks on files it opened */
    ALLOW(epoll_create1),
    ALLOW(eventfd2),
    ALLOW(pipe2),
    /* files: the runtime's (under /usr), the runtimeconfig's memfd
     * through /proc/self/fd, /proc/self/maps, the cgroup's and the CPUs'
     * files; reading only */
    ALLOW_IF(openat, MASKED(2, OPEN_WRITES, 0)),
    ALLOW(newfstatat),
    ALLOW(stat), /* the framework's assemblies, before they are mapped */
    ALLOW(lstat),
    ALLOW(fstat),
    ALLOW(statx),
    ALLOW(statfs),
    ALLOW(fstatfs),
    ALLOW(readlink),
    ALLOW(readlinkat),
    ALLOW(access),
    ALLOW(faccessat),
    ALLOW(faccessat2),
    ALLOW(getdents64),
    ALLOW(getcwd),
    /* the runtimeconfig removed once read (hosts/dotnet/clr.c) */
    ALLOW(unlink),
    ALLOW(unlinkat),
    /* memory: the GC's reservations, the JIT's double mappings */
    ALLOW(memfd_create),
    ALLOW(ftruncate),
    ALLOW(mmap),
    ALLOW(mprotect),
    ALLOW(membarrier),
    ALLOW(mincore),
    /* threads: the runtime's and the pool's */
    ALLOW(get_robust_list),
    ALLOW(set_tid_address),
    ALLOW(sched_setaffinity),
    ALLOW(sched_getparam),
    ALLOW(sched_getscheduler),
    ALLOW(sched_get_priority_max), /* the runtime's thread priorities */
    ALLOW(sched_get_priority_min),
    ALLOW(get_mempolicy), /* the GC's NUMA probe */
    ALLOW(getpriority),
    /* signals, to itself only (the runtime's activation injection) */
    ALLOW(rt_sigtimedwait),
    ALLOW_IF(rt_tgsigqueueinfo, IS_PID(0)),
    /* who and when */
    ALLOW(getppid),
    ALLOW(getsid),
    ALLOW(getresuid),
    ALLOW(getresgid),
    ALLOW(clock_getres),
    ALLOW(time),
    ALLOW(uname),
    ALLOW(sysinfo),
    ALLOW(getrlimit),
    ALLOW(prlimit64),
    ALLOW(getrusage),
    ALLOW(times),
    ALLOW_IF(prctl, EQ(0, PR_GET_DUMPABLE)),
    ALLOW_IF(prctl, EQ(0, PR_SET_VMA)),
    /* a process of its own (Process.Start: vfork, or clone without
     * CLONE_THREAD, answered by the fallback): refused, an exception in
     * the worker rather than a dead host */
    ERRNO(fork, EPERM),
    ERRNO(vfork, EPERM),
    /* what would reach beyond the host: killed whatever it answered */
    KILL(execve),
    KILL(execveat),
    KILL(ptrace),
    KILL(process_vm_readv),
    KILL(process_vm_writev),
    KILL(mount),
    KILL(umount2),
    KILL(unshare),
    KILL(setns),
    KILL(pivot_root),
    KILL(chroot),
    KILL(bpf),
    KILL(kexec_load),
    KILL(init_module),
    KILL(finit_module),
    END,
};

static const struct sandbox_filter dotnet_filter = {
    .name = "dotnet",
    .fallback = SANDBOX_ERRNO,
    .fallback_err = ENOSYS,
    .lists = { sandbox_rules_host, sandbox_rules_threads, dotnet_rules },
};

/* What CoreCLR reads besides /usr (its Landlock domain): /proc (its
 * stack's bounds in /proc/self/maps, /proc/self/stat, /proc/meminfo,
 * /proc/stat; without them it does not start, "Failed to create CoreCLR,
 * HRESULT: 0x8007000E"), the CPUs' and the cgroup's files under /sys,
 * which the GC sizes itself from.  In the private root /sys is absent
 * and /proc shows only the host's own pid namespace. */
static const char *const dotnet_reads[] = {
    "/proc",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    NULL,
};

const struct sandbox_role sandbox_role_dotnet = {
    .name = "dotnet",
    .steps = { SPAWNER_STEPS, SANDBOX_STEP_NO_NEW_PRIVS, SANDBOX_STEP_FILTER },
    .filter = &dotnet_filter,
    .strict = NULL,
    .reads = dotnet_reads,
    .exe_in_root = true,
};
