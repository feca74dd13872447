/*
 * request.c — one request of the admin API from its arrival to its answer
 * (api.h): made from libevent's request (method, decoded path and its
 * segments, query, peer), read (body, headers, query parameters) and
 * answered (JSON, error, text, a stream), the audit trail written on the
 * way out; and the small readers and writers of the JSON the routes share
 * (a body's optional members, an instant).
 *
 * Every answer frees the request; so does a client that hangs up in the
 * middle of a stream.  A client that hangs up before an answer only marks
 * the request gone: the handler still owns it, answers it once as always,
 * and that late answer is dropped here.
 */
#include "config.h"

#include "master/api/api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "lib/timestamp.h"
#include "master/core/audit.h"
#include "master/core/daemon.h"
#include "master/core/log.h"

/* ---- arrival --------------------------------------------------------- */

static void
req_free(struct api_req *rq)
{
    if (rq->params) {
        evhttp_clear_headers(rq->params);
        free(rq->params);
    }
    free(rq->path);
    free(rq->query);
    free(rq->segbuf);
    free(rq);
}

static const char *
method_name(enum evhttp_cmd_type t)
{
    switch (t) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_HEAD:
        return "HEAD";
    case EVHTTP_REQ_PATCH:
        return "PATCH";
    default:
        return "OTHER";
    }
}

/* Who sent req: the peer's credentials on the control socket, else its TCP
 * address. */
static void
peer_of(struct evhttp_request *req, char *out, size_t len)
{
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    int fd = bev ? (int)bufferevent_getfd(bev) : -1;
    struct ucred cred;
    socklen_t cl = sizeof cred;

    if (fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 &&
        cl == sizeof cred && cred.pid > 0) {
        snprintf(out, len, "uid=%u gid=%u pid=%d", (unsigned)cred.uid,
                 (unsigned)cred.gid, (int)cred.pid);
        return;
    }
    char *host = NULL;
    ev_uint16_t port = 0;
    if (c)
        evhttp_connection_get_peer(c, &host, &port);
    snprintf(out, len, "tcp %s:%u", host ? host : "?", (unsigned)port);
}

static int
split_path(struct api_req *rq)
{
    rq->segbuf = strdup(rq->path);
    if (rq->segbuf == NULL)
        return -1;
    for (char *s = strtok(rq->segbuf, "/"); s; s = strtok(NULL, "/")) {
        if (rq->nseg == API_MAX_SEGMENTS)
            return -1;
        rq->seg[rq->nseg++] = s;
    }
    return 0;
}

static void
on_client_gone(struct evhttp_connection *c, void *arg)
{
    (void)c;
    struct api_req *rq = arg;
    rq->gone = true;
    if (rq->stream_gone) {
        /* A stream: libevent detached the request in the middle of its
         * answer and leaves it to us. */
        rq->stream_gone(rq->stream_arg);
        if (evhttp_request_get_connection(rq->req) == NULL)
            evhttp_request_free(rq->req);
        req_free(rq);
    }
}

struct api_req *
api_req_new(struct api *api, struct daemon *d, struct evhttp_request *req)
{
    struct api_req *rq = calloc(1, sizeof *rq);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;

    if (rq == NULL) {
        evhttp_send_error(req, 500, "out of memory");
        return NULL;
    }
    rq->api = api;
    rq->d = d;
    rq->req = req;
    rq->method = method_name(evhttp_request_get_command(req));
    rq->path = evhttp_uridecode(path ? path : "/", 0, NULL);
    rq->query = query ? strdup(query) : NULL;
    peer_of(req, rq->peer, sizeof rq->peer);
    rq->mutation =
        strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0;
    evhttp_connection_set_closecb(evhttp_request_get_connection(req),
                                  on_client_gone, rq);

    if (rq->path == NULL || split_path(rq) != 0) {
        if (rq->path == NULL)
            rq->path = strdup("?");
        api_error(rq, 404, "not_found", "no such route");
        return NULL;
    }
    return rq;
}

/* ---- reading ---------------------------------------------------------- */

const unsigned char *
api_body_raw(struct api_req *rq, size_t *len)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(rq->req);
    *len = evbuffer_get_length(in);
    return evbuffer_pullup(in, -1);
}

const char *
api_header(struct api_req *rq, const char *name)
{
    return evhttp_find_header(evhttp_request_get_input_headers(rq->req), name);
}

json_t *
api_body_object(struct api_req *rq)
{
    size_t len;
    const unsigned char *raw = api_body_raw(rq, &len);
    json_error_t jerr;

    if (len == 0) {
        api_error(rq, 400, "invalid_json", "the request needs a JSON body");
        return NULL;
    }
    json_t *j =
        json_loadb((const char *)raw, len, JSON_REJECT_DUPLICATES, &jerr);
    if (j == NULL) {
        api_error(rq, 400, "invalid_json", "%s at line %d column %d", jerr.text,
                  jerr.line, jerr.column);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        api_error(rq, 400, "invalid_json", "the body must be a JSON object");
        return NULL;
    }
    return j;
}

const char *
api_query(struct api_req *rq, const char *name)
{
    if (rq->query == NULL)
        return NULL;
    if (rq->params == NULL) {
        rq->params = calloc(1, sizeof *rq->params);
        if (rq->params == NULL)
            return NULL;
        TAILQ_INIT(rq->params);
        if (evhttp_parse_query_str(rq->query, rq->params) != 0)
            return NULL;
    }
    return evhttp_find_header(rq->params, name);
}

