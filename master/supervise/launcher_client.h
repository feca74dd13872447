/*
 * launcher_client.h — the master's client of the launcher: the privileged
 * process (sandbox/launcher.h; DESIGN §2) the master forks as it starts and
 * asks to start and kill host processes, and which reaps them and reports
 * their deaths.  Private to the supervisor (master/supervise/: proc.c and
 * pool.c spawn, proc.c kills, exits.c reads the reports).
 */
#ifndef WM_MASTER_LAUNCHER_CLIENT_H
#define WM_MASTER_LAUNCHER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/launcher.h"

struct conf;
struct engines;
struct sandbox_support;
struct launcher_client;

/*
 * Forks the launcher with what decides how hosts are confined: every
 * engine of engines by name, and with s (what start-up detection found;
 * NULL for a build --without-sandbox: hosts unconfined) the namespaces
 * and Landlock ABI, conf's host users and pids and cpu limits.  NULL with
 * a message in err.
 */
struct launcher_client *launcher_client_start(const struct engines *engines,
                                              const struct sandbox_support *s,
                                              const struct conf *conf,
                                              char *err, size_t errlen);

/* Its socket (to watch for death reports) and its pid. */
int launcher_client_fd(const struct launcher_client *l);
pid_t launcher_client_pid(const struct launcher_client *l);

/* A message from the launcher: its type is its first word. */
union launcher_client_msg {
    uint32_t type; /* LAUNCHER_DEATH or LAUNCHER_SPAWNED */
    struct launcher_death death;
    struct launcher_spawned spawned;
};

/*
 * Asks the launcher to start q->engine for q->worker_id with chan (the
 * host's end of the channel; the caller keeps and closes it) and waits
 * for its answer in *r (r->error 0: started).  Death reports and answers
 * to launcher_client_spawn_send() that arrive meanwhile are kept for
 * launcher_client_next().  0, or -1 with a message in err when the launcher
 * did not answer (it is gone).
 */
int launcher_client_spawn(struct launcher_client *l,
                          const struct launcher_spawn *q, int chan,
                          struct launcher_spawned *r, char *err, size_t errlen);

/* The same without waiting (the master's loop goes on while the host is
 * forked and confined): the answer comes from launcher_client_next().  0,
 * or -1 with a message in err (the launcher is gone). */
int launcher_client_spawn_send(struct launcher_client *l,
                               const struct launcher_spawn *q, int chan,
                               char *err, size_t errlen);

/* Asks the launcher to SIGKILL the host of spawn seq (its init and so its
 * pid namespace, its process group).  0, or -1 with errno. */
int launcher_client_kill(struct launcher_client *l, uint32_t seq);

/* Asks the launcher to move a pool host into its worker's tenant's
 * cgroup (struct launcher_adopt; no answer).  0, or -1: the launcher is
 * gone. */
int launcher_client_adopt(struct launcher_client *l,
                          const struct launcher_adopt *a);

/* The next death report or answer to a launcher_client_spawn_send(), kept
 * or on the socket, in the launcher's order, without blocking: its type
 * (LAUNCHER_DEATH, LAUNCHER_SPAWNED) and *m, 0 when there is none now, -1
 * when the launcher is gone. */
int launcher_client_next(struct launcher_client *l,
                         union launcher_client_msg *m);

/* Closes the socket (the launcher then kills every host, removes the
 * daemon's cgroups and exits), waits for the launcher, frees l.  NULL is
 * fine. */
void launcher_client_stop(struct launcher_client *l);

#endif /* WM_MASTER_LAUNCHER_CLIENT_H */
