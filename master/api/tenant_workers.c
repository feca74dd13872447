/*
 * tenant_workers.c — a tenant's workers at once, for the tenant routes
 * (route_tenants.c: suspend, resume and delete a tenant; api.h).
 *
 * These act on every worker of one tenant without a request of their own
 * behind each: the store writes are fire-and-forget (a failure is logged),
 * and a busy worker (an operation of the /v1/workers routes in progress,
 * route_workers.c) is skipped, so the tenant routes never race one.
 * A status write takes the revision the store returns, never a guess: a
 * shared store (nats) numbers revisions across keys.
 */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/timestamp.h"
#include "lib/uuid.h"
#include "master/api/api.h"
#include "master/broker/flow.h"
#include "master/broker/gateway.h"
#include "master/core/daemon.h"
#include "master/core/log.h"
#include "master/store/record.h"
#include "master/store/store.h"
#include "master/supervise/supervise.h"
#include "master/workers/lifecycle.h"
#include "master/workers/registry.h"

/* A write without a request: logged when it fails; the record's new
 * revision is taken if the worker still exists. */
static void
on_tenant_write(enum store_status st, uint64_t revision, const char *message,
                void *arg)
{
    struct daemon *d = arg;
    (void)d;
    (void)revision;
    if (st != STORE_OK && st != STORE_NOT_FOUND)
        log_err("store: a tenant's worker record: %s", message);
}

/* A status write's worker, by id: it may be deleted before the write
 * completes. */
struct status_write {
    struct daemon *d;
    char id[UUID_SIZE];
};

/* The revision a status write got.  The file store's revisions grow by
 * one, so the worker's was counted at submission; a shared store's (nats:
 * the bucket's sequence) is only known now, and is larger than any
 * counted one.  The larger wins, so a later write's completion is never
 * undone by an earlier one's. */
static void
on_status_written(enum store_status st, uint64_t revision, const char *message,
                  void *arg)
{
    struct status_write *sw = arg;
    struct worker *w = registry_lookup(sw->d->registry, sw->id);
    if (st == STORE_OK && w != NULL && revision > w->revision)
        w->revision = revision;
    on_tenant_write(st, revision, message, sw->d);
    free(sw);
}

unsigned
api_workers_count_tenant(struct daemon *d, const char *tenant)
{
    unsigned n = 0;
    for (size_t i = 0; i < registry_count(d->registry); i++)
        if (strcmp(registry_at(d->registry, i)->tenant, tenant) == 0)
            n++;
    return n;
}

int
api_workers_set_status(struct daemon *d, struct worker *w, bool run)
{
    char key[STORE_KEY_MAX];
    uint8_t *rec;
    size_t len;

    if (w->busy)
        return -1;
    w->status = run ? WORKER_RUNNING : WORKER_STOPPED;
    w->updated_at_ms = timestamp_now_ms();
    record_worker_key(w->id, key, sizeof key);
    struct status_write *sw = calloc(1, sizeof *sw);
    if (sw != NULL && record_worker_encode(w, &rec, &len) == 0) {
        sw->d = d;
        memcpy(sw->id, w->id, sizeof sw->id);
        /* Whatever revision: the tenant's decision wins. */
        if (store_put(d->store, key, rec, len, STORE_ANY_REVISION,
                      on_status_written, sw) == 0) {
            w->revision++;
            sw = NULL;
        }
        free(rec);
    }
    free(sw);
    flow_status(d->flow, w);
    supervise_apply(d->sv, w, NULL, NULL);
    lifecycle_emit(d, w, run ? "started" : "stopped", NULL);
    return 0;
}

unsigned
api_workers_remove_tenant(struct daemon *d, const char *tenant)
{
    unsigned n = 0;
    size_t i = 0;

    while (i < registry_count(d->registry)) {
        struct worker *w = registry_at(d->registry, i);
        char key[STORE_KEY_MAX];
        if (strcmp(w->tenant, tenant) != 0 || w->busy) {
            i++;
            continue;
        }
        record_worker_key(w->id, key, sizeof key);
        store_delete(d->store, key, STORE_ANY_REVISION, on_tenant_write, d);
        gateway_forget(d, w);
        api_workers_drop(d, w, NULL);
        n++;
    }
    return n;
}

void
api_workers_drop(struct daemon *d, struct worker *w, json_t *extra)
{
    flow_detach(d->flow, w);
    supervise_forget(d->sv, w);
    registry_remove(d->registry, w);
    lifecycle_emit(d, w, "deleted", extra);
    worker_free(w);
}
