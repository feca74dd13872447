/*
 * fb.h — a small hand-written FlatBuffers codec: reader, builder, verifier.
 *
 * Debian packages no C FlatBuffers runtime (flatc 2.0.8 has no C generator),
 * so the C side is written here for the fixed schemas in ipc/ (worker_api.fbs,
 * frame.fbs).  The typed codecs (cloudevent.c, frame.c) sit on these
 * primitives.
 *
 * Reader: plain functions over a table pointer; safe only on a buffer that
 * ipc_fb_verify() accepted.  Scalars are read with memcpy (no aliasing or
 * alignment traps); the host is little-endian (configure checks).
 *
 * Builder: front to back with forward patching.  A parent table is written
 * first with its offset slots zeroed; its children follow and the slots are
 * patched, so every uoffset points forward as the format requires.  Each
 * vtable sits just before its table.  All padding is zero.  One growable
 * byte array holds the buffer; running out of memory sets a sticky flag that
 * the finishing call reports, so builders need no error check per call.
 *
 * Verifier: walks a const schema descriptor (struct ipc_fb_schema) and checks
 * every rule before any field is read: bounds, alignment (relative to the
 * buffer start), offsets, vtables, string termination, vector lengths,
 * depth, table count, required fields, union types and nested buffers.  It is
 * a security boundary: the master runs it on every frame from a host.
 */
#ifndef WM_IPC_FB_H
#define WM_IPC_FB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A string or byte vector inside a buffer (or a caller's memory when
 * building).  ptr == NULL means the field is absent. */
struct ipc_str {
    const char *ptr;
    uint32_t len;
};

struct ipc_bytes {
    const uint8_t *ptr;
    uint32_t len;
};

/* ---- reader ---------------------------------------------------------- */

static inline uint16_t
ipc_fb_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t
ipc_fb_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t
ipc_fb_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Follows the uoffset stored at p. */
static inline const uint8_t *
ipc_fb_deref(const uint8_t *p)
{
    return p + ipc_fb_u32(p);
}

/* The voffset of field `id` in table t, 0 when absent. */
static inline uint16_t
ipc_fb_field(const uint8_t *t, unsigned id)
{
    int32_t soff;
    memcpy(&soff, t, sizeof soff);
    const uint8_t *vt = t - soff;
    unsigned slot = 4 + 2 * id;
    return slot < ipc_fb_u16(vt) ? ipc_fb_u16(vt + slot) : 0;
}

static inline uint64_t
ipc_fb_get_scalar(const uint8_t *t, unsigned id, unsigned size, uint64_t def)
{
    uint16_t off = ipc_fb_field(t, id);
    if (off == 0)
        return def;
    switch (size) {
    case 1:
        return t[off];
    case 2:
        return ipc_fb_u16(t + off);
    case 4:
        return ipc_fb_u32(t + off);
    default:
        return ipc_fb_u64(t + off);
    }
}

/* The table, string or vector field `id` points to, NULL when absent. */
static inline const uint8_t *
ipc_fb_get_ref(const uint8_t *t, unsigned id)
{
    uint16_t off = ipc_fb_field(t, id);
    return off ? ipc_fb_deref(t + off) : NULL;
}

static inline struct ipc_str
ipc_fb_get_str(const uint8_t *t, unsigned id)
{
    const uint8_t *s = ipc_fb_get_ref(t, id);
    struct ipc_str r = { NULL, 0 };
    if (s) {
        r.len = ipc_fb_u32(s);
        r.ptr = (const char *)(s + 4);
    }
    return r;
}

static inline struct ipc_bytes
ipc_fb_get_bytes(const uint8_t *t, unsigned id)
{
    const uint8_t *v = ipc_fb_get_ref(t, id);
    struct ipc_bytes r = { NULL, 0 };
    if (v) {
        r.len = ipc_fb_u32(v);
        r.ptr = v + 4;
    }
    return r;
}

