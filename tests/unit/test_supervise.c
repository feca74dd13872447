/*
 * test_supervise.c — the supervisor (master/supervise/) against the test
 * host (tests/testhost/wm-host-test), on its own event loop with short
 * timeouts.
 *
 * The host binary comes from $WM_TEST_HOST, else argv[1], else the build
 * tree's tests/testhost/wm-host-test beside this program's directory; a
 * missing one fails the run rather than skipping it.  Behaviours chosen before
 * the handshake (no_hello, bad_protocol) are reached through symlinks named
 * wm-host-test.<mode> in a temporary directory.
 *
 * Every test ends with the worker forgotten or stopped and waits until no
 * host is left; main() then checks that the process has no child left
 * (live or zombie) and as many descriptors open as at the start.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc/cloudevent.h"
#include "master/core/conf.h"
#include "master/core/engines.h"
#include "master/core/log.h"
#include "master/supervise/supervise.h"
#include "master/workers/worker.h"
#include "tests/unit/check.h"

/* Short timeouts, so that the whole run stays within seconds, yet long
 * enough for sanitizer builds of several tests at once on a loaded machine
 * (make check -j): a host's start-up, a heartbeat's answer and an exit
 * after Shutdown (a sanitizer's leak check at exit takes seconds under
 * load) must fit with room to spare.  The tests of a missed handshake and
 * of an ignored Shutdown lower the timeout they wait for. */
#define T_HANDSHAKE_MS 5000
#define T_NO_HELLO_MS 300
#define T_MESSAGE_MS 3000
#define T_HB_INTERVAL_MS 200
#define T_HB_TIMEOUT_MS 1500
#define T_GRACE_MS 5000
#define T_SHORT_GRACE_MS 500
#define T_RESTART_BASE_MS 100
#define T_RESTART_MAX_MS 400
#define T_CRASH_LOOP_MAX 2

static struct event_base *base;
static struct event *tick;
static struct conf conf;
static struct supervisor *sv;
static char host_bin[PATH_MAX];
static char tmpdir[PATH_MAX];
static char nohello_bin[PATH_MAX + 32];
static char badproto_bin[PATH_MAX + 32];
static char inflight1_bin[PATH_MAX + 32];
static char serial2_bin[PATH_MAX + 32];
/* The engines the launcher knows (by name: each its own).  engine_procs:
 * concurrency = processes, hosts of max_inflight 1 (as Python's);
 * engine_procs4: the same with hosts of max_inflight 4; engine_serial:
 * hosts that run one event at a time and prefetch 2 (as Python's). */
static struct engines_entry engine, engine_nohello, engine_badproto,
    engine_missing, engine_procs, engine_procs4, engine_serial;

/* A worker with the code the hook hands out and the states it went
 * through. */
struct tw {
    struct worker w; /* first: the hooks get &tw->w */
    const char *code;
    enum worker_state seen[256];
    unsigned nseen;
};

/* What a done callback reported. */
struct outcome {
    bool done;
    unsigned calls;
    char type[32];
    char msg[512];
    char exc[64];
    bool traceback;
    bool delivered; /* an event's: the attempt counts (supervise_event_cb) */
    uint32_t nout;
    char out_type[128];
    char out_data[256];
    int64_t at;
};

/* ---- plumbing ---------------------------------------------------------- */

static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* Runs the loop until cond holds or ms pass; evaluates to cond. */
#define WAIT_FOR(cond, ms)                                                     \
    do {                                                                       \
        int64_t wait_end_ = now_ms() + (ms);                                   \
        while (!(cond) && now_ms() < wait_end_)                                \
            event_base_loop(base, EVLOOP_ONCE);                                \
    } while (0)

static void
spin(int ms)
{
    int64_t end = now_ms() + ms;

    while (now_ms() < end)
        event_base_loop(base, EVLOOP_ONCE);
}

static void
on_state(struct worker *w, enum worker_state old, void *arg)
{
    struct tw *t = (struct tw *)w;

    (void)old;
    (void)arg;
    if (t->nseen < sizeof t->seen / sizeof t->seen[0])
        t->seen[t->nseen++] = w->state;
}

static bool
saw(const struct tw *t, enum worker_state s)
{
    for (unsigned i = 0; i < t->nseen; i++)
        if (t->seen[i] == s)
            return true;
    return false;
}

static int
code_hook(struct worker *w, uint8_t **data, size_t *len, char *err,
          size_t errlen, void *arg)
{
    struct tw *t = (struct tw *)w;

    (void)arg;
    if (t->code == NULL) {
        snprintf(err, errlen, "no code for %s", w->id);
        return -1;
    }
    *len = strlen(t->code);
    *data = (uint8_t *)strdup(t->code);
    return *data ? 0 : -1;
}

static const struct supervise_hooks hooks = {
    .on_state = on_state,
    .code = code_hook,
};

static struct tw *
tw_new(const char *code, const struct engines_entry *e)
{
    static unsigned n;
    struct tw *t = calloc(1, sizeof *t);

    if (t == NULL)
        abort();
    snprintf(t->w.id, sizeof t->w.id, "00000000-0000-4000-8000-%012u", ++n);
    t->w.name = strdup("test");
    t->w.mime_type = strdup("text/x-test");
    t->w.topic = strdup("t");
    t->w.tenant = strdup("default");
    t->w.status = WORKER_RUNNING;
    t->w.history = calloc(2, sizeof *t->w.history);
    if (!t->w.name || !t->w.mime_type || !t->w.topic || !t->w.tenant ||
        !t->w.history)
        abort();
    for (int i = 0; i < 2; i++) {
        t->w.history[i].version = (uint32_t)i + 1;
        memset(t->w.history[i].sha256, i ? 'b' : 'a', 64);
    }
    t->w.nhistory = 1;
    t->w.version = 1;
    t->w.limits.concurrency = 1;
    t->w.engine = e;
    t->code = code;
    return t;
}

static void
tw_free(struct tw *t)
{
    supervise_forget(sv, &t->w);
    worker_free(&t->w); /* frees the strings and history; t is the worker */
}

static void
on_done(struct worker *w, const struct ipc_result *r, const char *type,
        const char *msg, void *arg)
{
    struct outcome *o = arg;

    (void)w;
    o->done = true;
    o->calls++;
    o->at = now_ms();
    snprintf(o->type, sizeof o->type, "%s", type ? type : "");
    snprintf(o->msg, sizeof o->msg, "%s", msg ? msg : "");
    if (r == NULL)
        return;
    if (r->error.exception_type.ptr)
        snprintf(o->exc, sizeof o->exc, "%.*s",
                 (int)r->error.exception_type.len, r->error.exception_type.ptr);
    o->traceback = r->error.traceback.ptr && r->error.traceback.len;
    o->nout = r->outputs.n;
    if (r->outputs.n) {
        struct ipc_cloudevent ce;
        ipc_cloudevent_list_get(&r->outputs, 0, &ce);
        snprintf(o->out_type, sizeof o->out_type, "%.*s", (int)ce.type.len,
                 ce.type.ptr);
        snprintf(o->out_data, sizeof o->out_data, "%.*s", (int)ce.data.len,
                 ce.data.ptr ? (const char *)ce.data.ptr : "");
    }
}

