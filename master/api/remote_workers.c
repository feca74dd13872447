/*
 * remote_workers.c — the workers' records as other instances change them
 * (issue 23): with a shared store (store = nats) a create, reload,
 * rollback, tag change, start, stop, suspend, resume or delete made on any
 * daemon reaches this one's registry through the store's watch
 * (store_watch()), within the time the store takes to tell.
 *
 * A change is applied when its revision is newer than the registry's: a
 * daemon's own writes come back through the watch too, with the revision
 * the registry already holds, and are left alone.  A worker with an
 * operation of the /v1/workers routes in progress here
 * (api_workers_in_flight(), its create included) is left alone as well:
 * that operation's compare-and-set decides, and the next change of the
 * record brings this daemon up to date.
 *
 *   new record      restored by recovery's own path (recovery_restore_one():
 *                   its code read and checked, its engine and isolation
 *                   allowed here; hosts start on demand), "created"
 *   newer record    its status, versions, tags, config and limits taken;
 *                   a new version is loaded into a running host (the hot
 *                   reload), a new status applied; "reloaded" / "started",
 *                   "stopped", "suspended" / "updated"
 *   deleted         dropped here (its state and code are the deleting
 *                   daemon's business), "deleted"
 *
 * Each lifecycle event says "origin": "remote".
 *
 * Tokens and tenants follow too (api_tokens_remote(),
 * api_tenants_remote()): a record written replaces its entry, a record
 * deleted removes it, and a token revoked since start never comes back
 * (a put the watch brings after the delete stays out).  So a token made or
 * revoked on one instance is made or revoked on all.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "lib/timestamp.h"
#include "master/api/api.h"
#include "master/api/tokens.h"
#include "master/broker/flow.h"
#include "master/core/daemon.h"
#include "master/core/log.h"
#include "master/store/record.h"
#include "master/store/store.h"
#include "master/supervise/supervise.h"
#include "master/workers/activity.h"
#include "master/workers/instances.h"
#include "master/workers/lifecycle.h"
#include "master/workers/recovery.h"
#include "master/workers/registry.h"

static json_t *
remote(void)
{
    return json_pack("{s:s}", "origin", "remote");
}

static void
on_loaded(struct worker *w, const struct ipc_result *r, const char *error_type,
          const char *message, void *arg)
{
    (void)r;
    (void)arg;
    if (error_type != NULL)
        activity_log(w, LOG_ERR, "version %u from another instance: %s: %s",
                     w->version, error_type, message ? message : "");
}

/* Swaps what a record holds between w and from (from is freed after). */
static void
take(struct worker *w, struct worker *from)
{
#define SWAP(f)                                                                \
    do {                                                                       \
        __typeof__(w->f) t_ = w->f;                                            \
        w->f = from->f;                                                        \
        from->f = t_;                                                          \
    } while (0)
    SWAP(status);
    SWAP(config);
    SWAP(nconfig);
    SWAP(tags);
    SWAP(ntags);
    SWAP(limits);
    SWAP(idle_timeout_s);
    SWAP(updated_at_ms);
    SWAP(history);
    SWAP(nhistory);
    SWAP(version);
#undef SWAP
}

static void
change(struct daemon *d, struct worker *w, struct worker *nw, uint64_t rev)
{
    enum worker_status was = w->status;
    uint32_t version = w->version;

    take(w, nw);
    worker_free(nw);
    w->revision = rev;
    if (w->version != version) {
        if (w->state == WORKER_STATE_NO_CODE)
            w->state = w->status == WORKER_RUNNING ? WORKER_STATE_IDLE
                                                   : WORKER_STATE_STOPPED;
        if (w->status == WORKER_RUNNING &&
            supervise_load(d->sv, w, on_loaded, NULL) != 0)
            activity_log(w, LOG_ERR,
                         "version %u from another instance "
                         "cannot be loaded now",
                         w->version);
        lifecycle_emit(d, w, "reloaded", remote());
    }
    if (w->status != was) {
        flow_status(d->flow, w);
        supervise_apply(d->sv, w, NULL, NULL);
        lifecycle_emit(d, w,
                       w->status == WORKER_RUNNING     ? "started"
                       : w->status == WORKER_SUSPENDED ? "suspended"
                                                       : "stopped",
                       remote());
    } else if (w->version == version) {
        lifecycle_emit(d, w, "updated", remote());
    }
}

static void
on_change(const char *key, const uint8_t *value, size_t len, uint64_t rev,
          void *arg)
{
    struct daemon *d = arg;
    const char *id;
    struct worker *w;
    char err[256];

    if (strncmp(key, API_TOKENS_PREFIX, strlen(API_TOKENS_PREFIX)) == 0) {
        api_tokens_remote(key, value, len);
        return;
    }
    instances_changed(d, key, value, len, rev); /* the heartbeats' */
    if (strncmp(key, API_TENANTS_PREFIX, strlen(API_TENANTS_PREFIX)) == 0) {
        api_tenants_remote(key, value, len);
        return;
    }
    if (strncmp(key, RECORD_WORKERS_PREFIX, strlen(RECORD_WORKERS_PREFIX)))
        return; /* state, locks, heartbeats: not this module's */
    id = key + strlen(RECORD_WORKERS_PREFIX);
    w = registry_lookup(d->registry, id);

    if (w != NULL && strcmp(w->id, id) != 0)
        w = NULL; /* a name that looks like this id: not the same worker */
    if (api_workers_in_flight(id) || (w && (w->busy || rev <= w->revision)))
        return;
    if (value == NULL) {
        if (w)
            api_workers_drop(d, w, remote());
        return;
    }
    if (w == NULL) {
        /* another instance created it: restored as recovery does */
        if ((w = recovery_restore_one(d, id, value, len, rev, NULL)) != NULL)
            lifecycle_emit(d, w, "created", remote());
        return;
    }
    struct worker *nw = record_worker_decode(id, value, len, err, sizeof err);
    if (nw == NULL) {
        log_err("worker %s from another instance: %s", id, err);
        return;
    }
    change(d, w, nw, rev);
}

void
api_remote_workers_start(struct daemon *d)
{
    char err[512];

    if (store_watch(d->store, "workmanager/", on_change, d, err, sizeof err) !=
        0)
        log_err("workers changed on other instances will not be seen here "
                "until a restart: %s",
                err);
}
