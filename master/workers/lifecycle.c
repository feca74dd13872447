/*
 * lifecycle.c — lifecycle events (see lifecycle.h).
 */
#include "config.h"

#include "master/workers/lifecycle.h"

#include <stdlib.h>
#include <string.h>

#include "lib/timestamp.h"
#include "lib/uuid.h"
#include "master/broker/emit.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/log.h"
#include "master/workers/activity.h"
#include "master/workers/worker.h"

#define LIFECYCLE_TYPE "com.virtufin.workmanager.lifecycle."

#define INFRA_TYPE "com.virtufin.workmanager.infra."
#define LIFECYCLE_TOPIC "workmanager.lifecycle"
#define INFRA_TOPIC "workmanager.infra.worker"

void
lifecycle_emit(struct daemon *d, const struct worker *w, const char *name,
               json_t *extra)
{
    lifecycle_emit_hops(d, w, name, extra, 0);
}

void
lifecycle_emit_hops(struct daemon *d, const struct worker *w, const char *name,
                    json_t *extra, uint32_t hops)
{
    char id[UUID_SIZE], at[TIMESTAMP_SIZE], type[96], source[300];
    uuid_new(id);
    timestamp_format(timestamp_now_ms(), at);
    snprintf(type, sizeof type, LIFECYCLE_TYPE "%s", name);
    snprintf(source, sizeof source, "urn:workmanager:%s", d->conf->instance);

    json_t *data = json_pack(
        "{s:s, s:s, s:s, s:o, s:s, s:I, s:s, s:s}", "worker_id", w->id, "name",
        w->name, "tenant", w->tenant, "group",
        w->group ? json_string(w->group) : json_null(), "topic", w->topic,
        "version", (json_int_t)w->version, "status",
        worker_status_name(w->status), "state", worker_state_name(w->state));
    if (extra) {
        json_object_update(data, extra);
        json_decref(extra);
    }
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o}",
                           "specversion", "1.0", "id", id, "type", type,
                           "source", source, "subject", w->id, "time", at,
                           "datacontenttype", "application/json", "data", data);
    if (hops)
        json_object_set_new(ev, "wmhops", json_integer(hops));
    char *text = json_dumps(ev, JSON_COMPACT);
    if (text)
        log_info("lifecycle: %s", text);
    free(text);
    if (d->broker)
        emit_publish(d->broker, w->tenant, LIFECYCLE_TOPIC, ev);
    json_decref(ev);
}

void
lifecycle_emit_infra(struct daemon *d, const char *tenant, const char *what,
                     const char *subject, json_t *data)
{
    lifecycle_emit_infra_on(d, tenant, INFRA_TOPIC, what, subject, data);
}

void
lifecycle_emit_infra_on(struct daemon *d, const char *tenant, const char *topic,
                        const char *what, const char *subject, json_t *data)
{
    char id[UUID_SIZE], at[TIMESTAMP_SIZE], type[128], source[300];

    if (d->broker == NULL) {
        json_decref(data);
        return;
    }
    uuid_new(id);
    timestamp_format(timestamp_now_ms(), at);
    snprintf(type, sizeof type, INFRA_TYPE "%s", what);
    snprintf(source, sizeof source, "urn:workmanager:%s", d->conf->instance);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o}",
                           "specversion", "1.0", "id", id, "type", type,
                           "source", source, "subject", subject, "time", at,
                           "datacontenttype", "application/json", "data", data);
    emit_publish(d->broker, tenant, topic, ev);
    json_decref(ev);
}

void
lifecycle_emit_exit(struct daemon *d, const struct worker *w)
{
    const struct worker_exit *e = &w->last_exit;
    /* The message of the exit's own error (activity.h): "the host went
     * past its memory limit (64 MiB, ...)", a load's exception, the
     * crash loop and what ends it. */
    const struct activity_error *last = activity_error_last(w);
    const char *message = last && strcmp(last->type, e->reason) == 0
                              ? last->message
                          : w->error ? w->error
                                     : e->reason;
    json_t *extra = json_pack(
        "{s:s, s:s, s:o, s:o, s:o}", "error_type", e->reason, "error_message",
        message, "signal", e->signal ? json_integer(e->signal) : json_null(),
        "exit_code", e->code >= 0 ? json_integer(e->code) : json_null(),
        "syscall", e->syscall >= 0 ? json_integer(e->syscall) : json_null());
    json_object_set_new(extra, "syscall_name",
                        e->syscall >= 0 && e->syscall_name[0]
                            ? json_string(e->syscall_name)
                            : json_null());
    if (last && strcmp(last->type, e->reason) == 0 && last->exception_type)
        json_object_set_new(extra, "exception_type",
                            json_string(last->exception_type));
    lifecycle_emit(d, w, "error", extra);
}