static void
on_gone(struct worker *w, void *arg)
{
    (void)w;
    *(bool *)arg = true;
}

/* An event sent: the supervisor borrows its buffer until the callback. */
struct sent {
    struct outcome *o;
    struct ipc_fb_builder b;
};

static void
on_sent_done(struct worker *w, const struct ipc_result *r, const char *type,
             const char *msg, bool delivered, void *arg)
{
    struct sent *s = arg;

    on_done(w, r, type, msg, s->o);
    s->o->delivered = delivered;
    ipc_fb_builder_free(&s->b);
    free(s);
}

/* Sends one event of type `type` to t's host. */
static int
send_event(struct tw *t, const char *type, struct outcome *o)
{
    static unsigned seq;
    struct sent *s = malloc(sizeof *s);
    struct ipc_cloudevent ce;
    char id[32];
    int rc;

    snprintf(id, sizeof id, "ev-%u", ++seq);
    memset(&ce, 0, sizeof ce);
    ce.id = ipc_str_c(id);
    ce.type = ipc_str_c(type);
    ce.source = ipc_str_c("urn:test");
    ce.specversion = ipc_str_c("1.0");
    ce.data.ptr = (const uint8_t *)"{}";
    ce.data.len = 2;
    if (s == NULL)
        abort();
    s->o = o;
    ipc_fb_builder_init(&s->b);
    if (ipc_cloudevent_encode(&s->b, &ce) != 0)
        abort();
    rc = supervise_process(sv, &t->w, s->b.buf, s->b.len, on_sent_done, s);
    if (rc != 0) {
        ipc_fb_builder_free(&s->b);
        free(s);
    }
    return rc;
}

/* Loads t's code and waits for the answer. */
static void
load(struct tw *t, struct outcome *o)
{
    memset(o, 0, sizeof *o);
    CHECK_EQ(supervise_load(sv, &t->w, on_done, o), 0);
    WAIT_FOR(o->done, 5000);
    CHECK(o->done);
}

/* Stops t's host (if any) and waits until no host is left. */
static void
finish(struct tw *t)
{
    tw_free(t);
    WAIT_FOR(supervise_hosts(sv) == 0, 10000);
    CHECK_EQ(supervise_hosts(sv), 0);
}

/* The parent of process pid (as named in /proc), with *launcher true when
 * it is the supervisor's launcher (its name: sandbox/launcher.c); -1. */
static int
parent_of(const char *pid, bool *launcher)
{
    char path[300], buf[512];

    snprintf(path, sizeof path, "/proc/%s/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    /* pid (comm) state ppid: comm may hold spaces, so after the last
     * ')'. */
    char *rp = strrchr(buf, ')');
    int ppid;
    char state;
    *launcher = strstr(buf, "(wm-launcher)") != NULL;
    if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2)
        return ppid;
    return -1;
}

/* Processes (live or zombie) this one's supervisor started: its children
 * but the launcher, and the launcher's (hosts and their orphans). */
static unsigned
count_children(void)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    unsigned n = 0;
    pid_t me = getpid(), launcher = 0;
    bool is_launcher;

    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL)
        if (parent_of(de->d_name, &is_launcher) == me && is_launcher)
            launcher = (pid_t)atoi(de->d_name);
    rewinddir(d);
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        int ppid = parent_of(de->d_name, &is_launcher);
        if ((ppid == me && !is_launcher) || (launcher && ppid == launcher))
            n++;
    }
    closedir(d);
    return n;
}

/* The pid and version in a span's output ({"pid": ..., "version": ...}),
 * 0 when absent. */
static int
span_field(const struct outcome *o, const char *name)
{
    char key[32];
    const char *at;

    snprintf(key, sizeof key, "\"%s\":", name);
    at = strstr(o->out_data, key);
    return at ? atoi(at + strlen(key)) : 0;
}

static bool
pid_in(int pid, const int *pids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (pids[i] == pid)
            return true;
    return false;
}

/* ---- tests ------------------------------------------------------------- */

static void
test_load_ok(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome o;

    load(t, &o);
    CHECK_EQ(o.type[0], '\0');
    CHECK_EQ(t->w.state, WORKER_STATE_RUNNING);
    CHECK(saw(t, WORKER_STATE_STARTING));
    CHECK(t->w.pid > 0);
    CHECK_EQ(supervise_hosts(sv), 1);
    CHECK_EQ(t->w.restarts, 0);

    /* A hot reload goes to the same process. */
    pid_t pid = t->w.pid;
    t->w.nhistory = 2;
    t->w.version = 2;
    load(t, &o);
    CHECK_EQ(o.type[0], '\0');
    CHECK_EQ(t->w.pid, pid);
    CHECK_EQ(t->w.state, WORKER_STATE_RUNNING);
    finish(t);
}

static void
test_load_fail(void)
{
    struct tw *t = tw_new("load_fail SyntaxError: bad code at line 3", &engine);
    struct outcome o, e;

    load(t, &o);
    CHECK(strcmp(o.type, "load_error") == 0);
    CHECK(strcmp(o.msg, "SyntaxError: bad code at line 3") == 0);
    WAIT_FOR(t->w.state == WORKER_STATE_FAILED && supervise_hosts(sv) == 0,
             10000);
    CHECK_EQ(t->w.state, WORKER_STATE_FAILED);
    CHECK_EQ(supervise_hosts(sv), 0);
    CHECK(t->w.last_exit.present);
    CHECK(strcmp(t->w.last_exit.reason, "load_error") == 0);
    CHECK_EQ(t->w.restarts, 0);

    /* Events fail with the reason until a load or a start resets it. */
    memset(&e, 0, sizeof e);
    CHECK_EQ(send_event(t, "echo", &e), 0);
    WAIT_FOR(e.done, 1000);
    CHECK(strcmp(e.type, "load_error") == 0);
    CHECK(strstr(e.msg, "bad code") != NULL);
    CHECK_EQ(supervise_hosts(sv), 0);

    /* Unknown directive: also a load error, with a message. */
    struct tw *t2 = tw_new("frobnicate", &engine);
    load(t2, &o);
    CHECK(strcmp(o.type, "load_error") == 0);
    CHECK(strstr(o.msg, "frobnicate") != NULL);
    finish(t2);
    finish(t);
}

