/*
 * events.h — CloudEvents 1.0 at the master's edges: structured, batched
 * and binary HTTP mode in, the ABI CloudEvent FlatBuffer (ipc/cloudevent.h)
 * out, and back to the structured JSON form (DESIGN §3, §6, §8).
 *
 * Events enter once: the admin API hands each published or invoked event
 * to events_from_*() and from then on only the FlatBuffer travels (broker,
 * journal, hosts).  Every rule a sender can break is checked here and
 * reported in err with the attribute and the rule, e.g.
 * `attribute "type" is required`, ready for a 400 `invalid_argument`.
 *
 * Rules (both modes):
 * - type and source required; in structured mode specversion "1.0" is
 *   filled in when absent and id with a new UUIDv4; in binary mode both
 *   are required too (the HTTP binding sends every required attribute as
 *   a ce-* header, and a missing one is a client's mistake to report).
 * - Every attribute present is a non-empty string without control
 *   characters (U+0000-U+001F, U+007F-U+009F: CloudEvents 1.0 §Type
 *   System); time is an RFC 3339 date-time; datacontenttype a type/subtype
 *   media type.  A JSON null counts as absent.
 * - Data: with datacontenttype absent, `application/json` or `*+json`
 *   (parameters allowed) `data` is any JSON value, stored as its compact
 *   UTF-8 serialisation (events_json_dumps()); with any other type `data`
 *   must be a string, stored as its UTF-8 bytes; `data_base64` (strict
 *   RFC 4648 base64) is stored decoded; not both.
 * - Every other member is an extension: name [a-z0-9]{1,20}, value a
 *   string (as is), number or boolean (its JSON text); null omits it;
 *   at most EVENTS_MAX_EXTENSIONS.  `correlationid` is stored first, the
 *   original ABI's convention; the others keep their order.
 */
#ifndef WM_MASTER_EVENTS_H
#define WM_MASTER_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ipc/cloudevent.h"

/* As ipc_cloudevent_check() allows: enough for any real event, and a bound
 * that keeps hostile input cheap. */
#define EVENTS_MAX_EXTENSIONS 128

/* Converts a structured-mode CloudEvent (a JSON object) into an ABI
 * CloudEvent buffer in `out`, which is emptied first.  Returns 0, or -1
 * with a message in err (truncated to errlen; always ASCII) and `out`
 * empty.  obj is only read. */
int events_from_json(json_t *obj, struct ipc_fb_builder *out, char *err,
                     size_t errlen);

/* Converts an HTTP binary-mode CloudEvent.  names[i]/values[i] are its
 * `ce-*` headers with the prefix stripped and the name lowercased (values
 * still percent-encoded as the HTTP binding 1.0.2 §3.1.3.2 sends them;
 * they are decoded here, and a `%` not followed by two hex digits is kept
 * as it is), plus the Content-Type header as "content-type" (not
 * percent-decoded), which becomes datacontenttype.  A `ce-content-type`
 * header must not be passed stripped (it would read as Content-Type): pass
 * it unstripped, which fails the name rule, or reject it.  body[0..len) is
 * the data, stored as it is (absent when len is 0; not parsed, whatever
 * the content type).  Returns 0, or -1 with err as events_from_json(). */
int events_from_binary(const char *const *names, const char *const *values,
                       size_t n, const uint8_t *body, size_t len,
                       struct ipc_fb_builder *out, char *err, size_t errlen);

/* The structured form of a decoded event: its attributes that are
 * present, its extensions as string members (an extension whose name is
 * no valid attribute name, a context attribute's name or repeated is left
 * out), and its data as
 * - a JSON value when the content type is absent or JSON and the bytes
 *   parse as JSON,
 * - a string when the content type is text/... and the bytes are UTF-8,
 * - else `data_base64`, so that every byte survives the round trip.
 * Strings that are not valid UTF-8 (a host's output is only verified,
 * not trusted) get U+FFFD for each bad byte.  Returns a new reference,
 * NULL when out of memory. */
json_t *events_to_json(const struct ipc_cloudevent *ce);

/* The answer writer (events_answer.c): the structured JSON text of
 * evs[0..n) as events_json_dumps() writes events_to_json() of each (a JSON
 * array of them when array, else evs[0] alone, n being 1), byte for byte,
 * written straight from the buffers without a jansson tree.  Returns the
 * text (length in *len; not NUL-terminated; static memory valid until the
 * next call), or NULL for what it leaves to the jansson path (JSON data of
 * a shape the scanner leaves to jansson, out of memory).  Counts both
 * outcomes in events_answer_stats().  Not reentrant. */
const char *events_answer_json(const struct ipc_cloudevent *evs, size_t n,
                               bool array, size_t *len);

/* Answers written by events_answer_json(), and those it left to the
 * jansson path, since the start. */
struct events_answer_counts {
    uint64_t written;
    uint64_t fallbacks;
};
void events_answer_stats(struct events_answer_counts *out);

/* Binary mode out (events_binary.c).  events_header_encode() writes
 * s[0..len) percent-encoded as the HTTP binding 1.0.2 §3.1.3.2 asks
 * (space, '"', '%' and every byte outside U+0021-U+007E as %XX of its
 * UTF-8 bytes) into out, which holds 3 * len + 1 bytes; returns the length
 * written (NUL-terminated). */
size_t events_header_encode(const char *s, size_t len, char *out);
/* The header lines of ce in binary mode: `ce-<name>: <value>\r\n` for each
 * attribute but datacontenttype and for each extension events_to_json()
 * keeps, values percent-encoded.  Returns a malloc'd NUL-terminated string
 * (length in *len when len is not NULL), NULL when out of memory. */
