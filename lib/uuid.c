/*
 * uuid.c — version 4 UUIDs (uuid.h).
 *
 * uuid_new() reads 16 fresh bytes from the kernel on every call rather than
 * a buffered pool, so that a forked child or another thread can never hand
 * out an id its parent also hands out; the cost (one syscall, well under a
 * microsecond) is small next to an event's journal write.  A caller that
 * keeps its own pool (and empties it across fork) formats with
 * uuid_from_random().
 */
#include "config.h"

#include "lib/uuid.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "lib/hex.h"

/* The offsets of the dashes in the text form. */
static bool
dash_at(size_t i)
{
    return i == 8 || i == 13 || i == 18 || i == 23;
}

int
uuid_new(char out[UUID_SIZE])
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
    uuid_from_random(b, out);
    return 0;
}

void
uuid_from_random(const uint8_t random[16], char out[UUID_SIZE])
{
    uint8_t b[16];
    char digits[33];

    memcpy(b, random, sizeof b);
    /* RFC 9562 §5.4: version 4 in the high nibble of byte 6, variant 10 in
     * the two high bits of byte 8. */
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    hex_encode(b, sizeof b, digits);
    for (size_t i = 0, k = 0; i < UUID_SIZE - 1; i++)
        out[i] = dash_at(i) ? '-' : digits[k++];
    out[UUID_SIZE - 1] = '\0';
}

bool
uuid_valid(const char *s, size_t len)
{
    if (len != UUID_SIZE - 1)
        return false;
    for (size_t i = 0; i < len; i++)
        if (dash_at(i) ? s[i] != '-' : !hex_lower_valid(s + i, 1))
            return false;
    return true;
}
