/*
 * test_broker.c — the embedded broker (master/broker/broker.h) over a real
 * journal in a temp directory: fan-out, live subscribers, redelivery with
 * counts, the bounded queue, modes, recovery of the backlog after a
 * restart (and of delivery counts), drops of deleted and unclaimed
 * subscriptions, compaction keeping the disk bounded, and a storage
 * outage (the journal cannot write: no delivery meanwhile, settlements
 * kept and stored once it writes again).
 */
#include "config.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "master/broker/broker.h"
#include "master/broker/journal.h"

#include "check.h"

static struct event_base *base;
static char root[] = "/tmp/test_broker.XXXXXX";
static unsigned dir_seq;

/* What a subscriber saw. */
struct seen {
    struct broker_delivery *d[64];
    char text[64][32];
    uint32_t count[64];
    size_t n;
    size_t overflows;
    bool ack; /* ack at once */
};

static void
on_deliver(struct broker_delivery *d, void *arg)
{
    struct seen *s = arg;

    if (s->n < 64) {
        snprintf(s->text[s->n], sizeof s->text[0], "%.*s", (int)d->len,
                 (const char *)d->event);
        s->count[s->n] = d->count;
        s->d[s->n] = d;
    }
    s->n++;
    if (s->ack)
        broker_ack(d);
}

static void
on_over(struct broker_sub *sub, const uint8_t *ev, size_t len, void *arg)
{
    struct seen *s = arg;
    (void)sub;
    (void)ev;
    (void)len;
    s->overflows++;
}

static int published;

static void
on_published(int error, void *arg)
{
    (void)arg;
    if (error == 0)
        published++;
}

/* Runs the loop for about ms milliseconds. */
static void
spin(unsigned ms)
{
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
}

static void
new_dir(char *out, size_t len)
{
    snprintf(out, len, "%s/b%u", root, ++dir_seq);
    if (mkdir(out, 0700) != 0)
        perror(out);
}

/* The verify hook of test_replay_verified: refuses events beginning
 * with "bad", counts its calls. */
static unsigned verified;

static int
refuse_bad(const uint8_t *event, size_t len)
{
    verified++;
    return len >= 3 && memcmp(event, "bad", 3) == 0 ? -1 : 0;
}

static struct broker *
open_broker_verified(const char *dir, uint32_t queue_max, uint64_t segment,
                     int (*verify)(const uint8_t *, size_t))
{
    struct broker_config c = {
        .backend = "embedded",
        .state_dir = dir,
        .fsync = JOURNAL_FSYNC_OFF,
        .queue_max = queue_max,
        .journal_segment_bytes = segment,
        .verify = verify,
    };
    char err[512] = "";
    struct broker *b = broker_open(&c, base, err, sizeof err);
    if (b == NULL)
        fprintf(stderr, "broker_open: %s\n", err);
    return b;
}

static struct broker *
open_broker(const char *dir, uint32_t queue_max, uint64_t segment)
{
    return open_broker_verified(dir, queue_max, segment, NULL);
}

static struct broker_sub *
sub(struct broker *b, const char *topic, const char *name, struct seen *s,
    bool live)
{
    struct broker_sub_spec spec = {
        .tenant = "t1",
        .topic = topic,
        .name = name,
        .live = live,
        .max_inflight = 8,
        .deliver = on_deliver,
        .overflow = on_over,
        .arg = s,
    };
    return broker_subscribe(b, &spec);
}

/* The "restart": opens dir's broker again, checks how many deliveries it
 * recovered, subscribes w1 to q into s and lets them come.  NULL when it
 * cannot open or subscribe. */
static struct broker *
reopen(const char *dir, int (*verify)(const uint8_t *, size_t),
       uint64_t recovered, struct seen *s)
{
    struct broker *b = open_broker_verified(dir, 0, 0, verify);
    struct broker_stats st;

    CHECK(b != NULL);
    if (b == NULL)
        return NULL;
    broker_stats(b, &st);
    CHECK_EQ(st.recovered, recovered);
    if (sub(b, "q", "w1", s, false) == NULL) {
        CHECK(!"subscribed again");
        broker_close(b);
        return NULL;
    }
    spin(20);
    return b;
}