static void
test_no_hello(void)
{
    struct tw *t = tw_new("echo", &engine_nohello);
    struct outcome o;
    int64_t t0 = now_ms();

    conf.handshake_timeout_ms = T_NO_HELLO_MS;
    load(t, &o);
    conf.handshake_timeout_ms = T_HANDSHAKE_MS;
    CHECK(strcmp(o.type, "handshake") == 0);
    CHECK(strstr(o.msg, "timed out") != NULL);
    CHECK(o.at - t0 >= T_NO_HELLO_MS - 20);
    CHECK(o.at - t0 < T_NO_HELLO_MS + 2000);
    WAIT_FOR(t->w.last_exit.present, 2000);
    CHECK(strcmp(t->w.last_exit.reason, "handshake") == 0);
    CHECK_EQ(t->w.last_exit.signal, 9);
    finish(t);
}

/* A host binary that cannot be exec'd: the spawn says why, at once, and
 * no child is left behind. */
static void
test_spawn_fail(void)
{
    struct tw *t = tw_new("echo", &engine_missing);
    struct outcome o;

    load(t, &o);
    CHECK(strcmp(o.type, "engine_unavailable") == 0);
    CHECK(strstr(o.msg, "No such file") != NULL);
    CHECK_EQ(t->w.state, WORKER_STATE_FAILED);
    CHECK_EQ(supervise_hosts(sv), 0);
    CHECK_EQ(count_children(), 0);
    finish(t);
}

static void
test_bad_protocol(void)
{
    struct tw *t = tw_new("echo", &engine_badproto);
    struct outcome o;

    load(t, &o);
    CHECK(strcmp(o.type, "handshake") == 0);
    CHECK(strstr(o.msg, "protocol 99 not supported") != NULL);
    WAIT_FOR(t->w.last_exit.present, 2000);
    CHECK(strcmp(t->w.last_exit.reason, "handshake") == 0);
    finish(t);
}

static void
test_echo(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome o, e[4];

    memset(e, 0, sizeof e);
    /* Lazy start: the first event starts the host. */
    CHECK_EQ(send_event(t, "com.example.ping", &e[0]), 0);
    WAIT_FOR(e[0].done, 5000);
    CHECK_EQ(e[0].type[0], '\0');
    CHECK_EQ(e[0].nout, 1);
    CHECK(strcmp(e[0].out_type, "com.example.ping.out") == 0);
    CHECK_EQ(t->w.state, WORKER_STATE_RUNNING);

    CHECK_EQ(send_event(t, "many:5", &e[1]), 0);
    CHECK_EQ(send_event(t, "gateway", &e[2]), 0);
    int level = log_get_level();
    log_set_level(LOG_WARNING); /* the flood's 1000 lines */
    CHECK_EQ(send_event(t, "flood", &e[3]), 0);
    WAIT_FOR(e[1].done && e[2].done && e[3].done, 5000);
    log_set_level(level);
    CHECK_EQ(e[1].nout, 5);
    CHECK_EQ(e[2].nout, 1);
    CHECK(strstr(e[2].out_data, "501") != NULL);
    CHECK(strstr(e[2].out_data, "no gateway services in this daemon") != NULL);
    CHECK_EQ(e[3].nout, 1);
    CHECK_EQ(e[3].type[0], '\0');
    CHECK_EQ(t->w.restarts, 0);
    (void)o;
    finish(t);
}

static void
test_fail(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome e;

    memset(&e, 0, sizeof e);
    CHECK_EQ(send_event(t, "fail", &e), 0);
    WAIT_FOR(e.done, 5000);
    CHECK(strcmp(e.type, "exception") == 0);
    CHECK(strcmp(e.exc, "TestError") == 0);
    CHECK(strstr(e.msg, "test failure") != NULL);
    CHECK(e.traceback);
    CHECK_EQ(t->w.state, WORKER_STATE_RUNNING); /* the host is fine */
    finish(t);
}

static void
test_crash(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome o, e, e2;

    load(t, &o);
    pid_t pid = t->w.pid;
    memset(&e, 0, sizeof e);
    CHECK_EQ(send_event(t, "crash", &e), 0);
    WAIT_FOR(e.done, 5000);
    CHECK(strcmp(e.type, "crash") == 0);
    CHECK(strstr(e.msg, "signal 11") != NULL);
    CHECK(t->w.last_exit.present);
    CHECK(strcmp(t->w.last_exit.reason, "crash") == 0);
    CHECK_EQ(t->w.last_exit.signal, 11);
    CHECK_EQ(t->w.last_exit.code, -1);
    CHECK_EQ(t->w.state, WORKER_STATE_PENDING);
    int64_t crashed = now_ms();

    /* Back after the backoff, counted. */
    WAIT_FOR(t->w.state == WORKER_STATE_RUNNING, 5000);
    CHECK_EQ(t->w.state, WORKER_STATE_RUNNING);
    CHECK(now_ms() - crashed >= T_RESTART_BASE_MS - 20);
    CHECK_EQ(t->w.restarts, 1);
    CHECK(t->w.pid > 0 && t->w.pid != pid);
    memset(&e2, 0, sizeof e2);
    CHECK_EQ(send_event(t, "echo", &e2), 0);
    WAIT_FOR(e2.done, 5000);
    CHECK_EQ(e2.nout, 1);
    finish(t);
}

static void
test_hang(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome o, h, s1, s2;

    /* The sleeps start 500 ms after the hang and last 1600 ms: still in
     * flight at the hang's 2000 ms deadline, done within their own on the
     * next host. */
    t->w.limits.timeout_ms = 2000;
    load(t, &o);
    memset(&h, 0, sizeof h);
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    int64_t t0 = now_ms();
    CHECK_EQ(send_event(t, "hang", &h), 0);
    spin(500);
    CHECK_EQ(send_event(t, "sleep:1600", &s1), 0);
    CHECK_EQ(send_event(t, "sleep:1600", &s2), 0);
    WAIT_FOR(h.done, 5000);
    CHECK(strcmp(h.type, "timeout") == 0);
    CHECK(h.at - t0 >= 1980 && h.at - t0 < 3000);
    CHECK(!s1.done && !s2.done); /* requeued, not failed */
    WAIT_FOR(s1.done && s2.done, 5000);
    CHECK_EQ(s1.type[0], '\0');
    CHECK_EQ(s2.type[0], '\0');
    CHECK_EQ(s1.calls, 1);
    CHECK_EQ(s2.calls, 1);
    CHECK(strcmp(t->w.last_exit.reason, "timeout") == 0);
    CHECK_EQ(t->w.last_exit.signal, 9);
    CHECK_EQ(t->w.restarts, 1);
    finish(t);
}

