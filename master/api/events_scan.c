/*
 * events_scan.c — structured CloudEvents read straight from the request's
 * bytes into the ABI FlatBuffer (events.h: events_scan_body()).
 *
 * What it does: one pass over the body, a small recursive-descent JSON
 * reader that fills the same struct draft as events_from_json() (so the
 * attribute and extension rules, the defaults and the encoding are the
 * ones of events.c, not a copy) and writes JSON data in the compact form
 * events_json_dumps() would give the jansson tree of the same text.
 *
 * Why this way: building a jansson tree per event, then walking it, then
 * dumping its data again cost more than the rest of the request (issue
 * 24).  Here strings without escapes stay views into the body, escaped
 * ones are decoded once into scratch memory, JSON data is re-emitted in
 * the same pass that checks it.
 *
 * Invariants:
 * - It never accepts what the jansson path rejects, and what it accepts
 *   becomes the same event (the differential unit test and fuzz target
 *   hold it to that).  Where an exact match would need jansson's own
 *   arithmetic (integers past 18 digits, reals past 15 significant digits
 *   or outside 1e-300..1e300) or its duplicate-member semantics (last
 *   wins, in a batch), it returns EVENTS_SCAN_FALLBACK and the caller
 *   takes the jansson path; every error message comes from that path too.
 * - No allocation per event once warm: the scratch buffers live in one
 *   static context and only grow (txt is sized to the body up front, as
 *   decoding never lengthens a string, so views into it stay valid).
 * - No printf/scanf family on the way.
 */
#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/name.h"
#include "master/api/events.h"
#include "master/api/events_private.h"

/* Shapes past these bounds go to the jansson path (which stops at 2048
 * levels): deep enough for any real event, and they keep hostile input
 * cheap (duplicate checks are quadratic in an object's members). */
#define SCAN_MAX_DEPTH 256
#define SCAN_MAX_MEMBERS 256
/* Scratch memory above this is given back after the call. */
#define SCAN_KEEP_BYTES (256 * 1024)

/* An object member's name: a pointer into the body or txt, or (ptr NULL)
 * an offset into out, which may move. */
struct key {
    const char *ptr;
    size_t off;
    size_t len;
};

struct scan {
    const uint8_t *p, *end;
    bool batch;
    /* events_scan_json(): a host's JSON data read as json_loadb() with
     * JSON_DECODE_ANY | JSON_ALLOW_NUL reads it (\u0000 allowed in
     * strings, not in names; a repeated name left to jansson). */
    bool data;
    enum events_scan_result verdict;
    char *txt; /* decoded strings; never moves during a body */
    size_t txt_len, txt_cap;
    char *out; /* JSON data text, decoded base64 */
    size_t out_len, out_cap;
    struct key *keys;
    size_t nkeys, keys_cap;
    struct draft d;
    char err[256];
};

static struct scan ctx;
static struct events_scan_counts counts;

static bool
fail(struct scan *s, enum events_scan_result v)
{
    s->verdict = v;
    return false;
}

static bool
grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap : 64;
    while (n < need) {
        if (n > SIZE_MAX / 2 / size)
            return false;
        n *= 2;
    }
    void *q = realloc(*p, n * size);
    if (q == NULL)
        return false;
    *p = q;
    *cap = n;
    return true;
}

/* Room for n more bytes in out; out of memory is left to the jansson path,
 * which reports it. */
static bool
out_reserve(struct scan *s, size_t n)
{
    if (n > SIZE_MAX - s->out_len ||
        !grow((void **)&s->out, &s->out_cap, s->out_len + n, 1))
        return fail(s, EVENTS_SCAN_FALLBACK);
    return true;
}

static bool
out_put(struct scan *s, const char *p, size_t n)
{
    if (!out_reserve(s, n))
        return false;
    memcpy(s->out + s->out_len, p, n);
    s->out_len += n;
    return true;
}