static int
pub(struct broker *b, const char *topic, const char *text)
{
    return broker_publish(b, "t1", topic, (const uint8_t *)text, strlen(text),
                          on_published, NULL);
}

static void
test_fanout(void)
{
    char dir[256];
    struct seen a = { .ack = true }, c = { .ack = true }, live = { 0 };
    struct broker_stats st;

    new_dir(dir, sizeof dir);
    struct broker *b = open_broker(dir, 0, 0);
    REQUIRE(b);
    REQUIRE(sub(b, "orders", "w1", &a, false));
    REQUIRE(sub(b, "orders", "w2", &c, false));
    REQUIRE(sub(b, "orders", "", &live, true));
    /* A second subscription of one durable name is refused. */
    struct seen x = { 0 };
    errno = 0;
    CHECK(sub(b, "orders", "w1", &x, false) == NULL);
    CHECK_EQ(errno, EEXIST);
    published = 0;
    CHECK_EQ(pub(b, "orders", "e1"), 0);
    CHECK_EQ(pub(b, "orders", "e2"), 0);
    CHECK_EQ(pub(b, "other", "e3"), 0); /* nobody: accepted, gone */
    /* Live subscribers are called inside publish. */
    CHECK_EQ(live.n, 2);
    CHECK_EQ(a.n, 0); /* durable ones from the loop */
    spin(50);
    CHECK_EQ(published, 3);
    CHECK_EQ(a.n, 2);
    CHECK_EQ(c.n, 2);
    CHECK(strcmp(a.text[0], "e1") == 0 && strcmp(a.text[1], "e2") == 0);
    broker_stats(b, &st);
    CHECK_EQ(st.published, 3);
    CHECK_EQ(st.acked, 4);
    CHECK_EQ(st.pending, 0);
    broker_close(b);
}

/* A nack comes back after its delay with the next count; a release (a
 * delivery that never reached the worker) after its delay with the same
 * count, and a restart finds that count too: nothing was journaled for
 * it. */
static void
test_redelivery(void)
{
    char dir[256];
    struct seen a = { 0 };
    struct broker_stats st;

    new_dir(dir, sizeof dir);
    struct broker *b = open_broker(dir, 0, 0);
    REQUIRE(b);
    REQUIRE(sub(b, "q", "w1", &a, false));
    pub(b, "q", "e1");
    spin(20);
    REQUIRE(a.n == 1);
    CHECK_EQ(a.count[0], 1);
    broker_nack(a.d[0], 100);
    spin(50);
    CHECK_EQ(a.n, 1); /* not before its delay */
    spin(100);
    REQUIRE(a.n == 2);
    CHECK_EQ(a.count[1], 2);
    CHECK(strcmp(a.text[1], "e1") == 0);
    broker_release(a.d[1], 50);
    spin(20);
    CHECK_EQ(a.n, 2); /* not before its delay either */
    spin(60);
    REQUIRE(a.n == 3);
    CHECK_EQ(a.count[2], 2);
    broker_release(a.d[2], 0);
    spin(20);
    REQUIRE(a.n == 4);
    CHECK_EQ(a.count[3], 2);
    broker_stats(b, &st);
    CHECK_EQ(st.pending, 1);
    CHECK_EQ(st.nacked, 1);
    broker_close(b); /* out when the "crash" comes */

    struct seen r = { .ack = true };
    b = reopen(dir, NULL, 1, &r);
    REQUIRE(b);
    REQUIRE(r.n == 1);
    CHECK_EQ(r.count[0], 2);
    broker_stats(b, &st);
    CHECK_EQ(st.pending, 0);
    broker_close(b);
}

