/*
 * test_fb.c — the FlatBuffers primitives of ipc/fb.c: the builder's layout
 * promises, and one rejection test per verifier rule, each asserting the
 * rule's own enum ipc_fb_err code.
 *
 * Bad buffers are made by building a valid one with the typed codecs and
 * patching bytes at positions found with the reader helpers (root, vtable,
 * field slot, the target of an offset), or by hand-writing a few bytes.
 * Every verification runs on an exact-size heap copy, so that a verifier
 * that read one byte too far would trip AddressSanitizer.
 */
#include "config.h"

#include "ipc/fb.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/cloudevent.h"
#include "ipc/frame.h"
#include "tests/unit/check.h"

/* Field ids of the schemas (worker_api.fbs, frame.fbs). */
enum { CE_ID = 0, CE_TIME = 7, CE_DATA = 8, CE_EXTENSIONS = 9 };
enum { EXT_NAME = 0, EXT_VALUE = 1 };
enum { FR_SEQ = 0, FR_REPLY_TO, FR_BODY_TYPE, FR_BODY };
enum { PROCESS_EVENT = 0, RESULT_OUTPUTS = 0, LOAD_CONFIG = 7 };

/* ---- positions in a buffer (the reader helpers, as offsets) ------------ */

static size_t
at_root(const uint8_t *buf, size_t prefix)
{
    return (size_t)(ipc_fb_root(buf, prefix) - buf);
}

static size_t
at_vtable(const uint8_t *buf, size_t table)
{
    int32_t soff;
    memcpy(&soff, buf + table, 4);
    return (size_t)((int64_t)table - soff);
}

/* The position of field id's value (a scalar or an offset slot). */
static size_t
at_field(const uint8_t *buf, size_t table, unsigned id)
{
    uint16_t off = ipc_fb_field(buf + table, id);
    return off ? table + off : 0;
}

/* Where field id's offset points: a table, a string or a vector. */
static size_t
at_ref(const uint8_t *buf, size_t table, unsigned id)
{
    return (size_t)(ipc_fb_get_ref(buf + table, id) - buf);
}

static void
put_u16(uint8_t *buf, size_t pos, uint16_t v)
{
    memcpy(buf + pos, &v, 2);
}

static void
put_u32(uint8_t *buf, size_t pos, uint32_t v)
{
    memcpy(buf + pos, &v, 4);
}

/* ---- valid buffers to start from ------------------------------------- */

static const struct ipc_pair two_ext[] = {
    { { "correlationid", 13 }, { "c", 1 } },
    { { "b", 1 }, { "value-b", 7 } },
};
static const uint8_t some_data[] = { 1, 2, 3, 4, 5, 6, 7 };

static struct ipc_cloudevent
event(void)
{
    struct ipc_cloudevent ce = {
        .id = ipc_str_c("id-1"),
        .type = ipc_str_c("t"),
        .source = ipc_str_c("s"),
        .specversion = ipc_str_c("1.0"),
        .time = ipc_str_c("2024-01-01T00:00:00Z"),
        .data = { some_data, sizeof some_data },
        .extensions = { .n = 2, .items = two_ext },
    };
    return ce;
}

static void
build_event(struct ipc_fb_builder *b)
{
    struct ipc_cloudevent ce = event();
    ipc_fb_builder_init(b);
    if (ipc_cloudevent_encode(b, &ce))
        abort();
}

static void
build_frame(struct ipc_fb_builder *b, const struct ipc_frame *f)
{
    ipc_fb_builder_init(b);
    if (ipc_frame_encode(b, f, NULL))
        abort();
}

/* Result { outputs: [3 CloudEvents with 2 extensions each] }: 11 tables,
 * 4 deep (Frame, Result, CloudEvent, Extension). */
static void
build_result(struct ipc_fb_builder *b)
{
    struct ipc_cloudevent outs[3] = { event(), event(), event() };
    struct ipc_frame f = { .type = IPC_BODY_RESULT, .seq = 1 };
    f.u.result.outputs = (struct ipc_cloudevent_list){ .n = 3, .items = outs };
    build_frame(b, &f);
}

static struct ipc_fb_builder event_b; /* for Process frames */

static void
build_process(struct ipc_fb_builder *b)
{
    struct ipc_frame f = { .type = IPC_BODY_PROCESS, .seq = 1 };
    build_event(&event_b);
    f.u.process.event =
        (struct ipc_bytes){ event_b.buf, (uint32_t)event_b.len };
    build_frame(b, &f);
    ipc_fb_builder_free(&event_b);
}

/* ---- running the verifier --------------------------------------------- */

enum root { ROOT_EVENT, ROOT_RESPONSE, ROOT_FRAME };

static int
verify(const uint8_t *buf, size_t len, enum root root,
       const struct ipc_fb_limits *limits, struct ipc_fb_error *err)
{
    unsigned char *copy = check_dup(buf, len);
    int rc;

    memset(err, 0, sizeof *err);
    switch (root) {
    case ROOT_EVENT:
        rc = ipc_fb_verify(copy, len, 0, NULL, &ipc_cloudevent_schema, limits,
                           err);
        break;
    case ROOT_RESPONSE:
        rc = ipc_fb_verify(copy, len, 0, NULL, &ipc_worker_response_schema,
                           limits, err);
        break;
    default:
        rc = ipc_fb_verify(copy, len, 4, IPC_FRAME_IDENT, &ipc_frame_schema,
                           limits, err);
        break;
    }
    free(copy);
    return rc;
}

/* Verifies and checks the outcome's code (IPC_FB_OK: accepted) and, when
 * not NULL, the field the error names. */
#define EXPECT(buf, len, root, limits, code, field)                            \
    expect_code(__LINE__, buf, len, root, limits, code, field)

static struct ipc_fb_error last_err;

