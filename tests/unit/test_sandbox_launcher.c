/*
 * test_sandbox_launcher.c — sandbox/launcher.c as the master sees it: a
 * request that fails a check (an engine it does not have, a worker id
 * that could name another path, a wrong size, a spawn without its
 * channel, a kill of a spawn it never made) is refused or dropped and
 * the launcher goes on; a spawn answered with its pid; a death reported
 * with the host's wait status, after an exit and after a kill; the
 * master's end closed: every host killed and the launcher gone.  Hosts
 * of an engine with a zygote (zygote.h; this binary is that zygote when
 * started with --zygote) are forked by it, their deaths and kills go
 * through it, a zygote that dies takes its hosts with it and is started
 * again for the next, and one whose start fails makes the spawn fail
 * with its reason.
 *
 * Hosts run unconfined here (confine false: no root needed); what the
 * confinement gives is tested by the sandbox's other tests and by the
 * daemon's (tests/integration/test_sandbox_native.py, test_privsep.py).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/launcher.h"
#include "sandbox/sandbox.h"
#include "sandbox/spawn.h"
#include "sandbox/zygote.h"
#include "tests/unit/check.h"

static const struct sandbox_role plain = {
    "plain", { SANDBOX_STEP_SESSION, SANDBOX_STEP_FDS, SANDBOX_STEP_EXEC },
    NULL,    NULL,
    NULL,    false,
};

static char dir[] = "/tmp/wm-test-launcher.XXXXXX";
static char sleeper[64], self[4096], zygfail[64];
static int fd = -1;
static pid_t launcher;

/* Sends q (len bytes) with the descriptor chan (-1: none). */
static int
send_req(const void *q, size_t len, int chan)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = { .iov_base = (void *)(uintptr_t)q, .iov_len = len };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

    memset(&ctl, 0, sizeof ctl);
    if (chan >= 0) {
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof ctl.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &chan, sizeof chan);
    }
    return sendmsg(fd, &msg, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* The next message within ms into m: its size, 0 on timeout. */
static ssize_t
next_msg(void *m, size_t len, int ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };

    if (poll(&p, 1, ms) <= 0)
        return 0;
    return recv(fd, m, len, 0);
}

/* Asks for engine with worker id; fills *r.  0 when answered. */
static int
spawn(uint32_t seq, const char *engine, const char *worker,
      struct launcher_spawned *r)
{
    struct launcher_spawn q = { .type = LAUNCHER_SPAWN, .seq = seq };
    int sp[2];

    snprintf(q.engine, sizeof q.engine, "%s", engine);
    snprintf(q.worker_id, sizeof q.worker_id, "%s", worker);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
        return -1;
    int rc = send_req(&q, sizeof q, sp[1]);
    close(sp[1]);
    close(sp[0]);
    if (rc < 0)
        return -1;
    return next_msg(r, sizeof *r, 5000) == sizeof *r &&
                   r->type == LAUNCHER_SPAWNED && r->seq == seq
               ? 0
               : -1;
}

static void
test_refusals(void)
{
    struct launcher_spawned r;

    memset(&r, 0, sizeof r);
    CHECK_EQ(spawn(1, "nosuch", "w1", &r), 0);
    CHECK_EQ(r.error, ENOENT);
    CHECK(strcmp(r.fail_type, "engine_unavailable") == 0);
    CHECK(strstr(r.why, "no engine named nosuch") != NULL);

    /* Names that are not words: never echoed, never looked up. */
    CHECK_EQ(spawn(6, "tr\nue", "w6", &r), 0);
    CHECK_EQ(r.error, EINVAL);
    CHECK(strstr(r.why, "an engine name of other than") != NULL);

    /* A worker id that would name a path (it names the cgroup). */
    CHECK_EQ(spawn(2, "true", "../../etc", &r), 0);
    CHECK_EQ(r.error, EINVAL);
    CHECK_EQ(spawn(3, "true", "", &r), 0);
    CHECK_EQ(r.error, EINVAL);

    /* The wrong size, a spawn without its channel, an unknown type, a
     * kill of a spawn never made: no answer, nothing done. */
    struct launcher_spawn q = { .type = LAUNCHER_SPAWN, .seq = 4 };
    snprintf(q.engine, sizeof q.engine, "true");
    snprintf(q.worker_id, sizeof q.worker_id, "w4");
    CHECK_EQ(send_req(&q, sizeof q - 1, -1), 0);
    CHECK_EQ(send_req(&q, sizeof q, -1), 0);
    const uint32_t junk[2] = { 99, 0 };
    CHECK_EQ(send_req(junk, sizeof junk, -1), 0);
    const struct launcher_kill k = { .type = LAUNCHER_KILL, .seq = 12345 };
    CHECK_EQ(send_req(&k, sizeof k, -1), 0);
    char buf[1024];
    CHECK_EQ(next_msg(buf, sizeof buf, 200), 0);

    /* And it goes on. */
    CHECK_EQ(spawn(5, "nosuch", "w5", &r), 0);
    CHECK_EQ(r.error, ENOENT);
    CHECK_EQ(kill(launcher, 0), 0);
}

