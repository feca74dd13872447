/*
 * host.c — the skeleton of every engine host (host.h): the start, the
 * frames every host answers alike, the sends, the log and the exits.
 *
 * Why one skeleton: the hosts (native, Python, .NET, the test host) had
 * each grown a copy of this, and the copies drifted (exit() against
 * _exit(), a send that dropped a Heartbeat on a full queue against one
 * that waited).  Here each behaviour is written once, with its reason.
 *
 * The frame arms: Load and Process are the host's (ops); a Heartbeat is
 * echoed at once (a busy host is judged by its Process deadline, not by
 * heartbeats); Shutdown is noted and the host exits once every event it
 * took is answered; any other body is the master breaking the protocol.
 *
 * Sends: a full queue (EAGAIN) is written out and the frame sent again,
 * since every frame a host sends is owed (a Result, a Loaded, a Heartbeat
 * echo) except a Log line, which is dropped when even that fails.  The
 * frames queued ahead are the host's own, bounded by what the master let
 * it take (max_inflight and prefetch), so the wait is short unless the
 * master is stuck.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "hosts/common/host.h"

/* The longest message of host_log() (ipc_channel_log()'s cut). */
#define LOG_MAX 1023u

static const struct host_ops *ops;
static struct event_base *base;
static struct ipc_channel *ch;
static bool shutting_down;

static void fail(int status, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));

/* A line on stderr, "<name>[pid]: ...", and the exit with status. */
static void
fail(int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s[%d]: %s\n", ops ? ops->name : "wm-host", (int)getpid(),
            msg);
    _exit(status);
}

void
host_die(const char *what)
{
    fail(1, "%s: %s", what, strerror(errno));
}

struct ipc_channel *
host_channel(void)
{
    return ch;
}

bool
host_shutting_down(void)
{
    return shutting_down;
}

void
host_exit_if_done(void)
{
    if (shutting_down && ops->idle()) {
        (void)ipc_channel_flush(ch, HOST_EXIT_FLUSH_MS);
        _exit(0);
    }
}

/* ---- sends ------------------------------------------------------------ */

/* ipc_channel_send(), sent again once a full queue is written.  A
 * refused send closes the frame's descriptors: a frame with some (rare: an
 * in-process Loaded) goes into an empty queue, which takes any frame. */
static int
send_or_wait(const struct ipc_frame *f, const int *fds, unsigned nfds)
{
    int rc;

    if (nfds > 0 && ipc_channel_queued(ch) > 0)
        (void)ipc_channel_flush(ch, HOST_SEND_WAIT_MS);
    rc = ipc_channel_send(ch, f, fds, nfds);
    if (rc < 0 && errno == EAGAIN && nfds == 0 &&
        ipc_channel_flush(ch, HOST_SEND_WAIT_MS) == 0)
        rc = ipc_channel_send(ch, f, fds, nfds);
    return rc;
}

int
host_frame_send(const struct ipc_frame *f, const int *fds, unsigned nfds)
{
    char what[64];

    if (send_or_wait(f, fds, nfds) == 0)
        return 0;
    if (errno == EMSGSIZE)
        return -1;
    snprintf(what, sizeof what, "send a %s", ipc_body_name(f->type));
    host_die(what);
}

void
host_log_send(enum ipc_log_level level, const char *msg, size_t len)
{
    struct ipc_frame f;

    if (ch == NULL) {
        fprintf(stderr, "%s[%d]: %.*s\n", ops ? ops->name : "wm-host",
                (int)getpid(), (int)len, msg);
        return;
    }
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_LOG;
    f.u.log.level = level;
    f.u.log.message = (struct ipc_str){ msg, (uint32_t)len };
    if (send_or_wait(&f, NULL, 0) < 0 && errno != EAGAIN)
        host_die("send a Log");
}

void
host_log(enum ipc_log_level level, const char *fmt, ...)
{
    char msg[LOG_MAX + 1];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    host_log_send(level, msg, strlen(msg));
}

/* *f zeroed, the answer of type to the frame seq. */
static void
answer_init(struct ipc_frame *f, enum ipc_body_type type, uint64_t seq)
{
    memset(f, 0, sizeof *f);
    f->type = type;
    f->reply_to = seq;
}

