/*
 * seccomp.c — role steps and seccomp filters built from tables with
 * libseccomp (sandbox.h).
 *
 * A table is data (struct sandbox_filter); this file turns it into BPF
 * with libseccomp, which adds what a hand-written filter gets wrong: the
 * architecture check (a call through another ABI — i386's int 0x80, x32's
 * numbers — is killed, SCMP_FLTATR_ACT_BADARCH) and 64-bit argument
 * comparisons.  A name this architecture does not know is skipped, so one
 * table serves x86-64 and arm64 (which has no open(), only openat()).
 *
 * Modes (sandbox_mode): enforce kills; trap makes every kill a SIGSYS
 * that on_sigsys() turns into one line on stderr naming the call, then
 * re-raises with the default action, so the process still dies by SIGSYS
 * (and is classified "seccomp"); log lets the call run and leaves the
 * naming to the kernel's audit log.  Errno and allow rules are the same in
 * every mode: they are the behaviour the role relies on (clone3 answered
 * ENOSYS so that glibc falls back to clone, whose flags a filter can see).
 *
 * Invariant: a rule whose action equals the filter's default is left out
 * (libseccomp refuses it, and it changes nothing).
 */
#include "config.h"

#include "sandbox/kernel.h"
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/spawn.h"

/* Syscall numbers the trap handler can name (x86-64 and arm64 stay well
 * below; a larger number is printed without a name). */
#define TRAP_NAMES 512

/* The pid a rule's condition compares with (a signal to itself only) is
 * the process's own; filters compiled ahead (see below) hold this
 * stand-in instead, which the loading host replaces with its pid: no pid
 * reaches it (pid_max is at most 2^22), and no table may use it. */
#define COMPILED_SELF 0x5eedf00dull

static char *trap_names[TRAP_NAMES];
static bool trap_ready;

enum sandbox_mode
sandbox_mode_parse(const char *s)
{
    if (s && strcmp(s, "trap") == 0)
        return SANDBOX_MODE_TRAP;
    if (s && strcmp(s, "log") == 0)
        return SANDBOX_MODE_LOG;
    return SANDBOX_MODE_ENFORCE;
}

const char *
sandbox_mode_name(enum sandbox_mode mode)
{
    switch (mode) {
    case SANDBOX_MODE_TRAP:
        return "trap";
    case SANDBOX_MODE_LOG:
        return "log";
    default:
        return "enforce";
    }
}

/* ---- the trap handler ---------------------------------------------------- */

/* Appends s to buf[*off..len) (async-signal-safe). */
static void
app(char *buf, size_t len, size_t *off, const char *s)
{
    while (*s && *off + 1 < len)
        buf[(*off)++] = *s++;
}

