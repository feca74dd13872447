/*
 * http_conn.c — one connection of the admin API's HTTP/1.1 server
 * (http_server.h; the states in http_private.h): reading, parsing with
 * libhttp-parser, the checks of a request's head (its limits, the
 * version, the method, Expect), handing a request to the handler, the
 * next request of a keep-alive connection, hang-ups and the deadlines.
 *
 * Why this way: one persistent read event per connection (no epoll_ctl
 * per request), a read buffer the request's head stays in (headers are
 * pointers into it, NUL-terminated in place, no allocation per header),
 * one request at a time (pipelined requests wait in the buffer, so answers
 * go in order), one timer whose deadline follows the state.  The head's
 * deadline runs from its first byte and is not restarted by later bytes,
 * so a client trickling a byte at a time (slowloris) is cut off.
 *
 * Invariants: the parser is only run in HEAD and BODY; the read buffer
 * never holds more than the head's limit plus two reads while a head is
 * read; bytes of the current request's head are not moved or overwritten
 * until it is answered; a connection whose request a handler owns is freed
 * only once that request is answered (DEAD until then); the structure is
 * never freed under a callback of its own (in_process, free_later).
 */
#include "config.h"

#include "master/api/http_private.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "master/core/log.h"

/* A body buffer past this is given back after its request. */
#define BODY_KEEP_BYTES (1u << 20)
/* Reads of a body per wake-up, so that one upload does not hold the
 * loop. */
#define BODY_READS_PER_WAKEUP 16

static void conn_process(struct http_conn *c);

/* ---- the plain socket -------------------------------------------------- */

static ssize_t
plain_read(struct http_conn *c, void *buf, size_t len)
{
    return read(c->fd, buf, len);
}

static ssize_t
plain_writev(struct http_conn *c, const struct iovec *iov, int n)
{
    return writev(c->fd, iov, n);
}

static int
plain_shutdown(struct http_conn *c)
{
    return shutdown(c->fd, SHUT_WR);
}

static size_t
plain_pending(const struct http_conn *c)
{
    (void)c;
    return 0;
}

static void
plain_close(struct http_conn *c)
{
    close(c->fd);
}

static const struct http_io plain_io = {
    .read = plain_read,
    .writev = plain_writev,
    .shutdown = plain_shutdown,
    .pending = plain_pending,
    .close = plain_close,
};

/* Bytes the I/O layer holds (TLS: a record read whole, given in part)
 * make no read event: the loop is asked to run the read again. */
static void
more_if_pending(struct http_conn *c)
{
    if (c->reading && c->state != HTTP_CONN_DEAD && c->io->pending(c) > 0)
        event_active(c->rev, EV_READ, 1);
}

int64_t
http_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool
http_log_due(int64_t *last_ms, uint64_t *unlogged, int64_t every_ms)
{
    int64_t now = http_now_ms();

    if (*last_ms != 0 && now - *last_ms < every_ms) {
        (*unlogged)++;
        return false;
    }
    *last_ms = now;
    return true;
}

/* ---- the parser's callbacks ---------------------------------------------- */

/* Decides a refusal from inside a callback: the parser stops (a callback
 * error) and conn_process() answers it. */
static int refuse_later(struct http_conn *c, int status, const char *code,
                        const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
refuse_later(struct http_conn *c, int status, const char *code, const char *fmt,
             ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->refuse_msg, sizeof c->refuse_msg, fmt, ap);
    va_end(ap);
    c->refuse_status = status;
    c->refuse_code = code;
    return 1;
}

static uint32_t
msg_offset(const struct http_conn *c, const char *at)
{
    return (uint32_t)(at - (c->in + c->msg_start));
}

static int
cb_begin(http_parser *p)
{
    struct http_conn *c = p->data;
    c->nhdr = 0;
    c->url_len = 0;
    c->url_off = 0;
    c->in_field = false;
    c->body_len = 0;
    return 0;
}

static int
cb_url(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    uint32_t off = msg_offset(c, at);
    if (c->url_len == 0)
        c->url_off = off;
    c->url_len = off + (uint32_t)len - c->url_off;
    if (c->url_len > c->srv->lim.max_url_bytes) {
        return refuse_later(c, 414, "uri_too_long",
                            "the request target is longer than %zu bytes "
                            "(http_max_url_bytes)",
                            c->srv->lim.max_url_bytes);
    }
    return 0;
}

