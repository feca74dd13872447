/*
 * events_answer.c — the structured JSON of events written straight from
 * their ABI FlatBuffers (events.h: events_answer_json()), for an invoke's
 * answer in structured or batched mode (events_http.c).
 *
 * What it writes: byte for byte what events_json_dumps() gives for
 * events_to_json() of each event (or a JSON array of them): the attributes
 * present in events.c's order, the extensions events_to_json() keeps (a
 * valid name, not reserved, the first of a repeated name), text with each
 * byte of ill-formed UTF-8 as U+FFFD, and the data as JSON (the scanner's
 * reader, events_scan_json(), normalises it as jansson's load + our dump
 * would), as a string (text/...) or as data_base64.
 *
 * Why this way: building a jansson tree per answer, parsing the data into
 * it and dumping it again cost 7.5 % of an invoke (issue 24, bench/
 * README.md).  Here the attributes are copied once, the data is read once.
 *
 * Invariants:
 * - Anything it cannot write byte-identically (data the scanner leaves to
 *   jansson, more extensions than a verified event holds, out of memory)
 *   returns NULL, and the caller takes the jansson path;
 *   tests/unit/test_events_answer.c and tests/fuzz/fuzz_events_answer.c
 *   hold the two paths to the same bytes.
 * - No allocation per answer once warm: the answer and the scratch buffer
 *   are static and only grow (given back above ANSWER_KEEP_BYTES); no
 *   printf family.  Not reentrant (the master's loop is one thread).
 */
#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/media.h"
#include "lib/name.h"
#include "master/api/events.h"
#include "master/api/events_private.h"

/* Buffers above this are given back at the next answer. */
#define ANSWER_KEEP_BYTES (256 * 1024)

struct abuf {
    char *p;
    size_t len, cap;
};

static struct abuf ans;   /* the answer */
static struct abuf fixed; /* text with its ill-formed UTF-8 replaced */
static struct events_answer_counts counts;

/* Room for n more bytes in b. */
static bool
reserve(struct abuf *b, size_t n)
{
    if (n <= b->cap - b->len)
        return true;
    if (n > SIZE_MAX / 2 - b->len)
        return false;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap - b->len < n)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

static bool
put(const char *s, size_t n)
{
    if (!reserve(&ans, n))
        return false;
    memcpy(ans.p + ans.len, s, n);
    ans.len += n;
    return true;
}

/* `,"name":` (without the comma for the first member). */
static bool
key(const char *name, size_t len, bool *first)
{
    if (!reserve(&ans, len + 4))
        return false;
    if (!*first)
        ans.p[ans.len++] = ',';
    *first = false;
    ans.p[ans.len++] = '"';
    memcpy(ans.p + ans.len, name, len);
    ans.len += len;
    ans.p[ans.len++] = '"';
    ans.p[ans.len++] = ':';
    return true;
}

/* s[0..len), already well-formed, as a JSON string. */
static bool
quoted(const char *s, size_t len)
{
    if (len > (SIZE_MAX - 2) / 6 || !reserve(&ans, 6 * len + 2))
        return false;
    ans.len += events_json_quote(s, len, ans.p + ans.len);
    return true;
}

/* A host's text as a JSON string, as events.c's text_json() shows it. */
static bool
text(const char *s, size_t len)
{
    if (events_utf8_valid((const uint8_t *)s, len))
        return quoted(s, len);
    if (len > SIZE_MAX / 3)
        return false;
    fixed.len = 0;
    if (!reserve(&fixed, 3 * len))
        return false;
    size_t n = events_utf8_fix((const uint8_t *)s, len, fixed.p);
    return quoted(fixed.p, n);
}

/* A name of the structured form that no extension may take. */
static bool
reserved_name(struct ipc_str name)
{
    return events_draft_is_attr(name.ptr, name.len) ||
           ipc_str_eq(name, "data") || ipc_str_eq(name, "data_base64");
}