/* jansson's whitespace. */
static void
ws(struct scan *s)
{
    while (s->p < s->end &&
           (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
}

/* The next byte after whitespace, or -1 at the end. */
static int
peek(struct scan *s)
{
    ws(s);
    return s->p < s->end ? *s->p : -1;
}

static bool
expect(struct scan *s, char c)
{
    if (peek(s) != c)
        return fail(s, EVENTS_SCAN_REJECT);
    s->p++;
    return true;
}

/* After a number or a literal, jansson reads one byte ahead and puts it
 * back; a NUL put back is lost (its stream takes a NUL in its buffer for
 * "empty"), so `1\0,2` reads as `1,2`.  Such a body goes to jansson. */
static bool
lost_nul(struct scan *s)
{
    if (s->p < s->end && *s->p == '\0')
        return !fail(s, EVENTS_SCAN_FALLBACK);
    return false;
}

/* ---- strings --------------------------------------------------------- */

static int
hex4(const uint8_t *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v << 4 | d;
    }
    return v;
}

static size_t
utf8_put(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The code point of the escape \uXXXX[\uXXXX] at p (on the 'u'), as
 * jansson reads it: a surrogate pair combined, a lone surrogate and U+0000
 * (unless nul: JSON_ALLOW_NUL) refused (-1); *used receives the bytes read
 * after the backslash. */
static int32_t
unicode_escape(const uint8_t *p, const uint8_t *end, bool nul, size_t *used)
{
    if (end - p < 5)
        return -1;
    int32_t v = hex4(p + 1);
    *used = 5;
    if (v < 0 || (v == 0 && !nul) || (v >= 0xdc00 && v <= 0xdfff))
        return -1;
    if (v >= 0xd800 && v <= 0xdbff) {
        if (end - p < 11 || p[5] != '\\' || p[6] != 'u')
            return -1;
        int32_t lo = hex4(p + 7);
        if (lo < 0xdc00 || lo > 0xdfff)
            return -1;
        v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
        *used = 11;
    }
    return v;
}

/* The string at s->p (its opening quote), decoded: a view into the body
 * when it has no escape, else its text in txt. */
static bool
string_decode(struct scan *s, const char **v, size_t *vlen)
{
    const uint8_t *p = s->p + 1, *end = s->end, *start = p;
    uint32_t cp;
    size_t n;

    for (;;) {
        if (p == end)
            return fail(s, EVENTS_SCAN_REJECT);
        uint8_t c = *p;
        if (c == '"') {
            *v = (const char *)start;
            *vlen = (size_t)(p - start);
            s->p = p + 1;
            return true;
        }
        if (c == '\\')
            break;
        if (c < 0x20)
            return fail(s, EVENTS_SCAN_REJECT);
        if (c < 0x80) {
            p++;
        } else if ((n = events_utf8_next(p, (size_t)(end - p), &cp)) == 0) {
            return fail(s, EVENTS_SCAN_REJECT);
        } else {
            p += n;
        }
    }
    char *o0 = s->txt + s->txt_len, *o = o0;
    memcpy(o, start, (size_t)(p - start));
    o += p - start;
    for (;;) {
        if (p == end)
            return fail(s, EVENTS_SCAN_REJECT);
        uint8_t c = *p;
        if (c == '"')
            break;
        if (c == '\\') {
            if (end - p < 2)
                return fail(s, EVENTS_SCAN_REJECT);
            char e = 0;
            switch (p[1]) {
            case '"':
            case '\\':
            case '/':
                e = (char)p[1];
                break;
            case 'b':
                e = '\b';
                break;
            case 'f':
                e = '\f';
                break;
            case 'n':
                e = '\n';
                break;
            case 'r':
                e = '\r';
                break;
            case 't':
                e = '\t';
                break;
            case 'u': {
                size_t used;
                int32_t u = unicode_escape(p + 1, end, s->data, &used);
                if (u < 0)
                    return fail(s, EVENTS_SCAN_REJECT);
                o += utf8_put(o, (uint32_t)u);
                p += 1 + used;
                continue;
            }
            default:
                return fail(s, EVENTS_SCAN_REJECT);
            }
            *o++ = e;
            p += 2;
        } else if (c < 0x20) {
            return fail(s, EVENTS_SCAN_REJECT);
        } else if (c < 0x80) {
            *o++ = (char)c;
            p++;
        } else if ((n = events_utf8_next(p, (size_t)(end - p), &cp)) == 0) {
            return fail(s, EVENTS_SCAN_REJECT);
        } else {
            memcpy(o, p, n);
            o += n;
            p += n;
        }
    }
    *v = o0;
    *vlen = (size_t)(o - o0);
    s->txt_len += *vlen;
    s->p = p + 1;
    return true;
}

/* s[0..len) as a JSON string at the end of out. */
static bool
quote_out(struct scan *s, const char *v, size_t len)
{
    size_t n = events_json_quote(v, len, NULL);
    if (!out_reserve(s, n))
        return false;
    events_json_quote(v, len, s->out + s->out_len);
    s->out_len += n;
    return true;
}

/* ---- numbers --------------------------------------------------------- */

static bool
is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* The number at s->p in the text events_json_integer() or
 * events_json_real() gives for the value jansson reads (num, NUL-
 * terminated; its length in *len). */
static bool
number_scan(struct scan *s, char num[EVENTS_JSON_NUMBER_SIZE], size_t *len)
{
    const uint8_t *p = s->p, *end = s->end, *ip, *fp = NULL;
    size_t ni, nf = 0;
    bool neg = false;

    if (p < end && *p == '-') {
        neg = true;
        p++;
    }
    ip = p;
    if (p < end && *p == '0')
        p++;
    else
        while (p < end && is_digit(*p))
            p++;
    ni = (size_t)(p - ip);
    if (ni == 0 || (p < end && *ip == '0' && is_digit(*p)))
        return fail(s, EVENTS_SCAN_REJECT);
    if (p == end || (*p != '.' && *p != 'e' && *p != 'E')) {
        /* An integer: -0 reads as 0; 19 digits may overflow. */
        if (ni > 18)
            return fail(s, EVENTS_SCAN_FALLBACK);
        size_t n = 0;
        if (neg && !(ni == 1 && *ip == '0'))
            num[n++] = '-';
        memcpy(num + n, ip, ni);
        n += ni;
        num[n] = '\0';
        *len = n;
        s->p = p;
        return !lost_nul(s);
    }
    if (*p == '.') {
        fp = ++p;
        while (p < end && is_digit(*p))
            p++;
        nf = (size_t)(p - fp);
        if (nf == 0)
            return fail(s, EVENTS_SCAN_REJECT);
    }
    long e = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        bool eneg = false;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            eneg = *p++ == '-';
        const uint8_t *ep = p;
        while (p < end && is_digit(*p)) {
            if (e > 100000)
                return fail(s, EVENTS_SCAN_FALLBACK);
            e = e * 10 + (*p++ - '0');
        }
        if (p == ep)
            return fail(s, EVENTS_SCAN_REJECT);
        if (eneg)
            e = -e;
    }
    s->p = p;
    if (lost_nul(s))
        return false;

    /* The significant digits of int.frac, and the decimal exponent of the
     * first one. */
    char digits[16];
    size_t k = 0, zeros = 0;
    long first = -1;
    for (size_t i = 0; i < ni + nf; i++) {
        char c = (char)(i < ni ? ip[i] : fp[i - ni]);
        if (first < 0) {
            if (c == '0')
                continue;
            first = (long)i;
        }
        if (c == '0') {
            zeros++;
            continue;
        }
        if (k + zeros >= 15)
            return fail(s, EVENTS_SCAN_FALLBACK);
        for (; zeros; zeros--)
            digits[k++] = '0';
        digits[k++] = c;
    }
    if (first < 0) {
        memcpy(num, neg ? "-0.0" : "0.0", neg ? 5 : 4);
        *len = neg ? 4 : 3;
        return true;
    }
    long x = (long)ni - 1 - first + e;
    if (x < -300 || x > 300)
        return fail(s, EVENTS_SCAN_FALLBACK);
    *len = events_json_real_layout(neg, digits, k, (int)x, num);
    return true;
}

/* ---- JSON values ----------------------------------------------------- */

/* The literal true, false or null at s->p; its text in *lit. */
static bool
literal(struct scan *s, const char **lit, size_t *len)
{
    static const char *const lits[] = { "true", "false", "null" };
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(lits[i]);
        if ((size_t)(s->end - s->p) >= n && memcmp(s->p, lits[i], n) == 0) {
            const uint8_t *after = s->p + n;
            /* jansson reads a run of letters as one word. */
            if (after < s->end && ((*after >= 'a' && *after <= 'z') ||
                                   (*after >= 'A' && *after <= 'Z')))
                break;
            s->p = after;
            *lit = lits[i];
            *len = n;
            return !lost_nul(s);
        }
    }
    return fail(s, EVENTS_SCAN_REJECT);
}

