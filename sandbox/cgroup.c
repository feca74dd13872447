/*
 * cgroup.c — per-host cgroups under a directory the daemon owns
 * (cgroup.h).
 *
 * One table of hierarchies, filled by sandbox_cg_init(): for v1 one per
 * controller (/sys/fs/cgroup/memory, .../pids, .../cpu, .../cpuacct; one
 * entry for controllers mounted together, as cpu,cpuacct often are), for
 * v2 the
 * unified one with the controllers enabled down to the daemon's
 * directory.
 *
 * v2 starts from the daemon's own group G (sandbox_support.cgroup_path:
 * under systemd the service's, which Delegate=yes hands over), never from
 * the hierarchy's root, and keeps v2's rule that a group with controllers
 * enabled for its children holds no process itself: the daemon first
 * moves into the leaf G/daemon (the launcher, forked after, starts there
 * too; not when G is the hierarchy's root, which may hold processes),
 * then enables the controllers in G, and the hosts' groups are
 * G/PARENT/d<pid>/<leaf>, beside that leaf.  A host's group is a leaf of the
 * same name in each.  The daemon is single-threaded where it calls these (its
 * event loop); the table is written once, at start-up.
 */
#include "config.h"

#include "sandbox/cgroup.h"
#include "sandbox/sysfile.h"

#include "lib/name.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HIER_MAX SANDBOX_CG_COUNT
#define PATH_LEN 512

struct hier {
    unsigned ctls;      /* SANDBOX_CG_* it carries */
    char dir[PATH_LEN]; /* the daemon's: .../PARENT/d<pid> */
};

static struct {
    enum sandbox_cgroup flavour;
    unsigned n;
    struct hier h[HIER_MAX];
} cg_root;

struct sandbox_cg {
    unsigned n;
    int procs[HIER_MAX]; /* each leaf's tasks (v1) or cgroup.procs (v2),
                            open for writing: sandbox_cg_attach() */
    char dir[HIER_MAX][PATH_LEN];
};

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    int e = errno;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    errno = e;
    return -1;
}

/* Writes s to dir/file: 0, or -1 with errno. */
static int
put_file(const char *dir, const char *file, const char *s)
{
    char path[PATH_LEN + 64];
    int fd, rc = 0;

    snprintf(path, sizeof path, "%s/%s", dir, file);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
        rc = -1;
    int e = errno;
    (void)close(fd);
    errno = e;
    return rc;
}

/* Reads dir/file into buf (NUL-terminated): its length, or -1. */
static ssize_t
get_file(const char *dir, const char *file, char *buf, size_t len)
{
    char path[PATH_LEN + 64];

    snprintf(path, sizeof path, "%s/%s", dir, file);
    return sandbox_sysfile_read(path, buf, len);
}

static void
sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* SIGKILL to every process listed in dir's cgroup.procs until it lists
 * none (about 1 s at most). */
static void
kill_all(const char *dir)
{
    char buf[4096];

    for (int round = 0; round < 200; round++) {
        if (get_file(dir, "cgroup.procs", buf, sizeof buf) <= 0)
            return;
        for (char *p = buf, *end; *p; p = end) {
            long pid = strtol(p, &end, 10);

            if (end == p)
                break;
            if (pid > 0)
                (void)kill((pid_t)pid, SIGKILL);
        }
        sleep_ms(5);
    }
}

/* Removes dir, an empty group once its processes are gone (rmdir answers
 * EBUSY while one is still exiting). */
static void
remove_group(const char *dir)
{
    kill_all(dir);
    for (int i = 0; i < 200; i++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return;
        if (errno != EBUSY)
            return;
        sleep_ms(5);
    }
}

/* Removes dir's subdirectories (the groups of hosts, and the tenants'
 * groups with theirs), then dir. */
static void
remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char sub[PATH_LEN + 260];

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue;
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        if (strncmp(e->d_name, "t-", 2) == 0)
            remove_tree(sub);
        else
            remove_group(sub);
    }
    closedir(d);
    remove_group(dir);
}

