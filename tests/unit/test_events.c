/*
 * test_events.c — unit tests of master/api/events.c (CloudEvent JSON and HTTP
 * binary mode ⇄ ABI FlatBuffer); lib/'s UUIDs and timestamps are
 * test_lib.c's.
 *
 * Every rule of events.h is exercised both ways: accepted input is checked
 * field by field in the buffer (after ipc_cloudevent_read() and
 * ipc_cloudevent_check(), as the master would), rejected input by its exact
 * message.  Round trips compare JSON values with json_equal() and, where
 * the order matters (correlationid first), the serialised text.
 *
 * The checks are tests/unit/check.h's: each failed one prints its line and
 * the run exits 1; automake's harness reads the exit status.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ipc/cloudevent.h"
#include "lib/uuid.h"
#include "master/api/events.h"
#include "tests/unit/check.h"

#define CHECK_IPC(got, want) check_ipc(__LINE__, #got, (got), (want))

/* want NULL: the field must be absent. */
static void
check_ipc(int line, const char *what, struct ipc_str got, const char *want)
{
    if (want == NULL ? got.ptr != NULL : !ipc_str_eq(got, want))
        check_fail(__FILE__, line, "%s is \"%.*s\"%s, expected \"%s\"", what,
                   (int)got.len, got.ptr ? got.ptr : "",
                   got.ptr ? "" : " (absent)", want ? want : "(absent)");
    else
        check_count++;
}

static json_t *
parse(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (v == NULL) {
        fprintf(stderr, "test JSON does not parse: %s: %s\n", jerr.text, text);
        exit(2);
    }
    return v;
}

/* The event of b, read and checked as the master reads a host's buffer. */
static int
read_event(const struct ipc_fb_builder *b, struct ipc_cloudevent *ce)
{
    struct ipc_fb_error ferr;
    char msg[256];

    if (ipc_cloudevent_read(b->buf, b->len, ce, &ferr) ||
        ipc_cloudevent_check(ce, &ferr)) {
        ipc_fb_error_format(&ferr, msg, sizeof msg);
        fprintf(stderr, "buffer rejected: %s\n", msg);
        return -1;
    }
    return 0;
}

/* Converts text, which must be accepted; *ce views b. */
static int
accept_json(const char *text, struct ipc_fb_builder *b,
            struct ipc_cloudevent *ce)
{
    char err[256];
    json_t *v = parse(text);
    int rc = events_from_json(v, b, err, sizeof err);

    json_decref(v);
    if (rc) {
        fprintf(stderr, "rejected: %s: %s\n", err, text);
        return -1;
    }
    return read_event(b, ce);
}

#define ACCEPT(text, b, ce) CHECK(accept_json((text), (b), (ce)) == 0)
#define REJECT(text, msg) reject_json(__LINE__, (text), (msg))

static void
reject_json(int line, const char *text, const char *want)
{
    struct ipc_fb_builder b;
    char err[256] = "";
    json_t *v = parse(text);

    ipc_fb_builder_init(&b);
    int rc = events_from_json(v, &b, err, sizeof err);
    if (rc != -1 || b.len != 0 || strcmp(err, want) != 0)
        check_fail(__FILE__, line,
                   "%s\n  gave rc %d, len %zu, \"%s\"\n  expected \"%s\"", text,
                   rc, b.len, err, want);
    else
        check_count++;
    json_decref(v);
    ipc_fb_builder_free(&b);
}

static bool
data_is(const struct ipc_cloudevent *ce, const void *want, size_t len)
{
    return ce->data.ptr && ce->data.len == len &&
           memcmp(ce->data.ptr, want, len) == 0;
}

static bool
data_str(const struct ipc_cloudevent *ce, const char *want)
{
    return data_is(ce, want, strlen(want));
}

static bool
is_uuid4(const char *s, size_t len)
{
    return uuid_valid(s, len) && s[14] == '4' && strchr("89ab", s[19]) != NULL;
}

/* The compact text of events_to_json() of b's event. */
static char *
to_text(const struct ipc_cloudevent *ce)
{
    json_t *j = events_to_json(ce);
    char *s = j ? events_json_dumps(j, NULL) : NULL;
    json_decref(j);
    return s;
}

/* ---- structured mode: attributes ------------------------------------- */

