/*
 * events_http.c — the CloudEvents HTTP binding on the admin API's routes
 * (events_http.h): reading a request's events in its mode, answering
 * events in the mode asked.  Publishing (route_topics.c) and invoking
 * (route_invoke.c) share it, so that both take the same modes with the
 * same rules and messages.
 *
 * Why this way: the conversion itself stays in events.c (structured and
 * binary in) and events_binary.c (binary out), which know nothing of
 * HTTP requests and are unit-tested and fuzzed alone; this file only
 * picks the mode from the headers, gathers the ce-* headers and writes
 * the answer's head.
 *
 * Invariant: every failure is answered here with a message that names
 * what to send instead; the caller answers only on success.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "master/api/events_http.h"
#include "master/api/http_server.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"

static bool
content_type_is(const char *ct, const char *want)
{
    size_t n = strlen(want);
    return ct && strncasecmp(ct, want, n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* Binary mode: the ce-* headers and the body, as a batch of one.  On
 * failure *status is the answer's (400, or 431 for a header too large). */
static int
binary_event(struct api_req *rq, struct events_batch *batch, int *status,
             char *err, size_t errlen)
{
    size_t nh;
    const struct http_header *h = api_headers(rq, &nh);
    const char *names[EVENTS_MAX_EXTENSIONS + 16];
    const char *values[EVENTS_MAX_EXTENSIONS + 16];
    char *owned[EVENTS_MAX_EXTENSIONS + 16];
    size_t n = 0, nowned = 0, len;
    const unsigned char *body = api_body_raw(rq, &len);
    int rc = -1;

    for (size_t i = 0; i < nh; i++) {
        const struct http_header *kv = &h[i];
        bool ce = strncasecmp(kv->name, "ce-", 3) == 0;
        if (!ce && strcasecmp(kv->name, "Content-Type") != 0)
            continue;
        if (ce && kv->value_len > rq->d->conf->max_ce_header_bytes) {
            snprintf(err, errlen,
                     "header %s has %zu bytes; the limit "
                     "(max_ce_header_bytes) is %llu",
                     kv->name, kv->value_len,
                     (unsigned long long)rq->d->conf->max_ce_header_bytes);
            *status = 431;
            goto out;
        }
        if (n == sizeof names / sizeof names[0]) {
            snprintf(err, errlen, "too many ce-* headers");
            goto out;
        }
        /* ce-content-type stays unstripped: it fails the name rule
         * (events.h) rather than pass for Content-Type. */
        const char *from = ce && strcasecmp(kv->name, "ce-content-type") != 0
                               ? kv->name + 3
                               : kv->name;
        char *name = strdup(from);
        if (name == NULL) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        for (char *c = name; *c; c++)
            if (*c >= 'A' && *c <= 'Z')
                *c = (char)(*c - 'A' + 'a');
        owned[nowned++] = name;
        names[n] = name;
        values[n] = kv->value;
        n++;
    }
    struct ipc_fb_builder fb;
    ipc_fb_builder_init(&fb);
    if (events_from_binary(names, values, n, body, len, &fb, err, errlen) !=
        0) {
        ipc_fb_builder_free(&fb);
        goto out;
    }
    size_t *o = malloc(2 * sizeof *o);
    if (o == NULL) {
        ipc_fb_builder_free(&fb);
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    events_batch_free(batch);
    batch->fb = fb;
    batch->offsets = o;
    batch->cap = 2;
    o[0] = 0;
    o[1] = fb.len;
    batch->n = 1;
    rc = 0;
out:
    for (size_t i = 0; i < nowned; i++)
        free(owned[i]);
    return rc;
}

/* Whether the request has a ce-* header, the mark of binary mode. */
static bool
has_ce_header(struct api_req *rq)
{
    size_t n;
    const struct http_header *h = api_headers(rq, &n);

    for (size_t i = 0; i < n; i++)
        if (strncasecmp(h[i].name, "ce-", 3) == 0)
            return true;
    return false;
}

/* Binary mode without a single ce-* header is almost always a structured
 * event sent with the wrong Content-Type: the message says what to send
 * instead of which attribute is missing. */
static void
binary_without_headers(struct api_req *rq, const char *ct, char *err,
                       size_t errlen)
{
    size_t len;
    const unsigned char *raw = api_body_raw(rq, &len);
    json_t *body = len ? json_loadb((const char *)raw, len, 0, NULL) : NULL;
    json_t *first = json_is_array(body) ? json_array_get(body, 0) : body;
    bool structured = json_object_get(first, "specversion") != NULL;
    bool batch = json_is_array(body);

    json_decref(body);
    if (structured)
        snprintf(err, errlen,
                 "the body is a structured CloudEvent%s sent as Content-Type "
                 "%s, which means binary mode: send it as %s, or send the "
                 "data as the body with the attributes in ce-specversion, "
                 "ce-id, ce-source and ce-type headers",
                 batch ? " batch" : "", ct ? ct : "(none)",
                 batch ? "application/cloudevents-batch+json"
                       : "application/cloudevents+json");
    else
        snprintf(err, errlen,
                 "binary mode (Content-Type %s) needs the event's attributes "
                 "in ce-* headers (ce-specversion, ce-id, ce-source, "
                 "ce-type) and none was sent; a structured event is sent as "
                 "application/cloudevents+json",
                 ct ? ct : "(none)");
}

/* A batch body: a JSON array of at most max_batch_events.  The scanner
 * reads the common body; what it leaves (a broken rule, an unusual shape)
 * takes the jansson path, which gives every message. */
static int
read_batch(struct api_req *rq, struct events_batch *batch)
{
    size_t len;
    const unsigned char *raw = api_body_raw(rq, &len);
    if (events_scan_body(raw, len, EVENTS_SCAN_BATCH,
                         rq->d->conf->max_batch_events,
                         batch) == EVENTS_SCAN_OK)
        return 0;
    json_error_t je;
    json_t *body = json_loadb((const char *)raw, len, 0, &je);
    char err[512];

    if (body == NULL) {
        api_error(rq, 400, "invalid_json", "line %d: %s", je.line, je.text);
        return -1;
    }
    if (!json_is_array(body)) {
        json_decref(body);
        api_error(rq, 400, "invalid_argument",
                  "a batch is a JSON array of CloudEvents");
        return -1;
    }
    if (json_array_size(body) > rq->d->conf->max_batch_events) {
        size_t n = json_array_size(body);
        json_decref(body);
        api_error(rq, 413, "payload_too_large",
                  "the batch has %zu events; the limit "
                  "(max_batch_events) is %u",
                  n, rq->d->conf->max_batch_events);
        return -1;
    }
    int rc = events_batch_from_json(body, batch, err, sizeof err);
    json_decref(body);
    if (rc != 0)
        api_error(rq, 400, "invalid_argument", "%s", err);
    return rc;
}

/* One structured event (a JSON object body): the scanner first, as for a
 * batch; api_body_object() loads it as the scanner reads it (duplicate
 * members refused). */
static int
read_structured(struct api_req *rq, struct events_batch *batch)
{
    size_t len;
    const unsigned char *raw = api_body_raw(rq, &len);
    if (events_scan_body(raw, len, EVENTS_SCAN_ONE, 1, batch) == EVENTS_SCAN_OK)
        return 0;
    json_t *body = api_body_object(rq);
    char err[512];

    if (body == NULL)
        return -1;
    json_t *arr = json_pack("[O]", body);
    int rc = events_batch_from_json(arr, batch, err, sizeof err);
    json_decref(arr);
    json_decref(body);
    if (rc != 0) {
        /* "event 0: ..." reads oddly for one event. */
        const char *p = strncmp(err, "event 0: ", 9) == 0 ? err + 9 : err;
        api_error(rq, 400, "invalid_argument", "%s", p);
    }
    return rc;
}

int
events_http_read(struct api_req *rq, unsigned flags, struct events_batch *batch,
                 enum events_http_mode *mode)
{
    const char *ct = api_header(rq, "Content-Type");
    char err[512];
    int status = 400;

    if (content_type_is(ct, "application/cloudevents-batch+json")) {
        *mode = EVENTS_HTTP_BATCH;
        return read_batch(rq, batch);
    }
    if (content_type_is(ct, "application/cloudevents+json") ||
        ((flags & EVENTS_HTTP_PLAIN_JSON) && !has_ce_header(rq) &&
         (ct == NULL || content_type_is(ct, "application/json")))) {
        *mode = EVENTS_HTTP_STRUCTURED;
        return read_structured(rq, batch);
    }
    *mode = EVENTS_HTTP_BINARY;
    if (binary_event(rq, batch, &status, err, sizeof err) == 0)
        return 0;
    if (!has_ce_header(rq))
        binary_without_headers(rq, ct, err, sizeof err);
    api_error(rq, status,
              status == 431 ? "headers_too_large" : "invalid_argument", "%s",
              err);
    events_batch_free(batch);
    return -1;
}

/* Answers with JSON text of content type ct. */
static void
reply_json(struct api_req *rq, int status, const char *ct, json_t *j)
{
    size_t len;
    char *text = j ? events_json_dumps(j, &len) : NULL;

    json_decref(j);
    if (text == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        return;
    }
    api_reply_text(rq, status, ct, text, len);
    free(text);
}

void
events_http_reply(struct api_req *rq, int status, enum events_http_mode mode,
                  const struct ipc_cloudevent *evs, size_t n)
{
    bool array = n > 1 || mode == EVENTS_HTTP_BATCH;

    if (n == 0) {
        api_reply(rq, 204, NULL);
    } else if (array || mode == EVENTS_HTTP_STRUCTURED) {
        const char *ct = array ? "application/cloudevents-batch+json"
                               : "application/cloudevents+json";
        size_t len;
        /* Written straight from the buffers; what the writer leaves takes
         * the jansson path, which writes the same bytes. */
        const char *text = events_answer_json(evs, n, array, &len);
        if (text) {
            api_reply_text(rq, status, ct, text, len);
            return;
        }
        json_t *j = array ? json_array() : events_to_json(&evs[0]);
        for (size_t i = 0; array && j && i < n; i++)
            if (json_array_append_new(j, events_to_json(&evs[i]))) {
                json_decref(j);
                j = NULL;
            }
        reply_json(rq, status, ct, j);
    } else {
        char ctbuf[256];
        const char *ct =
            events_binary_content_type(&evs[0], ctbuf, sizeof ctbuf);
        size_t flen;
        char *fields = events_to_headers(&evs[0], &flen);
        if (fields == NULL) {
            api_error(rq, 500, "internal", "out of memory");
            return;
        }
        api_reply_fields(rq, status, ct, fields, flen, evs[0].data.ptr,
                         evs[0].data.ptr ? evs[0].data.len : 0);
        free(fields);
    }
}
