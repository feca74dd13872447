/*
 * workmanager/worker_api.h — the native worker ABI (DESIGN §4), compatible
 * with the original system's: what a native worker library exports and
 * what the engine hands it.
 *
 * A worker exports
 *
 *   int32_t Process(const VirtufinHost *host, const uint8_t *in_buf,
 *                   int32_t in_len, uint8_t **out_buf, int32_t *out_len);
 *   void FreeResult(uint8_t *buf);
 *
 * (names configurable in manifest.json: entry_point, free_result).  in_buf
 * is a FlatBuffers CloudEvent (worker_api.fbs: no file identifier, no size
 * prefix), valid during the call.  On success Process returns 0 and sets
 * *out_buf to a malloc'd FlatBuffers WorkerResponse (or NULL for no reply)
 * and *out_len to its length; non-zero means the worker failed.  The
 * engine calls FreeResult exactly once for every non-NULL *out_buf, error
 * paths included.  Process may be called from several threads at once
 * (the worker's concurrency).
 *
 * Before the library is loaded, VIRTUFIN_WORKER_ID, VIRTUFIN_WORKER_GROUP
 * and VIRTUFIN_WORKER_TOPIC are set in the environment.
 *
 * After the ABI come the helpers for worker authors (virtufin_event_read,
 * virtufin_response_event, virtufin_response_error, ...): static inline,
 * plain C99 and libc, so that a worker in C needs no FlatBuffers library.
 * They add no symbol to the ABI and change none of its declarations.
 */
#ifndef WORKMANAGER_WORKER_API_H
#define WORKMANAGER_WORKER_API_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VIRTUFIN_ABI_VERSION 1

/* Log levels of VirtufinHost.log. */
enum {
    VIRTUFIN_LOG_TRACE = 0,
    VIRTUFIN_LOG_DEBUG = 1,
    VIRTUFIN_LOG_INFO = 2,
    VIRTUFIN_LOG_WARN = 3,
    VIRTUFIN_LOG_ERROR = 4,
};

/* 40 bytes on 64-bit targets; 32-bit is unsupported. */
typedef struct VirtufinHost {
    void *engine_ptr;    /* opaque: pass it back, never dereference */
    int32_t abi_version; /* VIRTUFIN_ABI_VERSION */
    /* msg: NUL-terminated UTF-8, read during the call only. */
    void (*log)(void *engine_ptr, int32_t level, const char *msg);
    /* Calls a gateway service (workmanager.publish, workmanager.state)
     * with a JSON request; returns 0 and a response (JSON, *resp_len bytes,
     * freed with free_response), or non-zero with *resp an error message
     * (also freed with free_response) or NULL. */
    int32_t (*gateway_call)(void *engine_ptr, const char *service,
                            const char *method, const uint8_t *req,
                            int32_t req_len, uint8_t **resp, int32_t *resp_len);
    void (*free_response)(void *engine_ptr, uint8_t *resp);
} VirtufinHost;

typedef int32_t (*virtufin_process_fn)(const VirtufinHost *host,
                                       const uint8_t *in_buf, int32_t in_len,
                                       uint8_t **out_buf, int32_t *out_len);
typedef void (*virtufin_free_result_fn)(uint8_t *buf);

/*
 * ---- Helpers for worker authors --------------------------------------
 *
 * Small static inline functions, plain C99 and libc only, so that a worker
 * in C needs no FlatBuffers library: read the CloudEvent of in_buf, build
 * the WorkerResponse for *out_buf, free it in FreeResult.  They keep no
 * state: any number of threads may call them at once.
 *
 *   int32_t
 *   Process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
 *           uint8_t **out_buf, int32_t *out_len)
 *   {
 *       struct virtufin_event ev;
 *
 *       if (virtufin_event_read(in_buf, in_len, &ev) != VIRTUFIN_OK)
 *           return virtufin_response_error("not a CloudEvent", out_buf,
 *                                          out_len);
 *       ev.type = virtufin_str_c("reply");
 *       return virtufin_response_event(&ev, out_buf, out_len);
 *   }
 *
 *   void
 *   FreeResult(uint8_t *buf)
 *   {
 *       virtufin_response_free(buf);
 *   }
 *
 * The functions with a "virtufin_fb_" prefix are the FlatBuffers binary
 * format underneath (a buffer starts with the little-endian uoffset of its
 * root table; a table starts with the signed offset back to its vtable, a
 * list of 16-bit field offsets; strings and vectors are a 32-bit length
 * then the elements, strings NUL-terminated; every reference is an
 * unsigned offset from where it is stored, so it points forward).  They
 * are not part of the API.
 */

