/*
 * test_store_nats.c — the state store's nats backend
 * (master/store/store_nats*.c) through the public API of
 * master/store/store.h, against a real `nats-server -js` this program
 * starts on a free loopback port with its store in a mkdtemp directory
 * (stopped by its pid and removed at the end).
 *
 * Each test uses buckets of its own (a bucket prefix per test), so the
 * tests share one server and still start empty.  One test changes a blob
 * chunk behind the store's back over a connection of its own, so this
 * test knows the layout store_nats_kv.c documents: bucket PREFIX_blobs,
 * chunks HEX.0, HEX.1, ... and the manifest HEX.
 *
 * Without nats-server the program skips (77), unless NATS_MUST_WORK=1
 * (scripts/test sets it: scripts/install-deps installs nats-server).
 */
#include "config.h"

#include "master/store/store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <nats/nats.h>

#include "master/core/nats_link.h"
#include "tests/unit/check.h"
#include "tests/unit/nats_server.h"
#include "tests/unit/store_wait.h"

/* A blob larger than the biggest code the API admits (24 MiB decoded
 * under max_body_bytes' 32 MiB of base64): it spans many chunks. */
#define BIG_BLOB (24u * 1024 * 1024 + 12345)

static char root[] = "/tmp/test_store_nats.XXXXXX";
static char url[64];
static pid_t server = -1;
static unsigned prefix_seq;
static char prefix[32];
static int memory = 1; /* buckets in memory, else on file */

/* ---- the server --------------------------------------------------------- */

static struct nats_server srv = { .dir = root, .pid = -1 };

static int
server_start(void)
{
    int rc = nats_server_start(&srv);

    server = srv.pid;
    snprintf(url, sizeof url, "%s", srv.url);
    return rc;
}

static void
server_stop(void)
{
    nats_server_stop(&srv);
    server = -1;
}

/* ---- helpers ------------------------------------------------------------ */

/* A store on buckets of the test's own. */
static struct store *
open_store(void)
{
    static struct nats_link_config nl;

    nl = (struct nats_link_config){ .url = url, .who = "test" };
    snprintf(prefix, sizeof prefix, "t%u", ++prefix_seq);
    struct store_config cfg = {
        .backend = "nats",
        .nats = &nl,
        .nats_prefix = prefix,
        .nats_memory = memory,
    };
    char err[1024] = "";
    struct store *st = store_open(&cfg, base, err, sizeof err);

    if (st == NULL)
        fprintf(stderr, "%s: store_open %s: %s\n", check_test, url, err);
    return st;
}

/* The same buckets again (after a close). */
static struct store *
reopen_store(void)
{
    prefix_seq--;
    return open_store();
}

/* Gets key: its status, and whether the value is `value`. */
static enum store_status
get_is(struct store *st, const char *key, const char *value, uint64_t *rev)
{
    uint8_t *v = NULL;
    size_t len = 0;
    uint64_t r = 0;
    char err[512];
    enum store_status s = store_get(st, key, &v, &len, &r, err, sizeof err);

    if (s == STORE_OK && (len != strlen(value) || memcmp(v, value, len) != 0))
        s = STORE_CORRUPT;
    if (rev != NULL)
        *rev = r;
    free(v);
    return s;
}

/* ---- tests -------------------------------------------------------------- */

static void
test_cas(void)
{
    struct store *st = open_store();
    struct result r1, r2, r;
    uint64_t rev;

    REQUIRE(st != NULL);
    r1 = put_wait(st, "workmanager/workers/a", "one", 0);
    CHECK(r1.status == STORE_OK && r1.revision > 0);
    CHECK(r1.on_loop);
    r = put_wait(st, "workmanager/workers/a", "again", 0);
    CHECK(r.status == STORE_CONFLICT);
    CHECK(strstr(r.message, "workmanager/workers/a") != NULL);
    r2 = put_wait(st, "workmanager/workers/a", "two", r1.revision);
    CHECK(r2.status == STORE_OK && r2.revision > r1.revision);
    r = put_wait(st, "workmanager/workers/a", "stale", r1.revision);
    CHECK(r.status == STORE_CONFLICT);
    CHECK(r.on_loop);
    CHECK(get_is(st, "workmanager/workers/a", "two", &rev) == STORE_OK);
    CHECK(rev == r2.revision);
    r = put_wait(st, "workmanager/workers/a", "any", STORE_ANY_REVISION);
    CHECK(r.status == STORE_OK && r.revision > r2.revision);
    r = put_wait(st, "workmanager/workers/none", "x", 7);
    CHECK(r.status == STORE_CONFLICT);
    CHECK(get_is(st, "workmanager/workers/none", "", NULL) == STORE_NOT_FOUND);
    store_close(st);
}