static const char *
key_text(const struct scan *s, const struct key *k)
{
    return k->ptr ? k->ptr : s->out + k->off;
}

/* Records the member name k of the object whose names start at keys[base];
 * a repeated name is a rule broken in a single event and a shape left to
 * jansson in a batch (where the last value wins). */
static bool
key_add(struct scan *s, size_t base, struct key k)
{
    const char *t = key_text(s, &k);

    if (s->nkeys - base >= SCAN_MAX_MEMBERS)
        return fail(s, EVENTS_SCAN_FALLBACK);
    for (size_t i = base; i < s->nkeys; i++)
        if (s->keys[i].len == k.len &&
            memcmp(key_text(s, &s->keys[i]), t, k.len) == 0)
            return fail(s, s->batch || s->data ? EVENTS_SCAN_FALLBACK
                                               : EVENTS_SCAN_REJECT);
    if (!grow((void **)&s->keys, &s->keys_cap, s->nkeys + 1, sizeof *s->keys))
        return fail(s, EVENTS_SCAN_FALLBACK);
    s->keys[s->nkeys++] = k;
    return true;
}

/* Copies the JSON value at s->p into out in events_json_dumps()'s form;
 * depth counts the enclosing objects and arrays. */
static bool
value_json(struct scan *s, unsigned depth)
{
    int c = peek(s);
    const char *v;
    size_t len;

    switch (c) {
    case '{':
    case '[': {
        bool obj = c == '{';
        size_t base = s->nkeys;
        if (depth >= SCAN_MAX_DEPTH)
            return fail(s, EVENTS_SCAN_FALLBACK);
        s->p++;
        if (!out_put(s, obj ? "{" : "[", 1))
            return false;
        if (peek(s) != (obj ? '}' : ']')) {
            for (;;) {
                if (obj) {
                    if (peek(s) != '"')
                        return fail(s, EVENTS_SCAN_REJECT);
                    size_t off = s->out_len;
                    if (!string_decode(s, &v, &len) || !quote_out(s, v, len))
                        return false;
                    struct key k = { NULL, off, s->out_len - off };
                    /* jansson refuses a NUL in a name even under
                     * JSON_ALLOW_NUL. */
                    if (memchr(v, '\0', len))
                        return fail(s, EVENTS_SCAN_REJECT);
                    if (!key_add(s, base, k) || !expect(s, ':') ||
                        !out_put(s, ":", 1))
                        return false;
                }
                if (!value_json(s, depth + 1))
                    return false;
                c = peek(s);
                if (c != ',')
                    break;
                s->p++;
                if (!out_put(s, ",", 1))
                    return false;
            }
        }
        s->nkeys = base;
        if (!expect(s, obj ? '}' : ']'))
            return false;
        return out_put(s, obj ? "}" : "]", 1);
    }
    case '"':
        return string_decode(s, &v, &len) && quote_out(s, v, len);
    case 't':
    case 'f':
    case 'n':
        return literal(s, &v, &len) && out_put(s, v, len);
    default: {
        char num[EVENTS_JSON_NUMBER_SIZE];
        if (c != '-' && !is_digit(c))
            return fail(s, EVENTS_SCAN_REJECT);
        return number_scan(s, num, &len) && out_put(s, num, len);
    }
    }
}

