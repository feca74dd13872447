/*
 * sandbox.h — confining engine hosts (DESIGN §10; issue 7): what this
 * machine offers, measured at start-up, and the seccomp filters of each
 * host role.  Nothing here knows the master or the channel; a host applies
 * its role's steps to itself.
 *
 * Detection (detect.c) tries each mechanism for real, in short-lived
 * children where trying changes the process for good (a seccomp filter,
 * unshare, MDWE), and sums them up in a confinement level:
 *
 *   none      no seccomp filter can be loaded (or no no_new_privs): hosts
 *             run unconfined
 *   seccomp   no_new_privs and seccomp filters whose kill-process action
 *             engages: each host role's syscall table can be enforced
 *   ns        also the mount, pid, net, ipc and uts namespaces, usable by
 *             this process (as root, or through a user namespace): a
 *             private root, no network, no view of other processes
 *   full      also Landlock (any ABI) and cgroup memory and pids limits
 *             (v2 controllers, or v1 hierarchies): paths and resources
 *             confined too
 *
 * Each level includes the ones before it.  MDWE, the user, cgroup and time
 * namespaces, the seccomp actions other than kill-process and this
 * process's capabilities (those the launcher, forked with them, gives its
 * spawner's steps) are reported but belong to no level.  The level says what
 * the machine could give; the confinement a host reports in its Hello is what
 * it applied to itself.
 *
 * Seccomp (seccomp.c): a filter is a default verdict and lists of rules,
 * each a syscall (by libseccomp's name), a verdict (allow, an errno, kill)
 * and up to two argument conditions.  A role descriptor (role_*.c) names
 * its steps in order and its filters, whose lists start with the blocks
 * every host shares (rules.h); the native host's has two stages, a filter
 * before the worker's library is opened and a stricter one after
 * (role_native.c says how they split).  Filters stack: a later one only
 * takes permissions away.
 *
 * Built with --without-sandbox, configure leaves WM_SANDBOX undefined:
 * hosts then call none of the seccomp functions (they are not even built)
 * and report confinement "none".  Detection is always built.
 */
#ifndef WM_SANDBOX_SANDBOX_H
#define WM_SANDBOX_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- detection ---------------------------------------------------------- */

enum sandbox_level {
    SANDBOX_LEVEL_NONE = 0,
    SANDBOX_LEVEL_SECCOMP = 1,
    SANDBOX_LEVEL_NS = 2,
    SANDBOX_LEVEL_FULL = 3,
};

/* Seccomp return actions the kernel offers (SECCOMP_GET_ACTION_AVAIL). */
#define SANDBOX_ACT_KILL_PROCESS (1u << 0)
#define SANDBOX_ACT_KILL_THREAD (1u << 1)
#define SANDBOX_ACT_TRAP (1u << 2)
#define SANDBOX_ACT_ERRNO (1u << 3)
#define SANDBOX_ACT_USER_NOTIF (1u << 4)
#define SANDBOX_ACT_TRACE (1u << 5)
#define SANDBOX_ACT_LOG (1u << 6)
#define SANDBOX_ACT_ALLOW (1u << 7)
#define SANDBOX_ACT_COUNT 8

/* Namespace types that unshare(2) creates for this process (named as in
 * /proc/self/ns). */
#define SANDBOX_NS_USER (1u << 0)
#define SANDBOX_NS_MOUNT (1u << 1)
#define SANDBOX_NS_PID (1u << 2)
#define SANDBOX_NS_NET (1u << 3)
#define SANDBOX_NS_IPC (1u << 4)
#define SANDBOX_NS_UTS (1u << 5)
#define SANDBOX_NS_CGROUP (1u << 6)
#define SANDBOX_NS_TIME (1u << 7)
#define SANDBOX_NS_COUNT 8
/* What level ns needs. */
#define SANDBOX_NS_ISOLATE                                                     \
    (SANDBOX_NS_MOUNT | SANDBOX_NS_PID | SANDBOX_NS_NET | SANDBOX_NS_IPC |     \
     SANDBOX_NS_UTS)

enum sandbox_cgroup {
    SANDBOX_CGROUP_NONE = 0,
    SANDBOX_CGROUP_V1, /* one hierarchy per controller, /sys/fs/cgroup/<c> */
    SANDBOX_CGROUP_V2, /* the unified hierarchy with these controllers */
};

