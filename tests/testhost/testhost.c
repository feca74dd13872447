/*
 * testhost.c — wm-host-test: an engine host for the tests, which speaks the
 * frame protocol on fd 3 (ipc/channel.h, engine "test") and misbehaves on
 * request.
 *
 * Why: the supervisor's promises (deadlines, heartbeats, restarts, the
 * classification of every death, "a host cannot crash the master") are
 * only proven by a host that breaks them on purpose.  tests/testhost/
 * README.md lists the behaviours; in short:
 *
 *   - before the handshake, from argv[0]'s suffix after the last '.'
 *     (the tests exec a symlink named wm-host-test.<mode>), since nothing
 *     else reaches a host before its Hello: `no_hello`, `bad_protocol`;
 *   - at load, from the code (the Load memfd: one directive per line):
 *     `echo`, `load_fail <message>`, `hang_load`, `exit0_on_load`,
 *     `ignore_shutdown`, `no_heartbeat`, `log_events`;
 *   - per event, from the `do` extension, else from the event's type:
 *     `echo`, `fail`, `crash`, `hang`, `sleep:<ms>`, `spin:<ms>`,
 *     `burn:<ms>`, `flood`, `malformed`,
 *     `oversize`, `bad_frame`, `exit0`, `many:<n>`, `gateway`, `orphan`,
 *     `span:<ms>` (at most limits.concurrency at once, as an engine of
 *     that many threads: the others wait for one to end, in order);
 *     any other type echoes.
 *
 * It runs on the hosts' skeleton (hosts/common/host.h) as the engine
 * hosts do, with no sandbox role: the start, Heartbeat, Shutdown, the
 * exits and the sends are theirs, so the supervisor's tests exercise
 * them too.
 *
 * Invariants: every Process frame is answered exactly once, except `hang`
 * (never) and the kinds that end the process; frames are written by the
 * channel only, except the deliberate garbage of `malformed`/`oversize`,
 * which is written raw once the channel's queue is empty so that it starts
 * on a frame boundary; the exit after Shutdown writes the queue first
 * (host_exit_if_done()), so that the last Results reach the master.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "hosts/common/host.h"
#include "ipc/channel.h"
#include "sandbox/spawn.h"

/* Events processed at once: above 1, so that the master's requeue of the
 * other in-flight events after a deadline is exercised. */
#define HOST_MAX_INFLIGHT 4
/* The largest test code a Load may bring. */
#define CODE_MAX (1024u * 1024)
/* Log frames sent by `flood`. */
#define FLOOD_LINES 1000
/* The most outputs `many:<n>` returns (bounded so a typo cannot exhaust
 * memory). */
#define MANY_MAX 10000
/* How long the child of `orphan` lives. */
#define ORPHAN_MS 300
/* How often garbage waiting for the send queue to drain looks again. */
#define DRAIN_POLL_MS 5

/* An event whose answer comes later (sleep, gateway): its own copy of the
 * event buffer, 8-aligned by malloc. */
struct pending {
    struct pending *next;
    uint64_t seq;
    uint8_t *buf;
    uint32_t len;
    struct event *timer;
    int64_t start_ns; /* span */
    unsigned queued;  /* span: events waiting behind it as it started */
    long span_ms;     /* span: how long it runs */
    struct pending *span_next; /* span: waiting for a free thread */
    uint32_t delivery;         /* serial: the Process frame's, while queued */
    long after_ms;             /* gateway: sleep this long after the reply */
    char reply[1200]; /* gateway: the output's data, kept for after_ms */
};

static struct event_base *base;
static struct pending *pendings;
static struct event *poll_timer;
/* Raw bytes to write once the queue is empty (malformed, oversize). */
static uint8_t garbage[64];
static size_t garbage_len;
static bool ignore_shutdown;
static bool no_heartbeat;
static bool log_events; /* a Log frame "event <id> delivery <n>" per event */
static unsigned answerable;         /* events in flight that will be answered */
static uint32_t loaded_version;     /* of the last Load answered ok (span) */
static uint32_t loaded_concurrency; /* its limits.concurrency (span) */
/* serial<N>: max_inflight 1 and a prefetch of N, events run one at a time
 * in the order received, as a Python host's; those that come while one
 * runs wait in serial_queue (oldest first). */