static void
test_exit_reported(void)
{
    struct launcher_spawned r;
    struct launcher_death d;

    CHECK_EQ(spawn(10, "true", "w10", &r), 0);
    CHECK_EQ(r.error, 0);
    CHECK(r.pid > 0);
    CHECK_EQ(r.host_pid, r.pid); /* no init unconfined */
    CHECK_EQ(r.level, SANDBOX_LEVEL_NONE);
    memset(&d, 0, sizeof d);
    REQUIRE(next_msg(&d, sizeof d, 5000) == sizeof d);
    CHECK_EQ(d.type, LAUNCHER_DEATH);
    CHECK_EQ(d.seq, 10);
    CHECK(WIFEXITED(d.wstatus) && WEXITSTATUS(d.wstatus) == 0);
    CHECK_EQ(d.oom, 0);
    CHECK_EQ(d.syscall, -1);
}

static void
test_kill_reported(void)
{
    struct launcher_spawned r;
    struct launcher_death d;

    CHECK_EQ(spawn(20, "sleeper", "w20", &r), 0);
    REQUIRE(r.error == 0);
    CHECK_EQ(kill(r.pid, 0), 0);
    const struct launcher_kill k = { .type = LAUNCHER_KILL, .seq = 20 };
    CHECK_EQ(send_req(&k, sizeof k, -1), 0);
    memset(&d, 0, sizeof d);
    REQUIRE(next_msg(&d, sizeof d, 5000) == sizeof d);
    CHECK_EQ(d.type, LAUNCHER_DEATH);
    CHECK_EQ(d.seq, 20);
    CHECK(WIFSIGNALED(d.wstatus) && WTERMSIG(d.wstatus) == SIGKILL);
    CHECK(kill(r.pid, 0) < 0 && errno == ESRCH);
}

/* ---- zygotes --------------------------------------------------------------
 */

/* The forked host of the zygote below: says its pid and its parent's on
 * its channel, then waits for the channel's end and exits 7. */
static int
zygote_host(void)
{
    char buf[64], c;
    int n = snprintf(buf, sizeof buf, "%d %d\n", (int)getpid(), (int)getppid());

    if (write(SANDBOX_CHANNEL_FD, buf, (size_t)n) != n)
        return 1;
    while (read(SANDBOX_CHANNEL_FD, &c, 1) > 0)
        ;
    return 7;
}

/* The host's "pid ppid" line from our end of its channel. */
static int
host_line(int chan, int *pid, int *ppid)
{
    struct pollfd p = { .fd = chan, .events = POLLIN };
    char buf[64];
    ssize_t n;

    if (poll(&p, 1, 5000) <= 0 || (n = read(chan, buf, sizeof buf - 1)) <= 0)
        return -1;
    buf[n] = '\0';
    return sscanf(buf, "%d %d", pid, ppid) == 2 ? 0 : -1;
}

/* Process pid's name (comm), into buf. */
static const char *
comm_of(int pid, char *buf, size_t len)
{
    char path[64];

    snprintf(path, sizeof path, "/proc/%d/comm", pid);
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (f) {
        if (fgets(buf, (int)len, f))
            buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
    }
    return buf;
}