static void
test_malformed(void)
{
    static const char *const kinds[] = { "malformed", "oversize" };

    for (size_t i = 0; i < 2; i++) {
        struct tw *t = tw_new("echo", &engine);
        struct outcome o, e, e2;
        load(t, &o);
        memset(&e, 0, sizeof e);
        CHECK_EQ(send_event(t, kinds[i], &e), 0);
        WAIT_FOR(e.done, 5000);
        CHECK(strcmp(e.type, "protocol") == 0);
        WAIT_FOR(t->w.last_exit.present, 2000);
        /* Only the reason: the channel closes its end before the kill, so
         * the host may see EOF and exit 0 first (the reason stays ours). */
        CHECK(strcmp(t->w.last_exit.reason, "protocol") == 0);
        /* The master carries on: the restarted host echoes. */
        memset(&e2, 0, sizeof e2);
        CHECK_EQ(send_event(t, "echo", &e2), 0);
        WAIT_FOR(e2.done, 5000);
        CHECK_EQ(e2.nout, 1);
        CHECK_EQ(t->w.restarts, 1);
        finish(t);
    }
}

static void
test_bad_frame(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome o, e;

    load(t, &o);
    memset(&e, 0, sizeof e);
    CHECK_EQ(send_event(t, "bad_frame", &e), 0);
    WAIT_FOR(e.done, 5000);
    CHECK(strcmp(e.type, "protocol") == 0);
    CHECK(strstr(e.msg, "Shutdown") != NULL);
    WAIT_FOR(t->w.last_exit.present, 5000);
    CHECK(strcmp(t->w.last_exit.reason, "protocol") == 0);
    finish(t);
}

static void
test_hang_load(void)
{
    struct tw *t = tw_new("hang_load", &engine);
    struct outcome o;

    t->w.limits.timeout_ms = 300;
    load(t, &o);
    CHECK(strcmp(o.type, "timeout") == 0);
    CHECK(strstr(o.msg, "Load") != NULL);
    WAIT_FOR(t->w.last_exit.present, 5000);
    CHECK(strcmp(t->w.last_exit.reason, "timeout") == 0);
    finish(t);
}

/* A hot reload that fails: the waiter hears why, the host keeps serving
 * the version it ran (issue 27), is not sent the refused one again, and
 * the worker stays usable: not failed, nothing restarted. */
static void
test_reload_fail(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome o, e;

    load(t, &o);
    t->code = "load_fail version 2 is broken";
    t->w.nhistory = 2;
    t->w.version = 2;
    load(t, &o);
    CHECK(strcmp(o.type, "load_error") == 0);
    CHECK(strcmp(o.msg, "version 2 is broken") == 0);
    /* The caller goes back to version 1, as the API does. */
    t->code = "echo";
    t->w.nhistory = 1;
    t->w.version = 1;
    CHECK_EQ(supervise_hosts(sv), 1);
    CHECK_EQ(t->w.state, WORKER_STATE_RUNNING);
    memset(&e, 0, sizeof e);
    CHECK_EQ(send_event(t, "echo", &e), 0);
    WAIT_FOR(e.done, 5000);
    CHECK_EQ(e.nout, 1);
    CHECK_EQ(t->w.restarts, 0);
    finish(t);
}

static void
test_exit0(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome o, e;

    load(t, &o);
    memset(&e, 0, sizeof e);
    CHECK_EQ(send_event(t, "exit0", &e), 0);
    WAIT_FOR(e.done, 5000);
    CHECK(strcmp(e.type, "protocol") == 0);
    CHECK(strcmp(t->w.last_exit.reason, "protocol") == 0);
    CHECK_EQ(t->w.last_exit.code, 0);
    CHECK_EQ(t->w.last_exit.signal, 0);
    /* Unasked: an error, restarted like a crash. */
    CHECK_EQ(t->w.state, WORKER_STATE_PENDING);
    finish(t);

    /* At load time. */
    t = tw_new("exit0_on_load", &engine);
    load(t, &o);
    CHECK(strcmp(o.type, "protocol") == 0);
    finish(t);
}

static void
test_crash_loop(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome o, e;

    load(t, &o);
    for (unsigned i = 0; i <= T_CRASH_LOOP_MAX; i++) {
        WAIT_FOR(t->w.state == WORKER_STATE_RUNNING, 5000);
        CHECK_EQ(t->w.state, WORKER_STATE_RUNNING);
        memset(&e, 0, sizeof e);
        CHECK_EQ(send_event(t, "crash", &e), 0);
        WAIT_FOR(e.done, 5000);
        CHECK(strcmp(e.type, "crash") == 0);
    }
    CHECK_EQ(t->w.state, WORKER_STATE_FAILED);
    CHECK_EQ(t->w.restarts, T_CRASH_LOOP_MAX);
    spin(T_RESTART_MAX_MS + 100);
    CHECK_EQ(t->w.state, WORKER_STATE_FAILED); /* no more restarts */
    CHECK_EQ(supervise_hosts(sv), 0);
    memset(&e, 0, sizeof e);
    CHECK_EQ(send_event(t, "echo", &e), 0);
    WAIT_FOR(e.done, 1000);
    CHECK(strcmp(e.type, "crash") == 0);
    CHECK(strstr(e.msg, "crash loop") != NULL);

    /* A start resets it. */
    supervise_apply(sv, &t->w, NULL, NULL);
    CHECK_EQ(t->w.state, WORKER_STATE_IDLE);
    memset(&e, 0, sizeof e);
    CHECK_EQ(send_event(t, "echo", &e), 0);
    WAIT_FOR(e.done, 5000);
    CHECK_EQ(e.nout, 1);
    finish(t);
}

static void
test_idle(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome o, e;

    t->w.idle_timeout_s = 1;
    load(t, &o);
    CHECK_EQ(t->w.state, WORKER_STATE_RUNNING);
    WAIT_FOR(t->w.state == WORKER_STATE_IDLE && supervise_hosts(sv) == 0,
             10000);
    CHECK_EQ(t->w.state, WORKER_STATE_IDLE);
    CHECK_EQ(supervise_hosts(sv), 0);
    CHECK(strcmp(t->w.last_exit.reason, "idle") == 0);
    CHECK_EQ(t->w.last_exit.code, 0);
    CHECK_EQ(t->w.restarts, 0);
    CHECK_EQ(t->w.pid, 0);
    /* The next event starts one again. */
    memset(&e, 0, sizeof e);
    CHECK_EQ(send_event(t, "echo", &e), 0);
    WAIT_FOR(e.done, 5000);
    CHECK_EQ(e.nout, 1);
    CHECK_EQ(t->w.restarts, 0);
    finish(t);
}

