/*
 * test_events_scan.c — the CloudEvent scanner (master/api/events_scan.c)
 * against the jansson path, on every body of the seed corpus and on the
 * shapes that must take one path or the other.
 *
 * The corpus is tests/fuzz/scan-seeds (the events of the integration
 * tests and bench, and hand-made edge cases: escapes, surrogates, invalid
 * UTF-8, deep nesting, huge numbers, duplicate members, NUL, whitespace
 * everywhere) and tests/fuzz/events-seeds.  Each body is read as a single
 * event, as a batch, and as a batch limited to three events; the two
 * readers must agree (events_diff.h says on what).  Besides, the common
 * event must never fall back to jansson: the bodies of the integration
 * tests and the ok-* bodies that jansson accepts are scanned (hand-*
 * bodies are rejected, or unusual: they may fall back).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/api/events.h"
#include "tests/unit/check.h"
#include "tests/unit/events_diff.h"

static const char bench_event[] =
    "{\"specversion\":\"1.0\",\"id\":\"7f3c2a9e-0001\",\"source\":"
    "\"/bench/producer\",\"type\":\"com.example.bench.ping\","
    "\"datacontenttype\":\"application/json\",\"time\":"
    "\"2025-01-01T00:00:00Z\",\"data\":{\"user\":\"alice\",\"action\":"
    "\"click\",\"item\":\"sku-42\",\"qty\":3}}";

static enum events_scan_result
diff(const char *body, size_t len, enum events_scan_kind kind, size_t max,
     const char *name)
{
    enum events_scan_result v;
    const char *why =
        events_diff_check((const uint8_t *)body, len, kind, max, &v);
    if (why) {
        FAIL("%s (%s, %s, max %zu)", why, name,
             kind == EVENTS_SCAN_ONE ? "one" : "batch", max);
    }
    return v;
}

/* One file through both readers; arg counts the events the tests send
 * that the scanner read. */
static void
corpus_file(const char *body, size_t len, const char *name, void *arg)
{
    unsigned *scanned_from_tests = arg;

    enum events_scan_result one = diff(body, len, EVENTS_SCAN_ONE, 1000, name);
    enum events_scan_result batch =
        diff(body, len, EVENTS_SCAN_BATCH, 1000, name);
    diff(body, len, EVENTS_SCAN_BATCH, 3, name);
    /* The body as the one event of a batch, too. */
    char *wrapped = malloc(len + 2);
    if (wrapped) {
        wrapped[0] = '[';
        memcpy(wrapped + 1, body, len);
        wrapped[len + 1] = ']';
        enum events_scan_result w =
            diff(wrapped, len + 2, EVENTS_SCAN_BATCH, 1000, name);
        if (one == EVENTS_SCAN_OK && w != EVENTS_SCAN_OK)
            FAIL("%s: scanned alone, not in a batch", name);
        free(wrapped);
    }
    /* An event the tests send, or an ok-* body, is common: no
     * fallback for it. */
    if (strncmp(name, "hand-", 5) != 0) {
        struct events_batch b;
        events_batch_init(&b);
        if (events_diff_jansson((const uint8_t *)body, len, EVENTS_SCAN_ONE,
                                1000, &b) == 0) {
            CHECK(one == EVENTS_SCAN_OK);
            if (one != EVENTS_SCAN_OK)
                FAIL("%s fell back", name);
            (*scanned_from_tests)++;
        }
        if (events_diff_jansson((const uint8_t *)body, len, EVENTS_SCAN_BATCH,
                                1000, &b) == 0)
            CHECK(batch == EVENTS_SCAN_OK);
        events_batch_free(&b);
    }
}

/* Every file of dir through both readers; returns the number read. */
static unsigned
corpus(const char *dir, unsigned *scanned_from_tests)
{
    return (unsigned)check_each_file(dir, corpus_file, scanned_from_tests);
}

static void
test_corpus(void)
{
    const char *src = check_srcdir();
    char dir[4096];
    unsigned scanned = 0, n;

    REQUIRE(src != NULL);
    snprintf(dir, sizeof dir, "%s/tests/fuzz/scan-seeds", src);
    n = corpus(dir, &scanned);
    CHECK(n >= 100);
    CHECK(scanned >= 30);
    snprintf(dir, sizeof dir, "%s/tests/fuzz/events-seeds", src);
    CHECK(corpus(dir, &scanned) >= 6);
}