static bool serial;
static bool serial_busy;
static struct pending *serial_queue, **serial_tail = &serial_queue;
static unsigned serial_waiting; /* in serial_queue: span's "queued" */
static struct event *serial_next;
static unsigned span_queued; /* serial_waiting when this event started */

static void arm_poll(void);

/* Every event that will be answered is (the exit after Shutdown waits for
 * it); never with ignore_shutdown. */
static bool
idle(void)
{
    return !ignore_shutdown && answerable == 0;
}

static void
on_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (ipc_channel_queued(host_channel()) != 0) {
        arm_poll();
        return;
    }
    if (garbage_len) {
        /* The socket was made non-blocking by the channel; a short write
         * of under 64 bytes into an empty socket buffer cannot happen. */
        if (write(HOST_CHANNEL_FD, garbage, garbage_len) !=
            (ssize_t)garbage_len)
            host_die("write garbage");
        garbage_len = 0;
    }
}

static void
arm_poll(void)
{
    struct timeval tv = { 0, DRAIN_POLL_MS * 1000 };

    if (evtimer_add(poll_timer, &tv) < 0)
        host_die("evtimer_add");
}

/* ---- events ---------------------------------------------------------- */

static void
reply_result(uint64_t seq, const struct ipc_result *r)
{
    host_result_send(seq, r);
    /* serial: the next waiting event runs on the next loop turn (not
     * from here, which may be inside on_process). */
    if (serial) {
        serial_busy = false;
        if (serial_queue)
            event_active(serial_next, EV_TIMEOUT, 0);
    }
}

/* Answers event `in` (seq `seq`) with n copies of it, typed type + ".out";
 * data, if not NULL, replaces their data. */
static void
reply_outputs(uint64_t seq, const struct ipc_cloudevent *in, uint32_t n,
              const char *data)
{
    char type[512];
    struct ipc_cloudevent *outs = NULL;
    struct ipc_result r;

    snprintf(type, sizeof type, "%.*s.out", (int)in->type.len, in->type.ptr);
    if (n) {
        outs = calloc(n, sizeof *outs);
        if (outs == NULL)
            host_die("calloc");
    }
    for (uint32_t i = 0; i < n; i++) {
        outs[i] = *in;
        outs[i].type = ipc_str_c(type);
        if (data) {
            outs[i].data.ptr = (const uint8_t *)data;
            outs[i].data.len = (uint32_t)strlen(data);
            outs[i].datacontenttype = ipc_str_c("application/json");
        }
    }
    memset(&r, 0, sizeof r);
    r.outputs.n = n;
    r.outputs.items = outs;
    reply_result(seq, &r);
    free(outs);
}

static void
reply_fail(uint64_t seq, const struct ipc_cloudevent *in)
{
    char msg[300];
    struct ipc_result r;

    snprintf(msg, sizeof msg, "test failure for event %.*s", (int)in->id.len,
             in->id.ptr);
    memset(&r, 0, sizeof r);
    r.error.type = ipc_str_c("exception");
    r.error.message = ipc_str_c(msg);
    r.error.exception_type = ipc_str_c("TestError");
    r.error.traceback = ipc_str_c("Traceback (most recent call last):\n"
                                  "  File \"testhost.c\", in on_process\n"
                                  "TestError: asked to fail");
    reply_result(seq, &r);
}

static struct pending *
pending_new(uint64_t seq, const struct ipc_bytes *event)
{
    struct pending *p = calloc(1, sizeof *p);

    if (p == NULL || (p->buf = malloc(event->len ? event->len : 1)) == NULL)
        host_die("malloc");
    memcpy(p->buf, event->ptr, event->len);
    p->len = event->len;
    p->seq = seq;
    p->next = pendings;
    pendings = p;
    return p;
}

