/*
 * test_worker_api.c — the worker author's helpers of
 * include/workmanager/worker_api.h, held to the project's own codec
 * (ipc/cloudevent.c), which the engine runs on every worker output.
 *
 * Building: each response the helpers build must pass
 * ipc_worker_response_read() (the verifier, stricter than Google's, and
 * the exactly-one rule) and decode to the value that was given.  Reading:
 * events encoded by ipc_cloudevent_encode() must read back field by field,
 * extensions in order, and an echo of them must round-trip.  Refusal:
 * every truncation, random bytes and random mutations of a valid event must
 * get the same verdict from virtufin_event_read() as from ipc_fb_verify(),
 * and an accepted buffer must read as ipc_cloudevent_decode() reads it;
 * every buffer is an exact-size heap copy, so that AddressSanitizer sees
 * any read past its end.
 */
#include "config.h"

#include "workmanager/worker_api.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/cloudevent.h"
#include "tests/unit/check.h"
#include "tests/unit/codec_eq.h"

/* Random rounds: enough to reach the accepting mutations often (a few
 * thousand of them) while staying well under a second. */
#define MUTATION_ROUNDS 20000
#define GARBAGE_ROUNDS 20000
#define GARBAGE_MAX_LEN 256
/* The project's builder pads a buffer's end to 8 bytes: cutting more than
 * 7 always cuts into the last object written. */
#define BUILDER_PAD 8

static const uint8_t sample_data[] = { 0x00, 0xff, 0x7f, 0x80, 0x00,
                                       0x01, '{',  '}',  0xc3, 0xa9 };

static const struct ipc_pair sample_ext[] = {
    { { "correlationid", 13 }, { "c-42", 4 } },
    { { "zeta", 4 }, { "", 0 } },
    { { "alpha", 5 }, { "v\"\n\\", 4 } },
};

/* Every attribute set: UTF-8, an embedded NUL, binary data with NULs,
 * correlationid first and the others unsorted. */
static struct ipc_cloudevent
full_event(void)
{
    struct ipc_cloudevent ce = {
        .id = ipc_str_c("id-1"),
        .type = ipc_str_c("com.example.order.created"),
        .source = ipc_str_c("/orders/\xc3\xa9t\xc3\xa9"),
        .specversion = ipc_str_c("1.0"),
        .datacontenttype = ipc_str_c("application/octet-stream"),
        .dataschema = ipc_str_c("https://example.com/schema"),
        .subject = { "a\0b", 3 },
        .time = ipc_str_c("2024-01-02T03:04:05Z"),
        .data = { sample_data, sizeof sample_data },
        .extensions = { .n = 3, .items = sample_ext },
    };
    return ce;
}

/* Only what CloudEvents requires: the optional attributes absent. */
static struct ipc_cloudevent
minimal_event(void)
{
    struct ipc_cloudevent ce = {
        .id = ipc_str_c("m"),
        .type = ipc_str_c("t"),
        .source = ipc_str_c("s"),
        .specversion = ipc_str_c("1.0"),
    };
    return ce;
}

static struct ipc_str
from_v(struct virtufin_str s)
{
    struct ipc_str r = { s.ptr, s.len };
    return r;
}

static struct virtufin_str
to_v(struct ipc_str s)
{
    struct virtufin_str r = { s.ptr, s.len };
    return r;
}

/* The helpers' view of an event as the codec's, for eq_cloudevent();
 * pairs holds its extensions (room for ev->n_extensions).  Returns -1 when
 * an extension cannot be read. */
