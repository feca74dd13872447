/*
 * ipc_roundtrip.c — Process -> Result over ipc_channel between two
 * processes on a socketpair (bench/README.md).
 *
 * The child is an echo host: it decodes each Process event and answers a
 * Result holding it with another type (one decode, one encode, as a host
 * does).  The parent, the master side, measures
 *   1. latency at concurrency 1: N calls one after the other, each sent
 *      from the previous one's reply callback; p50, p99, p99.9 and max of
 *      the call-to-reply time;
 *   2. pipelined throughput: N calls with WINDOW outstanding; replies/s.
 * The event is small (64 bytes of data, one extension), as most are.
 * First, for scale, the machine's floor: a bare socketpair ping-pong of
 * 256 bytes between two processes waiting in epoll_wait(), no framing.
 *
 * Usage: ipc_roundtrip [LATENCY_CALLS [PIPELINED_CALLS [WINDOW]]]
 *        (defaults 200000, 2000000, 256)
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc/channel.h"

struct bench {
    struct event_base *base;
    struct ipc_channel *ch;
    struct ipc_fb_builder eb;
    struct ipc_frame f;
    unsigned long total; /* calls to make in this phase */
    unsigned long sent;
    unsigned long done;
    unsigned window;
    double *lat; /* phase 1: ns per call */
    double t_sent;
    bool failed;
};

static double
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- the echo host ------------------------------------------------------ */

static void
host_frame(struct ipc_channel *ch, const struct ipc_frame *f, int *fds,
           unsigned nfds, void *arg)
{
    struct ipc_cloudevent ev;
    struct ipc_frame r;

    (void)fds;
    (void)nfds;
    if (f->type == IPC_BODY_SHUTDOWN) {
        ipc_channel_flush(ch, 5000);
        event_base_loopbreak(arg);
        return;
    }
    if (f->type != IPC_BODY_PROCESS)
        return;
    ipc_cloudevent_decode(ipc_fb_root(f->u.process.event.ptr, 0), &ev);
    ev.type = ipc_str_c("bench.out");
    memset(&r, 0, sizeof r);
    r.type = IPC_BODY_RESULT;
    r.reply_to = f->seq;
    r.u.result.outputs.n = 1;
    r.u.result.outputs.items = &ev;
    if (ipc_channel_send(ch, &r, NULL, 0) < 0) {
        fprintf(stderr, "host: send: %s\n", strerror(errno));
        exit(1);
    }
}

static void
host_close(struct ipc_channel *ch, enum ipc_channel_status st,
           const char *reason, void *arg)
{
    (void)ch;
    (void)st;
    fprintf(stderr, "host: closed: %s\n", reason);
    event_base_loopbreak(arg);
}

static int
host_main(int fd)
{
    struct event_base *base = event_base_new();
    struct ipc_channel_callbacks cb = {
        .on_frame = host_frame,
        .on_close = host_close,
    };
    struct ipc_channel_config cfg = {
        .role = IPC_CHANNEL_HOST,
        .engine = "bench",
        .max_inflight = 1024,
    };
    struct ipc_channel *ch = ipc_channel_new(base, fd, &cfg, &cb, base);

    if (ch == NULL)
        return 1;
    event_base_dispatch(base);
    ipc_channel_free(ch);
    event_base_free(base);
    return 0;
}

/* ---- the floor ----------------------------------------------------------- */

/* p50 of a bare 256-byte ping-pong over a socketpair, both sides waiting
 * in epoll_wait() as the channel's event loop does; ns, or -1. */