/* ---- one event ------------------------------------------------------- */

enum data_kind { DATA_NONE, DATA_STRING, DATA_JSON };

struct event_data {
    enum data_kind kind;
    const char *str; /* DATA_STRING: the decoded text */
    size_t len;      /* its length, or DATA_JSON's text's */
    size_t off;      /* DATA_JSON: where its text starts in out */
    const char *b64; /* data_base64, when present and not null */
    size_t b64len;
};

/* Whether the member value at s->p is null (then skipped). */
static bool
is_null(struct scan *s)
{
    const char *lit;
    size_t len;
    if (peek(s) != 'n')
        return false;
    return literal(s, &lit, &len);
}

/* The value of member `data`. */
static bool
member_data(struct scan *s, struct event_data *dt)
{
    if (peek(s) == '"') {
        dt->kind = DATA_STRING;
        return string_decode(s, &dt->str, &dt->len);
    }
    if (is_null(s))
        return true;
    if (s->verdict != EVENTS_SCAN_OK)
        return false;
    dt->kind = DATA_JSON;
    dt->off = s->out_len;
    if (!value_json(s, 1))
        return false;
    dt->len = s->out_len - dt->off;
    return true;
}

/* An extension's value (not null): a string as it is, a number or a
 * boolean as its JSON text. */