static int
as_ipc(const struct virtufin_event *ev, struct ipc_pair *pairs,
       struct ipc_cloudevent *ce)
{
    memset(ce, 0, sizeof *ce);
    ce->id = from_v(ev->id);
    ce->type = from_v(ev->type);
    ce->source = from_v(ev->source);
    ce->specversion = from_v(ev->specversion);
    ce->datacontenttype = from_v(ev->datacontenttype);
    ce->dataschema = from_v(ev->dataschema);
    ce->subject = from_v(ev->subject);
    ce->time = from_v(ev->time);
    ce->data.ptr = ev->data.ptr;
    ce->data.len = ev->data.len;
    for (uint32_t i = 0; i < ev->n_extensions; i++) {
        struct virtufin_extension e;
        if (virtufin_event_extension_at(ev, i, &e) != VIRTUFIN_OK)
            return -1;
        pairs[i].name = from_v(e.name);
        pairs[i].value = from_v(e.value);
    }
    ce->extensions.n = ev->n_extensions;
    ce->extensions.items = pairs;
    return 0;
}

/* The codec's event as the helpers' (extensions from pairs). */
static void
as_virtufin(const struct ipc_cloudevent *ce, struct virtufin_extension *exts,
            struct virtufin_event *ev)
{
    virtufin_event_init(ev);
    ev->id = to_v(ce->id);
    ev->type = to_v(ce->type);
    ev->source = to_v(ce->source);
    ev->specversion = to_v(ce->specversion);
    ev->datacontenttype = to_v(ce->datacontenttype);
    ev->dataschema = to_v(ce->dataschema);
    ev->subject = to_v(ce->subject);
    ev->time = to_v(ce->time);
    ev->data.ptr = ce->data.ptr;
    ev->data.len = ce->data.len;
    for (uint32_t i = 0; i < ce->extensions.n; i++) {
        struct ipc_pair p;
        ipc_pair_list_get(&ce->extensions, i, &p);
        exts[i].name = to_v(p.name);
        exts[i].value = to_v(p.value);
    }
    ev->extensions = ce->extensions.n ? exts : NULL;
    ev->n_extensions = ce->extensions.n;
}

/* An ABI CloudEvent buffer of ce, as an exact-size heap copy. */
static uint8_t *
encode(const struct ipc_cloudevent *ce, size_t *len)
{
    struct ipc_fb_builder b;
    uint8_t *out = NULL;

    ipc_fb_builder_init(&b);
    if (ipc_cloudevent_encode(&b, ce) == 0) {
        out = check_dup(b.buf, b.len);
        *len = b.len;
    }
    ipc_fb_builder_free(&b);
    return out;
}

/* Checks that buf[0..len) is a WorkerResponse holding want's event: the
 * project's verifier, the exactly-one rule, the CloudEvents rules and the
 * value.  The buffer is checked from an exact-size copy. */
static void
check_response_event(const uint8_t *buf, int32_t len,
                     const struct ipc_cloudevent *want)
{
    struct ipc_worker_response wr;
    struct ipc_fb_error fe;
    char why[256] = "";

    REQUIRE(buf != NULL && len > 0);
    CHECK_EQ(len % 4, 0);
    uint8_t *copy = check_dup(buf, (size_t)len);
    int rc = ipc_worker_response_read(copy, (size_t)len, &wr, &fe);
    if (rc != 0)
        ipc_fb_error_format(&fe, why, sizeof why);
    if (rc != 0)
        FAIL("not a WorkerResponse: %s", why);
    if (rc == 0) {
        CHECK(wr.has_result);
        CHECK(wr.error_message.ptr == NULL);
        CHECK(eq_cloudevent(&wr.result_event, want));
        CHECK_EQ(ipc_cloudevent_check(&wr.result_event, &fe), 0);
    }
    free(copy);
}

