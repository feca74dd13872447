/*
 * fb.c — FlatBuffers builder and verifier primitives (see fb.h).
 *
 * The verifier mirrors the checks of Google's flatbuffers::Verifier 2.0.8
 * (include/flatbuffers/verifier.h) so that the differential fuzzer
 * (tests/fuzz/fuzz_verify.cc) can hold the two to the same answers, and adds
 * the stricter rules listed by ipc_fb_err_is_stricter(), each documented in
 * ipc/PROTOCOL.md.  Range checks use Google's form `n < len && pos <= len - n`
 * on size_t, which cannot overflow.
 */
#include "config.h"

#include "ipc/fb.h"

#include <stdio.h>
#include <stdlib.h>

/* FlatBuffers buffers are at most 2^31 - 1 bytes (soffset_t is signed). */
#define FB_MAX_SIZE 0x7fffffffu
/* Root uoffset, root soffset, vtable size and table size: the smallest
 * buffer that can hold a table (FLATBUFFERS_MIN_BUFFER_SIZE). */
#define FB_MIN_SIZE 12u

/* ---- builder --------------------------------------------------------- */

static size_t
align_up(size_t n, size_t align)
{
    return (n + align - 1) & ~(align - 1);
}

void
ipc_fb_builder_init(struct ipc_fb_builder *b)
{
    b->buf = NULL;
    b->len = 0;
    b->cap = 0;
    b->oom = false;
}

void
ipc_fb_builder_reset(struct ipc_fb_builder *b)
{
    b->len = 0;
    b->oom = false;
}

void
ipc_fb_builder_free(struct ipc_fb_builder *b)
{
    free(b->buf);
    ipc_fb_builder_init(b);
}

/* Grows the buffer to hold `need` bytes; false (and the oom flag) when it
 * cannot or when the buffer would pass the format's 2 GiB limit. */