static int
grow_headers(struct http_conn *c)
{
    unsigned cap = c->hcap ? c->hcap * 2 : 16;
    if (cap > c->srv->lim.max_headers)
        cap = c->srv->lim.max_headers;
    struct http_hdr_off *o = realloc(c->hoff, cap * sizeof *o);
    if (o == NULL)
        return -1;
    c->hoff = o;
    struct http_header *h = realloc(c->hdrs, cap * sizeof *h);
    if (h == NULL)
        return -1;
    c->hdrs = h;
    c->hcap = cap;
    return 0;
}

static int
cb_field(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    uint32_t off = msg_offset(c, at);
    struct http_hdr_off *h = c->nhdr ? &c->hoff[c->nhdr - 1] : NULL;

    /* A piece that continues the last name starts where it ended (the
     * next read); a new name never does (": value\r\n" lies between). */
    if (h == NULL || !c->in_field || off != h->name + h->name_len) {
        if (c->nhdr == c->srv->lim.max_headers) {
            return refuse_later(c, 431, "headers_too_large",
                                "more than %u headers (http_max_headers)",
                                c->srv->lim.max_headers);
        }
        if (c->nhdr == c->hcap && grow_headers(c) != 0) {
            return refuse_later(c, 500, "internal", "out of memory");
        }
        h = &c->hoff[c->nhdr++];
        *h = (struct http_hdr_off){ .name = off };
        c->in_field = true;
    }
    h->name_len = off + (uint32_t)len - h->name;
    return 0;
}

static int
cb_value(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    uint32_t off = msg_offset(c, at);
    struct http_hdr_off *h = &c->hoff[c->nhdr - 1];

    if (c->in_field) {
        h->value = off;
        c->in_field = false;
    }
    /* A folded value arrives in pieces with the fold between them:
     * the value runs to the end of its last piece (the fold's line break
     * becomes blanks in finish_headers()). */
    h->value_len = off + (uint32_t)len - h->value;
    return 0;
}

static int
cb_headers_complete(http_parser *p)
{
    /* Stop here: conn_process() checks the head before any body. */
    http_parser_pause(p, 1);
    return 0;
}

static int
cb_body(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    uint64_t max = c->srv->lim.max_body_bytes;

    if (c->body_len + len > max) {
        return refuse_later(c, 413, "payload_too_large",
                            "the body has more than %llu bytes; the limit "
                            "(max_body_bytes) is %llu",
                            (unsigned long long)max, (unsigned long long)max);
    }
    if (c->body_len + len > c->body_cap) {
        size_t cap = c->body_cap ? c->body_cap : 4096;
        while (cap < c->body_len + len)
            cap *= 2;
        unsigned char *b = realloc(c->body, cap);
        if (b == NULL)
            return refuse_later(c, 500, "internal", "out of memory");
        c->body = b;
        c->body_cap = cap;
    }
    memcpy(c->body + c->body_len, at, len);
    c->body_len += len;
    return 0;
}

static int
cb_message_complete(http_parser *p)
{
    struct http_conn *c = p->data;
    c->state = HTTP_CONN_HANDLER;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = cb_begin,
    .on_url = cb_url,
    .on_header_field = cb_field,
    .on_header_value = cb_value,
    .on_headers_complete = cb_headers_complete,
    .on_body = cb_body,
    .on_message_complete = cb_message_complete,
};

/* ---- the head ------------------------------------------------------------ */

static bool
blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

/* The headers as the handler sees them: NUL-terminated in the buffer (the
 * byte after a name is its ':', after a value a blank or line break, all
 * parsed already).  Returns -1 for a value holding a NUL byte (which the
 * parser lets through and C strings cannot carry). */
static int
finish_headers(struct http_conn *c)
{
    char *m = c->in + c->msg_start;
    for (unsigned i = 0; i < c->nhdr; i++) {
        const struct http_hdr_off *o = &c->hoff[i];
        struct http_header *h = &c->hdrs[i];
        h->name = m + o->name;
        h->name_len = o->name_len;
        m[o->name + o->name_len] = '\0';
        if (o->value_len == 0) {
            h->value = "";
            h->value_len = 0;
            continue;
        }
        char *v = m + o->value;
        size_t n = o->value_len;
        while (n && blank(v[n - 1]))
            n--;
        for (size_t k = 0; k < n; k++) {
            if (v[k] == '\0')
                return -1;
            if (v[k] == '\r' || v[k] == '\n')
                v[k] = ' ';
        }
        v[n] = '\0';
        h->value = v;
        h->value_len = n;
    }
    return 0;
}

