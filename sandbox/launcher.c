/*
 * launcher.c — the privileged launcher's process (launcher.h): one poll
 * loop over the master's socket, a signalfd for SIGCHLD and the kernel's
 * audit socket.
 *
 * What a host gets is decided here, from the configuration the daemon
 * started the launcher with, never from the master's request: the binary
 * (by engine name, from the launcher's table), the user (the first free
 * slot of the range), the namespaces, the Landlock domain, the cgroup's
 * pids and cpu limits, the rlimits.  The request brings only the engine's
 * name, the worker's id (checked: it names the cgroup and goes into the
 * host's environment), the memory limit and the channel.
 */
#include "config.h"

#include "sandbox/launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/audit.h"
#include "sandbox/cgroup.h"
#include "sandbox/creds.h"
#include "sandbox/landlock.h"
#include "sandbox/netpool.h"
#include "sandbox/spawn.h"
#include "sandbox/sysfile.h"
#include "sandbox/zygote.h"

#include "lib/name.h"

/* A host's descriptors and file size (creds.h): room for its channel,
 * memfds, eventfd, epoll and the worker's own; no core files. */
#define HOST_NOFILE 256
#define HOST_FSIZE (1ull << 30)
/* Locked memory: none needed (the host locks nothing). */
#define HOST_MEMLOCK (64u << 10)
/* How long a seccomp death waits for its audit record, at most (it is
 * normally there already: audit.h). */
#define AUDIT_WAIT_MS 50
/* How long a zygote may take to make its engine ready (Python: 20-30 ms
 * with the standard library; an operator's allowed packages may take
 * seconds), and to answer a fork. */
#define ZYGOTE_READY_MS 30000
#define ZYGOTE_FORK_MS 10000

/* Sanitizer options pass through the scrubbed environment so that a
 * sanitizer build of a host honours the test run's settings, and so does
 * the sandbox's debug mode (sandbox.h: SANDBOX_DEBUG_ENV). */
static const char *const passthrough[] = {
    "ASAN_OPTIONS",
    "UBSAN_OPTIONS",
    "LSAN_OPTIONS",
    SANDBOX_DEBUG_ENV,
};
/* PATH, LANG, WM_WORKER_ID, WM_ENGINE, WM_CONFINEMENT, the pass-through
 * ones, the engine's own, NULL. */
#define ENV_MAX                                                                \
    (5 + sizeof passthrough / sizeof passthrough[0] +                          \
     LAUNCHER_ENGINE_ENV_MAX + 1)

/* An engine's zygote (zygote.h). */
struct lzygote {
    pid_t pid; /* 0: none running */
    int sock;  /* -1 once its end closed */
};

/* A host the launcher started and has not reaped. */
struct lhost {
    uint32_t seq;
    struct sandbox_child child;
    pid_t host_pid;
    struct sandbox_cg *cg;
    int slot;          /* its user's, or -1 */
    struct lzygote *z; /* the zygote it was forked from, or NULL */
    bool orphaned;     /* that zygote was lost while it ran */
};

static struct {
    const struct sandbox_launcher_config *c;
    int sock;
    int audit_fd;
    bool root;
    bool netpool; /* hosts' network namespaces are made ahead */
    int *filters; /* per engine: its role's filters compiled, or -1 */
    struct lzygote *zygotes; /* per engine */
    unsigned char *slots;    /* uid_count, when hosts get their own users */
    struct lhost *hosts;
    size_t nhosts, cap;
    unsigned cg_seq;
    /* The latest seccomp kills the audit log named, newest last. */
    struct sandbox_audit_kill kills[32];
    unsigned nkills;
} L;

/* A line on the daemon's stderr (the launcher has no log of its own:
 * what the master must know comes back in its answers). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
say(const char *fmt, ...)
{
    char buf[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    dprintf(2, "workmanagerd launcher[%d]: %s\n", (int)getpid(), buf);
}

/* Whether s, within n bytes, is NUL-terminated, non-empty and of
 * [A-Za-z0-9._-] only: it names a cgroup and an environment value. */
static bool
plain_word(const char *s, size_t n)
{
    return strnlen(s, n) < n && name_word_valid(s, n - 1) && s[0] != '.';
}

static const struct sandbox_launcher_engine *
find_engine(const char *name)
{
    for (size_t i = 0; i < L.c->nengines; i++)
        if (strcmp(L.c->engines[i].name, name) == 0)
            return &L.c->engines[i];
    return NULL;
}