static void
test_bound_and_modes(void)
{
    char dir[256];
    struct seen a = { .ack = true }, other = { .ack = true };

    new_dir(dir, sizeof dir);
    struct broker *b = open_broker(dir, 2, 0);
    REQUIRE(b);
    struct broker_sub *s = sub(b, "q", "w1", &a, false);
    REQUIRE(s);
    REQUIRE(sub(b, "q", "w2", &other, false));
    broker_sub_set_mode(s, BROKER_SUB_PAUSED);
    pub(b, "q", "e1");
    spin(5);
    pub(b, "q", "e2");
    spin(5);
    /* w1's queue is full: the publish is refused whole, w2 gets nothing
     * of it either, and broker_admit() names w1. */
    struct broker_sub *full = NULL;
    CHECK_EQ(broker_admit(b, "t1", "q", 1, &full), -1);
    CHECK(full == s);
    CHECK(strcmp(broker_sub_name(full), "w1") == 0);
    errno = 0;
    CHECK_EQ(pub(b, "q", "e3"), -1);
    CHECK_EQ(errno, EAGAIN);
    spin(20);
    CHECK_EQ(a.n, 0);
    CHECK_EQ(a.overflows, 0);
    CHECK_EQ(other.n, 2);
    CHECK_EQ(broker_sub_backlog(s), 2);
    /* Closed: nothing new queues, the backlog waits, publishes pass. */
    broker_sub_set_mode(s, BROKER_SUB_CLOSED);
    CHECK_EQ(broker_admit(b, "t1", "q", 1, NULL), 0);
    CHECK_EQ(pub(b, "q", "e4"), 0);
    spin(20);
    CHECK_EQ(a.n, 0);
    CHECK_EQ(other.n, 3);
    CHECK_EQ(broker_sub_backlog(s), 2);
    broker_sub_set_mode(s, BROKER_SUB_ACTIVE);
    spin(20);
    CHECK_EQ(a.n, 2);
    CHECK(strcmp(a.text[0], "e1") == 0 && strcmp(a.text[1], "e2") == 0);
    broker_close(b);
}

/* broker_admit() for n events: room for each of them in every queue. */
static void
test_admit_batch(void)
{
    char dir[256];
    struct seen a = { 0 };

    new_dir(dir, sizeof dir);
    struct broker *b = open_broker(dir, 3, 0);
    REQUIRE(b);
    struct broker_sub *s = sub(b, "q", "w1", &a, false);
    REQUIRE(s);
    broker_sub_set_mode(s, BROKER_SUB_PAUSED);
    CHECK_EQ(broker_admit(b, "t1", "q", 4, NULL), -1);
    CHECK_EQ(broker_admit(b, "t1", "q", 3, NULL), 0);
    CHECK_EQ(broker_admit(b, "t1", "nobody", 100, NULL), 0);
    CHECK_EQ(pub(b, "q", "e1"), 0);
    CHECK_EQ(broker_admit(b, "t1", "q", 3, NULL), -1);
    CHECK_EQ(broker_admit(b, "t1", "q", 2, NULL), 0);
    broker_close(b);
}

/* A drop_oldest queue takes every event: its oldest waiting one leaves
 * through the overflow callback, never one out with the subscriber. */
