/*
 * host_rtt.c — an engine host on its own: Process -> Result round trips
 * between this program, playing the master, and a real host running real
 * code: wm-host-native with a package (bench/README.md, "Native engine
 * (out of process)"), or wm-host-python with a module's source (CODE
 * ending in .py; "Python engine").
 *
 * It spawns HOST with one end of a socketpair on fd 3, as the master does,
 * speaks the channel protocol (ipc/channel.h: the host's Hello answered,
 * Load with a sealed memfd of PACKAGE, then Process -> Result) and
 * measures
 *   1. latency at concurrency 1: N calls one after the other, each sent
 *      from the previous one's reply callback (after 10,000 of warm-up);
 *      p50, p99, p99.9 and max of the call-to-reply time;
 *   2. pipelined throughput: N calls with WINDOW outstanding (at most the
 *      max_inflight of the host's Hello, plus its prefetch); replies per
 *      second.
 * No HTTP, no broker, no journal: what is left is the channel, the host's
 * loop, its hand-off to the pool thread(s) and back, and the worker.
 * Every Result is checked to hold one output and no error.  Each phase
 * also reports the CPU time per call of the host (all its threads) and of
 * this program (/proc/PID/stat, clock ticks: meaningful over seconds), to
 * tell waiting from working.
 *
 * The event is the one of ipc_roundtrip (64 bytes of data, one extension)
 * with type "echo": the test worker (tests/workers/native/echo_worker.cc)
 * echoes it with two extensions more.  For a Python worker
 * (bench/echo_worker.py) the 64 bytes are a JSON object, content type
 * application/json.
 *
 * Usage: host_rtt HOST CODE [LATENCY_CALLS [PIPELINED_CALLS [WINDOW
 *                 [CONCURRENCY [MIME [TYPE]]]]]]
 *                 (defaults 100000, 1000000, 256, 1, and the MIME type
 *                 from CODE: text/x-python for *.py, else
 *                 application/x-native-dll)
 * CONCURRENCY is the Load's limits.concurrency: the host's pool threads.
 * MIME is the Load's (application/x-dotnet-dll for wm-host-dotnet with a
 * nupkg of the .NET test worker, bench/dotnet.py).  TYPE is the event's
 * type (default echo; the .NET test worker's sync completes synchronously,
 * its echo after a Task.Yield()).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc/channel.h"

#define HOST_FD 3
#define WARMUP_CALLS 10000

struct bench {
    struct event_base *base;
    pid_t host;
    struct ipc_channel *ch;
    struct ipc_frame f;    /* the Process frame, sent again and again */
    uint32_t max_inflight; /* from the host's Hello, with its prefetch */
    unsigned long total;   /* calls to make in this phase */
    unsigned long sent;
    unsigned long done;
    unsigned window;
    double *lat; /* phase 1: ns per call */
    double t_sent;
    double host_cpu_us; /* CPU per call in the last phase: the host's */
    double self_cpu_us; /* and ours */
    bool failed;
};

static double
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* CPU seconds (user + system, all threads) of process pid so far; -1 when
 * /proc cannot tell. */
