/*
 * frame.c — codec of the frames of ipc/frame.fbs (DESIGN §3).
 *
 * One descriptor per table drives the verifier; one decode and one build
 * function per body type map it to struct ipc_frame.  Field ids are the
 * schema's (pinned: add at the end only).  Scalars are always written, so a
 * frame's seq has a fixed place that a channel stamps at send time.
 */
#include "config.h"

#include "ipc/frame.h"

/* ---- field ids ------------------------------------------------------- */

enum { FRAME_SEQ = 0, FRAME_REPLY_TO, FRAME_BODY_TYPE, FRAME_BODY };
enum {
    HELLO_PROTOCOL = 0,
    HELLO_ENGINE,
    HELLO_PID,
    HELLO_MAX_INFLIGHT,
    HELLO_CONFINEMENT,
    HELLO_ACCEPTED,
    HELLO_REASON,
    HELLO_PREFETCH,
    HELLO_NFIELDS
};
enum { IDENTITY_ID = 0, IDENTITY_GROUP, IDENTITY_TOPIC, IDENTITY_NFIELDS };
enum { LIMITS_TIMEOUT_MS = 0, LIMITS_MEMORY_MB, LIMITS_CONCURRENCY };
enum {
    LOAD_WORKER_ID = 0,
    LOAD_VERSION,
    LOAD_MIME,
    LOAD_CODE_FD,
    LOAD_CODE_LEN,
    LOAD_SHA256,
    LOAD_IDENTITY,
    LOAD_CONFIG,
    LOAD_LIMITS,
    LOAD_IN_PROCESS,
    LOAD_NFIELDS
};
enum {
    ERROR_TYPE = 0,
    ERROR_MESSAGE,
    ERROR_EXCEPTION_TYPE,
    ERROR_TRACEBACK,
    ERROR_NFIELDS
};
enum {
    LOADED_OK = 0,
    LOADED_ERROR,
    LOADED_LIBRARY_FD,
    LOADED_LIBRARY,
    LOADED_ENTRY_POINT,
    LOADED_FREE_RESULT,
    LOADED_NFIELDS
};
enum { PROCESS_EVENT = 0, PROCESS_DEADLINE_MS, PROCESS_DELIVERY };
enum { RESULT_OUTPUTS = 0, RESULT_ERROR };
enum { GWCALL_SERVICE = 0, GWCALL_METHOD, GWCALL_REQUEST };
enum { GWREPLY_STATUS = 0, GWREPLY_RESPONSE, GWREPLY_ERROR };
enum { LOG_LEVEL = 0, LOG_MESSAGE };
enum { SHUTDOWN_GRACE_MS = 0 };
enum { FORK_WORKER_ID = 0, FORK_UID, FORK_GID, FORK_LIMITS };
enum { FORKED_PID = 0 };

/* ---- schema descriptors --------------------------------------------- */

/* clang-format splits braced initialisers inside macros: */
/* clang-format off */
#define STR(n) { .name = n, .type = IPC_FB_STRING }
#define STR_REQ(n) { .name = n, .type = IPC_FB_STRING, .required = true }
#define BYTES(n) { .name = n, .type = IPC_FB_BYTES }
#define U8(n) { .name = n, .type = IPC_FB_U8 }
#define U16(n) { .name = n, .type = IPC_FB_U16 }
#define U32(n) { .name = n, .type = IPC_FB_U32 }
#define U64(n) { .name = n, .type = IPC_FB_U64 }
#define TABLE(n, s) { .name = n, .type = IPC_FB_TABLE, .table = &s }
#define SCHEMA(var, nm, f)                                                     \
    static const struct ipc_fb_schema var = {                                  \
        .name = nm,                                                            \
        .nfields = sizeof f / sizeof f[0],                                     \
        .fields = f,                                                           \
    }
/* clang-format on */

static const struct ipc_fb_field hello_fields[] = {
    U16("protocol"),    STR("engine"),  U32("pid"),    U32("max_inflight"),
    STR("confinement"), U8("accepted"), STR("reason"), U32("prefetch"),
};
SCHEMA(hello_schema, "Hello", hello_fields);

