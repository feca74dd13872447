/*
 * worker_body.c — a worker as the admin API's JSON, both ways
 * (worker_body.h): the object the /v1/workers routes answer with, and the
 * checks of what a create, a reload or a tags change sends.
 *
 * Every check answers the request itself, with the member and its rule
 * (400 invalid_argument; 403 security_rejected for code whose digest is
 * not the one announced; 409 conflict for a taken name), so a route only
 * stops; the checks run in the order a client reads their messages in
 * DESIGN §8, the first failure answering.  Nothing here changes a worker
 * the registry holds: the takers fill a new worker or the caller's struct.
 */
#include "config.h"

#include "master/api/worker_body.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/name.h"
#include "lib/uuid.h"
#include "master/api/api.h"
#include "master/api/members.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/engines.h"
#include "master/store/store.h"
#include "master/supervise/supervise.h"
#include "master/workers/activity.h"
#include "master/workers/fetch.h"
#include "master/workers/registry.h"
#include "master/workers/worker.h"

#define MAX_TAGS 50
#define MAX_TAG_KEY 128
#define MAX_TAG_VALUE 1024
#define MAX_CONFIG 64
/* The most host processes of one worker (limits.concurrency), and so the
 * most pids a worker's object lists. */
#define MAX_CONCURRENCY 64
/* Worker names, tenants and groups: [a-z0-9][a-z0-9_.-]{0,63}. */
#define MAX_NAME 64

/* ---- the worker object ----------------------------------------------- */

json_t *
worker_body_pairs_json(const struct worker_pair *p, size_t n)
{
    json_t *o = json_object();
    for (size_t i = 0; i < n; i++)
        json_object_set_new(o, p[i].name, json_string(p[i].value));
    return o;
}

static json_t *
exit_json(const struct worker_exit *e)
{
    if (!e->present)
        return json_null();
    json_t *j =
        json_pack("{s:s, s:o, s:o, s:o}", "reason", e->reason, "at",
                  api_json_time(e->at_ms), "signal",
                  e->signal ? json_integer(e->signal) : json_null(), "code",
                  e->code >= 0 ? json_integer(e->code) : json_null());
    json_object_set_new(
        j, "syscall", e->syscall >= 0 ? json_integer(e->syscall) : json_null());
    json_object_set_new(j, "syscall_name",
                        e->syscall >= 0 && e->syscall_name[0]
                            ? json_string(e->syscall_name)
                            : json_null());
    return j;
}

/* The worker's last error (activity.h), or null. */
static json_t *
last_error_json(const struct worker *w)
{
    const struct activity_error *e = activity_error_last(w);
    const char *abbrev = e && e->signal ? sigabbrev_np(e->signal) : NULL;
    char sig[24];

    if (e == NULL)
        return json_null();
    snprintf(sig, sizeof sig, "SIG%s", abbrev ? abbrev : "?");
    return json_pack(
        "{s:o, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "at",
        api_json_time(e->at_ms), "type", e->type, "message", e->message,
        "exception_type",
        e->exception_type ? json_string(e->exception_type) : json_null(),
        "traceback", e->traceback ? json_string(e->traceback) : json_null(),
        "signal", e->signal ? json_integer(e->signal) : json_null(),
        "signal_name", e->signal ? json_string(sig) : json_null(), "exit_code",
        e->exit_code >= 0 ? json_integer(e->exit_code) : json_null(), "syscall",
        e->syscall >= 0 ? json_integer(e->syscall) : json_null(),
        "syscall_name",
        e->syscall >= 0 && e->syscall_name[0] ? json_string(e->syscall_name)
                                              : json_null());
}

/* The limits the worker runs under: its own, or the daemon's defaults
 * where it sets none (memory_mb null: no limit). */
static json_t *
limits_in_force_json(const struct worker *w, const struct conf *c)
{
    const struct worker_limits *l = &w->limits;

    return json_pack(
        "{s:I, s:o, s:I, s:I}", "timeout_ms",
        (json_int_t)(l->timeout_ms ? l->timeout_ms : c->message_timeout_ms),
        "memory_mb", l->memory_mb ? json_integer(l->memory_mb) : json_null(),
        "concurrency", (json_int_t)(l->concurrency ? l->concurrency : 1),
        "idle_timeout_s",
        (json_int_t)(w->idle_timeout_s ? w->idle_timeout_s
                                       : c->idle_timeout_s));
}