/* What the helpers return: 0, or a negative VIRTUFIN_ERR_* (also a
 * suitable non-zero return for Process). */
enum {
    VIRTUFIN_OK = 0,
    VIRTUFIN_ERR_MALFORMED = -1, /* not a valid CloudEvent buffer */
    VIRTUFIN_ERR_NOMEM = -2,     /* malloc failed */
    VIRTUFIN_ERR_TOO_BIG = -3,   /* the response would pass 2 GiB */
    VIRTUFIN_ERR_INVALID = -4,   /* a bad argument (a NULL pointer...) */
    VIRTUFIN_ERR_RANGE = -5,     /* no extension at that index */
};

/* A string: len bytes at ptr.  ptr == NULL means absent (an attribute the
 * event does not have), as opposed to empty (ptr set, len 0).  A string
 * read from an event is followed by a NUL (ptr[len] == 0), so it can also
 * be used as a C string when it holds no NUL of its own. */
struct virtufin_str {
    const char *ptr;
    uint32_t len;
};

/* Bytes: len bytes at ptr; ptr == NULL means absent. */
struct virtufin_bytes {
    const uint8_t *ptr;
    uint32_t len;
};

/* A CloudEvent extension: a name ([a-z0-9]{1,20}) and a string value. */
struct virtufin_extension {
    struct virtufin_str name;
    struct virtufin_str value;
};

/*
 * A CloudEvent, read or to be built.  The strings and data are views: a
 * read event's point into in_buf (valid during the call only), a built
 * one's into the caller's memory.  The engine requires id, source,
 * specversion and type non-empty and extension names [a-z0-9]{1,20},
 * unique; correlationid, when present, is the first extension.
 *
 * Extensions: when building, n_extensions entries at extensions.  A read
 * event has extensions == NULL and n_extensions its count, to be fetched
 * with virtufin_event_extension_at() from the input (the fb_* members say
 * where).  Setting extensions (and n_extensions) on a read event replaces
 * its extensions in what is built from it; leaving them copies the input's.
 */
struct virtufin_event {
    struct virtufin_str id;
    struct virtufin_str type;
    struct virtufin_str source;
    struct virtufin_str specversion;
    struct virtufin_str datacontenttype;
    struct virtufin_str dataschema;
    struct virtufin_str subject;
    struct virtufin_str time;
    struct virtufin_bytes data;
    const struct virtufin_extension *extensions;
    uint32_t n_extensions;
    /* Set by virtufin_event_read(): the input buffer and the position of
     * its extensions vector (0: none).  Not to be set by hand. */
    const uint8_t *fb_buf;
    uint32_t fb_len;
    uint32_t fb_extensions;
};

/* The CloudEvent's field ids, in the original schema's order. */
enum {
    VIRTUFIN_FB_ID = 0,
    VIRTUFIN_FB_TYPE,
    VIRTUFIN_FB_SOURCE,
    VIRTUFIN_FB_SPECVERSION,
    VIRTUFIN_FB_DATACONTENTTYPE,
    VIRTUFIN_FB_DATASCHEMA,
    VIRTUFIN_FB_SUBJECT,
    VIRTUFIN_FB_TIME,
    VIRTUFIN_FB_DATA,
    VIRTUFIN_FB_EXTENSIONS,
    VIRTUFIN_FB_NFIELDS
};

/* The format's limit: offsets are signed 32-bit, so are sizes. */
#define VIRTUFIN_FB_MAX 0x7fffffffu

/* s as a virtufin_str (absent when s is NULL). */
static inline struct virtufin_str
virtufin_str_c(const char *s)
{
    struct virtufin_str r;

    r.ptr = s;
    r.len = s != NULL ? (uint32_t)strlen(s) : 0;
    return r;
}

