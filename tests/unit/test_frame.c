/*
 * test_frame.c — round trips of every frame body of ipc/frame.fbs (and of
 * the tables inside them: Identity, Limits, ConfigEntry, Error), the
 * protocol's rules above FlatBuffers, and the required fields of each
 * table.
 *
 * A round trip encodes a struct ipc_frame, reads the frame back from an
 * exact-size heap copy and compares the decoded value field by field; the
 * decoded frame is then encoded again and compared once more.  Required
 * fields the public builder cannot omit are left out of frames built by
 * hand with the fb.h primitives, with the field ids of frame.fbs.
 */
#include "config.h"

#include "ipc/frame.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "tests/unit/codec_eq.h"

#define BIG_STRING (64u * 1024)
#define BIG_DATA (1024u * 1024)

/* Field ids of frame.fbs (pinned there: add at the end only). */
enum { F_SEQ = 0, F_REPLY_TO, F_BODY_TYPE, F_BODY };

static const uint8_t sha[32] = {
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4,
    0xc8, 0x99, 0x6f, 0xb9, 0x24, 0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b,
    0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55
};
static const uint8_t json_req[] =
    "{\"query\": [1, 2, 3], \"nul\": \"\\u0000\"}";

static const struct ipc_pair config3[] = {
    { { "replytopic", 10 }, { "orders.out", 10 } },
    { { "region", 6 }, { "", 0 } },
    { { "db.url", 6 }, { "postgres://x/\xc3\xa9", 15 } },
};

static const struct ipc_pair event_ext[] = {
    { { "correlationid", 13 }, { "c-1", 3 } },
    { { "traceparent", 11 }, { "00-abc-def-01", 13 } },
};

static struct ipc_cloudevent
event_full(void)
{
    static const uint8_t data[] = { 0, 1, 2, 0xff, 0 };
    struct ipc_cloudevent ce = {
        .id = ipc_str_c("ev-1"),
        .type = ipc_str_c("com.example.t"),
        .source = ipc_str_c("/src"),
        .specversion = ipc_str_c("1.0"),
        .datacontenttype = ipc_str_c("application/octet-stream"),
        .dataschema = ipc_str_c("urn:schema"),
        .subject = ipc_str_c("subj"),
        .time = ipc_str_c("2024-05-06T07:08:09Z"),
        .data = { data, sizeof data },
        .extensions = { .n = 2, .items = event_ext },
    };
    return ce;
}

static struct ipc_cloudevent
event_minimal(void)
{
    struct ipc_cloudevent ce = {
        .id = ipc_str_c("ev-2"),
        .type = ipc_str_c("t"),
        .source = ipc_str_c("s"),
        .specversion = ipc_str_c("1.0"),
    };
    return ce;
}

/* A whole ABI CloudEvent buffer, for Process.event; the builder owns it. */
static struct ipc_bytes
event_buffer(struct ipc_fb_builder *b, const struct ipc_cloudevent *ce)
{
    struct ipc_bytes r = { NULL, 0 };
    ipc_fb_builder_init(b);
    if (ipc_cloudevent_encode(b, ce) == 0) {
        r.ptr = b->buf;
        r.len = (uint32_t)b->len;
    }
    return r;
}

static void
check_process_event(const struct ipc_frame *in, const struct ipc_frame *out,
                    const unsigned char *buf)
{
    struct ipc_cloudevent a, b;
    /* The event is handed to native workers in place: 8-aligned. */
    CHECK((out->u.process.event.ptr - buf) % 8 == 0);
    REQUIRE(ipc_cloudevent_read(in->u.process.event.ptr,
                                in->u.process.event.len, &a, NULL) == 0);
    REQUIRE(ipc_cloudevent_read(out->u.process.event.ptr,
                                out->u.process.event.len, &b, NULL) == 0);
    CHECK(eq_cloudevent(&a, &b));
}

/* Encodes f, reads it back from an exact-size copy and compares; then
 * encodes the decoded value again and compares once more.  Returns the
 * encoded length. */
static size_t
roundtrip(const struct ipc_frame *f)
{
    struct ipc_fb_builder b, b2;
    struct ipc_frame out, out2;
    struct ipc_fb_error err;
    char msg[256];
    size_t len = 0;

    ipc_fb_builder_init(&b);
    ipc_fb_builder_init(&b2);
    CHECK(ipc_frame_encode(&b, f, NULL) == 0);
    if (b.oom || b.len == 0)
        goto out;
    len = b.len;
    CHECK(b.len % 8 == 0);
    CHECK_EQ(ipc_fb_u32(b.buf), b.len - 4);
    CHECK(memcmp(b.buf + 8, IPC_FRAME_IDENT, 4) == 0);
    unsigned char *copy = check_dup(b.buf, b.len);
    int rc = ipc_frame_read(copy, b.len, &out, &err);
    if (rc) {
        ipc_fb_error_format(&err, msg, sizeof msg);
        fprintf(stderr, "  %s: %s\n", ipc_body_name(f->type), msg);
    }
    CHECK(rc == 0);
    if (rc == 0) {
        CHECK(eq_frame(f, &out));
        if (f->type == IPC_BODY_PROCESS)
            check_process_event(f, &out, copy);
        CHECK(ipc_frame_encode(&b2, &out, NULL) == 0);
        unsigned char *copy2 = check_dup(b2.buf, b2.len);
        CHECK(ipc_frame_read(copy2, b2.len, &out2, &err) == 0);
        CHECK(eq_frame(f, &out2));
        free(copy2);
    }
    free(copy);
out:
    ipc_fb_builder_free(&b);
    ipc_fb_builder_free(&b2);
    return len;
}