json_t *
worker_body_json(const struct worker *w, const struct conf *c)
{
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:s, s:I, s:o, s:I, s:o}", "id",
        w->id, "name", w->name, "tenant", w->tenant, "mime_type", w->mime_type,
        "topic", w->topic, "group",
        w->group ? json_string(w->group) : json_null(), "status",
        worker_status_name(w->status), "state", worker_state_name(w->state),
        "version", (json_int_t)w->version, "pid",
        w->pid > 0 ? json_integer(w->pid) : json_null(), "restarts",
        (json_int_t)w->restarts, "last_exit", exit_json(&w->last_exit));
    /* Every host process (several for an engine of concurrency
     * processes, engines.h); pid is the first's. */
    int pids[MAX_CONCURRENCY];
    size_t npids = supervise_pids(w, pids, MAX_CONCURRENCY);
    if (npids > MAX_CONCURRENCY)
        npids = MAX_CONCURRENCY;
    json_t *jpids = json_array();
    for (size_t i = 0; i < npids; i++)
        json_array_append_new(jpids, json_integer(pids[i]));
    if (npids == 0 && w->pid > 0) /* in process: the daemon's */
        json_array_append_new(jpids, json_integer(w->pid));
    json_object_set_new(j, "pids", jpids);
    const char *confinement = supervise_confinement(w);
    json_object_set_new(j, "confinement",
                        w->in_process ? json_string("none (in-process)")
                        : confinement ? json_string(confinement)
                                      : json_null());
    json_object_set_new(j, "created_at", api_json_time(w->created_at_ms));
    json_object_set_new(j, "updated_at", api_json_time(w->updated_at_ms));
    json_object_set_new(j, "config",
                        worker_body_pairs_json(w->config, w->nconfig));
    json_object_set_new(j, "tags", worker_body_pairs_json(w->tags, w->ntags));
    json_object_set_new(j, "limits",
                        json_pack("{s:I, s:I, s:I}", "timeout_ms",
                                  (json_int_t)w->limits.timeout_ms, "memory_mb",
                                  (json_int_t)w->limits.memory_mb,
                                  "concurrency",
                                  (json_int_t)w->limits.concurrency));
    json_object_set_new(j, "limits_in_force", limits_in_force_json(w, c));
    json_object_set_new(
        j, "events",
        json_pack("{s:I, s:I, s:I, s:I, s:I}", "processed",
                  (json_int_t)w->counters.processed, "failed",
                  (json_int_t)w->counters.failed, "dead_lettered",
                  (json_int_t)w->counters.dead_lettered, "published",
                  (json_int_t)w->counters.published, "redelivered",
                  (json_int_t)w->counters.redelivered));
    json_object_set_new(j, "last_error", last_error_json(w));
    json_object_set_new(j, "isolation",
                        json_string(w->in_process ? "in-process" : "process"));
    if (w->in_process)
        json_object_set_new(
            j, "caveats",
            json_pack("[s, s, s]",
                      "runs inside the daemon: a crash of the worker ends the "
                      "daemon and every worker in it",
                      "a timeout answers worker.error but cannot stop the "
                      "call: its thread stays busy until Process returns",
                      "the VIRTUFIN_WORKER_* variables are process-wide: set "
                      "at load, restored at unload"));
    json_object_set_new(j, "idle_timeout_s", json_integer(w->idle_timeout_s));
    if (w->error)
        json_object_set_new(j, "error", json_string(w->error));
    return j;
}

/* The original system's worker object (its WorkerInfo): camelCase, and
 * status as its enum's names ("Running", "Stopped"; ours capitalised for
 * the states it did not have). */
json_t *
worker_body_original_json(const struct worker *w)
{
    const struct worker_version *v = NULL;
    char status[32];

    for (size_t i = 0; i < w->nhistory; i++)
        if (w->history[i].version == w->version)
            v = &w->history[i];
    snprintf(status, sizeof status, "%s", worker_status_name(w->status));
    if (status[0] >= 'a' && status[0] <= 'z')
        status[0] = (char)(status[0] - 'a' + 'A');
    json_t *src = json_object();
    if (v && v->address)
        json_object_set_new(src, "url", json_string(v->address));
    if (v)
        json_object_set_new(src, "contentSha256", json_string(v->sha256));
    return json_pack(
        "{s:s, s:o, s:s, s:o, s:s, s:o, s:o, s:s}", "id", w->id, "codeSource",
        src, "mimeType", w->mime_type, "language",
        w->engine && w->engine->language ? json_string(w->engine->language)
                                         : json_null(),
        "topic", w->topic, "group",
        w->group ? json_string(w->group) : json_null(), "createdAt",
        api_json_time(w->created_at_ms), "status", status);
}