static void
test_error_response(void)
{
    struct ipc_worker_response wr;
    struct ipc_fb_error fe;
    static uint8_t sentinel[1];
    uint8_t *out = sentinel;
    int32_t len = -1;

    REQUIRE(virtufin_response_error("asked to fail", &out, &len) ==
            VIRTUFIN_OK);
    REQUIRE(out != NULL && len > 0);
    CHECK_EQ(len % 4, 0);
    uint8_t *copy = check_dup(out, (size_t)len);
    REQUIRE(ipc_worker_response_read(copy, (size_t)len, &wr, &fe) == 0);
    CHECK(!wr.has_result);
    CHECK(ipc_str_eq(wr.error_message, "asked to fail"));
    free(copy);
    virtufin_response_free(out);

    /* An empty message is still a message: present, zero bytes. */
    REQUIRE(virtufin_response_error("", &out, &len) == VIRTUFIN_OK);
    copy = check_dup(out, (size_t)len);
    REQUIRE(ipc_worker_response_read(copy, (size_t)len, &wr, &fe) == 0);
    CHECK(wr.error_message.ptr != NULL && wr.error_message.len == 0);
    free(copy);
    virtufin_response_free(out);
    virtufin_response_free(NULL);
}

static void
test_event_response_full(void)
{
    struct ipc_cloudevent want = full_event();
    struct virtufin_extension exts[3];
    struct virtufin_event ev;
    uint8_t *out = NULL;
    int32_t len = 0;

    as_virtufin(&want, exts, &ev);
    REQUIRE(virtufin_response_event(&ev, &out, &len) == VIRTUFIN_OK);
    check_response_event(out, len, &want);
    virtufin_response_free(out);
}

static void
test_event_response_absent_and_empty(void)
{
    struct ipc_cloudevent want = minimal_event();
    struct virtufin_event ev;
    uint8_t *out = NULL;
    int32_t len = 0;

    /* Absent optional attributes stay absent... */
    as_virtufin(&want, NULL, &ev);
    REQUIRE(virtufin_response_event(&ev, &out, &len) == VIRTUFIN_OK);
    check_response_event(out, len, &want);
    virtufin_response_free(out);

    /* ...and empty ones, present: an empty subject, empty data. */
    want.subject.ptr = "";
    want.data.ptr = sample_data;
    want.data.len = 0;
    as_virtufin(&want, NULL, &ev);
    REQUIRE(virtufin_response_event(&ev, &out, &len) == VIRTUFIN_OK);
    check_response_event(out, len, &want);
    virtufin_response_free(out);
}

/* Many extensions and large values: the sizing holds for every length
 * (each string length mod 4 shifts the padding that follows). */
static void
test_event_response_sizes(void)
{
    enum { N = 40 };
    static char big[5000];
    struct ipc_pair pairs[N];
    char names[N][8];
    struct virtufin_extension exts[N];
    struct virtufin_event ev;
    uint8_t *out;
    int32_t len;

    memset(big, 'x', sizeof big);
    for (unsigned i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "e%u", i);
        pairs[i].name = ipc_str_c(names[i]);
        pairs[i].value.ptr = big;
        pairs[i].value.len = i * 37 % 101;
    }
    for (uint32_t n = 0; n < 9; n++) {
        struct ipc_cloudevent want = minimal_event();
        want.type.ptr = big;
        want.type.len = 1 + n;
        want.subject.ptr = big;
        want.subject.len = n * 611;
        want.data.ptr = (const uint8_t *)big;
        want.data.len = n * 3;
        want.extensions.n = n * 5;
        want.extensions.items = pairs;
        as_virtufin(&want, exts, &ev);
        out = NULL;
        len = 0;
        REQUIRE(virtufin_response_event(&ev, &out, &len) == VIRTUFIN_OK);
        check_response_event(out, len, &want);
        virtufin_response_free(out);
    }
}

static void
test_response_bad_arguments(void)
{
    struct virtufin_event ev;
    static uint8_t sentinel[1];
    uint8_t *out = sentinel;
    int32_t len = 5;

    virtufin_event_init(&ev);
    ev.subject.len = 3; /* no pointer */
    CHECK_EQ(virtufin_response_event(&ev, &out, &len), VIRTUFIN_ERR_INVALID);
    CHECK(out == NULL && len == 0);
    virtufin_event_init(&ev);
    ev.data.len = 1;
    CHECK_EQ(virtufin_response_event(&ev, &out, &len), VIRTUFIN_ERR_INVALID);
    CHECK_EQ(virtufin_response_event(NULL, &out, &len), VIRTUFIN_ERR_INVALID);
    CHECK_EQ(virtufin_response_event(&ev, NULL, &len), VIRTUFIN_ERR_INVALID);
    CHECK_EQ(virtufin_response_error(NULL, &out, &len), VIRTUFIN_ERR_INVALID);
    CHECK_EQ(virtufin_response_error("m", &out, NULL), VIRTUFIN_ERR_INVALID);
}