static void
app_num(char *buf, size_t len, size_t *off, unsigned long v, unsigned base)
{
    char tmp[24];
    size_t n = 0;

    do {
        tmp[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v && n < sizeof tmp);
    while (n && *off + 1 < len)
        buf[(*off)++] = tmp[--n];
}

/* A trap: one line naming the call, then death by SIGSYS.  Only
 * async-signal-safe calls (the names were resolved before the filter). */
static void
on_sigsys(int sig, siginfo_t *si, void *uc)
{
    extern char *program_invocation_short_name;
    char line[256];
    size_t off = 0;
    struct sigaction dfl;
    sigset_t set;
    int nr = si->si_syscall;

    (void)uc;
    app(line, sizeof line, &off, program_invocation_short_name);
    app(line, sizeof line, &off, "[");
    app_num(line, sizeof line, &off, (unsigned long)getpid(), 10);
    app(line, sizeof line, &off, "]: seccomp refused ");
    if (nr >= 0 && nr < TRAP_NAMES && trap_names[nr])
        app(line, sizeof line, &off, trap_names[nr]);
    else
        app(line, sizeof line, &off, "a call");
    app(line, sizeof line, &off, " (syscall ");
    app_num(line, sizeof line, &off, (unsigned long)(unsigned)nr, 10);
    app(line, sizeof line, &off, ", arch 0x");
    app_num(line, sizeof line, &off, (unsigned long)si->si_arch, 16);
    app(line, sizeof line, &off, ")\n");
    (void)!write(STDERR_FILENO, line, off);

    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    (void)sigaction(sig, &dfl, NULL);
    sigemptyset(&set);
    sigaddset(&set, sig);
    (void)sigprocmask(SIG_UNBLOCK, &set, NULL);
    /* If the filter refuses the kill itself, that trap now kills. */
    (void)raise(sig);
    _exit(128 + sig);
}

static int
trap_install(char *err, size_t errlen)
{
    struct sigaction sa;

    if (!trap_ready) {
        for (int nr = 0; nr < TRAP_NAMES; nr++)
            trap_names[nr] =
                seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
        trap_ready = true;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSYS, &sa, NULL) < 0) {
        snprintf(err, errlen, "sigaction(SIGSYS): %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- building a filter -------------------------------------------------- */

static uint32_t
action_of(enum sandbox_verdict v, int err, enum sandbox_mode mode)
{
    switch (v) {
    case SANDBOX_ALLOW:
        return SCMP_ACT_ALLOW;
    case SANDBOX_ERRNO:
        return SCMP_ACT_ERRNO((uint16_t)err);
    case SANDBOX_KILL:
    default:
        return mode == SANDBOX_MODE_TRAP  ? SCMP_ACT_TRAP
               : mode == SANDBOX_MODE_LOG ? SCMP_ACT_LOG
                                          : SCMP_ACT_KILL_PROCESS;
    }
}

static enum scmp_compare
cmp_of(enum sandbox_cmp c)
{
    switch (c) {
    case SANDBOX_CMP_NE:
        return SCMP_CMP_NE;
    case SANDBOX_CMP_MASKED_EQ:
        return SCMP_CMP_MASKED_EQ;
    case SANDBOX_CMP_EQ:
    default:
        return SCMP_CMP_EQ;
    }
}

static int
add_rule(scmp_filter_ctx ctx, const struct sandbox_rule *r, uint32_t dflt,
         enum sandbox_mode mode, uint64_t self, char *err, size_t errlen)
{
    struct scmp_arg_cmp a[SANDBOX_RULE_CONDS];
    uint32_t act = action_of(r->verdict, r->err, mode);
    int nr = seccomp_syscall_resolve_name(r->syscall);
    int rc;

    if (nr == __NR_SCMP_ERROR || nr < 0)
        return 0; /* not a call of this architecture */
    if (act == dflt)
        return 0;
    if (r->nconds > SANDBOX_RULE_CONDS) {
        snprintf(err, errlen, "%s: %u conditions, at most %d", r->syscall,
                 r->nconds, SANDBOX_RULE_CONDS);
        return -1;
    }
    for (unsigned i = 0; i < r->nconds; i++) {
        const struct sandbox_cond *c = &r->conds[i];
        uint64_t v = c->value_is_pid ? self : c->value;
        if (!c->value_is_pid && v == COMPILED_SELF) {
            snprintf(err, errlen,
                     "%s: its value %#llx is the compiled "
                     "filters' stand-in for the pid",
                     r->syscall, (unsigned long long)v);
            return -1;
        }
        a[i].arg = c->arg;
        a[i].op = cmp_of(c->cmp);
        if (c->cmp == SANDBOX_CMP_MASKED_EQ) {
            a[i].datum_a = c->mask;
            a[i].datum_b = v;
        } else {
            a[i].datum_a = v;
            a[i].datum_b = 0;
        }
    }
    rc = seccomp_rule_add_array(ctx, act, nr, r->nconds, a);
    if (rc < 0) {
        snprintf(err, errlen, "the rule for %s: %s", r->syscall, strerror(-rc));
        return -1;
    }
    return 0;
}

/* f as a libseccomp context, self the pid its conditions compare with;
 * NULL with err set. */
static scmp_filter_ctx
build(const struct sandbox_filter *f, enum sandbox_mode mode, bool all,
      uint64_t self, char *err, size_t errlen)
{
    uint32_t dflt = action_of(f->fallback, f->fallback_err, mode);
    uint32_t badarch =
        mode == SANDBOX_MODE_TRAP ? SCMP_ACT_TRAP : SCMP_ACT_KILL_PROCESS;
    scmp_filter_ctx ctx = seccomp_init(dflt);

    if (ctx == NULL) {
        snprintf(err, errlen, "%s: seccomp_init failed", f->name);
        return NULL;
    }
    /* Log mode: the errno answers are logged too (FILTER_FLAG_LOG). */
    if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, badarch) != 0 ||
        (all && seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1) != 0) ||
        (mode == SANDBOX_MODE_LOG &&
         seccomp_attr_set(ctx, SCMP_FLTATR_CTL_LOG, 1) != 0)) {
        snprintf(err, errlen, "%s: seccomp_attr_set failed", f->name);
        goto fail;
    }
    for (size_t l = 0; l < SANDBOX_FILTER_LISTS && f->lists[l]; l++) {
        for (const struct sandbox_rule *r = f->lists[l]; r->syscall; r++) {
            char why[200];
            if (add_rule(ctx, r, dflt, mode, self, why, sizeof why) < 0) {
                snprintf(err, errlen, "%s: %s", f->name, why);
                goto fail;
            }
        }
    }
    return ctx;
fail:
    seccomp_release(ctx);
    return NULL;
}

