/*
 * test_grouplock.c — group locks with fencing tokens (master/store/grouplock.c)
 * through master/store/grouplock.h, over the real `file` state store.
 *
 * Everything runs in a fresh mkdtemp directory (removed at the end when
 * every check passed, kept for inspection otherwise), each test with its
 * own state_dir (fsync "off": durability is the store's test) and this
 * program's event_base to run the timers and the store's completions.
 * Two masters sharing a store are two struct grouplocks with different
 * holders on ONE store object, each with an injected wall clock.
 *
 * A thin wrapper backend (the "fault" store, built on store_backend.h like
 * any backend) sits between grouplock.c and the file store to play the
 * other master at the worst moments: it can slip a write in between a
 * read and the compare-and-set that follows it, or fail a read.
 */
#include "config.h"

#include "master/store/grouplock.h"
#include "master/store/store.h"
#include "master/store/store_backend.h"

#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "tests/unit/check.h"

#define MAX_AGE 30000
#define T0 1700000000000LL

static struct event_base *base;
static char root[] = "/tmp/test_grouplock.XXXXXX";
static unsigned dir_seq;

/* ---- a store that plays the other master ------------------------------ */

struct fault_store {
    struct store st; /* first: store.c finds the ops table here */
    struct store *inner;
    /* The next put of sneak_key is preceded by an unconditional put of
     * sneak_value (another master's write landing after our read). */
    char sneak_key[STORE_KEY_MAX + 1];
    uint8_t *sneak_value;
    size_t sneak_len;
    unsigned fail_gets; /* the next reads fail with STORE_IO */
};

static const struct store_backend fault_backend;

static struct store *
fault_open(const struct store_config *cfg, struct event_base *b, char *err,
           size_t errlen)
{
    (void)cfg;
    (void)b;
    (void)err;
    (void)errlen;
    return NULL; /* made by open_store(), never by name */
}

static void
fault_close(struct store *st)
{
    struct fault_store *fs = (struct fault_store *)st;

    store_close(fs->inner);
    free(fs->sneak_value);
    free(fs);
}

static void
fault_flush(struct store *st)
{
    store_flush(((struct fault_store *)st)->inner);
}

static enum store_status
fault_get(struct store *st, const char *key, uint8_t **value, size_t *len,
          uint64_t *revision, char *err, size_t errlen)
{
    struct fault_store *fs = (struct fault_store *)st;

    if (fs->fail_gets > 0) {
        fs->fail_gets--;
        snprintf(err, errlen, "injected read failure of %s", key);
        return STORE_IO;
    }
    return store_get(fs->inner, key, value, len, revision, err, errlen);
}

static enum store_status
fault_list(struct store *st, const char *prefix, store_list_cb cb, void *arg,
           char *err, size_t errlen)
{
    return store_list(((struct fault_store *)st)->inner, prefix, cb, arg, err,
                      errlen);
}

static int
fault_put(struct store *st, const char *key, const uint8_t *value, size_t len,
          uint64_t expected, store_done_cb cb, void *arg)
{
    struct fault_store *fs = (struct fault_store *)st;

    if (fs->sneak_value != NULL && strcmp(key, fs->sneak_key) == 0) {
        (void)store_put(fs->inner, key, fs->sneak_value, fs->sneak_len,
                        STORE_ANY_REVISION, NULL, NULL);
        free(fs->sneak_value);
        fs->sneak_value = NULL;
    }
    return store_put(fs->inner, key, value, len, expected, cb, arg);
}

static int
fault_del(struct store *st, const char *key, uint64_t expected,
          store_done_cb cb, void *arg)
{
    return store_delete(((struct fault_store *)st)->inner, key, expected, cb,
                        arg);
}

static int
fault_blob_put(struct store *st, const uint8_t *data, size_t len,
               const char *sha256_hex, store_done_cb cb, void *arg)
{
    char hex[STORE_SHA256_HEX];

    (void)sha256_hex;
    return store_blob_put(((struct fault_store *)st)->inner, data, len, hex, cb,
                          arg);
}

static enum store_status
fault_blob_get(struct store *st, const char *sha256_hex, uint8_t **data,
               size_t *len, char *err, size_t errlen)
{
    return store_blob_get(((struct fault_store *)st)->inner, sha256_hex, data,
                          len, err, errlen);
}

static int
fault_blob_delete(struct store *st, const char *sha256_hex, store_done_cb cb,
                  void *arg)
{
    return store_blob_delete(((struct fault_store *)st)->inner, sha256_hex, cb,
                             arg);
}

static const struct store_backend fault_backend = {
    .name = "fault",
    .open = fault_open,
    .close = fault_close,
    .flush = fault_flush,
    .get = fault_get,
    .list = fault_list,
    .put = fault_put,
    .del = fault_del,
    .blob_put = fault_blob_put,
    .blob_get = fault_blob_get,
    .blob_delete = fault_blob_delete,
};

static struct fault_store *open_store_at(unsigned n);

/* A fresh file store in its own state_dir, behind the fault wrapper. */
static struct fault_store *
open_store(void)
{
    return open_store_at(++dir_seq);
}

/* The file store of state_dir number n (again, after a restart). */
static struct fault_store *
open_store_at(unsigned n)
{
    char dir[256], err[1024] = "";
    struct store_config cfg = {
        .backend = "file",
        .state_dir = dir,
        .fsync = "off",
    };
    struct fault_store *fs = calloc(1, sizeof *fs);

    if (fs == NULL)
        return NULL;
    snprintf(dir, sizeof dir, "%s/%u", root, n);
    fs->st.backend = &fault_backend;
    fs->inner = store_open(&cfg, base, err, sizeof err);
    if (fs->inner == NULL) {
        fprintf(stderr, "%s: store_open %s: %s\n", check_test, dir, err);
        free(fs);
        return NULL;
    }
    return fs;
}

/* ---- results, clocks, hooks ------------------------------------------- */

struct result {
    bool done;
    unsigned calls;
    enum grouplock_status status;
    uint64_t token;
    char message[2048];
    unsigned seq; /* the order of completion, from 1 */
};

static unsigned seq;

static void
on_result(enum grouplock_status status, uint64_t token, const char *message,
          void *arg)
{
    struct result *r = arg;

    r->done = true;
    r->calls++;
    r->status = status;
    r->token = token;
    r->seq = ++seq;
    snprintf(r->message, sizeof r->message, "%s",
             message != NULL ? message : "");
}