static void
test_read_project_event(void)
{
    struct ipc_cloudevent want = full_event(), got;
    struct ipc_pair pairs[3];
    struct virtufin_event ev;
    struct virtufin_extension e;
    size_t len = 0;
    uint8_t *buf = encode(&want, &len);

    REQUIRE(buf != NULL);
    REQUIRE(virtufin_event_read(buf, (int32_t)len, &ev) == VIRTUFIN_OK);
    CHECK(virtufin_str_eq(ev.id, "id-1"));
    CHECK(virtufin_str_eq(ev.type, "com.example.order.created"));
    CHECK(virtufin_str_eq(ev.specversion, "1.0"));
    CHECK(virtufin_str_eq(ev.time, "2024-01-02T03:04:05Z"));
    /* Strings point into the buffer and are NUL-terminated there. */
    CHECK((const uint8_t *)ev.id.ptr > buf &&
          (const uint8_t *)ev.id.ptr + ev.id.len < buf + len);
    CHECK(ev.type.ptr[ev.type.len] == '\0');
    CHECK(ev.subject.len == 3 && memcmp(ev.subject.ptr, "a\0b", 3) == 0);
    CHECK(ev.data.len == sizeof sample_data &&
          memcmp(ev.data.ptr, sample_data, sizeof sample_data) == 0);
    CHECK_EQ(ev.n_extensions, 3);
    REQUIRE(as_ipc(&ev, pairs, &got) == 0);
    CHECK(eq_cloudevent(&got, &want));

    /* Extensions by index, in order, then by name. */
    REQUIRE(virtufin_event_extension_at(&ev, 0, &e) == VIRTUFIN_OK);
    CHECK(virtufin_str_eq(e.name, "correlationid"));
    CHECK(virtufin_str_eq(e.value, "c-42"));
    REQUIRE(virtufin_event_extension_at(&ev, 2, &e) == VIRTUFIN_OK);
    CHECK(virtufin_str_eq(e.name, "alpha"));
    CHECK_EQ(virtufin_event_extension_at(&ev, 3, &e), VIRTUFIN_ERR_RANGE);
    CHECK(e.name.ptr == NULL && e.value.ptr == NULL);
    CHECK(virtufin_str_eq(virtufin_event_extension(&ev, "correlationid"),
                          "c-42"));
    struct virtufin_str z = virtufin_event_extension(&ev, "zeta");
    CHECK(z.ptr != NULL && z.len == 0);
    CHECK(virtufin_event_extension(&ev, "nope").ptr == NULL);
    CHECK(virtufin_event_extension(&ev, "correlation").ptr == NULL);

    /* An echo: the read event built again, its extensions copied from the
     * input; then with its type changed and extensions of its own. */
    uint8_t *out = NULL;
    int32_t olen = 0;
    REQUIRE(virtufin_response_event(&ev, &out, &olen) == VIRTUFIN_OK);
    check_response_event(out, olen, &want);
    virtufin_response_free(out);

    struct virtufin_extension mine[1] = { { { "correlationid", 13 },
                                            { "other", 5 } } };
    ev.type = virtufin_str_c("com.example.order.created.out");
    ev.extensions = mine;
    ev.n_extensions = 1;
    want.type = ipc_str_c("com.example.order.created.out");
    want.extensions.n = 1;
    struct ipc_pair mine_pair = { { "correlationid", 13 }, { "other", 5 } };
    want.extensions.items = &mine_pair;
    REQUIRE(virtufin_response_event(&ev, &out, &olen) == VIRTUFIN_OK);
    check_response_event(out, olen, &want);
    virtufin_response_free(out);
    free(buf);
}