static const char *
allowed_method(unsigned m)
{
    switch (m) {
    case HTTP_GET:
    case HTTP_HEAD:
    case HTTP_POST:
    case HTTP_PUT:
    case HTTP_PATCH: /* a tenant's quotas (route_tenants.c) */
    case HTTP_DELETE:
        return http_method_str((enum http_method)m);
    default:
        return NULL;
    }
}

/* The head is complete (the parser paused at its last line feed): checks
 * it, then the body may come.  Returns 0, or -1 having refused. */
static int
head_done(struct http_conn *c)
{
    http_parser *p = &c->parser;
    const struct http_limits *lim = &c->srv->lim;
    char *m = c->in + c->msg_start;
    struct http_request *req = &c->req;

    /* Paused on the head's last line feed, not yet consumed. */
    c->head_end = c->in_pos + 1 - c->msg_start;
    if (finish_headers(c) != 0) {
        http_conn_refuse(c, 400, "bad_request",
                         "a header value holds a NUL byte");
        return -1;
    }
    *req = (struct http_request){
        .headers = c->hdrs,
        .nheaders = c->nhdr,
        .peer = &c->peer,
        .conn = c,
        .minor = p->http_minor,
        .body = (const unsigned char *)"",
    };
    c->extra_len = 0;
    c->gone = false;
    c->gone_fn = NULL;
    if (p->http_major != 1) {
        http_conn_refuse(c, 505, "http_version_not_supported",
                         "only HTTP/1.0 and HTTP/1.1 are served");
        return -1;
    }
    req->method = allowed_method(p->method);
    if (req->method == NULL) {
        char msg[96];
        snprintf(msg, sizeof msg, "the method %s is not implemented",
                 http_method_str((enum http_method)p->method));
        http_conn_refuse(c, 501, "not_implemented", msg);
        return -1;
    }
    req->head = p->method == HTTP_HEAD;

    /* The target: NUL-terminated on the blank after it. */
    char *url = m + c->url_off;
    struct http_parser_url u;
    http_parser_url_init(&u);
    url[c->url_len] = '\0';
    if (c->url_len == 0 || http_parser_parse_url(url, c->url_len, 0, &u)) {
        http_conn_refuse(c, 400, "bad_request",
                         "the request target is not a path");
        return -1;
    }
    if (u.field_set & (1 << UF_PATH)) {
        req->path = url + u.field_data[UF_PATH].off;
        req->path_len = u.field_data[UF_PATH].len;
    } else {
        req->path = "/";
        req->path_len = 1;
    }
    if (u.field_set & (1 << UF_QUERY)) {
        req->query = url + u.field_data[UF_QUERY].off;
        req->query_len = u.field_data[UF_QUERY].len;
    }

    bool chunked = p->flags & F_CHUNKED;
    bool sized = (p->flags & F_CONTENTLENGTH) && !chunked;
    if (sized && p->content_length > lim->max_body_bytes) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "the body has %llu bytes; the limit (max_body_bytes) is "
                 "%llu",
                 (unsigned long long)p->content_length,
                 (unsigned long long)lim->max_body_bytes);
        http_conn_refuse(c, 413, "payload_too_large", msg);
        return -1;
    }
    c->keep_alive = http_should_keep_alive(p);
    const char *expect = http_request_header(req, "Expect");
    if (expect) {
        if (strcasecmp(expect, "100-continue") != 0) {
            http_conn_refuse(c, 417, "expectation_failed",
                             "only Expect: 100-continue is understood");
            return -1;
        }
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        struct iovec iov = { http_iov_base(cont), sizeof cont - 1 };
        if (p->http_minor >= 1 &&
            (chunked || (sized && p->content_length > 0)) &&
            http_conn_send(c, &iov, 1) != 0)
            return -1;
    }
    /* No upgrade: the bytes after this request are HTTP too. */
    p->upgrade = 0;
    c->state = HTTP_CONN_BODY;
    return 0;
}

/* Whether a refused first line began with a method the parser does not
 * know (501) rather than with garbage (400). */
