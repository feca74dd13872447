/*
 * root.h — a host's private file system (issue 7; research/sandbox.md
 * §4.1 step 4): in a mount namespace of its own, a small tmpfs becomes its
 * root, holding read-only binds of /usr (with the /bin, /lib, /lib64 links
 * a merged-/usr system has) and /etc/ld.so.cache, the devices null, zero
 * and urandom, a noexec /tmp of its own and a procfs that shows only its
 * own processes; the old root is detached and the new one made read-only.
 * The daemon's state, its control socket, other workers' files and the
 * machine's /tmp are not in it.  The host's binary need not be: it is
 * exec'd through a descriptor opened before.
 *
 * Called between fork and execve, as root, after unshare(CLONE_NEWNS):
 * async-signal-safe (system calls only).
 */
#ifndef WM_SANDBOX_ROOT_H
#define WM_SANDBOX_ROOT_H

/*
 * Builds the root and enters it; with execfd >= 0 (an O_PATH descriptor
 * of the host's binary), the binary is bound read-only at its own path
 * in it too (a role's exe_in_root, sandbox.h).  0, or -1 with errno and
 * *step naming what failed ("mounting the tmpfs root", ...).
 */
int sandbox_root_enter(int execfd, const char **step);

#endif /* WM_SANDBOX_ROOT_H */