static int64_t
fake_now(void *arg)
{
    return *(int64_t *)arg;
}

struct hook_log {
    unsigned n;
    char what[16][16];
    uint64_t token[16];
};

static void
on_change(const char *tenant, const char *group, const char *what,
          uint64_t token, void *arg)
{
    struct hook_log *h = arg;

    (void)tenant;
    (void)group;
    if (h->n < 16) {
        snprintf(h->what[h->n], sizeof h->what[h->n], "%s", what);
        h->token[h->n] = token;
    }
    h->n++;
}

static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    *(bool *)arg = true;
}

/* Runs the loop until *done, or for at most ms milliseconds. */
static void
run_until(const bool *done, unsigned ms)
{
    struct timeval tv = { .tv_sec = ms / 1000,
                          .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
    bool expired = false;
    struct event *t = evtimer_new(base, on_timeout, &expired);

    if (t == NULL || evtimer_add(t, &tv) != 0) {
        fprintf(stderr, "cannot arm a timer\n");
        abort();
    }
    while (!expired && (done == NULL || !*done))
        if (event_base_loop(base, EVLOOP_ONCE) < 0) {
            fprintf(stderr, "event_base_loop failed\n");
            abort();
        }
    event_free(t);
}

/* Runs the loop until r completed (or 5 s went by, a failure). */
static void
wait_for(const struct result *r)
{
    run_until(&r->done, 5000);
    if (!r->done)
        FAIL("no callback within 5 s");
}

static struct grouplocks *
new_locks(struct fault_store *fs, const char *holder, unsigned max_retries,
          int64_t *clock, struct hook_log *h)
{
    struct grouplock_policy p = {
        .max_age_ms = MAX_AGE,
        .retry_base_ms = 5,
        .max_retries = max_retries,
    };
    struct grouplocks *gl = grouplocks_new(&fs->st, base, holder, &p);

    if (gl != NULL && clock != NULL)
        grouplocks_set_clock(gl, fake_now, clock);
    if (gl != NULL && h != NULL)
        grouplocks_set_change_hook(gl, on_change, h);
    return gl;
}

/* Locks that keep a lease: blocks of block tokens, idle_ms of idleness. */
static struct grouplocks *
new_lease_locks(struct fault_store *fs, const char *holder, uint64_t block,
                uint64_t idle_ms, struct hook_log *h)
{
    struct grouplock_policy p = {
        .max_age_ms = MAX_AGE,
        .retry_base_ms = 5,
        .max_retries = 3,
        .token_block = block,
        .lease_idle_ms = idle_ms,
    };
    struct grouplocks *gl = grouplocks_new(&fs->st, base, holder, &p);

    if (gl != NULL && h != NULL)
        grouplocks_set_change_hook(gl, on_change, h);
    return gl;
}

/* The record of (tenant, group): 0, or -1 when absent or unreadable. */
static int
read_lock(struct fault_store *fs, const char *tenant, const char *group,
          struct grouplock_record *rec, uint64_t *rev)
{
    char key[STORE_KEY_MAX + 1], err[1024];
    uint8_t *v = NULL;
    size_t len = 0;
    uint64_t r = 0;
    int rc = -1;

    if (grouplock_key(tenant, group, key, sizeof key) == 0 &&
        store_get(fs->inner, key, &v, &len, &r, err, sizeof err) == STORE_OK)
        rc = grouplock_record_decode(v, len, rec, err, sizeof err);
    free(v);
    if (rev != NULL)
        *rev = r;
    return rc;
}

static void
on_put_done(enum store_status status, uint64_t revision, const char *message,
            void *arg)
{
    (void)revision;
    (void)message;
    *(enum store_status *)arg = status;
}

/* Writes a record as another master (or an earlier run) would have. */
static int
write_lock(struct fault_store *fs, const char *tenant, const char *group,
           const char *holder, uint64_t token, int64_t acquired_ms,
           uint64_t lwt)
{
    struct grouplock_record rec = { .token = token,
                                    .acquired_ms = acquired_ms,
                                    .last_write_token = lwt };
    enum store_status s = STORE_INVALID;
    char key[STORE_KEY_MAX + 1];
    uint8_t *buf;
    size_t len;
    int rc;

    snprintf(rec.holder, sizeof rec.holder, "%s", holder);
    if (grouplock_key(tenant, group, key, sizeof key) != 0 ||
        grouplock_record_encode(&rec, &buf, &len) != 0)
        return -1;
    rc = store_put(fs->inner, key, buf, len, STORE_ANY_REVISION, on_put_done,
                   &s);
    free(buf);
    /* fsync "off" and an idle writer: this is quick. */
    for (int i = 0; rc == 0 && s == STORE_INVALID && i < 5000; i++)
        event_base_loop(base, EVLOOP_ONCE);
    return rc == 0 && s == STORE_OK ? 0 : -1;
}

static void
sneak(struct fault_store *fs, const char *tenant, const char *group,
      const char *holder, uint64_t token, int64_t acquired_ms, uint64_t lwt)
{
    struct grouplock_record rec = { .token = token,
                                    .acquired_ms = acquired_ms,
                                    .last_write_token = lwt };

    snprintf(rec.holder, sizeof rec.holder, "%s", holder);
    if (grouplock_key(tenant, group, fs->sneak_key, sizeof fs->sneak_key) !=
            0 ||
        grouplock_record_encode(&rec, &fs->sneak_value, &fs->sneak_len) != 0)
        abort();
}

static struct result
acquire_wait(struct grouplocks *gl, const char *tenant, const char *group)
{
    struct result r = { 0 };

    grouplocks_acquire(gl, tenant, group, on_result, &r);
    CHECK(!r.done); /* never from inside the call */
    wait_for(&r);
    return r;
}

static struct result
note_wait(struct grouplocks *gl, const char *tenant, const char *group,
          uint64_t token)
{
    struct result r = { 0 };

    grouplocks_note_write(gl, tenant, group, token, on_result, &r);
    CHECK(!r.done);
    wait_for(&r);
    return r;
}

static struct result
release_wait(struct grouplocks *gl, const char *tenant, const char *group,
             uint64_t token)
{
    struct result r = { 0 };

    grouplocks_release(gl, tenant, group, token, on_result, &r);
    CHECK(!r.done);
    wait_for(&r);
    return r;
}

/* ---- the pure parts --------------------------------------------------- */

static void
test_decide(void)
{
    static const struct {
        const char *holder;
        uint64_t token, lwt;
        int64_t age; /* now - acquired_ms */
        enum grouplock_decision want;
    } rows[] = {
        { "", 0, 0, 0, GROUPLOCK_ACQUIRE },
        { "", 7, 7, MAX_AGE * 10, GROUPLOCK_ACQUIRE }, /* free, old tokens */
        { "a/1", 3, 0, 0, GROUPLOCK_HELD },
        { "a/1", 3, 0, MAX_AGE - 1, GROUPLOCK_HELD },
        { "a/1", 3, 0, MAX_AGE, GROUPLOCK_HELD }, /* the boundary */
        { "a/1", 3, 0, MAX_AGE + 1, GROUPLOCK_STEAL },
        { "a/1", 3, 2, MAX_AGE + 1, GROUPLOCK_STEAL }, /* an older write */
        { "a/1", 3, 3, MAX_AGE + 1, GROUPLOCK_ABORT_STEAL },
        { "a/1", 3, 3, MAX_AGE, GROUPLOCK_HELD },
        { "a/1", 3, 3, 0, GROUPLOCK_HELD },
        { "a/1", 3, 0, -MAX_AGE * 10, GROUPLOCK_HELD }, /* clock went back */
    };
    struct grouplock_record rec;

    CHECK_EQ(grouplock_decide(NULL, T0, MAX_AGE), GROUPLOCK_ACQUIRE);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        memset(&rec, 0, sizeof rec);
        snprintf(rec.holder, sizeof rec.holder, "%s", rows[i].holder);
        rec.token = rows[i].token;
        rec.last_write_token = rows[i].lwt;
        rec.acquired_ms = T0;
        if (grouplock_decide(&rec, T0 + rows[i].age, MAX_AGE) != rows[i].want)
            FAIL("row %zu: decided %d, want %d", i,
                 (int)grouplock_decide(&rec, T0 + rows[i].age, MAX_AGE),
                 (int)rows[i].want);
    }
    /* Extreme clocks do not overflow into "young" or "stale". */
    memset(&rec, 0, sizeof rec);
    snprintf(rec.holder, sizeof rec.holder, "a/1");
    rec.token = 1;
    rec.acquired_ms = INT64_MIN;
    CHECK_EQ(grouplock_decide(&rec, INT64_MAX, MAX_AGE), GROUPLOCK_STEAL);
    rec.acquired_ms = INT64_MAX;
    CHECK_EQ(grouplock_decide(&rec, INT64_MIN, MAX_AGE), GROUPLOCK_HELD);
}

