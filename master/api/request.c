/*
 * request.c — one request of the admin API from its arrival to its answer
 * (api.h): made from the HTTP server's request (http_server.h: method,
 * decoded path and its segments, query, peer), read (body, headers, query
 * parameters) and
 * answered (JSON, error, text, a stream), the audit trail written on the
 * way out; and the small readers and writers of the JSON the routes share
 * (a body's optional members, an instant).
 *
 * Every answer frees the request; so does a client that hangs up in the
 * middle of a stream.  A request is one allocation: the structure, then
 * its decoded path, the path's segments and the raw query in the same
 * block (issue 24: no allocation churn per request).  A client that hangs
 * up before an answer only marks the request gone: the handler still owns
 * it, answers it once as always, and that late answer is dropped here.
 */
#include "config.h"

#include "master/api/api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hex.h"
#include "lib/timestamp.h"
#include "master/api/http_server.h"
#include "master/core/audit.h"
#include "master/core/daemon.h"
#include "master/core/log.h"

/* ---- arrival --------------------------------------------------------- */

static void
req_free(struct api_req *rq)
{
    free(rq->params);
    free(rq); /* path, segbuf and query are in its block */
}

/* Percent-decodes s[0, len) into out (at least len + 1 bytes), '+' as a
 * blank when plus; a '%' not followed by two hex digits stays as it is.
 * Returns -1 for an encoded NUL. */
