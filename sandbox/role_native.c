/*
 * role_native.c — the role of wm-host-native (DESIGN §10, sandbox.h): its
 * steps and its two seccomp filters.
 *
 * Steps, in order (research/sandbox.md §4.1, zygote-coldstart.md): the
 * spawner's first, between fork and execve (spawn.c): a session of its
 * own and the parent-death signal; its cgroup, joined before anything
 * else runs; its namespaces; the private root, built by its pid
 * namespace's init so that the root's procfs shows that namespace; the
 * fork of the host by that init; the host's own uid without
 * capabilities; its Landlock domain (after the uid: the ruleset's paths
 * are the root's); the descriptors closed; the rlimits lowered (after the
 * closing, which a low RLIMIT_NOFILE would bound); execve.  Then the
 * host's own: no_new_privs; MDWE (no mapping both writable and
 * executable, nor made executable later: a worker library is mapped
 * read+exec from its file and never needs more); the first filter on
 * every thread.  The worker's library is opened under it, since its ELF
 * constructors run at dlopen() and are the worker's code too.
 *
 * Stage 1 (native_stage1) is what a host needs to run and to open a
 * library: its own calls (every host's and a threaded host's blocks,
 * rules.h, and common below) and the dynamic linker's (read-only openat
 * of /proc/self/fd/N, of ld.so.cache and of the libraries the worker's
 * library needs; mmap and mprotect with PROT_EXEC; fstat), plus seccomp()
 * and no_new_privs to load stage 2.
 *
 * Stage 2 (native_stage2) is stage 1 without the loading: opening a path
 * for reading, stat of a path and executable mappings are refused with
 * EACCES (a library's probe of a file, say a locale or time zone file,
 * fails as a missing permission would, instead of killing the host); no
 * seccomp, no prctl but the thread name.  The other path probes (access,
 * readlink, statx, ...) get EACCES in both stages: stacked, the strictest
 * verdict wins, so a kill in stage 1 could not be softened in stage 2.
 * The host loads stage 2 on its loop thread before it creates the pool,
 * so that every thread that runs Process, and the loop thread that parses
 * the package and calls FreeResult, run under both filters.  Only the
 * host's opener thread keeps stage 1 alone: it opens each library, first
 * or reloaded (a reload happens in the same host, DESIGN §7), and does
 * nothing else.
 *
 * Whatever neither lists is killed: opening a path for writing, sockets,
 * execve, fork (clone without CLONE_THREAD, fork, vfork; clone3 is
 * answered ENOSYS so that glibc falls back to clone, whose flags a filter
 * can see), ptrace, mount, unshare, setns, a signal to another process
 * (kill, tgkill, fcntl F_SETOWN), and every call the host never makes.
 *
 * How the tables were derived: the native integration tests
 * (test_native.py, test_native_examples.py, test_native_inprocess.py)
 * were run with WM_SANDBOX_DEBUG=log (every kill made "log", errno answers
 * logged too), and the kernel's audit records (dmesg, type=1326, comm
 * wm-host-native) read for each call the tables would not allow: none but
 * the errno rules' own (clone3, and openat in stage 2); then under strace
 * -f, per thread, to see those opens and what the tables allow unused.
 * Stage 2's opens seen there: /etc/localtime (libzip's mktime of each zip
 * entry's date; glibc falls back to UTC), /dev/urandom (jansson's hash
 * seed for the manifest; it falls back to time and pid).  The entries no test
 * calls (poll, readv, nanosleep, getrandom, ...) are a worker's ordinary needs,
 * each harmless; test_sandbox_seccomp.c and test_sandbox_native.py check the
 * verdicts.
 */
#include "config.h"

#include "sandbox/rules.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#ifndef SECCOMP_SET_MODE_FILTER
#define SECCOMP_SET_MODE_FILTER 1
#endif

/* Both stages, besides every host's rules and a threaded host's
 * (rules.h): the library in a memfd of its own, a worker's usual needs. */
static const struct sandbox_rule common[] = {
    ALLOW(readv),
    ALLOW(writev),
    ALLOW_IF(fcntl, EQ(1, F_ADD_SEALS)),
    /* the library extracted into a memfd of its own */
    ALLOW(memfd_create),
    ALLOW(clock_getres),
    ALLOW(time),
    ALLOW(uname),
    ALLOW(fstat),
    /* paths, but for openat and newfstatat (per stage): a probe fails as
     * a missing permission would, in both stages, since a later filter
     * cannot soften an earlier one's kill */
    ERRNO(open, EACCES),
    ERRNO(statx, EACCES),
    ERRNO(stat, EACCES),
    ERRNO(lstat, EACCES),
    ERRNO(access, EACCES),
    ERRNO(faccessat, EACCES),
    ERRNO(faccessat2, EACCES),
    ERRNO(readlink, EACCES),
    ERRNO(readlinkat, EACCES),
    END,
};

/* Stage 1 only: opening libraries, and loading stage 2. */
static const struct sandbox_rule loading[] = {
    ALLOW_IF(openat, MASKED(2, OPEN_WRITES, 0)),
    ALLOW(newfstatat),
    ALLOW(mmap),
    ALLOW(mprotect),
    ALLOW_IF(seccomp, EQ(0, SECCOMP_SET_MODE_FILTER)),
    ALLOW_IF(prctl, EQ(0, PR_SET_NO_NEW_PRIVS)),
    END,
};

/* Stage 2 only: no paths, no new executable memory.  (An open for
 * writing stays killed: stage 1 kills it, and the strictest verdict of
 * stacked filters wins.) */
static const struct sandbox_rule strict[] = {
    ERRNO(openat, EACCES),
    ERRNO(newfstatat, EACCES),
    ALLOW_IF(mmap, MASKED(2, PROT_EXEC, 0)),
    ERRNO_IF(mmap, EACCES, MASKED(2, PROT_EXEC, PROT_EXEC)),
    ALLOW_IF(mprotect, MASKED(2, PROT_EXEC, 0)),
    ERRNO_IF(mprotect, EACCES, MASKED(2, PROT_EXEC, PROT_EXEC)),
    END,
};

static const struct sandbox_filter native_stage1 = {
    .name = "native stage 1",
    .fallback = SANDBOX_KILL,
    .lists = { sandbox_rules_host, sandbox_rules_threads, common, loading },
};

static const struct sandbox_filter native_stage2 = {
    .name = "native stage 2",
    .fallback = SANDBOX_KILL,
    .lists = { sandbox_rules_host, sandbox_rules_threads, common, strict },
};

const struct sandbox_role sandbox_role_native = {
    .name = "native",
    .steps = { SPAWNER_STEPS, SANDBOX_STEP_NO_NEW_PRIVS, SANDBOX_STEP_MDWE,
               SANDBOX_STEP_FILTER },
    .filter = &native_stage1,
    .strict = &native_stage2,
};
