/*
 * route_export.c — GET /v1/export and POST /v1/import (issue 23): a whole
 * store in one archive, so that an operator can move a single machine's
 * file store into NATS (and back) with `wmctl export` / `wmctl import`.
 *
 * The archive is JSON lines (application/x-ndjson), one object a line, a
 * human can read with jq:
 *
 *   {"kind":"workmanager-export","format":1,"created":"...","from":"..."}
 *   {"kind":"blob","sha256":"<hex>","size":N,"content":"<base64>"}
 *   {"kind":"key","key":"workmanager/...","value":"<base64>"}
 *
 * The keys are every key of the store but the instances' heartbeats: the
 * workers' records (with their versions' history), their state, the
 * tenants with their quotas, the tokens (their hashes only: a token made
 * before the move works after it) and the group locks' records (whose
 * fencing tokens must keep growing).  The blobs are the code of every
 * version a worker's history names.  The archive is built in memory and
 * answered whole.
 *
 * An import is checked whole before anything is written: the header
 * first, every line a known object, every base64 and key valid, every
 * blob's digest and size right, every worker record readable and every
 * version it names present in the archive, and no key that exists already
 * (409 naming it, unless ?replace=true).  A failure answers 400 naming the
 * line and writes nothing.  Then the blobs are written, then the keys;
 * once all are stored, the tokens and tenants are read again and recovery
 * restores the new workers (their status kept: running ones take events).
 * A store that fails in the middle of the writes leaves what it wrote:
 * the answer says so, and importing again with ?replace=true finishes it.
 * The request is bounded by max_body_bytes like any other.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/timestamp.h"
#include "master/api/api.h"
#include "master/api/members.h"
#include "master/api/principal.h"
#include "master/api/tokens.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/log.h"
#include "master/store/record.h"
#include "master/store/store.h"
#include "master/workers/recovery.h"
#include "master/workers/worker.h"

#define FORMAT 1
#define SKIP_PREFIX "workmanager/instances/"

/* ---- export -------------------------------------------------------------- */

struct out {
    char *buf;
    size_t len, cap;
    bool oom;
    /* the blobs the workers' histories name (hex, deduplicated) */
    char (*shas)[STORE_SHA256_HEX];
    size_t nshas, capshas;
};

