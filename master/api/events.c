/*
 * events.c — CloudEvents 1.0 JSON and HTTP binary mode ⇄ the ABI CloudEvent
 * FlatBuffer (events.h has the rules).
 *
 * Every reader fills one `struct draft` (events_private.h): views of the
 * attributes (into the caller's JSON, headers or body, or into scratch
 * memory the reader owns for the call), the extensions in an array, and
 * the text of number and boolean extensions.  events_draft_finish()
 * applies the shared rules (defaults, required attributes, correlationid
 * first) and encodes, so binary mode, the jansson path and the scanner
 * (events_scan.c) cannot drift apart.  The builder is the only copy of
 * JSON-mode text; binary mode first percent-decodes every header into one
 * scratch block.
 *
 * Error messages are ASCII only: text a sender chose (a name, a content
 * type) is quoted with non-printable and non-ASCII bytes as \xHH and cut at
 * QUOTE_MAX bytes, so a message can be put in a JSON reply or a log line as
 * it is and never ends in a broken UTF-8 sequence.
 *
 * JSON data and number extensions are written by the compact writer of
 * events_json.c (events_json_dumps(), events_json_real()), not by
 * json_dumps(): see there why.
 */
#include "config.h"

#include "master/api/events.h"
#include "master/api/events_private.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/errbuf.h"
#include "lib/hex.h"
#include "lib/media.h"
#include "lib/name.h"
#include "lib/uuid.h"

/* Bytes of sender-chosen text quoted in an error message. */
#define QUOTE_MAX 40
/* Enough for any message of this file (two quotes of 4 * QUOTE_MAX). */
#define MSG_SIZE 512

/* ---- attributes ------------------------------------------------------ */

enum attr {
    ATTR_SPECVERSION = 0,
    ATTR_ID,
    ATTR_SOURCE,
    ATTR_TYPE,
    ATTR_DATACONTENTTYPE,
    ATTR_DATASCHEMA,
    ATTR_SUBJECT,
    ATTR_TIME,
    ATTR_COUNT
};

static bool is_specversion(struct ipc_str s);
static bool is_media_type(struct ipc_str s);
static bool is_rfc3339(struct ipc_str s);

/* The context attributes, in the order they are checked and written out.
 * `check`, when set, is the attribute's own rule and `rule` its text. */
static const struct attr_desc {
    const char *name;
    size_t offset; /* of its struct ipc_str in struct ipc_cloudevent */
    bool required;
    bool (*check)(struct ipc_str value);
    const char *rule;
} attrs[ATTR_COUNT] = {
    [ATTR_SPECVERSION] = {
        .name = "specversion",
        .offset = offsetof(struct ipc_cloudevent, specversion),
        .check = is_specversion,
        .rule = "must be \"1.0\"",
    },
    [ATTR_ID] = {
        .name = "id",
        .offset = offsetof(struct ipc_cloudevent, id),
    },
    [ATTR_SOURCE] = {
        .name = "source",
        .offset = offsetof(struct ipc_cloudevent, source),
        .required = true,
    },
    [ATTR_TYPE] = {
        .name = "type",
        .offset = offsetof(struct ipc_cloudevent, type),
        .required = true,
    },
    [ATTR_DATACONTENTTYPE] = {
        .name = "datacontenttype",
        .offset = offsetof(struct ipc_cloudevent, datacontenttype),
        .check = is_media_type,
        .rule = "is not a media type (type/subtype[;parameters])",
    },
    [ATTR_DATASCHEMA] = {
        .name = "dataschema",
        .offset = offsetof(struct ipc_cloudevent, dataschema),
    },
    [ATTR_SUBJECT] = {
        .name = "subject",
        .offset = offsetof(struct ipc_cloudevent, subject),
    },
    [ATTR_TIME] = {
        .name = "time",
        .offset = offsetof(struct ipc_cloudevent, time),
        .check = is_rfc3339,
        .rule = "is not an RFC 3339 date-time "
                "(YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM))",
    },
};

static struct ipc_str *
attr_slot(struct ipc_cloudevent *ce, enum attr a)
{
    return (struct ipc_str *)(void *)((char *)ce + attrs[a].offset);
}

static struct ipc_str
attr_value(const struct ipc_cloudevent *ce, enum attr a)
{
    return *(const struct ipc_str *)(const void *)((const char *)ce +
                                                   attrs[a].offset);
}