/* A spawn whose channel end the test keeps in *chan. */
static int
spawn_keep(uint32_t seq, const char *engine, const char *worker,
           struct launcher_spawned *r, int *chan)
{
    struct launcher_spawn q = { .type = LAUNCHER_SPAWN, .seq = seq };
    int sv[2];

    snprintf(q.engine, sizeof q.engine, "%s", engine);
    snprintf(q.worker_id, sizeof q.worker_id, "%s", worker);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    int rc = send_req(&q, sizeof q, sv[1]);
    close(sv[1]);
    memset(r, 0, sizeof *r);
    if (rc < 0 || next_msg(r, sizeof *r, 15000) != sizeof *r ||
        r->type != LAUNCHER_SPAWNED || r->seq != seq) {
        close(sv[0]);
        return -1;
    }
    *chan = sv[0];
    return 0;
}

/* Forked by the zygote: its child, named as the engine's binary; the
 * zygote is wm-zygote; the host's end reported through the zygote with
 * its exit status; a kill through it too. */
static void
test_zygote_fork(void)
{
    struct launcher_spawned r;
    struct launcher_death d;
    char name[32];
    int chan, pid, ppid, ppid2;

    REQUIRE(spawn_keep(40, "zyg", "w40", &r, &chan) == 0);
    REQUIRE(r.error == 0);
    REQUIRE(host_line(chan, &pid, &ppid) == 0);
    CHECK_EQ(pid, r.pid);
    CHECK_EQ(r.host_pid, r.pid); /* no init unconfined */
    CHECK(ppid != launcher);
    CHECK(strcmp(comm_of(ppid, name, sizeof name), "wm-zygote") == 0);
    CHECK(strcmp(comm_of(pid, name, sizeof name), "wm-zygote") != 0);
    close(chan); /* the host exits 7 */
    memset(&d, 0, sizeof d);
    REQUIRE(next_msg(&d, sizeof d, 5000) == sizeof d);
    CHECK_EQ(d.type, LAUNCHER_DEATH);
    CHECK_EQ(d.seq, 40);
    CHECK(WIFEXITED(d.wstatus) && WEXITSTATUS(d.wstatus) == 7);

    REQUIRE(spawn_keep(41, "zyg", "w41", &r, &chan) == 0);
    REQUIRE(r.error == 0);
    REQUIRE(host_line(chan, &pid, &ppid2) == 0);
    CHECK_EQ(ppid2, ppid); /* the same zygote */
    const struct launcher_kill k = { .type = LAUNCHER_KILL, .seq = 41 };
    CHECK_EQ(send_req(&k, sizeof k, -1), 0);
    memset(&d, 0, sizeof d);
    REQUIRE(next_msg(&d, sizeof d, 5000) == sizeof d);
    CHECK_EQ(d.seq, 41);
    CHECK(WIFSIGNALED(d.wstatus) && WTERMSIG(d.wstatus) == SIGKILL);
    CHECK(kill(pid, 0) < 0 && errno == ESRCH);
    close(chan);
}

/* A zygote killed: its host dies with it and is reported; the next spawn
 * gets a new zygote. */
static void
test_zygote_dies(void)
{
    struct launcher_spawned r;
    struct launcher_death d;
    int chan, pid, zyg, pid2, zyg2;

    REQUIRE(spawn_keep(50, "zyg", "w50", &r, &chan) == 0);
    REQUIRE(r.error == 0);
    REQUIRE(host_line(chan, &pid, &zyg) == 0);
    CHECK_EQ(kill(zyg, SIGKILL), 0);
    memset(&d, 0, sizeof d);
    REQUIRE(next_msg(&d, sizeof d, 5000) == sizeof d);
    CHECK_EQ(d.seq, 50);
    CHECK(WIFSIGNALED(d.wstatus) && WTERMSIG(d.wstatus) == SIGKILL);
    close(chan);
    REQUIRE(spawn_keep(51, "zyg", "w51", &r, &chan) == 0);
    CHECK_EQ(r.error, 0);
    REQUIRE(host_line(chan, &pid2, &zyg2) == 0);
    CHECK(zyg2 != zyg);
    close(chan);
    memset(&d, 0, sizeof d);
    REQUIRE(next_msg(&d, sizeof d, 5000) == sizeof d);
    CHECK_EQ(d.seq, 51);
}