/* Non-zero when s is present and holds exactly the C string c. */
static inline int
virtufin_str_eq(struct virtufin_str s, const char *c)
{
    size_t n = strlen(c);

    return s.ptr != NULL && s.len == n && memcmp(s.ptr, c, n) == 0;
}

/* An event with every attribute absent and no extension, to be filled in
 * for virtufin_response_event(). */
static inline void
virtufin_event_init(struct virtufin_event *ev)
{
    memset(ev, 0, sizeof *ev);
}

/* ---- reading (the FlatBuffers format, bounds-checked) ---------------- */

static inline uint32_t
virtufin_fb_u16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static inline uint32_t
virtufin_fb_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/* Whether n bytes from pos lie inside a buffer of len bytes (64-bit sums:
 * no wrap-around for any 32-bit pos and n). */
static inline int
virtufin_fb_fits(uint32_t len, uint64_t pos, uint64_t n)
{
    return pos + n <= (uint64_t)len;
}

/* Follows the uoffset stored at `at`: *target is where it points.  0, or
 * -1 when the slot is misaligned or outside, the offset zero or past the
 * end of the buffer. */
static inline int
virtufin_fb_follow(const uint8_t *buf, uint32_t len, uint32_t at,
                   uint32_t *target)
{
    uint32_t off;

    if (at % 4 != 0 || !virtufin_fb_fits(len, at, 4))
        return -1;
    off = virtufin_fb_u32(buf + at);
    if (off == 0 || off > VIRTUFIN_FB_MAX ||
        !virtufin_fb_fits(len, (uint64_t)at + off, 1))
        return -1;
    *target = at + off;
    return 0;
}

/* A table checked for use: its position, its vtable's and their sizes. */
struct virtufin_fb_table {
    uint32_t pos;
    uint32_t vtable;
    uint32_t vtable_size;
    uint32_t size;
};

/* Checks the table at pos: aligned, its vtable inside the buffer, 2-byte
 * aligned and at least its 4-byte header, the table's inline size inside
 * the buffer.  0, or -1. */
static inline int
virtufin_fb_table_check(const uint8_t *buf, uint32_t len, uint32_t pos,
                        struct virtufin_fb_table *t)
{
    uint32_t raw;
    int64_t back, vt;

    if (pos % 4 != 0 || !virtufin_fb_fits(len, pos, 4))
        return -1;
    /* The signed offset from the table back to its vtable, sign-extended
     * by hand (no implementation-defined conversion). */
    raw = virtufin_fb_u32(buf + pos);
    back = raw <= VIRTUFIN_FB_MAX ? (int64_t)raw
                                  : (int64_t)raw - (int64_t)4294967296LL;
    vt = (int64_t)pos - back;
    if (vt < 0 || vt % 2 != 0 || !virtufin_fb_fits(len, (uint64_t)vt, 4))
        return -1;
    t->pos = pos;
    t->vtable = (uint32_t)vt;
    t->vtable_size = virtufin_fb_u16(buf + t->vtable);
    t->size = virtufin_fb_u16(buf + t->vtable + 2);
    if (t->vtable_size < 4 || t->vtable_size % 2 != 0 ||
        !virtufin_fb_fits(len, t->vtable, t->vtable_size) || t->size < 4 ||
        !virtufin_fb_fits(len, pos, t->size))
        return -1;
    return 0;
}

/* Finds reference field `id` of table t: 1 with *target where it points,
 * 0 when the field is absent, -1 when it is malformed (its slot beyond
 * the table's size, or a bad offset). */
static inline int
virtufin_fb_ref(const uint8_t *buf, uint32_t len,
                const struct virtufin_fb_table *t, unsigned id,
                uint32_t *target)
{
    uint32_t entry = 4 + 2 * (uint32_t)id, off;

    if (entry + 2 > t->vtable_size)
        return 0;
    off = virtufin_fb_u16(buf + t->vtable + entry);
    if (off == 0)
        return 0;
    if (off + 4 > t->size)
        return -1;
    return virtufin_fb_follow(buf, len, t->pos + off, target) == 0 ? 1 : -1;
}

