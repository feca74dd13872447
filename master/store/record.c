/*
 * record.c — worker ⇄ WorkerRecord (records.proto) with protobuf-c.
 *
 * Encoding borrows the worker's strings (no copies); decoding copies into a
 * fresh struct worker and validates the invariants the registry depends
 * on, so that a damaged or hand-edited record becomes a clear error instead
 * of a crash later.
 */
#include "config.h"

#include "master/store/record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/store/records.pb-c.h"

#define RECORD_FORMAT 1

void
record_worker_key(const char *id, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s%s", RECORD_WORKERS_PREFIX, id);
}

/* protobuf-c wants char * even for strings it only reads. */
static char *
unconst(const char *s)
{
    return (char *)(uintptr_t)(s ? s : "");
}

static Workmanager__Pair **
pairs_out(const struct worker_pair *p, size_t n, Workmanager__Pair *store)
{
    Workmanager__Pair **v = calloc(n ? n : 1, sizeof *v);
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        workmanager__pair__init(&store[i]);
        store[i].name = unconst(p[i].name);
        store[i].value = unconst(p[i].value);
        v[i] = &store[i];
    }
    return v;
}

int
record_worker_encode(const struct worker *w, uint8_t **out, size_t *len)
{
    Workmanager__WorkerRecord r;
    Workmanager__Limits limits;
    Workmanager__Pair *config = calloc(w->nconfig + 1, sizeof *config);
    Workmanager__Pair *tags = calloc(w->ntags + 1, sizeof *tags);
    Workmanager__Version *vers = calloc(w->nhistory + 1, sizeof *vers);
    Workmanager__Version **vp = calloc(w->nhistory + 1, sizeof *vp);
    int rc = -1;

    workmanager__worker_record__init(&r);
    workmanager__limits__init(&limits);
    r.config = config ? pairs_out(w->config, w->nconfig, config) : NULL;
    r.tags = tags ? pairs_out(w->tags, w->ntags, tags) : NULL;
    if (!config || !tags || !vers || !vp || !r.config || !r.tags)
        goto out;

    r.format = RECORD_FORMAT;
    r.id = unconst(w->id);
    r.name = unconst(w->name);
    r.tenant = unconst(w->tenant);
    r.mime_type = unconst(w->mime_type);
    r.topic = unconst(w->topic);
    r.group = unconst(w->group);
    r.status = (Workmanager__Status)w->status;
    r.n_config = w->nconfig;
    r.n_tags = w->ntags;
    limits.timeout_ms = w->limits.timeout_ms;
    limits.memory_mb = w->limits.memory_mb;
    limits.concurrency = w->limits.concurrency;
    r.limits = &limits;
    r.in_process = w->in_process;
    r.idle_timeout_s = w->idle_timeout_s;
    r.created_at_ms = w->created_at_ms;
    r.updated_at_ms = w->updated_at_ms;
    for (size_t i = 0; i < w->nhistory; i++) {
        const struct worker_version *h = &w->history[i];
        workmanager__version__init(&vers[i]);
        vers[i].version = h->version;
        vers[i].sha256 = unconst(h->sha256);
        vers[i].size = h->size;
        vers[i].at_ms = h->at_ms;
        vers[i].source = unconst(h->source);
        vers[i].rollback_of = h->rollback_of;
        vers[i].address = unconst(h->address);
        vers[i].final_url = unconst(h->final_url);
        vp[i] = &vers[i];
    }
    r.n_history = w->nhistory;
    r.history = vp;
    r.version = w->version;

    *len = workmanager__worker_record__get_packed_size(&r);
    *out = malloc(*len ? *len : 1);
    if (*out == NULL)
        goto out;
    workmanager__worker_record__pack(&r, *out);
    rc = 0;
out:
    free(r.config);
    free(r.tags);
    free(config);
    free(tags);
    free(vers);
    free(vp);
    return rc;
}

