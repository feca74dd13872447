/*
 * route_tenants.c — tenants as objects the operator manages (issue 22):
 *
 *   POST /v1/tenants {"name", "quotas"?} → 201 the tenant
 *   GET /v1/tenants                      → {"tenants": [...]}
 *   GET /v1/tenants/{name}               → the tenant, its workers counted,
 *       its quotas in force and its usage of each (quota_http.h)
 *   PATCH /v1/tenants/{name} {"quotas"}  → the tenant, its quota overrides
 *       changed (a value sets one, null gives it back to the default)
 *   DELETE /v1/tenants/{name}?confirm={name}
 *       → 200 {"deleted", "workers", "tokens", "events_purged"}: stops
 *         and deletes its workers (their state keys and subscriptions'
 *         backlogs go with them), drops what its topics hold for no
 *         subscription (broker_purge()), revokes its tokens, forgets it
 *   POST /v1/tenants/{name}/suspend      → stops its running workers and
 *       refuses its publishes (409 tenant_suspended)
 *   POST /v1/tenants/{name}/resume       → starts what the suspension
 *       stopped, accepts its publishes again
 *
 * Operators only.  A tenant is persisted through the store as JSON under
 * workmanager/tenants/{name} ({"name", "suspended", "stopped": [worker
 * ids the suspension stopped], "created_ms", "created_by", "quotas": {its
 * overrides}}), loaded at
 * start.  `default` exists implicitly, and so does any tenant named by a
 * worker made before tenants were objects: existing setups keep working.
 *
 * quotas.cpu_weight and quotas.cpu_max, the share of the tenant's cgroup,
 * go to tenant_share.h through quota_http.c with the other quotas.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "lib/timestamp.h"
#include "master/api/api.h"
#include "master/api/members.h"
#include "master/api/principal.h"
#include "master/api/quota_http.h"
#include "master/api/tokens.h"
#include "master/broker/broker.h"
#include "master/core/daemon.h"
#include "master/core/log.h"
#include "master/core/tenant_share.h"
#include "master/store/store.h"
#include "master/workers/registry.h"
#include "master/workers/worker.h"

#define KEY_PREFIX API_TENANTS_PREFIX

struct tenant {
    LIST_ENTRY(tenant) link;
    char name[ROLES_TENANT_MAX + 1];
    bool suspended;
    json_t *stopped; /* array of the worker ids its suspension stopped */
    int64_t created_ms;
    char created_by[128];
};

static LIST_HEAD(, tenant) tenants = LIST_HEAD_INITIALIZER(tenants);

static struct tenant *
tenant_find(const char *name)
{
    struct tenant *t;
    LIST_FOREACH (t, &tenants, link)
        if (strcmp(t->name, name) == 0)
            return t;
    return NULL;
}

static void
tenant_free(struct tenant *t)
{
    json_decref(t->stopped);
    free(t);
}

bool
api_tenants_exists(struct daemon *d, const char *tenant)
{
    return strcmp(tenant, "default") == 0 || tenant_find(tenant) != NULL ||
           (d && api_workers_count_tenant(d, tenant) > 0);
}

bool
api_tenants_suspended(const char *tenant)
{
    const struct tenant *t = tenant_find(tenant);
    return t && t->suspended;
}

static int
on_listed(const char *key, enum store_status status, const uint8_t *value,
          size_t len, uint64_t revision, const char *message, void *arg)
{
    json_t *j = status == STORE_OK
                    ? json_loadb((const char *)value, len, 0, NULL)
                    : NULL;
    const char *name = NULL, *by = "";
    json_int_t created = 0;
    int suspended = 0;
    json_t *stopped = NULL, *quotas = NULL;
    struct tenant *t = NULL;

    (void)revision;
    (void)arg;
    if (j &&
        json_unpack(j, "{s:s, s?b, s?o, s?I, s?s, s?o}", "name", &name,
                    "suspended", &suspended, "stopped", &stopped, "created_ms",
                    &created, "created_by", &by, "quotas", &quotas) == 0 &&
        roles_tenant_valid(name) && (t = calloc(1, sizeof *t)) != NULL) {
        snprintf(t->name, sizeof t->name, "%s", name);
        snprintf(t->created_by, sizeof t->created_by, "%s", by);
        t->suspended = suspended;
        t->created_ms = created;
        t->stopped =
            json_is_array(stopped) ? json_incref(stopped) : json_array();
        LIST_INSERT_HEAD(&tenants, t, link);
        if (json_is_object(quotas))
            api_quota_apply(name, quotas);
    } else {
        log_err("tenants: %s is unreadable (%s)", key,
                message ? message : "not a tenant record");
    }
    json_decref(j);
    return 0;
}

