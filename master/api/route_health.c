/*
 * route_health.c — /health, /health/live, /v1/engines and /v1/recover.
 *
 * /health is the readiness probe: Healthy (200) once recovery is done (or
 * when recovery_on_start is off), Degraded (503) while it runs or while
 * the broker's journal cannot write (a full disk: checks.journal says
 * which file, which error, since when), Unhealthy (503) when the store
 * could not be read.  /health/live only says the loop turns.
 */
#include "config.h"

#include <string.h>

#include "master/api/api.h"
#include "master/api/members.h"
#include "master/broker/broker.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/engines.h"
#include "master/supervise/supervise.h"
#include "master/workers/recovery.h"
#include "master/workers/registry.h"

/* The names of the bits set in bits, by name(), as a JSON array. */
static json_t *
bits_json(unsigned bits, unsigned count, const char *(*name)(unsigned))
{
    json_t *a = json_array();

    for (unsigned i = 0; i < count; i++)
        if (bits & (1u << i))
            json_array_append_new(a, json_string(name(1u << i)));
    return a;
}

/*
 * What the machine offers for confinement (start-up detection, sandbox.h):
 * each mechanism, the level it makes, and what the next levels lack.
 */
static json_t *
sandbox_json(const struct daemon *d)
{
    const struct sandbox_support *s = &d->sandbox;
    char missing[512];
    json_t *lack = json_object();

    for (int l = s->level + 1; l <= SANDBOX_LEVEL_FULL; l++)
        json_object_set_new(
            lack, sandbox_level_name(l),
            json_string(d->sandbox_built
                            ? sandbox_missing(s, l, missing, sizeof missing)
                            : "built --without-sandbox"));
    return json_pack(
        "{s:s, s:b, s:b, s:b, s:o, s:o, s:i, s:o, s:o, s:b, s:s, s:o}", "level",
        sandbox_level_name(s->level), "built", d->sandbox_built, "no_new_privs",
        s->no_new_privs, "seccomp", s->seccomp, "seccomp_actions",
        bits_json(s->seccomp_acts, SANDBOX_ACT_COUNT, sandbox_act_name),
        "namespaces",
        bits_json(s->namespaces, SANDBOX_NS_COUNT, sandbox_ns_name),
        "landlock_abi", s->landlock_abi, "cgroup",
        s->cgroup == SANDBOX_CGROUP_V2   ? json_string("v2")
        : s->cgroup == SANDBOX_CGROUP_V1 ? json_string("v1")
                                         : json_null(),
        "cgroup_controllers",
        bits_json(s->cgroup_ctls, SANDBOX_CG_COUNT, sandbox_cg_name), "mdwe",
        s->mdwe, "capabilities", s->capabilities, "missing", lack);
}

static const char *
recovery_status(const struct daemon *d)
{
    switch (d->recovery) {
    case DAEMON_RECOVERY_RUNNING:
        return "Degraded";
    case DAEMON_RECOVERY_FAILED:
        return "Unhealthy";
    default:
        return "Healthy";
    }
}

/* checks.journal: whether the broker stores events (and so delivers). */
static json_t *
journal_check(const struct daemon *d, bool *writable)
{
    struct broker_health h;
    json_t *j;

    broker_health(d->broker, &h);
    *writable = h.writable;
    j = json_pack("{s:s, s:I, s:I}", "status",
                  h.writable ? "Healthy" : "Degraded", "failures",
                  (json_int_t)h.failures, "recoveries",
                  (json_int_t)h.recoveries);
    if (!h.writable) {
        json_object_set_new(j, "error", json_string(h.message));
        json_object_set_new(j, "errno", json_string(strerror(h.error)));
        json_object_set_new(j, "since", api_json_time(h.since * 1000));
        json_object_set_new(
            j, "note",
            json_string("publishes are refused and deliveries wait until "
                        "the journal writes again; free space under "
                        "state_dir: it recovers by itself"));
    }
    return j;
}