/* Removes PARENT's d<pid> directories whose daemon no longer runs. */
static void
remove_stale(const char *parent)
{
    DIR *d = opendir(parent);
    struct dirent *e;
    char sub[PATH_LEN + 260];

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid;

        if (e->d_name[0] != 'd')
            continue;
        pid = strtol(e->d_name + 1, &end, 10);
        if (end == e->d_name + 1 || *end != '\0' || pid <= 0)
            continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        snprintf(sub, sizeof sub, "%s/%s", parent, e->d_name);
        remove_tree(sub);
    }
    closedir(d);
}

/* mkdir that accepts an existing directory. */
static int
make_dir(const char *path)
{
    return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* v2: the controllers of ctls enabled for dir's children. */
static int
enable_v2(const char *dir, unsigned ctls)
{
    for (unsigned b = 1; b < (1u << SANDBOX_CG_COUNT); b <<= 1) {
        char word[32];

        if (!(ctls & b))
            continue;
        snprintf(word, sizeof word, "+%s", sandbox_cg_name(b));
        if (put_file(dir, "cgroup.subtree_control", word) < 0)
            return -1;
    }
    return 0;
}

static bool
name_ok(const char *s, size_t max)
{
    return name_word_valid(s, max) && s[0] != '.';
}

/* v2: this process into the leaf own/daemon, then own's controllers
 * enabled for its children (see the file comment).  0, or -1 with errno
 * and *where naming the file. */
static int
v2_delegate(const char *own, unsigned ctls, char *where, size_t len)
{
    char leaf[PATH_LEN], pid[24];
    struct stat st;

    /* The hierarchy's root (no cgroup.type there) may hold processes. */
    snprintf(leaf, sizeof leaf, "%s/cgroup.type", own);
    if (stat(leaf, &st) < 0 && errno == ENOENT) {
        snprintf(where, len, "%s/cgroup.subtree_control", own);
        return enable_v2(own, ctls);
    }
    snprintf(leaf, sizeof leaf, "%s/daemon", own);
    snprintf(where, len, "%s", leaf);
    if (make_dir(leaf) < 0)
        return -1;
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    snprintf(where, len, "%s/cgroup.procs", leaf);
    if (put_file(leaf, "cgroup.procs", pid) < 0)
        return -1;
    snprintf(where, len, "%s/cgroup.subtree_control", own);
    return enable_v2(own, ctls);
}

/* v2: own/daemon, then own/PARENT/d<pid> with the controllers enabled
 * down to it; one hierarchy, with whatever controllers own has (none
 * still keeps each host in a group of its own). */
static int
v2_init(const struct sandbox_support *s, const char *parent, char *err,
        size_t errlen)
{
    struct hier *h = &cg_root.h[0];
    char top[PATH_LEN - 32], where[PATH_LEN + 64];

    if (v2_delegate(s->cgroup_path, s->cgroup_ctls, where, sizeof where) < 0) {
        fail(err, errlen,
             "cgroup v2: cannot set up the daemon's leaf in its group %s "
             "(%s: %s)%s",
             s->cgroup_path, where, strerror(errno),
             errno == EBUSY ? ": other processes live in that group; run "
                              "the daemon as the only process of a "
                              "delegated group (systemd: Delegate=yes)"
                            : "");
        memset(&cg_root, 0, sizeof cg_root);
        return -1;
    }
    h->ctls = s->cgroup_ctls;
    snprintf(top, sizeof top, "%s/%s", s->cgroup_path, parent);
    snprintf(h->dir, sizeof h->dir, "%s/d%ld", top, (long)getpid());
    snprintf(where, sizeof where, "%s", top);
    if (make_dir(top) < 0 || enable_v2(top, h->ctls) < 0)
        goto bad;
    remove_stale(top);
    snprintf(where, sizeof where, "%s", h->dir);
    if (make_dir(h->dir) < 0)
        goto bad;
    cg_root.n = 1;
    if (enable_v2(h->dir, h->ctls) < 0)
        goto bad;
    return 0;
bad:
    fail(err, errlen, "cgroup: cannot set up %s: %s", where, strerror(errno));
    sandbox_cg_fini();
    return -1;
}

/* v1: whether controller b's hierarchy is one already in the table (the
 * usual cpu,cpuacct mount, which /sys/fs/cgroup/cpu and .../cpuacct both
 * name): then b joins that entry's controllers rather than making a second
 * entry for the same directories. */
static bool
v1_shared(const struct sandbox_support *s, unsigned b)
{
    char path[PATH_LEN], mine[PATH_MAX], other[PATH_MAX];

    snprintf(path, sizeof path, "%s/%s", s->cgroup_path, sandbox_cg_name(b));
    if (realpath(path, mine) == NULL)
        return false;
    for (unsigned i = 0; i < cg_root.n; i++) {
        unsigned first = cg_root.h[i].ctls & -cg_root.h[i].ctls;

        snprintf(path, sizeof path, "%s/%s", s->cgroup_path,
                 sandbox_cg_name(first));
        if (realpath(path, other) != NULL && strcmp(mine, other) == 0) {
            cg_root.h[i].ctls |= b;
            return true;
        }
    }
    return false;
}

int
sandbox_cg_init(const struct sandbox_support *s, const char *parent, char *err,
                size_t errlen)
{
    char top[PATH_LEN - 32];
    const char *where = top;

    memset(&cg_root, 0, sizeof cg_root);
    if (s->cgroup == SANDBOX_CGROUP_NONE ||
        (s->cgroup == SANDBOX_CGROUP_V1 && s->cgroup_ctls == 0))
        return 0;
    if (!name_ok(parent, 100))
        return fail(err, errlen,
                    "cgroup_parent '%s' is not a directory name "
                    "([A-Za-z0-9._-], at most 100 bytes)",
                    parent);
    cg_root.flavour = s->cgroup;
    if (s->cgroup == SANDBOX_CGROUP_V2)
        return v2_init(s, parent, err, errlen);
    for (unsigned b = 1; b < (1u << SANDBOX_CG_COUNT); b <<= 1) {
        struct hier *h = &cg_root.h[cg_root.n];

        if (!(s->cgroup_ctls & b) || v1_shared(s, b))
            continue;
        snprintf(top, sizeof top, "%s/%s/%s", s->cgroup_path,
                 sandbox_cg_name(b), parent);
        h->ctls = b;
        snprintf(h->dir, sizeof h->dir, "%s/d%ld", top, (long)getpid());
        if (make_dir(top) < 0)
            goto bad;
        remove_stale(top);
        where = h->dir;
        if (make_dir(h->dir) < 0)
            goto bad;
        where = top;
        cg_root.n++;
    }
    return 0;
bad:
    fail(err, errlen, "cgroup: cannot set up %s: %s", where, strerror(errno));
    sandbox_cg_fini();
    return -1;
}

int
sandbox_cg_enabled(void)
{
    return cg_root.n > 0;
}

/* The limits of l on leaf dir of hierarchy h. */
static int
set_limits(const struct hier *h, const char *dir,
           const struct sandbox_cg_limits *l, const char **what)
{
    char v[64];
    bool v2 = cg_root.flavour == SANDBOX_CGROUP_V2;

    if ((h->ctls & SANDBOX_CG_MEMORY) && l->memory_bytes) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)l->memory_bytes);
        *what = v2 ? "memory.max" : "memory.limit_in_bytes";
        if (put_file(dir, *what, v) < 0)
            return -1;
        /* No swap beyond the limit, where swap is accounted. */
        const char *swap =
            v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes";
        if (put_file(dir, swap, v2 ? "0" : v) < 0 && errno != ENOENT) {
            *what = swap;
            return -1;
        }
    }
    if ((h->ctls & SANDBOX_CG_PIDS) && l->pids_max) {
        snprintf(v, sizeof v, "%u", l->pids_max);
        *what = "pids.max";
        if (put_file(dir, *what, v) < 0)
            return -1;
    }
    if ((h->ctls & SANDBOX_CG_CPU) && l->cpu_percent) {
        unsigned long quota = (unsigned long)l->cpu_percent * 1000ul;

        if (v2) {
            snprintf(v, sizeof v, "%lu 100000", quota);
            *what = "cpu.max";
            if (put_file(dir, *what, v) < 0)
                return -1;
        } else {
            *what = "cpu.cfs_period_us";
            if (put_file(dir, *what, "100000") < 0)
                return -1;
            snprintf(v, sizeof v, "%lu", quota);
            *what = "cpu.cfs_quota_us";
            if (put_file(dir, *what, v) < 0)
                return -1;
        }
    }
    return 0;
}

