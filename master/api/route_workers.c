/*
 * route_workers.c — the /v1/workers routes (DESIGN §7, §8).
 *
 * Every mutation follows one order so that a failure leaves nothing
 * half-done: validate everything first; store the code blob (content
 * addressed, so a leftover is harmless); when the worker is to run, have a
 * host load the code (a load failure answers 422 `load_failed` with the
 * host's message and changes nothing); write the record (compare-and-set on
 * its revision); only then change the registry, emit the lifecycle event
 * and answer.  The desired status is persisted; the host state is not.
 *
 * Code from a URL is fetched first (fetch.h, off the loop): the create or
 * reload waits for it holding its worker busy, and goes on as if the bytes
 * had come in the request, its history entry recording the URL, the
 * address they came from and their digest.  Only the blob is kept:
 * recovery and rollback never fetch again.
 *
 * A create without code (the original's older flow) writes a stopped
 * worker at version 0, in state no_code, with no history: nothing is
 * stored or loaded until its first reload makes it version 1; start and
 * invoke refuse it (api_workers_refuse_no_code) until then.
 */
#include "config.h"

#include <errno.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include "ipc/cloudevent.h"
#include "lib/timestamp.h"
#include "lib/uuid.h"
#include "master/api/api.h"
#include "master/api/members.h"
#include "master/api/quota_http.h"
#include "master/api/worker_body.h"
#include "master/broker/flow.h"
#include "master/broker/gateway.h"
#include "master/broker/stamp.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/engines.h"
#include "master/core/log.h"
#include "master/store/record.h"
#include "master/store/store.h"
#include "master/supervise/supervise.h"
#include "master/workers/activity.h"
#include "master/workers/fetch.h"
#include "master/workers/lifecycle.h"
#include "master/workers/registry.h"

/* ---- a pending operation --------------------------------------------- */

enum op_kind {
    OP_CREATE,
    OP_STATUS,
    OP_RELOAD,
    OP_ROLLBACK,
    OP_TAGS,
    OP_DELETE,
};

struct op {
    LIST_ENTRY(op) link; /* in ops */
    enum op_kind kind;
    struct api_req *rq;
    struct daemon *d;
    struct worker *w;
    uint8_t *code; /* the new code (create, reload) */
    size_t len;
    /* Where it came from, for its history entry: a URL, the address that
     * answered and the URL that did after redirects; NULL for content. */
    char *url;
    char *address;
    char *final_url;
    const char *event; /* lifecycle event to emit on success */
    /* What to restore if the write fails. */
    enum worker_status old_status;
    uint32_t old_version;
    size_t old_nhistory;
    struct worker_pair *old_tags;
    size_t old_ntags;
    /* A create stores its code and loads it at once: the steps it still
     * waits for, and the first failure (answered once both are done). */
    unsigned waiting;
    int fail_status;
    const char *fail_code;
    char fail_message[512];
    /* A create's share of its tenant's quotas, reserved until the worker
     * is in the registry or the create failed (quota.h). */
    char *reserved_tenant;
    int64_t reserved[QUOTA_N];
};

/* The operations in progress (api_workers_in_flight()). */
static LIST_HEAD(, op) ops = LIST_HEAD_INITIALIZER(ops);

bool
api_workers_in_flight(const char *id)
{
    const struct op *op;

    LIST_FOREACH (op, &ops, link)
        if (op->w && strcmp(op->w->id, id) == 0)
            return true;
    return false;
}

/* Reserves (sign 1) or gives back (sign -1) op's share of its tenant's
 * quotas. */
static void
op_reserve(struct op *op, int sign)
{
    for (int k = 0; op->reserved_tenant && k < QUOTA_N; k++)
        if (op->reserved[k])
            quota_reserve(op->reserved_tenant, (enum quota_kind)k,
                          sign * op->reserved[k]);
}

static void
op_free(struct op *op)
{
    LIST_REMOVE(op, link);
    op_reserve(op, -1);
    free(op->reserved_tenant);
    if (op->w)
        op->w->busy = false;
    free(op->code);
    free(op->url);
    free(op->address);
    free(op->final_url);
    free(op);
}

static void op_persist(struct op *op);

static void
worker_answer(struct api_req *rq, int status, const struct worker *w)
{
    api_reply(rq, status, worker_body_json(w, rq->d->conf));
}

/* ?format=: 1 for the original system's objects, 0 for ours, -1 having
 * answered 400. */
static int
format_original(struct api_req *rq)
{
    const char *f = api_query(rq, "format");

    if (f == NULL || strcmp(f, "native") == 0)
        return 0;
    if (strcmp(f, "original") == 0)
        return 1;
    api_error(rq, 400, "invalid_argument",
              "format must be \"native\" (the default) or \"original\" (the "
              "original system's camelCase worker objects), not \"%s\"",
              f);
    return -1;
}