static void
expect_code(int line, const uint8_t *buf, size_t len, enum root root,
            const struct ipc_fb_limits *limits, enum ipc_fb_err code,
            const char *field)
{
    int rc = verify(buf, len, root, limits, &last_err);
    check_count++;
    if ((rc == 0) != (code == IPC_FB_OK) ||
        (rc != 0 && last_err.code != code) ||
        (rc != 0 && field &&
         (last_err.field == NULL || strcmp(last_err.field, field) != 0))) {
        char msg[256] = "accepted";
        if (rc)
            ipc_fb_error_format(&last_err, msg, sizeof msg);
        fprintf(stderr, "%s:%d: %s: expected %s%s%s, got %s (code %d)\n",
                __FILE__, line, check_test, ipc_fb_err_name(code),
                field ? " in " : "", field ? field : "", msg,
                rc ? (int)last_err.code : 0);
        check_failures++;
    }
}

/* ---- builder ----------------------------------------------------------- */

static void
test_builder_reserve_pad(void)
{
    struct ipc_fb_builder b;
    ipc_fb_builder_init(&b);
    size_t p = ipc_fb_reserve(&b, 3, 1);
    CHECK(p == 0 && b.len == 3);
    memset(b.buf, 0xaa, 3);
    p = ipc_fb_reserve(&b, 8, 8);
    CHECK(p == 8 && b.len == 16);
    /* Padding and reserved bytes are zero. */
    for (size_t i = 3; i < 16; i++)
        CHECK(b.buf[i] == 0);
    ipc_fb_pad(&b, 4);
    CHECK(b.len == 16);
    ipc_fb_reserve(&b, 1, 1);
    ipc_fb_pad(&b, 8);
    CHECK(b.len == 24 && b.buf[17] == 0 && b.buf[23] == 0);
    ipc_fb_put_u32(&b, 4, 0xdeadbeef);
    CHECK(ipc_fb_u32(b.buf + 4) == 0xdeadbeef);
    ipc_fb_patch(&b, 8, 20);
    CHECK(ipc_fb_u32(b.buf + 8) == 12 && ipc_fb_deref(b.buf + 8) == b.buf + 20);
    ipc_fb_builder_reset(&b);
    CHECK(b.len == 0 && !b.oom);
    ipc_fb_builder_free(&b);
    CHECK(b.buf == NULL && b.len == 0 && b.cap == 0);
}

static void
test_builder_strings_vectors(void)
{
    struct ipc_fb_builder b;
    ipc_fb_builder_init(&b);
    for (size_t junk = 0; junk < 8; junk++) {
        ipc_fb_builder_reset(&b);
        ipc_fb_reserve(&b, junk, 1);
        size_t s = ipc_fb_string(&b, (struct ipc_str){ "a\0c", 3 });
        CHECK(s % 4 == 0 && ipc_fb_u32(b.buf + s) == 3);
        CHECK(memcmp(b.buf + s + 4, "a\0c\0", 4) == 0);
        size_t e = ipc_fb_string(&b, (struct ipc_str){ "", 0 });
        CHECK(e % 4 == 0 && ipc_fb_u32(b.buf + e) == 0 && b.buf[e + 4] == 0);
        for (size_t align = 1; align <= 8; align *= 2) {
            size_t v =
                ipc_fb_bytes(&b, (struct ipc_bytes){ some_data, 7 }, align);
            /* The length word is 4-aligned, the first byte `align`ed. */
            CHECK(v % 4 == 0 && (v + 4) % (align < 4 ? 4 : align) == 0);
            CHECK(ipc_fb_u32(b.buf + v) == 7);
            CHECK(memcmp(b.buf + v + 4, some_data, 7) == 0);
        }
        size_t o = ipc_fb_offsets(&b, 5);
        CHECK(o % 4 == 0 && ipc_fb_u32(b.buf + o) == 5);
        CHECK(b.len == o + 4 + 20);
    }
    ipc_fb_builder_free(&b);
}

/* Tables: the vtable right before the table (a positive soffset), each
 * field aligned to its size relative to the buffer start whatever the
 * position the table starts at, and the table size covering them. */
static void
test_builder_table_layout(void)
{
    struct ipc_fb_builder b;
    ipc_fb_builder_init(&b);
    for (size_t junk = 0; junk < 16; junk++) {
        struct ipc_fb_table t;
        ipc_fb_builder_reset(&b);
        ipc_fb_reserve(&b, junk, 1);
        ipc_fb_table_begin(&t);
        ipc_fb_table_scalar(&t, 0, 1, 0x11);
        ipc_fb_table_scalar(&t, 1, 8, 0x0102030405060708u);
        ipc_fb_table_scalar(&t, 2, 2, 0x2222);
        ipc_fb_table_ref(&t, 3);
        ipc_fb_table_scalar(&t, 5, 4, 0x33333333);
        size_t pos = ipc_fb_table_end(&b, &t);
        REQUIRE(!b.oom);
        const uint8_t *tp = b.buf + pos;
        size_t vt = at_vtable(b.buf, pos);
        CHECK(pos % 4 == 0 && vt < pos && vt >= junk && vt % 2 == 0);
        CHECK(ipc_fb_u16(b.buf + vt) == 4 + 2 * 6);
        uint16_t tsize = ipc_fb_u16(b.buf + vt + 2);
        CHECK(pos + tsize == b.len);
        const unsigned sizes[] = { 1, 8, 2, 4, 0, 4 };
        for (unsigned id = 0; id < 6; id++) {
            uint16_t off = ipc_fb_field(tp, id);
            if (sizes[id] == 0) {
                CHECK(off == 0);
                continue;
            }
            CHECK(off >= 4 && off + sizes[id] <= tsize);
            CHECK((pos + off) % sizes[id] == 0);
            CHECK(t.slot[id] == pos + off);
        }
        CHECK(ipc_fb_get_scalar(tp, 0, 1, 9) == 0x11);
        CHECK(ipc_fb_get_scalar(tp, 1, 8, 9) == 0x0102030405060708u);
        CHECK(ipc_fb_get_scalar(tp, 2, 2, 9) == 0x2222);
        CHECK(ipc_fb_get_scalar(tp, 4, 4, 9) == 9); /* absent: default */
        CHECK(ipc_fb_get_scalar(tp, 5, 4, 9) == 0x33333333);
        CHECK(ipc_fb_get_scalar(tp, 12, 4, 7) == 7); /* past the vtable */
        CHECK(ipc_fb_get_ref(tp, 4) == NULL);
        /* The reserved offset slot is zero until patched. */
        CHECK(ipc_fb_u32(b.buf + t.slot[3]) == 0);
    }
    /* An empty table: a 4-byte vtable and a 4-byte table. */
    struct ipc_fb_table e;
    ipc_fb_builder_reset(&b);
    ipc_fb_table_begin(&e);
    size_t pos = ipc_fb_table_end(&b, &e);
    CHECK(ipc_fb_u16(b.buf + at_vtable(b.buf, pos)) == 4);
    CHECK(ipc_fb_u16(b.buf + at_vtable(b.buf, pos) + 2) == 4);
    ipc_fb_builder_free(&b);
}

