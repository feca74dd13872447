/*
 * fuzz_event_bundle.c — libFuzzer target: the decoder of bundles of
 * events (master/broker/event_bundle.c), which reads what the nats broker
 * gets back from JetStream.
 *
 * Every input is checked by event_bundle_count(); one it accepts is
 * walked, each event must lie inside the input, their number must be the
 * count, and writing them again must give the input back byte for byte
 * (the format has one encoding per list of events); it aborts otherwise,
 * besides the sanitizers' findings.  Seeds: tests/fuzz/bundle-seeds.
 *
 * Run: tests/fuzz/fuzz_event_bundle -runs=N [corpus dir]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/broker/event_bundle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fail(const char *why)
{
    fprintf(stderr, "fuzz_event_bundle: %s\n", why);
    abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    long n = event_bundle_count(data, size);
    struct event_bundle_iter it;
    const uint8_t *ev;
    size_t len, at = EVENT_BUNDLE_HEAD;
    long seen = 0;
    uint8_t *out;

    if (n < 0)
        return 0;
    if (n == 0 || (out = malloc(size)) == NULL)
        fail(n == 0 ? "a bundle of no event accepted" : "out of memory");
    event_bundle_begin(out, (uint32_t)n);
    event_bundle_iter_init(&it, data, size);
    while (event_bundle_next(&it, &ev, &len)) {
        if (ev < data || len == 0 || (size_t)(ev - data) + len > size)
            fail("an event outside the input");
        if (at + event_bundle_record(len) > size)
            fail("the events are longer than the input");
        at = event_bundle_put(out, at, ev, len);
        seen++;
    }
    if (seen != n)
        fail("the walk and the count disagree");
    if (at != size || memcmp(out, data, size) != 0)
        fail("written again, the events are not the input");
    free(out);
    return 0;
}