static void
test_record(void)
{
    struct grouplock_record in = { .token = 42,
                                   .acquired_ms = -5,
                                   .last_write_token = 41 },
                            out;
    /* format 1, holder of 200 bytes (the varint 200 is c8 01) */
    uint8_t long_holder[5 + 200] = { 0x08, 0x01, 0x12, 0xc8, 0x01 };
    static const uint8_t garbage[] = { 0xff, 0xff, 0xff, 0xff, 0xff };
    static const uint8_t format2[] = { 0x08, 0x02 };
    /* format 1, holder "x", no token */
    static const uint8_t token0[] = { 0x08, 0x01, 0x12, 0x01, 'x' };
    /* format 1, token 1, last_write_token 2 */
    static const uint8_t ahead[] = { 0x08, 0x01, 0x18, 0x01, 0x28, 0x02 };
    char err[256], key[STORE_KEY_MAX + 1], name[600];
    uint8_t *buf = NULL, *copy;
    size_t len = 0;

    snprintf(in.holder, sizeof in.holder, "inst/boot-1");
    REQUIRE(grouplock_record_encode(&in, &buf, &len) == 0);
    copy = check_dup(buf, len);
    memset(&out, 0xa5, sizeof out);
    CHECK(grouplock_record_decode(copy, len, &out, err, sizeof err) == 0);
    CHECK(strcmp(out.holder, "inst/boot-1") == 0);
    CHECK_EQ(out.token, 42);
    CHECK_EQ(out.acquired_ms, -5);
    CHECK_EQ(out.last_write_token, 41);
    free(copy);
    free(buf);

    /* A free record round-trips too. */
    memset(&in, 0, sizeof in);
    in.token = 9;
    in.last_write_token = 9;
    REQUIRE(grouplock_record_encode(&in, &buf, &len) == 0);
    CHECK(grouplock_record_decode(buf, len, &out, err, sizeof err) == 0);
    CHECK(out.holder[0] == '\0' && out.token == 9 &&
          out.last_write_token == 9 && out.acquired_ms == 0);
    free(buf);

    /* An unterminated holder is not encoded. */
    memset(in.holder, 'h', sizeof in.holder);
    CHECK(grouplock_record_encode(&in, &buf, &len) == -1);

    copy = check_dup(garbage, sizeof garbage);
    err[0] = '\0';
    CHECK(grouplock_record_decode(copy, sizeof garbage, &out, err,
                                  sizeof err) == -1);
    CHECK(check_has_all(err, "does not decode", NULL));
    free(copy);
    CHECK(grouplock_record_decode(format2, sizeof format2, &out, err,
                                  sizeof err) == -1);
    CHECK(check_has_all(err, "unknown format 2", NULL));
    CHECK(grouplock_record_decode(NULL, 0, &out, err, sizeof err) == -1);
    CHECK(check_has_all(err, "unknown format 0", NULL));
    memset(long_holder + 5, 'h', 200);
    CHECK(grouplock_record_decode(long_holder, sizeof long_holder, &out, err,
                                  sizeof err) == -1);
    CHECK(check_has_all(err, "holder longer", NULL));
    CHECK(grouplock_record_decode(token0, sizeof token0, &out, err,
                                  sizeof err) == -1);
    CHECK(check_has_all(err, "token 0", NULL));
    CHECK(grouplock_record_decode(ahead, sizeof ahead, &out, err, sizeof err) ==
          -1);
    CHECK(check_has_all(err, "beyond", NULL));

    CHECK(grouplock_key("acme", "g-1.x_y", key, sizeof key) == 0);
    CHECK(strcmp(key, "workmanager/groups/acme/g-1.x_y/lock") == 0);
    CHECK(grouplock_key("acme", "a/b", key, sizeof key) == -1);
    CHECK(grouplock_key("", "g", key, sizeof key) == -1);
    CHECK(grouplock_key("t", "..", key, sizeof key) == -1);
    CHECK(grouplock_key("t", "a b", key, sizeof key) == -1);
    CHECK(grouplock_key(NULL, "g", key, sizeof key) == -1);
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    CHECK(grouplock_key("t", name, key, sizeof key) == -1);
    CHECK(grouplock_key("t", "g", key, 10) == -1);
}

