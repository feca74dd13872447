/*
 * route_invoke.c — POST /v1/workers/{id}/invoke (DESIGN §8): events to
 * one worker, their outputs in the answer instead of on their topics.
 *
 * The request is read in any mode of the CloudEvents HTTP binding
 * (events_http.h: structured, binary, batch, and the original plain JSON
 * object), each event converted once at this edge and handed to the
 * message flow as a buffer.  The answer is in the mode asked
 * (events_http_reply()): nothing is 204, one output of a structured or
 * binary request comes back in that mode, several outputs (or any
 * answer to a batch) are a batch, in the order of the inputs.  Each
 * output is as flow_prepare_output() would publish it (correlation
 * carried over from its input).  A worker's error is 422 worker_error
 * with its type, exception type and traceback (and, for a batch, the
 * index of the event that failed; the first by index wins).  An invoke
 * shares the worker's queue (queue_max_events): when it is full the
 * answer is 503 subscriber_full with Retry-After, as for a publish
 * (admit.h); in a batch the events before the refused one have run
 * (the message says how many).
 *
 * The common case, one event with one output, allocates little: the
 * answer's decoded outputs are on the stack up to INVOKE_STACK_OUTPUTS,
 * and a single event's struct invoke_one is inside the struct invoke.
 *
 * Invariant: the struct invoke (and its input events, which the flow
 * borrows) lives until every accepted event's on_invoked() has run
 * (promised exactly once each) and the submitting loop has ended; the
 * last of those answers and frees it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ipc/cloudevent.h"
#include "master/api/api.h"
#include "master/api/events.h"
#include "master/api/events_http.h"
#include "master/broker/flow.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/workers/worker.h"

struct invoke_one {
    struct invoke *iv;
    size_t index;
    struct ipc_fb_builder *outs; /* prepared outputs */
    uint32_t nouts;
    json_t *error; /* the error object's members; message in "message" */
};

/* Outputs decoded on the stack for the answer; more are allocated. */
#define INVOKE_STACK_OUTPUTS 8

struct invoke {
    struct api_req *rq;
    enum events_http_mode mode;
    struct events_batch in;
    struct invoke_one *one;
    size_t pending; /* accepted events not yet answered, +1 while submitting */
    size_t submitted;
    int refused; /* errno of the refused submission, 0 when none */
    /* The worker's id and name when refused (it may be gone by the time
     * the events before answer). */
    char *who_id, *who_name;
    struct invoke_one one1; /* one: a single event's */
};

/* Output i of r as it would be published (correlation carried over), into
 * fb; a copy of the output itself when that fails. */
static void
prepare_output(const struct ipc_cloudevent *in, const struct ipc_result *r,
               uint32_t i, struct ipc_fb_builder *fb)
{
    struct ipc_cloudevent o;
    char err[256];

    ipc_cloudevent_list_get(&r->outputs, i, &o);
    ipc_fb_builder_init(fb);
    if (flow_prepare_output(in, &o, 0, fb, err, sizeof err) != 0) {
        ipc_fb_builder_reset(fb);
        ipc_cloudevent_encode(fb, &o);
    }
}

static json_t *
error_object(const struct ipc_result *r, const char *error_type,
             const char *message)
{
    const struct ipc_error *e = r && r->error.type.ptr ? &r->error : NULL;
    json_t *j = json_object();

    json_object_set_new(j, "error_type",
                        e ? json_stringn(e->type.ptr, e->type.len)
                          : json_string(error_type));
    if (e && e->exception_type.ptr)
        json_object_set_new(
            j, "exception_type",
            json_stringn(e->exception_type.ptr, e->exception_type.len));
    if (e && e->traceback.ptr)
        json_object_set_new(j, "traceback",
                            json_stringn(e->traceback.ptr, e->traceback.len));
    if (e && e->message.ptr)
        json_object_set_new(j, "message",
                            json_stringn(e->message.ptr, e->message.len));
    else
        json_object_set_new(j, "message",
                            json_string(message ? message : error_type));
    return j;
}

static void
invoke_free(struct invoke *iv)
{
    for (size_t i = 0; iv->one && i < iv->in.n; i++) {
        struct invoke_one *one = &iv->one[i];
        for (uint32_t k = 0; k < one->nouts; k++)
            ipc_fb_builder_free(&one->outs[k]);
        free(one->outs);
        json_decref(one->error);
    }
    if (iv->one != &iv->one1)
        free(iv->one);
    free(iv->who_id);
    free(iv->who_name);
    events_batch_free(&iv->in);
    free(iv);
}