static struct lhost *
find_host(uint32_t seq)
{
    for (size_t i = 0; i < L.nhosts; i++)
        if (L.hosts[i].seq == seq)
            return &L.hosts[i];
    return NULL;
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

/* The environment of e's hosts into envp (ENV_MAX entries, *n of them
 * made; each malloc'd): that of one host for worker, or of e's zygote
 * (worker NULL: its hosts inherit it).  0, or -1 out of memory. */
static int
host_env(const struct sandbox_launcher_engine *e, const char *worker,
         enum sandbox_level level, char **envp, size_t *n)
{
    size_t k = 0;

    envp[k++] = env_pair("PATH", "/usr/local/bin:/usr/bin:/bin");
    envp[k++] = env_pair("LANG", "C.UTF-8");
    if (worker)
        envp[k++] = env_pair("WM_WORKER_ID", worker);
    envp[k++] = env_pair("WM_ENGINE", e->name);
    envp[k++] = env_pair(SANDBOX_CONFINEMENT_ENV, sandbox_level_name(level));
    for (size_t i = 0; i < sizeof passthrough / sizeof passthrough[0]; i++) {
        const char *v = getenv(passthrough[i]);
        if (v)
            envp[k++] = env_pair(passthrough[i], v);
    }
    for (size_t i = 0; e->env && e->env[i] && i < LAUNCHER_ENGINE_ENV_MAX; i++)
        envp[k++] = strdup(e->env[i]);
    *n = k;
    for (size_t i = 0; i < k; i++)
        if (envp[i] == NULL)
            return -1;
    return 0;
}

/* The Landlock ruleset of a host run from host_path outside a private
 * root (landlock.h): its descriptor, or -1 with a message.  The rule is
 * on the directory of the binary itself: Landlock judges the file a
 * symbolic link leads to. */
static int
host_landlock(const char *host_path, const struct sandbox_role *role, char *err,
              size_t errlen)
{
    char real[PATH_MAX], why[300];
    char *slash;
    int fd;

    if (realpath(host_path, real) == NULL) {
        snprintf(err, errlen, "cannot confine its paths: %s: %s", host_path,
                 strerror(errno));
        return -1;
    }
    slash = strrchr(real, '/');
    if (slash == real)
        slash[1] = '\0'; /* a binary in / */
    else
        *slash = '\0';
    fd = sandbox_landlock_ruleset(L.c->landlock_abi, real, role->reads, why,
                                  sizeof why);
    if (fd < 0)
        snprintf(err, errlen, "cannot confine its paths: %s", why);
    return fd;
}

/* The address space of a host limited to memory_mb: room for twice that
 * (the cgroup's limit kills on resident memory; this one only stops a
 * runaway reservation early, with ENOMEM the worker can handle) plus
 * 1 GiB for the host's own mappings, thread stacks and malloc arenas
 * (each thread's arena reserves 64 MiB); 0 (none) without. */
static uint64_t
host_as(uint32_t memory_mb)
{
    if (memory_mb == 0)
        return 0;
    return ((uint64_t)memory_mb << 21) + (1ull << 30);
}

/* The level the spawn steps give a host, with its own filter (sandbox.h):
 * ns with every isolating namespace (mount, pid, net, ipc, uts), full
 * with a Landlock domain and a cgroup too; seccomp otherwise (none in a
 * build without the sandbox: the host then loads no filter either). */
static enum sandbox_level
spawn_level(unsigned ns, bool cg)
{
    if (!L.c->confine)
        return SANDBOX_LEVEL_NONE;
    if ((ns & SANDBOX_NS_ISOLATE) != SANDBOX_NS_ISOLATE)
        return SANDBOX_LEVEL_SECCOMP;
    if (cg && L.c->landlock_abi > 0)
        return SANDBOX_LEVEL_FULL;
    return SANDBOX_LEVEL_NS;
}

/* The host an init forked (its only child): from
 * /proc/<init>/task/<init>/children.  It exists: the spawn returns once
 * the host exec'd.  0 when it cannot be read. */
static pid_t
init_child(pid_t init)
{
    char path[64], buf[64];

    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)init,
             (int)init);
    if (sandbox_sysfile_read(path, buf, sizeof buf) <= 0)
        return 0;
    long v = strtol(buf, NULL, 10);
    return v > 0 && v <= INT32_MAX ? (pid_t)v : 0;
}

/* A free user slot, taken: its index, or -1 when every one is taken (or
 * hosts keep the launcher's user: *none). */
static int
take_slot(bool *none)
{
    *none = L.slots == NULL;
    if (L.slots == NULL)
        return -1;
    for (uint32_t i = 0; i < L.c->uid_count; i++) {
        if (!L.slots[i]) {
            L.slots[i] = 1;
            return (int)i;
        }
    }
    return -1;
}

static void
send_msg(const void *msg, size_t len)
{
    while (send(L.sock, msg, len, MSG_NOSIGNAL) < 0 && errno == EINTR)
        ;
}

static void refuse(struct launcher_spawned *r, int error, const char *type,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
refuse(struct launcher_spawned *r, int error, const char *type, const char *fmt,
       ...)
{
    va_list ap;

    r->error = error ? error : EIO;
    snprintf(r->fail_type, sizeof r->fail_type, "%s", type);
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof r->why, fmt, ap);
    va_end(ap);
}

/* ---- zygotes (zygote.h) ------------------------------------------------ */

static void host_ended(size_t i, int wstatus);

