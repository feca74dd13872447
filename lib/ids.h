/*
 * ids.h — identifiers and timestamps: lowercase UUIDv4 strings (worker ids,
 * event ids) and RFC 3339 UTC timestamps with milliseconds
 * (`2026-11-22T03:10:38.123Z`, DESIGN §8).
 *
 * Time is carried as milliseconds since the Unix epoch (int64_t) and turned
 * into text only at the edges; the text form has a fixed width so that it
 * sorts as the instants it names.
 */
#ifndef WM_MASTER_IDS_H
#define WM_MASTER_IDS_H

#include <stdint.h>

/* "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx" and its NUL. */
#define IDS_UUID_SIZE 37
/* "YYYY-MM-DDTHH:MM:SS.mmmZ" and its NUL. */
#define IDS_TIME_SIZE 25

/* The instants ids_time_format() can write: 0000-01-01T00:00:00.000Z to
 * 9999-12-31T23:59:59.999Z (RFC 3339 years have four digits). */
#define IDS_TIME_MIN_MS (-62167219200000LL)
#define IDS_TIME_MAX_MS 253402300799999LL

/* Writes a new random (version 4, RFC 9562) UUID in lowercase into out,
 * 16 bytes from getrandom(2) each call (no state: safe across threads and
 * fork).  Returns 0, or -1 with errno set when the kernel gave no
 * randomness (out then holds an empty string). */
int ids_uuid_new(char out[IDS_UUID_SIZE]);

/* Writes the instant `ms` (milliseconds since the epoch, UTC) as
 * `YYYY-MM-DDTHH:MM:SS.mmmZ`.  Returns 0, or -1 when ms lies outside
 * [IDS_TIME_MIN_MS, IDS_TIME_MAX_MS] (out then holds an empty string).
 * Pure: no time zone, locale or libc time function is consulted. */
int ids_time_format(int64_t ms, char out[IDS_TIME_SIZE]);

/* The realtime clock in milliseconds since the epoch. */
int64_t ids_now_ms(void);

#endif /* WM_MASTER_IDS_H */
