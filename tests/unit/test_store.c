/*
 * test_store.c — the state store's file backend (master/store/store_file*.c)
 * through the public API of master/store/store.h.
 *
 * Everything runs in a fresh mkdtemp directory (removed at the end when
 * every check passed, kept for inspection otherwise), each test in its own
 * state_dir, with this program's own event_base to run the completion
 * callbacks.  The suite runs once per fsync policy (always, batch, off).
 *
 * Corruption is made by hand on the files, so this test knows the layout
 * store_file_records.c documents: records/<key with '/' as '%'>, a
 * 52-byte header ("WMR1", u64 revision, u64 length, SHA-256) then the
 * value, chunk directories "<240 bytes>+" for long names,
 * blobs/<2 hex>/<64 hex>, tmp/.
 */
#include "config.h"

#include "master/store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "tests/unit/check.h"
#include "tests/unit/store_wait.h"

#define HEADER 52
#define CHUNK 240
#define NMANY 1000

static char root[] = "/tmp/test_store.XXXXXX";
static const char *fsync_mode = "always";
static unsigned dir_seq;

/* ---- helpers ----------------------------------------------------------- */

/* A fresh state_dir path (not created) under the test root. */
static void
new_dir(char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s-%u", root, fsync_mode, ++dir_seq);
}

static struct store *
open_store(const char *dir)
{
    struct store_config cfg = {
        .backend = "file",
        .state_dir = dir,
        .fsync = fsync_mode,
    };
    char err[1024] = "";
    struct store *st = store_open(&cfg, base, err, sizeof err);

    if (st == NULL)
        fprintf(stderr, "%s: store_open %s: %s\n", check_test, dir, err);
    return st;
}

/* Gets key and compares with value (NULL: expect status only). */
static enum store_status
get_check(struct store *st, const char *key, const char *value,
          uint64_t *revision, char *err, size_t errlen)
{
    uint8_t *got = NULL;
    uint64_t rev = 0;
    size_t len = 0;
    enum store_status s;

    err[0] = '\0';
    s = store_get(st, key, &got, &len, &rev, err, errlen);
    if (s == STORE_OK && value != NULL) {
        CHECK_EQ(len, strlen(value));
        CHECK(len == strlen(value) && memcmp(got, value, len) == 0);
    }
    if (s != STORE_OK)
        CHECK(got == NULL);
    if (revision != NULL)
        *revision = rev;
    free(got);
    return s;
}

/* The record file of key, as store_file_records.c lays it out. */
static void
record_path(const char *dir, const char *key, char *out, size_t outlen)
{
    size_t klen = strlen(key), n, i;

    n = (size_t)snprintf(out, outlen, "%s/records/", dir);
    for (i = 0; i < klen && n + 3 < outlen; i++) {
        if (i > 0 && i % CHUNK == 0) {
            out[n++] = '+';
            out[n++] = '/';
        }
        out[n++] = key[i] == '/' ? '%' : key[i];
    }
    out[n] = '\0';
}

static bool
exists(const char *path)
{
    struct stat sb;

    return stat(path, &sb) == 0;
}

static int
write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int rc = 0;

    if (fd < 0)
        return -1;
    if (write(fd, data, len) != (ssize_t)len)
        rc = -1;
    if (close(fd) != 0)
        rc = -1;
    return rc;
}

/* Flips one bit of the byte at off. */
static int
flip_byte(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    uint8_t b;
    int rc = -1;

    if (fd < 0)
        return -1;
    if (pread(fd, &b, 1, off) == 1) {
        b ^= 0x01;
        if (pwrite(fd, &b, 1, off) == 1)
            rc = 0;
    }
    if (close(fd) != 0)
        rc = -1;
    return rc;
}

/* ---- list collection ----------------------------------------------------- */

#define LIST_MAX 64

struct listing {
    int n;
    int stop_after; /* 0: never stop */
    char keys[LIST_MAX][STORE_KEY_MAX + 1];
    enum store_status status[LIST_MAX];
    uint64_t rev[LIST_MAX];
    char value[LIST_MAX][64];
    char message[LIST_MAX][512];
};

static int
on_list(const char *key, enum store_status status, const uint8_t *value,
        size_t len, uint64_t revision, const char *message, void *arg)
{
    struct listing *l = arg;

    if (l->n >= LIST_MAX)
        return 1;
    snprintf(l->keys[l->n], sizeof l->keys[l->n], "%s", key);
    l->status[l->n] = status;
    l->rev[l->n] = revision;
    snprintf(l->value[l->n], sizeof l->value[l->n], "%.*s",
             (int)(value != NULL ? len : 0),
             value != NULL ? (const char *)value : "");
    snprintf(l->message[l->n], sizeof l->message[l->n], "%s",
             message != NULL ? message : "");
    if (status == STORE_OK)
        CHECK(message == NULL && value != NULL);
    else
        CHECK(value == NULL && message != NULL && message[0] != '\0');
    l->n++;
    return l->stop_after > 0 && l->n >= l->stop_after;
}

/* ---- tests --------------------------------------------------------------- */