static void
test_delete(void)
{
    struct store *st = open_store();
    struct result r, w;

    REQUIRE(st != NULL);
    CHECK(delete_wait(st, "k", STORE_ANY_REVISION).status == STORE_NOT_FOUND);
    w = put_wait(st, "k", "v", 0);
    REQUIRE(w.status == STORE_OK);
    r = delete_wait(st, "k", w.revision + 1000);
    CHECK(r.status == STORE_CONFLICT);
    CHECK(get_is(st, "k", "v", NULL) == STORE_OK);
    r = delete_wait(st, "k", w.revision);
    CHECK(r.status == STORE_OK && r.revision == 0);
    CHECK(get_is(st, "k", "", NULL) == STORE_NOT_FOUND);
    CHECK(delete_wait(st, "k", STORE_ANY_REVISION).status == STORE_NOT_FOUND);
    /* "absent" includes "deleted": a create over the delete marker */
    r = put_wait(st, "k", "again", 0);
    CHECK(r.status == STORE_OK && r.revision > w.revision);
    CHECK(put_wait(st, "k", "twice", 0).status == STORE_CONFLICT);
    CHECK(get_is(st, "k", "again", NULL) == STORE_OK);
    store_close(st);
}

struct seen {
    char keys[8][64];
    int n, stop_after;
};

static int
on_key(const char *key, enum store_status status, const uint8_t *value,
       size_t len, uint64_t revision, const char *message, void *arg)
{
    struct seen *s = arg;

    (void)message;
    CHECK(status == STORE_OK && revision > 0);
    CHECK(len == strlen(key) && memcmp(value, key, len) == 0);
    if (s->n < 8)
        snprintf(s->keys[s->n], sizeof s->keys[0], "%s", key);
    s->n++;
    return s->stop_after > 0 && s->n == s->stop_after;
}

/* Keys with dots (one KV token each, "=2E" inside), in key order, by
 * prefix; deleted keys are not listed. */
static void
test_list(void)
{
    static const char *const keys[] = { "b/1",    "a/y.z",  "a/x",
                                        "a/.dot", "a/gone", "ab" };
    struct store *st = open_store();
    struct seen s = { 0 };
    char err[512];

    REQUIRE(st != NULL);
    CHECK(store_list(st, "", on_key, &s, err, sizeof err) == STORE_OK);
    CHECK(s.n == 0); /* a new bucket is empty */
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK(put_wait(st, keys[i], keys[i], 0).status == STORE_OK);
    CHECK(delete_wait(st, "a/gone", STORE_ANY_REVISION).status == STORE_OK);
    CHECK(store_list(st, "a/", on_key, &s, err, sizeof err) == STORE_OK);
    REQUIRE(s.n == 3);
    CHECK(strcmp(s.keys[0], "a/.dot") == 0);
    CHECK(strcmp(s.keys[1], "a/x") == 0);
    CHECK(strcmp(s.keys[2], "a/y.z") == 0);
    memset(&s, 0, sizeof s);
    s.stop_after = 2;
    CHECK(store_list(st, "", on_key, &s, err, sizeof err) == STORE_OK);
    CHECK(s.n == 2);
    CHECK(get_is(st, "a/y.z", "a/y.z", NULL) == STORE_OK);
    store_close(st);
}

/* Records outlive the store: a new one on the same buckets reads them at
 * the same revisions. */
static void
test_persistence(void)
{
    struct store *st = open_store();
    struct result w;
    uint64_t rev = 0;

    REQUIRE(st != NULL);
    w = put_wait(st, "workmanager/workers/p", "kept", 0);
    CHECK(w.status == STORE_OK);
    store_close(st);
    st = reopen_store();
    REQUIRE(st != NULL);
    CHECK(get_is(st, "workmanager/workers/p", "kept", &rev) == STORE_OK);
    CHECK(rev == w.revision);
    store_close(st);
}

static uint8_t *
pattern(size_t len, unsigned seed)
{
    uint8_t *b = malloc(len > 0 ? len : 1);

    for (size_t i = 0; b != NULL && i < len; i++)
        b[i] = (uint8_t)((i * 2654435761u + seed) >> 13);
    return b;
}

static struct result
blob_put_wait(struct store *st, const uint8_t *data, size_t len,
              char hex[STORE_SHA256_HEX])
{
    struct result r = { 0 };

    pending++;
    if (store_blob_put(st, data, len, hex, on_done, &r) != 0) {
        pending--;
        r.status = STORE_INVALID;
        return r;
    }
    wait_all();
    return r;
}

static void
test_blobs(void)
{
    struct store *st = open_store();
    char hex[STORE_SHA256_HEX], empty[STORE_SHA256_HEX], err[512];
    uint8_t *big = pattern(BIG_BLOB, 7), *got = NULL;
    size_t len = 0;
    struct result r;

    REQUIRE(st != NULL && big != NULL);
    r = blob_put_wait(st, big, BIG_BLOB, hex);
    CHECK(r.status == STORE_OK);
    CHECK(r.on_loop);
    CHECK(store_blob_get(st, hex, &got, &len, err, sizeof err) == STORE_OK);
    CHECK(len == BIG_BLOB && got != NULL && memcmp(got, big, len) == 0);
    free(got);
    got = NULL;
    /* idempotent */
    CHECK(blob_put_wait(st, big, BIG_BLOB, hex).status == STORE_OK);
    CHECK(blob_put_wait(st, big, 0, empty).status == STORE_OK);
    CHECK(store_blob_get(st, empty, &got, &len, err, sizeof err) == STORE_OK);
    CHECK(len == 0);
    free(got);
    got = NULL;

    pending++;
    CHECK(store_blob_delete(st, hex, on_done, &r) == 0);
    wait_all();
    CHECK(r.status == STORE_OK);
    CHECK(store_blob_get(st, hex, &got, &len, err, sizeof err) ==
          STORE_NOT_FOUND);
    pending++;
    CHECK(store_blob_delete(st, hex, on_done, &r) == 0);
    wait_all();
    CHECK(r.status == STORE_NOT_FOUND);
    free(big);
    store_close(st);
}