static void
test_attributes(void)
{
    struct ipc_fb_builder b;
    struct ipc_cloudevent ce;

    ipc_fb_builder_init(&b);

    /* Defaults: specversion and a fresh UUIDv4 id. */
    ACCEPT("{\"type\":\"t\",\"source\":\"/s\"}", &b, &ce);
    CHECK_IPC(ce.specversion, "1.0");
    CHECK(is_uuid4(ce.id.ptr, ce.id.len));
    CHECK_IPC(ce.type, "t");
    CHECK_IPC(ce.source, "/s");
    CHECK_IPC(ce.datacontenttype, NULL);
    CHECK_IPC(ce.dataschema, NULL);
    CHECK_IPC(ce.subject, NULL);
    CHECK_IPC(ce.time, NULL);
    CHECK(ce.data.ptr == NULL);
    CHECK(ce.extensions.n == 0);

    /* Every attribute given; null counts as absent. */
    ACCEPT("{\"specversion\":\"1.0\",\"id\":\"e-1\",\"type\":\"com.x.y\","
           "\"source\":\"urn:a\",\"datacontenttype\":\"application/json\","
           "\"dataschema\":\"https://x/s.json\",\"subject\":\"sub\","
           "\"time\":\"2026-11-22T03:10:38.123Z\"}",
           &b, &ce);
    CHECK_IPC(ce.id, "e-1");
    CHECK_IPC(ce.type, "com.x.y");
    CHECK_IPC(ce.source, "urn:a");
    CHECK_IPC(ce.datacontenttype, "application/json");
    CHECK_IPC(ce.dataschema, "https://x/s.json");
    CHECK_IPC(ce.subject, "sub");
    CHECK_IPC(ce.time, "2026-11-22T03:10:38.123Z");
    ACCEPT("{\"specversion\":null,\"id\":null,\"type\":\"t\","
           "\"source\":\"s\",\"subject\":null,\"time\":null}",
           &b, &ce);
    CHECK_IPC(ce.specversion, "1.0");
    CHECK(is_uuid4(ce.id.ptr, ce.id.len));
    CHECK_IPC(ce.subject, NULL);

    REJECT("[]", "a CloudEvent must be a JSON object, not an array");
    REJECT("\"x\"", "a CloudEvent must be a JSON object, not a string");
    REJECT("{\"source\":\"s\"}", "attribute \"type\" is required");
    REJECT("{\"type\":\"t\"}", "attribute \"source\" is required");
    REJECT("{\"type\":null,\"source\":\"s\"}",
           "attribute \"type\" is required");
    REJECT("{\"type\":\"\",\"source\":\"s\"}",
           "attribute \"type\" must not be empty");
    REJECT("{\"type\":5,\"source\":\"s\"}",
           "attribute \"type\" must be a string, not a number");
    REJECT("{\"type\":\"t\",\"source\":{}}",
           "attribute \"source\" must be a string, not an object");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"id\":\"\"}",
           "attribute \"id\" must not be empty");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"id\":7}",
           "attribute \"id\" must be a string, not a number");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"specversion\":\"0.3\"}",
           "attribute \"specversion\" must be \"1.0\"");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"specversion\":1.0}",
           "attribute \"specversion\" must be a string, not a number");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"subject\":true}",
           "attribute \"subject\" must be a string, not a boolean");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"subject\":\"a\\nb\"}",
           "attribute \"subject\" contains a control character");
    REJECT("{\"type\":\"t\\u0000\",\"source\":\"s\"}",
           "attribute \"type\" contains a control character");
    REJECT("{\"type\":\"t\",\"source\":\"s\\u0085\"}",
           "attribute \"source\" contains a control character");
    REJECT("{\"type\":\"t\",\"source\":\"s\\u007f\"}",
           "attribute \"source\" contains a control character");
    ACCEPT("{\"type\":\"t\\u00a0\\u00e9\\u4e2d\\ud83d\\ude00\","
           "\"source\":\"s\"}",
           &b, &ce);
    CHECK_IPC(ce.type, "t\xc2\xa0\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80");

    /* time: RFC 3339, loosely. */
    static const char *const good_times[] = {
        "2026-11-22T03:10:38.123Z", "2026-11-22T03:10:38Z",
        "2026-11-22t03:10:38z",     "1985-04-12T23:20:50.52-04:00",
        "1990-12-31T23:59:60Z",     "2026-11-22T03:10:38.123456789+05:30",
    };
    static const char *const bad_times[] = {
        "2026-11-22",
        "2026-11-22T03:10:38",
        "2026-11-22 03:10:38Z",
        "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z",
        "2026-11-32T00:00:00Z",
        "2026-11-22T24:00:00Z",
        "2026-11-22T03:60:00Z",
        "2026-11-22T03:10:38.Z",
        "2026-11-22T03:10:38+0530",
        "2026-11-22T03:10:38+05:30:00",
        "2026-11-22T03:10:38ZZ",
        "2026-11-22T03:10:38+24:00",
        "26-11-22T03:10:38Z",
        "yesterday at noon, more or less",
    };
    char text[256];
    for (size_t i = 0; i < sizeof good_times / sizeof *good_times; i++) {
        snprintf(text, sizeof text,
                 "{\"type\":\"t\",\"source\":\"s\",\"time\":\"%s\"}",
                 good_times[i]);
        ACCEPT(text, &b, &ce);
        CHECK_IPC(ce.time, good_times[i]);
    }
    for (size_t i = 0; i < sizeof bad_times / sizeof *bad_times; i++) {
        snprintf(text, sizeof text,
                 "{\"type\":\"t\",\"source\":\"s\",\"time\":\"%s\"}",
                 bad_times[i]);
        REJECT(text, "attribute \"time\" is not an RFC 3339 date-time "
                     "(YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM))");
    }
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"time\":1795317038}",
           "attribute \"time\" must be a string, not a number");

    /* datacontenttype: type/subtype[;parameters]. */
    ACCEPT("{\"type\":\"t\",\"source\":\"s\","
           "\"datacontenttype\":\"application/json; charset=utf-8\"}",
           &b, &ce);
    CHECK_IPC(ce.datacontenttype, "application/json; charset=utf-8");
    static const char *const bad_types[] = { "json", "application/", "/json",
                                             "text/plain garbage", "a b/c" };
    for (size_t i = 0; i < sizeof bad_types / sizeof *bad_types; i++) {
        snprintf(text, sizeof text,
                 "{\"type\":\"t\",\"source\":\"s\","
                 "\"datacontenttype\":\"%s\"}",
                 bad_types[i]);
        REJECT(text, "attribute \"datacontenttype\" is not a media type "
                     "(type/subtype[;parameters])");
    }

    /* Messages are cut to errlen; a NULL err is allowed. */
    json_t *v = parse("{\"source\":\"s\"}");
    char small[10];
    CHECK(events_from_json(v, &b, small, sizeof small) == -1);
    CHECK_STR(small, "attribute");
    CHECK(events_from_json(v, &b, NULL, 0) == -1);
    json_decref(v);

    ipc_fb_builder_free(&b);
}

