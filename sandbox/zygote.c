/*
 * zygote.c — both ends of the launcher ↔ zygote socket (zygote.h): the
 * launcher starting a zygote and talking to it, and the zygote's loop
 * that forks confined hosts.
 */
#include "config.h"

#include "sandbox/zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/cgroup.h"
#include "sandbox/spawn.h"

/* The zygote's own start: a session, the namespaces its hosts share, no
 * descriptor but its socket and the compiled filters.  It stays root and
 * unfiltered: every fork's steps need root, and a filter would bind its
 * hosts' inits too. */
static const struct sandbox_role zygote_role = {
    .name = "zygote",
    .steps = { SANDBOX_STEP_SESSION, SANDBOX_STEP_NAMESPACES, SANDBOX_STEP_FDS,
               SANDBOX_STEP_EXEC },
};

/* ---- messages ------------------------------------------------------------ */

int
sandbox_zygote_send(int sock, const void *m, size_t len, const int *fds,
                    unsigned nfds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * ZYGOTE_FDS_MAX)];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = { .iov_base = (void *)(uintptr_t)m, .iov_len = len };
    struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

    if (nfds > ZYGOTE_FDS_MAX) {
        errno = EINVAL;
        return -1;
    }
    if (nfds > 0) {
        memset(&ctl, 0, sizeof ctl);
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    for (;;) {
        if (sendmsg(sock, &msg, MSG_NOSIGNAL) >= 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* One message and its descriptors (up to max into fds, *nfds of them;
 * any beyond are closed).  As sandbox_zygote_recv() returns. */
static ssize_t
recv_fds(int sock, void *m, size_t len, int *fds, unsigned max, unsigned *nfds,
         int flags)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * ZYGOTE_FDS_MAX)];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = { .iov_base = m, .iov_len = len };
    struct msghdr msg = { .msg_iov = &iov,
                          .msg_iovlen = 1,
                          .msg_control = ctl.buf,
                          .msg_controllen = sizeof ctl.buf };
    ssize_t n;

    *nfds = 0;
    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t j = 0; j < k; j++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + j * sizeof(int), sizeof(int));
            if (*nfds < max)
                fds[(*nfds)++] = fd;
            else
                (void)close(fd);
        }
    }
    if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        for (unsigned i = 0; i < *nfds; i++)
            (void)close(fds[i]);
        *nfds = 0;
        errno = EMSGSIZE;
        return -1;
    }
    return n;
}

ssize_t
sandbox_zygote_recv(int sock, void *m, size_t len, int *fd, bool nonblocking)
{
    unsigned nfds;
    ssize_t n;

    *fd = -1;
    n = recv_fds(sock, m, len, fd, 1, &nfds, nonblocking ? MSG_DONTWAIT : 0);
    if (nfds == 0)
        *fd = -1;
    return n;
}

/* ---- the launcher's end ---------------------------------------------------
 */

pid_t
sandbox_zygote_start(const struct sandbox_zygote_start *z, int *sock, char *err,
                     size_t errlen)
{
    char *argv[3] = { (char *)(uintptr_t)z->path,
                      (char *)(uintptr_t)SANDBOX_ZYGOTE_ARG, NULL };
    struct sandbox_child c;
    int sv[2];

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        return -1;
    }
    const struct sandbox_spawn sp = {
        .role = &zygote_role,
        .path = z->path,
        .argv = argv,
        .envp = z->envp,
        .channel_fd = sv[1],
        .exec_fd = -1,
        .namespaces =
            z->namespaces & (SANDBOX_NS_NET | SANDBOX_NS_IPC | SANDBOX_NS_UTS),
        .landlock_fd = -1,
        .filters_fd = z->filters_fd,
        .net_fd = z->net_fd,
    };
    int rc = sandbox_spawn(&sp, &c, err, errlen);
    close(sv[1]);
    if (rc < 0) {
        close(sv[0]);
        return -1;
    }
    *sock = sv[0];
    return c.pid;
}

