/*
 * rules.h — the words the role descriptors (role_*.c) are written in, the
 * spawner's steps they share, and the rule blocks more than one role
 * shares (rules.c).  Private to sandbox/
 * and its tests.
 *
 * A role's filter is up to SANDBOX_FILTER_LISTS rule lists (sandbox.h);
 * the kernel enforces their union.  So a call every host makes is written
 * once, here, and a role file lists only what its runtime adds: a filter
 * is { sandbox_rules_host, [sandbox_rules_threads,] the role's own, ... }.
 * A block holds only rules that every role naming it wants exactly so;
 * a role that wants another verdict for one of its calls (Python's fstat
 * refused, where the others allow it) keeps that call in its own list.
 * tests/unit/test_sandbox_roles.c pins each role's union rule by rule.
 */
#ifndef WM_SANDBOX_RULES_H
#define WM_SANDBOX_RULES_H

#include <fcntl.h>

#include "sandbox/sandbox.h"

/* clang-format off */
#define ALLOW(name) { .syscall = #name, .verdict = SANDBOX_ALLOW }
#define ERRNO(name, e) { .syscall = #name, .verdict = SANDBOX_ERRNO, .err = e }
#define KILL(name) { .syscall = #name, .verdict = SANDBOX_KILL }
#define ALLOW_IF(name, c) \
    { .syscall = #name, .verdict = SANDBOX_ALLOW, .nconds = 1, .conds = { c } }
#define ERRNO_IF(name, e, c) \
    { .syscall = #name, .verdict = SANDBOX_ERRNO, .err = e, .nconds = 1, \
      .conds = { c } }
#define EQ(a, v) { .arg = a, .cmp = SANDBOX_CMP_EQ, .value = v }
#define MASKED(a, m, v) \
    { .arg = a, .cmp = SANDBOX_CMP_MASKED_EQ, .mask = m, .value = v }
#define IS_PID(a) { .arg = a, .cmp = SANDBOX_CMP_EQ, .value_is_pid = true }
#define END { .syscall = NULL }
/* clang-format on */

/* The spawner's steps every role takes, in the order of DESIGN §10
 * (role_native.c says why in that order): a role's steps start with these,
 * then name its own, after the exec. */
#define SPAWNER_STEPS                                                          \
    SANDBOX_STEP_SESSION, SANDBOX_STEP_CGROUP, SANDBOX_STEP_NAMESPACES,        \
        SANDBOX_STEP_ROOT, SANDBOX_STEP_INIT, SANDBOX_STEP_CREDS,              \
        SANDBOX_STEP_LANDLOCK, SANDBOX_STEP_FDS, SANDBOX_STEP_RLIMITS,         \
        SANDBOX_STEP_EXEC

/* openat's flags that write: an open allowed only without them reads. */
#define OPEN_WRITES (O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND)

/*
 * Every host's: its channel (fd 3: sendmsg and recvmsg, the memfds it
 * passes read with pread64), its event loop (libevent's epoll back end;
 * poll for the channel's flush before exit), descriptor flags and memfd
 * seals (not F_SETOWN nor F_SETSIG, which aim a signal at another
 * process), memory (brk, munmap, mremap, madvise; mmap and mprotect are
 * each role's), its ids, time and randomness, exit, signals to itself
 * only (abort(), raise(), a fault's handler), a terminal probe answered
 * as a non-tty (isatty()), and clone3 and openat2 answered ENOSYS so that
 * callers fall back to clone and openat, whose arguments a filter sees.
 */
extern const struct sandbox_rule sandbox_rules_host[];

/*
 * A host that runs threads (the native host's pool and a worker's own,
 * CoreCLR's): clone of a thread of this process only (in its namespaces,
 * untraced), futexes, robust lists, rseq, yielding, the CPU mask, an
 * alternate signal stack, and thread names (PR_SET_NAME, PR_GET_NAME).
 */
extern const struct sandbox_rule sandbox_rules_threads[];

#endif /* WM_SANDBOX_RULES_H */