/* ---- structured mode: data ------------------------------------------- */

static void
test_data(void)
{
    struct ipc_fb_builder b;
    struct ipc_cloudevent ce;

    ipc_fb_builder_init(&b);

    /* JSON-ish content types: any JSON value, stored compact. */
    ACCEPT("{\"type\":\"t\",\"source\":\"s\",\"data\": {\"a\" : 1, "
           "\"b\": [true, null, \"x\\u00e9\\n\"], \"c\": 19.99, "
           "\"d\": 0.1, \"e\": 1e300, \"f\": 100.0, \"g\": -0.0}}",
           &b, &ce);
    CHECK(data_str(&ce, "{\"a\":1,\"b\":[true,null,\"x\xc3\xa9\\n\"],"
                        "\"c\":19.99,\"d\":0.1,\"e\":1e+300,\"f\":100.0,"
                        "\"g\":-0.0}"));
    ACCEPT("{\"type\":\"t\",\"source\":\"s\","
           "\"datacontenttype\":\"application/json\",\"data\":\"hi\"}",
           &b, &ce);
    CHECK(data_str(&ce, "\"hi\""));
    ACCEPT("{\"type\":\"t\",\"source\":\"s\","
           "\"datacontenttype\":\"application/vnd.x+json; v=2\","
           "\"data\":[1,2]}",
           &b, &ce);
    CHECK(data_str(&ce, "[1,2]"));
    ACCEPT("{\"type\":\"t\",\"source\":\"s\","
           "\"datacontenttype\":\"Application/JSON\",\"data\":5}",
           &b, &ce);
    CHECK(data_str(&ce, "5"));
    ACCEPT("{\"type\":\"t\",\"source\":\"s\",\"data\":false}", &b, &ce);
    CHECK(data_str(&ce, "false"));
    /* data null is absent, as every null attribute. */
    ACCEPT("{\"type\":\"t\",\"source\":\"s\",\"data\":null}", &b, &ce);
    CHECK(ce.data.ptr == NULL);

    /* text and other types: a string, stored as its UTF-8 bytes. */
    ACCEPT("{\"type\":\"t\",\"source\":\"s\","
           "\"datacontenttype\":\"text/plain; charset=utf-8\","
           "\"data\":\"h\\u00e9llo\\n\\u0000\"}",
           &b, &ce);
    CHECK(data_is(&ce, "h\xc3\xa9llo\n", 8));
    ACCEPT("{\"type\":\"t\",\"source\":\"s\","
           "\"datacontenttype\":\"application/xml\",\"data\":\"<a/>\"}",
           &b, &ce);
    CHECK(data_str(&ce, "<a/>"));
    ACCEPT("{\"type\":\"t\",\"source\":\"s\","
           "\"datacontenttype\":\"text/plain\",\"data\":\"\"}",
           &b, &ce);
    CHECK(ce.data.ptr != NULL && ce.data.len == 0);
    REJECT("{\"type\":\"t\",\"source\":\"s\","
           "\"datacontenttype\":\"text/plain\",\"data\":{\"a\":1}}",
           "data must be a string when datacontenttype is \"text/plain\", "
           "not an object");
    REJECT("{\"type\":\"t\",\"source\":\"s\","
           "\"datacontenttype\":\"image/png\",\"data\":5}",
           "data must be a string when datacontenttype is \"image/png\", "
           "not a number");
    REJECT("{\"type\":\"t\",\"source\":\"s\","
           "\"datacontenttype\":\"application/json+xml\",\"data\":[]}",
           "data must be a string when datacontenttype is "
           "\"application/json+xml\", not an array");

    /* data_base64: strict RFC 4648. */
    ACCEPT("{\"type\":\"t\",\"source\":\"s\","
           "\"datacontenttype\":\"application/octet-stream\","
           "\"data_base64\":\"AAEC/w==\"}",
           &b, &ce);
    CHECK(data_is(&ce, "\x00\x01\x02\xff", 4));
    ACCEPT("{\"type\":\"t\",\"source\":\"s\",\"data_base64\":\"AAE=\"}", &b,
           &ce);
    CHECK(data_is(&ce, "\x00\x01", 2));
    ACCEPT("{\"type\":\"t\",\"source\":\"s\",\"data_base64\":\"+/+/\"}", &b,
           &ce);
    CHECK(data_is(&ce, "\xfb\xff\xbf", 3));
    ACCEPT("{\"type\":\"t\",\"source\":\"s\",\"data_base64\":\"\"}", &b, &ce);
    CHECK(ce.data.ptr != NULL && ce.data.len == 0);
    ACCEPT("{\"type\":\"t\",\"source\":\"s\",\"data_base64\":null,"
           "\"data\":1}",
           &b, &ce);
    CHECK(data_str(&ce, "1"));
    static const char *const bad_b64[] = {
        "AAE",      "A===", "AA=A", "=AAA",   "AAF=",     "AB==",
        "AA==AAAA", "A A=", "AA-_", "AAE=\n", "AAAA====",
    };
    char text[256];
    for (size_t i = 0; i < sizeof bad_b64 / sizeof *bad_b64; i++) {
        json_t *v = json_pack("{s:s,s:s,s:s}", "type", "t", "source", "s",
                              "data_base64", bad_b64[i]);
        char *s = json_dumps(v, JSON_COMPACT);
        snprintf(text, sizeof text, "%s", s);
        REJECT(text, "data_base64 is not valid base64");
        free(s);
        json_decref(v);
    }
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"data_base64\":5}",
           "data_base64 must be a string, not a number");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"data_base64\":\"AA==\","
           "\"data\":\"x\"}",
           "data and data_base64 cannot both be present");

    ipc_fb_builder_free(&b);
}