/* ---- one master ------------------------------------------------------- */

static void
test_tokens_grow(void)
{
    struct fault_store *fs = open_store();
    struct hook_log h = { 0 };
    struct grouplock_record rec;
    struct grouplock_stats s;
    struct grouplocks *gl;
    struct result r;

    REQUIRE(fs != NULL);
    gl = new_locks(fs, "inst/boot1", 3, NULL, &h);
    REQUIRE(gl != NULL);

    r = acquire_wait(gl, "t", "g");
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK_EQ(r.token, 1);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK(strcmp(rec.holder, "inst/boot1") == 0);
    CHECK_EQ(rec.token, 1);
    CHECK(rec.acquired_ms > 0); /* the real wall clock */

    r = release_wait(gl, "t", "g", 1);
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK(rec.holder[0] == '\0');
    CHECK_EQ(rec.token, 1); /* kept across the release */
    CHECK_EQ(rec.acquired_ms, 0);

    r = acquire_wait(gl, "t", "g");
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK_EQ(r.token, 2);
    r = release_wait(gl, "t", "g", 2);
    CHECK_EQ(r.status, GROUPLOCK_OK);
    /* Releasing again is stale: the lock is free. */
    r = release_wait(gl, "t", "g", 2);
    CHECK_EQ(r.status, GROUPLOCK_STALE);
    CHECK(check_has_all(r.message, "t/g", "free", NULL));

    CHECK_EQ(h.n, 4);
    CHECK(strcmp(h.what[0], "acquired") == 0 && h.token[0] == 1);
    CHECK(strcmp(h.what[1], "released") == 0 && h.token[1] == 1);
    CHECK(strcmp(h.what[2], "acquired") == 0 && h.token[2] == 2);
    CHECK(strcmp(h.what[3], "released") == 0 && h.token[3] == 2);
    grouplocks_stats(gl, &s);
    CHECK_EQ(s.acquired, 2);
    CHECK_EQ(s.waits, 2);
    CHECK_EQ(s.retries, 0);
    CHECK_EQ(s.stolen, 0);
    grouplocks_free(gl);
    store_close(&fs->st);
}

/* Acquisitions of one group by one master queue locally: in order, the
 * next only after a release, without retries. */
static void
test_fifo(void)
{
    struct fault_store *fs = open_store();
    struct result r[3] = { { 0 } }, rel;
    struct grouplock_stats s;
    struct grouplocks *gl;

    REQUIRE(fs != NULL);
    gl = new_locks(fs, "inst/boot1", 1, NULL, NULL);
    REQUIRE(gl != NULL);
    seq = 0;
    for (int i = 0; i < 3; i++)
        grouplocks_acquire(gl, "t", "g", on_result, &r[i]);
    wait_for(&r[0]);
    CHECK_EQ(r[0].status, GROUPLOCK_OK);
    CHECK_EQ(r[0].token, 1);
    /* Far longer than the backoff of a retry (5 ms): nothing moves. */
    run_until(NULL, 100);
    CHECK(!r[1].done && !r[2].done);

    rel = release_wait(gl, "t", "g", r[0].token);
    CHECK_EQ(rel.status, GROUPLOCK_OK);
    wait_for(&r[1]);
    CHECK_EQ(r[1].status, GROUPLOCK_OK);
    CHECK_EQ(r[1].token, 2);
    run_until(NULL, 50);
    CHECK(!r[2].done);

    /* A release with a token that is not the held one serves nobody. */
    rel = release_wait(gl, "t", "g", 1);
    CHECK_EQ(rel.status, GROUPLOCK_STALE);
    run_until(NULL, 50);
    CHECK(!r[2].done);

    rel = release_wait(gl, "t", "g", r[1].token);
    CHECK_EQ(rel.status, GROUPLOCK_OK);
    wait_for(&r[2]);
    CHECK_EQ(r[2].status, GROUPLOCK_OK);
    CHECK_EQ(r[2].token, 3);
    CHECK(r[0].seq < r[1].seq && r[1].seq < r[2].seq);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(r[i].calls, 1);

    /* Released without a callback, the lock is free for the next one. */
    grouplocks_release(gl, "t", "g", r[2].token, NULL, NULL);
    r[0] = acquire_wait(gl, "t", "g");
    CHECK_EQ(r[0].token, 4);

    grouplocks_stats(gl, &s);
    CHECK_EQ(s.retries, 0);
    CHECK_EQ(s.acquired, 4);
    CHECK_EQ(s.contention, 0);
    grouplocks_free(gl);
    store_close(&fs->st);
}

/* ---- two masters on one store ----------------------------------------- */