static const struct ipc_fb_field identity_fields[] = {
    STR_REQ("id"),
    STR("group"),
    STR("topic"),
};
SCHEMA(identity_schema, "Identity", identity_fields);

static const struct ipc_fb_field limits_fields[] = {
    U32("timeout_ms"),
    U32("memory_mb"),
    U32("concurrency"),
};
SCHEMA(limits_schema, "Limits", limits_fields);

static const struct ipc_fb_field config_entry_fields[] = {
    STR_REQ("name"),
    STR_REQ("value"),
};
SCHEMA(config_entry_schema, "ConfigEntry", config_entry_fields);

static const struct ipc_fb_field load_fields[] = {
    STR_REQ("worker_id"),
    U32("version"),
    STR_REQ("mime"),
    U32("code_fd"),
    U64("code_len"),
    BYTES("sha256"),
    TABLE("identity", identity_schema),
    { .name = "config", .type = IPC_FB_TABLES, .table = &config_entry_schema },
    TABLE("limits", limits_schema),
    U8("in_process"),
};
SCHEMA(load_schema, "Load", load_fields);

static const struct ipc_fb_field error_fields[] = {
    STR_REQ("type"),
    STR("message"),
    STR("exception_type"),
    STR("traceback"),
};
SCHEMA(error_schema, "Error", error_fields);

static const struct ipc_fb_field loaded_fields[] = {
    U8("ok"),       TABLE("error", error_schema), U32("library_fd"),
    STR("library"), STR("entry_point"),           STR("free_result"),
};
SCHEMA(loaded_schema, "Loaded", loaded_fields);

static const struct ipc_fb_field process_fields[] = {
    { .name = "event",
      .type = IPC_FB_NESTED,
      .required = true,
      .table = &ipc_cloudevent_schema },
    U32("deadline_ms"),
    U32("delivery"),
};
SCHEMA(process_schema, "Process", process_fields);

static const struct ipc_fb_field result_fields[] = {
    { .name = "outputs",
      .type = IPC_FB_TABLES,
      .table = &ipc_cloudevent_schema },
    TABLE("error", error_schema),
};
SCHEMA(result_schema, "Result", result_fields);

static const struct ipc_fb_field gateway_call_fields[] = {
    STR_REQ("service"),
    STR_REQ("method"),
    BYTES("request"),
};
SCHEMA(gateway_call_schema, "GatewayCall", gateway_call_fields);

static const struct ipc_fb_field gateway_reply_fields[] = {
    U32("status"),
    BYTES("response"),
    STR("error"),
};
SCHEMA(gateway_reply_schema, "GatewayReply", gateway_reply_fields);

static const struct ipc_fb_field log_fields[] = {
    U8("level"),
    STR_REQ("message"),
};
SCHEMA(log_schema, "Log", log_fields);

static const struct ipc_fb_schema heartbeat_schema = {
    .name = "Heartbeat",
    .nfields = 0,
    .fields = NULL,
};

static const struct ipc_fb_field shutdown_fields[] = {
    U32("grace_ms"),
};
SCHEMA(shutdown_schema, "Shutdown", shutdown_fields);

static const struct ipc_fb_field fork_fields[] = {
    STR_REQ("worker_id"),
    U32("uid"),
    U32("gid"),
    TABLE("limits", limits_schema),
};
SCHEMA(fork_schema, "Fork", fork_fields);

static const struct ipc_fb_field forked_fields[] = {
    U32("pid"),
};
SCHEMA(forked_schema, "Forked", forked_fields);

/* Indexed by union code - 1, in the order of `union Body`. */
static const struct ipc_fb_schema *const body_schemas[IPC_BODY_MAX] = {
    &hello_schema,         &load_schema,   &loaded_schema,
    &process_schema,       &result_schema, &gateway_call_schema,
    &gateway_reply_schema, &log_schema,    &heartbeat_schema,
    &shutdown_schema,      &fork_schema,   &forked_schema,
};