/* ---- structured mode: extensions ------------------------------------- */

static void
test_extensions(void)
{
    struct ipc_fb_builder b;
    struct ipc_cloudevent ce;
    struct ipc_pair p;

    ipc_fb_builder_init(&b);

    ACCEPT("{\"type\":\"t\",\"source\":\"s\",\"str\":\"v\",\"int\":-42,"
           "\"big\":9223372036854775807,\"real\":1.5,\"tiny\":1e-7,"
           "\"yes\":true,\"no\":false,\"gone\":null,\"empty\":\"\","
           "\"abcdefghij0123456789\":\"20\"}",
           &b, &ce);
    static const char *const want[][2] = {
        { "str", "v" },
        { "int", "-42" },
        { "big", "9223372036854775807" },
        { "real", "1.5" },
        { "tiny", "1e-07" },
        { "yes", "true" },
        { "no", "false" },
        { "empty", "" },
        { "abcdefghij0123456789", "20" },
    };
    CHECK(ce.extensions.n == sizeof want / sizeof *want);
    for (uint32_t i = 0; i < ce.extensions.n && i < 9; i++) {
        ipc_pair_list_get(&ce.extensions, i, &p);
        CHECK_IPC(p.name, want[i][0]);
        CHECK_IPC(p.value, want[i][1]);
    }

    /* correlationid first, the others in their order. */
    ACCEPT("{\"aaa\":\"1\",\"type\":\"t\",\"bbb\":2,\"source\":\"s\","
           "\"correlationid\":\"c-9\",\"zzz\":\"3\"}",
           &b, &ce);
    static const char *const order[] = { "correlationid", "aaa", "bbb", "zzz" };
    CHECK(ce.extensions.n == 4);
    for (uint32_t i = 0; i < ce.extensions.n && i < 4; i++) {
        ipc_pair_list_get(&ce.extensions, i, &p);
        CHECK_IPC(p.name, order[i]);
    }
    CHECK_IPC(ipc_cloudevent_extension(&ce, "correlationid"), "c-9");
    ACCEPT("{\"type\":\"t\",\"source\":\"s\",\"correlationid\":12}", &b, &ce);
    ipc_pair_list_get(&ce.extensions, 0, &p);
    CHECK_IPC(p.value, "12");

    REJECT("{\"type\":\"t\",\"source\":\"s\",\"Foo\":\"x\"}",
           "extension name \"Foo\" is not [a-z0-9]{1,20}");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"a_b\":1}",
           "extension name \"a_b\" is not [a-z0-9]{1,20}");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"\":1}",
           "extension name \"\" is not [a-z0-9]{1,20}");
    REJECT("{\"type\":\"t\",\"source\":\"s\","
           "\"abcdefghij0123456789x\":\"21\"}",
           "extension name \"abcdefghij0123456789x\" is not [a-z0-9]{1,20}");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"caf\\u00e9\\n\\\"\":1}",
           "extension name \"caf\\xc3\\xa9\\x0a\\x22\" is not "
           "[a-z0-9]{1,20}");
    REJECT("{\"type\":\"t\",\"source\":\"s\","
           "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\":1}",
           "extension name \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"... "
           "is not [a-z0-9]{1,20}");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"obj\":{\"a\":1}}",
           "extension \"obj\" must be a string, number or boolean, "
           "not an object");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"arr\":[]}",
           "extension \"arr\" must be a string, number or boolean, "
           "not an array");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"ext\":\"a\\u0000b\"}",
           "extension \"ext\" contains a control character");
    REJECT("{\"type\":\"t\",\"source\":\"s\",\"ext\":\"a\\tb\"}",
           "extension \"ext\" contains a control character");

    /* At most 128 (nulls do not count). */
    for (int count = 128; count <= 129; count++) {
        json_t *v = parse("{\"type\":\"t\",\"source\":\"s\",\"nil\":null}");
        char name[16], err[256];
        for (int i = 0; i < count; i++) {
            snprintf(name, sizeof name, "x%d", i);
            json_object_set_new(v, name, json_integer(i));
        }
        int rc = events_from_json(v, &b, err, sizeof err);
        if (count == 128) {
            CHECK(rc == 0 && read_event(&b, &ce) == 0);
            CHECK(ce.extensions.n == 128);
            ipc_pair_list_get(&ce.extensions, 127, &p);
            CHECK_IPC(p.name, "x127");
            CHECK_IPC(p.value, "127");
        } else {
            CHECK(rc == -1);
            CHECK_STR(err, "more than 128 extensions");
        }
        json_decref(v);
    }
    ipc_fb_builder_free(&b);
}

/* ---- round trips ----------------------------------------------------- */

