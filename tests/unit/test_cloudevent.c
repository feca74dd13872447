/*
 * test_cloudevent.c — round trips and application rules of the native
 * worker ABI tables (ipc/cloudevent.c): CloudEvent, Extension,
 * WorkerResponse.
 *
 * Every round trip encodes a value with the C builder, verifies and decodes
 * the buffer from an exact-size heap copy (so that AddressSanitizer sees any
 * read past its end), and compares the decoded value field by field with
 * the original; a decoded value is then encoded again and compared once
 * more, since decoded views are meant to be re-encodable as they are.
 */
#include "config.h"

#include "ipc/cloudevent.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "tests/unit/codec_eq.h"

/* CloudEvents attribute names are at most 20 characters. */
#define NAME20 "abcdefghij0123456789"
#define BIG_STRING (64u * 1024)
#define BIG_DATA (1024u * 1024)
#define MAX_EXTENSIONS 128

static const uint8_t sample_data[] = { 0x00, 0xff, 0x7f, 0x80, 0x00, 0x01,
                                       '{',  '}',  0xc3, 0xa9, 0x00 };

/* A CloudEvent with every field set: an embedded NUL in subject, UTF-8 in
 * source, binary data with NULs, correlationid as the first extension and
 * the others deliberately unsorted (no ordering rule). */
static const struct ipc_pair full_ext[] = {
    { { "correlationid", 13 }, { "c-42", 4 } },
    { { "zeta", 4 }, { "", 0 } },
    { { "alpha", 5 }, { "v\"\n\\", 4 } },
};

static struct ipc_cloudevent
full_event(void)
{
    struct ipc_cloudevent ce = {
        .id = ipc_str_c("id-1"),
        .type = ipc_str_c("com.example.order.created"),
        .source = ipc_str_c("/orders/\xc3\xa9t\xc3\xa9"),
        .specversion = ipc_str_c("1.0"),
        .datacontenttype = ipc_str_c("application/json"),
        .dataschema = ipc_str_c("https://example.com/schema"),
        .subject = { "a\0b", 3 },
        .time = ipc_str_c("2024-01-02T03:04:05Z"),
        .data = { sample_data, sizeof sample_data },
        .extensions = { .n = 3, .items = full_ext },
    };
    return ce;
}

static struct ipc_cloudevent
minimal_event(void)
{
    struct ipc_cloudevent ce = {
        .id = ipc_str_c("1"),
        .type = ipc_str_c("t"),
        .source = ipc_str_c("s"),
        .specversion = ipc_str_c("1.0"),
    };
    return ce;
}

/* Encodes ce, reads it back from an exact-size copy and compares; then
 * re-encodes the decoded value and compares again; a buffer the encoder
 * wrote also decodes, unverified, to the same value.  valid_app says
 * whether the CloudEvents rules should accept the value. */
static void
roundtrip_event(const struct ipc_cloudevent *ce, bool valid_app)
{
    struct ipc_fb_builder b, b2;
    struct ipc_cloudevent out, out2;
    struct ipc_fb_error err;

    ipc_fb_builder_init(&b);
    ipc_fb_builder_init(&b2);
    REQUIRE(ipc_cloudevent_encode(&b, ce) == 0);
    CHECK(b.len % 8 == 0);
    unsigned char *copy = check_dup(b.buf, b.len);
    int rc = ipc_cloudevent_read(copy, b.len, &out, &err);
    CHECK(rc == 0);
    if (rc == 0) {
        CHECK(eq_cloudevent(ce, &out));
        CHECK((ipc_cloudevent_check(&out, &err) == 0) == valid_app);
        CHECK(ipc_cloudevent_encode(&b2, &out) == 0);
        unsigned char *copy2 = check_dup(b2.buf, b2.len);
        CHECK(ipc_cloudevent_read(copy2, b2.len, &out2, &err) == 0);
        CHECK(eq_cloudevent(ce, &out2));
        ipc_cloudevent_decode_trusted(b.buf, &out2);
        CHECK(eq_cloudevent(ce, &out2));
        struct ipc_str id = ipc_cloudevent_id_trusted(b.buf);
        CHECK(id.len == out2.id.len &&
              (id.len == 0 || memcmp(id.ptr, out2.id.ptr, id.len) == 0));
        free(copy2);
    }
    free(copy);
    ipc_fb_builder_free(&b);
    ipc_fb_builder_free(&b2);
}

