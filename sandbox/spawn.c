/*
 * spawn.c — fork, the role's spawner steps, execve (spawn.h).
 *
 * Why fork + exec by hand: the child must end up with exactly one extra
 * descriptor at a fixed number (the channel on fd 3), nothing else
 * inherited, a known signal state, and its confinement applied in the
 * role's order before the host's first instruction; posix_spawn can do
 * none of that.  Everything the child needs (argv, envp, the binary's
 * descriptor, the cgroup's files, a Landlock ruleset) is made before
 * fork(), so that the child runs only system calls and async-signal-safe
 * functions.
 *
 * The pid namespace: the spawning thread unshares CLONE_NEWPID (which
 * moves only its future children), forks, and goes back to its own
 * namespace with setns; so the child is the PID 1 of a namespace of its
 * own from its first instruction (no third process, no reparenting), and
 * the spawner is unchanged after the call.
 *
 * Failure reports: a struct child_error on a close-on-exec pipe.  The
 * parent's read returns 0 bytes when the host exec'd (the host's copy
 * closed with the exec, the init's before it waits) or the step, its
 * detail and errno.
 */
#include "config.h"

#include "sandbox/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "sandbox/landlock.h"
#include "sandbox/root.h"

/* What the child reports when it cannot reach execve(). */
struct child_error {
    int step; /* enum sandbox_step, or one of the PRE_* below */
    int err;  /* errno */
    char detail[80];
};

/* Failures of the fork's own contract, before any step. */
enum {
    PRE_FD = 100, /* the descriptors' shuffle onto 3 */
    PRE_DEVNULL,  /* /dev/null for the missing of 0-2 */
};

const char *
sandbox_step_name(enum sandbox_step step)
{
    switch (step) {
    case SANDBOX_STEP_END:
        return "end";
    case SANDBOX_STEP_SESSION:
        return "starting its session";
    case SANDBOX_STEP_CGROUP:
        return "joining its cgroup";
    case SANDBOX_STEP_NAMESPACES:
        return "unsharing its namespaces";
    case SANDBOX_STEP_ROOT:
        return "building its private root";
    case SANDBOX_STEP_INIT:
        return "starting its pid namespace's init";
    case SANDBOX_STEP_CREDS:
        return "dropping to its own user";
    case SANDBOX_STEP_LANDLOCK:
        return "entering its Landlock domain";
    case SANDBOX_STEP_FDS:
        return "closing inherited descriptors";
    case SANDBOX_STEP_RLIMITS:
        return "lowering its rlimits";
    case SANDBOX_STEP_EXEC:
        return "execve";
    case SANDBOX_STEP_NO_NEW_PRIVS:
        return "no_new_privs";
    case SANDBOX_STEP_MDWE:
        return "MDWE";
    case SANDBOX_STEP_FILTER:
        return "loading its seccomp filter";
    }
    return "?";
}

static const char *
pre_name(int step)
{
    switch (step) {
    case PRE_FD:
        return "setting up the channel descriptor";
    case PRE_DEVNULL:
        return "opening /dev/null";
    default:
        return sandbox_step_name((enum sandbox_step)step);
    }
}

/* Closes [from, to].  close_range(2) when the kernel has it; else every
 * number up to the descriptor limit (async-signal-safe, unlike reading
 * /proc/self/fd). */
static int
close_from_to(int from, int to)
{
    if (from > to)
        return 0;
    if (syscall(SYS_close_range, (unsigned)from, (unsigned)to, 0u) == 0)
        return 0;
    if (errno != ENOSYS)
        return -1;
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 1 << 20)
        max = 1 << 20;
    for (long fd = from; fd <= to && fd < max; fd++)
        (void)close((int)fd); /* EBADF for the many that are not open */
    return 0;
}

/* Closes everything from `from` on but keep[0..n) (ascending, -1 entries
 * ignored). */
static int
close_but(int from, const int *keep, int n)
{
    for (int i = 0; i < n; i++) {
        if (keep[i] < from)
            continue;
        if (close_from_to(from, keep[i] - 1) < 0)
            return -1;
        from = keep[i] + 1;
    }
    return close_from_to(from, ~0u >> 1);
}