static void
test_drop_oldest(void)
{
    char dir[256];
    struct seen a = { 0 };
    struct broker_stats st;

    new_dir(dir, sizeof dir);
    struct broker *b = open_broker(dir, 2, 0);
    REQUIRE(b);
    struct broker_sub_spec spec = {
        .tenant = "t1",
        .topic = "q",
        .name = "w1",
        .max_inflight = 1,
        .drop_oldest = true,
        .deliver = on_deliver,
        .overflow = on_over,
        .arg = &a,
    };
    struct broker_sub *s = broker_subscribe(b, &spec);
    REQUIRE(s);
    CHECK_EQ(pub(b, "q", "e1"), 0);
    spin(5); /* e1 is out, unsettled */
    CHECK_EQ(a.n, 1);
    CHECK_EQ(pub(b, "q", "e2"), 0);
    CHECK_EQ(broker_admit(b, "t1", "q", 5, NULL), 0);
    CHECK_EQ(pub(b, "q", "e3"), 0); /* full: e2 (waiting) goes */
    CHECK_EQ(a.overflows, 1);
    CHECK_EQ(pub(b, "q", "e4"), 0); /* e3 goes */
    CHECK_EQ(a.overflows, 2);
    CHECK_EQ(broker_sub_backlog(s), 2);
    broker_ack(a.d[0]);
    spin(20);
    CHECK_EQ(a.n, 2);
    CHECK(strcmp(a.text[1], "e4") == 0);
    broker_ack(a.d[1]);
    spin(5);
    broker_stats(b, &st);
    CHECK_EQ(st.overflowed, 2);
    CHECK_EQ(st.pending, 0);
    broker_close(b);
}

static void
test_restart(void)
{
    char dir[256];
    struct seen a = { 0 }, g = { .ack = true };

    new_dir(dir, sizeof dir);
    struct broker *b = open_broker(dir, 0, 0);
    REQUIRE(b);
    REQUIRE(sub(b, "q", "w1", &a, false));
    REQUIRE(sub(b, "q", "gone", &g, false));
    pub(b, "q", "e1");
    pub(b, "q", "e2");
    pub(b, "q", "e3");
    spin(20);
    REQUIRE(a.n == 3);
    broker_ack(a.d[0]);     /* e1 done */
    broker_nack(a.d[1], 0); /* e2 counted twice */
    spin(20);
    REQUIRE(a.n == 4);
    /* e2 (count 2) and e3 (count 1) are out when the "crash" comes. */
    broker_close(b);

    struct seen r = { .ack = true };
    b = reopen(dir, NULL, 2, &r);
    REQUIRE(b);
    REQUIRE(r.n == 2);
    CHECK(strcmp(r.text[0], "e2") == 0 || strcmp(r.text[1], "e2") == 0);
    for (size_t i = 0; i < 2; i++) {
        if (strcmp(r.text[i], "e2") == 0)
            CHECK_EQ(r.count[i], 2);
        else
            CHECK(strcmp(r.text[i], "e3") == 0);
    }
    broker_recovered(b, NULL, NULL);
    struct broker_stats st;
    broker_stats(b, &st);
    CHECK_EQ(st.pending, 0);
    broker_close(b);

    /* Nothing comes back a third time. */
    struct seen z = { 0 };
    b = reopen(dir, NULL, 0, &z);
    REQUIRE(b);
    CHECK_EQ(z.n, 0);
    broker_close(b);
}

/* Events read back from the journal pass broker_config.verify once each
 * (published ones do not: the publisher vouches for them); a refused one
 * is dropped. */
static void
test_replay_verified(void)
{
    char dir[256];
    struct seen a = { 0 };

    new_dir(dir, sizeof dir);
    struct broker *b = open_broker_verified(dir, 0, 0, refuse_bad);
    REQUIRE(b);
    REQUIRE(sub(b, "q", "w1", &a, false));
    pub(b, "q", "good1");
    pub(b, "q", "bad1");
    pub(b, "q", "good2");
    spin(20);
    REQUIRE(a.n == 3);
    CHECK_EQ(verified, 0);
    broker_close(b);

    struct seen r = { .ack = true };
    b = reopen(dir, refuse_bad, 2, &r);
    REQUIRE(b);
    CHECK_EQ(verified, 3);
    REQUIRE(r.n == 2);
    CHECK(strcmp(r.text[0], "good1") == 0);
    CHECK(strcmp(r.text[1], "good2") == 0);
    broker_close(b);
}

