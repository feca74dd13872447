/*
 * test_broker_nats.c — the broker's nats backend (master/broker/
 * broker_nats*.c) through master/broker/broker.h, against a real
 * `nats-server -js` (tests/unit/nats_server.h).  Each test uses names of
 * its own (a prefix per test: its own stream), so the tests share one
 * server and start empty.
 *
 * What the integration tests cannot force is here: a publish refused
 * while NATS is away (EIO, the health saying so, no callback); redelivery
 * after a nack, counted; the max-deliveries advisory turned into the
 * exhausted hook with the stored event; a live subscription seeing what
 * is published.
 */
#include "config.h"

#include "master/broker/broker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "ipc/cloudevent.h"
#include "ipc/fb.h"
#include "lib/timestamp.h"
#include "master/core/nats_link.h"
#include "tests/unit/check.h"
#include "tests/unit/nats_server.h"

static char root[] = "/tmp/test_broker_nats.XXXXXX";
static struct nats_server srv = { .dir = root, .pid = -1 };
static struct event_base *base;
static unsigned prefix_seq;
static char prefix[32];

/* ---- helpers ------------------------------------------------------------ */

static int
verify(const uint8_t *ev, size_t len)
{
    struct ipc_cloudevent ce;
    struct ipc_fb_error e;

    return ipc_cloudevent_read(ev, len, &ce, &e);
}

static uint32_t max_age_s; /* the next open's nats_max_age_s */
static bool same_prefix;   /* the next open's stream is the last one's */

static struct broker *
open_broker(uint32_t max_deliver)
{
    static struct nats_link_config nl;
    char err[512];

    nl = (struct nats_link_config){ .url = srv.url, .who = "test" };
    if (!same_prefix)
        snprintf(prefix, sizeof prefix, "t%u", ++prefix_seq);
    same_prefix = false;
    struct broker_config cfg = {
        .backend = "nats",
        .verify = verify,
        .nats = &nl,
        .nats_prefix = prefix,
        .nats_memory = 1,
        .nats_ack_wait_ms = 30000,
        .nats_max_deliver = max_deliver,
        .nats_max_age_s = max_age_s,
    };
    struct broker *b = broker_open(&cfg, base, err, sizeof err);
    if (b == NULL)
        fprintf(stderr, "%s: broker_open: %s\n", check_test, err);
    return b;
}

/* An ABI CloudEvent of id `id`, in eb. */
static void
make_event(struct ipc_fb_builder *eb, const char *id)
{
    struct ipc_cloudevent ce;

    memset(&ce, 0, sizeof ce);
    ce.id = ipc_str_c(id);
    ce.type = ipc_str_c("t");
    ce.source = ipc_str_c("/test");
    ce.specversion = ipc_str_c("1.0");
    ipc_fb_builder_reset(eb);
    if (ipc_cloudevent_encode(eb, &ce) != 0)
        abort();
}

static void
run_for(int ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
}

/* Runs the loop until *flag or ms passed. */
static void
run_until(const int *flag, int ms)
{
    for (int t = 0; t < ms && !*flag; t += 20)
        run_for(20);
}

/* The test's own connection to JetStream, beside the broker's. */
struct jsv {
    natsConnection *nc;
    jsCtx *js;
};

/* The info of the current test's stream (NULL when it cannot be had);
 * close v with jsv_close() either way. */
static jsStreamInfo *
jsv_stream(struct jsv *v)
{
    char name[64];
    jsStreamInfo *si = NULL;

    memset(v, 0, sizeof *v);
    snprintf(name, sizeof name, "%s_events", prefix);
    if (natsConnection_ConnectTo(&v->nc, srv.url) != NATS_OK ||
        natsConnection_JetStream(&v->js, v->nc, NULL) != NATS_OK ||
        js_GetStreamInfo(&si, v->js, name, NULL, NULL) != NATS_OK)
        return NULL;
    return si;
}

static void
jsv_close(struct jsv *v)
{
    jsCtx_Destroy(v->js);
    natsConnection_Destroy(v->nc);
}

struct seen {
    int n;
    char ids[16][32];
    uint32_t counts[16];
    bool nack; /* nack each delivery at once */
    bool ack;
};

