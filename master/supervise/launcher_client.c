/*
 * launcher_client.c — the master's side of the launcher (launcher_client.h):
 * starting it, its requests and answers.
 *
 * The launcher answers requests in order, one message each, on a
 * SOCK_SEQPACKET socket, and sends a death report whenever one of its
 * hosts ends; a spawn waits for its answer (as a fork and exec in the
 * master did: a host start takes about 2 ms), keeping the death reports
 * that come first for the supervisor's next read.  A spawn may also be
 * sent without waiting (a pool host's, pool.c): its answer is then
 * read with the death reports, in the order the launcher sent them, and
 * kept like them when a waiting spawn reads it first.
 */
#include "config.h"

#include "master/supervise/launcher_client.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "master/core/conf.h"
#include "master/core/engines.h"
#include "sandbox/sandbox.h"

/* How long a spawn waits for the launcher's answer: far beyond any start
 * (a cold one with every layer takes under 3 ms here). */
#define SPAWN_ANSWER_MS 30000

struct launcher_client {
    pid_t pid;
    int fd;
    /* Death reports and answers to spawns sent without waiting, read
     * while a spawn waited, oldest first. */
    union launcher_client_msg *kept;
    size_t nkept, capkept;
    /* The spawns sent without waiting whose answer is not read yet. */
    uint32_t *unanswered;
    size_t nunanswered, capunanswered;
};

/* "name=a,b,c" of a list, or NULL when out of memory. */
static char *
env_list(const char *name, const struct conf_list *l)
{
    size_t len = strlen(name) + 2;
    char *s;

    for (size_t i = 0; i < l->n; i++)
        len += strlen(l->v[i]) + 1;
    if ((s = malloc(len)) == NULL)
        return NULL;
    strcpy(s, name);
    strcat(s, "=");
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            strcat(s, ",");
        strcat(s, l->v[i]);
    }
    return s;
}

/* The environment of Python hosts: the python_* keys (the host reads
 * them as hosts/python/allow.h says), NULL-terminated; NULL when out of
 * memory. */
static char **
python_env(const struct conf *conf)
{
    char **env = calloc(5, sizeof *env);

    if (env == NULL)
        return NULL;
    env[0] =
        env_list("WM_PYTHON_ALLOWED_PACKAGES", &conf->python_allowed_packages);
    env[1] =
        env_list("WM_PYTHON_BLOCKED_MODULES", &conf->python_blocked_modules);
    env[2] = env_list("WM_PYTHON_PRELOAD", &conf->python_preload);
    env[3] = strdup(conf->python_allowlist ? "WM_PYTHON_ALLOWLIST=on"
                                           : "WM_PYTHON_ALLOWLIST=off");
    for (size_t i = 0; i < 4; i++)
        if (env[i] == NULL) {
            for (size_t j = 0; j < 4; j++)
                free(env[j]);
            free(env);
            return NULL;
        }
    return env;
}