static void
test_builder_start_finish(void)
{
    struct ipc_fb_builder b;
    struct ipc_fb_table t;

    ipc_fb_builder_init(&b);
    size_t root = ipc_fb_start(&b, true, "ABCD");
    CHECK(root == 4 && memcmp(b.buf + 8, "ABCD", 4) == 0);
    ipc_fb_table_begin(&t);
    ipc_fb_table_scalar(&t, 0, 1, 1);
    ipc_fb_patch(&b, root, ipc_fb_table_end(&b, &t));
    CHECK(ipc_fb_finish(&b, root, true) == 0);
    CHECK(b.len % 8 == 0 && ipc_fb_u32(b.buf) == b.len - 4);

    ipc_fb_builder_reset(&b);
    root = ipc_fb_start(&b, false, NULL);
    CHECK(root == 0 && b.len == 4);
    ipc_fb_table_begin(&t);
    ipc_fb_patch(&b, root, ipc_fb_table_end(&b, &t));
    CHECK(ipc_fb_finish(&b, root, false) == 0);
    CHECK(b.len % 8 == 0);
    ipc_fb_builder_free(&b);
}

/* Running out of memory (here: asking for more than the format's 2 GiB)
 * sets a sticky flag that the finishing call reports; the calls in
 * between are harmless. */
static void
test_builder_oom(void)
{
    struct ipc_fb_builder b;
    struct ipc_fb_table t;

    ipc_fb_builder_init(&b);
    size_t root = ipc_fb_start(&b, true, IPC_FRAME_IDENT);
    ipc_fb_reserve(&b, (size_t)1 << 31, 1);
    CHECK(b.oom);
    ipc_fb_table_begin(&t);
    ipc_fb_table_ref(&t, 0);
    ipc_fb_patch(&b, root, ipc_fb_table_end(&b, &t));
    ipc_fb_string(&b, ipc_str_c("x"));
    ipc_fb_bytes(&b, (struct ipc_bytes){ some_data, 7 }, 8);
    ipc_fb_offsets(&b, 3);
    CHECK(ipc_fb_finish(&b, root, true) == -1);
    /* Reset clears the flag and the builder works again. */
    ipc_fb_builder_reset(&b);
    CHECK(!b.oom);
    struct ipc_frame f = { .type = IPC_BODY_HEARTBEAT };
    CHECK(ipc_frame_encode(&b, &f, NULL) == 0);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_OK, NULL);
    ipc_fb_builder_free(&b);
}

/* ---- the verifier: valid buffers --------------------------------------- */

static void
test_verify_valid(void)
{
    struct ipc_fb_builder b;
    build_event(&b);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_OK, NULL);
    ipc_fb_builder_free(&b);
    build_result(&b);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_OK, NULL);
    ipc_fb_builder_free(&b);
    build_process(&b);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_OK, NULL);
    ipc_fb_builder_free(&b);

    /* A hand-written minimal buffer: root offset, then a vtable and an
     * empty table overlapping nothing. */
    static const uint8_t tiny[12] = { 8, 0, 0, 0, 4, 0, 4, 0, 4, 0, 0, 0 };
    EXPECT(tiny, sizeof tiny, ROOT_RESPONSE, NULL, IPC_FB_OK, NULL);
}

/* Fields the schema does not know (a newer writer's) are ignored. */
static void
test_verify_unknown_fields(void)
{
    struct ipc_fb_builder b;
    struct ipc_fb_table t;

    ipc_fb_builder_init(&b);
    size_t root = ipc_fb_start(&b, false, NULL);
    ipc_fb_table_begin(&t);
    ipc_fb_table_ref(&t, CE_ID);
    ipc_fb_table_scalar(&t, 12, 8, UINT64_MAX);
    ipc_fb_table_scalar(&t, 15, 1, 1);
    ipc_fb_patch(&b, root, ipc_fb_table_end(&b, &t));
    ipc_fb_patch(&b, t.slot[CE_ID], ipc_fb_string(&b, ipc_str_c("x")));
    REQUIRE(ipc_fb_finish(&b, root, false) == 0);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_OK, NULL);
    ipc_fb_builder_free(&b);
}

/* ---- one test per rule ------------------------------------------------- */

