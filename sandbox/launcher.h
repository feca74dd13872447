/*
 * launcher.h — the privileged launcher (DESIGN §2, privilege separation;
 * issue 7): the one process of the daemon that keeps the rights to start
 * and confine engine hosts, so that the master can drop to an
 * unprivileged user after start-up.
 *
 * The daemon forks it early, as it starts (sandbox_launcher_start()),
 * with everything that decides how a host is confined fixed from then
 * on: the engines' host binaries by name, the role and settings
 * (environment) of each, the namespaces and Landlock ABI detection found,
 * the range of host users, the pids and cpu limits.  The master then
 * asks over one private SOCK_SEQPACKET socket, and only two things:
 *
 *   spawn  an engine by name, for a worker id, with a memory limit, the
 *          host's end of the channel passed as SCM_RIGHTS: the launcher
 *          makes its cgroup, takes a free user, starts it confined
 *          (spawn.h) and answers with its pids and confinement level, or
 *          with why it could not;
 *   kill   a host it started, by the number of its spawn.
 *
 * Every request is checked (its size, its strings' termination and
 * alphabet, the engine among its own, the spawn among its live ones); a
 * request that fails a check is answered as refused or dropped, never
 * acted on.  The launcher reaps its hosts (it is their child subreaper),
 * reads each one's exit record, its cgroup's OOM count and the kernel's
 * audit record of a seccomp kill, removes the cgroup, frees the user and
 * sends the master one death report per host.  When the master's end
 * closes (the master exits or dies), the launcher kills every host,
 * removes the daemon's cgroups and exits.
 *
 * The messages are fixed-size C structures: both ends are this same
 * binary.  Nothing here knows the master.
 */
#ifndef WM_SANDBOX_LAUNCHER_H
#define WM_SANDBOX_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/sandbox.h"

/* ---- what the launcher is started with -------------------------------- */

/* One engine the launcher may start. */
struct sandbox_launcher_engine {
    const char *name;                /* as the master names it */
    const char *path;                /* its host binary (absolute) */
    const struct sandbox_role *role; /* its steps and filters */
    bool zygote; /* its hosts are forked from a zygote (zygote.h) the
                    launcher starts as it starts, and again when one
                    is needed after it ended */
    /* "NAME=value" strings added to its hosts' environment (the engine's
     * settings from the daemon's configuration), NULL-terminated, at most
     * LAUNCHER_ENGINE_ENV_MAX; NULL for none. */
    char *const *env;
};

#define LAUNCHER_ENGINE_ENV_MAX 8

struct sandbox_launcher_config {
    const struct sandbox_launcher_engine *engines;
    size_t nengines;
    /* Confinement: false (a build --without-sandbox) starts hosts with
     * no namespace, user, cgroup or Landlock domain. */
    bool confine;
    unsigned namespaces; /* SANDBOX_NS_* hosts of their own user get */
    int landlock_abi;    /* 0: no Landlock domain */
    /* Hosts' own users: uid_base + a free slot of uid_count; a count of
     * 0, or a launcher that is not root, keeps the launcher's user. */
    uint32_t uid_base;
    uint32_t uid_count;
    uint32_t pids_max;    /* each host's cgroup pids.max and RLIMIT_NPROC */
    uint32_t cpu_percent; /* each host's cgroup cpu quota; 0: none */
};

/*
 * Forks the launcher.  In the parent: its pid, with *fd the master's end
 * of the socket (close-on-exec); -1 with a message in err.  The child
 * closes every other descriptor but 0-2, ignores SIGINT, SIGTERM and
 * SIGHUP (the master decides when hosts end), and never returns.
 */
pid_t sandbox_launcher_start(const struct sandbox_launcher_config *c, int *fd,
                             char *err, size_t errlen);

/* ---- the messages ------------------------------------------------------- */

#define LAUNCHER_ENGINE_MAX 64
#define LAUNCHER_WORKER_MAX 64
#define LAUNCHER_TENANT_MAX 72
#define LAUNCHER_WHY_MAX 400

enum launcher_msg {
    LAUNCHER_SPAWN = 1,   /* master → launcher, with the channel fd */
    LAUNCHER_KILL = 2,    /* master → launcher */
    LAUNCHER_SPAWNED = 3, /* launcher → master: the answer to a spawn */
    LAUNCHER_DEATH = 4,   /* launcher → master: a host ended */
    LAUNCHER_ADOPT = 5,   /* master → launcher: a pool host joins a tenant */
};

struct launcher_spawn {
    uint32_t type; /* LAUNCHER_SPAWN */
    uint32_t seq;  /* the master's; names the host from then on */
    char engine[LAUNCHER_ENGINE_MAX]; /* NUL-terminated */
    char worker_id[LAUNCHER_WORKER_MAX];
    uint32_t memory_mb; /* its cgroup's memory limit; 0: none */
    /* Its tenant ([a-z0-9._-], "" for none: a pool host): its cgroup goes
     * under the tenant's group, whose cpu share the launcher writes from
     * these two (sandbox_cg_create_in()). */
    char tenant[LAUNCHER_TENANT_MAX];
    uint32_t cpu_weight; /* 1-10000 */
    uint32_t cpu_max;    /* the tenant's quota, % of one CPU; 0: none */
};

/* A pool host taken by a worker of tenant: its processes move into a new
 * leaf under the tenant's group (sandbox_cg_move()), as if it had been
 * spawned for that worker.  No answer: a failure is logged, the host
 * stays where it was. */
struct launcher_adopt {
    uint32_t type; /* LAUNCHER_ADOPT */
    uint32_t seq;  /* of the host's spawn */
    char worker_id[LAUNCHER_WORKER_MAX];
    char tenant[LAUNCHER_TENANT_MAX];
    uint32_t cpu_weight;
    uint32_t cpu_max;
};

struct launcher_kill {
    uint32_t type; /* LAUNCHER_KILL */
    uint32_t seq;  /* of the host's spawn */
};

struct launcher_spawned {
    uint32_t type; /* LAUNCHER_SPAWNED */
    uint32_t seq;
    int32_t error;      /* 0: started; else an errno */
    int32_t pid;        /* the process to wait for: the init, or the host */
    int32_t host_pid;   /* the host itself */
    uint32_t init;      /* pid is an init */
    uint32_t level;     /* enum sandbox_level its spawn steps give */
    uint32_t uid;       /* the user it runs as */
    char fail_type[24]; /* refused: a reason word (DESIGN §6) */
    char why[LAUNCHER_WHY_MAX]; /* refused: the step and the cause */
};

struct launcher_death {
    uint32_t type; /* LAUNCHER_DEATH */
    uint32_t seq;
    int32_t wstatus; /* the host's own (its init's record), else the
                        process's */
    uint32_t oom;    /* its cgroup's OOM killer killed in it */
    int32_t syscall; /* the call a seccomp filter killed it for, or -1 */
    char syscall_name[32];
    uint32_t zygote_lost; /* it was killed because the zygote it was forked
                             from died (their parent-death signal): its
                             death is not its worker's fault */
};

#endif /* WM_SANDBOX_LAUNCHER_H */