static void
test_heartbeat(void)
{
    struct tw *t = tw_new("no_heartbeat", &engine);
    struct outcome o;

    load(t, &o);
    CHECK_EQ(o.type[0], '\0');
    int64_t t0 = now_ms();
    conf.heartbeat_timeout_ms = T_NO_HELLO_MS;
    WAIT_FOR(t->w.last_exit.present, T_HB_INTERVAL_MS + T_NO_HELLO_MS + 5000);
    conf.heartbeat_timeout_ms = T_HB_TIMEOUT_MS;
    CHECK(strcmp(t->w.last_exit.reason, "timeout") == 0);
    CHECK_EQ(t->w.last_exit.signal, 9);
    CHECK(now_ms() - t0 >= T_HB_INTERVAL_MS + T_NO_HELLO_MS - 20);

    /* A host that answers them stays. */
    struct tw *t2 = tw_new("echo", &engine);
    load(t2, &o);
    pid_t pid = t2->w.pid;
    spin(4 * T_HB_INTERVAL_MS);
    CHECK_EQ(t2->w.pid, pid);
    CHECK(!t2->w.last_exit.present);
    tw_free(t);
    finish(t2);
}

static void
test_stop(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome o;
    bool gone = false;

    load(t, &o);
    t->w.status = WORKER_STOPPED;
    supervise_apply(sv, &t->w, on_gone, &gone);
    CHECK(!gone);
    CHECK_EQ(t->w.state, WORKER_STATE_STOPPING);
    WAIT_FOR(gone, 10000);
    CHECK(gone);
    CHECK_EQ(t->w.state, WORKER_STATE_STOPPED);
    CHECK(strcmp(t->w.last_exit.reason, "stopped") == 0);
    CHECK_EQ(t->w.last_exit.code, 0);
    CHECK_EQ(supervise_hosts(sv), 0);
    CHECK_EQ(send_event(t, "echo", &o), -1); /* stopped: no events */
    finish(t);

    /* One that ignores Shutdown is killed after the grace. */
    t = tw_new("ignore_shutdown", &engine);
    load(t, &o);
    gone = false;
    int64_t t0 = now_ms();
    t->w.status = WORKER_STOPPED;
    conf.shutdown_grace_ms = T_SHORT_GRACE_MS;
    supervise_apply(sv, &t->w, on_gone, &gone);
    conf.shutdown_grace_ms = T_GRACE_MS;
    WAIT_FOR(gone, 10000);
    CHECK(gone);
    CHECK(now_ms() - t0 >= T_SHORT_GRACE_MS - 20);
    CHECK_EQ(t->w.state, WORKER_STATE_KILLED);
    CHECK(strcmp(t->w.last_exit.reason, "timeout") == 0);
    CHECK_EQ(t->w.last_exit.signal, 9);
    finish(t);

    /* Without a host: stopped at once. */
    t = tw_new("echo", &engine);
    gone = false;
    t->w.status = WORKER_STOPPED;
    supervise_apply(sv, &t->w, on_gone, &gone);
    CHECK(gone);
    CHECK_EQ(t->w.state, WORKER_STATE_STOPPED);
    finish(t);
}

/* An engine of concurrency threads (the default): one host whatever the
 * worker's concurrency (its threads are the host's). */
static void
test_threads(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome e[3];
    int pids[4];

    t->w.limits.concurrency = 3;
    memset(e, 0, sizeof e);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(send_event(t, "span:100", &e[i]), 0);
    WAIT_FOR(e[0].done && e[1].done && e[2].done, 5000);
    CHECK_EQ(supervise_hosts(sv), 1);
    CHECK_EQ(supervise_pids(&t->w, pids, 4), 1);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(span_field(&e[i], "pid"), pids[0]);
        CHECK_EQ(span_field(&e[i], "concurrency"), 3); /* its threads */
    }
    finish(t);
}

/* An engine of concurrency processes, hosts that take one event at a
 * time, a worker of concurrency 3: the hosts start as the queue needs
 * them, events spread over them, a crash fails and restarts only its own,
 * a reload reaches each after its event in flight, a stop ends them all. */
static void
test_processes(void)
{
    struct tw *t = tw_new("echo", &engine_procs);
    struct outcome o, c, e[3];
    int pids[8], pids2[8];
    size_t n;
    bool gone = false;

    t->w.limits.concurrency = 3;
    /* One event at a time: one host. */
    memset(e, 0, sizeof e);
    CHECK_EQ(send_event(t, "echo", &e[0]), 0);
    WAIT_FOR(e[0].done, 5000);
    CHECK_EQ(e[0].nout, 1);
    CHECK_EQ(supervise_hosts(sv), 1);

    /* A burst of three: two more start, each host takes one. */
    memset(e, 0, sizeof e);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(send_event(t, "span:300", &e[i]), 0);
    WAIT_FOR(e[0].done && e[1].done && e[2].done, 10000);
    CHECK_EQ(supervise_hosts(sv), 3);
    n = supervise_pids(&t->w, pids, 8);
    CHECK_EQ(n, 3);
    CHECK_EQ(t->w.pid, pids[0]);
    CHECK(pids[0] != pids[1] && pids[1] != pids[2] && pids[0] != pids[2]);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(e[i].type[0], '\0');
        CHECK(pid_in(span_field(&e[i], "pid"), pids, n));
        /* each process runs one event at a time: the worker's 3 are
         * their number */
        CHECK_EQ(span_field(&e[i], "concurrency"), 1);
        for (int j = 0; j < i; j++)
            CHECK(span_field(&e[i], "pid") != span_field(&e[j], "pid"));
    }
    CHECK_EQ(t->w.state, WORKER_STATE_RUNNING);

    /* The third host crashes while the others work: only its event
     * fails, only it restarts, the worker stays running. */
    t->nseen = 0;
    memset(e, 0, sizeof e);
    memset(&c, 0, sizeof c);
    CHECK_EQ(send_event(t, "sleep:800", &e[0]), 0);
    CHECK_EQ(send_event(t, "sleep:800", &e[1]), 0);
    CHECK_EQ(send_event(t, "crash", &c), 0);
    WAIT_FOR(c.done, 5000);
    CHECK(strcmp(c.type, "crash") == 0);
    WAIT_FOR(e[0].done && e[1].done, 5000);
    CHECK_EQ(e[0].calls, 1);
    CHECK_EQ(e[0].type[0], '\0');
    CHECK_EQ(e[1].calls, 1);
    CHECK_EQ(e[1].type[0], '\0');
    /* (Through pending, the lifecycle's error and restarting events,
     * and back at once.) */
    CHECK(saw(t, WORKER_STATE_PENDING));
    CHECK_EQ(t->w.state, WORKER_STATE_RUNNING);
    WAIT_FOR(supervise_hosts(sv) == 3, 5000);
    CHECK_EQ(supervise_hosts(sv), 3);
    CHECK_EQ(t->w.restarts, 1);
    CHECK(strcmp(t->w.last_exit.reason, "crash") == 0);
    CHECK_EQ(supervise_pids(&t->w, pids2, 8), 3);
    CHECK_EQ(pids2[0], pids[0]);
    CHECK_EQ(pids2[1], pids[1]);
    CHECK(!pid_in(pids2[2], pids, 3));
    memcpy(pids, pids2, sizeof pids);

    /* A reload while each host has an event in flight: the events finish
     * (neither lost nor failed), then every host runs version 2. */
    memset(e, 0, sizeof e);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(send_event(t, "sleep:300", &e[i]), 0);
    spin(50); /* sent */
    t->code = "# version 2\necho";
    t->w.nhistory = 2;
    t->w.version = 2;
    load(t, &o);
    CHECK_EQ(o.type[0], '\0');
    for (int i = 0; i < 3; i++) {
        CHECK(e[i].done);
        CHECK_EQ(e[i].calls, 1);
        CHECK_EQ(e[i].type[0], '\0');
    }
    memset(e, 0, sizeof e);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(send_event(t, "span:100", &e[i]), 0);
    WAIT_FOR(e[0].done && e[1].done && e[2].done, 5000);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(span_field(&e[i], "version"), 2);
        CHECK(pid_in(span_field(&e[i], "pid"), pids, 3));
        for (int j = 0; j < i; j++)
            CHECK(span_field(&e[i], "pid") != span_field(&e[j], "pid"));
    }
    CHECK_EQ(supervise_hosts(sv), 3);
    CHECK_EQ(t->w.restarts, 1);

    /* A stop ends them all; done once the last is gone. */
    t->w.status = WORKER_STOPPED;
    supervise_apply(sv, &t->w, on_gone, &gone);
    CHECK(!gone);
    CHECK_EQ(t->w.state, WORKER_STATE_STOPPING);
    WAIT_FOR(gone, 10000);
    CHECK(gone);
    CHECK_EQ(supervise_hosts(sv), 0);
    CHECK_EQ(supervise_pids(&t->w, pids, 8), 0);
    CHECK_EQ(t->w.pid, 0);
    CHECK_EQ(t->w.state, WORKER_STATE_STOPPED);
    finish(t);
}