/* The host whose process (its init, or itself) is pid: its index, or
 * L.nhosts. */
static size_t
host_by_pid(pid_t pid)
{
    size_t i;

    for (i = 0; i < L.nhosts; i++)
        if (L.hosts[i].child.pid == pid)
            break;
    return i;
}

/* Its socket closed: the zygote is ending (reap() sees its exit).  Its
 * hosts die with it (their parent-death signal) and, reparented here,
 * are reaped as the launcher's own. */
static void
zygote_lost(struct lzygote *z)
{
    /* Its hosts die now: their deaths are reported as its (host_ended()). */
    for (size_t i = 0; i < L.nhosts; i++)
        if (L.hosts[i].z == z)
            L.hosts[i].orphaned = true;
    if (z->sock >= 0)
        close(z->sock);
    z->sock = -1;
    if (z->pid > 0)
        (void)kill(z->pid, SIGKILL);
}

/* One message of zygote z's: a death is acted on; a fork's answer is
 * copied into *forked (with its descriptor into *fd) when forked is not
 * NULL.  1 when a message was taken, 0 when none was waiting (or its end
 * closed: then z is lost). */
static int
zygote_message(struct lzygote *z, bool wait, struct zygote_forked *forked,
               int *fd)
{
    union {
        struct zygote_death death;
        struct zygote_forked forked;
        uint32_t type;
    } m;
    int mfd;

    memset(&m, 0, sizeof m);
    ssize_t n = sandbox_zygote_recv(z->sock, &m, sizeof m, &mfd, !wait);
    if (n < 0 && errno == EAGAIN)
        return 0;
    if (n <= 0) {
        zygote_lost(z);
        return 0;
    }
    if (m.type == ZYGOTE_DEATH && n == sizeof m.death) {
        size_t i = host_by_pid(m.death.pid);
        if (i < L.nhosts && L.hosts[i].z == z)
            host_ended(i, m.death.wstatus);
    } else if (m.type == ZYGOTE_FORKED && n == sizeof m.forked && forked) {
        *forked = m.forked;
        *fd = mfd;
        return 1;
    } else {
        say("a message of type %u and %zd bytes from a zygote was dropped",
            m.type, n);
    }
    if (mfd >= 0)
        close(mfd);
    return 1;
}

/* Starts e's zygote and waits until it is ready: 0, or -1 with err. */
static int
zygote_up(const struct sandbox_launcher_engine *e, char *err, size_t errlen)
{
    struct lzygote *z = &L.zygotes[e - L.c->engines];
    char *envp[ENV_MAX] = { NULL };
    char why[ZYGOTE_WHY_MAX];
    size_t nenv = 0;
    int netfd = -1, rc = -1;

    if (z->pid > 0 && z->sock >= 0)
        return 0;
    if (z->pid > 0)
        zygote_lost(z); /* ending: reap() takes it, unnamed */
    z->pid = 0;
    /* The network, IPC and UTS namespaces its hosts share, when they get
     * namespaces at all (a user of their own: spawn_host()). */
    unsigned ns = L.slots ? L.c->namespaces : 0;
    if (host_env(e, NULL, spawn_level(ns, sandbox_cg_enabled()), envp, &nenv) <
        0) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if ((ns & SANDBOX_NS_NET) && L.netpool)
        netfd = sandbox_netpool_take();
    const struct sandbox_zygote_start st = {
        .path = e->path,
        .envp = envp,
        .namespaces = ns,
        .net_fd = netfd,
        .filters_fd = L.filters ? L.filters[e - L.c->engines] : -1,
    };
    z->pid = sandbox_zygote_start(&st, &z->sock, why, sizeof why);
    if (z->pid < 0) {
        z->pid = 0;
        z->sock = -1;
        snprintf(err, errlen, "cannot start it: %.360s", why);
        goto out;
    }
    if (sandbox_zygote_wait_ready(z->sock, ZYGOTE_READY_MS, why, sizeof why) <
        0) {
        snprintf(err, errlen, "%.120s (pid %d): %.240s", e->path, (int)z->pid,
                 why);
        zygote_lost(z);
        goto out;
    }
    rc = 0;
out:
    if (netfd >= 0)
        close(netfd);
    for (size_t i = 0; i < nenv; i++)
        free(envp[i]);
    if (L.netpool)
        L.netpool = sandbox_netpool_fill();
    return rc;
}

/* Asks e's zygote (started when it is not running) to fork a host as
 * sp describes, on channel chan (and Landlock ruleset landlock, or -1):
 * 0 with *c filled, or -1 with errno and err. */
static int
zygote_fork(const struct sandbox_launcher_engine *e, uint32_t seq, int chan,
            int landlock, const struct sandbox_spawn *sp,
            struct sandbox_child *c, char *err, size_t errlen)
{
    struct lzygote *z = &L.zygotes[e - L.c->engines];
    struct zygote_fork m = {
        .type = ZYGOTE_FORK,
        .seq = seq,
        .landlock = landlock >= 0,
        .namespaces = sp->namespaces,
        .landlock_abi = sp->landlock_abi,
        .drop = sp->drop,
        .uid = sp->uid,
        .gid = sp->gid,
        .rlimits = sp->rlimits,
    };
    int fds[ZYGOTE_FDS_MAX];
    unsigned n = 0;