static void
test_contention_and_steal(void)
{
    struct fault_store *fs = open_store();
    int64_t clock_a = T0, clock_b = T0;
    struct hook_log ha = { 0 }, hb = { 0 };
    struct grouplocks *a, *b;
    struct grouplock_record rec;
    struct grouplock_stats s;
    struct result r, ra;

    REQUIRE(fs != NULL);
    a = new_locks(fs, "alpha/boot-a", 2, &clock_a, &ha);
    b = new_locks(fs, "beta/boot-b", 2, &clock_b, &hb);
    REQUIRE(a != NULL && b != NULL);

    ra = acquire_wait(a, "t", "g");
    CHECK_EQ(ra.status, GROUPLOCK_OK);
    CHECK_EQ(ra.token, 1);

    clock_b = T0 + MAX_AGE; /* exactly the max age: not stale yet */
    r = acquire_wait(b, "t", "g");
    CHECK_EQ(r.status, GROUPLOCK_CONTENTION);
    CHECK_EQ(r.token, 0);
    CHECK(check_has_all(r.message, "t/g", "alpha/boot-a", "token 1", "30000 ms",
                        "2 retries", NULL));
    grouplocks_stats(b, &s);
    CHECK_EQ(s.retries, 2);
    CHECK_EQ(s.contention, 1);
    CHECK_EQ(s.waits, 1);
    CHECK(s.wait_ms_total >= 10); /* the backoff waits: 5 then 10 ms */
    CHECK_EQ(s.acquired + s.stolen, 0);

    clock_b = T0 + MAX_AGE + 1;
    r = acquire_wait(b, "t", "g");
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK_EQ(r.token, 2);
    CHECK_EQ(hb.n, 1);
    CHECK(strcmp(hb.what[0], "stolen") == 0 && hb.token[0] == 2);
    grouplocks_stats(b, &s);
    CHECK_EQ(s.stolen, 1);
    CHECK_EQ(s.acquired, 0);
    CHECK_EQ(s.retries, 2); /* the steal needed none */

    /* A's writes under its old token are refused, and so is its
     * release, which leaves B's lock alone. */
    r = note_wait(a, "t", "g", ra.token);
    CHECK_EQ(r.status, GROUPLOCK_STALE);
    CHECK(check_has_all(r.message, "token 1", "beta/boot-b", "token 2", NULL));
    grouplocks_stats(a, &s);
    CHECK_EQ(s.stale_writes, 1);
    r = release_wait(a, "t", "g", ra.token);
    CHECK_EQ(r.status, GROUPLOCK_STALE);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK(strcmp(rec.holder, "beta/boot-b") == 0);
    CHECK_EQ(rec.token, 2);
    CHECK_EQ(rec.acquired_ms, T0 + MAX_AGE + 1);
    CHECK_EQ(ha.n, 1); /* "acquired" only: no "released" */

    /* B's own writes go through. */
    r = note_wait(b, "t", "g", 2);
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK_EQ(r.token, 2);

    /* A record under this very holder string but a token this instance
     * does not hold (a crash of an earlier run with the same boot id) is
     * somebody else's lock: fresh, it is waited for. */
    CHECK(write_lock(fs, "t", "h", "beta/boot-b", 5, clock_b, 0) == 0);
    r = acquire_wait(b, "t", "h");
    CHECK_EQ(r.status, GROUPLOCK_CONTENTION);
    CHECK(check_has_all(r.message, "beta/boot-b", "token 5", NULL));
    r = note_wait(b, "t", "h", 4);
    CHECK_EQ(r.status, GROUPLOCK_STALE);

    grouplocks_free(a);
    grouplocks_free(b);
    store_close(&fs->st);
}

/* A stale holder that wrote under its token is slow, not dead: its lock
 * is not stolen. */
static void
test_abort_steal(void)
{
    struct fault_store *fs = open_store();
    int64_t clock_a = T0, clock_b = T0;
    struct grouplocks *a, *b;
    struct grouplock_record rec;
    struct grouplock_stats s;
    struct hook_log hb = { 0 };
    struct result r, ra;

    REQUIRE(fs != NULL);
    a = new_locks(fs, "alpha/boot-a", 2, &clock_a, NULL);
    b = new_locks(fs, "beta/boot-b", 2, &clock_b, &hb);
    REQUIRE(a != NULL && b != NULL);

    ra = acquire_wait(a, "t", "g");
    CHECK_EQ(ra.token, 1);
    r = note_wait(a, "t", "g", ra.token);
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK_EQ(rec.last_write_token, 1);

    clock_b = T0 + MAX_AGE + 1000;
    r = acquire_wait(b, "t", "g");
    CHECK_EQ(r.status, GROUPLOCK_CONTENTION);
    CHECK(check_has_all(r.message, "alpha/boot-a", "token 1",
                        "written under its token", "31000 ms", NULL));
    grouplocks_stats(b, &s);
    CHECK_EQ(s.retries, 2);
    CHECK_EQ(s.stolen, 0);
    CHECK_EQ(hb.n, 0);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK(strcmp(rec.holder, "alpha/boot-a") == 0);
    CHECK_EQ(rec.token, 1);

    /* A finishes and releases; B then takes the lock normally, and the
     * last write's token survives in the record. */
    r = release_wait(a, "t", "g", ra.token);
    CHECK_EQ(r.status, GROUPLOCK_OK);
    r = acquire_wait(b, "t", "g");
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK_EQ(r.token, 2);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK_EQ(rec.last_write_token, 1);
    CHECK(hb.n == 1 && strcmp(hb.what[0], "acquired") == 0);

    grouplocks_free(a);
    grouplocks_free(b);
    store_close(&fs->st);
}

/* Another master's write between our read and our compare-and-set. */
static void
test_conflict(void)
{
    struct fault_store *fs = open_store();
    int64_t clock = T0;
    struct grouplock_record rec;
    struct grouplock_stats s;
    struct grouplocks *gl;
    struct result r;

    REQUIRE(fs != NULL);
    gl = new_locks(fs, "inst/boot1", 2, &clock, NULL);
    REQUIRE(gl != NULL);

    /* It freed the lock at token 7: we read again and take token 8. */
    sneak(fs, "t", "g", "", 7, 0, 7);
    r = acquire_wait(gl, "t", "g");
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK_EQ(r.token, 8);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK_EQ(rec.token, 8);
    CHECK_EQ(rec.last_write_token, 7);
    grouplocks_stats(gl, &s);
    CHECK_EQ(s.retries, 0); /* a conflict is no backoff wait */

    /* It stole our lock just as we recorded a write: refused. */
    sneak(fs, "t", "g", "other/x", 9, clock, 0);
    r = note_wait(gl, "t", "g", 8);
    CHECK_EQ(r.status, GROUPLOCK_STALE);
    CHECK(check_has_all(r.message, "other/x", "token 9", NULL));
    /* ... and our release leaves its lock alone. */
    r = release_wait(gl, "t", "g", 8);
    CHECK_EQ(r.status, GROUPLOCK_STALE);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK(strcmp(rec.holder, "other/x") == 0);

    /* It takes the lock under our feet and keeps it: one retry went to
     * the conflict, the second to a backoff wait. */
    sneak(fs, "t", "k", "other/x", 1, clock, 0);
    r = acquire_wait(gl, "t", "k");
    CHECK_EQ(r.status, GROUPLOCK_CONTENTION);
    CHECK(check_has_all(r.message, "other/x", "2 retries", NULL));
    grouplocks_stats(gl, &s);
    CHECK_EQ(s.retries, 1);

    grouplocks_free(gl);
    store_close(&fs->st);
}