/* cgroup controllers this process may use (a writable hierarchy). */
#define SANDBOX_CG_MEMORY (1u << 0)
#define SANDBOX_CG_PIDS (1u << 1)
#define SANDBOX_CG_CPU (1u << 2)
/* CPU accounting (v1 only: cpuacct.usage, read for a tenant's CPU seconds).
 * Where cpuacct is mounted with cpu (cpu,cpuacct) the two share one
 * hierarchy; where it is mounted alone it is one more hierarchy, in which
 * hosts and tenants get their groups too.  v2 has no such controller: its
 * cpu.stat counts in every group. */
#define SANDBOX_CG_CPUACCT (1u << 3)
#define SANDBOX_CG_COUNT 4

/* Room for struct sandbox_support's capabilities: every capability named
 * with its own sets fits. */
#define SANDBOX_CAPS_TEXT 1024

struct sandbox_support {
    bool no_new_privs;     /* PR_SET_NO_NEW_PRIVS took */
    bool seccomp;          /* a filter loaded and its kill-process killed */
    unsigned seccomp_acts; /* SANDBOX_ACT_* */
    unsigned namespaces;   /* SANDBOX_NS_*; mount only where a host's
                              private root (root.h) could be built */
    /* Why the private root could not be built in a new mount namespace
     * ("making the mounts private: Invalid argument"), or "". */
    char root_error[160];
    int landlock_abi; /* 0: none */
    enum sandbox_cgroup cgroup;
    unsigned cgroup_ctls; /* SANDBOX_CG_*, of that flavour */
    /* v1: the hierarchies' parent (/sys/fs/cgroup); v2: this process's
     * own group in the unified hierarchy (from /proc/self/cgroup: under
     * systemd, the service's delegated subtree), where cgroup.c puts the
     * daemon's leaf and the hosts' groups. */
    char cgroup_path[256];
    bool mdwe; /* PR_SET_MDWE refused a writable+exec mapping */
    /* This process's capabilities as libcap writes them (cap_to_text(3):
     * "=ep" all, "=" none), truncated to fit. */
    char capabilities[SANDBOX_CAPS_TEXT];
    enum sandbox_level level;
};

/*
 * Fills *s with what this process can use, trying each mechanism (a
 * dozen short-lived children, about 12 ms on a 2-vCPU VM).  Call it before
 * the process has children of its own to reap with waitpid(-1): it waits
 * for its children by pid.  Never fails: what cannot be tried is absent.
 */
void sandbox_detect(struct sandbox_support *s);

/* Which cgroup hierarchy to use (the setting cgroup_hierarchy). */
enum sandbox_cgroup_want {
    SANDBOX_CGWANT_AUTO = 0, /* pure v2, else v1, else a hybrid's v2 */
    SANDBOX_CGWANT_V1,
    SANDBOX_CGWANT_V2, /* the unified hierarchy, even with no controller
                          of ours: the groups then only hold the hosts */
    SANDBOX_CGWANT_NONE,
};

/*
 * Detects the cgroup part of *s again as want says (sandbox_detect() does
 * SANDBOX_CGWANT_AUTO) and sets s->level from it.  Where want names a
 * hierarchy this process cannot use, s has none.
 */
void sandbox_detect_cgroups(struct sandbox_support *s,
                            enum sandbox_cgroup_want want);

/* The clone(2)/unshare(2) flags of the SANDBOX_NS_* bits in mask. */
int sandbox_ns_clone_flags(unsigned mask);

/* The level's name ("none", "seccomp", "ns", "full"). */
const char *sandbox_level_name(enum sandbox_level level);

/* The level named name into *level: 0, or -1 for no such level. */
int sandbox_level_parse(const char *name, enum sandbox_level *level);

/*
 * What a host reports in its Hello: own, the level its own steps gave (its
 * filters), raised to what its spawner's steps gave before it ran
 * (SANDBOX_CONFINEMENT_ENV, set by the launcher), which counts only on top
 * of its own.  Without that variable, own.
 */
enum sandbox_level sandbox_spawned_level(enum sandbox_level own);

/* The names of one bit of SANDBOX_ACT_*, SANDBOX_NS_*, SANDBOX_CG_* (as
 * /proc/sys/kernel/seccomp/actions_avail, /proc/self/ns and cgroup name
 * them), or NULL. */
const char *sandbox_act_name(unsigned bit);
const char *sandbox_ns_name(unsigned bit);
const char *sandbox_cg_name(unsigned bit);

/*
 * One line for the log, e.g. "confinement full: seccomp (kill_process
 * ... allow), namespaces user mnt ..., landlock abi 7, cgroup v1 (memory
 * pids cpu), mdwe, capabilities =ep", naming what is missing as "no ...".
 * Truncated to fit buf; returns buf.
 */