/* JSON → FB → JSON must give `want` (NULL: the input itself). */
static void
round_trip(int line, const char *in, const char *want)
{
    struct ipc_fb_builder b;
    struct ipc_cloudevent ce;
    json_t *w = parse(want ? want : in);

    ipc_fb_builder_init(&b);
    if (accept_json(in, &b, &ce) != 0) {
        check_fail(__FILE__, line, "round trip: rejected");
    } else {
        json_t *out = events_to_json(&ce);
        if (out == NULL || !json_equal(out, w)) {
            char *s = out ? events_json_dumps(out, NULL) : NULL;
            check_fail(__FILE__, line, "round trip gave\n  %s\nexpected\n  %s",
                       s ? s : "(null)", want ? want : in);
            free(s);
        } else {
            check_count++;
        }
        json_decref(out);
    }
    json_decref(w);
    ipc_fb_builder_free(&b);
}

#define ROUND_TRIP(in, want) round_trip(__LINE__, (in), (want))

static void
test_round_trips(void)
{
    struct ipc_fb_builder b;
    struct ipc_cloudevent ce;
    char *s;

    /* JSON data, with the content type absent or JSON. */
    ROUND_TRIP("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"data\":{\"a\":[1,2.5,\"x\",null,{}],"
               "\"b\":\"\\u00e9\"}}",
               NULL);
    ROUND_TRIP("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"datacontenttype\":\"application/json\","
               "\"data\":\"just a string\"}",
               NULL);
    ROUND_TRIP("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"datacontenttype\":\"application/x+json\","
               "\"data\":42}",
               NULL);
    /* Text data. */
    ROUND_TRIP("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"datacontenttype\":\"text/plain\","
               "\"data\":\"h\\u00e9llo\\n\"}",
               NULL);
    ROUND_TRIP("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"datacontenttype\":\"text/csv\","
               "\"data_base64\":\"YSxiCg==\"}",
               "{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"datacontenttype\":\"text/csv\","
               "\"data\":\"a,b\\n\"}");
    /* Binary data: other types, text that is not UTF-8, JSON that does not
     * parse, all as data_base64 so that every byte survives. */
    ROUND_TRIP("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"datacontenttype\":\"image/png\","
               "\"data_base64\":\"iVBORw0KGgo=\"}",
               NULL);
    ROUND_TRIP("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"datacontenttype\":\"application/xml\","
               "\"data\":\"<a/>\"}",
               "{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"datacontenttype\":\"application/xml\","
               "\"data_base64\":\"PGEvPg==\"}");
    ROUND_TRIP("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"datacontenttype\":\"text/plain\","
               "\"data_base64\":\"/w==\"}",
               NULL);
    ROUND_TRIP("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"data_base64\":\"e2E6\"}",
               NULL);
    ROUND_TRIP("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"datacontenttype\":\"application/json\","
               "\"data_base64\":\"\"}",
               NULL);
    /* JSON bytes that parse are shown as JSON, whatever their spacing. */
    ROUND_TRIP("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"data_base64\":\"IHsgImEiIDogMSB9IA==\"}",
               "{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"data\":{\"a\":1}}");
    /* Extensions of each type come back as strings. */
    ROUND_TRIP("{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"subject\":\"x\","
               "\"time\":\"2026-11-22T03:10:38.123Z\","
               "\"dataschema\":\"urn:x\",\"s\":\"v\",\"i\":3,\"r\":0.25,"
               "\"b\":false,\"n\":null}",
               "{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
               "\"type\":\"t\",\"subject\":\"x\","
               "\"time\":\"2026-11-22T03:10:38.123Z\","
               "\"dataschema\":\"urn:x\",\"s\":\"v\",\"i\":\"3\","
               "\"r\":\"0.25\",\"b\":\"false\"}");

    /* The structured text: attributes, correlationid, extensions, data. */
    ipc_fb_builder_init(&b);
    ACCEPT("{\"data\":{\"n\":19.99},\"zz\":\"1\",\"correlationid\":\"c\","
           "\"type\":\"t\",\"id\":\"1\",\"source\":\"s\"}",
           &b, &ce);
    s = to_text(&ce);
    CHECK_STR(s, "{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"s\","
                 "\"type\":\"t\",\"correlationid\":\"c\",\"zz\":\"1\","
                 "\"data\":{\"n\":19.99}}");
    free(s);

    /* A host's buffer is only verified: bad UTF-8 becomes U+FFFD, and
     * extensions that would clash or are not names are left out. */
    struct ipc_pair ext[] = {
        { ipc_str_c("type"), ipc_str_c("evil") },
        { ipc_str_c("subject"), ipc_str_c("evil") },
        { ipc_str_c("data"), ipc_str_c("evil") },
        { ipc_str_c("Bad"), ipc_str_c("x") },
        { ipc_str_c("ok"), ipc_str_c("v\xff") },
        { ipc_str_c("ok"), ipc_str_c("again") },
        { ipc_str_c("nov"), { NULL, 0 } },
    };
    struct ipc_cloudevent raw = {
        .id = ipc_str_c("1"),
        .type = ipc_str_c("t"),
        .source = ipc_str_c("s\xc3"),
        .specversion = ipc_str_c("1.0"),
        .datacontenttype = ipc_str_c("application/json"),
        .data = { (const uint8_t *)"null", 4 },
        .extensions = { .n = 7, .items = ext },
    };
    ipc_fb_builder_reset(&b);
    CHECK(ipc_cloudevent_encode(&b, &raw) == 0);
    struct ipc_fb_error ferr;
    CHECK(ipc_cloudevent_read(b.buf, b.len, &ce, &ferr) == 0);
    s = to_text(&ce);
    CHECK_STR(s, "{\"specversion\":\"1.0\",\"id\":\"1\","
                 "\"source\":\"s\xef\xbf\xbd\",\"type\":\"t\","
                 "\"datacontenttype\":\"application/json\","
                 "\"ok\":\"v\xef\xbf\xbd\",\"data\":null}");
    free(s);
    ipc_fb_builder_free(&b);
}

