/*
 * confine.c — what each layer of a host's confinement adds to its start
 * (issue 7; bench/README.md), through the daemon's own spawn
 * (sandbox/spawn.c): roles whose spawner steps grow one layer at a time,
 * each started RUNS times: sandbox_spawn() of /usr/bin/true exec'd
 * through a descriptor (as hosts are), then its reaping (an init's exit
 * record read, as the daemon does).  The time is the parent's, from
 * before the spawn to the reaped exit; the cgroup level includes making
 * and removing the group, as a host's start and end do.
 *
 * The host's own seccomp filters cannot be measured by an exec'd
 * /usr/bin/true: their level forks a child that loads the native role's
 * two filters (sandbox_role_enter + the strict one, as wm-host-native
 * does) and exits, against a child that only exits.
 *
 * Then the cgroup v1 join itself, where the memory hierarchy is v1: a
 * child writing its pid to cgroup.procs (what cgroup.c does) against
 * writing "0" to tasks (zygote-coldstart.md: the procs write takes a
 * global lock that waits for an RCU grace period when cold), with GAP_MS
 * between starts (0: back to back; 50: cold, as hosts start lazily).
 *
 * Run as root (every layer needs it).  Prints the median and p90 of each
 * level and the median added over the level before.
 *
 * Usage: confine [RUNS [GAP_MS]]   (defaults 100, 0)
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "sandbox/creds.h"
#include "sandbox/netpool.h"
#include "sandbox/sandbox.h"
#include "sandbox/spawn.h"

enum level {
    L_BARE,     /* session, descriptors, exec */
    L_CGROUP,   /* + a cgroup made, joined, removed */
    L_NS,       /* + net, ipc, uts, cgroup namespaces */
    L_ROOT,     /* + a mount namespace and the private root */
    L_INIT,     /* + a pid namespace and its init */
    L_CREDS,    /* + its own uid, no capabilities, rlimits */
    L_LANDLOCK, /* + the Landlock domain */
    L_COUNT
};

static const char *const names[L_COUNT] = {
    "spawn + exec + reap",
    "+ cgroup (make, join, remove)",
    "+ net ipc uts cgroup ns",
    "+ mount ns, private root",
    "+ pid ns and its init",
    "+ own uid, no caps, rlimits",
    "+ Landlock",
};

/* Each level's role: the steps up to it, in the native role's order. */
static const struct sandbox_role roles[L_COUNT] = {
    { "bare",
      { SANDBOX_STEP_SESSION, SANDBOX_STEP_FDS, SANDBOX_STEP_EXEC },
      NULL,
      NULL,
      NULL,
      false },
    { "cgroup",
      { SANDBOX_STEP_SESSION, SANDBOX_STEP_CGROUP, SANDBOX_STEP_FDS,
        SANDBOX_STEP_EXEC },
      NULL,
      NULL,
      NULL,
      false },
    { "ns",
      { SANDBOX_STEP_SESSION, SANDBOX_STEP_CGROUP, SANDBOX_STEP_NAMESPACES,
        SANDBOX_STEP_FDS, SANDBOX_STEP_EXEC },
      NULL,
      NULL,
      NULL,
      false },
    { "root",
      { SANDBOX_STEP_SESSION, SANDBOX_STEP_CGROUP, SANDBOX_STEP_NAMESPACES,
        SANDBOX_STEP_ROOT, SANDBOX_STEP_FDS, SANDBOX_STEP_EXEC },
      NULL,
      NULL,
      NULL,
      false },
    { "init",
      { SANDBOX_STEP_SESSION, SANDBOX_STEP_CGROUP, SANDBOX_STEP_NAMESPACES,
        SANDBOX_STEP_ROOT, SANDBOX_STEP_INIT, SANDBOX_STEP_FDS,
        SANDBOX_STEP_EXEC },
      NULL,
      NULL,
      NULL,
      false },
    { "creds",
      { SANDBOX_STEP_SESSION, SANDBOX_STEP_CGROUP, SANDBOX_STEP_NAMESPACES,
        SANDBOX_STEP_ROOT, SANDBOX_STEP_INIT, SANDBOX_STEP_CREDS,
        SANDBOX_STEP_FDS, SANDBOX_STEP_RLIMITS, SANDBOX_STEP_EXEC },
      NULL,
      NULL,
      NULL,
      false },
    { "landlock",
      { SANDBOX_STEP_SESSION, SANDBOX_STEP_CGROUP, SANDBOX_STEP_NAMESPACES,
        SANDBOX_STEP_ROOT, SANDBOX_STEP_INIT, SANDBOX_STEP_CREDS,
        SANDBOX_STEP_LANDLOCK, SANDBOX_STEP_FDS, SANDBOX_STEP_RLIMITS,
        SANDBOX_STEP_EXEC },
      NULL,
      NULL,
      NULL,
      false },
};

