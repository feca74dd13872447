/*
 * test_sandbox_detect.c — sandbox_detect() agrees with the kernel, asked
 * another way (sandbox/detect.c; DESIGN §10, §11).
 *
 * Each mechanism is probed here independently of detect.c: seccomp from
 * /proc/self/status and /proc/sys/kernel/seccomp/actions_avail, namespaces
 * by clone(2) with the flag (detect.c uses unshare(2)), Landlock by
 * creating a real ruleset, cgroups from /proc/self/mountinfo, MDWE by
 * PR_GET_MDWE.  Then the level must follow from the fields, and the summary
 * name them (with this process's capabilities, as creds.c reads them).
 *
 * SANDBOX_MUST_WORK=1 (CI, DESIGN §11): every mechanism the CI machine kind
 * was measured to have (Debian 12 on kernel 6.x, root, cgroup v1 memory,
 * pids and cpu hierarchies) must be reported, so that a sandbox that
 * silently stops engaging fails the run instead of degrading.
 */
#include "config.h"

#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/creds.h"
#include "sandbox/kernel.h"
#include "tests/unit/check.h"

static struct sandbox_support sup;

static bool
has_word(const char *text, const char *word, const char *seps)
{
    size_t n = strlen(word);

    for (const char *p = text; p && (p = strstr(p, word)) != NULL; p += n) {
        bool start = p == text || strchr(seps, p[-1]) != NULL;
        bool end = p[n] == '\0' || strchr(seps, p[n]) != NULL;
        if (start && end)
            return true;
    }
    return false;
}

static void
test_seccomp_agrees_with_proc(void)
{
    const char *st = check_slurp("/proc/self/status");
    bool filters, nnp;

    REQUIRE(st != NULL);
    filters = strstr(st, "\nSeccomp_filters:") != NULL;
    nnp = strstr(st, "\nNoNewPrivs:") != NULL;
    CHECK_EQ(sup.no_new_privs, nnp);
    /* A kernel that counts filters has filter mode. */
    CHECK_EQ(sup.seccomp, filters && strstr(st, "\nSeccomp:") != NULL);

    const char *avail = check_slurp("/proc/sys/kernel/seccomp/actions_avail");
    unsigned bits = 0;
    for (unsigned b = 1; b < (1u << SANDBOX_ACT_COUNT); b <<= 1)
        if (avail && has_word(avail, sandbox_act_name(b), " \n"))
            bits |= b;
    CHECK_EQ(sup.seccomp_acts, bits);
}

/* clone(flag | SIGCHLD) as a fork whose child exits at once; clone3 for
 * CLONE_NEWTIME, which clone(2) cannot carry (its low byte is the exit
 * signal). */
static bool
clone_works(int flag)
{
    struct clone_args ca = {
        .flags = (uint64_t)flag,
        .exit_signal = SIGCHLD,
    };
    long pid = flag == CLONE_NEWTIME
                   ? syscall(SYS_clone3, &ca, sizeof ca)
                   : syscall(SYS_clone, (unsigned long)(flag | SIGCHLD), NULL,
                             NULL, NULL, 0UL);
    int st;

    if (pid < 0)
        return false;
    if (pid == 0)
        syscall(SYS_exit_group, 0);
    if (waitpid((pid_t)pid, &st, 0) < 0)
        return false;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void
test_namespaces_agree_with_clone(void)
{
    static const int flags[SANDBOX_NS_COUNT] = {
        CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWNET,
        CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME,
    };

    for (unsigned i = 0; i < SANDBOX_NS_COUNT; i++) {
        unsigned bit = 1u << i;
        bool detected = (sup.namespaces & bit) != 0;
        bool works = clone_works(flags[i]);
        char path[64];

        if (detected != works)
            FAIL("namespace %s: detected %d, clone says %d",
                 sandbox_ns_name(bit), detected, works);
        snprintf(path, sizeof path, "/proc/self/ns/%s", sandbox_ns_name(bit));
        if (detected && access(path, F_OK) != 0)
            FAIL("namespace %s detected, but %s is missing",
                 sandbox_ns_name(bit), path);
    }
}

static void
test_landlock_agrees_with_a_ruleset(void)
{
    struct landlock_ruleset_attr attr = {
        .handled_access_fs = LANDLOCK_ACCESS_FS_READ_FILE,
    };
    long fd = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);

    if (fd >= 0)
        close((int)fd);
    CHECK_EQ(sup.landlock_abi > 0, fd >= 0);
    if (fd >= 0)
        CHECK_EQ(sup.landlock_abi, syscall(SYS_landlock_create_ruleset, NULL, 0,
                                           LANDLOCK_CREATE_RULESET_VERSION));
}

/* The controllers mountinfo shows: v2 at /sys/fs/cgroup, else v1 mounts
 * (rw) under /sys/fs/cgroup. */
