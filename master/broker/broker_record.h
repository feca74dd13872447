/*
 * broker_record.h — the byte codec of the embedded broker's journal
 * records (broker_embedded.c describes the records): a growing write
 * buffer and a bounded reader of little-endian integers and u16-length
 * strings.  Private to broker_embedded.c; header-only so that the codec
 * stays out of that file's length without a library of its own.
 *
 * Invariants: a wbuf that ran out of memory stays `oom` and takes nothing
 * more; an rbuf that read past its end, or a bad string, stays `bad` and
 * yields zeros and NULLs.
 */
#ifndef WM_MASTER_BROKER_RECORD_H
#define WM_MASTER_BROKER_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct wbuf {
    uint8_t *p;
    size_t len, cap;
    bool oom;
};

static inline void
wb_put(struct wbuf *w, const void *data, size_t n)
{
    if (w->oom)
        return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n)
            cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (p == NULL) {
            w->oom = true;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->len, data, n);
    w->len += n;
}

/* An unsigned integer of `bytes` bytes, little-endian. */
static inline void
wb_uint(struct wbuf *w, uint64_t v, unsigned bytes)
{
    uint8_t b[8];
    for (unsigned i = 0; i < bytes; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    wb_put(w, b, bytes);
}

static inline void
wb_str(struct wbuf *w, const char *s)
{
    size_t n = strlen(s);
    wb_uint(w, n, 2);
    wb_put(w, s, n);
}

struct rbuf {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};

static inline const uint8_t *
rb_take(struct rbuf *r, size_t n)
{
    if (r->bad || r->len - r->off < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}

static inline uint64_t
rb_uint(struct rbuf *r, unsigned bytes)
{
    const uint8_t *p = rb_take(r, bytes);
    uint64_t v = 0;
    for (unsigned i = 0; p && i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A str as a NUL-terminated copy into buf (names, tenants and topics are
 * short); false when it does not fit or the record is short. */
static inline bool
rb_str(struct rbuf *r, char *buf, size_t buflen)
{
    size_t n = (size_t)rb_uint(r, 2);
    const uint8_t *p = rb_take(r, n);
    if (p == NULL || n >= buflen || memchr(p, '\0', n)) {
        r->bad = true;
        return false;
    }
    memcpy(buf, p, n);
    buf[n] = '\0';
    return true;
}

#endif /* WM_MASTER_BROKER_RECORD_H */
