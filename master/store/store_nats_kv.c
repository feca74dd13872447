/*
 * store_nats_kv.c — what the `nats` store backend says to JetStream
 * (store_nats_private.h): key encoding, reads, listings, compare-and-set
 * writes and deletes, and blobs in chunks.
 *
 * Keys.  A store key is [A-Za-z0-9._/-] (store.h); a KV key is a subject
 * tail in which '.' separates tokens.  Each '.' is written "=2E" ('=' is
 * a KV key byte and never a store key byte), so a store key is one token,
 * the mapping is one-to-one and decoding is exact.
 *
 * Writes are raw publishes to $KV.<bucket>.<key> with JetStream's
 * expected-last-subject-sequence header rather than kvStore_Update(): the
 * PubAck's error code tells a lost compare-and-set (10071, wrong last
 * sequence) from a failure, which kvStore_* in libnats 3.4.1 does not.
 * Expected 0 ("absent") must also accept a key whose last message is a
 * delete marker: the create is retried once against the marker's
 * sequence, as kvStore_Create() does.  A delete is a KV delete marker
 * (header KV-Operation: DEL) published under compare-and-set against the
 * sequence just read, so a delete never removes a value it did not see.
 *
 * Blobs: chunks H.0 ... H.n-1, then the manifest H ("wmblob1 LEN N CHUNK").
 * A put whose intact manifest exists is kept (idempotent); a delete marks
 * the manifest first, so a half-deleted blob reads as absent, not corrupt.
 * Every read checks the length and the SHA-256.
 *
 * Invariants: nothing here keeps state; the functions run on any thread
 * (libnats connections are thread-safe); the store.c checks hold for
 * every argument (valid keys, blob names).
 */
#include "config.h"

#include "master/store/store_nats_private.h"

#include "lib/errbuf.h"
#include "master/core/nats_link.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An encoded key: each byte of a 512-byte key at most 3 bytes. */
#define SN_KEY_MAX (3 * STORE_KEY_MAX + 1)
/* "$KV." bucket "." key, and a chunk's ".<n>". */
#define SN_SUBJECT_MAX (SN_KEY_MAX + 128)
#define SN_MANIFEST_MAX 96
/* A delete racing a write of the same key is retried this often. */
#define SN_DELETE_TRIES 5

static const char hdr_expected[] = "Nats-Expected-Last-Subject-Sequence";
static const char hdr_operation[] = "KV-Operation";

