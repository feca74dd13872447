/*
 * api.c — listeners, routing, bodies, errors and the audit trail of the
 * admin API (see api.h).
 *
 * Two listeners share one evhttp: the control socket (unix; trusted by its
 * file mode and group, each peer's uid/gid/pid logged) and, when `listen`
 * is set, TCP, where every request must carry `Authorization: Bearer
 * <token>` with the token of `token_file` (compared in constant time).
 *
 * Bodies: evhttp refuses bodies over twice max_body_bytes on its own (413
 * with its own page); up to that, requests over max_body_bytes get the
 * JSON `payload_too_large` error here.
 */
#include "config.h"

#include "master/api/api.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "master/core/audit.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/log.h"

#define TOKEN_MAX 512

struct api {
    struct daemon *d;
    struct evhttp *http;
    struct evhttp_bound_socket *unix_sock;
    struct evhttp_bound_socket *tcp_sock;
    char *unix_path;
    char token[TOKEN_MAX];
    size_t token_len;
};

/* ---- answers --------------------------------------------------------- */

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
    evhttp_send_reply(rq->req, status, NULL, out);
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

/* ---- bodies ---------------------------------------------------------- */

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

/* ---- routing --------------------------------------------------------- */

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

static void
peer_of(struct api *api, struct evhttp_request *req, char *out, size_t len)
{
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    int fd = bev ? (int)bufferevent_getfd(bev) : -1;
    struct ucred cred;
    socklen_t cl = sizeof cred;
    (void)api;

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

static bool
from_tcp(struct evhttp_request *req)
{
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = bev ? (int)bufferevent_getfd(bev) : -1;

    if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return true; /* unknown: demand the token */
    return ss.ss_family != AF_UNIX;
}

/* Constant-time comparison of the presented bearer token. */
static bool
token_ok(const struct api *api, const char *auth)
{
    static const char prefix[] = "Bearer ";
    if (api->token_len == 0 || auth == NULL ||
        strncmp(auth, prefix, sizeof prefix - 1) != 0)
        return false;
    const char *t = auth + sizeof prefix - 1;
    size_t n = strlen(t);
    unsigned char diff = n != api->token_len;
    for (size_t i = 0; i < api->token_len; i++)
        diff |= (unsigned char)api->token[i] ^ (unsigned char)t[i < n ? i : 0];
    return diff == 0;
}

static int
split_path(struct api_req *rq)
{
    rq->segbuf = strdup(rq->path);
    if (rq->segbuf == NULL)
        return -1;
    for (char *s = strtok(rq->segbuf, "/"); s; s = strtok(NULL, "/")) {
        if (rq->nseg == (int)(sizeof rq->seg / sizeof rq->seg[0]))
            return -1;
        rq->seg[rq->nseg++] = s;
    }
    return 0;
}

static bool
seg_is(const struct api_req *rq, int i, const char *s)
{
    return i < rq->nseg && strcmp(rq->seg[i], s) == 0;
}

static void
route(struct api_req *rq)
{
    if (seg_is(rq, 0, "health") && rq->nseg <= 2) {
        api_health_route(rq);
    } else if (seg_is(rq, 0, "v1") && seg_is(rq, 1, "workers")) {
        api_workers_route(rq);
    } else if (seg_is(rq, 0, "v1") && seg_is(rq, 1, "engines") &&
               rq->nseg == 2) {
        api_engines_route(rq);
    } else if (seg_is(rq, 0, "v1") && seg_is(rq, 1, "recover") &&
               rq->nseg == 2) {
        api_recover_route(rq);
    } else if (seg_is(rq, 0, "v1") && seg_is(rq, 1, "topics")) {
        api_topics_route(rq);
    } else if (seg_is(rq, 0, "metrics") && rq->nseg == 1) {
        api_metrics_route(rq);
    } else {
        api_error(rq, 404, "not_found", "no route %s %s", rq->method, rq->path);
    }
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct api *api = arg;
    struct api_req *rq = calloc(1, sizeof *rq);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *query = uri ? evhttp_uri_get_query(uri) : NULL;

    if (rq == NULL) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    rq->api = api;
    rq->d = api->d;
    rq->req = req;
    rq->method = method_name(evhttp_request_get_command(req));
    rq->path = evhttp_uridecode(path ? path : "/", 0, NULL);
    rq->query = query ? strdup(query) : NULL;
    peer_of(api, req, rq->peer, sizeof rq->peer);
    rq->mutation =
        strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0;
    evhttp_connection_set_closecb(evhttp_request_get_connection(req),
                                  on_client_gone, rq);

    if (rq->path == NULL || split_path(rq) != 0) {
        if (rq->path == NULL)
            rq->path = strdup("?");
        api_error(rq, 404, "not_found", "no such route");
        return;
    }
    if (from_tcp(req) &&
        !token_ok(api, evhttp_find_header(evhttp_request_get_input_headers(req),
                                          "Authorization"))) {
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "WWW-Authenticate", "Bearer");
        api_error(rq, 401, "unauthorized",
                  "a valid bearer token is required on TCP");
        return;
    }
    size_t len = evbuffer_get_length(evhttp_request_get_input_buffer(req));
    if (len > rq->d->conf->max_body_bytes) {
        api_error(rq, 413, "payload_too_large",
                  "the body has %zu bytes; the limit (max_body_bytes) is %zu",
                  len, (size_t)rq->d->conf->max_body_bytes);
        return;
    }
    if (rq->d->stopping && rq->mutation) {
        api_error(rq, 503, "recovering", "the daemon is shutting down");
        return;
    }
    route(rq);
}