static void
test_read_minimal_event(void)
{
    struct ipc_cloudevent want = minimal_event();
    struct virtufin_event ev;
    size_t len = 0;
    uint8_t *buf = encode(&want, &len);

    REQUIRE(buf != NULL);
    REQUIRE(virtufin_event_read(buf, (int32_t)len, &ev) == VIRTUFIN_OK);
    CHECK(virtufin_str_eq(ev.id, "m"));
    CHECK(ev.datacontenttype.ptr == NULL && ev.dataschema.ptr == NULL &&
          ev.subject.ptr == NULL && ev.time.ptr == NULL);
    CHECK(ev.data.ptr == NULL && ev.data.len == 0);
    CHECK_EQ(ev.n_extensions, 0);
    CHECK(virtufin_event_extension(&ev, "correlationid").ptr == NULL);
    free(buf);
}

/* Reads buf[0..len) with the helpers and with the project's verifier and
 * decoder: the verdicts must agree and an accepted buffer read alike; an
 * accepted one must also echo into a valid response.  Returns the
 * verdict (1 accepted). */
static int
differential(const uint8_t *buf, size_t len)
{
    struct ipc_fb_error fe;
    struct virtufin_event ev;
    int mine = virtufin_event_read(buf, (int32_t)len, &ev) == VIRTUFIN_OK;
    int theirs = ipc_fb_verify(buf, len, 0, NULL, &ipc_cloudevent_schema, NULL,
                               &fe) == 0;

    if (mine != theirs) {
        char why[256] = "accepted";
        if (!theirs)
            ipc_fb_error_format(&fe, why, sizeof why);
        FAIL("%zu bytes: virtufin_event_read %s, ipc_fb_verify: %s", len,
             mine ? "accepted" : "refused", why);
        return mine;
    }
    if (!mine) {
        /* A refused read leaves an empty event. */
        CHECK(ev.id.ptr == NULL && ev.data.ptr == NULL && ev.n_extensions == 0);
        return 0;
    }
    struct ipc_cloudevent want, got;
    ipc_cloudevent_decode(ipc_fb_root(buf, 0), &want);
    struct ipc_pair *pairs =
        calloc(ev.n_extensions ? ev.n_extensions : 1, sizeof *pairs);
    if (pairs == NULL)
        abort();
    if (as_ipc(&ev, pairs, &got) != 0)
        FAIL("%zu bytes: an extension of an accepted event fails", len);
    else if (!eq_cloudevent(&got, &want))
        FAIL("%zu bytes: read differently from ipc_cloudevent_decode", len);
    uint8_t *out = NULL;
    int32_t olen = 0;
    struct ipc_worker_response wr;
    if (virtufin_response_event(&ev, &out, &olen) != VIRTUFIN_OK)
        FAIL("%zu bytes: an accepted event does not echo", len);
    else if (ipc_worker_response_read(out, (size_t)olen, &wr, &fe) != 0 ||
             !eq_cloudevent(&wr.result_event, &want))
        FAIL("%zu bytes: the echo of an accepted event is not it", len);
    virtufin_response_free(out);
    free(pairs);
    return 1;
}

static void
test_truncations_refused(void)
{
    struct ipc_cloudevent ce = full_event();
    size_t len = 0;
    uint8_t *buf = encode(&ce, &len);

    REQUIRE(buf != NULL && len > BUILDER_PAD);
    CHECK_EQ(differential(buf, len), 1);
    for (size_t n = 0; n < len; n++) {
        uint8_t *cut = check_dup(buf, n);
        int ok = differential(cut, n);
        if (n + BUILDER_PAD <= len && ok)
            FAIL("a truncation to %zu of %zu bytes is accepted", n, len);
        free(cut);
    }
    /* No buffer at all, a negative length. */
    struct virtufin_event ev;
    CHECK_EQ(virtufin_event_read(NULL, 64, &ev), VIRTUFIN_ERR_MALFORMED);
    CHECK_EQ(virtufin_event_read(buf, -1, &ev), VIRTUFIN_ERR_MALFORMED);
    CHECK_EQ(virtufin_event_read(buf, 0, &ev), VIRTUFIN_ERR_MALFORMED);
    free(buf);
}