static void
test_event_all_fields(void)
{
    struct ipc_cloudevent ce = full_event();
    roundtrip_event(&ce, true);
}

static void
test_event_required_only(void)
{
    struct ipc_cloudevent ce = minimal_event();
    roundtrip_event(&ce, true);
}

/* No field at all: the FlatBuffers layer accepts it (the original schema
 * marks nothing required); the CloudEvents rules do not. */
static void
test_event_no_fields(void)
{
    struct ipc_cloudevent ce;
    memset(&ce, 0, sizeof ce);
    roundtrip_event(&ce, false);
}

/* Empty strings and an empty data vector are present, not absent. */
static void
test_event_empty_values(void)
{
    static const struct ipc_pair ext[] = {
        { { "e", 1 }, { "", 0 } },
    };
    static const uint8_t none[1];
    struct ipc_cloudevent ce = {
        .id = { "", 0 },
        .type = { "", 0 },
        .source = { "", 0 },
        .specversion = { "", 0 },
        .datacontenttype = { "", 0 },
        .dataschema = { "", 0 },
        .subject = { "", 0 },
        .time = { "", 0 },
        .data = { none, 0 },
        .extensions = { .n = 1, .items = ext },
    };
    roundtrip_event(&ce, false);

    struct ipc_fb_builder b;
    struct ipc_cloudevent out;
    ipc_fb_builder_init(&b);
    REQUIRE(ipc_cloudevent_encode(&b, &ce) == 0);
    REQUIRE(ipc_cloudevent_read(b.buf, b.len, &out, NULL) == 0);
    CHECK(out.id.ptr != NULL && out.id.len == 0 && out.id.ptr[0] == '\0');
    CHECK(out.time.ptr != NULL && out.time.len == 0);
    CHECK(out.data.ptr != NULL && out.data.len == 0);
    CHECK(out.extensions.n == 1);
    ipc_fb_builder_free(&b);
}

/* 64 KiB strings in every string field, a 1 MiB data vector and the 128
 * extensions the CloudEvents check allows, each with a 20-character name
 * and a 64 KiB value. */
static void
test_event_maximal(void)
{
    char *big = malloc(BIG_STRING);
    uint8_t *data = malloc(BIG_DATA);
    struct ipc_pair *ext = calloc(MAX_EXTENSIONS, sizeof *ext);
    char(*names)[21] = calloc(MAX_EXTENSIONS, sizeof *names);
    REQUIRE(big && data && ext && names);

    for (uint32_t i = 0; i < BIG_STRING; i++)
        big[i] = (char)('a' + i % 26);
    for (uint32_t i = 0; i < BIG_DATA; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 24);
    for (unsigned i = 0; i < MAX_EXTENSIONS; i++) {
        /* Twenty characters, unique by the leading digits. */
        snprintf(names[i], sizeof names[i], "%03u%s", i, &NAME20[3]);
        ext[i].name = ipc_str_c(names[i]);
        ext[i].value = (struct ipc_str){ big, BIG_STRING };
    }
    struct ipc_str s = { big, BIG_STRING };
    struct ipc_cloudevent ce = {
        .id = s,
        .type = s,
        .source = s,
        .specversion = s,
        .datacontenttype = s,
        .dataschema = s,
        .subject = s,
        .time = s,
        .data = { data, BIG_DATA },
        .extensions = { .n = MAX_EXTENSIONS, .items = ext },
    };
    roundtrip_event(&ce, true);
    free(big);
    free(data);
    free(ext);
    free(names);
}

/* ---- CloudEvents rules (ipc_cloudevent_check) ------------------------- */