/* Round trips f with each of a few seq/reply_to pairs, extremes included. */
static void
roundtrip_seqs(struct ipc_frame *f)
{
    static const uint64_t seqs[][2] = {
        { 0, 0 },
        { 1, 0 },
        { 7, 3 },
        { UINT64_MAX, UINT64_MAX - 1 },
    };
    for (unsigned i = 0; i < sizeof seqs / sizeof seqs[0]; i++) {
        f->seq = seqs[i][0];
        f->reply_to = seqs[i][1];
        roundtrip(f);
    }
}

static void
test_hello(void)
{
    struct ipc_frame f = { .type = IPC_BODY_HELLO };
    /* The host's greeting. */
    f.u.hello = (struct ipc_hello){
        .protocol = IPC_PROTOCOL_VERSION,
        .engine = ipc_str_c("python"),
        .pid = 4242,
        .max_inflight = 64,
        .confinement = ipc_str_c("seccomp,userns"),
        .prefetch = 8,
    };
    roundtrip_seqs(&f);
    /* The master's refusal. */
    f.u.hello = (struct ipc_hello){
        .protocol = 1,
        .accepted = false,
        .reason = ipc_str_c("protocol 2 not supported (master speaks 1)"),
    };
    roundtrip(&f);
    /* Every field, extreme values. */
    f.u.hello = (struct ipc_hello){
        .protocol = UINT16_MAX,
        .engine = ipc_str_c(""),
        .pid = INT32_MIN,
        .max_inflight = UINT32_MAX,
        .confinement = ipc_str_c(""),
        .accepted = true,
        .reason = ipc_str_c(""),
        .prefetch = UINT32_MAX,
    };
    roundtrip(&f);
    /* None of the optional fields (Hello has no required one). */
    memset(&f.u.hello, 0, sizeof f.u.hello);
    roundtrip(&f);
}

static void
test_load(void)
{
    struct ipc_frame f = { .type = IPC_BODY_LOAD, .seq = 2 };
    f.u.load = (struct ipc_load){
        .worker_id = ipc_str_c("orders-v1"),
        .version = 3,
        .mime = ipc_str_c("text/x-python"),
        .code_fd = 0,
        .code_len = UINT64_MAX,
        .sha256 = { sha, sizeof sha },
        .identity = { ipc_str_c("orders"), ipc_str_c("billing"),
                      ipc_str_c("orders.in") },
        .config = { .n = 3, .items = config3 },
        .limits = { true, 30000, 256, 8 },
    };
    roundtrip_seqs(&f);

    /* Only the required fields: no sha256, identity, config or limits. */
    f.u.load = (struct ipc_load){
        .worker_id = ipc_str_c("w"),
        .mime = ipc_str_c("m"),
        .code_fd = -1,
    };
    roundtrip(&f);

    /* Identity with its required id only; Limits present but all zero;
     * an empty sha256 vector; empty strings. */
    f.u.load = (struct ipc_load){
        .worker_id = ipc_str_c(""),
        .mime = ipc_str_c(""),
        .code_fd = INT32_MAX,
        .sha256 = { sha, 0 },
        .identity = { ipc_str_c("only-id"), { NULL, 0 }, { NULL, 0 } },
        .limits = { true, 0, 0, 0 },
    };
    roundtrip(&f);
}

/* Many ConfigEntry tables and long strings in a Load. */
static void
test_load_maximal(void)
{
    enum { N = 1000 };
    struct ipc_pair *cfg = calloc(N, sizeof *cfg);
    char *big = malloc(BIG_STRING);
    REQUIRE(cfg && big);
    memset(big, 'q', BIG_STRING);
    for (unsigned i = 0; i < N; i++) {
        cfg[i].name = (struct ipc_str){ big, i % 64 + 1 };
        cfg[i].value = (struct ipc_str){ big, i * 61 % 4096 };
    }
    struct ipc_str s = { big, BIG_STRING };
    struct ipc_frame f = { .type = IPC_BODY_LOAD };
    f.u.load = (struct ipc_load){
        .worker_id = s,
        .mime = s,
        .code_fd = 1,
        .sha256 = { (const uint8_t *)big, BIG_STRING },
        .identity = { s, s, s },
        .config = { .n = N, .items = cfg },
        .limits = { true, UINT32_MAX, UINT32_MAX, UINT32_MAX },
    };
    roundtrip(&f);
    free(cfg);
    free(big);
}

