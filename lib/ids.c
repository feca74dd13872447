/*
 * ids.c — UUIDv4 strings from getrandom(2) and RFC 3339 UTC timestamps.
 *
 * UUIDs: every call reads 16 fresh bytes from the kernel rather than a
 * buffered pool, so that a forked child or another thread can never hand
 * out an id its parent also hands out; the cost (one syscall, well under a
 * microsecond) is small next to an event's journal write.
 *
 * Timestamps: the civil date comes from Howard Hinnant's days-to-civil
 * algorithm (proleptic Gregorian), so formatting needs no gmtime_r(), no
 * time_t range and no time zone; the digits are written by hand so the
 * width is fixed and the compiler can see no truncation.
 */
#include "config.h"

#include "lib/ids.h"

#include <errno.h>
#include <sys/random.h>
#include <time.h>

#define MS_PER_DAY 86400000LL

static const char hex_digits[] = "0123456789abcdef";

int
ids_uuid_new(char out[IDS_UUID_SIZE])
{
    uint8_t b[16];
    size_t got = 0;

    out[0] = '\0';
    while (got < sizeof b) {
        ssize_t r = getrandom(b + got, sizeof b - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)r;
    }
    /* RFC 9562 §5.4: version 4 in the high nibble of byte 6, variant 10 in
     * the two high bits of byte 8. */
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);

    char *p = out;
    for (unsigned i = 0; i < sizeof b; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *p++ = '-';
        *p++ = hex_digits[b[i] >> 4];
        *p++ = hex_digits[b[i] & 0x0f];
    }
    *p = '\0';
    return 0;
}

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
ids_time_format(int64_t ms, char out[IDS_TIME_SIZE])
{
    out[0] = '\0';
    if (ms < IDS_TIME_MIN_MS || ms > IDS_TIME_MAX_MS)
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
ids_now_ms(void)
{
    struct timespec ts;

    /* CLOCK_REALTIME cannot fail with a valid clock id and pointer. */
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
