/*
 * router.c — the admin API's listeners, the gate every request passes and
 * the route table (api.h).
 *
 * Two listeners share one HTTP server (http_server.h): the control socket
 * (unix; reached by its file mode and group, each peer's uid/gid/pid
 * logged, its principal made from them: principal.h) and, when `listen`
 * is set, TCP, where every request must carry `Authorization: Bearer
 * <token>`: the token of `token_file` (compared in constant time), an
 * operator's, or one of /v1/tokens (route_tokens.c), scoped to a tenant
 * and a role.  Each listener has its own cap on connections
 * (control_socket_max_connections, http_max_connections), so a flood of
 * the TCP port leaves the control socket reachable; the server answers
 * what it refuses itself (limits, deadlines, bad HTTP) with the API's JSON
 * error object.
 *
 * Descriptors: at start the soft RLIMIT_NOFILE is raised to the hard
 * limit, fd_reserve descriptors are kept for hosts, the store and the
 * journal, and the caps are lowered, if they must, so that the control
 * socket's and the TCP listener's connections fit in what is left.
 *
 * The gate, in this order: a known path, the principal (gate_admits():
 * the peer's credentials on the socket, the token on TCP;
 * gate_public_path() names what TCP serves without it),
 * no mutation while the daemon stops.  Bodies over max_body_bytes never
 * reach it: the server refuses them (413) before reading them.
 *
 * Routes are a table matched in order on the first two path segments and
 * the number of segments; each route file then dispatches on the rest.
 */
#include "config.h"

#include "master/api/api.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "lib/errbuf.h"
#include "lib/timestamp.h"
#include "master/api/http_server.h"
#include "master/api/tokens.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/log.h"

#define TOKEN_MAX 512

/* The kernel's queue of connections not yet accepted, per listener. */
#define LISTEN_BACKLOG 128

struct api {
    struct daemon *d;
    struct http_server *http;
    struct http_listener *unix_sock;
    struct http_listener *tcp_sock;
    unsigned unix_cap; /* connections, after the descriptor plan */
    unsigned tcp_cap;
    char *unix_path;
    char token[TOKEN_MAX];
    size_t token_len;
    char metrics_token[TOKEN_MAX]; /* metrics_token_file's, or empty */
    size_t metrics_token_len;
    struct http_tls *tls; /* the TCP listener's, or NULL (plain) */
};

/* ---- the gate and the routes ----------------------------------------- */

/* The bearer token of an Authorization header, or NULL. */
static const char *
bearer_of(const char *auth)
{
    static const char prefix[] = "Bearer ";
    if (auth == NULL || strncmp(auth, prefix, sizeof prefix - 1) != 0)
        return NULL;
    return auth + sizeof prefix - 1;
}