/* The attribute called name[0..len), or ATTR_COUNT. */
static enum attr
attr_find(const char *name, size_t len)
{
    for (unsigned a = 0; a < ATTR_COUNT; a++)
        if (strlen(attrs[a].name) == len &&
            memcmp(attrs[a].name, name, len) == 0)
            return (enum attr)a;
    return ATTR_COUNT;
}

/* ---- text rules ------------------------------------------------------ */

/* Decodes the UTF-8 sequence at s[0..len) (len > 0) into *cp; returns its
 * length, or 0 when it is not well-formed (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
size_t
events_utf8_next(const uint8_t *s, size_t len, uint32_t *cp)
{
    uint8_t c = s[0];
    size_t n;
    uint32_t v, min;

    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        v = c & 0x1f;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        v = c & 0x0f;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        v = c & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (len < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}

bool
events_utf8_valid(const uint8_t *s, size_t len)
{
    uint32_t cp;
    for (size_t i = 0; i < len;) {
        size_t n = events_utf8_next(s + i, len - i, &cp);
        if (n == 0)
            return false;
        i += n;
    }
    return true;
}

size_t
events_utf8_fix(const uint8_t *s, size_t len, char *out)
{
    size_t n = 0;
    uint32_t cp;

    for (size_t i = 0; i < len;) {
        size_t k = events_utf8_next(s + i, len - i, &cp);
        if (k == 0) {
            memcpy(out + n, "\xef\xbf\xbd", 3);
            n += 3;
            i++;
        } else {
            memcpy(out + n, s + i, k);
            n += k;
            i += k;
        }
    }
    return n;
}

enum text_fault {
    TEXT_OK = 0,
    TEXT_NOT_UTF8,
    TEXT_CONTROL,
};

/* CloudEvents 1.0 (Type System, String): no U+0000-U+001F, U+007F-U+009F. */
static enum text_fault
text_check(const char *p, size_t len)
{
    const uint8_t *s = (const uint8_t *)p;
    uint32_t cp;

    for (size_t i = 0; i < len;) {
        size_t n = events_utf8_next(s + i, len - i, &cp);
        if (n == 0)
            return TEXT_NOT_UTF8;
        if (cp <= 0x1f || (cp >= 0x7f && cp <= 0x9f))
            return TEXT_CONTROL;
        i += n;
    }
    return TEXT_OK;
}

static const char *
text_fault_rule(enum text_fault f)
{
    return f == TEXT_NOT_UTF8 ? "is not valid UTF-8"
                              : "contains a control character";
}

static bool
is_specversion(struct ipc_str s)
{
    return ipc_str_eq(s, "1.0");
}

static bool
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* RFC 7230 tchar, the characters of a media type's type and subtype. */
static bool
is_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* type "/" subtype, then optional whitespace and ";" parameters (which are
 * not checked: a sender's parameters are its own business). */
static bool
is_media_type(struct ipc_str s)
{
    size_t i = 0, start;

    for (start = i; i < s.len && is_tchar(s.ptr[i]); i++)
        ;
    if (i == start || i == s.len || s.ptr[i] != '/')
        return false;
    for (start = ++i; i < s.len && is_tchar(s.ptr[i]); i++)
        ;
    if (i == start)
        return false;
    while (i < s.len && (s.ptr[i] == ' ' || s.ptr[i] == '\t'))
        i++;
    return i == s.len || s.ptr[i] == ';';
}

/* Reads n digits at p into *v. */
static bool
read_digits(const char *p, unsigned n, unsigned *v)
{
    *v = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!is_digit(p[i]))
            return false;
        *v = *v * 10 + (unsigned)(p[i] - '0');
    }
    return true;
}

/* RFC 3339 date-time, loosely: the shape and the fields' ranges (a leap
 * second allowed, days per month not checked). */