static double
floor_p50(unsigned n)
{
    char buf[256];
    int sv[2], ep;
    struct epoll_event ev = { .events = EPOLLIN };
    double *lat, p50;
    pid_t pid;

    memset(buf, 0, sizeof buf);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(sv[0]);
        ep = epoll_create1(EPOLL_CLOEXEC);
        if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sv[1], &ev) < 0)
            _exit(1);
        for (;;) {
            if (epoll_wait(ep, &ev, 1, -1) < 0 && errno != EINTR)
                _exit(1);
            if (read(sv[1], buf, sizeof buf) <= 0)
                _exit(0);
            if (write(sv[1], buf, sizeof buf) != (ssize_t)sizeof buf)
                _exit(1);
        }
    }
    close(sv[1]);
    lat = malloc(sizeof *lat * n);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (lat == NULL || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev) < 0)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        double t0 = now_ns();
        if (write(sv[0], buf, sizeof buf) != (ssize_t)sizeof buf ||
            (epoll_wait(ep, &ev, 1, -1) < 0 && errno != EINTR) ||
            read(sv[0], buf, sizeof buf) <= 0)
            return -1;
        lat[i] = now_ns() - t0;
    }
    close(sv[0]);
    close(ep);
    waitpid(pid, NULL, 0);
    qsort(lat, n, sizeof *lat, cmp_double);
    p50 = lat[n / 2];
    free(lat);
    return p50;
}

/* ---- the master side ---------------------------------------------------- */

static void pump(struct bench *b);

static void
on_reply(struct ipc_channel *ch, const struct ipc_frame *r, int *fds,
         unsigned nfds, const char *error, void *arg)
{
    struct bench *b = arg;

    (void)ch;
    (void)fds;
    (void)nfds;
    if (error || r->type != IPC_BODY_RESULT || r->u.result.outputs.n != 1) {
        fprintf(stderr, "bad reply: %s\n", error ? error : "not a Result");
        b->failed = true;
        event_base_loopbreak(b->base);
        return;
    }
    if (b->lat)
        b->lat[b->done] = now_ns() - b->t_sent;
    b->done++;
    if (b->done == b->total) {
        event_base_loopbreak(b->base);
        return;
    }
    pump(b);
}

static void
pump(struct bench *b)
{
    while (b->sent < b->total && b->sent - b->done < b->window) {
        if (b->lat)
            b->t_sent = now_ns();
        if (ipc_channel_call(b->ch, &b->f, NULL, 0, on_reply, b) < 0) {
            if (errno == EAGAIN)
                return;
            fprintf(stderr, "call: %s\n", strerror(errno));
            b->failed = true;
            event_base_loopbreak(b->base);
            return;
        }
        b->sent++;
    }
}

static void
on_drain(struct ipc_channel *ch, void *arg)
{
    (void)ch;
    pump(arg);
}

static void
on_close(struct ipc_channel *ch, enum ipc_channel_status st, const char *reason,
         void *arg)
{
    struct bench *b = arg;

    (void)ch;
    (void)st;
    fprintf(stderr, "master: closed: %s\n", reason);
    b->failed = true;
    event_base_loopbreak(b->base);
}

static void
master_frame(struct ipc_channel *ch, const struct ipc_frame *f, int *fds,
             unsigned nfds, void *arg)
{
    struct bench *b = arg;

    (void)ch;
    (void)fds;
    (void)nfds;
    fprintf(stderr, "master: unexpected %s\n", ipc_body_name(f->type));
    b->failed = true;
    event_base_loopbreak(b->base);
}

static int
on_hello(struct ipc_channel *ch, const struct ipc_hello *h, const char **reason,
         void *arg)
{
    (void)ch;
    (void)h;
    (void)reason;
    (void)arg;
    return 0;
}

/* Runs one phase; seconds it took. */
static double
phase(struct bench *b, unsigned long total, unsigned window, double *lat)
{
    double t0 = now_ns();

    b->total = total;
    b->sent = b->done = 0;
    b->window = window;
    b->lat = lat;
    pump(b);
    event_base_dispatch(b->base);
    return (now_ns() - t0) / 1e9;
}

