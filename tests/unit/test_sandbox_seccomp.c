/*
 * test_sandbox_seccomp.c — the seccomp tables and their loader
 * (sandbox/seccomp.c, sandbox/role_native.c, sandbox/role_python.c).
 *
 * Each behaviour is observed in a forked child that takes the native
 * role's steps (and its second filter where it says so), or the python
 * role's (test_python_role: the strict tier's answers), then makes the
 * calls and exits with the number of the first check that failed, or is
 * expected to die by SIGSYS on its last call.  Calls that could have side
 * effects get arguments that make them fail harmlessly when not filtered
 * (a missing path, a bad descriptor), so that a verdict of the filter is
 * told from the kernel's own answer.
 */
#include "config.h"

#include "sandbox/sandbox.h"
#include "sandbox/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "tests/unit/check.h"

/* Child helpers: exit with n unless cond holds. */
#define EXPECT(n, cond)                                                        \
    do {                                                                       \
        if (!(cond))                                                           \
            _exit(n);                                                          \
    } while (0)

/* The native role, then (strict) its second filter, in this thread. */
static void
enter(bool strict, enum sandbox_mode mode)
{
    char err[256];

    if (sandbox_role_enter(&sandbox_role_native, mode, err, sizeof err) !=
        SANDBOX_LEVEL_SECCOMP) {
        fprintf(stderr, "enter: %s\n", err);
        _exit(100);
    }
    if (strict && sandbox_filter_load(sandbox_role_native.strict, mode, false,
                                      err, sizeof err) < 0) {
        fprintf(stderr, "strict: %s\n", err);
        _exit(101);
    }
}

/* The child's mark that it reached its last call (reached()), so that a
 * death by SIGSYS is known to come from that call. */
static int mark[2] = { -1, -1 };

static void
reached(void)
{
    (void)!write(mark[1], "r", 1);
}

/* Runs body in a child; its wait status, *got_there whether it called
 * reached(). */
static int
child_marked(void (*body)(void), bool *got_there)
{
    int st = -1;
    pid_t pid;
    char c;

    *got_there = false;
    if (pipe(mark) < 0)
        return -1;
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        close(mark[0]);
        body();
        _exit(0);
    }
    close(mark[1]);
    if (pid >= 0 && waitpid(pid, &st, 0) < 0)
        st = -1;
    *got_there = read(mark[0], &c, 1) == 1;
    close(mark[0]);
    return pid < 0 ? -1 : st;
}

static int
child(void (*body)(void))
{
    bool ignored;

    return child_marked(body, &ignored);
}

/* Death by SIGSYS at the last call, after reached(). */
static void
check_killed(void (*body)(void), const char *what)
{
    bool got_there;
    int st = child_marked(body, &got_there);

    if (!(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS))
        FAIL("%s: want death by SIGSYS, got %s %d", what,
             st != -1 && WIFSIGNALED(st) ? "signal" : "exit",
             st == -1          ? -1
             : WIFSIGNALED(st) ? WTERMSIG(st)
                               : WEXITSTATUS(st));
    else if (!got_there)
        FAIL("%s: killed before its last call", what);
}