static bool
member_ext(struct scan *s, const char *name, size_t nlen)
{
    struct draft *d = &s->d;
    const char *v;
    size_t len;
    int c = peek(s);

    if (!name_ext_valid(name, nlen))
        return fail(s, EVENTS_SCAN_REJECT);
    if (c == '"') {
        if (!string_decode(s, &v, &len))
            return false;
    } else if (c == 't' || c == 'f') {
        if (!literal(s, &v, &len))
            return false;
    } else if (c == '-' || is_digit(c)) {
        v = d->num[d->ce.extensions.n];
        if (!number_scan(s, d->num[d->ce.extensions.n], &len))
            return false;
    } else {
        return fail(s, EVENTS_SCAN_REJECT);
    }
    if (events_draft_ext(d, name, nlen, v, len))
        return fail(s, EVENTS_SCAN_REJECT);
    return true;
}

static bool
member(struct scan *s, const char *k, size_t klen, struct event_data *dt)
{
    const char *v;
    size_t len;

    if (klen == 4 && memcmp(k, "data", 4) == 0)
        return member_data(s, dt);
    if (is_null(s))
        return true;
    if (s->verdict != EVENTS_SCAN_OK)
        return false;
    if (klen == 11 && memcmp(k, "data_base64", 11) == 0) {
        if (peek(s) != '"')
            return fail(s, EVENTS_SCAN_REJECT);
        return string_decode(s, &dt->b64, &dt->b64len);
    }
    if (peek(s) == '"') {
        if (!string_decode(s, &v, &len))
            return false;
        int rc = events_draft_attr_named(&s->d, k, klen, v, len);
        if (rc == 0)
            return true;
        if (rc < 0)
            return fail(s, EVENTS_SCAN_REJECT);
        if (events_draft_ext(&s->d, k, klen, v, len))
            return fail(s, EVENTS_SCAN_REJECT);
        return true;
    }
    if (events_draft_is_attr(k, klen))
        return fail(s, EVENTS_SCAN_REJECT); /* an attribute, not a string */
    return member_ext(s, k, klen);
}