/* ---- a request's body ------------------------------------------------ */

/* The objects a create and a reload take (members.h).  code has no
 * credentials member on purpose: they come from the operator's
 * code_source_credentials_file only. */
static const struct api_object code_object = {
    .what = "code",
    .members = (const struct api_member[]){ { "content", NULL },
                                            { "url", NULL },
                                            { "sha256", NULL },
                                            { NULL, NULL } },
    .hint = "content, or url with an optional sha256; credentials for a URL "
            "come from the daemon's code_source_credentials_file, never from "
            "a request",
    .aliases = (const struct api_member[]){ { "contentSha256", NULL },
                                            { NULL, NULL } },
};

static const struct api_object limits_object = {
    .what = "limits",
    .members = (const struct api_member[]){ { "timeout_ms", NULL },
                                            { "memory_mb", NULL },
                                            { "concurrency", NULL },
                                            { NULL, NULL } },
};

static const struct api_object create_object = {
    .what = "a worker",
    .members = (const struct api_member[]){ { "mime_type", NULL },
                                            { "topic", NULL },
                                            { "code", &code_object },
                                            { "name", NULL },
                                            { "tenant", NULL },
                                            { "group", NULL },
                                            { "config", NULL },
                                            { "tags", NULL },
                                            { "limits", &limits_object },
                                            { "isolation", NULL },
                                            { "idle_timeout_s", NULL },
                                            { "start", NULL },
                                            { NULL, NULL } },
    .aliases = (const struct api_member[]){ { "mimeType", NULL },
                                            { "codeSource", &code_object },
                                            { "code_source", &code_object },
                                            { NULL, NULL } },
};

static const struct api_object reload_object = {
    .what = "a reload",
    .members =
        (const struct api_member[]){ { "code", &code_object }, { NULL, NULL } },
    .aliases = (const struct api_member[]){ { "codeSource", &code_object },
                                            { "code_source", &code_object },
                                            { NULL, NULL } },
};

/* Config entries become CloudEvent extensions (DESIGN §6). */
static const char *
config_name_problem(const char *name)
{
    static const char *const reserved[] = {
        "id",
        "type",
        "source",
        "specversion",
        "datacontenttype",
        "dataschema",
        "subject",
        "time",
        "data",
        "correlationid",
        "replytopic",
        "traceparent",
        "tracestate",
        "wmhops",
    };
    if (!name_ext_valid(name, strlen(name)))
        return "is not " NAME_EXT_RULE;
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (strcmp(name, reserved[i]) == 0)
            return "is a reserved CloudEvents attribute";
    return NULL;
}

int
worker_body_pairs_take(struct api_req *rq, json_t *obj, const char *what,
                       bool is_config, struct worker_pair **out, size_t *nout)
{
    const char *key;
    json_t *v;
    size_t n = json_object_size(obj), i = 0;

    if (is_config ? n > MAX_CONFIG : n > MAX_TAGS) {
        api_error(rq, 400, "invalid_argument", "%s: at most %d entries", what,
                  is_config ? MAX_CONFIG : MAX_TAGS);
        return -1;
    }
    *out = calloc(n ? n : 1, sizeof **out);
    *nout = 0;
    if (*out == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        return -1;
    }
    json_object_foreach(obj, key, v)
    {
        const char *problem = NULL;
        if (!json_is_string(v))
            problem = "value must be a string";
        else if (is_config)
            problem = config_name_problem(key);
        else if (*key == '\0' || strlen(key) > MAX_TAG_KEY)
            problem = "key must have 1 to 128 characters";
        else if (json_string_length(v) > MAX_TAG_VALUE)
            problem = "value longer than 1024 characters";
        if (problem) {
            api_error(rq, 400, "invalid_argument", "%s.%s: %s", what, key,
                      problem);
            return -1;
        }
        (*out)[i].name = strdup(key);
        (*out)[i].value = strdup(json_string_value(v));
        *nout = ++i;
    }
    return 0;
}