/* The CPU share of a tenant's group dir in hierarchy h (the cpu
 * controller's only): v2 cpu.weight and cpu.max, v1 cpu.shares (weight
 * 100 is v1's 1024) and the CFS quota.  0, or -1 with *what. */
static int
set_share(const struct hier *h, const char *dir,
          const struct sandbox_cg_share *s, const char **what)
{
    char v[64];
    unsigned long quota = (unsigned long)s->cpu_max_percent * 1000ul;

    if (!(h->ctls & SANDBOX_CG_CPU))
        return 0;
    if (cg_root.flavour == SANDBOX_CGROUP_V2) {
        snprintf(v, sizeof v, "%u", s->cpu_weight);
        *what = "cpu.weight";
        if (put_file(dir, *what, v) < 0)
            return -1;
        if (quota)
            snprintf(v, sizeof v, "%lu 100000", quota);
        else
            snprintf(v, sizeof v, "max 100000");
        *what = "cpu.max";
        return put_file(dir, *what, v);
    }
    snprintf(v, sizeof v, "%lu", (unsigned long)s->cpu_weight * 1024ul / 100);
    *what = "cpu.shares";
    if (put_file(dir, *what, v) < 0)
        return -1;
    *what = "cpu.cfs_period_us";
    if (put_file(dir, *what, "100000") < 0)
        return -1;
    snprintf(v, sizeof v, "%ld", quota ? (long)quota : -1l);
    *what = "cpu.cfs_quota_us";
    return put_file(dir, *what, v);
}