static void
test_roundtrip(void)
{
    char dir[256], err[1024];
    struct store *st;
    struct result r;
    uint64_t rev;

    new_dir(dir, sizeof dir);
    st = open_store(dir);
    REQUIRE(st != NULL);
    r = put_wait(st, "workmanager/workers/w1", "hello", STORE_ANY_REVISION);
    CHECK_EQ(r.status, STORE_OK);
    CHECK_EQ(r.revision, 1);
    CHECK(r.message[0] == '\0');
    CHECK_EQ(
        get_check(st, "workmanager/workers/w1", "hello", &rev, err, sizeof err),
        STORE_OK);
    CHECK_EQ(rev, 1);
    /* An empty value is a value. */
    r = put_wait(st, "workmanager/empty", "", STORE_ANY_REVISION);
    CHECK_EQ(r.status, STORE_OK);
    CHECK_EQ(get_check(st, "workmanager/empty", "", &rev, err, sizeof err),
             STORE_OK);
    CHECK_EQ(get_check(st, "workmanager/none", NULL, NULL, err, sizeof err),
             STORE_NOT_FOUND);
    /* Values are binary. */
    {
        static const uint8_t bin[] = { 0, 1, 2, 0xff, 0, 'x' };
        struct result rb = { 0 };
        uint8_t *got = NULL;
        size_t len = 0;

        pending++;
        CHECK_EQ(store_put(st, "bin", bin, sizeof bin, STORE_ANY_REVISION,
                           on_done, &rb),
                 0);
        wait_all();
        CHECK_EQ(rb.status, STORE_OK);
        CHECK_EQ(store_get(st, "bin", &got, &len, &rev, err, sizeof err),
                 STORE_OK);
        CHECK(len == sizeof bin && memcmp(got, bin, len) == 0);
        free(got);
    }
    /* The record format is pinned: "WMR1", u64 revision, u64 length (both
     * little-endian), SHA-256 of the value, the value. */
    {
        static const uint8_t sha_hello[32] = {
            0x2c, 0xf2, 0x4d, 0xba, 0x5f, 0xb0, 0xa3, 0x0e, 0x26, 0xe8, 0x3b,
            0x2a, 0xc5, 0xb9, 0xe2, 0x9e, 0x1b, 0x16, 0x1e, 0x5c, 0x1f, 0xa7,
            0x42, 0x5e, 0x73, 0x04, 0x33, 0x62, 0x93, 0x8b, 0x98, 0x24
        };
        /* clang-format off */
        static const uint8_t head[20] = {
            'W', 'M', 'R', '1',     /* magic */
            1, 0, 0, 0, 0, 0, 0, 0, /* revision 1 */
            5, 0, 0, 0, 0, 0, 0, 0, /* length 5 */
        };
        /* clang-format on */
        uint8_t buf[HEADER + 16];
        char path[1024];
        ssize_t n = -1;
        int fd;

        record_path(dir, "workmanager/workers/w1", path, sizeof path);
        CHECK(strstr(path, "/records/workmanager%workers%w1") != NULL);
        fd = open(path, O_RDONLY);
        CHECK(fd >= 0);
        if (fd >= 0) {
            n = read(fd, buf, sizeof buf);
            close(fd);
        }
        CHECK_EQ(n, HEADER + 5);
        if (n == HEADER + 5) {
            CHECK(memcmp(buf, head, sizeof head) == 0);
            CHECK(memcmp(buf + 20, sha_hello, 32) == 0);
            CHECK(memcmp(buf + HEADER, "hello", 5) == 0);
        }
    }
    store_close(st);
}

static void
test_revisions(void)
{
    char dir[256], err[1024];
    struct store *st;
    uint64_t rev;
    int i;

    new_dir(dir, sizeof dir);
    st = open_store(dir);
    REQUIRE(st != NULL);
    for (i = 1; i <= 5; i++) {
        char v[16];
        struct result r;

        snprintf(v, sizeof v, "v%d", i);
        r = put_wait(st, "k", v, STORE_ANY_REVISION);
        CHECK_EQ(r.status, STORE_OK);
        CHECK_EQ(r.revision, (uint64_t)i);
    }
    CHECK_EQ(get_check(st, "k", "v5", &rev, err, sizeof err), STORE_OK);
    CHECK_EQ(rev, 5);
    store_close(st);
}

static void
test_cas(void)
{
    struct result a = { 0 }, b = { 0 }, r;
    char dir[256], err[1024];
    struct store *st;
    uint64_t rev;

    new_dir(dir, sizeof dir);
    st = open_store(dir);
    REQUIRE(st != NULL);
    r = put_wait(st, "workmanager/groups/g/lock", "one", 0);
    CHECK_EQ(r.status, STORE_OK);
    CHECK_EQ(r.revision, 1);
    /* expected 0 on an existing key */
    r = put_wait(st, "workmanager/groups/g/lock", "two", 0);
    CHECK_EQ(r.status, STORE_CONFLICT);
    CHECK(strstr(r.message, "workmanager/groups/g/lock") != NULL);
    /* a stale and a future revision */
    r = put_wait(st, "workmanager/groups/g/lock", "two", 7);
    CHECK_EQ(r.status, STORE_CONFLICT);
    /* a revision on a missing key */
    r = put_wait(st, "workmanager/groups/h/lock", "x", 1);
    CHECK_EQ(r.status, STORE_CONFLICT);
    CHECK_EQ(
        get_check(st, "workmanager/groups/h/lock", NULL, NULL, err, sizeof err),
        STORE_NOT_FOUND);
    /* the right one */
    r = put_wait(st, "workmanager/groups/g/lock", "two", 1);
    CHECK_EQ(r.status, STORE_OK);
    CHECK_EQ(r.revision, 2);
    r = put_wait(st, "workmanager/groups/g/lock", "old", 1);
    CHECK_EQ(r.status, STORE_CONFLICT);
    CHECK_EQ(get_check(st, "workmanager/groups/g/lock", "two", &rev, err,
                       sizeof err),
             STORE_OK);
    CHECK_EQ(rev, 2);

    /* Two conflicting puts back to back: the first wins, deterministically,
     * and the callbacks come in submission order. */
    pending += 2;
    CHECK_EQ(store_put(st, "workmanager/groups/g/lock", (const uint8_t *)"A", 1,
                       2, on_done, &a),
             0);
    CHECK_EQ(store_put(st, "workmanager/groups/g/lock", (const uint8_t *)"B", 1,
                       2, on_done, &b),
             0);
    wait_all();
    CHECK_EQ(a.status, STORE_OK);
    CHECK_EQ(a.revision, 3);
    CHECK_EQ(b.status, STORE_CONFLICT);
    CHECK_EQ(b.revision, 0);
    CHECK_EQ(
        get_check(st, "workmanager/groups/g/lock", "A", &rev, err, sizeof err),
        STORE_OK);
    CHECK_EQ(rev, 3);
    store_close(st);
}

