/*
 * gateway.c — the gateway services (see gateway.h).
 */
#include "config.h"

#include "master/broker/gateway.h"
#include "master/broker/state_sizes.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ipc/cloudevent.h"
#include "lib/name.h"
#include "lib/timestamp.h"
#include "lib/uuid.h"
#include "master/api/events.h"
#include "master/broker/admit.h"
#include "master/broker/flow.h"
#include "master/core/daemon.h"
#include "master/core/log.h"
#include "master/store/store.h"
#include "master/supervise/supervise.h"
#include "master/workers/activity.h"
#include "master/workers/quota.h"
#include "master/workers/registry.h"
#include "master/workers/worker.h"

#define STATE_PREFIX "workmanager/state/"
#define STATE_KEY_MAX 128
#define STATE_VALUE_MAX (1u << 20)

/* One call waiting for a write. */
struct gwop {
    struct daemon *d;
    struct supervise_call *c;
    char worker[UUID_SIZE];
    char topic[256];
    char key[STORE_KEY_MAX];
    char name[STATE_KEY_MAX + 1];
    uint8_t *value; /* put: the value's text */
    size_t len;
    bool is_delete;
    struct ipc_fb_builder event; /* publish */
    /* state: the tenant and what the write adds to its state usage,
     * counted when admitted, given back if the write fails */
    char *tenant;
    int64_t dkeys, dbytes;
    /* state: the key's size before this write (state_sizes.h), restored
     * if the write fails */
    bool had_old;
    size_t old_len;
};

static void
reply_json(struct supervise_call *c, int32_t status, json_t *body)
{
    size_t len = 0;
    char *text = body ? events_json_dumps(body, &len) : NULL;

    supervise_call_reply(c, status, (const uint8_t *)text, len, NULL);
    free(text);
    json_decref(body);
}