    /* A zygote killed as it started (or just before a fork was asked of
     * it: nothing of this spawn reached it yet) is not the worker's
     * failure: a second one is tried once.  One that cannot start fails
     * twice. */
    if (zygote_up(e, err, errlen) < 0 && zygote_up(e, err, errlen) < 0) {
        errno = EAGAIN;
        return -1;
    }
    fds[n++] = chan;
    if (landlock >= 0)
        fds[n++] = landlock;
    m.ncg = sandbox_cg_join_fds(sp->cg, fds + n, ZYGOTE_CG_FDS);
    n += m.ncg;
    if (sandbox_zygote_send(z->sock, &m, sizeof m, fds, n) < 0) {
        int saved = errno;
        snprintf(err, errlen, "cannot ask it: %s", strerror(saved));
        zygote_lost(z);
        errno = saved;
        return -1;
    }
    /* Its answer; deaths of its other hosts may come first. */
    for (;;) {
        struct zygote_forked r = { .type = 0 };
        struct pollfd p = { .fd = z->sock, .events = POLLIN };
        int fd = -1, prc;

        do
            prc = poll(&p, 1, ZYGOTE_FORK_MS);
        while (prc < 0 && errno == EINTR);
        if (prc == 0) {
            snprintf(err, errlen, "no answer within %d ms: killed",
                     ZYGOTE_FORK_MS);
            zygote_lost(z);
            errno = ETIMEDOUT;
            return -1;
        }
        if (zygote_message(z, true, &r, &fd) == 0) {
            snprintf(err, errlen, "it ended");
            errno = EPIPE;
            return -1;
        }
        if (r.type != ZYGOTE_FORKED)
            continue; /* a death */
        if (r.seq != seq) {
            if (fd >= 0)
                close(fd);
            continue; /* a late answer to a spawn that gave up */
        }
        if (r.error != 0) {
            r.why[sizeof r.why - 1] = '\0';
            snprintf(err, errlen, "%s", r.why);
            if (fd >= 0)
                close(fd);
            errno = r.error;
            return -1;
        }
        c->pid = r.pid;
        c->init = r.init != 0;
        c->exit_fd = fd;
        if (fd >= 0)
            (void)fcntl(fd, F_SETFL, O_NONBLOCK);
        return 0;
    }
}

/* Starts what q asks, with chan as its channel; fills r. */
/* A host's cgroup: a leaf named after its worker and a number (a
 * restart's group is a new one, while the old one may still be being
 * removed), under its tenant's group when it has one ("" : none), with
 * the memory limit and the daemon's pids and cpu limits. */
static struct sandbox_cg *
host_cgroup(const char *worker_id, uint32_t memory_mb, const char *tenant,
            uint32_t cpu_weight, uint32_t cpu_max, char *err, size_t errlen)
{
    const struct sandbox_cg_limits lim = {
        .memory_bytes = (uint64_t)memory_mb << 20,
        .pids_max = L.c->pids_max,
        .cpu_percent = L.c->cpu_percent,
    };
    const struct sandbox_cg_share share = {
        .tenant = tenant,
        .cpu_weight = cpu_weight,
        .cpu_max_percent = cpu_max,
    };
    char leaf[128];

    snprintf(leaf, sizeof leaf, "%s-%u", worker_id, ++L.cg_seq);
    return sandbox_cg_create_in(tenant[0] ? &share : NULL, leaf, &lim, err,
                                errlen);
}