static void
test_delete(void)
{
    char dir[256], err[1024], path[1024];
    struct store *st;
    struct result r;
    uint64_t rev;

    new_dir(dir, sizeof dir);
    st = open_store(dir);
    REQUIRE(st != NULL);
    r = put_wait(st, "d/k", "v", STORE_ANY_REVISION);
    r = put_wait(st, "d/k", "v2", STORE_ANY_REVISION);
    CHECK_EQ(r.revision, 2);
    r = delete_wait(st, "d/k", 1);
    CHECK_EQ(r.status, STORE_CONFLICT);
    CHECK_EQ(get_check(st, "d/k", "v2", NULL, err, sizeof err), STORE_OK);
    r = delete_wait(st, "d/k", 2);
    CHECK_EQ(r.status, STORE_OK);
    CHECK_EQ(r.revision, 0);
    CHECK_EQ(get_check(st, "d/k", NULL, NULL, err, sizeof err),
             STORE_NOT_FOUND);
    record_path(dir, "d/k", path, sizeof path);
    CHECK(!exists(path));
    r = delete_wait(st, "d/k", STORE_ANY_REVISION);
    CHECK_EQ(r.status, STORE_NOT_FOUND);
    CHECK(strstr(r.message, "d/k") != NULL);
    /* Recreated, it starts again at 1. */
    r = put_wait(st, "d/k", "again", 0);
    CHECK_EQ(r.status, STORE_OK);
    CHECK_EQ(r.revision, 1);
    r = delete_wait(st, "d/k", STORE_ANY_REVISION);
    CHECK_EQ(r.status, STORE_OK);
    store_close(st);

    /* The delete is durable. */
    st = open_store(dir);
    REQUIRE(st != NULL);
    CHECK_EQ(get_check(st, "d/k", NULL, &rev, err, sizeof err),
             STORE_NOT_FOUND);
    store_close(st);
}

/* A get or list before the callback sees the submitted write, in line
 * with the revision that compare-and-set checks. */
/* store_flush(): every queued write's callback has run when it returns,
 * without the loop, and the store goes on working (the daemon's shutdown
 * flushes before it frees the requests the callbacks answer). */
static void
test_flush(void)
{
    struct result a = { 0 }, b = { 0 }, c = { 0 };
    char dir[256], err[1024];
    struct store *st;

    new_dir(dir, sizeof dir);
    st = open_store(dir);
    REQUIRE(st != NULL);
    pending += 3;
    CHECK_EQ(store_put(st, "f/a", (const uint8_t *)"1", 1, 0, on_done, &a), 0);
    CHECK_EQ(store_put(st, "f/b", (const uint8_t *)"2", 1, 0, on_done, &b), 0);
    store_flush(st);
    CHECK(a.done && b.done);
    CHECK(a.status == STORE_OK && b.status == STORE_OK);
    CHECK_EQ(store_delete(st, "f/a", 1, on_done, &c), 0);
    store_flush(st);
    CHECK(c.done && c.status == STORE_OK);
    CHECK_EQ(get_check(st, "f/a", NULL, NULL, err, sizeof err),
             STORE_NOT_FOUND);
    CHECK_EQ(pending, 0);
    store_flush(NULL); /* nothing */
    store_close(st);
}

static void
test_read_your_writes(void)
{
    struct result a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };
    char dir[256], err[1024];
    struct listing *l = calloc(1, sizeof *l);
    struct store *st;
    uint64_t rev;

    REQUIRE(l != NULL);
    new_dir(dir, sizeof dir);
    st = open_store(dir);
    if (st == NULL)
        free(l);
    REQUIRE(st != NULL);
    pending += 4;
    CHECK_EQ(store_put(st, "p/a", (const uint8_t *)"1", 1, 0, on_done, &a), 0);
    CHECK_EQ(store_put(st, "p/empty", NULL, 0, 0, on_done, &d), 0);
    CHECK_EQ(store_put(st, "p/b", (const uint8_t *)"2", 1, 0, on_done, &b), 0);
    CHECK_EQ(get_check(st, "p/a", "1", &rev, err, sizeof err), STORE_OK);
    CHECK_EQ(rev, 1);
    CHECK_EQ(store_delete(st, "p/b", 1, on_done, &c), 0);
    CHECK_EQ(get_check(st, "p/b", NULL, NULL, err, sizeof err),
             STORE_NOT_FOUND);
    CHECK_EQ(store_list(st, "p/", on_list, l, err, sizeof err), STORE_OK);
    CHECK_EQ(l->n, 2);
    CHECK(strcmp(l->keys[0], "p/a") == 0 && strcmp(l->value[0], "1") == 0);
    CHECK(strcmp(l->keys[1], "p/empty") == 0 && l->value[1][0] == '\0');
    wait_all();
    CHECK(a.status == STORE_OK && b.status == STORE_OK &&
          c.status == STORE_OK && d.status == STORE_OK);
    free(l);
    store_close(st);
}