static void
test_loaded(void)
{
    struct ipc_frame f = { .type = IPC_BODY_LOADED, .reply_to = 2 };
    f.u.loaded.ok = true;
    roundtrip_seqs(&f);
    /* Error with every field. */
    f.u.loaded = (struct ipc_loaded){
        .ok = false,
        .error = { ipc_str_c("load"), ipc_str_c("SyntaxError at line 3"),
                   ipc_str_c("SyntaxError"),
                   ipc_str_c("Traceback (most recent call last):\n  ...") },
    };
    roundtrip(&f);
    /* Error with its required type only. */
    f.u.loaded.error = (struct ipc_error){ .type = ipc_str_c("timeout") };
    roundtrip(&f);
    /* Empty strings. */
    f.u.loaded.error =
        (struct ipc_error){ { "", 0 }, { "", 0 }, { "", 0 }, { "", 0 } };
    roundtrip(&f);
}

static void
test_process(void)
{
    struct ipc_fb_builder eb;
    struct ipc_cloudevent ce = event_full();
    struct ipc_frame f = { .type = IPC_BODY_PROCESS, .seq = 9 };

    f.u.process.event = event_buffer(&eb, &ce);
    f.u.process.deadline_ms = 5000;
    f.u.process.delivery = 2;
    roundtrip_seqs(&f);
    ipc_fb_builder_free(&eb);

    ce = event_minimal();
    f.u.process.event = event_buffer(&eb, &ce);
    f.u.process.deadline_ms = 0;
    f.u.process.delivery = 0;
    roundtrip(&f);
    f.u.process.deadline_ms = UINT32_MAX;
    f.u.process.delivery = UINT32_MAX;
    roundtrip(&f);
    ipc_fb_builder_free(&eb);

    /* A 1 MiB payload. */
    uint8_t *data = malloc(BIG_DATA);
    REQUIRE(data);
    for (uint32_t i = 0; i < BIG_DATA; i++)
        data[i] = (uint8_t)(i ^ i >> 8);
    ce.data = (struct ipc_bytes){ data, BIG_DATA };
    f.u.process.event = event_buffer(&eb, &ce);
    roundtrip(&f);
    ipc_fb_builder_free(&eb);
    free(data);
}

static void
test_result(void)
{
    struct ipc_cloudevent outs[] = { event_full(), event_minimal() };
    struct ipc_frame f = { .type = IPC_BODY_RESULT, .reply_to = 9 };

    f.u.result.outputs = (struct ipc_cloudevent_list){ .n = 2, .items = outs };
    f.u.result.error = (struct ipc_error){
        ipc_str_c("worker"),
        ipc_str_c("partial failure"),
        ipc_str_c("ValueError"),
        ipc_str_c("tb"),
    };
    roundtrip_seqs(&f);
    /* Outputs only. */
    memset(&f.u.result.error, 0, sizeof f.u.result.error);
    roundtrip(&f);
    /* Error only, with its type only. */
    f.u.result.outputs.n = 0;
    f.u.result.error.type = ipc_str_c("timeout");
    roundtrip(&f);
    /* Neither: a Result with no outputs. */
    memset(&f.u.result, 0, sizeof f.u.result);
    roundtrip(&f);
}

static void
test_result_maximal(void)
{
    enum { N = 2000 };
    struct ipc_cloudevent *outs = calloc(N, sizeof *outs);
    REQUIRE(outs);
    for (unsigned i = 0; i < N; i++)
        outs[i] = i % 2 ? event_full() : event_minimal();
    struct ipc_frame f = { .type = IPC_BODY_RESULT };
    f.u.result.outputs = (struct ipc_cloudevent_list){ .n = N, .items = outs };
    roundtrip(&f);
    free(outs);
}

static void
test_gateway_call(void)
{
    struct ipc_frame f = { .type = IPC_BODY_GATEWAY_CALL, .seq = 4 };
    f.u.gateway_call = (struct ipc_gateway_call){
        .service = ipc_str_c("state"),
        .method = ipc_str_c("get"),
        .request = { json_req, sizeof json_req - 1 },
    };
    roundtrip_seqs(&f);
    /* No request; then an empty one. */
    f.u.gateway_call.request = (struct ipc_bytes){ NULL, 0 };
    roundtrip(&f);
    f.u.gateway_call.request = (struct ipc_bytes){ json_req, 0 };
    roundtrip(&f);
}

static void
test_gateway_reply(void)
{
    struct ipc_frame f = { .type = IPC_BODY_GATEWAY_REPLY, .reply_to = 4 };
    f.u.gateway_reply = (struct ipc_gateway_reply){
        .status = 200,
        .response = { json_req, sizeof json_req - 1 },
        .error = ipc_str_c(""),
    };
    roundtrip_seqs(&f);
    f.u.gateway_reply = (struct ipc_gateway_reply){
        .status = -1,
        .error = ipc_str_c("no such service: stat"),
    };
    roundtrip(&f);
    f.u.gateway_reply = (struct ipc_gateway_reply){ .status = INT32_MIN };
    roundtrip(&f);
    memset(&f.u.gateway_reply, 0, sizeof f.u.gateway_reply);
    roundtrip(&f);
}

