/*
 * echo_host.c — a tiny reference engine host for wm-hostdriver's tests.
 *
 * Speaks the host side of ipc/PROTOCOL.md on fd 3 with ipc_channel: its
 * Hello says engine "echo"; Load is answered Loaded{ok} when the code
 * arrived as a sealed memfd of code_len bytes, else Loaded with a
 * load_error; each Process is answered with a Result holding the event
 * itself, its type suffixed ".out".  Two hooks exercise the driver: an
 * event of type "fail" gets a Result with an Error instead, and an event
 * with a "log" extension first makes the host send that text as a Log.
 * Heartbeat is echoed; Shutdown flushes the replies and exits 0.  A closed
 * or broken channel exits 1.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc/channel.h"

#define HOST_FD 3
#define REQUIRED_SEALS                                                         \
    (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

struct echo_host {
    struct event_base *base;
    bool loaded;
    int status;
};

static int
reply(struct ipc_channel *ch, struct ipc_frame *r, uint64_t to)
{
    r->reply_to = to;
    if (ipc_channel_send(ch, r, NULL, 0) < 0) {
        fprintf(stderr, "echo_host: send %s: %s\n", ipc_body_name(r->type),
                strerror(errno));
        return -1;
    }
    return 0;
}

static const char *
check_code(const struct ipc_load *l, const int *fds, unsigned nfds)
{
    struct stat st;
    int seals;

    if (l->code_fd < 0 || (unsigned)l->code_fd >= nfds)
        return "no code descriptor";
    seals = fcntl(fds[l->code_fd], F_GET_SEALS);
    if (seals < 0 || (seals & REQUIRED_SEALS) != REQUIRED_SEALS)
        return "the code is not a sealed memfd";
    if (fstat(fds[l->code_fd], &st) < 0 || (uint64_t)st.st_size != l->code_len)
        return "code_len differs from the memfd's size";
    return NULL;
}

static int
on_process(struct echo_host *h, struct ipc_channel *ch,
           const struct ipc_frame *f)
{
    struct ipc_cloudevent ev;
    struct ipc_frame r;
    struct ipc_str log;
    char type[256];

    (void)h;
    ipc_cloudevent_decode(ipc_fb_root(f->u.process.event.ptr, 0), &ev);
    log = ipc_cloudevent_extension(&ev, "log");
    if (log.ptr) {
        struct ipc_frame lf;
        memset(&lf, 0, sizeof lf);
        lf.type = IPC_BODY_LOG;
        lf.u.log.level = IPC_LOG_INFO;
        lf.u.log.message = log;
        if (ipc_channel_send(ch, &lf, NULL, 0) < 0)
            return -1;
    }
    memset(&r, 0, sizeof r);
    r.type = IPC_BODY_RESULT;
    if (ipc_str_eq(ev.type, "fail")) {
        r.u.result.error.type = ipc_str_c("worker_error");
        r.u.result.error.message = ipc_str_c("asked to fail");
        r.u.result.error.exception_type = ipc_str_c("EchoError");
        return reply(ch, &r, f->seq);
    }
    snprintf(type, sizeof type, "%.*s.out", (int)ev.type.len, ev.type.ptr);
    ev.type = ipc_str_c(type);
    r.u.result.outputs.n = 1;
    r.u.result.outputs.items = &ev;
    return reply(ch, &r, f->seq);
}

static void
on_frame(struct ipc_channel *ch, const struct ipc_frame *f, int *fds,
         unsigned nfds, void *arg)
{
    struct echo_host *h = arg;
    struct ipc_frame r;
    const char *why;
    int rc = 0;

    memset(&r, 0, sizeof r);
    switch (f->type) {
    case IPC_BODY_LOAD:
        why = check_code(&f->u.load, fds, nfds);
        r.type = IPC_BODY_LOADED;
        r.u.loaded.ok = why == NULL;
        if (why) {
            r.u.loaded.error.type = ipc_str_c("load_error");
            r.u.loaded.error.message = ipc_str_c(why);
        }
        h->loaded = why == NULL;
        rc = reply(ch, &r, f->seq);
        break;
    case IPC_BODY_PROCESS:
        rc = on_process(h, ch, f);
        break;
    case IPC_BODY_HEARTBEAT:
        r.type = IPC_BODY_HEARTBEAT;
        rc = reply(ch, &r, f->seq);
        break;
    case IPC_BODY_SHUTDOWN:
        if (ipc_channel_flush(ch, f->u.shutdown.grace_ms) < 0) {
            fprintf(stderr, "echo_host: flush: %s\n", strerror(errno));
            h->status = 1;
        }
        event_base_loopbreak(h->base);
        break;
    default:
        fprintf(stderr, "echo_host: unexpected %s\n", ipc_body_name(f->type));
        rc = -1;
    }
    if (rc < 0) {
        h->status = 1;
        event_base_loopbreak(h->base);
    }
}

static void
on_close(struct ipc_channel *ch, enum ipc_channel_status status,
         const char *reason, void *arg)
{
    struct echo_host *h = arg;

    (void)ch;
    fprintf(stderr, "echo_host: channel closed (%s): %s\n",
            ipc_channel_status_name(status), reason);
    h->status = 1;
    event_base_loopbreak(h->base);
}

int
main(void)
{
    struct echo_host h = { NULL, false, 0 };
    struct ipc_channel_callbacks cb = {
        .on_frame = on_frame,
        .on_close = on_close,
    };
    struct ipc_channel_config cfg = {
        .role = IPC_CHANNEL_HOST,
        .engine = "echo",
        .max_inflight = 1,
        .confinement = "none",
    };
    struct ipc_channel *ch;

    if (fcntl(HOST_FD, F_GETFD) < 0) {
        fprintf(stderr, "echo_host: no channel on fd %d\n", HOST_FD);
        return 1;
    }
    h.base = event_base_new();
    if (h.base == NULL)
        return 1;
    ch = ipc_channel_new(h.base, HOST_FD, &cfg, &cb, &h);
    if (ch == NULL) {
        fprintf(stderr, "echo_host: channel: %s\n", strerror(errno));
        event_base_free(h.base);
        return 1;
    }
    event_base_dispatch(h.base);
    ipc_channel_free(ch);
    event_base_free(h.base);
    return h.status;
}