static const struct ipc_fb_field frame_fields[] = {
    U64("seq"),
    U64("reply_to"),
    { .name = "body_type", .type = IPC_FB_UNION_TYPE },
    { .name = "body",
      .type = IPC_FB_UNION,
      .required = true,
      .members = body_schemas,
      .nmembers = IPC_BODY_MAX },
};

const struct ipc_fb_schema ipc_frame_schema = {
    .name = "Frame",
    .nfields = 4,
    .fields = frame_fields,
};

const char *
ipc_body_name(enum ipc_body_type type)
{
    if (type >= 1 && type <= IPC_BODY_MAX)
        return body_schemas[type - 1]->name;
    return "NONE";
}

/* ---- decoding -------------------------------------------------------- */

static uint32_t
get_u32(const uint8_t *t, unsigned id, uint32_t def)
{
    return (uint32_t)ipc_fb_get_scalar(t, id, 4, def);
}

static void
decode_error(const uint8_t *t, struct ipc_error *e)
{
    memset(e, 0, sizeof *e);
    if (t == NULL)
        return;
    e->type = ipc_fb_get_str(t, ERROR_TYPE);
    e->message = ipc_fb_get_str(t, ERROR_MESSAGE);
    e->exception_type = ipc_fb_get_str(t, ERROR_EXCEPTION_TYPE);
    e->traceback = ipc_fb_get_str(t, ERROR_TRACEBACK);
}

static void
decode_limits(const uint8_t *t, struct ipc_limits *l)
{
    memset(l, 0, sizeof *l);
    if (t == NULL)
        return;
    l->present = true;
    l->timeout_ms = get_u32(t, LIMITS_TIMEOUT_MS, 0);
    l->memory_mb = get_u32(t, LIMITS_MEMORY_MB, 0);
    l->concurrency = get_u32(t, LIMITS_CONCURRENCY, 0);
}

static void
decode_list(const uint8_t *vec, uint32_t *n, const uint8_t **fb)
{
    *fb = vec;
    *n = vec ? ipc_fb_u32(vec) : 0;
}

static int
app_error(struct ipc_fb_error *err, const char *table, const char *field,
          const char *detail)
{
    if (err) {
        err->code = IPC_FB_ERR_APP;
        err->table = table;
        err->field = field;
        err->offset = 0;
        err->detail = detail;
    }
    return -1;
}

static void
decode_hello(const uint8_t *t, struct ipc_hello *h)
{
    h->protocol = (uint16_t)ipc_fb_get_scalar(t, HELLO_PROTOCOL, 2, 1);
    h->engine = ipc_fb_get_str(t, HELLO_ENGINE);
    h->pid = (int32_t)get_u32(t, HELLO_PID, 0);
    h->max_inflight = get_u32(t, HELLO_MAX_INFLIGHT, 0);
    h->confinement = ipc_fb_get_str(t, HELLO_CONFINEMENT);
    h->accepted = ipc_fb_get_scalar(t, HELLO_ACCEPTED, 1, 0) != 0;
    h->reason = ipc_fb_get_str(t, HELLO_REASON);
    h->prefetch = get_u32(t, HELLO_PREFETCH, 0);
}

static void
decode_load(const uint8_t *t, struct ipc_load *l)
{
    l->worker_id = ipc_fb_get_str(t, LOAD_WORKER_ID);
    l->version = get_u32(t, LOAD_VERSION, 0);
    l->mime = ipc_fb_get_str(t, LOAD_MIME);
    l->code_fd = (int32_t)get_u32(t, LOAD_CODE_FD, (uint32_t)-1);
    l->code_len = ipc_fb_get_scalar(t, LOAD_CODE_LEN, 8, 0);
    l->sha256 = ipc_fb_get_bytes(t, LOAD_SHA256);
    const uint8_t *id = ipc_fb_get_ref(t, LOAD_IDENTITY);
    memset(&l->identity, 0, sizeof l->identity);
    if (id) {
        l->identity.id = ipc_fb_get_str(id, IDENTITY_ID);
        l->identity.group = ipc_fb_get_str(id, IDENTITY_GROUP);
        l->identity.topic = ipc_fb_get_str(id, IDENTITY_TOPIC);
    }
    l->config.items = NULL;
    decode_list(ipc_fb_get_ref(t, LOAD_CONFIG), &l->config.n, &l->config.fb);
    decode_limits(ipc_fb_get_ref(t, LOAD_LIMITS), &l->limits);
    l->in_process = ipc_fb_get_scalar(t, LOAD_IN_PROCESS, 1, 0) != 0;
}

