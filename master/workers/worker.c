/*
 * worker.c — names of statuses and states, history lookup, freeing.
 */
#include "config.h"

#include "master/workers/worker.h"

#include <stdlib.h>
#include <string.h>

#include "master/workers/activity.h"

static const char *const status_names[] = {
    [WORKER_RUNNING] = "running",
    [WORKER_SUSPENDED] = "suspended",
    [WORKER_STOPPED] = "stopped",
};

static const char *const state_names[] = {
    [WORKER_STATE_IDLE] = "idle",
    [WORKER_STATE_STARTING] = "starting",
    [WORKER_STATE_RUNNING] = "running",
    [WORKER_STATE_SUSPENDED] = "suspended",
    [WORKER_STATE_STOPPING] = "stopping",
    [WORKER_STATE_STOPPED] = "stopped",
    [WORKER_STATE_PENDING] = "pending",
    [WORKER_STATE_FAILED] = "failed",
    [WORKER_STATE_KILLED] = "killed",
    [WORKER_STATE_FINISHED] = "finished",
    [WORKER_STATE_NO_CODE] = "no_code",
};

const char *
worker_status_name(enum worker_status s)
{
    return (unsigned)s <= WORKER_STOPPED ? status_names[s] : "unknown";
}

int
worker_status_parse(const char *name, enum worker_status *out)
{
    for (unsigned i = 0; i <= WORKER_STOPPED; i++) {
        if (strcmp(name, status_names[i]) == 0) {
            *out = (enum worker_status)i;
            return 0;
        }
    }
    return -1;
}

const char *
worker_state_name(enum worker_state s)
{
    return (unsigned)s <= WORKER_STATE_LAST ? state_names[s] : "unknown";
}

const struct worker_version *
worker_version_find(const struct worker *w, uint32_t v)
{
    /* Versions run 1..n in order (record.c checks it). */
    if (v == 0 || v > w->nhistory)
        return NULL;
    return &w->history[v - 1];
}

void
worker_pairs_free(struct worker_pair *p, size_t n)
{
    for (size_t i = 0; p && i < n; i++) {
        free(p[i].name);
        free(p[i].value);
    }
    free(p);
}

void
worker_free(struct worker *w)
{
    if (w == NULL)
        return;
    free(w->name);
    free(w->tenant);
    free(w->mime_type);
    free(w->topic);
    free(w->group);
    worker_pairs_free(w->config, w->nconfig);
    worker_pairs_free(w->tags, w->ntags);
    for (size_t i = 0; w->history && i < w->nhistory; i++) {
        free(w->history[i].source);
        free(w->history[i].address);
        free(w->history[i].final_url);
    }
    free(w->history);
    free(w->error);
    activity_free(w);
    free(w);
}