static void
pending_free(struct pending *p)
{
    for (struct pending **pp = &pendings; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    if (p->timer)
        event_free(p->timer);
    free(p->buf);
    free(p);
}

/* Decodes a pending event's own copy (verified when it arrived). */
static void
pending_event(const struct pending *p, struct ipc_cloudevent *ce)
{
    struct ipc_fb_error err;

    if (ipc_cloudevent_read(p->buf, p->len, ce, &err) < 0) {
        errno = EINVAL;
        host_die("re-reading an event");
    }
}

/* Answers pending event p with one echo (its data replaced by data when
 * not NULL), and forgets it. */
static void
pending_answer(struct pending *p, const char *data)
{
    struct ipc_cloudevent ce;

    pending_event(p, &ce);
    reply_outputs(p->seq, &ce, 1, data);
    pending_free(p);
    answerable--;
    host_exit_if_done();
}

static void
on_sleep_done(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pending_answer(arg, NULL);
}

static int64_t
realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* span: as an engine of `concurrency` threads, at most that many spans
 * run at once (limits.concurrency, 1 when unset); the others wait for
 * one to end, in order. */
static unsigned spans_running;
static struct pending *span_queue, **span_tail = &span_queue;

static void
span_start(struct pending *p)
{
    struct timeval tv = { p->span_ms / 1000, (p->span_ms % 1000) * 1000 };

    spans_running++;
    p->start_ns = realtime_ns();
    if (evtimer_add(p->timer, &tv) < 0)
        host_die("span timer");
}

static void
span_submit(struct pending *p)
{
    if (spans_running < (loaded_concurrency ? loaded_concurrency : 1)) {
        span_start(p);
        return;
    }
    p->span_next = NULL;
    *span_tail = p;
    span_tail = &p->span_next;
}

/* span: the output's data says when the event ran, and where. */
static void
on_span_done(evutil_socket_t fd, short what, void *arg)
{
    struct pending *p = arg;
    const char *worker = getenv("WM_WORKER_ID");
    char data[256];

    (void)fd;
    (void)what;
    /* The worker's id as well: in a pid namespace of its own, every host
     * is pid 2.  The version: which code the host runs (a reload reaches
     * each of a worker's hosts). */
    snprintf(data, sizeof data,
             "{\"start_ns\":%lld,\"end_ns\":%lld,\"pid\":%d,"
             "\"worker\":\"%.64s\",\"version\":%u,\"concurrency\":%u,"
             "\"queued\":%u}",
             (long long)p->start_ns, (long long)realtime_ns(), (int)getpid(),
             worker ? worker : "", (unsigned)loaded_version,
             (unsigned)loaded_concurrency, p->queued);
    pending_answer(p, data);
    /* the next waits until this one ended */
    spans_running--;
    if (span_queue != NULL) {
        struct pending *next = span_queue;
        if ((span_queue = next->span_next) == NULL)
            span_tail = &span_queue;
        span_start(next);
    }
}

/* gateway with gwsleep: the reply's data goes out after the sleep. */
static void
on_gateway_after(evutil_socket_t fd, short what, void *arg)
{
    struct pending *p = arg;

    (void)fd;
    (void)what;
    pending_answer(p, p->reply);
}

static void
on_gateway_reply(struct ipc_channel *c, const struct ipc_frame *reply, int *fds,
                 unsigned nfds, const char *error, void *arg)
{
    struct pending *p = arg;
    char *data = p->reply;

    (void)c;
    (void)fds;
    (void)nfds;
    if (error) /* the channel is closing: on_close exits */
        return;
    if (reply->type != IPC_BODY_GATEWAY_REPLY) {
        errno = EPROTO;
        host_die("GatewayCall answered with another body");
    }
    const struct ipc_gateway_reply *g = &reply->u.gateway_reply;
    /* The error is the master's text: quote only what JSON allows
     * unescaped, enough for a test to compare. */
    char msg[256];
    size_t n = 0;
    for (uint32_t i = 0; g->error.ptr && i < g->error.len && n + 1 < sizeof msg;
         i++) {
        char c2 = g->error.ptr[i];
        if (c2 != '"' && c2 != '\\' && (unsigned char)c2 >= 0x20)
            msg[n++] = c2;
    }
    msg[n] = '\0';
    /* The response is the master's JSON, passed through when it is short
     * and has no control characters (what a test compares). */
    bool plain = g->response.len > 0 && g->response.len < 900;
    for (uint32_t i = 0; plain && i < g->response.len; i++)
        if (g->response.ptr[i] < 0x20)
            plain = false;
    snprintf(data, sizeof p->reply,
             "{\"status\":%d,\"error\":\"%s\",\"response\":%.*s}",
             (int)g->status, msg, plain ? (int)g->response.len : 4,
             plain ? (const char *)g->response.ptr : "null");
    if (p->after_ms > 0) {
        struct timeval tv = { p->after_ms / 1000, (p->after_ms % 1000) * 1000 };
        p->timer = evtimer_new(base, on_gateway_after, p);
        if (p->timer == NULL || evtimer_add(p->timer, &tv) < 0)
            host_die("gateway timer");
        return;
    }
    pending_answer(p, data);
}

/* Queues bytes to be written raw on the socket, past the channel. */
static void
send_garbage(bool oversize)
{
    uint32_t len;

    if (oversize) {
        /* Above any cap the master may set (FlatBuffers' own limit). */
        len = 0x7ffffff0u;
        memcpy(garbage, &len, 4);
        memset(garbage + 4, 0xab, 12);
        garbage_len = 16;
    } else {
        /* A plausible length, then bytes that are no FlatBuffer. */
        len = sizeof garbage - 4;
        memcpy(garbage, &len, 4);
        memset(garbage + 4, 0xab, sizeof garbage - 4);
        garbage_len = sizeof garbage;
    }
    arm_poll();
}

/* The behaviour word of an event: its `do` extension, else its type. */
static void
behaviour(const struct ipc_cloudevent *ce, char *out, size_t outlen)
{
    struct ipc_str s = ipc_cloudevent_extension(ce, "do");

    if (s.ptr == NULL)
        s = ce->type;
    snprintf(out, outlen, "%.*s", (int)s.len, s.ptr ? s.ptr : "");
}

/* Busy on the CPU until clock has advanced by ms milliseconds. */
static void
busy(clockid_t clock, long ms)
{
    struct timespec t0, t;
    volatile unsigned long sink = 0;

    clock_gettime(clock, &t0);
    do {
        for (unsigned i = 0; i < 10000; i++)
            sink += i;
        clock_gettime(clock, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000L +
                 (t.tv_nsec - t0.tv_nsec) / 1000000L <
             ms);
    (void)sink; /* read by nobody: clang counts a volatile's += as set */
}
static void
on_process(const struct ipc_frame *f)
{
    const struct ipc_process *pr = &f->u.process;
    struct ipc_cloudevent ce;
    struct ipc_fb_error err;
    char what[64];
    unsigned long n;

    /* The frame was verified, Process.event included. */
    if (ipc_cloudevent_read(pr->event.ptr, pr->event.len, &ce, &err) < 0) {
        errno = EPROTO;
        host_die("a verified event failed to decode");
    }
    behaviour(&ce, what, sizeof what);
    if (log_events)
        host_log(IPC_LOG_INFO, "event %.*s delivery %u", (int)ce.id.len,
                 ce.id.ptr, (unsigned)pr->delivery);
    if (strcmp(what, "fail") == 0) {
        reply_fail(f->seq, &ce);
    } else if (strcmp(what, "crash") == 0) {
        /* Past any sanitizer's handler: the default action, a real
         * SIGSEGV death (signal 11 in the wait status). */
        struct sigaction sa;
        /* What was logged (log_events) reaches the master first. */
        (void)ipc_channel_flush(host_channel(), 1000);
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        if (sigaction(SIGSEGV, &sa, NULL) < 0)
            host_die("sigaction");
        raise(SIGSEGV);
        host_die("still alive after SIGSEGV");
    } else if (strcmp(what, "hang") == 0) {
        host_log(IPC_LOG_WARN, "hanging on event %.*s", (int)ce.id.len,
                 ce.id.ptr);
    } else if (strncmp(what, "sleep:", 6) == 0) {
        long ms = strtol(what + 6, NULL, 10);
        struct pending *p = pending_new(f->seq, &pr->event);
        struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
        p->timer = evtimer_new(base, on_sleep_done, p);
        if (p->timer == NULL || ms < 0 || evtimer_add(p->timer, &tv) < 0)
            host_die("sleep timer");
        answerable++;
    } else if (strncmp(what, "spin:", 5) == 0) {
        /* CPU-bound: busy for <ms> of wall time, then echoes (the
         * noisy neighbour of bench/noisy.py). */
        busy(CLOCK_MONOTONIC, strtol(what + 5, NULL, 10));
        reply_outputs(f->seq, &ce, 1, NULL);
    } else if (strncmp(what, "burn:", 5) == 0) {
        /* CPU-bound by the CPU it gets: busy until it has used <ms> of
         * CPU time, however long the kernel makes that take (the tests
         * of tenants' CPU shares and CPU seconds). */
        busy(CLOCK_THREAD_CPUTIME_ID, strtol(what + 5, NULL, 10));
        reply_outputs(f->seq, &ce, 1, NULL);
    } else if (strcmp(what, "flood") == 0) {
        for (unsigned i = 0; i < FLOOD_LINES; i++)
            host_log(IPC_LOG_INFO, "flood line %u of %u", i + 1, FLOOD_LINES);
        reply_outputs(f->seq, &ce, 1, NULL);
    } else if (strcmp(what, "malformed") == 0) {
        send_garbage(false);
    } else if (strcmp(what, "oversize") == 0) {
        send_garbage(true);
    } else if (strcmp(what, "exit0") == 0) {
        exit(0);
    } else if (strcmp(what, "bad_frame") == 0) {
        /* Well-formed, but not for a host to send. */
        struct ipc_frame b;
        memset(&b, 0, sizeof b);
        b.type = IPC_BODY_SHUTDOWN;
        (void)host_frame_send(&b, NULL, 0);
    } else if (strcmp(what, "orphan") == 0) {
        /* A child that outlives us briefly, holding fd 3 as a careless
         * host's child would: the master, a subreaper, inherits and reaps
         * it, and finalizes our exit without waiting for the socket. */
        pid_t pid = fork();
        if (pid < 0)
            host_die("fork");
        if (pid == 0) {
            usleep(ORPHAN_MS * 1000);
            _exit(0);
        }
        reply_outputs(f->seq, &ce, 1, NULL);
    } else if (strncmp(what, "many:", 5) == 0) {
        n = strtoul(what + 5, NULL, 10);
        reply_outputs(f->seq, &ce, n > MANY_MAX ? MANY_MAX : (uint32_t)n, NULL);
    } else if (strncmp(what, "span:", 5) == 0) {
        long ms = strtol(what + 5, NULL, 10);
        struct pending *p = pending_new(f->seq, &pr->event);
        p->queued = span_queued;
        p->span_ms = ms;
        p->timer = evtimer_new(base, on_span_done, p);
        if (p->timer == NULL || ms < 0)
            host_die("span timer");
        span_submit(p);
        answerable++;
    } else if (strcmp(what, "gateway") == 0) {
        /* The call from the gwservice, gwmethod and gwrequest extensions,
         * by default workmanager.state get {"key":"test"}; gwsleep delays
         * the answer after the reply. */
        struct pending *p = pending_new(f->seq, &pr->event);
        struct ipc_frame g;
        struct ipc_str svc = ipc_cloudevent_extension(&ce, "gwservice");
        struct ipc_str mth = ipc_cloudevent_extension(&ce, "gwmethod");
        struct ipc_str req = ipc_cloudevent_extension(&ce, "gwrequest");
        struct ipc_str slp = ipc_cloudevent_extension(&ce, "gwsleep");
        static const char def_req[] = "{\"key\":\"test\"}";
        char sleep_ms[16];
        memset(&g, 0, sizeof g);
        g.type = IPC_BODY_GATEWAY_CALL;
        g.u.gateway_call.service =
            svc.ptr ? svc : ipc_str_c("workmanager.state");
        g.u.gateway_call.method = mth.ptr ? mth : ipc_str_c("get");
        g.u.gateway_call.request.ptr =
            (const uint8_t *)(req.ptr ? req.ptr : def_req);
        g.u.gateway_call.request.len =
            req.ptr ? req.len : (uint32_t)(sizeof def_req - 1);
        snprintf(sleep_ms, sizeof sleep_ms, "%.*s",
                 (int)(slp.len < 15 ? slp.len : 15), slp.ptr ? slp.ptr : "0");
        p->after_ms = strtol(sleep_ms, NULL, 10);
        if (ipc_channel_call(host_channel(), &g, NULL, 0, on_gateway_reply, p) <
            0)
            host_die("ipc_channel_call");
        answerable++;
    } else if (serial) {
        char data[32];
        snprintf(data, sizeof data, "{\"queued\":%u}", span_queued);
        reply_outputs(f->seq, &ce, 1, data);
    } else {
        reply_outputs(f->seq, &ce, 1, NULL);
    }
}

/* serial: runs the oldest waiting event. */
static void
on_serial_next(evutil_socket_t fd, short what, void *arg)
{
    struct pending *q = serial_queue;
    struct ipc_frame f;

    (void)fd;
    (void)what;
    (void)arg;
    if (q == NULL || serial_busy)
        return;
    if ((serial_queue = q->next) == NULL)
        serial_tail = &serial_queue;
    serial_waiting--;
    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_PROCESS;
    f.seq = q->seq;
    f.u.process.event.ptr = q->buf;
    f.u.process.event.len = q->len;
    f.u.process.delivery = q->delivery;
    serial_busy = true;
    span_queued = serial_waiting;
    on_process(&f);
    free(q->buf);
    free(q);
}

/* serial: a Process that comes while another runs waits its turn. */
static void
serial_enqueue(const struct ipc_frame *f)
{
    struct pending *q = calloc(1, sizeof *q);
    const struct ipc_bytes *ev = &f->u.process.event;

    if (q == NULL || (q->buf = malloc(ev->len ? ev->len : 1)) == NULL)
        host_die("malloc");
    memcpy(q->buf, ev->ptr, ev->len);
    q->len = ev->len;
    q->seq = f->seq;
    q->delivery = f->u.process.delivery;
    *serial_tail = q;
    serial_tail = &q->next;
    serial_waiting++;
}

/* ---- load ------------------------------------------------------------ */

static void
on_load(const struct ipc_frame *f, int *fds, unsigned nfds)
{
    const struct ipc_load *l = &f->u.load;
    char why[256];
    size_t len;
    char *code = (char *)host_code_read(l, fds, nfds, CODE_MAX, "test code",
                                        &len, why, sizeof why);
    char *save = NULL;
    bool reply = true;

    if (code == NULL) {
        host_loaded_reply(f->seq, why);
        return;
    }
    /* An empty program echoes. */
    for (char *line = strtok_r(code, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') {
            continue; /* a comment: lets tests make distinct versions */
        } else if (strcmp(line, "echo") == 0) {
            continue;
        } else if (strncmp(line, "load_fail", 9) == 0 &&
                   (line[9] == '\0' || line[9] == ' ')) {
            host_loaded_reply(f->seq, line[9] ? line + 10 : "load failed");
            reply = false;
            break;
        } else if (strcmp(line, "hang_load") == 0) {
            reply = false;
            break;
        } else if (strcmp(line, "exit0_on_load") == 0) {
            exit(0);
        } else if (strcmp(line, "ignore_shutdown") == 0) {
            ignore_shutdown = true;
        } else if (strcmp(line, "no_heartbeat") == 0) {
            no_heartbeat = true;
        } else if (strcmp(line, "log_events") == 0) {
            log_events = true;
        } else {
            char msg[300];
            snprintf(msg, sizeof msg, "unknown directive \"%.200s\"", line);
            host_loaded_reply(f->seq, msg);
            reply = false;
            break;
        }
    }
    free(code);
    if (reply) {
        host_log(IPC_LOG_INFO, "loaded worker %.*s version %u",
                 (int)l->worker_id.len, l->worker_id.ptr, l->version);
        loaded_version = l->version;
        loaded_concurrency = l->limits.concurrency;
        host_loaded_reply(f->seq, NULL);
    }
}

/* ---- the host's operations ------------------------------------------ */

static void
on_frame_process(const struct ipc_frame *f)
{
    if (host_shutting_down()) /* the master sends nothing after Shutdown */
        exit(3);
    if (serial && (serial_busy || serial_queue)) {
        serial_enqueue(f);
        return;
    }
    serial_busy = serial;
    span_queued = 0;
    on_process(f);
}

static bool
answers_heartbeat(void)
{
    return !no_heartbeat;
}

static void
on_shutdown(void)
{
    if (ignore_shutdown)
        host_log(IPC_LOG_WARN, "ignoring Shutdown");
}

static void
prepare(struct event_base *b)
{
    base = b;
    poll_timer = evtimer_new(base, on_poll, NULL);
    serial_next = evtimer_new(base, on_serial_next, NULL);
    if (poll_timer == NULL || serial_next == NULL)
        host_die("evtimer_new");
}

/* The Hello's figures and protocol change with the spawn mode (main). */
static struct host_ops test_ops = {
    .name = "wm-host-test",
    .engine = "test",
    .max_inflight = HOST_MAX_INFLIGHT,
    .prepare = prepare,
    .load = on_load,
    .process = on_frame_process,
    .idle = idle,
    .heartbeat = answers_heartbeat,
    .shutdown = on_shutdown,
};

/* A host inherits 0, 1, 2, the channel and its role's filters, nothing
 * else (the spawner's promise, sandbox/spawn.c): anything more is reported and
 * ends the host (exit 5), so that every test that starts one checks it. */
static void
check_inherited_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int bad = -1;

    if (d == NULL)
        return; /* no procfs: nothing to check with */
    while ((de = readdir(d)) != NULL) {
        int fd = atoi(de->d_name);
        /* The role's compiled filters (sandbox/spawn.h), which the
         * host reads when it confines itself, after this check. */
        if (fd == SANDBOX_FILTERS_FD && fcntl(fd, F_GET_SEALS) >= 0)
            continue;
        if (de->d_name[0] != '.' && fd > HOST_CHANNEL_FD && fd != dirfd(d))
            bad = fd;
    }
    closedir(d);
    if (bad >= 0) {
        fprintf(stderr, "wm-host-test[%d]: inherited descriptor %d\n",
                (int)getpid(), bad);
        exit(5);
    }
}

/* The mode in argv[0]'s suffix: "wm-host-test.no_hello" → "no_hello". */
static const char *
spawn_mode(const char *argv0)
{
    const char *slash = strrchr(argv0, '/');
    const char *name = slash ? slash + 1 : argv0;
    const char *dot = strrchr(name, '.');

    return dot ? dot + 1 : "";
}

int
main(int argc, char **argv)
{
    const char *mode = spawn_mode(argc > 0 ? argv[0] : "");

    /* inflight<N>: a deeper pipeline (benchmarks). */
    if (strncmp(mode, "inflight", 8) == 0 && atoi(mode + 8) > 0)
        test_ops.max_inflight = (uint32_t)atoi(mode + 8);
    /* serial<N>: one event at a time, N more queued (a Python host). */
    if (strncmp(mode, "serial", 6) == 0 && atoi(mode + 6) > 0) {
        serial = true;
        test_ops.max_inflight = 1;
        test_ops.prefetch = (uint32_t)atoi(mode + 6);
    }
    if (strcmp(mode, "bad_protocol") == 0)
        test_ops.protocol = 99;
    /* Before host_run() opens anything of its own. */
    check_inherited_fds();
    if (strcmp(mode, "no_hello") == 0) {
        /* Say nothing; the master's handshake timer kills us. */
        for (;;)
            pause();
    }
    host_run(&test_ops);
}
