/*
 * cloudevent.c — codec of the native worker ABI: CloudEvent, Extension,
 * WorkerResponse (ipc/worker_api.fbs, DESIGN §4).
 *
 * The field ids below are the schema's; tests/fixtures holds an independent
 * transcription of the original's field list that the cross-language tests
 * read our buffers with, so a drift here fails them.
 */
#include "config.h"

#include "ipc/cloudevent.h"

#include "lib/name.h"

enum {
    EXT_NAME = 0,
    EXT_VALUE = 1,
};

enum {
    CE_ID = 0,
    CE_TYPE,
    CE_SOURCE,
    CE_SPECVERSION,
    CE_DATACONTENTTYPE,
    CE_DATASCHEMA,
    CE_SUBJECT,
    CE_TIME,
    CE_DATA,
    CE_EXTENSIONS,
    CE_NFIELDS
};

enum {
    WR_RESULT_EVENT = 0,
    WR_ERROR_MESSAGE = 1,
};

/* CloudEvents allows any number of extensions; bounding them keeps the
 * uniqueness check of ipc_cloudevent_check() cheap on hostile input. */
#define CE_MAX_EXTENSIONS 128

static const struct ipc_fb_field extension_fields[] = {
    [EXT_NAME] = { .name = "name", .type = IPC_FB_STRING },
    [EXT_VALUE] = { .name = "value", .type = IPC_FB_STRING },
};

const struct ipc_fb_schema ipc_extension_schema = {
    .name = "Extension",
    .nfields = 2,
    .fields = extension_fields,
};

static const struct ipc_fb_field cloudevent_fields[] = {
    [CE_ID] = { .name = "id", .type = IPC_FB_STRING },
    [CE_TYPE] = { .name = "type", .type = IPC_FB_STRING },
    [CE_SOURCE] = { .name = "source", .type = IPC_FB_STRING },
    [CE_SPECVERSION] = { .name = "specversion", .type = IPC_FB_STRING },
    [CE_DATACONTENTTYPE] = { .name = "datacontenttype", .type = IPC_FB_STRING },
    [CE_DATASCHEMA] = { .name = "dataschema", .type = IPC_FB_STRING },
    [CE_SUBJECT] = { .name = "subject", .type = IPC_FB_STRING },
    [CE_TIME] = { .name = "time", .type = IPC_FB_STRING },
    [CE_DATA] = { .name = "data", .type = IPC_FB_BYTES },
    [CE_EXTENSIONS] = { .name = "extensions",
                        .type = IPC_FB_TABLES,
                        .table = &ipc_extension_schema },
};

const struct ipc_fb_schema ipc_cloudevent_schema = {
    .name = "CloudEvent",
    .nfields = CE_NFIELDS,
    .fields = cloudevent_fields,
};

static const struct ipc_fb_field worker_response_fields[] = {
    [WR_RESULT_EVENT] = { .name = "result_event",
                          .type = IPC_FB_TABLE,
                          .table = &ipc_cloudevent_schema },
    [WR_ERROR_MESSAGE] = { .name = "error_message", .type = IPC_FB_STRING },
};

const struct ipc_fb_schema ipc_worker_response_schema = {
    .name = "WorkerResponse",
    .nfields = 2,
    .fields = worker_response_fields,
};

void
ipc_pair_list_get(const struct ipc_pair_list *list, uint32_t i,
                  struct ipc_pair *out)
{
    if (list->items) {
        *out = list->items[i];
        return;
    }
    const uint8_t *t = ipc_fb_vec_table(list->fb, i);
    out->name = ipc_fb_get_str(t, EXT_NAME);
    out->value = ipc_fb_get_str(t, EXT_VALUE);
}

void
ipc_cloudevent_list_get(const struct ipc_cloudevent_list *list, uint32_t i,
                        struct ipc_cloudevent *out)
{
    if (list->items)
        *out = list->items[i];
    else
        ipc_cloudevent_decode(ipc_fb_vec_table(list->fb, i), out);
}