static void reply_error(struct supervise_call *c, int32_t status,
                        const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
reply_error(struct supervise_call *c, int32_t status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    supervise_call_reply(c, status, NULL, 0, msg);
}

static void
gwop_free(struct gwop *op)
{
    free(op->value);
    free(op->tenant);
    ipc_fb_builder_free(&op->event);
    free(op);
}

/* A pending call's record; replies 500 itself and returns NULL when out
 * of memory. */
static struct gwop *
gwop_new(struct daemon *d, struct supervise_call *c)
{
    struct gwop *op = calloc(1, sizeof *op);

    if (op == NULL) {
        reply_error(c, 500, "out of memory");
        return NULL;
    }
    ipc_fb_builder_init(&op->event);
    op->d = d;
    op->c = c;
    return op;
}

static bool
valid_state_key(const char *k)
{
    return name_word_valid(k, STATE_KEY_MAX) && strcmp(k, ".") != 0 &&
           strcmp(k, "..") != 0;
}

/* ---- workmanager.state ------------------------------------------------ */

/* op's write did not happen: its tenant's state usage is given back. */
static void
state_undo(struct gwop *op)
{
    quota_state_add(op->tenant, -op->dkeys, -op->dbytes);
    if (!op->had_old)
        state_sizes_remove(op->key);
    else if (state_sizes_put(op->key, op->old_len) != 0)
        log_warning("state quotas: out of memory restoring the size of %s",
                    op->key);
}

static void
on_state_written(enum store_status st, uint64_t revision, const char *message,
                 void *arg)
{
    struct gwop *op = arg;

    (void)revision;
    if (st != STORE_OK)
        state_undo(op);
    if (st == STORE_OK)
        reply_json(op->c, 200, json_pack("{s:s}", "key", op->name));
    else if (st == STORE_NOT_FOUND)
        reply_error(op->c, 404, "no state key %s", op->name);
    else
        reply_error(op->c, 500, "the store failed: %s", message);
    gwop_free(op);
}

static void
on_state_fenced(int rc, const char *message, void *arg)
{
    struct gwop *op = arg;

    if (rc != 0) {
        state_undo(op);
        reply_error(op->c, 409, "refused: %s", message);
        gwop_free(op);
        return;
    }
    int r = op->is_delete
                ? store_delete(op->d->store, op->key, STORE_ANY_REVISION,
                               on_state_written, op)
                : store_put(op->d->store, op->key, op->value, op->len,
                            STORE_ANY_REVISION, on_state_written, op);
    if (r != 0) {
        state_undo(op);
        reply_error(op->c, 400, "key %s cannot be stored", op->name);
        gwop_free(op);
    }
}

/* Whether op's write (a put of op->len bytes, or a delete) fits w's
 * tenant's state quotas, given what key holds now (state_sizes.h: no
 * store read): if so, counts it and the key's new size (state_undo()
 * gives both back) and returns 0; else answers 403 quota_exceeded (500
 * out of memory) and returns -1. */
static int
state_admit(struct worker *w, struct gwop *op)
{
    size_t oldlen = 0;
    char why[512];
    enum quota_kind k;

    bool existed = state_sizes_get(op->key, &oldlen);
    if (!existed)
        oldlen = 0;
    op->had_old = existed;
    op->old_len = oldlen;
    if ((op->tenant = strdup(w->tenant)) == NULL) {
        reply_error(op->c, 500, "out of memory");
        return -1;
    }
    if (op->is_delete) {
        op->dkeys = existed ? -1 : 0;
        op->dbytes = -(int64_t)oldlen;
    } else if (quota_state_admit(op->d->registry, w->tenant, existed ? 0 : 1,
                                 op->len, oldlen, &k, why, sizeof why) != 0) {
        reply_error(op->c, 403, "quota_exceeded: %s", why);
        return -1;
    } else {
        op->dkeys = existed ? 0 : 1;
        op->dbytes = (int64_t)op->len - (int64_t)oldlen;
    }
    if (op->is_delete) {
        state_sizes_remove(op->key);
    } else if (state_sizes_put(op->key, op->len) != 0) {
        reply_error(op->c, 500, "out of memory");
        return -1;
    }
    quota_state_add(op->tenant, op->dkeys, op->dbytes);
    return 0;
}

static void
state_call(struct daemon *d, struct worker *w, const char *method, json_t *req,
           struct supervise_call *c)
{
    const char *name = json_string_value(json_object_get(req, "key"));
    char key[STORE_KEY_MAX], err[256];

    if (name == NULL) {
        reply_error(c, 400,
                    "workmanager.state.%s: \"key\" (a string) is "
                    "required",
                    method);
        return;
    }
    if (!valid_state_key(name)) {
        reply_error(c, 400,
                    "workmanager.state: key \"%.*s\" is not "
                    "[A-Za-z0-9._-]{1,%d}",
                    64, name, STATE_KEY_MAX);
        return;
    }
    snprintf(key, sizeof key, STATE_PREFIX "%s/%s", w->id, name);
    if (strcmp(method, "get") == 0) {
        uint8_t *value = NULL;
        size_t len = 0;
        uint64_t rev;
        enum store_status st =
            store_get(d->store, key, &value, &len, &rev, err, sizeof err);
        if (st == STORE_NOT_FOUND) {
            reply_error(c, 404, "no state key %s", name);
        } else if (st != STORE_OK) {
            reply_error(c, 500, "the store failed: %s", err);
        } else {
            json_error_t je;
            json_t *v = json_loadb((const char *)value, len,
                                   JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
            if (v == NULL)
                reply_error(c, 500, "state key %s holds no JSON", name);
            else
                reply_json(c, 200,
                           json_pack("{s:s, s:o}", "key", name, "value", v));
        }
        free(value);
        return;
    }
    bool del = strcmp(method, "delete") == 0;
    if (!del && strcmp(method, "put") != 0) {
        reply_error(c, 404,
                    "workmanager.state has no method \"%s\" (get, "
                    "put, delete)",
                    method);
        return;
    }
    struct gwop *op = gwop_new(d, c);
    if (op == NULL)
        return;
    op->is_delete = del;
    snprintf(op->key, sizeof op->key, "%s", key);
    snprintf(op->name, sizeof op->name, "%s", name);
    if (!del) {
        json_t *v = json_object_get(req, "value");
        if (v == NULL) {
            reply_error(c, 400,
                        "workmanager.state.put: \"value\" is "
                        "required");
            gwop_free(op);
            return;
        }
        op->value = (uint8_t *)events_json_dumps(v, &op->len);
        if (op->value == NULL || op->len > STATE_VALUE_MAX) {
            reply_error(c, 400,
                        "workmanager.state.put: the value of %s is "
                        "over %u bytes",
                        name, STATE_VALUE_MAX);
            gwop_free(op);
            return;
        }
    }
    if (state_admit(w, op) != 0) {
        gwop_free(op);
        return;
    }
    flow_note_write(d->flow, w, on_state_fenced, op);
}

/* ---- workmanager.publish --------------------------------------------- */

/* A publish the journal did not store, answered as the publish route
 * answers (storage_error.c): 507 for a full disk, else 503.  EIO stands
 * for "the journal cannot write now", whose cause broker_health() has. */
static void
reply_unstored(struct gwop *op, int error)
{
    struct broker_health h;

    broker_health(op->d->broker, &h);
    if (error == EIO && !h.writable)
        error = h.error;
    if (error == ENOSPC || error == EDQUOT)
        reply_error(op->c, 507,
                    "insufficient_storage: the event was not stored: %s; "
                    "the daemon goes on once it can write again",
                    strerror(error));
    else
        reply_error(op->c, 503,
                    "storage_unavailable: the event was not stored: %s",
                    strerror(error));
}

static void
on_published(int error, void *arg)
{
    struct gwop *op = arg;
    struct ipc_cloudevent ce;

    if (error) {
        reply_unstored(op, error);
    } else {
        /* Built by events_from_json(): decoded, not verified again. */
        ipc_cloudevent_decode_trusted(op->event.buf, &ce);
        reply_json(op->c, 200,
                   json_pack("{s:s%}", "id", ce.id.ptr, (size_t)ce.id.len));
    }
    gwop_free(op);
}

static void
on_publish_fenced(int rc, const char *message, void *arg)
{
    struct gwop *op = arg;
    struct worker *w;
    char why[512], who[300];

    if (rc != 0) {
        reply_error(op->c, 409, "refused: %s", message);
        gwop_free(op);
        return;
    }
    w = registry_lookup(op->d->registry, op->worker);
    if (w == NULL) {
        reply_error(op->c, 404, "the worker was deleted");
        gwop_free(op);
        return;
    }
    if (admit_publish(op->d, w->tenant, op->topic, 1, why, sizeof why, who,
                      sizeof who) != 0) {
        reply_error(op->c, 503, "subscriber_full: %s", why);
        gwop_free(op);
        return;
    }
    uint64_t retry_s;
    enum quota_kind k;
    if (quota_backlog_admit(op->d->registry, w->tenant, 1, op->event.len, &k,
                            why, sizeof why) != 0) {
        reply_error(op->c, 403, "quota_exceeded: %s", why);
        gwop_free(op);
        return;
    }
    if (quota_rate_take(w->tenant, 1, op->event.len, timestamp_now_ms(),
                        &retry_s, &k, why, sizeof why) != 0) {
        reply_error(op->c, 429, "rate_limited: %s", why);
        gwop_free(op);
        return;
    }
    if (flow_publish(op->d->flow, w->tenant, op->topic, op->event.buf,
                     op->event.len, on_published, op) != 0) {
        int e = errno;
        if (e == ENOSPC) {
            admit_note_refused(ADMIT_JOURNAL_FULL);
            reply_error(op->c, 503,
                        "the journal is full (journal_max_bytes): the event "
                        "was not accepted");
        } else if (e == EIO) {
            reply_unstored(op, e);
        } else {
            reply_error(op->c, 500, "the event was not accepted: %s",
                        strerror(e));
        }
        gwop_free(op);
        return;
    }
    w->counters.published++;
}

static void
publish_call(struct daemon *d, struct worker *w, const char *method,
             json_t *req, struct supervise_call *c)
{
    const char *topic = json_string_value(json_object_get(req, "topic"));
    json_t *event = json_object_get(req, "event");
    char err[256];

    if (strcmp(method, "publish") != 0) {
        reply_error(c, 404,
                    "workmanager.publish has no method \"%s\" "
                    "(publish)",
                    method);
        return;
    }
    if (topic == NULL || *topic == '\0' || strlen(topic) > 255 ||
        !json_is_object(event)) {
        reply_error(c, 400,
                    "workmanager.publish: \"topic\" (a string) and "
                    "\"event\" (a structured CloudEvent) are "
                    "required");
        return;
    }
    if (flow_topic_reserved(topic)) {
        reply_error(c, 403, "topic %s is reserved for the daemon", topic);
        return;
    }
    struct gwop *op = gwop_new(d, c);
    if (op == NULL)
        return;
    snprintf(op->worker, sizeof op->worker, "%s", w->id);
    snprintf(op->topic, sizeof op->topic, "%s", topic);
    if (events_from_json(event, &op->event, err, sizeof err) != 0) {
        reply_error(c, 400, "workmanager.publish: %s", err);
        gwop_free(op);
        return;
    }
    flow_note_write(d->flow, w, on_publish_fenced, op);
}

/* ---- dispatch --------------------------------------------------------- */

void
gateway_handle(struct daemon *d, struct worker *w,
               const struct ipc_gateway_call *call, struct supervise_call *c)
{
    char service[64], method[64];
    json_error_t je;
    json_t *req;

    snprintf(service, sizeof service, "%.*s",
             (int)(call->service.len < 63 ? call->service.len : 63),
             call->service.ptr ? call->service.ptr : "");
    snprintf(method, sizeof method, "%.*s",
             (int)(call->method.len < 63 ? call->method.len : 63),
             call->method.ptr ? call->method.ptr : "");
    bool state = strcmp(service, "workmanager.state") == 0;
    if (!state && strcmp(service, "workmanager.publish") != 0) {
        reply_error(c, 404,
                    "unknown gateway service \"%s\" (services: "
                    "workmanager.publish, workmanager.state)",
                    service);
        return;
    }
    req =
        json_loadb((const char *)call->request.ptr, call->request.len, 0, &je);
    if (!json_is_object(req)) {
        reply_error(c, 400, "%s.%s: the request is not a JSON object%s%s",
                    service, method, req ? "" : ": ", req ? "" : je.text);
        json_decref(req);
        return;
    }
    if (state)
        state_call(d, w, method, req, c);
    else
        publish_call(d, w, method, req, c);
    json_decref(req);
}

/* A state key of a deleted worker: deleted, its share given back. */
struct forget {
    struct daemon *d;
    const char *tenant;
};

static int
on_state_key(const char *key, enum store_status status, const uint8_t *value,
             size_t len, uint64_t revision, const char *message, void *arg)
{
    struct forget *f = arg;

    (void)value;
    (void)revision;
    (void)message;
    if (status == STORE_OK)
        quota_state_add(f->tenant, -1, -(int64_t)len);
    state_sizes_remove(key);
    store_delete(f->d->store, key, STORE_ANY_REVISION, NULL, NULL);
    return 0;
}

void
gateway_forget(struct daemon *d, const struct worker *w)
{
    char prefix[STORE_KEY_MAX], err[256], label[400];
    struct forget f = { d, w->tenant };

    snprintf(prefix, sizeof prefix, STATE_PREFIX "%s/", w->id);
    if (store_list(d->store, prefix, on_state_key, &f, err, sizeof err) !=
        STORE_OK)
        log_warning("worker %s: its state keys are left: %s",
                    activity_label(w, label, sizeof label), err);
}

/* A state key found at start-up: counted for its worker's tenant. */
static int
on_state_count(const char *key, enum store_status status, const uint8_t *value,
               size_t len, uint64_t revision, const char *message, void *arg)
{
    struct daemon *d = arg;
    char id[UUID_SIZE];
    const char *rest = key + strlen(STATE_PREFIX), *slash = strchr(rest, '/');

    (void)value;
    (void)revision;
    (void)message;
    if (status != STORE_OK || slash == NULL ||
        (size_t)(slash - rest) >= sizeof id)
        return 0;
    snprintf(id, sizeof id, "%.*s", (int)(slash - rest), rest);
    const struct worker *w = registry_lookup(d->registry, id);
    if (w && state_sizes_put(key, len) == 0)
        quota_state_add(w->tenant, 1, (int64_t)len);
    else if (w)
        log_warning("state quotas: out of memory counting %s", key);
    return 0;
}

void
gateway_state_count(struct daemon *d)
{
    char err[256];

    quota_state_clear();
    state_sizes_clear();
    if (store_list(d->store, STATE_PREFIX, on_state_count, d, err,
                   sizeof err) != STORE_OK)
        log_warning("state quotas: cannot count the state keys: %s; their "
                    "usage starts from 0",
                    err);
}

void
gateway_free(void)
{
    state_sizes_clear();
}