/* Checks the vector whose length word is at pos, with elements of `elem`
 * bytes: *n is its length.  0, or -1. */
static inline int
virtufin_fb_vector(const uint8_t *buf, uint32_t len, uint32_t pos,
                   uint32_t elem, uint32_t *n)
{
    if (pos % 4 != 0 || !virtufin_fb_fits(len, pos, 4))
        return -1;
    *n = virtufin_fb_u32(buf + pos);
    return virtufin_fb_fits(len, (uint64_t)pos + 4, (uint64_t)*n * elem) ? 0
                                                                         : -1;
}

/* Reads string field `id` of table t into *s (absent: ptr NULL).  0, or
 * -1 when it is malformed or lacks its NUL. */
static inline int
virtufin_fb_string(const uint8_t *buf, uint32_t len,
                   const struct virtufin_fb_table *t, unsigned id,
                   struct virtufin_str *s)
{
    uint32_t pos = 0, n = 0;
    int r = virtufin_fb_ref(buf, len, t, id, &pos);

    s->ptr = NULL;
    s->len = 0;
    if (r <= 0)
        return r;
    if (virtufin_fb_vector(buf, len, pos, 1, &n) != 0 ||
        !virtufin_fb_fits(len, (uint64_t)pos + 4 + n, 1) ||
        buf[pos + 4 + n] != 0)
        return -1;
    s->ptr = (const char *)(buf + pos + 4);
    s->len = n;
    return 0;
}

/* Reads the Extension table at pos.  0, or -1. */
static inline int
virtufin_fb_extension(const uint8_t *buf, uint32_t len, uint32_t pos,
                      struct virtufin_extension *e)
{
    struct virtufin_fb_table t;

    if (virtufin_fb_table_check(buf, len, pos, &t) != 0 ||
        virtufin_fb_string(buf, len, &t, 0, &e->name) != 0 ||
        virtufin_fb_string(buf, len, &t, 1, &e->value) != 0)
        return -1;
    return 0;
}

/*
 * Extension i (0 <= i < ev->n_extensions) of ev into *out: from
 * ev->extensions when set, else from the buffer ev was read from.
 * Returns VIRTUFIN_OK, VIRTUFIN_ERR_RANGE when there is no extension i,
 * or VIRTUFIN_ERR_MALFORMED.  Either of out's strings is absent (ptr
 * NULL) when the input lacks it.
 */
static inline int
virtufin_event_extension_at(const struct virtufin_event *ev, uint32_t i,
                            struct virtufin_extension *out)
{
    uint32_t n = 0, slot, pos = 0;

    memset(out, 0, sizeof *out);
    if (i >= ev->n_extensions)
        return VIRTUFIN_ERR_RANGE;
    if (ev->extensions != NULL) {
        *out = ev->extensions[i];
        return VIRTUFIN_OK;
    }
    if (ev->fb_buf == NULL || ev->fb_extensions == 0)
        return VIRTUFIN_ERR_MALFORMED;
    if (virtufin_fb_vector(ev->fb_buf, ev->fb_len, ev->fb_extensions, 4, &n))
        return VIRTUFIN_ERR_MALFORMED;
    if (i >= n)
        return VIRTUFIN_ERR_RANGE;
    slot = ev->fb_extensions + 4 + 4 * i;
    if (virtufin_fb_follow(ev->fb_buf, ev->fb_len, slot, &pos) != 0 ||
        virtufin_fb_extension(ev->fb_buf, ev->fb_len, pos, out) != 0)
        return VIRTUFIN_ERR_MALFORMED;
    return VIRTUFIN_OK;
}

/* The value of ev's first extension named `name` (e.g. "correlationid"),
 * or an absent string (ptr NULL) when it has none. */
static inline struct virtufin_str
virtufin_event_extension(const struct virtufin_event *ev, const char *name)
{
    struct virtufin_extension e;
    struct virtufin_str none;

    for (uint32_t i = 0; i < ev->n_extensions; i++)
        if (virtufin_event_extension_at(ev, i, &e) == VIRTUFIN_OK &&
            virtufin_str_eq(e.name, name))
            return e.value;
    none.ptr = NULL;
    none.len = 0;
    return none;
}