void
ipc_cloudevent_decode(const uint8_t *t, struct ipc_cloudevent *ce)
{
    ce->id = ipc_fb_get_str(t, CE_ID);
    ce->type = ipc_fb_get_str(t, CE_TYPE);
    ce->source = ipc_fb_get_str(t, CE_SOURCE);
    ce->specversion = ipc_fb_get_str(t, CE_SPECVERSION);
    ce->datacontenttype = ipc_fb_get_str(t, CE_DATACONTENTTYPE);
    ce->dataschema = ipc_fb_get_str(t, CE_DATASCHEMA);
    ce->subject = ipc_fb_get_str(t, CE_SUBJECT);
    ce->time = ipc_fb_get_str(t, CE_TIME);
    ce->data = ipc_fb_get_bytes(t, CE_DATA);
    ce->extensions.items = NULL;
    ce->extensions.fb = ipc_fb_get_ref(t, CE_EXTENSIONS);
    ce->extensions.n = ce->extensions.fb ? ipc_fb_u32(ce->extensions.fb) : 0;
}

int
ipc_cloudevent_read(const uint8_t *buf, size_t len, struct ipc_cloudevent *ce,
                    struct ipc_fb_error *err)
{
    if (ipc_fb_verify(buf, len, 0, NULL, &ipc_cloudevent_schema, NULL, err))
        return -1;
    ipc_cloudevent_decode(ipc_fb_root(buf, 0), ce);
    return 0;
}

void
ipc_cloudevent_decode_trusted(const uint8_t *buf, struct ipc_cloudevent *ce)
{
    ipc_cloudevent_decode(ipc_fb_root(buf, 0), ce);
}

struct ipc_str
ipc_cloudevent_id_trusted(const uint8_t *buf)
{
    return ipc_fb_get_str(ipc_fb_root(buf, 0), CE_ID);
}

/* Writes a table of optional strings whose ids are 0..n-1. */
static void
patch_strings(struct ipc_fb_builder *b, const struct ipc_fb_table *t,
              const struct ipc_str *s, unsigned n)
{
    for (unsigned id = 0; id < n; id++)
        if (s[id].ptr)
            ipc_fb_patch(b, t->slot[id], ipc_fb_string(b, s[id]));
}

static size_t
build_pair(struct ipc_fb_builder *b, const struct ipc_pair *p)
{
    struct ipc_fb_table t;
    const struct ipc_str s[2] = { p->name, p->value };

    ipc_fb_table_begin(&t);
    for (unsigned id = 0; id < 2; id++)
        if (s[id].ptr)
            ipc_fb_table_ref(&t, id);
    size_t pos = ipc_fb_table_end(b, &t);
    patch_strings(b, &t, s, 2);
    return pos;
}

size_t
ipc_pair_list_build(struct ipc_fb_builder *b, const struct ipc_pair_list *l)
{
    size_t vec = ipc_fb_offsets(b, l->n);
    for (uint32_t i = 0; i < l->n; i++) {
        struct ipc_pair p;
        ipc_pair_list_get(l, i, &p);
        ipc_fb_patch(b, vec + 4 + 4 * (size_t)i, build_pair(b, &p));
    }
    return vec;
}

size_t
ipc_cloudevent_build(struct ipc_fb_builder *b, const struct ipc_cloudevent *ce)
{
    const struct ipc_str s[] = {
        [CE_ID] = ce->id,
        [CE_TYPE] = ce->type,
        [CE_SOURCE] = ce->source,
        [CE_SPECVERSION] = ce->specversion,
        [CE_DATACONTENTTYPE] = ce->datacontenttype,
        [CE_DATASCHEMA] = ce->dataschema,
        [CE_SUBJECT] = ce->subject,
        [CE_TIME] = ce->time,
    };
    struct ipc_fb_table t;

    ipc_fb_table_begin(&t);
    for (unsigned id = 0; id < CE_DATA; id++)
        if (s[id].ptr)
            ipc_fb_table_ref(&t, id);
    if (ce->data.ptr)
        ipc_fb_table_ref(&t, CE_DATA);
    if (ce->extensions.n)
        ipc_fb_table_ref(&t, CE_EXTENSIONS);
    size_t pos = ipc_fb_table_end(b, &t);

    patch_strings(b, &t, s, CE_DATA);
    if (ce->data.ptr)
        ipc_fb_patch(b, t.slot[CE_DATA], ipc_fb_bytes(b, ce->data, 4));
    if (ce->extensions.n)
        ipc_fb_patch(b, t.slot[CE_EXTENSIONS],
                     ipc_pair_list_build(b, &ce->extensions));
    return pos;
}

