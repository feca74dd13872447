/*
 * hex.h — hexadecimal digits: bytes as lowercase hex (SHA-256 names of
 * code blobs, UUIDs) and the value of a digit (percent-encoding, digests a
 * client sends), part of lib/ (the leaf library: small rules the master,
 * wmctl and the hosts share; it includes nothing of the project but
 * itself).
 *
 * Only ASCII counts: no locale is consulted (isxdigit() would).
 */
#ifndef WM_LIB_HEX_H
#define WM_LIB_HEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Writes the len bytes of in as 2 * len lowercase hex digits and a NUL:
 * out holds at least 2 * len + 1 bytes. */
void hex_encode(const uint8_t *in, size_t len, char *out);

/* The value (0 to 15) of the hex digit c, in either case, or -1 when c is
 * not one. */
int hex_digit_value(char c);

/* Decodes the 2 * n hex digits at in (either case) into the n bytes of
 * out.  Returns 0, or -1 at the first character that is no hex digit (a
 * NUL included: a shorter string is refused without being read past its
 * end); out is then partly written. */
int hex_decode(const char *in, size_t n, uint8_t *out);

/* Whether s[0..len) are all lowercase hex digits ([0-9a-f]; true for len
 * 0), the form hex_encode() writes. */
bool hex_lower_valid(const char *s, size_t len);

#endif /* WM_LIB_HEX_H */
