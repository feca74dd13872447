/*
 * broker_record.c — the byte codec of the embedded broker's journal
 * records (see broker_record.h).
 */
#include "config.h"

#include "master/broker/broker_record.h"

#include <stdlib.h>
#include <string.h>

void
brec_writer_put(struct brec_writer *w, const void *data, size_t n)
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
void
brec_writer_uint(struct brec_writer *w, uint64_t v, unsigned bytes)
{
    uint8_t b[8];
    for (unsigned i = 0; i < bytes; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    brec_writer_put(w, b, bytes);
}

void
brec_writer_str(struct brec_writer *w, const char *s)
{
    size_t n = strlen(s);
    brec_writer_uint(w, n, 2);
    brec_writer_put(w, s, n);
}

const uint8_t *
brec_reader_take(struct brec_reader *r, size_t n)
{
    if (r->bad || r->len - r->off < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}

uint64_t
brec_reader_uint(struct brec_reader *r, unsigned bytes)
{
    const uint8_t *p = brec_reader_take(r, bytes);
    uint64_t v = 0;
    for (unsigned i = 0; p && i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* A str as a NUL-terminated copy into buf (names, tenants and topics are
 * short); false when it does not fit or the record is short. */
bool
brec_reader_str(struct brec_reader *r, char *buf, size_t buflen)
{
    size_t n = (size_t)brec_reader_uint(r, 2);
    const uint8_t *p = brec_reader_take(r, n);
    if (p == NULL || n >= buflen || memchr(p, '\0', n)) {
        r->bad = true;
        return false;
    }
    memcpy(buf, p, n);
    buf[n] = '\0';
    return true;
}