static void
env_free(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

struct launcher_client *
launcher_client_start(const struct engines *engines,
                      const struct sandbox_support *s, const struct conf *conf,
                      char *err, size_t errlen)
{
    /* No network, no System V IPC, its own host name, its own cgroup
     * root, its own root file system (sandbox/root.h), its own processes
     * only (an init as PID 1, sandbox/spawn.h). */
    const unsigned want = SANDBOX_NS_MOUNT | SANDBOX_NS_PID | SANDBOX_NS_NET |
                          SANDBOX_NS_IPC | SANDBOX_NS_UTS | SANDBOX_NS_CGROUP;
    struct launcher_client *l = calloc(1, sizeof *l);
    struct sandbox_launcher_engine *v =
        calloc(engines->n ? engines->n : 1, sizeof *v);
    size_t n = 0;
    char **pyenv = python_env(conf);

    if (l == NULL || v == NULL || pyenv == NULL) {
        snprintf(err, errlen, "out of memory");
        free(l);
        free(v);
        env_free(pyenv);
        return NULL;
    }
    for (size_t i = 0; i < engines->n; i++) {
        const struct engines_entry *e = &engines->v[i];
        const struct sandbox_role *role = sandbox_role_find(e->role);
        if (e->host_path == NULL || role == NULL)
            continue; /* unavailable (engines.h): never spawned */
        v[n++] = (struct sandbox_launcher_engine){
            .name = e->name,
            .path = e->host_path,
            .role = role,
            .zygote = e->spawn == ENGINES_SPAWN_ZYGOTE,
            .env = role == &sandbox_role_python ? pyenv : NULL,
        };
    }
    const struct sandbox_launcher_config c = {
        .engines = v,
        .nengines = n,
        .confine = s != NULL,
        .namespaces = s ? s->namespaces & want : 0,
        .landlock_abi = s ? s->landlock_abi : 0,
        .uid_base = (uint32_t)conf->host_uid_base,
        .uid_count = (uint32_t)conf->host_uid_count,
        .pids_max = (uint32_t)conf->host_pids_max,
        .cpu_percent = (uint32_t)conf->host_cpu_percent,
    };
    l->fd = -1;
    l->pid = sandbox_launcher_start(&c, &l->fd, err, errlen);
    free(v); /* the launcher has its own copy, from the fork */
    env_free(pyenv);
    if (l->pid < 0) {
        free(l);
        return NULL;
    }
    return l;
}

int
launcher_client_fd(const struct launcher_client *l)
{
    return l->fd;
}

pid_t
launcher_client_pid(const struct launcher_client *l)
{
    return l->pid;
}

static int
keep(struct launcher_client *l, const union launcher_client_msg *m)
{
    if (l->nkept == l->capkept) {
        size_t cap = l->capkept ? 2 * l->capkept : 8;
        union launcher_client_msg *v = realloc(l->kept, cap * sizeof *v);
        if (v == NULL)
            return -1;
        l->kept = v;
        l->capkept = cap;
    }
    l->kept[l->nkept++] = *m;
    return 0;
}

/* Whether seq is a spawn sent without waiting, not answered yet; `take`
 * forgets it (its answer is read). */
static bool
unanswered(struct launcher_client *l, uint32_t seq, bool take)
{
    for (size_t i = 0; i < l->nunanswered; i++)
        if (l->unanswered[i] == seq) {
            if (take)
                l->unanswered[i] = l->unanswered[--l->nunanswered];
            return true;
        }
    return false;
}

/* One message from the launcher into m: its type, 0 when none is there
 * (non-blocking), -1 when the launcher is gone (or sent what it never
 * sends). */
static int
receive(struct launcher_client *l, void *m, size_t len, int flags)
{
    ssize_t n;

    do
        n = recv(l->fd, m, len, flags);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (n < (ssize_t)sizeof(uint32_t))
        return -1;
    uint32_t type;
    memcpy(&type, m, sizeof type);
    if (type == LAUNCHER_SPAWNED && n == sizeof(struct launcher_spawned)) {
        struct launcher_spawned *s = m;
        s->fail_type[sizeof s->fail_type - 1] = '\0';
        s->why[sizeof s->why - 1] = '\0';
        return (int)type;
    }
    if (type == LAUNCHER_DEATH && n == sizeof(struct launcher_death)) {
        struct launcher_death *d = m;
        d->syscall_name[sizeof d->syscall_name - 1] = '\0';
        return (int)type;
    }
    return -1;
}

/* Sends spawn q with chan.  0, or -1 with a message in err. */
static int
send_spawn(struct launcher_client *l, const struct launcher_spawn *q, int chan,
           char *err, size_t errlen)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = { .iov_base = (void *)(uintptr_t)q,
                         .iov_len = sizeof *q };
    struct msghdr msg = { .msg_iov = &iov,
                          .msg_iovlen = 1,
                          .msg_control = ctl.buf,
                          .msg_controllen = sizeof ctl.buf };
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    ssize_t n;

    memset(&ctl, 0, sizeof ctl);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &chan, sizeof chan);
    do
        n = sendmsg(l->fd, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof *q) {
        snprintf(err, errlen, "the launcher is gone: %s",
                 n < 0 ? strerror(errno) : "short send");
        return -1;
    }
    return 0;
}