static void
sort3(int *v)
{
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (v[j] < v[i]) {
                int t = v[i];
                v[i] = v[j];
                v[j] = t;
            }
}

static void
copy_detail(char *dst, size_t len, const char *src)
{
    size_t n = src ? strlen(src) : 0;

    if (n >= len)
        n = len - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

/* The child, between fork() and execve(): async-signal-safe calls only.
 * Never returns but with s->fork_only, once its steps are taken. */
static void
child(const struct sandbox_spawn *s, int errfd, int exitfd, bool pidns)
{
    struct child_error ce = { PRE_FD, 0, "" };
    int execfd = s->exec_fd, llfd = -1, ffd = -1, chfd, devnull;
    pid_t parent = getppid(); /* 0 in a pid namespace: the parent is out */
    const char *detail = NULL;
    bool have[3];

    /* Every descriptor the child keeps moves above 4 first, so that
     * none is clobbered by the dup2() onto 3 or 4 (any may be 0 to 4). */
    errfd = fcntl(errfd, F_DUPFD_CLOEXEC, SANDBOX_FILTERS_FD + 1);
    if (errfd < 0)
        _exit(127);
    chfd = fcntl(s->channel_fd, F_DUPFD_CLOEXEC, SANDBOX_FILTERS_FD + 1);
    if (chfd < 0)
        goto fail;
    if (execfd >= 0 &&
        (execfd = fcntl(execfd, F_DUPFD_CLOEXEC, SANDBOX_FILTERS_FD + 1)) < 0)
        goto fail;
    if (s->landlock_fd >= 0 && (llfd = fcntl(s->landlock_fd, F_DUPFD_CLOEXEC,
                                             SANDBOX_FILTERS_FD + 1)) < 0)
        goto fail;
    if (exitfd >= 0 &&
        (exitfd = fcntl(exitfd, F_DUPFD_CLOEXEC, SANDBOX_FILTERS_FD + 1)) < 0)
        goto fail;
    if (s->filters_fd >= 0 && (ffd = fcntl(s->filters_fd, F_DUPFD_CLOEXEC,
                                           SANDBOX_FILTERS_FD + 1)) < 0)
        goto fail;
    if (dup2(chfd, SANDBOX_CHANNEL_FD) < 0 ||
        (ffd >= 0 && dup2(ffd, SANDBOX_FILTERS_FD) < 0))
        goto fail;
    /* stdin is /dev/null; stdout and stderr stay the spawner's, or become
     * /dev/null where it has none.  Which were open is noted before the
     * open(), which may itself land on 1 or 2. */
    ce.step = PRE_DEVNULL;
    for (int fd = 0; fd <= 2; fd++)
        have[fd] = fd > 0 && fcntl(fd, F_GETFD) >= 0;
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0)
        goto fail;
    devnull = fcntl(devnull, F_DUPFD_CLOEXEC, SANDBOX_FILTERS_FD + 1);
    if (devnull < 0)
        goto fail;
    for (int fd = 0; fd <= 2; fd++)
        if (!have[fd] && dup2(devnull, fd) < 0)
            goto fail;

    for (size_t i = 0; i < SANDBOX_ROLE_STEPS; i++) {
        enum sandbox_step step = s->role->steps[i];

        ce.step = (int)step;
        switch (step) {
        case SANDBOX_STEP_END:
        case SANDBOX_STEP_EXEC:
            goto exec;
        case SANDBOX_STEP_SESSION: {
            /* A known signal state: nothing blocked, nothing ignored
             * (SIGPIPE ignored by the spawner would survive the exec). */
            struct sigaction dfl;
            sigset_t none;

            sigemptyset(&none);
            (void)sigprocmask(SIG_SETMASK, &none, NULL);
            memset(&dfl, 0, sizeof dfl);
            dfl.sa_handler = SIG_DFL;
            for (int sig = 1; sig < NSIG; sig++)
                (void)sigaction(sig, &dfl, NULL); /* EINVAL: KILL, STOP */
            if (setsid() < 0)
                goto fail;
            /* Die with the spawner; it may have died before this line
             * (then getppid() changed; in a pid namespace it reads 0
             * either way, and the channel's EOF ends the host). */
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                goto fail;
            if (!pidns && getppid() != parent)
                _exit(127);
            break;
        }
        case SANDBOX_STEP_CGROUP:
            if (s->cg && sandbox_cg_attach(s->cg, 0) < 0)
                goto fail;
            break;
        case SANDBOX_STEP_NAMESPACES: {
            const unsigned mask = SANDBOX_NS_MOUNT | SANDBOX_NS_NET |
                                  SANDBOX_NS_IPC | SANDBOX_NS_UTS |
                                  SANDBOX_NS_CGROUP;
            unsigned ns = s->namespaces & mask;

            /* A network namespace made before (launcher.c keeps a few
             * ready: making one costs about 0.5 ms), entered instead of
             * a new one. */
            if ((ns & SANDBOX_NS_NET) && s->net_fd >= 0) {
                if (setns(s->net_fd, CLONE_NEWNET) < 0)
                    goto fail;
                ns &= ~SANDBOX_NS_NET;
            }
            int flags = sandbox_ns_clone_flags(ns);
            if (flags && unshare(flags) < 0)
                goto fail;
            break;
        }
        case SANDBOX_STEP_ROOT:
            if ((s->namespaces & SANDBOX_NS_MOUNT) &&
                sandbox_root_enter(s->role->exe_in_root ? execfd : -1,
                                   &detail) < 0)
                goto fail;
            break;
        case SANDBOX_STEP_INIT:
            if (!pidns)
                break;
            if (sandbox_init_run(exitfd) < 0)
                goto fail;
            /* The host, PID 2: the exit pipe is the init's. */
            (void)close(exitfd);
            exitfd = -1;
            parent = 1;
            break;
        case SANDBOX_STEP_CREDS:
            if (!s->drop)
                break;
            parent = getppid();
            if (sandbox_creds_drop(s->uid, s->gid) < 0)
                goto fail;
            /* A credential change clears the parent-death signal. */
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                goto fail;
            if (getppid() != parent)
                _exit(127);
            break;
        case SANDBOX_STEP_LANDLOCK:
            if (llfd >= 0 && sandbox_landlock_restrict(llfd) < 0)
                goto fail;
            if (llfd < 0 && (s->namespaces & SANDBOX_NS_MOUNT) &&
                s->landlock_abi > 0 &&
                sandbox_landlock_enter(s->landlock_abi, execfd,
                                       s->role->reads) < 0)
                goto fail;
            break;
        case SANDBOX_STEP_FDS: {
            int keep[3] = { errfd, execfd, exitfd };

            sort3(keep);
            if (close_but(ffd >= 0 ? SANDBOX_FILTERS_FD + 1
                                   : SANDBOX_CHANNEL_FD + 1,
                          keep, 3) < 0)
                goto fail;
            llfd = -1; /* closed, if it was open */
            break;
        }
        case SANDBOX_STEP_RLIMITS:
            if (sandbox_rlimits_apply(&s->rlimits) < 0)
                goto fail;
            break;
        case SANDBOX_STEP_NO_NEW_PRIVS:
        case SANDBOX_STEP_MDWE:
        case SANDBOX_STEP_FILTER:
            break; /* the host's own, after the exec */
        }
    }
exec:
    ce.step = SANDBOX_STEP_EXEC;
    detail = NULL;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        goto fail;
    if (s->fork_only) {
        /* The spawner reads EOF: the host goes on in this process. */
        (void)close(errfd);
        if (execfd >= 0)
            (void)close(execfd);
        if (exitfd >= 0)
            (void)close(exitfd);
        return;
    }
    if (execfd >= 0) /* its own user may not reach the path */
        syscall(SYS_execveat, execfd, "", s->argv, s->envp, AT_EMPTY_PATH);
    else
        execve(s->path, s->argv, s->envp);
fail:
    ce.err = errno;
    copy_detail(ce.detail, sizeof ce.detail, detail);
    while (write(errfd, &ce, sizeof ce) < 0 && errno == EINTR)
        ;
    _exit(127);
}