static void
expect_app(const struct ipc_cloudevent *ce, const char *field,
           const char *detail_part)
{
    struct ipc_fb_error err;
    memset(&err, 0, sizeof err);
    CHECK(ipc_cloudevent_check(ce, &err) == -1);
    CHECK_EQ(err.code, IPC_FB_ERR_APP);
    CHECK(err.field != NULL && strcmp(err.field, field) == 0);
    CHECK(err.detail != NULL && strstr(err.detail, detail_part) != NULL);
}

static void
test_check_required_attributes(void)
{
    const char *names[] = { "id", "source", "specversion", "type" };
    for (unsigned i = 0; i < 4; i++) {
        struct ipc_cloudevent ce = minimal_event();
        struct ipc_str *field[] = { &ce.id, &ce.source, &ce.specversion,
                                    &ce.type };
        field[i]->ptr = NULL;
        field[i]->len = 0;
        expect_app(&ce, names[i], "missing");
        /* Present but empty is as bad as absent. */
        *field[i] = (struct ipc_str){ "", 0 };
        expect_app(&ce, names[i], "empty");
    }
    struct ipc_cloudevent ok = minimal_event();
    CHECK(ipc_cloudevent_check(&ok, NULL) == 0);
}

static void
test_check_extension_names(void)
{
    const char *bad[] = { "",       "Upper",    "with-dash", "dot.ted",
                          "sp ace", "\xc3\xa9", NAME20 "x" };
    const char *good[] = { "a", "0", NAME20, "correlationid" };
    struct ipc_cloudevent ce = minimal_event();
    struct ipc_pair p = { { NULL, 0 }, { "v", 1 } };

    ce.extensions.n = 1;
    ce.extensions.items = &p;
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p.name = ipc_str_c(bad[i]);
        expect_app(&ce, "name", "[a-z0-9]{1,20}");
    }
    /* A name with an embedded NUL is not [a-z0-9]. */
    p.name = (struct ipc_str){ "a\0b", 3 };
    expect_app(&ce, "name", "[a-z0-9]{1,20}");
    /* An absent name. */
    p.name = (struct ipc_str){ NULL, 0 };
    expect_app(&ce, "name", "[a-z0-9]{1,20}");
    for (unsigned i = 0; i < sizeof good / sizeof good[0]; i++) {
        p.name = ipc_str_c(good[i]);
        CHECK(ipc_cloudevent_check(&ce, NULL) == 0);
    }
    /* An extension needs a value (an empty one is fine). */
    p.name = ipc_str_c("x");
    p.value = (struct ipc_str){ NULL, 0 };
    expect_app(&ce, "value", "without a value");
    p.value = (struct ipc_str){ "", 0 };
    CHECK(ipc_cloudevent_check(&ce, NULL) == 0);
}

static void
test_check_repeated_extension(void)
{
    struct ipc_pair ext[] = {
        { { "a", 1 }, { "1", 1 } },
        { { "b", 1 }, { "2", 1 } },
        { { "a", 1 }, { "3", 1 } },
    };
    struct ipc_cloudevent ce = minimal_event();
    ce.extensions.n = 3;
    ce.extensions.items = ext;
    expect_app(&ce, "name", "repeated");
    /* A prefix is not a repeat. */
    ext[2].name = ipc_str_c("ab");
    CHECK(ipc_cloudevent_check(&ce, NULL) == 0);

    /* The rule holds on a decoded event too (the fb-backed list). */
    ext[2].name = ipc_str_c("a");
    struct ipc_fb_builder b;
    struct ipc_cloudevent out;
    ipc_fb_builder_init(&b);
    REQUIRE(ipc_cloudevent_encode(&b, &ce) == 0);
    REQUIRE(ipc_cloudevent_read(b.buf, b.len, &out, NULL) == 0);
    CHECK(out.extensions.items == NULL && out.extensions.fb != NULL);
    expect_app(&out, "name", "repeated");
    ipc_fb_builder_free(&b);
}