static bool
looks_like_method(const struct http_conn *c)
{
    const char *s = c->in + c->msg_start;
    size_t n = c->in_len - c->msg_start, i = 0;
    while (i < n && (s[i] == '\r' || s[i] == '\n'))
        i++;
    size_t start = i;
    while (i < n && i - start < 32 && s[i] >= 'A' && s[i] <= 'Z')
        i++;
    return i > start && i < n && s[i] == ' ';
}

static void
parse_error(struct http_conn *c, enum http_errno e)
{
    char msg[160];

    switch (e) {
    case HPE_HEADER_OVERFLOW:
        snprintf(msg, sizeof msg,
                 "the request head is larger than %zu bytes "
                 "(http_max_header_bytes)",
                 c->srv->lim.max_header_bytes);
        http_conn_refuse(c, 431, "headers_too_large", msg);
        return;
    case HPE_INVALID_VERSION:
        http_conn_refuse(c, 505, "http_version_not_supported",
                         "only HTTP/1.0 and HTTP/1.1 are served");
        return;
    case HPE_INVALID_METHOD:
        if (looks_like_method(c)) {
            http_conn_refuse(c, 501, "not_implemented",
                             "the method is not implemented");
            return;
        }
        break;
    default:
        break;
    }
    snprintf(msg, sizeof msg, "the request is not valid HTTP/1.1: %s",
             http_errno_description(e));
    http_conn_refuse(c, 400, "bad_request", msg);
}

/* ---- the flow of requests ------------------------------------------------ */

static void
dispatch(struct http_conn *c)
{
    c->req.body = c->body_len ? c->body : (const unsigned char *)"";
    c->req.body_len = c->body_len;
    http_conn_timer_update(c);
    c->srv->handler(&c->req, c->srv->arg);
}

/* Parses what was read, request by request, while no handler owns one. */
static void
conn_process(struct http_conn *c)
{
    const struct http_limits *lim = &c->srv->lim;

    while ((c->state == HTTP_CONN_HEAD || c->state == HTTP_CONN_BODY) &&
           c->in_pos < c->in_len) {
        if (c->state == HTTP_CONN_HEAD && !c->msg_begun) {
            c->msg_begun = true;
            c->head_deadline = http_now_ms() + lim->header_timeout_ms;
        }
        size_t n =
            http_parser_execute(&c->parser, &parser_settings, c->in + c->in_pos,
                                c->in_len - c->in_pos);
        c->in_pos += n;
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (c->refuse_status) {
            http_conn_refuse(c, c->refuse_status, c->refuse_code,
                             c->refuse_msg);
            return;
        }
        if (e == HPE_PAUSED) {
            http_parser_pause(&c->parser, 0);
            if (c->state == HTTP_CONN_HEAD) {
                if (head_done(c) != 0)
                    return;
            } else if (c->state == HTTP_CONN_HANDLER) {
                dispatch(c);
            }
            continue;
        }
        if (e != HPE_OK) {
            parse_error(c, e);
            return;
        }
        if (c->state == HTTP_CONN_HEAD &&
            c->in_pos - c->msg_start > lim->max_header_bytes) {
            parse_error(c, HPE_HEADER_OVERFLOW);
            return;
        }
    }
}

/* Room to read into.  Returns the bytes free, 0 when the buffer is at its
 * bound for the state (the caller stops reading). */
static size_t
in_room(struct http_conn *c)
{
    const struct http_limits *lim = &c->srv->lim;

    if (c->in_len == c->in_cap) {
        /* Bytes no one needs: before the current request in HEAD; a
         * body's parsed bytes (copied out) after the head otherwise. */
        size_t keep_to = 0, from = c->msg_start;
        if (c->state != HTTP_CONN_HEAD) {
            keep_to = c->msg_start + c->head_end;
            from = c->in_pos;
        }
        if (from > keep_to) {
            memmove(c->in + keep_to, c->in + from, c->in_len - from);
            c->in_len -= from - keep_to;
            c->in_pos -= from - keep_to;
            if (c->state == HTTP_CONN_HEAD)
                c->msg_start = 0;
        }
    }
    if (c->in_len == c->in_cap) {
        size_t bound = lim->max_header_bytes + 2 * HTTP_READ_CHUNK;
        if (c->state != HTTP_CONN_HEAD && c->state != HTTP_CONN_BODY)
            return 0; /* pipelined bytes wait for the answer */
        if (c->in_cap >= bound)
            return 0;
        size_t cap = c->in_cap + HTTP_READ_CHUNK;
        char *in = realloc(c->in, cap);
        if (in == NULL)
            return 0;
        c->in = in;
        c->in_cap = cap;
    }
    return c->in_cap - c->in_len;
}