static void
test_list(void)
{
    static const char *const keys[] = { "a/b/2", "a/b/1", "a/c",  "a/b/10",
                                        "b/x",   "a/bz",  "a/b.", "a/b-" };
    char dir[256], err[1024];
    struct listing *l = calloc(1, sizeof *l);
    struct store *st;
    size_t i;

    REQUIRE(l != NULL);
    new_dir(dir, sizeof dir);
    st = open_store(dir);
    if (st == NULL)
        free(l);
    REQUIRE(st != NULL);
    for (i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK_EQ(put_wait(st, keys[i], keys[i], STORE_ANY_REVISION).status,
                 STORE_OK);
    CHECK_EQ(store_list(st, "a/b/", on_list, l, err, sizeof err), STORE_OK);
    CHECK_EQ(l->n, 3);
    if (l->n == 3) {
        CHECK(strcmp(l->keys[0], "a/b/1") == 0);
        CHECK(strcmp(l->keys[1], "a/b/10") == 0);
        CHECK(strcmp(l->keys[2], "a/b/2") == 0);
        CHECK(strcmp(l->value[1], "a/b/10") == 0);
        CHECK_EQ(l->rev[1], 1);
        CHECK_EQ(l->status[2], STORE_OK);
    }
    memset(l, 0, sizeof *l);
    CHECK_EQ(store_list(st, "", on_list, l, err, sizeof err), STORE_OK);
    CHECK_EQ(l->n, 8);
    for (i = 1; i < (size_t)l->n; i++)
        CHECK(strcmp(l->keys[i - 1], l->keys[i]) < 0);
    memset(l, 0, sizeof *l);
    CHECK_EQ(store_list(st, NULL, on_list, l, err, sizeof err), STORE_OK);
    CHECK_EQ(l->n, 8);
    /* The callback stops the listing. */
    memset(l, 0, sizeof *l);
    l->stop_after = 2;
    CHECK_EQ(store_list(st, "a/", on_list, l, err, sizeof err), STORE_OK);
    CHECK_EQ(l->n, 2);
    memset(l, 0, sizeof *l);
    CHECK_EQ(store_list(st, "zzz", on_list, l, err, sizeof err), STORE_OK);
    CHECK_EQ(l->n, 0);
    CHECK_EQ(store_list(st, "a b", on_list, l, err, sizeof err), STORE_INVALID);
    CHECK(err[0] != '\0');
    free(l);
    store_close(st);
}

static void
test_persistence(void)
{
    char dir[256], err[1024], longkey[STORE_KEY_MAX + 1];
    char hex[STORE_SHA256_HEX];
    struct listing *l = calloc(1, sizeof *l);
    struct result r, rb = { 0 };
    struct store *st;
    uint8_t *data = NULL;
    size_t len = 0, i;
    uint64_t rev;

    REQUIRE(l != NULL);
    /* A 512-byte key of many segments: its file name is chunked. */
    for (i = 0; i < STORE_KEY_MAX; i++)
        longkey[i] = i % 8 == 7 ? '/' : (char)('a' + i % 26);
    longkey[STORE_KEY_MAX - 1] = 'z';
    longkey[STORE_KEY_MAX] = '\0';
    new_dir(dir, sizeof dir);
    st = open_store(dir);
    if (st == NULL)
        free(l);
    REQUIRE(st != NULL);
    CHECK_EQ(put_wait(st, "workmanager/workers/w1", "one", 0).status, STORE_OK);
    CHECK_EQ(put_wait(st, "workmanager/workers/w1", "one'", 1).status,
             STORE_OK);
    CHECK_EQ(put_wait(st, "workmanager/workers/w2", "two", 0).status, STORE_OK);
    CHECK_EQ(put_wait(st, "workmanager/recovery/leader", "me", 0).status,
             STORE_OK);
    r = put_wait(st, longkey, "long", 0);
    CHECK_EQ(r.status, STORE_OK);
    CHECK(r.message[0] == '\0' || (fprintf(stderr, "%s\n", r.message), 0));
    pending++;
    CHECK_EQ(store_blob_put(st, (const uint8_t *)"code", 4, hex, on_done, &rb),
             0);
    wait_all();
    CHECK_EQ(rb.status, STORE_OK);
    store_close(st);

    st = open_store(dir);
    if (st == NULL)
        free(l);
    REQUIRE(st != NULL);
    CHECK_EQ(
        get_check(st, "workmanager/workers/w1", "one'", &rev, err, sizeof err),
        STORE_OK);
    CHECK_EQ(rev, 2);
    CHECK_EQ(
        get_check(st, "workmanager/workers/w2", "two", &rev, err, sizeof err),
        STORE_OK);
    CHECK_EQ(rev, 1);
    CHECK_EQ(get_check(st, longkey, "long", &rev, err, sizeof err), STORE_OK);
    CHECK_EQ(store_list(st, "workmanager/", on_list, l, err, sizeof err),
             STORE_OK);
    CHECK_EQ(l->n, 3);
    if (l->n == 3) {
        CHECK(strcmp(l->keys[0], "workmanager/recovery/leader") == 0);
        CHECK(strcmp(l->keys[1], "workmanager/workers/w1") == 0);
        CHECK(strcmp(l->value[1], "one'") == 0);
        CHECK_EQ(l->rev[1], 2);
    }
    memset(l, 0, sizeof *l);
    CHECK_EQ(store_list(st, "abcdefg/", on_list, l, err, sizeof err), STORE_OK);
    CHECK_EQ(l->n, 1);
    CHECK(strcmp(l->keys[0], longkey) == 0);
    /* Revisions carry on from the disk. */
    r = put_wait(st, "workmanager/workers/w1", "three", 2);
    CHECK_EQ(r.status, STORE_OK);
    CHECK_EQ(r.revision, 3);
    r = put_wait(st, longkey, "long2", 1);
    CHECK_EQ(r.revision, 2);
    CHECK_EQ(store_blob_get(st, hex, &data, &len, err, sizeof err), STORE_OK);
    CHECK(len == 4 && memcmp(data, "code", 4) == 0);
    free(data);
    free(l);
    store_close(st);
}

/* Torn files: a value cut short and a file holding half a header. */
static void
test_torn(void)
{
    char dir[256], err[1024], path[1024];
    struct listing *l = calloc(1, sizeof *l);
    struct store *st;
    struct result r;
    uint64_t rev;

    REQUIRE(l != NULL);
    new_dir(dir, sizeof dir);
    st = open_store(dir);
    if (st == NULL)
        free(l);
    REQUIRE(st != NULL);
    CHECK_EQ(put_wait(st, "t/a", "alpha-value", 0).status, STORE_OK);
    CHECK_EQ(put_wait(st, "t/b", "bravo-value", 0).status, STORE_OK);
    CHECK_EQ(put_wait(st, "t/c", "charlie-value", 0).status, STORE_OK);
    CHECK_EQ(put_wait(st, "t/d", "delta-value", 0).status, STORE_OK);
    store_close(st);

    record_path(dir, "t/b", path, sizeof path);
    CHECK_EQ(truncate(path, HEADER + 4), 0); /* mid-value */
    record_path(dir, "t/c", path, sizeof path);
    CHECK_EQ(truncate(path, HEADER / 2), 0); /* half a header */

    st = open_store(dir);
    if (st == NULL)
        free(l);
    REQUIRE(st != NULL);
    CHECK_EQ(get_check(st, "t/a", "alpha-value", NULL, err, sizeof err),
             STORE_OK);
    CHECK_EQ(get_check(st, "t/b", NULL, NULL, err, sizeof err), STORE_CORRUPT);
    CHECK(strstr(err, "t/b") != NULL);
    CHECK(strstr(err, "length mismatch") != NULL);
    CHECK_EQ(get_check(st, "t/c", NULL, NULL, err, sizeof err), STORE_CORRUPT);
    CHECK(strstr(err, "t/c") != NULL && strstr(err, "header") != NULL);

    /* Torn while open, too: the store reads the disk for every get. */
    record_path(dir, "t/d", path, sizeof path);
    CHECK_EQ(truncate(path, HEADER + 1), 0);
    CHECK_EQ(get_check(st, "t/d", NULL, NULL, err, sizeof err), STORE_CORRUPT);
    CHECK(strstr(err, "t/d") != NULL);

    CHECK_EQ(store_list(st, "t/", on_list, l, err, sizeof err), STORE_OK);
    CHECK_EQ(l->n, 4);
    if (l->n == 4) {
        CHECK_EQ(l->status[0], STORE_OK);
        CHECK(strcmp(l->value[0], "alpha-value") == 0);
        CHECK_EQ(l->status[1], STORE_CORRUPT);
        CHECK(strstr(l->message[1], "t/b") != NULL);
        CHECK_EQ(l->status[2], STORE_CORRUPT);
        CHECK(strstr(l->message[2], "t/c") != NULL);
        CHECK_EQ(l->status[3], STORE_CORRUPT);
        CHECK_EQ(l->rev[3], 1); /* its header was intact */
    }

    /* A torn header's revision is unknown: only an unconditional put
     * replaces it.  A torn value's header still knows its revision. */
    r = put_wait(st, "t/c", "new", 1);
    CHECK_EQ(r.status, STORE_CONFLICT);
    CHECK(strstr(r.message, "corrupt") != NULL);
    r = put_wait(st, "t/c", "new", 0);
    CHECK_EQ(r.status, STORE_CONFLICT);
    r = put_wait(st, "t/c", "new", STORE_ANY_REVISION);
    CHECK_EQ(r.status, STORE_OK);
    CHECK_EQ(get_check(st, "t/c", "new", &rev, err, sizeof err), STORE_OK);
    r = put_wait(st, "t/b", "fixed", 1);
    CHECK_EQ(r.status, STORE_OK);
    CHECK_EQ(r.revision, 2);
    CHECK_EQ(get_check(st, "t/b", "fixed", &rev, err, sizeof err), STORE_OK);
    free(l);
    store_close(st);
}

/* A flipped byte in the value, and a foreign magic. */
static void
test_corrupt(void)
{
    char dir[256], err[1024], path[1024];
    struct listing *l = calloc(1, sizeof *l);
    struct store *st;

    REQUIRE(l != NULL);
    new_dir(dir, sizeof dir);
    st = open_store(dir);
    if (st == NULL)
        free(l);
    REQUIRE(st != NULL);
    CHECK_EQ(put_wait(st, "c/flip", "some value", 0).status, STORE_OK);
    CHECK_EQ(put_wait(st, "c/magic", "other value", 0).status, STORE_OK);
    CHECK_EQ(put_wait(st, "c/ok", "fine", 0).status, STORE_OK);
    record_path(dir, "c/flip", path, sizeof path);
    CHECK_EQ(flip_byte(path, HEADER + 3), 0);
    record_path(dir, "c/magic", path, sizeof path);
    CHECK_EQ(flip_byte(path, 0), 0);
    CHECK_EQ(get_check(st, "c/flip", NULL, NULL, err, sizeof err),
             STORE_CORRUPT);
    CHECK(strstr(err, "c/flip") != NULL && strstr(err, "checksum") != NULL);
    CHECK_EQ(get_check(st, "c/magic", NULL, NULL, err, sizeof err),
             STORE_CORRUPT);
    CHECK(strstr(err, "c/magic") != NULL && strstr(err, "magic") != NULL);
    CHECK_EQ(store_list(st, "c/", on_list, l, err, sizeof err), STORE_OK);
    CHECK_EQ(l->n, 3);
    CHECK(l->status[0] == STORE_CORRUPT && l->status[1] == STORE_CORRUPT &&
          l->status[2] == STORE_OK);
    free(l);
    store_close(st);
}

static void
test_blobs(void)
{
    static const char code[] = "def handle(event): return event\n";
    char dir[256], err[1024], path[1024], hex[STORE_SHA256_HEX],
        hex2[STORE_SHA256_HEX];
    struct result r = { 0 };
    struct store *st;
    uint8_t *data = NULL;
    size_t len = 0;

    new_dir(dir, sizeof dir);
    st = open_store(dir);
    REQUIRE(st != NULL);
    pending++;
    CHECK_EQ(store_blob_put(st, (const uint8_t *)code, sizeof code - 1, hex,
                            on_done, &r),
             0);
    store_sha256_hex((const uint8_t *)code, sizeof code - 1, hex2);
    CHECK(strcmp(hex, hex2) == 0);
    CHECK_EQ(strlen(hex), 64);
    wait_all();
    CHECK_EQ(r.status, STORE_OK);
    snprintf(path, sizeof path, "%s/blobs/%.2s/%s", dir, hex, hex);
    CHECK(exists(path));
    CHECK_EQ(store_blob_get(st, hex, &data, &len, err, sizeof err), STORE_OK);
    CHECK(len == sizeof code - 1 && memcmp(data, code, len) == 0);
    free(data);
    data = NULL;

    /* Idempotent. */
    memset(&r, 0, sizeof r);
    pending++;
    CHECK_EQ(store_blob_put(st, (const uint8_t *)code, sizeof code - 1, hex,
                            on_done, &r),
             0);
    wait_all();
    CHECK_EQ(r.status, STORE_OK);

    /* Bytes that no longer hash to the name. */
    CHECK_EQ(write_file(path, "evil", 4), 0);
    CHECK_EQ(store_blob_get(st, hex, &data, &len, err, sizeof err),
             STORE_CORRUPT);
    CHECK(data == NULL);
    CHECK(strstr(err, hex) != NULL && strstr(err, "corrupt") != NULL);
    /* A put of the right bytes repairs it. */
    memset(&r, 0, sizeof r);
    pending++;
    CHECK_EQ(store_blob_put(st, (const uint8_t *)code, sizeof code - 1, hex,
                            on_done, &r),
             0);
    wait_all();
    CHECK_EQ(r.status, STORE_OK);
    CHECK_EQ(store_blob_get(st, hex, &data, &len, err, sizeof err), STORE_OK);
    free(data);
    data = NULL;

    /* An empty blob is a blob. */
    memset(&r, 0, sizeof r);
    pending++;
    CHECK_EQ(store_blob_put(st, NULL, 0, hex2, on_done, &r), 0);
    wait_all();
    CHECK_EQ(r.status, STORE_OK);
    CHECK(strcmp(hex2, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495"
                       "991b7852b855") == 0);
    CHECK_EQ(store_blob_get(st, hex2, &data, &len, err, sizeof err), STORE_OK);
    CHECK_EQ(len, 0);
    free(data);
    data = NULL;

    /* Delete. */
    memset(&r, 0, sizeof r);
    pending++;
    CHECK_EQ(store_blob_delete(st, hex, on_done, &r), 0);
    wait_all();
    CHECK_EQ(r.status, STORE_OK);
    CHECK(!exists(path));
    CHECK_EQ(store_blob_get(st, hex, &data, &len, err, sizeof err),
             STORE_NOT_FOUND);
    memset(&r, 0, sizeof r);
    pending++;
    CHECK_EQ(store_blob_delete(st, hex, on_done, &r), 0);
    wait_all();
    CHECK_EQ(r.status, STORE_NOT_FOUND);

    /* Bad names. */
    CHECK_EQ(store_blob_get(st, "abc", &data, &len, err, sizeof err),
             STORE_INVALID);
    CHECK_EQ(store_blob_get(st, "../../../../../../../../etc/passwd", &data,
                            &len, err, sizeof err),
             STORE_INVALID);
    strcpy(hex2, hex);
    hex2[0] = 'A';
    CHECK_EQ(store_blob_get(st, hex2, &data, &len, err, sizeof err),
             STORE_INVALID);
    CHECK_EQ(store_blob_delete(st, "zz", NULL, NULL), -1);
    store_close(st);
}

static void
test_tmp_cleanup(void)
{
    char dir[256], path[1024];
    struct store *st;

    new_dir(dir, sizeof dir);
    st = open_store(dir);
    REQUIRE(st != NULL);
    CHECK_EQ(put_wait(st, "x", "y", 0).status, STORE_OK);
    store_close(st);
    snprintf(path, sizeof path, "%s/tmp/w17", dir);
    CHECK_EQ(write_file(path, "WMR1half", 8), 0);
    snprintf(path, sizeof path, "%s/tmp/leftover", dir);
    CHECK_EQ(write_file(path, "", 0), 0);
    st = open_store(dir);
    REQUIRE(st != NULL);
    CHECK(!exists(path));
    snprintf(path, sizeof path, "%s/tmp/w17", dir);
    CHECK(!exists(path));
    CHECK_EQ(put_wait(st, "x", "z", 1).status, STORE_OK);
    store_close(st);
}

static void
test_invalid_keys(void)
{
    static const char *const bad[] = {
        "",    "/a",  "a/",  "a//b", "a/../b", "..",     ".",
        "a/.", "./a", "a b", "a\\b", "a%b",    "a\nb",   "caf\xc3\xa9",
        "a+b", "a:b", "a*",  "/",    "a/./b",  "../etc",
    };
    static const char *const good[] = { ".hidden",    "a/..b/c", "...",
                                        "a-b_c.d/E9", "x..",     "A" };
    char dir[256], err[1024], longkey[STORE_KEY_MAX + 2];
    struct result r = { 0 };
    struct store *st;
    uint8_t *v = NULL;
    size_t len, i;
    uint64_t rev;

    new_dir(dir, sizeof dir);
    st = open_store(dir);
    REQUIRE(st != NULL);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(store_put(st, bad[i], (const uint8_t *)"v", 1,
                           STORE_ANY_REVISION, on_done, &r),
                 -1);
        CHECK_EQ(store_delete(st, bad[i], STORE_ANY_REVISION, on_done, &r), -1);
        err[0] = '\0';
        CHECK_EQ(store_get(st, bad[i], &v, &len, &rev, err, sizeof err),
                 STORE_INVALID);
        CHECK(err[0] != '\0');
    }
    CHECK_EQ(store_put(st, NULL, NULL, 0, 0, on_done, &r), -1);
    CHECK_EQ(store_put(st, "ok", NULL, 3, 0, on_done, &r), -1);
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[STORE_KEY_MAX + 1] = '\0'; /* 513 bytes */
    CHECK_EQ(store_put(st, longkey, (const uint8_t *)"v", 1, 0, on_done, &r),
             -1);
    CHECK_EQ(store_get(st, longkey, &v, &len, &rev, err, sizeof err),
             STORE_INVALID);
    CHECK(strstr(err, "longer") != NULL);
    CHECK(!r.done); /* no callback for a refused call */
    /* 512 bytes in one segment: a valid key, a chunked file name. */
    longkey[STORE_KEY_MAX] = '\0';
    CHECK_EQ(put_wait(st, longkey, "max", 0).status, STORE_OK);
    CHECK_EQ(get_check(st, longkey, "max", NULL, err, sizeof err), STORE_OK);
    for (i = 0; i < sizeof good / sizeof good[0]; i++) {
        CHECK_EQ(put_wait(st, good[i], good[i], 0).status, STORE_OK);
        CHECK_EQ(get_check(st, good[i], good[i], NULL, err, sizeof err),
                 STORE_OK);
    }
    store_close(st);
    /* ...and they all come back. */
    st = open_store(dir);
    REQUIRE(st != NULL);
    CHECK_EQ(get_check(st, longkey, "max", &rev, err, sizeof err), STORE_OK);
    for (i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK_EQ(get_check(st, good[i], good[i], &rev, err, sizeof err),
                 STORE_OK);
    store_close(st);
}

/* NMANY puts submitted back to back complete, in order. */
static int many_next;
static int many_bad_order;

static void
on_many(enum store_status status, uint64_t revision, const char *message,
        void *arg)
{
    int i = (int)(intptr_t)arg;

    (void)message;
    if (i != many_next || status != STORE_OK ||
        revision != (uint64_t)(i / 2 + 1))
        many_bad_order++;
    many_next++;
    pending--;
}

static void
test_many(void)
{
    char dir[256], err[1024], v[32];
    struct store *st;
    uint64_t rev;
    int i;

    new_dir(dir, sizeof dir);
    st = open_store(dir);
    REQUIRE(st != NULL);
    many_next = 0;
    many_bad_order = 0;
    /* Two keys alternately; every put is a compare-and-set on the
     * revision its predecessor will produce. */
    for (i = 0; i < NMANY; i++) {
        snprintf(v, sizeof v, "value %d", i);
        pending++;
        CHECK_EQ(store_put(st, i % 2 ? "many/odd" : "many/even",
                           (const uint8_t *)v, strlen(v), (uint64_t)(i / 2),
                           on_many, (void *)(intptr_t)i),
                 0);
    }
    wait_all();
    CHECK_EQ(many_next, NMANY);
    CHECK_EQ(many_bad_order, 0);
    snprintf(v, sizeof v, "value %d", NMANY - 1);
    CHECK_EQ(get_check(st, "many/odd", v, &rev, err, sizeof err), STORE_OK);
    CHECK_EQ(rev, NMANY / 2);
    store_close(st);
}

/* store_close runs every outstanding callback, including those of writes
 * submitted from a callback. */
static struct store *chain_store;
static int chain_count;

static void
on_chain(enum store_status status, uint64_t revision, const char *message,
         void *arg)
{
    (void)revision;
    (void)message;
    (void)arg;
    CHECK_EQ(status, STORE_OK);
    if (++chain_count < 5)
        CHECK_EQ(store_put(chain_store, "chain", (const uint8_t *)"c", 1,
                           STORE_ANY_REVISION, on_chain, NULL),
                 0);
}

static void
test_close_drains(void)
{
    struct result r[100];
    char dir[256], err[1024], key[32];
    struct store *st;
    uint64_t rev;
    int i;

    memset(r, 0, sizeof r);
    new_dir(dir, sizeof dir);
    st = open_store(dir);
    REQUIRE(st != NULL);
    for (i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "close/%03d", i);
        pending++;
        CHECK_EQ(store_put(st, key, (const uint8_t *)key, strlen(key), 0,
                           on_done, &r[i]),
                 0);
    }
    chain_store = st;
    chain_count = 0;
    CHECK_EQ(store_put(st, "chain", (const uint8_t *)"c", 1, STORE_ANY_REVISION,
                       on_chain, NULL),
             0);
    store_close(st); /* no loop run: close does it */
    CHECK_EQ(pending, 0);
    for (i = 0; i < 100; i++)
        CHECK(r[i].done && r[i].status == STORE_OK);
    CHECK_EQ(chain_count, 5);
    st = open_store(dir);
    REQUIRE(st != NULL);
    CHECK_EQ(get_check(st, "close/099", "close/099", &rev, err, sizeof err),
             STORE_OK);
    CHECK_EQ(get_check(st, "chain", "c", &rev, err, sizeof err), STORE_OK);
    CHECK_EQ(rev, 5);
    store_close(st);
}