/* Every output of every input, in order, answered in the mode asked. */
static void
answer_outputs(struct invoke *iv)
{
    size_t n = 0, k = 0;
    struct ipc_cloudevent stack[INVOKE_STACK_OUTPUTS], *evs = stack;

    for (size_t i = 0; i < iv->submitted; i++)
        n += iv->one[i].nouts;
    if (n == 0) {
        events_http_reply(iv->rq, 200, iv->mode, NULL, 0);
        return;
    }
    if (n > INVOKE_STACK_OUTPUTS)
        evs = calloc(n, sizeof *evs);
    if (evs == NULL) {
        api_error(iv->rq, 500, "internal", "out of memory");
        return;
    }
    for (size_t i = 0; i < iv->submitted; i++)
        for (uint32_t j = 0; j < iv->one[i].nouts; j++)
            /* Written by prepare_output(): decoded, not verified again. */
            ipc_cloudevent_decode_trusted(iv->one[i].outs[j].buf, &evs[k++]);
    events_http_reply(iv->rq, 200, iv->mode, evs, n);
    if (evs != stack)
        free(evs);
}

static void
answer(struct invoke *iv)
{
    struct api_req *rq = iv->rq;

    for (size_t i = 0; i < iv->submitted; i++) {
        json_t *e = iv->one[i].error;
        if (e == NULL)
            continue;
        json_t *extra = json_deep_copy(e);
        json_t *msg = json_object_get(e, "message");
        json_object_del(extra, "message");
        if (iv->mode == EVENTS_HTTP_BATCH)
            json_object_set_new(extra, "index", json_integer((json_int_t)i));
        api_error_extra(rq, 422, "worker_error", extra, "%s",
                        json_string_value(msg));
        return;
    }
    if (iv->refused == EAGAIN) {
        api_backpressure_refuse(
            rq, "subscriber_full",
            json_pack("{s:s, s:I}", "subscriber", iv->who_id, "invoked",
                      (json_int_t)iv->submitted),
            "the queue of worker %s holds queue_max_events (%u) events "
            "and invokes already; retry once it drains (%zu of %zu events "
            "invoked)",
            iv->who_name, rq->d->conf->queue_max_events, iv->submitted,
            iv->in.n);
    } else if (iv->refused == ENOMEM) {
        api_error(rq, 500, "internal", "out of memory");
    } else if (iv->refused) {
        api_error(rq, 409, "conflict",
                  "worker %s cannot take events now (%zu of %zu events "
                  "invoked)",
                  iv->who_name, iv->submitted, iv->in.n);
    } else {
        answer_outputs(iv);
    }
}

static void
settle(struct invoke *iv)
{
    if (--iv->pending > 0)
        return;
    answer(iv);
    invoke_free(iv);
}

static void
on_invoked(struct worker *w, const struct ipc_result *r, const char *error_type,
           const char *message, void *arg)
{
    struct invoke_one *one = arg;
    struct invoke *iv = one->iv;
    (void)w;

    if (error_type || (r && r->error.type.ptr)) {
        one->error = error_object(r, error_type, message);
    } else if (r->outputs.n > 0) {
        size_t len;
        struct ipc_cloudevent in;
        /* Built by events.c: decoded, not verified again. */
        ipc_cloudevent_decode_trusted(
            events_batch_get(&iv->in, one->index, &len), &in);
        one->outs = calloc(r->outputs.n, sizeof *one->outs);
        if (one->outs == NULL) {
            one->error = error_object(NULL, "internal", "out of memory");
        } else {
            for (uint32_t i = 0; i < r->outputs.n; i++)
                prepare_output(&in, r, i, &one->outs[i]);
            one->nouts = r->outputs.n;
        }
    }
    settle(iv);
}

void
api_invoke_route(struct api_req *rq, struct worker *w)
{
    struct invoke *iv = calloc(1, sizeof *iv);

    if (iv == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        return;
    }
    iv->rq = rq;
    events_batch_init(&iv->in);
    if (events_http_read(rq, EVENTS_HTTP_PLAIN_JSON, &iv->in, &iv->mode) != 0) {
        invoke_free(iv);
        return;
    }
    if (w->nhistory == 0) {
        api_workers_refuse_no_code(rq, w);
        invoke_free(iv);
        return;
    }
    if (w->status != WORKER_RUNNING) {
        api_error(rq, 409, "conflict", "worker %s is %s", w->name,
                  worker_status_name(w->status));
        invoke_free(iv);
        return;
    }
    iv->one = iv->in.n <= 1 ? &iv->one1 : calloc(iv->in.n, sizeof *iv->one);
    if (iv->one == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        invoke_free(iv);
        return;
    }
    /* One for the loop: an answer that comes at once answers nothing
     * before every event is submitted. */
    iv->pending = 1;
    for (size_t i = 0; i < iv->in.n; i++) {
        size_t len;
        const uint8_t *ev = events_batch_get(&iv->in, i, &len);
        iv->one[i].iv = iv;
        iv->one[i].index = i;
        iv->pending++;
        /* flow_invoke stamps the worker's config on its own copy, if any,
         * and borrows ev until on_invoked. */
        if (flow_invoke(rq->d->flow, w, ev, len, on_invoked, &iv->one[i]) !=
            0) {
            iv->pending--;
            iv->refused = errno ? errno : EINVAL;
            iv->who_id = strdup(w->id);
            iv->who_name = strdup(w->name);
            if (iv->who_id == NULL || iv->who_name == NULL)
                iv->refused = ENOMEM;
            break;
        }
        iv->submitted++;
    }
    settle(iv);
}
