/*
 * recovery.c — restoring persisted workers (see recovery.h).
 *
 * The records are listed at once (they are small); the expensive part, one
 * blob read and hash per worker, runs RECOVERY_SLICE workers per loop turn.
 */
#include "config.h"

#include "master/workers/recovery.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/timestamp.h"
#include "master/broker/broker.h"
#include "master/broker/flow.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/engines.h"
#include "master/core/log.h"
#include "master/store/record.h"
#include "master/store/store.h"
#include "master/workers/activity.h"
#include "master/workers/lifecycle.h"
#include "master/workers/recovery_lease.h"
#include "master/workers/registry.h"

/* Workers restored per loop turn: each is a blob read and a hash, so a
 * turn stays near a millisecond and the API answers between turns. */
#define RECOVERY_SLICE 64

struct entry {
    char *id;
    uint8_t *value; /* NULL: the record is corrupt (message says why) */
    size_t len;
    uint64_t revision;
    char *message;
};

struct recovery {
    struct daemon *d;
    void (*done)(struct daemon *d);
    struct entry *entries;
    size_t n, cap, next;
    struct event *ev;
    unsigned ok, failed;
    bool leader; /* holds the recovery lease (recovery_lease.h) */
};

static struct recovery *running;

static int
collect(const char *key, enum store_status status, const uint8_t *value,
        size_t len, uint64_t revision, const char *message, void *arg)
{
    struct recovery *rc = arg;
    if (rc->n == rc->cap) {
        size_t cap = rc->cap ? rc->cap * 2 : 256;
        struct entry *e = realloc(rc->entries, cap * sizeof *e);
        if (e == NULL)
            return -1;
        rc->entries = e;
        rc->cap = cap;
    }
    struct entry *e = &rc->entries[rc->n++];
    memset(e, 0, sizeof *e);
    e->id = strdup(key + strlen(RECORD_WORKERS_PREFIX));
    e->revision = revision;
    if (status == STORE_OK) {
        e->value = malloc(len ? len : 1);
        if (e->value)
            memcpy(e->value, value, len);
        e->len = len;
    } else {
        e->message = strdup(message ? message : store_status_name(status));
    }
    return 0;
}

/* A registry entry for a worker whose record is unreadable: enough to be
 * listed, deleted or inspected, state failed. */
static struct worker *
unreadable_worker(const char *id)
{
    struct worker *w = calloc(1, sizeof *w);
    if (w == NULL)
        return NULL;
    snprintf(w->id, sizeof w->id, "%s", id);
    w->name = strdup(id);
    w->tenant = strdup("default");
    w->mime_type = strdup("");
    w->topic = strdup("");
    w->status = WORKER_STOPPED;
    w->limits.concurrency = 1;
    if (!w->name || !w->tenant || !w->mime_type || !w->topic) {
        worker_free(w);
        return NULL;
    }
    return w;
}

static void
fail_worker(struct worker *w, const char *why)
{
    free(w->error);
    w->error = strdup(why);
    w->state = WORKER_STATE_FAILED;
    w->last_exit.present = true;
    snprintf(w->last_exit.reason, sizeof w->last_exit.reason, "load_error");
    w->last_exit.code = -1;
    w->last_exit.syscall = -1;
    w->last_exit.at_ms = timestamp_now_ms();
    activity_error_note(w, "load_error", why, NULL);
    activity_log(w, LOG_ERR, "recovery: %s", why);
}

/* Whether w can run on this daemon as it is now configured: its engine
 * known and available, in-process allowed if it asks for it.  Else false
 * with the reason and what to do in err.  A worker that cannot run is
 * restored failed (issue 27), listed so in recovery's summary and in
 * /health. */