int
worker_body_code_take(struct api_req *rq, json_t *body,
                      struct worker_body_code *cr)
{
    json_t *c = json_object_get(body, "code");

    memset(cr, 0, sizeof *cr);
    if (c == NULL || json_is_null(c)) {
        api_error(rq, 400, "invalid_argument",
                  "code is required (codeSource in the original's shape): "
                  "{\"content\": \"<base64>\"} or {\"url\": "
                  "\"https://...\"}, or the package itself as an "
                  "application/octet-stream body");
        return -1;
    }
    if (!json_is_object(c)) {
        api_error(rq, 400, "invalid_argument",
                  "code must be an object: {\"content\": \"<base64>\"} or "
                  "{\"url\": \"https://...\", \"sha256\": \"<hex>\"}");
        return -1;
    }
    json_t *content = json_object_get(c, "content");
    json_t *url = json_object_get(c, "url");
    json_t *sha = json_object_get(c, "sha256");
    if (sha && (!json_is_string(sha) ||
                fetch_sha256_parse(json_string_value(sha), cr->sha256) != 0)) {
        api_error(rq, 400, "invalid_argument",
                  "code.sha256 must be 64 hexadecimal digits");
        return -1;
    }
    if (content && url) {
        api_error(rq, 400, "invalid_argument",
                  "code takes content or url, not both");
        return -1;
    }
    if (url) {
        if (!json_is_string(url) || json_string_length(url) == 0) {
            api_error(rq, 400, "invalid_argument",
                      "code.url must be a non-empty string");
            return -1;
        }
        cr->url = json_string_value(url);
        return 0;
    }
    if (!json_is_string(content)) {
        api_error(rq, 400, "invalid_argument",
                  "code.content must be a base64 string");
        return -1;
    }
    if (base64_decode(json_string_value(content), json_string_length(content),
                      &cr->code, &cr->len) != 0) {
        api_error(rq, 400, "invalid_argument",
                  "code.content is not valid base64");
        return -1;
    }
    if (cr->len == 0) {
        free(cr->code);
        cr->code = NULL;
        api_error(rq, 400, "invalid_argument", "code.content is empty");
        return -1;
    }
    if (cr->sha256[0]) {
        char got[STORE_SHA256_HEX];
        store_sha256_hex(cr->code, cr->len, got);
        if (strcmp(got, cr->sha256) != 0) {
            api_error(rq, 403, "security_rejected",
                      "code.content has SHA-256 %s, not the code.sha256 %s",
                      got, cr->sha256);
            free(cr->code);
            cr->code = NULL;
            return -1;
        }
    }
    return 0;
}

/* The original system's names (its REST examples and clients) for ours:
 * the same members under another name, so that its deploy scripts work
 * unchanged.  Each is renamed to ours before anything reads the body. */
static const struct alias {
    const char *original, *ours;
} top_aliases[] = { { "mimeType", "mime_type" },
                    { "codeSource", "code" },
                    { "code_source", "code" },
                    { NULL, NULL } },
  code_aliases[] = { { "contentSha256", "sha256" }, { NULL, NULL } };

static int
rename_aliases(struct api_req *rq, json_t *obj, const struct alias *a,
               const char *prefix)
{
    for (; a->original; a++) {
        json_t *v = json_object_get(obj, a->original);
        if (v == NULL)
            continue;
        if (json_object_get(obj, a->ours)) {
            api_error(rq, 400, "invalid_argument",
                      "%s%s and %s%s are the same member (%s is the original "
                      "system's name): send one",
                      prefix, a->original, prefix, a->ours, a->original);
            return -1;
        }
        json_object_set(obj, a->ours, v);
        json_object_del(obj, a->original);
    }
    return 0;
}

static int
body_aliases(struct api_req *rq, json_t *body)
{
    if (rename_aliases(rq, body, top_aliases, ""))
        return -1;
    json_t *code = json_object_get(body, "code");
    if (json_is_object(code) && rename_aliases(rq, code, code_aliases, "code."))
        return -1;
    return 0;
}

