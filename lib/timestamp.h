/*
 * timestamp.h — RFC 3339 UTC timestamps with milliseconds
 * (`2026-11-22T03:10:38.123Z`, DESIGN §8), part of lib/ (the leaf library:
 * small rules the master, wmctl and the hosts share; it includes nothing of
 * the project but itself).
 *
 * Time is carried as milliseconds since the Unix epoch (int64_t) and turned
 * into text only at the edges; the text form has a fixed width so that it
 * sorts as the instants it names.
 */
#ifndef WM_LIB_TIMESTAMP_H
#define WM_LIB_TIMESTAMP_H

#include <stdint.h>

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" and its NUL. */
#define TIMESTAMP_SIZE 25

/* The instants timestamp_format() can write: 0000-01-01T00:00:00.000Z to
 * 9999-12-31T23:59:59.999Z (RFC 3339 years have four digits). */
#define TIMESTAMP_MIN_MS (-62167219200000LL)
#define TIMESTAMP_MAX_MS 253402300799999LL

/* Writes the instant `ms` (milliseconds since the epoch, UTC) as
 * `YYYY-MM-DDTHH:MM:SS.mmmZ`.  Returns 0, or -1 when ms lies outside
 * [TIMESTAMP_MIN_MS, TIMESTAMP_MAX_MS] (out then holds an empty string).
 * Pure: no time zone, locale or libc time function is consulted. */
int timestamp_format(int64_t ms, char out[TIMESTAMP_SIZE]);

/* The realtime clock in milliseconds since the epoch. */
int64_t timestamp_now_ms(void);

/* Milliseconds of CLOCK_MONOTONIC: for durations, never for dates. */
int64_t timestamp_mono_ms(void);
/* The same in microseconds. */
int64_t timestamp_mono_us(void);

#endif /* WM_LIB_TIMESTAMP_H */