static bool
runnable_here(const struct daemon *d, const struct worker *w, char *err,
              size_t errlen)
{
    const struct engines_entry *e = w->engine;
    if (e == NULL) {
        snprintf(err, errlen,
                 "no engine for mime_type %s: add its descriptor to "
                 "engines_dir and restart",
                 w->mime_type);
        return false;
    }
    if (!e->available) {
        snprintf(err, errlen,
                 "engine %s is unavailable: %s; fix it and restart the "
                 "daemon",
                 e->name, e->reason ? e->reason : "unknown reason");
        return false;
    }
    if (w->in_process && !(e->in_process && d->conf->allow_in_process_native)) {
        snprintf(err, errlen,
                 "isolation in-process is not allowed here (%s); set "
                 "allow_in_process_native = true and restart the daemon",
                 e->in_process ? "allow_in_process_native = false"
                               : "the engine's descriptor has no "
                                 "in_process = yes");
        return false;
    }
    return true;
}

struct worker *
recovery_restore_one(struct daemon *d, const char *id, const uint8_t *value,
                     size_t len, uint64_t revision, const char *message)
{
    char err[512];
    struct worker *w;

    if (registry_lookup(d->registry, id))
        return NULL; /* already known: a second recovery leaves it alone */
    if (value) {
        w = record_worker_decode(id, value, len, err, sizeof err);
    } else {
        w = NULL;
        snprintf(err, sizeof err, "%s", message ? message : "unreadable");
    }
    bool ok = w != NULL;
    if (w == NULL && (w = unreadable_worker(id)) == NULL)
        return NULL;
    w->revision = revision;
    w->state = WORKER_STATE_IDLE;
    if (!ok) {
        fail_worker(w, err);
    } else if (w->nhistory == 0) {
        /* Created without code (stopped, version 0): no blob to check. */
        w->engine = engines_find_mime(d->engines, w->mime_type);
        if (!runnable_here(d, w, err, sizeof err))
            fail_worker(w, err);
        else
            w->state = WORKER_STATE_NO_CODE;
    } else {
        const struct worker_version *v = worker_version_find(w, w->version);
        uint8_t *code = NULL;
        size_t clen;
        enum store_status st = v ? store_blob_get(d->store, v->sha256, &code,
                                                  &clen, err, sizeof err)
                                 : STORE_CORRUPT;
        free(code);
        w->engine = engines_find_mime(d->engines, w->mime_type);
        if (v == NULL) {
            snprintf(err, sizeof err, "version %u is not in its history",
                     w->version);
            fail_worker(w, err);
        } else if (st != STORE_OK) {
            fail_worker(w, err);
        } else if (!runnable_here(d, w, err, sizeof err)) {
            fail_worker(w, err);
        } else if (w->status == WORKER_SUSPENDED) {
            w->state = WORKER_STATE_SUSPENDED;
        } else if (w->status == WORKER_STOPPED) {
            w->state = WORKER_STATE_STOPPED;
        }
    }
    if (registry_add(d->registry, w) != 0) {
        log_err("recovery: worker %s: its name %s is taken; not restored",
                w->id, w->name);
        worker_free(w);
        return NULL;
    }
    char aerr[256];
    if (flow_attach(d->flow, w, aerr, sizeof aerr) != 0)
        activity_log(w, LOG_ERR, "recovery: no subscription: %s", aerr);
    if (w->state == WORKER_STATE_FAILED)
        lifecycle_emit_exit(d, w);
    return w;
}

static void
restore(struct recovery *rc, struct entry *e)
{
    struct worker *w = recovery_restore_one(rc->d, e->id, e->value, e->len,
                                            e->revision, e->message);

    if (w == NULL)
        return;
    if (w->state == WORKER_STATE_FAILED)
        rc->failed++;
    else
        rc->ok++;
}

/* Whether a subscription name of (tenant, topic) belongs to a worker of
 * the registry (every record is there, failed ones too): its id, or
 * "group:<group>" of one of its groups. */
static bool
known(const char *tenant, const char *topic, const char *name, void *arg)
{
    struct daemon *d = arg;

    if (strncmp(name, "group:", 6) != 0) {
        struct worker *w = registry_lookup(d->registry, name);
        return w != NULL && strcmp(w->id, name) == 0;
    }
    for (size_t i = 0; i < registry_count(d->registry); i++) {
        struct worker *w = registry_at(d->registry, i);
        if (w->group != NULL && strcmp(w->group, name + 6) == 0 &&
            strcmp(w->tenant, tenant) == 0 && strcmp(w->topic, topic) == 0)
            return true;
    }
    return false;
}

