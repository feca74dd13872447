/*
 * fuzz_events_scan.c — libFuzzer target: the CloudEvent scanner
 * (master/api/events_scan.c) against the jansson path, differentially.
 *
 * Every input is a request body, read as a single event and as a batch of
 * at most eight events (so the limit's rule is reached too), by both
 * readers; it aborts when
 * they disagree (events_diff.h: a body one accepts and the other rejects,
 * or other events), besides the sanitizers' findings.  Seeds:
 * tests/fuzz/scan-seeds (the events of the tests, hand-made edge cases)
 * and tests/fuzz/events-seeds.
 *
 * Run: tests/fuzz/fuzz_events_scan -runs=N [corpus dir]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "master/api/events.h"
#include "tests/unit/events_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
run(const uint8_t *data, size_t size, enum events_scan_kind kind, size_t max)
{
    enum events_scan_result v;
    const char *why = events_diff_check(data, size, kind, max, &v);

    if (why) {
        fprintf(stderr, "fuzz_events_scan: %s (%s, max %zu)\n", why,
                kind == EVENTS_SCAN_ONE ? "one event" : "batch", max);
        abort();
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run(data, size, EVENTS_SCAN_ONE, 1);
    run(data, size, EVENTS_SCAN_BATCH, 8);
    return 0;
}