int
api_member_uint(struct api_req *rq, json_t *obj, const char *key,
                const char *what, uint32_t min, uint32_t max, uint32_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min ||
        json_integer_value(v) > max) {
        api_error(rq, 400, "invalid_argument",
                  "%s%s must be an integer from %" PRIu32 " to %" PRIu32, what,
                  key, min, max);
        return -1;
    }
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

int
api_member_str(struct api_req *rq, json_t *obj, const char *key,
               const char **out)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        api_error(rq, 400, "invalid_argument", "%s must be a string", key);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

/* ---- answers ---------------------------------------------------------- */

static void
send_json(struct api_req *rq, int status, json_t *body)
{
    struct evbuffer *out = evbuffer_new();
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    struct evkeyvalq *h = evhttp_request_get_output_headers(rq->req);

    if (text) {
        evbuffer_add(out, text, strlen(text));
        evbuffer_add(out, "\n", 1);
        evhttp_add_header(h, "Content-Type", "application/json");
    }
    /* libevent knows no phrase for 507 (RFC 4918). */
    evhttp_send_reply(rq->req, status,
                      status == 507 ? "Insufficient Storage" : NULL, out);
    evbuffer_free(out);
    free(text);
}

static void
finish(struct api_req *rq, int status, json_t *body, const char *code)
{
    if (rq->mutation)
        audit_write(rq->d, rq->peer, rq->method, rq->path, rq->worker, status,
                    code);
    if (!rq->gone) {
        /* Before the answer: sending may free the request. */
        struct evhttp_connection *c = evhttp_request_get_connection(rq->req);
        if (c)
            evhttp_connection_set_closecb(c, NULL, NULL);
        send_json(rq, status, body);
    }
    json_decref(body);
    req_free(rq);
}

void
api_reply(struct api_req *rq, int status, json_t *body)
{
    finish(rq, status, body, NULL);
}

json_t *
api_json_time(int64_t ms)
{
    char buf[TIMESTAMP_SIZE];
    if (ms == 0)
        return json_null();
    timestamp_format(ms, buf);
    return json_string(buf);
}

static void verror(struct api_req *rq, int status, const char *code,
                   json_t *extra, const char *fmt, va_list ap)
    __attribute__((format(printf, 5, 0)));

static void
verror(struct api_req *rq, int status, const char *code, json_t *extra,
       const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    json_t *e = json_pack("{s:s, s:s}", "code", code, "message", msg);
    if (extra) {
        json_object_update(e, extra);
        json_decref(extra);
    }
    log_info("api: %s %s from %s: %d %s: %s", rq->method, rq->path, rq->peer,
             status, code, msg);
    finish(rq, status, json_pack("{s:o}", "error", e), code);
}

void
api_error(struct api_req *rq, int status, const char *code, const char *fmt,
          ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(rq, status, code, NULL, fmt, ap);
    va_end(ap);
}

void
api_error_extra(struct api_req *rq, int status, const char *code, json_t *extra,
                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(rq, status, code, extra, fmt, ap);
    va_end(ap);
}

bool
api_refuse_while_recovering(struct api_req *rq)
{
    if (rq->d->recovery != DAEMON_RECOVERY_RUNNING)
        return false;
    evhttp_add_header(evhttp_request_get_output_headers(rq->req), "Retry-After",
                      "1");
    api_error(rq, 503, "recovering",
              "workers are being recovered; retry shortly");
    return true;
}

void
api_reply_text(struct api_req *rq, int status, const char *content_type,
               const char *text, size_t len)
{
    if (!rq->gone) {
        struct evhttp_connection *c = evhttp_request_get_connection(rq->req);
        struct evbuffer *out = evbuffer_new();
        if (c)
            evhttp_connection_set_closecb(c, NULL, NULL);
        evhttp_add_header(evhttp_request_get_output_headers(rq->req),
                          "Content-Type", content_type);
        if (out)
            evbuffer_add(out, text, len);
        evhttp_send_reply(rq->req, status, NULL, out);
        if (out)
            evbuffer_free(out);
    }
    req_free(rq);
}

void
api_stream_start(struct api_req *rq, const char *content_type,
                 void (*gone)(void *arg), void *arg)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(rq->req);

    rq->stream_gone = gone;
    rq->stream_arg = arg;
    evhttp_add_header(h, "Content-Type", content_type);
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_send_reply_start(rq->req, 200, "OK");
}

int
api_stream_write(struct api_req *rq, const char *data, size_t len,
                 size_t max_pending)
{
    struct evhttp_connection *c = evhttp_request_get_connection(rq->req);
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    struct evbuffer *out;

    if (bev && evbuffer_get_length(bufferevent_get_output(bev)) > max_pending)
        return -1;
    out = evbuffer_new();
    if (out == NULL)
        return -1;
    evbuffer_add(out, data, len);
    evhttp_send_reply_chunk(rq->req, out);
    evbuffer_free(out);
    return 0;
}

void
api_stream_end(struct api_req *rq)
{
    struct evhttp_connection *c = evhttp_request_get_connection(rq->req);

    if (c)
        evhttp_connection_set_closecb(c, NULL, NULL);
    evhttp_send_reply_end(rq->req);
    req_free(rq);
}