static double
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int
cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void
gap(int ms)
{
    if (ms > 0) {
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
}

/* Sorts t[0..n) and prints one line; returns the median. */
static double
report(const char *name, double *t, int n, double before)
{
    qsort(t, (size_t)n, sizeof *t, cmp);
    double med = t[n / 2];
    printf("  %-32s median %6.3f ms, p90 %6.3f ms", name, med, t[n * 9 / 10]);
    if (before >= 0)
        printf(", added %+6.3f ms", med - before);
    printf("\n");
    return med;
}

/* One start of level l: 0, or -1 with a message.  pool: its network
 * namespace made before the clock starts, as the launcher's pool does
 * (sandbox/netpool.h); else unshared by the child. */
static int
start(enum level l, int binfd, int abi, int i, bool pool, double *ms)
{
    static char arg0[] = "true";
    char *const argv[] = { arg0, NULL };
    char *const envp[] = { NULL };
    const struct sandbox_cg_limits lim = { 64u << 20, 64, 0 };
    struct sandbox_cg *cg = NULL;
    struct sandbox_child c;
    char err[512], leaf[64];
    int st = -1;
    unsigned ns = 0;

    if (l >= L_NS)
        ns |= SANDBOX_NS_NET | SANDBOX_NS_IPC | SANDBOX_NS_UTS |
              SANDBOX_NS_CGROUP;
    if (l >= L_ROOT)
        ns |= SANDBOX_NS_MOUNT;
    if (l >= L_INIT)
        ns |= SANDBOX_NS_PID;
    int netfd = pool && (ns & SANDBOX_NS_NET) ? sandbox_netns_make() : -1;
    if (pool && (ns & SANDBOX_NS_NET) && netfd < 0) {
        fprintf(stderr, "confine: a network namespace: %s\n", strerror(errno));
        return -1;
    }
    double t0 = now_ms();
    if (l >= L_CGROUP) {
        snprintf(leaf, sizeof leaf, "b%d-%d", (int)l, i);
        cg = sandbox_cg_create(leaf, &lim, err, sizeof err);
        if (cg == NULL) {
            fprintf(stderr, "confine: %s\n", err);
            return -1;
        }
    }
    const struct sandbox_spawn s = {
        .role = &roles[l],
        .path = "/usr/bin/true",
        .argv = argv,
        .envp = envp,
        .channel_fd = 2,
        .exec_fd = binfd,
        .cg = cg,
        .namespaces = ns,
        .landlock_abi = abi,
        .landlock_fd = -1,
        .net_fd = netfd,
        .filters_fd = -1,
        .drop = l >= L_CREDS,
        .uid = 3999999,
        .gid = 3999999,
        .rlimits = { .nofile = 256,
                     .nproc = 256,
                     .fsize = 1u << 30,
                     .memlock = 64u << 10,
                     .core_off = 1 },
    };
    int rc = sandbox_spawn(&s, &c, err, sizeof err);
    if (netfd >= 0)
        close(netfd);
    if (rc < 0) {
        fprintf(stderr, "confine: level %s: %s\n", names[l], err);
        return -1;
    }
    if (waitpid(c.pid, &st, 0) != c.pid) {
        fprintf(stderr, "confine: waitpid: %s\n", strerror(errno));
        return -1;
    }
    if (c.init && sandbox_exit_read(c.exit_fd, &st) != 1)
        st = -1;
    if (c.exit_fd >= 0)
        close(c.exit_fd);
    sandbox_cg_destroy(cg);
    *ms = now_ms() - t0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "confine: level %s: status %d\n", names[l], st);
        return -1;
    }
    return 0;
}