int
api_tenants_load(struct store *st, char *err, size_t errlen)
{
    return store_list(st, KEY_PREFIX, on_listed, NULL, err, errlen) == STORE_OK
               ? 0
               : -1;
}

void
api_tenants_remote(const char *key, const uint8_t *value, size_t len)
{
    struct tenant *t = tenant_find(key + strlen(KEY_PREFIX));

    if (t != NULL) {
        LIST_REMOVE(t, link);
        tenant_free(t);
    }
    if (value != NULL)
        (void)on_listed(key, STORE_OK, value, len, 0, NULL, NULL);
}

void
api_tenants_free(void)
{
    struct tenant *t;
    while ((t = LIST_FIRST(&tenants)) != NULL) {
        LIST_REMOVE(t, link);
        tenant_free(t);
    }
    tenant_share_free_all();
}

static json_t *
tenant_json(struct daemon *d, const char *name, const struct tenant *t)
{
    json_t *j = json_pack("{s:s, s:s, s:I}", "name", name, "status",
                          t && t->suspended ? "suspended" : "active", "workers",
                          (json_int_t)api_workers_count_tenant(d, name));
    json_object_set_new(j, "created_at", api_json_time(t ? t->created_ms : 0));
    json_object_set_new(j, "created_by",
                        t ? json_string(t->created_by) : json_null());
    if (t == NULL)
        json_object_set_new(j, "implicit", json_true());
    api_quota_describe(d, name, j);
    return j;
}

/* ---- writes ---------------------------------------------------------- */

/* A write of the store and whom to answer once it is durable. */
struct written {
    struct api_req *rq; /* NULL: nobody */
    char name[ROLES_TENANT_MAX + 1];
    json_t *answer; /* a deletion's, else the tenant is answered */
};

static struct written *
written_new(struct api_req *rq, const char *name, json_t *answer)
{
    struct written *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    w->rq = rq;
    w->answer = answer;
    snprintf(w->name, sizeof w->name, "%s", name);
    return w;
}

static void
on_written(enum store_status st, uint64_t revision, const char *message,
           void *arg)
{
    struct written *w = arg;
    struct api_req *rq = w->rq;

    (void)revision;
    if (st != STORE_OK && st != STORE_NOT_FOUND) {
        if (rq)
            api_error(rq, 500, "internal", "the store failed: %s", message);
        else
            log_err("tenants: %s: the store failed: %s", w->name, message);
    } else if (rq && w->answer) {
        api_reply(rq, 200, json_incref(w->answer));
    } else if (rq) {
        api_reply(rq, rq->nseg == 2 ? 201 : 200,
                  tenant_json(rq->d, w->name, tenant_find(w->name)));
    }
    json_decref(w->answer);
    free(w);
}

/* Writes t's record, answering rq (NULL: nobody) once durable. */
static void
persist(struct daemon *d, const struct tenant *t, struct api_req *rq)
{
    char key[STORE_KEY_MAX];
    json_t *j =
        json_pack("{s:s, s:b, s:O, s:I, s:s, s:o}", "name", t->name,
                  "suspended", t->suspended, "stopped", t->stopped,
                  "created_ms", (json_int_t)t->created_ms, "created_by",
                  t->created_by, "quotas", api_quota_overrides_json(t->name));
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;

    struct written *w = written_new(rq, t->name, NULL);

    json_decref(j);
    snprintf(key, sizeof key, KEY_PREFIX "%s", t->name);
    if (text == NULL || w == NULL ||
        store_put(d->store, key, (const uint8_t *)text, strlen(text),
                  STORE_ANY_REVISION, on_written, w) != 0) {
        free(w);
        if (rq)
            api_error(rq, 500, "internal", "cannot store tenant %s", t->name);
    }
    free(text);
}

/* A new tenant name, made by rq's principal, in the table (not yet
 * persisted); NULL when out of memory (answered). */
static struct tenant *
tenant_new(struct api_req *rq, const char *name)
{
    struct tenant *t = calloc(1, sizeof *t);
    if (t == NULL || (t->stopped = json_array()) == NULL) {
        free(t);
        api_error(rq, 500, "internal", "out of memory");
        return NULL;
    }
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->created_by, sizeof t->created_by, "%s", rq->principal.name);
    t->created_ms = timestamp_now_ms();
    LIST_INSERT_HEAD(&tenants, t, link);
    return t;
}