/* Element i of a vector of tables whose length word is at vec. */
static inline const uint8_t *
ipc_fb_vec_table(const uint8_t *vec, uint32_t i)
{
    return ipc_fb_deref(vec + 4 + 4 * (size_t)i);
}

/* The root table of a buffer; prefix is 4 for size-prefixed buffers. */
static inline const uint8_t *
ipc_fb_root(const uint8_t *buf, size_t prefix)
{
    return ipc_fb_deref(buf + prefix);
}

/* ---- builder --------------------------------------------------------- */

#define IPC_FB_MAX_FIELDS 16

struct ipc_fb_builder {
    uint8_t *buf;
    size_t len;
    size_t cap;
    bool oom;
};

/* A table being staged: scalars and offset slots, laid out at end(). */
struct ipc_fb_table {
    uint64_t value[IPC_FB_MAX_FIELDS];
    uint8_t size[IPC_FB_MAX_FIELDS];  /* 0 = absent; 1, 2, 4, 8 bytes */
    uint32_t slot[IPC_FB_MAX_FIELDS]; /* absolute position after end() */
    unsigned nfields;                 /* highest present id + 1 */
    unsigned bytes[9];                /* bytes of fields, by field size */
};

void ipc_fb_builder_init(struct ipc_fb_builder *b);
/* Empties the builder, keeping its memory. */
void ipc_fb_builder_reset(struct ipc_fb_builder *b);
void ipc_fb_builder_free(struct ipc_fb_builder *b);

/* Appends n zero bytes after zero padding to `align` (a power of two, at
 * most 8), returning their position. */
size_t ipc_fb_reserve(struct ipc_fb_builder *b, size_t n, size_t align);
/* Makes the buffer's length a multiple of `align` with zero bytes. */
void ipc_fb_pad(struct ipc_fb_builder *b, size_t align);
void ipc_fb_put_u32(struct ipc_fb_builder *b, size_t pos, uint32_t v);
/* Stores at `slot` the uoffset to `target` (target > slot). */
void ipc_fb_patch(struct ipc_fb_builder *b, size_t slot, size_t target);

/* Writes a string (length, bytes, NUL); returns its position. */
size_t ipc_fb_string(struct ipc_fb_builder *b, struct ipc_str s);
/* Writes a [ubyte] vector whose first byte is aligned to `align`. */
size_t ipc_fb_bytes(struct ipc_fb_builder *b, struct ipc_bytes v, size_t align);
/* Writes the header of a vector of n offsets; slot i is at pos + 4 + 4i. */
size_t ipc_fb_offsets(struct ipc_fb_builder *b, uint32_t n);

void ipc_fb_table_begin(struct ipc_fb_table *t);
void ipc_fb_table_scalar(struct ipc_fb_table *t, unsigned id, unsigned size,
                         uint64_t v);
/* Reserves an offset slot for field id (patched after end()). */
void ipc_fb_table_ref(struct ipc_fb_table *t, unsigned id);
/* Writes the vtable and the table; returns the table's position.  After it,
 * t->slot[id] is the absolute position of each reserved offset slot. */
size_t ipc_fb_table_end(struct ipc_fb_builder *b, struct ipc_fb_table *t);

/* Starts a buffer: [size prefix] root uoffset [identifier].  Returns the
 * root slot to patch once the root table is written. */
size_t ipc_fb_start(struct ipc_fb_builder *b, bool size_prefixed,
                    const char *ident);
/* Pads the end to 8 bytes and fills the size prefix; -1 if out of memory. */
int ipc_fb_finish(struct ipc_fb_builder *b, size_t start, bool size_prefixed);

/* ---- verifier -------------------------------------------------------- */

enum ipc_fb_type {
    IPC_FB_NONE = 0, /* unused id */
    IPC_FB_U8,
    IPC_FB_U16,
    IPC_FB_U32,
    IPC_FB_U64,
    IPC_FB_STRING,
    IPC_FB_BYTES,
    IPC_FB_TABLE,
    IPC_FB_TABLES,     /* vector of tables */
    IPC_FB_UNION_TYPE, /* ubyte; the union value follows at id + 1 */
    IPC_FB_UNION,
    IPC_FB_NESTED, /* [ubyte] holding a whole buffer of `table` */
};