static double
cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    unsigned long ut, st;
    ssize_t n;
    int fd;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* After the command's ")": state is field 3, utime 14, stime 15. */
    const char *p = strrchr(buf, ')');
    if (p == NULL || sscanf(p + 1,
                            " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                            "%lu %lu",
                            &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Ends the run with a failure; the first reason is printed (a closing
 * channel fails the pending call, then reports its close). */
static void
stop(struct bench *b, const char *why)
{
    if (why && !b->failed)
        fprintf(stderr, "host_rtt: %s\n", why);
    b->failed = true;
    event_base_loopbreak(b->base);
}

/* ---- the calls ------------------------------------------------------- */

static void pump(struct bench *b);

static void
on_result(struct ipc_channel *ch, const struct ipc_frame *r, int *fds,
          unsigned nfds, const char *error, void *arg)
{
    struct bench *b = arg;

    (void)ch;
    (void)fds;
    (void)nfds;
    if (error || r->type != IPC_BODY_RESULT) {
        stop(b, error ? error : "the reply is not a Result");
        return;
    }
    if (r->u.result.error.type.ptr || r->u.result.outputs.n != 1) {
        fprintf(
            stderr, "host_rtt: Result with %u outputs, error %.*s: %.*s\n",
            (unsigned)r->u.result.outputs.n, (int)r->u.result.error.type.len,
            r->u.result.error.type.ptr ? r->u.result.error.type.ptr : "",
            (int)r->u.result.error.message.len,
            r->u.result.error.message.ptr ? r->u.result.error.message.ptr : "");
        stop(b, NULL);
        return;
    }
    if (b->lat)
        b->lat[b->done] = now_ns() - b->t_sent;
    if (++b->done == b->total) {
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
        if (ipc_channel_call(b->ch, &b->f, NULL, 0, on_result, b) < 0) {
            if (errno != EAGAIN)
                stop(b, strerror(errno));
            return; /* EAGAIN: on_drain calls again */
        }
        b->sent++;
    }
}

/* Runs one phase of `total` calls, `window` outstanding; seconds.  The
 * CPU time per call of both processes lands in b. */
static double
phase(struct bench *b, unsigned long total, unsigned window, double *lat)
{
    double h0 = cpu_s(b->host), s0 = cpu_s(getpid());
    double t0 = now_ns();

    b->total = total;
    b->sent = b->done = 0;
    b->window = window;
    b->lat = lat;
    pump(b);
    if (!b->failed)
        event_base_dispatch(b->base);
    double secs = (now_ns() - t0) / 1e9;
    b->host_cpu_us = (cpu_s(b->host) - h0) * 1e6 / (double)total;
    b->self_cpu_us = (cpu_s(getpid()) - s0) * 1e6 / (double)total;
    return secs;
}

/* ---- the channel's callbacks ----------------------------------------- */

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
    char msg[512];

    (void)ch;
    snprintf(msg, sizeof msg, "channel closed (%s): %s",
             ipc_channel_status_name(st), reason);
    stop(arg, msg);
}

static void
on_frame(struct ipc_channel *ch, const struct ipc_frame *f, int *fds,
         unsigned nfds, void *arg)
{
    (void)ch;
    (void)fds;
    (void)nfds;
    /* The host's Log frames ("loaded ..."): shown, as the master logs
     * them. */
    if (f->type == IPC_BODY_LOG) {
        fprintf(stderr, "host: %.*s\n", (int)f->u.log.message.len,
                f->u.log.message.ptr ? f->u.log.message.ptr : "");
        return;
    }
    fprintf(stderr, "host_rtt: unexpected %s frame\n", ipc_body_name(f->type));
    stop(arg, NULL);
}

static int
on_hello(struct ipc_channel *ch, const struct ipc_hello *h, const char **reason,
         void *arg)
{
    struct bench *b = arg;

    (void)ch;
    (void)reason;
    b->max_inflight = (h->max_inflight ? h->max_inflight : 1) + h->prefetch;
    return 0;
}

static void
on_loaded(struct ipc_channel *ch, const struct ipc_frame *r, int *fds,
          unsigned nfds, const char *error, void *arg)
{
    struct bench *b = arg;

    (void)ch;
    (void)fds;
    (void)nfds;
    if (error || r->type != IPC_BODY_LOADED) {
        stop(b, error ? error : "the reply to Load is not a Loaded");
        return;
    }
    if (!r->u.loaded.ok) {
        fprintf(stderr, "host_rtt: the host refused the package: %.*s\n",
                (int)r->u.loaded.error.message.len,
                r->u.loaded.error.message.ptr ? r->u.loaded.error.message.ptr
                                              : "");
        stop(b, NULL);
        return;
    }
    event_base_loopbreak(b->base);
}

/* ---- set-up ----------------------------------------------------------- */

/* A sealed memfd holding the file at path (as the master hands code to a
 * host); its size in *len.  -1 on failure, with a message. */
static int
package_memfd(const char *path, size_t *len)
{
    static char buf[1 << 16];
    int in = open(path, O_RDONLY | O_CLOEXEC);
    int fd = memfd_create("host_rtt-package", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    ssize_t n;

    *len = 0;
    if (in < 0 || fd < 0) {
        perror(in < 0 ? path : "memfd_create");
        goto fail;
    }
    while ((n = read(in, buf, sizeof buf)) > 0) {
        if (write(fd, buf, (size_t)n) != n) {
            perror("write the memfd");
            goto fail;
        }
        *len += (size_t)n;
    }
    if (n < 0 ||
        fcntl(fd, F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        perror(n < 0 ? path : "seal the memfd");
        goto fail;
    }
    close(in);
    return fd;
fail:
    if (in >= 0)
        close(in);
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Starts host with the other end of sv on fd 3; its pid, or -1. */
static pid_t
spawn_host(const char *host, int sv[2])
{
    pid_t pid = fork();

    if (pid != 0)
        return pid;
    /* dup2() clears FD_CLOEXEC on fd 3, unless the end is fd 3 already;
     * every other descriptor of ours is close-on-exec. */
    if (sv[1] == HOST_FD ? fcntl(HOST_FD, F_SETFD, 0) < 0
                         : dup2(sv[1], HOST_FD) < 0)
        _exit(127);
    execl(host, host, (char *)NULL);
    perror(host);
    _exit(127);
}

/* A module's source (*.py, for wm-host-python), else a native package. */
static const char *
code_mime(const char *path)
{
    size_t n = strlen(path);

    return n > 3 && strcmp(path + n - 3, ".py") == 0
               ? "text/x-python"
               : "application/x-native-dll";
}

int
main(int argc, char **argv)
{
    unsigned long lat_calls = argc > 3 ? strtoul(argv[3], NULL, 10) : 100000;
    unsigned long pipe_calls = argc > 4 ? strtoul(argv[4], NULL, 10) : 1000000;
    unsigned window = argc > 5 ? (unsigned)strtoul(argv[5], NULL, 10) : 256;
    unsigned concurrency = argc > 6 ? (unsigned)strtoul(argv[6], NULL, 10) : 1;
    struct ipc_channel_callbacks cb = {
        .on_frame = on_frame,
        .on_hello = on_hello,
        .on_close = on_close,
        .on_drain = on_drain,
    };
    struct ipc_channel_config cfg = { .role = IPC_CHANNEL_MASTER };
    static const struct ipc_pair ext[] = {
        { { "correlationid", 13 }, { "c0ffee", 6 } },
    };
    uint8_t data[64];
    struct ipc_fb_builder eb;
    struct ipc_cloudevent ce;
    struct ipc_frame load;
    struct bench b;
    int sv[2], st, code;
    size_t code_len;
    pid_t pid;

    if (argc < 3 || lat_calls < 100 || pipe_calls == 0 || window == 0 ||
        concurrency == 0) {
        fprintf(stderr, "usage: host_rtt HOST PACKAGE [LATENCY_CALLS "
                        "[PIPELINED_CALLS [WINDOW [CONCURRENCY [MIME "
                        "[TYPE]]]]]]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    code = package_memfd(argv[2], &code_len);
    if (code < 0)
        return 1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        perror("socketpair");
        return 1;
    }
    pid = spawn_host(argv[1], sv);
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    close(sv[1]);

    memset(&b, 0, sizeof b);
    b.host = pid;
    b.base = event_base_new();
    b.ch = b.base ? ipc_channel_new(b.base, sv[0], &cfg, &cb, &b) : NULL;
    if (b.ch == NULL) {
        perror("ipc_channel_new");
        return 1;
    }

    /* The Load goes out after the handshake; the loop runs until Loaded. */
    memset(&load, 0, sizeof load);
    load.type = IPC_BODY_LOAD;
    load.u.load.worker_id = ipc_str_c("host-rtt");
    load.u.load.version = 1;
    load.u.load.mime = ipc_str_c(argc > 7 ? argv[7] : code_mime(argv[2]));
    load.u.load.code_fd = 0;
    load.u.load.code_len = code_len;
    load.u.load.identity.id = ipc_str_c("host-rtt");
    load.u.load.identity.group = ipc_str_c("");
    load.u.load.identity.topic = ipc_str_c("bench");
    load.u.load.limits.present = true;
    load.u.load.limits.timeout_ms = 10000;
    load.u.load.limits.concurrency = concurrency;
    if (ipc_channel_call(b.ch, &load, &code, 1, on_loaded, &b) < 0) {
        perror("send the Load");
        return 1;
    }
    event_base_dispatch(b.base);
    if (b.failed)
        return 1;
    if (window > b.max_inflight)
        window = b.max_inflight;

    memset(data, 'x', sizeof data);
    memset(&ce, 0, sizeof ce);
    /* A Python worker gets what a JSON event gives it: a dict to read
     * (64 bytes of JSON, parsed by the host); a native one the bytes. */
    if (strcmp(code_mime(argv[2]), "text/x-python") == 0) {
        memcpy(data, "{\"n\": 1, \"s\": \"", 15);
        memcpy(data + sizeof data - 2, "\"}", 2);
        ce.datacontenttype = ipc_str_c("application/json");
    }
    ce.id = ipc_str_c("bench-event-0001");
    ce.type = ipc_str_c(argc > 8 ? argv[8] : "echo");
    ce.source = ipc_str_c("urn:bench");
    ce.specversion = ipc_str_c("1.0");
    ce.data.ptr = data;
    ce.data.len = sizeof data;
    ce.extensions.n = 1;
    ce.extensions.items = ext;
    ipc_fb_builder_init(&eb);
    if (ipc_cloudevent_encode(&eb, &ce) < 0)
        return 1;
    b.f.type = IPC_BODY_PROCESS;
    b.f.u.process.event.ptr = eb.buf;
    b.f.u.process.event.len = (uint32_t)eb.len;
    b.f.u.process.deadline_ms = 10000;
    b.f.u.process.delivery = 1;

    /* Warm-up: page faults, the allocators, the pool's threads. */
    phase(&b, WARMUP_CALLS, 1, NULL);
    double *lat = malloc(sizeof *lat * lat_calls);
    if (lat == NULL || b.failed)
        return 1;
    double secs = phase(&b, lat_calls, 1, lat);
    if (b.failed)
        return 1;
    qsort(lat, lat_calls, sizeof *lat, cmp_double);
    printf("host_rtt: %s, %u thread%s, Process -> Result, event of %zu "
           "bytes%s%s\n",
           argv[1], concurrency, concurrency == 1 ? "" : "s", eb.len,
           argc > 8 ? ", type " : "", argc > 8 ? argv[8] : "");
    printf("  concurrency 1: %lu calls in %.2f s: p50 %.1f us, p99 %.1f us, "
           "p99.9 %.1f us, max %.1f us\n",
           lat_calls, secs, lat[lat_calls / 2] / 1e3,
           lat[lat_calls * 99 / 100] / 1e3, lat[lat_calls * 999 / 1000] / 1e3,
           lat[lat_calls - 1] / 1e3);
    printf("    CPU per call: host %.1f us, host_rtt %.1f us\n", b.host_cpu_us,
           b.self_cpu_us);
    free(lat);

    secs = phase(&b, pipe_calls, window, NULL);
    if (b.failed)
        return 1;
    printf("  pipelined, window %u: %lu calls in %.2f s: %.0f events/s\n",
           window, pipe_calls, secs, pipe_calls / secs);
    printf("    CPU per call: host %.2f us, host_rtt %.2f us\n", b.host_cpu_us,
           b.self_cpu_us);

    struct ipc_frame f;
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_SHUTDOWN;
    f.u.shutdown.grace_ms = 2000;
    if (ipc_channel_send(b.ch, &f, NULL, 0) < 0 ||
        ipc_channel_flush(b.ch, 5000) < 0)
        perror("send the Shutdown");
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    ipc_channel_free(b.ch);
    event_base_free(b.base);
    ipc_fb_builder_free(&eb);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "host_rtt: the host ended with status 0x%x\n",
                (unsigned)st);
        return 1;
    }
    return 0;
}