/* ---- filters compiled ahead ------------------------------------------
 *
 * Compiling a table with libseccomp costs a host about 70 % of its two
 * filters' load (bench/README.md, "The filters, compiled ahead"): the
 * launcher compiles each role's filters once, into a sealed memfd that
 * every host of the role gets as SANDBOX_FILTERS_FD, and the host loads
 * the programs as they are.  The memfd: a head, then per program its
 * filter's name, mode and length in instructions, then the instructions
 * (struct sock_filter, as seccomp_export_bpf() writes them).  A host
 * without it (started by hand, or a program the memfd lacks) compiles
 * its own, as before.
 */

#define COMPILED_MAGIC 0x66626d77u /* "wmbf" */
#define COMPILED_MAX (1u << 20)

struct compiled_head {
    uint32_t magic;
    uint32_t count;
};

struct compiled_prog {
    char name[48];
    uint32_t mode;
    uint32_t len; /* instructions */
};

/* The compiled filters this process was given, read once. */
static struct {
    bool read;
    unsigned char *buf;
    size_t len;
} compiled;

static int
compile_one(int fd, const struct sandbox_filter *f, enum sandbox_mode mode,
            char *err, size_t errlen)
{
    struct compiled_prog p = { .mode = (uint32_t)mode };
    scmp_filter_ctx ctx = build(f, mode, false, COMPILED_SELF, err, errlen);
    off_t at = lseek(fd, 0, SEEK_CUR), end;
    int rc;

    if (ctx == NULL)
        return -1;
    snprintf(p.name, sizeof p.name, "%s", f->name);
    if (at < 0 || write(fd, &p, sizeof p) != (ssize_t)sizeof p) {
        snprintf(err, errlen, "%s: writing it: %s", f->name, strerror(errno));
        seccomp_release(ctx);
        return -1;
    }
    rc = seccomp_export_bpf(ctx, fd);
    seccomp_release(ctx);
    end = lseek(fd, 0, SEEK_CUR);
    if (rc < 0 || end < 0) {
        snprintf(err, errlen, "%s: exporting it: %s", f->name,
                 strerror(rc < 0 ? -rc : errno));
        return -1;
    }
    p.len = (uint32_t)((size_t)(end - at - (off_t)sizeof p) /
                       sizeof(struct sock_filter));
    if (pwrite(fd, &p, sizeof p, at) != (ssize_t)sizeof p) {
        snprintf(err, errlen, "%s: writing it: %s", f->name, strerror(errno));
        return -1;
    }
    return 0;
}