/* Truncation: shorter than any buffer, or than a header. */
static void
test_rule_size(void)
{
    struct ipc_fb_builder b;
    build_event(&b);
    for (size_t len = 0; len < 12; len++)
        EXPECT(b.buf, len, ROOT_EVENT, NULL, IPC_FB_ERR_SIZE, NULL);
    /* Larger than the format allows: rejected before any byte is read. */
    CHECK(ipc_fb_verify(b.buf, (size_t)1 << 31, 0, NULL, &ipc_cloudevent_schema,
                        NULL, &last_err) == -1 &&
          last_err.code == IPC_FB_ERR_SIZE);
    ipc_fb_builder_free(&b);

    /* A frame too short for its prefix, or whose prefix is right but whose
     * rest cannot hold a root offset, an identifier and a table. */
    struct ipc_frame f = { .type = IPC_BODY_HEARTBEAT };
    build_frame(&b, &f);
    for (size_t len = 0; len < 8; len++)
        EXPECT(b.buf, len, ROOT_FRAME, NULL, IPC_FB_ERR_SIZE, NULL);
    for (size_t len = 8; len < 12; len++) {
        put_u32(b.buf, 0, (uint32_t)(len - 4));
        EXPECT(b.buf, len, ROOT_FRAME, NULL, IPC_FB_ERR_SIZE, NULL);
    }
    ipc_fb_builder_free(&b);
}

/* Truncation of a frame shows as a prefix mismatch at every length; a
 * prefix that lies about the length is refused the same way. */
static void
test_rule_prefix(void)
{
    struct ipc_fb_builder b;
    build_result(&b);
    for (size_t len = 12; len < b.len; len++)
        EXPECT(b.buf, len, ROOT_FRAME, NULL, IPC_FB_ERR_PREFIX, NULL);
    uint32_t good = ipc_fb_u32(b.buf);
    const uint32_t bad[] = { good + 1, good - 1, good + 4, 0, UINT32_MAX };
    for (unsigned i = 0; i < 5; i++) {
        put_u32(b.buf, 0, bad[i]);
        EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_PREFIX, NULL);
    }
    put_u32(b.buf, 0, good);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_OK, NULL);
    ipc_fb_builder_free(&b);
}

/* Truncation of an unprefixed buffer cuts a string or a vector short. */
static void
test_rule_truncated_body(void)
{
    struct ipc_fb_builder b;
    build_event(&b);
    size_t root = at_root(b.buf, 0);
    /* The builder writes front to back: the last extension's value is the
     * last string, its NUL the last byte that matters. */
    const uint8_t *ext = ipc_fb_get_ref(b.buf + root, CE_EXTENSIONS);
    const uint8_t *last = ipc_fb_vec_table(ext, 1);
    size_t value = (size_t)(ipc_fb_get_ref(last, EXT_VALUE) - b.buf);
    size_t nul = value + 4 + ipc_fb_u32(b.buf + value);
    EXPECT(b.buf, nul + 1, ROOT_EVENT, NULL, IPC_FB_OK, NULL);
    EXPECT(b.buf, nul, ROOT_EVENT, NULL, IPC_FB_ERR_STRING, "value");
    EXPECT(b.buf, value + 6, ROOT_EVENT, NULL, IPC_FB_ERR_STRING, "value");
    /* Cut inside the data vector (verified before the extensions). */
    size_t data = at_ref(b.buf, root, CE_DATA);
    EXPECT(b.buf, data + 6, ROOT_EVENT, NULL, IPC_FB_ERR_VECTOR, "data");
    ipc_fb_builder_free(&b);
}

static void
test_rule_ident(void)
{
    struct ipc_fb_builder b;
    struct ipc_frame f = { .type = IPC_BODY_HEARTBEAT };
    const char *bad[] = { "WMF2", "wmf1", "\0MF1", "VFR1" };

    build_frame(&b, &f);
    for (unsigned i = 0; i < 4; i++) {
        memcpy(b.buf + 8, bad[i], 4);
        EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_IDENT, NULL);
        /* Without an identifier to check, the same bytes are fine. */
        CHECK(ipc_fb_verify(b.buf, b.len, 4, NULL, &ipc_frame_schema, NULL,
                            NULL) == 0);
    }
    ipc_fb_builder_free(&b);
}

/* The root offset: zero, out of the buffer, negative as an soffset. */
static void
test_rule_root_offset(void)
{
    struct ipc_fb_builder b;
    build_event(&b);
    const uint32_t bad[] = { 0, (uint32_t)b.len, (uint32_t)b.len + 4,
                             0x80000000u, UINT32_MAX };
    for (unsigned i = 0; i < 5; i++) {
        put_u32(b.buf, 0, bad[i]);
        EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_OFFSET, NULL);
    }
    ipc_fb_builder_free(&b);

    /* The same in a frame, whose root offset follows the prefix. */
    struct ipc_frame f = { .type = IPC_BODY_HEARTBEAT };
    build_frame(&b, &f);
    put_u32(b.buf, 4, 0);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_OFFSET, NULL);
    put_u32(b.buf, 4, (uint32_t)b.len);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_OFFSET, NULL);
    ipc_fb_builder_free(&b);
}

/* A field's offset: zero (pointing at itself), out of the buffer, or
 * beyond 2^31. */
static void
test_rule_field_offset(void)
{
    struct ipc_fb_builder b;
    build_event(&b);
    size_t slot = at_field(b.buf, at_root(b.buf, 0), CE_ID);
    REQUIRE(slot != 0);
    uint32_t good = ipc_fb_u32(b.buf + slot);
    const uint32_t bad[] = { 0, (uint32_t)(b.len - slot),
                             (uint32_t)(b.len - slot + 4), 0x80000000u,
                             0xfffffffcu };
    for (unsigned i = 0; i < 5; i++) {
        put_u32(b.buf, slot, bad[i]);
        EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_OFFSET, "id");
    }
    put_u32(b.buf, slot, good);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_OK, NULL);
    ipc_fb_builder_free(&b);

    /* A table-valued field (the frame's union value) likewise. */
    struct ipc_frame f = { .type = IPC_BODY_HEARTBEAT };
    build_frame(&b, &f);
    slot = at_field(b.buf, at_root(b.buf, 4), FR_BODY);
    put_u32(b.buf, slot, (uint32_t)(b.len - slot));
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_OFFSET, "body");
    put_u32(b.buf, slot, 0);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_OFFSET, "body");
    ipc_fb_builder_free(&b);
}