static void
test_drops(void)
{
    char dir[256];
    struct seen a = { 0 }, k = { 0 };
    struct broker_stats st;

    new_dir(dir, sizeof dir);
    struct broker *b = open_broker(dir, 0, 0);
    REQUIRE(b);
    struct broker_sub *s = sub(b, "q", "deleted", &a, false);
    REQUIRE(s);
    REQUIRE(sub(b, "q", "unclaimed", &k, false));
    broker_sub_set_mode(s, BROKER_SUB_PAUSED);
    pub(b, "q", "e1");
    pub(b, "q", "e2");
    spin(20);
    REQUIRE(k.n == 2);
    /* A deleted subscription's backlog is settled as dropped. */
    broker_unsubscribe(s, false);
    broker_stats(b, &st);
    CHECK_EQ(st.dropped, 2);
    CHECK_EQ(st.pending, 2); /* unclaimed's, out */
    broker_close(b);

    b = open_broker(dir, 0, 0);
    REQUIRE(b);
    broker_stats(b, &st);
    CHECK_EQ(st.recovered, 2);       /* only "unclaimed"'s two */
    broker_recovered(b, NULL, NULL); /* ... and nobody claims them */
    broker_stats(b, &st);
    CHECK_EQ(st.pending, 0);
    CHECK_EQ(st.dropped, 2);
    broker_close(b);
}

/* A delivery out when its subscription is deleted is still settled by
 * its holder (the flow's job of a deleted worker), through its broker:
 * a no-op, never a read of the freed subscription. */
static void
test_settle_after_unsubscribe(void)
{
    char dir[256];
    struct seen a = { 0 };
    struct broker_stats st;

    new_dir(dir, sizeof dir);
    struct broker *b = open_broker(dir, 0, 0);
    REQUIRE(b);
    struct broker_sub *s = sub(b, "q", "gone", &a, false);
    REQUIRE(s);
    pub(b, "q", "e1");
    pub(b, "q", "e2");
    spin(20);
    REQUIRE(a.n == 2);
    broker_unsubscribe(s, false);
    broker_ack(a.d[0]);
    broker_nack(a.d[1], 0);
    spin(20);
    broker_stats(b, &st);
    CHECK_EQ(st.pending, 0);
    broker_close(b);
}

static void
test_compaction(void)
{
    char dir[256];
    struct seen stuck = { 0 }, busy = { .ack = true };
    char text[200];
    struct broker_stats st;

    new_dir(dir, sizeof dir);
    /* 64 KiB segments; 2000 events of ~200 bytes is ~6 segments' worth. */
    struct broker *b = open_broker(dir, 100000, 64 * 1024);
    REQUIRE(b);
    struct broker_sub *s = sub(b, "slow", "w1", &stuck, false);
    REQUIRE(s);
    REQUIRE(sub(b, "fast", "w2", &busy, false));
    pub(b, "slow", "pinned-event");
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    for (int i = 0; i < 2000; i++) {
        pub(b, "fast", text);
        if (i % 100 == 0)
            spin(5);
    }
    spin(200);
    CHECK_EQ(busy.n, 2000);
    REQUIRE(stuck.n == 1);
    broker_stats(b, &st);
    /* The pinned event was moved forward: old segments went. */
    CHECK(st.journal_segments <= 3);
    CHECK(st.journal_bytes < 4 * 64 * 1024);
    broker_close(b);

    struct seen again = { .ack = true };
    b = open_broker(dir, 0, 64 * 1024);
    REQUIRE(b);
    broker_stats(b, &st);
    CHECK_EQ(st.recovered, 1);
    REQUIRE(sub(b, "slow", "w1", &again, false));
    spin(20);
    REQUIRE(again.n == 1);
    CHECK(strcmp(again.text[0], "pinned-event") == 0);
    broker_close(b);
}

