/*
 * test_sandbox_spawn.c — sandbox/spawn.c, init.c and audit.c against the
 * kernel: the child's descriptors, a failing step named with its errno,
 * the init's exit record as the truth about the host (its own status is
 * only near it), SIGTERM forwarded by the init, and an audit record
 * parsed.  The namespace tests need root and the pid and mount namespace
 * types: skipped without them, failed with SANDBOX_MUST_WORK=1 when the
 * machine has them but they did not engage.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/audit.h"
#include "sandbox/sandbox.h"
#include "sandbox/spawn.h"
#include "tests/unit/check.h"

static const struct sandbox_role plain = {
    "plain",
    { SANDBOX_STEP_SESSION, SANDBOX_STEP_LANDLOCK, SANDBOX_STEP_FDS,
      SANDBOX_STEP_EXEC },
    NULL,
    NULL,
    NULL,
    false,
};

static const struct sandbox_role with_init = {
    "init",
    { SANDBOX_STEP_SESSION, SANDBOX_STEP_NAMESPACES, SANDBOX_STEP_INIT,
      SANDBOX_STEP_FDS, SANDBOX_STEP_EXEC },
    NULL,
    NULL,
    NULL,
    false,
};

static bool namespaces_ok;

/* Starts sh -c script under role; fills *c.  0, or -1 with err. */
static int
run_sh(const struct sandbox_role *role, const char *script, int channel,
       int landlock_fd, unsigned ns, struct sandbox_child *c, char *err,
       size_t errlen)
{
    static char a0[] = "sh", a1[] = "-c";
    char a2[256];
    snprintf(a2, sizeof a2, "%s", script);
    char *const argv[] = { a0, a1, a2, NULL };
    char *const envp[] = { NULL };
    const struct sandbox_spawn s = {
        .role = role,
        .path = "/bin/sh",
        .argv = argv,
        .envp = envp,
        .channel_fd = channel,
        .exec_fd = -1,
        .namespaces = ns,
        .landlock_fd = landlock_fd,
        .net_fd = -1,
        .filters_fd = -1,
    };
    return sandbox_spawn(&s, c, err, errlen);
}

static int
reap(const struct sandbox_child *c)
{
    int st = -1;

    while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR)
        ;
    return st;
}

/* fd 3 is the channel, and nothing above it is open in the host. */
static void
test_descriptors(void)
{
    struct sandbox_child c;
    char err[256];
    /* Not close-on-exec, and above 3. */
    int sp[2], extra = fcntl(0, F_DUPFD, 20);

    REQUIRE(pipe(sp) == 0 && extra >= 0);
    /* The descriptor this process left open (not close-on-exec) is not
     * the host's; the channel is its fd 3. */
    char script[160];
    snprintf(script, sizeof script,
             "echo hello >&3 && [ -e /proc/self/fd/3 ] && "
             "[ ! -e /proc/self/fd/%d ]",
             extra);
    REQUIRE(run_sh(&plain, script, sp[1], -1, 0, &c, err, sizeof err) == 0);
    close(sp[1]);
    CHECK(!c.init && c.exit_fd == -1);
    char buf[16] = "";
    CHECK(read(sp[0], buf, sizeof buf - 1) == 6);
    CHECK(strcmp(buf, "hello\n") == 0);
    int st = reap(&c);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(sp[0]);
    close(extra);
}

/* A step that fails is named, with its errno, and the child reaped. */
static void
test_failing_step_is_named(void)
{
    struct sandbox_child c;
    char err[256] = "";
    int notruleset = open("/dev/null", O_RDONLY | O_CLOEXEC);

    REQUIRE(notruleset >= 0);
    CHECK(run_sh(&plain, "exit 0", 2, notruleset, 0, &c, err, sizeof err) < 0);
    CHECK(strncmp(err, "entering its Landlock domain: ", 30) == 0);
    CHECK(c.pid == -1);
    CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
    close(notruleset);

    const struct sandbox_role bad = { "bad", { SANDBOX_STEP_EXEC },
                                      NULL,  NULL,
                                      NULL,  false };
    static char x[] = "x";
    char *const argv[] = { x, NULL };
    const struct sandbox_spawn s = {
        .role = &bad,
        .path = "/nonexistent/wm-host",
        .argv = argv,
        .envp = argv + 1,
        .channel_fd = 2,
        .exec_fd = -1,
        .landlock_fd = -1,
        .net_fd = -1,
        .filters_fd = -1,
    };
    CHECK(sandbox_spawn(&s, &c, err, sizeof err) < 0 && errno == ENOENT);
    CHECK(strcmp(err, "execve: No such file or directory") == 0);
}

/* In a pid namespace: the host is pid 2, its init pid 1; the record
 * says how the host ended, the init's own status only near it. */