int
worker_body_reload_take(struct api_req *rq, json_t *body,
                        struct worker_body_code *cr)
{
    memset(cr, 0, sizeof *cr);
    if (api_members_check(rq, body, &reload_object) != 0 ||
        body_aliases(rq, body) != 0)
        return -1;
    return worker_body_code_take(rq, body, cr);
}

int
worker_body_create_take(struct api_req *rq, json_t *body,
                        struct worker_body_create *b)
{
    memset(b, 0, sizeof *b);
    if (api_members_check(rq, body, &create_object) != 0 ||
        body_aliases(rq, body) != 0)
        return -1;
    if (api_member_str(rq, body, "mime_type", &b->mime) ||
        api_member_str(rq, body, "topic", &b->topic) ||
        api_member_str(rq, body, "tenant", &b->tenant) ||
        api_member_str(rq, body, "group", &b->group) ||
        api_member_str(rq, body, "name", &b->name) ||
        api_member_str(rq, body, "isolation", &b->isolation))
        return -1;
    if (b->mime == NULL) {
        api_error(rq, 400, "invalid_argument", "mime_type is required");
        return -1;
    }
    if (b->topic == NULL) {
        api_error(rq, 400, "invalid_argument",
                  "topic is required: " API_TOPIC_RULE);
        return -1;
    }
    if (!name_word_valid(b->topic, API_TOPIC_MAX)) {
        api_error(rq, 400, "invalid_argument",
                  "topic \"%s\" is invalid: " API_TOPIC_RULE, b->topic);
        return -1;
    }
    if (b->tenant && !name_lower_valid(b->tenant, MAX_NAME)) {
        api_error(rq, 400, "invalid_argument",
                  "tenant must match [a-z0-9][a-z0-9_.-]{0,63}");
        return -1;
    }
    if (b->group && !name_lower_valid(b->group, MAX_NAME)) {
        api_error(rq, 400, "invalid_argument",
                  "group must match [a-z0-9][a-z0-9_.-]{0,63}");
        return -1;
    }
    if (b->name && (!name_lower_valid(b->name, MAX_NAME) ||
                    uuid_valid(b->name, strlen(b->name)))) {
        api_error(rq, 400, "invalid_argument",
                  "name must match [a-z0-9][a-z0-9_.-]{0,63} and not be a "
                  "UUID");
        return -1;
    }
    if (b->name && registry_lookup_name(rq->d->registry, b->name)) {
        api_error(rq, 409, "conflict", "name %s is taken", b->name);
        return -1;
    }
    if (b->isolation && strcmp(b->isolation, "process") != 0 &&
        strcmp(b->isolation, "in-process") != 0) {
        api_error(rq, 400, "invalid_argument",
                  "isolation must be \"process\" or \"in-process\"");
        return -1;
    }
    b->start = json_object_get(body, "start");
    if (b->start && !json_is_boolean(b->start)) {
        api_error(rq, 400, "invalid_argument", "start must be a boolean");
        return -1;
    }
    b->config = json_object_get(body, "config");
    b->tags = json_object_get(body, "tags");
    b->limits = json_object_get(body, "limits");
    if ((b->config && !json_is_object(b->config)) ||
        (b->tags && !json_is_object(b->tags)) ||
        (b->limits && !json_is_object(b->limits))) {
        api_error(rq, 400, "invalid_argument",
                  "config, tags and limits must be objects");
        return -1;
    }
    return 0;
}

int
worker_body_settings_take(struct api_req *rq, json_t *body,
                          const struct worker_body_create *b, struct worker *w)
{
    w->limits.concurrency = 1;
    if ((b->config && worker_body_pairs_take(rq, b->config, "config", true,
                                             &w->config, &w->nconfig)) ||
        (b->tags && worker_body_pairs_take(rq, b->tags, "tags", false, &w->tags,
                                           &w->ntags)) ||
        (b->limits &&
         (api_member_uint(rq, b->limits, "timeout_ms", "limits.", 1, 3600000,
                          &w->limits.timeout_ms) ||
          api_member_uint(rq, b->limits, "memory_mb", "limits.", 0, 1048576,
                          &w->limits.memory_mb) ||
          api_member_uint(rq, b->limits, "concurrency", "limits.", 1,
                          MAX_CONCURRENCY, &w->limits.concurrency))) ||
        api_member_uint(rq, body, "idle_timeout_s", "", 0, 86400 * 365,
                        &w->idle_timeout_s))
        return -1;
    return 0;
}
