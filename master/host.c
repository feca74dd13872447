/*
 * host.c — spawning and killing host processes, and the sealed memfd that
 * carries their code (host.h).
 *
 * Why fork + exec by hand: the child must end up with exactly one extra
 * descriptor at a fixed number (the channel on fd 3), nothing else
 * inherited, a known signal state and a scrubbed environment; posix_spawn
 * cannot close "every other descriptor" portably.  Everything the child
 * needs (argv, envp) is built before fork(), so that the child runs only
 * async-signal-safe calls between fork() and execve().
 *
 * An exec failure is reported by the child over a close-on-exec pipe: the
 * parent's read returns 0 bytes when the exec succeeded (the pipe closed
 * with it) or the child's errno when it did not.  So a missing or
 * non-executable host binary is an error of the spawn, with its errno,
 * rather than a mysterious exit 127.
 *
 * Invariants: the child's fds are 0 (/dev/null), 1 and 2 (the master's, or
 * /dev/null when the master has none), 3 (the channel); the pipe's write
 * end closes on exec.  The parent's descriptors are left as they were.
 */
#include "config.h"

#include "master/host.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "sandbox/landlock.h"
#include "sandbox/root.h"

/* The channel's descriptor in every host (ipc/PROTOCOL.md). */
#define HOST_CHANNEL_FD 3
/* Sanitizer options pass through the scrubbed environment so that a
 * sanitizer build of a host honours the test run's settings, and so does
 * the sandbox's debug mode (sandbox.h: SANDBOX_DEBUG_ENV). */
static const char *const passthrough[] = {
    "ASAN_OPTIONS",
    "UBSAN_OPTIONS",
    "LSAN_OPTIONS",
    "WM_SANDBOX_DEBUG",
};
/* PATH, LANG, WM_WORKER_ID, WM_ENGINE, the pass-through ones, NULL. */
#define ENV_MAX (4 + sizeof passthrough / sizeof passthrough[0] + 1)

/* What the child reports when it cannot reach execve(). */
struct child_error {
    int stage; /* index into stages[] */
    int err;   /* errno */
};

static const char *const stages[] = {
    "joining its cgroup",
    "setting up the channel descriptor",
    "opening /dev/null",
    "unsharing its namespaces",
    "building its private root",
    "dropping to its own user",
    "entering its Landlock domain",
    "closing inherited descriptors",
    "lowering its rlimits",
    "execve",
};

enum {
    STAGE_CGROUP,
    STAGE_FD,
    STAGE_DEVNULL,
    STAGE_UNSHARE,
    STAGE_ROOT,
    STAGE_CREDS,
    STAGE_LANDLOCK,
    STAGE_CLOSE,
    STAGE_RLIMITS,
    STAGE_EXEC,
};

/* Closes [from, to] in the child.  close_range(2) when the kernel has it;
 * else every number up to the descriptor limit (async-signal-safe, unlike
 * reading /proc/self/fd). */
static int
close_from_to(int from, int to)
{
    if (from > to)
        return 0;
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)from, (unsigned)to, 0u) == 0)
        return 0;
    if (errno != ENOSYS)
        return -1;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 1 << 20)
        max = 1 << 20;
    for (long fd = from; fd <= to && fd < max; fd++)
        (void)close((int)fd); /* EBADF for the many that are not open */
    return 0;
}

/* The child, between fork() and execve(): async-signal-safe calls only.
 * Never returns. */