int
launcher_client_spawn_send(struct launcher_client *l,
                           const struct launcher_spawn *q, int chan, char *err,
                           size_t errlen)
{
    if (l->nunanswered == l->capunanswered) {
        size_t cap = l->capunanswered ? 2 * l->capunanswered : 8;
        uint32_t *v = realloc(l->unanswered, cap * sizeof *v);
        if (v == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        l->unanswered = v;
        l->capunanswered = cap;
    }
    if (send_spawn(l, q, chan, err, errlen) < 0)
        return -1;
    l->unanswered[l->nunanswered++] = q->seq;
    return 0;
}

int
launcher_client_spawn(struct launcher_client *l, const struct launcher_spawn *q,
                      int chan, struct launcher_spawned *r, char *err,
                      size_t errlen)
{
    if (send_spawn(l, q, chan, err, errlen) < 0)
        return -1;
    for (;;) {
        union launcher_client_msg m;
        struct pollfd p = { .fd = l->fd, .events = POLLIN };
        int rc = poll(&p, 1, SPAWN_ANSWER_MS);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0) {
            snprintf(err, errlen, "the launcher did not answer within %d ms",
                     SPAWN_ANSWER_MS);
            return -1;
        }
        int type = receive(l, &m, sizeof m, MSG_DONTWAIT);
        if (type == LAUNCHER_SPAWNED && m.spawned.seq == q->seq) {
            *r = m.spawned;
            return 0;
        }
        /* Another spawn's answer is kept, as a death is. */
        if (type == LAUNCHER_SPAWNED && unanswered(l, m.spawned.seq, false))
            type = LAUNCHER_DEATH;
        switch (type) {
        case 0:
            continue;
        case LAUNCHER_DEATH:
            if (keep(l, &m) < 0) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            continue;
        default:
            break;
        }
        snprintf(err, errlen, "the launcher is gone (or answered out of turn)");
        return -1;
    }
}

int
launcher_client_adopt(struct launcher_client *l, const struct launcher_adopt *a)
{
    ssize_t n;

    do
        n = send(l->fd, a, sizeof *a, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof *a ? 0 : -1;
}

int
launcher_client_kill(struct launcher_client *l, uint32_t seq)
{
    const struct launcher_kill k = { .type = LAUNCHER_KILL, .seq = seq };
    ssize_t n;

    do
        n = send(l->fd, &k, sizeof k, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof k ? 0 : -1;
}

int
launcher_client_next(struct launcher_client *l, union launcher_client_msg *m)
{
    if (l->nkept) {
        *m = l->kept[0];
        memmove(l->kept, l->kept + 1, --l->nkept * sizeof *l->kept);
        if (m->type == LAUNCHER_SPAWNED)
            unanswered(l, m->spawned.seq, true);
        return (int)m->type;
    }
    for (;;) {
        switch (receive(l, m, sizeof *m, MSG_DONTWAIT)) {
        case 0:
            return 0;
        case LAUNCHER_DEATH:
            return LAUNCHER_DEATH;
        case LAUNCHER_SPAWNED:
            if (unanswered(l, m->spawned.seq, true))
                return LAUNCHER_SPAWNED;
            continue; /* the late answer of a spawn that gave up waiting */
        default:
            return -1;
        }
    }
}

void
launcher_client_stop(struct launcher_client *l)
{
    if (l == NULL)
        return;
    if (l->fd >= 0)
        close(l->fd);
    if (l->pid > 0)
        while (waitpid(l->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    free(l->kept);
    free(l->unanswered);
    free(l);
}