static void
on_deliver(struct broker_delivery *d, void *arg)
{
    struct seen *s = arg;
    struct ipc_cloudevent ce;

    ipc_cloudevent_decode_trusted(d->event, &ce);
    if (s->n < 16) {
        snprintf(s->ids[s->n], sizeof s->ids[0], "%.*s", (int)ce.id.len,
                 ce.id.ptr);
        s->counts[s->n] = d->count;
    }
    s->n++;
    if (s->nack)
        broker_nack(d, 0);
    else if (s->ack)
        broker_ack(d);
}

/* A worker's subscription of topic as the daemon makes it (from the
 * worker's creation: now), its deliveries counted in s. */
static struct broker_sub_spec
worker_spec(const char *topic, struct seen *s)
{
    return (struct broker_sub_spec){
        .tenant = "ten.ant",
        .topic = topic,
        .name = "w1",
        .max_inflight = 8,
        .deliver = on_deliver,
        .since_ms = timestamp_now_ms(), /* as the daemon's workers */
        .arg = s,
    };
}

struct published {
    int done, error;
};

static void
on_published(int error, void *arg)
{
    struct published *p = arg;

    p->done = 1;
    p->error = error;
}

static int
publish_wait(struct broker *b, const char *topic, const char *id)
{
    struct ipc_fb_builder eb;
    struct published p = { 0, 0 };

    ipc_fb_builder_init(&eb);
    make_event(&eb, id);
    int rc =
        broker_publish(b, "ten.ant", topic, eb.buf, eb.len, on_published, &p);
    ipc_fb_builder_free(&eb);
    if (rc != 0)
        return -1;
    run_until(&p.done, 5000);
    return p.done ? p.error : -2;
}

/* ---- tests ------------------------------------------------------------ */

/* Published events reach a durable subscription once each, in order, with
 * count 1; acknowledged, they are not delivered again to the next
 * subscription of the name. */
static void
test_publish_deliver_ack(void)
{
    struct broker *b = open_broker(0);
    struct seen s = { .ack = true };
    struct broker_sub_spec spec = worker_spec("a.b", &s);

    REQUIRE(b != NULL);
    struct broker_sub *sub = broker_subscribe(b, &spec);
    REQUIRE(sub != NULL);
    run_for(200); /* its consumer is made */
    CHECK(publish_wait(b, "a.b", "e1") == 0);
    CHECK(publish_wait(b, "a.b", "e2") == 0);
    CHECK(publish_wait(b, "other", "x") == 0); /* not its topic */
    for (int t = 0; t < 3000 && s.n < 2; t += 20)
        run_for(20);
    CHECK(s.n == 2);
    CHECK(strcmp(s.ids[0], "e1") == 0 && strcmp(s.ids[1], "e2") == 0);
    CHECK(s.counts[0] == 1 && s.counts[1] == 1);
    broker_unsubscribe(sub, true);
    run_for(200);
    struct seen s2 = { .ack = true };
    spec.arg = &s2;
    sub = broker_subscribe(b, &spec);
    REQUIRE(sub != NULL);
    run_for(700);
    CHECK(s2.n == 0); /* acknowledged: not again */
    struct broker_stats st;
    broker_stats(b, &st);
    CHECK(st.published == 3 && st.acked == 2);
    broker_close(b);
}

/* A broker's first requests are answered: its inbox is known to the
 * server before it asks (both go on one connection).  When the requests
 * went on the other one, a consumer's creation answer was now and then
 * dropped and the subscription waited 6 s for the retry (1 open in 10
 * beside two CPU hogs).  Each round asks at once after the open. */
static void
test_first_request_answered(void)
{
    for (int round = 0; round < 8; round++) {
        struct broker *b = open_broker(0);
        struct seen s = { .ack = true };
        struct broker_sub_spec spec = worker_spec("first", &s);

        REQUIRE(b != NULL);
        struct broker_sub *sub = broker_subscribe(b, &spec);
        REQUIRE(sub != NULL);
        CHECK(publish_wait(b, "first", "f1") == 0);
        /* well within the 6 s after which a lost answer is retried */
        for (int t = 0; t < 2500 && s.n < 1; t += 20)
            run_for(20);
        CHECK(s.n == 1);
        broker_unsubscribe(sub, true);
        broker_close(b);
    }
}

/* Stops the server (SIGSTOP) and waits until each of its threads is
 * stopped: kill() returns before they all are, and one still running could
 * answer what is asked next. */