/*
 * Reads the CloudEvent in in_buf[0..in_len) (as Process receives it: no
 * file identifier, no size prefix) into *ev.  The whole buffer is checked
 * first: the root offset, every table and vtable, string (with its NUL),
 * the data vector and every extension, each against in_len, so that
 * nothing outside the buffer is ever read.  Returns VIRTUFIN_OK, or
 * VIRTUFIN_ERR_MALFORMED (ev then holds an empty event) when in_buf is not
 * a valid CloudEvent buffer.  ev's strings and data point into in_buf.
 */
static inline int
virtufin_event_read(const uint8_t *in_buf, int32_t in_len,
                    struct virtufin_event *ev)
{
    struct virtufin_str *strs[8];
    struct virtufin_fb_table t;
    struct virtufin_extension e;
    uint32_t len, root = 0, pos = 0, n = 0;
    int r;

    virtufin_event_init(ev);
    /* The smallest table buffer: root offset, vtable header, soffset. */
    if (in_buf == NULL || in_len < 12)
        return VIRTUFIN_ERR_MALFORMED;
    len = (uint32_t)in_len;
    if (virtufin_fb_follow(in_buf, len, 0, &root) != 0 ||
        virtufin_fb_table_check(in_buf, len, root, &t) != 0)
        return VIRTUFIN_ERR_MALFORMED;
    strs[0] = &ev->id;
    strs[1] = &ev->type;
    strs[2] = &ev->source;
    strs[3] = &ev->specversion;
    strs[4] = &ev->datacontenttype;
    strs[5] = &ev->dataschema;
    strs[6] = &ev->subject;
    strs[7] = &ev->time;
    for (unsigned id = VIRTUFIN_FB_ID; id <= VIRTUFIN_FB_TIME; id++)
        if (virtufin_fb_string(in_buf, len, &t, id, strs[id]) != 0)
            goto bad;
    r = virtufin_fb_ref(in_buf, len, &t, VIRTUFIN_FB_DATA, &pos);
    if (r < 0 || (r > 0 && virtufin_fb_vector(in_buf, len, pos, 1, &n) != 0))
        goto bad;
    if (r > 0) {
        ev->data.ptr = in_buf + pos + 4;
        ev->data.len = n;
    }
    r = virtufin_fb_ref(in_buf, len, &t, VIRTUFIN_FB_EXTENSIONS, &pos);
    if (r < 0 || (r > 0 && virtufin_fb_vector(in_buf, len, pos, 4, &n) != 0))
        goto bad;
    if (r > 0) {
        ev->fb_buf = in_buf;
        ev->fb_len = len;
        ev->fb_extensions = pos;
        ev->n_extensions = n;
        /* Every extension checked now, so that reading one later cannot
         * fail. */
        for (uint32_t i = 0; i < n; i++)
            if (virtufin_event_extension_at(ev, i, &e) != VIRTUFIN_OK)
                goto bad;
    }
    return VIRTUFIN_OK;
bad:
    virtufin_event_init(ev);
    return VIRTUFIN_ERR_MALFORMED;
}

/* ---- building (front to back, every reference patched forward) ------- */

/* The response being written into one malloc'd buffer of cap bytes. */
struct virtufin_fb_writer {
    uint8_t *buf;
    uint32_t cap;
    uint32_t pos;
    int failed; /* a write would have passed cap: never, by the sizing */
};

/* Room for n bytes at the next multiple of align (zero padding before);
 * returns their position, 0 once the writer has failed. */
static inline uint32_t
virtufin_fb_reserve(struct virtufin_fb_writer *w, uint32_t n, uint32_t align)
{
    uint32_t at = (w->pos + align - 1) / align * align;

    if (w->failed || !virtufin_fb_fits(w->cap, at, n)) {
        w->failed = 1;
        return 0;
    }
    memset(w->buf + w->pos, 0, (size_t)(at - w->pos) + n);
    w->pos = at + n;
    return at;
}

static inline void
virtufin_fb_put16(struct virtufin_fb_writer *w, uint32_t at, uint32_t v)
{
    if (w->failed)
        return;
    w->buf[at] = (uint8_t)(v & 0xff);
    w->buf[at + 1] = (uint8_t)(v >> 8 & 0xff);
}

