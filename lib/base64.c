/*
 * base64.c — strict base64 (see base64.h).
 *
 * Strict on purpose: a payload that decodes two ways (stray characters
 * skipped, non-zero padding bits) would make the stored code differ from
 * what the client meant, and its SHA-256 from what the client computed.
 */
#include "config.h"

#include "lib/base64.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int
value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int
base64_decode_into(const char *in, size_t len, uint8_t *buf, size_t *outlen)
{
    if (len % 4) {
        errno = EINVAL;
        return -1;
    }
    size_t pad = 0;
    if (len >= 1 && in[len - 1] == '=')
        pad++;
    if (len >= 2 && in[len - 2] == '=')
        pad++;
    size_t n = 0;
    for (size_t i = 0; i < len; i += 4) {
        bool last = i + 4 == len;
        int v[4];
        for (int k = 0; k < 4; k++) {
            bool padded = last && k >= 4 - (int)pad;
            v[k] = padded ? 0 : value(in[i + k]);
            if (v[k] < 0 || (!padded && in[i + k] == '='))
                goto bad;
        }
        uint32_t word = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
                        (uint32_t)v[2] << 6 | (uint32_t)v[3];
        buf[n++] = (uint8_t)(word >> 16);
        if (!last || pad < 2)
            buf[n++] = (uint8_t)(word >> 8);
        if (!last || pad < 1)
            buf[n++] = (uint8_t)word;
        /* Padding bits must be zero (canonical encoding). */
        if (last &&
            ((pad == 2 && (word & 0xffff)) || (pad == 1 && (word & 0xff))))
            goto bad;
    }
    *outlen = n;
    return 0;
bad:
    errno = EINVAL;
    return -1;
}

int
base64_decode(const char *in, size_t len, uint8_t **out, size_t *outlen)
{
    uint8_t *buf = malloc(len / 4 * 3 + 1);
    if (buf == NULL) {
        errno = ENOMEM;
        return -1;
    }
    if (base64_decode_into(in, len, buf, outlen) != 0) {
        free(buf);
        return -1;
    }
    *out = buf;
    return 0;
}

size_t
base64_encode_into(const uint8_t *in, size_t len, char *out)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i += 3) {
        uint32_t word = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            word |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            word |= in[i + 2];
        out[n++] = alphabet[word >> 18 & 63];
        out[n++] = alphabet[word >> 12 & 63];
        out[n++] = i + 1 < len ? alphabet[word >> 6 & 63] : '=';
        out[n++] = i + 2 < len ? alphabet[word & 63] : '=';
    }
    return n;
}

char *
base64_encode(const uint8_t *in, size_t len)
{
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (out == NULL)
        return NULL;
    out[base64_encode_into(in, len, out)] = '\0';
    return out;
}