/* The tenant's group t-<tenant> in each hierarchy, made if missing, its
 * share written (again: the operator may have changed it), v2's
 * controllers enabled for its children; its path in hierarchy i into
 * dirs[i].  0, or -1 with a message. */
static int
tenant_group(const struct sandbox_cg_share *s, char dirs[][PATH_LEN], char *err,
             size_t errlen)
{
    const char *what = "mkdir";

    if (!name_ok(s->tenant, 100) || s->cpu_weight < 1 ||
        s->cpu_weight > 10000) {
        errno = EINVAL;
        return fail(err, errlen,
                    "cgroup: tenant '%s' with cpu weight %u is not a "
                    "group (a name of [A-Za-z0-9._-], a weight of 1 to "
                    "10000)",
                    s->tenant, s->cpu_weight);
    }
    for (unsigned i = 0; i < cg_root.n; i++) {
        const struct hier *h = &cg_root.h[i];
        int n = snprintf(dirs[i], PATH_LEN, "%s/t-%s", h->dir, s->tenant);

        if (n < 0 || n >= PATH_LEN) {
            errno = ENAMETOOLONG;
            return fail(err, errlen, "cgroup: %s/t-%s: %s", h->dir, s->tenant,
                        strerror(errno));
        }
        what = "mkdir";
        if (make_dir(dirs[i]) < 0 || set_share(h, dirs[i], s, &what) < 0)
            return fail(err, errlen, "cgroup: %s %s: %s", dirs[i], what,
                        strerror(errno));
        if (cg_root.flavour == SANDBOX_CGROUP_V2 &&
            enable_v2(dirs[i], h->ctls) < 0)
            return fail(err, errlen, "cgroup: %s cgroup.subtree_control: %s",
                        dirs[i], strerror(errno));
    }
    return 0;
}

struct sandbox_cg *
sandbox_cg_create(const char *leaf, const struct sandbox_cg_limits *l,
                  char *err, size_t errlen)
{
    return sandbox_cg_create_in(NULL, leaf, l, err, errlen);
}