static void
test_log(void)
{
    struct ipc_frame f = { .type = IPC_BODY_LOG, .seq = 5 };
    for (int level = IPC_LOG_TRACE; level <= IPC_LOG_ERROR; level++) {
        f.u.log.level = (enum ipc_log_level)level;
        f.u.log.message = ipc_str_c("a message\twith \xe2\x80\x9cquotes\xe2"
                                    "\x80\x9d");
        roundtrip(&f);
    }
    f.u.log.message = (struct ipc_str){ "", 0 };
    roundtrip_seqs(&f);
    char *big = malloc(BIG_STRING);
    REQUIRE(big);
    memset(big, 'L', BIG_STRING);
    f.u.log.message = (struct ipc_str){ big, BIG_STRING };
    roundtrip(&f);
    free(big);
}

static void
test_heartbeat(void)
{
    struct ipc_frame f = { .type = IPC_BODY_HEARTBEAT };
    roundtrip_seqs(&f);
}

static void
test_shutdown(void)
{
    struct ipc_frame f = { .type = IPC_BODY_SHUTDOWN };
    f.u.shutdown.grace_ms = 10000;
    roundtrip_seqs(&f);
    f.u.shutdown.grace_ms = 0;
    roundtrip(&f);
    f.u.shutdown.grace_ms = UINT32_MAX;
    roundtrip(&f);
}

static void
test_fork(void)
{
    struct ipc_frame f = { .type = IPC_BODY_FORK, .seq = 11 };
    f.u.fork = (struct ipc_fork){
        .worker_id = ipc_str_c("orders-v1"),
        .uid = 60001,
        .gid = 60001,
        .limits = { true, 1000, 128, 4 },
    };
    roundtrip_seqs(&f);
    /* Without limits; extreme ids. */
    f.u.fork = (struct ipc_fork){
        .worker_id = ipc_str_c(""),
        .uid = UINT32_MAX,
        .gid = 0,
    };
    roundtrip(&f);
}

static void
test_forked(void)
{
    const int32_t pids[] = { 0, 1, -1, INT32_MAX, INT32_MIN };
    struct ipc_frame f = { .type = IPC_BODY_FORKED, .reply_to = 11 };
    for (unsigned i = 0; i < sizeof pids / sizeof pids[0]; i++) {
        f.u.forked.pid = pids[i];
        roundtrip(&f);
    }
}

/* Every string of every body 64 KiB long and every byte vector 1 MiB; then
 * all of them empty (present, length 0). */
static void
test_bodies_maximal_and_empty(void)
{
    char *big = malloc(BIG_DATA);
    REQUIRE(big);
    for (uint32_t i = 0; i < BIG_DATA; i++)
        big[i] = (char)(' ' + i % 95);

    for (int pass = 0; pass < 2; pass++) {
        uint32_t slen = pass ? 0 : BIG_STRING;
        uint32_t blen = pass ? 0 : BIG_DATA;
        struct ipc_str s = { big, slen };
        struct ipc_bytes v = { (const uint8_t *)big, blen };
        struct ipc_error e = { s, s, s, s };
        struct ipc_frame f;

        f = (struct ipc_frame){ .type = IPC_BODY_HELLO };
        f.u.hello =
            (struct ipc_hello){ .engine = s, .confinement = s, .reason = s };
        roundtrip(&f);
        f = (struct ipc_frame){ .type = IPC_BODY_LOADED };
        f.u.loaded.error = e;
        roundtrip(&f);
        f = (struct ipc_frame){ .type = IPC_BODY_RESULT };
        f.u.result.error = e;
        roundtrip(&f);
        f = (struct ipc_frame){ .type = IPC_BODY_GATEWAY_CALL };
        f.u.gateway_call = (struct ipc_gateway_call){ s, s, v };
        roundtrip(&f);
        f = (struct ipc_frame){ .type = IPC_BODY_GATEWAY_REPLY };
        f.u.gateway_reply = (struct ipc_gateway_reply){ -7, v, s };
        roundtrip(&f);
        f = (struct ipc_frame){ .type = IPC_BODY_FORK };
        f.u.fork.worker_id = s;
        roundtrip(&f);
        f = (struct ipc_frame){ .type = IPC_BODY_LOG };
        f.u.log.message = s;
        roundtrip(&f);
    }
    free(big);
}