static void
decode_loaded(const uint8_t *t, struct ipc_loaded *l)
{
    l->ok = ipc_fb_get_scalar(t, LOADED_OK, 1, 0) != 0;
    decode_error(ipc_fb_get_ref(t, LOADED_ERROR), &l->error);
    l->library_fd = (int32_t)get_u32(t, LOADED_LIBRARY_FD, (uint32_t)-1);
    l->library = ipc_fb_get_str(t, LOADED_LIBRARY);
    l->entry_point = ipc_fb_get_str(t, LOADED_ENTRY_POINT);
    l->free_result = ipc_fb_get_str(t, LOADED_FREE_RESULT);
}

/* The protocol's rules above FlatBuffers: events that cross the boundary
 * are CloudEvents, log levels are known. */
static int
check_body(const struct ipc_frame *f, struct ipc_fb_error *err)
{
    struct ipc_cloudevent ce;

    switch (f->type) {
    case IPC_BODY_PROCESS:
        ipc_cloudevent_decode(ipc_fb_root(f->u.process.event.ptr, 0), &ce);
        return ipc_cloudevent_check(&ce, err);
    case IPC_BODY_RESULT:
        for (uint32_t i = 0; i < f->u.result.outputs.n; i++) {
            ipc_cloudevent_list_get(&f->u.result.outputs, i, &ce);
            if (ipc_cloudevent_check(&ce, err))
                return -1;
        }
        return 0;
    case IPC_BODY_LOG:
        if (f->u.log.level > IPC_LOG_ERROR)
            return app_error(err, "Log", "level", "unknown log level");
        return 0;
    default:
        return 0;
    }
}

int
ipc_frame_read(const uint8_t *buf, size_t len, struct ipc_frame *f,
               struct ipc_fb_error *err)
{
    if (ipc_fb_verify(buf, len, 4, IPC_FRAME_IDENT, &ipc_frame_schema, NULL,
                      err))
        return -1;

    const uint8_t *root = ipc_fb_root(buf, 4);
    const uint8_t *t = ipc_fb_get_ref(root, FRAME_BODY);