static void
drain_linger(struct http_conn *c)
{
    char sink[4096];
    for (int i = 0; i < 16; i++) {
        ssize_t n = c->io->read(c, sink, sizeof sink);
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        http_conn_close(c);
        return;
    }
}

static void
on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct http_conn *c = arg;
    (void)fd;
    (void)what;

    c->in_process = true;
    if (c->state == HTTP_CONN_LINGER) {
        drain_linger(c);
        goto out;
    }
    int reads = c->state == HTTP_CONN_BODY ? BODY_READS_PER_WAKEUP : 1;
    for (int i = 0; i < reads && c->state != HTTP_CONN_DEAD; i++) {
        size_t room = in_room(c);
        if (room == 0) {
            if (c->state == HTTP_CONN_HEAD || c->state == HTTP_CONN_BODY) {
                parse_error(c, HPE_HEADER_OVERFLOW);
                goto out;
            }
            /* A handler owns a request and the pipeline is full: wait. */
            event_del(c->rev);
            c->reading = false;
            break;
        }
        ssize_t n = c->broken ? 0 : c->io->read(c, c->in + c->in_len, room);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            http_conn_lost(c);
            goto out;
        }
        if (n > 0)
            c->in_len += (size_t)n;
        conn_process(c);
        if (n < 0 || (size_t)n < room)
            break; /* the socket is empty */
    }
    if (c->state == HTTP_CONN_HEAD || c->state == HTTP_CONN_BODY)
        http_conn_timer_update(c);
    more_if_pending(c);
out:
    c->in_process = false;
    if (c->free_later)
        http_conn_close(c);
}

/* ---- deadlines ------------------------------------------------------------
 */

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct http_conn *c = arg;
    const struct http_limits *lim = &c->srv->lim;
    char msg[128];
    (void)fd;
    (void)what;

    c->srv->st.timeouts++;
    if (http_conn_pending(c) > 0) {
        log_info("api: %s: dropped: it read none of its answer for %u ms "
                 "(http_write_timeout_ms)",
                 c->peer.text, lim->write_timeout_ms);
        http_conn_lost(c);
        return;
    }
    switch (c->state) {
    case HTTP_CONN_HEAD:
        if (!c->msg_begun) {
            http_conn_close(c); /* idle */
            return;
        }
        snprintf(msg, sizeof msg,
                 "the request head did not arrive within %u ms "
                 "(http_header_timeout_ms)",
                 lim->header_timeout_ms);
        http_conn_refuse(c, 408, "request_timeout", msg);
        return;
    case HTTP_CONN_BODY:
        snprintf(msg, sizeof msg,
                 "the body made no progress for %u ms "
                 "(http_body_timeout_ms)",
                 lim->body_timeout_ms);
        http_conn_refuse(c, 408, "request_timeout", msg);
        return;
    default:
        http_conn_close(c);
        return;
    }
}

void
http_conn_timer_update(struct http_conn *c)
{
    const struct http_limits *lim = &c->srv->lim;
    int64_t ms = -1;

    if (c->state == HTTP_CONN_DEAD)
        return;
    if (http_conn_pending(c) > 0) {
        if (lim->write_timeout_ms)
            ms = lim->write_timeout_ms;
    } else {
        switch (c->state) {
        case HTTP_CONN_HEAD:
            if (c->msg_begun && lim->header_timeout_ms) {
                ms = c->head_deadline - http_now_ms();
                if (ms < 0)
                    ms = 0;
            } else if (!c->msg_begun && lim->idle_timeout_ms) {
                ms = lim->idle_timeout_ms;
            }
            break;
        case HTTP_CONN_BODY:
            if (lim->body_timeout_ms)
                ms = lim->body_timeout_ms;
            break;
        case HTTP_CONN_LINGER:
        case HTTP_CONN_CLOSING:
            ms = HTTP_LINGER_MS;
            break;
        default:
            break;
        }
    }
    if (ms < 0) {
        event_del(c->tev);
        return;
    }
    struct timeval tv = { (time_t)(ms / 1000),
                          (suseconds_t)(ms % 1000) * 1000 };
    event_add(c->tev, &tv);
}