char *sandbox_support_summary(const struct sandbox_support *s, char *buf,
                              size_t len);

/*
 * What keeps s below level want, for an operator: e.g. "no Landlock
 * (the kernel has none, or it is not enabled), no cgroup memory
 * controller", each missing mechanism once, in the order of the levels;
 * "" when s->level >= want.  Truncated to fit buf; returns buf.
 */
char *sandbox_missing(const struct sandbox_support *s, enum sandbox_level want,
                      char *buf, size_t len);

/* ---- seccomp filters and role descriptors ------------------------------ */

enum sandbox_verdict {
    SANDBOX_KILL = 0, /* the process dies by SIGSYS (kill-process) */
    SANDBOX_ALLOW,
    SANDBOX_ERRNO, /* the call fails with the rule's errno, not run */
};

enum sandbox_cmp {
    SANDBOX_CMP_EQ = 1,    /* arg == value */
    SANDBOX_CMP_NE,        /* arg != value */
    SANDBOX_CMP_MASKED_EQ, /* (arg & mask) == value */
};

/* One argument condition; value_is_pid: the value is the process's pid
 * when the filter is loaded (e.g. tgkill only to itself). */
struct sandbox_cond {
    unsigned arg; /* 0 … 5 */
    enum sandbox_cmp cmp;
    uint64_t mask;
    uint64_t value;
    bool value_is_pid;
};

#define SANDBOX_RULE_CONDS 2

/* A syscall's verdict when its conditions (all of them) hold.  Several
 * rules may name one syscall: the conditions then choose the rule. */
struct sandbox_rule {
    const char *syscall; /* libseccomp's name; NULL ends a list */
    enum sandbox_verdict verdict;
    int err; /* SANDBOX_ERRNO's */
    unsigned nconds;
    struct sandbox_cond conds[SANDBOX_RULE_CONDS];
};

#define SANDBOX_FILTER_LISTS 4

/* A filter: the verdict of every call no rule names, and up to
 * SANDBOX_FILTER_LISTS rule lists (NULL-terminated; the first NULL list
 * ends them), so that stages share their common rules. */
struct sandbox_filter {
    const char *name; /* for messages: "native stage 1" */
    enum sandbox_verdict fallback;
    int fallback_err;
    const struct sandbox_rule *lists[SANDBOX_FILTER_LISTS];
};

/* How a filter's kill verdicts (its fallback and kill rules) are applied.
 * Allow and errno rules apply as written in every mode. */
enum sandbox_mode {
    SANDBOX_MODE_ENFORCE = 0, /* kill the process (SIGSYS, uncatchable) */
    SANDBOX_MODE_TRAP,        /* a SIGSYS handler names the call on stderr,
                                 then the process dies by SIGSYS */
    SANDBOX_MODE_LOG,         /* the call runs; the kernel's audit log (dmesg,
                                 type=1326) names it: for deriving tables */
};

/* The environment variable that chooses a host's mode ("trap" or "log";
 * anything else or unset: enforce).  The daemon passes it to its hosts. */
#define SANDBOX_DEBUG_ENV "WM_SANDBOX_DEBUG"

/* The environment variable in which the spawner tells a host the level
 * its steps before exec give ("seccomp", "ns", "full": spawn.h); the host
 * reports the lower of that and its own in its Hello. */
#define SANDBOX_CONFINEMENT_ENV "WM_CONFINEMENT"

/* The mode named by s (NULL: enforce). */
enum sandbox_mode sandbox_mode_parse(const char *s);
const char *sandbox_mode_name(enum sandbox_mode mode);

/*
 * The steps of a role, in the order they are taken (DESIGN §10).  Those
 * before SANDBOX_STEP_EXEC are the spawner's, taken between fork and
 * execve of the host (spawn.c: a step the machine or the spawner's rights
 * cannot give is skipped, and the host's reported level says so); those
 * after are the host's own, taken by sandbox_role_enter() once its engine
 * is ready to confine itself.
 */