/* Sets the draft's data from what the members gave. */
static bool
data_finish(struct scan *s, struct event_data *dt)
{
    struct draft *d = &s->d;

    if (dt->b64) {
        size_t n;
        if (dt->kind != DATA_NONE)
            return fail(s, EVENTS_SCAN_REJECT);
        s->out_len = 0;
        if (!out_reserve(s, dt->b64len / 4 * 3 + 1))
            return false;
        if (base64_decode_into(dt->b64, dt->b64len, (uint8_t *)s->out, &n))
            return fail(s, EVENTS_SCAN_REJECT);
        return events_draft_data(d, s->out, n) == 0 ||
               fail(s, EVENTS_SCAN_REJECT);
    }
    if (dt->kind == DATA_NONE)
        return true;
    bool json = events_draft_data_is_json(d);
    if (dt->kind == DATA_STRING && json) {
        dt->off = s->out_len;
        if (!quote_out(s, dt->str, dt->len))
            return false;
        dt->kind = DATA_JSON;
        dt->len = s->out_len - dt->off;
    }
    if (dt->kind == DATA_JSON && !json)
        return fail(s, EVENTS_SCAN_REJECT);
    const char *p = dt->kind == DATA_JSON ? s->out + dt->off : dt->str;
    return events_draft_data(d, p, dt->len) == 0 || fail(s, EVENTS_SCAN_REJECT);
}

/* The members of the event object at s->p, appended to fb. */
static bool
event_members(struct scan *s, struct ipc_fb_builder *fb)
{
    struct event_data dt = { DATA_NONE, NULL, 0, 0, NULL, 0 };
    const char *k;
    size_t klen;

    if (!expect(s, '{'))
        return false;
    if (peek(s) != '}') {
        for (;;) {
            if (peek(s) != '"')
                return fail(s, EVENTS_SCAN_REJECT);
            if (!string_decode(s, &k, &klen))
                return false;
            struct key key = { k, 0, klen };
            if (!key_add(s, 0, key) || !expect(s, ':') ||
                !member(s, k, klen, &dt))
                return false;
            if (peek(s) != ',')
                break;
            s->p++;
        }
    }
    if (!expect(s, '}') || !data_finish(s, &dt))
        return false;
    if (events_draft_finish(&s->d, fb))
        return fail(s, EVENTS_SCAN_REJECT);
    return true;
}

/* The event object at s->p, appended to fb.  In a batch a member that
 * breaks a rule may be repeated further on, and jansson keeps the last
 * value: the object is read again as plain JSON, and the rejection stands
 * only when no member repeats (else it falls back). */
static bool
event_scan(struct scan *s, struct ipc_fb_builder *fb)
{
    const uint8_t *start = s->p;
    size_t txt_mark = s->txt_len;

    events_draft_init(&s->d, s->err, sizeof s->err);
    s->out_len = 0;
    s->nkeys = 0;
    if (event_members(s, fb))
        return true;
    if (!s->batch || s->verdict != EVENTS_SCAN_REJECT)
        return false;
    s->p = start;
    s->verdict = EVENTS_SCAN_OK;
    s->txt_len = txt_mark;
    s->out_len = 0;
    s->nkeys = 0;
    if (peek(s) != '{' || value_json(s, 0))
        return fail(s, EVENTS_SCAN_REJECT);
    return false;
}

/* ---- bodies ---------------------------------------------------------- */

static bool
offsets_push(struct events_batch *batch, size_t off)
{
    if (!grow((void **)&batch->offsets, &batch->cap, batch->n + 2,
              sizeof *batch->offsets))
        return false;
    batch->offsets[batch->n] = off;
    return true;
}