static void
server_freeze(void)
{
    char dir[64], path[64 + sizeof((struct dirent *)0)->d_name + 8];

    snprintf(dir, sizeof dir, "/proc/%d/task", (int)srv.pid);
    kill(srv.pid, SIGSTOP);
    for (int t = 0; t < 5000; t += 5) {
        DIR *d = opendir(dir);
        struct dirent *e;
        bool all = d != NULL;

        while (all && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s/stat", dir, e->d_name);
            const char *st = check_slurp(path), *end;
            /* "tid (comm) S ...": the state after the last ')' */
            all = st != NULL && (end = strrchr(st, ')')) != NULL &&
                  (end[2] == 'T' || end[2] == 't');
        }
        if (d != NULL)
            closedir(d);
        if (all)
            return;
        usleep(5000);
    }
    CHECK(!"nats-server stopped within 5 s");
}

/* A creation JetStream leaves unanswered is said (once a tick, however
 * many) when it is asked again, and the subscription works once the
 * answer comes.  The server is stopped (SIGSTOP) meanwhile: the
 * connection stays up, nothing answers. */
static void
test_silent_creation_is_warned(void)
{
    char path[sizeof root + 16];
    struct broker *b = open_broker(0);
    struct seen s = { .ack = true };
    struct broker_sub_spec spec = worker_spec("quiet", &s);

    REQUIRE(b != NULL);
    snprintf(path, sizeof path, "%s/stderr", root);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int saved = dup(2);
    REQUIRE(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, 2);
    server_freeze();
    struct broker_sub *sub = broker_subscribe(b, &spec);
    /* The retry of an unanswered creation comes after 6 s (a loaded
     * machine's ticks may be late: up to 20 s are given). */
    const char *said = NULL, *warned = NULL;
    for (int t = 0; t < 20000 && warned == NULL; t += 100) {
        run_for(100);
        said = check_slurp(path);
        warned = said ? strstr(said, "did not answer the creation of 1 "
                                     "consumer(s)")
                      : NULL;
    }
    kill(srv.pid, SIGCONT);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    REQUIRE(sub != NULL);
    CHECK(warned != NULL && strstr(warned, "ten.ant/quiet, w1"));
    fputs(said ? said : "", stderr);
    CHECK(publish_wait(b, "quiet", "q1") == 0);
    for (int t = 0; t < 3000 && s.n < 1; t += 20)
        run_for(20);
    CHECK(s.n == 1);
    broker_unsubscribe(sub, true);
    broker_close(b);
}

/* A subscription with since_ms gets the events published from then on,
 * even those stored before its consumer was made (a worker's first
 * events, published just after its 201); without it, only what comes
 * after.  A consumer made before with "new" (an earlier version) is
 * bound as it is. */
static void
test_since(void)
{
    struct broker *b = open_broker(0);
    struct seen s = { .ack = true }, s2 = { .ack = true };
    struct broker_sub_spec spec = {
        .tenant = "ten.ant",
        .topic = "since",
        .name = "w1",
        .max_inflight = 8,
        .deliver = on_deliver,
        .arg = &s,
    };

    REQUIRE(b != NULL);
    int64_t t0 = timestamp_now_ms();
    CHECK(publish_wait(b, "since", "before") == 0);
    spec.since_ms = t0;
    struct broker_sub *sub = broker_subscribe(b, &spec);
    REQUIRE(sub != NULL);
    CHECK(publish_wait(b, "since", "after") == 0);
    for (int t = 0; t < 3000 && s.n < 2; t += 20)
        run_for(20);
    CHECK_EQ(s.n, 2);
    CHECK(strcmp(s.ids[0], "before") == 0 && strcmp(s.ids[1], "after") == 0);
    broker_unsubscribe(sub, true);

    /* "new" (since_ms 0): the event stored before is not its. */
    spec.name = "w2";
    spec.since_ms = 0;
    spec.arg = &s2;
    sub = broker_subscribe(b, &spec);
    REQUIRE(sub != NULL);
    run_for(300); /* its consumer is made */
    CHECK(publish_wait(b, "since", "later") == 0);
    for (int t = 0; t < 3000 && s2.n < 1; t += 20)
        run_for(20);
    run_for(200);
    CHECK_EQ(s2.n, 1);
    CHECK(strcmp(s2.ids[0], "later") == 0);
    broker_unsubscribe(sub, true);
    run_for(200);
    broker_close(b); /* a new daemon: no pull of the last one left */
    same_prefix = true;
    b = open_broker(0);
    REQUIRE(b != NULL);

    /* The same consumer asked for again with a start: bound as it is. */
    struct seen s3 = { .ack = true };
    spec.since_ms = t0;
    spec.arg = &s3;
    sub = broker_subscribe(b, &spec);
    REQUIRE(sub != NULL);
    run_for(300);
    CHECK(publish_wait(b, "since", "last") == 0);
    for (int t = 0; t < 3000 && s3.n < 1; t += 20)
        run_for(20);
    run_for(200);
    CHECK_EQ(s3.n, 1);
    CHECK(s3.n >= 1 && strcmp(s3.ids[0], "last") == 0);
    broker_unsubscribe(sub, false);
    broker_close(b);
}

