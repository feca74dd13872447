/*
 * host.h — the operating-system side of a host process: spawning it with
 * its channel on fd 3, killing it, and the sealed memfd that carries its
 * code (DESIGN §2, §3).  Private to the supervisor (supervise.c).
 */
#ifndef WM_MASTER_HOST_H
#define WM_MASTER_HOST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <stdbool.h>

#include "sandbox/creds.h"
#include "sandbox/sandbox.h"
#include "sandbox/spawn.h"

struct sandbox_cg;

/* What to exec for one host. */
struct supervise_spawn {
    const struct sandbox_role *role; /* its steps (sandbox.h) */
    const char *path;      /* the host binary (absolute); also argv[0] */
    const char *worker_id; /* WM_WORKER_ID */
    const char *engine;    /* WM_ENGINE, may be NULL */
    int fd;                /* the host's end of the channel: becomes fd 3 */
    const struct sandbox_cg *cg; /* joined before execve, or NULL */
    int landlock_fd; /* a Landlock ruleset entered before execve, or -1 */
    /* Its own user (creds.h): uid and gid, no capability (cap_last: the
     * kernel's highest); drop false keeps the daemon's. */
    bool drop;
    unsigned namespaces; /* SANDBOX_NS_*: mount brings the private root,
                            pid the init (spawn.h) */
    int landlock_abi;    /* > 0: with the private root, the child builds and
                            enters its Landlock domain (landlock.h) */
    uid_t uid;
    int cap_last;
    struct sandbox_rlimits rlimits;
    enum sandbox_level level; /* what these steps give, with the host's
                                 filter: WM_CONFINEMENT for its Hello */
};

/*
 * Starts s->path by the sandbox's spawn (spawn.h): s->fd as fd 3,
 * /dev/null as stdin, stdout and stderr shared with the master, every
 * other descriptor closed, its own session, PR_SET_PDEATHSIG SIGKILL, the
 * role's confinement and a scrubbed environment (PATH, LANG=C.UTF-8,
 * WM_WORKER_ID, WM_ENGINE, WM_CONFINEMENT, and the sanitizers'
 * *SAN_OPTIONS and WM_SANDBOX_DEBUG when set).  The caller keeps s->fd
 * (and closes it).  Returns 0 with *child filled once the exec succeeded,
 * or -1 with errno and a message in err naming the step that failed.
 */
int supervise_host_spawn(const struct supervise_spawn *s,
                         struct sandbox_child *child, char *err, size_t errlen);

/* SIGKILL to the host's process group and to the host itself (a host that
 * left its group still dies); for a host with an init, pid is the init's,
 * and its namespace dies with it.  Only for a pid not yet reaped.  Returns 0,
 * or -1 with errno. */
int supervise_host_kill(pid_t pid);

/* A memfd named `name` holding data[0..len), sealed against every change
 * (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL), offset 0,
 * close-on-exec.  Returns the descriptor, or -1 with errno. */
int supervise_code_memfd(const char *name, const uint8_t *data, size_t len);

#endif /* WM_MASTER_HOST_H */
