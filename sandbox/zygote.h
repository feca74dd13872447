/*
 * zygote.h — hosts forked from a process that made its engine ready once
 * (DESIGN §2, prefork; issue 8; research/zygote-coldstart.md).
 *
 * An engine whose descriptor says `spawn = zygote` is started once by the
 * launcher as `<host> --zygote`: the zygote initialises its runtime (for
 * Python: the interpreter, the allowed imports, a frozen heap), says it
 * is ready, and from then on forks one host per request.  Each fork takes
 * the same spawner's steps as an exec'd host (spawn.h, fork_only): its
 * cgroup (joined through descriptors the launcher opened), its mount and
 * pid namespaces with the private root and the init, its user, Landlock,
 * descriptors and rlimits; then the host confines itself (its role's
 * filter) as an exec'd one does.  The network, IPC and UTS namespaces are
 * the zygote's own, made once when the launcher started it, and shared by
 * its hosts (DESIGN §10).
 *
 * The zygote is root (it must make namespaces and change users) but runs
 * nothing of a worker's: a worker's code arrives only in a forked host,
 * over its channel, after the fork's steps.  It takes requests from the
 * launcher only, over a private SOCK_SEQPACKET socket on its fd 3, as
 * fixed-size structures (both ends are this project's code):
 *
 *   ready   zygote → launcher, once: error 0, or why its start failed
 *           (then it exits)
 *   fork    launcher → zygote, with the channel and the cgroup's join
 *           descriptors: a host with the request's user, namespaces and
 *           limits
 *   forked  zygote → launcher: the host's pid (its init's, with an init)
 *           and the init's exit pipe, or why the fork failed
 *   kill    launcher → zygote: SIGKILL to a host it forked, by pid (the
 *           zygote reaps them, so only it knows a pid is still theirs)
 *   death   zygote → launcher: a host it forked was reaped, with its wait
 *           status
 *
 * When the launcher's end closes, the zygote kills its hosts and exits;
 * when the zygote dies, its hosts die with it (their parent-death
 * signal), and the launcher, their subreaper, reaps them.
 *
 * zygote.c has both ends: the launcher's (sandbox_zygote_start and the
 * message helpers) and the zygote's loop (sandbox_zygote_serve).
 */
#ifndef WM_SANDBOX_ZYGOTE_H
#define WM_SANDBOX_ZYGOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/creds.h"
#include "sandbox/sandbox.h"

/* The argument a host binary is started with to be a zygote. */
#define SANDBOX_ZYGOTE_ARG "--zygote"

#define ZYGOTE_WHY_MAX 400
/* The cgroup join descriptors a fork brings at most (one per
 * controller's hierarchy). */
#define ZYGOTE_CG_FDS 4
/* A fork's descriptors: the channel, a Landlock ruleset, the cgroup's. */
#define ZYGOTE_FDS_MAX (2 + ZYGOTE_CG_FDS)

enum zygote_msg {
    ZYGOTE_READY = 1,  /* zygote → launcher */
    ZYGOTE_FORK = 2,   /* launcher → zygote: [channel, Landlock ruleset
                          when landlock, cgroup fds...] */
    ZYGOTE_FORKED = 3, /* zygote → launcher: [exit pipe] with an init */
    ZYGOTE_KILL = 4,   /* launcher → zygote */
    ZYGOTE_DEATH = 5,  /* zygote → launcher */
};

struct zygote_ready {
    uint32_t type; /* ZYGOTE_READY */
    int32_t error; /* 0, or an errno with why */
    char why[ZYGOTE_WHY_MAX];
};

struct zygote_fork {
    uint32_t type;        /* ZYGOTE_FORK */
    uint32_t seq;         /* the launcher's spawn, echoed */
    uint32_t landlock;    /* a ruleset (landlock.h) follows the channel */
    uint32_t ncg;         /* cgroup descriptors after those */
    uint32_t namespaces;  /* SANDBOX_NS_MOUNT, _PID, _CGROUP of its own */
    int32_t landlock_abi; /* with its mount namespace: its domain built
                             from its root's paths */
    uint32_t drop;        /* its own user: uid, gid */
    uint32_t uid;
    uint32_t gid;
    struct sandbox_rlimits rlimits;
};

struct zygote_forked {
    uint32_t type; /* ZYGOTE_FORKED */
    uint32_t seq;
    int32_t error; /* 0, or an errno with why */
    int32_t pid;   /* the init, or the host (in the launcher's pid ns) */
    uint32_t init; /* pid is an init: its exit pipe comes with this */
    char why[ZYGOTE_WHY_MAX];
};

struct zygote_kill {
    uint32_t type; /* ZYGOTE_KILL */
    int32_t pid;
};

struct zygote_death {
    uint32_t type; /* ZYGOTE_DEATH */
    int32_t pid;
    int32_t wstatus;
};

/* ---- the launcher's end ------------------------------------------------ */

/* What a zygote is started with. */
struct sandbox_zygote_start {
    const char *path;    /* the engine's host binary */
    char *const *envp;   /* its environment */
    unsigned namespaces; /* SANDBOX_NS_NET, _IPC, _UTS its hosts share */
    int net_fd;          /* a network namespace made ahead, or -1 */
    int filters_fd;      /* the role's filters compiled, or -1 */
};

/*
 * Starts a zygote (spawn.h: its session, the shared namespaces, its
 * descriptors; it stays root).  Its pid, with *sock the launcher's end
 * of its socket (close-on-exec, blocking); -1 with a message in err.  It
 * is ready once sandbox_zygote_wait_ready() says so.
 */
pid_t sandbox_zygote_start(const struct sandbox_zygote_start *z, int *sock,
                           char *err, size_t errlen);

/*
 * Waits up to timeout_ms for the zygote's ready message on sock: 0, or
 * -1 with why in err (its own report, a timeout, its end closed).
 */
int sandbox_zygote_wait_ready(int sock, int timeout_ms, char *err,
                              size_t errlen);

/*
 * One message from the zygote on sock into *m (at most len bytes), with
 * up to one descriptor into *fd (-1 when none came): the message's size,
 * 0 when its end closed, -1 with errno (EAGAIN: none waiting, when
 * nonblocking is set).
 */
ssize_t sandbox_zygote_recv(int sock, void *m, size_t len, int *fd,
                            bool nonblocking);

/* Sends a message, with nfds descriptors: 0, or -1 with errno. */
int sandbox_zygote_send(int sock, const void *m, size_t len, const int *fds,
                        unsigned nfds);

/* ---- the zygote's end -------------------------------------------------- */

/* What the engine does around each fork (any may be NULL). */
struct sandbox_zygote_ops {
    const struct sandbox_role *role; /* its hosts' steps */
    void (*before_fork)(void);       /* in the zygote */
    void (*after_fork_parent)(void); /* in the zygote */
    void (*after_fork_child)(void);  /* in the host, after its steps */
};

/*
 * The zygote's loop, on the socket at fd 3 (the engine is initialised:
 * ready is sent first).  Returns only in a forked host, 0, with its
 * channel on fd 3 and the compiled filters on fd 4 when the zygote had
 * them; the zygote itself exits when the launcher's end closes.
 */
int sandbox_zygote_serve(const struct sandbox_zygote_ops *ops);

/* For an engine whose start failed: sends ready with the error on fd 3
 * and exits 1. */
void sandbox_zygote_fail(const char *why) __attribute__((noreturn));

#endif /* WM_SANDBOX_ZYGOTE_H */