/* A nack delivers again, counting one more delivery. */
static void
test_nack_counts(void)
{
    struct broker *b = open_broker(0);
    struct seen s = { .nack = true };
    struct broker_sub_spec spec = worker_spec("n", &s);

    spec.max_inflight = 1;
    REQUIRE(b != NULL);
    REQUIRE(broker_subscribe(b, &spec) != NULL);
    run_for(200);
    CHECK(publish_wait(b, "n", "e1") == 0);
    for (int t = 0; t < 3000 && s.n < 3; t += 20)
        run_for(20);
    CHECK(s.n >= 3);
    CHECK(s.counts[0] == 1 && s.counts[1] == 2 && s.counts[2] == 3);
    broker_close(b);
}

struct exhausted {
    int n;
    char tenant[64], topic[64], id[32];
    uint32_t deliveries;
};

static void
on_exhausted(const char *tenant, const char *topic, const uint8_t *event,
             size_t len, uint32_t deliveries, void *arg)
{
    struct exhausted *x = arg;
    struct ipc_cloudevent ce;
    struct ipc_fb_error e;

    x->n++;
    snprintf(x->tenant, sizeof x->tenant, "%s", tenant);
    snprintf(x->topic, sizeof x->topic, "%s", topic);
    if (ipc_cloudevent_read(event, len, &ce, &e) == 0)
        snprintf(x->id, sizeof x->id, "%.*s", (int)ce.id.len, ce.id.ptr);
    x->deliveries = deliveries;
}

/* After nats_max_deliver deliveries none of which settled it, JetStream
 * stops; its advisory brings the stored event to the exhausted hook. */
static void
test_max_deliveries_reach_the_hook(void)
{
    struct broker *b = open_broker(2);
    struct seen s = { .nack = true };
    struct exhausted x = { 0 };
    struct broker_sub_spec spec = worker_spec("d.x", &s);

    spec.name = "group:g";
    spec.max_inflight = 1;
    REQUIRE(b != NULL);
    broker_set_exhausted_hook(b, on_exhausted, &x);
    REQUIRE(broker_subscribe(b, &spec) != NULL);
    run_for(200);
    CHECK(publish_wait(b, "d.x", "poison") == 0);
    run_until(&x.n, 5000);
    CHECK(s.n == 2); /* two deliveries, no third */
    CHECK(x.n == 1);
    CHECK(strcmp(x.tenant, "ten.ant") == 0);
    CHECK(strcmp(x.topic, "d.x") == 0);
    CHECK(strcmp(x.id, "poison") == 0);
    CHECK(x.deliveries == 2);
    struct broker_stats st;
    broker_stats(b, &st);
    CHECK(st.exhausted == 1);
    broker_close(b);
}

/* A live subscription of every topic sees what is published, named. */
static void
test_live(void)
{
    struct broker *b = open_broker(0);
    struct seen s = { 0 };
    struct broker_sub_spec spec = {
        .tenant = "*",
        .topic = "*",
        .live = true,
        .deliver = on_deliver,
        .arg = &s,
    };

    REQUIRE(b != NULL);
    struct broker_sub *sub = broker_subscribe(b, &spec);
    REQUIRE(sub != NULL);
    run_for(100);
    CHECK(publish_wait(b, "l.i.v.e", "e1") == 0);
    for (int t = 0; t < 2000 && s.n < 1; t += 20)
        run_for(20);
    CHECK(s.n == 1 && strcmp(s.ids[0], "e1") == 0);
    broker_unsubscribe(sub, false);
    broker_close(b);
}