static bool
is_rfc3339(struct ipc_str s)
{
    const char *p = s.ptr, *end = s.ptr + s.len;
    unsigned year, mon, day, hour, min, sec, oh, om;

    /* "YYYY-MM-DDTHH:MM:SS" and at least "Z". */
    if (s.len < 20)
        return false;
    if (!read_digits(p, 4, &year) || p[4] != '-' ||
        !read_digits(p + 5, 2, &mon) || p[7] != '-' ||
        !read_digits(p + 8, 2, &day) || (p[10] != 'T' && p[10] != 't') ||
        !read_digits(p + 11, 2, &hour) || p[13] != ':' ||
        !read_digits(p + 14, 2, &min) || p[16] != ':' ||
        !read_digits(p + 17, 2, &sec))
        return false;
    if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 ||
        sec > 60)
        return false;
    p += 19;
    if (*p == '.') {
        const char *frac = ++p;
        while (p < end && is_digit(*p))
            p++;
        if (p == frac)
            return false;
    }
    if (p == end)
        return false;
    if (*p == 'Z' || *p == 'z')
        return p + 1 == end;
    if ((*p != '+' && *p != '-') || end - p != 6 ||
        !read_digits(p + 1, 2, &oh) || p[3] != ':' ||
        !read_digits(p + 4, 2, &om))
        return false;
    return oh <= 23 && om <= 59;
}

enum media_kind {
    MEDIA_JSON, /* absent, application/json, type/...+json */
    MEDIA_TEXT, /* text/... */
    MEDIA_OTHER,
};

/* How data of content type ct is represented in JSON. */
static enum media_kind
media_kind(struct ipc_str ct)
{
    if (media_is_json(ct.ptr, ct.len))
        return MEDIA_JSON;
    if (media_is_text(ct.ptr, ct.len))
        return MEDIA_TEXT;
    return MEDIA_OTHER;
}

/* ---- errors ---------------------------------------------------------- */

/* Quotes sender-chosen text for a message: "..." with bytes outside
 * printable ASCII, '"' and '\' as \xHH, cut after QUOTE_MAX bytes. */
static const char *
quote(char out[4 * QUOTE_MAX + 8], const char *s, size_t len)
{
    char *o = out;

    *o++ = '"';
    for (size_t i = 0; i < len && i < QUOTE_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') {
            snprintf(o, 5, "\\x%02x", c);
            o += 4;
        } else {
            *o++ = (char)c;
        }
    }
    *o++ = '"';
    if (len > QUOTE_MAX) {
        memcpy(o, "...", 3);
        o += 3;
    }
    *o = '\0';
    return out;
}

static const char *
json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
    default:
        return "null";
    }
}

/* ---- the draft shared by every reader -------------------------------- */

void
events_draft_init(struct draft *d, char *err, size_t errlen)
{
    memset(&d->ce, 0, sizeof d->ce);
    d->ce.extensions.items = d->ext;
    d->err = err;
    d->errlen = errlen;
    d->binary = false;
}

/* Sets attribute a to v[0..len) after its rules. */
static int
draft_attr(struct draft *d, enum attr a, const char *v, size_t len)
{
    const char *name = attrs[a].name;
    struct ipc_str *slot = attr_slot(&d->ce, a);
    struct ipc_str s = { v, (uint32_t)len };
    enum text_fault f;

    if (slot->ptr) {
        errbuf_set(d->err, d->errlen, "attribute \"%s\" given twice", name);
        return -1;
    }
    if (len == 0) {
        errbuf_set(d->err, d->errlen, "attribute \"%s\" must not be empty",
                   name);
        return -1;
    }
    if (len > UINT32_MAX) {
        errbuf_set(d->err, d->errlen, "attribute \"%s\" is too long", name);
        return -1;
    }
    if ((f = text_check(v, len)) != TEXT_OK) {
        errbuf_set(d->err, d->errlen, "attribute \"%s\" %s", name,
                   text_fault_rule(f));
        return -1;
    }
    if (attrs[a].check && !attrs[a].check(s)) {
        errbuf_set(d->err, d->errlen, "attribute \"%s\" %s", name,
                   attrs[a].rule);
        return -1;
    }
    *slot = s;
    return 0;
}

static int
draft_required(struct draft *d)
{
    for (unsigned a = 0; a < ATTR_COUNT; a++)
        if (attrs[a].required && attr_slot(&d->ce, a)->ptr == NULL) {
            errbuf_set(d->err, d->errlen, "attribute \"%s\" is required",
                       attrs[a].name);
            return -1;
        }
    return 0;
}

int
events_draft_attr_named(struct draft *d, const char *name, size_t nlen,
                        const char *v, size_t len)
{
    enum attr a = attr_find(name, nlen);
    return a == ATTR_COUNT ? 1 : draft_attr(d, a, v, len);
}