static bool
grow_slow(struct ipc_fb_builder *b, size_t need)
{
    if (b->oom)
        return false;
    if (need <= b->cap)
        return true;
    if (need > FB_MAX_SIZE) {
        b->oom = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    /* malloc aligns to 16, so positions aligned in the buffer are aligned
     * in memory too: the reader may be handed the builder's bytes. */
    uint8_t *nb = realloc(b->buf, cap);
    if (nb == NULL) {
        b->oom = true;
        return false;
    }
    b->buf = nb;
    b->cap = cap;
    return true;
}

/* The common case, inlined: the buffer already has room. */
static inline bool
grow(struct ipc_fb_builder *b, size_t need)
{
    return (need <= b->cap && !b->oom) || grow_slow(b, need);
}

/* Zeroes padding: mostly 0 to 7 bytes, where a call to memset costs more
 * than the loop. */
static inline void
zero(uint8_t *p, size_t n)
{
    if (n > 16) {
        memset(p, 0, n);
        return;
    }
    while (n--)
        *p++ = 0;
}

size_t
ipc_fb_reserve(struct ipc_fb_builder *b, size_t n, size_t align)
{
    size_t pos = align_up(b->len, align);
    if (!grow(b, pos + n))
        return 0;
    /* Nothing to add to a builder that has not allocated yet (padding an
     * empty buffer) leaves buf NULL, which memset must not be given. */
    if (pos + n > b->len)
        memset(b->buf + b->len, 0, pos + n - b->len);
    b->len = pos + n;
    return pos;
}

void
ipc_fb_pad(struct ipc_fb_builder *b, size_t align)
{
    ipc_fb_reserve(b, 0, align);
}

void
ipc_fb_put_u32(struct ipc_fb_builder *b, size_t pos, uint32_t v)
{
    if (!b->oom)
        memcpy(b->buf + pos, &v, sizeof v);
}

void
ipc_fb_patch(struct ipc_fb_builder *b, size_t slot, size_t target)
{
    ipc_fb_put_u32(b, slot, (uint32_t)(target - slot));
}

/* Appends a length word and n bytes of src whose first byte is aligned to
 * `align` (at least 4), then a NUL when `nul` (strings).  Only the padding
 * is zeroed: the payload is copied once.  Returns the length word's
 * position. */
static size_t
put_vector(struct ipc_fb_builder *b, const void *src, uint32_t n, size_t align,
           bool nul)
{
    size_t data = align_up(b->len + 4, align < 4 ? 4 : align);
    size_t end = data + n + (nul ? 1 : 0);

    if (!grow(b, end))
        return 0;
    zero(b->buf + b->len, data - 4 - b->len);
    memcpy(b->buf + data - 4, &n, 4);
    if (n)
        memcpy(b->buf + data, src, n);
    if (nul)
        b->buf[data + n] = 0;
    b->len = end;
    return data - 4;
}

size_t
ipc_fb_string(struct ipc_fb_builder *b, struct ipc_str s)
{
    return put_vector(b, s.ptr, s.len, 4, true);
}

size_t
ipc_fb_bytes(struct ipc_fb_builder *b, struct ipc_bytes v, size_t align)
{
    return put_vector(b, v.ptr, v.len, align, false);
}

size_t
ipc_fb_offsets(struct ipc_fb_builder *b, uint32_t n)
{
    size_t pos = ipc_fb_reserve(b, 4 + 4 * (size_t)n, 4);
    ipc_fb_put_u32(b, pos, n);
    return pos;
}

void
ipc_fb_table_begin(struct ipc_fb_table *t)
{
    memset(t->size, 0, sizeof t->size);
    memset(t->bytes, 0, sizeof t->bytes);
    t->nfields = 0;
}

void
ipc_fb_table_scalar(struct ipc_fb_table *t, unsigned id, unsigned size,
                    uint64_t v)
{
    t->bytes[t->size[id]] -= t->size[id]; /* set twice: the last wins */
    t->bytes[size] += size;
    t->size[id] = (uint8_t)size;
    t->value[id] = v;
    if (id + 1 > t->nfields)
        t->nfields = id + 1;
}

void
ipc_fb_table_ref(struct ipc_fb_table *t, unsigned id)
{
    /* An offset slot is a 4-byte field patched later; value 0 until then. */
    ipc_fb_table_scalar(t, id, 4, 0);
    t->slot[id] = UINT32_MAX;
}

size_t
ipc_fb_table_end(struct ipc_fb_builder *b, struct ipc_fb_table *t)
{
    /* Widest fields first, so each is aligned without padding inside: the
     * 8-byte group starts right after the soffset, then 4, 2 and 1. */
    unsigned next[9];
    next[8] = 4;
    next[4] = next[8] + t->bytes[8];
    next[2] = next[4] + t->bytes[4];
    next[1] = next[2] + t->bytes[2];
    size_t tsize = next[1] + t->bytes[1];
    size_t vtsize = 4 + 2 * (size_t)t->nfields;
    size_t vpos = align_up(b->len, 2);
    size_t tpos = align_up(vpos + vtsize, 4);

    /* 8-byte fields start at tpos + 4: put the table at 4 mod 8. */
    if (t->bytes[8] && tpos % 8 != 4)
        tpos += 4;
    if (!grow(b, tpos + tsize))
        return 0;
    /* Zero the padding and the vtable (absent fields stay 0); every byte
     * of the table itself is written below. */
    zero(b->buf + b->len, tpos - b->len);
    b->len = tpos + tsize;

    uint8_t *vt = b->buf + vpos;
    uint8_t *tb = b->buf + tpos;
    uint16_t v16 = (uint16_t)vtsize;
    memcpy(vt, &v16, 2);
    v16 = (uint16_t)tsize;
    memcpy(vt + 2, &v16, 2);
    int32_t soff = (int32_t)(tpos - vpos);
    memcpy(tb, &soff, 4);

    for (unsigned id = 0; id < t->nfields; id++) {
        unsigned size = t->size[id];
        if (size == 0)
            continue;
        uint16_t off = (uint16_t)next[size];
        next[size] += size;
        memcpy(vt + 4 + 2 * id, &off, 2);
        /* Little-endian: the low `size` bytes of the value are the field.
         * Constant sizes let the compiler inline each copy. */
        switch (size) {
        case 1:
            tb[off] = (uint8_t)t->value[id];
            break;
        case 2:
            memcpy(tb + off, &t->value[id], 2);
            break;
        case 4:
            memcpy(tb + off, &t->value[id], 4);
            break;
        default:
            memcpy(tb + off, &t->value[id], 8);
            break;
        }
        t->slot[id] = (uint32_t)(tpos + off);
    }
    return tpos;
}

size_t
ipc_fb_start(struct ipc_fb_builder *b, bool size_prefixed, const char *ident)
{
    size_t prefix = size_prefixed ? 4 : 0;
    size_t start = ipc_fb_reserve(b, prefix + 4 + (ident ? 4 : 0), 8);
    if (ident && !b->oom)
        memcpy(b->buf + start + prefix + 4, ident, 4);
    return start + prefix;
}

int
ipc_fb_finish(struct ipc_fb_builder *b, size_t root_slot, bool size_prefixed)
{
    ipc_fb_pad(b, 8);
    if (b->oom)
        return -1;
    if (size_prefixed)
        ipc_fb_put_u32(b, root_slot - 4, (uint32_t)(b->len - root_slot));
    return 0;
}

/* ---- verifier -------------------------------------------------------- */

struct verifier {
    const uint8_t *buf;
    size_t len;
    size_t base; /* offset of buf within the outermost buffer (nesting) */
    unsigned depth;
    unsigned tables;
    const struct ipc_fb_limits *limits;
    struct ipc_fb_error *err;
};

static int
fail(struct verifier *v, enum ipc_fb_err code, const struct ipc_fb_schema *s,
     const struct ipc_fb_field *f, size_t offset)
{
    if (v->err) {
        v->err->code = code;
        v->err->table = s ? s->name : NULL;
        v->err->field = f ? f->name : NULL;
        v->err->offset = v->base + offset;
        v->err->detail = NULL;
    }
    return -1;
}

/* Google's Verifier::Verify(elem, elem_len). */
static bool
in_range(const struct verifier *v, size_t pos, size_t n)
{
    return n < v->len && pos <= v->len - n;
}

/* Checks the uoffset slot at pos; on success *target is where it points. */
static enum ipc_fb_err
check_offset(const struct verifier *v, size_t pos, size_t *target)
{
    if (pos % 4)
        return IPC_FB_ERR_ALIGN;
    if (!in_range(v, pos, 4))
        return IPC_FB_ERR_BOUNDS;
    uint32_t o = ipc_fb_u32(v->buf + pos);
    if (o == 0 || o > FB_MAX_SIZE)
        return IPC_FB_ERR_OFFSET;
    if (!in_range(v, pos + o, 1))
        return IPC_FB_ERR_OFFSET;
    *target = pos + o;
    return IPC_FB_OK;
}

/* Checks a vector's length word at pos and that its elements fit. */
static enum ipc_fb_err
check_vector(const struct verifier *v, size_t pos, size_t elem,
             enum ipc_fb_err what, uint32_t *count)
{
    if (pos % 4)
        return IPC_FB_ERR_ALIGN;
    if (!in_range(v, pos, 4))
        return what;
    uint32_t n = ipc_fb_u32(v->buf + pos);
    if (n >= FB_MAX_SIZE / elem)
        return what;
    if (!in_range(v, pos, 4 + elem * (size_t)n))
        return what;
    *count = n;
    return IPC_FB_OK;
}

static int verify_table(struct verifier *v, size_t pos,
                        const struct ipc_fb_schema *s);
static int verify_root(struct verifier *v, size_t prefix, const char *ident,
                       const struct ipc_fb_schema *root);

static int
verify_nested(struct verifier *v, size_t data, uint32_t n,
              const struct ipc_fb_schema *s, const struct ipc_fb_field *f,
              const struct ipc_fb_schema *owner)
{
    if (n < FB_MIN_SIZE)
        return fail(v, IPC_FB_ERR_NESTED, owner, f, data);
    /* A nested buffer is verified on its own, with fresh counters and
     * alignment relative to its first byte, as Google's verifier does. */
    struct verifier nv = {
        .buf = v->buf + data,
        .len = n,
        .base = v->base + data,
        .limits = v->limits,
        .err = v->err,
    };
    return verify_root(&nv, 0, NULL, s);
}

static int
verify_ref(struct verifier *v, size_t target, const struct ipc_fb_schema *s,
           const struct ipc_fb_field *f)
{
    enum ipc_fb_err e;
    uint32_t n;

    switch (f->type) {
    case IPC_FB_STRING:
        e = check_vector(v, target, 1, IPC_FB_ERR_STRING, &n);
        if (e)
            return fail(v, e, s, f, target);
        if (!in_range(v, target + 4 + n, 1) || v->buf[target + 4 + n] != 0)
            return fail(v, IPC_FB_ERR_STRING, s, f, target);
        return 0;
    case IPC_FB_BYTES:
    case IPC_FB_NESTED:
        e = check_vector(v, target, 1, IPC_FB_ERR_VECTOR, &n);
        if (e)
            return fail(v, e, s, f, target);
        if (f->type == IPC_FB_NESTED)
            return verify_nested(v, target + 4, n, f->table, f, s);
        return 0;
    case IPC_FB_TABLE:
        return verify_table(v, target, f->table);
    case IPC_FB_TABLES:
        e = check_vector(v, target, 4, IPC_FB_ERR_VECTOR, &n);
        if (e)
            return fail(v, e, s, f, target);
        for (uint32_t i = 0; i < n; i++) {
            size_t slot = target + 4 + 4 * (size_t)i;
            uint32_t o = ipc_fb_u32(v->buf + slot);
            if (o == 0)
                return fail(v, IPC_FB_ERR_VEC_OFFSET, s, f, slot);
            if (verify_table(v, slot + o, f->table))
                return -1;
        }
        return 0;
    default:
        return 0;
    }
}

/* The union value field `id` (its type field, id - 1, was checked by the
 * caller's loop before it).  tsize is the table's size. */
static int
verify_union(struct verifier *v, size_t pos, const uint8_t *vt, size_t vtsize,
             size_t tsize, const struct ipc_fb_schema *s, unsigned id)
{
    const struct ipc_fb_field *f = &s->fields[id];
    size_t tslot = 4 + 2 * (size_t)(id - 1);
    size_t vslot = 4 + 2 * (size_t)id;
    uint16_t toff = tslot < vtsize ? ipc_fb_u16(vt + tslot) : 0;
    uint16_t off = vslot < vtsize ? ipc_fb_u16(vt + vslot) : 0;
    uint8_t type = toff ? v->buf[pos + toff] : 0;
    size_t target;
    enum ipc_fb_err e;

    if (off == 0) {
        if (f->required)
            return fail(v, IPC_FB_ERR_REQUIRED, s, f, pos);
        return 0;
    }
    e = check_offset(v, pos + off, &target);
    if (e)
        return fail(v, e, s, f, pos + off);
    /* The stricter table-size rule holds for the value's slot as for any
     * other field; after the offset's own checks, which Google's verifier
     * shares, so that a bad offset keeps its own code. */
    if ((size_t)off + 4 > tsize)
        return fail(v, IPC_FB_ERR_TABLE_SIZE, s, f, pos + off);
    if (type == 0)
        return fail(v, IPC_FB_ERR_UNION_NONE, s, f, pos + off);
    if (type > f->nmembers || f->members[type - 1] == NULL)
        return fail(v, IPC_FB_ERR_UNION, s, f, pos + toff);
    return verify_table(v, target, f->members[type - 1]);
}

static unsigned
scalar_size(enum ipc_fb_type t)
{
    switch (t) {
    case IPC_FB_U8:
    case IPC_FB_UNION_TYPE:
        return 1;
    case IPC_FB_U16:
        return 2;
    case IPC_FB_U64:
        return 8;
    default:
        return 4; /* U32 and every offset */
    }
}

static int
verify_table(struct verifier *v, size_t pos, const struct ipc_fb_schema *s)
{
    if (pos % 4)
        return fail(v, IPC_FB_ERR_ALIGN, s, NULL, pos);
    if (!in_range(v, pos, 4))
        return fail(v, IPC_FB_ERR_BOUNDS, s, NULL, pos);
    int32_t soff;
    memcpy(&soff, v->buf + pos, 4);
    /* Unsigned wrap-around gives the vtable's position either way, and any
     * result outside the buffer fails the range check below. */
    size_t vtpos = pos - (size_t)(int64_t)soff;

    v->depth++;
    v->tables++;
    if (v->depth > v->limits->max_depth)
        return fail(v, IPC_FB_ERR_DEPTH, s, NULL, pos);
    if (v->tables > v->limits->max_tables)
        return fail(v, IPC_FB_ERR_TABLES, s, NULL, pos);
    if (vtpos % 2)
        return fail(v, IPC_FB_ERR_ALIGN, s, NULL, pos);
    if (!in_range(v, vtpos, 2))
        return fail(v, IPC_FB_ERR_VTABLE, s, NULL, pos);
    const uint8_t *vt = v->buf + vtpos;
    size_t vtsize = ipc_fb_u16(vt);
    if (vtsize % 2 || !in_range(v, vtpos, vtsize))
        return fail(v, IPC_FB_ERR_VTABLE, s, NULL, vtpos);
    if (vtsize < 4)
        return fail(v, IPC_FB_ERR_VTABLE_HEADER, s, NULL, vtpos);
    size_t tsize = ipc_fb_u16(vt + 2);
    if (tsize < 4 || !in_range(v, pos, tsize))
        return fail(v, IPC_FB_ERR_TABLE_SIZE, s, NULL, pos);

    for (unsigned id = 0; id < s->nfields; id++) {
        const struct ipc_fb_field *f = &s->fields[id];
        size_t slot = 4 + 2 * (size_t)id;
        uint16_t off = slot < vtsize ? ipc_fb_u16(vt + slot) : 0;

        if (f->type == IPC_FB_NONE)
            continue;
        if (f->type == IPC_FB_UNION) {
            if (verify_union(v, pos, vt, vtsize, tsize, s, id))
                return -1;
            continue;
        }
        if (off == 0) {
            if (f->required)
                return fail(v, IPC_FB_ERR_REQUIRED, s, f, pos);
            continue;
        }
        unsigned size = scalar_size(f->type);
        if ((pos + off) % size)
            return fail(v, IPC_FB_ERR_ALIGN, s, f, pos + off);
        if (!in_range(v, pos + off, size))
            return fail(v, IPC_FB_ERR_BOUNDS, s, f, pos + off);
        if ((size_t)off + size > tsize)
            return fail(v, IPC_FB_ERR_TABLE_SIZE, s, f, pos + off);
        if (f->type <= IPC_FB_U64 || f->type == IPC_FB_UNION_TYPE)
            continue;
        size_t target;
        enum ipc_fb_err e = check_offset(v, pos + off, &target);
        if (e)
            return fail(v, e, s, f, pos + off);
        if (verify_ref(v, target, s, f))
            return -1;
    }
    v->depth--;
    return 0;
}

static int
verify_root(struct verifier *v, size_t prefix, const char *ident,
            const struct ipc_fb_schema *root)
{
    size_t target;

    if (v->len < FB_MIN_SIZE)
        return fail(v, IPC_FB_ERR_SIZE, root, NULL, 0);
    if (ident && memcmp(v->buf + prefix + 4, ident, 4) != 0)
        return fail(v, IPC_FB_ERR_IDENT, root, NULL, prefix + 4);
    enum ipc_fb_err e = check_offset(v, prefix, &target);
    if (e)
        return fail(v, e, root, NULL, prefix);
    return verify_table(v, target, root);
}

int
ipc_fb_verify(const uint8_t *buf, size_t len, size_t prefix, const char *ident,
              const struct ipc_fb_schema *root,
              const struct ipc_fb_limits *limits, struct ipc_fb_error *err)
{
    static const struct ipc_fb_limits defaults = {
        .max_depth = 64,
        .max_tables = 1000000,
    };
    struct verifier v = {
        .buf = buf,
        .len = len,
        .limits = limits ? limits : &defaults,
        .err = err,
    };

    if (len > FB_MAX_SIZE || len < prefix + 4)
        return fail(&v, IPC_FB_ERR_SIZE, root, NULL, 0);
    if (prefix && ipc_fb_u32(buf) != len - 4)
        return fail(&v, IPC_FB_ERR_PREFIX, root, NULL, 0);
    return verify_root(&v, prefix, ident, root);
}

bool
ipc_fb_err_is_stricter(enum ipc_fb_err code)
{
    switch (code) {
    case IPC_FB_ERR_VTABLE_HEADER:
    case IPC_FB_ERR_TABLE_SIZE:
    case IPC_FB_ERR_VEC_OFFSET:
    case IPC_FB_ERR_UNION:
    case IPC_FB_ERR_UNION_NONE:
    case IPC_FB_ERR_APP:
        return true;
    default:
        return false;
    }
}

const char *
ipc_fb_err_name(enum ipc_fb_err code)
{
    static const char *const names[] = {
        [IPC_FB_OK] = "ok",
        [IPC_FB_ERR_SIZE] = "buffer size out of range",
        [IPC_FB_ERR_PREFIX] = "size prefix differs from the buffer length",
        [IPC_FB_ERR_IDENT] = "wrong file identifier",
        [IPC_FB_ERR_ALIGN] = "misaligned",
        [IPC_FB_ERR_OFFSET] = "offset out of range",
        [IPC_FB_ERR_VTABLE] = "vtable out of range or odd-sized",
        [IPC_FB_ERR_BOUNDS] = "field out of the buffer",
        [IPC_FB_ERR_STRING] = "string out of the buffer or unterminated",
        [IPC_FB_ERR_VECTOR] = "vector length out of the buffer",
        [IPC_FB_ERR_DEPTH] = "tables nested too deep",
        [IPC_FB_ERR_TABLES] = "too many tables",
        [IPC_FB_ERR_REQUIRED] = "required field missing",
        [IPC_FB_ERR_UNION] = "unknown union type",
        [IPC_FB_ERR_NESTED] = "nested buffer too small",
        [IPC_FB_ERR_VTABLE_HEADER] = "vtable shorter than its header",
        [IPC_FB_ERR_TABLE_SIZE] = "field beyond its table's size",
        [IPC_FB_ERR_VEC_OFFSET] = "zero offset in a vector of tables",
        [IPC_FB_ERR_UNION_NONE] = "union value without a type",
        [IPC_FB_ERR_APP] = "application rule broken",
    };
    if ((unsigned)code < sizeof names / sizeof names[0] && names[code])
        return names[code];
    return "unknown error";
}

void
ipc_fb_error_format(const struct ipc_fb_error *err, char *out, size_t outlen)
{
    const char *what = err->code == IPC_FB_ERR_APP && err->detail
                           ? err->detail
                           : ipc_fb_err_name(err->code);
    snprintf(out, outlen, "%s%s%s%s%s at offset %zu",
             err->table ? err->table : "", err->field ? "." : "",
             err->field ? err->field : "", err->table ? ": " : "", what,
             err->offset);
}