    memset(f, 0, sizeof *f);
    f->seq = ipc_fb_get_scalar(root, FRAME_SEQ, 8, 0);
    f->reply_to = ipc_fb_get_scalar(root, FRAME_REPLY_TO, 8, 0);
    f->type =
        (enum ipc_body_type)ipc_fb_get_scalar(root, FRAME_BODY_TYPE, 1, 0);
    switch (f->type) {
    case IPC_BODY_HELLO:
        decode_hello(t, &f->u.hello);
        break;
    case IPC_BODY_LOAD:
        decode_load(t, &f->u.load);
        break;
    case IPC_BODY_LOADED:
        decode_loaded(t, &f->u.loaded);
        break;
    case IPC_BODY_PROCESS:
        f->u.process.event = ipc_fb_get_bytes(t, PROCESS_EVENT);
        f->u.process.deadline_ms = get_u32(t, PROCESS_DEADLINE_MS, 0);
        f->u.process.delivery = get_u32(t, PROCESS_DELIVERY, 0);
        break;
    case IPC_BODY_RESULT:
        decode_list(ipc_fb_get_ref(t, RESULT_OUTPUTS), &f->u.result.outputs.n,
                    &f->u.result.outputs.fb);
        decode_error(ipc_fb_get_ref(t, RESULT_ERROR), &f->u.result.error);
        break;
    case IPC_BODY_GATEWAY_CALL:
        f->u.gateway_call.service = ipc_fb_get_str(t, GWCALL_SERVICE);
        f->u.gateway_call.method = ipc_fb_get_str(t, GWCALL_METHOD);
        f->u.gateway_call.request = ipc_fb_get_bytes(t, GWCALL_REQUEST);
        break;
    case IPC_BODY_GATEWAY_REPLY:
        f->u.gateway_reply.status = (int32_t)get_u32(t, GWREPLY_STATUS, 0);
        f->u.gateway_reply.response = ipc_fb_get_bytes(t, GWREPLY_RESPONSE);
        f->u.gateway_reply.error = ipc_fb_get_str(t, GWREPLY_ERROR);
        break;
    case IPC_BODY_LOG:
        f->u.log.level = (enum ipc_log_level)ipc_fb_get_scalar(t, LOG_LEVEL, 1,
                                                               IPC_LOG_INFO);
        f->u.log.message = ipc_fb_get_str(t, LOG_MESSAGE);
        break;
    case IPC_BODY_HEARTBEAT:
        break;
    case IPC_BODY_SHUTDOWN:
        f->u.shutdown.grace_ms = get_u32(t, SHUTDOWN_GRACE_MS, 0);
        break;
    case IPC_BODY_FORK:
        f->u.fork.worker_id = ipc_fb_get_str(t, FORK_WORKER_ID);
        f->u.fork.uid = get_u32(t, FORK_UID, 0);
        f->u.fork.gid = get_u32(t, FORK_GID, 0);
        decode_limits(ipc_fb_get_ref(t, FORK_LIMITS), &f->u.fork.limits);
        break;
    case IPC_BODY_FORKED:
        f->u.forked.pid = (int32_t)get_u32(t, FORKED_PID, 0);
        break;
    default:
        /* The verifier accepts only known union types. */
        return app_error(err, "Frame", "body", "unknown body type");
    }
    return check_body(f, err);
}

/* ---- building -------------------------------------------------------- */

/* Reserves slots for the present strings among s[0..n) (ids 0..n-1). */
static void
ref_strings(struct ipc_fb_table *t, const struct ipc_str *s, unsigned n)
{
    for (unsigned id = 0; id < n; id++)
        if (s[id].ptr)
            ipc_fb_table_ref(t, id);
}

static void
patch_strings(struct ipc_fb_builder *b, const struct ipc_fb_table *t,
              const struct ipc_str *s, unsigned n)
{
    for (unsigned id = 0; id < n; id++)
        if (s[id].ptr)
            ipc_fb_patch(b, t->slot[id], ipc_fb_string(b, s[id]));
}

static size_t
build_error(struct ipc_fb_builder *b, const struct ipc_error *e)
{
    const struct ipc_str s[ERROR_NFIELDS] = {
        [ERROR_TYPE] = e->type,
        [ERROR_MESSAGE] = e->message,
        [ERROR_EXCEPTION_TYPE] = e->exception_type,
        [ERROR_TRACEBACK] = e->traceback,
    };
    struct ipc_fb_table t;

    ipc_fb_table_begin(&t);
    ref_strings(&t, s, ERROR_NFIELDS);
    size_t pos = ipc_fb_table_end(b, &t);
    patch_strings(b, &t, s, ERROR_NFIELDS);
    return pos;
}

static size_t
build_limits(struct ipc_fb_builder *b, const struct ipc_limits *l)
{
    struct ipc_fb_table t;

    ipc_fb_table_begin(&t);
    ipc_fb_table_scalar(&t, LIMITS_TIMEOUT_MS, 4, l->timeout_ms);
    ipc_fb_table_scalar(&t, LIMITS_MEMORY_MB, 4, l->memory_mb);
    ipc_fb_table_scalar(&t, LIMITS_CONCURRENCY, 4, l->concurrency);
    return ipc_fb_table_end(b, &t);
}