static inline void
virtufin_fb_put32(struct virtufin_fb_writer *w, uint32_t at, uint32_t v)
{
    if (w->failed)
        return;
    w->buf[at] = (uint8_t)(v & 0xff);
    w->buf[at + 1] = (uint8_t)(v >> 8 & 0xff);
    w->buf[at + 2] = (uint8_t)(v >> 16 & 0xff);
    w->buf[at + 3] = (uint8_t)(v >> 24 & 0xff);
}

/* Stores at slot the uoffset to target, written after it. */
static inline void
virtufin_fb_link(struct virtufin_fb_writer *w, uint32_t slot, uint32_t target)
{
    virtufin_fb_put32(w, slot, target - slot);
}

/* Writes a vector of n bytes at p (a string when nul: a NUL follows);
 * returns its length word's position. */
static inline uint32_t
virtufin_fb_put_vector(struct virtufin_fb_writer *w, const void *p, uint32_t n,
                       int nul)
{
    uint32_t at = virtufin_fb_reserve(w, 4 + n + (nul ? 1u : 0u), 4);

    if (w->failed)
        return 0;
    virtufin_fb_put32(w, at, n);
    if (n > 0)
        memcpy(w->buf + at + 4, p, n);
    return at;
}

/*
 * Writes a table of nfields reference fields, present[id] non-zero for
 * those it has: a vtable naming every field, then the table (its soffset,
 * then one 4-byte slot per present field, in id order).  slot[id] is each
 * present field's slot, to be linked to its target.  Returns the table's
 * position.
 */
static inline uint32_t
virtufin_fb_put_table(struct virtufin_fb_writer *w, unsigned nfields,
                      const int *present, uint32_t *slot)
{
    uint32_t vt, tb, npresent = 0, k = 0;

    for (unsigned id = 0; id < nfields; id++)
        npresent += present[id] ? 1u : 0u;
    vt = virtufin_fb_reserve(w, 4 + 2 * (uint32_t)nfields, 2);
    tb = virtufin_fb_reserve(w, 4 + 4 * npresent, 4);
    if (w->failed)
        return 0;
    virtufin_fb_put16(w, vt, 4 + 2 * (uint32_t)nfields);
    virtufin_fb_put16(w, vt + 2, 4 + 4 * npresent);
    virtufin_fb_put32(w, tb, tb - vt); /* vtable before: positive */
    for (unsigned id = 0; id < nfields; id++) {
        if (!present[id])
            continue;
        virtufin_fb_put16(w, vt + 4 + 2 * (uint32_t)id, 4 + 4 * k);
        slot[id] = tb + 4 + 4 * k;
        k++;
    }
    return tb;
}

/* Writes s (when present) and links slot to it. */
static inline void
virtufin_fb_put_string(struct virtufin_fb_writer *w, uint32_t slot,
                       struct virtufin_str s)
{
    if (s.ptr != NULL)
        virtufin_fb_link(w, slot, virtufin_fb_put_vector(w, s.ptr, s.len, 1));
}

/* The bytes a string or vector of n bytes may take, padding included. */
static inline uint64_t
virtufin_fb_vector_room(uint32_t n)
{
    return 3 + 4 + (uint64_t)n + 1;
}

/* The bytes a table of nfields references may take with its vtable. */
static inline uint64_t
virtufin_fb_table_room(unsigned nfields)
{
    return 1 + 4 + 2 * (uint64_t)nfields + 3 + 4 + 4 * (uint64_t)nfields;
}

/* The event's strings, in field id order. */
static inline void
virtufin_fb_event_strings(const struct virtufin_event *ev,
                          struct virtufin_str *s)
{
    s[0] = ev->id;
    s[1] = ev->type;
    s[2] = ev->source;
    s[3] = ev->specversion;
    s[4] = ev->datacontenttype;
    s[5] = ev->dataschema;
    s[6] = ev->subject;
    s[7] = ev->time;
}

/* An upper bound of the bytes the event's table and children take, in
 * *room.  VIRTUFIN_OK, or an error for a bad argument or extension. */
