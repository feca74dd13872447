/*
 * timing.h — the clock and the sort of the bench programs' figures
 * (a monotonic clock in ns, a qsort() comparator for medians), header-only
 * so that each program stays one file.
 */
#ifndef WM_BENCH_TIMING_H
#define WM_BENCH_TIMING_H

#include <time.h>

/* CLOCK_MONOTONIC in ns. */
static inline double
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* qsort() order of doubles, ascending. */
static inline int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif /* WM_BENCH_TIMING_H */