static void
spawn_host(const struct launcher_spawn *q, int chan, struct launcher_spawned *r)
{
    const struct sandbox_launcher_engine *e;
    char *envp[ENV_MAX] = { NULL };
    char *argv[2] = { NULL, NULL };
    char err[LAUNCHER_WHY_MAX];
    size_t nenv = 0;
    int binfd = -1, landlock = -1, slot = -1, netfd = -1;
    bool shared_user;
    struct lhost h = { .seq = q->seq, .slot = -1 };

    if (!plain_word(q->engine, sizeof q->engine)) {
        refuse(r, EINVAL, "crash",
               "refused: an engine name of other than [A-Za-z0-9._-]");
        return;
    }
    if ((e = find_engine(q->engine)) == NULL) {
        refuse(r, ENOENT, "engine_unavailable",
               "the launcher has no engine named %s", q->engine);
        return;
    }
    if (q->tenant[0] && !plain_word(q->tenant, sizeof q->tenant)) {
        refuse(r, EINVAL, "crash",
               "refused: a tenant of other than [A-Za-z0-9._-]");
        return;
    }
    if (!plain_word(q->worker_id, sizeof q->worker_id)) {
        refuse(r, EINVAL, "crash",
               "refused: a worker id of other than "
               "[A-Za-z0-9._-]");
        return;
    }
    if (find_host(q->seq)) {
        refuse(r, EEXIST, "crash", "refused: spawn %u is running", q->seq);
        return;
    }
    if (L.nhosts == L.cap) {
        size_t cap = L.cap ? 2 * L.cap : 16;
        struct lhost *v = realloc(L.hosts, cap * sizeof *v);
        if (v == NULL) {
            refuse(r, ENOMEM, "crash", "out of memory");
            return;
        }
        L.hosts = v;
        L.cap = cap;
    }
    if (L.c->confine) {
        h.cg = host_cgroup(q->worker_id, q->memory_mb, q->tenant, q->cpu_weight,
                           q->cpu_max, err, sizeof err);
        if (h.cg == NULL && err[0]) {
            refuse(r, EIO, "crash", "cannot make its cgroup: %s", err);
            return;
        }
    }
    int filters = L.filters ? L.filters[e - L.c->engines] : -1;
    slot = take_slot(&shared_user);
    if (slot < 0 && !shared_user) {
        refuse(r, EAGAIN, "crash",
               "no free host user: all %u of host_uid_count (from "
               "host_uid_base %u) are running hosts",
               L.c->uid_count, L.c->uid_base);
        goto fail;
    }
    h.slot = slot;
    /* Namespaces and the private root for a host of its own user (they
     * hide nothing from a host that shares the daemon's). */
    unsigned ns = slot >= 0 ? L.c->namespaces : 0;
    if (L.c->landlock_abi > 0 && !(ns & SANDBOX_NS_MOUNT) &&
        (landlock = host_landlock(e->path, e->role, err, sizeof err)) < 0) {
        refuse(r, EACCES, "engine_unavailable", "%s", err);
        goto fail;
    }
    enum sandbox_level level = spawn_level(ns, h.cg != NULL);
    argv[0] = (char *)(uintptr_t)e->path;
    if (host_env(e, q->worker_id, level, envp, &nenv) < 0) {
        refuse(r, ENOMEM, "crash", "out of memory");
        goto fail;
    }
    /* A host of its own user is exec'd through a descriptor opened here,
     * with the launcher's rights: its user need not be able to reach the
     * binary's directory (a build tree, a test's directory). */
    if (slot >= 0 && !e->zygote &&
        (binfd = open(e->path, O_PATH | O_CLOEXEC)) < 0) {
        refuse(r, errno, "engine_unavailable", "%s: opening it: %s", e->path,
               strerror(errno));
        goto fail;
    }
    uid_t uid = slot >= 0 ? (uid_t)(L.c->uid_base + (uint32_t)slot) : getuid();
    if ((ns & SANDBOX_NS_NET) && L.netpool && !e->zygote)
        netfd = sandbox_netpool_take();
    const struct sandbox_spawn sp = {
        .role = e->role,
        .path = e->path,
        .argv = argv,
        .envp = envp,
        .channel_fd = chan,
        .exec_fd = binfd,
        .cg = h.cg,
        .namespaces = ns,
        .landlock_abi = L.c->landlock_abi,
        .landlock_fd = landlock,
        .net_fd = netfd,
        .filters_fd = filters,
        .drop = slot >= 0,
        .uid = uid,
        .gid = (gid_t)uid,
        .rlimits = { .nofile = HOST_NOFILE,
                     .nproc = L.c->pids_max,
                     .fsize = HOST_FSIZE,
                     .memlock = HOST_MEMLOCK,
                     .as = host_as(q->memory_mb),
                     .core_off = 1 },
    };
    if (e->zygote) {
        h.z = &L.zygotes[e - L.c->engines];
        if (zygote_fork(e, q->seq, chan, landlock, &sp, &h.child, err,
                        sizeof err) < 0) {
            refuse(r, errno, "engine_unavailable", "%s zygote: %s", e->name,
                   err);
            goto fail;
        }
    } else if (sandbox_spawn(&sp, &h.child, err, sizeof err) < 0) {
        refuse(r, errno, "engine_unavailable", "%s: %s", e->path, err);
        goto fail;
    }
    h.host_pid = h.child.init ? init_child(h.child.pid) : h.child.pid;
    L.hosts[L.nhosts++] = h;
    r->pid = h.child.pid;
    r->host_pid = h.host_pid;
    r->init = h.child.init;
    r->level = level;
    r->uid = uid;
    goto out;

fail:
    if (slot >= 0)
        L.slots[slot] = 0;
    sandbox_cg_destroy(h.cg);
out:
    if (binfd >= 0)
        close(binfd);
    if (landlock >= 0)
        close(landlock);
    if (netfd >= 0)
        close(netfd); /* the host holds it now, or it is gone */
    for (size_t i = 0; i < nenv; i++)
        free(envp[i]);
}

/* SIGKILL to the host's process group and to it (for a host with an
 * init, the init: its namespace dies with it). */