struct sandbox_cg *
sandbox_cg_create_in(const struct sandbox_cg_share *share, const char *leaf,
                     const struct sandbox_cg_limits *l, char *err,
                     size_t errlen)
{
    char parents[HIER_MAX][PATH_LEN];
    struct sandbox_cg *cg;
    const char *what = "cgroup.procs";
    char path[PATH_LEN + 16], where[PATH_LEN] = "";

    if (errlen)
        err[0] = '\0';
    if (cg_root.n == 0)
        return NULL;
    if (!name_ok(leaf, 100)) {
        errno = EINVAL;
        fail(err, errlen, "cgroup: '%s' is not a group name", leaf);
        return NULL;
    }
    struct sandbox_cg_limits lim = *l;
    if (share && tenant_group(share, parents, err, errlen) < 0)
        return NULL;
    /* v1 refuses a child's CFS quota above its parent's (EINVAL): a host
     * gets at most its tenant's. */
    if (share && share->cpu_max_percent &&
        (lim.cpu_percent == 0 || lim.cpu_percent > share->cpu_max_percent))
        lim.cpu_percent = share->cpu_max_percent;
    cg = calloc(1, sizeof *cg);
    if (cg == NULL) {
        fail(err, errlen, "cgroup: out of memory");
        return NULL;
    }
    for (unsigned i = 0; i < cg_root.n; i++) {
        const struct hier *h = &cg_root.h[i];
        int n = snprintf(cg->dir[i], sizeof cg->dir[i], "%s/%s",
                         share ? parents[i] : h->dir, leaf);

        cg->procs[i] = -1;
        snprintf(where, sizeof where, "%s", cg->dir[i]);
        if (n < 0 || (size_t)n >= sizeof cg->dir[i]) {
            errno = ENAMETOOLONG;
            goto bad;
        }
        if (mkdir(cg->dir[i], 0755) < 0) {
            what = "mkdir";
            cg->dir[i][0] = '\0';
            goto bad;
        }
        cg->n = i + 1;
        if (set_limits(h, cg->dir[i], &lim, &what) < 0)
            goto bad;
        /* v1: the thread's file, tasks: moving one thread is what a
         * single-threaded child between fork and exec needs, and costs
         * about 0.5 ms where cgroup.procs waits for the hierarchy's
         * threadgroup lock, ~15 ms on a quiet machine (bench/README.md,
         * research/zygote-coldstart.md).  v2 has cgroup.procs only. */
        what = cg_root.flavour == SANDBOX_CGROUP_V1 ? "tasks" : "cgroup.procs";
        snprintf(path, sizeof path, "%s/%s", cg->dir[i], what);
        cg->procs[i] = open(path, O_WRONLY | O_CLOEXEC);
        if (cg->procs[i] < 0)
            goto bad;
    }
    return cg;
bad:
    fail(err, errlen, "cgroup: %s %s: %s", where, what, strerror(errno));
    sandbox_cg_destroy(cg);
    return NULL;
}

int
sandbox_cg_attach(const struct sandbox_cg *cg, pid_t pid)
{
    char buf[24];
    size_t i = sizeof buf;
    unsigned long v = pid > 0 ? (unsigned long)pid : 0;

    /* The number by hand: snprintf is not async-signal-safe. */
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (unsigned h = 0; h < cg->n; h++)
        if (write(cg->procs[h], buf + i, sizeof buf - i) < 0)
            return -1;
    return 0;
}

unsigned
sandbox_cg_join_fds(const struct sandbox_cg *cg, int *fds, unsigned max)
{
    unsigned n = 0;

    for (unsigned i = 0; cg && i < cg->n && n < max; i++)
        if (cg->procs[i] >= 0)
            fds[n++] = cg->procs[i];
    return n;
}

struct sandbox_cg *
sandbox_cg_adopt(const int *fds, unsigned n)
{
    struct sandbox_cg *cg = calloc(1, sizeof *cg);

    if (cg == NULL || n > HIER_MAX) {
        for (unsigned i = 0; i < n; i++)
            (void)close(fds[i]);
        free(cg);
        return NULL;
    }
    for (unsigned i = 0; i < n; i++)
        cg->procs[i] = fds[i];
    cg->n = n;
    return cg;
}

