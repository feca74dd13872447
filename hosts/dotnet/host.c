/*
 * host.c — wm-host-dotnet: the engine host of .NET workers (DESIGN §5,
 * §12; issue 10).  One host process serves one worker.
 *
 * The loop thread owns the channel (fd 3, ipc/channel.h): it answers the
 * handshake, Loads, Heartbeats and Shutdown.  The first Load starts
 * CoreCLR (clr.h: hostfxr, the embedded bridge and DevKit in the default
 * load context) with a GC heap limit from the worker's memory_mb; a
 * runtime never unloads, so a reload only swaps the worker's collectible
 * load context (bridge/WorkerContext.cs).  The package is validated by
 * the bridge, in this process: the master parses no package format.
 *
 * Process, a worker of concurrency 1 (every host of the engine's
 * `concurrency = processes`): the worker runs on the loop thread itself,
 * since a hand-off to the runtime's pool and back costs two thread
 * wake-ups per event, which on an idle machine is most of the round trip
 * (bench/README.md, ".NET engine").  Frames are read in the channel's
 * callbacks but a Process is queued there as a job and run from serve()'s
 * loop, outside any libevent callback, one at a time: the next starts
 * once the previous one's Result is sent (`running`).  While the worker
 * runs, the loop thread gives up io_mu, the channel's lock, and the
 * bridge's LoopContext (bridge/Entry.cs) keeps the worker's continuations
 * on this thread, so a worker that awaits Task.Yield() or an answered
 * gateway call also completes without a hop.  Its outcome, log lines and
 * gateway calls come back on this thread and are sent at once under
 * io_mu.  A gateway call waits for its reply by running the event loop
 * (as the Python host does), so a worker blocking on one synchronously
 * does not deadlock; frames arriving meanwhile are answered (Heartbeat)
 * or queued (Process).  A call made from another thread while the loop
 * thread runs the worker (which may be blocked waiting for it) takes
 * io_mu and waits for its reply the same way; when the loop thread holds
 * io_mu it goes through the queue below.
 *
 * Process, concurrency above 1: the event's verified buffer is decoded
 * into views and handed to the bridge's Process, which copies it and
 * returns at once; the worker runs on the runtime's thread pool.  Its
 * outcome comes back through on_complete() on whatever thread finished
 * it, as do its log lines and gateway calls: each is copied into a
 * message, queued, and the loop thread woken through an eventfd to turn
 * it into a frame (the channel is not thread-safe).  A gateway reply goes
 * back into the bridge from the loop thread, which completes the worker's
 * task without running its continuation there.
 *
 * Confinement (sandbox/role_dotnet.c): the role's own steps, the filter
 * included, are taken by the hosts' skeleton (hosts/common/host.h,
 * host_confine()) before the channel exists and before the runtime
 * starts, so every thread CoreCLR makes inherits them.  The start, the
 * Heartbeat and Shutdown arms, the sends and the exits are the
 * skeleton's too; this file is the host's Load, Process and loop.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

#include "hosts/common/host.h"
#include "hosts/dotnet/blobs.h"
#include "hosts/dotnet/bridge.h"
#include "hosts/dotnet/clr.h"
#include "ipc/channel.h"
#include "ipc/cloudevent.h"
#include "sandbox/sandbox.h"

/* Events the master may hand us at once. */
#define HOST_MAX_INFLIGHT 256
/* A package's largest size (the master's cap is lower). */
#define HOST_CODE_MAX (256u << 20)
/* Bytes queued on the channel past which a frame from the worker on the
 * loop thread waits (up to HOST_FLUSH_MS) for the socket to take them
 * first: jobs run back to back without a turn of the event loop, which
 * is what writes otherwise, and the queue refuses frames past its cap
 * (8 MiB, EAGAIN), a Result's refusal being fatal. */
#define HOST_FLUSH_AT (256u << 10)
#define HOST_FLUSH_MS 1000