static void
finish(struct recovery *rc)
{
    struct daemon *d = rc->d;
    struct broker_health bh;

    d->recovery = DAEMON_RECOVERY_DONE;
    /* Backlogs nobody claimed belong to workers that are gone: the
     * embedded broker's are this instance's own; a shared broker's are
     * dropped by the lease's holder only. */
    broker_health(d->broker, &bh);
    if (!bh.remote || rc->leader)
        broker_recovered(d->broker, known, d);
    d->recovered = rc->ok;
    d->recovery_fails = rc->failed;
    log_notice("recovery: %u workers restored, %u failed", rc->ok, rc->failed);
    for (size_t i = 0; i < rc->n; i++) {
        free(rc->entries[i].id);
        free(rc->entries[i].value);
        free(rc->entries[i].message);
    }
    free(rc->entries);
    if (rc->ev)
        event_free(rc->ev);
    running = NULL;
    /* The listing and the blob reads were transient: give their pages
     * back, so the master's RSS reflects the registry. */
    malloc_trim(0);
    void (*done)(struct daemon *) = rc->done;
    free(rc);
    if (done)
        done(d);
}

/* A zero timeout rather than event_active(): timers run after the loop
 * polls, so connections are served between slices. */
static void
next_slice(struct recovery *rc)
{
    static const struct timeval now = { 0, 0 };
    event_add(rc->ev, &now);
}

static void
slice(evutil_socket_t fd, short what, void *arg)
{
    struct recovery *rc = arg;
    (void)fd;
    (void)what;
    size_t end = rc->next + RECOVERY_SLICE;
    for (; rc->next < rc->n && rc->next < end; rc->next++)
        restore(rc, &rc->entries[rc->next]);
    if (rc->next < rc->n)
        next_slice(rc);
    else
        finish(rc);
}

/* The lease decided: list the records and restore them. */
static void
on_lease(bool leader, const char *holder, void *arg)
{
    struct recovery *rc = arg;
    struct daemon *d = rc->d;
    char err[512];

    rc->leader = leader;
    if (d->conf->store == CONF_STORE_NATS) {
        if (leader)
            log_notice("recovery: this instance (%s) holds the recovery "
                       "lease %s",
                       holder, RECOVERY_LEASE_KEY);
        else
            log_notice("recovery: the recovery lease %s is %s's: the "
                       "broker's recovery is left to it",
                       RECOVERY_LEASE_KEY, holder);
    }
    if (store_list(d->store, RECORD_WORKERS_PREFIX, collect, rc, err,
                   sizeof err) != STORE_OK) {
        log_err("recovery: the store cannot be read: %s", err);
        snprintf(d->recovery_error, sizeof d->recovery_error, "%s", err);
        d->recovery = DAEMON_RECOVERY_FAILED;
        for (size_t i = 0; i < rc->n; i++) {
            free(rc->entries[i].id);
            free(rc->entries[i].value);
            free(rc->entries[i].message);
        }
        free(rc->entries);
        void (*done)(struct daemon *) = rc->done;
        running = NULL;
        free(rc);
        if (done)
            done(d);
        return;
    }
    log_info("recovery: %zu worker records", rc->n);
    rc->ev = event_new(d->base, -1, 0, slice, rc);
    if (rc->ev == NULL) {
        finish(rc);
        return;
    }
    next_slice(rc);
}

int
recovery_start(struct daemon *d, void (*done)(struct daemon *d))
{
    if (running)
        return -1;
    struct recovery *rc = calloc(1, sizeof *rc);
    if (rc == NULL)
        return -1;
    rc->d = d;
    rc->done = done;
    d->recovery = DAEMON_RECOVERY_RUNNING;
    running = rc;
    recovery_lease_take(d, on_lease, rc);
    return 0;
}
