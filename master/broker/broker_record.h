/*
 * broker_record.h — the byte codec of the embedded broker's journal
 * records (broker_embedded.c describes the records): little-endian
 * unsigned integers of 1 to 8 bytes and strings as u16 length | bytes.
 *
 * Writing grows a heap buffer and remembers running out of memory (oom)
 * instead of failing each call, so that a record is built in straight
 * lines and checked once.  Reading never reads past the payload: a short
 * or malformed record sets bad, and every later read returns nothing, so
 * that a replayed record is checked once at its end.  Private to the
 * broker room.
 */
#ifndef WM_MASTER_BROKER_RECORD_H
#define WM_MASTER_BROKER_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A record being written; zero-initialised to start, p freed by the
 * caller (also when oom). */
struct brec_writer {
    uint8_t *p;
    size_t len, cap;
    bool oom;
};

/* Appends n bytes of data (nothing once oom). */
void brec_writer_put(struct brec_writer *w, const void *data, size_t n);
/* Appends v as `bytes` bytes (1–8), little-endian. */
void brec_writer_uint(struct brec_writer *w, uint64_t v, unsigned bytes);
/* Appends s as u16 length | bytes (s shorter than 65536 bytes). */
void brec_writer_str(struct brec_writer *w, const char *s);

/* A record being read: { payload, len, 0, false }. */
struct brec_reader {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};

/* The next n bytes, or NULL (bad set) when fewer are left. */
const uint8_t *brec_reader_take(struct brec_reader *r, size_t n);
/* The next `bytes`-byte little-endian integer; 0 (bad set) when short. */
uint64_t brec_reader_uint(struct brec_reader *r, unsigned bytes);
/* The next str as a NUL-terminated copy into buf; false (bad set) when it
 * does not fit, holds a NUL or the record is short. */
bool brec_reader_str(struct brec_reader *r, char *buf, size_t buflen);

#endif /* WM_MASTER_BROKER_RECORD_H */