/* A table with only an optional Error child at id `error_id`. */
static void
patch_error(struct ipc_fb_builder *b, const struct ipc_fb_table *t, unsigned id,
            const struct ipc_error *e)
{
    if (e->type.ptr)
        ipc_fb_patch(b, t->slot[id], build_error(b, e));
}

static size_t
build_hello(struct ipc_fb_builder *b, const struct ipc_hello *h)
{
    const struct ipc_str s[HELLO_NFIELDS] = {
        [HELLO_ENGINE] = h->engine,
        [HELLO_CONFINEMENT] = h->confinement,
        [HELLO_REASON] = h->reason,
    };
    struct ipc_fb_table t;

    ipc_fb_table_begin(&t);
    ref_strings(&t, s, HELLO_NFIELDS);
    ipc_fb_table_scalar(&t, HELLO_PROTOCOL, 2, h->protocol);
    ipc_fb_table_scalar(&t, HELLO_PID, 4, (uint32_t)h->pid);
    ipc_fb_table_scalar(&t, HELLO_MAX_INFLIGHT, 4, h->max_inflight);
    ipc_fb_table_scalar(&t, HELLO_ACCEPTED, 1, h->accepted);
    ipc_fb_table_scalar(&t, HELLO_PREFETCH, 4, h->prefetch);
    size_t pos = ipc_fb_table_end(b, &t);
    patch_strings(b, &t, s, HELLO_NFIELDS);
    return pos;
}

static size_t
build_load(struct ipc_fb_builder *b, const struct ipc_load *l)
{
    const struct ipc_str s[] = {
        [LOAD_WORKER_ID] = l->worker_id,
        [LOAD_MIME] = l->mime,
    };
    struct ipc_fb_table t;

    ipc_fb_table_begin(&t);
    ref_strings(&t, s, LOAD_MIME + 1);
    ipc_fb_table_scalar(&t, LOAD_VERSION, 4, l->version);
    ipc_fb_table_scalar(&t, LOAD_CODE_FD, 4, (uint32_t)l->code_fd);
    ipc_fb_table_scalar(&t, LOAD_CODE_LEN, 8, l->code_len);
    if (l->in_process)
        ipc_fb_table_scalar(&t, LOAD_IN_PROCESS, 1, 1);
    if (l->sha256.ptr)
        ipc_fb_table_ref(&t, LOAD_SHA256);
    if (l->identity.id.ptr)
        ipc_fb_table_ref(&t, LOAD_IDENTITY);
    if (l->config.n)
        ipc_fb_table_ref(&t, LOAD_CONFIG);
    if (l->limits.present)
        ipc_fb_table_ref(&t, LOAD_LIMITS);
    size_t pos = ipc_fb_table_end(b, &t);

    patch_strings(b, &t, s, LOAD_MIME + 1);
    if (l->sha256.ptr)
        ipc_fb_patch(b, t.slot[LOAD_SHA256], ipc_fb_bytes(b, l->sha256, 4));
    if (l->identity.id.ptr) {
        const struct ipc_str ids[IDENTITY_NFIELDS] = {
            [IDENTITY_ID] = l->identity.id,
            [IDENTITY_GROUP] = l->identity.group,
            [IDENTITY_TOPIC] = l->identity.topic,
        };
        struct ipc_fb_table it;
        ipc_fb_table_begin(&it);
        ref_strings(&it, ids, IDENTITY_NFIELDS);
        ipc_fb_patch(b, t.slot[LOAD_IDENTITY], ipc_fb_table_end(b, &it));
        patch_strings(b, &it, ids, IDENTITY_NFIELDS);
    }
    if (l->config.n)
        ipc_fb_patch(b, t.slot[LOAD_CONFIG],
                     ipc_pair_list_build(b, &l->config));
    if (l->limits.present)
        ipc_fb_patch(b, t.slot[LOAD_LIMITS], build_limits(b, &l->limits));
    return pos;
}