/* Hosts of a processes engine are loaded with concurrency 1: whatever
 * their Hello's max_inflight (4 here), slow events are not piled on the
 * first, but spread over the worker's processes as they start. */
static void
test_processes_slow_spread(void)
{
    struct tw *t = tw_new("echo", &engine_procs4);
    struct outcome o, e[4];
    int pids[4];

    t->w.limits.concurrency = 2;
    load(t, &o);
    memset(e, 0, sizeof e);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(send_event(t, "span:300", &e[i]), 0);
    WAIT_FOR(e[0].done && e[1].done && e[2].done && e[3].done, 5000);
    CHECK_EQ(supervise_pids(&t->w, pids, 4), 2);
    int first = 0;
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(e[i].type[0], '\0');
        first += span_field(&e[i], "pid") == pids[0];
    }
    CHECK(first >= 1 && first <= 3); /* both processes ran some */
    finish(t);
}

/* A deadline on one of a worker's processes: its hung event fails, its
 * other events in flight go back to the queue (none fails), the other
 * process's events go on there, and only the hung one is replaced. */
static void
test_processes_deadline(void)
{
    struct tw *t = tw_new("echo", &engine_procs4);
    struct outcome o, h, s[7];
    int pids[4], pids2[4];

    /* As in test_hang: the sleeps start 500 ms after the hang and last
     * 1600 ms, so the hung host's are still in flight at its deadline. */
    t->w.limits.timeout_ms = 2000;
    t->w.limits.concurrency = 2;
    load(t, &o);
    CHECK_EQ(supervise_hosts(sv), 1);
    memset(&h, 0, sizeof h);
    memset(s, 0, sizeof s);
    CHECK_EQ(send_event(t, "hang", &h), 0);
    spin(500);
    /* Three fill the first host, the other four start the second. */
    for (int i = 0; i < 7; i++)
        CHECK_EQ(send_event(t, "sleep:1600", &s[i]), 0);
    WAIT_FOR(supervise_hosts(sv) == 2, 5000);
    CHECK_EQ(supervise_pids(&t->w, pids, 4), 2);
    WAIT_FOR(h.done, 5000);
    CHECK(strcmp(h.type, "timeout") == 0);
    for (int i = 0; i < 3; i++)
        CHECK(!s[i].done); /* requeued, not failed */
    WAIT_FOR(s[0].done && s[1].done && s[2].done && s[3].done && s[4].done &&
                 s[5].done && s[6].done,
             8000);
    for (int i = 0; i < 7; i++) {
        CHECK_EQ(s[i].calls, 1);
        CHECK_EQ(s[i].type[0], '\0');
    }
    WAIT_FOR(supervise_hosts(sv) == 2, 5000);
    CHECK_EQ(supervise_pids(&t->w, pids2, 4), 2);
    CHECK_EQ(pids2[0], pids[1]); /* the second goes on, first now */
    CHECK(pids2[1] != pids[0]);
    CHECK_EQ(t->w.pid, pids2[0]);
    CHECK_EQ(t->w.restarts, 1);
    CHECK(strcmp(t->w.last_exit.reason, "timeout") == 0);
    finish(t);
}

/* Each of a worker's processes is reaped when idle; the worker is idle
 * once the last is gone, never stopping or idle before. */
static void
test_processes_idle(void)
{
    struct tw *t = tw_new("echo", &engine_procs);
    struct outcome e[3];

    t->w.idle_timeout_s = 1;
    t->w.limits.concurrency = 3;
    memset(e, 0, sizeof e);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(send_event(t, "span:200", &e[i]), 0);
    WAIT_FOR(e[0].done && e[1].done && e[2].done, 5000);
    CHECK_EQ(supervise_hosts(sv), 3);
    t->nseen = 0;
    WAIT_FOR(supervise_hosts(sv) == 0, 10000);
    CHECK_EQ(supervise_hosts(sv), 0);
    CHECK_EQ(t->w.state, WORKER_STATE_IDLE);
    CHECK(strcmp(t->w.last_exit.reason, "idle") == 0);
    CHECK_EQ(t->w.pid, 0);
    CHECK_EQ(t->w.restarts, 0);
    /* running → stopping (the last one asked) → idle, once each. */
    CHECK_EQ(t->nseen, 2);
    CHECK(t->nseen == 2 && t->seen[0] == WORKER_STATE_STOPPING &&
          t->seen[1] == WORKER_STATE_IDLE);
    finish(t);
}

/* A version that fails to load in a worker's processes: the reload fails
 * once, with the host's message; the processes that tried it keep serving
 * the version they ran (issue 27), which the caller went back to. */