static inline int
virtufin_fb_event_room(const struct virtufin_event *ev, uint64_t *room)
{
    struct virtufin_str s[8];
    struct virtufin_extension e;
    uint64_t r = virtufin_fb_table_room(VIRTUFIN_FB_NFIELDS);
    int rc;

    virtufin_fb_event_strings(ev, s);
    for (unsigned i = 0; i < 8; i++) {
        if (s[i].ptr == NULL && s[i].len != 0)
            return VIRTUFIN_ERR_INVALID;
        r += s[i].ptr != NULL ? virtufin_fb_vector_room(s[i].len) : 0;
    }
    if (ev->data.ptr == NULL && ev->data.len != 0)
        return VIRTUFIN_ERR_INVALID;
    r += ev->data.ptr != NULL ? virtufin_fb_vector_room(ev->data.len) : 0;
    if (ev->n_extensions > 0) {
        if (ev->n_extensions > VIRTUFIN_FB_MAX / 4)
            return VIRTUFIN_ERR_TOO_BIG;
        r += 3 + 4 + 4 * (uint64_t)ev->n_extensions;
    }
    for (uint32_t i = 0; i < ev->n_extensions && r <= VIRTUFIN_FB_MAX; i++) {
        rc = virtufin_event_extension_at(ev, i, &e);
        if (rc != VIRTUFIN_OK)
            return rc;
        if ((e.name.ptr == NULL && e.name.len != 0) ||
            (e.value.ptr == NULL && e.value.len != 0))
            return VIRTUFIN_ERR_INVALID;
        r += virtufin_fb_table_room(2) + virtufin_fb_vector_room(e.name.len) +
             virtufin_fb_vector_room(e.value.len);
    }
    *room = r;
    return VIRTUFIN_OK;
}

/* Writes the event's table and children; links slot to the table. */
static inline void
virtufin_fb_put_event(struct virtufin_fb_writer *w, uint32_t slot,
                      const struct virtufin_event *ev)
{
    struct virtufin_str s[8];
    struct virtufin_extension e;
    uint32_t slots[VIRTUFIN_FB_NFIELDS], vec, tb;
    int present[VIRTUFIN_FB_NFIELDS];
    uint32_t ext_slots[2];
    int ext_present[2] = { 1, 1 };

    virtufin_fb_event_strings(ev, s);
    for (unsigned id = 0; id < 8; id++)
        present[id] = s[id].ptr != NULL;
    present[VIRTUFIN_FB_DATA] = ev->data.ptr != NULL;
    present[VIRTUFIN_FB_EXTENSIONS] = ev->n_extensions > 0;
    tb = virtufin_fb_put_table(w, VIRTUFIN_FB_NFIELDS, present, slots);
    virtufin_fb_link(w, slot, tb);
    for (unsigned id = 0; id < 8; id++)
        if (present[id])
            virtufin_fb_put_string(w, slots[id], s[id]);
    if (present[VIRTUFIN_FB_DATA])
        virtufin_fb_link(
            w, slots[VIRTUFIN_FB_DATA],
            virtufin_fb_put_vector(w, ev->data.ptr, ev->data.len, 0));
    if (!present[VIRTUFIN_FB_EXTENSIONS])
        return;
    vec = virtufin_fb_reserve(w, 4 + 4 * ev->n_extensions, 4);
    virtufin_fb_put32(w, vec, ev->n_extensions);
    virtufin_fb_link(w, slots[VIRTUFIN_FB_EXTENSIONS], vec);
    for (uint32_t i = 0; i < ev->n_extensions && !w->failed; i++) {
        if (virtufin_event_extension_at(ev, i, &e) != VIRTUFIN_OK) {
            w->failed = 1; /* checked by the sizing: cannot happen */
            return;
        }
        ext_present[0] = e.name.ptr != NULL;
        ext_present[1] = e.value.ptr != NULL;
        tb = virtufin_fb_put_table(w, 2, ext_present, ext_slots);
        virtufin_fb_link(w, vec + 4 + 4 * i, tb);
        if (ext_present[0])
            virtufin_fb_put_string(w, ext_slots[0], e.name);
        if (ext_present[1])
            virtufin_fb_put_string(w, ext_slots[1], e.value);
    }
}

