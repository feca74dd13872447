/*
 * timestamp.c — RFC 3339 UTC timestamps (timestamp.h).
 *
 * The civil date comes from Howard Hinnant's days-to-civil algorithm
 * (proleptic Gregorian), so formatting needs no gmtime_r(), no time_t range
 * and no time zone; the digits are written by hand so the width is fixed
 * and the compiler can see no truncation.
 */
#include "config.h"

#include "lib/timestamp.h"

#include <time.h>

#define MS_PER_DAY 86400000LL

/* Writes v (0 <= v < 10^width) as `width` decimal digits. */
static char *
put_digits(char *p, unsigned v, unsigned width)
{
    for (unsigned i = width; i > 0; i--) {
        p[i - 1] = (char)('0' + v % 10);
        v /= 10;
    }
    return p + width;
}

int
timestamp_format(int64_t ms, char out[TIMESTAMP_SIZE])
{
    out[0] = '\0';
    if (ms < TIMESTAMP_MIN_MS || ms > TIMESTAMP_MAX_MS)
        return -1;

    /* Floor division: instants before 1970 belong to the earlier day. */
    int64_t days = ms / MS_PER_DAY;
    int64_t rem = ms % MS_PER_DAY;
    if (rem < 0) {
        rem += MS_PER_DAY;
        days--;
    }

    /* days-to-civil: eras of 400 years (146097 days) starting on March 1
     * so that the leap day ends the year. */
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t day = doy - (153 * mp + 2) / 5 + 1;
    int64_t month = mp < 10 ? mp + 3 : mp - 9;
    int64_t year = yoe + era * 400 + (month <= 2);

    char *p = out;
    p = put_digits(p, (unsigned)year, 4);
    *p++ = '-';
    p = put_digits(p, (unsigned)month, 2);
    *p++ = '-';
    p = put_digits(p, (unsigned)day, 2);
    *p++ = 'T';
    p = put_digits(p, (unsigned)(rem / 3600000), 2);
    *p++ = ':';
    p = put_digits(p, (unsigned)(rem / 60000 % 60), 2);
    *p++ = ':';
    p = put_digits(p, (unsigned)(rem / 1000 % 60), 2);
    *p++ = '.';
    p = put_digits(p, (unsigned)(rem % 1000), 3);
    *p++ = 'Z';
    *p = '\0';
    return 0;
}

int64_t
timestamp_now_ms(void)
{
    struct timespec ts;

    /* CLOCK_REALTIME cannot fail with a valid clock id and pointer. */
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
timestamp_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
timestamp_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
