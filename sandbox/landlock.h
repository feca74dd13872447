/*
 * landlock.h — the paths a host may reach (issue 7; research/sandbox.md
 * §4.1 step 5), enforced by Landlock: read and execute under the system's
 * code (/usr and the /bin, /lib links) and the host binary's directory,
 * /etc/ld.so.cache read, read and write under /tmp without execute,
 * /dev/null, /dev/zero and /dev/urandom; nothing else, whatever the file
 * modes say.  Where the kernel's ABI has them (4 and 6), TCP bind and
 * connect are refused, and signals and abstract unix sockets are scoped
 * to the host's own domain (it cannot signal the daemon or another host).
 *
 * A memfd is not beneath any path: the library opened through
 * /proc/self/fd/N stays loadable (measured).  The ruleset is built before
 * fork (sandbox_landlock_ruleset), enforced by the child between fork and
 * execve (sandbox_landlock_restrict, async-signal-safe).
 */
#ifndef WM_SANDBOX_LANDLOCK_H
#define WM_SANDBOX_LANDLOCK_H

#include <stddef.h>

/* The kernel's Landlock ABI is found by start-up detection
 * (sandbox.h, landlock_abi of struct sandbox_support). */

/*
 * A ruleset for a host whose binary is in host_dir, for ABI abi, with its
 * role's extra read-only paths reads (struct sandbox_role; NULL for
 * none): its descriptor (close-on-exec), or -1 with a message in err.
 * Paths that do not exist on this machine are left out.
 */
int sandbox_landlock_ruleset(int abi, const char *host_dir,
                             const char *const *reads, char *err,
                             size_t errlen);

/* No new privileges, then the ruleset enforced on the caller: 0, or -1
 * with errno. */
int sandbox_landlock_restrict(int ruleset_fd);

/*
 * For a host in its private root (root.h): the ruleset built from the
 * paths as the root shows them (its /tmp is its own) and the binary's
 * descriptor binfd (which execveat() will run) and the role's reads, then
 * enforced as
 * sandbox_landlock_restrict() does.  System calls only: async-signal-safe.
 * 0, or -1 with errno.
 */
int sandbox_landlock_enter(int abi, int binfd, const char *const *reads);

#endif /* WM_SANDBOX_LANDLOCK_H */
