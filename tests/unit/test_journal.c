/*
 * test_journal.c — the write-ahead journal (master/broker/journal*.c) through
 * the API of master/broker/journal.h.
 *
 * Everything runs in a fresh mkdtemp directory (removed at the end when
 * every check passed, kept for inspection otherwise), each test in its own
 * journal directory, with this program's own event_base running the
 * completion callbacks; a 10 ms timer keeps each turn of the loop short so
 * that every wait has a deadline.  The suite runs once per fsync policy.
 *
 * Damage is made by hand on the files, so this test knows the format
 * journal.c documents: segments "%016" PRIx64 ".wmj" named by their first
 * lsn; a 20-byte header ("WMJ1", u32 version 1, u64 first lsn, u32
 * CRC-32C of those 16 bytes); records of an 18-byte frame (u32 payload
 * length, u32 CRC-32C of the rest, u64 lsn, u8 type, u8 flags) then the
 * payload; integers little-endian.
 *
 * Payloads are a pattern of their lsn, so that a replay checks every byte
 * without keeping copies.
 */
#include "config.h"

#include "master/broker/journal.h"

#include <dirent.h>
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "tests/unit/check.h"

#define HDR 20
#define FRAME 18
#define NMANY 200000
#define MANY_LEN 200
#define WAIT_SECONDS 120.0

static struct event_base *base;
static char root[] = "/tmp/test_journal.XXXXXX";
static enum journal_fsync mode = JOURNAL_FSYNC_ALWAYS;
static const char *mode_name = "always";
static unsigned dir_seq;

/* ---- helpers ----------------------------------------------------------- */

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs the loop until *counter reaches target; false after WAIT_SECONDS. */
static bool
wait_for(const int *counter, int target)
{
    double end = now_s() + WAIT_SECONDS;

    while (*counter < target) {
        if (now_s() > end) {
            fprintf(stderr, "%s: timed out: %d of %d\n", check_test, *counter,
                    target);
            return false;
        }
        if (event_base_loop(base, EVLOOP_ONCE) < 0) {
            fprintf(stderr, "event_base_loop failed\n");
            abort();
        }
    }
    return true;
}

/* Runs the loop for ms milliseconds. */
static void
spin(int ms)
{
    double end = now_s() + ms / 1000.0;

    while (now_s() < end)
        (void)event_base_loop(base, EVLOOP_ONCE);
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* The completions of the appends made with put(): counted, and checked to
 * come in append order (each carries its rank). */
static struct {
    int issued, done, errors, last_error, out_of_order;
    uintptr_t expect;
} tally;

static void
tally_reset(void)
{
    memset(&tally, 0, sizeof tally);
}

static void
on_done(int error, void *arg)
{
    if ((uintptr_t)arg != tally.expect)
        tally.out_of_order++;
    tally.expect = (uintptr_t)arg + 1;
    if (error != 0) {
        tally.errors++;
        tally.last_error = error;
    }
    tally.done++;
}

static bool
wait_done(void)
{
    return wait_for(&tally.done, tally.issued);
}

static void
pattern(uint8_t *buf, size_t len, uint64_t lsn)
{
    for (size_t k = 0; k < len; k++)
        buf[k] = (uint8_t)(lsn * 31 + k * 7);
}

static uint64_t
next_lsn(const struct journal *j)
{
    struct journal_stats st;

    journal_stats(j, &st);
    return st.next_lsn;
}

/* Appends the pattern of its lsn; counted in tally when with_cb.  Returns
 * the lsn (0 with errno, as journal_append). */
static uint64_t
put(struct journal *j, uint8_t type, unsigned flags, size_t len, bool with_cb)
{
    static uint8_t buf[4096];
    uint64_t want = next_lsn(j), lsn;

    pattern(buf, len, want);
    lsn = journal_append(j, type, flags, len > 0 ? buf : NULL, len,
                         with_cb ? on_done : NULL,
                         with_cb ? (void *)(uintptr_t)tally.issued : NULL);
    if (lsn != 0 && with_cb)
        tally.issued++;
    if (lsn != 0 && lsn != want)
        FAIL("append got lsn %" PRIu64 ", expected %" PRIu64, lsn, want);
    return lsn;
}

/* A fresh journal directory path (not created) under the test root. */
static void
new_dir(char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%s-%u", root, mode_name, ++dir_seq);
}

static struct journal *
open_cfg(const char *dir, uint64_t segment_bytes, uint64_t max_bytes,
         uint32_t sync_ms)
{
    struct journal_config cfg = {
        .dir = dir,
        .fsync = mode,
        .segment_bytes = segment_bytes,
        .max_bytes = max_bytes,
        .sync_interval_ms = sync_ms,
    };
    char err[1024] = "";
    struct journal *j = journal_open(&cfg, base, err, sizeof err);

    if (j == NULL)
        fprintf(stderr, "%s: journal_open %s: %s\n", check_test, dir, err);
    return j;
}

static struct journal *
open_j(const char *dir)
{
    return open_cfg(dir, 0, 0, 0);
}

/* What a replay saw. */
struct rec {
    uint64_t lsn;
    uint8_t type;
    unsigned flags;
    size_t len;
};

struct replay {
    struct rec *v;
    size_t n, cap;
    size_t bad_payloads;
    struct journal *j;
    bool release; /* release every LIVE record as it comes */
    size_t stop_after;
};

static int
on_replay(uint64_t lsn, uint8_t type, unsigned flags, const uint8_t *payload,
          size_t len, void *arg)
{
    struct replay *r = arg;

    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        struct rec *v = realloc(r->v, cap * sizeof *v);

        if (v == NULL)
            abort();
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = (struct rec){ lsn, type, flags, len };
    for (size_t k = 0; k < len; k++)
        if (payload[k] != (uint8_t)(lsn * 31 + k * 7)) { /* pattern() */
            r->bad_payloads++;
            break;
        }
    if (r->release && (flags & JOURNAL_LIVE))
        journal_release(r->j, lsn);
    return r->stop_after > 0 && r->n >= r->stop_after;
}

/* Opens dir and replays it into r (reset first). */
static struct journal *
reopen(const char *dir, struct replay *r)
{
    char err[1024] = "";
    struct journal *j = open_j(dir);

    free(r->v);
    *r = (struct replay){ .release = r->release, .stop_after = r->stop_after };
    if (j == NULL)
        return NULL;
    r->j = j;
    if (journal_replay(j, on_replay, r, err, sizeof err) != 0)
        FAIL("journal_replay %s: %s", dir, err);
    return j;
}

/* The first lsns of the segment files in dir, sorted; their count. */
static size_t
list_segments(const char *dir, uint64_t *out, size_t max)
{
    struct dirent *de;
    size_t n = 0;
    DIR *d = opendir(dir);

    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL) {
        uint64_t lsn;
        char tail[8];

        if (strlen(de->d_name) != 20 ||
            sscanf(de->d_name, "%16" SCNx64 "%7s", &lsn, tail) != 2 ||
            strcmp(tail, ".wmj") != 0)
            continue;
        if (n < max)
            out[n] = lsn;
        n++;
    }
    closedir(d);
    for (size_t a = 1; a < n && a < max; a++)
        for (size_t b = a; b > 0 && out[b - 1] > out[b]; b--) {
            uint64_t t = out[b];

            out[b] = out[b - 1];
            out[b - 1] = t;
        }
    return n;
}

