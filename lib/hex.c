/*
 * hex.c — hexadecimal digits (hex.h).
 *
 * Lowercase is the one form the tree writes (blob names, UUIDs, the
 * journal's segment names), so that a name has a single spelling; reading
 * takes either case only where a user may type one (hex_digit_value()).
 */
#include "config.h"

#include "lib/hex.h"

static const char digits[] = "0123456789abcdef";

void
hex_encode(const uint8_t *in, size_t len, char *out)
{
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 0x0f];
    }
    out[2 * len] = '\0';
}

int
hex_digit_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int
hex_decode(const char *in, size_t n, uint8_t *out)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hex_digit_value(in[2 * i]), lo;
        if (hi < 0 || (lo = hex_digit_value(in[2 * i + 1])) < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

bool
hex_lower_valid(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}