static const struct api_member tenant_members[] = {
    { "name", NULL },
    { "quotas", &api_quota_object },
    { NULL, NULL },
};
static const struct api_object tenant_object = {
    .what = "a tenant",
    .members = tenant_members,
    .hint = "{\"name\": \"acme\", \"quotas\": {\"max_workers\": 10}}",
};
static const struct api_object tenant_patch_object = {
    .what = "a tenant's change",
    .members = (const struct api_member[]){ { "quotas", &api_quota_object },
                                            { NULL, NULL } },
    .hint = "{\"quotas\": {\"max_workers\": 10}}",
};

static void
create(struct api_req *rq)
{
    json_t *body = api_body_object(rq);
    const char *name = NULL;
    json_t *quotas;

    if (body == NULL)
        return;
    if (api_members_check(rq, body, &tenant_object) ||
        api_member_str(rq, body, "name", &name))
        goto out;
    quotas = json_object_get(body, "quotas");
    if (quotas && api_quota_check(rq, quotas) != 0)
        goto out;
    if (!roles_tenant_valid(name)) {
        api_error(rq, 400, "invalid_argument",
                  "name must match [a-z0-9][a-z0-9_.-]{0,63}");
        goto out;
    }
    if (tenant_find(name) || strcmp(name, "default") == 0) {
        api_error(rq, 409, "conflict", "tenant %s exists", name);
        goto out;
    }
    struct tenant *t = tenant_new(rq, name);
    if (t && quotas) {
        quota_tenant_forget(name); /* a deleted namesake's overrides */
        api_quota_apply(name, quotas);
    }
    if (t)
        persist(rq->d, t, rq);
out:
    json_decref(body);
}

static void
list(struct api_req *rq)
{
    json_t *arr = json_array();
    struct registry *r = rq->d->registry;
    struct tenant *t;

    if (tenant_find("default") == NULL)
        json_array_append_new(arr, tenant_json(rq->d, "default", NULL));
    LIST_FOREACH (t, &tenants, link)
        json_array_append_new(arr, tenant_json(rq->d, t->name, t));
    /* Tenants named only by workers (made before tenants were objects). */
    for (size_t i = 0; i < registry_count(r); i++) {
        const char *name = registry_at(r, i)->tenant;
        bool seen = strcmp(name, "default") == 0 || tenant_find(name);
        for (size_t k = 0; !seen && k < i; k++)
            seen = strcmp(registry_at(r, k)->tenant, name) == 0;
        if (!seen)
            json_array_append_new(arr, tenant_json(rq->d, name, NULL));
    }
    api_reply(rq, 200, json_pack("{s:o}", "tenants", arr));
}

/* The tenant named by the path, made an object when it was implicit (a
 * suspension must be remembered); NULL when it does not exist
 * (answered). */
static struct tenant *
tenant_of_path(struct api_req *rq, bool make)
{
    const char *name = rq->seg[2];
    struct tenant *t = tenant_find(name);

    if (t || !api_tenants_exists(rq->d, name)) {
        if (t == NULL)
            api_error(rq, 404, "not_found", "no tenant %s", name);
        return t;
    }
    return make ? tenant_new(rq, name) : NULL;
}

static void
suspend(struct api_req *rq, struct tenant *t, bool on)
{
    struct registry *r = rq->d->registry;

    if (api_members_none(rq, rq->seg[3]) != 0)
        return;
    if (t->suspended == on) {
        api_reply(rq, 200, tenant_json(rq->d, t->name, t)); /* idempotent */
        return;
    }
    for (size_t i = 0; i < registry_count(r); i++) {
        struct worker *w = registry_at(r, i);
        if (strcmp(w->tenant, t->name) != 0 || w->busy)
            continue;
        if (on && w->status == WORKER_RUNNING &&
            api_workers_set_status(rq->d, w, false) == 0)
            json_array_append_new(t->stopped, json_string(w->id));
    }
    if (!on) {
        size_t k;
        json_t *id;
        json_array_foreach(t->stopped, k, id)
        {
            struct worker *w = registry_lookup(r, json_string_value(id));
            if (w && w->status == WORKER_STOPPED)
                api_workers_set_status(rq->d, w, true);
        }
        json_array_clear(t->stopped);
    }
    t->suspended = on;
    log_notice("tenants: %s %s tenant %s", rq->principal.name,
               on ? "suspended" : "resumed", t->name);
    persist(rq->d, t, rq);
}

