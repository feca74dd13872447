/*
 * events_json.c — the compact JSON writer of the master's edges:
 * events_json_dumps() and the text of JSON numbers (events.h).
 *
 * JSON data, number extensions and the API's event answers are written
 * here rather than by json_dumps(): jansson prints reals with 17
 * significant digits (19.99 becomes 19.989999999999998), which a worker
 * reading the bytes as a decimal would take literally.  We print the
 * shortest digits that read back as the same double, as Python's repr()
 * does; strings keep their UTF-8 as it is, members their order.
 *
 * Invariants: the writer never fails half-way silently (a failed append
 * marks the buffer failed and the dump returns NULL), and stops at
 * DUMP_MAX_DEPTH levels, so a hand-built cycle ends too.
 */
#include "config.h"

#include "master/api/events.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* jansson's parser stops at this depth (JSON_PARSER_MAX_DEPTH); no value it
 * parsed is deeper, and a hand-built cycle stops here too. */
#define DUMP_MAX_DEPTH 2048

struct wbuf {
    char *p;
    size_t len;
    size_t cap;
    bool failed;
};

/* Room for n more bytes and the NUL; false (and the buffer failed) when
 * out of memory. */
static bool
w_reserve(struct wbuf *w, size_t n)
{
    if (w->cap - w->len < n + 1) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap - w->len < n + 1) {
            if (cap > SIZE_MAX / 2) {
                w->failed = true;
                return false;
            }
            cap *= 2;
        }
        char *p = realloc(w->p, cap);
        if (p == NULL) {
            w->failed = true;
            return false;
        }
        w->p = p;
        w->cap = cap;
    }
    return true;
}

static void
w_put(struct wbuf *w, const char *s, size_t n)
{
    if (w->failed || !w_reserve(w, n))
        return;
    memcpy(w->p + w->len, s, n);
    w->len += n;
    w->p[w->len] = '\0';
}

static void
w_str(struct wbuf *w, const char *s)
{
    w_put(w, s, strlen(s));
}

size_t
events_json_quote(const char *s, size_t len, char *out)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;

#define PUT(c)                                                                 \
    do {                                                                       \
        if (out)                                                               \
            out[n] = (c);                                                      \
        n++;                                                                   \
    } while (0)
    PUT('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char e = 0;
        switch (c) {
        case '"':
        case '\\':
            e = (char)c;
            break;
        case '\b':
            e = 'b';
            break;
        case '\f':
            e = 'f';
            break;
        case '\n':
            e = 'n';
            break;
        case '\r':
            e = 'r';
            break;
        case '\t':
            e = 't';
            break;
        default:
            if (c >= 0x20) {
                PUT((char)c);
                continue;
            }
        }
        PUT('\\');
        if (e) {
            PUT(e);
        } else {
            PUT('u');
            PUT('0');
            PUT('0');
            PUT(hex[c >> 4]);
            PUT(hex[c & 15]);
        }
    }
    PUT('"');
#undef PUT
    return n;
}

/* A JSON string: UTF-8 as it is, quotes, backslashes and C0 controls
 * escaped (as jansson does without JSON_ENSURE_ASCII). */
static void
w_quoted(struct wbuf *w, const char *s, size_t len)
{
    size_t n = events_json_quote(s, len, NULL);

    if (w->failed || !w_reserve(w, n))
        return;
    events_json_quote(s, len, w->p + w->len);
    w->len += n;
    w->p[w->len] = '\0';
}

void
events_json_real(double v, char out[EVENTS_JSON_NUMBER_SIZE])
{
    char e[64], digits[24];
    size_t k = 0;
    int exp10;

    if (v == 0) {
        strcpy(out, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    /* 17 significant digits always round-trip an IEEE double. */
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        if (strtod(e, NULL) == v)
            break;
    }
    /* e is [-]d[.ddd]e(+|-)XX; the radix character may be the locale's,
     * so only digits are taken from the mantissa. */
    const char *m = e + (e[0] == '-');
    for (; *m && *m != 'e' && *m != 'E'; m++)
        if (*m >= '0' && *m <= '9' && k < sizeof digits - 1)
            digits[k++] = *m;
    exp10 = *m ? atoi(m + 1) : 0;
    while (k > 1 && digits[k - 1] == '0')
        k--;
    digits[k] = '\0';

    events_json_real_layout(v < 0, digits, k, exp10, out);
}

size_t
events_json_real_layout(bool neg, const char *digits, size_t k, int exp10,
                        char out[EVENTS_JSON_NUMBER_SIZE])
{
    char *o = out;

    if (neg)
        *o++ = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 >= 0) {
            size_t ip = (size_t)exp10 + 1;
            for (size_t i = 0; i < ip; i++)
                *o++ = i < k ? digits[i] : '0';
            *o++ = '.';
            if (k > ip)
                for (size_t i = ip; i < k; i++)
                    *o++ = digits[i];
            else
                *o++ = '0';
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = -1; i > exp10; i--)
                *o++ = '0';
            for (size_t i = 0; i < k; i++)
                *o++ = digits[i];
        }
    } else {
        int a = exp10 < 0 ? -exp10 : exp10;
        *o++ = digits[0];
        if (k > 1) {
            *o++ = '.';
            for (size_t i = 1; i < k; i++)
                *o++ = digits[i];
        }
        *o++ = 'e';
        *o++ = exp10 < 0 ? '-' : '+';
        if (a >= 100)
            *o++ = (char)('0' + a / 100);
        *o++ = (char)('0' + a / 10 % 10);
        *o++ = (char)('0' + a % 10);
    }
    *o = '\0';
    return (size_t)(o - out);
}

void
events_json_integer(json_int_t v, char out[EVENTS_JSON_NUMBER_SIZE])
{
    snprintf(out, EVENTS_JSON_NUMBER_SIZE, "%" JSON_INTEGER_FORMAT, v);
}

static void
w_value(struct wbuf *w, json_t *v, unsigned depth)
{
    char num[EVENTS_JSON_NUMBER_SIZE];

    if (depth > DUMP_MAX_DEPTH) {
        w->failed = true;
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *member;
        bool first = true;
        w_put(w, "{", 1);
        json_object_foreach(v, key, member)
        {
            if (!first)
                w_put(w, ",", 1);
            first = false;
            w_quoted(w, key, strlen(key));
            w_put(w, ":", 1);
            w_value(w, member, depth + 1);
        }
        w_put(w, "}", 1);
        break;
    }
    case JSON_ARRAY:
        w_put(w, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                w_put(w, ",", 1);
            w_value(w, json_array_get(v, i), depth + 1);
        }
        w_put(w, "]", 1);
        break;
    case JSON_STRING:
        w_quoted(w, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        events_json_integer(json_integer_value(v), num);
        w_str(w, num);
        break;
    case JSON_REAL:
        events_json_real(json_real_value(v), num);
        w_str(w, num);
        break;
    case JSON_TRUE:
        w_str(w, "true");
        break;
    case JSON_FALSE:
        w_str(w, "false");
        break;
    case JSON_NULL:
        w_str(w, "null");
        break;
    }
}

char *
events_json_dumps(const json_t *value, size_t *len)
{
    struct wbuf w = { NULL, 0, 0, false };

    /* jansson's iterators take a non-const json_t even to read; nothing
     * below writes to the value. */
    json_t *v = (json_t *)(uintptr_t)value;
    w_value(&w, v, 0);
    if (w.failed) {
        free(w.p);
        return NULL;
    }
    if (len)
        *len = w.len;
    return w.p;
}