static void
test_check_too_many_extensions(void)
{
    struct ipc_pair ext[MAX_EXTENSIONS + 1];
    char names[MAX_EXTENSIONS + 1][8];
    struct ipc_cloudevent ce = minimal_event();

    for (unsigned i = 0; i <= MAX_EXTENSIONS; i++) {
        snprintf(names[i], sizeof names[i], "e%u", i);
        ext[i].name = ipc_str_c(names[i]);
        ext[i].value = ipc_str_c("v");
    }
    ce.extensions.items = ext;
    ce.extensions.n = MAX_EXTENSIONS;
    CHECK(ipc_cloudevent_check(&ce, NULL) == 0);
    ce.extensions.n = MAX_EXTENSIONS + 1;
    expect_app(&ce, "extensions", "more than 128");

    /* 129 extensions still verify as a FlatBuffer: the limit is the
     * CloudEvents check's, applied after decoding. */
    struct ipc_fb_builder b;
    struct ipc_cloudevent out;
    ipc_fb_builder_init(&b);
    REQUIRE(ipc_cloudevent_encode(&b, &ce) == 0);
    REQUIRE(ipc_cloudevent_read(b.buf, b.len, &out, NULL) == 0);
    CHECK_EQ(out.extensions.n, MAX_EXTENSIONS + 1);
    expect_app(&out, "extensions", "more than 128");
    ipc_fb_builder_free(&b);
}

static void
test_extension_lookup(void)
{
    struct ipc_cloudevent ce = full_event();
    struct ipc_fb_builder b;
    struct ipc_cloudevent out;

    ipc_fb_builder_init(&b);
    REQUIRE(ipc_cloudevent_encode(&b, &ce) == 0);
    REQUIRE(ipc_cloudevent_read(b.buf, b.len, &out, NULL) == 0);
    const struct ipc_cloudevent *both[] = { &ce, &out };
    for (unsigned i = 0; i < 2; i++) {
        CHECK(ipc_str_eq(ipc_cloudevent_extension(both[i], "correlationid"),
                         "c-42"));
        CHECK(ipc_str_eq(ipc_cloudevent_extension(both[i], "zeta"), ""));
        CHECK(ipc_cloudevent_extension(both[i], "missing").ptr == NULL);
        CHECK(ipc_cloudevent_extension(both[i], "alph").ptr == NULL);
        /* Order is kept: correlationid stays first. */
        struct ipc_pair first;
        ipc_pair_list_get(&both[i]->extensions, 0, &first);
        CHECK(ipc_str_eq(first.name, "correlationid"));
    }
    ipc_fb_builder_free(&b);
}

/* Extension tables whose name or value is absent verify (neither is
 * required by the schema) and decode as absent. */
static void
test_extension_absent_fields(void)
{
    const struct ipc_pair ext[] = {
        { { NULL, 0 }, { "only-value", 10 } },
        { { "onlyname", 8 }, { NULL, 0 } },
        { { NULL, 0 }, { NULL, 0 } },
    };
    struct ipc_cloudevent ce = minimal_event();
    ce.extensions.n = 3;
    ce.extensions.items = ext;
    roundtrip_event(&ce, false);
}

/* ---- WorkerResponse --------------------------------------------------- */

static void
roundtrip_response(const struct ipc_worker_response *r)
{
    struct ipc_fb_builder b;
    struct ipc_worker_response out;
    struct ipc_fb_error err;

    ipc_fb_builder_init(&b);
    REQUIRE(ipc_worker_response_encode(&b, r) == 0);
    unsigned char *copy = check_dup(b.buf, b.len);
    int rc = ipc_worker_response_read(copy, b.len, &out, &err);
    CHECK(rc == 0);
    if (rc == 0) {
        CHECK(out.has_result == r->has_result);
        if (r->has_result && out.has_result)
            CHECK(eq_cloudevent(&r->result_event, &out.result_event));
        CHECK(eq_str(r->error_message, out.error_message, "error_message"));
    }
    free(copy);
    ipc_fb_builder_free(&b);
}

static void
test_response_result(void)
{
    struct ipc_worker_response r = {
        .has_result = true,
        .result_event = full_event(),
    };
    roundtrip_response(&r);
    r.result_event = minimal_event();
    roundtrip_response(&r);
}