static bool
body_scan(struct scan *s, enum events_scan_kind kind, size_t max_events,
          struct events_batch *batch)
{
    if (kind == EVENTS_SCAN_ONE) {
        if (!offsets_push(batch, 0))
            return fail(s, EVENTS_SCAN_FALLBACK);
        if (!event_scan(s, &batch->fb))
            return false;
        batch->n = 1;
    } else {
        if (!expect(s, '['))
            return false;
        if (peek(s) != ']') {
            for (;;) {
                if (batch->n == max_events)
                    return fail(s, EVENTS_SCAN_REJECT);
                if (!offsets_push(batch, batch->fb.len))
                    return fail(s, EVENTS_SCAN_FALLBACK);
                if (!event_scan(s, &batch->fb))
                    return false;
                batch->n++;
                if (peek(s) != ',')
                    break;
                s->p++;
            }
        }
        if (!expect(s, ']'))
            return false;
    }
    if (peek(s) != -1)
        return fail(s, EVENTS_SCAN_REJECT);
    if (!offsets_push(batch, batch->fb.len))
        return fail(s, EVENTS_SCAN_FALLBACK);
    return true;
}

/* Gives back scratch memory a large body grew. */
static void
trim(void **p, size_t *cap, size_t size)
{
    if (*cap * size > SCAN_KEEP_BYTES) {
        free(*p);
        *p = NULL;
        *cap = 0;
    }
}

enum events_scan_result
events_scan_body(const uint8_t *body, size_t len, enum events_scan_kind kind,
                 size_t max_events, struct events_batch *batch)
{
    struct scan *s = &ctx;

    ipc_fb_builder_reset(&batch->fb);
    batch->n = 0;
    s->p = body;
    s->end = body + len;
    s->batch = kind == EVENTS_SCAN_BATCH;
    s->verdict = EVENTS_SCAN_OK;
    s->txt_len = 0;
    /* Decoding never lengthens a string: the body's length is enough for
     * every string of it, and txt never moves while views point into it. */
    if (!grow((void **)&s->txt, &s->txt_cap, len + 1, 1))
        fail(s, EVENTS_SCAN_FALLBACK);
    else
        body_scan(s, kind, max_events, batch);
    if (s->verdict != EVENTS_SCAN_OK) {
        ipc_fb_builder_reset(&batch->fb);
        batch->n = 0;
    }
    trim((void **)&s->txt, &s->txt_cap, 1);
    trim((void **)&s->out, &s->out_cap, 1);
    trim((void **)&s->keys, &s->keys_cap, sizeof *s->keys);
    if (s->verdict == EVENTS_SCAN_OK)
        counts.scanned++;
    else if (s->verdict == EVENTS_SCAN_REJECT)
        counts.rejected++;
    else
        counts.fallbacks++;
    return s->verdict;
}

enum events_scan_result
events_scan_json(const uint8_t *json, size_t len, const char **text,
                 size_t *tlen)
{
    struct scan *s = &ctx;

    s->p = json;
    s->end = json + len;
    s->batch = false;
    s->data = true;
    s->verdict = EVENTS_SCAN_OK;
    s->txt_len = 0;
    s->out_len = 0;
    s->nkeys = 0;
    if (!grow((void **)&s->txt, &s->txt_cap, len + 1, 1))
        fail(s, EVENTS_SCAN_FALLBACK);
    else if (value_json(s, 1) && peek(s) != -1)
        fail(s, EVENTS_SCAN_REJECT);
    s->data = false;
    *text = s->out;
    *tlen = s->out_len;
    /* out stays as it is for the caller (events_scan_body() trims it). */
    trim((void **)&s->txt, &s->txt_cap, 1);
    trim((void **)&s->keys, &s->keys_cap, sizeof *s->keys);
    return s->verdict;
}

void
events_scan_stats(struct events_scan_counts *out)
{
    *out = counts;
}