/* fork, (the native role's two filters,) _exit, wait: ms.  compiled >= 0:
 * the filters compiled ahead (sandbox_role_compile()), given as the
 * launcher gives them; -1: compiled by the child, as a host without them
 * does. */
static double
filters(bool load, int compiled)
{
    double t0 = now_ms();
    int st;
    pid_t pid = fork();

    if (pid == 0) {
#ifdef WM_SANDBOX
        char err[256];
        if (compiled >= 0 && dup2(compiled, SANDBOX_FILTERS_FD) < 0)
            _exit(1);
        if (load &&
            (sandbox_role_enter(&sandbox_role_native, SANDBOX_MODE_ENFORCE, err,
                                sizeof err) != SANDBOX_LEVEL_SECCOMP ||
             sandbox_filter_load(sandbox_role_native.strict,
                                 SANDBOX_MODE_ENFORCE, false, err,
                                 sizeof err) < 0))
            _exit(1);
#else
        (void)load;
        (void)compiled;
#endif
        _exit(0);
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0)
        return -1;
    return now_ms() - t0;
}

/* A v1 memory group joined by its child through file (cgroup.procs with
 * its pid, or tasks with "0"), made and removed around: ms, or -1. */
static double
v1_join(const char *dir, const char *file, int i)
{
    char path[256], grp[200];
    double t0 = now_ms();
    int st;

    snprintf(grp, sizeof grp, "%s/j%d", dir, i);
    if (mkdir(grp, 0755) < 0)
        return -1;
    snprintf(path, sizeof path, "%s/memory.limit_in_bytes", grp);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "67108864", 8) != 8)
        return -1;
    close(fd);
    snprintf(path, sizeof path, "%s/%s", grp, file);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char num[16];
        int n = strcmp(file, "tasks") == 0
                    ? snprintf(num, sizeof num, "0")
                    : snprintf(num, sizeof num, "%d", (int)getpid());
        _exit(write(fd, num, (size_t)n) == n ? 0 : 1);
    }
    close(fd);
    if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0)
        return -1;
    while (rmdir(grp) < 0 && errno == EBUSY)
        ;
    return now_ms() - t0;
}