/* ---- the connection's life ------------------------------------------------
 */

static void
peer_read(struct http_conn *c)
{
    struct http_peer *p = &c->peer;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    struct ucred cred;
    socklen_t cl = sizeof cred;

    if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0 &&
        (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)) {
        char host[INET6_ADDRSTRLEN] = "?";
        unsigned port;
        if (ss.ss_family == AF_INET) {
            const struct sockaddr_in *in = (const void *)&ss;
            inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
            port = ntohs(in->sin_port);
        } else {
            const struct sockaddr_in6 *in6 = (const void *)&ss;
            inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
            port = ntohs(in6->sin6_port);
        }
        p->tcp = true;
        snprintf(p->text, sizeof p->text, "tcp %s:%u", host, port);
        return;
    }
    /* A client in another PID namespace (the daemon in a container, or
     * started with unshare --pid) has pid 0 here; its uid and gid are
     * still the kernel's word, which is all the principal needs. */
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 &&
        cl == sizeof cred) {
        p->cred = true;
        p->uid = cred.uid;
        p->gid = cred.gid;
        p->pid = cred.pid;
        snprintf(p->text, sizeof p->text, "uid=%u gid=%u pid=%d",
                 (unsigned)cred.uid, (unsigned)cred.gid, (int)cred.pid);
        return;
    }
    snprintf(p->text, sizeof p->text, "unix ?");
}

struct http_conn *
http_conn_new(struct http_server *srv, struct http_listener *lst, int fd)
{
    struct http_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        close(fd);
        return NULL;
    }
    c->srv = srv;
    c->lst = lst;
    c->fd = fd;
    c->io = &plain_io;
    c->in_cap = HTTP_READ_CHUNK;
    c->in = malloc(c->in_cap);
    c->rev = event_new(srv->base, fd, EV_READ | EV_PERSIST, on_readable, c);
    c->wev = event_new(srv->base, fd, EV_WRITE | EV_PERSIST,
                       http_conn_on_writable, c);
    c->tev = evtimer_new(srv->base, on_deadline, c);
    if (c->in == NULL || c->rev == NULL || c->wev == NULL || c->tev == NULL ||
        event_add(c->rev, NULL) != 0) {
        if (c->rev)
            event_free(c->rev);
        if (c->wev)
            event_free(c->wev);
        if (c->tev)
            event_free(c->tev);
        free(c->in);
        free(c);
        close(fd);
        return NULL;
    }
    c->reading = true;
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    peer_read(c);
    TAILQ_INSERT_TAIL(&srv->conns, c, link);
    srv->st.connections++;
    srv->st.accepted++;
    http_conn_timer_update(c);
    return c;
}

/* Closes the socket and leaves the server; the structure stays. */
static void
conn_release(struct http_conn *c)
{
    if (c->fd < 0)
        return;
    event_free(c->rev);
    event_free(c->wev);
    event_free(c->tev);
    c->io->close(c);
    c->fd = -1;
    if (c->lst)
        http_listener_conn_closed(c->lst, c->peer_count);
    TAILQ_REMOVE(&c->srv->conns, c, link);
    c->srv->st.connections--;
    c->state = HTTP_CONN_DEAD;
}

static void
conn_free(struct http_conn *c)
{
    conn_release(c);
    free(c->in);
    free(c->hoff);
    free(c->hdrs);
    free(c->body);
    free(c->out);
    free(c);
}

void
http_conn_close(struct http_conn *c)
{
    if (c->state == HTTP_CONN_HANDLER || c->state == HTTP_CONN_STREAM) {
        http_conn_lost(c);
        return;
    }
    conn_release(c);
    if (c->in_process) {
        c->free_later = true;
        return;
    }
    conn_free(c);
}

void
http_conn_lost(struct http_conn *c)
{
    enum http_conn_state was = c->state;
    void (*fn)(void *) = c->gone_fn;

    if (was != HTTP_CONN_HANDLER && was != HTTP_CONN_STREAM) {
        if (was != HTTP_CONN_DEAD)
            http_conn_close(c);
        return;
    }
    conn_release(c); /* DEAD */
    c->gone = true;
    c->gone_fn = NULL;
    if (fn)
        fn(c->gone_arg);
    if (was == HTTP_CONN_STREAM) {
        /* The stream is over: nobody owns the request any more. */
        if (c->in_process)
            c->free_later = true;
        else
            conn_free(c);
    }
    /* HANDLER: freed when the handler answers (http_conn_answered). */
}

