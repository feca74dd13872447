/*
 * test_events_answer.c — the answer writer (master/api/events_answer.c)
 * against the jansson path (answer_diff.h), byte for byte.
 *
 * Events: every event of the scanner's seed corpus (tests/fuzz/scan-seeds,
 * tests/fuzz/events-seeds), read by the jansson path, written alone, as a
 * batch of one and all of a body as one batch; every body of the corpus
 * as a host's output whose data is that body (under JSON, text and binary
 * content types: raw JSON to normalise, text that is no JSON, ill-formed
 * UTF-8) and whose subject and an extension are that body; and the hand-
 * made events below (the unit tests' events, text a host may send that is
 * no UTF-8, repeated, reserved and invalid extension names, data shapes
 * the writer leaves to jansson).  The common events must be written by
 * the writer, not left to jansson.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/api/events.h"
#include "tests/unit/answer_diff.h"
#include "tests/unit/check.h"
#include "tests/unit/events_diff.h"

static unsigned written, fallbacks;

/* evs[0..n) through both writers, each alone, alone as a batch, and all
 * together as one batch. */
static void
diff_events(const struct ipc_cloudevent *evs, size_t n, const char *name)
{
    bool direct;
    const char *why;

    for (size_t i = 0; i < n; i++) {
        for (int array = 0; array < 2; array++) {
            if ((why = answer_diff_check(&evs[i], 1, array, &direct)))
                FAIL("%s: %s (event %zu%s)", name, why, i,
                     array ? ", a batch of one" : "");
            direct ? written++ : fallbacks++;
        }
    }
    if (n > 1 && (why = answer_diff_check(evs, n, true, &direct)))
        FAIL("%s: %s (a batch of %zu)", name, why, n);
}

/* The events the jansson path reads from body, through both writers;
 * returns the number of events (0 when the body is no event). */
static size_t
diff_body(const char *body, size_t len, const char *name)
{
    struct events_batch b;
    struct ipc_cloudevent evs[64];
    size_t n = 0;

    events_batch_init(&b);
    if (events_diff_jansson((const uint8_t *)body, len, EVENTS_SCAN_BATCH, 64,
                            &b) != 0 &&
        events_diff_jansson((const uint8_t *)body, len, EVENTS_SCAN_ONE, 1,
                            &b) != 0) {
        events_batch_free(&b);
        return 0;
    }
    for (; n < b.n; n++) {
        size_t l;
        ipc_cloudevent_decode_trusted(events_batch_get(&b, n, &l), &evs[n]);
    }
    diff_events(evs, n, name);
    events_batch_free(&b);
    return n;
}

/* body as a host's output: its data under each content type, its subject
 * and an extension. */
static void
diff_host_output(const char *body, size_t len, const char *name)
{
    static const char *const types[] = {
        NULL,
        "application/json",
        "application/cloudevents+json; x=1",
        "text/plain",
        "application/octet-stream",
    };
    struct ipc_fb_builder fb;
    struct ipc_cloudevent in, out;
    struct ipc_pair ext[2] = {
        { ipc_str_c("traceparent"), { body, (uint32_t)len } },
        { ipc_str_c("data"), ipc_str_c("reserved") },
    };

    ipc_fb_builder_init(&fb);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        memset(&in, 0, sizeof in);
        in.specversion = ipc_str_c("1.0");
        in.id = ipc_str_c("out-1");
        in.source = ipc_str_c("/worker");
        in.type = ipc_str_c("com.example.out");
        in.datacontenttype = ipc_str_c(types[t]);
        in.subject.ptr = body;
        in.subject.len = (uint32_t)len;
        in.data.ptr = (const uint8_t *)body;
        in.data.len = (uint32_t)len;
        in.extensions.n = 2;
        in.extensions.items = ext;
        if (answer_diff_event(&in, &fb, &out) != 0) {
            FAIL("%s: cannot encode", name);
            continue;
        }
        diff_events(&out, 1, name);
    }
    ipc_fb_builder_free(&fb);
}

static void
corpus_file(const char *body, size_t len, const char *name, void *arg)
{
    *(size_t *)arg += diff_body(body, len, name);
    diff_host_output(body, len, name);
}

/* Every file of dir; returns the number of events read. */
static size_t
corpus(const char *dir)
{
    size_t n = 0;

    check_each_file(dir, corpus_file, &n);
    return n;
}

static void
test_corpus(void)
{
    const char *src = check_srcdir();
    char dir[4096];

    REQUIRE(src != NULL);
    written = fallbacks = 0;
    snprintf(dir, sizeof dir, "%s/tests/fuzz/scan-seeds", src);
    size_t n = corpus(dir);
    snprintf(dir, sizeof dir, "%s/tests/fuzz/events-seeds", src);
    size_t m = corpus(dir);
    printf("corpus: %zu + %zu events; %u answers written, %u left to "
           "jansson\n",
           n, m, written, fallbacks);
    CHECK(n >= 40);
    CHECK(m >= 6);
    /* The writer writes nearly every answer; the corpus's unusual
     * shapes (huge numbers, repeated members, deep nesting) are few. */
    CHECK(written > 10 * fallbacks);
}

