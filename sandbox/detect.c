/*
 * detect.c — what confinement this machine gives this process (sandbox.h).
 *
 * Each mechanism is tried, not inferred from a kernel version or a config
 * file: a kernel can have a feature compiled in and a sysctl, a container
 * runtime's own seccomp filter or a missing capability that stops it.
 * Whatever would change this process for good (a seccomp filter,
 * no_new_privs, unshare, MDWE) is tried in a forked child that reports by
 * its exit status; the children run raw system calls only (no allocation,
 * no stdio), so forking a threaded process is safe.  They are waited for
 * by pid, so a caller's reaper must not be running yet (sandbox.h).
 *
 * A mount namespace is only worth having if the private root (root.h) can
 * be built in it, which can fail where unshare succeeds: in a chroot whose
 * / is not a mount point, "making the mounts private" answers EINVAL.  So
 * a child builds the whole root, every step the spawner takes, and
 * reports the step that failed and its errno through a pipe; where it
 * fails, the mount namespace is not offered (hosts then get none, and a
 * Landlock domain instead of the root) and root_error says why.
 *
 * What needs no child: the seccomp actions (SECCOMP_GET_ACTION_AVAIL
 * changes nothing), the Landlock ABI (landlock_create_ruleset's version
 * query), cgroup hierarchies (statfs of their mounts, their controllers
 * file, and whether they are writable to this process), this process's
 * capabilities (libcap, creds.h).
 */
#include "config.h"

#include "sandbox/creds.h"
#include "sandbox/kernel.h"
#include "sandbox/root.h"
#include "sandbox/sandbox.h"
#include "sandbox/sysfile.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* By bit position: SANDBOX_ACT_* is 1u << i (sandbox.h), and so are the
 * namespace and cgroup bits. */
static const char *const act_names[SANDBOX_ACT_COUNT] = {
    "kill_process", "kill_thread", "trap", "errno",
    "user_notif",   "trace",       "log",  "allow",
};
static const uint32_t act_values[SANDBOX_ACT_COUNT] = {
    SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_KILL_THREAD, SECCOMP_RET_TRAP,
    SECCOMP_RET_ERRNO,        SECCOMP_RET_USER_NOTIF,  SECCOMP_RET_TRACE,
    SECCOMP_RET_LOG,          SECCOMP_RET_ALLOW,
};
static const char *const ns_names[SANDBOX_NS_COUNT] = {
    "user", "mnt", "pid", "net", "ipc", "uts", "cgroup", "time",
};
static const int ns_flags[SANDBOX_NS_COUNT] = {
    CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWNET,
    CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME,
};
static const char *const cg_names[SANDBOX_CG_COUNT] = {
    "memory",
    "pids",
    "cpu",
    "cpuacct",
};

static const char *const level_names[] = {
    [SANDBOX_LEVEL_NONE] = "none",
    [SANDBOX_LEVEL_SECCOMP] = "seccomp",
    [SANDBOX_LEVEL_NS] = "ns",
    [SANDBOX_LEVEL_FULL] = "full",
};

/* names[i] for bit 1u << i, or NULL. */
static const char *
bit_name(const char *const *names, unsigned count, unsigned bit)
{
    for (unsigned i = 0; i < count; i++)
        if (bit == 1u << i)
            return names[i];
    return NULL;
}

const char *
sandbox_act_name(unsigned bit)
{
    return bit_name(act_names, SANDBOX_ACT_COUNT, bit);
}

const char *
sandbox_ns_name(unsigned bit)
{
    return bit_name(ns_names, SANDBOX_NS_COUNT, bit);
}

const char *
sandbox_cg_name(unsigned bit)
{
    return bit_name(cg_names, SANDBOX_CG_COUNT, bit);
}

int
sandbox_ns_clone_flags(unsigned mask)
{
    int flags = 0;

    for (unsigned i = 0; i < SANDBOX_NS_COUNT; i++)
        if (mask & (1u << i))
            flags |= ns_flags[i];
    return flags;
}

const char *
sandbox_level_name(enum sandbox_level level)
{
    if ((unsigned)level >= sizeof level_names / sizeof level_names[0])
        return "?";
    return level_names[level];
}