int
sandbox_role_compile(const struct sandbox_role *role, enum sandbox_mode mode,
                     char *err, size_t errlen)
{
    const struct sandbox_filter *fs[] = { role->filter, role->strict };
    struct compiled_head h = { COMPILED_MAGIC, 0 };
    const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
    int fd = memfd_create("wm-filters", MFD_CLOEXEC | MFD_ALLOW_SEALING);

    if (fd < 0) {
        snprintf(err, errlen, "%s: memfd_create: %s", role->name,
                 strerror(errno));
        return -1;
    }
    if (write(fd, &h, sizeof h) != (ssize_t)sizeof h)
        goto fail_errno;
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        if (fs[i] == NULL)
            continue;
        if (compile_one(fd, fs[i], mode, err, errlen) < 0)
            goto fail;
        h.count++;
    }
    if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
        fcntl(fd, F_ADD_SEALS, seals) < 0 || lseek(fd, 0, SEEK_SET) < 0)
        goto fail_errno;
    return fd;

fail_errno:
    snprintf(err, errlen, "%s: %s", role->name, strerror(errno));
fail:
    close(fd);
    return -1;
}

/* Reads SANDBOX_FILTERS_FD once, when it is a sealed memfd of compiled
 * filters (anything else there is left alone), and closes it. */
static void
compiled_read(void)
{
    const int fd = SANDBOX_FILTERS_FD;
    struct compiled_head h;
    struct stat st;
    int seals;

    if (compiled.read)
        return;
    compiled.read = true;
    seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_WRITE) || fstat(fd, &st) < 0 ||
        st.st_size < (off_t)sizeof h || st.st_size > (off_t)COMPILED_MAX ||
        pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
        h.magic != COMPILED_MAGIC)
        return;
    compiled.buf = malloc((size_t)st.st_size);
    if (compiled.buf == NULL ||
        pread(fd, compiled.buf, (size_t)st.st_size, 0) != st.st_size) {
        free(compiled.buf);
        compiled.buf = NULL;
        return;
    }
    compiled.len = (size_t)st.st_size;
    close(fd);
}

/* f's program for mode among those given: 1 and *prog, else 0. */
static int
compiled_find(const struct sandbox_filter *f, enum sandbox_mode mode,
              struct sock_fprog *prog)
{
    struct compiled_head h;
    size_t at = sizeof h;

    compiled_read();
    if (compiled.buf == NULL)
        return 0;
    memcpy(&h, compiled.buf, sizeof h);
    for (uint32_t i = 0; i < h.count; i++) {
        struct compiled_prog p;
        if (compiled.len - at < sizeof p)
            return 0;
        memcpy(&p, compiled.buf + at, sizeof p);
        at += sizeof p;
        size_t bytes = (size_t)p.len * sizeof(struct sock_filter);
        if (p.len == 0 || p.len > BPF_MAXINSNS || compiled.len - at < bytes)
            return 0;
        if (p.mode == (uint32_t)mode &&
            strnlen(p.name, sizeof p.name) < sizeof p.name &&
            strcmp(p.name, f->name) == 0) {
            /* This process's pid in the place of the stand-in: every
             * comparison with a constant (libseccomp compares a 64-bit
             * argument as two 32-bit words, the high one 0 here). */
            struct sock_filter *insn =
                (struct sock_filter *)(void *)(compiled.buf + at);
            for (uint32_t k = 0; k < p.len; k++)
                if (BPF_CLASS(insn[k].code) == BPF_JMP &&
                    BPF_SRC(insn[k].code) == BPF_K &&
                    insn[k].k == (uint32_t)COMPILED_SELF)
                    insn[k].k = (uint32_t)getpid();
            prog->len = (unsigned short)p.len;
            prog->filter = insn;
            return 1;
        }
        at += bytes;
    }
    return 0;
}