bool
events_draft_is_attr(const char *name, size_t nlen)
{
    return attr_find(name, nlen) != ATTR_COUNT;
}

bool
events_draft_data_is_json(const struct draft *d)
{
    return media_kind(d->ce.datacontenttype) == MEDIA_JSON;
}

/* Appends extension name[0..nlen) = value[0..vlen) (value already in its
 * text form, living as long as the draft). */
int
events_draft_ext(struct draft *d, const char *name, size_t nlen,
                 const char *value, size_t vlen)
{
    char q[4 * QUOTE_MAX + 8];
    enum text_fault f;
    uint32_t n = d->ce.extensions.n;

    if (!name_ext_valid(name, nlen)) {
        errbuf_set(d->err, d->errlen, "extension name %s is not " NAME_EXT_RULE,
                   quote(q, name, nlen));
        return -1;
    }
    for (uint32_t i = 0; i < n; i++)
        if (d->ext[i].name.len == nlen &&
            memcmp(d->ext[i].name.ptr, name, nlen) == 0) {
            errbuf_set(d->err, d->errlen, "extension \"%.*s\" given twice",
                       (int)nlen, name);
            return -1;
        }
    if (n == EVENTS_MAX_EXTENSIONS) {
        errbuf_set(d->err, d->errlen, "more than %d extensions",
                   EVENTS_MAX_EXTENSIONS);
        return -1;
    }
    if (vlen > UINT32_MAX) {
        errbuf_set(d->err, d->errlen, "extension \"%.*s\" is too long",
                   (int)nlen, name);
        return -1;
    }
    if ((f = text_check(value, vlen)) != TEXT_OK) {
        errbuf_set(d->err, d->errlen, "extension \"%.*s\" %s", (int)nlen, name,
                   text_fault_rule(f));
        return -1;
    }
    d->ext[n].name.ptr = name;
    d->ext[n].name.len = (uint32_t)nlen;
    d->ext[n].value.ptr = value;
    d->ext[n].value.len = (uint32_t)vlen;
    d->ce.extensions.n = n + 1;
    return 0;
}

/* Sets the data to p[0..len), which lives as long as the draft. */
int
events_draft_data(struct draft *d, const void *p, size_t len)
{
    /* A FlatBuffer holds at most 2 GiB; the HTTP cap is far below. */
    if (len > INT32_MAX) {
        errbuf_set(d->err, d->errlen, "data larger than 2 GiB");
        return -1;
    }
    d->ce.data.ptr = p;
    d->ce.data.len = (uint32_t)len;
    return 0;
}

/* Fills in the defaults, puts correlationid first and appends the buffer to
 * out.  Returns 0, or -1 with the message. */
int
events_draft_finish(struct draft *d, struct ipc_fb_builder *out)
{
    struct ipc_cloudevent *ce = &d->ce;

    if (draft_required(d))
        return -1;
    if (d->binary && (ce->specversion.ptr == NULL || ce->id.ptr == NULL)) {
        const char *name = ce->specversion.ptr ? "id" : "specversion";
        errbuf_set(d->err, d->errlen,
                   "attribute \"%s\" is required: binary mode sends it in "
                   "the header ce-%s",
                   name, name);
        return -1;
    }
    if (ce->specversion.ptr == NULL)
        ce->specversion = ipc_str_c("1.0");
    if (ce->id.ptr == NULL) {
        if (uuid_new(d->id)) {
            errbuf_set(d->err, d->errlen, "cannot make an event id: %s",
                       strerror(errno));
            return -1;
        }
        ce->id = ipc_str_c(d->id);
    }
    /* The original ABI's convention (DESIGN §4): correlationid is the first
     * extension.  Rotating keeps the others in their order. */
    for (uint32_t i = 1; i < ce->extensions.n; i++)
        if (ipc_str_eq(d->ext[i].name, "correlationid")) {
            struct ipc_pair c = d->ext[i];
            memmove(&d->ext[1], &d->ext[0], i * sizeof d->ext[0]);
            d->ext[0] = c;
            break;
        }
    if (ipc_cloudevent_encode(out, ce)) {
        errbuf_set(d->err, d->errlen,
                   "out of memory (or the event exceeds 2 GiB)");
        return -1;
    }
    return 0;
}

