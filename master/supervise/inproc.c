/*
 * inproc.c — the in-process path's bridge between the loader's pool and the
 * master's event loop (inproc.h).
 *
 * The loader's eventfd wakes the loop once per batch; the loop takes the
 * finished jobs and the worker's calls and hands them to the supervisor's
 * hooks.  A hook may close the instance: the close is then finished once
 * the batch is walked, and what is left of it is freed unseen.
 */
#include "config.h"

#include "master/supervise/inproc.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

struct inproc {
    struct native_loader *nl;
    struct event *ev;
    struct inproc_hooks hooks;
    void *arg;
    struct native_job *pending, **pending_tail; /* for inproc_flush */
    bool walking; /* on_pool is handing a batch to the hooks */
    bool closing; /* closed from a hook: on_pool finishes the close */
};

static void
destroy(struct inproc *ip)
{
    while (ip->pending) {
        struct native_job *next = ip->pending->next;
        native_job_free(ip->pending);
        ip->pending = next;
    }
    event_free(ip->ev);
    native_loader_close(ip->nl);
    free(ip);
}

static void
deliver(struct inproc *ip, struct native_job *j)
{
    struct ipc_worker_response wr;
    struct ipc_result r;
    char msg[4096];
    const char *type = native_job_result(j, &r, &wr, msg, sizeof msg);

    ip->hooks.result(j->ctx, &r, type, type ? msg : NULL, ip->arg);
}

static void
on_pool(evutil_socket_t fd, short what, void *arg)
{
    struct inproc *ip = arg;
    struct native_job *jobs;
    struct native_call *calls;

    (void)fd;
    (void)what;
    native_loader_take(ip->nl, &jobs, &calls);
    ip->walking = true;
    while (calls) {
        struct native_call *next = calls->next;
        if (ip->closing)
            native_call_reply(calls, 503, NULL, 0);
        else if (calls->is_log) {
            ip->hooks.log(calls->level, calls->text, ip->arg);
            native_call_reply(calls, 0, NULL, 0);
        } else {
            ip->hooks.call(calls, ip->arg);
        }
        calls = next;
    }
    while (jobs) {
        struct native_job *next = jobs->next;
        if (jobs->ctx && !ip->closing)
            deliver(ip, jobs);
        /* After the outcome was used: FreeResult exactly once. */
        native_job_free(jobs);
        jobs = next;
    }
    ip->walking = false;
    if (ip->closing)
        destroy(ip);
}

struct inproc *
inproc_open(struct event_base *base, int lib_fd, const char *label,
            const char *entry, const char *free_result,
            const struct native_identity *id, unsigned threads,
            const struct inproc_hooks *hooks, void *arg, char *err,
            size_t errlen)
{
    struct inproc *ip = calloc(1, sizeof *ip);

    if (ip == NULL || (ip->nl = native_loader_new()) == NULL) {
        snprintf(err, errlen, "cannot set up the loader: %s", strerror(errno));
        close(lib_fd);
        free(ip);
        return NULL;
    }
    ip->hooks = *hooks;
    ip->arg = arg;
    ip->pending_tail = &ip->pending;
    if (native_loader_open(ip->nl, lib_fd, label, entry, free_result, id, err,
                           errlen) != 0) {
        native_loader_close(ip->nl);
        free(ip);
        return NULL;
    }
    ip->ev = event_new(base, native_loader_fd(ip->nl), EV_READ | EV_PERSIST,
                       on_pool, ip);
    if (ip->ev == NULL || event_add(ip->ev, NULL) < 0 ||
        native_loader_threads(ip->nl, threads) != 0) {
        snprintf(err, errlen, "cannot start the worker's threads: %s",
                 strerror(errno ? errno : ENOMEM));
        if (ip->ev)
            event_free(ip->ev);
        native_loader_close(ip->nl);
        free(ip);
        return NULL;
    }
    return ip;
}

struct native_job *
inproc_submit(struct inproc *ip, const uint8_t *event, size_t len, void *ctx)
{
    struct native_job *j = native_job_new(event, len);

    if (j == NULL)
        return NULL;
    j->ctx = ctx;
    *ip->pending_tail = j;
    ip->pending_tail = &j->next;
    return j;
}

void
inproc_flush(struct inproc *ip)
{
    native_loader_submit(ip->nl, ip->pending);
    ip->pending = NULL;
    ip->pending_tail = &ip->pending;
}

void
inproc_abandon(struct native_job *j)
{
    j->ctx = NULL;
}

unsigned
inproc_busy(const struct inproc *ip)
{
    return native_loader_busy(ip->nl);
}

void
inproc_close(struct inproc *ip)
{
    if (ip == NULL)
        return;
    if (ip->walking) {
        ip->closing = true;
        return;
    }
    destroy(ip);
}
