/*
 * event_bundle.h — several events of one topic in one stored message: the
 * format the `nats` broker stores a published batch in (one JetStream
 * message for up to a chunk's worth of events instead of one each, which
 * is what lets nats-server carry a batch at a few µs per event).
 *
 * Layout, little-endian, every part 8-aligned so that each event, in a
 * buffer that is, is too (the ABI CloudEvent's alignment):
 *
 *   "WMB1"  u32 n (>= 1)
 *   n times: u32 len (>= 1)  u32 0  len bytes  zeros to a multiple of 8
 *
 * and nothing after: one encoding per list of events.  A bundle is told from a
 * single event by its magic: read as an ABI CloudEvent (a FlatBuffer), "WMB1"
 * is a root offset of 826 MB, past any event the daemon accepts.
 *
 * Hand-written (no packaged library has it); event_bundle_count() is the
 * decoder of bytes read back from outside the process, fuzzed by
 * tests/fuzz/fuzz_event_bundle.c.
 */
#ifndef WM_MASTER_BROKER_EVENT_BUNDLE_H
#define WM_MASTER_BROKER_EVENT_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVENT_BUNDLE_MAGIC "WMB1"
#define EVENT_BUNDLE_HEAD 8

/* The bytes one event of len takes in a bundle. */
static inline size_t
event_bundle_record(size_t len)
{
    return 8 + ((len + 7) & ~(size_t)7);
}

/* Writes the head of a bundle of n events at out (EVENT_BUNDLE_HEAD
 * bytes). */
void event_bundle_begin(uint8_t *out, uint32_t n);
/* Writes one event at out + at; returns the offset after it. */
size_t event_bundle_put(uint8_t *out, size_t at, const uint8_t *event,
                        size_t len);

/* Whether buf starts as a bundle does (its magic). */
bool event_bundle_is(const uint8_t *buf, size_t len);
/* The events of the bundle in buf, after checking all of it (the layout
 * above, exactly: its zeros too); -1 when it is not a well-formed
 * bundle. */
long event_bundle_count(const uint8_t *buf, size_t len);

/* Walks a bundle event_bundle_count() accepted. */
struct event_bundle_iter {
    const uint8_t *buf;
    size_t len, at;
};
void event_bundle_iter_init(struct event_bundle_iter *it, const uint8_t *buf,
                            size_t len);
/* The next event (pointing into buf); false after the last. */
bool event_bundle_next(struct event_bundle_iter *it, const uint8_t **event,
                       size_t *len);

#endif /* WM_MASTER_BROKER_EVENT_BUNDLE_H */
