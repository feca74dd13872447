/*
 * confine.c — what each layer of a host's confinement adds to its start
 * (issue 7; bench/README.md): the spawn steps of master/host.c, layer by
 * layer, each run RUNS times: fork, the layers in the child, execveat of
 * /usr/bin/true through a descriptor (as hosts are exec'd), wait.  The
 * time is the parent's, from fork to the child's reaped exit; the cgroup
 * level includes making and removing the group, as a host's start and end
 * do.  Run as root (every layer needs it); prints the median and p90 of
 * each level and the median added over the level before.
 *
 * Usage: confine [RUNS]   (default 100)
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "sandbox/creds.h"
#include "sandbox/landlock.h"
#include "sandbox/root.h"
#include "sandbox/sandbox.h"

enum level {
    L_BARE,     /* fork + execveat + wait */
    L_CGROUP,   /* + a cgroup made, joined, removed */
    L_NS,       /* + net, ipc, uts, cgroup namespaces */
    L_ROOT,     /* + a mount namespace and the private root */
    L_CREDS,    /* + its own uid, no capabilities, rlimits */
    L_LANDLOCK, /* + the Landlock domain */
    L_COUNT
};

static const char *const names[L_COUNT] = {
    "fork + exec + wait",          "+ cgroup (make, join, remove)",
    "+ net ipc uts cgroup ns",     "+ mount ns, private root",
    "+ own uid, no caps, rlimits", "+ Landlock",
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
child(enum level l, int binfd, const struct sandbox_cg *cg, int cap_last,
      int abi)
{
    static char arg0[] = "true";
    char *const argv[] = { arg0, NULL };
    char *const envp[] = { NULL };
    const struct sandbox_rlimits rl = {
        .nofile = 256, .nproc = 256, .fsize = 1u << 30, .core_off = 1
    };
    const char *step;

    if (l >= L_CGROUP && sandbox_cg_attach(cg, 0) < 0)
        _exit(101);
    if (l >= L_NS &&
        unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP |
                (l >= L_ROOT ? CLONE_NEWNS : 0)) < 0)
        _exit(102);
    if (l >= L_ROOT && sandbox_root_enter(&step) < 0)
        _exit(103);
    if (l >= L_CREDS && (sandbox_creds_drop(3999999, 3999999, cap_last) < 0 ||
                         sandbox_rlimits_apply(&rl) < 0))
        _exit(104);
    if (l >= L_LANDLOCK && sandbox_landlock_enter(abi, binfd) < 0)
        _exit(105);
    syscall(SYS_execveat, binfd, "", argv, envp, AT_EMPTY_PATH);
    _exit(106);
}

int
main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 100;
    struct sandbox_support sup;
    char err[512], leaf[64];
    double med[L_COUNT];
    int binfd, cap_last = sandbox_cap_last(), abi;

    if (runs < 1 || geteuid() != 0) {
        fprintf(stderr, "usage: confine [RUNS] (as root)\n");
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
    printf("confine: %d starts per level, /usr/bin/true exec'd through a "
           "descriptor; ms from fork to the reaped exit\n",
           runs);
    for (int l = 0; l < L_COUNT; l++) {
        for (int i = 0; i < runs; i++) {
            const struct sandbox_cg_limits lim = { 64u << 20, 64, 0 };
            struct sandbox_cg *cg = NULL;
            int st = -1;
            double t0 = now_ms();

            if (l >= L_CGROUP) {
                snprintf(leaf, sizeof leaf, "b%d-%d", l, i);
                cg = sandbox_cg_create(leaf, &lim, err, sizeof err);
                if (cg == NULL) {
                    fprintf(stderr, "confine: %s\n", err);
                    return 1;
                }
            }
            pid_t pid = fork();
            if (pid == 0)
                child((enum level)l, binfd, cg, cap_last, abi);
            if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
                WEXITSTATUS(st) != 0) {
                fprintf(stderr, "confine: level %s: child status %d\n",
                        names[l], st);
                return 1;
            }
            sandbox_cg_destroy(cg);
            t[i] = now_ms() - t0;
        }
        qsort(t, (size_t)runs, sizeof *t, cmp);
        med[l] = t[runs / 2];
        printf("  %-32s median %6.3f ms, p90 %6.3f ms, added %+6.3f ms\n",
               names[l], med[l], t[runs * 9 / 10],
               l ? med[l] - med[l - 1] : 0.0);
    }
    printf("  all layers add %.3f ms (median) to a start\n",
           med[L_COUNT - 1] - med[L_BARE]);
    sandbox_cg_fini();
    free(t);
    return 0;
}
