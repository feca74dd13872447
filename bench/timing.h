/*
 * timing.h — the clock and the sort of the bench programs' figures
 * (a monotonic clock and a CPU clock in ns, a qsort() comparator for medians),
 * header-only so that each program stays one file.
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

/* This thread's CPU time in ns (CLOCK_THREAD_CPUTIME_ID): what a figure
 * of CPU per operation wants on a shared machine, where the wall clock
 * counts other processes' turns too. */
static inline double
cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
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