static void
kill_host(const struct lhost *h)
{
    /* A zygote's host is its child: only the zygote knows the pid is
     * still that host's. */
    if (h->z && h->z->sock >= 0) {
        const struct zygote_kill k = { .type = ZYGOTE_KILL,
                                       .pid = (int32_t)h->child.pid };
        if (sandbox_zygote_send(h->z->sock, &k, sizeof k, NULL, 0) == 0)
            return;
        zygote_lost(h->z); /* then its hosts die with it */
    }
    (void)kill(-h->child.pid, SIGKILL);
    (void)kill(h->child.pid, SIGKILL);
}

/* Keeps one seccomp kill of the audit log (audit.h), the oldest dropped. */
static void
on_audit_kill(void *arg, const struct sandbox_audit_kill *k)
{
    const unsigned max = sizeof L.kills / sizeof L.kills[0];

    (void)arg;
    if (L.nkills == max) {
        memmove(L.kills, L.kills + 1, (max - 1) * sizeof L.kills[0]);
        L.nkills--;
    }
    L.kills[L.nkills++] = *k;
}

/* The system call a seccomp filter killed host pid for, from the audit
 * log, into d; -1 in d->syscall when the log did not name it.  The record
 * is queued before the death is visible (audit.h), so it is read now,
 * with a short wait only when it is not there yet. */
static void
seccomp_call(pid_t pid, struct launcher_death *d)
{
    d->syscall = -1;
    if (L.audit_fd < 0 || pid <= 0)
        return;
    for (int tries = 0; tries < 2; tries++) {
        (void)sandbox_audit_read(L.audit_fd, on_audit_kill, NULL);
        for (unsigned i = L.nkills; i-- > 0;) {
            const struct sandbox_audit_kill *k = &L.kills[i];
            if (k->pid == pid) {
                d->syscall = k->syscall;
                sandbox_syscall_name(k->syscall, k->arch, d->syscall_name,
                                     sizeof d->syscall_name);
                return;
            }
        }
        struct pollfd pfd = { .fd = L.audit_fd, .events = POLLIN };
        if (tries == 0 && poll(&pfd, 1, AUDIT_WAIT_MS) <= 0)
            break;
    }
}

/* Releases what h held: its cgroup, its user, its exit pipe. */
static void
release(struct lhost *h)
{
    sandbox_cg_destroy(h->cg);
    if (h->slot >= 0)
        L.slots[h->slot] = 0;
    if (h->child.exit_fd >= 0)
        close(h->child.exit_fd);
}

/* Reaps every child that ended; one death report per host of ours
 * (orphans of hosts, reparented here, are only reaped). */
static void
reap(void)
{
    int wstatus;
    pid_t pid;

    while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
        size_t i = host_by_pid(pid);
        if (i < L.nhosts) {
            host_ended(i, wstatus);
            continue;
        }
        for (size_t k = 0; L.zygotes && k < L.c->nengines; k++) {
            struct lzygote *z = &L.zygotes[k];
            if (z->pid != pid)
                continue;
            say("the %s zygote (pid %d) ended (wait status 0x%x); the next "
                "host of the engine starts a new one",
                L.c->engines[k].name, (int)pid, (unsigned)wstatus);
            zygote_lost(z);
            z->pid = 0;
        }
    }
}

/* Host i ended with wstatus (as its parent saw it: the launcher, or its
 * zygote): its death report, and what it held released. */
static void
host_ended(size_t i, int wstatus)
{
    struct lhost *h = &L.hosts[i];
    struct launcher_death d = { .type = LAUNCHER_DEATH, .seq = h->seq };
    int st = wstatus;

    /* An init's own status tells only that it ended: the host's is in
     * its record (none when the init was killed, with its namespace). */
    if (h->child.init && sandbox_exit_read(h->child.exit_fd, &st) == 0)
        st = wstatus;
    d.wstatus = st;
    /* The memory limit's OOM killer sends SIGKILL; its group counts it. */
    d.oom = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL &&
            sandbox_cg_oom_kills(h->cg) > 0;
    /* Killed with its zygote (the parent-death signal is SIGKILL); a host
     * that ended otherwise meanwhile ended on its own. */
    d.zygote_lost =
        h->orphaned && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && !d.oom;
    d.syscall = -1;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS)
        seccomp_call(h->host_pid, &d);
    release(h);
    L.hosts[i] = L.hosts[--L.nhosts];
    send_msg(&d, sizeof d);
}

/* The master is gone: every host dies, is reaped, and its group with it;
 * then the daemon's cgroups; the launcher exits. */