static size_t
build_loaded(struct ipc_fb_builder *b, const struct ipc_loaded *l)
{
    const struct ipc_str s[LOADED_NFIELDS] = {
        [LOADED_LIBRARY] = l->library,
        [LOADED_ENTRY_POINT] = l->entry_point,
        [LOADED_FREE_RESULT] = l->free_result,
    };
    struct ipc_fb_table t;

    ipc_fb_table_begin(&t);
    ipc_fb_table_scalar(&t, LOADED_OK, 1, l->ok);
    if (l->error.type.ptr)
        ipc_fb_table_ref(&t, LOADED_ERROR);
    if (l->library.ptr)
        ipc_fb_table_scalar(&t, LOADED_LIBRARY_FD, 4, (uint32_t)l->library_fd);
    ref_strings(&t, s, LOADED_NFIELDS);
    size_t pos = ipc_fb_table_end(b, &t);
    patch_error(b, &t, LOADED_ERROR, &l->error);
    patch_strings(b, &t, s, LOADED_NFIELDS);
    return pos;
}

static size_t
build_result(struct ipc_fb_builder *b, const struct ipc_result *r)
{
    struct ipc_fb_table t;

    ipc_fb_table_begin(&t);
    if (r->outputs.n)
        ipc_fb_table_ref(&t, RESULT_OUTPUTS);
    if (r->error.type.ptr)
        ipc_fb_table_ref(&t, RESULT_ERROR);
    size_t pos = ipc_fb_table_end(b, &t);
    if (r->outputs.n) {
        size_t vec = ipc_fb_offsets(b, r->outputs.n);
        ipc_fb_patch(b, t.slot[RESULT_OUTPUTS], vec);
        for (uint32_t i = 0; i < r->outputs.n; i++) {
            struct ipc_cloudevent ce;
            ipc_cloudevent_list_get(&r->outputs, i, &ce);
            ipc_fb_patch(b, vec + 4 + 4 * (size_t)i,
                         ipc_cloudevent_build(b, &ce));
        }
    }
    patch_error(b, &t, RESULT_ERROR, &r->error);
    return pos;
}

/* Tables of scalars and at most one string/bytes child, by body type. */
static size_t
build_small(struct ipc_fb_builder *b, const struct ipc_frame *f)
{
    struct ipc_fb_table t;
    unsigned ref = IPC_FB_MAX_FIELDS; /* the id of the one child, if any */
    struct ipc_str s = { NULL, 0 };
    struct ipc_bytes bytes = { NULL, 0 };
    size_t align = 4;

    ipc_fb_table_begin(&t);
    switch (f->type) {
    case IPC_BODY_PROCESS:
        ref = PROCESS_EVENT;
        bytes = f->u.process.event;
        /* The event is handed to native workers in place: 8-aligned. */
        align = 8;
        ipc_fb_table_scalar(&t, PROCESS_DEADLINE_MS, 4,
                            f->u.process.deadline_ms);
        ipc_fb_table_scalar(&t, PROCESS_DELIVERY, 4, f->u.process.delivery);
        break;
    case IPC_BODY_LOG:
        ref = LOG_MESSAGE;
        s = f->u.log.message.ptr ? f->u.log.message : ipc_str_c("");
        ipc_fb_table_scalar(&t, LOG_LEVEL, 1, f->u.log.level);
        break;
    case IPC_BODY_SHUTDOWN:
        ipc_fb_table_scalar(&t, SHUTDOWN_GRACE_MS, 4, f->u.shutdown.grace_ms);
        break;
    case IPC_BODY_FORKED:
        ipc_fb_table_scalar(&t, FORKED_PID, 4, (uint32_t)f->u.forked.pid);
        break;
    default: /* Heartbeat */
        break;
    }
    if (ref != IPC_FB_MAX_FIELDS)
        ipc_fb_table_ref(&t, ref);
    size_t pos = ipc_fb_table_end(b, &t);
    if (ref != IPC_FB_MAX_FIELDS)
        ipc_fb_patch(b, t.slot[ref],
                     s.ptr ? ipc_fb_string(b, s)
                           : ipc_fb_bytes(b, bytes, align));
    return pos;
}