static json_t *
worker_json_as(struct api_req *rq, const struct worker *w, int original)
{
    return original ? worker_body_original_json(w)
                    : worker_body_json(w, rq->d->conf);
}

static void
history_pop(struct worker *w, size_t n)
{
    while (w->nhistory > n) {
        struct worker_version *h = &w->history[--w->nhistory];
        free(h->source);
        free(h->address);
        free(h->final_url);
    }
}

/* Undoes an operation whose record could not be written. */
static void
op_undo(struct op *op)
{
    struct worker *w = op->w;
    switch (op->kind) {
    case OP_CREATE:
        supervise_forget(op->d->sv, w);
        worker_free(w);
        op->w = NULL;
        break;
    case OP_STATUS:
        w->status = op->old_status;
        break;
    case OP_RELOAD:
    case OP_ROLLBACK:
        w->pending_code = NULL;
        w->version = op->old_version;
        history_pop(w, op->old_nhistory);
        break;
    case OP_TAGS: {
        struct worker_pair *t = w->tags;
        size_t n = w->ntags;
        w->tags = op->old_tags;
        w->ntags = op->old_ntags;
        op->old_tags = t;
        op->old_ntags = n;
        break;
    }
    case OP_DELETE:
        break;
    }
}

static void
after_apply(struct worker *w, void *arg)
{
    struct op *op = arg;
    (void)w;
    lifecycle_emit(op->d, op->w, op->event, NULL);
    worker_answer(op->rq, 200, op->w);
    op_free(op);
}

/* Answers a write the store did not make: 507 insufficient_storage for a
 * full disk (storage_error.c), else 500. */
static void
store_failed(struct api_req *rq, enum store_status st, const char *what,
             const char *message)
{
    if (st == STORE_NOSPACE)
        api_error_storage(rq, ENOSPC, NULL, "%s: %s", what, message);
    else
        api_error(rq, 500, "internal", "%s: %s", what, message);
}

static void
on_record_written(enum store_status st, uint64_t revision, const char *message,
                  void *arg)
{
    struct op *op = arg;
    struct worker *w = op->w;

    if (st != STORE_OK) {
        activity_log(w, LOG_ERR, "store: %s", message);
        op_undo(op);
        if (st == STORE_CONFLICT)
            api_error(op->rq, 409, "conflict",
                      "the worker changed meanwhile; retry");
        else
            store_failed(op->rq, st, "the store failed", message);
        op_free(op);
        return;
    }
    w->revision = revision;
    switch (op->kind) {
    case OP_CREATE:
        if (registry_add(op->d->registry, w) != 0) {
            api_error(op->rq, 409, "conflict", "name %s is taken", w->name);
            op_undo(op);
            op_free(op);
            return;
        }
        char aerr[256];
        if (flow_attach(op->d->flow, w, aerr, sizeof aerr) != 0)
            activity_log(w, LOG_ERR, "no subscription: %s", aerr);
        lifecycle_emit(op->d, w, "created", NULL);
        if (w->status == WORKER_RUNNING)
            lifecycle_emit(op->d, w, "started", NULL);
        worker_answer(op->rq, 201, w);
        op_free(op);
        return;
    case OP_STATUS:
        flow_status(op->d->flow, w);
        /* Answer once the host has followed (a stop waits for it). */
        supervise_apply(op->d->sv, w, after_apply, op);
        return;
    case OP_TAGS:
        worker_pairs_free(op->old_tags, op->old_ntags);
        api_reply(op->rq, 200,
                  json_pack("{s:o}", "tags",
                            worker_body_pairs_json(w->tags, w->ntags)));
        op_free(op);
        return;
    default:
        /* The first code of a worker created without it: stopped now. */
        if (w->state == WORKER_STATE_NO_CODE && w->nhistory > 0)
            w->state = WORKER_STATE_STOPPED;
        lifecycle_emit(op->d, w, op->event, NULL);
        worker_answer(op->rq, 200, w);
        op_free(op);
        return;
    }
}

static void
op_persist(struct op *op)
{
    char key[STORE_KEY_MAX];
    uint8_t *rec;
    size_t len;

    op->w->updated_at_ms = timestamp_now_ms();
    record_worker_key(op->w->id, key, sizeof key);
    if (record_worker_encode(op->w, &rec, &len) != 0) {
        op_undo(op);
        api_error(op->rq, 500, "internal", "out of memory");
        op_free(op);
        return;
    }
    store_put(op->d->store, key, rec, len, op->w->revision, on_record_written,
              op);
    free(rec);
}

static void
on_loaded(struct worker *w, const struct ipc_result *r, const char *error_type,
          const char *message, void *arg)
{
    struct op *op = arg;
    (void)r;
    (void)w;
    if (error_type) {
        op_undo(op);
        api_error(op->rq, 422, "load_failed", "%s: %s", error_type,
                  message ? message : "the host could not load the code");
        op_free(op);
        return;
    }
    op_persist(op);
}