/* A chunk changed behind the store's back: the blob reads as corrupt,
 * never as wrong bytes; a put of the same bytes repairs it. */
static void
test_corrupt_blob(void)
{
    struct store *st = open_store();
    uint8_t *data = pattern(3 * 512 * 1024, 3), *got = NULL;
    char hex[STORE_SHA256_HEX], subject[160], err[512];
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsErrCode jerr = 0;
    size_t len = 0;

    REQUIRE(st != NULL && data != NULL);
    CHECK(blob_put_wait(st, data, 3 * 512 * 1024, hex).status == STORE_OK);
    snprintf(subject, sizeof subject, "$KV.%s_blobs.%s.1", prefix, hex);
    REQUIRE(natsConnection_ConnectTo(&nc, url) == NATS_OK);
    REQUIRE(natsConnection_JetStream(&js, nc, NULL) == NATS_OK);
    CHECK(js_Publish(NULL, js, subject, "junk", 4, NULL, &jerr) == NATS_OK);
    CHECK(store_blob_get(st, hex, &got, &len, err, sizeof err) ==
          STORE_CORRUPT);
    CHECK(got == NULL);
    CHECK(strstr(err, hex) != NULL);
    CHECK(blob_put_wait(st, data, 3 * 512 * 1024, hex).status == STORE_OK);
    CHECK(store_blob_get(st, hex, &got, &len, err, sizeof err) == STORE_OK);
    free(got);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(data);
    store_close(st);
}

/* The server goes away and comes back: reads fail at once naming the
 * URL meanwhile (they run on the loop: no stall), and the store finds
 * the server again by itself, its records intact (file storage). */
static void
test_outage(void)
{
    struct store *st;
    struct result w;
    char err[512] = "";
    uint8_t *v = NULL;
    size_t len = 0;
    uint64_t rev = 0;
    enum store_status s = STORE_OK;

    memory = 0;
    st = open_store();
    memory = 1;
    REQUIRE(st != NULL);
    w = put_wait(st, "k", "before", 0);
    REQUIRE(w.status == STORE_OK);
    server_stop();
    for (int i = 0; i < 300 && s == STORE_OK; i++) {
        s = store_get(st, "k", &v, &len, &rev, err, sizeof err);
        free(v);
        v = NULL;
        if (s == STORE_OK)
            usleep(10000);
    }
    CHECK(s == STORE_IO);
    CHECK(strstr(err, "is unreachable") != NULL);
    CHECK(strstr(err, url) != NULL);
    REQUIRE(server_start() == 0);
    s = STORE_IO;
    for (int i = 0; i < 1000 && s == STORE_IO; i++) {
        s = store_get(st, "k", &v, &len, &rev, err, sizeof err);
        if (s == STORE_IO)
            usleep(10000);
    }
    CHECK(s == STORE_OK && len == 6 && memcmp(v, "before", 6) == 0);
    CHECK(rev == w.revision);
    free(v);
    CHECK(put_wait(st, "k", "after", w.revision).status == STORE_OK);
    store_close(st);
}

/* Nothing listens: the open fails naming the URL. */
static void
test_unreachable(void)
{
    char bad[64], err[1024] = "";
    struct nats_link_config nl = { .url = bad, .who = "test" };
    struct store_config cfg = { .backend = "nats", .nats = &nl };

    snprintf(bad, sizeof bad, "nats://127.0.0.1:%d", nats_server_free_port());
    CHECK(store_open(&cfg, base, err, sizeof err) == NULL);
    CHECK(strstr(err, "cannot connect to NATS at") != NULL);
    CHECK(strstr(err, bad) != NULL);
}

int
main(void)
{
    const char *bin = nats_server_binary();
    int rc;

    alarm(120); /* a hang is a failure, not a stuck build */
    if (bin == NULL)
        return nats_server_missing();
    if (mkdtemp(root) == NULL) {
        perror("mkdtemp");
        return 99;
    }
    srv.bin = bin;
    if (server_start() != 0) {
        fprintf(stderr, "nats-server did not start (see %s)\n", root);
        server_stop();
        return 99;
    }
    base = event_base_new();
    loop_thread = pthread_self();
    RUN(test_cas);
    RUN(test_delete);
    RUN(test_list);
    RUN(test_persistence);
    RUN(test_blobs);
    RUN(test_corrupt_blob);
    RUN(test_outage);
    RUN(test_unreachable);
    event_base_free(base);
    server_stop();
    rc = check_result();
    if (rc == 0)
        check_rmtree(root);
    return rc;
}