/* A failing store is reported with its own message. */
static void
test_store_errors(void)
{
    struct fault_store *fs = open_store();
    struct grouplocks *gl;
    struct result r, r2;

    REQUIRE(fs != NULL);
    gl = new_locks(fs, "inst/boot1", 2, NULL, NULL);
    REQUIRE(gl != NULL);

    fs->fail_gets = 1;
    r = acquire_wait(gl, "t", "g");
    CHECK_EQ(r.status, GROUPLOCK_ERROR);
    CHECK(check_has_all(r.message, "injected read failure",
                        "workmanager/groups/t/g/lock", NULL));
    r = acquire_wait(gl, "t", "g"); /* the queue was not left stuck */
    CHECK_EQ(r.status, GROUPLOCK_OK);
    fs->fail_gets = 1;
    r2 = note_wait(gl, "t", "g", r.token);
    CHECK_EQ(r2.status, GROUPLOCK_ERROR);
    CHECK(check_has_all(r2.message, "injected read failure", NULL));

    /* A corrupt record is an error naming the defect. */
    {
        struct result r3;
        enum store_status st = STORE_INVALID;
        static const uint8_t junk[] = { 0x08, 0x05 };

        REQUIRE(store_put(fs->inner, "workmanager/groups/t/bad/lock", junk,
                          sizeof junk, STORE_ANY_REVISION, on_put_done,
                          &st) == 0);
        while (st == STORE_INVALID)
            event_base_loop(base, EVLOOP_ONCE);
        r3 = acquire_wait(gl, "t", "bad");
        CHECK_EQ(r3.status, GROUPLOCK_ERROR);
        CHECK(check_has_all(r3.message, "unknown format 5", NULL));
    }

    /* Names that make no key are refused, after the call returned. */
    r = acquire_wait(gl, "t", "a/b");
    CHECK_EQ(r.status, GROUPLOCK_ERROR);
    CHECK(check_has_all(r.message, "a/b", NULL));
    r = note_wait(gl, "", "g", 1);
    CHECK_EQ(r.status, GROUPLOCK_ERROR);
    r = release_wait(gl, "t", "..", 1);
    CHECK_EQ(r.status, GROUPLOCK_ERROR);

    grouplocks_free(gl);
    store_close(&fs->st);
}

/* A second note_write under the same token writes nothing. */
static void
test_note_twice(void)
{
    struct fault_store *fs = open_store();
    struct grouplock_record rec;
    uint64_t rev1 = 0, rev2 = 0;
    struct grouplocks *gl;
    struct result r, n;

    REQUIRE(fs != NULL);
    gl = new_locks(fs, "inst/boot1", 2, NULL, NULL);
    REQUIRE(gl != NULL);
    r = acquire_wait(gl, "t", "g");
    REQUIRE(r.status == GROUPLOCK_OK);
    CHECK(read_lock(fs, "t", "g", &rec, &rev1) == 0);
    CHECK_EQ(rec.last_write_token, 0);

    n = note_wait(gl, "t", "g", r.token);
    CHECK_EQ(n.status, GROUPLOCK_OK);
    CHECK_EQ(n.token, r.token);
    CHECK(read_lock(fs, "t", "g", &rec, &rev2) == 0);
    CHECK_EQ(rec.last_write_token, r.token);
    CHECK_EQ(rev2, rev1 + 1);

    n = note_wait(gl, "t", "g", r.token); /* asserts: not synchronous */
    CHECK_EQ(n.status, GROUPLOCK_OK);
    CHECK(read_lock(fs, "t", "g", &rec, &rev1) == 0);
    CHECK_EQ(rev1, rev2);

    grouplocks_free(gl);
    store_close(&fs->st);
}

static void
test_release_stale_own(void)
{
    struct fault_store *fs = open_store();
    struct grouplock_record rec;
    struct hook_log h = { 0 };
    struct grouplocks *gl;
    struct result r;

    REQUIRE(fs != NULL);
    REQUIRE(write_lock(fs, "t", "g1", "inst/oldboot", 3, T0, 2) == 0);
    REQUIRE(write_lock(fs, "t", "g2", "inst/ourboot", 4, T0, 0) == 0);
    REQUIRE(write_lock(fs, "t", "g3", "other/x", 5, T0, 0) == 0);
    REQUIRE(write_lock(fs, "u", "g4", "inst2/old", 6, T0, 0) == 0);
    REQUIRE(write_lock(fs, "u", "g5", "inst/older", 7, T0, 7) == 0);
    REQUIRE(write_lock(fs, "u", "g6", "", 8, 0, 0) == 0);
    gl = new_locks(fs, "inst/ourboot", 0, NULL, &h);
    REQUIRE(gl != NULL);

    CHECK_EQ(grouplocks_release_stale_own(gl, "inst"), 2);
    run_until(NULL, 200); /* the frees are asynchronous */
    CHECK_EQ(h.n, 2);
    CHECK(read_lock(fs, "t", "g1", &rec, NULL) == 0);
    CHECK(rec.holder[0] == '\0' && rec.token == 3 && rec.last_write_token == 2);
    CHECK(read_lock(fs, "u", "g5", &rec, NULL) == 0);
    CHECK(rec.holder[0] == '\0' && rec.token == 7);
    CHECK(read_lock(fs, "t", "g2", &rec, NULL) == 0);
    CHECK(strcmp(rec.holder, "inst/ourboot") == 0 && rec.token == 4);
    CHECK(read_lock(fs, "t", "g3", &rec, NULL) == 0);
    CHECK(strcmp(rec.holder, "other/x") == 0);
    CHECK(read_lock(fs, "u", "g4", &rec, NULL) == 0);
    CHECK(strcmp(rec.holder, "inst2/old") == 0);

    /* Freed, the lock is taken at once (max_retries 0) with the next
     * token. */
    r = acquire_wait(gl, "t", "g1");
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK_EQ(r.token, 4);
    CHECK_EQ(grouplocks_release_stale_own(gl, "inst"), 0);

    grouplocks_free(gl);
    store_close(&fs->st);
}

/* ---- the lease --------------------------------------------------------- */

/* A lease serves consecutive holdings without the store: one write
 * reserves a block of tokens, each holding takes the next; the block's
 * end extends the lease with one more write; idleness releases it. */