int
sandbox_zygote_wait_ready(int sock, int timeout_ms, char *err, size_t errlen)
{
    struct zygote_ready r;
    struct pollfd p = { .fd = sock, .events = POLLIN };
    int fd, rc;
    ssize_t n;

    do
        rc = poll(&p, 1, timeout_ms);
    while (rc < 0 && errno == EINTR);
    if (rc == 0) {
        snprintf(err, errlen, "it did not say it was ready within %d ms",
                 timeout_ms);
        return -1;
    }
    memset(&r, 0, sizeof r);
    n = sandbox_zygote_recv(sock, &r, sizeof r, &fd, false);
    if (fd >= 0)
        close(fd);
    if (n <= 0) {
        snprintf(err, errlen, "it ended before it was ready");
        return -1;
    }
    if (n != (ssize_t)sizeof r || r.type != ZYGOTE_READY) {
        snprintf(err, errlen, "its first message was not ready (%zd bytes)", n);
        return -1;
    }
    if (r.error != 0) {
        r.why[sizeof r.why - 1] = '\0';
        snprintf(err, errlen, "%s", r.why[0] ? r.why : strerror(r.error));
        return -1;
    }
    return 0;
}

/* ---- the zygote's end ------------------------------------------------------
 */

/* The hosts this zygote forked and has not reaped. */
static struct {
    pid_t *pids;
    size_t n, cap;
} kids;

static void
zsend(const void *m, size_t len, const int *fds, unsigned nfds)
{
    if (sandbox_zygote_send(SANDBOX_CHANNEL_FD, m, len, fds, nfds) < 0 &&
        errno != EAGAIN)
        _exit(1); /* the launcher is gone */
}

void
sandbox_zygote_fail(const char *why)
{
    struct zygote_ready r = { .type = ZYGOTE_READY, .error = EIO };

    snprintf(r.why, sizeof r.why, "%s", why);
    (void)sandbox_zygote_send(SANDBOX_CHANNEL_FD, &r, sizeof r, NULL, 0);
    _exit(1);
}

static bool
kid_known(pid_t pid, size_t *at)
{
    for (size_t i = 0; i < kids.n; i++)
        if (kids.pids[i] == pid) {
            if (at)
                *at = i;
            return true;
        }
    return false;
}

static void
kill_kid(pid_t pid)
{
    (void)kill(-pid, SIGKILL);
    (void)kill(pid, SIGKILL);
}

/* The launcher is gone: so are the hosts. */
static void __attribute__((noreturn)) zygote_finish(void)
{
    for (size_t i = 0; i < kids.n; i++)
        kill_kid(kids.pids[i]);
    _exit(0);
}

static void
reap_kids(void)
{
    int st;
    pid_t pid;

    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        size_t i;
        if (!kid_known(pid, &i))
            continue;
        kids.pids[i] = kids.pids[--kids.n];
        const struct zygote_death d = { .type = ZYGOTE_DEATH,
                                        .pid = (int32_t)pid,
                                        .wstatus = st };
        zsend(&d, sizeof d, NULL, 0);
    }
}

/* A fork request q with fds [channel, Landlock ruleset?, cgroup...]: 1
 * in the forked host, 0 in the zygote (answered). */