void
host_result_send(uint64_t seq, const struct ipc_result *r)
{
    struct ipc_frame f;

    answer_init(&f, IPC_BODY_RESULT, seq);
    f.u.result = *r;
    if (host_frame_send(&f, NULL, 0) == 0)
        return;
    /* A host's channel keeps the default cap, IPC_FRAME_MAX_DEFAULT. */
    memset(&f.u.result, 0, sizeof f.u.result);
    f.u.result.error.type = ipc_str_c("output_too_large");
    f.u.result.error.message =
        ipc_str_c("the worker's output does not fit in a frame (16 MiB)");
    if (host_frame_send(&f, NULL, 0) < 0)
        host_die("send a Result");
}

void
host_loaded_error(uint64_t seq, const struct ipc_error *e)
{
    struct ipc_frame f;

    answer_init(&f, IPC_BODY_LOADED, seq);
    f.u.loaded.ok = e == NULL;
    f.u.loaded.library_fd = -1;
    if (e)
        f.u.loaded.error = *e;
    if (host_frame_send(&f, NULL, 0) < 0)
        host_die("send a Loaded");
}

void
host_loaded_reply(uint64_t seq, const char *why)
{
    const struct ipc_error e = {
        .type = ipc_str_c("load_error"),
        .message = ipc_str_c(why),
    };

    host_loaded_error(seq, why ? &e : NULL);
}

/* ---- the channel ------------------------------------------------------ */

static void
on_frame(struct ipc_channel *c, const struct ipc_frame *f, int *fds,
         unsigned nfds, void *arg)
{
    struct ipc_frame h;

    (void)c;
    (void)arg;
    switch (f->type) {
    case IPC_BODY_LOAD:
        ops->load(f, fds, nfds);
        break;
    case IPC_BODY_PROCESS:
        ops->process(f);
        break;
    case IPC_BODY_HEARTBEAT:
        if (ops->heartbeat && !ops->heartbeat())
            break;
        answer_init(&h, IPC_BODY_HEARTBEAT, f->seq);
        (void)host_frame_send(&h, NULL, 0);
        break;
    case IPC_BODY_SHUTDOWN:
        shutting_down = true;
        if (ops->shutdown)
            ops->shutdown();
        host_exit_if_done();
        break;
    default:
        fail(4, "unexpected %s frame", ipc_body_name(f->type));
    }
}

static void
on_close(struct ipc_channel *c, enum ipc_channel_status status,
         const char *reason, void *arg)
{
    (void)c;
    (void)arg;
    if (status == IPC_CHANNEL_EOF)
        _exit(0); /* the master is gone or done with us */
    fail(1, "channel closed (%s): %s", ipc_channel_status_name(status), reason);
}

void
host_run(const struct host_ops *host)
{
    const struct ipc_channel_callbacks cb = {
        .on_frame = on_frame,
        .on_close = on_close,
    };
    struct ipc_channel_config cfg = {
        .role = IPC_CHANNEL_HOST,
        .engine = host->engine,
        .max_inflight = host->max_inflight,
        .prefetch = host->prefetch,
        .protocol = host->protocol,
    };
    char warn[512] = "";

    ops = host;
    if (fcntl(HOST_CHANNEL_FD, F_GETFD) < 0)
        host_die("no channel on fd 3");
    signal(SIGPIPE, SIG_IGN);
    /* Before the confinement: its filter has no epoll_create. */
    if ((base = event_base_new()) == NULL)
        host_die("event_base_new");
    if (ops->prepare)
        ops->prepare(base);
    cfg.confinement =
        ops->confine ? ops->confine(ops, warn, sizeof warn) : "none";
    if ((ch = ipc_channel_new(base, HOST_CHANNEL_FD, &cfg, &cb, NULL)) == NULL)
        host_die("ipc_channel_new");
    if (warn[0])
        host_log(IPC_LOG_WARN, "%s", warn);
    if (ops->serve)
        ops->serve(base);
    else if (event_base_dispatch(base) < 0)
        host_die("event_base_dispatch");
    _exit(0);
}