int
main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 100;
    int gap_ms = argc > 2 ? atoi(argv[2]) : 0;
    struct sandbox_support sup;
    char err[512];
    double med[L_COUNT];
    int binfd, abi;

    if (runs < 2 || gap_ms < 0 || geteuid() != 0) {
        fprintf(stderr, "usage: confine [RUNS [GAP_MS]] (as root)\n");
        return 2;
    }
    sandbox_detect(&sup);
    abi = sup.landlock_abi;
    if (sandbox_cg_init(&sup, "wm-bench", err, sizeof err) != 0 ||
        !sandbox_cg_enabled()) {
        fprintf(stderr, "confine: no cgroups: %s\n", err);
        return 1;
    }
    binfd = open("/usr/bin/true", O_PATH | O_CLOEXEC);
    double *t = calloc((size_t)runs, sizeof *t);
    if (binfd < 0 || t == NULL)
        return 1;
    printf("confine: %d starts per level, %d ms apart, through "
           "sandbox_spawn(), /usr/bin/true exec'd through a descriptor; ms "
           "from the spawn to the reaped exit\n",
           runs, gap_ms);
    for (int l = 0; l < L_COUNT; l++) {
        for (int i = 0; i < runs; i++) {
            gap(gap_ms);
            if (start((enum level)l, binfd, abi, i, true, &t[i]) < 0)
                return 1;
        }
        med[l] = report(names[l], t, runs, l ? med[l - 1] : -1);
    }
    printf("  all spawn layers add %.3f ms (median) to a start\n",
           med[L_COUNT - 1] - med[L_BARE]);
    /* Every layer with the network namespace from the pool and unshared
     * by the child, alternately (so that the machine's drift hits both
     * alike). */
    double *u = calloc((size_t)runs, sizeof *u);
    if (u == NULL)
        return 1;
    for (int i = 0; i < runs; i++) {
        gap(gap_ms);
        if (start(L_LANDLOCK, binfd, abi, i, true, &t[i]) < 0)
            return 1;
        gap(gap_ms);
        if (start(L_LANDLOCK, binfd, abi, i, false, &u[i]) < 0)
            return 1;
    }
    double pooled = report("every layer, net ns from a pool", t, runs, -1);
    report("every layer, net ns unshared", u, runs, pooled);
    free(u);
    for (int i = 0; i < runs; i++) {
        gap(gap_ms);
        double t0 = now_ms();
        int fd = sandbox_netns_make();
        if (fd < 0)
            return 1;
        t[i] = now_ms() - t0;
        close(fd);
    }
    report("(a net ns for the pool, ahead)", t, runs, -1);

    double *f = calloc((size_t)runs, sizeof *f);
    double *g = calloc((size_t)runs, sizeof *g);
    if (f == NULL || g == NULL)
        return 1;
    int compiled = -1;
#ifdef WM_SANDBOX
    compiled = sandbox_role_compile(&sandbox_role_native, SANDBOX_MODE_ENFORCE,
                                    err, sizeof err);
    if (compiled < 0) {
        fprintf(stderr, "confine: %s\n", err);
        return 1;
    }
#endif
    for (int i = 0; i < runs; i++) {
        gap(gap_ms);
        t[i] = filters(false, -1);
        gap(gap_ms);
        f[i] = filters(true, compiled);
        gap(gap_ms);
        g[i] = filters(true, -1);
        if (t[i] < 0 || f[i] < 0 || g[i] < 0) {
            fprintf(stderr, "confine: the filters' child failed\n");
            return 1;
        }
    }
    double fork_med = report("fork + _exit + wait", t, runs, -1);
    double filt_med =
        report("+ the two filters, compiled ahead", f, runs, fork_med);
    report("(+ the two filters, compiled by the host)", g, runs, fork_med);
    if (compiled >= 0)
        close(compiled);
    free(g);
    printf("  with the filters, confinement adds %.3f ms (median) to a "
           "start\n",
           med[L_COUNT - 1] - med[L_BARE] + filt_med - fork_med);

    if (sup.cgroup == SANDBOX_CGROUP_V1 &&
        (sup.cgroup_ctls & SANDBOX_CG_MEMORY)) {
        const char *dir = "/sys/fs/cgroup/memory/wm-bench-join";
        if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
            fprintf(stderr, "confine: %s: %s\n", dir, strerror(errno));
            return 1;
        }
        for (int i = 0; i < runs; i++) {
            gap(gap_ms);
            t[i] = v1_join(dir, "cgroup.procs", 2 * i);
            gap(gap_ms);
            f[i] = v1_join(dir, "tasks", 2 * i + 1);
            if (t[i] < 0 || f[i] < 0) {
                fprintf(stderr, "confine: the v1 join failed: %s\n",
                        strerror(errno));
                return 1;
            }
        }
        printf("  v1 memory group: mkdir, limit, fork, the child joins, "
               "wait, rmdir\n");
        double procs = report("join by cgroup.procs (pid)", t, runs, -1);
        report("join by tasks (\"0\")", f, runs, procs);
        (void)rmdir(dir);
    }
    sandbox_cg_fini();
    free(f);
    free(t);
    return 0;
}