static void
on_blob_written(enum store_status st, uint64_t revision, const char *message,
                void *arg)
{
    struct op *op = arg;
    (void)revision;
    op->w->pending_code = NULL; /* in the store now, or never */
    if (st != STORE_OK) {
        op_undo(op);
        store_failed(op->rq, st, "storing the code failed", message);
        op_free(op);
        return;
    }
    /* A worker that will run proves its code loads now; a stopped one
     * proves it when started. */
    if (op->w->status != WORKER_STOPPED &&
        supervise_load(op->d->sv, op->w, on_loaded, op) != 0) {
        op_undo(op);
        api_error(op->rq, 500, "internal", "cannot start a host");
        op_free(op);
        return;
    }
    if (op->w->status == WORKER_STOPPED)
        op_persist(op);
}

/* Appends a history entry for new code and makes it current.  address
 * and final_url are NULL unless the code came from a URL. */
static int
history_push(struct worker *w, const char *sha, size_t size, const char *source,
             const char *address, const char *final_url, uint32_t rollback_of)
{
    struct worker_version *h =
        realloc(w->history, (w->nhistory + 1) * sizeof *h);
    if (h == NULL)
        return -1;
    w->history = h;
    h = &w->history[w->nhistory];
    memset(h, 0, sizeof *h);
    h->version = (uint32_t)w->nhistory + 1;
    snprintf(h->sha256, sizeof h->sha256, "%s", sha);
    h->size = size;
    h->at_ms = timestamp_now_ms();
    h->source = strdup(source);
    h->address = address ? strdup(address) : NULL;
    h->final_url = final_url ? strdup(final_url) : NULL;
    h->rollback_of = rollback_of;
    if (h->source == NULL || (address && !h->address) ||
        (final_url && !h->final_url)) {
        free(h->source);
        free(h->address);
        free(h->final_url);
        return -1;
    }
    w->nhistory++;
    w->version = h->version;
    return 0;
}

/* One change at a time per worker: a second one while the first waits for
 * a host or the store would interleave their history and undo steps. */
static struct op *
op_new(struct api_req *rq, enum op_kind kind, struct worker *w)
{
    if (w && w->busy) {
        api_error(rq, 409, "conflict",
                  "another change to worker %s is in progress; retry", w->name);
        return NULL;
    }
    struct op *op = calloc(1, sizeof *op);
    if (op == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        return NULL;
    }
    LIST_INSERT_HEAD(&ops, op, link);
    op->kind = kind;
    op->rq = rq;
    op->d = rq->d;
    op->w = w;
    if (w) {
        w->busy = true;
        op->old_status = w->status;
        op->old_version = w->version;
        op->old_nhistory = w->nhistory;
        snprintf(rq->worker, sizeof rq->worker, "%s", w->id);
    }
    return op;
}

/* Stores op->code as a blob, appends it to the history, then loads and
 * persists (on_blob_written). */
static void
op_store_code(struct op *op)
{
    char sha[STORE_SHA256_HEX];
    store_sha256_hex(op->code, op->len, sha);
    if (history_push(op->w, sha, op->len, op->url ? op->url : "content",
                     op->address, op->final_url, 0) != 0) {
        op_undo(op);
        api_error(op->rq, 500, "internal", "out of memory");
        op_free(op);
        return;
    }
    /* The new version is current from here on: a host reloading it before
     * the blob is written (a busy one draining, as the Load waits for that)
     * takes the bytes from memory, as a create's does. */
    op->w->pending_code = op->code;
    op->w->pending_len = op->len;
    if (store_blob_put(op->d->store, op->code, op->len, sha, on_blob_written,
                       op) != 0) {
        op_undo(op);
        api_error(op->rq, 500, "internal", "cannot store the code");
        op_free(op);
    }
}

/* ---- routes ---------------------------------------------------------- */

static const struct engines_entry *
engine_for(struct api_req *rq, const char *mime)
{
    const struct engines_entry *e = engines_find_mime(rq->d->engines, mime);
    if (e == NULL) {
        char known[512] = "";
        const struct engines *list = rq->d->engines;
        for (size_t i = 0; i < list->n; i++)
            for (size_t k = 0; k < list->v[i].nmime_types; k++)
                snprintf(known + strlen(known), sizeof known - strlen(known),
                         "%s%s", *known ? ", " : "", list->v[i].mime_types[k]);
        api_error(rq, 400, "unknown_mime_type",
                  "no engine for mime_type %s (known: %s)", mime, known);
        return NULL;
    }
    if (!e->available) {
        api_error(rq, 503, "engine_unavailable", "engine %s: %s", e->name,
                  e->reason);
        return NULL;
    }
    return e;
}