/* The vtable: out of the buffer either way, odd-sized, or longer than
 * what is left. */
static void
test_rule_vtable(void)
{
    struct ipc_fb_builder b;
    build_event(&b);
    size_t root = at_root(b.buf, 0);
    size_t vt = at_vtable(b.buf, root);
    int32_t good;
    memcpy(&good, b.buf + root, 4);

    /* Before the buffer's start, at its end, far after it. */
    const int32_t bad[] = { (int32_t)root + 2, (int32_t)root + 64,
                            -(int32_t)(b.len - root), INT32_MIN };
    for (unsigned i = 0; i < 4; i++) {
        memcpy(b.buf + root, &bad[i], 4);
        EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_VTABLE, NULL);
    }
    memcpy(b.buf + root, &good, 4);

    uint16_t vtsize = ipc_fb_u16(b.buf + vt);
    put_u16(b.buf, vt, (uint16_t)(vtsize + 1));
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_VTABLE, NULL);
    put_u16(b.buf, vt, 0xfffe);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_VTABLE, NULL);
    put_u16(b.buf, vt, (uint16_t)(b.len - vt + 2));
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_VTABLE, NULL);
    /* Reaching exactly to the end is in range. */
    put_u16(b.buf, vt, (uint16_t)(b.len - vt));
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_OK, NULL);
    put_u16(b.buf, vt, vtsize);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_OK, NULL);
    ipc_fb_builder_free(&b);
}

/* Stricter: a vtable shorter than its own 4-byte header. */
static void
test_rule_vtable_header(void)
{
    struct ipc_fb_builder b;
    build_event(&b);
    size_t vt = at_vtable(b.buf, at_root(b.buf, 0));
    put_u16(b.buf, vt, 2);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_VTABLE_HEADER, NULL);
    put_u16(b.buf, vt, 0);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_VTABLE_HEADER, NULL);
    CHECK(ipc_fb_err_is_stricter(IPC_FB_ERR_VTABLE_HEADER));
    ipc_fb_builder_free(&b);
}

/* Stricter: a table size under 4, past the buffer, or smaller than the
 * fields the vtable places in the table. */
static void
test_rule_table_size(void)
{
    struct ipc_fb_builder b;
    build_event(&b);
    size_t root = at_root(b.buf, 0);
    size_t vt = at_vtable(b.buf, root);
    uint16_t tsize = ipc_fb_u16(b.buf + vt + 2);

    put_u16(b.buf, vt + 2, 2);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_TABLE_SIZE, NULL);
    put_u16(b.buf, vt + 2, (uint16_t)(b.len - root + 4));
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_TABLE_SIZE, NULL);
    put_u16(b.buf, vt + 2, 4);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_TABLE_SIZE, "id");
    put_u16(b.buf, vt + 2, tsize);

    /* A field moved to just past the table's end, still in the buffer. */
    put_u16(b.buf, vt + 4 + 2 * CE_ID, (uint16_t)(tsize + (4 - tsize % 4) % 4));
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_TABLE_SIZE, "id");
    CHECK(ipc_fb_err_is_stricter(IPC_FB_ERR_TABLE_SIZE));
    ipc_fb_builder_free(&b);

    /* A union's value slot too: the Frame table cut to end where its body
     * offset starts (the body type, after it, taken out of the vtable). */
    struct ipc_frame f = { .type = IPC_BODY_HEARTBEAT };
    build_frame(&b, &f);
    root = at_root(b.buf, 4);
    vt = at_vtable(b.buf, root);
    uint16_t body = ipc_fb_u16(b.buf + vt + 4 + 2 * FR_BODY);
    put_u16(b.buf, vt + 4 + 2 * FR_BODY_TYPE, 0);
    put_u16(b.buf, vt + 2, body);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_TABLE_SIZE, "body");
    put_u16(b.buf, vt + 2, (uint16_t)(body + 4));
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_UNION_NONE, "body");
    ipc_fb_builder_free(&b);
}

/* A field, or a table a vector points to, outside the buffer. */
static void
test_rule_bounds(void)
{
    struct ipc_fb_builder b;

    /* Google's verifier checks fields against the buffer only; a field
     * whose slot lies past the end is out of bounds before it is beyond
     * its table. */
    build_event(&b);
    size_t root = at_root(b.buf, 0);
    size_t vt = at_vtable(b.buf, root);
    put_u16(b.buf, vt + 4 + 2 * CE_TIME,
            (uint16_t)((b.len - root + 3) & ~(size_t)3));
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_BOUNDS, "time");
    ipc_fb_builder_free(&b);

    /* An element of a vector of tables pointing past the end. */
    build_event(&b);
    root = at_root(b.buf, 0);
    size_t vec = at_ref(b.buf, root, CE_EXTENSIONS);
    put_u32(b.buf, vec + 4, (uint32_t)((b.len - vec - 4 + 3) & ~(size_t)3));
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_BOUNDS, NULL);
    ipc_fb_builder_free(&b);
}

/* Misalignment of a table, a vtable, a u64 field, a u16 field, an offset
 * slot and a vector's length word, each relative to the buffer's start
 * (the size prefix's, for frames). */
