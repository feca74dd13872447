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

#include <errno.h>
#include <inttypes.h>
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

static struct broker *
open_broker(uint32_t max_deliver)
{
    static struct nats_link_config nl;
    char err[512];

    nl = (struct nats_link_config){ .url = srv.url, .who = "test" };
    snprintf(prefix, sizeof prefix, "t%u", ++prefix_seq);
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
    struct broker_sub_spec spec = {
        .tenant = "ten.ant",
        .topic = "a.b",
        .name = "w1",
        .max_inflight = 8,
        .deliver = on_deliver,
        .arg = &s,
    };

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

/* A nack delivers again, counting one more delivery. */
static void
test_nack_counts(void)
{
    struct broker *b = open_broker(0);
    struct seen s = { .nack = true };
    struct broker_sub_spec spec = {
        .tenant = "ten.ant",
        .topic = "n",
        .name = "w1",
        .max_inflight = 1,
        .deliver = on_deliver,
        .arg = &s,
    };

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
    struct broker_sub_spec spec = {
        .tenant = "ten.ant",
        .topic = "d.x",
        .name = "group:g",
        .max_inflight = 1,
        .deliver = on_deliver,
        .arg = &s,
    };

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
    char name[64];
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamInfo *si = NULL;

    max_age_s = 3600;
    struct broker *b = open_broker(0);
    max_age_s = 0;
    REQUIRE(b != NULL);
    snprintf(name, sizeof name, "%s_events", prefix);
    REQUIRE(natsConnection_ConnectTo(&nc, srv.url) == NATS_OK);
    REQUIRE(natsConnection_JetStream(&js, nc, NULL) == NATS_OK);
    CHECK(js_GetStreamInfo(&si, js, name, NULL, NULL) == NATS_OK);
    if (si != NULL) {
        CHECK(si->Config->MaxAge == (int64_t)3600 * 1000000000);
        CHECK(si->Config->Retention == js_LimitsPolicy);
        CHECK(si->Config->SubjectsLen == 1);
        jsStreamInfo_Destroy(si);
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    broker_close(b);
}

/* An unhurried publish that JetStream refuses (here: larger than the
 * stream's MaxMsgSize, set behind the broker's back) fails nobody's
 * batch: the next publish with a callback answers 0. */
static void
test_unhurried_failure_is_nobodys(void)
{
    char name[64], big[512];
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamInfo *si = NULL;
    struct ipc_fb_builder eb;
    struct ipc_cloudevent ce;

    struct broker *b = open_broker(0);
    REQUIRE(b != NULL);
    snprintf(name, sizeof name, "%s_events", prefix);
    REQUIRE(natsConnection_ConnectTo(&nc, srv.url) == NATS_OK);
    REQUIRE(natsConnection_JetStream(&js, nc, NULL) == NATS_OK);
    REQUIRE(js_GetStreamInfo(&si, js, name, NULL, NULL) == NATS_OK);
    si->Config->MaxMsgSize = 300;
    CHECK(js_UpdateStream(NULL, js, si->Config, NULL, NULL) == NATS_OK);
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
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
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
    RUN(test_nack_counts);
    RUN(test_max_deliveries_reach_the_hook);
    RUN(test_live);
    RUN(test_stream_settings);
    RUN(test_unhurried_failure_is_nobodys);
    RUN(test_outage);
    event_base_free(base);
    nats_server_stop(&srv);
    rc = check_result();
    if (rc == 0)
        check_rmtree(root);
    return rc;
}
