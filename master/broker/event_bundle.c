/*
 * event_bundle.c — several events in one stored message (event_bundle.h).
 */
#include "config.h"

#include "master/broker/event_bundle.h"

#include <string.h>

static void
put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t
get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

void
event_bundle_begin(uint8_t *out, uint32_t n)
{
    memcpy(out, EVENT_BUNDLE_MAGIC, 4);
    put32(out + 4, n);
}

size_t
event_bundle_put(uint8_t *out, size_t at, const uint8_t *event, size_t len)
{
    size_t rec = event_bundle_record(len);

    put32(out + at, (uint32_t)len);
    put32(out + at + 4, 0);
    memcpy(out + at + 8, event, len);
    memset(out + at + 8 + len, 0, rec - 8 - len);
    return at + rec;
}

bool
event_bundle_is(const uint8_t *buf, size_t len)
{
    return len >= EVENT_BUNDLE_HEAD && memcmp(buf, EVENT_BUNDLE_MAGIC, 4) == 0;
}

long
event_bundle_count(const uint8_t *buf, size_t len)
{
    size_t at = EVENT_BUNDLE_HEAD;
    uint32_t n, seen = 0;

    if (!event_bundle_is(buf, len) || (n = get32(buf + 4)) == 0)
        return -1;
    while (at < len) {
        if (len - at < 8 || seen == n)
            return -1;
        uint32_t ev = get32(buf + at);
        size_t rec = event_bundle_record(ev);
        if (ev == 0 || get32(buf + at + 4) != 0 || rec > len - at)
            return -1;
        for (size_t pad = 8 + ev; pad < rec; pad++)
            if (buf[at + pad] != 0)
                return -1;
        at += rec;
        seen++;
    }
    return seen == n ? (long)n : -1;
}

void
event_bundle_iter_init(struct event_bundle_iter *it, const uint8_t *buf,
                       size_t len)
{
    it->buf = buf;
    it->len = len;
    it->at = EVENT_BUNDLE_HEAD;
}

bool
event_bundle_next(struct event_bundle_iter *it, const uint8_t **event,
                  size_t *len)
{
    if (it->at + 8 > it->len)
        return false;
    *len = get32(it->buf + it->at);
    *event = it->buf + it->at + 8;
    it->at += event_bundle_record(*len);
    return true;
}