static void
test_response_error(void)
{
    struct ipc_worker_response r = {
        .error_message = ipc_str_c("worker failed: \xe2\x9c\x97"),
    };
    roundtrip_response(&r);
    /* An empty message is still a message. */
    r.error_message = (struct ipc_str){ "", 0 };
    roundtrip_response(&r);
}

static void
test_response_maximal(void)
{
    char *big = malloc(BIG_STRING);
    uint8_t *data = calloc(1, BIG_DATA);
    REQUIRE(big && data);
    memset(big, 'x', BIG_STRING);
    struct ipc_worker_response r = {
        .error_message = { big, BIG_STRING },
    };
    roundtrip_response(&r);
    r.error_message = (struct ipc_str){ NULL, 0 };
    r.has_result = true;
    r.result_event = minimal_event();
    r.result_event.data = (struct ipc_bytes){ data, BIG_DATA };
    roundtrip_response(&r);
    free(big);
    free(data);
}

/* Exactly one of result_event and error_message: both and neither are
 * application errors after a successful FlatBuffers verification. */
static void
test_response_exactly_one(void)
{
    struct ipc_worker_response both = {
        .has_result = true,
        .result_event = minimal_event(),
        .error_message = ipc_str_c("and an error"),
    };
    struct ipc_worker_response neither;
    const struct ipc_worker_response *cases[] = { &both, &neither };

    memset(&neither, 0, sizeof neither);
    for (unsigned i = 0; i < 2; i++) {
        struct ipc_fb_builder b;
        struct ipc_worker_response out;
        struct ipc_fb_error err;
        ipc_fb_builder_init(&b);
        REQUIRE(ipc_worker_response_encode(&b, cases[i]) == 0);
        REQUIRE(ipc_fb_verify(b.buf, b.len, 0, NULL,
                              &ipc_worker_response_schema, NULL, &err) == 0);
        memset(&err, 0, sizeof err);
        CHECK(ipc_worker_response_read(b.buf, b.len, &out, &err) == -1);
        CHECK_EQ(err.code, IPC_FB_ERR_APP);
        CHECK(err.detail && strstr(err.detail, "exactly one") != NULL);
        ipc_fb_builder_free(&b);
    }
}

/* The response's embedded event goes through the FlatBuffers verifier:
 * a bad offset inside it fails the read with a FlatBuffers code. */
static void
test_response_bad_event(void)
{
    struct ipc_worker_response r = {
        .has_result = true,
        .result_event = minimal_event(),
    };
    struct ipc_fb_builder b;
    struct ipc_worker_response out;
    struct ipc_fb_error err;

    ipc_fb_builder_init(&b);
    REQUIRE(ipc_worker_response_encode(&b, &r) == 0);
    const uint8_t *root = ipc_fb_root(b.buf, 0);
    uint16_t off = ipc_fb_field(root, 0);
    REQUIRE(off != 0);
    size_t slot = (size_t)(root + off - b.buf);
    /* Point result_event past the end of the buffer. */
    uint32_t far = (uint32_t)(b.len - slot + 64);
    memcpy(b.buf + slot, &far, 4);
    CHECK(ipc_worker_response_read(b.buf, b.len, &out, &err) == -1);
    CHECK_EQ(err.code, IPC_FB_ERR_OFFSET);
    CHECK(err.field && strcmp(err.field, "result_event") == 0);
    ipc_fb_builder_free(&b);
}

int
main(void)
{
    RUN(test_event_all_fields);
    RUN(test_event_required_only);
    RUN(test_event_no_fields);
    RUN(test_event_empty_values);
    RUN(test_event_maximal);
    RUN(test_check_required_attributes);
    RUN(test_check_extension_names);
    RUN(test_check_repeated_extension);
    RUN(test_check_too_many_extensions);
    RUN(test_extension_lookup);
    RUN(test_extension_absent_fields);
    RUN(test_response_result);
    RUN(test_response_error);
    RUN(test_response_maximal);
    RUN(test_response_exactly_one);
    RUN(test_response_bad_event);
    return check_result();
}