/* The stream: P_events on P.ev.>, kept by age (nats_max_age_s). */
static void
test_stream_settings(void)
{
    struct jsv v;
    jsStreamInfo *si;

    max_age_s = 3600;
    struct broker *b = open_broker(0);
    max_age_s = 0;
    REQUIRE(b != NULL);
    si = jsv_stream(&v);
    CHECK(si != NULL);
    if (si != NULL) {
        CHECK(si->Config->MaxAge == (int64_t)3600 * 1000000000);
        CHECK(si->Config->Retention == js_LimitsPolicy);
        CHECK(si->Config->SubjectsLen == 1);
        jsStreamInfo_Destroy(si);
    }
    jsv_close(&v);
    broker_close(b);
}

/* An unhurried publish that JetStream refuses (here: larger than the
 * stream's MaxMsgSize, set behind the broker's back) fails nobody's
 * batch: the next publish with a callback answers 0. */
static void
test_unhurried_failure_is_nobodys(void)
{
    char big[512];
    struct jsv v;
    jsStreamInfo *si;
    struct ipc_fb_builder eb;
    struct ipc_cloudevent ce;

    struct broker *b = open_broker(0);
    REQUIRE(b != NULL);
    REQUIRE((si = jsv_stream(&v)) != NULL);
    si->Config->MaxMsgSize = 300;
    CHECK(js_UpdateStream(NULL, v.js, si->Config, NULL, NULL) == NATS_OK);
    jsStreamInfo_Destroy(si);
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memset(&ce, 0, sizeof ce);
    ce.id = ipc_str_c("big");
    ce.type = ipc_str_c("t");
    ce.source = ipc_str_c("/test");
    ce.specversion = ipc_str_c("1.0");
    ce.data.ptr = (const uint8_t *)big;
    ce.data.len = (uint32_t)strlen(big);
    ipc_fb_builder_init(&eb);
    REQUIRE(ipc_cloudevent_encode(&eb, &ce) == 0);
    CHECK(broker_publish_unhurried(b, "ten.ant", "u", eb.buf, eb.len) == 0);
    ipc_fb_builder_free(&eb);
    CHECK(publish_wait(b, "u", "small") == 0);
    jsv_close(&v);
    broker_close(b);
}

/* While NATS is away a publish fails at once (EIO), the health says the
 * broker is remote and not reachable; once it is back, publishes go
 * through again without a new broker. */
static void
test_outage(void)
{
    struct broker *b = open_broker(0);
    struct broker_health h;
    struct ipc_fb_builder eb;

    REQUIRE(b != NULL);
    CHECK(publish_wait(b, "o", "before") == 0);
    nats_server_stop(&srv);
    run_for(300); /* the tick sees the connection gone */
    ipc_fb_builder_init(&eb);
    make_event(&eb, "during");
    errno = 0;
    CHECK(broker_publish(b, "ten.ant", "o", eb.buf, eb.len, NULL, NULL) == -1);
    CHECK(errno == EIO);
    ipc_fb_builder_free(&eb);
    broker_health(b, &h);
    CHECK(h.remote && !h.writable);
    CHECK(strstr(h.message, "not connected to NATS at") != NULL);
    REQUIRE(nats_server_start(&srv) == 0);
    for (int t = 0; t < 5000; t += 50) {
        run_for(50);
        broker_health(b, &h);
        if (h.writable)
            break;
    }
    CHECK(h.writable && h.recoveries == 1);
    /* memory storage: the stream went with the server; the broker made it
     * at open only, so the publish is refused now by JetStream, not by
     * the client: an error, never a false success */
    int rc = publish_wait(b, "o", "after");
    CHECK(rc != 0);
    broker_close(b);
}

/* ---- batches: several events per message (event_bundle.h) --------------- */

/* A batch's events, e<first>..e<first + n - 1>, data of `fill` bytes. */
struct batch {
    struct ipc_fb_builder eb[300];
    struct broker_event evs[300];
    size_t n;
};

static void
batch_make(struct batch *bt, size_t n, size_t fill)
{
    static char data[70000];
    struct ipc_cloudevent ce;
    char id[32];

    memset(data, 'd', sizeof data);
    bt->n = n;
    for (size_t i = 0; i < n; i++) {
        snprintf(id, sizeof id, "e%zu", i);
        memset(&ce, 0, sizeof ce);
        ce.id = ipc_str_c(id);
        ce.type = ipc_str_c("t");
        ce.source = ipc_str_c("/test");
        ce.specversion = ipc_str_c("1.0");
        ce.data.ptr = (const uint8_t *)data;
        ce.data.len = (uint32_t)(fill < sizeof data ? fill : sizeof data);
        ipc_fb_builder_init(&bt->eb[i]);
        if (ipc_cloudevent_encode(&bt->eb[i], &ce) != 0)
            abort();
        bt->evs[i].event = bt->eb[i].buf;
        bt->evs[i].len = bt->eb[i].len;
    }
}