static void
test_cgroups_agree_with_mountinfo(void)
{
    const char *mi = check_slurp("/proc/self/mountinfo");
    char line[1024];
    unsigned v1 = 0;
    bool v2_root = false;

    REQUIRE(mi != NULL);
    for (const char *p = mi; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char mnt[256], fstype[64], super[512];
        const char *dash;

        snprintf(line, sizeof line, "%.*s", (int)n, p);
        p += n + (nl ? 1 : 0);
        dash = strstr(line, " - ");
        if (dash == NULL || sscanf(line, "%*s %*s %*s %*s %255s", mnt) != 1 ||
            sscanf(dash, " - %63s %*s %511s", fstype, super) != 2)
            continue;
        if (strcmp(fstype, "cgroup2") == 0 &&
            strcmp(mnt, "/sys/fs/cgroup") == 0)
            v2_root = true;
        if (strcmp(fstype, "cgroup") != 0 ||
            strncmp(mnt, "/sys/fs/cgroup/", 15) != 0 ||
            !has_word(super, "rw", ","))
            continue;
        for (unsigned b = 1; b < (1u << SANDBOX_CG_COUNT); b <<= 1)
            if (has_word(super, sandbox_cg_name(b), ","))
                v1 |= b;
    }
    if (v2_root) {
        const char *ctl = check_slurp("/sys/fs/cgroup/cgroup.controllers");
        unsigned v2 = 0;
        for (unsigned b = 1; b < (1u << SANDBOX_CG_COUNT); b <<= 1)
            if (ctl && has_word(ctl, sandbox_cg_name(b), " \n"))
                v2 |= b;
        CHECK_EQ(sup.cgroup, v2 ? SANDBOX_CGROUP_V2 : SANDBOX_CGROUP_NONE);
        CHECK_EQ(sup.cgroup_ctls, v2);
    } else if (v1) {
        CHECK_EQ(sup.cgroup, SANDBOX_CGROUP_V1);
        CHECK_EQ(sup.cgroup_ctls, v1);
    } else {
        /* A hybrid's unified hierarchy may hold them; never v1. */
        CHECK(sup.cgroup != SANDBOX_CGROUP_V1);
    }
}

static void
test_mdwe_agrees_with_prctl(void)
{
    int rc = prctl(PR_GET_MDWE, 0, 0, 0, 0);

    CHECK_EQ(sup.mdwe, rc >= 0);
}

static void
test_level_follows_the_fields(void)
{
    enum sandbox_level want = SANDBOX_LEVEL_NONE;
    unsigned cg = SANDBOX_CG_MEMORY | SANDBOX_CG_PIDS;

    if (sup.seccomp && sup.no_new_privs) {
        want = SANDBOX_LEVEL_SECCOMP;
        if ((sup.namespaces & SANDBOX_NS_ISOLATE) == SANDBOX_NS_ISOLATE) {
            want = SANDBOX_LEVEL_NS;
            if (sup.landlock_abi > 0 && (sup.cgroup_ctls & cg) == cg)
                want = SANDBOX_LEVEL_FULL;
        }
    }
    CHECK_EQ(sup.level, want);
}

static void
test_names_and_summary(void)
{
    enum sandbox_level l;
    char buf[512], want[64];

    for (int i = SANDBOX_LEVEL_NONE; i <= SANDBOX_LEVEL_FULL; i++) {
        REQUIRE(sandbox_level_parse(sandbox_level_name(i), &l) == 0);
        CHECK_EQ(l, i);
    }
    CHECK(sandbox_level_parse("most", &l) == -1);
    CHECK(sandbox_level_parse(NULL, &l) == -1);
    sandbox_support_summary(&sup, buf, sizeof buf);
    snprintf(want, sizeof want,
             "confinement %s:", sandbox_level_name(sup.level));
    CHECK(strncmp(buf, want, strlen(want)) == 0);
    if (sup.landlock_abi > 0) {
        snprintf(want, sizeof want, "landlock abi %d", sup.landlock_abi);
        CHECK(check_has_all(buf, want, NULL));
    }
    CHECK(check_has_all(buf, sup.mdwe ? ", mdwe" : "no mdwe", NULL));
    /* This process's capabilities (creds.c; test_sandbox_creds.c checks
     * the text against the kernel's). */
    char caps[SANDBOX_CAPS_TEXT];
    CHECK(sup.capabilities[0] != '\0');
    CHECK(strcmp(sup.capabilities, sandbox_creds_caps(caps, sizeof caps)) == 0);
    snprintf(want, sizeof want, ", capabilities %.40s", sup.capabilities);
    CHECK(check_has_all(buf, want, NULL));
    /* Truncation keeps a terminated string. */
    sandbox_support_summary(&sup, buf, 8);
    CHECK_EQ(strlen(buf), 7);
    printf("# %s\n", sandbox_support_summary(&sup, buf, sizeof buf));
}