/* The number after "key " in a flat-keyed file's text, or 0 and false. */
static bool
keyed(const char *text, const char *key, uint64_t *out)
{
    size_t n = strlen(key);

    for (const char *line = text; line && *line;) {
        if (strncmp(line, key, n) == 0 && line[n] == ' ') {
            *out = strtoull(line + n + 1, NULL, 10);
            return true;
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return false;
}

uint64_t
sandbox_cg_oom_kills(const struct sandbox_cg *cg)
{
    char buf[1024];
    bool v2 = cg_root.flavour == SANDBOX_CGROUP_V2;

    for (unsigned i = 0; cg && i < cg->n; i++) {
        if (!(cg_root.h[i].ctls & SANDBOX_CG_MEMORY))
            continue;
        if (get_file(cg->dir[i], v2 ? "memory.events" : "memory.oom_control",
                     buf, sizeof buf) <= 0)
            return 0;
        uint64_t kills = 0;
        (void)keyed(buf, "oom_kill", &kills);
        return kills;
    }
    return 0;
}

int
sandbox_cg_move(const struct sandbox_cg *from, const struct sandbox_cg *to)
{
    char buf[4096];

    for (unsigned i = 0; i < from->n && i < to->n; i++) {
        if (get_file(from->dir[i], "cgroup.procs", buf, sizeof buf) < 0)
            return -1;
        for (char *p = buf, *end; *p; p = end) {
            char pid[24];
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            snprintf(pid, sizeof pid, "%ld", v);
            if (put_file(to->dir[i], "cgroup.procs", pid) < 0 && errno != ESRCH)
                return -1;
        }
    }
    return 0;
}

unsigned
sandbox_cg_tenant_usage(const char *tenant, uint64_t *cpu_usec,
                        uint64_t *memory_bytes)
{
    bool v2 = cg_root.flavour == SANDBOX_CGROUP_V2;
    unsigned got = 0;
    char dir[PATH_LEN + 8], buf[1024];

    if (!name_ok(tenant, 100))
        return 0;
    for (unsigned i = 0; i < cg_root.n; i++) {
        const struct hier *h = &cg_root.h[i];
        uint64_t v;

        snprintf(dir, sizeof dir, "%s/t-%s", h->dir, tenant);
        if ((h->ctls & SANDBOX_CG_CPU) && v2 &&
            get_file(dir, "cpu.stat", buf, sizeof buf) > 0 &&
            keyed(buf, "usage_usec", &v)) {
            *cpu_usec = v;
            got |= SANDBOX_CG_CPU;
        } else if ((h->ctls & SANDBOX_CG_CPUACCT) && !v2 &&
                   get_file(dir, "cpuacct.usage", buf, sizeof buf) > 0) {
            *cpu_usec = strtoull(buf, NULL, 10) / 1000u;
            got |= SANDBOX_CG_CPU;
        }
        if ((h->ctls & SANDBOX_CG_MEMORY) &&
            get_file(dir, v2 ? "memory.current" : "memory.usage_in_bytes", buf,
                     sizeof buf) > 0) {
            *memory_bytes = strtoull(buf, NULL, 10);
            got |= SANDBOX_CG_MEMORY;
        }
    }
    return got;
}

void
sandbox_cg_kill(const struct sandbox_cg *cg)
{
    if (cg && cg->n > 0 && cg->dir[0][0])
        kill_all(cg->dir[0]);
}

void
sandbox_cg_destroy(struct sandbox_cg *cg)
{
    if (cg == NULL)
        return;
    for (unsigned i = 0; i < cg->n; i++) {
        if (cg->procs[i] >= 0)
            (void)close(cg->procs[i]);
        if (cg->dir[i][0])
            remove_group(cg->dir[i]);
    }
    free(cg);
}

void
sandbox_cg_fini(void)
{
    for (unsigned i = 0; i < cg_root.n; i++)
        remove_tree(cg_root.h[i].dir);
    memset(&cg_root, 0, sizeof cg_root);
}