/* The data member, as events.c's data_json() gives it. */
static bool
data(const struct ipc_cloudevent *ce, bool *first)
{
    struct ipc_bytes d = ce->data;
    struct ipc_str ct = ce->datacontenttype;

    if (media_is_json(ct.ptr, ct.len)) {
        const char *json;
        size_t len;
        switch (events_scan_json(d.ptr, d.len, &json, &len)) {
        case EVENTS_SCAN_OK:
            return key("data", 4, first) && put(json, len);
        case EVENTS_SCAN_FALLBACK:
            return false;
        case EVENTS_SCAN_REJECT:
            break; /* not JSON: base64 */
        }
    } else if (media_is_text(ct.ptr, ct.len) &&
               events_utf8_valid(d.ptr, d.len)) {
        return key("data", 4, first) && quoted((const char *)d.ptr, d.len);
    }
    if (!key("data_base64", 11, first) ||
        !reserve(&ans, ((size_t)d.len + 2) / 3 * 4 + 2))
        return false;
    ans.p[ans.len++] = '"';
    ans.len += base64_encode_into(d.ptr, d.len, ans.p + ans.len);
    ans.p[ans.len++] = '"';
    return true;
}

/* One event's object at the end of the answer. */
static bool
event(const struct ipc_cloudevent *ce)
{
    /* In events.c's order of the context attributes. */
    static const struct {
        const char *name;
        size_t len;
        size_t offset;
    } attrs[] = {
#define A(n) { #n, sizeof #n - 1, offsetof(struct ipc_cloudevent, n) }
        A(specversion),     A(id),         A(source),  A(type),
        A(datacontenttype), A(dataschema), A(subject), A(time),
#undef A
    };
    struct ipc_str kept[EVENTS_MAX_EXTENSIONS];
    size_t nkept = 0;
    bool first = true;

    if (ce->extensions.n > EVENTS_MAX_EXTENSIONS || !put("{", 1))
        return false;
    for (size_t a = 0; a < sizeof attrs / sizeof attrs[0]; a++) {
        const struct ipc_str *v =
            (const struct ipc_str *)(const void *)((const char *)ce +
                                                   attrs[a].offset);
        if (v->ptr &&
            !(key(attrs[a].name, attrs[a].len, &first) && text(v->ptr, v->len)))
            return false;
    }
    for (uint32_t i = 0; i < ce->extensions.n; i++) {
        struct ipc_pair p;
        bool repeated = false;

        ipc_pair_list_get(&ce->extensions, i, &p);
        if (!name_ext_valid(p.name.ptr, p.name.len) || p.value.ptr == NULL ||
            reserved_name(p.name))
            continue;
        for (size_t k = 0; k < nkept && !repeated; k++)
            repeated = kept[k].len == p.name.len &&
                       memcmp(kept[k].ptr, p.name.ptr, p.name.len) == 0;
        if (repeated)
            continue;
        kept[nkept++] = p.name;
        if (!key(p.name.ptr, p.name.len, &first) ||
            !text(p.value.ptr, p.value.len))
            return false;
    }
    if (ce->data.ptr && !data(ce, &first))
        return false;
    return put("}", 1);
}

static void
trim(struct abuf *b)
{
    if (b->cap > ANSWER_KEEP_BYTES) {
        free(b->p);
        b->p = NULL;
        b->cap = 0;
    }
    b->len = 0;
}

const char *
events_answer_json(const struct ipc_cloudevent *evs, size_t n, bool array,
                   size_t *len)
{
    bool ok = array || n == 1;

    trim(&ans);
    trim(&fixed);
    if (ok && array)
        ok = put("[", 1);
    for (size_t i = 0; ok && i < n; i++)
        ok = (i == 0 || put(",", 1)) && event(&evs[i]);
    if (ok && array)
        ok = put("]", 1);
    if (!ok) {
        counts.fallbacks++;
        return NULL;
    }
    counts.written++;
    *len = ans.len;
    return ans.p;
}

void
events_answer_stats(struct events_answer_counts *out)
{
    *out = counts;
}