char *events_to_headers(const struct ipc_cloudevent *ce, size_t *len);
/* The Content-Type of ce's data in binary mode: its datacontenttype
 * (copied into buf of cap bytes), else application/json for data that
 * parses as JSON (the structured form's default), application/octet-stream
 * for other data or a datacontenttype not fit for a header, NULL for no
 * data.  The result is buf or a static string. */
const char *events_binary_content_type(const struct ipc_cloudevent *ce,
                                       char *buf, size_t cap);

/* A batch of events: their ABI buffers back to back in one builder, each
 * starting on an 8-byte boundary. */
struct events_batch {
    struct ipc_fb_builder fb;
    size_t n;
    size_t *offsets; /* n + 1 of them: event i is [offsets[i], [i + 1]) */
    size_t cap;
};

void events_batch_init(struct events_batch *batch);
void events_batch_free(struct events_batch *batch);

/* Converts a batched-mode body (a JSON array of structured events, each
 * under events_from_json()'s rules) into `batch` (emptied first).  All or
 * nothing: returns 0, or -1 with err naming the index (`event 3: attribute
 * "type" is required`) and the batch empty.  An empty array is a valid,
 * empty batch. */
int events_batch_from_json(json_t *array, struct events_batch *batch, char *err,
                           size_t errlen);

/* Event i (< batch->n) of a batch: its buffer, and its length in *len. */
const uint8_t *events_batch_get(const struct events_batch *batch, size_t i,
                                size_t *len);

/* The scanner (events_scan.c): a structured body read straight into the
 * ABI buffers, without a jansson tree, for the common event.  It accepts
 * exactly what json_loadb() and events_batch_from_json() accept (with
 * JSON_REJECT_DUPLICATES for EVENTS_SCAN_ONE, as the routes load a single
 * event; without for a batch) and writes the same events; where it does
 * not accept it says whether the body breaks a rule (the jansson path then
 * says which, with the API's message) or has a shape it leaves to jansson
 * (a duplicate member in a batch, a number beyond 15 significant digits
 * or 18 integer digits, nesting deeper than 256, an object of more than
 * 256 members, a NUL byte right after a number or literal, which
 * jansson skips).  tests/unit/test_events_scan.c and
 * tests/fuzz/fuzz_events_scan.c hold it to jansson's decisions.
 *
 * Not reentrant: its scratch memory is one static context, kept between
 * calls so that a warm scanner allocates nothing per event (the master's
 * loop is one thread). */
enum events_scan_kind {
    EVENTS_SCAN_ONE,   /* a JSON object: one structured event */
    EVENTS_SCAN_BATCH, /* a JSON array of them */
};

enum events_scan_result {
    EVENTS_SCAN_OK = 0,   /* batch holds the events */
    EVENTS_SCAN_REJECT,   /* the body breaks a rule; batch empty */
    EVENTS_SCAN_FALLBACK, /* a shape left to the jansson path; batch empty */
};

/* Reads body[0..len) of kind into batch (initialised, emptied first); a
 * batch of more than max_events events is a REJECT (the jansson path
 * answers 413).  Counts the outcome in events_scan_stats(). */
enum events_scan_result events_scan_body(const uint8_t *body, size_t len,
                                         enum events_scan_kind kind,
                                         size_t max_events,
                                         struct events_batch *batch);

/* Bodies the scanner read, and bodies it left to the jansson path
 * (rejected or unusual), since the start. */
struct events_scan_counts {
    uint64_t scanned;
    uint64_t rejected;
    uint64_t fallbacks;
};
void events_scan_stats(struct events_scan_counts *out);

/* The compact JSON text of any JSON value, as stored for JSON data: no
 * whitespace, object members in their order, UTF-8 left unescaped, and
 * reals in the shortest form that reads back as the same double (19.99,
 * not jansson's 19.989999999999998), in Python's repr() style.  Use it to
 * write events out too, so numbers keep their short form.  Returns a
 * malloc'd NUL-terminated string (length in *len when len is not NULL),
 * NULL when out of memory or nested deeper than 2048 levels. */
char *events_json_dumps(const json_t *value, size_t *len);

/* Writes s[0..len) as a JSON string as events_json_dumps() does (quotes,
 * UTF-8 as it is, '"', '\\' and U+0000-U+001F escaped) into out, when out
 * is not NULL; returns the length (at most 6 * len + 2), not NUL-terminated.
 * Call it with NULL first for the room to make. */
size_t events_json_quote(const char *s, size_t len, char *out);

/* The text of a JSON number as events_json_dumps() writes it (and a number
 * extension is stored): "-1.2345678901234567e-308" (24) and INT64_MIN
 * (20) fit. */
#define EVENTS_JSON_NUMBER_SIZE 32
/* A real in the shortest form that strtod() reads back as v, in Python's
 * repr() style: positional for decimal exponents -4..15, else d.ddde+XX;
 * always with a "." or an exponent so that it reads back as a real. */
void events_json_real(double v, char out[EVENTS_JSON_NUMBER_SIZE]);
/* events_json_real()'s layout of a real whose shortest significant digits
 * are digits[0..k) (k >= 1, no trailing zero) and whose first digit's
 * decimal exponent is exp10 (|exp10| < 1000), negative when neg; returns
 * the length written (NUL-terminated).  The scanner writes the reals it
 * reads with it. */
size_t events_json_real_layout(bool neg, const char *digits, size_t k,
                               int exp10, char out[EVENTS_JSON_NUMBER_SIZE]);
/* An integer in decimal. */
void events_json_integer(json_int_t v, char out[EVENTS_JSON_NUMBER_SIZE]);

#endif /* WM_MASTER_EVENTS_H */