static int
fork_host(const struct sandbox_zygote_ops *ops, const struct zygote_fork *q,
          int *fds, unsigned nfds)
{
    struct zygote_forked r = { .type = ZYGOTE_FORKED, .seq = q->seq };
    struct sandbox_child c = { .pid = -1, .exit_fd = -1 };
    struct sandbox_cg *cg = NULL;

    if (kids.n == kids.cap) {
        size_t cap = kids.cap ? 2 * kids.cap : 16;
        pid_t *v = realloc(kids.pids, cap * sizeof *v);
        if (v == NULL) {
            r.error = ENOMEM;
            snprintf(r.why, sizeof r.why, "the zygote is out of memory");
            goto answer;
        }
        kids.pids = v;
        kids.cap = cap;
    }
    unsigned first_cg = q->landlock ? 2 : 1;
    if (nfds > first_cg) {
        cg = sandbox_cg_adopt(fds + first_cg, nfds - first_cg);
        for (unsigned i = first_cg; i < nfds; i++)
            fds[i] = -1; /* cg's now (or closed) */
        if (cg == NULL) {
            r.error = ENOMEM;
            snprintf(r.why, sizeof r.why, "the zygote is out of memory");
            goto answer;
        }
    }
    const struct sandbox_spawn sp = {
        .role = ops->role,
        .channel_fd = fds[0],
        .exec_fd = -1,
        .cg = cg,
        .namespaces = q->namespaces &
                      (SANDBOX_NS_MOUNT | SANDBOX_NS_PID | SANDBOX_NS_CGROUP),
        .landlock_abi = q->landlock_abi,
        .landlock_fd = q->landlock ? fds[1] : -1,
        .filters_fd =
            fcntl(SANDBOX_FILTERS_FD, F_GETFD) >= 0 ? SANDBOX_FILTERS_FD : -1,
        .net_fd = -1,
        .fork_only = true,
        .drop = q->drop != 0,
        .uid = q->uid,
        .gid = q->gid,
        .rlimits = q->rlimits,
    };
    if (ops->before_fork)
        ops->before_fork();
    int rc = sandbox_spawn(&sp, &c, r.why, sizeof r.why);
    if (rc == 0 && c.pid == 0) {
        if (ops->after_fork_child)
            ops->after_fork_child();
        return 1;
    }
    if (ops->after_fork_parent)
        ops->after_fork_parent();
    if (rc < 0) {
        r.error = errno ? errno : EIO;
    } else {
        r.pid = (int32_t)c.pid;
        r.init = c.init;
        kids.pids[kids.n++] = c.pid;
    }
answer:
    sandbox_cg_destroy(cg); /* closes the adopted descriptors */
    zsend(&r, sizeof r, &c.exit_fd, c.exit_fd >= 0 ? 1 : 0);
    if (c.exit_fd >= 0)
        close(c.exit_fd);
    return 0;
}

int
sandbox_zygote_serve(const struct sandbox_zygote_ops *ops)
{
    const struct zygote_ready ready = { .type = ZYGOTE_READY };
    sigset_t chld;
    int sigfd;

    char comm[17] = "";

    /* The hosts get the engine's name back; the zygote is wm-zygote in
     * ps(1). */
    (void)prctl(PR_GET_NAME, comm, 0, 0, 0);
    (void)prctl(PR_SET_NAME, "wm-zygote", 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &chld, NULL) < 0 ||
        (sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
        sandbox_zygote_fail("cannot watch its hosts' exits");
    zsend(&ready, sizeof ready, NULL, 0);
    for (;;) {
        struct pollfd p[2] = { { .fd = SANDBOX_CHANNEL_FD, .events = POLLIN },
                               { .fd = sigfd, .events = POLLIN } };
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            zygote_finish();
        }
        if (p[1].revents) {
            struct signalfd_siginfo si;
            while (read(sigfd, &si, sizeof si) == sizeof si)
                ;
            reap_kids();
        }
        if (!p[0].revents)
            continue;
        union {
            struct zygote_fork fork;
            struct zygote_kill kill;
            uint32_t type;
            char raw[sizeof(struct zygote_fork) + 1];
        } m;
        int fds[ZYGOTE_FDS_MAX];
        unsigned nfds;
        memset(&m, 0, sizeof m);
        ssize_t n = recv_fds(SANDBOX_CHANNEL_FD, &m, sizeof m, fds,
                             ZYGOTE_FDS_MAX, &nfds, 0);
        if (n == 0 || (n < 0 && errno != EMSGSIZE && errno != EAGAIN))
            zygote_finish();
        if (m.type == ZYGOTE_FORK && n == sizeof m.fork &&
            m.fork.landlock <= 1 && m.fork.ncg <= ZYGOTE_CG_FDS &&
            nfds == 1 + m.fork.landlock + m.fork.ncg) {
            if (fork_host(ops, &m.fork, fds, nfds)) {
                (void)prctl(PR_SET_NAME, comm, 0, 0, 0);
                return 0; /* the sigfd: closed by its steps */
            }
        } else if (m.type == ZYGOTE_KILL && n == sizeof m.kill) {
            if (kid_known(m.kill.pid, NULL))
                kill_kid(m.kill.pid); /* else reaped: its death is sent */
        } else if (n > 0) {
            dprintf(2,
                    "wm-zygote[%d]: a message of type %u and %zd bytes "
                    "with %u descriptors was refused\n",
                    (int)getpid(), m.type, n, nfds);
        }
        for (unsigned i = 0; i < nfds; i++)
            if (fds[i] >= 0)
                close(fds[i]);
    }
}
