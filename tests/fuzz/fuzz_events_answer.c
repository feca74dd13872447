/*
 * fuzz_events_answer.c — libFuzzer target: the answer writer
 * (master/api/events_answer.c) against the jansson path, differentially.
 *
 * Every input makes events two ways:
 * - as a host's output: the first byte picks the data's content type (and
 *   whether there is data), the rest is cut at each 0xfe byte into the
 *   data, the subject, then extension names and values (up to eight), so
 *   the data is random JSON or text and every text may be ill-formed
 *   UTF-8;
 * - as a request body, read by the scanner (a batch of at most eight).
 * The host's output goes through both writers alone or as a batch of one
 * (a bit of the first byte says which), the body's events as one batch
 * (or its one event alone, for an input of even length); it aborts when the
 * writer writes other bytes than the jansson path (answer_diff.h), besides the
 * sanitizers' findings.  A fallback decides nothing.  Seeds:
 * tests/fuzz/scan-seeds and tests/fuzz/events-seeds.
 *
 * Run: tests/fuzz/fuzz_events_answer -runs=N [corpus dir]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/api/events.h"
#include "tests/unit/answer_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(const struct ipc_cloudevent *evs, size_t n, bool array)
{
    bool direct;
    const char *why = answer_diff_check(evs, n, array, &direct);

    if (why) {
        fprintf(stderr, "fuzz_events_answer: %s (%zu events%s)\n", why, n,
                array ? ", a batch" : "");
        abort();
    }
}

static void
host_output(const uint8_t *data, size_t size)
{
    static const char *const types[] = {
        NULL,
        "application/json",
        "application/cloudevents+json",
        "text/plain; charset=utf-8",
        "application/octet-stream",
        "text/html",
    };
    struct ipc_pair ext[8];
    const uint8_t *piece[2 + 2 * 8];
    size_t plen[2 + 2 * 8], np = 0;
    struct ipc_cloudevent in, out;
    struct ipc_fb_builder fb;

    if (size == 0)
        return;
    unsigned sel = data[0];
    data++;
    size--;
    /* Cut the rest at each 0xfe. */
    const uint8_t *p = data, *end = data + size;
    while (np < sizeof piece / sizeof piece[0]) {
        const uint8_t *cut = memchr(p, 0xfe, (size_t)(end - p));
        piece[np] = p;
        plen[np] = (size_t)((cut ? cut : end) - p);
        np++;
        if (cut == NULL)
            break;
        p = cut + 1;
    }
    memset(&in, 0, sizeof in);
    in.specversion = ipc_str_c("1.0");
    in.id = ipc_str_c("out-1");
    in.source = ipc_str_c("/worker");
    in.type = ipc_str_c("com.example.out");
    in.datacontenttype =
        ipc_str_c(types[sel % (sizeof types / sizeof types[0])]);
    if (!(sel & 0x80)) {
        in.data.ptr = piece[0];
        in.data.len = (uint32_t)plen[0];
    }
    if (np > 1) {
        in.subject.ptr = (const char *)piece[1];
        in.subject.len = (uint32_t)plen[1];
    }
    for (size_t i = 2; i + 1 < np; i += 2) {
        struct ipc_pair *e = &ext[in.extensions.n++];
        e->name.ptr = (const char *)piece[i];
        e->name.len = (uint32_t)plen[i];
        e->value.ptr = (const char *)piece[i + 1];
        e->value.len = (uint32_t)plen[i + 1];
    }
    in.extensions.items = ext;
    ipc_fb_builder_init(&fb);
    if (answer_diff_event(&in, &fb, &out) == 0)
        check(&out, 1, (sel & 0x40) != 0);
    ipc_fb_builder_free(&fb);
}

static void
request_body(const uint8_t *data, size_t size)
{
    struct events_batch b;
    struct ipc_cloudevent evs[8];

    events_batch_init(&b);
    if (events_scan_body(data, size, EVENTS_SCAN_BATCH, 8, &b) ==
            EVENTS_SCAN_OK ||
        events_scan_body(data, size, EVENTS_SCAN_ONE, 1, &b) ==
            EVENTS_SCAN_OK) {
        for (size_t i = 0; i < b.n; i++) {
            size_t len;
            ipc_cloudevent_decode_trusted(events_batch_get(&b, i, &len),
                                          &evs[i]);
        }
        if (b.n)
            check(evs, b.n, b.n > 1 || size % 2);
    }
    events_batch_free(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    host_output(data, size);
    request_body(data, size);
    return 0;
}