static void
test_rule_align(void)
{
    struct ipc_fb_builder b;

    /* A table: the root offset moved by 2. */
    build_event(&b);
    put_u32(b.buf, 0, ipc_fb_u32(b.buf) + 2);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_ALIGN, NULL);
    ipc_fb_builder_free(&b);

    /* A vtable at an odd position. */
    build_event(&b);
    size_t root = at_root(b.buf, 0);
    int32_t soff;
    memcpy(&soff, b.buf + root, 4);
    soff += 1;
    memcpy(b.buf + root, &soff, 4);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_ALIGN, NULL);
    ipc_fb_builder_free(&b);

    /* A vector's length word: the id string's offset moved by 2. */
    build_event(&b);
    root = at_root(b.buf, 0);
    size_t slot = at_field(b.buf, root, CE_ID);
    put_u32(b.buf, slot, ipc_fb_u32(b.buf + slot) + 2);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_ALIGN, "id");
    /* An offset slot: id's voffset moved by 2. */
    put_u32(b.buf, slot, ipc_fb_u32(b.buf + slot) - 2);
    size_t vt = at_vtable(b.buf, root);
    put_u16(b.buf, vt + 4, (uint16_t)(ipc_fb_u16(b.buf + vt + 4) + 2));
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_ALIGN, "id");
    ipc_fb_builder_free(&b);

    /* A u64 field: Frame.seq moved by 4 inside its table. */
    struct ipc_frame f = { .type = IPC_BODY_HEARTBEAT, .seq = 5 };
    build_frame(&b, &f);
    root = at_root(b.buf, 4);
    vt = at_vtable(b.buf, root);
    uint16_t off = ipc_fb_u16(b.buf + vt + 4 + 2 * FR_SEQ);
    CHECK((root + off) % 8 == 0);
    put_u16(b.buf, vt + 4 + 2 * FR_SEQ, (uint16_t)(off + 4));
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_ALIGN, "seq");
    ipc_fb_builder_free(&b);

    /* A u16 field: Hello.protocol at an odd offset. */
    f = (struct ipc_frame){ .type = IPC_BODY_HELLO };
    f.u.hello.protocol = 1;
    build_frame(&b, &f);
    size_t body = at_ref(b.buf, at_root(b.buf, 4), FR_BODY);
    vt = at_vtable(b.buf, body);
    off = ipc_fb_u16(b.buf + vt + 4);
    put_u16(b.buf, vt + 4, (uint16_t)(off + 1));
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_ALIGN, "protocol");
    ipc_fb_builder_free(&b);
}

/* A string whose NUL is missing, or whose length runs off the end. */
static void
test_rule_string(void)
{
    struct ipc_fb_builder b;
    build_event(&b);
    size_t s = at_ref(b.buf, at_root(b.buf, 0), CE_ID);
    uint32_t len = ipc_fb_u32(b.buf + s);
    b.buf[s + 4 + len] = 'x';
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_STRING, "id");
    b.buf[s + 4 + len] = 0;
    const uint32_t bad[] = { (uint32_t)(b.len - s - 4), (uint32_t)(b.len - s),
                             0x7ffffffe, UINT32_MAX };
    for (unsigned i = 0; i < 4; i++) {
        put_u32(b.buf, s, bad[i]);
        EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_STRING, "id");
    }
    put_u32(b.buf, s, len);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_OK, NULL);
    ipc_fb_builder_free(&b);
}

/* A vector's length reaching past the end, or large enough to overflow a
 * byte count. */
static void
test_rule_vector(void)
{
    struct ipc_fb_builder b;
    build_event(&b);
    size_t root = at_root(b.buf, 0);
    size_t data = at_ref(b.buf, root, CE_DATA);
    const uint32_t bad[] = { (uint32_t)(b.len - data - 3), 0x7fffffff,
                             UINT32_MAX };
    for (unsigned i = 0; i < 3; i++) {
        put_u32(b.buf, data, bad[i]);
        EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_VECTOR, "data");
    }
    /* Exactly what is left still fits. */
    put_u32(b.buf, data, (uint32_t)(b.len - data - 4));
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_OK, NULL);
    ipc_fb_builder_free(&b);

    build_event(&b);
    root = at_root(b.buf, 0);
    size_t ext = at_ref(b.buf, root, CE_EXTENSIONS);
    const uint32_t bad4[] = { (uint32_t)((b.len - ext) / 4), 0x1fffffff,
                              0x40000000, UINT32_MAX };
    for (unsigned i = 0; i < 4; i++) {
        put_u32(b.buf, ext, bad4[i]);
        EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_VECTOR, "extensions");
    }
    ipc_fb_builder_free(&b);
}

/* Depth: Frame > Result > CloudEvent > Extension is 4 tables deep. */
static void
test_rule_depth(void)
{
    struct ipc_fb_builder b;
    build_result(&b);
    const struct ipc_fb_limits three = { .max_depth = 3, .max_tables = 1000 };
    const struct ipc_fb_limits four = { .max_depth = 4, .max_tables = 1000 };
    EXPECT(b.buf, b.len, ROOT_FRAME, &three, IPC_FB_ERR_DEPTH, NULL);
    CHECK(last_err.table && strcmp(last_err.table, "Extension") == 0);
    EXPECT(b.buf, b.len, ROOT_FRAME, &four, IPC_FB_OK, NULL);
    const struct ipc_fb_limits one = { .max_depth = 1, .max_tables = 1000 };
    EXPECT(b.buf, b.len, ROOT_FRAME, &one, IPC_FB_ERR_DEPTH, NULL);
    CHECK(last_err.table && strcmp(last_err.table, "Result") == 0);
    ipc_fb_builder_free(&b);
}

