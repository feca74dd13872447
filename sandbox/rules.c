/*
 * rules.c — the rule blocks that several host roles share (rules.h says
 * which and why): written once, named by each role's filter lists.
 *
 * Invariant: a block holds only rules every role that names it wants
 * exactly as written here; tests/unit/test_sandbox_roles.c pins each
 * role's resulting filters, so a change here that reaches a role shows
 * there as a rule gained, lost or changed.
 */
#include "config.h"

#include "sandbox/rules.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sys/prctl.h>

/* clone: a thread of this process, in its namespaces, untraced. */
#define CLONE_MUST (CLONE_THREAD | CLONE_VM)
#define CLONE_CHECKED                                                          \
    (CLONE_MUST | CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS |               \
     CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |              \
     CLONE_PTRACE | CLONE_UNTRACED)

const struct sandbox_rule sandbox_rules_host[] = {
    /* the channel, the memfds it passes, stderr */
    ALLOW(read),
    ALLOW(write),
    ALLOW(pread64),
    ALLOW(lseek),
    ALLOW(close),
    ALLOW(recvmsg),
    ALLOW(sendmsg),
    /* descriptor and status flags, memfd seals; not F_SETOWN nor
     * F_SETSIG, which would aim SIGIO (or any signal) at another process */
    ALLOW_IF(fcntl, EQ(1, F_GETFD)),
    ALLOW_IF(fcntl, EQ(1, F_SETFD)),
    ALLOW_IF(fcntl, EQ(1, F_GETFL)),
    ALLOW_IF(fcntl, EQ(1, F_SETFL)),
    ALLOW_IF(fcntl, EQ(1, F_GET_SEALS)),
    /* the loop (its epoll instance is made before the filter) */
    ALLOW(epoll_wait),
    ALLOW(epoll_pwait),
    ALLOW(epoll_ctl),
    ALLOW(poll), /* the channel's flush before exit */
    ALLOW(ppoll),
    /* memory (mmap and mprotect: each role's) */
    ALLOW(brk),
    ALLOW(munmap),
    ALLOW(mremap),
    ALLOW(madvise),
    /* exit */
    ALLOW(exit),
    ALLOW(exit_group),
    ALLOW(restart_syscall),
    /* signals, to itself only */
    ALLOW(rt_sigprocmask),
    ALLOW(rt_sigaction),
    ALLOW(rt_sigreturn),
    ALLOW_IF(tgkill, IS_PID(0)),
    ALLOW_IF(kill, IS_PID(0)),
    /* who and when */
    ALLOW(getpid),
    ALLOW(gettid),
    ALLOW(getuid),
    ALLOW(geteuid),
    ALLOW(getgid),
    ALLOW(getegid),
    ALLOW(clock_gettime),
    ALLOW(gettimeofday),
    ALLOW(nanosleep),
    ALLOW(clock_nanosleep),
    ALLOW(getrandom),
    /* terminals: none here; answered like a non-tty (isatty()) */
    ERRNO(ioctl, ENOTTY),
    /* callers fall back to clone and openat, which a filter can judge */
    ERRNO(clone3, ENOSYS),
    ERRNO(openat2, ENOSYS),
    END,
};

const struct sandbox_rule sandbox_rules_threads[] = {
    ALLOW_IF(clone, MASKED(0, CLONE_CHECKED, CLONE_MUST)),
    ALLOW(futex),
    ALLOW(set_robust_list),
    ALLOW(rseq),
    ALLOW(sched_yield),
    ALLOW(sched_getaffinity),
    ALLOW(sigaltstack),
    ALLOW_IF(prctl, EQ(0, PR_SET_NAME)),
    ALLOW_IF(prctl, EQ(0, PR_GET_NAME)),
    END,
};