enum store_status
store_nats_fail(char *err, size_t errlen, natsStatus s, const char *fmt, ...)
{
    char what[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    nats_link_fail(err, errlen, s, "%s", what);
    return STORE_IO;
}

/* Sets op's failure: status and a malloc'd message. */
static void sn_op_fail(struct sn_op *op, enum store_status status,
                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
sn_op_fail(struct sn_op *op, enum store_status status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    store_fail_v(&op->status, &op->message, status, fmt, ap);
    va_end(ap);
}

/* op fails with STORE_IO and store_nats_fail()'s words. */
static void
sn_op_nats_fail(struct sn_op *op, natsStatus s, const char *what)
{
    char err[1280];

    store_nats_fail(err, sizeof err, s, "%s", what);
    sn_op_fail(op, STORE_IO, "%s", err);
}

static void
sn_key_encode(const char *key, char out[SN_KEY_MAX])
{
    size_t n = 0;

    for (; *key != '\0'; key++) {
        if (*key == '.') {
            memcpy(out + n, "=2E", 3);
            n += 3;
        } else {
            out[n++] = *key;
        }
    }
    out[n] = '\0';
}

/* The store key of KV key k (in place: decoding only shrinks). */
void
store_nats_key_decode(char *k)
{
    char *w = k;

    for (const char *r = k; *r != '\0';) {
        if (strncmp(r, "=2E", 3) == 0) {
            *w++ = '.';
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

static void
sn_subject(const char *bucket, const char *key, char out[SN_SUBJECT_MAX])
{
    char k[SN_KEY_MAX];

    sn_key_encode(key, k);
    snprintf(out, SN_SUBJECT_MAX, "$KV.%s.%s", bucket, k);
}

/* A copy of n bytes (a valid pointer even for 0), or NULL. */
static uint8_t *
sn_dup(const void *p, size_t n)
{
    uint8_t *c = malloc(n > 0 ? n : 1);

    if (c != NULL && n > 0)
        memcpy(c, p, n);
    return c;
}

/* kvStore_Get of an encoded key: STORE_OK with a copy of the value,
 * STORE_NOT_FOUND (absent or deleted), or STORE_IO. */
static enum store_status
sn_kv_get(kvStore *kv, const char *bucket, const char *enc, uint8_t **value,
          size_t *len, uint64_t *rev, char *err, size_t errlen)
{
    kvEntry *e = NULL;
    natsStatus s = kvStore_Get(&e, kv, enc);

    if (s == NATS_NOT_FOUND)
        return STORE_NOT_FOUND;
    if (s != NATS_OK)
        return store_nats_fail(err, errlen, s, "nats store: get %s in %s", enc,
                               bucket);
    *len = (size_t)kvEntry_ValueLen(e);
    *value = sn_dup(kvEntry_Value(e), *len);
    if (rev != NULL)
        *rev = kvEntry_Revision(e);
    kvEntry_Destroy(e);
    if (*value == NULL) {
        errbuf_set(err, errlen, "nats store: out of memory");
        return STORE_IO;
    }
    return STORE_OK;
}

/* Reads run on the loop: while the connection is down they fail at once
 * rather than stall the daemon for SN_WAIT_MS each (writes, on the writer
 * thread, wait: the reconnect may come in time). */
static int
sn_connected(struct store_nats *sn, char *err, size_t errlen)
{
    if (natsConnection_Status(sn->nc) == NATS_CONN_STATUS_CONNECTED)
        return 0;
    errbuf_set(err, errlen,
               "NATS at %s is unreachable (the client reconnects by itself)",
               sn->url);
    return -1;
}

enum store_status
store_nats_get(struct store_nats *sn, const char *key, uint8_t **value,
               size_t *len, uint64_t *rev, char *err, size_t errlen)
{
    char k[SN_KEY_MAX];

    if (sn_connected(sn, err, errlen) != 0)
        return STORE_IO;
    sn_key_encode(key, k);
    return sn_kv_get(sn->state, sn->state_bucket, k, value, len, rev, err,
                     errlen);
}

/* ---- listing ------------------------------------------------------------ */

struct sn_item {
    char *key;
    uint8_t *value;
    size_t len;
    uint64_t rev;
};

struct sn_items {
    struct sn_item *v;
    size_t n, cap;
};

static void
sn_items_free(struct sn_items *it)
{
    for (size_t i = 0; i < it->n; i++) {
        free(it->v[i].key);
        free(it->v[i].value);
    }
    free(it->v);
}

static int
sn_item_cmp(const void *a, const void *b)
{
    return strcmp(((const struct sn_item *)a)->key,
                  ((const struct sn_item *)b)->key);
}

/* Adds entry e when its decoded key starts with prefix.  0, or -1 out of
 * memory. */
static int
sn_items_add(struct sn_items *it, kvEntry *e, const char *prefix)
{
    struct sn_item item = { 0 };

    item.key = strdup(kvEntry_Key(e));
    if (item.key == NULL)
        return -1;
    store_nats_key_decode(item.key);
    if (strncmp(item.key, prefix, strlen(prefix)) != 0) {
        free(item.key);
        return 0;
    }
    item.len = (size_t)kvEntry_ValueLen(e);
    item.value = sn_dup(kvEntry_Value(e), item.len);
    item.rev = kvEntry_Revision(e);
    if (item.value == NULL || (it->n == it->cap && it->cap > SIZE_MAX / 2)) {
        free(item.key);
        free(item.value);
        return -1;
    }
    if (it->n == it->cap) {
        size_t cap = it->cap > 0 ? 2 * it->cap : 64;
        struct sn_item *v = realloc(it->v, cap * sizeof *v);

        if (v == NULL) {
            free(item.key);
            free(item.value);
            return -1;
        }
        it->v = v;
        it->cap = cap;
    }
    it->v[it->n++] = item;
    return 0;
}

/* Every live key of the bucket through a watcher of its last values (one
 * pass, no request per key); the subjects cannot express a prefix of one
 * token, so the prefix is filtered here, and the keys sorted. */
enum store_status
store_nats_list(struct store_nats *sn, const char *prefix, store_list_cb cb,
                void *arg, char *err, size_t errlen)
{
    struct sn_items it = { 0 };
    kvWatchOptions o;
    kvWatcher *w = NULL;
    enum store_status st = STORE_OK;
    natsStatus s;

    if (sn_connected(sn, err, errlen) != 0)
        return STORE_IO;
    kvWatchOptions_Init(&o);
    o.IgnoreDeletes = true;
    s = kvStore_WatchAll(&w, sn->state, &o);
    if (s != NATS_OK)
        return store_nats_fail(err, errlen, s, "nats store: listing %s",
                               sn->state_bucket);
    for (;;) {
        kvEntry *e = NULL;

        s = kvWatcher_Next(&e, w, SN_WAIT_MS);
        if (s != NATS_OK) {
            st = store_nats_fail(err, errlen, s, "nats store: listing %s",
                                 sn->state_bucket);
            break;
        }
        if (e == NULL) /* the initial values are all there */
            break;
        if (sn_items_add(&it, e, prefix) != 0) {
            kvEntry_Destroy(e);
            errbuf_set(err, errlen, "nats store: out of memory");
            st = STORE_IO;
            break;
        }
        kvEntry_Destroy(e);
    }
    kvWatcher_Destroy(w);
    if (st == STORE_OK && it.n > 0) {
        qsort(it.v, it.n, sizeof *it.v, sn_item_cmp);
        for (size_t i = 0; i < it.n; i++) {
            const struct sn_item *x = &it.v[i];

            if (cb(x->key, STORE_OK, x->value, x->len, x->rev, NULL, arg) != 0)
                break;
        }
    }
    sn_items_free(&it);
    return st;
}

/* ---- writes (writer thread) -------------------------------------------- */

/*
 * Publishes data to subject: with cas, under "the subject's last sequence
 * is expected"; with del, as a KV delete marker.  STORE_OK with *seq the
 * message's sequence (the key's new revision), STORE_CONFLICT when the
 * compare-and-set lost, else STORE_IO; op's message is set on failure.
 */
static enum store_status
sn_publish(struct store_nats *sn, struct sn_op *op, const char *subject,
           const uint8_t *data, size_t len, bool cas, uint64_t expected,
           bool del, uint64_t *seq)
{
    jsPubOptions po;
    jsPubAck *ack = NULL;
    jsErrCode jerr = 0;
    natsMsg *m = NULL;
    char num[24];
    natsStatus s;

    s = natsMsg_Create(&m, subject, NULL, (const char *)data, (int)len);
    if (s == NATS_OK && cas) {
        snprintf(num, sizeof num, "%" PRIu64, expected);
        s = natsMsgHeader_Set(m, hdr_expected, num);
    }
    if (s == NATS_OK && del)
        s = natsMsgHeader_Set(m, hdr_operation, "DEL");
    if (s == NATS_OK) {
        jsPubOptions_Init(&po);
        po.MaxWait = SN_WAIT_MS;
        s = js_PublishMsg(&ack, sn->js, m, &po, &jerr);
    }
    natsMsg_Destroy(m);
    if (s == NATS_OK) {
        *seq = ack->Sequence;
        jsPubAck_Destroy(ack);
        return STORE_OK;
    }
    if (jerr == JSStreamWrongLastSequenceErr) {
        sn_op_fail(
            op, STORE_CONFLICT,
            "key %s: expected %s%" PRIu64 ", found another revision", op->name,
            expected == 0 ? "it absent, revision " : "revision ", expected);
        return STORE_CONFLICT;
    }
    char what[SN_SUBJECT_MAX + 64];
    snprintf(what, sizeof what, "nats store: publish to %s", subject);
    sn_op_nats_fail(op, s, what);
    return STORE_IO;
}

/* The subject's last message in stream: *seq 0 when there is none,
 * *deleted when it is a delete or purge marker.  STORE_OK or STORE_IO
 * (op's message set). */
static enum store_status
sn_last(struct store_nats *sn, struct sn_op *op, const char *stream,
        const char *subject, uint64_t *seq, bool *deleted)
{
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    const char *v = NULL;
    natsStatus s;

    *seq = 0;
    *deleted = false;
    s = js_GetLastMsg(&m, sn->js, stream, subject, NULL, &jerr);
    if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr)
        return STORE_OK;
    if (s != NATS_OK) {
        char what[SN_SUBJECT_MAX + 64];

        snprintf(what, sizeof what, "nats store: reading %s", subject);
        sn_op_nats_fail(op, s, what);
        return STORE_IO;
    }
    *seq = natsMsg_GetSequence(m);
    *deleted = natsMsgHeader_Get(m, hdr_operation, &v) == NATS_OK;
    natsMsg_Destroy(m);
    return STORE_OK;
}

static void
sn_put_run(struct store_nats *sn, struct sn_op *op)
{
    char subject[SN_SUBJECT_MAX];
    bool any = op->expected == STORE_ANY_REVISION, deleted;
    enum store_status st;
    uint64_t last;

    sn_subject(sn->state_bucket, op->name, subject);
    st = sn_publish(sn, op, subject, op->value, op->len, !any, op->expected,
                    false, &op->new_rev);
    if (st != STORE_CONFLICT || op->expected != 0)
        return;
    /* Absent may also mean "deleted": create over the marker. */
    if (sn_last(sn, op, sn->state_stream, subject, &last, &deleted) !=
            STORE_OK ||
        !deleted)
        return;
    free(op->message);
    op->message = NULL;
    op->status = STORE_OK;
    sn_publish(sn, op, subject, op->value, op->len, true, last, false,
               &op->new_rev);
}

static void
sn_delete_run(struct store_nats *sn, struct sn_op *op)
{
    char subject[SN_SUBJECT_MAX];
    bool any = op->expected == STORE_ANY_REVISION, deleted;
    uint64_t last, seq;

    sn_subject(sn->state_bucket, op->name, subject);
    for (int i = 0; i < SN_DELETE_TRIES; i++) {
        free(op->message);
        op->message = NULL;
        op->status = STORE_OK;
        if (sn_last(sn, op, sn->state_stream, subject, &last, &deleted) !=
            STORE_OK)
            return;
        if (last == 0 || deleted) {
            sn_op_fail(op, STORE_NOT_FOUND, "key %s does not exist", op->name);
            return;
        }
        if (!any && last != op->expected) {
            sn_op_fail(op, STORE_CONFLICT,
                       "key %s: expected revision %" PRIu64 ", found %" PRIu64,
                       op->name, op->expected, last);
            return;
        }
        if (sn_publish(sn, op, subject, NULL, 0, true, last, true, &seq) !=
                STORE_CONFLICT ||
            !any)
            break;
    }
    op->new_rev = 0;
}

/* ---- blobs -------------------------------------------------------------- */

struct sn_manifest {
    uint64_t len, n, chunk;
};

static int
sn_manifest_parse(const uint8_t *v, size_t len, struct sn_manifest *m)
{
    char buf[SN_MANIFEST_MAX];
    char tail;

    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, v, len);
    buf[len] = '\0';
    if (sscanf(buf, "wmblob1 %" SCNu64 " %" SCNu64 " %" SCNu64 "%c", &m->len,
               &m->n, &m->chunk, &tail) != 4 ||
        tail != '\n' || m->chunk == 0 ||
        m->n != (m->len + m->chunk - 1) / m->chunk)
        return -1;
    return 0;
}

enum store_status
store_nats_blob_get(struct store_nats *sn, const char *hex, uint8_t **data,
                    size_t *len, char *err, size_t errlen)
{
    struct sn_manifest mf;
    enum store_status st;
    uint8_t *v = NULL, *out;
    uint8_t md[32];
    char got[STORE_SHA256_HEX];
    size_t vlen = 0, at = 0;

    if (sn_connected(sn, err, errlen) != 0)
        return STORE_IO;
    st = sn_kv_get(sn->blobs, sn->blob_bucket, hex, &v, &vlen, NULL, err,
                   errlen);
    if (st != STORE_OK)
        return st;
    if (sn_manifest_parse(v, vlen, &mf) != 0 || mf.len > SIZE_MAX - 1) {
        free(v);
        errbuf_set(err, errlen, "blob %s: its manifest in %s is unreadable",
                   hex, sn->blob_bucket);
        return STORE_CORRUPT;
    }
    free(v);
    out = malloc(mf.len > 0 ? (size_t)mf.len : 1);
    if (out == NULL) {
        errbuf_set(err, errlen, "blob %s: out of memory", hex);
        return STORE_IO;
    }
    for (uint64_t i = 0; i < mf.n; i++) {
        char k[STORE_SHA256_HEX + 24];

        snprintf(k, sizeof k, "%s.%" PRIu64, hex, i);
        st = sn_kv_get(sn->blobs, sn->blob_bucket, k, &v, &vlen, NULL, err,
                       errlen);
        if (st == STORE_NOT_FOUND || (st == STORE_OK && vlen > mf.len - at)) {
            errbuf_set(err, errlen,
                       "blob %s: chunk %" PRIu64 " of %" PRIu64 " is %s", hex,
                       i, mf.n, st == STORE_OK ? "too long" : "missing");
            st = STORE_CORRUPT;
        }
        if (st != STORE_OK) {
            free(v);
            free(out);
            return st;
        }
        memcpy(out + at, v, vlen);
        at += vlen;
        free(v);
    }
    if (at != mf.len || store_sha256(out, at, md) != 0) {
        free(out);
        errbuf_set(err, errlen,
                   "blob %s: %zu bytes, its manifest says %" PRIu64, hex, at,
                   mf.len);
        return STORE_CORRUPT;
    }
    store_hex(md, got);
    if (strcmp(got, hex) != 0) {
        free(out);
        errbuf_set(err, errlen, "blob %s: its bytes hash to %s", hex, got);
        return STORE_CORRUPT;
    }
    *data = out;
    *len = at;
    return STORE_OK;
}

static void
sn_blob_put_run(struct store_nats *sn, struct sn_op *op)
{
    char subject[SN_SUBJECT_MAX], manifest[SN_MANIFEST_MAX];
    char err[512];
    uint8_t *have = NULL;
    size_t havelen = 0, n;
    uint64_t seq;

    /* Idempotent: an intact blob of that name is kept. */
    if (store_nats_blob_get(sn, op->name, &have, &havelen, err, sizeof err) ==
        STORE_OK) {
        free(have);
        return;
    }
    n = op->len == 0 ? 0 : (op->len + sn->chunk - 1) / sn->chunk;
    for (size_t i = 0; i < n; i++) {
        size_t off = i * sn->chunk;
        size_t len = op->len - off < sn->chunk ? op->len - off : sn->chunk;

        snprintf(subject, sizeof subject, "$KV.%s.%s.%zu", sn->blob_bucket,
                 op->name, i);
        if (sn_publish(sn, op, subject, op->value + off, len, false, 0, false,
                       &seq) != STORE_OK)
            return;
    }
    int mlen = snprintf(manifest, sizeof manifest, "wmblob1 %zu %zu %zu\n",
                        op->len, n, sn->chunk);
    snprintf(subject, sizeof subject, "$KV.%s.%s", sn->blob_bucket, op->name);
    sn_publish(sn, op, subject, (const uint8_t *)manifest, (size_t)mlen, false,
               0, false, &op->new_rev);
}

static void
sn_blob_delete_run(struct store_nats *sn, struct sn_op *op)
{
    char subject[SN_SUBJECT_MAX], err[512];
    struct sn_manifest mf = { 0 };
    enum store_status st;
    uint8_t *v = NULL;
    size_t vlen = 0;
    uint64_t seq;

    st = sn_kv_get(sn->blobs, sn->blob_bucket, op->name, &v, &vlen, NULL, err,
                   sizeof err);
    if (st == STORE_NOT_FOUND) {
        sn_op_fail(op, STORE_NOT_FOUND, "blob %s does not exist", op->name);
        return;
    }
    if (st != STORE_OK) {
        sn_op_fail(op, st, "%s", err);
        return;
    }
    /* An unreadable manifest still goes: its chunks stay behind. */
    (void)sn_manifest_parse(v, vlen, &mf);
    free(v);
    snprintf(subject, sizeof subject, "$KV.%s.%s", sn->blob_bucket, op->name);
    if (sn_publish(sn, op, subject, NULL, 0, false, 0, true, &seq) != STORE_OK)
        return;
    for (uint64_t i = 0; i < mf.n; i++) {
        snprintf(subject, sizeof subject, "$KV.%s.%s.%" PRIu64, sn->blob_bucket,
                 op->name, i);
        if (sn_publish(sn, op, subject, NULL, 0, false, 0, true, &seq) !=
            STORE_OK)
            return;
    }
    op->new_rev = 0;
}

void
store_nats_run(struct store_nats *sn, struct sn_op *op)
{
    op->status = STORE_OK;
    switch (op->kind) {
    case SN_PUT:
        sn_put_run(sn, op);
        break;
    case SN_DELETE:
        sn_delete_run(sn, op);
        break;
    case SN_BLOB_PUT:
        sn_blob_put_run(sn, op);
        break;
    case SN_BLOB_DELETE:
        sn_blob_delete_run(sn, op);
        break;
    }
}