/* A zygote whose engine cannot start: the spawn fails with its words. */
static void
test_zygote_fails(void)
{
    struct launcher_spawned r;
    int chan = -1;

    REQUIRE(spawn_keep(60, "zygfail", "w60", &r, &chan) == 0);
    CHECK(r.error != 0);
    CHECK(strcmp(r.fail_type, "engine_unavailable") == 0);
    CHECK(strstr(r.why, "zygfail zygote") != NULL);
    CHECK(strstr(r.why, "no runtime in this test") != NULL);
    close(chan);
    CHECK_EQ(kill(launcher, 0), 0);
}

/* The master's end closes: the launcher kills what runs and exits. */
static void
test_close_ends_all(void)
{
    struct launcher_spawned r, rz;
    int st, chan, zpid, zyg;

    CHECK_EQ(spawn(30, "sleeper", "w30", &r), 0);
    REQUIRE(r.error == 0);
    REQUIRE(spawn_keep(31, "zyg", "w31", &rz, &chan) == 0);
    REQUIRE(rz.error == 0);
    REQUIRE(host_line(chan, &zpid, &zyg) == 0);
    close(fd);
    fd = -1;
    CHECK_EQ(waitpid(launcher, &st, 0), launcher);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(kill(r.pid, 0) < 0 && errno == ESRCH);
    /* The zygote and its host: gone, reaped by the launcher before it
     * exited (its children once the zygote was). */
    CHECK(kill(zyg, 0) < 0 && errno == ESRCH);
    CHECK(kill(zpid, 0) < 0 && errno == ESRCH);
    close(chan);
}

int
main(int argc, char **argv)
{
    char err[256];

    /* The zygote of engines zyg and zygfail (zygote.h). */
    if (argc == 2 && strcmp(argv[1], SANDBOX_ZYGOTE_ARG) == 0) {
        const char *base = strrchr(argv[0], '/');
        if (strcmp(base ? base + 1 : argv[0], "zygfail") == 0)
            sandbox_zygote_fail("no runtime in this test");
        const struct sandbox_zygote_ops ops = { .role = &plain };
        if (sandbox_zygote_serve(&ops) == 0)
            return zygote_host();
        return 1;
    }
    if (realpath("/proc/self/exe", self) == NULL) {
        perror("/proc/self/exe");
        return 1;
    }
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(sleeper, sizeof sleeper, "%s/sleeper", dir);
    FILE *f = fopen(sleeper, "w");
    if (f == NULL || fputs("#!/bin/sh\nexec sleep 60\n", f) < 0 ||
        fclose(f) != 0 || chmod(sleeper, 0755) != 0) {
        perror(sleeper);
        return 1;
    }
    snprintf(zygfail, sizeof zygfail, "%s/zygfail", dir);
    if (symlink(self, zygfail) < 0) {
        perror(zygfail);
        return 1;
    }
    const struct sandbox_launcher_engine engines[] = {
        { "true", "/bin/true", &plain, false, NULL },
        { "sleeper", sleeper, &plain, false, NULL },
        { "zyg", self, &plain, true, NULL },
        { "zygfail", zygfail, &plain, true, NULL },
    };
    const struct sandbox_launcher_config c = {
        .engines = engines,
        .nengines = 4,
        .confine = false,
    };
    launcher = sandbox_launcher_start(&c, &fd, err, sizeof err);
    if (launcher < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    RUN(test_refusals);
    RUN(test_exit_reported);
    RUN(test_kill_reported);
    RUN(test_zygote_fork);
    RUN(test_zygote_dies);
    RUN(test_zygote_fails);
    RUN(test_close_ends_all);
    check_rmtree(dir);
    return check_result();
}