int
sandbox_level_parse(const char *name, enum sandbox_level *level)
{
    for (size_t i = 0; i < sizeof level_names / sizeof level_names[0]; i++) {
        if (name && strcmp(name, level_names[i]) == 0) {
            *level = (enum sandbox_level)i;
            return 0;
        }
    }
    return -1;
}

enum sandbox_level
sandbox_spawned_level(enum sandbox_level own)
{
    const char *v = getenv(SANDBOX_CONFINEMENT_ENV);
    enum sandbox_level spawned;

    if (own < SANDBOX_LEVEL_SECCOMP || v == NULL ||
        sandbox_level_parse(v, &spawned) != 0 || spawned < own)
        return own;
    return spawned;
}

/* ---- probes in children ------------------------------------------------ */

/* The children's bodies: raw system calls, then _exit (0: it worked). */

static void
child_no_new_privs(void)
{
    _exit(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
                  prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1
              ? 0
              : 1);
}

/* A filter that kills the process on getppid and allows the rest; the
 * child must die by SIGSYS.  No architecture check: the probe's own calls
 * are native, and nothing is at stake in it. */
static void
child_seccomp(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {
        .len = sizeof code / sizeof code[0],
        .filter = code,
    };

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        _exit(2);
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
        _exit(3);
    (void)syscall(SYS_getppid);
    _exit(4); /* still alive: the filter did not engage */
}

static int child_ns_flag;

static void
child_unshare(void)
{
    _exit(unshare(child_ns_flag) == 0 ? 0 : 1);
}

/* The private root, built as the spawner builds it; on failure the errno
 * then the step's name go to root_pipe. */
static int root_pipe[2] = { -1, -1 };

static void
child_private_root(void)
{
    const char *step = "unsharing the mount namespace";
    int e;

    (void)close(root_pipe[0]);
    if (unshare(CLONE_NEWNS) == 0 && sandbox_root_enter(-1, &step) == 0)
        _exit(0);
    e = errno;
    if (write(root_pipe[1], &e, sizeof e) == (ssize_t)sizeof e)
        (void)write(root_pipe[1], step, strlen(step));
    _exit(1);
}

/* MDWE must refuse a mapping both writable and executable. */
static void
child_mdwe(void)
{
    if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0)
        _exit(2);
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    _exit(p == MAP_FAILED && errno == EACCES ? 0 : 3);
}

/* Forks a child that runs body: its pid, or -1. */
static pid_t
child_start(void (*body)(void))
{
    pid_t pid = fork();

    if (pid == 0)
        body(); /* never returns */
    return pid;
}

/* The wait status of a child_start()ed child, or -1. */
static int
child_wait(pid_t pid)
{
    int st;

    if (pid < 0)
        return -1;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return st;
}

static bool
exited_zero(int st)
{
    return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* ---- probes in this process ------------------------------------------- */

static enum sandbox_level level_of(const struct sandbox_support *s);

static unsigned
seccomp_actions(void)
{
    unsigned bits = 0;

    for (unsigned i = 0; i < SANDBOX_ACT_COUNT; i++) {
        uint32_t a = act_values[i];
        if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &a) == 0)
            bits |= 1u << i;
    }
    return bits;
}

static int
landlock_abi(void)
{
#ifdef SYS_landlock_create_ruleset
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0,
                     LANDLOCK_CREATE_RULESET_VERSION);
    return v > 0 ? (int)v : 0;
#else
    return 0;
#endif
}

static bool
is_fs(const char *path, long magic)
{
    struct statfs sf;

    return statfs(path, &sf) == 0 && (long)sf.f_type == magic;
}

/* The controllers named in a v2 cgroup.controllers file, among ours. */
static unsigned
v2_controllers(const char *dir)
{
    char path[sizeof((struct sandbox_support *)0)->cgroup_path + 32];
    char buf[512];
    unsigned bits = 0;

    snprintf(path, sizeof path, "%s/cgroup.controllers", dir);
    if (sandbox_sysfile_read(path, buf, sizeof buf) <= 0)
        return 0;
    for (char *tok = strtok(buf, " \n"); tok; tok = strtok(NULL, " \n"))
        for (unsigned i = 0; i < SANDBOX_CG_COUNT; i++)
            if (strcmp(tok, cg_names[i]) == 0)
                bits |= 1u << i;
    /* Usable only where this process may make groups. */
    snprintf(path, sizeof path, "%s/cgroup.subtree_control", dir);
    return access(path, W_OK) == 0 ? bits : 0;
}