static void
child(const struct supervise_spawn *s, char *const argv[], char *const envp[],
      int errfd, int binfd, pid_t parent)
{
    struct child_error ce = { STAGE_FD, 0 };
    struct sigaction dfl;
    sigset_t none;
    int chfd, devnull;

    /* A known signal state: nothing blocked, nothing ignored (SIGPIPE
     * ignored by the master would otherwise survive the exec). */
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++)
        (void)sigaction(sig, &dfl, NULL); /* EINVAL for KILL, STOP, RT */

    /* Die with the master; it may have died before this line. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(127);
    (void)setpgid(0, 0); /* the parent does it too; one of them wins */

    /* Into its cgroup before it runs anything of its own (its limits were
     * written before; cgroup.h). */
    ce.stage = STAGE_CGROUP;
    if (s->cg && sandbox_cg_attach(s->cg, 0) < 0)
        goto fail;
    ce.stage = STAGE_FD;

    /* Move both descriptors above 3 first, so that neither is clobbered
     * by the dup2() onto 3 (either may be 3 in the parent). */
    errfd = fcntl(errfd, F_DUPFD_CLOEXEC, HOST_CHANNEL_FD + 1);
    if (errfd < 0)
        _exit(127);
    chfd = fcntl(s->fd, F_DUPFD_CLOEXEC, HOST_CHANNEL_FD + 1);
    /* The binary's descriptor above 3 as well (it is exec'd through it). */
    if (binfd >= 0 &&
        (binfd = fcntl(binfd, F_DUPFD_CLOEXEC, HOST_CHANNEL_FD + 1)) < 0)
        goto fail;
    /* The ruleset too: it may be any number, 0 to 3 included. */
    int llfd = s->landlock_fd < 0 ? -1
                                  : fcntl(s->landlock_fd, F_DUPFD_CLOEXEC,
                                          HOST_CHANNEL_FD + 1);
    if (chfd < 0 || (s->landlock_fd >= 0 && llfd < 0) ||
        dup2(chfd, HOST_CHANNEL_FD) < 0)
        goto fail;

    /* stdin is /dev/null; stdout and stderr stay the master's, or become
     * /dev/null when the master has none.  Which were open is noted before
     * the open(), which may itself land on 1 or 2. */
    ce.stage = STAGE_DEVNULL;
    bool have[3];
    for (int fd = 0; fd <= 2; fd++)
        have[fd] = fd > 0 && fcntl(fd, F_GETFD) >= 0;
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0)
        goto fail;
    devnull = fcntl(devnull, F_DUPFD_CLOEXEC, HOST_CHANNEL_FD + 1);
    if (devnull < 0)
        goto fail;
    for (int fd = 0; fd <= 2; fd++)
        if (!have[fd] && dup2(devnull, fd) < 0)
            goto fail;

    /* Its own user, then its paths: the ruleset's descriptor must still
     * be open (it closes below with the rest). */
    ce.stage = STAGE_UNSHARE;
    if (s->unshare_flags && unshare(s->unshare_flags) < 0)
        goto fail;
    ce.stage = STAGE_ROOT;
    const char *step;
    if (s->private_root && sandbox_root_enter(&step) < 0)
        goto fail;
    if (s->drop) {
        ce.stage = STAGE_CREDS;
        if (sandbox_creds_drop(s->uid, (gid_t)s->uid, s->cap_last) < 0)
            goto fail;
        /* A credential change clears the parent-death signal: again. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
            _exit(127);
    }
    ce.stage = STAGE_LANDLOCK;
    if (llfd >= 0 && sandbox_landlock_restrict(llfd) < 0)
        goto fail;
    if (llfd < 0 && s->private_root && s->landlock_abi > 0 &&
        sandbox_landlock_enter(s->landlock_abi, binfd) < 0)
        goto fail;

    ce.stage = STAGE_CLOSE;
    {
        /* Everything above 3 but errfd and binfd. */
        int lo = errfd < binfd || binfd < 0 ? errfd : binfd;
        int hi = errfd < binfd ? binfd : errfd;

        if (close_from_to(HOST_CHANNEL_FD + 1, lo - 1) < 0 ||
            (binfd >= 0 && close_from_to(lo + 1, hi - 1) < 0) ||
            close_from_to(hi + 1, ~0u >> 1) < 0)
            goto fail;
    }
    /* After the closing: a lower RLIMIT_NOFILE would bound its fallback. */
    ce.stage = STAGE_RLIMITS;
    if (s->drop && sandbox_rlimits_apply(&s->rlimits) < 0)
        goto fail;

    ce.stage = STAGE_EXEC;
    if (binfd >= 0) /* its own user may not reach the path */
        syscall(SYS_execveat, binfd, "", argv, envp, AT_EMPTY_PATH);
    else
        execve(s->path, argv, envp);
fail:
    ce.err = errno;
    while (write(errfd, &ce, sizeof ce) < 0 && errno == EINTR)
        ;
    _exit(127);
}

/* Builds "NAME=value" into a malloc'd string, or NULL. */
static char *
env_pair(const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 2;
    char *s = malloc(n);

    if (s)
        snprintf(s, n, "%s=%s", name, value);
    return s;
}

