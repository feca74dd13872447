/*
 * base64.h — strict RFC 4648 base64 (standard alphabet, padding required,
 * no whitespace), for code payloads and CloudEvents' data_base64, part of
 * lib/ (the leaf library: small rules the master, wmctl and the hosts
 * share; it includes nothing of the project but itself).
 */
#ifndef WM_LIB_BASE64_H
#define WM_LIB_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Decodes in[0..len) into *out (malloc'd even when empty; the caller
 * frees).  Returns 0, or -1 with errno EINVAL for anything that is not
 * canonical base64, ENOMEM when out of memory. */
int base64_decode(const char *in, size_t len, uint8_t **out, size_t *outlen);

/* As base64_decode(), into buf, which has room for len / 4 * 3 bytes (the
 * most len bytes decode to); allocates nothing.  Returns 0, or -1 with
 * errno EINVAL. */
int base64_decode_into(const char *in, size_t len, uint8_t *buf,
                       size_t *outlen);

/* Encodes in[0..len) into out, which has room for (len + 2) / 3 * 4
 * bytes; returns the length written (not NUL-terminated). */
size_t base64_encode_into(const uint8_t *in, size_t len, char *out);

/* Encodes into a malloc'd NUL-terminated string, or NULL. */
char *base64_encode(const uint8_t *in, size_t len);

#endif /* WM_LIB_BASE64_H */