enum sandbox_step {
    SANDBOX_STEP_END = 0,
    /* spawn.c, in the child */
    SANDBOX_STEP_SESSION,    /* signal mask and handlers reset, setsid,
                                PR_SET_PDEATHSIG (again after a credential
                                change, which clears it) */
    SANDBOX_STEP_CGROUP,     /* joins the host's cgroup (cgroup.h) */
    SANDBOX_STEP_NAMESPACES, /* mount, net, ipc, uts, cgroup namespaces;
                                the pid namespace is the child's from its
                                fork (its first process is its PID 1) */
    SANDBOX_STEP_ROOT,       /* the private root (root.h), with the mount
                                namespace */
    SANDBOX_STEP_INIT,       /* in a pid namespace: this process stays as
                                its PID 1 (init.c) and forks the host */
    SANDBOX_STEP_CREDS,      /* its own uid and gid, no capability */
    SANDBOX_STEP_LANDLOCK,   /* its Landlock domain (landlock.h) */
    SANDBOX_STEP_FDS,        /* every descriptor closed but 0-3 */
    SANDBOX_STEP_RLIMITS,    /* lowered rlimits (creds.h) */
    SANDBOX_STEP_EXEC,       /* no_new_privs, execve of the host; the
                                steps after are the host's own */
    /* sandbox_role_enter(), in the host */
    SANDBOX_STEP_NO_NEW_PRIVS, /* PR_SET_NO_NEW_PRIVS */
    SANDBOX_STEP_MDWE,   /* PR_SET_MDWE(REFUSE_EXEC_GAIN), where the kernel
                            has it */
    SANDBOX_STEP_FILTER, /* the role's first filter, on every thread */
};

#define SANDBOX_ROLE_STEPS 16

/* A step's name for messages ("joining its cgroup"), or "?". */
const char *sandbox_step_name(enum sandbox_step step);

/*
 * A host role: its steps (spawner's, then its own: see enum sandbox_step),
 * and the stricter filter the host loads on its own threads once the
 * engine's code is in (strict; NULL for none).  One const descriptor per
 * role.
 */
struct sandbox_role {
    const char *name;
    enum sandbox_step steps[SANDBOX_ROLE_STEPS]; /* SANDBOX_STEP_END ends */
    const struct sandbox_filter *filter;
    const struct sandbox_filter *strict;
    /* Read-only paths its Landlock domain allows besides the system's
     * code (NULL-terminated; NULL for none), e.g. the runtime's /proc. */
    const char *const *reads;
    /* Its binary at its own path in its private root (root.h): for a
     * runtime that resolves /proc/self/exe at start (CoreCLR). */
    bool exe_in_root;
};

/* The native engine host's role (role_native.c). */
extern const struct sandbox_role sandbox_role_native;
/* The Python engine host's role (role_python.c). */
extern const struct sandbox_role sandbox_role_python;

/* The .NET engine host's role (role_dotnet.c). */
extern const struct sandbox_role sandbox_role_dotnet;

/* The role an engine descriptor names ("native", ...: roles.c), or NULL
 * when this build has none of that name. */
const struct sandbox_role *sandbox_role_find(const char *name);

/* The roles' names, comma-separated, for messages. */
const char *sandbox_role_names(void);

/*
 * Takes role's own steps (those after SANDBOX_STEP_EXEC) in this process,
 * in order; the filter goes on every
 * thread (TSYNC).  Returns the level applied (SANDBOX_LEVEL_SECCOMP), or
 * SANDBOX_LEVEL_NONE when this kernel has no seccomp filters at all (err
 * says so: the host runs unconfined and should say it), or -1 with err
 * set when a step failed (the process must not go on).
 */
int sandbox_role_enter(const struct sandbox_role *role, enum sandbox_mode mode,
                       char *err, size_t errlen);

/*
 * Loads filter f on the calling thread only (threads it creates later
 * inherit it; the others keep theirs), or on every thread when all is
 * set.  In trap mode it first installs the SIGSYS handler.  Returns 0, or
 * -1 with err set.
 */
int sandbox_filter_load(const struct sandbox_filter *f, enum sandbox_mode mode,
                        bool all, char *err, size_t errlen);

/* The number of f's rules whose syscall this architecture does not know
 * (they are skipped when loading), their names in *missing (one, the
 * first) when not NULL.  For the tables' tests. */
unsigned sandbox_filter_unknown(const struct sandbox_filter *f,
                                const char **missing);

/* f as libseccomp's pseudo-filter code (PFC) on fd, for tests and for
 * reading a table as the kernel will run it.  0, or -1 with errno. */
int sandbox_filter_export(const struct sandbox_filter *f,
                          enum sandbox_mode mode, int fd);

/*
 * role's filters (its filter and its strict one) compiled for mode, in a
 * sealed memfd for its hosts' SANDBOX_FILTERS_FD (spawn.h): a host given
 * it loads the programs without compiling them (sandbox_filter_load()
 * finds them by the filter's name and mode).  The descriptor
 * (close-on-exec), or -1 with err set.
 */
int sandbox_role_compile(const struct sandbox_role *role,
                         enum sandbox_mode mode, char *err, size_t errlen);

#endif
