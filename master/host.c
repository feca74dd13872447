/*
 * host.c — spawning and killing host processes, and the sealed memfd that
 * carries their code (host.h).
 *
 * A thin caller of the sandbox's spawn (sandbox/spawn.h), which forks,
 * confines and execs in the order of the host's role: here only what the
 * master decides is made, before the fork (argv, the scrubbed environment,
 * the descriptor the binary is exec'd through), so that a privileged
 * launcher can later spawn for an unprivileged master (DESIGN §2).
 */
#include "config.h"

#include "master/host.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sandbox/spawn.h"

/* Sanitizer options pass through the scrubbed environment so that a
 * sanitizer build of a host honours the test run's settings, and so does
 * the sandbox's debug mode (sandbox.h: SANDBOX_DEBUG_ENV). */
static const char *const passthrough[] = {
    "ASAN_OPTIONS",
    "UBSAN_OPTIONS",
    "LSAN_OPTIONS",
    "WM_SANDBOX_DEBUG",
};
/* PATH, LANG, WM_WORKER_ID, WM_ENGINE, WM_CONFINEMENT, the pass-through
 * ones, NULL. */
#define ENV_MAX (5 + sizeof passthrough / sizeof passthrough[0] + 1)

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

int
supervise_host_spawn(const struct supervise_spawn *s,
                     struct sandbox_child *child, char *err, size_t errlen)
{
    char *envp[ENV_MAX] = { NULL };
    char *argv[2] = { (char *)(uintptr_t)s->path, NULL };
    size_t nenv = 0;
    int binfd = -1;
    int rc = -1, saved = 0;
    char why[400];

    envp[nenv++] = env_pair("PATH", "/usr/local/bin:/usr/bin:/bin");
    envp[nenv++] = env_pair("LANG", "C.UTF-8");
    envp[nenv++] = env_pair("WM_WORKER_ID", s->worker_id);
    if (s->engine)
        envp[nenv++] = env_pair("WM_ENGINE", s->engine);
    envp[nenv++] =
        env_pair(SANDBOX_CONFINEMENT_ENV, sandbox_level_name(s->level));
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
    /* A host that drops to its own user is exec'd through a descriptor
     * opened here, with the daemon's rights: its user need not be able
     * to reach the binary's directory (a build tree, a test's directory). */
    if (s->drop && (binfd = open(s->path, O_PATH | O_CLOEXEC)) < 0) {
        saved = errno;
        snprintf(err, errlen, "opening %s: %s", s->path, strerror(saved));
        goto out;
    }
    const struct sandbox_spawn sp = {
        .role = s->role,
        .path = s->path,
        .argv = argv,
        .envp = envp,
        .channel_fd = s->fd,
        .exec_fd = binfd,
        .cg = s->cg,
        .namespaces = s->namespaces,
        .landlock_abi = s->landlock_abi,
        .landlock_fd = s->landlock_fd,
        .drop = s->drop,
        .uid = s->uid,
        .gid = (gid_t)s->uid,
        .cap_last = s->cap_last,
        .rlimits = s->rlimits,
    };
    if (sandbox_spawn(&sp, child, why, sizeof why) < 0) {
        saved = errno;
        snprintf(err, errlen, "%s: %s", s->path, why);
        goto out;
    }
    /* The process group is the child's own session's (setsid). */
    rc = 0;
out:
    if (binfd >= 0)
        close(binfd);
    for (size_t i = 0; i < nenv; i++)
        free(envp[i]);
    if (rc < 0)
        errno = saved ? saved : EIO;
    return rc;
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