static void
out_add(struct out *o, const char *s, size_t n)
{
    if (o->oom)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 65536;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *b = realloc(o->buf, cap);
        if (b == NULL) {
            o->oom = true;
            return;
        }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

static void
out_json(struct out *o, json_t *j)
{
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;

    if (text == NULL)
        o->oom = true;
    else {
        out_add(o, text, strlen(text));
        out_add(o, "\n", 1);
    }
    free(text);
    json_decref(j);
}

static void
note_sha(struct out *o, const char *sha)
{
    for (size_t i = 0; i < o->nshas; i++)
        if (strcmp(o->shas[i], sha) == 0)
            return;
    if (o->nshas == o->capshas) {
        size_t cap = o->capshas ? o->capshas * 2 : 64;
        void *p = realloc(o->shas, cap * sizeof *o->shas);
        if (p == NULL) {
            o->oom = true;
            return;
        }
        o->shas = p;
        o->capshas = cap;
    }
    snprintf(o->shas[o->nshas++], STORE_SHA256_HEX, "%s", sha);
}

static int
on_key(const char *key, enum store_status status, const uint8_t *value,
       size_t len, uint64_t revision, const char *message, void *arg)
{
    struct out *o = arg;
    char err[256];

    (void)revision;
    if (strncmp(key, SKIP_PREFIX, strlen(SKIP_PREFIX)) == 0)
        return 0;
    if (status != STORE_OK) {
        log_warning("export: %s left out: %s", key, message);
        return 0;
    }
    if (strncmp(key, RECORD_WORKERS_PREFIX, strlen(RECORD_WORKERS_PREFIX)) ==
        0) {
        struct worker *w = record_worker_decode(
            key + strlen(RECORD_WORKERS_PREFIX), value, len, err, sizeof err);
        for (size_t i = 0; w && i < w->nhistory; i++)
            note_sha(o, w->history[i].sha256);
        worker_free(w);
    }
    char *b64 = base64_encode(value, len);
    out_json(o, b64 ? json_pack("{s:s, s:s, s:s}", "kind", "key", "key", key,
                                "value", b64)
                    : NULL);
    free(b64);
    return 0;
}

static void export(struct api_req *rq)
{
    struct out o = { 0 };
    char err[256], at[TIMESTAMP_SIZE];
    enum store_status st;

    timestamp_format(timestamp_now_ms(), at);
    out_json(&o, json_pack("{s:s, s:i, s:s, s:s}", "kind", "workmanager-export",
                           "format", FORMAT, "created", at, "from",
                           rq->d->conf->instance));
    /* the keys into a second buffer, so the blobs come first */
    struct out keys = { 0 };
    st = store_list(rq->d->store, "", on_key, &keys, err, sizeof err);
    o.shas = keys.shas;
    o.nshas = keys.nshas;
    for (size_t i = 0; st == STORE_OK && i < o.nshas && !o.oom; i++) {
        uint8_t *data = NULL;
        size_t len = 0;
        st = store_blob_get(rq->d->store, o.shas[i], &data, &len, err,
                            sizeof err);
        if (st != STORE_OK) {
            snprintf(err + strlen(err), sizeof err - strlen(err), " (blob %s)",
                     o.shas[i]);
            free(data);
            break;
        }
        char *b64 = base64_encode(data, len);
        out_json(&o, b64 ? json_pack("{s:s, s:s, s:I, s:s}", "kind", "blob",
                                     "sha256", o.shas[i], "size",
                                     (json_int_t)len, "content", b64)
                         : NULL);
        free(b64);
        free(data);
    }
    if (st == STORE_OK && !keys.oom)
        out_add(&o, keys.buf ? keys.buf : "", keys.len);
    if (st != STORE_OK)
        api_error(rq, 500, "internal", "export: the store failed: %s", err);
    else if (o.oom || keys.oom)
        api_error(rq, 500, "internal", "export: out of memory");
    else
        api_reply_text(rq, 200, "application/x-ndjson", o.buf, o.len);
    free(o.buf);
    free(keys.buf);
    free(keys.shas);
}

/* ---- import -------------------------------------------------------------- */

struct item {
    bool blob;
    char *key; /* a key's name */
    uint8_t *data;
    size_t len;
};

struct import {
    struct api_req *rq;
    struct item *items;
    size_t n, cap;
    unsigned pending, failed, blobs, keys, workers;
    char error[512];
};

static void
import_free(struct import *im)
{
    for (size_t i = 0; i < im->n; i++) {
        free(im->items[i].key);
        free(im->items[i].data);
    }
    free(im->items);
    free(im);
}

static struct item *
item_new(struct import *im)
{
    if (im->n == im->cap) {
        size_t cap = im->cap ? im->cap * 2 : 64;
        struct item *p = realloc(im->items, cap * sizeof *p);
        if (p == NULL)
            return NULL;
        im->items = p;
        im->cap = cap;
    }
    memset(&im->items[im->n], 0, sizeof im->items[0]);
    return &im->items[im->n++];
}

static const struct item *
blob_find(const struct import *im, const char *sha)
{
    for (size_t i = 0; i < im->n; i++)
        if (im->items[i].blob && strcmp(im->items[i].key, sha) == 0)
            return &im->items[i];
    return NULL;
}

/* One line into im: NULL, or why it is refused. */
static const char *
take_line(struct import *im, json_t *j, char *why, size_t whylen)
{
    const char *kind = json_string_value(json_object_get(j, "kind"));
    const char *text, *name;
    struct item *it;
    char sha[STORE_SHA256_HEX];

    if (kind == NULL)
        return "not an object with a \"kind\"";
    bool blob = strcmp(kind, "blob") == 0;
    if (!blob && strcmp(kind, "key") != 0) {
        snprintf(why, whylen, "unknown kind \"%s\" (blob, key)", kind);
        return why;
    }
    name = json_string_value(json_object_get(j, blob ? "sha256" : "key"));
    text = json_string_value(json_object_get(j, blob ? "content" : "value"));
    if (name == NULL || text == NULL)
        return blob ? "a blob needs \"sha256\" and \"content\""
                    : "a key needs \"key\" and \"value\"";
    if (!blob && (strncmp(name, "workmanager/", 12) != 0 ||
                  strncmp(name, SKIP_PREFIX, strlen(SKIP_PREFIX)) == 0 ||
                  strlen(name) >= STORE_KEY_MAX)) {
        snprintf(why, whylen, "key %.200s is not one an export holds", name);
        return why;
    }
    if ((it = item_new(im)) == NULL || (it->key = strdup(name)) == NULL)
        return "out of memory";
    it->blob = blob;
    if (base64_decode(text, strlen(text), &it->data, &it->len) != 0)
        return "its base64 is not valid";
    if (blob) {
        json_t *size = json_object_get(j, "size");
        store_sha256_hex(it->data, it->len, sha);
        if (strcmp(sha, name) != 0) {
            snprintf(why, whylen, "blob %.64s: its content's SHA-256 is %s",
                     name, sha);
            return why;
        }
        if (!json_is_integer(size) ||
            (uint64_t)json_integer_value(size) != it->len)
            return "a blob's size is not its content's";
        im->blobs++;
    } else {
        im->keys++;
    }
    return NULL;
}

/* The workers' records: readable, their versions' code in the archive. */
static const char *
check_workers(struct import *im, char *why, size_t whylen)
{
    char err[256];

    for (size_t i = 0; i < im->n; i++) {
        const struct item *it = &im->items[i];
        if (it->blob || strncmp(it->key, RECORD_WORKERS_PREFIX,
                                strlen(RECORD_WORKERS_PREFIX)) != 0)
            continue;
        struct worker *w =
            record_worker_decode(it->key + strlen(RECORD_WORKERS_PREFIX),
                                 it->data, it->len, err, sizeof err);
        if (w == NULL) {
            snprintf(why, whylen, "%s: %s", it->key, err);
            return why;
        }
        for (size_t v = 0; v < w->nhistory; v++)
            if (blob_find(im, w->history[v].sha256) == NULL) {
                snprintf(why, whylen,
                         "worker %s: version %u's code (%s) is not in the "
                         "archive",
                         w->name, w->history[v].version, w->history[v].sha256);
                worker_free(w);
                return why;
            }
        worker_free(w);
        im->workers++;
    }
    return NULL;
}

static void
import_answer(struct import *im)
{
    struct api_req *rq = im->rq;
    struct daemon *d = rq->d;
    char err[256];

    if (im->failed) {
        api_error(rq, 500, "internal",
                  "import: %u of the writes failed (the first: %s); what was "
                  "written stays: import again with ?replace=true",
                  im->failed, im->error);
        import_free(im);
        return;
    }
    /* The tokens and tenants anew, from the store; then the workers. */
    api_tokens_free();
    api_tenants_free();
    if (api_tokens_load(d->store, err, sizeof err) != 0 ||
        api_tenants_load(d->store, err, sizeof err) != 0)
        log_err("import: reading the tokens and tenants again: %s", err);
    if (recovery_start(d, NULL) != 0)
        log_warning("import: a recovery is running already: the imported "
                    "workers come with it or with POST /v1/recover");
    api_reply(rq, 200,
              json_pack("{s:{s:i, s:i, s:i}}", "imported", "keys",
                        (int)im->keys, "blobs", (int)im->blobs, "workers",
                        (int)im->workers));
    import_free(im);
}

static void
on_written(enum store_status st, uint64_t revision, const char *message,
           void *arg)
{
    struct import *im = arg;

    (void)revision;
    if (st != STORE_OK && im->failed++ == 0)
        snprintf(im->error, sizeof im->error, "%s", message);
    if (--im->pending == 0)
        import_answer(im);
}

static void
import(struct api_req *rq)
{
    size_t len;
    const char *body = (const char *)api_body_raw(rq, &len);
    const char *replace = api_query(rq, "replace");
    bool over = replace && strcmp(replace, "true") == 0;
    struct import *im = calloc(1, sizeof *im);
    char why[512];
    const char *bad = NULL;
    size_t line = 0;

    if (im == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        return;
    }
    im->rq = rq;
    for (const char *p = body, *end = body + len; p < end && bad == NULL;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        json_error_t je;
        json_t *j;

        line++;
        if (n == 0) {
            bad = "an empty line";
        } else if ((j = json_loadb(p, n, 0, &je)) == NULL) {
            snprintf(why, sizeof why, "not JSON: %s", je.text);
            bad = why;
        } else if (line == 1) {
            const char *k = json_string_value(json_object_get(j, "kind"));
            if (k == NULL || strcmp(k, "workmanager-export") != 0 ||
                json_integer_value(json_object_get(j, "format")) != FORMAT)
                bad = "not the header of a workmanager export of format 1";
            json_decref(j);
        } else {
            bad = take_line(im, j, why, sizeof why);
            json_decref(j);
        }
        p += n + 1;
    }
    if (bad == NULL && line == 0)
        bad = "an empty archive";
    if (bad != NULL) {
        api_error(rq, 400, "invalid_argument",
                  "import: line %zu: %s; nothing was imported", line, bad);
        import_free(im);
        return;
    }
    if ((bad = check_workers(im, why, sizeof why)) != NULL) {
        api_error(rq, 400, "invalid_argument",
                  "import: %s; nothing was imported", bad);
        import_free(im);
        return;
    }
    for (size_t i = 0; i < im->n && !over; i++) {
        const struct item *it = &im->items[i];
        uint8_t *v = NULL;
        size_t vl;
        uint64_t rev;
        char err[256];
        if (!it->blob && store_get(rq->d->store, it->key, &v, &vl, &rev, err,
                                   sizeof err) == STORE_OK) {
            free(v);
            api_error(rq, 409, "conflict",
                      "import: %s exists here already; nothing was imported "
                      "(?replace=true writes the archive's over it)",
                      it->key);
            import_free(im);
            return;
        }
        free(v);
    }
    /* Blobs first: a record is never stored before its code. */
    im->pending = 1; /* until every write is submitted */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < im->n; i++) {
            const struct item *it = &im->items[i];
            char sha[STORE_SHA256_HEX];
            if (it->blob != (pass == 0))
                continue;
            im->pending++;
            int rc = it->blob
                         ? store_blob_put(rq->d->store, it->data, it->len, sha,
                                          on_written, im)
                         : store_put(rq->d->store, it->key, it->data, it->len,
                                     STORE_ANY_REVISION, on_written, im);
            if (rc != 0)
                on_written(STORE_INVALID, 0, it->key, im);
        }
    on_written(STORE_OK, 0, NULL, im);
}

void
api_export_route(struct api_req *rq)
{
    bool get = strcmp(rq->method, "GET") == 0;
    bool is_import = strcmp(rq->seg[1], "import") == 0;

    if (is_import ? strcmp(rq->method, "POST") != 0 : !get) {
        api_error(rq, 405, "invalid_argument", "%s is not allowed on %s",
                  rq->method, rq->path);
        return;
    }
    if (api_scope_refuse(rq, API_OPERATE, NULL,
                         is_import ? "import" : "export"))
        return;
    if (is_import) {
        if (!api_refuse_while_recovering(rq))
            import(rq);
    } else {
        export(rq);
    }
}