/*
 * This process's own group in the unified hierarchy mounted at mount, from
 * the "0::/path" line of /proc/self/cgroup, into s->cgroup_path: 0, or -1
 * (no such line, or a path that does not fit).  Under systemd that is the
 * service's group, the subtree Delegate=yes hands over; the hierarchy's
 * root is only ever this process's where nothing put it elsewhere.
 */
static int
v2_own_group(struct sandbox_support *s, const char *mount)
{
    char buf[4096];
    char *line;

    if (sandbox_sysfile_read("/proc/self/cgroup", buf, sizeof buf) <= 0)
        return -1;
    for (line = buf; line && *line; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        if (strncmp(line, "0::/", 4) == 0)
            break;
    }
    if (line == NULL || *line == '\0')
        return -1;
    line += 3;
    line[strcspn(line, "\n")] = '\0';
    const char *group = strcmp(line, "/") == 0 ? "" : line;
    int n =
        snprintf(s->cgroup_path, sizeof s->cgroup_path, "%s%s", mount, group);
    return n < 0 || (size_t)n >= sizeof s->cgroup_path ? -1 : 0;
}

/* The unified hierarchy at mount, in this process's own group: true with
 * s filled when its controllers include one of ours (any is enough when
 * any_ok). */
static bool
v2_use(struct sandbox_support *s, const char *mount, bool any_ok)
{
    char path[sizeof s->cgroup_path + 32];

    if (!is_fs(mount, CGROUP2_SUPER_MAGIC) || v2_own_group(s, mount) < 0)
        return false;
    snprintf(path, sizeof path, "%s/cgroup.procs", s->cgroup_path);
    if (access(path, W_OK) != 0)
        return false; /* no group this process may make there */
    s->cgroup_ctls = v2_controllers(s->cgroup_path);
    if (s->cgroup_ctls == 0 && !any_ok)
        return false;
    s->cgroup = SANDBOX_CGROUP_V2;
    return true;
}

/* The v1 hierarchies of our controllers this process may write. */
static bool
v1_use(struct sandbox_support *s)
{
    static const char root[] = "/sys/fs/cgroup";
    char path[128];
    unsigned v1 = 0;

    for (unsigned i = 0; i < SANDBOX_CG_COUNT; i++) {
        snprintf(path, sizeof path, "%s/%s", root, cg_names[i]);
        if (is_fs(path, CGROUP_SUPER_MAGIC) && access(path, W_OK) == 0)
            v1 |= 1u << i;
    }
    if (v1 == 0)
        return false;
    s->cgroup = SANDBOX_CGROUP_V1;
    s->cgroup_ctls = v1;
    snprintf(s->cgroup_path, sizeof s->cgroup_path, "%s", root);
    return true;
}

/* As want says: auto is v2 at /sys/fs/cgroup (pure v2), or v1 hierarchies
 * (legacy and hybrid), or v2 at /sys/fs/cgroup/unified (hybrid) when it
 * has our controllers; v2 is the unified hierarchy wherever it is
 * mounted. */
static void
cgroups(struct sandbox_support *s, enum sandbox_cgroup_want want)
{
    static const char root[] = "/sys/fs/cgroup";
    static const char unified[] = "/sys/fs/cgroup/unified";
    bool v2_only = want == SANDBOX_CGWANT_V2;

    s->cgroup = SANDBOX_CGROUP_NONE;
    s->cgroup_ctls = 0;
    s->cgroup_path[0] = '\0';
    if (want == SANDBOX_CGWANT_NONE)
        return;
    if (want == SANDBOX_CGWANT_V1) {
        (void)v1_use(s);
        return;
    }
    if (is_fs(root, CGROUP2_SUPER_MAGIC)) {
        if (!v2_use(s, root, v2_only))
            s->cgroup_ctls = 0;
        return;
    }
    if ((v2_only || !v1_use(s)) && !v2_use(s, unified, v2_only)) {
        s->cgroup = SANDBOX_CGROUP_NONE;
        s->cgroup_ctls = 0;
    }
}

