/*
 * reap.h — the master as child subreaper: SIGCHLD on the event loop, every
 * exited child and reparented descendant reaped (DESIGN §2).  Its child is
 * the launcher (which reaps the hosts); what is reparented here are the
 * hosts' inits when the launcher died.  Private to the supervisor
 * (supervise.c makes the reaper; exits.c describes the exits).
 */
#ifndef WM_MASTER_REAP_H
#define WM_MASTER_REAP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct event_base;
struct supervise_reaper;

/* One reaped process: return true if it was one of the caller's (which
 * then logs its exit), false for a stranger (the reaper logs it). */
typedef bool (*supervise_reap_cb)(pid_t pid, int wstatus, void *arg);

/*
 * Makes the process a child subreaper (PR_SET_CHILD_SUBREAPER, so that the
 * orphans of hosts come back to it) and watches SIGCHLD on base: each
 * signal reaps with waitpid(-1, WNOHANG) until nothing is left and passes
 * every pid to cb.  One reaper per process.  Returns NULL with errno.
 */
struct supervise_reaper *supervise_reaper_new(struct event_base *base,
                                              supervise_reap_cb cb, void *arg);

/* Reaps what has exited now, as on SIGCHLD. */
void supervise_reaper_poll(struct supervise_reaper *r);

/* Stops watching SIGCHLD (the process stays a subreaper).  NULL: no-op. */
void supervise_reaper_free(struct supervise_reaper *r);

/* "exit code 3", "signal 11 (SIGSEGV)", "signal 9 (SIGKILL), core dumped"
 * for a wait status. */
void supervise_wait_describe(int wstatus, char *buf, size_t len);

#endif /* WM_MASTER_REAP_H */