static void
check_exit0(int st, const char *what)
{
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        FAIL("%s: want exit 0, got %s %d", what,
             WIFSIGNALED(st) ? "signal" : "exit",
             WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

static void *
thread_main(void *arg)
{
    return arg;
}

static volatile sig_atomic_t got_usr1;

static void
on_usr1(int sig)
{
    (void)sig;
    got_usr1 = 1;
}

/* ---- the tables ---------------------------------------------------------- */

static void
test_every_name_is_known(void)
{
#if defined(__x86_64__)
    const char *missing = NULL;
    CHECK_EQ(sandbox_filter_unknown(sandbox_role_native.filter, &missing), 0);
    CHECK_EQ(sandbox_filter_unknown(sandbox_role_native.strict, &missing), 0);
    CHECK_EQ(sandbox_filter_unknown(sandbox_role_python.filter, &missing), 0);
    CHECK_EQ(sandbox_filter_unknown(sandbox_role_dotnet.filter, &missing), 0);
    if (missing)
        FAIL("unknown syscall name %s", missing);
#else
    printf("# names checked on x86-64 only\n");
#endif
}

static void
test_export_reads_as_the_table(void)
{
    char path[] = "/tmp/wm-test-seccomp-XXXXXX";
    int fd = mkstemp(path);
    const char *pfc;

    REQUIRE(fd >= 0);
    unlink(path);
    REQUIRE(sandbox_filter_export(sandbox_role_native.strict,
                                  SANDBOX_MODE_ENFORCE, fd) == 0);
    REQUIRE(lseek(fd, 0, SEEK_SET) == 0);
    static char buf[65536];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    REQUIRE(n > 0);
    buf[n] = '\0';
    pfc = buf;
    /* openat answered EACCES (13), the rest killed by default. */
    CHECK(check_has_all(pfc, "if ($syscall == 257)", "action ERRNO(13);",
                        "action KILL_PROCESS;", NULL));
    /* socket (41) appears in no rule. */
    CHECK(strstr(pfc, "if ($syscall == 41)") == NULL);
}

/* ---- verdicts in children ------------------------------------------------ */

/* Stage 1: read-only opens work (libraries load); a write open kills. */
static void
body_stage1(void)
{
    enter(false, SANDBOX_MODE_ENFORCE);
    int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
    EXPECT(1, fd >= 0);
    close(fd);
    static char st[4096];
    fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, st, sizeof st - 1) : -1;
    EXPECT(2, n > 0);
    st[n] = '\0';
    EXPECT(3,
           strstr(st, "\nNoNewPrivs:\t1\n") && strstr(st, "\nSeccomp:\t2\n"));
    close(fd);
    /* probes answered softly in stage 1 too */
    EXPECT(5, access("/etc/passwd", R_OK) == -1 && errno == EACCES);
    reached();
    (void)open("/nonexistent-wm-test/x", O_WRONLY | O_CREAT, 0600);
    _exit(6); /* not reached */
}

static void
test_stage1_loads_and_refuses_writes(void)
{
    check_killed(body_stage1, "stage 1, open for writing");
}

/* Stage 2: what a worker may do, the soft refusals, then a socket. */
static void
body_stage2(void)
{
    struct termios t;
    pthread_t th;
    void *back = NULL;
    struct sigaction sa;

    enter(true, SANDBOX_MODE_ENFORCE);
    EXPECT(1, getpid() > 0);
    EXPECT(2, open("/etc/passwd", O_RDONLY) == -1 && errno == EACCES);
    EXPECT(12, access("/etc/passwd", R_OK) == -1 && errno == EACCES);
    EXPECT(13, syscall(SYS_openat2, AT_FDCWD, "/etc/passwd", NULL, 0) == -1 &&
                   errno == ENOSYS);
    EXPECT(3, mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED &&
                  errno == EACCES);
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(4, p != MAP_FAILED);
    EXPECT(5,
           mprotect(p, 4096, PROT_READ | PROT_EXEC) == -1 && errno == EACCES);
    EXPECT(6, syscall(SYS_clone3, NULL, 0) == -1 && errno == ENOSYS);
    EXPECT(7, tcgetattr(0, &t) == -1 && errno == ENOTTY);
    static int token;
    EXPECT(8, pthread_create(&th, NULL, thread_main, &token) == 0 &&
                  pthread_join(th, &back) == 0 && back == &token);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    EXPECT(9, sigaction(SIGUSR1, &sa, NULL) == 0 && raise(SIGUSR1) == 0 &&
                  got_usr1);
    EXPECT(10, prctl(PR_SET_NAME, "wm-test", 0, 0, 0) == 0);
    reached();
    (void)socket(AF_INET, SOCK_STREAM, 0);
    _exit(11); /* not reached */
}

static void
test_stage2_allows_work_and_kills_socket(void)
{
    check_killed(body_stage2, "stage 2, socket");
}

static void
body_fork(void)
{
    enter(true, SANDBOX_MODE_ENFORCE);
    reached();
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    _exit(1);
}

static void
body_kill_parent(void)
{
    enter(false, SANDBOX_MODE_ENFORCE);
    reached();
    (void)kill(1, 0);
    _exit(1);
}

static void
body_thread_with_netns(void)
{
    enter(true, SANDBOX_MODE_ENFORCE);
    /* A thread's flags plus a namespace: killed, even on stage 1. */
    reached();
    (void)syscall(
        SYS_clone,
        (unsigned long)(CLONE_VM | CLONE_THREAD | CLONE_SIGHAND | CLONE_NEWNET),
        NULL, NULL, NULL, 0UL);
    _exit(1);
}

static void
body_execve(void)
{
    static char name[] = "true";
    char *const argv[] = { name, NULL };

    enter(false, SANDBOX_MODE_ENFORCE);
    reached();
    execve("/nonexistent-wm-test", argv, argv + 1);
    _exit(1);
}

/* F_SETOWN would have the kernel signal another process (SIGIO). */
static void
body_setown(void)
{
    enter(true, SANDBOX_MODE_ENFORCE);
    EXPECT(1, fcntl(STDIN_FILENO, F_GETFL) >= 0);
    reached();
    (void)fcntl(STDIN_FILENO, F_SETOWN, 1);
    _exit(2);
}

static void
test_escapes_are_killed(void)
{
    check_killed(body_fork, "fork");
    check_killed(body_kill_parent, "kill of another process");
    check_killed(body_thread_with_netns, "clone with CLONE_NEWNET");
    check_killed(body_execve, "execve");
    check_killed(body_setown, "fcntl F_SETOWN");
}

/* Trap mode: the refused call named on stderr, then SIGSYS. */
static int trap_pipe[2];

static void
body_trap(void)
{
    dup2(trap_pipe[1], STDERR_FILENO);
    enter(true, SANDBOX_MODE_TRAP);
    reached();
    (void)socket(AF_INET, SOCK_STREAM, 0);
    _exit(1);
}

static void
test_trap_mode_names_the_call(void)
{
    char buf[512] = "";
    ssize_t n;

    REQUIRE(pipe(trap_pipe) == 0);
    check_killed(body_trap, "trap mode, socket");
    close(trap_pipe[1]);
    n = read(trap_pipe[0], buf, sizeof buf - 1);
    close(trap_pipe[0]);
    buf[n > 0 ? n : 0] = '\0';
    CHECK(check_has_all(buf, "]: seccomp refused socket (syscall 41, arch 0x",
                        NULL));
}

/* Log mode: the call runs; the errno rules still answer. */
static void
body_log(void)
{
    enter(true, SANDBOX_MODE_LOG);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT(1, s >= 0);
    close(s);
    EXPECT(2, open("/etc/passwd", O_RDONLY) == -1 && errno == EACCES);
    _exit(0);
}

static void
test_log_mode_kills_nothing(void)
{
    check_exit0(child(body_log), "log mode");
}

static void
test_mode_names(void)
{
    CHECK_EQ(sandbox_mode_parse(NULL), SANDBOX_MODE_ENFORCE);
    CHECK_EQ(sandbox_mode_parse(""), SANDBOX_MODE_ENFORCE);
    CHECK_EQ(sandbox_mode_parse("trap"), SANDBOX_MODE_TRAP);
    CHECK_EQ(sandbox_mode_parse("log"), SANDBOX_MODE_LOG);
    CHECK_EQ(sandbox_mode_parse("LOG"), SANDBOX_MODE_ENFORCE);
    CHECK(strcmp(sandbox_mode_name(SANDBOX_MODE_TRAP), "trap") == 0);
}

/* ---- filters compiled ahead (sandbox_role_compile) ---------------------- */

static int compiled_fd = -1;

/* A filter named as the native role's second that allows everything: a
 * host that loads it by name gets the compiled program, which kills
 * socket() and lets a signal to itself through (its pid put in when
 * loaded); one that compiles it itself would allow it all. */
static void
body_compiled(void)
{
    const struct sandbox_filter impostor = {
        .name = sandbox_role_native.strict->name,
        .fallback = SANDBOX_ALLOW,
    };
    char err[256];

    if (dup2(compiled_fd, SANDBOX_FILTERS_FD) < 0)
        _exit(102);
    if (sandbox_filter_load(&impostor, SANDBOX_MODE_ENFORCE, false, err,
                            sizeof err) < 0) {
        fprintf(stderr, "compiled: %s\n", err);
        _exit(103);
    }
    /* Read and closed by the first load. */
    if (fcntl(SANDBOX_FILTERS_FD, F_GETFD) >= 0)
        _exit(104);
    /* A signal to itself: allowed, the program compiled ahead holding
     * this process's pid now. */
    if (kill(getpid(), 0) != 0)
        _exit(105);
    reached();
    (void)socket(AF_INET, SOCK_STREAM, 0);
    _exit(11);
}

/* Without the memfd, the same impostor compiles as written: allowed. */
static void
body_not_compiled(void)
{
    const struct sandbox_filter impostor = {
        .name = sandbox_role_native.strict->name,
        .fallback = SANDBOX_ALLOW,
    };
    char err[256];

    if (sandbox_filter_load(&impostor, SANDBOX_MODE_ENFORCE, false, err,
                            sizeof err) < 0)
        _exit(103);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    _exit(fd >= 0 ? 0 : 12);
}

static void
test_compiled_filters_are_loaded_as_given(void)
{
    char err[256];

    compiled_fd = sandbox_role_compile(&sandbox_role_native,
                                       SANDBOX_MODE_ENFORCE, err, sizeof err);
    REQUIRE(compiled_fd >= 0);
    /* Sealed: no host can change what the next host loads. */
    CHECK(fcntl(compiled_fd, F_GET_SEALS) & F_SEAL_WRITE);
    check_killed(body_compiled, "compiled stage 2, socket");
    check_exit0(child(body_not_compiled), "compiled by the host");
    close(compiled_fd);
}

/* ---- the python role ------------------------------------------------- */

static void
enter_python(void)
{
    char err[256];

    if (sandbox_role_enter(&sandbox_role_python, SANDBOX_MODE_ENFORCE, err,
                           sizeof err) != SANDBOX_LEVEL_SECCOMP) {
        fprintf(stderr, "enter python: %s\n", err);
        _exit(100);
    }
}

/* The strict tier's answers (role_python.c), each checked in turn; the
 * exit code names the first that was wrong. */
static void
python_answers(void)
{
    struct termios t;

    enter_python();
    EXPECT(2, getpid() > 0);
    void *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT(3, m != MAP_FAILED);
    EXPECT(4, mmap(NULL, 4096, PROT_READ | PROT_EXEC,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED &&
                  errno == EACCES);
    EXPECT(5, open("/etc/hostname", O_RDONLY) < 0 && errno == EACCES);
    EXPECT(6, open("/nonexistent-wm/x", O_WRONLY | O_CREAT, 0600) < 0 &&
                  errno == EACCES);
    EXPECT(7, tcgetattr(0, &t) < 0 && errno == ENOTTY);
    pid_t f = fork();
    if (f == 0)
        _exit(0);
    EXPECT(8, f < 0 && errno == EPERM);
    EXPECT(9, unlink("/nonexistent-wm/x") < 0 && errno == EPERM);
    EXPECT(10, execl("/nonexistent-wm/true", "true", (char *)NULL) < 0 &&
                   errno == EPERM);
    pthread_t th;
    EXPECT(11, pthread_create(&th, NULL, thread_main, NULL) != 0);
    _exit(0);
}

static void
python_socket(void)
{
    enter_python();
    reached();
    (void)socket(AF_INET, SOCK_STREAM, 0);
}

static void
python_kill_parent(void)
{
    enter_python();
    reached();
    (void)kill(getppid(), 0);
}

static void
python_pipe(void)
{
    int p[2];

    enter_python();
    reached();
    (void)!pipe(p);
}

static void
test_python_role(void)
{
    int st = child(python_answers);

    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        FAIL("python role: check %d failed (signal %d)",
             WIFEXITED(st) ? WEXITSTATUS(st) : 0,
             WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    check_killed(python_socket, "python: socket");
    check_killed(python_kill_parent, "python: kill another process");
    check_killed(python_pipe, "python: pipe (subprocess's first call)");
}

int
main(void)
{
    struct sandbox_support s;

    RUN(test_mode_names);
    RUN(test_every_name_is_known);
    RUN(test_export_reads_as_the_table);
    sandbox_detect(&s);
    if (!s.seccomp) {
        const char *must = getenv("SANDBOX_MUST_WORK");
        if (must && strcmp(must, "1") == 0) {
            FAIL("SANDBOX_MUST_WORK=1, but seccomp filters do not engage");
            return check_result();
        }
        printf("# SKIP this kernel has no seccomp filters\n");
        return check_failures ? 1 : 77;
    }
    RUN(test_stage1_loads_and_refuses_writes);
    RUN(test_stage2_allows_work_and_kills_socket);
    RUN(test_escapes_are_killed);
    RUN(test_trap_mode_names_the_call);
    RUN(test_log_mode_kills_nothing);
    RUN(test_compiled_filters_are_loaded_as_given);
    RUN(test_python_role);
    return check_result();
}