/* ---- the JSON writer ------------------------------------------------- */

static void
test_dumps(void)
{
    static const struct {
        double v;
        const char *text;
    } reals[] = {
        { 19.99, "19.99" },
        { 0.1, "0.1" },
        { 0.1 + 0.2, "0.30000000000000004" },
        { 100.0, "100.0" },
        { 1.5, "1.5" },
        { -2.5, "-2.5" },
        { 0.0001, "0.0001" },
        { 0.00001, "1e-05" },
        { 1.5e-5, "1.5e-05" },
        { 123456789012345.6, "123456789012345.6" },
        { 1e15, "1000000000000000.0" },
        { 1e16, "1e+16" },
        { 9007199254740993.0, "9007199254740992.0" },
        { 1e22, "1e+22" },
        { 1.7976931348623157e308, "1.7976931348623157e+308" },
        { 5e-324, "5e-324" },
        { -1e-300, "-1e-300" },
        { 0.0, "0.0" },
        { -0.0, "-0.0" },
    };
    char *s;

    for (size_t i = 0; i < sizeof reals / sizeof *reals; i++) {
        json_t *v = json_real(reals[i].v);
        s = events_json_dumps(v, NULL);
        CHECK_STR(s, reals[i].text);
        free(s);
        json_decref(v);
    }
    /* Every double reads back as itself, and jansson reads it as a real. */
    unsigned bad = 0;
    srand(7);
    for (int i = 0; i < 100000; i++) {
        uint64_t bits =
            (uint64_t)rand() << 62 ^ (uint64_t)rand() << 31 ^ (uint64_t)rand();
        double d;
        memcpy(&d, &bits, sizeof d);
        if (d != d || d - d != 0)
            continue;
        json_t *v = json_real(d);
        s = events_json_dumps(v, NULL);
        json_t *back = s ? json_loads(s, JSON_DECODE_ANY, NULL) : NULL;
        bad +=
            back == NULL || !json_is_real(back) || json_real_value(back) != d;
        json_decref(back);
        free(s);
        json_decref(v);
    }
    CHECK(bad == 0);

    json_t *v = parse("{\"b\":[1,-9223372036854775808,true,false,null],"
                      "\"a\":\"q\\\"b\\\\s/\\b\\f\\n\\r\\t\\u0001\\u007f"
                      "\\u00e9\\u2028\\u0000\",\"e\":{},\"f\":[]}");
    size_t len;
    s = events_json_dumps(v, &len);
    const char want[] = "{\"b\":[1,-9223372036854775808,true,false,null],"
                        "\"a\":\"q\\\"b\\\\s/\\b\\f\\n\\r\\t\\u0001\x7f"
                        "\xc3\xa9\xe2\x80\xa8\\u0000\",\"e\":{},\"f\":[]}";
    CHECK(s != NULL && len == strlen(want));
    CHECK_STR(s, want);
    free(s);
    json_decref(v);
}

/* ---- binary mode ----------------------------------------------------- */

static int
binary(const char *const *names, const char *const *values, size_t n,
       const char *body, struct ipc_fb_builder *b, struct ipc_cloudevent *ce,
       char *err, size_t errlen)
{
    int rc = events_from_binary(names, values, n, (const uint8_t *)body,
                                body ? strlen(body) : 0, b, err, errlen);
    if (rc == 0)
        rc = read_event(b, ce);
    return rc;
}

#define BIN_REJECT(names, values, want)                                        \
    do {                                                                       \
        err[0] = '\0';                                                         \
        CHECK(binary(names, values, sizeof names / sizeof *names, NULL, &b,    \
                     &ce, err, sizeof err) == -1);                             \
        CHECK(b.len == 0);                                                     \
        CHECK_STR(err, want);                                                  \
    } while (0)