static void
batch_free(struct batch *bt)
{
    for (size_t i = 0; i < bt->n; i++)
        ipc_fb_builder_free(&bt->eb[i]);
}

static int
batch_publish_wait(struct broker *b, const char *topic, struct batch *bt)
{
    struct published p = { 0, 0 };
    size_t accepted = 0;

    if (broker_publish_batch(b, "ten.ant", topic, bt->evs, bt->n, on_published,
                             &p, &accepted) != 0)
        return -1;
    if (accepted != bt->n)
        return -3;
    run_until(&p.done, 5000);
    return p.done ? p.error : -2;
}

/* The messages the test's stream holds. */
static int64_t
stream_msgs(void)
{
    struct jsv v;
    jsStreamInfo *si = jsv_stream(&v);
    int64_t n = -1;

    if (si != NULL) {
        n = (int64_t)si->State.Msgs;
        jsStreamInfo_Destroy(si);
    }
    jsv_close(&v);
    return n;
}

/* What a batch subscriber saw: each event's id number in order, counts;
 * the deliveries it keeps unsettled. */
struct bseen {
    int n;
    int order[600];
    uint32_t counts[600];
    int nack_first; /* nack this id's first delivery (-1: none) */
    bool hold;      /* keep deliveries unsettled (in held) */
    struct broker_delivery *held[600];
    int nheld;
};

static void
on_batch_deliver(struct broker_delivery *d, void *arg)
{
    struct bseen *s = arg;
    struct ipc_cloudevent ce;
    int id;

    ipc_cloudevent_decode_trusted(d->event, &ce);
    CHECK(((uintptr_t)d->event & 7) == 0);
    id = atoi(ce.id.ptr + 1);
    if (s->n < 600) {
        s->order[s->n] = id;
        s->counts[s->n] = d->count;
    }
    s->n++;
    if (s->hold) {
        if (s->nheld < 600)
            s->held[s->nheld++] = d;
    } else if (id == s->nack_first && d->count == 1) {
        broker_nack(d, 50);
    } else {
        broker_ack(d);
    }
}

static struct broker_sub *
batch_subscribe(struct broker *b, const char *topic, struct bseen *s,
                unsigned max_inflight)
{
    struct broker_sub_spec spec = {
        .tenant = "ten.ant",
        .topic = topic,
        .name = "w1",
        .max_inflight = max_inflight,
        .deliver = on_batch_deliver,
        .since_ms = timestamp_now_ms(), /* as the daemon's workers */
        .arg = s,
    };

    return broker_subscribe(b, &spec);
}

/* A batch of 250 is one message in the stream; its events reach the
 * subscription in order, 8-aligned, once; acknowledged, they are not
 * delivered again; the same batch published again (a client's retry) is
 * not stored twice. */
static void
test_batch_is_one_message(void)
{
    struct broker *b = open_broker(0);
    struct bseen s = { .nack_first = -1 };
    static struct batch bt;

    REQUIRE(b != NULL);
    struct broker_sub *sub = batch_subscribe(b, "bt", &s, 64);
    REQUIRE(sub != NULL);
    run_for(200);
    batch_make(&bt, 250, 10);
    CHECK(batch_publish_wait(b, "bt", &bt) == 0);
    CHECK(stream_msgs() == 1);
    for (int t = 0; t < 5000 && s.n < 250; t += 20)
        run_for(20);
    CHECK(s.n == 250);
    bool ordered = true;
    for (int i = 0; i < 250 && i < s.n; i++)
        ordered = ordered && s.order[i] == i && s.counts[i] == 1;
    CHECK(ordered);
    CHECK(batch_publish_wait(b, "bt", &bt) == 0); /* a retry */
    CHECK(stream_msgs() == 1);
    broker_unsubscribe(sub, true);
    run_for(200);
    struct bseen s2 = { .nack_first = -1 };
    REQUIRE(batch_subscribe(b, "bt", &s2, 64) != NULL);
    run_for(700);
    CHECK(s2.n == 0); /* acknowledged, and the retry dropped */
    CHECK(s.n == 250);
    struct broker_stats st;
    broker_stats(b, &st);
    CHECK(st.published == 500 && st.acked == 250);
    batch_free(&bt);
    broker_close(b);
}