/* What keeps a machine below a level, named for the operator. */
static void
test_missing(void)
{
    struct sandbox_support s = { 0 };
    char buf[512];

    /* Nothing: every mechanism of each level up to the one asked for. */
    CHECK(strcmp(sandbox_missing(&s, SANDBOX_LEVEL_NONE, buf, sizeof buf),
                 "") == 0);
    sandbox_missing(&s, SANDBOX_LEVEL_SECCOMP, buf, sizeof buf);
    CHECK(check_has_all(buf, "no no_new_privs", "no seccomp filter", NULL));
    CHECK(strstr(buf, "namespace") == NULL);
    sandbox_missing(&s, SANDBOX_LEVEL_FULL, buf, sizeof buf);
    CHECK(check_has_all(buf, "no no_new_privs",
                        "no mnt pid net ipc uts "
                        "namespaces",
                        "no Landlock", "no cgroup memory controller",
                        "no cgroup pids controller", NULL));
    /* Only what lacks: here the pid namespace and the pids controller. */
    s.no_new_privs = s.seccomp = true;
    s.namespaces = SANDBOX_NS_ISOLATE & ~SANDBOX_NS_PID;
    s.landlock_abi = 3;
    s.cgroup = SANDBOX_CGROUP_V1;
    s.cgroup_ctls = SANDBOX_CG_MEMORY;
    CHECK(strcmp(sandbox_missing(&s, SANDBOX_LEVEL_SECCOMP, buf, sizeof buf),
                 "") == 0);
    sandbox_missing(&s, SANDBOX_LEVEL_FULL, buf, sizeof buf);
    CHECK(check_has_all(buf, "no pid namespace (", ", no cgroup pids", NULL));
    CHECK(strstr(buf, "seccomp") == NULL && strstr(buf, "Landlock") == NULL &&
          strstr(buf, "memory") == NULL);
    /* This machine: nothing lacks for its own level. */
    CHECK(strcmp(sandbox_missing(&sup, sup.level, buf, sizeof buf), "") == 0);
    sandbox_missing(&s, SANDBOX_LEVEL_FULL, buf, 10);
    CHECK_EQ(strlen(buf), 9);
}

/* What the CI machine kind has (measured): a missing one fails. */
static void
test_must_work(void)
{
    const unsigned acts = SANDBOX_ACT_KILL_PROCESS | SANDBOX_ACT_TRAP |
                          SANDBOX_ACT_ERRNO | SANDBOX_ACT_USER_NOTIF |
                          SANDBOX_ACT_LOG | SANDBOX_ACT_ALLOW;
    const unsigned all_ns = (1u << SANDBOX_NS_COUNT) - 1;
    const unsigned cgs = SANDBOX_CG_MEMORY | SANDBOX_CG_PIDS | SANDBOX_CG_CPU;
    const char *must = getenv("SANDBOX_MUST_WORK");

    if (must == NULL || strcmp(must, "1") != 0) {
        printf("# SANDBOX_MUST_WORK is not 1: what is missing is not a "
               "failure\n");
        return;
    }
    if (!sup.no_new_privs)
        FAIL("no_new_privs is missing");
    if (!sup.seccomp)
        FAIL("seccomp filters are missing");
    for (unsigned b = 1; b < (1u << SANDBOX_ACT_COUNT); b <<= 1)
        if ((acts & b) && !(sup.seccomp_acts & b))
            FAIL("seccomp action %s is missing", sandbox_act_name(b));
    for (unsigned b = 1; b < (1u << SANDBOX_NS_COUNT); b <<= 1)
        if ((all_ns & b) && !(sup.namespaces & b))
            FAIL("the %s namespace is missing", sandbox_ns_name(b));
    if (sup.landlock_abi < 1)
        FAIL("Landlock is missing");
    for (unsigned b = 1; b < (1u << SANDBOX_CG_COUNT); b <<= 1)
        if ((cgs & b) && !(sup.cgroup_ctls & b))
            FAIL("the %s cgroup controller is missing", sandbox_cg_name(b));
    if (!sup.mdwe)
        FAIL("MDWE is missing");
    CHECK_EQ(sup.level, SANDBOX_LEVEL_FULL);
}

int
main(void)
{
    sandbox_detect(&sup);
    RUN(test_seccomp_agrees_with_proc);
    RUN(test_namespaces_agree_with_clone);
    RUN(test_landlock_agrees_with_a_ruleset);
    RUN(test_cgroups_agree_with_mountinfo);
    RUN(test_mdwe_agrees_with_prctl);
    RUN(test_level_follows_the_fields);
    RUN(test_names_and_summary);
    RUN(test_missing);
    RUN(test_must_work);
    return check_result();
}