static void
test_binary(void)
{
    struct ipc_fb_builder b;
    struct ipc_cloudevent ce;
    struct ipc_pair p;
    char err[256];

    ipc_fb_builder_init(&b);

    static const char traceparent[] =
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const char *names[] = { "specversion",   "id",           "source",
                            "type",          "subject",      "time",
                            "dataschema",    "content-type", "traceparent",
                            "correlationid", "note" };
    const char *values[] = { "1.0",
                             "b-1",
                             "/a%20b",
                             "com.x",
                             "caf%C3%A9 100% %zz%4",
                             "2026-11-22T03:10:38Z",
                             "urn:s",
                             "application/json; charset=utf-8",
                             traceparent,
                             "corr",
                             "%22%25%22" };
    CHECK(binary(names, values, 11, "{\"k\": [1, 2]}", &b, &ce, err,
                 sizeof err) == 0);
    CHECK_IPC(ce.specversion, "1.0");
    CHECK_IPC(ce.id, "b-1");
    CHECK_IPC(ce.source, "/a b");
    CHECK_IPC(ce.type, "com.x");
    CHECK_IPC(ce.subject, "caf\xc3\xa9 100% %zz%4");
    CHECK_IPC(ce.time, "2026-11-22T03:10:38Z");
    CHECK_IPC(ce.dataschema, "urn:s");
    CHECK_IPC(ce.datacontenttype, "application/json; charset=utf-8");
    CHECK(data_str(&ce, "{\"k\": [1, 2]}"));
    CHECK(ce.extensions.n == 3);
    ipc_pair_list_get(&ce.extensions, 0, &p);
    CHECK_IPC(p.name, "correlationid");
    CHECK_IPC(p.value, "corr");
    ipc_pair_list_get(&ce.extensions, 1, &p);
    CHECK_IPC(p.name, "traceparent");
    CHECK_IPC(p.value, traceparent);
    ipc_pair_list_get(&ce.extensions, 2, &p);
    CHECK_IPC(p.name, "note");
    CHECK_IPC(p.value, "\"%\"");
    /* Body shown as JSON when it parses. */
    char *s = to_text(&ce);
    CHECK(s != NULL && strstr(s, ",\"data\":{\"k\":[1,2]}}") != NULL);
    free(s);

    /* Binary mode fills in nothing: specversion and id are required. */
    const char *n0[] = { "type", "source", "id" };
    const char *v0[] = { "t", "s", "i" };
    BIN_REJECT(n0, v0,
               "attribute \"specversion\" is required: binary mode sends "
               "it in the header ce-specversion");
    const char *n1[] = { "type", "source", "specversion" };
    const char *v1[] = { "t", "s", "1.0" };
    BIN_REJECT(n1, v1,
               "attribute \"id\" is required: binary mode sends it in the "
               "header ce-id");
    /* Minimal: no body = no data. */
    const char *n2[] = { "type", "source", "specversion", "id" };
    const char *v2[] = { "t", "s", "1.0", "i" };
    CHECK(binary(n2, v2, 4, NULL, &b, &ce, err, sizeof err) == 0);
    CHECK_IPC(ce.specversion, "1.0");
    CHECK_IPC(ce.id, "i");
    CHECK(ce.data.ptr == NULL);
    CHECK_IPC(ce.datacontenttype, NULL);
    /* A body without Content-Type: bytes as they are, shown as base64 when
     * they are not JSON. */
    CHECK(binary(n2, v2, 4, "not json", &b, &ce, err, sizeof err) == 0);
    CHECK(data_str(&ce, "not json"));
    s = to_text(&ce);
    CHECK(s != NULL && strstr(s, "\"data_base64\":\"bm90IGpzb24=\"") != NULL);
    free(s);

    const char *n3[] = { "type" };
    const char *v3[] = { "t" };
    BIN_REJECT(n3, v3, "attribute \"source\" is required");
    const char *n4[] = { "type", "source", "type" };
    const char *v4[] = { "t", "s", "u" };
    BIN_REJECT(n4, v4, "attribute \"type\" given twice");
    const char *n5[] = { "type", "source", "x", "x" };
    const char *v5[] = { "t", "s", "1", "2" };
    BIN_REJECT(n5, v5, "extension \"x\" given twice");
    const char *n6[] = { "type", "source", "datacontenttype" };
    const char *v6[] = { "t", "s", "text/plain" };
    BIN_REJECT(n6, v6,
               "header ce-datacontenttype is not allowed: Content-Type "
               "carries datacontenttype");
    const char *n7[] = { "type", "source", "data" };
    const char *v7[] = { "t", "s", "x" };
    BIN_REJECT(n7, v7, "header ce-data is not allowed: the body carries data");
    const char *n8[] = { "type", "source", "subject" };
    const char *v8[] = { "t", "s", "a%0Ab" };
    BIN_REJECT(n8, v8, "attribute \"subject\" contains a control character");
    const char *v9[] = { "t", "s", "a%FFb" };
    BIN_REJECT(n8, v9, "attribute \"subject\" is not valid UTF-8");
    const char *v10[] = { "t", "s", "%C0%80" };
    BIN_REJECT(n8, v10, "attribute \"subject\" is not valid UTF-8");
    const char *v11[] = { "t", "s", "%ED%A0%80" };
    BIN_REJECT(n8, v11, "attribute \"subject\" is not valid UTF-8");
    const char *n12[] = { "type", "source", "my-ext" };
    const char *v12[] = { "t", "s", "1" };
    BIN_REJECT(n12, v12, "extension name \"my-ext\" is not [a-z0-9]{1,20}");
    const char *n13[] = { "type", "source", "specversion" };
    const char *v13[] = { "t", "s", "0.3" };
    BIN_REJECT(n13, v13, "attribute \"specversion\" must be \"1.0\"");
    const char *n14[] = { "type", "source", "content-type" };
    const char *v14[] = { "t", "s", "nonsense" };
    BIN_REJECT(n14, v14,
               "attribute \"datacontenttype\" is not a media type "
               "(type/subtype[;parameters])");
    const char *n15[] = { "type", "source", "id" };
    const char *v15[] = { "t", "s", "" };
    BIN_REJECT(n15, v15, "attribute \"id\" must not be empty");
    const char *n16[] = { "type", "source", "x" };
    const char *v16[] = { "t", "s", "%09" };
    BIN_REJECT(n16, v16, "extension \"x\" contains a control character");

    ipc_fb_builder_free(&b);
}

/* ---- binary mode out ------------------------------------------------- */

