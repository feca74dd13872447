/*
 * audit.h — which system call a host's seccomp filter killed it for
 * (issue 7; DESIGN §2: every death classified, a seccomp one with its
 * call).
 *
 * Why the kernel's audit records: the obvious way, reading
 * /proc/<pid>/syscall after waitid(WNOWAIT) as nsjail does, reads
 * "-1 0x0 0x0" here for a process a filter killed (measured on this
 * kernel, 6.18: a zombie's stack is gone by then, so the kernel has no
 * registers to show), and a SIGSYS handler in the host would be the
 * untrusted code's word.  The kernel logs every kill-process verdict
 * (actions_logged has kill_process by default) as an AUDIT_SECCOMP
 * record (type 1326: "pid=N ... sig=31 arch=c000003e syscall=41 ..."),
 * multicast on the audit netlink socket's read-only log group to any
 * listener with CAP_AUDIT_READ, auditd or not.  The record is queued in
 * the dying process's context, before its parent can reap it (measured:
 * it is readable when waitpid() returns).  The pid in it is in the
 * initial pid namespace: the host's pid as the daemon sees it.
 *
 * Without CAP_AUDIT_READ, outside the initial network namespace, or with
 * audit disabled at boot (audit=0), there is no record: the death is
 * still reason seccomp, without its call.
 */
#ifndef WM_SANDBOX_AUDIT_H
#define WM_SANDBOX_AUDIT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A non-blocking, close-on-exec socket subscribed to the kernel's audit
 * records, or -1 with a message in err. */
int sandbox_audit_open(char *err, size_t errlen);

/* One seccomp kill. */
struct sandbox_audit_kill {
    pid_t pid;     /* in the initial pid namespace */
    int syscall;   /* the call's number on arch */
    uint32_t arch; /* AUDIT_ARCH_* (libseccomp's SCMP_ARCH_* are these) */
};

/*
 * Reads every record queued on fd without blocking; for each seccomp
 * kill, cb.  Returns how many it passed.
 */
unsigned sandbox_audit_read(int fd,
                            void (*cb)(void *arg,
                                       const struct sandbox_audit_kill *k),
                            void *arg);

/* Parses one record's text (for the tests): 0 and *k, or -1 when it is not
 * a seccomp kill (a log verdict, an errno one: sig=0). */
int sandbox_audit_parse(const char *text, size_t len,
                        struct sandbox_audit_kill *k);

/* The call's name ("socket"), from libseccomp's tables for arch; its
 * number ("syscall 41") in a build without libseccomp or for a number no
 * table has.  Into buf; returns buf. */
char *sandbox_syscall_name(int nr, uint32_t arch, char *buf, size_t len);

#endif /* WM_SANDBOX_AUDIT_H */