/* ---- structured mode ------------------------------------------------- */

/* Fills the data of an event from `data` / `data_base64`; *owned receives
 * memory to free once the buffer is built. */
static int
json_data(struct draft *d, json_t *obj, void **owned)
{
    json_t *data = json_object_get(obj, "data");
    json_t *b64 = json_object_get(obj, "data_base64");
    char q[4 * QUOTE_MAX + 8];

    if (json_is_null(data))
        data = NULL;
    if (json_is_null(b64))
        b64 = NULL;
    if (data && b64) {
        errbuf_set(d->err, d->errlen,
                   "data and data_base64 cannot both be present");
        return -1;
    }
    if (b64) {
        size_t n;
        uint8_t *bytes;
        if (!json_is_string(b64)) {
            errbuf_set(d->err, d->errlen,
                       "data_base64 must be a string, not %s",
                       json_type_name(b64));
            return -1;
        }
        if (base64_decode(json_string_value(b64), json_string_length(b64),
                          &bytes, &n) != 0) {
            errbuf_set(d->err, d->errlen, "%s",
                       errno == ENOMEM ? "out of memory"
                                       : "data_base64 is not valid base64");
            return -1;
        }
        *owned = bytes;
        return events_draft_data(d, bytes, n);
    }
    if (data == NULL)
        return 0;
    if (media_kind(d->ce.datacontenttype) == MEDIA_JSON) {
        size_t n;
        char *text = events_json_dumps(data, &n);
        if (text == NULL) {
            errbuf_set(d->err, d->errlen, "out of memory");
            return -1;
        }
        *owned = text;
        return events_draft_data(d, text, n);
    }
    if (!json_is_string(data)) {
        struct ipc_str ct = d->ce.datacontenttype;
        errbuf_set(d->err, d->errlen,
                   "data must be a string when datacontenttype is %s, not %s",
                   quote(q, ct.ptr, ct.len), json_type_name(data));
        return -1;
    }
    return events_draft_data(d, json_string_value(data),
                             json_string_length(data));
}

/* Adds member key = v as an extension (null: none); the text of a number
 * or boolean is kept in d->num. */
static int
json_ext(struct draft *d, const char *key, json_t *v)
{
    size_t klen = strlen(key);
    char *num = d->num[d->ce.extensions.n];
    char q[4 * QUOTE_MAX + 8];

    if (json_is_null(v))
        return 0;
    if (!name_ext_valid(key, klen)) {
        errbuf_set(d->err, d->errlen, "extension name %s is not " NAME_EXT_RULE,
                   quote(q, key, klen));
        return -1;
    }
    switch (json_typeof(v)) {
    case JSON_STRING:
        return events_draft_ext(d, key, klen, json_string_value(v),
                                json_string_length(v));
    case JSON_INTEGER:
        events_json_integer(json_integer_value(v), num);
        break;
    case JSON_REAL:
        events_json_real(json_real_value(v), num);
        break;
    case JSON_TRUE:
        strcpy(num, "true");
        break;
    case JSON_FALSE:
        strcpy(num, "false");
        break;
    default:
        errbuf_set(d->err, d->errlen,
                   "extension \"%s\" must be a string, number or boolean, "
                   "not %s",
                   key, json_type_name(v));
        return -1;
    }
    return events_draft_ext(d, key, klen, num, strlen(num));
}

/* Converts one structured event, appending its buffer to out. */
static int
convert_json(json_t *obj, struct ipc_fb_builder *out, char *err, size_t errlen)
{
    struct draft *d = malloc(sizeof *d);
    void *owned = NULL;
    const char *key;
    json_t *v;
    int rc = -1;

    if (d == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return -1;
    }
    events_draft_init(d, err, errlen);
    if (!json_is_object(obj)) {
        errbuf_set(err, errlen, "a CloudEvent must be a JSON object, not %s",
                   obj ? json_type_name(obj) : "nothing");
        goto done;
    }
    for (unsigned a = 0; a < ATTR_COUNT; a++) {
        v = json_object_get(obj, attrs[a].name);
        if (v == NULL || json_is_null(v))
            continue;
        if (!json_is_string(v)) {
            errbuf_set(err, errlen, "attribute \"%s\" must be a string, not %s",
                       attrs[a].name, json_type_name(v));
            goto done;
        }
        if (draft_attr(d, (enum attr)a, json_string_value(v),
                       json_string_length(v)))
            goto done;
    }
    if (draft_required(d) || json_data(d, obj, &owned))
        goto done;
    json_object_foreach(obj, key, v)
    {
        size_t klen = strlen(key);
        if (attr_find(key, klen) != ATTR_COUNT || strcmp(key, "data") == 0 ||
            strcmp(key, "data_base64") == 0)
            continue;
        if (json_ext(d, key, v))
            goto done;
    }
    rc = events_draft_finish(d, out);
done:
    free(owned);
    free(d);
    return rc;
}

