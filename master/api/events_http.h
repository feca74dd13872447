/*
 * events_http.h — the CloudEvents HTTP protocol binding 1.0.2 on the
 * admin API's routes, both ways: the events of a request in whichever
 * mode it was sent (structured, batched or binary), and an answer of
 * events in the mode the request was sent in (events_http.c).
 *
 * The modes, by the request's Content-Type and headers:
 * - application/cloudevents-batch+json: a JSON array of structured
 *   events (at most max_batch_events), answered as a batch;
 * - application/cloudevents+json: one structured event;
 * - with any ce-* header: binary mode (the headers are the attributes,
 *   the body the data, Content-Type its datacontenttype);
 * - otherwise binary mode too, except where a route takes a plain JSON
 *   object as a structured event (EVENTS_HTTP_PLAIN_JSON: invoke's
 *   original shape, application/json or no Content-Type).
 */
#ifndef WM_MASTER_EVENTS_HTTP_H
#define WM_MASTER_EVENTS_HTTP_H

#include <stddef.h>

#include "ipc/cloudevent.h"
#include "master/api/api.h"
#include "master/api/events.h"

enum events_http_mode {
    EVENTS_HTTP_STRUCTURED,
    EVENTS_HTTP_BINARY,
    EVENTS_HTTP_BATCH,
};

/* Flags of events_http_read(). */
#define EVENTS_HTTP_PLAIN_JSON 1u

/* Reads the events of rq into batch (initialised by events_batch_init()
 * and emptied first) and their mode into
 * *mode.  Returns 0, or -1 having answered rq (400 invalid_json or
 * invalid_argument naming the event and attribute, 413 for a batch over
 * max_batch_events, 431 for a ce-* header over max_ce_header_bytes) with
 * batch empty. */
int events_http_read(struct api_req *rq, unsigned flags,
                     struct events_batch *batch, enum events_http_mode *mode);

/* Answers rq with status and the n events of evs in mode: none is 204; a
 * batch, or more than one event, is a JSON array as
 * application/cloudevents-batch+json; one event in structured mode is
 * application/cloudevents+json; one in binary mode is its ce-* headers
 * with its data as the body (events_to_headers()).  Frees rq. */
void events_http_reply(struct api_req *rq, int status,
                       enum events_http_mode mode,
                       const struct ipc_cloudevent *evs, size_t n);

#endif /* WM_MASTER_EVENTS_HTTP_H */