static void
test_lease(void)
{
    struct fault_store *fs = open_store();
    struct grouplock_record rec;
    struct grouplock_stats s;
    struct hook_log h = { 0 };
    struct grouplocks *gl;
    struct result r, n;
    uint64_t rev, rev2;

    REQUIRE(fs != NULL);
    gl = new_lease_locks(fs, "inst/boot1", 4, 50, &h);
    REQUIRE(gl != NULL);
    r = acquire_wait(gl, "t", "g");
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK_EQ(r.token, 1);
    CHECK(read_lock(fs, "t", "g", &rec, &rev) == 0);
    CHECK(strcmp(rec.holder, "inst/boot1") == 0);
    CHECK_EQ(rec.token, 4); /* the block's high-water mark */

    /* The first write under the lease is recorded for the whole block. */
    n = note_wait(gl, "t", "g", 1);
    CHECK_EQ(n.status, GROUPLOCK_OK);
    CHECK(read_lock(fs, "t", "g", &rec, &rev) == 0);
    CHECK_EQ(rec.last_write_token, 4);

    /* Tokens 2..4: released and taken again, no store write at all. */
    for (uint64_t t = 2; t <= 4; t++) {
        CHECK_EQ(release_wait(gl, "t", "g", t - 1).status, GROUPLOCK_OK);
        r = acquire_wait(gl, "t", "g");
        CHECK_EQ(r.status, GROUPLOCK_OK);
        CHECK_EQ(r.token, t);
        n = note_wait(gl, "t", "g", t);
        CHECK_EQ(n.status, GROUPLOCK_OK);
    }
    CHECK(read_lock(fs, "t", "g", &rec, &rev2) == 0);
    CHECK_EQ(rev2, rev);
    /* A write under an earlier token of the same lease is stale. */
    n = note_wait(gl, "t", "g", 3);
    CHECK_EQ(n.status, GROUPLOCK_STALE);

    /* Token 5: the block is used up, one write extends it (still
     * written under: no steal while the lease lasts). */
    CHECK_EQ(release_wait(gl, "t", "g", 4).status, GROUPLOCK_OK);
    r = acquire_wait(gl, "t", "g");
    CHECK_EQ(r.token, 5);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK_EQ(rec.token, 8);
    CHECK_EQ(rec.last_write_token, 8);
    CHECK(strcmp(rec.holder, "inst/boot1") == 0);

    /* Idle: released in the store after lease_idle_ms, token kept. */
    CHECK_EQ(release_wait(gl, "t", "g", 5).status, GROUPLOCK_OK);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK(strcmp(rec.holder, "inst/boot1") == 0);
    run_until(NULL, 200);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK(rec.holder[0] == '\0');
    CHECK_EQ(rec.token, 8);
    r = acquire_wait(gl, "t", "g");
    CHECK_EQ(r.token, 9);

    grouplocks_stats(gl, &s);
    CHECK_EQ(s.acquired, 2);
    CHECK_EQ(s.renewals, 1);
    CHECK_EQ(s.tokens, 6);
    CHECK_EQ(s.stale_writes, 1);
    CHECK_EQ(h.n, 3);
    CHECK(strcmp(h.what[0], "acquired") == 0 && h.token[0] == 1);
    CHECK(strcmp(h.what[1], "released") == 0 && h.token[1] == 5);
    CHECK(strcmp(h.what[2], "acquired") == 0 && h.token[2] == 9);
    grouplocks_free(gl);
    store_close(&fs->st);
}

/* A holding shared by more events (a group's turn): the lock stays held
 * until the last share is released, a writer under its token is ours,
 * the next acquisition waits for the last release; no share without a
 * lease, under another token, or once the lease is due for renewal. */
static void
test_share(void)
{
    struct fault_store *fs = open_store();
    struct grouplock_stats s;
    struct grouplocks *gl;
    struct result r, next = { 0 };

    REQUIRE(fs != NULL);
    gl = new_lease_locks(fs, "inst/boot1", 16, 50, NULL);
    REQUIRE(gl != NULL);
    r = acquire_wait(gl, "t", "g");
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK(grouplocks_share(gl, "t", "g", r.token) == 0);
    CHECK(grouplocks_share(gl, "t", "g", r.token) == 0);
    CHECK(grouplocks_share(gl, "t", "g", r.token + 1) == -1);
    CHECK(grouplocks_share(gl, "t", "other", r.token) == -1);
    CHECK_EQ(note_wait(gl, "t", "g", r.token).status, GROUPLOCK_OK);
    grouplocks_acquire(gl, "t", "g", on_result, &next);
    CHECK_EQ(release_wait(gl, "t", "g", r.token).status, GROUPLOCK_OK);
    CHECK_EQ(release_wait(gl, "t", "g", r.token).status, GROUPLOCK_OK);
    run_until(NULL, 20);
    CHECK(!next.done); /* one share left */
    CHECK_EQ(release_wait(gl, "t", "g", r.token).status, GROUPLOCK_OK);
    wait_for(&next);
    CHECK_EQ(next.status, GROUPLOCK_OK);
    CHECK_EQ(next.token, r.token + 1);
    grouplocks_stats(gl, &s);
    CHECK_EQ(s.shared, 2);
    CHECK_EQ(s.tokens, 2);
    CHECK_EQ(release_wait(gl, "t", "g", next.token).status, GROUPLOCK_OK);
    grouplocks_free(gl);

    /* A lease renewed half max_age ago or more is not shared: the next
     * event acquires (and renews it). */
    int64_t clock = 1000000;
    gl = new_lease_locks(fs, "inst/boot1", 16, 50, NULL);
    REQUIRE(gl != NULL);
    grouplocks_set_clock(gl, fake_now, &clock);
    r = acquire_wait(gl, "t", "r");
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK(grouplocks_share(gl, "t", "r", r.token) == 0);
    clock += MAX_AGE / 2;
    CHECK(grouplocks_share(gl, "t", "r", r.token) == -1);
    CHECK_EQ(release_wait(gl, "t", "r", r.token).status, GROUPLOCK_OK);
    CHECK_EQ(release_wait(gl, "t", "r", r.token).status, GROUPLOCK_OK);
    grouplocks_free(gl);

    /* Leases off: every event holds the lock itself. */
    gl = new_lease_locks(fs, "inst/boot1", 1, 0, NULL);
    REQUIRE(gl != NULL);
    r = acquire_wait(gl, "t", "h");
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK(grouplocks_share(gl, "t", "h", r.token) == -1);
    CHECK_EQ(release_wait(gl, "t", "h", r.token).status, GROUPLOCK_OK);
    grouplocks_free(gl);
    store_close(&fs->st);
}

/* A master that dies in the middle of a block: the block's high-water
 * mark was durable before its first token was used, so the next run's
 * tokens are all greater than any the dead one handed out. */