/* One step of a create ended: the last one answers or persists. */
static void
create_step_done(struct op *op, int status, const char *code,
                 const char *message)
{
    if (status && op->fail_status == 0) {
        op->fail_status = status;
        op->fail_code = code;
        snprintf(op->fail_message, sizeof op->fail_message, "%s", message);
    }
    if (--op->waiting > 0)
        return;
    op->w->pending_code = NULL;
    if (op->fail_status) {
        op_undo(op);
        if (op->fail_status == 507)
            api_error_storage(op->rq, ENOSPC, NULL, "%s", op->fail_message);
        else
            api_error(op->rq, op->fail_status, op->fail_code, "%s",
                      op->fail_message);
        op_free(op);
        return;
    }
    op_persist(op);
}

static void
on_create_blob(enum store_status st, uint64_t revision, const char *message,
               void *arg)
{
    char msg[512];
    (void)revision;
    if (st == STORE_OK) {
        create_step_done(arg, 0, NULL, "");
        return;
    }
    snprintf(msg, sizeof msg, "storing the code failed: %s", message);
    if (st == STORE_NOSPACE)
        create_step_done(arg, 507, "insufficient_storage", msg);
    else
        create_step_done(arg, 500, "internal", msg);
}

static void
on_create_loaded(struct worker *w, const struct ipc_result *r,
                 const char *error_type, const char *message, void *arg)
{
    char msg[512];
    (void)w;
    (void)r;
    if (error_type == NULL) {
        create_step_done(arg, 0, NULL, "");
        return;
    }
    snprintf(msg, sizeof msg, "%s: %s", error_type,
             message ? message : "the host could not load the code");
    create_step_done(arg, 422, "load_failed", msg);
}

/* A new worker's code is stored and, when it is to run, loaded by a host
 * at the same time: the host gets the bytes from memory (pending_code), so
 * the spawn does not wait for the disk.  The record is written once both
 * succeeded; a failure of either undoes the whole create. */
static void
create_store_and_load(struct op *op)
{
    char sha[STORE_SHA256_HEX];
    struct worker *w = op->w;

    store_sha256_hex(op->code, op->len, sha);
    if (history_push(w, sha, op->len, op->url ? op->url : "content",
                     op->address, op->final_url, 0) != 0) {
        op_undo(op);
        api_error(op->rq, 500, "internal", "out of memory");
        op_free(op);
        return;
    }
    /* Decided before either step: a failure may free op and w. */
    bool load = w->status != WORKER_STOPPED;
    w->pending_code = op->code;
    w->pending_len = op->len;
    op->waiting = load ? 2 : 1;
    if (store_blob_put(op->d->store, op->code, op->len, sha, on_create_blob,
                       op) != 0)
        create_step_done(op, 500, "internal", "cannot store the code");
    if (load && supervise_load(op->d->sv, w, on_create_loaded, op) != 0)
        create_step_done(op, 500, "internal", "cannot start a host");
}

/* Answers a fetch that did not give the code, by its kind of failure. */
static void
fetch_answer_error(struct api_req *rq, enum fetch_status st, const char *why)
{
    switch (st) {
    case FETCH_INVALID:
        api_error(rq, 400, "invalid_argument", "code.url: %s", why);
        break;
    case FETCH_REFUSED:
        api_error(rq, 403, "security_rejected", "code.url: %s", why);
        break;
    case FETCH_BUSY:
        api_error(rq, 503, "backlog_full", "code.url: %s", why);
        break;
    case FETCH_CANCELLED:
        api_error(rq, 503, "recovering", "code.url: %s", why);
        break;
    case FETCH_OK:
    case FETCH_FAILED:
        api_error(rq, 422, "load_failed", "code.url: %s", why);
        break;
    }
}

/* Refuses op's code when it would take its tenant over max_code_bytes (a
 * reload gives back the code in use): answered, op undone and freed. */
static bool
code_refused(struct op *op)
{
    const struct worker *w = op->w;
    const struct worker_version *v =
        op->kind == OP_CREATE ? NULL : worker_version_find(w, w->version);

    if (!api_quota_refuse_size(op->rq, w->tenant, QUOTA_MAX_CODE_BYTES, op->len,
                               v ? v->size : 0)) {
        if (op->kind == OP_CREATE && op->reserved_tenant) {
            op->reserved[QUOTA_MAX_CODE_BYTES] = (int64_t)op->len;
            quota_reserve(op->reserved_tenant, QUOTA_MAX_CODE_BYTES,
                          (int64_t)op->len);
        }
        return false;
    }
    op_undo(op);
    op_free(op);
    return true;
}

static void
on_fetched(struct fetch_result *r, void *arg)
{
    struct op *op = arg;

    if (r->status != FETCH_OK) {
        op_undo(op);
        fetch_answer_error(op->rq, r->status, r->message);
        op_free(op);
        return;
    }
    op->code = r->body;
    op->len = r->len;
    r->body = NULL;
    op->address = strdup(r->address);
    op->final_url = r->final_url[0] ? strdup(r->final_url) : NULL;
    if (op->address == NULL || (r->final_url[0] && op->final_url == NULL)) {
        op_undo(op);
        api_error(op->rq, 500, "internal", "out of memory");
        op_free(op);
        return;
    }
    if (code_refused(op))
        return;
    if (op->kind == OP_CREATE)
        create_store_and_load(op);
    else
        op_store_code(op);
}