/* A write that fails on disk: its successors on the same key, decided
 * against the revision it would have made, fail too; other keys carry on;
 * once the failure is reported the key is usable again. */
static void
test_write_failure(void)
{
    char dir[256], err[1024], key[CHUNK + 16], blocker[1024];
    struct result a = { 0 }, b = { 0 }, c = { 0 }, r;
    struct store *st;
    char *plus;

    /* A key whose file name needs a chunk directory; a regular file where
     * that directory should be makes the rename fail (ENOTDIR), even for
     * root. */
    memset(key, 'q', CHUNK + 10);
    key[CHUNK + 10] = '\0';
    new_dir(dir, sizeof dir);
    st = open_store(dir);
    REQUIRE(st != NULL);
    record_path(dir, key, blocker, sizeof blocker);
    plus = strrchr(blocker, '/');
    REQUIRE(plus != NULL);
    *plus = '\0';
    CHECK_EQ(write_file(blocker, "x", 1), 0);

    pending += 3;
    CHECK_EQ(store_put(st, key, (const uint8_t *)"1", 1, 0, on_done, &a), 0);
    CHECK_EQ(store_put(st, key, (const uint8_t *)"2", 1, 1, on_done, &b), 0);
    CHECK_EQ(store_put(st, "other", (const uint8_t *)"o", 1, 0, on_done, &c),
             0);
    wait_all();
    CHECK_EQ(a.status, STORE_IO);
    CHECK(strstr(a.message, "rename") != NULL);
    CHECK(strstr(a.message, "Not a directory") != NULL);
    CHECK_EQ(b.status, STORE_IO);
    CHECK(strstr(b.message, "earlier write") != NULL);
    CHECK_EQ(c.status, STORE_OK);
    CHECK_EQ(get_check(st, key, NULL, NULL, err, sizeof err), STORE_NOT_FOUND);
    /* The same key, once the disk is fixed. */
    CHECK_EQ(unlink(blocker), 0);
    r = put_wait(st, key, "3", 0);
    CHECK_EQ(r.status, STORE_OK);
    CHECK_EQ(r.revision, 1);
    CHECK_EQ(get_check(st, key, "3", NULL, err, sizeof err), STORE_OK);
    store_close(st);
}