/* xorshift64: a fixed seed, so that a failure repeats. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t
rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static void
test_garbage_refused(void)
{
    unsigned accepted = 0;

    for (unsigned r = 0; r < GARBAGE_ROUNDS; r++) {
        size_t n = rng() % GARBAGE_MAX_LEN;
        uint8_t *g = malloc(n ? n : 1);
        if (g == NULL)
            abort();
        for (size_t i = 0; i < n; i++)
            g[i] = (uint8_t)rng();
        /* Small offsets half of the time, so that the walk goes deeper
         * than the root offset. */
        if (n >= 8 && r % 2) {
            g[0] = (uint8_t)(4 * (rng() % 8));
            g[1] = g[2] = g[3] = 0;
        }
        accepted += (unsigned)differential(g, n);
        free(g);
    }
    printf("# garbage: %u of %u accepted by both\n", accepted, GARBAGE_ROUNDS);
}

static void
test_mutations_agree(void)
{
    struct ipc_cloudevent ce = full_event();
    size_t len = 0;
    uint8_t *buf = encode(&ce, &len);
    unsigned accepted = 0;

    REQUIRE(buf != NULL);
    for (unsigned r = 0; r < MUTATION_ROUNDS; r++) {
        uint8_t *m = check_dup(buf, len);
        unsigned flips = 1 + rng() % 3;
        for (unsigned k = 0; k < flips; k++) {
            size_t at = rng() % len;
            /* Small changes reach the checks one by one; any byte the
             * rest. */
            if (rng() % 2)
                m[at] = (uint8_t)(m[at] + (rng() % 2 ? 1 : 0xff));
            else
                m[at] = (uint8_t)rng();
        }
        accepted += (unsigned)differential(m, len);
        free(m);
    }
    printf("# mutations: %u of %u accepted by both\n", accepted,
           MUTATION_ROUNDS);
    /* The test would be vacuous if no mutation stayed valid. */
    CHECK(accepted > MUTATION_ROUNDS / 20);
    free(buf);
}

/* Little-endian stores for the hand-made buffers. */
static void
le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void
le16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/*
 * A CloudEvent of HOSTILE_LEN bytes whose only field is one reference
 * (field `id`) to target_word, a 4-byte length or offset at 12, with room
 * for a payload from 16 to 40 and the vtable after the table:
 *   0 root -> 4 | 4 table: soffset -36, at 8 the uoffset -> 12 |
 *   12 target_word | 16..40 payload | 40 vtable (4 + 2 * (id + 1) bytes,
 *   table size 8, field id at 4)
 */
#define HOSTILE_LEN 64
#define HOSTILE_VTABLE 40

static uint8_t *
one_field(unsigned id, uint32_t target_word)
{
    uint8_t *b = calloc(1, HOSTILE_LEN);
    if (b == NULL)
        abort();
    le32(b, 4);
    le32(b + 4, (uint32_t)(4 - HOSTILE_VTABLE));
    le32(b + 8, 4);
    le32(b + 12, target_word);
    le16(b + HOSTILE_VTABLE, 4 + 2 * (id + 1));
    le16(b + HOSTILE_VTABLE + 2, 8);
    le16(b + HOSTILE_VTABLE + 4 + 2 * id, 4);
    return b;
}