/* A nacked event of a bundle is delivered again alone, counting one
 * more; the others are not. */
static void
test_batch_nack_one(void)
{
    struct broker *b = open_broker(0);
    struct bseen s = { .nack_first = 2 };
    static struct batch bt;

    REQUIRE(b != NULL);
    struct broker_sub *sub = batch_subscribe(b, "bn", &s, 8);
    REQUIRE(sub != NULL);
    run_for(200);
    batch_make(&bt, 5, 10);
    CHECK(batch_publish_wait(b, "bn", &bt) == 0);
    for (int t = 0; t < 3000 && s.n < 6; t += 20)
        run_for(20);
    run_for(300);
    CHECK(s.n == 6);
    CHECK(s.order[5] == 2 && s.counts[5] == 2);
    broker_unsubscribe(sub, true);
    run_for(200);
    struct bseen s2 = { .nack_first = -1 };
    REQUIRE(batch_subscribe(b, "bn", &s2, 8) != NULL);
    run_for(700);
    CHECK(s2.n == 0);
    batch_free(&bt);
    broker_close(b);
}

/* A bundle this instance lets go unfinished (its subscription ended with
 * keep) goes back whole: the next subscription of the name gets every
 * event of it again, counted twice (the settled ones are duplicates). */
static void
test_batch_goes_back_whole(void)
{
    struct broker *b = open_broker(0);
    struct bseen s = { .nack_first = -1, .hold = true };
    static struct batch bt;

    REQUIRE(b != NULL);
    struct broker_sub *sub = batch_subscribe(b, "bw", &s, 2);
    REQUIRE(sub != NULL);
    run_for(200);
    batch_make(&bt, 4, 10);
    CHECK(batch_publish_wait(b, "bw", &bt) == 0);
    for (int t = 0; t < 3000 && s.n < 2; t += 20)
        run_for(20);
    CHECK(s.n == 2 && s.nheld == 2);
    broker_ack(s.held[0]); /* e0 done */
    run_for(100);          /* e2 handed on */
    CHECK(s.n == 3);
    broker_unsubscribe(sub, true); /* e3 was waiting */
    /* The next subscription of the name comes before the bundle goes
     * back: the old one's pull, still open at the server, may get it
     * (its events are handed to the new one, the same consumer's). */
    struct bseen s2 = { .nack_first = -1 };
    REQUIRE(batch_subscribe(b, "bw", &s2, 8) != NULL);
    broker_release(s.held[1], 0);
    broker_ack(s.held[2]);
    for (int t = 0; t < 3000 && s2.n < 4; t += 20)
        run_for(20);
    run_for(200);
    CHECK(s2.n == 4);
    for (int i = 0; i < 4 && i < s2.n; i++)
        CHECK(s2.order[i] == i && s2.counts[i] == 2);
    batch_free(&bt);
    broker_close(b);
}

/* A batch larger than the server's max_payload is stored as several
 * messages, every event delivered once, in order; a live subscription
 * sees every event of it too. */
static void
test_batch_split_and_live(void)
{
    struct broker *b = open_broker(0);
    struct bseen s = { .nack_first = -1 };
    struct seen live = { 0 };
    static struct batch bt;
    struct broker_sub_spec lspec = {
        .tenant = "*",
        .topic = "*",
        .live = true,
        .deliver = on_deliver,
        .arg = &live,
    };

    REQUIRE(b != NULL);
    REQUIRE(batch_subscribe(b, "bs", &s, 64) != NULL);
    struct broker_sub *lsub = broker_subscribe(b, &lspec);
    REQUIRE(lsub != NULL);
    run_for(200);
    batch_make(&bt, 40, 60000); /* 2.4 MB, max_payload 1 MB */
    CHECK(batch_publish_wait(b, "bs", &bt) == 0);
    int64_t msgs = stream_msgs();
    CHECK(msgs >= 3 && msgs <= 4);
    for (int t = 0; t < 5000 && (s.n < 40 || live.n < 40); t += 20)
        run_for(20);
    run_for(300);
    CHECK(s.n == 40 && live.n == 40);
    bool ordered = true;
    for (int i = 0; i < 40 && i < s.n; i++)
        ordered = ordered && s.order[i] == i && s.counts[i] == 1;
    CHECK(ordered);
    broker_unsubscribe(lsub, false);
    batch_free(&bt);
    broker_close(b);
}