static void
test_open_errors(void)
{
    struct store_config cfg = { .backend = "file", .fsync = fsync_mode };
    char dir[256], file[300], err[1024];
    struct store *st, *st2;

    /* One store per state_dir. */
    new_dir(dir, sizeof dir);
    st = open_store(dir);
    REQUIRE(st != NULL);
    cfg.state_dir = dir;
    err[0] = '\0';
    st2 = store_open(&cfg, base, err, sizeof err);
    CHECK(st2 == NULL);
    CHECK(strstr(err, "in use") != NULL);
    store_close(st2);
    store_close(st);

    cfg.backend = "nope";
    err[0] = '\0';
    CHECK(store_open(&cfg, base, err, sizeof err) == NULL);
    CHECK(strstr(err, "nope") != NULL);

    cfg.backend = NULL; /* the default: file */
    st = store_open(&cfg, base, err, sizeof err);
    CHECK(st != NULL);
    store_close(st);

    cfg.backend = "file";
    cfg.fsync = "sometimes";
    err[0] = '\0';
    CHECK(store_open(&cfg, base, err, sizeof err) == NULL);
    CHECK(strstr(err, "sometimes") != NULL);
    cfg.fsync = fsync_mode;

    snprintf(file, sizeof file, "%s/missing/parent", dir);
    cfg.state_dir = file;
    err[0] = '\0';
    CHECK(store_open(&cfg, base, err, sizeof err) == NULL);
    CHECK(strstr(err, file) != NULL &&
          strstr(err, "No such file or directory") != NULL);

    snprintf(file, sizeof file, "%s/lock", dir);
    cfg.state_dir = file;
    err[0] = '\0';
    CHECK(store_open(&cfg, base, err, sizeof err) == NULL);
    CHECK(strstr(err, "not a directory") != NULL);

    cfg.state_dir = NULL;
    CHECK(store_open(&cfg, base, err, sizeof err) == NULL);
    CHECK(store_open(NULL, base, err, sizeof err) == NULL);
}

