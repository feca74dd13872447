/*
 * router.c — the admin API's listeners, the gate every request passes and
 * the route table (api.h).
 *
 * Two listeners share one evhttp: the control socket (unix; trusted by its
 * file mode and group, each peer's uid/gid/pid logged) and, when `listen`
 * is set, TCP, where every request must carry `Authorization: Bearer
 * <token>` with the token of `token_file` (compared in constant time).
 *
 * The gate, in this order: a known path, the token on TCP (but for the
 * public paths of gate_public_path()), the body size, no mutation while
 * the daemon stops.  Bodies: evhttp refuses bodies over
 * twice max_body_bytes on its own (413 with its own page); up to that,
 * requests over max_body_bytes get the JSON `payload_too_large` error here.
 *
 * Routes are a table matched in order on the first two path segments and
 * the number of segments; each route file then dispatches on the rest.
 */
#include "config.h"

#include "master/api/api.h"

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "lib/errbuf.h"
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
    char metrics_token[TOKEN_MAX]; /* metrics_token_file's, or empty */
    size_t metrics_token_len;
};

/* ---- the gate and the routes ----------------------------------------- */

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

/* Constant-time comparison of the presented bearer token with token. */
static bool
bearer_is(const char *token, size_t len, const char *auth)
{
    static const char prefix[] = "Bearer ";
    if (len == 0 || auth == NULL ||
        strncmp(auth, prefix, sizeof prefix - 1) != 0)
        return false;
    const char *t = auth + sizeof prefix - 1;
    size_t n = strlen(t);
    unsigned char diff = n != len;
    for (size_t i = 0; i < len; i++)
        diff |= (unsigned char)token[i] ^ (unsigned char)t[i < n ? i : 0];
    return diff == 0;
}

static bool
token_ok(const struct api *api, const char *auth)
{
    return bearer_is(api->token, api->token_len, auth);
}

/* A route: the first segment, the second (NULL: any) and the most segments
 * the path may have.  The handler answers or keeps the request. */
struct route {
    const char *first;
    const char *second;
    int max_segments;
    void (*handler)(struct api_req *rq);
};

static const struct route routes[] = {
    { .first = "health", .max_segments = 2, .handler = api_health_route },
    {
        .first = "v1",
        .second = "workers",
        .max_segments = API_MAX_SEGMENTS,
        .handler = api_workers_route,
    },
    {
        .first = "v1",
        .second = "engines",
        .max_segments = 2,
        .handler = api_engines_route,
    },
    {
        .first = "v1",
        .second = "recover",
        .max_segments = 2,
        .handler = api_recover_route,
    },
    {
        .first = "v1",
        .second = "topics",
        .max_segments = API_MAX_SEGMENTS,
        .handler = api_topics_route,
    },
    { .first = "metrics", .max_segments = 1, .handler = api_metrics_route },
};

static bool
seg_is(const struct api_req *rq, int i, const char *s)
{
    return i < rq->nseg && strcmp(rq->seg[i], s) == 0;
}

static void
route(struct api_req *rq)
{
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const struct route *r = &routes[i];
        if (seg_is(rq, 0, r->first) &&
            (r->second == NULL || seg_is(rq, 1, r->second)) &&
            rq->nseg <= r->max_segments) {
            r->handler(rq);
            return;
        }
    }
    api_error(rq, 404, "not_found", "no route %s %s", rq->method, rq->path);
}

/*
 * What TCP serves without the admin token: GET /health/live, for probes
 * (an orchestrator's, a load balancer's: it says only that the loop
 * answers), and GET /metrics with metrics_token_file's token, for
 * Prometheus (a token good for nothing else).
 */
static bool
gate_public_path(const struct api *api, const struct api_req *rq,
                 const char *auth)
{
    bool get =
        strcmp(rq->method, "GET") == 0 || strcmp(rq->method, "HEAD") == 0;

    if (get && rq->nseg == 2 && seg_is(rq, 0, "health") &&
        seg_is(rq, 1, "live"))
        return true;
    return get && rq->nseg == 1 && seg_is(rq, 0, "metrics") &&
           bearer_is(api->metrics_token, api->metrics_token_len, auth);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct api *api = arg;
    struct api_req *rq = api_req_new(api, api->d, req);

    if (rq == NULL)
        return; /* answered */
    const char *auth = evhttp_find_header(evhttp_request_get_input_headers(req),
                                          "Authorization");
    if (from_tcp(req) && !gate_public_path(api, rq, auth) &&
        !token_ok(api, auth)) {
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
        return errbuf_set(err, errlen,
                          "control_socket %s exists and is not a socket", path);
    }
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        close(fd);
        return errbuf_set(err, errlen,
                          "another workmanagerd answers on control_socket %s",
                          path);
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
        return errbuf_set(err, errlen,
                          "control_socket %s: path longer than %zu bytes", path,
                          sizeof sa.sun_path - 1);
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

/* The token of file (the setting key) into token[TOKEN_MAX]. */
static int
read_token(const char *key, const char *file, char *token, size_t *len,
           char *err, size_t errlen)
{
    FILE *f = fopen(file, "re");
    if (f == NULL) {
        return errbuf_set(err, errlen, "%s %s: %s (TCP needs a token)", key,
                          file, strerror(errno));
    }
    size_t n = fread(token, 1, TOKEN_MAX - 1, f);
    fclose(f);
    while (n && (token[n - 1] == '\n' || token[n - 1] == '\r' ||
                 token[n - 1] == ' '))
        n--;
    token[n] = '\0';
    if (n < 16) {
        return errbuf_set(err, errlen,
                          "%s %s: the token must have at least "
                          "16 characters",
                          key, file);
    }
    *len = n;
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
        return errbuf_set(err, errlen, "listen %s: expected host:port",
                          listen_on);
    }
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535) {
        return errbuf_set(err, errlen, "listen %s: bad port", listen_on);
    }
    memcpy(host, listen_on, (size_t)(colon - listen_on));
    host[colon - listen_on] = '\0';
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = '\0';
    }
    const struct conf *c = api->d->conf;
    if (read_token("token_file", c->token_file, api->token, &api->token_len,
                   err, errlen) ||
        (c->metrics_token_file[0] &&
         read_token("metrics_token_file", c->metrics_token_file,
                    api->metrics_token, &api->metrics_token_len, err, errlen)))
        return -1;
    api->tcp_sock =
        evhttp_bind_socket_with_handle(api->http, host, (ev_uint16_t)port);
    if (api->tcp_sock == NULL) {
        return errbuf_set(err, errlen, "listen %s: cannot bind: %s", listen_on,
                          strerror(errno));
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