/* Takes the code of a create or reload: at once from the request, or
 * once fetched from its URL; then stores, loads and persists it. */
static void
op_take_code(struct op *op, struct worker_body_code *cr)
{
    char why[600];

    if (cr->url == NULL) {
        op->code = cr->code;
        op->len = cr->len;
        cr->code = NULL;
        if (code_refused(op))
            return;
        if (op->kind == OP_CREATE)
            create_store_and_load(op);
        else
            op_store_code(op);
        return;
    }
    op->url = strdup(cr->url);
    if (op->url == NULL) {
        op_undo(op);
        api_error(op->rq, 500, "internal", "out of memory");
        op_free(op);
        return;
    }
    enum fetch_status st =
        fetch_start(op->d->fetcher, cr->url, cr->sha256[0] ? cr->sha256 : NULL,
                    on_fetched, op, why, sizeof why);
    if (st != FETCH_OK) {
        op_undo(op);
        fetch_answer_error(op->rq, st, why);
        op_free(op);
    }
}

/* Refuses a new worker w of tenant that its quotas of workers, running
 * workers or memory cannot hold (answered): true. */
static bool
sizes_refused(struct api_req *rq, const char *tenant, const struct worker *w,
              json_t *start)
{
    if (w->limits.memory_mb == 0 &&
        quota_limit(tenant, QUOTA_MAX_MEMORY_MB) != 0) {
        quota_refusal_note(tenant, QUOTA_MAX_MEMORY_MB);
        api_error_extra(
            rq, 403, "quota_exceeded",
            json_pack("{s:s, s:I}", "quota", "max_memory_mb", "limit",
                      (json_int_t)quota_limit(tenant, QUOTA_MAX_MEMORY_MB)),
            "tenant %s has the quota max_memory_mb (limit %llu MB): its "
            "workers must declare limits.memory_mb",
            tenant,
            (unsigned long long)quota_limit(tenant, QUOTA_MAX_MEMORY_MB));
        return true;
    }
    return api_quota_refuse_size(rq, tenant, QUOTA_MAX_WORKERS, 1, 0) ||
           ((!start || json_is_true(start)) &&
            api_quota_refuse_size(rq, tenant, QUOTA_MAX_RUNNING_HOSTS, 1, 0)) ||
           api_quota_refuse_size(rq, tenant, QUOTA_MAX_MEMORY_MB,
                                 w->limits.memory_mb, 0);
}

static void
create(struct api_req *rq)
{
    json_t *body = api_body_object(rq);
    struct worker *w = NULL;
    struct worker_body_create b;
    struct worker_body_code code = { 0 };
    const struct engines_entry *e;

    if (body == NULL)
        return;
    if (worker_body_create_take(rq, body, &b) != 0)
        goto out;
    b.tenant = api_scope_tenant(rq, b.tenant);
    if (api_scope_create_refuse(rq, b.tenant))
        goto out;
    if ((e = engine_for(rq, b.mime)) == NULL)
        goto out;
    bool in_process = b.isolation && strcmp(b.isolation, "in-process") == 0;
    if (in_process) {
        if (!e->in_process) {
            api_error(rq, 400, "invalid_argument",
                      "isolation in-process: engine %s runs only in a host "
                      "process (its descriptor has no in_process = yes)",
                      e->name);
            goto out;
        }
        if (!rq->d->conf->allow_in_process_native) {
            api_error(rq, 403, "security_rejected",
                      "isolation in-process is disabled on this daemon: it "
                      "takes allow_in_process_native = true in "
                      "workmanager.conf (a crash of such a worker ends the "
                      "daemon)");
            goto out;
        }
    }

    w = calloc(1, sizeof *w);
    if (w == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        goto out;
    }
    /* The original's older flow creates first and loads the code later
     * (PUT .../code): such a worker is stopped, at version 0, until then. */
    json_t *given = json_object_get(body, "code");
    bool no_code = given == NULL || json_is_null(given);
    if (worker_body_settings_take(rq, body, &b, w) ||
        (!no_code && worker_body_code_take(rq, body, &code)))
        goto out;
    if (no_code && b.start && json_is_true(b.start)) {
        api_error(rq, 400, "invalid_argument",
                  "start: true needs code: send code (codeSource) with the "
                  "create, or create without start and load the code with "
                  "PUT /v1/workers/{id}/code, then start the worker");
        goto out;
    }
    /* A group member's event must end (its deadline) before its lock may
     * be stolen as stale (DESIGN §6). */
    if (b.group && w->limits.timeout_ms >= rq->d->conf->lock_max_age_ms) {
        api_error(rq, 400, "invalid_argument",
                  "limits.timeout_ms %u must be below lock_max_age_ms "
                  "(%llu) for a worker in a group",
                  (unsigned)w->limits.timeout_ms,
                  (unsigned long long)rq->d->conf->lock_max_age_ms);
        goto out;
    }

    if (sizes_refused(rq, b.tenant ? b.tenant : "default", w, b.start))
        goto out;

    uuid_new(w->id);
    w->name = strdup(b.name ? b.name : w->id);
    w->tenant = strdup(b.tenant ? b.tenant : "default");
    w->mime_type = strdup(b.mime);
    w->topic = strdup(b.topic);
    w->group = b.group ? strdup(b.group) : NULL;
    w->status = no_code || (b.start && !json_is_true(b.start)) ? WORKER_STOPPED
                                                               : WORKER_RUNNING;
    w->in_process = in_process;
    w->engine = e;
    w->created_at_ms = timestamp_now_ms();
    w->state = no_code ? WORKER_STATE_NO_CODE : WORKER_STATE_IDLE;
    if (!w->name || !w->tenant || !w->mime_type || !w->topic ||
        (b.group && !w->group)) {
        api_error(rq, 500, "internal", "out of memory");
        goto out;
    }

    struct op *op = op_new(rq, OP_CREATE, w);
    if (op == NULL)
        goto out;
    if ((op->reserved_tenant = strdup(w->tenant)) != NULL) {
        op->reserved[QUOTA_MAX_WORKERS] = 1;
        op->reserved[QUOTA_MAX_RUNNING_HOSTS] = w->status == WORKER_RUNNING;
        op->reserved[QUOTA_MAX_MEMORY_MB] = w->limits.memory_mb;
        op_reserve(op, 1);
    }
    w = NULL;
    if (no_code)
        op_persist(op);
    else
        op_take_code(op, &code);
out:
    free(code.code);
    worker_free(w);
    json_decref(body);
}

