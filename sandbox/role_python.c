/*
 * role_python.c — the role of wm-host-python (DESIGN §10, sandbox.h;
 * research/sandbox.md §2 and §4.2): its steps and its one seccomp filter,
 * the strict tier.
 *
 * Steps: the spawner's as for the native host (role_native.c says why in
 * that order), then the host's own once the interpreter is initialised and
 * everything a worker may import is imported (hosts/python/interp.c):
 * no_new_privs; MDWE (CPython 3.11 has no JIT; no mapping is both
 * writable and executable); the filter on every thread.  The filter is in
 * before the worker's module is compiled, so no worker code ever runs
 * without it.  There is no second stage: nothing is loaded afterwards.
 *
 * The strict tier (§4.2): memory, its own channel, time, randomness, its
 * own ids; a terminal probe (isatty(): ioctl TCGETS) answered ENOTTY;
 * every path refused with EACCES, so that an import that was not done
 * before the filter, or a worker's open(), fails as a missing permission
 * would (ImportError, PermissionError) instead of killing the host;
 * openat2 and clone3 answered ENOSYS so that callers fall back to the
 * calls the filter can judge; fork, exec, threads and every call that
 * changes a file answered EPERM (os.fork(), subprocess and
 * threading.Thread.start() raise).  Everything else kills the process:
 * sockets, ptrace, mount, namespaces, a signal to another process, and
 * every call the host never makes.
 *
 * Beyond the research's table, the host's own needs, from the channel
 * (ipc/channel.c) and libevent's epoll back end: epoll_wait/epoll_pwait
 * and epoll_ctl (the loop; the epoll instance is made before the filter),
 * recvmsg and sendmsg (the channel), poll (its flush before exit), fcntl
 * on descriptor flags and memfd seals (the channel made non-blocking, the
 * Load's sealed memfd), pread64 (the memfd read), and a signal to itself
 * (abort()).  Checked with strace -f on a host serving the integration
 * tests' kind of worker (gateway calls, print, exceptions, MemoryError, a
 * 3 MB output, time.sleep, hashlib, uuid, a reload): it made only
 * sendmsg, recvmsg, epoll_wait, epoll_ctl, brk, mmap, munmap, getrandom,
 * clock_nanosleep, pread64, fcntl(F_GET_SEALS), close and exit_group, and
 * no call was answered with an errno; the Python integration tests run
 * enforcing, so a call the table lacked would have killed a host.  The
 * rest of the allowances are the research's strict tier.
 *
 * The calls every host makes (the channel, the loop, memory, ids, time,
 * exit, signals to itself, the terminal probe, clone3 and openat2) are
 * rules.h's block; the list below adds the strict tier's own answers.
 */
#include "config.h"

#include "sandbox/rules.h"

#include <errno.h>
#include <sys/mman.h>

/* Besides every host's rules (rules.h). */
static const struct sandbox_rule python[] = {
    /* the research's strict tier: no executable memory */
    ALLOW_IF(mmap, MASKED(2, PROT_EXEC, 0)),
    ERRNO_IF(mmap, EACCES, MASKED(2, PROT_EXEC, PROT_EXEC)),
    ALLOW_IF(mprotect, MASKED(2, PROT_EXEC, 0)),
    ERRNO_IF(mprotect, EACCES, MASKED(2, PROT_EXEC, PROT_EXEC)),
    /* paths: refused as a missing permission */
    ERRNO(open, EACCES),
    ERRNO(openat, EACCES),
    ERRNO(creat, EACCES),
    ERRNO(stat, EACCES),
    ERRNO(lstat, EACCES),
    ERRNO(fstat, EACCES),
    ERRNO(newfstatat, EACCES),
    ERRNO(statx, EACCES),
    ERRNO(access, EACCES),
    ERRNO(faccessat, EACCES),
    ERRNO(faccessat2, EACCES),
    ERRNO(readlink, EACCES),
    ERRNO(readlinkat, EACCES),
    ERRNO(getcwd, EACCES),
    /* processes, threads and file changes: refused */
    ERRNO(clone, EPERM),
    ERRNO(fork, EPERM),
    ERRNO(vfork, EPERM),
    ERRNO(execve, EPERM),
    ERRNO(execveat, EPERM),
    ERRNO(unlink, EPERM),
    ERRNO(unlinkat, EPERM),
    ERRNO(rename, EPERM),
    ERRNO(renameat, EPERM),
    ERRNO(renameat2, EPERM),
    ERRNO(mkdir, EPERM),
    ERRNO(mkdirat, EPERM),
    ERRNO(rmdir, EPERM),
    ERRNO(chmod, EPERM),
    ERRNO(fchmod, EPERM),
    ERRNO(fchmodat, EPERM),
    ERRNO(chown, EPERM),
    ERRNO(fchown, EPERM),
    ERRNO(lchown, EPERM),
    ERRNO(fchownat, EPERM),
    ERRNO(truncate, EPERM),
    ERRNO(ftruncate, EPERM),
    ERRNO(link, EPERM),
    ERRNO(linkat, EPERM),
    ERRNO(symlink, EPERM),
    ERRNO(symlinkat, EPERM),
    END,
};

static const struct sandbox_filter python_filter = {
    .name = "python",
    .fallback = SANDBOX_KILL,
    .lists = { sandbox_rules_host, python },
};

const struct sandbox_role sandbox_role_python = {
    .name = "python",
    .steps = { SPAWNER_STEPS, SANDBOX_STEP_NO_NEW_PRIVS, SANDBOX_STEP_MDWE,
               SANDBOX_STEP_FILTER },
    .filter = &python_filter,
    .strict = NULL,
};