static size_t
build_body(struct ipc_fb_builder *b, const struct ipc_frame *f)
{
    struct ipc_fb_table t;
    size_t pos;

    switch (f->type) {
    case IPC_BODY_HELLO:
        return build_hello(b, &f->u.hello);
    case IPC_BODY_LOAD:
        return build_load(b, &f->u.load);
    case IPC_BODY_LOADED:
        return build_loaded(b, &f->u.loaded);
    case IPC_BODY_RESULT:
        return build_result(b, &f->u.result);
    case IPC_BODY_GATEWAY_CALL: {
        const struct ipc_gateway_call *g = &f->u.gateway_call;
        const struct ipc_str s[] = { g->service, g->method };
        ipc_fb_table_begin(&t);
        ref_strings(&t, s, 2);
        if (g->request.ptr)
            ipc_fb_table_ref(&t, GWCALL_REQUEST);
        pos = ipc_fb_table_end(b, &t);
        patch_strings(b, &t, s, 2);
        if (g->request.ptr)
            ipc_fb_patch(b, t.slot[GWCALL_REQUEST],
                         ipc_fb_bytes(b, g->request, 4));
        return pos;
    }
    case IPC_BODY_GATEWAY_REPLY: {
        const struct ipc_gateway_reply *g = &f->u.gateway_reply;
        ipc_fb_table_begin(&t);
        ipc_fb_table_scalar(&t, GWREPLY_STATUS, 4, (uint32_t)g->status);
        if (g->response.ptr)
            ipc_fb_table_ref(&t, GWREPLY_RESPONSE);
        if (g->error.ptr)
            ipc_fb_table_ref(&t, GWREPLY_ERROR);
        pos = ipc_fb_table_end(b, &t);
        if (g->response.ptr)
            ipc_fb_patch(b, t.slot[GWREPLY_RESPONSE],
                         ipc_fb_bytes(b, g->response, 4));
        if (g->error.ptr)
            ipc_fb_patch(b, t.slot[GWREPLY_ERROR], ipc_fb_string(b, g->error));
        return pos;
    }
    case IPC_BODY_FORK: {
        const struct ipc_fork *k = &f->u.fork;
        ipc_fb_table_begin(&t);
        if (k->worker_id.ptr)
            ipc_fb_table_ref(&t, FORK_WORKER_ID);
        ipc_fb_table_scalar(&t, FORK_UID, 4, k->uid);
        ipc_fb_table_scalar(&t, FORK_GID, 4, k->gid);
        if (k->limits.present)
            ipc_fb_table_ref(&t, FORK_LIMITS);
        pos = ipc_fb_table_end(b, &t);
        if (k->worker_id.ptr)
            ipc_fb_patch(b, t.slot[FORK_WORKER_ID],
                         ipc_fb_string(b, k->worker_id));
        if (k->limits.present)
            ipc_fb_patch(b, t.slot[FORK_LIMITS], build_limits(b, &k->limits));
        return pos;
    }
    default:
        return build_small(b, f);
    }
}

int
ipc_frame_encode(struct ipc_fb_builder *b, const struct ipc_frame *f,
                 size_t *seq_pos)
{
    struct ipc_fb_table t;
    size_t root = ipc_fb_start(b, true, IPC_FRAME_IDENT);

    if (f->type < 1 || f->type > IPC_BODY_MAX)
        return -1;
    ipc_fb_table_begin(&t);
    ipc_fb_table_scalar(&t, FRAME_SEQ, 8, f->seq);
    ipc_fb_table_scalar(&t, FRAME_REPLY_TO, 8, f->reply_to);
    ipc_fb_table_scalar(&t, FRAME_BODY_TYPE, 1, f->type);
    ipc_fb_table_ref(&t, FRAME_BODY);
    ipc_fb_patch(b, root, ipc_fb_table_end(b, &t));
    ipc_fb_patch(b, t.slot[FRAME_BODY], build_body(b, f));
    if (seq_pos)
        *seq_pos = t.slot[FRAME_SEQ];
    return ipc_fb_finish(b, root, true);
}