static void
list(struct api_req *rq)
{
    int original = format_original(rq);
    if (original < 0)
        return;
    json_t *arr = json_array();
    struct registry *r = rq->d->registry;
    if (api_scope_refuse(rq, API_READ, NULL, "worker"))
        return;
    for (size_t i = 0; i < registry_count(r); i++) {
        const struct worker *w = registry_at(r, i);
        if (api_scope_sees(rq, w->tenant))
            json_array_append_new(arr, worker_json_as(rq, w, original));
    }
    api_reply(rq, 200, json_pack("{s:o}", "workers", arr));
}

void
api_workers_refuse_no_code(struct api_req *rq, const struct worker *w)
{
    api_error(rq, 409, "conflict",
              "worker %s has no code yet (state no_code): load it with PUT "
              "/v1/workers/%s/code (an application/octet-stream package or "
              "{\"code\": {\"content\": \"<base64>\"}}), then start it",
              w->name, w->id);
}

static void
change_status(struct api_req *rq, struct worker *w, enum worker_status to,
              const char *event)
{
    if (api_members_none(rq, rq->seg[3]) != 0)
        return;
    if (to != WORKER_STOPPED && w->nhistory == 0) {
        api_workers_refuse_no_code(rq, w);
        return;
    }
    if (to == WORKER_SUSPENDED && w->status == WORKER_STOPPED) {
        api_error(rq, 409, "conflict", "worker %s is stopped: start it",
                  w->name);
        return;
    }
    if (strcmp(event, "resumed") == 0 && w->status != WORKER_SUSPENDED) {
        api_error(rq, 409, "conflict", "worker %s is %s, not suspended",
                  w->name, worker_status_name(w->status));
        return;
    }
    if (to != WORKER_STOPPED && !w->engine->available) {
        api_error(rq, 503, "engine_unavailable", "engine %s: %s",
                  w->engine->name, w->engine->reason);
        return;
    }
    if (w->status == to && w->state != WORKER_STATE_FAILED) {
        worker_answer(rq, 200, w); /* idempotent */
        return;
    }
    /* A start beyond the quota is refused, not queued: a start that
     * waited would leave the client unsure whether it happened. */
    if (to == WORKER_RUNNING && w->status != WORKER_RUNNING &&
        api_quota_refuse_size(rq, w->tenant, QUOTA_MAX_RUNNING_HOSTS, 1, 0))
        return;
    struct op *op = op_new(rq, OP_STATUS, w);
    if (op == NULL)
        return;
    op->event = event;
    w->status = to;
    op_persist(op);
}

/* The original's older reload: the package itself as the body. */
static int
raw_code_take(struct api_req *rq, struct worker_body_code *code)
{
    size_t len;
    const unsigned char *raw = api_body_raw(rq, &len);

    memset(code, 0, sizeof *code);
    if (len == 0) {
        api_error(rq, 400, "invalid_argument",
                  "the body is empty: an application/octet-stream reload "
                  "sends the package itself");
        return -1;
    }
    if ((code->code = malloc(len)) == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        return -1;
    }
    memcpy(code->code, raw, len);
    code->len = len;
    return 0;
}