static void
test_init_reports_the_host(void)
{
    struct sandbox_child c;
    char err[256];
    int sp[2], st, host;

    if (!namespaces_ok)
        return;
    REQUIRE(pipe(sp) == 0);
    REQUIRE(run_sh(&with_init, "echo $$ $PPID >&3; kill -SEGV $$", sp[1], -1,
                   SANDBOX_NS_PID | SANDBOX_NS_MOUNT, &c, err,
                   sizeof err) == 0);
    close(sp[1]);
    CHECK(c.init && c.exit_fd >= 0);
    char buf[32] = "";
    CHECK(read(sp[0], buf, sizeof buf - 1) > 0);
    CHECK(strcmp(buf, "2 1\n") == 0);
    st = reap(&c);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGSEGV);
    CHECK(sandbox_exit_read(c.exit_fd, &host) == 1);
    CHECK(WIFSIGNALED(host) && WTERMSIG(host) == SIGSEGV);
    close(c.exit_fd);
    close(sp[0]);
}

/* SIGTERM to the init reaches the host (a pid 1 would drop it). */
static void
test_init_forwards_sigterm(void)
{
    struct sandbox_child c;
    char err[256], buf[8];
    int sp[2], host;

    if (!namespaces_ok)
        return;
    REQUIRE(pipe(sp) == 0);
    REQUIRE(run_sh(&with_init, "echo up >&3; exec sleep 30", sp[1], -1,
                   SANDBOX_NS_PID, &c, err, sizeof err) == 0);
    close(sp[1]);
    CHECK(read(sp[0], buf, sizeof buf) == 3);
    usleep(20000); /* sh has exec'd sleep */
    CHECK(kill(c.pid, SIGTERM) == 0);
    (void)reap(&c);
    CHECK(sandbox_exit_read(c.exit_fd, &host) == 1);
    CHECK(WIFSIGNALED(host) && WTERMSIG(host) == SIGTERM);
    close(c.exit_fd);
    close(sp[0]);
}

/* Killed with its namespace: no record, the init's status is the truth. */
static void
test_killed_init_writes_no_record(void)
{
    struct sandbox_child c;
    char err[256], buf[8];
    int sp[2], host = 0;

    if (!namespaces_ok)
        return;
    REQUIRE(pipe(sp) == 0);
    REQUIRE(run_sh(&with_init, "echo up >&3; exec sleep 30", sp[1], -1,
                   SANDBOX_NS_PID, &c, err, sizeof err) == 0);
    close(sp[1]);
    CHECK(read(sp[0], buf, sizeof buf) == 3);
    CHECK(kill(c.pid, SIGKILL) == 0);
    int st = reap(&c);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(sandbox_exit_read(c.exit_fd, &host) == 0);
    close(c.exit_fd);
    close(sp[0]);
}

static void
test_audit_record_parsed(void)
{
    static const char rec[] =
        "audit(1795564480.343:4200): auid=4294967295 uid=0 gid=0 "
        "ses=4294967295 pid=27265 comm=\"aud\" exe=\"/tmp/aud\" sig=31 "
        "arch=c000003e syscall=41 compat=0 ip=0x7f00749ecdc7 "
        "code=0x80000000";
    static const char logged[] =
        "audit(1.2:3): pid=5 comm=\"x\" sig=0 arch=c000003e syscall=41 "
        "code=0x7ffc0000";
    struct sandbox_audit_kill k;
    char name[32];

    REQUIRE(sandbox_audit_parse(rec, sizeof rec - 1, &k) == 0);
    CHECK_EQ(k.pid, 27265);
    CHECK_EQ(k.syscall, 41);
    CHECK_EQ(k.arch, 0xc000003eu);
    CHECK(sandbox_audit_parse(logged, sizeof logged - 1, &k) < 0);
    sandbox_syscall_name(41, 0xc000003eu, name, sizeof name);
#ifdef WM_SANDBOX
    CHECK(strcmp(name, "socket") == 0);
#else
    CHECK(strcmp(name, "syscall 41") == 0);
#endif
}

int
main(void)
{
    struct sandbox_support sup;

    sandbox_detect(&sup);
    const unsigned need = SANDBOX_NS_PID | SANDBOX_NS_MOUNT;
    namespaces_ok = geteuid() == 0 && (sup.namespaces & need) == need;
    if (!namespaces_ok) {
        const char *must = getenv("SANDBOX_MUST_WORK");
        if (must && strcmp(must, "1") == 0 && geteuid() == 0)
            FAIL("SANDBOX_MUST_WORK=1, but no pid and mount namespaces");
        else
            fprintf(stderr, "test_sandbox_spawn: not root or no pid "
                            "namespaces: the init's tests are skipped\n");
    }
    RUN(test_descriptors);
    RUN(test_failing_step_is_named);
    RUN(test_init_reports_the_host);
    RUN(test_init_forwards_sigterm);
    RUN(test_killed_init_writes_no_record);
    RUN(test_audit_record_parsed);
    return check_result();
}
