/*
 * route_invoke.c — POST /v1/workers/{id}/invoke (DESIGN §8): one event to
 * one worker, its outputs in the answer instead of on their topics.
 *
 * The event is converted once (events_from_json(), the edge where it
 * enters) and handed to the message flow as a buffer; the answer is the
 * worker's error (422 worker_error with its type, exception type and
 * traceback), nothing (204), its one output or an array of them, each
 * output as flow_prepare_output() would publish it (correlation carried
 * over from the input).  An invoke shares the worker's queue
 * (queue_max_events): when it is full the answer is 503 subscriber_full
 * with Retry-After, as for a publish (admit.h).
 *
 * Invariant: the struct invoke (and its event, which the flow borrows)
 * lives until on_invoked() runs, which the flow promises exactly once for
 * an accepted event; a refused one is answered and freed here.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include <jansson.h>

#include "ipc/cloudevent.h"
#include "master/api/api.h"
#include "master/api/events.h"
#include "master/broker/flow.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/workers/worker.h"

struct invoke {
    struct api_req *rq;
    struct ipc_fb_builder event;
};

/* An output as it would be published: correlation carried over. */
static json_t *
invoke_output(const struct ipc_cloudevent *in, const struct ipc_result *r,
              uint32_t i)
{
    struct ipc_cloudevent o, p;
    struct ipc_fb_builder fb;
    char err[256];
    json_t *j;

    ipc_cloudevent_list_get(&r->outputs, i, &o);
    ipc_fb_builder_init(&fb);
    if (flow_prepare_output(in, &o, 0, &fb, err, sizeof err) == 0) {
        ipc_cloudevent_decode_trusted(fb.buf, &p); /* just written */
        j = events_to_json(&p);
    } else {
        j = events_to_json(&o);
    }
    ipc_fb_builder_free(&fb);
    return j;
}

static void
on_invoked(struct worker *w, const struct ipc_result *r, const char *error_type,
           const char *message, void *arg)
{
    struct invoke *iv = arg;
    struct ipc_cloudevent in;
    (void)w;

    if (error_type || (r && r->error.type.ptr)) {
        json_t *extra = json_object();
        const struct ipc_error *e = r && r->error.type.ptr ? &r->error : NULL;
        json_object_set_new(extra, "error_type",
                            e ? json_stringn(e->type.ptr, e->type.len)
                              : json_string(error_type));
        if (e && e->exception_type.ptr)
            json_object_set_new(
                extra, "exception_type",
                json_stringn(e->exception_type.ptr, e->exception_type.len));
        if (e && e->traceback.ptr)
            json_object_set_new(
                extra, "traceback",
                json_stringn(e->traceback.ptr, e->traceback.len));
        if (e && e->message.ptr)
            api_error_extra(iv->rq, 422, "worker_error", extra, "%.*s",
                            (int)e->message.len, e->message.ptr);
        else
            api_error_extra(iv->rq, 422, "worker_error", extra, "%s",
                            message ? message : error_type);
    } else if (r->outputs.n == 0) {
        api_reply(iv->rq, 204, NULL);
    } else {
        /* Built by events_from_json(): decoded, not verified again. */
        ipc_cloudevent_decode_trusted(iv->event.buf, &in);
        if (r->outputs.n == 1) {
            api_reply(iv->rq, 200, invoke_output(&in, r, 0));
        } else {
            json_t *arr = json_array();
            for (uint32_t i = 0; i < r->outputs.n; i++)
                json_array_append_new(arr, invoke_output(&in, r, i));
            api_reply(iv->rq, 200, arr);
        }
    }
    ipc_fb_builder_free(&iv->event);
    free(iv);
}

void
api_invoke_route(struct api_req *rq, struct worker *w)
{
    json_t *body = api_body_object(rq);
    char err[256];
    struct invoke *iv;

    if (body == NULL)
        return;
    if (w->status != WORKER_RUNNING) {
        api_error(rq, 409, "conflict", "worker %s is %s", w->name,
                  worker_status_name(w->status));
        goto out;
    }
    iv = calloc(1, sizeof *iv);
    if (iv == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        goto out;
    }
    iv->rq = rq;
    ipc_fb_builder_init(&iv->event);
    if (events_from_json(body, &iv->event, err, sizeof err) != 0) {
        api_error(rq, 400, "invalid_argument", "%s", err);
        ipc_fb_builder_free(&iv->event);
        free(iv);
        goto out;
    }
    /* flow_invoke stamps the worker's config on its own copy, if any, and
     * borrows iv->event until on_invoked (which frees it). */
    if (flow_invoke(rq->d->flow, w, iv->event.buf, iv->event.len, on_invoked,
                    iv) != 0) {
        if (errno == EAGAIN) {
            api_backpressure_refuse(
                rq, "subscriber_full", json_pack("{s:s}", "subscriber", w->id),
                "the queue of worker %s holds queue_max_events (%u) events "
                "and invokes already; retry once it drains",
                w->name, rq->d->conf->queue_max_events);
        } else {
            api_error(rq, 409, "conflict", "worker %s cannot take events now",
                      w->name);
        }
        ipc_fb_builder_free(&iv->event);
        free(iv);
    }
out:
    json_decref(body);
}