static void
test_processes_reload_fail(void)
{
    struct tw *t = tw_new("echo", &engine_procs);
    struct outcome o, e[3];

    t->w.limits.concurrency = 3;
    memset(e, 0, sizeof e);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(send_event(t, "span:200", &e[i]), 0);
    WAIT_FOR(e[0].done && e[1].done && e[2].done, 5000);
    CHECK_EQ(supervise_hosts(sv), 3);
    t->code = "load_fail version 2 is broken";
    t->w.nhistory = 2;
    t->w.version = 2;
    load(t, &o);
    CHECK_EQ(o.calls, 1);
    CHECK(strcmp(o.type, "load_error") == 0);
    CHECK(strcmp(o.msg, "version 2 is broken") == 0);
    t->code = "echo"; /* back to version 1, as the API does */
    t->w.nhistory = 1;
    t->w.version = 1;
    CHECK_EQ(supervise_hosts(sv), 3);
    CHECK_EQ(t->w.state, WORKER_STATE_RUNNING);
    memset(e, 0, sizeof e);
    CHECK_EQ(send_event(t, "span:10", &e[0]), 0);
    WAIT_FOR(e[0].done, 5000);
    CHECK_EQ(e[0].type[0], '\0');
    CHECK_EQ(span_field(&e[0], "version"), 1);
    CHECK_EQ(t->w.restarts, 0);
    finish(t);
}

/* A host that prefetches (max_inflight 1, prefetch 2) gets the next two
 * events while it runs one, once its last event was fast, and runs them
 * in order; each event's deadline starts when the host starts it: the
 * third span here ends 900 ms after it was sent, past its 700 ms
 * deadline, yet ran for 300.  After those slow events, it gets one at a
 * time again. */
static void
test_prefetch(void)
{
    struct tw *t = tw_new("echo", &engine_serial);
    struct outcome o, e[3];

    t->w.limits.timeout_ms = 700;
    load(t, &o);
    CHECK_EQ(o.type[0], '\0');
    /* Its first event: nothing known of its speed, nothing queued. */
    memset(e, 0, sizeof e);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(send_event(t, "echo", &e[i]), 0);
    WAIT_FOR(e[0].done && e[1].done && e[2].done, 5000);
    CHECK(strstr(e[0].out_data, "\"queued\":0") != NULL);
    /* The host gets events to queue only while its last one ran under
     * PREFETCH_FAST_US (1 ms): an echo does, unless a loaded machine
     * stretches it.  Up to five tries, each after a fresh echo: a
     * prefetch that never happens still fails. */
    for (int attempt = 0; attempt < 5; attempt++) {
        if (attempt > 0) {
            memset(e, 0, sizeof e);
            CHECK_EQ(send_event(t, "echo", &e[0]), 0);
            WAIT_FOR(e[0].done, 5000);
        }
        memset(e, 0, sizeof e);
        for (int i = 0; i < 3; i++)
            CHECK_EQ(send_event(t, "span:300", &e[i]), 0);
        WAIT_FOR(e[0].done && e[1].done && e[2].done, 5000);
        if (span_field(&e[1], "queued") == 1)
            break;
    }
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(e[i].type[0], '\0');
        CHECK_EQ(e[i].calls, 1);
        CHECK_EQ(span_field(&e[i], "pid"), t->w.pid);
    }
    /* The second started with the third waiting in the host behind it:
     * both were sent while the first ran. */
    CHECK_EQ(span_field(&e[1], "queued"), 1);
    CHECK(e[2].at - e[0].at >= 500);
    /* Its last event took 300 ms: no more queueing. */
    memset(e, 0, sizeof e);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(send_event(t, "span:50", &e[i]), 0);
    WAIT_FOR(e[0].done && e[1].done && e[2].done, 5000);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(span_field(&e[i], "queued"), 0);
    CHECK_EQ(t->w.restarts, 0);
    finish(t);
}

/* A host that dies with prefetched events: the one it ran fails with the
 * death's reason, those it had not started run on the next host. */
static void
test_prefetch_crash(void)
{
    struct tw *t = tw_new("echo", &engine_serial);
    struct outcome o, c, e[2];

    load(t, &o);
    memset(e, 0, sizeof e);
    CHECK_EQ(send_event(t, "echo", &e[0]), 0); /* a fast one first */
    WAIT_FOR(e[0].done, 5000);
    memset(&c, 0, sizeof c);
    memset(e, 0, sizeof e);
    CHECK_EQ(send_event(t, "crash", &c), 0);
    CHECK_EQ(send_event(t, "echo", &e[0]), 0);
    CHECK_EQ(send_event(t, "echo", &e[1]), 0);
    WAIT_FOR(c.done && e[0].done && e[1].done, 5000);
    CHECK(strcmp(c.type, "crash") == 0);
    CHECK_EQ(e[0].type[0], '\0');
    CHECK_EQ(e[1].type[0], '\0');
    CHECK_EQ(e[0].calls, 1);
    CHECK_EQ(e[1].calls, 1);
    CHECK_EQ(t->w.restarts, 1);
    finish(t);
}

static void
test_forget(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome o, e;

    load(t, &o);
    memset(&e, 0, sizeof e);
    CHECK_EQ(send_event(t, "hang", &e), 0);
    spin(100);
    supervise_forget(sv, &t->w);
    CHECK(e.done); /* before the forget returns */
    CHECK(strcmp(e.type, "deleted") == 0);
    CHECK(t->w.host == NULL);
    finish(t);
}

static void
test_orphan(void)
{
    struct tw *t = tw_new("echo", &engine);
    struct outcome e;

    memset(&e, 0, sizeof e);
    CHECK_EQ(send_event(t, "orphan", &e), 0);
    WAIT_FOR(e.done, 5000);
    CHECK_EQ(e.nout, 1);
    bool gone = false;
    t->w.status = WORKER_STOPPED;
    supervise_apply(sv, &t->w, on_gone, &gone);
    WAIT_FOR(gone, 10000);
    CHECK(strcmp(t->w.last_exit.reason, "stopped") == 0);
    /* Its child outlived it, came to us and is reaped. */
    WAIT_FOR(count_children() == 0, 10000);
    CHECK_EQ(count_children(), 0);
    finish(t);
}

static void
on_all_gone(void *arg)
{
    *(bool *)arg = true;
}

static void
test_shutdown(void)
{
    struct tw *a = tw_new("echo", &engine);
    struct tw *b = tw_new("ignore_shutdown", &engine);
    struct outcome o;
    bool done = false;

    load(a, &o);
    load(b, &o);
    CHECK_EQ(supervise_hosts(sv), 2);
    /* b is killed after the grace; a has it to exit. */
    supervise_shutdown(sv, 2500, on_all_gone, &done);
    WAIT_FOR(done, 10000);
    CHECK(done);
    CHECK_EQ(supervise_hosts(sv), 0);
    CHECK_EQ(a->w.state, WORKER_STATE_STOPPED);
    CHECK_EQ(b->w.state, WORKER_STATE_KILLED);
    CHECK_EQ(send_event(a, "echo", &o), -1);
    tw_free(a);
    tw_free(b);
}

/* ---- main -------------------------------------------------------------- */