/* A frame of exactly the default 16 MiB cap, prefix included. */
static void
test_frame_at_cap(void)
{
    uint8_t *data = malloc(IPC_FRAME_MAX_DEFAULT);
    REQUIRE(data);
    for (uint32_t i = 0; i < IPC_FRAME_MAX_DEFAULT; i++)
        data[i] = (uint8_t)(i * 31);
    struct ipc_frame f = { .type = IPC_BODY_GATEWAY_REPLY, .seq = 1 };
    f.u.gateway_reply.response = (struct ipc_bytes){ data, 0 };
    f.u.gateway_reply.error = ipc_str_c("x");

    /* The frame's size is its overhead plus the payload, rounded up to 8:
     * measure the overhead, then fill the rest. */
    size_t overhead = roundtrip(&f);
    REQUIRE(overhead > 0 && overhead < 256);
    /* From a little over the cap down to the first payload that fits:
     * the size grows by 8 every 8 bytes of payload, so that one fills the
     * cap exactly. */
    uint32_t n = (uint32_t)(IPC_FRAME_MAX_DEFAULT - overhead + 16);
    size_t len = 0;
    for (; n > IPC_FRAME_MAX_DEFAULT - overhead - 16; n--) {
        struct ipc_fb_builder b;
        f.u.gateway_reply.response.len = n;
        ipc_fb_builder_init(&b);
        REQUIRE(ipc_frame_encode(&b, &f, NULL) == 0);
        len = b.len;
        ipc_fb_builder_free(&b);
        if (len <= IPC_FRAME_MAX_DEFAULT)
            break;
    }
    CHECK_EQ(len, IPC_FRAME_MAX_DEFAULT);
    CHECK_EQ(roundtrip(&f), IPC_FRAME_MAX_DEFAULT);
    free(data);
}

/* ---- the encoder's interface ------------------------------------------ */

/* seq has a fixed place that a channel stamps at send time. */
static void
test_seq_stamp(void)
{
    struct ipc_frame f = { .type = IPC_BODY_HEARTBEAT, .seq = 0 };
    struct ipc_fb_builder b;
    struct ipc_frame out;
    size_t seq_pos = 0;
    uint64_t seq = 0x0123456789abcdefu;

    ipc_fb_builder_init(&b);
    REQUIRE(ipc_frame_encode(&b, &f, &seq_pos) == 0);
    REQUIRE(seq_pos > 0 && seq_pos + 8 <= b.len);
    CHECK(seq_pos % 8 == 0);
    memcpy(b.buf + seq_pos, &seq, 8);
    REQUIRE(ipc_frame_read(b.buf, b.len, &out, NULL) == 0);
    CHECK(out.seq == seq);
    CHECK(out.type == IPC_BODY_HEARTBEAT);
    ipc_fb_builder_free(&b);
}

static void
test_encode_bad_type(void)
{
    const int types[] = { IPC_BODY_NONE, IPC_BODY_MAX + 1, 200 };
    for (unsigned i = 0; i < 3; i++) {
        struct ipc_frame f = { .type = (enum ipc_body_type)types[i] };
        struct ipc_fb_builder b;
        ipc_fb_builder_init(&b);
        CHECK(ipc_frame_encode(&b, &f, NULL) == -1);
        ipc_fb_builder_free(&b);
    }
}

static void
test_body_names(void)
{
    static const char *const names[] = {
        "NONE",     "Hello",       "Load",         "Loaded", "Process",
        "Result",   "GatewayCall", "GatewayReply", "Log",    "Heartbeat",
        "Shutdown", "Fork",        "Forked",
    };
    for (int t = 0; t <= IPC_BODY_MAX; t++)
        CHECK(strcmp(ipc_body_name((enum ipc_body_type)t), names[t]) == 0);
    CHECK(strcmp(ipc_body_name((enum ipc_body_type)(IPC_BODY_MAX + 1)),
                 "NONE") == 0);
}

/* ---- the protocol's rules above FlatBuffers --------------------------- */

static void
expect_read_error(const struct ipc_frame *f, enum ipc_fb_err code,
                  const char *table, const char *field)
{
    struct ipc_fb_builder b;
    struct ipc_frame out;
    struct ipc_fb_error err;
    char msg[256];

    ipc_fb_builder_init(&b);
    REQUIRE(ipc_frame_encode(&b, f, NULL) == 0);
    unsigned char *copy = check_dup(b.buf, b.len);
    memset(&err, 0, sizeof err);
    CHECK(ipc_frame_read(copy, b.len, &out, &err) == -1);
    ipc_fb_error_format(&err, msg, sizeof msg);
    if (err.code != code)
        fprintf(stderr, "  got: %s\n", msg);
    CHECK_EQ(err.code, code);
    CHECK(table == NULL ||
          (err.table != NULL && strcmp(err.table, table) == 0));
    CHECK(field == NULL ||
          (err.field != NULL && strcmp(err.field, field) == 0));
    free(copy);
    ipc_fb_builder_free(&b);
}

static void
test_log_level_unknown(void)
{
    struct ipc_frame f = { .type = IPC_BODY_LOG };
    f.u.log.message = ipc_str_c("m");
    f.u.log.level = (enum ipc_log_level)(IPC_LOG_ERROR + 1);
    expect_read_error(&f, IPC_FB_ERR_APP, "Log", "level");
    f.u.log.level = (enum ipc_log_level)255;
    expect_read_error(&f, IPC_FB_ERR_APP, "Log", "level");
}