/* What another thread hands the loop thread. */
enum msg_kind { MSG_RESULT, MSG_LOG, MSG_CALL };

struct msg {
    struct msg *next;
    enum msg_kind kind;
    uint64_t seq; /* RESULT: the Process's; CALL: the bridge's token */
    int level;    /* LOG */
    /* RESULT: the output as an ABI CloudEvent buffer (NULL: none); CALL:
     * the request. */
    uint8_t *buf;
    size_t len;
    /* RESULT: error type, message, exception type, traceback (NULL when
     * absent); LOG: s[1]; CALL: s[0] service, s[1] method. */
    char *s[4];
};

/* A Process of a worker of concurrency 1, waiting for its turn on the
 * loop thread: the event's bytes (8-aligned after the header, as the
 * nested buffer's were). */
struct job {
    struct job *next;
    uint64_t seq;
    size_t len;
    uint8_t event[];
};

static struct event_base *base;
static struct dn_bridge bridge;
static bool started;
static unsigned inflight;
static int wake_fd;
/* Why the runtime cannot start, found before the filter (clr_prepare()):
 * logged once connected; the first Load fails with its own reason. */
static char prep[512];
static pthread_mutex_t queue_mu = PTHREAD_MUTEX_INITIALIZER;
static struct msg *queue, **queue_tail = &queue;

/* The channel's lock (see the top): the loop thread holds it except while
 * the worker runs on it (in_worker); everything below and the channel are
 * touched only with it held. */
static pthread_mutex_t io_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local bool on_loop; /* this thread is the loop thread */
static bool in_worker;             /* the loop thread's alone */
static bool inline_run;            /* the worker's concurrency is 1 */
static struct job *jobs, **jobs_tail = &jobs;
static bool running; /* a job started and its Result is not sent yet */
static uint64_t running_seq;
/* The bridge posted continuations for the loop thread (dn_wake_fn). */
static atomic_bool posted;

/* ---- from the runtime's threads --------------------------------------- */

static char *
dup_str(const struct dn_str *s)
{
    if (s->len < 0)
        return NULL;
    char *r = malloc((size_t)s->len + 1);
    if (r == NULL)
        host_die("malloc");
    memcpy(r, s->ptr, (size_t)s->len);
    r[s->len] = '\0';
    return r;
}

static void handle(struct msg *m);

