/*
 * ce_answer.c — what writing an invoke's answer costs, the answer writer
 * (events_answer_json(), master/api/events_answer.c) against the jansson
 * path it replaces (events_to_json() then events_json_dumps(), as
 * master/api/events_http.c wrote every answer), in ns of CPU per answer
 * (the thread's CPU clock: the figure holds on a shared machine)
 * (bench/README.md).
 *
 * Answers: issue 24's 233-byte event as an echo returns it (one event,
 * structured mode) and a batch of 100 of them (ids 0000..0099), decoded
 * from their ABI buffers as the daemon holds a host's outputs.  Each
 * figure is the median of RUNS runs of ITERATIONS answers.
 *
 * Usage: ce_answer [ITERATIONS [RUNS]]   (defaults 200000 and 7; a batch
 * runs ITERATIONS / 100 answers)
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "bench/ce_body.h"
#include "bench/timing.h"
#include "master/api/events.h"

/* The jansson path: a tree, then the dump; returns the length. */
static size_t
jansson_write(const struct ipc_cloudevent *evs, size_t n, bool array)
{
    json_t *j = array ? json_array() : events_to_json(&evs[0]);
    size_t len = 0;

    for (size_t i = 0; array && i < n; i++)
        json_array_append_new(j, events_to_json(&evs[i]));
    char *text = events_json_dumps(j, &len);
    json_decref(j);
    free(text);
    return len;
}

/* ns per answer, the median of runs. */
static double
measure(const struct ipc_cloudevent *evs, size_t n, bool array, bool writer,
        long iters, int runs)
{
    double t[64];

    for (int r = 0; r < runs; r++) {
        double t0 = cpu_ns();
        for (long i = 0; i < iters; i++) {
            size_t len = 0;
            if (writer ? events_answer_json(evs, n, array, &len) == NULL
                       : jansson_write(evs, n, array) == 0) {
                fputs("ce_answer: the answer was not written\n", stderr);
                exit(1);
            }
        }
        t[r] = (cpu_ns() - t0) / (double)iters;
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    return t[runs / 2];
}

int
main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    int runs = argc > 2 ? atoi(argv[2]) : 7;
    size_t one = strlen(ce_event), blen = 0, len;
    char *body = ce_batch_body(&blen);
    struct events_batch b;
    struct ipc_cloudevent evs[100];

    if (iters < 100 || runs < 1 || runs > 64 || body == NULL) {
        fputs("usage: ce_answer [ITERATIONS>=100 [RUNS 1..64]]\n", stderr);
        return 2;
    }
    events_batch_init(&b);
    if (events_scan_body((const uint8_t *)body, blen, EVENTS_SCAN_BATCH, 100,
                         &b) != EVENTS_SCAN_OK ||
        b.n != 100) {
        fputs("ce_answer: the events were not read\n", stderr);
        return 1;
    }
    for (size_t i = 0; i < 100; i++)
        ipc_cloudevent_decode_trusted(events_batch_get(&b, i, &len), &evs[i]);

    double sj = measure(evs, 1, false, false, iters, runs);
    double sw = measure(evs, 1, false, true, iters, runs);
    double bj = measure(evs, 100, true, false, iters / 100, runs);
    double bw = measure(evs, 100, true, true, iters / 100, runs);
    printf("ce_answer: %zu-byte event: jansson %.0f ns, writer %.0f ns "
           "(%.1fx)\n",
           one, sj, sw, sj / sw);
    printf("ce_answer: 100-event batch (%zu bytes): jansson %.1f us, writer "
           "%.1f us (%.1fx)\n",
           blen, bj / 1000, bw / 1000, bj / bw);
    events_batch_free(&b);
    free(body);
    return 0;
}