/* Process.event must be a CloudEvent by the CloudEvents rules too. */
static void
test_process_event_rules(void)
{
    struct ipc_fb_builder eb;
    struct ipc_cloudevent ce = event_minimal();
    struct ipc_frame f = { .type = IPC_BODY_PROCESS };

    ce.id = (struct ipc_str){ NULL, 0 };
    f.u.process.event = event_buffer(&eb, &ce);
    expect_read_error(&f, IPC_FB_ERR_APP, "CloudEvent", "id");
    ipc_fb_builder_free(&eb);

    static const struct ipc_pair bad[] = { { { "Bad", 3 }, { "v", 1 } } };
    ce = event_minimal();
    ce.extensions = (struct ipc_pair_list){ .n = 1, .items = bad };
    f.u.process.event = event_buffer(&eb, &ce);
    expect_read_error(&f, IPC_FB_ERR_APP, "Extension", "name");
    ipc_fb_builder_free(&eb);
}

/* Bytes that are no FlatBuffer at all fail the nested verification, and
 * the error's offset lies inside the outer frame. */
static void
test_process_event_garbage(void)
{
    static const uint8_t junk[16] = { 0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4 };
    static const uint8_t tiny[8] = { 4, 0, 0, 0, 0, 0, 0, 0 };
    struct ipc_frame f = { .type = IPC_BODY_PROCESS };
    struct ipc_fb_builder b;
    struct ipc_fb_error err;
    struct ipc_frame out;

    f.u.process.event = (struct ipc_bytes){ junk, sizeof junk };
    expect_read_error(&f, IPC_FB_ERR_OFFSET, "CloudEvent", NULL);
    ipc_fb_builder_init(&b);
    REQUIRE(ipc_frame_encode(&b, &f, NULL) == 0);
    CHECK(ipc_frame_read(b.buf, b.len, &out, &err) == -1);
    CHECK(err.offset > 0 && err.offset < b.len);
    ipc_fb_builder_free(&b);

    /* Smaller than any FlatBuffer; then absent altogether (written as an
     * empty vector by the builder). */
    f.u.process.event = (struct ipc_bytes){ tiny, sizeof tiny };
    expect_read_error(&f, IPC_FB_ERR_NESTED, "Process", "event");
    f.u.process.event = (struct ipc_bytes){ NULL, 0 };
    expect_read_error(&f, IPC_FB_ERR_NESTED, "Process", "event");
}

static void
test_result_output_rules(void)
{
    struct ipc_cloudevent outs[] = { event_full(), event_minimal() };
    struct ipc_frame f = { .type = IPC_BODY_RESULT };
    outs[1].specversion = (struct ipc_str){ "", 0 };
    f.u.result.outputs = (struct ipc_cloudevent_list){ .n = 2, .items = outs };
    expect_read_error(&f, IPC_FB_ERR_APP, "CloudEvent", "specversion");
}

/* ---- required fields -------------------------------------------------- */

/* Those the public builder can leave out. */
static void
test_required_by_builder(void)
{
    struct ipc_frame f = { .type = IPC_BODY_LOAD };
    f.u.load = (struct ipc_load){ .mime = ipc_str_c("m"), .code_fd = -1 };
    expect_read_error(&f, IPC_FB_ERR_REQUIRED, "Load", "worker_id");
    f.u.load = (struct ipc_load){ .worker_id = ipc_str_c("w"), .code_fd = -1 };
    expect_read_error(&f, IPC_FB_ERR_REQUIRED, "Load", "mime");

    /* ConfigEntry: name and value are both required (unlike Extension). */
    struct ipc_pair cfg = { { NULL, 0 }, { "v", 1 } };
    f.u.load = (struct ipc_load){ .worker_id = ipc_str_c("w"),
                                  .mime = ipc_str_c("m"),
                                  .code_fd = -1,
                                  .config = { .n = 1, .items = &cfg } };
    expect_read_error(&f, IPC_FB_ERR_REQUIRED, "ConfigEntry", "name");
    cfg = (struct ipc_pair){ { "n", 1 }, { NULL, 0 } };
    expect_read_error(&f, IPC_FB_ERR_REQUIRED, "ConfigEntry", "value");

    f = (struct ipc_frame){ .type = IPC_BODY_GATEWAY_CALL };
    f.u.gateway_call.method = ipc_str_c("get");
    expect_read_error(&f, IPC_FB_ERR_REQUIRED, "GatewayCall", "service");
    f.u.gateway_call.method = (struct ipc_str){ NULL, 0 };
    f.u.gateway_call.service = ipc_str_c("state");
    expect_read_error(&f, IPC_FB_ERR_REQUIRED, "GatewayCall", "method");

    f = (struct ipc_frame){ .type = IPC_BODY_FORK };
    expect_read_error(&f, IPC_FB_ERR_REQUIRED, "Fork", "worker_id");
}

/* A hand-built frame: the Frame table, then the body table `body` with its
 * fields; returns the builder's result.  body_type may be any byte and
 * with_body false leaves the body out. */
struct hand_field {
    unsigned id;
    unsigned size; /* 1, 2, 4, 8: a scalar; 0: a string */
    uint64_t value;
    const char *str;
};

