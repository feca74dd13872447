/*
 * fuzz_events_json.c — libFuzzer target over master/api/events.c's decoders.
 *
 * The input is parsed as JSON (any value, \u0000 allowed) and given to
 * events_from_json(), or to events_batch_from_json() when it is an array;
 * an object whose members are strings is also given to
 * events_from_binary() as headers.  Besides the sanitizers' findings, it
 * aborts when a property breaks:
 * - every accepted event is a buffer that ipc_cloudevent_read() and
 *   ipc_cloudevent_check() accept (what the master does to a host's);
 * - events_to_json() of it converts back (JSON → FB → JSON → FB) to the
 *   same attributes, extensions and data (equal bytes, or equal JSON
 *   values when the data are JSON);
 * - the second round trip is a fixed point: byte-identical buffers;
 * - a rejection leaves the builder empty and says why in printable ASCII;
 * - an accepted binary-mode event written back in binary mode
 *   (events_to_headers(), events_binary_content_type()) is printable
 *   ASCII header lines that read back (events_from_binary()) to an event
 *   whose headers are the same: the binding's encoding is a fixed point.
 *
 * Run: tests/fuzz/fuzz_events_json -runs=200000 [corpus dir]
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ipc/cloudevent.h"
#include "master/api/events.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
broken(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_events_json: %s%s%s\n", what, detail ? ": " : "",
            detail ? detail : "");
    abort();
}

/* Messages go into JSON replies as they are: ASCII, never empty. */
static void
check_message(const char *err)
{
    if (err[0] == '\0')
        broken("a rejection without a message", NULL);
    for (const char *p = err; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            broken("a message that is not printable ASCII", err);
}

static void
read_checked(const uint8_t *buf, size_t len, struct ipc_cloudevent *ce)
{
    struct ipc_fb_error ferr;
    char msg[256];

    if (ipc_cloudevent_read(buf, len, ce, &ferr) ||
        ipc_cloudevent_check(ce, &ferr)) {
        ipc_fb_error_format(&ferr, msg, sizeof msg);
        broken("an accepted event does not verify", msg);
    }
}

static bool
str_same(struct ipc_str a, struct ipc_str b)
{
    if (a.ptr == NULL || b.ptr == NULL)
        return a.ptr == b.ptr;
    return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

static json_t *
parse_data(struct ipc_bytes d)
{
    return json_loadb((const char *)d.ptr, d.len,
                      JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}

/* Data survive a trip when their bytes are equal, or when both parse as
 * equal JSON (the spacing of JSON data is not kept), or when JSON null
 * became no data (a null member is an absent one). */
static bool
data_same(struct ipc_bytes a, struct ipc_bytes b)
{
    if (a.ptr && b.ptr && a.len == b.len &&
        (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0))
        return true;
    if (a.ptr == NULL && b.ptr == NULL)
        return true;
    json_t *ja = a.ptr ? parse_data(a) : NULL;
    json_t *jb = b.ptr ? parse_data(b) : NULL;
    bool same = (ja && jb && json_equal(ja, jb)) ||
                (ja && json_is_null(ja) && b.ptr == NULL);
    json_decref(ja);
    json_decref(jb);
    return same;
}

static void
compare(const struct ipc_cloudevent *a, const struct ipc_cloudevent *b)
{
    if (!str_same(a->id, b->id) || !str_same(a->type, b->type) ||
        !str_same(a->source, b->source) ||
        !str_same(a->specversion, b->specversion) ||
        !str_same(a->datacontenttype, b->datacontenttype) ||
        !str_same(a->dataschema, b->dataschema) ||
        !str_same(a->subject, b->subject) || !str_same(a->time, b->time))
        broken("an attribute changed in the round trip", NULL);
    if (a->extensions.n != b->extensions.n)
        broken("the extensions changed in the round trip", NULL);
    for (uint32_t i = 0; i < a->extensions.n; i++) {
        struct ipc_pair pa, pb;
        ipc_pair_list_get(&a->extensions, i, &pa);
        ipc_pair_list_get(&b->extensions, i, &pb);
        if (!str_same(pa.name, pb.name) || !str_same(pa.value, pb.value))
            broken("an extension changed in the round trip", NULL);
    }
    if (!data_same(a->data, b->data))
        broken("the data changed in the round trip", NULL);
}

/* FB → JSON → FB into out; the event read back in *ce. */
static void
trip(const struct ipc_cloudevent *in, struct ipc_fb_builder *out,
     struct ipc_cloudevent *ce)
{
    char err[512];
    json_t *j = events_to_json(in);

    if (j == NULL)
        broken("events_to_json failed", NULL);
    if (events_from_json(j, out, err, sizeof err))
        broken("events_to_json's output is rejected", err);
    json_decref(j);
    read_checked(out->buf, out->len, ce);
}

static void
check_event(const uint8_t *buf, size_t len)
{
    struct ipc_fb_builder b2, b3;
    struct ipc_cloudevent ce1, ce2, ce3;

    ipc_fb_builder_init(&b2);
    ipc_fb_builder_init(&b3);
    read_checked(buf, len, &ce1);
    trip(&ce1, &b2, &ce2);
    compare(&ce1, &ce2);
    trip(&ce2, &b3, &ce3);
    if (b2.len != b3.len || memcmp(b2.buf, b3.buf, b2.len) != 0)
        broken("the second round trip is not a fixed point", NULL);
    ipc_fb_builder_free(&b2);
    ipc_fb_builder_free(&b3);
}

/* Binary mode out and back in: the header lines of the event in buf, read
 * again with its data and Content-Type, give the same lines. */
static void
check_binary_out(const uint8_t *buf, size_t len)
{
    enum { MAX_LINES = 256 };
    struct ipc_cloudevent ce, ce2;
    const char *names[MAX_LINES + 1], *values[MAX_LINES + 1];
    size_t n = 0, hlen, h2len;
    char ct[256], err[512];
    struct ipc_fb_builder b;

    read_checked(buf, len, &ce);
    char *h = events_to_headers(&ce, &hlen);
    if (h == NULL)
        broken("events_to_headers failed", NULL);
    for (size_t i = 0; i < hlen; i++) {
        unsigned char c = (unsigned char)h[i];
        if ((c < 0x20 || c > 0x7e) && c != '\r' && c != '\n')
            broken("a header line holds a byte outside printable ASCII", h);
    }
    /* Split "ce-<name>: <value>\r\n" in place. */
    for (char *p = h; *p && n < MAX_LINES;) {
        char *colon = strstr(p, ": "), *end = strstr(p, "\r\n");
        if (strncmp(p, "ce-", 3) != 0 || colon == NULL || end == NULL ||
            colon > end)
            broken("a malformed header line", p);
        *colon = '\0';
        *end = '\0';
        names[n] = p + 3;
        values[n++] = colon + 2;
        p = end + 2;
    }
    if (ce.datacontenttype.ptr) {
        names[n] = "content-type";
        values[n++] = events_binary_content_type(&ce, ct, sizeof ct);
    }
    ipc_fb_builder_init(&b);
    if (events_from_binary(names, values, n, ce.data.ptr,
                           ce.data.ptr ? ce.data.len : 0, &b, err,
                           sizeof err) != 0)
        broken("an event written in binary mode does not read back", err);
    read_checked(b.buf, b.len, &ce2);
    free(h);
    h = events_to_headers(&ce, &hlen);
    char *h2 = events_to_headers(&ce2, &h2len);
    if (h == NULL || h2 == NULL || hlen != h2len || memcmp(h, h2, hlen) != 0)
        broken("binary mode out and back in changed the headers", h2);
    free(h);
    free(h2);
    ipc_fb_builder_free(&b);
}

/* The object's string members as binary-mode headers. */
static void
try_binary(json_t *obj)
{
    enum { MAX_HEADERS = 64 };
    const char *names[MAX_HEADERS], *values[MAX_HEADERS];
    size_t n = 0;
    const char *key;
    json_t *v;
    struct ipc_fb_builder b;
    char err[512];
    json_t *body = json_object_get(obj, "data");

    json_object_foreach(obj, key, v)
    {
        if (!json_is_string(v) || strcmp(key, "data") == 0)
            continue;
        if (n == MAX_HEADERS)
            break;
        names[n] = key;
        values[n] = json_string_value(v);
        n++;
    }
    ipc_fb_builder_init(&b);
    if (events_from_binary(
            names, values, n, (const uint8_t *)json_string_value(body),
            json_string_length(body), &b, err, sizeof err) == 0) {
        check_event(b.buf, b.len);
        check_binary_out(b.buf, b.len);
    } else if (b.len != 0)
        broken("a rejected event left bytes in the builder", err);
    else
        check_message(err);
    ipc_fb_builder_free(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    json_t *v = json_loadb((const char *)data, size,
                           JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);

    if (v == NULL)
        return 0;
    if (json_is_array(v)) {
        struct events_batch batch;
        events_batch_init(&batch);
        if (events_batch_from_json(v, &batch, err, sizeof err) == 0) {
            for (size_t i = 0; i < batch.n; i++) {
                size_t len;
                const uint8_t *buf = events_batch_get(&batch, i, &len);
                check_event(buf, len);
            }
        } else if (strncmp(err, "event ", 6) != 0 || batch.n != 0) {
            broken("a batch error names no event", err);
        } else {
            check_message(err);
        }
        events_batch_free(&batch);
    } else {
        struct ipc_fb_builder b;
        ipc_fb_builder_init(&b);
        if (events_from_json(v, &b, err, sizeof err) == 0)
            check_event(b.buf, b.len);
        else if (b.len != 0)
            broken("a rejected event left bytes in the builder", err);
        else
            check_message(err);
        ipc_fb_builder_free(&b);
        if (json_is_object(v))
            try_binary(v);
    }
    json_decref(v);
    return 0;
}
