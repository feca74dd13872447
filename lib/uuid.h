/*
 * uuid.h — version 4 UUIDs as lowercase text (worker ids, event ids, the
 * daemon's boot id), part of lib/ (the leaf library: small rules the
 * master, wmctl and the hosts share; it includes nothing of the project
 * but itself).
 *
 * UUID_SIZE is the one size of a UUID's text in the tree: every buffer
 * that holds one is char[UUID_SIZE].
 */
#ifndef WM_LIB_UUID_H
#define WM_LIB_UUID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx" and its NUL. */
#define UUID_SIZE 37

/* Writes a new random (version 4, RFC 9562) UUID into out, 16 bytes from
 * getrandom(2) each call (no state: safe across threads and fork).
 * Returns 0, or -1 with errno set when the kernel gave no randomness (out
 * then holds an empty string). */
int uuid_new(char out[UUID_SIZE]);

/* Writes the version 4 UUID made of the 16 bytes `random` (its version and
 * variant bits set over theirs), for callers that draw their randomness in
 * bulk (the Python host).  No system call. */
void uuid_from_random(const uint8_t random[16], char out[UUID_SIZE]);

/* Whether s[0..len) has the text form of a UUID of any version:
 * 8-4-4-4-12 lowercase hex digits. */
bool uuid_valid(const char *s, size_t len);

#endif /* WM_LIB_UUID_H */