static int
hand_frame(struct ipc_fb_builder *b, uint8_t body_type, bool with_body,
           const struct hand_field *fields, unsigned nfields)
{
    struct ipc_fb_table t, bt;

    ipc_fb_builder_init(b);
    size_t root = ipc_fb_start(b, true, IPC_FRAME_IDENT);
    ipc_fb_table_begin(&t);
    ipc_fb_table_scalar(&t, F_SEQ, 8, 1);
    ipc_fb_table_scalar(&t, F_REPLY_TO, 8, 0);
    ipc_fb_table_scalar(&t, F_BODY_TYPE, 1, body_type);
    if (with_body)
        ipc_fb_table_ref(&t, F_BODY);
    ipc_fb_patch(b, root, ipc_fb_table_end(b, &t));
    if (with_body) {
        ipc_fb_table_begin(&bt);
        for (unsigned i = 0; i < nfields; i++) {
            if (fields[i].size)
                ipc_fb_table_scalar(&bt, fields[i].id, fields[i].size,
                                    fields[i].value);
            else
                ipc_fb_table_ref(&bt, fields[i].id);
        }
        ipc_fb_patch(b, t.slot[F_BODY], ipc_fb_table_end(b, &bt));
        for (unsigned i = 0; i < nfields; i++)
            if (fields[i].size == 0)
                ipc_fb_patch(b, bt.slot[fields[i].id],
                             ipc_fb_string(b, ipc_str_c(fields[i].str)));
    }
    return ipc_fb_finish(b, root, true);
}

static void
expect_hand_error(struct ipc_fb_builder *b, enum ipc_fb_err code,
                  const char *table, const char *field)
{
    struct ipc_frame out;
    struct ipc_fb_error err;

    memset(&err, 0, sizeof err);
    unsigned char *copy = check_dup(b->buf, b->len);
    CHECK(ipc_frame_read(copy, b->len, &out, &err) == -1);
    CHECK_EQ(err.code, code);
    CHECK(table == NULL ||
          (err.table != NULL && strcmp(err.table, table) == 0));
    CHECK(field == NULL ||
          (err.field != NULL && strcmp(err.field, field) == 0));
    free(copy);
    ipc_fb_builder_free(b);
}

static void
test_required_by_hand(void)
{
    struct ipc_fb_builder b;

    /* Log without its message (level only). */
    const struct hand_field log_level[] = { { 0, 1, IPC_LOG_WARN, NULL } };
    REQUIRE(hand_frame(&b, IPC_BODY_LOG, true, log_level, 1) == 0);
    expect_hand_error(&b, IPC_FB_ERR_REQUIRED, "Log", "message");

    /* Process without its event (deadline only). */
    const struct hand_field deadline[] = { { 1, 4, 100, NULL } };
    REQUIRE(hand_frame(&b, IPC_BODY_PROCESS, true, deadline, 1) == 0);
    expect_hand_error(&b, IPC_FB_ERR_REQUIRED, "Process", "event");

    /* Frame without its body, whether the type says a body or NONE. */
    REQUIRE(hand_frame(&b, IPC_BODY_HEARTBEAT, false, NULL, 0) == 0);
    expect_hand_error(&b, IPC_FB_ERR_REQUIRED, "Frame", "body");
    REQUIRE(hand_frame(&b, IPC_BODY_NONE, false, NULL, 0) == 0);
    expect_hand_error(&b, IPC_FB_ERR_REQUIRED, "Frame", "body");

    /* Loaded { error: Error { message } }: an Error without its type,
     * one level below the body. */
    struct ipc_fb_table t, lt, et;
    ipc_fb_builder_init(&b);
    size_t root = ipc_fb_start(&b, true, IPC_FRAME_IDENT);
    ipc_fb_table_begin(&t);
    ipc_fb_table_scalar(&t, F_BODY_TYPE, 1, IPC_BODY_LOADED);
    ipc_fb_table_ref(&t, F_BODY);
    ipc_fb_patch(&b, root, ipc_fb_table_end(&b, &t));
    ipc_fb_table_begin(&lt);
    ipc_fb_table_ref(&lt, 1); /* Loaded.error */
    ipc_fb_patch(&b, t.slot[F_BODY], ipc_fb_table_end(&b, &lt));
    ipc_fb_table_begin(&et);
    ipc_fb_table_ref(&et, 1); /* Error.message, no Error.type */
    ipc_fb_patch(&b, lt.slot[1], ipc_fb_table_end(&b, &et));
    ipc_fb_patch(&b, et.slot[1], ipc_fb_string(&b, ipc_str_c("msg")));
    REQUIRE(ipc_fb_finish(&b, root, true) == 0);
    expect_hand_error(&b, IPC_FB_ERR_REQUIRED, "Error", "type");

    /* Load with an Identity that lacks its id. */
    struct ipc_fb_table ldt, it;
    ipc_fb_builder_init(&b);
    root = ipc_fb_start(&b, true, IPC_FRAME_IDENT);
    ipc_fb_table_begin(&t);
    ipc_fb_table_scalar(&t, F_BODY_TYPE, 1, IPC_BODY_LOAD);
    ipc_fb_table_ref(&t, F_BODY);
    ipc_fb_patch(&b, root, ipc_fb_table_end(&b, &t));
    ipc_fb_table_begin(&ldt);
    ipc_fb_table_ref(&ldt, 0); /* worker_id */
    ipc_fb_table_ref(&ldt, 2); /* mime */
    ipc_fb_table_ref(&ldt, 6); /* identity */
    ipc_fb_patch(&b, t.slot[F_BODY], ipc_fb_table_end(&b, &ldt));
    ipc_fb_patch(&b, ldt.slot[0], ipc_fb_string(&b, ipc_str_c("w")));
    ipc_fb_patch(&b, ldt.slot[2], ipc_fb_string(&b, ipc_str_c("m")));
    ipc_fb_table_begin(&it);
    ipc_fb_table_ref(&it, 1); /* group, no id */
    ipc_fb_patch(&b, ldt.slot[6], ipc_fb_table_end(&b, &it));
    ipc_fb_patch(&b, it.slot[1], ipc_fb_string(&b, ipc_str_c("g")));
    REQUIRE(ipc_fb_finish(&b, root, true) == 0);
    expect_hand_error(&b, IPC_FB_ERR_REQUIRED, "Identity", "id");

    /* The hand builder itself makes valid frames: a Log with both. */
    const struct hand_field log_ok[] = { { 0, 1, IPC_LOG_WARN, NULL },
                                         { 1, 0, 0, "hello" } };
    struct ipc_frame out;
    REQUIRE(hand_frame(&b, IPC_BODY_LOG, true, log_ok, 2) == 0);
    CHECK(ipc_frame_read(b.buf, b.len, &out, NULL) == 0);
    CHECK(out.type == IPC_BODY_LOG && out.u.log.level == IPC_LOG_WARN);
    CHECK(ipc_str_eq(out.u.log.message, "hello"));
    ipc_fb_builder_free(&b);
}