/* A bundle JetStream stops delivering (max deliveries, none settled: its
 * instances let it go) reaches the exhausted hook event by event. */
static void
test_batch_exhausted(void)
{
    struct broker *b = open_broker(2);
    struct exhausted x = { 0 };
    static struct batch bt;

    REQUIRE(b != NULL);
    broker_set_exhausted_hook(b, on_exhausted, &x);
    batch_make(&bt, 3, 10);
    struct bseen s[2] = { { .nack_first = -1, .hold = true },
                          { .nack_first = -1, .hold = true } };
    struct broker_sub *sub[2];
    sub[0] = batch_subscribe(b, "bx", &s[0], 8);
    REQUIRE(sub[0] != NULL);
    run_for(200);
    CHECK(batch_publish_wait(b, "bx", &bt) == 0);
    for (int round = 0; round < 2; round++) {
        for (int t = 0; t < 3000 && s[round].n < 3; t += 20)
            run_for(20);
        CHECK(s[round].n == 3);
        CHECK(s[round].counts[0] == (uint32_t)round + 1);
        broker_unsubscribe(sub[round], true);
        if (round == 0) {
            sub[1] = batch_subscribe(b, "bx", &s[1], 8);
            REQUIRE(sub[1] != NULL);
        }
        for (int i = 0; i < s[round].nheld; i++)
            broker_release(s[round].held[i], 0);
    }
    for (int t = 0; t < 5000 && x.n < 3; t += 20)
        run_for(20);
    CHECK(x.n == 3);
    CHECK(strcmp(x.id, "e2") == 0 && x.deliveries == 2);
    struct broker_stats st;
    broker_stats(b, &st);
    CHECK(st.exhausted == 3);
    batch_free(&bt);
    broker_close(b);
}

/* A stream that is full (its limits, discarding new messages) refuses a
 * publish with ENOSPC (the API's 507 insufficient_storage), never a
 * false success; a batch too. */
static void
test_full_stream_is_enospc(void)
{
    struct jsv v;
    jsStreamInfo *si;
    static struct batch bt;

    struct broker *b = open_broker(0);
    REQUIRE(b != NULL);
    REQUIRE((si = jsv_stream(&v)) != NULL);
    si->Config->MaxMsgs = 1;
    si->Config->Discard = js_DiscardNew;
    CHECK(js_UpdateStream(NULL, v.js, si->Config, NULL, NULL) == NATS_OK);
    jsStreamInfo_Destroy(si);
    CHECK(publish_wait(b, "f", "first") == 0);
    CHECK(publish_wait(b, "f", "second") == ENOSPC);
    batch_make(&bt, 3, 10);
    CHECK(batch_publish_wait(b, "f", &bt) == ENOSPC);
    batch_free(&bt);
    jsv_close(&v);
    broker_close(b);
}

int
main(void)
{
    const char *bin = nats_server_binary();
    int rc;

    alarm(120);
    if (bin == NULL)
        return nats_server_missing();
    if (mkdtemp(root) == NULL) {
        perror("mkdtemp");
        return 99;
    }
    srv.bin = bin;
    if (nats_server_start(&srv) != 0) {
        fprintf(stderr, "nats-server did not start (see %s)\n", root);
        nats_server_stop(&srv);
        return 99;
    }
    base = event_base_new();
    RUN(test_publish_deliver_ack);
    RUN(test_first_request_answered);
    RUN(test_silent_creation_is_warned);
    RUN(test_since);
    RUN(test_nack_counts);
    RUN(test_max_deliveries_reach_the_hook);
    RUN(test_live);
    RUN(test_stream_settings);
    RUN(test_unhurried_failure_is_nobodys);
    RUN(test_batch_is_one_message);
    RUN(test_batch_nack_one);
    RUN(test_batch_goes_back_whole);
    RUN(test_batch_split_and_live);
    RUN(test_batch_exhausted);
    RUN(test_full_stream_is_enospc);
    RUN(test_outage);
    event_base_free(base);
    nats_server_stop(&srv);
    rc = check_result();
    if (rc == 0)
        check_rmtree(root);
    return rc;
}