/* PATCH /v1/tenants/{name} {"quotas": {...}}: changes its overrides. */
static void
patch(struct api_req *rq)
{
    json_t *body = api_body_object(rq), *quotas;
    struct tenant *t;

    if (body == NULL)
        return;
    if (api_members_check(rq, body, &tenant_patch_object) != 0)
        goto out;
    if ((quotas = json_object_get(body, "quotas")) == NULL) {
        api_error(rq, 400, "invalid_argument",
                  "a tenant's change names what changes, such as %s",
                  tenant_patch_object.hint);
        goto out;
    }
    if (api_quota_check(rq, quotas) != 0 ||
        (t = tenant_of_path(rq, true)) == NULL)
        goto out;
    api_quota_apply(t->name, quotas);
    log_notice("tenants: %s changed the quotas of tenant %s",
               rq->principal.name, t->name);
    persist(rq->d, t, rq);
out:
    json_decref(body);
}

static void delete (struct api_req *rq)
{
    const char *name = rq->seg[2];
    const char *confirm = api_query(rq, "confirm");

    if (api_members_none(rq, "delete") != 0)
        return;
    if (!api_tenants_exists(rq->d, name)) {
        api_error(rq, 404, "not_found", "no tenant %s", name);
        return;
    }
    if (confirm == NULL || strcmp(confirm, name) != 0) {
        api_error(rq, 400, "confirmation_required",
                  "deleting tenant %s deletes its workers, their state and "
                  "backlogs, and its tokens: confirm with ?confirm=%s "
                  "(wmctl tenant delete %s --yes)",
                  name, name, name);
        return;
    }
    unsigned workers = api_workers_remove_tenant(rq->d, name);
    if (api_workers_count_tenant(rq->d, name) > 0) {
        api_error(rq, 409, "conflict",
                  "tenant %s: %u workers deleted, others are being changed "
                  "by a request in flight; retry",
                  name, workers);
        return;
    }
    unsigned tokens = api_tokens_revoke_tenant(rq->d, name);
    quota_tenant_forget(name);
    tenant_share_forget(name);
    /* What its topics still hold for nobody (its workers' went with
     * them): backlogs waiting for a worker not restored yet. */
    size_t purged = broker_purge(rq->d->broker, name, NULL);
    log_notice("tenants: %s deleted tenant %s (%u workers, %u tokens, %zu "
               "events purged)",
               rq->principal.name, name, workers, tokens, purged);
    json_t *answer = json_pack(
        "{s:s, s:I, s:I, s:I}", "deleted", name, "workers", (json_int_t)workers,
        "tokens", (json_int_t)tokens, "events_purged", (json_int_t)purged);
    struct tenant *t = tenant_find(name);
    if (t == NULL) {
        api_reply(rq, 200, answer);
        return;
    }
    char key[STORE_KEY_MAX];
    LIST_REMOVE(t, link);
    tenant_free(t);
    snprintf(key, sizeof key, KEY_PREFIX "%s", name);
    struct written *w = written_new(rq, name, answer);
    if (w == NULL || store_delete(rq->d->store, key, STORE_ANY_REVISION,
                                  on_written, w) != 0) {
        json_decref(answer); /* no callback runs for a refused delete */
        free(w);
        api_error(rq, 500, "internal", "cannot delete %s", key);
    }
}

void
api_tenants_route(struct api_req *rq)
{
    /* /v1/tenants[/{name}[/{action}]] */
    if (api_scope_refuse(rq, API_OPERATE, NULL, "tenant"))
        return;
    bool get = strcmp(rq->method, "GET") == 0;
    bool post = strcmp(rq->method, "POST") == 0;
    if (rq->nseg == 2) {
        if (get)
            list(rq);
        else if (post)
            create(rq);
        else
            api_error(rq, 405, "invalid_argument", "%s is not allowed on %s",
                      rq->method, rq->path);
        return;
    }
    if (rq->nseg == 3 && get) {
        struct tenant *t = tenant_find(rq->seg[2]);
        if (t || api_tenants_exists(rq->d, rq->seg[2]))
            api_reply(rq, 200, tenant_json(rq->d, rq->seg[2], t));
        else
            api_error(rq, 404, "not_found", "no tenant %s", rq->seg[2]);
        return;
    }
    if (rq->nseg == 3 && strcmp(rq->method, "PATCH") == 0) {
        if (!api_refuse_while_recovering(rq))
            patch(rq);
        return;
    }
    if (rq->nseg == 3 && strcmp(rq->method, "DELETE") == 0) {
        delete (rq);
        return;
    }
    bool on = rq->nseg == 4 && strcmp(rq->seg[3], "suspend") == 0;
    if (rq->nseg == 4 && post && (on || strcmp(rq->seg[3], "resume") == 0)) {
        if (api_refuse_while_recovering(rq))
            return;
        struct tenant *t = tenant_of_path(rq, true);
        if (t)
            suspend(rq, t, on);
        return;
    }
    api_error(rq, 404, "not_found", "no route %s %s", rq->method, rq->path);
}