static void
seg_path(const char *dir, uint64_t first_lsn, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s/%016" PRIx64 ".wmj", dir, first_lsn);
}

static off_t
file_size(const char *path)
{
    struct stat sb;

    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

static int
flip_byte(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    uint8_t b;
    int rc = -1;

    if (fd < 0)
        return -1;
    if (pread(fd, &b, 1, off) == 1) {
        b ^= 0x40;
        if (pwrite(fd, &b, 1, off) == 1)
            rc = 0;
    }
    if (close(fd) != 0)
        rc = -1;
    return rc;
}

static int
append_bytes(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600);
    int rc = 0;

    if (fd < 0)
        return -1;
    if (write(fd, data, len) != (ssize_t)len)
        rc = -1;
    if (close(fd) != 0)
        rc = -1;
    return rc;
}

/* A bitwise CRC-32C, independent of journal.c's table. */
static uint32_t
crc32c_ref(const uint8_t *p, size_t len)
{
    uint32_t c = 0xffffffffu;

    while (len-- > 0) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static uint32_t
le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t
le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* ---- tests --------------------------------------------------------------- */

static void
test_roundtrip(void)
{
    struct replay r = { 0 };
    struct journal_stats st;
    struct journal *j;
    char dir[256];
    int i, live = 0;

    new_dir(dir, sizeof dir);
    tally_reset();
    j = open_j(dir);
    REQUIRE(j != NULL);
    journal_stats(j, &st);
    CHECK_EQ(st.next_lsn, 1);
    CHECK_EQ(st.segments, 1);
    CHECK_EQ(st.bytes, HDR);
    for (i = 0; i < 20; i++) {
        unsigned flags = i % 2 == 0 ? JOURNAL_LIVE : 0;

        live += i % 2 == 0;
        /* Lengths from 0 (a NULL payload) up; every third without a
         * callback. */
        CHECK_EQ(put(j, (uint8_t)(i % 5 + 1), flags, (size_t)(i * 37 % 300),
                     i % 3 != 2),
                 i + 1);
    }
    REQUIRE(wait_done());
    CHECK_EQ(tally.errors, 0);
    CHECK_EQ(tally.out_of_order, 0);
    journal_stats(j, &st);
    CHECK_EQ(st.next_lsn, 21);
    CHECK_EQ(st.appends, 20);
    CHECK_EQ(st.live_records, live);
    journal_close(j);

    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    CHECK_EQ(r.n, 20);
    CHECK_EQ(r.bad_payloads, 0);
    for (i = 0; i < 20 && (size_t)i < r.n; i++) {
        CHECK_EQ(r.v[i].lsn, i + 1);
        CHECK_EQ(r.v[i].type, i % 5 + 1);
        CHECK_EQ(r.v[i].flags, i % 2 == 0 ? JOURNAL_LIVE : 0);
        CHECK_EQ(r.v[i].len, i * 37 % 300);
    }
    journal_stats(j, &st);
    /* Releases are not journaled: every LIVE record is live again. */
    CHECK_EQ(st.live_records, live);
    CHECK_EQ(st.next_lsn, 21);
    CHECK_EQ(st.torn_bytes, 0);
    CHECK_EQ(st.corrupt_records, 0);
    CHECK_EQ(st.appends, 0);
    /* A second replay is refused. */
    {
        char err[256] = "";

        CHECK(journal_replay(j, on_replay, &r, err, sizeof err) != 0);
        CHECK(err[0] != '\0');
    }
    CHECK_EQ(put(j, 9, 0, 5, false), 21);
    journal_close(j);
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    CHECK_EQ(r.n, 21);
    /* Restarts append to the newest segment: no new file each time. */
    CHECK_EQ(list_segments(dir, NULL, 0), 1);
    journal_close(j);

    /* The format is pinned: header, then record 2 (lsn 2, type 2, flags
     * 0, 37 bytes), checksums by an independent CRC-32C. */
    {
        uint8_t buf[HDR + 2 * FRAME + 64];
        char path[512];
        int fd;

        CHECK_EQ(crc32c_ref((const uint8_t *)"123456789", 9), 0xE3069283u);
        seg_path(dir, 1, path, sizeof path);
        fd = open(path, O_RDONLY);
        REQUIRE(fd >= 0);
        CHECK_EQ(read(fd, buf, sizeof buf), (ssize_t)sizeof buf);
        close(fd);
        CHECK(memcmp(buf, "WMJ1", 4) == 0);
        CHECK_EQ(le32(buf + 4), 1);
        CHECK_EQ(le64(buf + 8), 1);
        CHECK_EQ(le32(buf + 16), crc32c_ref(buf, 16));
        /* record 1: empty, LIVE, type 1 */
        CHECK_EQ(le32(buf + HDR), 0);
        CHECK_EQ(le64(buf + HDR + 8), 1);
        CHECK_EQ(buf[HDR + 16], 1);
        CHECK_EQ(buf[HDR + 17], JOURNAL_LIVE);
        CHECK_EQ(le32(buf + HDR + 4), crc32c_ref(buf + HDR + 8, 10));
        /* record 2 */
        {
            const uint8_t *f = buf + HDR + FRAME;

            CHECK_EQ(le32(f), 37);
            CHECK_EQ(le64(f + 8), 2);
            CHECK_EQ(f[16], 2);
            CHECK_EQ(f[17], 0);
            CHECK_EQ(le32(f + 4), crc32c_ref(f + 8, 10 + 37));
        }
    }
    free(r.v);
}

/* Callbacks in append order, with and without callbacks mixed, across
 * segments, and from appends made inside a callback. */
static int nested_done;
static struct journal *nested_j;

static void
on_nested(int error, void *arg)
{
    (void)arg;
    CHECK_EQ(error, 0);
    /* An append from a callback: its own callback comes later. */
    if (nested_done++ == 0)
        CHECK(put(nested_j, 1, 0, 10, true) != 0);
}

static void
test_order(void)
{
    struct journal *j;
    char dir[256];
    int i;

    new_dir(dir, sizeof dir);
    tally_reset();
    j = open_cfg(dir, 4096, 0, 0);
    REQUIRE(j != NULL);
    for (int round = 0; round < 3; round++) {
        for (i = 0; i < 500; i++)
            CHECK(put(j, 1, i % 4 == 0 ? JOURNAL_LIVE : 0,
                      (size_t)(i * 13 % 200), i % 7 != 0) != 0);
        spin(1);
    }
    nested_j = j;
    nested_done = 0;
    CHECK(journal_append(j, 2, 0, "x", 1, on_nested, NULL) != 0);
    for (i = 0; i < 10; i++)
        CHECK(put(j, 1, 0, 10, true) != 0);
    REQUIRE(wait_done());
    CHECK_EQ(nested_done, 1);
    CHECK_EQ(tally.errors, 0);
    CHECK_EQ(tally.out_of_order, 0);
    journal_close(j);
}

/* Each policy's syncs, and every record survives a reopen. */
static void
test_fsync_policy(void)
{
    struct replay r = { 0 };
    struct journal_stats st;
    struct journal *j;
    char dir[256];
    int i;

    new_dir(dir, sizeof dir);
    tally_reset();
    j = open_cfg(dir, 0, 0, 200);
    REQUIRE(j != NULL);
    journal_stats(j, &st);
    CHECK_EQ(st.syncs, 0);
    switch (mode) {
    case JOURNAL_FSYNC_ALWAYS:
        /* One record at a time: one batch, one fdatasync each. */
        for (i = 1; i <= 5; i++) {
            CHECK(put(j, 1, JOURNAL_LIVE, 100, true) != 0);
            REQUIRE(wait_done());
            journal_stats(j, &st);
            CHECK(st.syncs >= (uint64_t)i);
        }
        break;
    case JOURNAL_FSYNC_BATCH: {
        double t0 = now_s();

        /* The callback comes after write(); the sync 200 ms later. */
        CHECK(put(j, 1, JOURNAL_LIVE, 100, true) != 0);
        REQUIRE(wait_done());
        journal_stats(j, &st);
        if (now_s() - t0 < 0.15)
            CHECK_EQ(st.syncs, 0);
        for (i = 0; i < 500 && st.syncs == 0; i++) {
            spin(10);
            journal_stats(j, &st);
        }
        CHECK_EQ(st.syncs, 1);
        CHECK(now_s() - t0 >= 0.19);
        for (i = 0; i < 4; i++)
            CHECK(put(j, 1, JOURNAL_LIVE, 100, true) != 0);
        REQUIRE(wait_done());
        break;
    }
    case JOURNAL_FSYNC_OFF:
        for (i = 0; i < 1000; i++)
            CHECK(put(j, 1, JOURNAL_LIVE, 100, true) != 0);
        REQUIRE(wait_done());
        spin(300);
        journal_stats(j, &st);
        CHECK_EQ(st.syncs, 0);
        break;
    }
    CHECK_EQ(tally.errors, 0);
    journal_stats(j, &st);
    journal_close(j);
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    CHECK_EQ(r.n, st.next_lsn - 1);
    CHECK_EQ(r.bad_payloads, 0);
    journal_close(j);
    free(r.v);
}

/* Under batch and off, the records of a quiet turn are written by the
 * loop itself at the end of the turn: their callbacks run in that very
 * turn, with no eventfd from the writer.  A large batch, and every batch
 * under always (which syncs before its completion), go to the writer. */
static void
test_inline_write(void)
{
    bool inl = mode != JOURNAL_FSYNC_ALWAYS;
    struct journal_stats st, after;
    struct replay r = { 0 };
    struct journal *j;
    char dir[256];
    int i;

    new_dir(dir, sizeof dir);
    tally_reset();
    j = open_j(dir);
    REQUIRE(j != NULL);
    for (i = 0; i < 3; i++)
        CHECK(put(j, 1, JOURNAL_LIVE, 100, true) != 0);
    (void)event_base_loop(base, EVLOOP_NONBLOCK);
    journal_stats(j, &st);
    CHECK_EQ(st.inline_writes, inl ? 1 : 0);
    if (inl)
        CHECK_EQ(tally.done, 3);
    REQUIRE(wait_done());

    /* 120 KB in one turn (one record: the writer's sync timer cannot take
     * part of it meanwhile): the writer's, beside the loop. */
    size_t big = 120000;
    uint8_t *buf = malloc(big);
    uint64_t want = next_lsn(j);
    REQUIRE(buf != NULL);
    pattern(buf, big, want);
    CHECK_EQ(journal_append(j, 1, JOURNAL_LIVE, buf, big, on_done,
                            (void *)(uintptr_t)tally.issued),
             want);
    tally.issued++;
    free(buf);
    (void)event_base_loop(base, EVLOOP_NONBLOCK);
    REQUIRE(wait_done());
    journal_stats(j, &after);
    CHECK_EQ(after.inline_writes, st.inline_writes);

    /* Once the writer is idle again (it marks itself so a moment after
     * its completions), the loop writes again: the writes of both
     * interleave in one file. */
    int extra = 0;
    do {
        spin(10);
        CHECK(put(j, 1, JOURNAL_LIVE, 100, true) != 0);
        extra++;
        REQUIRE(wait_done());
        journal_stats(j, &after);
    } while (inl && after.inline_writes == st.inline_writes && extra < 50);
    CHECK_EQ(after.inline_writes > st.inline_writes, inl);
    CHECK_EQ(tally.errors, 0);
    CHECK_EQ(tally.out_of_order, 0);
    journal_close(j);
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    CHECK_EQ(r.n, (size_t)(4 + extra));
    CHECK_EQ(r.bad_payloads, 0);
    journal_close(j);
    free(r.v);
}

/* Released records let whole segments go; a replay that releases does the
 * same after a restart. */
static void
test_rotation_release(void)
{
    struct journal_stats st, before;
    struct replay r = { 0 };
    struct journal *j;
    uint64_t lsn, segs[64];
    char dir[256];
    size_t n;

    new_dir(dir, sizeof dir);
    tally_reset();
    j = open_cfg(dir, 1024, 0, 0);
    REQUIRE(j != NULL);
    for (int i = 0; i < 100; i++)
        CHECK(put(j, 1, JOURNAL_LIVE, 100, true) != 0);
    REQUIRE(wait_done());
    journal_stats(j, &before);
    CHECK(before.segments >= 10);
    CHECK_EQ(list_segments(dir, segs, 64), before.segments);
    CHECK_EQ(before.live_records, 100);
    /* Releasing all but the first keeps every segment: the oldest is
     * pinned. */
    for (lsn = 2; lsn <= 100; lsn++)
        journal_release(j, lsn);
    journal_stats(j, &st);
    CHECK_EQ(st.segments, before.segments);
    CHECK_EQ(st.live_records, 1);
    /* Unknown and repeated releases change nothing. */
    journal_release(j, 0);
    journal_release(j, 2);
    journal_release(j, 5000);
    journal_stats(j, &st);
    CHECK_EQ(st.live_records, 1);
    journal_release(j, 1);
    /* A record with a callback: once it is done, so are the deletions
     * queued before it. */
    CHECK(put(j, 2, 0, 10, true) != 0);
    REQUIRE(wait_done());
    journal_stats(j, &st);
    CHECK_EQ(st.live_records, 0);
    CHECK_EQ(st.segments, 1);
    CHECK(st.bytes < before.bytes);
    n = list_segments(dir, segs, 64);
    CHECK_EQ(n, 1);
    CHECK_EQ(tally.errors, 0);
    journal_close(j);

    /* After a restart every LIVE record is live again, until the replay
     * releases it. */
    j = open_cfg(dir, 1024, 0, 0);
    REQUIRE(j != NULL);
    for (int i = 0; i < 50; i++)
        CHECK(put(j, 1, JOURNAL_LIVE, 100, true) != 0);
    REQUIRE(wait_done());
    journal_stats(j, &before);
    journal_close(j);
    r.release = true;
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    CHECK(r.n >= 50);
    journal_stats(j, &st);
    CHECK_EQ(st.live_records, 0);
    CHECK_EQ(st.segments, 1);
    CHECK(put(j, 2, 0, 10, true) != 0);
    REQUIRE(wait_done());
    CHECK_EQ(list_segments(dir, segs, 64), 1);
    journal_close(j);
    free(r.v);
}

/* The hook: records its calls and, once asked to, re-appends the pinned
 * record and releases the old one. */
static struct {
    struct journal *j;
    int calls;
    uint64_t below;
    bool compact;
    uint64_t pinned; /* the lsn of the one live record */
} hook;

static void
on_compact(uint64_t below, void *arg)
{
    CHECK(arg == &hook);
    hook.calls++;
    hook.below = below;
    if (!hook.compact || hook.pinned >= below)
        return;
    {
        uint64_t old = hook.pinned;

        hook.pinned = put(hook.j, 7, JOURNAL_LIVE, 100, false);
        CHECK(hook.pinned != 0);
        journal_release(hook.j, old);
    }
}

static void
test_compaction(void)
{
    struct journal_stats st;
    struct replay r = { 0 };
    struct journal *j;
    uint64_t segs[64];
    char dir[256];
    int calls;

    new_dir(dir, sizeof dir);
    tally_reset();
    j = open_cfg(dir, 1024, 0, 0);
    REQUIRE(j != NULL);
    memset(&hook, 0, sizeof hook);
    hook.j = j;
    journal_set_compact_hook(j, on_compact, &hook);
    hook.pinned = put(j, 7, JOURNAL_LIVE, 100, true);
    CHECK_EQ(hook.pinned, 1);
    /* Everything else released as soon as appended: only record 1 pins. */
    for (int i = 0; i < 40; i++) {
        uint64_t lsn = put(j, 1, JOURNAL_LIVE, 100, true);

        CHECK(lsn != 0);
        journal_release(j, lsn);
    }
    REQUIRE(wait_done());
    spin(20);
    journal_stats(j, &st);
    CHECK(st.segments >= 4);
    CHECK_EQ(list_segments(dir, segs, 64), st.segments);
    CHECK(hook.calls >= 1);
    CHECK_EQ(hook.below, segs[1]);
    /* Not again for the same bound while the segments stay. */
    calls = hook.calls;
    spin(50);
    journal_release(j, 5000);
    spin(20);
    CHECK_EQ(hook.calls, calls);

    /* Now the owner compacts; a new segment makes the hook due again. */
    hook.compact = true;
    for (int i = 0; i < 10; i++) {
        uint64_t lsn = put(j, 1, JOURNAL_LIVE, 100, true);

        journal_release(j, lsn);
    }
    REQUIRE(wait_done());
    spin(20);
    CHECK(hook.calls > calls);
    CHECK(hook.pinned > segs[1]);
    CHECK(put(j, 2, 0, 10, true) != 0);
    REQUIRE(wait_done());
    journal_stats(j, &st);
    CHECK(st.segments <= 2);
    CHECK_EQ(st.live_records, 1);
    CHECK_EQ(list_segments(dir, segs, 64), st.segments);
    CHECK_EQ(tally.errors, 0);
    journal_close(j);

    /* The re-appended copy is what a restart finds. */
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    {
        size_t found = 0;

        for (size_t i = 0; i < r.n; i++)
            found += r.v[i].lsn == hook.pinned && r.v[i].type == 7;
        CHECK_EQ(found, 1);
    }
    journal_close(j);
    free(r.v);
}

static void
test_budget(void)
{
    struct journal_stats st;
    struct journal *j;
    uint64_t first = 0, last = 0, lsn;
    char dir[256];
    int n = 0;

    new_dir(dir, sizeof dir);
    tally_reset();
    j = open_cfg(dir, 1024, 4096, 0);
    REQUIRE(j != NULL);
    while ((lsn = put(j, 1, JOURNAL_LIVE, 100, true)) != 0 && n < 1000) {
        if (first == 0)
            first = lsn;
        last = lsn;
        n++;
    }
    CHECK_EQ(lsn, 0);
    CHECK_EQ(errno, ENOSPC);
    CHECK(n >= 30 && n <= 40);
    journal_stats(j, &st);
    CHECK(st.bytes >= 4096);
    /* AUX records still go in: they are what settles LIVE ones. */
    CHECK(put(j, 2, 0, 100, true) != 0);
    CHECK(put(j, 2, 0, 100, true) != 0);
    REQUIRE(wait_done());
    CHECK_EQ(tally.errors, 0);
    /* Released, the old segments go and LIVE appends are accepted. */
    for (lsn = first; lsn <= last; lsn++)
        journal_release(j, lsn);
    journal_stats(j, &st);
    CHECK(st.bytes < 4096);
    CHECK(put(j, 1, JOURNAL_LIVE, 100, true) != 0);
    REQUIRE(wait_done());
    journal_close(j);
}

static void
test_invalid(void)
{
    static const uint8_t small[8];
    struct journal_stats st;
    struct journal *j;
    char dir[256];

    new_dir(dir, sizeof dir);
    j = open_j(dir);
    REQUIRE(j != NULL);
    /* The size is refused before the payload is read. */
    errno = 0;
    CHECK_EQ(journal_append(j, 1, JOURNAL_LIVE, small,
                            (size_t)JOURNAL_MAX_PAYLOAD + 1, NULL, NULL),
             0);
    CHECK_EQ(errno, EMSGSIZE);
    errno = 0;
    CHECK_EQ(journal_append(j, 1, 0x100, small, 1, NULL, NULL), 0);
    CHECK_EQ(errno, EINVAL);
    errno = 0;
    CHECK_EQ(journal_append(j, 1, 0, NULL, 3, NULL, NULL), 0);
    CHECK_EQ(errno, EINVAL);
    journal_stats(j, &st);
    CHECK_EQ(st.next_lsn, 1);
    CHECK_EQ(st.appends, 0);
    journal_close(j);
}

/* A crash mid-write leaves a cut record at the end of the newest segment:
 * open drops it and appends carry on after the last whole record. */
static void
test_torn_tail(void)
{
    struct replay r = { 0 };
    struct journal_stats st;
    struct journal *j;
    char dir[256], path[512];
    off_t size;

    new_dir(dir, sizeof dir);
    tally_reset();
    j = open_j(dir);
    REQUIRE(j != NULL);
    for (int i = 0; i < 10; i++)
        CHECK(put(j, 1, JOURNAL_LIVE, 50, true) != 0);
    REQUIRE(wait_done());
    journal_close(j);
    seg_path(dir, 1, path, sizeof path);
    size = file_size(path);
    CHECK_EQ(size, HDR + 10 * (FRAME + 50));

    /* Record 10 cut 30 bytes short. */
    REQUIRE(truncate(path, size - 30) == 0);
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    journal_stats(j, &st);
    CHECK_EQ(st.torn_bytes, FRAME + 50 - 30);
    CHECK_EQ(st.corrupt_records, 0);
    CHECK_EQ(r.n, 9);
    CHECK_EQ(r.bad_payloads, 0);
    CHECK_EQ(st.next_lsn, 10);
    CHECK_EQ(file_size(path), HDR + 9 * (FRAME + 50));
    for (int i = 0; i < 3; i++)
        CHECK_EQ(put(j, 1, JOURNAL_LIVE, 50, true), 10 + i);
    REQUIRE(wait_done());
    CHECK_EQ(tally.errors, 0);
    journal_close(j);
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    journal_stats(j, &st);
    CHECK_EQ(st.torn_bytes, 0);
    CHECK_EQ(r.n, 12);
    for (size_t i = 0; i < r.n; i++)
        CHECK_EQ(r.v[i].lsn, i + 1);
    CHECK_EQ(r.bad_payloads, 0);
    journal_close(j);

    /* Half a record of garbage at the end: a frame that promises more
     * than the file holds. */
    {
        uint8_t half[FRAME + 10] = { 100, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 13 };

        REQUIRE(append_bytes(path, half, sizeof half) == 0);
    }
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    journal_stats(j, &st);
    CHECK_EQ(st.torn_bytes, FRAME + 10);
    CHECK_EQ(r.n, 12);
    CHECK_EQ(st.next_lsn, 13);
    journal_close(j);

    /* A bad checksum on the very last record is a torn tail too. */
    REQUIRE(flip_byte(path, file_size(path) - 1) == 0);
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    journal_stats(j, &st);
    CHECK_EQ(st.torn_bytes, FRAME + 50);
    CHECK_EQ(st.corrupt_records, 0);
    CHECK_EQ(r.n, 11);
    CHECK_EQ(st.next_lsn, 12);
    journal_close(j);

    /* A newest segment whose header was cut short (a crash as it was
     * created) is removed, and its lsns are not reused. */
    {
        char torn[512];

        seg_path(dir, 40, torn, sizeof torn);
        REQUIRE(append_bytes(torn, "WMJ", 3) == 0);
        j = reopen(dir, &r);
        REQUIRE(j != NULL);
        journal_stats(j, &st);
        CHECK_EQ(st.torn_bytes, 3);
        CHECK_EQ(r.n, 11);
        CHECK_EQ(st.next_lsn, 40);
        CHECK(file_size(torn) < 0 || file_size(torn) == HDR);
        CHECK_EQ(put(j, 1, 0, 20, true), 40);
        REQUIRE(wait_done());
        journal_close(j);
        j = reopen(dir, &r);
        REQUIRE(j != NULL);
        CHECK_EQ(r.n, 12);
        if (r.n == 12)
            CHECK_EQ(r.v[11].lsn, 40);
        CHECK_EQ(r.bad_payloads, 0);
        journal_close(j);
    }
    free(r.v);
}

/* A damaged record with valid ones after it is skipped, anywhere. */
static void
test_corrupt(void)
{
    struct replay r = { 0 };
    struct journal_stats st;
    struct journal *j;
    char dir[256], path[512], err[1024];
    uint64_t segs[16];

    new_dir(dir, sizeof dir);
    tally_reset();
    j = open_j(dir);
    REQUIRE(j != NULL);
    for (int i = 0; i < 5; i++)
        CHECK(put(j, 1, JOURNAL_LIVE, 32, true) != 0);
    REQUIRE(wait_done());
    journal_close(j);
    seg_path(dir, 1, path, sizeof path);
    /* A payload byte of record 3. */
    REQUIRE(flip_byte(path, HDR + 2 * (FRAME + 32) + FRAME + 5) == 0);
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    journal_stats(j, &st);
    CHECK_EQ(st.corrupt_records, 1);
    CHECK_EQ(st.torn_bytes, 0);
    CHECK_EQ(r.n, 4);
    if (r.n == 4) {
        CHECK_EQ(r.v[0].lsn, 1);
        CHECK_EQ(r.v[1].lsn, 2);
        CHECK_EQ(r.v[2].lsn, 4);
        CHECK_EQ(r.v[3].lsn, 5);
    }
    CHECK_EQ(r.bad_payloads, 0);
    CHECK_EQ(st.live_records, 4);
    CHECK_EQ(put(j, 1, 0, 10, true), 6);
    REQUIRE(wait_done());
    journal_close(j);

    /* In an older segment, with a damaged length: the search for the
     * next record crosses what the length claimed. */
    new_dir(dir, sizeof dir);
    j = open_cfg(dir, 512, 0, 0);
    REQUIRE(j != NULL);
    for (int i = 0; i < 30; i++)
        CHECK(put(j, 1, JOURNAL_LIVE, 32, true) != 0);
    REQUIRE(wait_done());
    journal_close(j);
    REQUIRE(list_segments(dir, segs, 16) >= 3);
    seg_path(dir, segs[0], path, sizeof path);
    REQUIRE(flip_byte(path, HDR + 1 * (FRAME + 32) + 1) == 0);
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    journal_stats(j, &st);
    CHECK_EQ(st.corrupt_records, 1);
    CHECK_EQ(r.n, 29);
    CHECK_EQ(r.bad_payloads, 0);
    journal_close(j);

    /* A bad header in an older segment fails the open, naming it. */
    seg_path(dir, segs[1], path, sizeof path);
    REQUIRE(flip_byte(path, 1) == 0);
    {
        struct journal_config cfg = { .dir = dir, .fsync = mode };
        char name[32];

        err[0] = '\0';
        j = journal_open(&cfg, base, err, sizeof err);
        CHECK(j == NULL);
        if (j != NULL)
            journal_close(j);
        snprintf(name, sizeof name, "%016" PRIx64 ".wmj", segs[1]);
        CHECK(check_has_all(err, dir, name, NULL));
    }
    free(r.v);
}

static void
test_open_errors(void)
{
    struct journal_config cfg = { .fsync = mode };
    struct journal *j, *j2;
    char dir[256], err[1024];

    /* A file where the directory should be. */
    new_dir(dir, sizeof dir);
    REQUIRE(append_bytes(dir, "x", 1) == 0);
    cfg.dir = dir;
    err[0] = '\0';
    j = journal_open(&cfg, base, err, sizeof err);
    CHECK(j == NULL);
    if (j != NULL)
        journal_close(j);
    CHECK(check_has_all(err, dir, "not a directory", NULL));

    /* No parent. */
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/a/b");
    err[0] = '\0';
    CHECK(journal_open(&cfg, base, err, sizeof err) == NULL);
    CHECK(check_has_all(err, dir, NULL));

    /* One journal per directory. */
    new_dir(dir, sizeof dir);
    j = open_j(dir);
    REQUIRE(j != NULL);
    err[0] = '\0';
    j2 = journal_open(&cfg, base, err, sizeof err);
    CHECK(j2 == NULL);
    if (j2 != NULL)
        journal_close(j2);
    CHECK(check_has_all(err, dir, "in use", NULL));
    journal_close(j);
    {
        struct stat sb;

        CHECK(stat(dir, &sb) == 0 && (sb.st_mode & 0777) == 0700);
    }
}

/* Appends one record, then limits this process's files to 300 bytes past
 * its segment (setrlimit RLIMIT_FSIZE: later writes fail with EFBIG);
 * *old is the limit to restore, *lim the one set.  False on a failure
 * (reported). */
static bool
limit_after_one(struct journal *j, const char *dir, struct rlimit *old,
                struct rlimit *lim)
{
    char path[512];

    if (put(j, 1, JOURNAL_LIVE, 100, true) == 0 || !wait_done() ||
        getrlimit(RLIMIT_FSIZE, old) != 0) {
        FAIL("the first record, or getrlimit: %s", strerror(errno));
        return false;
    }
    seg_path(dir, 1, path, sizeof path);
    *lim = *old;
    lim->rlim_cur = (rlim_t)file_size(path) + 300;
    if (setrlimit(RLIMIT_FSIZE, lim) != 0) {
        FAIL("setrlimit: %s", strerror(errno));
        return false;
    }
    return true;
}

/* A write error (the file size limit) fails the journal: the callbacks of
 * the records it hit get the errno, later appends EIO. */
static void
test_write_failure(void)
{
    struct replay r = { 0 };
    struct rlimit old, lim;
    struct journal *j;
    char dir[256];
    int ok;

    new_dir(dir, sizeof dir);
    tally_reset();
    j = open_j(dir);
    REQUIRE(j != NULL);
    REQUIRE(limit_after_one(j, dir, &old, &lim));
    /* Appends fail (EIO) as soon as the writer has failed, which may
     * come before the loop is done appending. */
    for (int i = 0; i < 10; i++)
        if (put(j, 1, JOURNAL_LIVE, 100, true) == 0)
            CHECK_EQ(errno, EIO);
    CHECK(tally.issued > 1);
    (void)wait_done();
    CHECK(tally.errors > 0);
    CHECK_EQ(tally.last_error, EFBIG);
    CHECK_EQ(tally.out_of_order, 0);
    errno = 0;
    CHECK_EQ(put(j, 1, 0, 10, true), 0);
    CHECK_EQ(errno, EIO);
    CHECK_EQ(put(j, 1, JOURNAL_LIVE, 10, true), 0);
    ok = tally.done - tally.errors;
    journal_close(j);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
    /* Every acknowledged record is there; the cut one is a torn tail. */
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    CHECK(r.n >= (size_t)ok);
    CHECK_EQ(r.bad_payloads, 0);
    journal_close(j);
    free(r.v);
}

/* The state hook's calls: how many said writable, how many not. */
static int hook_writable, hook_failed;

static void
on_state(bool writable, void *arg)
{
    (void)arg;
    if (writable)
        hook_writable++;
    else
        hook_failed++;
}

/* A write failure (RLIMIT_FSIZE: EFBIG, as a full disk is ENOSPC) stops
 * the journal writing; health says so and why; it stays so while the
 * cause lasts, then recovers by itself, without a reopen: the failed
 * segment truncated to its last good record, appends going on in a fresh
 * segment; a reopen then finds every acknowledged record, no torn tail,
 * no damage. */
static void
test_write_recovery(void)
{
    struct replay r = { 0 };
    struct journal_health h;
    struct journal_stats st;
    struct rlimit old, lim;
    struct journal *j;
    char dir[256];
    int ok, errors;

    new_dir(dir, sizeof dir);
    tally_reset();
    hook_writable = hook_failed = 0;
    j = open_j(dir);
    REQUIRE(j != NULL);
    journal_set_state_hook(j, on_state, NULL);
    journal_health(j, &h);
    CHECK(h.writable);
    REQUIRE(limit_after_one(j, dir, &old, &lim));
    for (int i = 0; i < 10; i++)
        (void)put(j, 1, JOURNAL_LIVE, 100, true);
    (void)wait_done();
    CHECK(tally.errors > 0);
    CHECK_EQ(tally.last_error, EFBIG);
    CHECK_EQ(hook_failed, 1);
    journal_health(j, &h);
    CHECK(!h.writable);
    CHECK_EQ(h.error, EFBIG);
    CHECK(h.since > 0);
    CHECK_EQ(h.failures, 1);
    CHECK(strstr(h.message, "0000000000000001.wmj") != NULL);
    CHECK(strstr(h.message, strerror(EFBIG)) != NULL);
    /* While the cause lasts (not even the truncation can be made), the
     * retries fail and appends are refused. */
    lim.rlim_cur = 10;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    spin((int)JOURNAL_RETRY_MS + 100);
    errno = 0;
    CHECK_EQ(put(j, 1, JOURNAL_LIVE, 10, true), 0);
    CHECK_EQ(errno, EIO);
    /* An AUX record without a callback is kept, written on recovery. */
    CHECK_EQ(journal_append(j, 7, 0, NULL, 0, NULL, NULL), JOURNAL_DEFERRED);
    spin(200);
    CHECK_EQ(hook_writable, 0);
    journal_health(j, &h);
    CHECK(!h.writable);
    CHECK_EQ(h.recoveries, 0);
    /* The cause goes: it writes again by itself. */
    REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
    REQUIRE(wait_for(&hook_writable, 1));
    journal_health(j, &h);
    CHECK(h.writable);
    CHECK_EQ(h.recoveries, 1);
    CHECK_EQ(h.message[0], '\0');
    errors = tally.errors;
    ok = tally.done - tally.errors;
    for (int i = 0; i < 5; i++)
        CHECK(put(j, 1, JOURNAL_LIVE, 100, true) != 0);
    REQUIRE(wait_done());
    CHECK_EQ(tally.errors, errors);
    CHECK_EQ(tally.out_of_order, 0);
    journal_close(j);
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    CHECK_EQ(r.n, (size_t)ok + 6);
    CHECK_EQ(r.bad_payloads, 0);
    for (size_t i = 1; i < r.n; i++)
        CHECK(r.v[i].lsn > r.v[i - 1].lsn);
    /* The kept record, first after the recovery. */
    REQUIRE(r.n > (size_t)ok);
    CHECK_EQ(r.v[ok].type, 7);
    CHECK_EQ(r.v[ok].len, 0);
    journal_stats(j, &st);
    CHECK_EQ(st.torn_bytes, 0);
    CHECK_EQ(st.corrupt_records, 0);
    CHECK_EQ(st.live_records, (uint64_t)ok + 5);
    journal_close(j);
    free(r.v);
}

/* Many small records: every callback, every record back. */
static void
test_many(void)
{
    struct replay r = { 0 };
    struct journal_stats st;
    struct journal *j;
    char dir[256];
    double t0, t1;

    new_dir(dir, sizeof dir);
    tally_reset();
    j = open_j(dir);
    REQUIRE(j != NULL);
    t0 = now_s();
    for (int i = 0; i < NMANY; i++)
        if (put(j, 1, i % 2 ? JOURNAL_LIVE : 0, MANY_LEN, true) == 0) {
            FAIL("append %d: %s", i, strerror(errno));
            break;
        }
    REQUIRE(wait_done());
    t1 = now_s();
    journal_stats(j, &st);
    printf("# fsync=%s: %d appends of %d bytes in %.3f s (%.0f/s), "
           "%" PRIu64 " fdatasyncs\n",
           mode_name, NMANY, MANY_LEN, t1 - t0, NMANY / (t1 - t0), st.syncs);
    CHECK_EQ(tally.done, NMANY);
    CHECK_EQ(tally.errors, 0);
    CHECK_EQ(tally.out_of_order, 0);
    CHECK_EQ(st.bytes, HDR + (uint64_t)NMANY * (FRAME + MANY_LEN));
    journal_close(j);
    j = reopen(dir, &r);
    REQUIRE(j != NULL);
    CHECK_EQ(r.n, NMANY);
    CHECK_EQ(r.bad_payloads, 0);
    journal_stats(j, &st);
    CHECK_EQ(st.live_records, NMANY / 2);
    journal_close(j);
    free(r.v);
}

/* ---- main ------------------------------------------------------------ */

int
main(void)
{
    static const struct {
        enum journal_fsync mode;
        const char *name;
    } modes[] = {
        { JOURNAL_FSYNC_ALWAYS, "always" },
        { JOURNAL_FSYNC_BATCH, "batch" },
        { JOURNAL_FSYNC_OFF, "off" },
    };
    struct timeval tick_tv = { 0, 10000 };
    struct event *tick;
    int rc, fds;

    alarm(600); /* a hang is a failure, not a stuck build */
    /* The write-failure test exceeds RLIMIT_FSIZE: EFBIG, not a signal. */
    signal(SIGXFSZ, SIG_IGN);
    if (mkdtemp(root) == NULL) {
        perror("mkdtemp");
        return 99;
    }
    base = event_base_new();
    if (base == NULL) {
        fprintf(stderr, "event_base_new failed\n");
        return 99;
    }
    tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
    if (tick == NULL || event_add(tick, &tick_tv) != 0) {
        fprintf(stderr, "cannot add the tick\n");
        return 99;
    }
    fds = check_count_fds();
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        mode = modes[m].mode;
        mode_name = modes[m].name;
        printf("# fsync=%s\n", mode_name);
        RUN(test_roundtrip);
        RUN(test_order);
        RUN(test_fsync_policy);
        RUN(test_inline_write);
        RUN(test_rotation_release);
        RUN(test_compaction);
        RUN(test_budget);
        RUN(test_invalid);
        RUN(test_torn_tail);
        RUN(test_corrupt);
        RUN(test_open_errors);
        RUN(test_write_failure);
        RUN(test_write_recovery);
        RUN(test_many);
    }
    check_test = "main";
    CHECK_EQ(check_count_fds(), fds); /* every journal closed its files */
    event_free(tick);
    event_base_free(base);
    rc = check_result();
    if (rc == 0)
        check_rmtree(root);
    else
        fprintf(stderr, "kept %s for inspection\n", root);
    return rc;
}