/* Table count: that Result holds 1 + 1 + 3 + 6 = 11 tables. */
static void
test_rule_tables(void)
{
    struct ipc_fb_builder b;
    build_result(&b);
    const struct ipc_fb_limits ten = { .max_depth = 64, .max_tables = 10 };
    const struct ipc_fb_limits eleven = { .max_depth = 64, .max_tables = 11 };
    EXPECT(b.buf, b.len, ROOT_FRAME, &ten, IPC_FB_ERR_TABLES, NULL);
    EXPECT(b.buf, b.len, ROOT_FRAME, &eleven, IPC_FB_OK, NULL);
    ipc_fb_builder_free(&b);

    /* A nested buffer is counted on its own, with fresh counters, as
     * Google's verifier does: Frame and Process (2), then the event's
     * CloudEvent and 2 Extensions (3). */
    build_process(&b);
    const struct ipc_fb_limits three = { .max_depth = 64, .max_tables = 3 };
    const struct ipc_fb_limits two = { .max_depth = 64, .max_tables = 2 };
    EXPECT(b.buf, b.len, ROOT_FRAME, &three, IPC_FB_OK, NULL);
    EXPECT(b.buf, b.len, ROOT_FRAME, &two, IPC_FB_ERR_TABLES, NULL);
    CHECK(last_err.table && strcmp(last_err.table, "Extension") == 0);
    ipc_fb_builder_free(&b);
}

/* Required fields absent (more, per table, in test_frame.c). */
static void
test_rule_required(void)
{
    struct ipc_fb_builder b;
    struct ipc_frame f = { .type = IPC_BODY_GATEWAY_CALL };
    f.u.gateway_call.service = ipc_str_c("s");
    build_frame(&b, &f);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_REQUIRED, "method");
    CHECK(last_err.table && strcmp(last_err.table, "GatewayCall") == 0);
    ipc_fb_builder_free(&b);

    /* The union value: its slot zeroed in the vtable. */
    f = (struct ipc_frame){ .type = IPC_BODY_HEARTBEAT };
    build_frame(&b, &f);
    size_t vt = at_vtable(b.buf, at_root(b.buf, 4));
    put_u16(b.buf, vt + 4 + 2 * FR_BODY, 0);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_REQUIRED, "body");
    ipc_fb_builder_free(&b);
}

/* Stricter: a union type this build does not know. */
static void
test_rule_union_unknown(void)
{
    struct ipc_fb_builder b;
    struct ipc_frame f = { .type = IPC_BODY_HEARTBEAT };
    build_frame(&b, &f);
    size_t type = at_field(b.buf, at_root(b.buf, 4), FR_BODY_TYPE);
    REQUIRE(type != 0);
    const uint8_t bad[] = { IPC_BODY_MAX + 1, 100, 255 };
    for (unsigned i = 0; i < 3; i++) {
        b.buf[type] = bad[i];
        EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_UNION, "body");
    }
    /* Every known type verifies the empty Heartbeat table as its own
     * (none but the ones with required fields refuse it). */
    for (uint8_t t = 1; t <= IPC_BODY_MAX; t++) {
        b.buf[type] = t;
        bool needs = t == IPC_BODY_LOAD || t == IPC_BODY_PROCESS ||
                     t == IPC_BODY_GATEWAY_CALL || t == IPC_BODY_LOG ||
                     t == IPC_BODY_FORK;
        EXPECT(b.buf, b.len, ROOT_FRAME, NULL,
               needs ? IPC_FB_ERR_REQUIRED : IPC_FB_OK, NULL);
    }
    CHECK(ipc_fb_err_is_stricter(IPC_FB_ERR_UNION));
    ipc_fb_builder_free(&b);
}

/* Stricter: a union value present while its type says NONE, whether the
 * type byte is 0 or absent from the vtable. */
static void
test_rule_union_none(void)
{
    struct ipc_fb_builder b;
    struct ipc_frame f = { .type = IPC_BODY_SHUTDOWN };
    build_frame(&b, &f);
    size_t root = at_root(b.buf, 4);
    size_t type = at_field(b.buf, root, FR_BODY_TYPE);
    b.buf[type] = 0;
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_UNION_NONE, "body");
    b.buf[type] = IPC_BODY_SHUTDOWN;
    size_t vt = at_vtable(b.buf, root);
    put_u16(b.buf, vt + 4 + 2 * FR_BODY_TYPE, 0);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_UNION_NONE, "body");
    CHECK(ipc_fb_err_is_stricter(IPC_FB_ERR_UNION_NONE));
    ipc_fb_builder_free(&b);
}

/* A nested buffer smaller than any FlatBuffer; errors inside a nested
 * buffer report offsets in the outer one. */
static void
test_rule_nested(void)
{
    struct ipc_fb_builder b;
    build_process(&b);
    size_t body = at_ref(b.buf, at_root(b.buf, 4), FR_BODY);
    size_t ev = at_ref(b.buf, body, PROCESS_EVENT);
    uint32_t n = ipc_fb_u32(b.buf + ev);
    const uint32_t small[] = { 0, 4, 11 };
    for (unsigned i = 0; i < 3; i++) {
        put_u32(b.buf, ev, small[i]);
        EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_NESTED, "event");
    }
    put_u32(b.buf, ev, n);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_OK, NULL);

    /* The nested root offset zeroed: an OFFSET error at the nested
     * buffer's first byte, counted from the frame's start. */
    put_u32(b.buf, ev + 4, 0);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_OFFSET, NULL);
    CHECK_EQ(last_err.offset, ev + 4);
    CHECK(last_err.table && strcmp(last_err.table, "CloudEvent") == 0);
    ipc_fb_builder_free(&b);

    /* Alignment inside a nested buffer is relative to its first byte:
     * shifting the event by 4 in the frame (its length word too) keeps
     * it valid, as Google's verifier has it. */
    build_process(&b);
    body = at_ref(b.buf, at_root(b.buf, 4), FR_BODY);
    size_t slot = at_field(b.buf, body, PROCESS_EVENT);
    ev = at_ref(b.buf, body, PROCESS_EVENT);
    uint8_t *grown = calloc(1, b.len + 8);
    REQUIRE(grown);
    memcpy(grown, b.buf, ev);
    memcpy(grown + ev + 4, b.buf + ev, b.len - ev);
    put_u32(grown, 0, (uint32_t)(b.len + 8 - 4));
    put_u32(grown, slot, ipc_fb_u32(b.buf + slot) + 4);
    EXPECT(grown, b.len + 8, ROOT_FRAME, NULL, IPC_FB_OK, NULL);
    free(grown);
    ipc_fb_builder_free(&b);
}

