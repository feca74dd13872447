/*
 * nats_server.h — a real `nats-server -js` for the unit tests of the nats
 * backends (test_store_nats.c, test_broker_nats.c): started on a free
 * loopback port with its store under the test's directory, stopped by its
 * pid.  Header-only (static functions), as check.h is.
 *
 * Without nats-server a test skips (77), unless NATS_MUST_WORK=1
 * (scripts/test sets it: scripts/install-deps installs nats-server):
 * nats_server_missing() says which.
 */
#ifndef WM_TESTS_UNIT_NATS_SERVER_H
#define WM_TESTS_UNIT_NATS_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nats/nats.h>

struct nats_server {
    const char *bin;
    const char *dir; /* its store and log go under it */
    int port;        /* 0 until the first start; kept for a restart */
    char url[64];
    pid_t pid;
};

static int
nats_server_free_port(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET };
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static const char *
nats_server_binary(void)
{
    static const char *const paths[] = { "/usr/sbin/nats-server",
                                         "/usr/bin/nats-server",
                                         "/usr/local/bin/nats-server" };

    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    return NULL;
}

/* main()'s answer when there is no nats-server: 77 (skip), or 1 under
 * NATS_MUST_WORK=1. */
static int
nats_server_missing(void)
{
    const char *must = getenv("NATS_MUST_WORK");

    if (must != NULL && strcmp(must, "1") == 0) {
        fprintf(stderr, "NATS_MUST_WORK=1 but nats-server is missing\n");
        return 1;
    }
    printf("# SKIP: nats-server is not installed (Debian package "
           "nats-server)\n");
    return 77;
}

/* Starts s (on s->port once it has one); 0 once a client connects, -1
 * otherwise. */
static int
nats_server_start(struct nats_server *s)
{
    char port[16], dir[256], log[256];
    natsConnection *nc = NULL;
    int p = s->port > 0 ? s->port : nats_server_free_port();

    if (p < 0)
        return -1;
    s->port = p;
    snprintf(port, sizeof port, "%d", p);
    snprintf(dir, sizeof dir, "%s/js", s->dir);
    snprintf(log, sizeof log, "%s/nats-server.log", s->dir);
    snprintf(s->url, sizeof s->url, "nats://127.0.0.1:%d", p);
    s->pid = fork();
    if (s->pid < 0)
        return -1;
    if (s->pid == 0) {
        FILE *f = freopen(log, "a", stderr);

        (void)f;
        execl(s->bin, s->bin, "-js", "-a", "127.0.0.1", "-p", port, "-sd", dir,
              (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        if (natsConnection_ConnectTo(&nc, s->url) == NATS_OK) {
            natsConnection_Destroy(nc);
            return 0;
        }
        usleep(20000);
    }
    return -1;
}

static void
nats_server_stop(struct nats_server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = -1;
    }
}

#endif /* WM_TESTS_UNIT_NATS_SERVER_H */