pid_t
supervise_host_spawn(const struct supervise_spawn *s, char *err, size_t errlen)
{
    char *envp[ENV_MAX] = { NULL };
    char *argv[2] = { (char *)(uintptr_t)s->path, NULL };
    size_t nenv = 0;
    int pfd[2] = { -1, -1 };
    int binfd = -1;
    struct child_error ce;
    pid_t pid = -1;
    int saved = 0;
    ssize_t n;

    envp[nenv++] = env_pair("PATH", "/usr/local/bin:/usr/bin:/bin");
    envp[nenv++] = env_pair("LANG", "C.UTF-8");
    envp[nenv++] = env_pair("WM_WORKER_ID", s->worker_id);
    if (s->engine)
        envp[nenv++] = env_pair("WM_ENGINE", s->engine);
    for (size_t i = 0; i < sizeof passthrough / sizeof passthrough[0]; i++) {
        const char *v = getenv(passthrough[i]);
        if (v)
            envp[nenv++] = env_pair(passthrough[i], v);
    }
    for (size_t i = 0; i < nenv; i++) {
        if (envp[i] == NULL) {
            saved = ENOMEM;
            snprintf(err, errlen, "out of memory");
            goto out;
        }
    }
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        saved = errno;
        snprintf(err, errlen, "pipe2: %s", strerror(saved));
        goto out;
    }
    /* A host that drops to its own user is exec'd through a descriptor
     * opened here, with the daemon's rights: its user need not be able
     * to reach the binary's directory (a build tree, a test's directory). */
    if (s->drop && (binfd = open(s->path, O_PATH | O_CLOEXEC)) < 0) {
        saved = errno;
        snprintf(err, errlen, "opening %s: %s", s->path, strerror(saved));
        goto out;
    }

    pid_t parent = getpid();
    pid = fork();
    if (pid < 0) {
        saved = errno;
        snprintf(err, errlen, "fork: %s", strerror(saved));
        goto out;
    }
    if (pid == 0)
        child(s, argv, envp, pfd[1], binfd, parent);

    /* Both sides set the group so that a kill right after this call
     * reaches it whichever runs first.  A failure (EACCES once the child
     * exec'd) is harmless: the kill also targets the pid itself. */
    (void)setpgid(pid, pid);
    close(pfd[1]);
    pfd[1] = -1;
    do
        n = read(pfd[0], &ce, sizeof ce);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        goto out; /* exec succeeded */

    /* The child failed before or at execve(): reap it here, so that the
     * SIGCHLD handler never sees a pid no host owns. */
    if (n == (ssize_t)sizeof ce && ce.stage >= 0 &&
        ce.stage < (int)(sizeof stages / sizeof stages[0])) {
        saved = ce.err;
        snprintf(err, errlen, "%s %s: %s", stages[ce.stage], s->path,
                 strerror(saved));
    } else {
        saved = n < 0 ? errno : EIO;
        snprintf(err, errlen, "the child of %s failed before exec", s->path);
    }
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    pid = -1;

out:
    if (binfd >= 0)
        close(binfd);
    if (pfd[0] >= 0)
        close(pfd[0]);
    if (pfd[1] >= 0)
        close(pfd[1]);
    for (size_t i = 0; i < nenv; i++)
        free(envp[i]);
    if (pid < 0)
        errno = saved ? saved : EIO;
    return pid;
}

int
supervise_host_kill(pid_t pid)
{
    int rc;

    if (pid <= 0) {
        errno = EINVAL;
        return -1;
    }
    /* The group first: what the host forked dies with it.  ESRCH when the
     * child has not yet reached setpgid() and the parent's call failed. */
    (void)kill(-pid, SIGKILL);
    rc = kill(pid, SIGKILL);
    if (rc < 0 && errno == ESRCH)
        rc = 0; /* a zombie (or already gone): nothing to kill */
    return rc;
}

int
supervise_code_memfd(const char *name, const uint8_t *data, size_t len)
{
    const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
    size_t off = 0;
    int fd, saved;

    fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto fail;
        off += (size_t)n;
    }
    /* F_SEAL_WRITE needs no writable shared mapping: there is none. */
    if (fcntl(fd, F_ADD_SEALS, seals) < 0 || lseek(fd, 0, SEEK_SET) < 0)
        goto fail;
    return fd;

fail:
    saved = errno ? errno : EIO;
    close(fd);
    errno = saved;
    return -1;
}