static void
test_names(void)
{
    char hex[STORE_SHA256_HEX];

    CHECK(strcmp(store_status_name(STORE_OK), "ok") == 0);
    CHECK(strcmp(store_status_name(STORE_CORRUPT), "corrupt") == 0);
    store_sha256_hex((const uint8_t *)"abc", 3, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff"
                      "61f20015ad") == 0);
}

/* ---- main ------------------------------------------------------------ */

int
main(void)
{
    static const char *const modes[] = { "always", "batch", "off" };
    size_t m;
    int rc, fds;

    alarm(300); /* a hang is a failure, not a stuck build */
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
    RUN(test_names);
    for (m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        fsync_mode = modes[m];
        printf("# fsync=%s\n", fsync_mode);
        RUN(test_roundtrip);
        RUN(test_revisions);
        RUN(test_cas);
        RUN(test_delete);
        RUN(test_read_your_writes);
        RUN(test_flush);
        RUN(test_list);
        RUN(test_persistence);
        RUN(test_torn);
        RUN(test_corrupt);
        RUN(test_blobs);
        RUN(test_tmp_cleanup);
        RUN(test_invalid_keys);
        RUN(test_many);
        RUN(test_close_drains);
        RUN(test_write_failure);
        RUN(test_open_errors);
    }
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