static void
test_hostile_buffers(void)
{
    struct virtufin_event ev;
    uint8_t *b;

    /* The hand-made layout is valid with a small string... */
    b = one_field(0, 2);
    memcpy(b + 16, "ab", 3);
    REQUIRE(virtufin_event_read(b, HOSTILE_LEN, &ev) == VIRTUFIN_OK);
    CHECK(virtufin_str_eq(ev.id, "ab"));
    CHECK_EQ(differential(b, HOSTILE_LEN), 1);
    /* ...and refused without its NUL. */
    b[18] = 'c';
    CHECK_EQ(virtufin_event_read(b, HOSTILE_LEN, &ev), VIRTUFIN_ERR_MALFORMED);
    CHECK_EQ(differential(b, HOSTILE_LEN), 0);
    free(b);
    /* A string claiming 4 GiB - 1, 2 GiB, or running to the last byte
     * (its NUL would be past the end). */
    static const uint32_t lengths[] = { 0xffffffffu, 0x80000000u,
                                        HOSTILE_LEN - 16 };
    for (unsigned i = 0; i < 3; i++) {
        b = one_field(0, lengths[i]);
        memset(b + 16, 'x', HOSTILE_VTABLE - 16);
        CHECK_EQ(differential(b, HOSTILE_LEN), 0);
        free(b);
    }
    /* Data claiming more bytes than the buffer has; extensions claiming a
     * billion elements, or one whose offset is zero. */
    b = one_field(VIRTUFIN_FB_DATA, HOSTILE_LEN - 15);
    CHECK_EQ(differential(b, HOSTILE_LEN), 0);
    free(b);
    b = one_field(VIRTUFIN_FB_EXTENSIONS, 0x40000000u);
    CHECK_EQ(differential(b, HOSTILE_LEN), 0);
    free(b);
    b = one_field(VIRTUFIN_FB_EXTENSIONS, 1);
    CHECK_EQ(differential(b, HOSTILE_LEN), 0);
    free(b);
    /* The root pointing past the end, or misaligned; a vtable reaching
     * before the buffer or far after it; a vtable longer than the buffer;
     * a field slot beyond the table's stated size. */
    b = one_field(0, 0);
    le32(b, HOSTILE_LEN);
    CHECK_EQ(differential(b, HOSTILE_LEN), 0);
    le32(b, 6);
    CHECK_EQ(differential(b, HOSTILE_LEN), 0);
    le32(b, 4);
    le32(b + 4, 8);
    CHECK_EQ(differential(b, HOSTILE_LEN), 0);
    le32(b + 4, 0x80000000u);
    CHECK_EQ(differential(b, HOSTILE_LEN), 0);
    le32(b + 4, (uint32_t)(4 - HOSTILE_VTABLE));
    le16(b + HOSTILE_VTABLE, 0xfffe);
    CHECK_EQ(differential(b, HOSTILE_LEN), 0);
    le16(b + HOSTILE_VTABLE, 6);
    le16(b + HOSTILE_VTABLE + 2, 4);
    CHECK_EQ(differential(b, HOSTILE_LEN), 0);
    free(b);
    /* A field's offset of zero: it would point at itself, where the zero
     * reads as an empty string followed by a NUL. */
    b = one_field(0, 0);
    CHECK_EQ(differential(b, HOSTILE_LEN), 1);
    le32(b + 8, 0);
    CHECK_EQ(differential(b, HOSTILE_LEN), 0);
    free(b);
    /* A well-formed vtable at an odd position. */
    b = one_field(0, 0);
    memmove(b + HOSTILE_VTABLE + 1, b + HOSTILE_VTABLE, 6);
    le32(b + 4, (uint32_t)(4 - HOSTILE_VTABLE - 1));
    CHECK_EQ(differential(b, HOSTILE_LEN), 0);
    free(b);
}

int
main(void)
{
    RUN(test_error_response);
    RUN(test_event_response_full);
    RUN(test_event_response_absent_and_empty);
    RUN(test_event_response_sizes);
    RUN(test_response_bad_arguments);
    RUN(test_read_project_event);
    RUN(test_read_minimal_event);
    RUN(test_truncations_refused);
    RUN(test_garbage_refused);
    RUN(test_mutations_agree);
    RUN(test_hostile_buffers);
    return check_result();
}