static void
test_wildcard_live(void)
{
    char dir[256];
    struct seen all = { 0 };

    new_dir(dir, sizeof dir);
    struct broker *b = open_broker(dir, 0, 0);
    REQUIRE(b);
    struct broker_sub_spec spec = {
        .tenant = "*",
        .topic = "*",
        .live = true,
        .deliver = on_deliver,
        .arg = &all,
    };
    struct broker_sub *s = broker_subscribe(b, &spec);
    REQUIRE(s);
    pub(b, "a", "1");
    broker_publish(b, "t2", "b", (const uint8_t *)"2", 1, NULL, NULL);
    CHECK_EQ(all.n, 2);
    broker_unsubscribe(s, false);
    pub(b, "a", "3");
    CHECK_EQ(all.n, 2);
    broker_close(b);
}

/* The storage hook's calls. */
static int storage_down, storage_up;

static void
on_storage(bool writable, void *arg)
{
    (void)arg;
    if (writable)
        storage_up++;
    else
        storage_down++;
}

/* The journal stops writing (RLIMIT_FSIZE: EFBIG, as a full disk is
 * ENOSPC): health and the storage hook say so, publishes are refused; an
 * ack made meanwhile is kept and stored once it writes again (by itself),
 * so that after a restart only the unacked events come back. */
static void
test_storage_outage(void)
{
    char dir[256], seg[300];
    char big[4096];
    struct seen a = { 0 }, o = { 0 };
    struct broker_health h;
    struct rlimit old, lim;
    struct stat sb;

    new_dir(dir, sizeof dir);
    storage_down = storage_up = 0;
    published = 0;
    struct broker *b = open_broker(dir, 0, 0);
    REQUIRE(b);
    broker_set_storage_hook(b, on_storage, NULL);
    struct broker_sub *w1 = sub(b, "q", "w1", &a, false);
    REQUIRE(w1);
    broker_sub_set_max_inflight(w1, 2);
    REQUIRE(sub(b, "other", "w2", &o, false));
    CHECK_EQ(pub(b, "q", "e1"), 0);
    CHECK_EQ(pub(b, "q", "e2"), 0);
    CHECK_EQ(pub(b, "q", "e5"), 0); /* waits: two are out */
    spin(20);
    REQUIRE(a.n == 2);
    CHECK_EQ(published, 3);
    snprintf(seg, sizeof seg, "%s/journal/0000000000000001.wmj", dir);
    REQUIRE(stat(seg, &sb) == 0);
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    lim = old;
    lim.rlim_cur = (rlim_t)sb.st_size + 64;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    memset(big, 'x', sizeof big);
    CHECK_EQ(broker_publish(b, "t1", "other", (const uint8_t *)big, sizeof big,
                            on_published, NULL),
             0);
    spin(50);
    CHECK_EQ(published, 3); /* its callback failed */
    CHECK_EQ(storage_down, 1);
    broker_health(b, &h);
    CHECK(!h.writable);
    CHECK_EQ(h.error, EFBIG);
    CHECK(strstr(h.message, ".wmj") != NULL);
    /* No file may grow now: the retries fail too (a fresh segment's
     * header would fit under the first limit). */
    lim.rlim_cur = 10;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    broker_ack(a.d[0]); /* e1: its settlement cannot be written now */
    errno = 0;
    CHECK_EQ(pub(b, "q", "e3"), -1);
    CHECK_EQ(errno, EIO);
    spin(100);
    REQUIRE(a.n == 3); /* e5: the owner would hold it (flow.c) */
    CHECK_EQ(storage_up, 0);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
    spin(JOURNAL_RETRY_MS + 200);
    CHECK_EQ(storage_up, 1);
    broker_health(b, &h);
    CHECK(h.writable);
    CHECK_EQ(h.recoveries, 1);
    CHECK(strcmp(a.text[2], "e5") == 0);
    broker_ack(a.d[2]);
    CHECK_EQ(pub(b, "q", "e4"), 0);
    spin(20);
    REQUIRE(a.n == 4);
    CHECK(strcmp(a.text[3], "e4") == 0);
    broker_close(b);
    /* The settlements of e1 (kept) and e5 were stored: e2 and e4 only
     * come back. */
    struct seen r = { .ack = true };
    b = reopen(dir, NULL, 2, &r);
    REQUIRE(b);
    CHECK_EQ(r.n, 2);
    for (size_t i = 0; i < r.n && i < 2; i++)
        CHECK(strcmp(r.text[i], "e2") == 0 || strcmp(r.text[i], "e4") == 0);
    broker_close(b);
}