/* Whether the role takes step. */
static bool
role_has(const struct sandbox_role *role, enum sandbox_step step)
{
    for (size_t i = 0; i < SANDBOX_ROLE_STEPS && role->steps[i]; i++)
        if (role->steps[i] == step)
            return true;
    return false;
}

int
sandbox_spawn(const struct sandbox_spawn *s, struct sandbox_child *c, char *err,
              size_t errlen)
{
    int pfd[2] = { -1, -1 }, xfd[2] = { -1, -1 };
    bool pidns = (s->namespaces & SANDBOX_NS_PID) &&
                 role_has(s->role, SANDBOX_STEP_INIT);
    int own_ns = -1;
    struct child_error ce;
    pid_t pid = -1;
    int saved = 0;
    ssize_t n;

    c->pid = -1;
    c->init = false;
    c->exit_fd = -1;
    if (pipe2(pfd, O_CLOEXEC) < 0 ||
        (pidns && pipe2(xfd, O_CLOEXEC | O_NONBLOCK) < 0)) {
        saved = errno;
        snprintf(err, errlen, "pipe2: %s", strerror(saved));
        goto out;
    }
    if (pidns) {
        own_ns =
            open("/proc/thread-self/ns/pid_for_children", O_RDONLY | O_CLOEXEC);
        if (own_ns < 0 || unshare(CLONE_NEWPID) < 0) {
            saved = errno;
            snprintf(err, errlen, "creating its pid namespace: %s",
                     strerror(saved));
            goto out;
        }
    }
    pid = fork();
    if (pid < 0)
        saved = errno;
    if (pid == 0) {
        child(s, pfd[1], xfd[1], pidns);
        /* fork_only: the host.  Its copies of the pipes' other ends, and
         * the spawner's namespace descriptor, are not its business. */
        if (own_ns >= 0)
            (void)close(own_ns);
        for (int i = 0; i < 2; i++) {
            (void)close(pfd[i]); /* EBADF when its FDS step closed it */
            if (xfd[i] >= 0)
                (void)close(xfd[i]);
        }
        c->pid = 0;
        return 0;
    }
    /* Back in our own namespace for every later child: this cannot fail
     * for the namespace we came from, but a spawner that could not go
     * back must not go on. */
    if (pidns && setns(own_ns, CLONE_NEWPID) < 0) {
        saved = errno;
        snprintf(err, errlen, "returning to its own pid namespace: %s",
                 strerror(saved));
        if (pid > 0) {
            (void)kill(pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        }
        pid = -1;
        goto out;
    }
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(saved));
        goto out;
    }
    close(pfd[1]);
    pfd[1] = -1;
    if (xfd[1] >= 0) {
        close(xfd[1]);
        xfd[1] = -1;
    }
    do
        n = read(pfd[0], &ce, sizeof ce);
    while (n < 0 && errno == EINTR);
    if (n == 0) {
        c->pid = pid;
        c->init = pidns;
        c->exit_fd = xfd[0];
        xfd[0] = -1;
        goto out; /* exec'd */
    }

    /* The child failed before or at execve(): reaped here, so that the
     * spawner's SIGCHLD handling never sees a pid it was not given (an
     * init whose host failed exits at once). */
    if (n == (ssize_t)sizeof ce) {
        saved = ce.err;
        ce.detail[sizeof ce.detail - 1] = '\0';
        snprintf(err, errlen, "%s%s%s: %s", pre_name(ce.step),
                 ce.detail[0] ? ", " : "", ce.detail, strerror(saved));
    } else {
        saved = n < 0 ? errno : EIO;
        snprintf(err, errlen, "the child failed before exec");
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    pid = -1;

out:
    if (own_ns >= 0)
        close(own_ns);
    for (int i = 0; i < 2; i++) {
        if (pfd[i] >= 0)
            close(pfd[i]);
        if (xfd[i] >= 0)
            close(xfd[i]);
    }
    if (pid < 0) {
        errno = saved ? saved : EIO;
        return -1;
    }
    return 0;
}

int
sandbox_exit_read(int exit_fd, int *wstatus)
{
    struct sandbox_exit rec;
    ssize_t n;

    if (exit_fd < 0)
        return 0;
    do
        n = read(exit_fd, &rec, sizeof rec);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof rec || rec.magic != SANDBOX_EXIT_MAGIC)
        return 0;
    *wstatus = rec.wstatus;
    return 1;
}