static char *
dup_or_null(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

static int
pairs_in(Workmanager__Pair **in, size_t n, struct worker_pair **out,
         size_t *nout)
{
    *out = calloc(n ? n : 1, sizeof **out);
    if (*out == NULL)
        return -1;
    *nout = n;
    for (size_t i = 0; i < n; i++) {
        (*out)[i].name = strdup(in[i]->name);
        (*out)[i].value = strdup(in[i]->value);
        if (!(*out)[i].name || !(*out)[i].value)
            return -1;
    }
    return 0;
}

struct worker *
record_worker_decode(const char *id, const uint8_t *data, size_t len, char *err,
                     size_t errlen)
{
    Workmanager__WorkerRecord *r =
        workmanager__worker_record__unpack(NULL, len, data);
    struct worker *w = NULL;
    const char *why = NULL;

    if (r == NULL) {
        snprintf(err, errlen, "record of worker %s does not decode", id);
        return NULL;
    }
    if (r->format != RECORD_FORMAT)
        why = "unknown record format";
    else if (strcmp(r->id, id) != 0)
        why = "the record's id differs from its key";
    else if (!*r->name || !*r->tenant || !*r->mime_type || !*r->topic)
        why = "name, tenant, mime_type or topic is empty";
    else if ((unsigned)r->status > WORKMANAGER__STATUS__STOPPED)
        why = "unknown status";
    else if (r->n_history == 0
                 ? r->version != 0 || r->status != WORKMANAGER__STATUS__STOPPED
                 : r->version == 0 || r->version > r->n_history)
        why = "the current code version is not in the history (a worker "
              "without code is stopped at version 0)";
    for (size_t i = 0; !why && i < r->n_history; i++)
        if (r->history[i]->version != i + 1 ||
            strlen(r->history[i]->sha256) != 64)
            why = "history versions are not 1..n with SHA-256 digests";
    if (why) {
        snprintf(err, errlen, "record of worker %s: %s", id, why);
        goto out;
    }

    w = calloc(1, sizeof *w);
    if (w == NULL)
        goto oom;
    snprintf(w->id, sizeof w->id, "%s", r->id);
    w->name = strdup(r->name);
    w->tenant = strdup(r->tenant);
    w->mime_type = strdup(r->mime_type);
    w->topic = strdup(r->topic);
    w->group = dup_or_null(r->group);
    if (!w->name || !w->tenant || !w->mime_type || !w->topic ||
        (*r->group && !w->group))
        goto oom;
    w->status = (enum worker_status)r->status;
    if (pairs_in(r->config, r->n_config, &w->config, &w->nconfig) ||
        pairs_in(r->tags, r->n_tags, &w->tags, &w->ntags))
        goto oom;
    if (r->limits) {
        w->limits.timeout_ms = r->limits->timeout_ms;
        w->limits.memory_mb = r->limits->memory_mb;
        w->limits.concurrency = r->limits->concurrency;
    }
    if (w->limits.concurrency == 0)
        w->limits.concurrency = 1;
    w->in_process = r->in_process;
    w->idle_timeout_s = r->idle_timeout_s;
    w->created_at_ms = r->created_at_ms;
    w->updated_at_ms = r->updated_at_ms;
    w->history = calloc(r->n_history ? r->n_history : 1, sizeof *w->history);
    if (w->history == NULL)
        goto oom;
    w->nhistory = r->n_history;
    for (size_t i = 0; i < r->n_history; i++) {
        struct worker_version *h = &w->history[i];
        h->version = r->history[i]->version;
        snprintf(h->sha256, sizeof h->sha256, "%s", r->history[i]->sha256);
        h->size = r->history[i]->size;
        h->at_ms = r->history[i]->at_ms;
        h->source = strdup(r->history[i]->source);
        h->rollback_of = r->history[i]->rollback_of;
        h->address = dup_or_null(r->history[i]->address);
        h->final_url = dup_or_null(r->history[i]->final_url);
        if (h->source == NULL ||
            (*r->history[i]->address && h->address == NULL) ||
            (*r->history[i]->final_url && h->final_url == NULL))
            goto oom;
    }
    w->version = r->version;
    goto out;
oom:
    snprintf(err, errlen, "record of worker %s: out of memory", id);
    worker_free(w);
    w = NULL;
out:
    workmanager__worker_record__free_unpacked(r, NULL);
    return w;
}