/* Constant-time comparison of the presented bearer token with token. */
static bool
bearer_is(const char *token, size_t len, const char *auth)
{
    const char *t = bearer_of(auth);
    if (len == 0 || t == NULL)
        return false;
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

/* The original system's older paths, /workers[/{id}[/{action}]] without
 * the version: the same routes as /v1/workers, so that its deploy scripts
 * work unchanged (workmanagerd(8), Routes). */
static void
unversioned_workers_route(struct api_req *rq)
{
    static char v1[] = "v1";

    memmove(&rq->seg[1], &rq->seg[0], (size_t)rq->nseg * sizeof rq->seg[0]);
    rq->seg[0] = v1;
    rq->nseg++;
    api_workers_route(rq);
}

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
        .second = "export",
        .max_segments = 2,
        .handler = api_export_route,
    },
    {
        .first = "v1",
        .second = "import",
        .max_segments = 2,
        .handler = api_export_route,
    },
    {
        .first = "v1",
        .second = "instances",
        .max_segments = 2,
        .handler = api_instances_route,
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
    {
        .first = "v1",
        .second = "tenants",
        .max_segments = 4,
        .handler = api_tenants_route,
    },
    {
        .first = "v1",
        .second = "tokens",
        .max_segments = 3,
        .handler = api_tokens_route,
    },
    { .first = "metrics", .max_segments = 1, .handler = api_metrics_route },
    {
        .first = "workers",
        .max_segments = API_MAX_SEGMENTS - 1,
        .handler = unversioned_workers_route,
    },
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
refuse_401(struct api_req *rq, const char *why)
{
    api_reply_header(rq, "WWW-Authenticate", "Bearer");
    api_error(rq, 401, "unauthorized",
              "%s: send Authorization: Bearer <token> with the token of "
              "token_file or one from `wmctl token create` (wmctl: "
              "--token-file FILE or WM_TOKEN_FILE)",
              why);
}

/*
 * A verified TLS client certificate speaks for the tenant its CN names
 * (http_peer.tenant): a tenant's token used over it must be that tenant's
 * (an operator's token goes with any certificate).  Else answered 403.
 */
static bool
cert_binds(struct api_req *rq)
{
    const struct http_peer *peer = rq->hreq->peer;

    if (!peer->client_cert || peer->tenant[0] == '\0' ||
        rq->principal.tenant[0] == '\0' ||
        strcmp(rq->principal.tenant, peer->tenant) == 0)
        return true;
    api_error(rq, 403, "forbidden",
              "the client certificate speaks for tenant %s; this token is "
              "tenant %s's",
              peer->tenant, rq->principal.tenant);
    return false;
}

/*
 * Whether rq may pass, its principal made (principal.h); else answered
 * here: 401 on TCP without a valid token, 403 for a control socket user
 * nobody mapped.  The one place that says who is who.
 */
static bool
gate_admits(struct api *api, struct api_req *rq)
{
    const struct http_peer *peer = rq->hreq->peer;
    const char *auth = api_header(rq, "Authorization");
    char why[512];

    if (!peer->tcp) {
        if (api_principal_of_peer(peer, api->d->conf->local_principals,
                                  api->d->conf->control_socket_group,
                                  &rq->principal, why, sizeof why) == 0)
            return true;
        api_error(rq, 403, "forbidden", "%s", why);
        return false;
    }
    if (gate_public_path(api, rq, auth)) {
        api_principal_operator(&rq->principal, "metrics or probe");
        return true;
    }
    if (token_ok(api, auth)) {
        api_principal_operator(&rq->principal, "token_file");
        return true;
    }
    const char *bearer = bearer_of(auth);
    if (bearer == NULL || *bearer == '\0') {
        refuse_401(rq, "a valid bearer token is required on TCP");
        return false;
    }
    switch (api_tokens_match(bearer, timestamp_now_ms(), &rq->principal)) {
    case API_TOKEN_OK:
        return cert_binds(rq);
    case API_TOKEN_EXPIRED:
        refuse_401(rq, "this token has expired");
        return false;
    case API_TOKEN_UNKNOWN:
        break;
    }
    refuse_401(rq, "this token is not valid (unknown or revoked)");
    return false;
}

static void
on_request(struct http_request *req, void *arg)
{
    struct api *api = arg;
    struct api_req *rq = api_req_new(api, api->d, req);

    if (rq == NULL)
        return; /* answered */
    if (!gate_admits(api, rq))
        return;
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
        listen(fd, LISTEN_BACKLOG) != 0) {
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
    char name[128];
    snprintf(name, sizeof name, "control socket %s", path);
    api->unix_sock = http_listener_new(api->http, fd, name, api->unix_cap, 0);
    if (api->unix_sock == NULL) {
        snprintf(err, errlen, "control_socket %s: out of memory", path);
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

/* A listening TCP socket on host:port (the first address that binds);
 * -1 with errno. */
static int
tcp_socket(const char *host, const char *port)
{
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC,
        .ai_socktype = SOCK_STREAM,
        .ai_flags = AI_PASSIVE | AI_NUMERICSERV,
    };
    struct addrinfo *res, *ai;
    int fd = -1, e = EADDRNOTAVAIL;

    if (getaddrinfo(*host ? host : NULL, port, &hints, &res) != 0) {
        errno = EADDRNOTAVAIL;
        return -1;
    }
    for (ai = res; ai; ai = ai->ai_next) {
        int one = 1;
        fd = socket(ai->ai_family,
                    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            listen(fd, LISTEN_BACKLOG) == 0)
            break;
        e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        errno = e;
    return fd;
}

/* Whether the bound socket fd may serve plain HTTP: listen_plaintext =
 * loopback and a loopback address (127.0.0.0/8, ::1). */
static bool
plaintext_allowed(const struct conf *c, int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;

    if (c->listen_plaintext != CONF_PLAINTEXT_LOOPBACK ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return false;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const void *)&ss;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const void *)&ss;
        return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    }
    return false;
}

/* The TCP listener's TLS setting, from the tls_* keys. */
static int
tls_setup(struct api *api, char *err, size_t errlen)
{
    const struct conf *c = api->d->conf;
    struct http_tls_conf tc = {
        .cert_file = c->tls_cert_file,
        .key_file = c->tls_key_file,
        .min_tls13 = c->tls_min_version == CONF_TLS_1_3,
        .client_ca_file = c->tls_client_ca_file,
        .client = c->tls_client_cert == CONF_TLS_CLIENT_REQUIRED
                      ? HTTP_TLS_CLIENT_REQUIRED
                  : c->tls_client_cert == CONF_TLS_CLIENT_OPTIONAL
                      ? HTTP_TLS_CLIENT_OPTIONAL
                      : HTTP_TLS_CLIENT_NONE,
    };
    api->tls = http_tls_new(&tc, err, errlen);
    if (api->tls == NULL)
        return -1;
    int64_t left = http_tls_not_after(api->tls) - (int64_t)time(NULL);
    if (left < 0)
        log_warning("api: tls_cert_file %s has expired", c->tls_cert_file);
    else if (left < 14 * 86400)
        log_warning("api: tls_cert_file %s expires in %lld days",
                    c->tls_cert_file, (long long)(left / 86400));
    return 0;
}

const struct http_tls *
api_tls(const struct api *api)
{
    return api->tls;
}

json_t *
api_tls_json(const struct api *api)
{
    const struct conf *c = api->d->conf;

    if (api->tls == NULL)
        return json_pack("{s:b}", "enabled", 0);
    int64_t na = http_tls_not_after(api->tls);
    static const char *const client[] = { "none", "optional", "required" };
    return json_pack(
        "{s:b, s:s, s:o, s:I, s:s, s:I}", "enabled", 1, "min_version",
        c->tls_min_version == CONF_TLS_1_3 ? "1.3" : "1.2", "not_after",
        api_json_time(na * 1000), "days_left",
        (json_int_t)((na - (int64_t)time(NULL)) / 86400), "client_cert",
        client[c->tls_client_cert], "handshake_failures",
        (json_int_t)http_tls_failures(api->tls));
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
    if (*c->tls_cert_file && tls_setup(api, err, errlen) != 0)
        return -1;
    int fd = tcp_socket(host, colon + 1);
    if (fd < 0) {
        return errbuf_set(err, errlen, "listen %s: cannot bind: %s", listen_on,
                          strerror(errno));
    }
    if (api->tls == NULL && !plaintext_allowed(c, fd)) {
        close(fd);
        return errbuf_set(
            err, errlen,
            "listen %s: refusing plain HTTP: %s; set tls_cert_file and "
            "tls_key_file to serve HTTPS",
            listen_on,
            c->listen_plaintext == CONF_PLAINTEXT_LOOPBACK
                ? "the address is not a loopback one, and "
                  "listen_plaintext = loopback allows only those"
                : "the TCP listener needs TLS (listen_plaintext = loopback "
                  "allows plain HTTP on a loopback address only)");
    }
    char name[300];
    snprintf(name, sizeof name, "tcp %s", listen_on);
    api->tcp_sock =
        http_listener_new(api->http, fd, name, api->tcp_cap,
                          api->d->conf->http_max_connections_per_peer);
    if (api->tcp_sock == NULL)
        return errbuf_set(err, errlen, "listen %s: out of memory", listen_on);
    http_listener_set_tls(api->tcp_sock, api->tls);
    log_info("api: listening on %s %s (bearer token required)",
             api->tls ? "https" : "plain http", listen_on);
    return 0;
}

/* The descriptor plan (see the file comment): raises the soft nofile
 * limit, then fits the caps of both listeners under it, fd_reserve
 * aside. */
static void
plan_descriptors(struct api *api)
{
    const struct conf *c = api->d->conf;
    struct rlimit rl;
    unsigned long was = 0, nofile = 0;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        was = (unsigned long)rl.rlim_cur;
        if (rl.rlim_cur < rl.rlim_max) {
            rlim_t cur = rl.rlim_cur;
            rl.rlim_cur = rl.rlim_max;
            if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
                log_warning("api: cannot raise the nofile limit from %lu to "
                            "%lu: %s",
                            was, (unsigned long)rl.rlim_max, strerror(errno));
                rl.rlim_cur = cur;
            }
        }
        nofile = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1u << 30
                     ? 1u << 30
                     : (unsigned long)rl.rlim_cur;
    }
    bool tcp = c->listen && *c->listen;
    api->unix_cap = c->control_socket_max_connections;
    api->tcp_cap = tcp ? c->http_max_connections : 0;
    if (nofile == 0)
        return;
    /* In use now: the kernel hands out the lowest free descriptor. */
    int probe = fcntl(0, F_DUPFD_CLOEXEC, 0);
    unsigned long used = probe >= 0 ? (unsigned long)probe : 64;
    if (probe >= 0)
        close(probe);
    unsigned long reserve = c->fd_reserve;
    unsigned long budget =
        nofile > used + reserve + 2 ? nofile - used - reserve : 2;
    if ((unsigned long)api->unix_cap + api->tcp_cap > budget) {
        unsigned long ux = tcp ? budget / 4 : budget - 1;
        if (ux < 1)
            ux = 1;
        if (ux < api->unix_cap)
            api->unix_cap = (unsigned)ux;
        if (tcp)
            api->tcp_cap = (unsigned)(budget - api->unix_cap);
        log_warning("api: %lu descriptors (nofile) with %lu in use and %lu "
                    "kept (fd_reserve) leave room for %u connections on the "
                    "control socket and %u on tcp; raise the hard nofile "
                    "limit (LimitNOFILE=) for more",
                    nofile, used, reserve, api->unix_cap, api->tcp_cap);
    }
    http_server_set_fd_reserve(api->http, (unsigned)nofile, (unsigned)reserve);
    log_info("api: descriptors: nofile %lu (was %lu), %lu kept for hosts, "
             "the store and the journal; at most %u connections on the "
             "control socket, %u on tcp",
             nofile, was, reserve, api->unix_cap, api->tcp_cap);
}