static void __attribute__((noreturn)) finish(void)
{
    /* The zygotes first: their hosts die with them, and the rest are
     * killed by pid here (their parent is gone or going). */
    for (size_t k = 0; L.zygotes && k < L.c->nengines; k++)
        zygote_lost(&L.zygotes[k]);
    for (size_t i = 0; i < L.nhosts; i++)
        kill_host(&L.hosts[i]);
    for (size_t i = 0; i < L.nhosts; i++) {
        while (waitpid(L.hosts[i].child.pid, NULL, 0) < 0 && errno == EINTR)
            ;
        release(&L.hosts[i]);
    }
    /* What is left: the zygotes, and their hosts, the launcher's children
     * once their zygote is reaped (it is their subreaper).  Everything
     * was sent SIGKILL; a process stuck in the kernel gets 2 s. */
    for (int i = 0; i < 200; i++) {
        pid_t pid = waitpid(-1, NULL, WNOHANG);
        if (pid < 0 && errno == ECHILD)
            break;
        if (pid <= 0)
            usleep(10000);
    }
    sandbox_cg_fini();
    _exit(0);
}

/* Each engine's role's filters, compiled once for every host of it
 * (sandbox.h, sandbox_role_compile()), in the hosts' mode
 * (SANDBOX_DEBUG_ENV, which they get too).  An engine whose filters
 * cannot be compiled here gets none: its hosts compile their own, and
 * fail there if it cannot be done. */
static void
compile_filters(void)
{
#ifdef WM_SANDBOX
    enum sandbox_mode mode = sandbox_mode_parse(getenv(SANDBOX_DEBUG_ENV));
    char err[256];

    L.filters = calloc(L.c->nengines ? L.c->nengines : 1, sizeof *L.filters);
    if (L.filters == NULL)
        return;
    for (size_t i = 0; i < L.c->nengines; i++) {
        const struct sandbox_role *role = L.c->engines[i].role;
        L.filters[i] = -1;
        for (size_t j = 0; j < i && L.filters[i] < 0; j++)
            if (L.c->engines[j].role == role && L.filters[j] >= 0)
                L.filters[i] = L.filters[j]; /* the same role's */
        if (L.filters[i] < 0 && role->filter &&
            (L.filters[i] = sandbox_role_compile(role, mode, err, sizeof err)) <
                0)
            say("%s: its hosts compile their own filters", err);
    }
#endif
}

/* The zygotes of the engines that have one, started now so that the
 * first host does not wait for its engine's start; one that fails is
 * named here and tried again by its first spawn (which then fails with
 * the reason). */
static void
start_zygotes(void)
{
    char err[LAUNCHER_WHY_MAX];

    L.zygotes = calloc(L.c->nengines ? L.c->nengines : 1, sizeof *L.zygotes);
    if (L.zygotes == NULL) {
        say("out of memory");
        _exit(1);
    }
    for (size_t k = 0; k < L.c->nengines; k++) {
        L.zygotes[k].sock = -1;
        /* An engine whose host is missing is unavailable (the master
         * says so); its zygote is tried when a host is asked for. */
        if (!L.c->engines[k].zygote || access(L.c->engines[k].path, X_OK) != 0)
            continue;
        if (zygote_up(&L.c->engines[k], err, sizeof err) < 0)
            say("engine %s: its zygote: %s", L.c->engines[k].name, err);
    }
}

/* A pool host's processes into a leaf under its worker's tenant's group
 * (struct launcher_adopt). */
static void
adopt_host(struct launcher_adopt *q)
{
    struct lhost *h = find_host(q->seq);
    char err[512];

    q->tenant[sizeof q->tenant - 1] = '\0';
    q->worker_id[sizeof q->worker_id - 1] = '\0';
    if (h == NULL || h->cg == NULL)
        return; /* it ended, or runs without cgroups */
    if (!plain_word(q->tenant, sizeof q->tenant) ||
        !plain_word(q->worker_id, sizeof q->worker_id)) {
        say("adopt %u refused: a tenant or worker id of other than "
            "[A-Za-z0-9._-]",
            q->seq);
        return;
    }
    struct sandbox_cg *cg = host_cgroup(
        q->worker_id, 0, q->tenant, q->cpu_weight, q->cpu_max, err, sizeof err);
    if (cg == NULL || sandbox_cg_move(h->cg, cg) < 0) {
        say("adopt %u into tenant %s: %s", q->seq, q->tenant,
            cg ? strerror(errno) : err);
        if (cg)
            sandbox_cg_destroy(cg); /* what moved dies with it */
        return;
    }
    sandbox_cg_destroy(h->cg);
    h->cg = cg;
}