/* Stricter: a zero offset inside a vector of tables (it would make the
 * slot itself a table). */
static void
test_rule_vec_offset(void)
{
    struct ipc_fb_builder b;
    build_event(&b);
    size_t ext = at_ref(b.buf, at_root(b.buf, 0), CE_EXTENSIONS);
    put_u32(b.buf, ext + 8, 0);
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_VEC_OFFSET, "extensions");
    ipc_fb_builder_free(&b);

    build_result(&b);
    size_t body = at_ref(b.buf, at_root(b.buf, 4), FR_BODY);
    size_t outs = at_ref(b.buf, body, RESULT_OUTPUTS);
    put_u32(b.buf, outs + 4, 0);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_VEC_OFFSET, "outputs");
    ipc_fb_builder_free(&b);

    static const struct ipc_pair cfg[] = { { { "n", 1 }, { "v", 1 } } };
    struct ipc_frame f = { .type = IPC_BODY_LOAD };
    f.u.load = (struct ipc_load){ .worker_id = ipc_str_c("w"),
                                  .mime = ipc_str_c("m"),
                                  .config = { .n = 1, .items = cfg } };
    build_frame(&b, &f);
    body = at_ref(b.buf, at_root(b.buf, 4), FR_BODY);
    size_t vec = at_ref(b.buf, body, LOAD_CONFIG);
    put_u32(b.buf, vec + 4, 0);
    EXPECT(b.buf, b.len, ROOT_FRAME, NULL, IPC_FB_ERR_VEC_OFFSET, "config");
    CHECK(ipc_fb_err_is_stricter(IPC_FB_ERR_VEC_OFFSET));
    ipc_fb_builder_free(&b);
}

/* ---- error reporting ---------------------------------------------------- */

static void
test_err_names_and_format(void)
{
    const char *seen[IPC_FB_ERR_APP + 1];
    for (int c = IPC_FB_OK; c <= IPC_FB_ERR_APP; c++) {
        seen[c] = ipc_fb_err_name((enum ipc_fb_err)c);
        CHECK(seen[c] != NULL && strcmp(seen[c], "unknown error") != 0);
        for (int d = 0; d < c; d++)
            CHECK(strcmp(seen[c], seen[d]) != 0);
    }
    CHECK(strcmp(ipc_fb_err_name((enum ipc_fb_err)(IPC_FB_ERR_APP + 1)),
                 "unknown error") == 0);

    /* Exactly the documented rules are stricter than Google's. */
    for (int c = IPC_FB_OK; c <= IPC_FB_ERR_APP; c++) {
        bool stricter = c == IPC_FB_ERR_VTABLE_HEADER ||
                        c == IPC_FB_ERR_TABLE_SIZE ||
                        c == IPC_FB_ERR_VEC_OFFSET || c == IPC_FB_ERR_UNION ||
                        c == IPC_FB_ERR_UNION_NONE || c == IPC_FB_ERR_APP;
        CHECK(ipc_fb_err_is_stricter((enum ipc_fb_err)c) == stricter);
    }

    struct ipc_fb_builder b;
    char msg[256];
    build_event(&b);
    size_t s = at_ref(b.buf, at_root(b.buf, 0), CE_ID);
    b.buf[s + 4 + ipc_fb_u32(b.buf + s)] = 'x';
    EXPECT(b.buf, b.len, ROOT_EVENT, NULL, IPC_FB_ERR_STRING, "id");
    ipc_fb_error_format(&last_err, msg, sizeof msg);
    CHECK(strstr(msg, "CloudEvent.id: ") == msg);
    CHECK(strstr(msg, ipc_fb_err_name(IPC_FB_ERR_STRING)) != NULL);
    CHECK_EQ(last_err.offset, s);
    /* A short output buffer is cut, not overrun. */
    char tiny[8];
    ipc_fb_error_format(&last_err, tiny, sizeof tiny);
    CHECK(strlen(tiny) == 7);
    ipc_fb_builder_free(&b);

    /* An application error shows its detail. */
    struct ipc_fb_error app = { .code = IPC_FB_ERR_APP,
                                .table = "Log",
                                .field = "level",
                                .detail = "unknown log level" };
    ipc_fb_error_format(&app, msg, sizeof msg);
    CHECK(strstr(msg, "Log.level: unknown log level") == msg);
}

int
main(void)
{
    RUN(test_builder_reserve_pad);
    RUN(test_builder_strings_vectors);
    RUN(test_builder_table_layout);
    RUN(test_builder_start_finish);
    RUN(test_builder_oom);
    RUN(test_verify_valid);
    RUN(test_verify_unknown_fields);
    RUN(test_rule_size);
    RUN(test_rule_prefix);
    RUN(test_rule_truncated_body);
    RUN(test_rule_ident);
    RUN(test_rule_root_offset);
    RUN(test_rule_field_offset);
    RUN(test_rule_vtable);
    RUN(test_rule_vtable_header);
    RUN(test_rule_table_size);
    RUN(test_rule_bounds);
    RUN(test_rule_align);
    RUN(test_rule_string);
    RUN(test_rule_vector);
    RUN(test_rule_depth);
    RUN(test_rule_tables);
    RUN(test_rule_required);
    RUN(test_rule_union_unknown);
    RUN(test_rule_union_none);
    RUN(test_rule_nested);
    RUN(test_rule_vec_offset);
    RUN(test_err_names_and_format);
    return check_result();
}