void
api_health_route(struct api_req *rq)
{
    struct daemon *d = rq->d;

    if (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0) {
        api_error(rq, 405, "invalid_argument", "%s is not allowed on %s",
                  rq->method, rq->path);
        return;
    }
    if (rq->nseg == 2) {
        if (strcmp(rq->seg[1], "live") != 0) {
            api_error(rq, 404, "not_found", "no route %s", rq->path);
            return;
        }
        api_reply(rq, 200, json_pack("{s:s}", "status", "Healthy"));
        return;
    }
    const char *status = recovery_status(d);
    bool writable;
    json_t *journal = journal_check(d, &writable);
    json_t *recovery =
        json_pack("{s:s, s:i, s:i}", "status", status, "recovered",
                  (int)d->recovered, "failed", (int)d->recovery_fails);
    if (d->recovery == DAEMON_RECOVERY_FAILED)
        json_object_set_new(recovery, "error", json_string(d->recovery_error));
    if (d->recovery == DAEMON_RECOVERY_PENDING)
        json_object_set_new(recovery, "note",
                            json_string("recovery_on_start is off: POST "
                                        "/v1/recover runs it"));
    if (!writable && strcmp(status, "Healthy") == 0)
        status = "Degraded";
    json_t *body = json_pack(
        "{s:s, s:{s:o, s:o}, s:I, s:I, s:s, s:s}", "status", status, "checks",
        "recovery", recovery, "journal", journal, "workers",
        (json_int_t)registry_count(d->registry), "hosts",
        (json_int_t)supervise_hosts(d->sv), "confinement",
        sandbox_level_name(d->sandbox.level), "version", PACKAGE_VERSION);
    json_object_set_new(body, "sandbox", sandbox_json(d));
    api_reply(rq, strcmp(status, "Healthy") == 0 ? 200 : 503, body);
}

static json_t *
engines_json(const struct engines *list, const struct conf *conf,
             const struct supervisor *sv)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < list->n; i++) {
        const struct engines_entry *e = &list->v[i];
        json_t *mimes = json_array();
        for (size_t k = 0; k < e->nmime_types; k++)
            json_array_append_new(mimes, json_string(e->mime_types[k]));
        json_t *j = json_pack(
            "{s:s, s:o, s:s, s:s, s:s, s:b, s:b}", "name", e->name,
            "mime_types", mimes, "language", e->language ? e->language : "",
            "spawn", engines_spawn_name(e->spawn), "concurrency",
            engines_concurrency_name(e->concurrency), "available", e->available,
            "in_process", e->in_process && conf->allow_in_process_native);
        /* The warm pool (supervise.h): configured, and ready now. */
        json_object_set_new(j, "warm", json_integer((json_int_t)e->warm));
        json_object_set_new(
            j, "warm_ready",
            json_integer((json_int_t)supervise_pool_ready(sv, e)));
        if (e->host_path)
            json_object_set_new(j, "host", json_string(e->host_path));
        if (e->reason)
            json_object_set_new(j, "reason", json_string(e->reason));
        json_array_append_new(arr, j);
    }
    return arr;
}

void
api_engines_route(struct api_req *rq)
{
    if (strcmp(rq->method, "GET") != 0) {
        api_error(rq, 405, "invalid_argument", "%s is not allowed on %s",
                  rq->method, rq->path);
        return;
    }
    api_reply(rq, 200,
              json_pack("{s:o}", "engines",
                        engines_json(rq->d->engines, rq->d->conf, rq->d->sv)));
}

/* The POST /v1/recover waiting for the run it started. */
static struct api_req *recover_rq;

static void
recovered(struct daemon *d)
{
    struct api_req *rq = recover_rq;
    recover_rq = NULL;
    if (rq == NULL)
        return;
    json_t *body = json_pack(
        "{s:s, s:I, s:I, s:I}", "status", recovery_status(d), "recovered",
        (json_int_t)d->recovered, "failed", (json_int_t)d->recovery_fails,
        "workers", (json_int_t)registry_count(d->registry));
    if (d->recovery == DAEMON_RECOVERY_FAILED) {
        json_decref(body);
        api_error(rq, 503, "internal", "the store cannot be read: %s",
                  d->recovery_error);
        return;
    }
    api_reply(rq, 200, body);
}

void
api_recover_route(struct api_req *rq)
{
    if (strcmp(rq->method, "POST") != 0) {
        api_error(rq, 405, "invalid_argument", "%s is not allowed on %s",
                  rq->method, rq->path);
        return;
    }
    if (api_members_none(rq, "recover") != 0 || api_refuse_while_recovering(rq))
        return;
    recover_rq = rq;
    if (recovery_start(rq->d, recovered) != 0) {
        recover_rq = NULL;
        api_error(rq, 409, "conflict", "a recovery is already running");
    }
}