int
events_from_json(json_t *obj, struct ipc_fb_builder *out, char *err,
                 size_t errlen)
{
    ipc_fb_builder_reset(out);
    if (convert_json(obj, out, err, errlen)) {
        ipc_fb_builder_reset(out);
        return -1;
    }
    return 0;
}

/* ---- binary mode ----------------------------------------------------- */

/* Percent-decodes s into out (room for strlen(s) bytes); returns the
 * length.  A '%' not followed by two hex digits stays as it is (senders of
 * the 1.0 binding did not encode). */
static size_t
percent_decode(const char *s, char *out)
{
    size_t n = 0;

    for (size_t i = 0; s[i]; i++) {
        int hi, lo;
        if (s[i] == '%' && (hi = hex_digit_value(s[i + 1])) >= 0 &&
            (lo = hex_digit_value(s[i + 2])) >= 0) {
            out[n++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[n++] = s[i];
        }
    }
    return n;
}

int
events_from_binary(const char *const *names, const char *const *values,
                   size_t n, const uint8_t *body, size_t len,
                   struct ipc_fb_builder *out, char *err, size_t errlen)
{
    struct draft *d = malloc(sizeof *d);
    char *scratch = NULL;
    size_t total = 0, used = 0;
    int rc = -1;

    ipc_fb_builder_reset(out);
    if (d == NULL) {
        errbuf_set(err, errlen, "out of memory");
        return -1;
    }
    events_draft_init(d, err, errlen);
    d->binary = true;
    /* One block for every decoded value: decoding never lengthens. */
    for (size_t i = 0; i < n; i++)
        total += strlen(values[i]);
    if ((scratch = malloc(total + 1)) == NULL) {
        errbuf_set(err, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name = names[i];
        size_t nlen = strlen(name);
        enum attr a;

        if (strcmp(name, "content-type") == 0) {
            if (draft_attr(d, ATTR_DATACONTENTTYPE, values[i],
                           strlen(values[i])))
                goto done;
            continue;
        }
        if (strcmp(name, "datacontenttype") == 0) {
            errbuf_set(err, errlen,
                       "header ce-datacontenttype is not allowed:"
                       " Content-Type carries datacontenttype");
            goto done;
        }
        if (strcmp(name, "data") == 0) {
            errbuf_set(err, errlen,
                       "header ce-data is not allowed: the body carries data");
            goto done;
        }
        char *v = scratch + used;
        size_t vlen = percent_decode(values[i], v);
        used += vlen;
        if ((a = attr_find(name, nlen)) != ATTR_COUNT) {
            if (draft_attr(d, a, v, vlen))
                goto done;
        } else if (events_draft_ext(d, name, nlen, v, vlen)) {
            goto done;
        }
    }
    if (len > 0 && events_draft_data(d, body, len))
        goto done;
    rc = events_draft_finish(d, out);
done:
    if (rc)
        ipc_fb_builder_reset(out);
    free(scratch);
    free(d);
    return rc;
}

/* ---- batches --------------------------------------------------------- */

void
events_batch_init(struct events_batch *batch)
{
    ipc_fb_builder_init(&batch->fb);
    batch->n = 0;
    batch->offsets = NULL;
    batch->cap = 0;
}

void
events_batch_free(struct events_batch *batch)
{
    ipc_fb_builder_free(&batch->fb);
    free(batch->offsets);
    events_batch_init(batch);
}

int
events_batch_from_json(json_t *array, struct events_batch *batch, char *err,
                       size_t errlen)
{
    char msg[MSG_SIZE];
    size_t count;

    ipc_fb_builder_reset(&batch->fb);
    batch->n = 0;
    if (!json_is_array(array)) {
        errbuf_set(err, errlen, "a batch must be a JSON array, not %s",
                   array ? json_type_name(array) : "nothing");
        return -1;
    }
    count = json_array_size(array);
    if (count + 1 > batch->cap) {
        size_t *o = realloc(batch->offsets, (count + 1) * sizeof *o);
        if (o == NULL) {
            errbuf_set(err, errlen, "out of memory");
            return -1;
        }
        batch->offsets = o;
        batch->cap = count + 1;
    }
    for (size_t i = 0; i < count; i++) {
        /* ipc_fb_finish() pads each buffer to 8 bytes, so the next one
         * starts 8-aligned and is a valid buffer on its own. */
        batch->offsets[i] = batch->fb.len;
        if (convert_json(json_array_get(array, i), &batch->fb, msg,
                         sizeof msg)) {
            errbuf_set(err, errlen, "event %zu: %s", i, msg);
            ipc_fb_builder_reset(&batch->fb);
            return -1;
        }
    }
    batch->offsets[count] = batch->fb.len;
    batch->n = count;
    return 0;
}

const uint8_t *
events_batch_get(const struct events_batch *batch, size_t i, size_t *len)
{
    *len = batch->offsets[i + 1] - batch->offsets[i];
    return batch->fb.buf + batch->offsets[i];
}

/* ---- back to JSON ---------------------------------------------------- */

/* A JSON string of s, each byte of an ill-formed UTF-8 sequence replaced by
 * U+FFFD; NULL when out of memory. */
static json_t *
text_json(const char *p, size_t len)
{
    const uint8_t *s = (const uint8_t *)p;

    if (events_utf8_valid(s, len))
        return json_stringn(p, len);
    if (len > (SIZE_MAX - 1) / 3)
        return NULL;
    char *fixed = malloc(3 * len + 1);
    if (fixed == NULL)
        return NULL;
    size_t n = events_utf8_fix(s, len, fixed);
    json_t *j = json_stringn(fixed, n);
    free(fixed);
    return j;
}

/* A name of the structured form that no extension may take. */
static bool
reserved_name(struct ipc_str name)
{
    return attr_find(name.ptr, name.len) != ATTR_COUNT ||
           ipc_str_eq(name, "data") || ipc_str_eq(name, "data_base64");
}

/* The data member of the structured form (events.h says which). */
static int
data_json(json_t *obj, const struct ipc_cloudevent *ce)
{
    struct ipc_bytes data = ce->data;
    enum media_kind kind = media_kind(ce->datacontenttype);
    json_t *v = NULL;

    if (kind == MEDIA_JSON) {
        v = json_loadb((const char *)data.ptr, data.len,
                       JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    } else if (kind == MEDIA_TEXT && events_utf8_valid(data.ptr, data.len)) {
        v = json_stringn((const char *)data.ptr, data.len);
        if (v == NULL)
            return -1;
    }
    if (v)
        return json_object_set_new(obj, "data", v);

    char *b64 = base64_encode(data.ptr, data.len);
    if (b64 == NULL)
        return -1;
    v = json_string(b64);
    free(b64);
    return json_object_set_new(obj, "data_base64", v);
}

json_t *
events_to_json(const struct ipc_cloudevent *ce)
{
    json_t *obj = json_object();

    if (obj == NULL)
        return NULL;
    for (unsigned a = 0; a < ATTR_COUNT; a++) {
        struct ipc_str v = attr_value(ce, (enum attr)a);
        if (v.ptr &&
            json_object_set_new(obj, attrs[a].name, text_json(v.ptr, v.len)))
            goto fail;
    }
    for (uint32_t i = 0; i < ce->extensions.n; i++) {
        struct ipc_pair p;
        char key[NAME_EXT_MAX + 1];

        ipc_pair_list_get(&ce->extensions, i, &p);
        if (!name_ext_valid(p.name.ptr, p.name.len) || p.value.ptr == NULL ||
            reserved_name(p.name))
            continue;
        memcpy(key, p.name.ptr, p.name.len);
        key[p.name.len] = '\0';
        if (json_object_get(obj, key))
            continue;
        if (json_object_set_new(obj, key, text_json(p.value.ptr, p.value.len)))
            goto fail;
    }
    if (ce->data.ptr && data_json(obj, ce))
        goto fail;
    return obj;
fail:
    json_decref(obj);
    return NULL;
}