struct ipc_fb_schema;

struct ipc_fb_field {
    const char *name;
    enum ipc_fb_type type;
    bool required;
    const struct ipc_fb_schema *table;          /* TABLE, TABLES, NESTED */
    const struct ipc_fb_schema *const *members; /* UNION: by type code */
    unsigned nmembers;                          /* UNION: codes 1..n */
};

struct ipc_fb_schema {
    const char *name;
    unsigned nfields;
    const struct ipc_fb_field *fields; /* indexed by field id */
};

enum ipc_fb_err {
    IPC_FB_OK = 0,
    IPC_FB_ERR_SIZE,     /* buffer shorter than a header or over 2^31-1 */
    IPC_FB_ERR_PREFIX,   /* size prefix differs from the buffer's length */
    IPC_FB_ERR_IDENT,    /* wrong file identifier */
    IPC_FB_ERR_ALIGN,    /* a scalar, offset, table or vtable misaligned */
    IPC_FB_ERR_OFFSET,   /* an offset is zero, negative or leaves the buffer */
    IPC_FB_ERR_VTABLE,   /* a vtable is odd-sized or leaves the buffer */
    IPC_FB_ERR_BOUNDS,   /* a field lies outside the buffer */
    IPC_FB_ERR_STRING,   /* a string leaves the buffer or lacks its NUL */
    IPC_FB_ERR_VECTOR,   /* a vector's length leaves the buffer */
    IPC_FB_ERR_DEPTH,    /* tables nested deeper than the limit */
    IPC_FB_ERR_TABLES,   /* more tables than the limit */
    IPC_FB_ERR_REQUIRED, /* a required field is absent */
    IPC_FB_ERR_UNION,    /* unknown union type, or value without type */
    IPC_FB_ERR_NESTED,   /* a nested buffer is too small */
    /* Stricter than Google's C++ verifier, on purpose (PROTOCOL.md). */
    IPC_FB_ERR_VTABLE_HEADER, /* vtable shorter than its 4-byte header */
    IPC_FB_ERR_TABLE_SIZE,    /* a field lies beyond its table's size */
    IPC_FB_ERR_VEC_OFFSET,    /* a zero offset inside a vector of tables */
    IPC_FB_ERR_UNION_NONE,    /* a union's value present with type NONE */
    IPC_FB_ERR_APP,           /* an application rule above FlatBuffers */
};

/* Where verification failed. */
struct ipc_fb_error {
    enum ipc_fb_err code;
    const char *table;  /* schema name, or NULL */
    const char *field;  /* field name, or NULL */
    size_t offset;      /* byte offset in the verified buffer */
    const char *detail; /* IPC_FB_ERR_APP: the rule broken */
};

struct ipc_fb_limits {
    unsigned max_depth;  /* default 64, as Google's verifier */
    unsigned max_tables; /* default 1,000,000, as Google's verifier */
};

/* Verifies buf[0..len) as a buffer whose root table is `root`.  prefix is 4
 * for a size-prefixed buffer (the prefix must equal len - 4), else 0.
 * ident, when not NULL, is the 4-byte file identifier required.  limits may
 * be NULL for the defaults.  Returns 0, or -1 with *err filled in. */
int ipc_fb_verify(const uint8_t *buf, size_t len, size_t prefix,
                  const char *ident, const struct ipc_fb_schema *root,
                  const struct ipc_fb_limits *limits, struct ipc_fb_error *err);

/* True for the rejection codes by which this verifier is documented to be
 * stricter than Google's C++ flatbuffers::Verifier. */
bool ipc_fb_err_is_stricter(enum ipc_fb_err code);

const char *ipc_fb_err_name(enum ipc_fb_err code);
/* "Frame.body: Process.event: string lacks its NUL at offset 96" */
void ipc_fb_error_format(const struct ipc_fb_error *err, char *out,
                         size_t outlen);

#endif /* WM_IPC_FB_H */