int
ipc_cloudevent_encode(struct ipc_fb_builder *b, const struct ipc_cloudevent *ce)
{
    size_t root = ipc_fb_start(b, false, NULL);
    ipc_fb_patch(b, root, ipc_cloudevent_build(b, ce));
    return ipc_fb_finish(b, root, false);
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

int
ipc_cloudevent_check(const struct ipc_cloudevent *ce, struct ipc_fb_error *err)
{
    static const char *const required[] = { "id", "source", "specversion",
                                            "type" };
    const struct ipc_str values[] = { ce->id, ce->source, ce->specversion,
                                      ce->type };

    for (unsigned i = 0; i < 4; i++)
        if (values[i].ptr == NULL || values[i].len == 0)
            return app_error(err, "CloudEvent", required[i],
                             "required attribute missing or empty");
    if (ce->extensions.n > CE_MAX_EXTENSIONS)
        return app_error(err, "CloudEvent", "extensions",
                         "more than 128 extensions");
    for (uint32_t i = 0; i < ce->extensions.n; i++) {
        struct ipc_pair a;
        ipc_pair_list_get(&ce->extensions, i, &a);
        if (!name_ext_valid(a.name.ptr, a.name.len))
            return app_error(err, "Extension", "name",
                             "extension name is not " NAME_EXT_RULE);
        if (a.value.ptr == NULL)
            return app_error(err, "Extension", "value",
                             "extension without a value");
        for (uint32_t j = 0; j < i; j++) {
            struct ipc_pair p;
            ipc_pair_list_get(&ce->extensions, j, &p);
            if (p.name.len == a.name.len &&
                memcmp(p.name.ptr, a.name.ptr, a.name.len) == 0)
                return app_error(err, "Extension", "name",
                                 "extension name repeated");
        }
    }
    return 0;
}

struct ipc_str
ipc_cloudevent_extension(const struct ipc_cloudevent *ce, const char *name)
{
    struct ipc_str none = { NULL, 0 };
    for (uint32_t i = 0; i < ce->extensions.n; i++) {
        struct ipc_pair p;
        ipc_pair_list_get(&ce->extensions, i, &p);
        if (ipc_str_eq(p.name, name))
            return p.value;
    }
    return none;
}

int
ipc_worker_response_read(const uint8_t *buf, size_t len,
                         struct ipc_worker_response *r,
                         struct ipc_fb_error *err)
{
    if (ipc_fb_verify(buf, len, 0, NULL, &ipc_worker_response_schema, NULL,
                      err))
        return -1;
    const uint8_t *t = ipc_fb_root(buf, 0);
    const uint8_t *ev = ipc_fb_get_ref(t, WR_RESULT_EVENT);
    r->has_result = ev != NULL;
    if (ev)
        ipc_cloudevent_decode(ev, &r->result_event);
    r->error_message = ipc_fb_get_str(t, WR_ERROR_MESSAGE);
    if (r->has_result == (r->error_message.ptr != NULL))
        return app_error(err, "WorkerResponse", NULL,
                         "exactly one of result_event and error_message "
                         "must be set");
    return 0;
}

int
ipc_worker_response_encode(struct ipc_fb_builder *b,
                           const struct ipc_worker_response *r)
{
    struct ipc_fb_table t;
    size_t root = ipc_fb_start(b, false, NULL);

    ipc_fb_table_begin(&t);
    if (r->has_result)
        ipc_fb_table_ref(&t, WR_RESULT_EVENT);
    if (r->error_message.ptr)
        ipc_fb_table_ref(&t, WR_ERROR_MESSAGE);
    ipc_fb_patch(b, root, ipc_fb_table_end(b, &t));
    if (r->has_result)
        ipc_fb_patch(b, t.slot[WR_RESULT_EVENT],
                     ipc_cloudevent_build(b, &r->result_event));
    if (r->error_message.ptr)
        ipc_fb_patch(b, t.slot[WR_ERROR_MESSAGE],
                     ipc_fb_string(b, r->error_message));
    return ipc_fb_finish(b, root, false);
}
