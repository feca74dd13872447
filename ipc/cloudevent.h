/*
 * cloudevent.h — the native worker ABI tables of ipc/worker_api.fbs:
 * CloudEvent, Extension and WorkerResponse (DESIGN §4).
 *
 * Decoded values are views into the verified buffer (no copies); the same
 * structs, filled by the caller, drive the builders.  A vector field is a
 * struct ipc_*_list that holds either a C array (when building) or the
 * vector inside a buffer (when decoded); the *_get() accessors read both, so
 * a decoded value can be re-encoded as it is.
 */
#ifndef WM_IPC_CLOUDEVENT_H
#define WM_IPC_CLOUDEVENT_H

#include "ipc/fb.h"

/* A name/value pair: a CloudEvent extension or a worker config entry. */
struct ipc_pair {
    struct ipc_str name;
    struct ipc_str value;
};

struct ipc_pair_list {
    uint32_t n;
    const struct ipc_pair *items; /* building */
    const uint8_t *fb;            /* decoded: the vector's length word */
};

struct ipc_cloudevent {
    struct ipc_str id;
    struct ipc_str type;
    struct ipc_str source;
    struct ipc_str specversion;
    struct ipc_str datacontenttype;
    struct ipc_str dataschema;
    struct ipc_str subject;
    struct ipc_str time;
    struct ipc_bytes data;
    struct ipc_pair_list extensions;
};

struct ipc_cloudevent_list {
    uint32_t n;
    const struct ipc_cloudevent *items; /* building */
    const uint8_t *fb;                  /* decoded */
};

/* Exactly one of result_event (has_result) and error_message is set. */
struct ipc_worker_response {
    bool has_result;
    struct ipc_cloudevent result_event;
    struct ipc_str error_message;
};

extern const struct ipc_fb_schema ipc_extension_schema;
extern const struct ipc_fb_schema ipc_cloudevent_schema;
extern const struct ipc_fb_schema ipc_worker_response_schema;

/* Pair i of a list (i < list->n). */
void ipc_pair_list_get(const struct ipc_pair_list *list, uint32_t i,
                       struct ipc_pair *out);
/* Event i of a list (i < list->n). */
void ipc_cloudevent_list_get(const struct ipc_cloudevent_list *list, uint32_t i,
                             struct ipc_cloudevent *out);

/* Writes a vector of Extension-shaped tables; returns its position. */
size_t ipc_pair_list_build(struct ipc_fb_builder *b,
                           const struct ipc_pair_list *list);

/* Fills *ce from the CloudEvent table at t (in a verified buffer). */
void ipc_cloudevent_decode(const uint8_t *t, struct ipc_cloudevent *ce);
/* Verifies an ABI CloudEvent buffer (no identifier, no prefix) and decodes
 * it.  Returns 0, or -1 with *err set.  For bytes from outside the
 * process: once, where they come in. */
int ipc_cloudevent_read(const uint8_t *buf, size_t len,
                        struct ipc_cloudevent *ce, struct ipc_fb_error *err);
/* Decodes an ABI CloudEvent buffer known to be good, verifying nothing:
 * one that passed ipc_cloudevent_read() (or ipc_frame_read(), which
 * verifies the events a frame carries) before, or that
 * ipc_cloudevent_encode() wrote.  A verified buffer stays verified as long
 * as its bytes do not change, so a buffer carried on after its check is
 * decoded with this, not verified again.  Never for bytes from outside the
 * process (a client, a host, a file) that were not verified. */
void ipc_cloudevent_decode_trusted(const uint8_t *buf,
                                   struct ipc_cloudevent *ce);
/* The id alone of such a buffer (one field read, not the whole event). */
struct ipc_str ipc_cloudevent_id_trusted(const uint8_t *buf);
/* Writes the CloudEvent table (and its children) into b; returns the
 * table's position. */
size_t ipc_cloudevent_build(struct ipc_fb_builder *b,
                            const struct ipc_cloudevent *ce);
/* Writes a whole ABI CloudEvent buffer at the end of b (empty it first for
 * a buffer of its own).  Returns 0, or -1 when out of memory. */
int ipc_cloudevent_encode(struct ipc_fb_builder *b,
                          const struct ipc_cloudevent *ce);
/* The CloudEvents rules above FlatBuffers: id, source, specversion and type
 * present and non-empty, extension names [a-z0-9]{1,20} and unique.
 * Returns 0, or -1 with err->code IPC_FB_ERR_APP and err->detail naming the
 * rule. */
int ipc_cloudevent_check(const struct ipc_cloudevent *ce,
                         struct ipc_fb_error *err);
/* The extension named `name`, or a value with ptr NULL. */
struct ipc_str ipc_cloudevent_extension(const struct ipc_cloudevent *ce,
                                        const char *name);

/* Verifies and decodes an ABI WorkerResponse buffer, including the rule
 * that exactly one of result_event and error_message is set. */
int ipc_worker_response_read(const uint8_t *buf, size_t len,
                             struct ipc_worker_response *r,
                             struct ipc_fb_error *err);
int ipc_worker_response_encode(struct ipc_fb_builder *b,
                               const struct ipc_worker_response *r);

/* Helpers for building values from C strings. */
static inline struct ipc_str
ipc_str_c(const char *s)
{
    struct ipc_str r = { s, s ? (uint32_t)strlen(s) : 0 };
    return r;
}

static inline bool
ipc_str_eq(struct ipc_str a, const char *s)
{
    size_t n = strlen(s);
    return a.ptr && a.len == n && memcmp(a.ptr, s, n) == 0;
}

#endif /* WM_IPC_CLOUDEVENT_H */