/* Builds a WorkerResponse holding ev (when not NULL) or error (when ev is
 * NULL) into a new buffer. */
static inline int
virtufin_fb_response(const struct virtufin_event *ev, struct virtufin_str error,
                     uint8_t **out_buf, int32_t *out_len)
{
    struct virtufin_fb_writer w;
    uint64_t room = 0;
    uint32_t slots[2] = { 0, 0 }, root, tb;
    int present[2], rc;

    if (out_buf == NULL || out_len == NULL)
        return VIRTUFIN_ERR_INVALID;
    *out_buf = NULL;
    *out_len = 0;
    if (ev != NULL) {
        rc = virtufin_fb_event_room(ev, &room);
        if (rc != VIRTUFIN_OK)
            return rc;
    } else {
        if (error.ptr == NULL)
            return VIRTUFIN_ERR_INVALID;
        room = virtufin_fb_vector_room(error.len);
    }
    /* Root offset, the WorkerResponse and the final padding to 4. */
    room += 4 + virtufin_fb_table_room(2) + 3;
    if (room > VIRTUFIN_FB_MAX)
        return VIRTUFIN_ERR_TOO_BIG;
    w.cap = (uint32_t)room;
    w.pos = 0;
    w.failed = 0;
    w.buf = (uint8_t *)malloc(w.cap);
    if (w.buf == NULL)
        return VIRTUFIN_ERR_NOMEM;
    present[0] = ev != NULL;
    present[1] = ev == NULL;
    root = virtufin_fb_reserve(&w, 4, 4);
    tb = virtufin_fb_put_table(&w, 2, present, slots);
    virtufin_fb_link(&w, root, tb);
    if (ev != NULL)
        virtufin_fb_put_event(&w, slots[0], ev);
    else
        virtufin_fb_put_string(&w, slots[1], error);
    virtufin_fb_reserve(&w, 0, 4);
    if (w.failed) {
        free(w.buf);
        return VIRTUFIN_ERR_MALFORMED;
    }
    *out_buf = w.buf;
    *out_len = (int32_t)w.pos;
    return VIRTUFIN_OK;
}

/*
 * Builds a WorkerResponse whose result_event is ev, for Process to return:
 * *out_buf is a new malloc'd buffer of *out_len bytes (no file identifier,
 * no size prefix, laid out and aligned as FlatBuffers verifiers require),
 * to be released by FreeResult with virtufin_response_free().  The absent
 * attributes (ptr NULL) are left out; extensions come from ev->extensions,
 * or, for a read event that has none set, from its input (copied in their
 * order, so correlationid stays first).  Returns VIRTUFIN_OK, or an error
 * with *out_buf NULL and *out_len 0: VIRTUFIN_ERR_INVALID (a NULL pointer
 * with a non-zero length), VIRTUFIN_ERR_NOMEM, VIRTUFIN_ERR_TOO_BIG.
 */
static inline int
virtufin_response_event(const struct virtufin_event *ev, uint8_t **out_buf,
                        int32_t *out_len)
{
    struct virtufin_str none;

    none.ptr = NULL;
    none.len = 0;
    if (ev == NULL)
        return VIRTUFIN_ERR_INVALID;
    return virtufin_fb_response(ev, none, out_buf, out_len);
}

/* Builds a WorkerResponse whose error_message is the C string message
 * (the engine answers it as a worker_error), as virtufin_response_event()
 * does.  A Process that returns this function's result returns 0 when the
 * response was built: the error travels in the response. */
static inline int
virtufin_response_error(const char *message, uint8_t **out_buf,
                        int32_t *out_len)
{
    if (message == NULL)
        return VIRTUFIN_ERR_INVALID;
    return virtufin_fb_response(NULL, virtufin_str_c(message), out_buf,
                                out_len);
}

/* Frees a buffer of virtufin_response_event() or virtufin_response_error()
 * (NULL is allowed): what FreeResult calls. */
static inline void
virtufin_response_free(uint8_t *buf)
{
    free(buf);
}

#ifdef __cplusplus
}
#endif

#endif /* WORKMANAGER_WORKER_API_H */