/* Hello.protocol defaults to 1 and Log.level to Info when absent, and
 * Load.code_fd to -1: a frame built with absent scalars decodes them. */
static void
test_scalar_defaults(void)
{
    struct ipc_fb_builder b;
    struct ipc_frame out;

    REQUIRE(hand_frame(&b, IPC_BODY_HELLO, true, NULL, 0) == 0);
    REQUIRE(ipc_frame_read(b.buf, b.len, &out, NULL) == 0);
    CHECK(out.u.hello.protocol == 1 && out.u.hello.pid == 0);
    CHECK(!out.u.hello.accepted && out.u.hello.engine.ptr == NULL);
    ipc_fb_builder_free(&b);

    const struct hand_field msg[] = { { 1, 0, 0, "m" } };
    REQUIRE(hand_frame(&b, IPC_BODY_LOG, true, msg, 1) == 0);
    REQUIRE(ipc_frame_read(b.buf, b.len, &out, NULL) == 0);
    CHECK(out.u.log.level == IPC_LOG_INFO);
    ipc_fb_builder_free(&b);

    const struct hand_field load[] = { { 0, 0, 0, "w" }, { 2, 0, 0, "m" } };
    REQUIRE(hand_frame(&b, IPC_BODY_LOAD, true, load, 2) == 0);
    REQUIRE(ipc_frame_read(b.buf, b.len, &out, NULL) == 0);
    CHECK(out.u.load.code_fd == -1 && out.u.load.code_len == 0);
    CHECK(!out.u.load.limits.present && out.u.load.identity.id.ptr == NULL);
    CHECK(out.u.load.config.n == 0);
    ipc_fb_builder_free(&b);

    REQUIRE(hand_frame(&b, IPC_BODY_SHUTDOWN, true, NULL, 0) == 0);
    REQUIRE(ipc_frame_read(b.buf, b.len, &out, NULL) == 0);
    CHECK(out.u.shutdown.grace_ms == 0 && out.seq == 1);
    ipc_fb_builder_free(&b);
}

int
main(void)
{
    RUN(test_hello);
    RUN(test_load);
    RUN(test_load_maximal);
    RUN(test_loaded);
    RUN(test_process);
    RUN(test_result);
    RUN(test_result_maximal);
    RUN(test_gateway_call);
    RUN(test_gateway_reply);
    RUN(test_log);
    RUN(test_heartbeat);
    RUN(test_shutdown);
    RUN(test_fork);
    RUN(test_forked);
    RUN(test_bodies_maximal_and_empty);
    RUN(test_frame_at_cap);
    RUN(test_seq_stamp);
    RUN(test_encode_bad_type);
    RUN(test_body_names);
    RUN(test_log_level_unknown);
    RUN(test_process_event_rules);
    RUN(test_process_event_garbage);
    RUN(test_result_output_rules);
    RUN(test_required_by_builder);
    RUN(test_required_by_hand);
    RUN(test_scalar_defaults);
    return check_result();
}