static void
test_lease_crash_mid_block(void)
{
    struct fault_store *fs = open_store();
    unsigned dir = dir_seq;
    struct grouplock_record rec;
    struct grouplocks *gl;
    struct result r;
    uint64_t used = 0;

    REQUIRE(fs != NULL);
    gl = new_lease_locks(fs, "inst/boot1", 16, 1000, NULL);
    REQUIRE(gl != NULL);
    for (int i = 0; i < 3; i++) {
        r = acquire_wait(gl, "t", "g");
        CHECK_EQ(r.status, GROUPLOCK_OK);
        CHECK(r.token > used);
        used = r.token;
        if (i < 2)
            CHECK_EQ(release_wait(gl, "t", "g", r.token).status, GROUPLOCK_OK);
    }
    CHECK_EQ(used, 3);
    /* The crash: the lock is held (token 3 of 1..16), nothing released. */
    grouplocks_free(gl);
    store_close(&fs->st);

    fs = open_store_at(dir);
    REQUIRE(fs != NULL);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK(strcmp(rec.holder, "inst/boot1") == 0);
    CHECK_EQ(rec.token, 16);
    gl = new_lease_locks(fs, "inst/boot2", 16, 1000, NULL);
    REQUIRE(gl != NULL);
    CHECK_EQ(grouplocks_release_stale_own(gl, "inst"), 1);
    run_until(NULL, 100);
    r = acquire_wait(gl, "t", "g");
    CHECK_EQ(r.status, GROUPLOCK_OK);
    CHECK_EQ(r.token, 17);
    CHECK(r.token > used);
    CHECK(read_lock(fs, "t", "g", &rec, NULL) == 0);
    CHECK_EQ(rec.token, 32);
    grouplocks_free(gl);
    store_close(&fs->st);
}

/* ---- shutdown --------------------------------------------------------- */

static struct grouplocks *reentered;
static struct result reentry;

/* A user that asks for more while it is being told to stop. */
static void
on_result_reenter(enum grouplock_status status, uint64_t token,
                  const char *message, void *arg)
{
    on_result(status, token, message, arg);
    if (reentered != NULL) {
        grouplocks_acquire(reentered, "t", "g", on_result, &reentry);
        grouplocks_release(reentered, "t", "g", 1, NULL, NULL);
        reentered = NULL;
    }
}

static void
test_free_pending(void)
{
    struct fault_store *fs = open_store();
    int64_t clock_a = T0, clock_b = T0;
    struct result held, q1 = { 0 }, q2 = { 0 }, nb = { 0 }, nw = { 0 },
                        late = { 0 };
    struct grouplocks *a, *b;

    REQUIRE(fs != NULL);
    a = new_locks(fs, "alpha/boot-a", 2, &clock_a, NULL);
    b = new_locks(fs, "beta/boot-b", 50, &clock_b, NULL);
    REQUIRE(a != NULL && b != NULL);

    held = acquire_wait(a, "t", "g");
    REQUIRE(held.status == GROUPLOCK_OK);
    /* Two local waiters behind the holder, one remote one in backoff. */
    grouplocks_acquire(a, "t", "g", on_result_reenter, &q1);
    grouplocks_acquire(a, "t", "g", on_result, &q2);
    grouplocks_acquire(b, "t", "g", on_result, &nb);
    run_until(NULL, 30);
    CHECK(!q1.done && !q2.done && !nb.done);
    /* Writes in flight: their store completions come after the free. */
    grouplocks_note_write(a, "t", "g", held.token, on_result, &nw);
    grouplocks_acquire(a, "t", "other", on_result, &late);

    reentered = a;
    memset(&reentry, 0, sizeof reentry);
    grouplocks_free(a);
    CHECK(q1.done && q1.status == GROUPLOCK_ERROR);
    CHECK(check_has_all(q1.message, "shutting down", NULL));
    CHECK(q2.done && q2.status == GROUPLOCK_ERROR);
    CHECK(nw.done && nw.status == GROUPLOCK_ERROR);
    CHECK(late.done && late.status == GROUPLOCK_ERROR);
    CHECK(reentry.done && reentry.status == GROUPLOCK_ERROR);
    CHECK(check_has_all(reentry.message, "shutting down", NULL));

    /* The freed instance's write completes in the store without it (ASan
     * watches), and B, still waiting, is told at its own free. */
    run_until(NULL, 30);
    CHECK_EQ(q1.calls + q2.calls + nw.calls + late.calls, 4);
    grouplocks_free(b);
    CHECK(nb.done && nb.status == GROUPLOCK_ERROR);
    store_close(&fs->st);
}

/* Free with a put in flight, then close the store at once: the store's
 * drain runs the orphaned completions. */
static void
test_free_then_close(void)
{
    struct fault_store *fs = open_store();
    struct result r, rel = { 0 }, acq = { 0 };
    struct grouplocks *gl;

    REQUIRE(fs != NULL);
    gl = new_locks(fs, "inst/boot1", 2, NULL, NULL);
    REQUIRE(gl != NULL);
    r = acquire_wait(gl, "t", "g");
    REQUIRE(r.status == GROUPLOCK_OK);
    grouplocks_release(gl, "t", "g", r.token, on_result, &rel);
    grouplocks_acquire(gl, "t", "g", on_result, &acq);
    grouplocks_free(gl);
    CHECK(rel.done && rel.status == GROUPLOCK_ERROR);
    CHECK(acq.done && acq.status == GROUPLOCK_ERROR);
    store_close(&fs->st);
}

int
main(void)
{
    int rc, fds;

    alarm(120); /* a hang is a failure, not a stuck build */
    if (mkdtemp(root) == NULL) {
        perror("mkdtemp");
        return 99;
    }
    base = event_base_new();
    if (base == NULL) {
        fprintf(stderr, "event_base_new failed\n");
        return 99;
    }
    fds = check_count_fds();
    RUN(test_decide);
    RUN(test_record);
    RUN(test_tokens_grow);
    RUN(test_fifo);
    RUN(test_contention_and_steal);
    RUN(test_abort_steal);
    RUN(test_conflict);
    RUN(test_store_errors);
    RUN(test_note_twice);
    RUN(test_release_stale_own);
    RUN(test_lease);
    RUN(test_share);
    RUN(test_lease_crash_mid_block);
    RUN(test_free_pending);
    RUN(test_free_then_close);
    check_test = "main";
    CHECK_EQ(check_count_fds(), fds); /* every store closed its files */
    event_base_free(base);
    rc = check_result();
    if (rc == 0)
        check_rmtree(root);
    else
        fprintf(stderr, "kept %s for inspection\n", root);
    return rc;
}