int
sandbox_filter_load(const struct sandbox_filter *f, enum sandbox_mode mode,
                    bool all, char *err, size_t errlen)
{
    scmp_filter_ctx ctx;
    struct sock_fprog prog;
    int rc = 0;

    if (mode == SANDBOX_MODE_TRAP && trap_install(err, errlen) < 0)
        return -1;
    if (compiled_find(f, mode, &prog)) {
        /* As libseccomp loads its own: no_new_privs first; TSYNC for
         * every thread (a thread it cannot sync: its id, > 0); LOG for
         * the errno answers in log mode. */
        unsigned flags =
            (all ? SECCOMP_FILTER_FLAG_TSYNC : 0) |
            (mode == SANDBOX_MODE_LOG ? SECCOMP_FILTER_FLAG_LOG : 0);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
            (rc = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags,
                               &prog)) != 0) {
            snprintf(err, errlen, "%s: loading the compiled filter: %s",
                     f->name,
                     rc > 0 ? "a thread could not be synced" : strerror(errno));
            return -1;
        }
        return 0;
    }
    ctx = build(f, mode, all, (uint64_t)getpid(), err, errlen);
    if (ctx == NULL)
        return -1;
    rc = seccomp_load(ctx);
    seccomp_release(ctx);
    if (rc != 0) {
        snprintf(err, errlen, "%s: loading the filter: %s", f->name,
                 strerror(rc < 0 ? -rc : EINVAL));
        return -1;
    }
    return 0;
}

unsigned
sandbox_filter_unknown(const struct sandbox_filter *f, const char **missing)
{
    unsigned n = 0;

    for (size_t l = 0; l < SANDBOX_FILTER_LISTS && f->lists[l]; l++) {
        for (const struct sandbox_rule *r = f->lists[l]; r->syscall; r++) {
            if (seccomp_syscall_resolve_name(r->syscall) >= 0)
                continue;
            if (n++ == 0 && missing)
                *missing = r->syscall;
        }
    }
    return n;
}

int
sandbox_filter_export(const struct sandbox_filter *f, enum sandbox_mode mode,
                      int fd)
{
    char err[256];
    scmp_filter_ctx ctx =
        build(f, mode, false, (uint64_t)getpid(), err, sizeof err);
    int rc;

    if (ctx == NULL) {
        errno = EINVAL;
        return -1;
    }
    rc = seccomp_export_pfc(ctx, fd);
    seccomp_release(ctx);
    if (rc < 0) {
        errno = -rc;
        return -1;
    }
    return 0;
}

/* ---- a role's steps -------------------------------------------------------
 */

int
sandbox_role_enter(const struct sandbox_role *role, enum sandbox_mode mode,
                   char *err, size_t errlen)
{
    int level = SANDBOX_LEVEL_NONE;
    size_t from = 0;

    /* The host's own steps: those after the spawner's exec. */
    for (size_t i = 0; i < SANDBOX_ROLE_STEPS; i++)
        if (role->steps[i] == SANDBOX_STEP_EXEC)
            from = i + 1;
    for (size_t i = from; i < SANDBOX_ROLE_STEPS; i++) {
        switch (role->steps[i]) {
        case SANDBOX_STEP_END:
            return level;
        case SANDBOX_STEP_SESSION:
        case SANDBOX_STEP_CGROUP:
        case SANDBOX_STEP_NAMESPACES:
        case SANDBOX_STEP_ROOT:
        case SANDBOX_STEP_INIT:
        case SANDBOX_STEP_CREDS:
        case SANDBOX_STEP_LANDLOCK:
        case SANDBOX_STEP_FDS:
        case SANDBOX_STEP_RLIMITS:
        case SANDBOX_STEP_EXEC:
            break; /* the spawner's (spawn.c): not after an exec */
        case SANDBOX_STEP_NO_NEW_PRIVS:
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
                snprintf(err, errlen, "%s: no_new_privs: %s", role->name,
                         strerror(errno));
                return -1;
            }
            break;
        case SANDBOX_STEP_MDWE:
            /* EINVAL: a kernel before 6.3, which has no MDWE. */
            if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0 &&
                errno != EINVAL) {
                snprintf(err, errlen, "%s: mdwe: %s", role->name,
                         strerror(errno));
                return -1;
            }
            break;
        case SANDBOX_STEP_FILTER:
            /* PR_GET_SECCOMP fails with EINVAL only on a kernel built
             * without seccomp: unconfined, and said so. */
            if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0 && errno == EINVAL) {
                snprintf(err, errlen, "%s: this kernel has no seccomp",
                         role->name);
                return SANDBOX_LEVEL_NONE;
            }
            if (sandbox_filter_load(role->filter, mode, true, err, errlen) < 0)
                return -1;
            level = SANDBOX_LEVEL_SECCOMP;
            break;
        }
    }
    return level;
}