int
main(int argc, char **argv)
{
    unsigned long lat_calls = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
    unsigned long pipe_calls = argc > 2 ? strtoul(argv[2], NULL, 10) : 2000000;
    unsigned window = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 256;
    struct ipc_channel_callbacks cb = {
        .on_frame = master_frame,
        .on_hello = on_hello,
        .on_close = on_close,
        .on_drain = on_drain,
    };
    struct ipc_channel_config cfg = { .role = IPC_CHANNEL_MASTER };
    static const struct ipc_pair ext[] = {
        { { "correlationid", 13 }, { "c0ffee", 6 } },
    };
    uint8_t data[64];
    struct ipc_cloudevent ce;
    struct bench b;
    int sv[2], st;
    pid_t pid;

    if (lat_calls < 100 || pipe_calls == 0 || window == 0) {
        fprintf(stderr, "usage: ipc_roundtrip [LATENCY_CALLS "
                        "[PIPELINED_CALLS [WINDOW]]]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    double floor_ns = floor_p50(100000);
    if (floor_ns < 0) {
        perror("floor");
        return 1;
    }
    printf("ipc_roundtrip: the machine's floor, a bare 256-byte socketpair "
           "ping-pong: p50 %.1f us\n",
           floor_ns / 1e3);
    fflush(stdout);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        perror("socketpair");
        return 1;
    }
    pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        close(sv[0]);
        _exit(host_main(sv[1]));
    }
    close(sv[1]);

    memset(&b, 0, sizeof b);
    memset(data, 'x', sizeof data);
    memset(&ce, 0, sizeof ce);
    ce.id = ipc_str_c("bench-event-0001");
    ce.type = ipc_str_c("bench");
    ce.source = ipc_str_c("urn:bench");
    ce.specversion = ipc_str_c("1.0");
    ce.data.ptr = data;
    ce.data.len = sizeof data;
    ce.extensions.n = 1;
    ce.extensions.items = ext;
    ipc_fb_builder_init(&b.eb);
    if (ipc_cloudevent_encode(&b.eb, &ce) < 0)
        return 1;
    b.f.type = IPC_BODY_PROCESS;
    b.f.u.process.event.ptr = b.eb.buf;
    b.f.u.process.event.len = (uint32_t)b.eb.len;
    b.f.u.process.deadline_ms = 1000;

    b.base = event_base_new();
    b.ch = b.base ? ipc_channel_new(b.base, sv[0], &cfg, &cb, &b) : NULL;
    if (b.ch == NULL) {
        perror("ipc_channel_new");
        return 1;
    }

    /* Warm-up: the handshake, page faults, the allocator. */
    phase(&b, 10000, 1, NULL);
    double *lat = malloc(sizeof *lat * lat_calls);
    if (lat == NULL || b.failed)
        return 1;
    double secs = phase(&b, lat_calls, 1, lat);
    if (b.failed)
        return 1;
    qsort(lat, lat_calls, sizeof *lat, cmp_double);
    printf("ipc_roundtrip: Process -> Result over ipc_channel, event of %zu "
           "bytes\n",
           b.eb.len);
    printf("  concurrency 1: %lu calls in %.2f s: p50 %.1f us, p99 %.1f us, "
           "p99.9 %.1f us, max %.1f us\n",
           lat_calls, secs, lat[lat_calls / 2] / 1e3,
           lat[lat_calls * 99 / 100] / 1e3, lat[lat_calls * 999 / 1000] / 1e3,
           lat[lat_calls - 1] / 1e3);
    free(lat);

    secs = phase(&b, pipe_calls, window, NULL);
    if (b.failed)
        return 1;
    printf("  pipelined, window %u: %lu calls in %.2f s: %.0f frames/s "
           "each way\n",
           window, pipe_calls, secs, pipe_calls / secs);

    struct ipc_frame f;
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_SHUTDOWN;
    if (ipc_channel_send(b.ch, &f, NULL, 0) < 0 ||
        ipc_channel_flush(b.ch, 5000) < 0)
        perror("shutdown");
    ipc_channel_free(b.ch);
    event_base_free(b.base);
    ipc_fb_builder_free(&b.eb);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return 0;
}
