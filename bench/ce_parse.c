/*
 * ce_parse.c — what reading a structured CloudEvent body costs, the
 * scanner (events_scan_body(), master/api/events_scan.c) against the
 * jansson path it replaces on the hot path (json_loadb() then
 * events_batch_from_json(), as master/api/events_http.c did for every
 * body), in ns of CPU per body (the thread's CPU clock: the figure holds
 * on a shared machine) (bench/README.md).
 *
 * Bodies: issue 24's 233-byte event (one event, as published or invoked
 * in structured mode) and a batch of 100 of them (ids 0000..0099).  Each
 * figure is the median of RUNS runs of ITERATIONS bodies; one event
 * bodies reuse one batch, as a warm daemon does.
 *
 * Usage: ce_parse [ITERATIONS [RUNS]]   (defaults 200000 and 7; a batch
 * runs ITERATIONS / 100 bodies)
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

/* The jansson path: a tree, then the events. */
static int
jansson_read(const char *body, size_t len, bool batch, struct events_batch *out)
{
    char err[512];
    json_t *j = json_loadb(body, len, batch ? 0 : JSON_REJECT_DUPLICATES, NULL);
    if (j == NULL)
        return -1;
    json_t *arr = batch ? json_incref(j) : json_pack("[O]", j);
    int rc = events_batch_from_json(arr, out, err, sizeof err);
    json_decref(arr);
    json_decref(j);
    return rc;
}

/* ns per body, the median of runs. */
static double
measure(const char *body, size_t len, bool batch, bool scanner, long iters,
        int runs)
{
    double t[64];
    struct events_batch b;

    events_batch_init(&b);
    for (int r = 0; r < runs; r++) {
        double t0 = cpu_ns();
        for (long i = 0; i < iters; i++) {
            int rc = scanner ? (int)events_scan_body((const uint8_t *)body, len,
                                                     batch ? EVENTS_SCAN_BATCH
                                                           : EVENTS_SCAN_ONE,
                                                     1000, &b)
                             : jansson_read(body, len, batch, &b);
            if (rc != 0) {
                fputs("ce_parse: the body was not read\n", stderr);
                exit(1);
            }
        }
        t[r] = (cpu_ns() - t0) / (double)iters;
    }
    events_batch_free(&b);
    qsort(t, (size_t)runs, sizeof t[0], cmp_double);
    return t[runs / 2];
}

int
main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 200000;
    int runs = argc > 2 ? atoi(argv[2]) : 7;
    size_t one = strlen(ce_event), blen = 0;
    char *batch = ce_batch_body(&blen);

    if (iters < 100 || runs < 1 || runs > 64 || batch == NULL) {
        fputs("usage: ce_parse [ITERATIONS>=100 [RUNS 1..64]]\n", stderr);
        return 2;
    }

    double sj = measure(ce_event, one, false, false, iters, runs);
    double ss = measure(ce_event, one, false, true, iters, runs);
    double bj = measure(batch, blen, true, false, iters / 100, runs);
    double bs = measure(batch, blen, true, true, iters / 100, runs);
    printf("ce_parse: %zu-byte event: jansson %.0f ns, scanner %.0f ns "
           "(%.1fx)\n",
           one, sj, ss, sj / ss);
    printf("ce_parse: 100-event batch (%zu bytes): jansson %.1f us, scanner "
           "%.1f us (%.1fx)\n",
           blen, bj / 1000, bs / 1000, bj / bs);
    free(batch);
    return 0;
}
