/*
 * reap.c — reaping every child of the master on SIGCHLD (reap.h).
 *
 * Why waitpid(-1): as a child subreaper the master inherits the orphans of
 * its hosts (a host that forked and died), which it never spawned and
 * cannot name; only a wildcard wait reaps them, so no zombie is left
 * behind whatever a host does.  The consequence is a rule for the rest of
 * the master: nothing else may wait for a child asynchronously (a
 * synchronous fork + waitpid(pid) from start-up code is fine: the loop does
 * not run in between).
 *
 * The signal is delivered through libevent (evsignal), so the reaping runs
 * on the loop like any other callback, never in a signal handler.  Signals
 * coalesce, hence the loop until waitpid() finds nothing.
 */
#include "config.h"

#include "master/supervise/reap.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <event2/event.h>

#include "master/core/log.h"

struct supervise_reaper {
    struct event *ev;
    supervise_reap_cb cb;
    void *arg;
};

void
supervise_wait_describe(int wstatus, char *buf, size_t len)
{
    if (WIFEXITED(wstatus)) {
        snprintf(buf, len, "exit code %d", WEXITSTATUS(wstatus));
    } else if (WIFSIGNALED(wstatus)) {
        int sig = WTERMSIG(wstatus);
        const char *abbrev = sigabbrev_np(sig);
        snprintf(buf, len, "signal %d (SIG%s)%s", sig, abbrev ? abbrev : "?",
                 WCOREDUMP(wstatus) ? ", core dumped" : "");
    } else {
        snprintf(buf, len, "wait status 0x%x", (unsigned)wstatus);
    }
}

void
supervise_reaper_poll(struct supervise_reaper *r)
{
    for (;;) {
        int wstatus;
        pid_t pid = waitpid(-1, &wstatus, WNOHANG);
        if (pid == 0)
            return; /* children remain, none has exited */
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            if (errno != ECHILD)
                log_errno_err("waitpid");
            return;
        }
        if (!r->cb(pid, wstatus, r->arg)) {
            char how[64];
            supervise_wait_describe(wstatus, how, sizeof how);
            log_info("reaped pid %d, no host of ours (an orphan of one): "
                     "%s",
                     (int)pid, how);
        }
    }
}

static void
on_sigchld(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    supervise_reaper_poll(arg);
}

struct supervise_reaper *
supervise_reaper_new(struct event_base *base, supervise_reap_cb cb, void *arg)
{
    struct supervise_reaper *r;
    int saved;

    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
        log_errno_err("prctl(PR_SET_CHILD_SUBREAPER)");
        return NULL;
    }
    r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->cb = cb;
    r->arg = arg;
    r->ev = evsignal_new(base, SIGCHLD, on_sigchld, r);
    if (r->ev == NULL || evsignal_add(r->ev, NULL) < 0) {
        saved = r->ev ? EIO : ENOMEM;
        if (r->ev)
            event_free(r->ev);
        free(r);
        errno = saved;
        return NULL;
    }
    return r;
}

void
supervise_reaper_free(struct supervise_reaper *r)
{
    if (r == NULL)
        return;
    event_free(r->ev);
    free(r);
}
