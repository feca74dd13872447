/*
 * test_channel.c — ipc/channel.c between two real processes.
 *
 * Each case forks: the parent runs one side of a channel on its own
 * event_base, the child the other side (an ipc_channel, or raw writes for
 * the cases where the peer misbehaves) and reports through its exit
 * status.  What is checked: a million pipelined calls with a sealed memfd
 * on every hundredth, frames up to the cap, a Load's memfd read back, EOF
 * at and between frame boundaries, the size cap before allocation, the
 * handshake (mismatch, timeout, refusal, frames held until it completes),
 * protocol violations (order, replies, descriptors, garbage),
 * back-pressure and drain, frees from inside callbacks, and that the
 * parent leaks no descriptor in any case.
 *
 * Usage: test_channel [CASE...]; exit status 0 when every case passed.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/sockios.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "check.h"
#include "ipc/channel.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define BULK_FRAMES 1000000u
#define BULK_WINDOW 512u
#define BULK_FD_EVERY 100u

static char failure[1024];
/* The parent side's last close, printed beside each case's result. */
static char last_close[600];

static int failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Records why the current case failed (the first reason wins). */
static int
failf(const char *fmt, ...)
{
    va_list ap;

    if (failure[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(failure, sizeof failure, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- processes and descriptors ---------------------------------------- */

typedef int (*child_fn)(int fd, void *arg);

/* Forks a child that runs fn on its end of a new socketpair and exits
 * with its result.  Returns the child's pid and the parent's end. */
static pid_t
spawn(child_fn fn, void *arg, int *parent_fd)
{
    int sv[2];
    pid_t pid;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        perror("socketpair");
        exit(2);
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(2);
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(sv[0]);
        exit(fn(sv[1], arg));
    }
    close(sv[1]);
    *parent_fd = sv[0];
    return pid;
}

/* Waits for the child; its exit status, or 128 + signal. */
static int
reap(pid_t pid)
{
    int st;

    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return 255;
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

static int
write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;

    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Blocks until the peer closes its end (or sends something). */
static void
wait_eof(int fd)
{
    char c;

    while (read(fd, &c, 1) < 0 && errno == EINTR)
        ;
}

/* Waits (up to 10 s) until the peer has read everything written on fd:
 * AF_UNIX charges unread bytes to the sender's SIOCOUTQ. */
static void
wait_read(int fd)
{
    for (int i = 0; i < 10000; i++) {
        int n;
        if (ioctl(fd, SIOCOUTQ, &n) < 0 || n == 0)
            return;
        usleep(1000);
    }
}

/* Encodes f with seq into a fresh malloc'd frame. */
static uint8_t *
raw_frame(const struct ipc_frame *f, uint64_t seq, size_t *len)
{
    struct ipc_fb_builder b;
    struct ipc_frame copy = *f;

    copy.seq = seq;
    ipc_fb_builder_init(&b);
    if (ipc_frame_encode(&b, &copy, NULL) < 0) {
        ipc_fb_builder_free(&b);
        return NULL;
    }
    *len = b.len;
    return b.buf;
}

static int
raw_send(int fd, const struct ipc_frame *f, uint64_t seq)
{
    size_t len;
    uint8_t *p = raw_frame(f, seq, &len);
    int rc = p ? write_all(fd, p, len) : -1;

    free(p);
    return rc;
}

static void
hello_frame(struct ipc_frame *f, uint16_t protocol)
{
    memset(f, 0, sizeof *f);
    f->type = IPC_BODY_HELLO;
    f->u.hello.protocol = protocol;
    f->u.hello.engine = ipc_str_c("raw");
    f->u.hello.pid = (int32_t)getpid();
    f->u.hello.max_inflight = 1;
}

/* Reads one whole frame with blocking reads into an 8-aligned buffer and
 * decodes it.  Returns the buffer (free it), or NULL. */
static uint8_t *
raw_recv(int fd, struct ipc_frame *f)
{
    uint32_t len;
    uint8_t *buf;
    size_t got = 0;
    struct ipc_fb_error err;

    while (got < 4) {
        ssize_t n = read(fd, (uint8_t *)&len + got, 4 - got);
        if (n <= 0)
            return NULL;
        got += (size_t)n;
    }
    if (len > IPC_FRAME_MAX_DEFAULT)
        return NULL;
    buf = aligned_alloc(8, ((size_t)len + 4 + 7) & ~(size_t)7);
    if (buf == NULL)
        return NULL;
    memcpy(buf, &len, 4);
    while (got < (size_t)len + 4) {
        ssize_t n = read(fd, buf + got, (size_t)len + 4 - got);
        if (n <= 0) {
            free(buf);
            return NULL;
        }
        got += (size_t)n;
    }
    if (ipc_frame_read(buf, got, f, &err) < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* A sealed memfd holding n bytes of p. */
static int
sealed_memfd(const void *p, size_t n)
{
    int fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);

    if (fd < 0)
        return -1;
    if (write_all(fd, p, n) < 0 ||
        fcntl(fd, F_ADD_SEALS,
              F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static uint64_t
fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static double
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- one side of a channel -------------------------------------------- */

struct side {
    struct event_base *base;
    struct ipc_channel *ch;
    bool closed;
    enum ipc_channel_status status;
    char reason[512];
    bool hello;         /* on_hello ran */
    int32_t hello_pid;  /* master: the host's pid */
    const char *refuse; /* master: on_hello refuses with this */
    bool break_on_hello;
    void *ctx; /* the case's own state */
};

static void
side_on_close(struct ipc_channel *ch, enum ipc_channel_status status,
              const char *reason, void *arg)
{
    struct side *s = arg;

    (void)ch;
    if (s->closed)
        failf("on_close ran twice (%s)", reason);
    s->closed = true;
    s->status = status;
    snprintf(s->reason, sizeof s->reason, "%s", reason);
    event_base_loopbreak(s->base);
}

static int
side_on_hello(struct ipc_channel *ch, const struct ipc_hello *h,
              const char **reason, void *arg)
{
    struct side *s = arg;

    (void)ch;
    s->hello = true;
    s->hello_pid = h->pid;
    if (s->break_on_hello)
        event_base_loopbreak(s->base);
    if (s->refuse) {
        *reason = s->refuse;
        return -1;
    }
    return 0;
}

static void
side_ignore_frame(struct ipc_channel *ch, const struct ipc_frame *f, int *fds,
                  unsigned nfds, void *arg)
{
    (void)ch;
    (void)fds;
    (void)nfds;
    (void)arg;
    failf("unexpected %s frame", ipc_body_name(f->type));
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    event_base_loopbreak(arg);
}

/* Runs the loop until something breaks it or ms pass; true on timeout. */
static bool
run_for(struct event_base *base, unsigned ms)
{
    struct event *t = evtimer_new(base, on_deadline, base);
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    bool expired;

    if (t == NULL || evtimer_add(t, &tv) < 0) {
        fprintf(stderr, "cannot arm a timer\n");
        exit(2);
    }
    event_base_dispatch(base);
    expired = !evtimer_pending(t, NULL);
    event_free(t);
    return expired;
}

static void
side_init(struct side *s, void *ctx)
{
    memset(s, 0, sizeof *s);
    s->base = event_base_new();
    s->ctx = ctx;
    if (s->base == NULL) {
        fprintf(stderr, "event_base_new failed\n");
        exit(2);
    }
}

static int
side_open(struct side *s, int fd, const struct ipc_channel_config *cfg,
          void (*on_frame)(struct ipc_channel *, const struct ipc_frame *,
                           int *, unsigned, void *),
          void (*on_drain)(struct ipc_channel *, void *))
{
    struct ipc_channel_callbacks cb = {
        .on_frame = on_frame ? on_frame : side_ignore_frame,
        .on_hello = side_on_hello,
        .on_close = side_on_close,
        .on_drain = on_drain,
    };

    s->ch = ipc_channel_new(s->base, fd, cfg, &cb, s);
    if (s->ch == NULL)
        return failf("ipc_channel_new: %s", strerror(errno));
    return 0;
}

static void
side_fini(struct side *s)
{
    ipc_channel_free(s->ch);
    s->ch = NULL;
    event_base_free(s->base);
    s->base = NULL;
}

static const struct ipc_channel_config master_cfg = {
    .role = IPC_CHANNEL_MASTER,
};

/* The echo host answers every call at once and has no retry for a full
 * queue, so its queue holds the largest burst of replies (large_frames:
 * 6 MiB and 15 MiB unread by a slow master). */
static const struct ipc_channel_config host_cfg = {
    .role = IPC_CHANNEL_HOST,
    .max_queue = 64u << 20,
    .engine = "test",
    .max_inflight = 64,
    .confinement = "none",
};

/* Expects the parent side closed with status and a reason containing
 * each of the NULL-terminated strings. */
static int
expect_close(const struct side *s, enum ipc_channel_status status, ...)
{
    va_list ap;
    const char *want;
    int rc = 0;

    snprintf(last_close, sizeof last_close, "%s: %s",
             ipc_channel_status_name(s->status), s->reason);
    if (!s->closed)
        return failf("channel not closed (wanted %s)",
                     ipc_channel_status_name(status));
    if (s->status != status)
        return failf("closed with %s (\"%s\"), wanted %s",
                     ipc_channel_status_name(s->status), s->reason,
                     ipc_channel_status_name(status));
    va_start(ap, status);
    while ((want = va_arg(ap, const char *)) != NULL)
        if (strstr(s->reason, want) == NULL && rc == 0)
            rc = failf("reason \"%s\" lacks \"%s\"", s->reason, want);
    va_end(ap);
    return rc;
}

/* ---- events ----------------------------------------------------------- */

/* Encodes the event of call i into eb: id i, data 16 bytes (i, ~i). */
static int
make_event(struct ipc_fb_builder *eb, uint64_t i, char *idbuf, size_t idlen)
{
    static uint64_t data[2];
    static const struct ipc_pair ext[] = {
        { { "correlationid", 13 }, { "c-1", 3 } },
    };
    struct ipc_cloudevent ce;

    memset(&ce, 0, sizeof ce);
    snprintf(idbuf, idlen, "%" PRIu64, i);
    data[0] = i;
    data[1] = ~i;
    ce.id = ipc_str_c(idbuf);
    ce.type = ipc_str_c("t");
    ce.source = ipc_str_c("/test");
    ce.specversion = ipc_str_c("1.0");
    ce.data.ptr = (const uint8_t *)data;
    ce.data.len = sizeof data;
    ce.extensions.n = 1;
    ce.extensions.items = ext;
    ipc_fb_builder_reset(eb);
    return ipc_cloudevent_encode(eb, &ce);
}

static void
process_frame(struct ipc_frame *f, const struct ipc_fb_builder *eb)
{
    memset(f, 0, sizeof *f);
    f->type = IPC_BODY_PROCESS;
    f->u.process.event.ptr = eb->buf;
    f->u.process.event.len = (uint32_t)eb->len;
    f->u.process.deadline_ms = 1000;
    f->u.process.delivery = 1;
}

/* ---- an echoing host (child side of several cases) --------------------- */

struct echo {
    struct side s;
    uint64_t next_id; /* Process ids arrive in order */
    uint64_t processed;
    bool bad;
    bool reply_twice;     /* answer Heartbeat twice (duplicate reply_to) */
    bool quiet;           /* the master is expected to close the channel */
    bool early_log;       /* send a Log before the master accepted */
    uint64_t stray_reply; /* after the handshake, send a Log replying to it */
};

static bool
str_u64(struct ipc_str s, uint64_t *v)
{
    char buf[32];

    if (s.ptr == NULL || s.len == 0 || s.len >= sizeof buf)
        return false;
    memcpy(buf, s.ptr, s.len);
    buf[s.len] = '\0';
    char *end;
    errno = 0;
    *v = strtoull(buf, &end, 10);
    return errno == 0 && *end == '\0';
}

static void
echo_process(struct echo *e, const struct ipc_frame *f, int *fds, unsigned nfds)
{
    struct ipc_cloudevent in, out;
    struct ipc_frame r;
    char subject[64];
    uint64_t id;

    ipc_cloudevent_decode(ipc_fb_root(f->u.process.event.ptr, 0), &in);
    if (!str_u64(in.id, &id) || id != e->next_id) {
        fprintf(stderr, "echo: event %.*s out of order (wanted %" PRIu64 ")\n",
                (int)in.id.len, in.id.ptr, e->next_id);
        e->bad = true;
    }
    e->next_id = id + 1;
    e->processed++;
    out = in;
    out.type = ipc_str_c("t.out");
    if (nfds == 1) {
        ssize_t n = pread(fds[0], subject, sizeof subject - 1, 0);
        if (n < 0) {
            perror("echo: pread");
            e->bad = true;
            n = 0;
        }
        subject[n] = '\0';
        out.subject = ipc_str_c(subject);
    } else if (nfds > 1) {
        e->bad = true;
    }
    memset(&r, 0, sizeof r);
    r.type = IPC_BODY_RESULT;
    r.reply_to = f->seq;
    r.u.result.outputs.n = 1;
    r.u.result.outputs.items = &out;
    if (ipc_channel_send(e->s.ch, &r, NULL, 0) < 0) {
        fprintf(stderr, "echo: send: %s\n", strerror(errno));
        e->bad = true;
    }
}

static void
echo_load(struct echo *e, const struct ipc_frame *f, int *fds, unsigned nfds)
{
    const struct ipc_load *l = &f->u.load;
    struct ipc_frame r;
    const char *why = NULL;
    struct stat st;
    uint8_t *map = MAP_FAILED;
    int seals;

    memset(&r, 0, sizeof r);
    r.type = IPC_BODY_LOADED;
    r.reply_to = f->seq;
    if (l->code_fd < 0 || (unsigned)l->code_fd >= nfds)
        why = "code_fd out of range";
    else if ((seals = fcntl(fds[l->code_fd], F_GET_SEALS)) < 0)
        why = "F_GET_SEALS failed";
    else if ((seals &
              (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) !=
             (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
        why = "memfd not sealed";
    else if (fstat(fds[l->code_fd], &st) < 0 ||
             (uint64_t)st.st_size != l->code_len)
        why = "code_len differs from the memfd's size";
    else if ((map = mmap(NULL, l->code_len, PROT_READ, MAP_PRIVATE,
                         fds[l->code_fd], 0)) == MAP_FAILED)
        why = "mmap failed";
    else if (l->sha256.len != 8)
        why = "no checksum";
    else {
        uint64_t want, got = fnv1a(map, l->code_len);
        memcpy(&want, l->sha256.ptr, 8);
        if (got != want)
            why = "the code's bytes differ";
        else if (write(fds[l->code_fd], "x", 1) >= 0 || errno != EPERM)
            why = "a sealed memfd took a write";
    }
    if (map != MAP_FAILED)
        munmap(map, l->code_len);
    r.u.loaded.ok = why == NULL;
    if (why) {
        r.u.loaded.error.type = ipc_str_c("load_error");
        r.u.loaded.error.message = ipc_str_c(why);
    }
    if (ipc_channel_send(e->s.ch, &r, NULL, 0) < 0)
        e->bad = true;
}

static void
echo_on_frame(struct ipc_channel *ch, const struct ipc_frame *f, int *fds,
              unsigned nfds, void *arg)
{
    struct echo *e = ((struct side *)arg)->ctx;
    struct ipc_frame r;

    switch (f->type) {
    case IPC_BODY_PROCESS:
        echo_process(e, f, fds, nfds);
        break;
    case IPC_BODY_LOAD:
        echo_load(e, f, fds, nfds);
        break;
    case IPC_BODY_HEARTBEAT:
        memset(&r, 0, sizeof r);
        r.type = IPC_BODY_HEARTBEAT;
        r.reply_to = f->seq;
        for (int i = 0; i < (e->reply_twice ? 2 : 1); i++)
            if (ipc_channel_send(ch, &r, NULL, 0) < 0)
                e->bad = true;
        break;
    case IPC_BODY_SHUTDOWN:
        /* The shutdown's grace_ms carries the count of Process frames the
         * master sent (back-pressure case); 0 = do not check. */
        if (f->u.shutdown.grace_ms && f->u.shutdown.grace_ms != e->processed) {
            fprintf(stderr, "echo: %" PRIu64 " frames, master sent %u\n",
                    e->processed, f->u.shutdown.grace_ms);
            e->bad = true;
        }
        /* Replies first; then free from inside the callback, which the
         * channel must defer. */
        if (ipc_channel_flush(ch, 5000) < 0) {
            fprintf(stderr, "echo: flush: %s\n", strerror(errno));
            e->bad = true;
        }
        ipc_channel_free(ch);
        e->s.ch = NULL;
        event_base_loopbreak(e->s.base);
        break;
    default:
        fprintf(stderr, "echo: unexpected %s\n", ipc_body_name(f->type));
        e->bad = true;
    }
}

static int
echo_hello(struct ipc_channel *ch, const struct ipc_hello *h,
           const char **reason, void *arg)
{
    struct side *s = arg;
    struct echo *e = s->ctx;

    (void)h;
    (void)reason;
    s->hello = true;
    if (s->break_on_hello)
        event_base_loopbreak(s->base);
    if (e->stray_reply) {
        struct ipc_frame f;
        memset(&f, 0, sizeof f);
        f.type = IPC_BODY_LOG;
        f.reply_to = e->stray_reply;
        f.u.log.level = IPC_LOG_INFO;
        f.u.log.message = ipc_str_c("stray");
        if (ipc_channel_send(ch, &f, NULL, 0) < 0)
            e->bad = true;
    }
    return 0;
}

/* Runs an echoing host on fd until Shutdown or the channel closes. */
static int
echo_main_with(int fd, struct echo *e, int go_fd)
{
    struct ipc_channel_callbacks cb = {
        .on_frame = echo_on_frame,
        .on_hello = echo_hello,
        .on_close = side_on_close,
    };

    side_init(&e->s, e);
    e->s.ch = ipc_channel_new(e->s.base, fd, &host_cfg, &cb, &e->s);
    if (e->s.ch == NULL) {
        perror("echo: ipc_channel_new");
        return 1;
    }
    if (e->early_log) {
        /* Held by the channel until the master's answer. */
        struct ipc_frame f;
        memset(&f, 0, sizeof f);
        f.type = IPC_BODY_LOG;
        f.u.log.level = IPC_LOG_WARN;
        f.u.log.message = ipc_str_c("early");
        if (ipc_channel_send(e->s.ch, &f, NULL, 0) < 0)
            e->bad = true;
    }
    if (go_fd >= 0) {
        /* Complete the handshake, then stop reading until told to. */
        e->s.break_on_hello = true;
        event_base_dispatch(e->s.base);
        e->s.break_on_hello = false;
        wait_eof(go_fd);
    }
    event_base_dispatch(e->s.base);
    if (e->s.closed && !e->quiet)
        fprintf(stderr, "echo: closed: %s\n", e->s.reason);
    side_fini(&e->s);
    return e->bad || e->s.closed ? 1 : 0;
}

static int
echo_main(int fd, void *arg)
{
    struct echo e;

    memset(&e, 0, sizeof e);
    (void)arg;
    return echo_main_with(fd, &e, -1);
}

/* ---- case: a million pipelined calls ---------------------------------- */

struct bulk {
    struct side s;
    struct ipc_fb_builder eb;
    uint64_t sent;
    uint64_t received;
    bool done;
};

static void bulk_pump(struct bulk *b);

static void
bulk_reply(struct ipc_channel *ch, const struct ipc_frame *reply, int *fds,
           unsigned nfds, const char *error, void *arg)
{
    struct bulk *b = arg;
    struct ipc_cloudevent out;
    uint64_t id, data[2];
    char want[32];

    (void)ch;
    (void)fds;
    if (error) {
        failf("call %" PRIu64 " failed: %s", b->received, error);
        event_base_loopbreak(b->s.base);
        return;
    }
    if (reply->type != IPC_BODY_RESULT || reply->u.result.outputs.n != 1 ||
        nfds != 0) {
        failf("reply %" PRIu64 " is a %s with %u outputs", b->received,
              ipc_body_name(reply->type), reply->u.result.outputs.n);
        event_base_loopbreak(b->s.base);
        return;
    }
    ipc_cloudevent_list_get(&reply->u.result.outputs, 0, &out);
    if (!str_u64(out.id, &id) || id != b->received ||
        !ipc_str_eq(out.type, "t.out") || out.data.len != sizeof data) {
        failf("reply %" PRIu64 " carries event %.*s", b->received,
              (int)out.id.len, out.id.ptr);
        event_base_loopbreak(b->s.base);
        return;
    }
    memcpy(data, out.data.ptr, sizeof data);
    snprintf(want, sizeof want, "fd:%" PRIu64, id);
    if (data[0] != id || data[1] != ~id ||
        (id % BULK_FD_EVERY == 0) != (out.subject.ptr != NULL) ||
        (out.subject.ptr && !ipc_str_eq(out.subject, want))) {
        failf("reply %" PRIu64 ": payload or memfd content differs", id);
        event_base_loopbreak(b->s.base);
        return;
    }
    b->received++;
    bulk_pump(b);
}

static void
bulk_pump(struct bulk *b)
{
    struct ipc_frame f;
    char id[32];

    if (failure[0])
        return;
    while (b->sent < BULK_FRAMES && b->sent - b->received < BULK_WINDOW) {
        int fd = -1;
        if (make_event(&b->eb, b->sent, id, sizeof id) < 0) {
            failf("make_event failed");
            return;
        }
        process_frame(&f, &b->eb);
        if (b->sent % BULK_FD_EVERY == 0) {
            char content[32];
            int n = snprintf(content, sizeof content, "fd:%" PRIu64, b->sent);
            fd = sealed_memfd(content, (size_t)n);
            if (fd < 0) {
                failf("memfd: %s", strerror(errno));
                return;
            }
        }
        unsigned nfds = fd >= 0 ? 1 : 0;
        if (ipc_channel_call(b->s.ch, &f, &fd, nfds, bulk_reply, b) < 0) {
            if (errno == EAGAIN)
                return; /* on_drain pumps again */
            failf("call %" PRIu64 ": %s", b->sent, strerror(errno));
            return;
        }
        b->sent++;
    }
    if (b->received == BULK_FRAMES && !b->done) {
        memset(&f, 0, sizeof f);
        f.type = IPC_BODY_SHUTDOWN;
        b->done = true;
        if (ipc_channel_send(b->s.ch, &f, NULL, 0) < 0)
            failf("shutdown: %s", strerror(errno));
    }
}

static void
bulk_drain(struct ipc_channel *ch, void *arg)
{
    (void)ch;
    bulk_pump(((struct side *)arg)->ctx);
}

static int
case_bulk(void)
{
    struct bulk b;
    int fd;
    pid_t pid = spawn(echo_main, NULL, &fd);
    double t0 = now_ms();

    memset(&b, 0, sizeof b);
    side_init(&b.s, &b);
    ipc_fb_builder_init(&b.eb);
    if (side_open(&b.s, fd, &master_cfg, NULL, bulk_drain) == 0) {
        bulk_pump(&b); /* held until the handshake completes */
        run_for(b.s.base, 120000);
    }
    ipc_fb_builder_free(&b.eb);
    int rc = reap(pid);
    if (failure[0] == '\0' && b.received != BULK_FRAMES)
        failf("%" PRIu64 " of %u replies", b.received, BULK_FRAMES);
    if (failure[0] == '\0')
        expect_close(&b.s, IPC_CHANNEL_EOF, "peer closed the channel", NULL);
    if (failure[0] == '\0' && rc != 0)
        failf("echo host exited %d", rc);
    side_fini(&b.s);
    printf("#   %u calls, %u memfds, in %.0f ms\n", BULK_FRAMES,
           BULK_FRAMES / BULK_FD_EVERY, now_ms() - t0);
    return failure[0] ? -1 : 0;
}

/* ---- case: sealed memfd in a Load ------------------------------------- */

struct loadcase {
    struct side s;
    bool loaded;
};

static void
load_reply(struct ipc_channel *ch, const struct ipc_frame *reply, int *fds,
           unsigned nfds, const char *error, void *arg)
{
    struct loadcase *l = arg;
    struct ipc_frame f;

    (void)fds;
    (void)nfds;
    if (error || reply->type != IPC_BODY_LOADED) {
        failf("Load failed: %s", error ? error : "not a Loaded");
    } else if (!reply->u.loaded.ok) {
        failf("host: %.*s", (int)reply->u.loaded.error.message.len,
              reply->u.loaded.error.message.ptr);
    } else {
        l->loaded = true;
    }
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_SHUTDOWN;
    if (ipc_channel_send(ch, &f, NULL, 0) < 0)
        failf("shutdown: %s", strerror(errno));
}

static int
case_memfd(void)
{
    struct loadcase l;
    struct ipc_frame f;
    size_t n = 1 << 20;
    uint8_t *code = malloc(n);
    uint64_t sum;
    int fd, mfd;
    pid_t pid = spawn(echo_main, NULL, &fd);

    memset(&l, 0, sizeof l);
    side_init(&l.s, &l);
    for (size_t i = 0; i < n; i++)
        code[i] = (uint8_t)(i * 2654435761u >> 13);
    sum = fnv1a(code, n);
    mfd = sealed_memfd(code, n);
    free(code);
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_LOAD;
    f.u.load.worker_id = ipc_str_c("w1");
    f.u.load.mime = ipc_str_c("application/octet-stream");
    f.u.load.code_fd = 0;
    f.u.load.code_len = n;
    f.u.load.sha256.ptr = (const uint8_t *)&sum; /* FNV-1a, for the test */
    f.u.load.sha256.len = sizeof sum;
    if (mfd < 0)
        failf("memfd: %s", strerror(errno));
    else if (side_open(&l.s, fd, &master_cfg, NULL, NULL) == 0 &&
             ipc_channel_call(l.s.ch, &f, &mfd, 1, load_reply, &l) < 0)
        failf("call: %s", strerror(errno));
    if (failure[0] == '\0')
        run_for(l.s.base, 20000);
    int rc = reap(pid);
    if (failure[0] == '\0' && !l.loaded)
        failf("no Loaded");
    if (failure[0] == '\0')
        expect_close(&l.s, IPC_CHANNEL_EOF, "peer closed the channel", NULL);
    if (failure[0] == '\0' && rc != 0)
        failf("echo host exited %d", rc);
    side_fini(&l.s);
    return failure[0] ? -1 : 0;
}

/* ---- cases with a raw peer -------------------------------------------- */

/* What a raw child does after (optionally) its Hello. */
enum raw_act {
    RAW_HALF_FRAME,   /* Hello, answer, half a Log, _exit */
    RAW_CLEAN_EXIT,   /* Hello, answer, exit */
    RAW_HUGE_PREFIX,  /* a 1 GiB length prefix, then wait */
    RAW_TINY_PREFIX,  /* a 4-byte length prefix and 4 bytes, then wait */
    RAW_SILENT,       /* nothing, wait */
    RAW_NOT_HELLO,    /* a Heartbeat first */
    RAW_SEQ_REPEAT,   /* Hello seq 1, answer, Heartbeat seq 1 */
    RAW_GARBAGE,      /* Hello, answer, 24 bytes of garbage after a prefix */
    RAW_FD_MIDFRAME,  /* Hello, answer, a Log in two writes, fd on the 2nd */
    RAW_TOO_MANY_FDS, /* Hello, answer, a Log with 9 fds */
};

static int
send_with_fds(int fd, const void *p, size_t n, const int *fds, unsigned nfds)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * 16)];
        struct cmsghdr align;
    } cbuf;
    struct iovec iov = { (void *)(uintptr_t)p, n };
    struct msghdr msg;
    struct cmsghdr *cm;

    memset(&msg, 0, sizeof msg);
    memset(&cbuf, 0, sizeof cbuf);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
    return sendmsg(fd, &msg, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* RAW_HUGE_PREFIX waits on this pipe, not on the socket, so that the
 * parent can see it alive after the close. */
static int hold_pipe[2] = { -1, -1 };

static int
raw_main(int fd, void *arg)
{
    enum raw_act act = (enum raw_act)(uintptr_t)arg;
    struct ipc_frame f, ans;
    uint8_t *p, *abuf;
    size_t len;
    uint32_t prefix;

    switch (act) {
    case RAW_HUGE_PREFIX:
        prefix = 1u << 30;
        close(hold_pipe[1]);
        write_all(fd, &prefix, 4);
        wait_eof(hold_pipe[0]);
        return 0;
    case RAW_TINY_PREFIX:
        prefix = 4;
        write_all(fd, &prefix, 4);
        write_all(fd, "abcd", 4);
        wait_eof(fd);
        return 0;
    case RAW_SILENT:
        wait_eof(fd);
        return 0;
    case RAW_NOT_HELLO:
        memset(&f, 0, sizeof f);
        f.type = IPC_BODY_HEARTBEAT;
        raw_send(fd, &f, 1);
        wait_eof(fd);
        return 0;
    default:
        break;
    }
    hello_frame(&f, IPC_PROTOCOL_VERSION);
    if (raw_send(fd, &f, 1) < 0)
        return 1;
    abuf = raw_recv(fd, &ans);
    if (abuf == NULL || ans.type != IPC_BODY_HELLO || !ans.u.hello.accepted ||
        ans.reply_to != 1 || ans.seq != 1)
        return 1;
    free(abuf);
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_LOG;
    f.u.log.level = IPC_LOG_INFO;
    f.u.log.message = ipc_str_c("a log line of some length, to cut in two");
    switch (act) {
    case RAW_HALF_FRAME:
        p = raw_frame(&f, 2, &len);
        write_all(fd, p, len / 2);
        _exit(0);
    case RAW_CLEAN_EXIT:
        return 0;
    case RAW_SEQ_REPEAT:
        memset(&f, 0, sizeof f);
        f.type = IPC_BODY_HEARTBEAT;
        raw_send(fd, &f, 1);
        wait_eof(fd);
        return 0;
    case RAW_GARBAGE: {
        uint8_t junk[28];
        memset(junk, 0x5a, sizeof junk);
        prefix = 24;
        memcpy(junk, &prefix, 4);
        write_all(fd, junk, sizeof junk);
        wait_eof(fd);
        return 0;
    }
    case RAW_FD_MIDFRAME: {
        int mfd = sealed_memfd("x", 1);
        p = raw_frame(&f, 2, &len);
        write_all(fd, p, 8);
        wait_read(fd); /* the master reads the first part alone */
        send_with_fds(fd, p + 8, len - 8, &mfd, 1);
        close(mfd);
        free(p);
        wait_eof(fd);
        return 0;
    }
    case RAW_TOO_MANY_FDS: {
        int fds[9];
        for (int i = 0; i < 9; i++)
            fds[i] = 0;
        p = raw_frame(&f, 2, &len);
        send_with_fds(fd, p, len, fds, 9);
        free(p);
        wait_eof(fd);
        return 0;
    }
    default:
        return 1;
    }
}

/* Runs a master against raw_main(act) until the channel closes. */
static int
raw_case(enum raw_act act, unsigned timeout_ms, struct side *s,
         bool *child_alive_at_close)
{
    struct ipc_channel_config cfg = master_cfg;
    int fd;
    pid_t pid = spawn(raw_main, (void *)(uintptr_t)act, &fd);

    side_init(s, NULL);
    cfg.handshake_timeout_ms = timeout_ms;
    if (side_open(s, fd, &cfg, NULL, NULL) == 0)
        run_for(s->base, 10000);
    if (child_alive_at_close) {
        *child_alive_at_close = waitpid(pid, NULL, WNOHANG) == 0;
        close(hold_pipe[0]);
        close(hold_pipe[1]); /* lets the child go */
        hold_pipe[0] = hold_pipe[1] = -1;
    }
    ipc_channel_free(s->ch); /* the child waits for EOF */
    s->ch = NULL;
    int rc = reap(pid);
    return rc;
}

static int
case_over_cap(void)
{
    struct side s;
    bool alive = false;
    size_t before = 0, after = 0;

    if (pipe2(hold_pipe, O_CLOEXEC) < 0)
        return failf("pipe: %s", strerror(errno));
    if (!UNDER_ASAN) {
        struct mallinfo2 mi = mallinfo2();
        before = mi.arena + mi.hblkhd;
    }
    int rc = raw_case(RAW_HUGE_PREFIX, 0, &s, &alive);
    if (!UNDER_ASAN) {
        struct mallinfo2 mi = mallinfo2();
        after = mi.arena + mi.hblkhd;
    }
    expect_close(&s, IPC_CHANNEL_PROTOCOL, "1073741828 bytes",
                 "exceeds the 16777216-byte cap", NULL);
    /* The peer still holds its end open: the reason came from the prefix
     * alone, not after waiting for a body. */
    if (!alive)
        failf("closed only after the peer went away");
    if (after > before + (4u << 20))
        failf("heap grew by %zu bytes", after - before);
    if (rc != 0)
        failf("raw peer exited %d", rc);
    side_fini(&s);
    return failure[0] ? -1 : 0;
}

/* The other raw peers' cases: what the peer does, the master's handshake
 * timeout (0: none), and how the master's side must close: its status, the
 * words its reason holds and one it must not. */
static const struct raw_expect {
    const char *name;
    enum raw_act act;
    unsigned timeout_ms;
    enum ipc_channel_status status;
    const char *want[2]; /* in the reason; the second may be NULL */
    const char *not_want;
} raw_expects[] = {
    {
        .name = "eof_midframe",
        .act = RAW_HALF_FRAME,
        .status = IPC_CHANNEL_EOF,
        .want = { "in the middle of a frame" },
    },
    {
        .name = "eof_boundary",
        .act = RAW_CLEAN_EXIT,
        .status = IPC_CHANNEL_EOF,
        .want = { "peer closed the channel" },
        .not_want = "middle", /* EOF at a frame boundary is no cut frame. */
    },
    {
        .name = "under_min",
        .act = RAW_TINY_PREFIX,
        .status = IPC_CHANNEL_PROTOCOL,
        .want = { "below the 16-byte minimum" },
    },
    {
        .name = "handshake_timeout",
        .act = RAW_SILENT,
        .timeout_ms = 200,
        .status = IPC_CHANNEL_HANDSHAKE,
        .want = { "handshake timed out after 200 ms" },
    },
    {
        .name = "not_hello",
        .act = RAW_NOT_HELLO,
        .status = IPC_CHANNEL_PROTOCOL,
        .want = { "Heartbeat frame before the handshake" },
    },
    {
        .name = "seq_repeat",
        .act = RAW_SEQ_REPEAT,
        .status = IPC_CHANNEL_PROTOCOL,
        .want = { "seq 1 after seq 1" },
    },
    {
        .name = "garbage",
        .act = RAW_GARBAGE,
        .status = IPC_CHANNEL_PROTOCOL,
        .want = { "invalid frame: ", "at offset" },
    },
    {
        .name = "fd_midframe",
        .act = RAW_FD_MIDFRAME,
        .status = IPC_CHANNEL_PROTOCOL,
        .want = { "in the middle of a frame" },
    },
    {
        .name = "too_many_fds",
        .act = RAW_TOO_MANY_FDS,
        .status = IPC_CHANNEL_PROTOCOL,
        .want = { "9 received, at most 8" },
    },
};

/* One case of raw_expects: the master's side closed as e says, the peer
 * exited 0, and a handshake timeout took its time (not less, and not
 * seconds more). */
static int
case_raw_expect(const struct raw_expect *e)
{
    struct side s;
    double t0 = now_ms();
    int rc = raw_case(e->act, e->timeout_ms, &s, NULL);
    double took = now_ms() - t0;

    expect_close(&s, e->status, e->want[0], e->want[1], (const char *)NULL);
    if (e->not_want != NULL && strstr(s.reason, e->not_want) != NULL)
        failf("reason \"%s\" holds \"%s\"", s.reason, e->not_want);
    if (e->timeout_ms != 0 && (took + 10 < e->timeout_ms || took > 5000))
        failf("timed out after %.0f ms", took);
    if (rc != 0)
        failf("raw peer exited %d", rc);
    side_fini(&s);
    return failure[0] ? -1 : 0;
}

/* ---- cases: the handshake with a host channel -------------------------- */

struct hostcase {
    uint16_t protocol;
    const char *want; /* in the host's close reason */
};

/* A host channel whose handshake must fail with HANDSHAKE and `want`. */
static int
refused_host_main(int fd, void *arg)
{
    const struct hostcase *hc = arg;
    struct ipc_channel_config cfg = host_cfg;
    struct side s;
    int rc = 1;

    cfg.protocol = hc->protocol;
    side_init(&s, NULL);
    if (side_open(&s, fd, &cfg, NULL, NULL) == 0) {
        run_for(s.base, 10000);
        if (s.closed && s.status == IPC_CHANNEL_HANDSHAKE &&
            strstr(s.reason, hc->want) && !s.hello)
            rc = 0;
        else
            fprintf(stderr, "host: closed %d (%s) %s\n", s.closed, s.reason,
                    ipc_channel_status_name(s.status));
    }
    side_fini(&s);
    return rc;
}

static int
handshake_case(const struct hostcase *hc, const char *refuse,
               const char *want_master)
{
    struct side s;
    int fd;
    pid_t pid = spawn(refused_host_main, (void *)(uintptr_t)hc, &fd);

    side_init(&s, NULL);
    s.refuse = refuse;
    if (side_open(&s, fd, &master_cfg, NULL, NULL) == 0)
        run_for(s.base, 10000);
    ipc_channel_free(s.ch);
    s.ch = NULL;
    int rc = reap(pid);
    expect_close(&s, IPC_CHANNEL_HANDSHAKE, want_master, NULL);
    if (rc != 0)
        failf("the host did not see the refusal (exit %d)", rc);
    side_fini(&s);
    return failure[0] ? -1 : 0;
}

static int
case_version_mismatch(void)
{
    static const struct hostcase hc = {
        2, "protocol 2 not supported: this master speaks 1"
    };
    return handshake_case(&hc, NULL,
                          "protocol 2 not supported: this master speaks 1");
}

static int
case_master_refuses(void)
{
    static const struct hostcase hc = { 0, "engine test is not wanted" };
    return handshake_case(&hc, "engine test is not wanted",
                          "engine test is not wanted");
}

/* ---- cases: replies ------------------------------------------------------ */

static int
stray_main(int fd, void *arg)
{
    struct echo e;

    memset(&e, 0, sizeof e);
    e.stray_reply = (uint64_t)(uintptr_t)arg;
    e.quiet = true;
    echo_main_with(fd, &e, -1);
    return 0; /* closed by the master, as it should be */
}

static int
case_unknown_reply(void)
{
    struct side s;
    int fd;
    pid_t pid = spawn(stray_main, (void *)(uintptr_t)12345, &fd);

    side_init(&s, NULL);
    if (side_open(&s, fd, &master_cfg, NULL, NULL) == 0)
        run_for(s.base, 10000);
    ipc_channel_free(s.ch);
    s.ch = NULL;
    reap(pid);
    expect_close(&s, IPC_CHANNEL_PROTOCOL, "replies to seq 12345",
                 "matches no pending call", NULL);
    side_fini(&s);
    return failure[0] ? -1 : 0;
}

static int
twice_main(int fd, void *arg)
{
    struct echo e;

    (void)arg;
    memset(&e, 0, sizeof e);
    e.reply_twice = true;
    e.quiet = true;
    echo_main_with(fd, &e, -1);
    return 0;
}

struct dupcase {
    int replies;
    int failures;
};

static void
dup_reply(struct ipc_channel *ch, const struct ipc_frame *reply, int *fds,
          unsigned nfds, const char *error, void *arg)
{
    struct dupcase *d = arg;

    (void)ch;
    (void)fds;
    (void)nfds;
    (void)reply;
    if (error)
        d->failures++;
    else
        d->replies++;
}

static int
case_duplicate_reply(void)
{
    struct side s;
    struct dupcase d = { 0, 0 };
    struct ipc_frame f;
    int fd;
    pid_t pid = spawn(twice_main, NULL, &fd);

    side_init(&s, NULL);
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_HEARTBEAT;
    if (side_open(&s, fd, &master_cfg, NULL, NULL) == 0) {
        if (ipc_channel_call(s.ch, &f, NULL, 0, dup_reply, &d) < 0)
            failf("call: %s", strerror(errno));
        run_for(s.base, 10000);
    }
    ipc_channel_free(s.ch);
    s.ch = NULL;
    reap(pid);
    /* The master's Hello answer is seq 1, the Heartbeat seq 2. */
    expect_close(&s, IPC_CHANNEL_PROTOCOL, "replies to seq 2",
                 "matches no pending call", NULL);
    if (d.replies != 1 || d.failures != 0)
        failf("%d replies, %d failures", d.replies, d.failures);
    side_fini(&s);
    return failure[0] ? -1 : 0;
}

/* Pending calls fail with the close reason when the peer goes away. */
static int
silent_host_main(int fd, void *arg)
{
    struct side s;

    (void)arg;
    side_init(&s, NULL);
    s.break_on_hello = true;
    if (side_open(&s, fd, &host_cfg, NULL, NULL) == 0)
        run_for(s.base, 10000);
    usleep(100 * 1000);
    _exit(s.hello ? 0 : 1); /* without answering */
}

static int
case_pending_fail(void)
{
    struct side s;
    struct dupcase d = { 0, 0 };
    struct ipc_frame f;
    int fd;
    pid_t pid = spawn(silent_host_main, NULL, &fd);

    side_init(&s, NULL);
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_HEARTBEAT;
    if (side_open(&s, fd, &master_cfg, NULL, NULL) == 0) {
        for (int i = 0; i < 3; i++)
            if (ipc_channel_call(s.ch, &f, NULL, 0, dup_reply, &d) < 0)
                failf("call: %s", strerror(errno));
        run_for(s.base, 10000);
    }
    int rc = reap(pid);
    expect_close(&s, IPC_CHANNEL_EOF, "peer", NULL);
    if (d.failures != 3 || d.replies != 0)
        failf("%d failures, %d replies (wanted 3, 0)", d.failures, d.replies);
    if (ipc_channel_pending(s.ch) != 0)
        failf("calls still pending");
    errno = 0;
    if (ipc_channel_send(s.ch, &f, NULL, 0) == 0 || errno != EPIPE)
        failf("send after close: %s", strerror(errno));
    if (rc != 0)
        failf("host exited %d", rc);
    side_fini(&s);
    return failure[0] ? -1 : 0;
}

/* gateway_call: the master's side answers the first GatewayCall 200, the
 * second 404, and closes its channel at the third. */
static void
gateway_master_frame(struct ipc_channel *ch, const struct ipc_frame *f,
                     int *fds, unsigned nfds, void *arg)
{
    struct side *s = arg;
    int *calls = s->ctx;
    struct ipc_frame r;

    (void)fds;
    (void)nfds;
    if (f->type != IPC_BODY_GATEWAY_CALL) {
        failf("unexpected %s frame", ipc_body_name(f->type));
        return;
    }
    memset(&r, 0, sizeof r);
    r.type = IPC_BODY_GATEWAY_REPLY;
    r.reply_to = f->seq;
    switch (++*calls) {
    case 1:
        r.u.gateway_reply.status = 200;
        r.u.gateway_reply.response =
            (struct ipc_bytes){ (const uint8_t *)"{\"v\":1}", 7 };
        break;
    case 2:
        r.u.gateway_reply.status = 404;
        r.u.gateway_reply.error = ipc_str_c("no such key");
        break;
    default:
        event_base_loopbreak(s->base);
        return;
    }
    if (ipc_channel_send(ch, &r, NULL, 0) < 0)
        failf("send: %s", strerror(errno));
}

static int
gateway_master_main(int fd, void *arg)
{
    struct side s;
    int calls = 0;

    (void)arg;
    side_init(&s, &calls);
    if (side_open(&s, fd, &master_cfg, gateway_master_frame, NULL) == 0)
        run_for(s.base, 10000);
    side_fini(&s); /* the third call's channel closes here */
    return calls == 3 && failure[0] == '\0' ? 0 : 1;
}

/* ipc_channel_gateway_call(): a host's synchronous call gets the reply's
 * status and body (the response, or the error), and the close's reason
 * with status 500 when the channel ends first. */
static int
case_gateway_call(void)
{
    struct side s;
    struct ipc_gateway_answer a;
    int fd;
    pid_t pid = spawn(gateway_master_main, NULL, &fd);
    const struct ipc_bytes req = { (const uint8_t *)"{}", 2 };

    side_init(&s, NULL);
    if (side_open(&s, fd, &host_cfg, NULL, NULL) == 0) {
        if (ipc_channel_gateway_call(s.ch, ipc_str_c("workmanager.state"),
                                     ipc_str_c("get"), req, &a) < 0)
            failf("first call: %s", strerror(errno));
        else if (a.status != 200 || strcmp(a.body, "{\"v\":1}") != 0 ||
                 a.len != 7)
            failf("first call: %d %s", (int)a.status, a.body);
        else
            free(a.body);
        if (ipc_channel_gateway_call(s.ch, ipc_str_c("workmanager.state"),
                                     ipc_str_c("get"), req, &a) < 0)
            failf("second call: %s", strerror(errno));
        else if (a.status != 404 || strcmp(a.body, "no such key") != 0)
            failf("second call: %d %s", (int)a.status, a.body);
        else
            free(a.body);
        if (ipc_channel_gateway_call(s.ch, ipc_str_c("workmanager.state"),
                                     ipc_str_c("get"), req, &a) < 0)
            failf("third call: %s", strerror(errno));
        else if (a.status != 500 || strstr(a.body, "closed") == NULL)
            failf("third call: %d %s", (int)a.status, a.body);
        else
            free(a.body);
    }
    int rc = reap(pid);
    if (rc != 0)
        failf("the master side exited %d", rc);
    side_fini(&s);
    return failure[0] ? -1 : 0;
}

/* Sends refused by argument checks close the descriptors they were given. */
static int
case_send_errors(void)
{
    struct side s;
    struct ipc_frame f;
    int sv[2], fds[9];
    struct ipc_channel_config cfg = master_cfg;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return failf("socketpair: %s", strerror(errno));
    side_init(&s, NULL);
    cfg.max_frame = 4096;
    if (side_open(&s, sv[0], &cfg, NULL, NULL) < 0)
        goto out;
    for (int i = 0; i < 9; i++)
        fds[i] = dup(0);
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_HEARTBEAT;
    if (ipc_channel_send(s.ch, &f, fds, 9) == 0 || errno != EINVAL)
        failf("9 fds: %s", strerror(errno));
    for (int i = 0; i < 9; i++)
        if (fcntl(fds[i], F_GETFD) >= 0)
            failf("fd %d of a refused send left open", fds[i]);
    char big[8192];
    memset(big, 'x', sizeof big);
    f.type = IPC_BODY_LOG;
    f.u.log.message.ptr = big;
    f.u.log.message.len = sizeof big;
    fds[0] = dup(0);
    if (ipc_channel_send(s.ch, &f, fds, 1) == 0 || errno != EMSGSIZE)
        failf("over max_frame: %s", strerror(errno));
    if (fcntl(fds[0], F_GETFD) >= 0)
        failf("fd of an oversized send left open");
    f.type = IPC_BODY_NONE;
    if (ipc_channel_send(s.ch, &f, NULL, 0) == 0 || errno != EINVAL)
        failf("body NONE: %s", strerror(errno));
    if (ipc_channel_queued(s.ch) != 0)
        failf("refused sends left %zu bytes queued", ipc_channel_queued(s.ch));
out:
    side_fini(&s);
    close(sv[1]);
    return failure[0] ? -1 : 0;
}

/* A host's frame sent before the handshake goes out after it. */
static int
early_main(int fd, void *arg)
{
    struct echo e;

    (void)arg;
    memset(&e, 0, sizeof e);
    e.early_log = true;
    return echo_main_with(fd, &e, -1);
}

static void
early_frame(struct ipc_channel *ch, const struct ipc_frame *f, int *fds,
            unsigned nfds, void *arg)
{
    struct side *s = arg;
    struct ipc_frame r;

    (void)fds;
    (void)nfds;
    if (f->type != IPC_BODY_LOG || !ipc_str_eq(f->u.log.message, "early") ||
        f->u.log.level != IPC_LOG_WARN || f->seq != 2) {
        failf("unexpected %s frame, seq %" PRIu64, ipc_body_name(f->type),
              f->seq);
        return;
    }
    s->hello_pid = -1; /* seen */
    memset(&r, 0, sizeof r);
    r.type = IPC_BODY_SHUTDOWN;
    if (ipc_channel_send(ch, &r, NULL, 0) < 0)
        failf("shutdown: %s", strerror(errno));
}

static int
case_held_until_handshake(void)
{
    struct side s;
    int fd;
    pid_t pid = spawn(early_main, NULL, &fd);

    side_init(&s, NULL);
    if (side_open(&s, fd, &master_cfg, early_frame, NULL) == 0)
        run_for(s.base, 10000);
    int rc = reap(pid);
    if (failure[0] == '\0' && s.hello_pid != -1)
        failf("the early Log never came");
    if (failure[0] == '\0')
        expect_close(&s, IPC_CHANNEL_EOF, "peer closed the channel", NULL);
    if (failure[0] == '\0' && rc != 0)
        failf("host exited %d", rc);
    side_fini(&s);
    return failure[0] ? -1 : 0;
}

/* ipc_channel_free() from a reply callback fails the other calls. */
struct freecase {
    struct side *s;
    int replies;
    int failures;
    bool bad_error;
};

static void
free_reply(struct ipc_channel *ch, const struct ipc_frame *reply, int *fds,
           unsigned nfds, const char *error, void *arg)
{
    struct freecase *fc = arg;

    (void)reply;
    (void)fds;
    (void)nfds;
    if (error) {
        fc->failures++;
        if (strcmp(error, "channel closed") != 0)
            fc->bad_error = true;
        return;
    }
    fc->replies++;
    ipc_channel_free(ch);
    fc->s->ch = NULL;
    event_base_loopbreak(fc->s->base);
}

static int
case_free_in_reply(void)
{
    struct side s;
    struct freecase fc = { &s, 0, 0, false };
    struct ipc_frame f;
    int fd;
    pid_t pid = spawn(twice_main, NULL, &fd);

    side_init(&s, NULL);
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_HEARTBEAT;
    if (side_open(&s, fd, &master_cfg, NULL, NULL) == 0) {
        for (int i = 0; i < 3; i++)
            if (ipc_channel_call(s.ch, &f, NULL, 0, free_reply, &fc) < 0)
                failf("call: %s", strerror(errno));
        run_for(s.base, 10000);
    }
    reap(pid);
    if (fc.replies != 1 || fc.failures != 2 || fc.bad_error)
        failf("%d replies, %d failures (wanted 1, 2 \"channel closed\")",
              fc.replies, fc.failures);
    if (s.closed)
        failf("on_close ran after ipc_channel_free()");
    side_fini(&s);
    return failure[0] ? -1 : 0;
}

/* Frames up to the cap both ways: the receive buffer grows after the prefix
 * check, partial writes resume, nothing is lost. */
struct largecase {
    const uint8_t *data;
    uint32_t sizes[3];
    unsigned done;
};

static void
large_reply(struct ipc_channel *ch, const struct ipc_frame *reply, int *fds,
            unsigned nfds, const char *error, void *arg)
{
    struct largecase *lc = arg;
    struct ipc_cloudevent out;
    struct ipc_frame f;

    (void)fds;
    (void)nfds;
    if (error || reply->u.result.outputs.n != 1) {
        failf("large call %u: %s", lc->done, error ? error : "no output");
        return;
    }
    ipc_cloudevent_list_get(&reply->u.result.outputs, 0, &out);
    if (out.data.len != lc->sizes[lc->done] ||
        memcmp(out.data.ptr, lc->data, out.data.len) != 0) {
        failf("large call %u: %u bytes came back, %u sent or different",
              lc->done, out.data.len, lc->sizes[lc->done]);
        return;
    }
    if (++lc->done == 3) {
        memset(&f, 0, sizeof f);
        f.type = IPC_BODY_SHUTDOWN;
        if (ipc_channel_send(ch, &f, NULL, 0) < 0)
            failf("shutdown: %s", strerror(errno));
    }
}

static int
case_large_frames(void)
{
    static const char *const ids[3] = { "0", "1", "2" };
    struct largecase lc = { NULL, { 1u << 20, 6u << 20, 15u << 20 }, 0 };
    struct ipc_fb_builder eb;
    struct ipc_cloudevent ce;
    struct ipc_frame f;
    struct side s;
    uint8_t *data = malloc(15u << 20);
    int fd;
    pid_t pid = spawn(echo_main, NULL, &fd);

    side_init(&s, NULL);
    ipc_fb_builder_init(&eb);
    for (size_t i = 0; i < (15u << 20); i++)
        data[i] = (uint8_t)(i * 7 + (i >> 12));
    lc.data = data;
    if (side_open(&s, fd, &master_cfg, NULL, NULL) < 0)
        goto out;
    for (unsigned i = 0; i < 3; i++) {
        memset(&ce, 0, sizeof ce);
        ce.id = ipc_str_c(ids[i]);
        ce.type = ipc_str_c("t");
        ce.source = ipc_str_c("/test");
        ce.specversion = ipc_str_c("1.0");
        ce.data.ptr = data;
        ce.data.len = lc.sizes[i];
        ipc_fb_builder_reset(&eb);
        if (ipc_cloudevent_encode(&eb, &ce) < 0) {
            failf("encode");
            goto out;
        }
        process_frame(&f, &eb);
        /* The queue is over max_queue after the first: wait for room. */
        while (ipc_channel_call(s.ch, &f, NULL, 0, large_reply, &lc) < 0) {
            if (errno != EAGAIN) {
                failf("call %u: %s", i, strerror(errno));
                goto out;
            }
            run_for(s.base, 50);
        }
    }
    run_for(s.base, 30000);
    if (failure[0] == '\0' && lc.done != 3)
        failf("%u of 3 large replies", lc.done);
    if (failure[0] == '\0')
        expect_close(&s, IPC_CHANNEL_EOF, "peer closed the channel", NULL);
out:
    ipc_channel_free(s.ch);
    s.ch = NULL;
    int rc = reap(pid);
    if (failure[0] == '\0' && rc != 0)
        failf("echo host exited %d", rc);
    ipc_fb_builder_free(&eb);
    free(data);
    side_fini(&s);
    return failure[0] ? -1 : 0;
}

/* ---- case: back-pressure ------------------------------------------------ */

struct bp {
    struct side s;
    struct ipc_fb_builder eb;
    uint64_t sent;
    uint64_t replies;
    unsigned refusals;
    unsigned drains;
    int phase; /* 0: the host does not read; 1: it reads */
    bool drained_after_go;
    bool shut;
};

static void
bp_reply(struct ipc_channel *ch, const struct ipc_frame *reply, int *fds,
         unsigned nfds, const char *error, void *arg)
{
    struct bp *b = arg;

    (void)ch;
    (void)fds;
    (void)nfds;
    (void)reply;
    if (error)
        failf("call failed: %s", error);
    else
        b->replies++;
}

static void
bp_fill(struct bp *b)
{
    struct ipc_frame f;
    char id[32];

    if (b->shut)
        return;
    for (;;) {
        if (make_event(&b->eb, b->sent, id, sizeof id) < 0) {
            failf("make_event");
            return;
        }
        process_frame(&f, &b->eb);
        if (ipc_channel_call(b->s.ch, &f, NULL, 0, bp_reply, b) < 0) {
            if (errno != EAGAIN)
                failf("send: %s", strerror(errno));
            else
                b->refusals++;
            return;
        }
        b->sent++;
    }
}

static void
bp_drain(struct ipc_channel *ch, void *arg)
{
    struct bp *b = ((struct side *)arg)->ctx;
    struct ipc_frame f;

    b->drains++;
    if (b->phase == 0) {
        bp_fill(b);
        return;
    }
    if (b->shut)
        return;
    b->drained_after_go = true;
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_SHUTDOWN;
    f.u.shutdown.grace_ms = (uint32_t)b->sent; /* the count, see echo */
    if (ipc_channel_send(ch, &f, NULL, 0) < 0)
        failf("shutdown: %s", strerror(errno));
    b->shut = true;
}

static int
bp_host_main(int fd, void *arg)
{
    struct echo e;

    memset(&e, 0, sizeof e);
    return echo_main_with(fd, &e, (int)(intptr_t)arg);
}

static int
case_backpressure(void)
{
    struct bp b;
    struct ipc_channel_config cfg = master_cfg;
    int go[2], fd;

    if (pipe2(go, O_CLOEXEC) < 0)
        return failf("pipe: %s", strerror(errno));
    pid_t pid = spawn(bp_host_main, (void *)(intptr_t)go[0], &fd);
    close(go[0]);
    memset(&b, 0, sizeof b);
    side_init(&b.s, &b);
    ipc_fb_builder_init(&b.eb);
    cfg.max_queue = 64 * 1024;
    if (side_open(&b.s, fd, &cfg, NULL, bp_drain) < 0)
        goto out;
    b.s.break_on_hello = true;
    run_for(b.s.base, 5000);
    if (!b.s.hello) {
        failf("no handshake");
        goto out;
    }
    /* Fill the queue and the socket; refill on each drain until the socket
     * is full and nothing drains for a while. */
    bp_fill(&b);
    unsigned drains;
    do {
        drains = b.drains;
        run_for(b.s.base, 300);
    } while (b.drains != drains && !b.s.closed);
    size_t q = ipc_channel_queued(b.s.ch);
    if (b.refusals == 0)
        failf("send never returned EAGAIN");
    if (q < cfg.max_queue / 2)
        failf("queue at %zu bytes with the peer not reading", q);
    uint64_t sent_before = b.sent;
    b.phase = 1;
    if (write_all(go[1], "g", 1) < 0)
        failf("go: %s", strerror(errno));
    if (failure[0] == '\0')
        run_for(b.s.base, 20000);
    if (failure[0] == '\0' && !b.drained_after_go)
        failf("on_drain did not fire once the peer read");
    if (failure[0] == '\0' && b.replies != b.sent)
        failf("%" PRIu64 " replies to %" PRIu64 " calls", b.replies, b.sent);
    if (failure[0] == '\0')
        expect_close(&b.s, IPC_CHANNEL_EOF, "peer closed the channel", NULL);
    printf("#   %" PRIu64 " frames queued before the peer read, "
           "%u refusals, %u drains\n",
           sent_before, b.refusals, b.drains);
out:
    close(go[1]);
    ipc_channel_free(b.s.ch);
    b.s.ch = NULL;
    int rc = reap(pid);
    if (failure[0] == '\0' && rc != 0)
        failf("host exited %d (frames lost or reordered)", rc);
    ipc_fb_builder_free(&b.eb);
    side_fini(&b.s);
    return failure[0] ? -1 : 0;
}

/* ---- main ---------------------------------------------------------------- */

static const struct {
    const char *name;
    int (*fn)(void);
} cases[] = {
    { "send_errors", case_send_errors },
    { "memfd", case_memfd },
    { "over_cap", case_over_cap },
    { "version_mismatch", case_version_mismatch },
    { "master_refuses", case_master_refuses },
    { "unknown_reply", case_unknown_reply },
    { "duplicate_reply", case_duplicate_reply },
    { "pending_fail", case_pending_fail },
    { "gateway_call", case_gateway_call },
    { "held_until_handshake", case_held_until_handshake },
    { "free_in_reply", case_free_in_reply },
    { "backpressure", case_backpressure },
    { "large_frames", case_large_frames },
    { "bulk", case_bulk },
};

/* Whether the command line (argv[1..]) asks for the case name: every case
 * when it names none. */
static bool
wanted(int argc, char **argv, const char *name)
{
    if (argc < 2)
        return true;
    for (int a = 1; a < argc; a++)
        if (strcmp(argv[a], name) == 0)
            return true;
    return false;
}

/* Runs one case (fn, or raw_expects' e when fn is NULL) and prints its
 * result; a case that passes must leave no descriptor open.  Returns 0
 * when it passed. */
static int
run(const char *name, int (*fn)(void), const struct raw_expect *e)
{
    int fds_before = check_count_fds();
    failure[0] = '\0';
    last_close[0] = '\0';
    int rc = fn != NULL ? fn() : case_raw_expect(e);
    int fds_after = check_count_fds();
    if (rc == 0 && fds_after != fds_before)
        failf("%d descriptors before, %d after", fds_before, fds_after);
    if (failure[0]) {
        printf("FAIL %s: %s\n", name, failure);
        return -1;
    }
    printf("ok   %s%s%s%s\n", name, last_close[0] ? " (" : "", last_close,
           last_close[0] ? ")" : "");
    return 0;
}

int
main(int argc, char **argv)
{
    int failed = 0, ran = 0;

    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(300); /* a hung case fails the run instead of blocking make */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (wanted(argc, argv, cases[i].name)) {
            failed += run(cases[i].name, cases[i].fn, NULL) != 0;
            ran++;
        }
    for (size_t i = 0; i < sizeof raw_expects / sizeof raw_expects[0]; i++)
        if (wanted(argc, argv, raw_expects[i].name)) {
            failed += run(raw_expects[i].name, NULL, &raw_expects[i]) != 0;
            ran++;
        }
    printf("%d of %d cases passed\n", ran - failed, ran);
    return failed || ran == 0 ? 1 : 0;
}