static void
reload(struct api_req *rq, struct worker *w)
{
    const char *ct = api_header(rq, "Content-Type");
    bool raw = ct && strncasecmp(ct, "application/octet-stream", 24) == 0;
    json_t *body = raw ? NULL : api_body_object(rq);
    struct worker_body_code code;

    if (body == NULL && !raw)
        return;
    if ((raw ? raw_code_take(rq, &code)
             : worker_body_reload_take(rq, body, &code)) == 0) {
        struct op *op = op_new(rq, OP_RELOAD, w);
        if (op) {
            op->event = "reloaded";
            op_take_code(op, &code);
        }
    }
    free(code.code);
    json_decref(body);
}

static const struct api_object rollback_object = {
    .what = "a rollback",
    .members =
        (const struct api_member[]){ { "version", NULL }, { NULL, NULL } },
};

static void
rollback(struct api_req *rq, struct worker *w)
{
    json_t *body = api_body_object(rq);
    uint32_t to = 0;

    if (body == NULL)
        return;
    if (api_members_check(rq, body, &rollback_object) == 0 &&
        api_member_uint(rq, body, "version", "", 1, UINT32_MAX, &to) == 0) {
        const struct worker_version *v = worker_version_find(w, to);
        if (w->nhistory == 0) {
            api_workers_refuse_no_code(rq, w);
        } else if (to == 0 || v == NULL) {
            api_error(rq, 400, "invalid_argument",
                      "version must name an existing version (1 to %zu)",
                      w->nhistory);
        } else {
            struct op *op = op_new(rq, OP_ROLLBACK, w);
            char sha[STORE_SHA256_HEX];
            /* Copies: history_push may move the history v points into. */
            char *source = strdup(v->source);
            char *address = v->address ? strdup(v->address) : NULL;
            char *final_url = v->final_url ? strdup(v->final_url) : NULL;
            uint64_t size = v->size;
            snprintf(sha, sizeof sha, "%s", v->sha256);
            if (op && source && (address || !v->address) &&
                (final_url || !v->final_url) &&
                history_push(w, sha, size, source, address, final_url, to) ==
                    0) {
                op->event = "rolledback";
                if (w->status == WORKER_STOPPED) {
                    op_persist(op);
                } else if (supervise_load(op->d->sv, w, on_loaded, op)) {
                    op_undo(op);
                    api_error(rq, 500, "internal", "cannot start a host");
                    op_free(op);
                }
            } else if (op) {
                op_undo(op);
                api_error(rq, 500, "internal", "out of memory");
                op_free(op);
            }
            free(source);
            free(address);
            free(final_url);
        }
    }
    json_decref(body);
}

static void
history(struct api_req *rq, struct worker *w)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < w->nhistory; i++) {
        const struct worker_version *v = &w->history[i];
        json_t *j = json_pack("{s:I, s:s, s:I, s:o, s:s}", "version",
                              (json_int_t)v->version, "sha256", v->sha256,
                              "size", (json_int_t)v->size, "created_at",
                              api_json_time(v->at_ms), "source", v->source);
        if (v->rollback_of)
            json_object_set_new(j, "rollback_of", json_integer(v->rollback_of));
        if (v->address)
            json_object_set_new(j, "address", json_string(v->address));
        if (v->final_url)
            json_object_set_new(j, "final_url", json_string(v->final_url));
        json_array_append_new(arr, j);
    }
    api_reply(rq, 200,
              json_pack("{s:s, s:I, s:o}", "worker_id", w->id, "current",
                        (json_int_t)w->version, "versions", arr));
}

/* The tags are the client's map: only the body's members are checked. */
static const struct api_object tags_object = {
    .what = "a tags change",
    .members = (const struct api_member[]){ { "tags", NULL }, { NULL, NULL } },
};

static void
put_tags(struct api_req *rq, struct worker *w)
{
    json_t *body = api_body_object(rq);
    struct worker_pair *tags = NULL;
    size_t n = 0;

    if (body == NULL)
        return;
    json_t *t = json_object_get(body, "tags");
    bool known = api_members_check(rq, body, &tags_object) == 0;
    if (known && !json_is_object(t)) {
        api_error(rq, 400, "invalid_argument",
                  "the body must be {\"tags\": {...}}");
    } else if (known &&
               worker_body_pairs_take(rq, t, "tags", false, &tags, &n) == 0) {
        struct op *op = op_new(rq, OP_TAGS, w);
        if (op) {
            op->old_tags = w->tags;
            op->old_ntags = w->ntags;
            w->tags = tags;
            w->ntags = n;
            tags = NULL;
            op_persist(op);
        }
    }
    worker_pairs_free(tags, n);
    json_decref(body);
}

