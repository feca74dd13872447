/*
 * init.c — the PID 1 of a host's pid namespace (spawn.h).
 *
 * Why an init at all: the PID 1 of a namespace gets no signal it has no
 * handler for (research/sandbox.md finding 4: SIGTERM and RLIMIT_CPU's
 * SIGXCPU were dropped), and the namespace's orphans are reparented to
 * it.  So the host runs as PID 2 with default dispositions, and this
 * process forwards SIGTERM and SIGINT to it, reaps everything, and when
 * the host ends tells the spawner how (one struct sandbox_exit on the exit
 * pipe), then exits; the kernel kills whatever else is left in the
 * namespace.
 *
 * It runs ours alone: its descriptors are closed but the exit pipe's, it
 * never reads anything the host writes, and the host, under another uid
 * and its seccomp filter, cannot signal or trace it.  Async-signal-safe
 * throughout: it is a fork of the spawner.
 */
#include "config.h"

#include "sandbox/spawn.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The host's pid, for the forwarding handler (set before it can run). */
static volatile pid_t host;

static void
forward(int sig)
{
    int saved = errno;

    if (host > 0)
        (void)kill(host, sig);
    errno = saved;
}

/* Every descriptor but keep. */
static void
close_all_but(int keep)
{
    if (keep > 0)
        (void)syscall(SYS_close_range, 0u, (unsigned)keep - 1, 0u);
    (void)syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0u);
}

pid_t
sandbox_init_run(int exit_fd)
{
    struct sigaction sa;
    sigset_t block, none;
    pid_t pid;

    /* Blocked across the fork: the host's copy of the handler must never
     * run (it would signal with host == 0, the whole group). */
    sigemptyset(&none);
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    if (sigprocmask(SIG_BLOCK, &block, NULL) < 0)
        return -1;
    pid = _Fork(); /* no fork handlers: async-signal-safe */
    if (pid < 0)
        return -1;
    if (pid == 0) {
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        return 0; /* the host: on with the steps */
    }

    host = pid;
    /* Its own name in ps(1), not its spawner's (the launcher's). */
    (void)prctl(PR_SET_NAME, "wm-init", 0, 0, 0);
    close_all_but(exit_fd);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    (void)sigaction(SIGTERM, &sa, NULL);
    (void)sigaction(SIGINT, &sa, NULL);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);

    for (;;) {
        int st;
        pid_t w = waitpid(-1, &st, 0);

        if (w < 0) {
            if (errno == EINTR)
                continue;
            _exit(126); /* no child left, and no record: cannot happen */
        }
        if (w != pid)
            continue; /* an orphan of the host's */
        const struct sandbox_exit rec = {
            .magic = SANDBOX_EXIT_MAGIC,
            .pid = (int32_t)w,
            .wstatus = st,
        };
        while (write(exit_fd, &rec, sizeof rec) < 0 && errno == EINTR)
            ;
        /* Its status as near the host's as an exit can say; the record
         * is the truth. */
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
}