static void
test_binary_out(void)
{
    struct ipc_fb_builder b;
    struct ipc_cloudevent ce;
    char err[256], out[64], ct[64];
    size_t len;

    ipc_fb_builder_init(&b);
    CHECK(events_header_encode("a b\"%\x7f\x01~!", 9, out) == 19);
    CHECK_STR(out, "a%20b%22%25%7F%01~!");
    CHECK(events_header_encode("caf\xc3\xa9", 5, out) == 9);
    CHECK_STR(out, "caf%C3%A9");

    const char *names[] = { "specversion",  "id",   "source",       "type",
                            "content-type", "note", "correlationid" };
    const char *values[] = { "1.0",        "b-1",       "/a%20b", "t",
                             "text/plain", "caf%C3%A9", "c" };
    CHECK(binary(names, values, 7, "hi", &b, &ce, err, sizeof err) == 0);
    char *h = events_to_headers(&ce, &len);
    CHECK(h != NULL && len == strlen(h));
    CHECK_STR(h, "ce-specversion: 1.0\r\nce-id: b-1\r\n"
                 "ce-source: /a%20b\r\nce-type: t\r\n"
                 "ce-correlationid: c\r\nce-note: caf%C3%A9\r\n");
    free(h);
    CHECK_STR(events_binary_content_type(&ce, ct, sizeof ct), "text/plain");
    /* Without datacontenttype: JSON data is application/json, other
     * bytes application/octet-stream, no data no type. */
    const char *n2[] = { "specversion", "id", "source", "type" };
    const char *v2[] = { "1.0", "i", "s", "t" };
    CHECK(binary(n2, v2, 4, "[1]", &b, &ce, err, sizeof err) == 0);
    CHECK_STR(events_binary_content_type(&ce, ct, sizeof ct),
              "application/json");
    CHECK(binary(n2, v2, 4, "\x01x", &b, &ce, err, sizeof err) == 0);
    CHECK_STR(events_binary_content_type(&ce, ct, sizeof ct),
              "application/octet-stream");
    CHECK(binary(n2, v2, 4, NULL, &b, &ce, err, sizeof err) == 0);
    CHECK(events_binary_content_type(&ce, ct, sizeof ct) == NULL);
    ipc_fb_builder_free(&b);
}

/* ---- batches --------------------------------------------------------- */

static void
test_batch(void)
{
    struct events_batch batch;
    struct ipc_cloudevent ce;
    struct ipc_fb_error ferr;
    char err[256];
    json_t *v;

    events_batch_init(&batch);

    v = parse("[{\"type\":\"a\",\"source\":\"s\",\"data\":{\"x\":1}},"
              "{\"type\":\"b\",\"source\":\"s\",\"correlationid\":\"c\"},"
              "{\"type\":\"c\",\"source\":\"s\","
              "\"datacontenttype\":\"text/plain\",\"data\":\"hello\"}]");
    CHECK(events_batch_from_json(v, &batch, err, sizeof err) == 0);
    CHECK(batch.n == 3);
    const char *types[] = { "a", "b", "c" };
    struct ipc_str ids[3];
    for (size_t i = 0; i < batch.n && i < 3; i++) {
        size_t len;
        const uint8_t *buf = events_batch_get(&batch, i, &len);
        CHECK(((uintptr_t)buf & 7) == 0 && len % 8 == 0);
        CHECK(ipc_cloudevent_read(buf, len, &ce, &ferr) == 0 &&
              ipc_cloudevent_check(&ce, &ferr) == 0);
        CHECK_IPC(ce.type, types[i]);
        CHECK(is_uuid4(ce.id.ptr, ce.id.len));
        ids[i] = ce.id;
    }
    CHECK(memcmp(ids[0].ptr, ids[1].ptr, 36) != 0);
    CHECK(memcmp(ids[1].ptr, ids[2].ptr, 36) != 0);
    json_decref(v);

    v = parse("[{\"type\":\"a\",\"source\":\"s\"},"
              "{\"type\":\"b\",\"source\":\"s\"},"
              "{\"type\":\"c\",\"source\":\"s\"},"
              "{\"source\":\"s\"}]");
    CHECK(events_batch_from_json(v, &batch, err, sizeof err) == -1);
    CHECK_STR(err, "event 3: attribute \"type\" is required");
    CHECK(batch.n == 0 && batch.fb.len == 0);
    json_decref(v);

    v = parse("[{\"type\":\"a\",\"source\":\"s\"}, 5]");
    CHECK(events_batch_from_json(v, &batch, err, sizeof err) == -1);
    CHECK_STR(err, "event 1: a CloudEvent must be a JSON object, not a "
                   "number");
    json_decref(v);

    v = parse("[{\"type\":\"a\",\"source\":\"s\",\"Bad\":1}]");
    CHECK(events_batch_from_json(v, &batch, err, sizeof err) == -1);
    CHECK_STR(err, "event 0: extension name \"Bad\" is not [a-z0-9]{1,20}");
    json_decref(v);

    v = parse("{\"type\":\"a\",\"source\":\"s\"}");
    CHECK(events_batch_from_json(v, &batch, err, sizeof err) == -1);
    CHECK_STR(err, "a batch must be a JSON array, not an object");
    json_decref(v);

    v = parse("[]");
    CHECK(events_batch_from_json(v, &batch, err, sizeof err) == 0);
    CHECK(batch.n == 0);
    json_decref(v);

    events_batch_free(&batch);
}

int
main(void)
{
    RUN(test_attributes);
    RUN(test_data);
    RUN(test_extensions);
    RUN(test_round_trips);
    RUN(test_dumps);
    RUN(test_binary);
    RUN(test_binary_out);
    RUN(test_batch);
    return check_result();
}