/* Shapes and the path each must take. */
static void
test_verdicts(void)
{
    static const struct {
        const char *body;
        enum events_scan_kind kind;
        enum events_scan_result want;
    } cases[] = {
        { "{\"type\":\"t\",\"source\":\"s\"}", EVENTS_SCAN_ONE,
          EVENTS_SCAN_OK },
        { " [ {\"type\":\"t\",\"source\":\"s\"} ] ", EVENTS_SCAN_BATCH,
          EVENTS_SCAN_OK },
        { "[]", EVENTS_SCAN_BATCH, EVENTS_SCAN_OK },
        { "{\"type\":\"t\",\"source\":\"s\",\"type\":\"u\"}", EVENTS_SCAN_ONE,
          EVENTS_SCAN_REJECT },
        /* jansson keeps the last value of a repeated member in a batch. */
        { "[{\"type\":\"t\",\"source\":\"s\",\"type\":\"u\"}]",
          EVENTS_SCAN_BATCH, EVENTS_SCAN_FALLBACK },
        { "{\"type\":\"t\",\"source\":\"s\",\"data\":{\"a\":1,\"a\":1}}",
          EVENTS_SCAN_ONE, EVENTS_SCAN_REJECT },
        { "{\"type\":\"t\",\"source\":\"s\",\"data\":12345678901234567890}",
          EVENTS_SCAN_ONE, EVENTS_SCAN_FALLBACK },
        { "{\"type\":\"t\",\"source\":\"s\",\"data\":0.12345678901234567}",
          EVENTS_SCAN_ONE, EVENTS_SCAN_FALLBACK },
        { "{\"type\":\"t\",\"source\":\"s\",\"data\":[19.99,-0,1e2]}",
          EVENTS_SCAN_ONE, EVENTS_SCAN_OK },
        { "{\"type\":\"t\",\"source\":\"s\",\"data\":\"\\ud800\"}",
          EVENTS_SCAN_ONE, EVENTS_SCAN_REJECT },
        { "{\"type\":\"t\",\"source\":\"s\",\"data\":\"\\u0000\"}",
          EVENTS_SCAN_ONE, EVENTS_SCAN_REJECT },
        { "{\"type\":\"t\",\"source\":\"s\",\"data\":\"\xff\"}",
          EVENTS_SCAN_ONE, EVENTS_SCAN_REJECT },
        { "{\"source\":\"s\"}", EVENTS_SCAN_ONE, EVENTS_SCAN_REJECT },
        { "{\"type\":\"t\",\"source\":\"s\"} {}", EVENTS_SCAN_ONE,
          EVENTS_SCAN_REJECT },
        { "", EVENTS_SCAN_ONE, EVENTS_SCAN_REJECT },
        { "[{\"type\":\"t\",\"source\":\"s\"},{\"type\":\"t\",\"source\":"
          "\"s\"},{\"type\":\"t\",\"source\":\"s\"},{\"type\":\"t\","
          "\"source\":\"s\"}]",
          EVENTS_SCAN_BATCH, EVENTS_SCAN_REJECT }, /* over max 3 */
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "case %zu", i);
        enum events_scan_result v =
            diff(cases[i].body, strlen(cases[i].body), cases[i].kind, 3, name);
        if (v != cases[i].want)
            FAIL("case %zu: verdict %d, want %d", i, (int)v,
                 (int)cases[i].want);
    }
}

/* The 233-byte event: scanned, its data kept as compact JSON, and
 * counted. */
static void
test_bench_event(void)
{
    struct events_batch b;
    struct events_scan_counts before, after;
    struct ipc_cloudevent ce;
    size_t len;
    static const char data[] =
        "{\"user\":\"alice\",\"action\":\"click\",\"item\":\"sku-42\","
        "\"qty\":3}";

    CHECK(strlen(bench_event) == 233);
    events_scan_stats(&before);
    events_batch_init(&b);
    REQUIRE(events_scan_body((const uint8_t *)bench_event, strlen(bench_event),
                             EVENTS_SCAN_ONE, 1, &b) == EVENTS_SCAN_OK);
    REQUIRE(b.n == 1);
    const uint8_t *buf = events_batch_get(&b, 0, &len);
    ipc_cloudevent_decode_trusted(buf, &ce);
    CHECK(ipc_str_eq(ce.id, "7f3c2a9e-0001"));
    CHECK(ipc_str_eq(ce.type, "com.example.bench.ping"));
    CHECK(ipc_str_eq(ce.time, "2025-01-01T00:00:00Z"));
    CHECK(ce.data.len == strlen(data) &&
          memcmp(ce.data.ptr, data, ce.data.len) == 0);
    events_batch_free(&b);
    events_scan_stats(&after);
    CHECK(after.scanned == before.scanned + 1);
    CHECK(after.fallbacks == before.fallbacks);
}

int
main(void)
{
    RUN(test_corpus);
    RUN(test_verdicts);
    RUN(test_bench_event);
    return check_result();
}