void
sandbox_detect_cgroups(struct sandbox_support *s, enum sandbox_cgroup_want want)
{
    cgroups(s, want);
    s->level = level_of(s);
}

/* What child_private_root() wrote, as "STEP: strerror" into s. */
static void
root_failure(struct sandbox_support *s)
{
    char buf[sizeof s->root_error];
    size_t got = 0;
    ssize_t n;
    int e = 0;

    while (got < sizeof buf - 1 &&
           (n = read(root_pipe[0], buf + got, sizeof buf - 1 - got)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    if (got < sizeof e) {
        snprintf(s->root_error, sizeof s->root_error, "building it failed");
        return;
    }
    memcpy(&e, buf, sizeof e);
    snprintf(s->root_error, sizeof s->root_error, "%s: %s", buf + sizeof e,
             strerror(e));
}

static enum sandbox_level
level_of(const struct sandbox_support *s)
{
    const unsigned cg_need = SANDBOX_CG_MEMORY | SANDBOX_CG_PIDS;

    if (!s->no_new_privs || !s->seccomp)
        return SANDBOX_LEVEL_NONE;
    if ((s->namespaces & SANDBOX_NS_ISOLATE) != SANDBOX_NS_ISOLATE)
        return SANDBOX_LEVEL_SECCOMP;
    if (s->landlock_abi < 1 || (s->cgroup_ctls & cg_need) != cg_need)
        return SANDBOX_LEVEL_NS;
    return SANDBOX_LEVEL_FULL;
}

/* The children are started together and waited for after, so that they
 * run while the probes that need none do; the cost is a fork each (about
 * 1 ms on a 2-vCPU VM), some 12 ms in all. */
void
sandbox_detect(struct sandbox_support *s)
{
    pid_t nnp, sec, mdwe, root = -1, ns[SANDBOX_NS_COUNT];
    int st;

    memset(s, 0, sizeof *s);
    if (pipe2(root_pipe, O_CLOEXEC) == 0)
        root = child_start(child_private_root);
    if (root_pipe[1] >= 0)
        (void)close(root_pipe[1]);
    root_pipe[1] = -1;
    nnp = child_start(child_no_new_privs);
    sec = child_start(child_seccomp);
    mdwe = child_start(child_mdwe);
    for (size_t i = 0; i < SANDBOX_NS_COUNT; i++) {
        child_ns_flag = ns_flags[i]; /* the child's copy is its own */
        ns[i] = child_start(child_unshare);
    }
    s->seccomp_acts = seccomp_actions();
    s->landlock_abi = landlock_abi();
    cgroups(s, SANDBOX_CGWANT_AUTO);
    sandbox_creds_caps(s->capabilities, sizeof s->capabilities);

    s->no_new_privs = exited_zero(child_wait(nnp));
    st = child_wait(sec);
    s->seccomp = st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS;
    s->mdwe = exited_zero(child_wait(mdwe));
    for (size_t i = 0; i < SANDBOX_NS_COUNT; i++)
        if (exited_zero(child_wait(ns[i])))
            s->namespaces |= 1u << i;
    st = child_wait(root);
    if ((s->namespaces & SANDBOX_NS_MOUNT) && !exited_zero(st)) {
        root_failure(s);
        s->namespaces &= ~SANDBOX_NS_MOUNT;
    }
    if (root_pipe[0] >= 0)
        (void)close(root_pipe[0]);
    root_pipe[0] = -1;
    s->level = level_of(s);
}

/* ---- the summary --------------------------------------------------------- */

struct out {
    char *buf;
    size_t len, off;
};

static void put(struct out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (o->off >= o->len)
        return;
    va_start(ap, fmt);
    n = vsnprintf(o->buf + o->off, o->len - o->off, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->off += (size_t)n < o->len - o->off ? (size_t)n : o->len - o->off;
}

/* "a b c": the names of the bits set in bits, by name(). */
static void
put_bits(struct out *o, unsigned bits, unsigned count,
         const char *(*name)(unsigned))
{
    const char *sep = "";

    for (unsigned i = 0; i < count; i++) {
        if (bits & (1u << i)) {
            put(o, "%s%s", sep, name(1u << i));
            sep = " ";
        }
    }
}

char *
sandbox_support_summary(const struct sandbox_support *s, char *buf, size_t len)
{
    struct out o = { buf, len, 0 };

    if (len == 0)
        return buf;
    buf[0] = '\0';
    put(&o, "confinement %s:", sandbox_level_name(s->level));
    if (s->seccomp && s->no_new_privs) {
        put(&o, " seccomp (");
        put_bits(&o, s->seccomp_acts, SANDBOX_ACT_COUNT, sandbox_act_name);
        put(&o, ")");
    } else {
        put(&o, " no seccomp%s", s->no_new_privs ? "" : ", no no_new_privs");
    }
    if (s->namespaces) {
        put(&o, ", namespaces ");
        put_bits(&o, s->namespaces, SANDBOX_NS_COUNT, sandbox_ns_name);
    } else {
        put(&o, ", no namespaces");
    }
    if (s->root_error[0])
        put(&o, ", no private root (%s)", s->root_error);
    if (s->landlock_abi > 0)
        put(&o, ", landlock abi %d", s->landlock_abi);
    else
        put(&o, ", no landlock");
    if (s->cgroup != SANDBOX_CGROUP_NONE) {
        put(&o, ", cgroup %s (", s->cgroup == SANDBOX_CGROUP_V2 ? "v2" : "v1");
        put_bits(&o, s->cgroup_ctls, SANDBOX_CG_COUNT, sandbox_cg_name);
        put(&o, ")");
    } else {
        put(&o, ", no cgroup controllers");
    }
    put(&o, s->mdwe ? ", mdwe" : ", no mdwe");
    put(&o, ", capabilities %s", s->capabilities);
    return buf;
}

char *
sandbox_missing(const struct sandbox_support *s, enum sandbox_level want,
                char *buf, size_t len)
{
    struct out o = { buf, len, 0 };
    const char *sep = "";

    if (len == 0)
        return buf;
    buf[0] = '\0';
/* Appends one missing mechanism, comma-separated. */
#define MISSING(...)                                                           \
    do {                                                                       \
        put(&o, "%s", sep);                                                    \
        put(&o, __VA_ARGS__);                                                  \
        sep = ", ";                                                            \
    } while (0)
    if (want >= SANDBOX_LEVEL_SECCOMP) {
        if (!s->no_new_privs)
            MISSING("no no_new_privs (prctl PR_SET_NO_NEW_PRIVS refused)");
        if (!s->seccomp)
            MISSING("no seccomp filter with kill_process (kernel without "
                    "CONFIG_SECCOMP_FILTER, or a filter above us forbids it)");
    }
    if (want >= SANDBOX_LEVEL_NS) {
        unsigned lack = SANDBOX_NS_ISOLATE & ~s->namespaces;

        if (s->root_error[0]) {
            MISSING("no private root for hosts: building it in a new mount "
                    "namespace failed at %s (is / a mount point? in a "
                    "chroot, bind-mount its directory onto itself before "
                    "entering it: mount --bind DIR DIR)",
                    s->root_error);
            lack &= ~SANDBOX_NS_MOUNT;
        }
        if (lack) {
            put(&o, "%sno ", sep);
            put_bits(&o, lack, SANDBOX_NS_COUNT, sandbox_ns_name);
            put(&o,
                " namespace%s (unshare refused: the daemon is not root, "
                "or a container's policy forbids it)",
                lack & (lack - 1) ? "s" : "");
            sep = ", ";
        }
    }
    if (want >= SANDBOX_LEVEL_FULL) {
        if (s->landlock_abi < 1)
            MISSING("no Landlock (kernel without it, or not in the lsm= "
                    "list)");
        if (!(s->cgroup_ctls & SANDBOX_CG_MEMORY))
            MISSING("no cgroup memory controller this process may use");
        if (!(s->cgroup_ctls & SANDBOX_CG_PIDS))
            MISSING("no cgroup pids controller this process may use");
    }
#undef MISSING
    return buf;
}
