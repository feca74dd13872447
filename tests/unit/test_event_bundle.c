/*
 * test_event_bundle.c — bundles of events (master/broker/event_bundle.c):
 * what is written reads back the same, 8-aligned; every malformed shape
 * is refused (truncated, a count that disagrees, an empty event, bytes
 * after the last, padding or reserved words not zero); a bundle is not
 * taken for an ABI CloudEvent.
 */
#include "config.h"

#include "master/broker/event_bundle.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/cloudevent.h"
#include "ipc/fb.h"
#include "tests/unit/check.h"

/* A bundle of the events "a", "bbbbbbbbb" (9), "cccccccc" (8), in a
 * buffer of 16-aligned storage; its size in *len. */
static uint8_t *
make3(size_t *len)
{
    static uint64_t store[16];
    uint8_t *out = (uint8_t *)store;
    size_t at = EVENT_BUNDLE_HEAD;

    memset(store, 0xee, sizeof store);
    event_bundle_begin(out, 3);
    at = event_bundle_put(out, at, (const uint8_t *)"a", 1);
    at = event_bundle_put(out, at, (const uint8_t *)"bbbbbbbbb", 9);
    at = event_bundle_put(out, at, (const uint8_t *)"cccccccc", 8);
    *len = at;
    return out;
}

static void
test_round_trip(void)
{
    size_t len;
    uint8_t *b = make3(&len);
    struct event_bundle_iter it;
    const uint8_t *ev;
    size_t n;
    const char *want[] = { "a", "bbbbbbbbb", "cccccccc" };
    int i = 0;

    CHECK(len == 8 + 16 + 24 + 16);
    CHECK(event_bundle_record(1) == 16 && event_bundle_record(8) == 16);
    CHECK(event_bundle_is(b, len));
    CHECK(event_bundle_count(b, len) == 3);
    event_bundle_iter_init(&it, b, len);
    while (event_bundle_next(&it, &ev, &n)) {
        REQUIRE(i < 3);
        CHECK(n == strlen(want[i]) && memcmp(ev, want[i], n) == 0);
        CHECK(((uintptr_t)ev & 7) == 0);
        i++;
    }
    CHECK(i == 3);
}

static void
test_malformed(void)
{
    size_t len;
    uint8_t *b = make3(&len);

    for (size_t cut = 0; cut < len; cut++)
        CHECK(event_bundle_count(b, cut) == -1);
    /* bytes after the last event */
    CHECK(event_bundle_count(b, len + 8) == -1);
    /* a count that disagrees */
    b[4] = 2;
    CHECK(event_bundle_count(b, len) == -1);
    b[4] = 4;
    CHECK(event_bundle_count(b, len) == -1);
    b[4] = 0;
    CHECK(event_bundle_count(b, len) == -1);
    b = make3(&len);
    /* padding not zero (after "a") */
    b[8 + 8 + 1] = 1;
    CHECK(event_bundle_count(b, len) == -1);
    b = make3(&len);
    /* the reserved word */
    b[8 + 4] = 1;
    CHECK(event_bundle_count(b, len) == -1);
    b = make3(&len);
    /* an empty event */
    memset(b + 8, 0, 4);
    CHECK(event_bundle_count(b, len) == -1);
    b = make3(&len);
    /* an event longer than the rest */
    b[8 + 16 + 1] = 0x10;
    CHECK(event_bundle_count(b, len) == -1);
    b = make3(&len);
    b[0] = 'X';
    CHECK(!event_bundle_is(b, len) && event_bundle_count(b, len) == -1);
}

/* A bundle does not read as an ABI CloudEvent, nor an event as a
 * bundle. */
static void
test_not_an_event(void)
{
    struct ipc_fb_builder eb;
    struct ipc_cloudevent ce, got;
    struct ipc_fb_error e;
    size_t len;
    uint8_t *b = make3(&len);

    CHECK(ipc_cloudevent_read(b, len, &got, &e) != 0);
    memset(&ce, 0, sizeof ce);
    ce.id = ipc_str_c("1");
    ce.type = ipc_str_c("t");
    ce.source = ipc_str_c("/s");
    ce.specversion = ipc_str_c("1.0");
    ipc_fb_builder_init(&eb);
    REQUIRE(ipc_cloudevent_encode(&eb, &ce) == 0);
    CHECK(!event_bundle_is(eb.buf, eb.len));
    ipc_fb_builder_free(&eb);
}

int
main(void)
{
    RUN(test_round_trip);
    RUN(test_malformed);
    RUN(test_not_an_event);
    return check_result();
}