/* Hand-made events, each through both writers. */
static void
test_hand_events(void)
{
    static const struct {
        const char *ct; /* NULL: absent */
        const char *data;
        size_t len;
        bool want_direct;
    } cases[] = {
#define D(s) s, sizeof s - 1
        { NULL, D("{\"user\":\"alice\",\"qty\":3}"), true },
        { "application/json", D(" [ 19.99 , -0 , 1E2, -0.0 ,1e-7 ] "), true },
        { "application/json", D("\"\\u0000 nul \\u00e9 \\ud83d\\ude00\""),
          true },
        { "application/json", D("{\"a\\u0000\":1}"), true }, /* base64 */
        { "application/json", D("{\"a\":1,\"a\":2}"), false },
        { "application/json", D("12345678901234567890"), false },
        { "application/json", D("0.12345678901234567"), false },
        { "application/json", D("1\0"), false },
        { "application/json", D("not json"), true },
        { "application/json", D(""), true },
        { "application/json", D("true"), true },
        { "application/json", D("\"\xff\""), true },
        { "text/plain", D("caf\xc3\xa9 \"quoted\" \\ \n\t\x01"), true },
        { "text/plain", D("bad \xc3 utf-8"), true },
        { "application/octet-stream", D("\x00\x01\x02\xff"), true },
        { "image/png", D(""), true },
#undef D
    };
    static const struct ipc_pair ext[] = {
        { { "correlationid", 13 }, { "c-1", 3 } },
        { { "traceparent", 11 }, { "bad \xe2\x82 text \xff", 14 } },
        { { "BadName", 7 }, { "x", 1 } },
        { { "id", 2 }, { "reserved", 8 } },
        { { "data_base64", 11 }, { "reserved", 8 } },
        { { "traceparent", 11 }, { "repeated", 8 } },
        { { "nullvalue", 9 }, { NULL, 0 } },
        { { "num", 3 }, { "42", 2 } },
        { { "nul", 3 }, { "a\0b", 3 } },
    };
    struct ipc_fb_builder fb;
    struct ipc_cloudevent in, out[sizeof cases / sizeof cases[0]];
    struct ipc_fb_builder fbs[sizeof cases / sizeof cases[0]];
    bool direct;
    const char *why;

    ipc_fb_builder_init(&fb);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&in, 0, sizeof in);
        in.specversion = ipc_str_c("1.0");
        in.id = ipc_str_c("id-\x01\xc3");
        in.source = ipc_str_c("/s\"\\");
        in.type = ipc_str_c("t");
        in.time = ipc_str_c("2025-01-01T00:00:00Z");
        in.datacontenttype = ipc_str_c(cases[i].ct);
        in.data.ptr = (const uint8_t *)cases[i].data;
        in.data.len = (uint32_t)cases[i].len;
        in.extensions.n = sizeof ext / sizeof ext[0];
        in.extensions.items = ext;
        ipc_fb_builder_init(&fbs[i]);
        REQUIRE(answer_diff_event(&in, &fbs[i], &out[i]) == 0);
        for (int array = 0; array < 2; array++) {
            if ((why = answer_diff_check(&out[i], 1, array, &direct)))
                FAIL("case %zu: %s", i, why);
            if (direct != cases[i].want_direct)
                FAIL("case %zu: %s, want %s", i,
                     direct ? "written" : "left to jansson",
                     cases[i].want_direct ? "written" : "left to jansson");
        }
    }
    /* All of them as one batch: one that falls back sends it all to the
     * jansson path. */
    if ((why = answer_diff_check(out, sizeof cases / sizeof cases[0], true,
                                 &direct)))
        FAIL("the batch: %s", why);
    CHECK(!direct);
    if ((why = answer_diff_check(out, 4, true, &direct)))
        FAIL("the first four: %s", why);
    CHECK(direct);
    /* An event without data or extensions, and one of no attribute. */
    memset(&in, 0, sizeof in);
    REQUIRE(answer_diff_event(&in, &fb, &out[0]) == 0);
    CHECK(answer_diff_check(&out[0], 1, false, &direct) == NULL && direct);
    in.source = ipc_str_c("/s");
    in.type = ipc_str_c("t");
    REQUIRE(answer_diff_event(&in, &fb, &out[0]) == 0);
    CHECK(answer_diff_check(&out[0], 1, true, &direct) == NULL && direct);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ipc_fb_builder_free(&fbs[i]);
    ipc_fb_builder_free(&fb);
}

/* The 233-byte event, answered as an echo: written, its exact
 * text, and counted. */
static void
test_bench_event(void)
{
    static const char bench_event[] =
        "{\"specversion\":\"1.0\",\"id\":\"7f3c2a9e-0001\",\"source\":"
        "\"/bench/producer\",\"type\":\"com.example.bench.ping\","
        "\"datacontenttype\":\"application/json\",\"time\":"
        "\"2025-01-01T00:00:00Z\",\"data\":{\"user\":\"alice\",\"action\":"
        "\"click\",\"item\":\"sku-42\",\"qty\":3}}";
    struct events_batch b;
    struct events_answer_counts before, after;
    struct ipc_cloudevent ce;
    size_t len;

    events_batch_init(&b);
    REQUIRE(events_scan_body((const uint8_t *)bench_event, strlen(bench_event),
                             EVENTS_SCAN_ONE, 1, &b) == EVENTS_SCAN_OK);
    ipc_cloudevent_decode_trusted(events_batch_get(&b, 0, &len), &ce);
    events_answer_stats(&before);
    const char *text = events_answer_json(&ce, 1, false, &len);
    REQUIRE(text != NULL);
    CHECK(len == strlen(bench_event) && memcmp(text, bench_event, len) == 0);
    text = events_answer_json(&ce, 1, true, &len);
    REQUIRE(text != NULL);
    CHECK(len == strlen(bench_event) + 2 && text[0] == '[' &&
          memcmp(text + 1, bench_event, len - 2) == 0);
    events_answer_stats(&after);
    CHECK_EQ(after.written, before.written + 2);
    CHECK_EQ(after.fallbacks, before.fallbacks);
    events_batch_free(&b);
}

int
main(void)
{
    RUN(test_corpus);
    RUN(test_hand_events);
    RUN(test_bench_event);
    return check_result();
}