/* One message from the master: acted on when it passes every check. */
static void
on_request(void)
{
    union {
        struct launcher_spawn spawn;
        struct launcher_kill kill;
        struct launcher_adopt adopt;
        uint32_t type;
        char raw[sizeof(struct launcher_spawn) + 1];
    } m;
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = { .iov_base = &m, .iov_len = sizeof m };
    struct msghdr msg = { .msg_iov = &iov,
                          .msg_iovlen = 1,
                          .msg_control = ctl.buf,
                          .msg_controllen = sizeof ctl.buf };
    int fds[4], nfds = 0;
    ssize_t n;

    memset(&m, 0, sizeof m);
    n = recvmsg(L.sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0)
        finish(); /* the master's end closed */
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t j = 0; j < k && nfds < 4; j++)
            memcpy(&fds[nfds++], CMSG_DATA(c) + j * sizeof(int), sizeof(int));
    }
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
        say("a truncated request was dropped");
    else if (m.type == LAUNCHER_SPAWN && n == sizeof m.spawn && nfds == 1) {
        struct launcher_spawned r = { .type = LAUNCHER_SPAWNED,
                                      .seq = m.spawn.seq };
        spawn_host(&m.spawn, fds[0], &r);
        send_msg(&r, sizeof r);
        /* The next host's network namespace, after this one's start. */
        if (L.netpool)
            L.netpool = sandbox_netpool_fill();
    } else if (m.type == LAUNCHER_ADOPT && n == sizeof m.adopt && nfds == 0) {
        adopt_host(&m.adopt);
    } else if (m.type == LAUNCHER_KILL && n == sizeof m.kill && nfds == 0) {
        struct lhost *h = find_host(m.kill.seq);
        if (h)
            kill_host(h); /* else it ended: its report is on its way */
    } else {
        say("a request of type %u and %zd bytes with %d descriptors was "
            "refused",
            m.type, n, nfds);
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
}

static void __attribute__((noreturn))
run(const struct sandbox_launcher_config *c, int sock)
{
    sigset_t chld;
    int sigfd;

    L.c = c;
    L.audit_fd = -1;
    L.root = geteuid() == 0;
    (void)prctl(PR_SET_NAME, "wm-launcher", 0, 0, 0);
    /* The orphans of hosts come back here to be reaped. */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    /* Nothing of the master's but stdin, stdout, stderr and the socket. */
    if (sock != 3) {
        if (dup2(sock, 3) < 0)
            _exit(1);
        close(sock);
        sock = 3;
    }
    if (syscall(SYS_close_range, 4u, ~0u, 0u) < 0) {
        for (int fd = 4; fd < 1024; fd++)
            (void)close(fd);
    }
    (void)fcntl(sock, F_SETFD, FD_CLOEXEC);
    L.sock = sock;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &chld, NULL) < 0 ||
        (sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        say("cannot watch its hosts' exits: %s", strerror(errno));
        _exit(1);
    }
    if (c->confine && L.root) {
        char why[160];
        L.audit_fd = sandbox_audit_open(why, sizeof why);
        if (L.audit_fd < 0)
            say("%s: a host a seccomp filter kills is reported without the "
                "system call",
                why);
        if (c->namespaces & SANDBOX_NS_NET)
            L.netpool = sandbox_netpool_fill();
        if (c->uid_count && c->uid_base &&
            (L.slots = calloc(c->uid_count, 1)) == NULL) {
            say("out of memory");
            _exit(1);
        }
    }
    if (c->confine)
        compile_filters();
    start_zygotes();
    struct pollfd *pfds = calloc(3 + c->nengines, sizeof *pfds);
    size_t *zi = calloc(c->nengines + 1, sizeof *zi);
    if (pfds == NULL || zi == NULL) {
        say("out of memory");
        _exit(1);
    }
    for (;;) {
        /* The master's socket, SIGCHLD, the audit log, each zygote's. */
        size_t np = 3, nz = 0;
        pfds[0] = (struct pollfd){ .fd = sock, .events = POLLIN };
        pfds[1] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
        pfds[2] = (struct pollfd){ .fd = L.audit_fd, .events = POLLIN };
        for (size_t k = 0; k < L.c->nengines; k++) {
            if (L.zygotes[k].sock < 0)
                continue;
            zi[nz++] = k;
            pfds[np++] =
                (struct pollfd){ .fd = L.zygotes[k].sock, .events = POLLIN };
        }
        if (poll(pfds, np, -1) < 0) {
            if (errno == EINTR)
                continue;
            say("poll: %s", strerror(errno));
            finish();
        }
        struct pollfd *p = pfds;
        for (size_t j = 0; j < nz; j++)
            if (p[3 + j].revents && L.zygotes[zi[j]].sock == p[3 + j].fd)
                while (L.zygotes[zi[j]].sock >= 0 &&
                       zygote_message(&L.zygotes[zi[j]], false, NULL, NULL))
                    ;
        if (p[1].revents) {
            struct signalfd_siginfo si;
            while (read(sigfd, &si, sizeof si) == sizeof si)
                ;
            reap();
        }
        if (L.audit_fd >= 0 && p[2].revents)
            (void)sandbox_audit_read(L.audit_fd, on_audit_kill, NULL);
        if (p[0].revents)
            on_request();
    }
}

pid_t
sandbox_launcher_start(const struct sandbox_launcher_config *c, int *fd,
                       char *err, size_t errlen)
{
    int sv[2];
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pid == 0) {
        close(sv[0]);
        run(c, sv[1]);
    }
    close(sv[1]);
    *fd = sv[0];
    return pid;
}