/* What the broker holds for a tenant (broker_tenant_backlog()): one per
 * event stored, however many subscriptions hold it, with its bytes;
 * nothing for an event nobody holds; given back as the last holder
 * settles; restored by the replay after a restart. */
static void
test_tenant_backlog(void)
{
    char dir[256];
    struct seen a = { 0 }, c = { 0 };
    uint64_t ev = 99, by = 99;

    new_dir(dir, sizeof dir);
    struct broker *b = open_broker(dir, 0, 0);
    REQUIRE(b);
    broker_tenant_backlog(b, "t1", &ev, &by);
    CHECK_EQ(ev, 0);
    CHECK_EQ(by, 0);
    REQUIRE(sub(b, "q", "w1", &a, false));
    REQUIRE(sub(b, "q", "w2", &c, false));
    CHECK_EQ(pub(b, "q", "abc"), 0);
    CHECK_EQ(pub(b, "q", "defgh"), 0);
    CHECK_EQ(pub(b, "nobody", "xyz"), 0);
    CHECK_EQ(broker_publish(b, "t2", "q", (const uint8_t *)"zz", 2, NULL, NULL),
             0);
    broker_tenant_backlog(b, "t1", &ev, &by);
    CHECK_EQ(ev, 2);
    CHECK_EQ(by, 8);
    broker_tenant_backlog(b, "t2", &ev, &by);
    CHECK_EQ(ev, 0);
    spin(20);
    REQUIRE(a.n == 2 && c.n == 2);
    broker_ack(a.d[0]); /* w2 still holds "abc" */
    broker_tenant_backlog(b, "t1", &ev, &by);
    CHECK_EQ(ev, 2);
    broker_ack(c.d[0]);
    broker_tenant_backlog(b, "t1", &ev, &by);
    CHECK_EQ(ev, 1);
    CHECK_EQ(by, 5);
    broker_close(b);

    struct seen r = { 0 };
    b = open_broker(dir, 0, 0);
    REQUIRE(b);
    broker_tenant_backlog(b, "t1", &ev, &by);
    CHECK_EQ(ev, 1);
    CHECK_EQ(by, 5);
    REQUIRE(sub(b, "q", "w1", &r, false));
    broker_recovered(b, NULL, NULL); /* w2 is gone: its share is dropped */
    spin(20);
    REQUIRE(r.n == 1);
    broker_ack(r.d[0]);
    broker_tenant_backlog(b, "t1", &ev, &by);
    CHECK_EQ(ev, 0);
    CHECK_EQ(by, 0);
    broker_close(b);
}

int
main(void)
{
    int rc;

    alarm(120);
    /* test_storage_outage exceeds RLIMIT_FSIZE: EFBIG, not a signal. */
    signal(SIGXFSZ, SIG_IGN);
    if (mkdtemp(root) == NULL) {
        perror("mkdtemp");
        return 99;
    }
    base = event_base_new();
    if (base == NULL)
        return 99;
    RUN(test_fanout);
    RUN(test_redelivery);
    RUN(test_bound_and_modes);
    RUN(test_admit_batch);
    RUN(test_drop_oldest);
    RUN(test_restart);
    RUN(test_replay_verified);
    RUN(test_drops);
    RUN(test_settle_after_unsubscribe);
    RUN(test_compaction);
    RUN(test_wildcard_live);
    RUN(test_storage_outage);
    RUN(test_tenant_backlog);
    event_base_free(base);
    rc = check_result();
    if (rc == 0)
        check_rmtree(root);
    else
        fprintf(stderr, "kept %s for inspection\n", root);
    return rc;
}
