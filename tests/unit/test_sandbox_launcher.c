/*
 * test_sandbox_launcher.c — sandbox/launcher.c as the master sees it: a
 * request that fails a check (an engine it does not have, a worker id
 * that could name another path, a wrong size, a spawn without its
 * channel, a kill of a spawn it never made) is refused or dropped and
 * the launcher goes on; a spawn answered with its pid; a death reported
 * with the host's wait status, after an exit and after a kill; the
 * master's end closed: every host killed and the launcher gone.
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
#include "tests/unit/check.h"

static const struct sandbox_role plain = {
    "plain", { SANDBOX_STEP_SESSION, SANDBOX_STEP_FDS, SANDBOX_STEP_EXEC },
    NULL,    NULL,
    NULL,    false,
};

static char dir[] = "/tmp/wm-test-launcher.XXXXXX";
static char sleeper[64];
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

/* The master's end closes: the launcher kills what runs and exits. */
static void
test_close_ends_all(void)
{
    struct launcher_spawned r;
    int st;

    CHECK_EQ(spawn(30, "sleeper", "w30", &r), 0);
    REQUIRE(r.error == 0);
    close(fd);
    fd = -1;
    CHECK_EQ(waitpid(launcher, &st, 0), launcher);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(kill(r.pid, 0) < 0 && errno == ESRCH);
}

int
main(void)
{
    char err[256];

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
    const struct sandbox_launcher_engine engines[] = {
        { "true", "/bin/true", &plain },
        { "sleeper", sleeper, &plain },
    };
    const struct sandbox_launcher_config c = {
        .engines = engines,
        .nengines = 2,
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
    RUN(test_close_ends_all);
    check_rmtree(dir);
    return check_result();
}