/* RUN, with the test's duration on stderr (to see where the time goes). */
#define RUN_TIMED(fn)                                                          \
    do {                                                                       \
        int64_t run_t0_ = now_ms();                                            \
        RUN(fn);                                                               \
        fprintf(stderr, "test_supervise: %s took %lld ms\n", #fn,              \
                (long long)(now_ms() - run_t0_));                              \
    } while (0)

static int
setup(int argc, char **argv)
{
    const char *bin = getenv("WM_TEST_HOST");
    char beside[PATH_MAX];

    if ((bin == NULL || *bin == '\0') && argc > 1)
        bin = argv[1];
    if (bin == NULL || *bin == '\0') {
        /* The build tree: tests/unit/test_supervise and
         * tests/testhost/wm-host-test. */
        const char *slash = strrchr(argv[0], '/');
        int dir = slash ? (int)(slash - argv[0]) : 1;
        snprintf(beside, sizeof beside, "%.*s/../testhost/wm-host-test", dir,
                 slash ? argv[0] : ".");
        bin = beside;
    }
    if (realpath(bin, host_bin) == NULL || access(host_bin, X_OK) != 0) {
        fprintf(stderr,
                "test_supervise: no test host at %s (set "
                "WM_TEST_HOST): %s\n",
                bin, strerror(errno));
        return -1;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_supervise.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return -1;
    }
    snprintf(nohello_bin, sizeof nohello_bin, "%s/wm-host-test.no_hello",
             tmpdir);
    snprintf(badproto_bin, sizeof badproto_bin, "%s/wm-host-test.bad_protocol",
             tmpdir);
    snprintf(inflight1_bin, sizeof inflight1_bin, "%s/wm-host-test.inflight1",
             tmpdir);
    snprintf(serial2_bin, sizeof serial2_bin, "%s/wm-host-test.serial2",
             tmpdir);
    if (symlink(host_bin, nohello_bin) < 0 ||
        symlink(host_bin, badproto_bin) < 0 ||
        symlink(host_bin, inflight1_bin) < 0 ||
        symlink(host_bin, serial2_bin) < 0) {
        perror("symlink");
        return -1;
    }

    engine = (struct engines_entry){
        .name = (char *)(uintptr_t) "test",
        .host_path = host_bin,
        .spawn = ENGINES_SPAWN_EXEC,
        .role = (char *)(uintptr_t) "native",
        .protocol = 1,
        .available = true,
    };
    engine_nohello = engine;
    engine_nohello.name = (char *)(uintptr_t) "test-nohello";
    engine_nohello.host_path = nohello_bin;
    engine_badproto = engine;
    engine_badproto.name = (char *)(uintptr_t) "test-badproto";
    engine_badproto.host_path = badproto_bin;
    engine_missing = engine;
    engine_missing.name = (char *)(uintptr_t) "test-missing";
    engine_missing.host_path = (char *)(uintptr_t) "/nonexistent/wm-host-test";
    engine_procs = engine;
    engine_procs.name = (char *)(uintptr_t) "test-procs";
    engine_procs.host_path = inflight1_bin;
    engine_procs.concurrency = ENGINES_CONCURRENCY_PROCESSES;
    engine_procs4 = engine;
    engine_procs4.name = (char *)(uintptr_t) "test-procs4";
    engine_procs4.concurrency = ENGINES_CONCURRENCY_PROCESSES;
    engine_serial = engine;
    engine_serial.name = (char *)(uintptr_t) "test-serial";
    engine_serial.host_path = serial2_bin;

    conf.message_timeout_ms = T_MESSAGE_MS;
    conf.handshake_timeout_ms = T_HANDSHAKE_MS;
    conf.heartbeat_interval_ms = T_HB_INTERVAL_MS;
    conf.heartbeat_timeout_ms = T_HB_TIMEOUT_MS;
    conf.idle_timeout_s = 300;
    conf.shutdown_grace_ms = T_GRACE_MS;
    conf.restart_base_delay_ms = T_RESTART_BASE_MS;
    conf.restart_max_delay_ms = T_RESTART_MAX_MS;
    conf.crash_loop_max = T_CRASH_LOOP_MAX;
    conf.crash_loop_window_s = 30;
    conf.max_frame_bytes = 1024 * 1024;
    return 0;
}

int
main(int argc, char **argv)
{
    struct timeval tv = { 0, 20 * 1000 };

    log_init(LOG_INFO, "test_supervise");
    if (setup(argc, argv) < 0)
        return 1;
    int fds_before = check_count_fds();
    base = event_base_new();
    tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
    if (base == NULL || tick == NULL || event_add(tick, &tv) < 0)
        return 1;
    struct engines_entry list[] = { engine,          engine_nohello,
                                    engine_badproto, engine_missing,
                                    engine_procs,    engine_procs4,
                                    engine_serial };
    const struct engines engines = { .v = list, .n = 7 };
    char err[512];
    /* Hosts unconfined: this test is about supervision (the sandbox's
     * own tests confine). */
    sv = supervise_new(base, &conf, &engines, NULL, &hooks, NULL, err,
                       sizeof err);
    if (sv == NULL) {
        fprintf(stderr, "supervise_new: %s\n", err);
        return 1;
    }

    RUN_TIMED(test_load_ok);
    RUN_TIMED(test_load_fail);
    RUN_TIMED(test_no_hello);
    RUN_TIMED(test_bad_protocol);
    RUN_TIMED(test_spawn_fail);
    RUN_TIMED(test_echo);
    RUN_TIMED(test_fail);
    RUN_TIMED(test_crash);
    RUN_TIMED(test_hang);
    RUN_TIMED(test_malformed);
    RUN_TIMED(test_bad_frame);
    RUN_TIMED(test_hang_load);
    RUN_TIMED(test_reload_fail);
    RUN_TIMED(test_exit0);
    RUN_TIMED(test_crash_loop);
    RUN_TIMED(test_idle);
    RUN_TIMED(test_heartbeat);
    RUN_TIMED(test_stop);
    RUN_TIMED(test_forget);
    RUN_TIMED(test_orphan);
    RUN_TIMED(test_threads);
    RUN_TIMED(test_processes);
    RUN_TIMED(test_processes_deadline);
    RUN_TIMED(test_processes_slow_spread);
    RUN_TIMED(test_processes_idle);
    RUN_TIMED(test_processes_reload_fail);
    RUN_TIMED(test_prefetch);
    RUN_TIMED(test_prefetch_crash);
    RUN_TIMED(test_shutdown); /* last: the supervisor takes no work after it */

    supervise_free(sv);
    event_free(tick);
    event_base_free(base);
    check_test = "main";
    CHECK_EQ(count_children(), 0);
    CHECK_EQ(check_count_fds(), fds_before);
    unlink(nohello_bin);
    unlink(badproto_bin);
    unlink(inflight1_bin);
    unlink(serial2_bin);
    rmdir(tmpdir);
    return check_result();
}