struct api *
api_new(struct daemon *d, char *err, size_t errlen)
{
    const struct conf *c = d->conf;
    struct api *api = calloc(1, sizeof *api);
    if (api == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    api->d = d;
    struct http_limits lim = {
        .max_header_bytes = (size_t)c->http_max_header_bytes,
        .max_headers = c->http_max_headers,
        .max_url_bytes = (size_t)c->http_max_url_bytes,
        .max_body_bytes = c->max_body_bytes,
        .header_timeout_ms = (unsigned)c->http_header_timeout_ms,
        .body_timeout_ms = (unsigned)c->http_body_timeout_ms,
        .idle_timeout_ms = (unsigned)c->http_idle_timeout_ms,
        .write_timeout_ms = (unsigned)c->http_write_timeout_ms,
    };
    api->http = http_server_new(d->base, &lim, on_request, api);
    if (api->http == NULL) {
        snprintf(err, errlen, "cannot create the HTTP server");
        free(api);
        return NULL;
    }
    plan_descriptors(api);
    if (bind_unix(api, err, errlen) ||
        (c->listen && *c->listen && bind_tcp(api, err, errlen))) {
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
    api_logs_close_streams();
    http_listener_free(api->unix_sock);
    api->unix_sock = NULL;
    http_listener_free(api->tcp_sock);
    api->tcp_sock = NULL;
}

void
api_free(struct api *api)
{
    if (api == NULL)
        return;
    api_stop_listening(api);
    http_server_free(api->http);
    http_tls_free(api->tls);
    if (api->unix_path) {
        unlink(api->unix_path);
        free(api->unix_path);
    }
    free(api);
}