/* The read event back after a full pipeline stopped it. */
static void
reading_on(struct http_conn *c)
{
    if (!c->reading && event_add(c->rev, NULL) == 0)
        c->reading = true;
}

void
http_conn_answered(struct http_conn *c)
{
    if (c->state == HTTP_CONN_DEAD) {
        if (c->in_process)
            c->free_later = true;
        else
            conn_free(c);
        return;
    }
    c->gone_fn = NULL;
    c->nhdr = 0;
    c->url_len = 0;
    c->msg_begun = false;
    c->in_field = false;
    c->body_len = 0;
    c->refuse_status = 0;
    if (c->body_cap > BODY_KEEP_BYTES) {
        free(c->body);
        c->body = NULL;
        c->body_cap = 0;
    }
    c->msg_start = c->in_pos;
    if (c->in_pos == c->in_len)
        c->in_pos = c->in_len = c->msg_start = 0;
    if (!c->keep_alive || c->broken) {
        c->state = HTTP_CONN_CLOSING;
        if (http_conn_pending(c) == 0)
            http_conn_linger(c);
        else
            http_conn_timer_update(c);
        return;
    }
    c->state = HTTP_CONN_HEAD;
    reading_on(c);
    http_conn_timer_update(c);
    if (!c->in_process && c->in_pos < c->in_len)
        event_active(c->rev, EV_READ, 1);
    else if (!c->in_process)
        more_if_pending(c);
}

void
http_conn_linger(struct http_conn *c)
{
    if (c->broken || c->io->shutdown(c) != 0) {
        http_conn_close(c);
        return;
    }
    c->state = HTTP_CONN_LINGER;
    reading_on(c);
    http_conn_timer_update(c);
}

/* ---- the server ------------------------------------------------------------
 */

struct http_server *
http_server_new(struct event_base *base, const struct http_limits *limits,
                http_handler_fn handler, void *arg)
{
    struct http_server *srv = calloc(1, sizeof *srv);
    if (srv == NULL)
        return NULL;
    srv->base = base;
    srv->lim = *limits;
    if (srv->lim.max_headers == 0)
        srv->lim.max_headers = 1;
    srv->handler = handler;
    srv->arg = arg;
    TAILQ_INIT(&srv->conns);
    LIST_INIT(&srv->listeners);
    /* The parser counts the head too; ours is the limit that answers
     * (conn_process), the parser's only a second fence at the same
     * place. */
    if (srv->lim.max_header_bytes < UINT32_MAX - 1)
        http_parser_set_max_header_size((uint32_t)srv->lim.max_header_bytes +
                                        1);
    return srv;
}

int
http_server_adopt(struct http_server *srv, int fd)
{
    return http_conn_new(srv, NULL, fd) ? 0 : -1;
}

void
http_server_free(struct http_server *srv)
{
    struct http_listener *l;
    struct http_conn *c;

    if (srv == NULL)
        return;
    while ((l = LIST_FIRST(&srv->listeners)) != NULL)
        http_listener_free(l);
    while ((c = TAILQ_FIRST(&srv->conns)) != NULL) {
        http_conn_close(c);
        /* A handler's request stays DEAD until answered; it has left the
         * list either way. */
    }
    free(srv);
}

void
http_server_stats(const struct http_server *srv, struct http_server_stats *out)
{
    *out = srv->st;
}

void
http_server_set_fd_reserve(struct http_server *srv, unsigned nofile,
                           unsigned reserve)
{
    srv->nofile = nofile;
    srv->reserve = reserve < nofile ? reserve : nofile;
}

/* ---- a request, for its handler ------------------------------------------ */

const char *
http_request_header(const struct http_request *req, const char *name)
{
    for (size_t i = 0; i < req->nheaders; i++)
        if (strcasecmp(req->headers[i].name, name) == 0)
            return req->headers[i].value;
    return NULL;
}

void
http_request_on_gone(struct http_request *req, void (*fn)(void *arg), void *arg)
{
    req->conn->gone_fn = fn;
    req->conn->gone_arg = arg;
}

bool
http_request_gone(const struct http_request *req)
{
    return req->conn->gone;
}