static void
enqueue(struct msg *m)
{
    uint64_t one = 1;

    pthread_mutex_lock(&queue_mu);
    *queue_tail = m;
    queue_tail = &m->next;
    pthread_mutex_unlock(&queue_mu);
    if (write(wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        host_die("eventfd");
}

/* A message from the worker: sent now when it comes from the loop thread
 * running the worker (io_mu is free to take, or another thread's gateway
 * call has it briefly), else queued for the loop thread. */
static void
deliver(struct msg *m)
{
    if (!(on_loop && in_worker)) {
        enqueue(m);
        return;
    }
    pthread_mutex_lock(&io_mu);
    if (ipc_channel_queued(host_channel()) >= HOST_FLUSH_AT)
        (void)ipc_channel_flush(host_channel(), HOST_FLUSH_MS);
    handle(m);
    pthread_mutex_unlock(&io_mu);
}

static void
on_wake_request(void)
{
    uint64_t one = 1;

    atomic_store(&posted, true);
    if (write(wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        host_die("eventfd");
}

static void
msg_free(struct msg *m)
{
    free(m->buf);
    for (int i = 0; i < 4; i++)
        free(m->s[i]);
    free(m);
}

static struct msg *
msg_new(enum msg_kind kind, uint64_t seq)
{
    struct msg *m = calloc(1, sizeof *m);

    if (m == NULL)
        host_die("malloc");
    m->kind = kind;
    m->seq = seq;
    return m;
}

static struct ipc_str
view(const struct dn_str *s)
{
    struct ipc_str r = { NULL, 0 };

    if (s->len >= 0) {
        r.ptr = s->ptr ? (const char *)s->ptr : "";
        r.len = (uint32_t)s->len;
    }
    return r;
}

/* ce's attributes in the bridge's order (bridge.h: DN_ID ... DN_TIME). */
static void
attributes(struct ipc_cloudevent *ce, struct ipc_str *attr[DN_DATA])
{
    struct ipc_str *const all[DN_DATA] = {
        [DN_ID] = &ce->id,
        [DN_TYPE] = &ce->type,
        [DN_SOURCE] = &ce->source,
        [DN_SPECVERSION] = &ce->specversion,
        [DN_DATACONTENTTYPE] = &ce->datacontenttype,
        [DN_DATASCHEMA] = &ce->dataschema,
        [DN_SUBJECT] = &ce->subject,
        [DN_TIME] = &ce->time,
    };

    memcpy(attr, all, sizeof all);
}

/* The worker's outcome; the views die with the return, so the output is
 * encoded here into a buffer of the message's own. */
static void
on_complete(uint64_t seq, const struct dn_event *out, const struct dn_str *err)
{
    struct msg *m = msg_new(MSG_RESULT, seq);

    if (err[0].len >= 0) {
        for (int i = 0; i < 4; i++)
            m->s[i] = dup_str(&err[i]);
    } else if (out) {
        struct ipc_cloudevent ce;
        struct ipc_pair *pairs = NULL;
        struct ipc_fb_builder b;
        struct ipc_str *attr[DN_DATA];

        memset(&ce, 0, sizeof ce);
        attributes(&ce, attr);
        for (int i = 0; i < DN_DATA; i++)
            *attr[i] = view(&out->f[i]);
        if (out->f[DN_DATA].len >= 0) {
            ce.data.ptr =
                out->f[DN_DATA].ptr ? out->f[DN_DATA].ptr : (const uint8_t *)"";
            ce.data.len = (uint32_t)out->f[DN_DATA].len;
        }
        if (out->next > 0) {
            pairs = calloc((size_t)out->next, sizeof *pairs);
            if (pairs == NULL)
                host_die("malloc");
            for (int64_t i = 0; i < out->next; i++) {
                pairs[i].name = view(&out->ext[2 * i]);
                pairs[i].value = view(&out->ext[2 * i + 1]);
            }
            ce.extensions.n = (uint32_t)out->next;
            ce.extensions.items = pairs;
        }
        ipc_fb_builder_init(&b);
        if (ipc_cloudevent_encode(&b, &ce) < 0)
            host_die("encoding an output");
        m->buf = b.buf; /* the builder's memory is the message's now */
        m->len = b.len;
        free(pairs);
    }
    deliver(m);
}

static void
on_log(int32_t level, const struct dn_str *text)
{
    struct msg *m = msg_new(MSG_LOG, 0);

    m->level = level < 0 ? 0 : level > 4 ? 4 : level;
    m->s[1] = dup_str(text);
    deliver(m);
}

static void call_now(struct msg *m);

/* A gateway call: made and waited for here when this thread may drive the
 * channel (see the top), else queued for the loop thread, whose reply
 * completes the bridge's task later. */
static void
on_gateway(uint64_t token, const struct dn_str *service,
           const struct dn_str *method, const struct dn_str *request)
{
    struct msg *m = msg_new(MSG_CALL, token);

    m->s[0] = dup_str(service);
    m->s[1] = dup_str(method);
    m->len = request->len > 0 ? (size_t)request->len : 0;
    m->buf = malloc(m->len ? m->len : 1);
    if (m->buf == NULL)
        host_die("malloc");
    if (m->len)
        memcpy(m->buf, request->ptr, m->len);
    /* Another thread gets io_mu only while the loop thread runs the
     * worker, which may be blocked until this call is answered. */
    if (on_loop ? in_worker : pthread_mutex_trylock(&io_mu) == 0) {
        if (on_loop)
            pthread_mutex_lock(&io_mu);
        call_now(m);
        msg_free(m);
        return;
    }
    enqueue(m);
}

/* ---- on the loop thread ------------------------------------------------ */

/* Every event taken is answered (dotnet_ops.idle).  The exit then runs
 * no runtime shutdown: nothing of it needs to run (host.h: _exit). */
static bool
idle(void)
{
    return inflight == 0;
}

static void
send_result(uint64_t seq, const struct ipc_cloudevent *out, const char *type,
            const char *message, const char *exc_type, const char *trace)
{
    struct ipc_result r;

    memset(&r, 0, sizeof r);
    if (out) {
        r.outputs.n = 1;
        r.outputs.items = out;
    }
    if (type) {
        r.error.type = ipc_str_c(type);
        r.error.message = ipc_str_c(message ? message : "");
        r.error.exception_type = ipc_str_c(exc_type);
        r.error.traceback = ipc_str_c(trace);
    }
    host_result_send(seq, &r);
}

static void
answer(struct msg *m)
{
    struct ipc_cloudevent ce;
    struct ipc_fb_error fe;
    char why[512], detail[256];

    if (m->s[0]) {
        send_result(m->seq, NULL, m->s[0], m->s[1], m->s[2], m->s[3]);
    } else if (m->buf == NULL) {
        send_result(m->seq, NULL, NULL, NULL, NULL, NULL);
    } else if (ipc_cloudevent_read(m->buf, m->len, &ce, &fe) < 0 ||
               ipc_cloudevent_check(&ce, &fe) < 0) {
        ipc_fb_error_format(&fe, detail, sizeof detail);
        snprintf(why, sizeof why,
                 "the worker's output is not a valid CloudEvent: %s", detail);
        send_result(m->seq, NULL, "worker_error", why, NULL, NULL);
    } else {
        send_result(m->seq, &ce, NULL, NULL, NULL, NULL);
    }
    if (running && m->seq == running_seq)
        running = false;
    inflight--;
}

static void
on_gateway_reply(struct ipc_channel *c, const struct ipc_frame *reply, int *fds,
                 unsigned nfds, const char *error, void *arg)
{
    uint64_t token = (uint64_t)(uintptr_t)arg;

    (void)c;
    (void)fds;
    (void)nfds;
    if (error == NULL && reply->type == IPC_BODY_GATEWAY_REPLY) {
        const struct ipc_gateway_reply *g = &reply->u.gateway_reply;
        if (g->status == 200)
            bridge.gateway_reply(token, 200, g->response.ptr, g->response.len);
        else
            bridge.gateway_reply(token, g->status,
                                 (const uint8_t *)g->error.ptr, g->error.len);
    } else {
        const char *why = error ? error : "not a GatewayReply";
        bridge.gateway_reply(token, 500, (const uint8_t *)why,
                             (int64_t)strlen(why));
    }
}

static void
call_frame(const struct msg *m, struct ipc_frame *f)
{
    memset(f, 0, sizeof *f);
    f->type = IPC_BODY_GATEWAY_CALL;
    f->u.gateway_call.service = ipc_str_c(m->s[0]);
    f->u.gateway_call.method = ipc_str_c(m->s[1]);
    f->u.gateway_call.request.ptr = m->buf;
    f->u.gateway_call.request.len = (uint32_t)m->len;
}

static void
forward_call(struct msg *m)
{
    struct ipc_frame f;

    call_frame(m, &f);
    if (ipc_channel_call(host_channel(), &f, NULL, 0, on_gateway_reply,
                         (void *)(uintptr_t)m->seq) < 0) {
        const char *why = strerror(errno);
        bridge.gateway_reply(m->seq, 500, (const uint8_t *)why,
                             (int64_t)strlen(why));
    }
}

/* Makes the call and runs the event loop until its reply
 * (ipc_channel_gateway_call()), with io_mu held (taken by the caller,
 * released here before the reply goes into the bridge).  Never inside a
 * libevent callback: the caller runs the worker from serve(), or is
 * another thread while it does. */
static void
call_now(struct msg *m)
{
    struct ipc_gateway_answer a;

    if (ipc_channel_gateway_call(
            host_channel(), ipc_str_c(m->s[0]), ipc_str_c(m->s[1]),
            (struct ipc_bytes){ m->buf, (uint32_t)m->len }, &a) < 0) {
        if (errno == EIO)
            host_die("event_base_loop");
        const char *why = strerror(errno);
        pthread_mutex_unlock(&io_mu);
        bridge.gateway_reply(m->seq, 500, (const uint8_t *)why,
                             (int64_t)strlen(why));
        return;
    }
    pthread_mutex_unlock(&io_mu);
    bridge.gateway_reply(m->seq, a.status, (const uint8_t *)a.body,
                         (int64_t)a.len);
    free(a.body);
}

/* Turns a message into its frame, and frees it. */
static void
handle(struct msg *m)
{
    switch (m->kind) {
    case MSG_RESULT:
        answer(m);
        break;
    case MSG_LOG:
        host_log_send((enum ipc_log_level)m->level, m->s[1] ? m->s[1] : "",
                      m->s[1] ? strlen(m->s[1]) : 0);
        break;
    case MSG_CALL:
        forward_call(m);
        break;
    }
    msg_free(m);
}

static void
on_wake(evutil_socket_t fd, short what, void *arg)
{
    uint64_t n;
    struct msg *m;

    (void)what;
    (void)arg;
    if (read(fd, &n, sizeof n) < 0 && errno != EAGAIN)
        host_die("eventfd");
    pthread_mutex_lock(&queue_mu);
    m = queue;
    queue = NULL;
    queue_tail = &queue;
    pthread_mutex_unlock(&queue_mu);
    while (m) {
        struct msg *next = m->next;
        handle(m);
        m = next;
    }
    host_exit_if_done();
}

/* The runtime's GC heap limit for a worker of memory_mb (0: none): three
 * quarters, the rest for the runtime's own memory, the JIT's code and the
 * host. */
static uint64_t
heap_limit(uint32_t memory_mb)
{
    return ((uint64_t)memory_mb << 20) / 4 * 3;
}

/* The runtime and the bridge, at the first Load (with its memory limit).
 * NULL once started, or the reason. */
static const char *
start(const struct ipc_load *l, char *err, size_t errlen)
{
    uint32_t mb = l->limits.present ? l->limits.memory_mb : 0;
    const struct dn_callbacks cbs = {
        .complete = on_complete,
        .log = on_log,
        .gateway = on_gateway,
        .wake = on_wake_request,
        .devkit = wm_dn_devkit,
        .devkit_len = wm_dn_devkit_end - wm_dn_devkit,
    };

    if (clr_start(heap_limit(mb), &bridge, err, errlen) < 0)
        return err;
    if (bridge.init(&cbs) != 0)
        return "the bridge did not start";
    started = true;
    return NULL;
}

/* Reads the code, starts the runtime and loads it.  NULL once loaded, or
 * the reason. */
static const char *
load(const struct ipc_load *l, const int *fds, unsigned nfds, char *err,
     size_t errlen)
{
    const char *why;
    char mime[128];
    uint8_t *code;
    size_t len;

    if (l->in_process)
        return "the .NET engine has no in-process path";
    code =
        host_code_read(l, fds, nfds, HOST_CODE_MAX, "code", &len, err, errlen);
    if (code == NULL)
        return err;
    if (!started && (why = start(l, err, errlen)) != NULL) {
        free(code);
        return why;
    }
    snprintf(mime, sizeof mime, "%.*s", (int)l->mime.len,
             l->mime.ptr ? l->mime.ptr : "");
    const struct dn_str m = { (const uint8_t *)mime, (int64_t)strlen(mime) };
    int32_t conc = l->limits.present && l->limits.concurrency
                       ? (int32_t)l->limits.concurrency
                       : 1;
    int rc = bridge.load(&m, code, (int64_t)len, conc, err, (int32_t)errlen);
    free(code);
    if (rc != 0)
        return err;
    inline_run = conc == 1; /* as the bridge decides (bridge/Entry.cs) */
    return NULL;
}

/* Hands the event (verified bytes) to the bridge, a worker loaded: it
 * runs here for a job (in_worker), else on the pool. */
static void
process(uint64_t seq, const uint8_t *event, size_t len)
{
    struct ipc_cloudevent ce;
    struct ipc_fb_error fe;
    struct dn_event ev;
    struct dn_str ext[2 * 128];

    /* Verified by the channel already; decoded into views here. */
    if (ipc_cloudevent_read(event, len, &ce, &fe) < 0)
        host_die("a verified event does not decode");
    struct ipc_str *attr[DN_DATA];

    attributes(&ce, attr);
    for (int i = 0; i < DN_DATA; i++) {
        ev.f[i].ptr = (const uint8_t *)attr[i]->ptr;
        ev.f[i].len = attr[i]->ptr ? (int64_t)attr[i]->len : -1;
    }
    ev.f[DN_DATA].ptr = ce.data.ptr;
    ev.f[DN_DATA].len = ce.data.ptr ? (int64_t)ce.data.len : -1;
    /* ipc_cloudevent_check() bounds the extensions of a verified event. */
    ev.next = 0;
    for (uint32_t i = 0; i < ce.extensions.n && i < 128; i++) {
        struct ipc_pair p;
        ipc_pair_list_get(&ce.extensions, i, &p);
        ext[2 * i] =
            (struct dn_str){ (const uint8_t *)p.name.ptr, (int64_t)p.name.len };
        ext[2 * i + 1] = (struct dn_str){ (const uint8_t *)p.value.ptr,
                                          (int64_t)p.value.len };
        ev.next++;
    }
    ev.ext = ext;
    bridge.process(seq, &ev);
}

/* A Process of a worker of concurrency 1: queued for serve() (see the
 * top), the frame's bytes copied since its views die with the callback. */
static void
queue_job(const struct ipc_process *pr, uint64_t seq)
{
    struct job *j = malloc(sizeof *j + pr->event.len);

    if (j == NULL)
        host_die("malloc");
    j->next = NULL;
    j->seq = seq;
    j->len = pr->event.len;
    memcpy(j->event, pr->event.ptr, pr->event.len);
    *jobs_tail = j;
    jobs_tail = &j->next;
}

/* Runs the next job on this thread, io_mu released while the worker runs:
 * its Result is usually sent before the bridge returns. */
static void
run_job(void)
{
    struct job *j = jobs;

    if ((jobs = j->next) == NULL)
        jobs_tail = &jobs;
    running = true;
    running_seq = j->seq;
    in_worker = true;
    pthread_mutex_unlock(&io_mu);
    process(j->seq, j->event, j->len);
    pthread_mutex_lock(&io_mu);
    in_worker = false;
    free(j);
}

/* The continuations the bridge posted for this thread, run as run_job()
 * runs a job. */
static void
run_posted(void)
{
    in_worker = true;
    pthread_mutex_unlock(&io_mu);
    bridge.run_posted();
    pthread_mutex_lock(&io_mu);
    in_worker = false;
}

/* The loop thread's loop: one turn of the event loop, then the jobs its
 * frames queued and the continuations posted, their frames written at
 * once rather than on the next turn (an epoll_wait less per event); what
 * the socket does not take at once is left to the loop. */
static void
serve(struct event_base *b)
{
    base = b;
    if (prep[0])
        host_log(IPC_LOG_ERROR, "%s", prep);
    for (;;) {
        bool worked = false;
        if (atomic_exchange(&posted, false)) {
            run_posted();
            worked = true;
        }
        while (jobs && !running) {
            run_job();
            worked = true;
        }
        if (worked) {
            (void)ipc_channel_flush(host_channel(), 0);
            host_exit_if_done();
            continue;
        }
        if (event_base_loop(base, EVLOOP_ONCE) < 0)
            host_die("event_base_loop");
    }
}

/* A Load: answered at once (the runtime starts here the first time). */
static void
on_load(const struct ipc_frame *f, int *fds, unsigned nfds)
{
    const struct ipc_load *l = &f->u.load;
    char err[2048];
    const char *why = load(l, fds, nfds, err, sizeof err);

    host_loaded_reply(f->seq, why);
    if (why == NULL)
        host_log(IPC_LOG_INFO, "loaded worker %.*s version %u (%.*s)",
                 (int)l->worker_id.len, l->worker_id.ptr, (unsigned)l->version,
                 (int)l->mime.len, l->mime.ptr);
}

/* A Process: run here as a job, handed to the pool, or refused with no
 * worker loaded. */
static void
on_process(const struct ipc_frame *f)
{
    inflight++;
    if (!started) {
        send_result(f->seq, NULL, "worker_error", "no worker is loaded", NULL,
                    NULL);
        inflight--;
    } else if (inline_run)
        queue_job(&f->u.process, f->seq);
    else
        process(f->seq, f->u.process.event.ptr, f->u.process.event.len);
}

/* Before the filter: the loop's event base is the skeleton's; the wake-up
 * eventfd, and the runtime found (a failure is said once connected and at
 * the first Load). */
static void
prepare(struct event_base *b)
{
    struct event *ev;

    base = b;
    wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd < 0)
        host_die("start");
    ev = event_new(base, wake_fd, EV_READ | EV_PERSIST, on_wake, NULL);
    if (ev == NULL || event_add(ev, NULL) < 0)
        host_die("event_new");
    (void)clr_prepare(prep, sizeof prep);
}

static const struct host_ops dotnet_ops = {
    .name = "wm-host-dotnet",
    .engine = "dotnet",
    .max_inflight = HOST_MAX_INFLIGHT,
    .confine = host_confine,
    .role = &sandbox_role_dotnet,
    .prepare = prepare,
    .load = on_load,
    .process = on_process,
    .idle = idle,
    .serve = serve,
};

int
main(int argc, char **argv)
{
    /* For people and tests: what the runtime is started with, and where
     * it is found. */
    if (argc == 2 && strcmp(argv[1], "--runtimeconfig") == 0) {
        char buf[1024];
        fputs(clr_runtimeconfig(0, buf, sizeof buf), stdout);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--find") == 0) {
        char root[4096], fxr[4096], why[1024];
        if (clr_find(root, sizeof root, fxr, sizeof fxr, why, sizeof why) < 0) {
            fprintf(stderr, "%s\n", why);
            return 1;
        }
        printf("%s\n%s\n", root, fxr);
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: wm-host-dotnet [--runtimeconfig | --find] "
                        "(started by workmanagerd with its channel on fd 3)\n");
        return 2;
    }
    /* The channel is this thread's from here on, but while it runs the
     * worker (run_job()). */
    on_loop = true;
    pthread_mutex_lock(&io_mu);
    /* Before the runtime: it keeps ignored dispositions (B5), and shutdown
     * comes by frame, not by signal (SIGPIPE: host_run()). */
    signal(SIGINT, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    /* No diagnostic socket, no debugger or profiler attach, no dumps. */
    setenv("DOTNET_EnableDiagnostics", "0", 1);
    setenv("DOTNET_DbgEnableMiniDump", "0", 1);
    setenv("DOTNET_CLI_TELEMETRY_OPTOUT", "1", 1);
    host_run(&dotnet_ops);
}