static int
uri_decode(const char *s, size_t len, bool plus, char *out)
{
    char *o = out;
    for (size_t i = 0; i < len; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < len &&
            (hi = hex_digit_value(s[i + 1])) >= 0 &&
            (lo = hex_digit_value(s[i + 2])) >= 0) {
            if (hi == 0 && lo == 0)
                return -1;
            *o++ = (char)(hi * 16 + lo);
            i += 2;
        } else if (plus && s[i] == '+') {
            *o++ = ' ';
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    return 0;
}

/* The segments of rq->path into rq->segbuf (as long), split at '/'. */
static int
split_path(struct api_req *rq)
{
    strcpy(rq->segbuf, rq->path);
    for (char *s = strtok(rq->segbuf, "/"); s; s = strtok(NULL, "/")) {
        if (rq->nseg == API_MAX_SEGMENTS)
            return -1;
        rq->seg[rq->nseg++] = s;
    }
    return 0;
}

static void
on_client_gone(void *arg)
{
    struct api_req *rq = arg;
    rq->gone = true;
    if (rq->stream_gone) {
        /* A stream: it ends here, and the server frees its request. */
        rq->stream_gone(rq->stream_arg);
        req_free(rq);
    }
}

struct api_req *
api_req_new(struct api *api, struct daemon *d, struct http_request *req)
{
    size_t ql = req->query ? req->query_len + 1 : 0;
    struct api_req *rq = calloc(1, sizeof *rq + 2 * (req->path_len + 1) + ql);

    if (rq == NULL) {
        http_reply_error(req, 500, "internal", "out of memory");
        return NULL;
    }
    rq->api = api;
    rq->d = d;
    rq->hreq = req;
    rq->method = req->method;
    rq->path = (char *)(rq + 1);
    rq->segbuf = rq->path + req->path_len + 1;
    if (req->query) {
        rq->query = rq->segbuf + req->path_len + 1;
        memcpy(rq->query, req->query, req->query_len);
        rq->query[req->query_len] = '\0';
    }
    size_t pl = strlen(req->peer->text);
    if (pl >= sizeof rq->peer)
        pl = sizeof rq->peer - 1;
    memcpy(rq->peer, req->peer->text, pl);
    rq->peer[pl] = '\0';
    rq->mutation = !req->head && strcmp(rq->method, "GET") != 0;
    http_request_on_gone(req, on_client_gone, rq);

    if (uri_decode(req->path, req->path_len, false, rq->path) != 0 ||
        split_path(rq) != 0) {
        api_error(rq, 404, "not_found", "no such route");
        return NULL;
    }
    return rq;
}

/* ---- reading ---------------------------------------------------------- */

const unsigned char *
api_body_raw(struct api_req *rq, size_t *len)
{
    *len = rq->hreq->body_len;
    return rq->hreq->body;
}

const char *
api_header(struct api_req *rq, const char *name)
{
    return http_request_header(rq->hreq, name);
}

const struct http_header *
api_headers(struct api_req *rq, size_t *n)
{
    *n = rq->hreq->nheaders;
    return rq->hreq->headers;
}

void
api_reply_header(struct api_req *rq, const char *name, const char *value)
{
    if (http_request_add_header(rq->hreq, name, value) != 0)
        log_warning("api: %s %s: the answer's header %s does not fit",
                    rq->method, rq->path, name);
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

/* The query's parameters, decoded once (api.h: struct api_params). */
static struct api_params *
params_parse(const char *query)
{
    size_t len = strlen(query);
    struct api_params *p = malloc(sizeof *p + len + 1);
    if (p == NULL)
        return NULL;
    p->n = 0;
    char *buf = p->text;
    const char *s = query;
    while (*s && p->n < API_MAX_PARAMS) {
        const char *amp = strchr(s, '&');
        size_t n = amp ? (size_t)(amp - s) : strlen(s);
        const char *eq = memchr(s, '=', n);
        size_t kn = eq ? (size_t)(eq - s) : n;
        if (kn > 0) {
            char *k = buf;
            if (uri_decode(s, kn, true, k) == 0) {
                buf = k + strlen(k) + 1;
                char *v = buf;
                if (uri_decode(eq ? eq + 1 : s + n, eq ? n - kn - 1 : 0, true,
                               v) == 0) {
                    buf = v + strlen(v) + 1;
                    p->name[p->n] = k;
                    p->value[p->n] = v;
                    p->n++;
                } else {
                    buf = k;
                }
            }
        }
        s += n;
        if (*s == '&')
            s++;
    }
    return p;
}

const char *
api_query(struct api_req *rq, const char *name)
{
    if (rq->query == NULL)
        return NULL;
    if (rq->params == NULL && (rq->params = params_parse(rq->query)) == NULL)
        return NULL;
    for (unsigned i = 0; i < rq->params->n; i++)
        if (strcmp(rq->params->name[i], name) == 0)
            return rq->params->value[i];
    return NULL;
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

/* The body's JSON and a newline, dumped into a buffer on the stack when it
 * fits (a publish's ids, an error): no allocation for most answers. */
static void
send_json(struct api_req *rq, int status, json_t *body)
{
    char stack[2048], *text = stack;
    size_t len =
        body ? json_dumpb(body, stack, sizeof stack - 1, JSON_COMPACT) : 0;

    if (len > sizeof stack - 1) {
        text = malloc(len + 1);
        if (text == NULL || json_dumpb(body, text, len, JSON_COMPACT) != len) {
            free(text);
            text = stack;
            len = 0;
        }
    }
    if (len == 0) {
        http_reply(rq->hreq, status, NULL, NULL, 0);
    } else {
        text[len++] = '\n';
        http_reply(rq->hreq, status, "application/json", text, len);
    }
    if (text != stack)
        free(text);
}

/* Before any answer: the audit trail, and no gone callback any more. */
static void
answering(struct api_req *rq, int status, const char *code)
{
    if (rq->mutation)
        audit_write(rq->d, rq->peer, rq->principal.name, rq->method, rq->path,
                    rq->worker, status, code);
    http_request_on_gone(rq->hreq, NULL, NULL);
}

static void
finish(struct api_req *rq, int status, json_t *body, const char *code)
{
    /* A gone client's answer is dropped by the server, which frees its
     * request then. */
    answering(rq, status, code);
    if (rq->gone)
        http_reply(rq->hreq, status, NULL, NULL, 0);
    else
        send_json(rq, status, body);
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
    api_reply_header(rq, "Retry-After", "1");
    api_error(rq, 503, "recovering",
              "workers are being recovered; retry shortly");
    return true;
}

void
api_reply_text(struct api_req *rq, int status, const char *content_type,
               const char *text, size_t len)
{
    api_reply_fields(rq, status, content_type, NULL, 0, text, len);
}

void
api_reply_fields(struct api_req *rq, int status, const char *content_type,
                 const char *fields, size_t fields_len, const void *body,
                 size_t len)
{
    answering(rq, status, NULL);
    if (rq->gone)
        http_reply(rq->hreq, status, NULL, NULL, 0);
    else
        http_reply_fields(rq->hreq, status, content_type, fields, fields_len,
                          body, len);
    req_free(rq);
}

void
api_stream_start(struct api_req *rq, const char *content_type,
                 void (*gone)(void *arg), void *arg)
{
    rq->stream_gone = gone;
    rq->stream_arg = arg;
    http_request_add_header(rq->hreq, "Cache-Control", "no-cache");
    http_stream_start(rq->hreq, 200, content_type);
}

int
api_stream_write(struct api_req *rq, const char *data, size_t len,
                 size_t max_pending)
{
    return http_stream_write(rq->hreq, data, len, max_pending);
}

void
api_stream_end(struct api_req *rq)
{
    http_request_on_gone(rq->hreq, NULL, NULL);
    http_stream_end(rq->hreq);
    req_free(rq);
}