/* ---- listeners ------------------------------------------------------- */

/* Refuses to take over a socket a live daemon answers on; removes a stale
 * one left by a crash. */
static int
clear_stale_socket(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "control_socket %s exists and is not a socket",
                 path);
        return -1;
    }
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        close(fd);
        snprintf(err, errlen,
                 "another workmanagerd answers on control_socket %s", path);
        return -1;
    }
    if (fd >= 0)
        close(fd);
    unlink(path);
    return 0;
}

static int
bind_unix(struct api *api, char *err, size_t errlen)
{
    const struct conf *c = api->d->conf;
    const char *path = c->control_socket;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };

    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, errlen, "control_socket %s: path longer than %zu bytes",
                 path, sizeof sa.sun_path - 1);
        return -1;
    }
    if (clear_stale_socket(path, err, errlen))
        return -1;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(fd, 128) != 0) {
        snprintf(err, errlen, "control_socket %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (chmod(path, (mode_t)c->control_socket_mode) != 0) {
        snprintf(err, errlen, "control_socket %s: chmod: %s", path,
                 strerror(errno));
        close(fd);
        return -1;
    }
    if (c->control_socket_group && *c->control_socket_group) {
        /* A name, else a numeric gid. */
        const char *name = c->control_socket_group;
        struct group *g = getgrnam(name);
        char *end;
        unsigned long gid = g ? g->gr_gid : strtoul(name, &end, 10);
        bool known = g || (*end == '\0' && gid < (unsigned long)(gid_t)-1);
        if (!known || chown(path, (uid_t)-1, (gid_t)gid) != 0) {
            snprintf(err, errlen, "control_socket_group %s: %s", name,
                     known ? strerror(errno) : "no such group");
            close(fd);
            return -1;
        }
    }
    api->unix_sock = evhttp_accept_socket_with_handle(api->http, fd);
    if (api->unix_sock == NULL) {
        snprintf(err, errlen, "control_socket %s: cannot accept", path);
        close(fd);
        return -1;
    }
    api->unix_path = strdup(path);
    log_info("api: listening on %s (mode %04o)", path,
             (unsigned)c->control_socket_mode);
    return 0;
}

static int
read_token(struct api *api, char *err, size_t errlen)
{
    const char *file = api->d->conf->token_file;
    FILE *f = fopen(file, "re");
    if (f == NULL) {
        snprintf(err, errlen, "token_file %s: %s (TCP needs a token)", file,
                 strerror(errno));
        return -1;
    }
    size_t n = fread(api->token, 1, sizeof api->token - 1, f);
    fclose(f);
    while (n && (api->token[n - 1] == '\n' || api->token[n - 1] == '\r' ||
                 api->token[n - 1] == ' '))
        n--;
    api->token[n] = '\0';
    if (n < 16) {
        snprintf(err, errlen,
                 "token_file %s: the token must have at least "
                 "16 characters",
                 file);
        return -1;
    }
    api->token_len = n;
    return 0;
}

static int
bind_tcp(struct api *api, char *err, size_t errlen)
{
    const char *listen_on = api->d->conf->listen;
    char host[256];
    const char *colon = strrchr(listen_on, ':');
    char *end;

    if (colon == NULL || colon == listen_on ||
        (size_t)(colon - listen_on) >= sizeof host) {
        snprintf(err, errlen, "listen %s: expected host:port", listen_on);
        return -1;
    }
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535) {
        snprintf(err, errlen, "listen %s: bad port", listen_on);
        return -1;
    }
    memcpy(host, listen_on, (size_t)(colon - listen_on));
    host[colon - listen_on] = '\0';
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = '\0';
    }
    if (read_token(api, err, errlen))
        return -1;
    api->tcp_sock =
        evhttp_bind_socket_with_handle(api->http, host, (ev_uint16_t)port);
    if (api->tcp_sock == NULL) {
        snprintf(err, errlen, "listen %s: cannot bind: %s", listen_on,
                 strerror(errno));
        return -1;
    }
    log_info("api: listening on tcp %s (bearer token required)", listen_on);
    return 0;
}

struct api *
api_new(struct daemon *d, char *err, size_t errlen)
{
    struct api *api = calloc(1, sizeof *api);
    if (api == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    api->d = d;
    api->http = evhttp_new(d->base);
    if (api->http == NULL) {
        snprintf(err, errlen, "cannot create the HTTP server");
        free(api);
        return NULL;
    }
    evhttp_set_allowed_methods(
        api->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                       EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD);
    /* Twice the limit, so that most oversized bodies still get the JSON
     * error (see the file comment). */
    evhttp_set_max_body_size(api->http,
                             (ev_ssize_t)d->conf->max_body_bytes * 2);
    evhttp_set_gencb(api->http, on_request, api);
    if (bind_unix(api, err, errlen) ||
        (d->conf->listen && *d->conf->listen && bind_tcp(api, err, errlen))) {
        api_free(api);
        return NULL;
    }
    return api;
}

void
api_stop_listening(struct api *api)
{
    /* Followers of topics get the end of their stream. */
    api_topics_close_streams();
    if (api->unix_sock) {
        evhttp_del_accept_socket(api->http, api->unix_sock);
        api->unix_sock = NULL;
    }
    if (api->tcp_sock) {
        evhttp_del_accept_socket(api->http, api->tcp_sock);
        api->tcp_sock = NULL;
    }
}

void
api_free(struct api *api)
{
    if (api == NULL)
        return;
    api_stop_listening(api);
    evhttp_free(api->http);
    if (api->unix_path) {
        unlink(api->unix_path);
        free(api->unix_path);
    }
    free(api);
}