static void
on_record_deleted(enum store_status st, uint64_t revision, const char *message,
                  void *arg)
{
    struct op *op = arg;
    (void)revision;
    if (st != STORE_OK && st != STORE_NOT_FOUND) {
        char aerr[256];
        if (flow_attach(op->d->flow, op->w, aerr, sizeof aerr) != 0)
            activity_log(op->w, LOG_ERR, "no subscription: %s", aerr);
        store_failed(op->rq, st, "the store failed", message);
        op_free(op);
        return;
    }
    gateway_forget(op->d, op->w);
    registry_remove(op->d->registry, op->w);
    lifecycle_emit(op->d, op->w, "deleted", NULL);
    worker_free(op->w);
    op->w = NULL;
    api_reply(op->rq, 204, NULL);
    op_free(op);
}

static void
remove_worker(struct api_req *rq, struct worker *w)
{
    char key[STORE_KEY_MAX];
    struct op *op = op_new(rq, OP_DELETE, w);
    if (op == NULL)
        return;
    flow_detach(rq->d->flow, w);
    supervise_forget(rq->d->sv, w);
    record_worker_key(w->id, key, sizeof key);
    store_delete(rq->d->store, key, STORE_ANY_REVISION, on_record_deleted, op);
}

/* ---- routing --------------------------------------------------------- */

static bool
is(const struct api_req *rq, const char *method)
{
    return strcmp(rq->method, method) == 0;
}

/* What a request on one worker does (principal.h): reading it (itself,
 * its history, tags, logs), invoking it, or managing it. */
static enum api_action
action_of(const struct api_req *rq, const char *action)
{
    if (is(rq, "GET") || is(rq, "HEAD"))
        return API_READ;
    if (action && strcmp(action, "invoke") == 0)
        return API_PUBLISH;
    return API_MANAGE;
}

void
api_workers_route(struct api_req *rq)
{
    /* /v1/workers[/{id}[/{action}]] */
    if (rq->nseg == 2) {
        if (is(rq, "GET"))
            list(rq);
        else if (is(rq, "POST") && !api_refuse_while_recovering(rq))
            create(rq);
        else if (!is(rq, "POST"))
            api_error(rq, 405, "invalid_argument",
                      "%s is not allowed on /v1/workers", rq->method);
        return;
    }
    if (rq->nseg > 4) {
        api_error(rq, 404, "not_found", "no route %s", rq->path);
        return;
    }
    /* Before the lookup: the worker may not be recovered yet. */
    if (!is(rq, "GET") && !is(rq, "HEAD") && api_refuse_while_recovering(rq))
        return;
    struct worker *w = registry_lookup(rq->d->registry, rq->seg[2]);
    const char *action = rq->nseg == 4 ? rq->seg[3] : NULL;
    char what[200];
    snprintf(what, sizeof what, "worker %s", rq->seg[2]);
    if (w == NULL) {
        api_error(rq, 404, "not_found", "no %s", what);
        return;
    }
    if (api_scope_refuse(rq, action_of(rq, action), w->tenant, what))
        return;
    snprintf(rq->worker, sizeof rq->worker, "%s", w->id);

    if (action == NULL) {
        int original;
        if (is(rq, "GET") && (original = format_original(rq)) >= 0)
            api_reply(rq, 200, worker_json_as(rq, w, original));
        else if (is(rq, "GET"))
            return;
        else if (is(rq, "DELETE"))
            remove_worker(rq, w);
        else
            api_error(rq, 405, "invalid_argument",
                      "%s is not allowed on a worker", rq->method);
        return;
    }
    if (is(rq, "POST") && strcmp(action, "start") == 0)
        change_status(rq, w, WORKER_RUNNING, "started");
    else if (is(rq, "POST") && strcmp(action, "stop") == 0)
        change_status(rq, w, WORKER_STOPPED, "stopped");
    else if (is(rq, "POST") && strcmp(action, "suspend") == 0)
        change_status(rq, w, WORKER_SUSPENDED, "suspended");
    else if (is(rq, "POST") && strcmp(action, "resume") == 0)
        change_status(rq, w, WORKER_RUNNING, "resumed");
    else if (is(rq, "POST") && strcmp(action, "rollback") == 0)
        rollback(rq, w);
    else if (is(rq, "POST") && strcmp(action, "invoke") == 0)
        api_invoke_route(rq, w);
    else if ((is(rq, "PUT") || is(rq, "POST")) && strcmp(action, "code") == 0)
        reload(rq, w);
    else if (is(rq, "GET") && strcmp(action, "logs") == 0)
        api_logs_route(rq, w);
    else if (is(rq, "GET") && strcmp(action, "history") == 0)
        history(rq, w);
    else if (is(rq, "GET") && strcmp(action, "tags") == 0)
        api_reply(rq, 200,
                  json_pack("{s:o}", "tags",
                            worker_body_pairs_json(w->tags, w->ntags)));
    else if (is(rq, "PUT") && strcmp(action, "tags") == 0)
        put_tags(rq, w);
    else
        api_error(rq, 404, "not_found", "no route %s %s", rq->method, rq->path);
}
