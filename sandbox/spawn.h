/*
 * spawn.h — starting a host confined (issue 7; DESIGN §2, §10;
 * research/sandbox.md §4.1): fork, the spawner's steps of the host's role
 * in the role's order (sandbox.h, enum sandbox_step), execve.
 *
 * Where the machine and the spawner's rights allow it (root, detection
 * found the namespace types), the child is the PID 1 of a pid namespace
 * of its own: a tiny init (init.c) that builds the private root, forks
 * the host as its only child, forwards SIGTERM and SIGINT to it, reaps
 * whatever ends in its namespace, and when the host ends writes one
 * record on the exit pipe (struct sandbox_exit) before it exits.  Killing
 * the init (SIGKILL) ends its whole namespace.
 *
 * A step that fails reports its name and errno over a close-on-exec pipe
 * ("building its private root: Operation not permitted"), and the start
 * fails with that message; a step the parameters leave out (no cgroup, no
 * namespaces, not root) is skipped.  Everything between fork and execve is
 * a system call or async-signal-safe; what needs memory or a lock is done
 * before fork.  Nothing here knows the master: the parameters are plain
 * data, so that a privileged launcher can spawn for an unprivileged
 * master (DESIGN §2).
 */
#ifndef WM_SANDBOX_SPAWN_H
#define WM_SANDBOX_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/creds.h"
#include "sandbox/sandbox.h"

struct sandbox_cg;

/* The channel's descriptor in every host (ipc/PROTOCOL.md). */
#define SANDBOX_CHANNEL_FD 3
/* The host's seccomp filters compiled by the launcher, when it has them
 * (sandbox.h, sandbox_role_compile()). */
#define SANDBOX_FILTERS_FD 4

/* What to start, and how confined. */
struct sandbox_spawn {
    const struct sandbox_role *role; /* its steps before SANDBOX_STEP_EXEC */
    const char *path;                /* the host binary (absolute) */
    char *const *argv;               /* built before: the child allocates */
    char *const *envp;               /* nothing */
    int channel_fd;                  /* becomes fd 3; the caller keeps it */
    int exec_fd; /* path opened O_PATH by the caller (the host's user may
                    not reach it): exec'd through it; -1: execve(path) */
    const struct sandbox_cg *cg; /* joined first, or NULL */
    unsigned namespaces;         /* SANDBOX_NS_*: MOUNT brings the private
                                    root (root.h), PID the init */
    int landlock_abi; /* > 0, with the private root: the child builds its
                         Landlock domain from the root's paths */
    int landlock_fd;  /* else a ruleset built before (landlock.h), or -1 */
    int filters_fd;   /* the role's filters compiled (sandbox.h): fd 4 of
                         the host; -1: none */
    int net_fd;       /* with SANDBOX_NS_NET: a new network namespace made
                         before (nothing else in it), entered instead of
                         unsharing one; -1: unshare */
    bool fork_only;   /* no exec: the child returns from sandbox_spawn()
                         after the spawner's steps, with no_new_privs set
                         (a zygote's fork: zygote.h); path, argv, envp
                         and exec_fd are unused */
    bool drop;        /* its own uid and gid, no capability (creds.h) */
    uid_t uid;
    gid_t gid;
    struct sandbox_rlimits rlimits;
};

/* A started host. */
struct sandbox_child {
    pid_t pid;   /* the process to kill and to reap: the init when there
                    is one, else the host itself */
    bool init;   /* pid is an init (exit_fd carries the host's end) */
    int exit_fd; /* the exit pipe's read end (close-on-exec,
                    non-blocking), or -1 without an init */
};

/* The record an init writes when its host ended. */
struct sandbox_exit {
    uint32_t magic; /* SANDBOX_EXIT_MAGIC */
    int32_t pid;    /* the host's pid in its namespace (2) */
    int32_t wstatus;
};

#define SANDBOX_EXIT_MAGIC 0x77657869u /* "wexi" */

/*
 * Forks and starts s->path confined by the spawner's steps of s->role.
 * The child's descriptors are 0 (/dev/null), 1 and 2 (the caller's, or
 * /dev/null where it has none), 3 (the channel), 4 (the compiled filters,
 * when given); nothing else.  Returns 0
 * with *c filled once the host is exec'd, or -1 with errno and a message
 * in err naming the step that failed (the child reaped).
 *
 * With s->fork_only, it returns twice: in the caller as above (once the
 * child has taken its steps), and in the child with 0 and c->pid 0, with
 * the descriptors above and the steps taken: the child goes on from there
 * as the host.
 */
int sandbox_spawn(const struct sandbox_spawn *s, struct sandbox_child *c,
                  char *err, size_t errlen);

/*
 * The host's wait status from the init's exit pipe, once the init is
 * reaped: 1 and *wstatus, or 0 when the init wrote none (it was killed,
 * or died first: its own status is then the truth).
 */
int sandbox_exit_read(int exit_fd, int *wstatus);

/* The run of the init (init.c), in the child: forks the host, which
 * returns 0 from here to go on with the steps; the init never returns.
 * exit_fd: the pipe's write end. */
pid_t sandbox_init_run(int exit_fd);

#endif /* WM_SANDBOX_SPAWN_H */
