/*
 * http_reply.c — the output side of the admin API's HTTP server
 * (http_server.h): an answer's head, the JSON error object of the server's
 * own refusals, answers, chunked streams, and the writes.
 *
 * Why this way: an answer is written with one writev() of its head and
 * body straight from the caller's buffers; only what the socket does not
 * take is copied into the connection's output queue, and only then is the
 * write event armed (no epoll_ctl per request).  Heads are assembled by
 * hand (no printf on the hot path) and Date is formatted once a second.
 *
 * Invariants: bytes leave in the order they were sent (once something is
 * queued, later sends queue behind it); a failed write never runs a gone
 * callback under the caller (the connection is marked broken and the read
 * event, run by the loop, reports the loss); every refusal of the server
 * is JSON and closes the connection after it.
 */
#include "config.h"

#include "master/api/http_private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "master/core/log.h"

/* An output queue past this is given back once written. */
#define OUT_KEEP_BYTES (1u << 20)

/* ---- writing ------------------------------------------------------------- */

size_t
http_conn_pending(const struct http_conn *c)
{
    return c->out_len - c->out_pos;
}

static int
queue(struct http_conn *c, const char *p, size_t len)
{
    if (c->out_len + len > c->out_cap) {
        if (c->out_pos > 0) {
            memmove(c->out, c->out + c->out_pos, c->out_len - c->out_pos);
            c->out_len -= c->out_pos;
            c->out_pos = 0;
        }
        if (c->out_len + len > c->out_cap) {
            size_t cap = c->out_cap ? c->out_cap : 4096;
            while (cap < c->out_len + len)
                cap *= 2;
            char *o = realloc(c->out, cap);
            if (o == NULL)
                return -1;
            c->out = o;
            c->out_cap = cap;
        }
    }
    memcpy(c->out + c->out_len, p, len);
    c->out_len += len;
    return 0;
}

static void
mark_broken(struct http_conn *c)
{
    c->broken = true;
    /* The loop reports the loss (on_readable), not the caller's frame. */
    event_active(c->rev, EV_READ, 1);
}

int
http_conn_send(struct http_conn *c, const struct iovec *iov, int n)
{
    size_t done = 0;

    if (c->state == HTTP_CONN_DEAD || c->broken)
        return -1;
    if (http_conn_pending(c) == 0) {
        ssize_t w = c->io->writev(c, iov, n);
        if (w < 0 && errno != EAGAIN && errno != EINTR) {
            mark_broken(c);
            return -1;
        }
        done = w > 0 ? (size_t)w : 0;
    }
    bool queued = false;
    for (int i = 0; i < n; i++) {
        size_t len = iov[i].iov_len;
        if (done >= len) {
            done -= len;
            continue;
        }
        if (queue(c, (const char *)iov[i].iov_base + done, len - done) != 0) {
            mark_broken(c);
            return -1;
        }
        done = 0;
        queued = true;
    }
    if (queued && !c->writing) {
        if (event_add(c->wev, NULL) != 0) {
            mark_broken(c);
            return -1;
        }
        c->writing = true;
        http_conn_timer_update(c);
    }
    return 0;
}

void
http_conn_on_writable(int fd, short what, void *arg)
{
    struct http_conn *c = arg;
    struct iovec iov = { c->out + c->out_pos, http_conn_pending(c) };
    (void)fd;
    (void)what;

    ssize_t w = c->io->writev(c, &iov, 1);
    if (w < 0) {
        if (errno != EAGAIN && errno != EINTR)
            http_conn_lost(c);
        return;
    }
    c->out_pos += (size_t)w;
    if (http_conn_pending(c) == 0) {
        c->out_pos = c->out_len = 0;
        if (c->out_cap > OUT_KEEP_BYTES) {
            free(c->out);
            c->out = NULL;
            c->out_cap = 0;
        }
        event_del(c->wev);
        c->writing = false;
        if (c->state == HTTP_CONN_CLOSING) {
            http_conn_linger(c);
            return;
        }
    }
    /* Progress restarts the write deadline. */
    http_conn_timer_update(c);
}

/* ---- heads --------------------------------------------------------------- */

static char *
put(char *p, const char *end, const char *s, size_t n)
{
    if (p == NULL || (size_t)(end - p) < n)
        return NULL;
    memcpy(p, s, n);
    return p + n;
}

static char *
puts_(char *p, const char *end, const char *s)
{
    return put(p, end, s, strlen(s));
}

static char *
put_uint(char *p, const char *end, uint64_t v, unsigned base)
{
    char tmp[24];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    return put(p, end, tmp + i, sizeof tmp - i);
}

/* "Date: <IMF-fixdate>\r\n", formatted once a second. */
static const char *
date_line(void)
{
    static time_t at;
    static char line[64];
    time_t now = time(NULL);
    if (now != at || line[0] == '\0') {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(line, sizeof line, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        at = now;
    }
    return line;
}

size_t
http_reply_head(struct http_conn *c, int status, const char *content_type,
                bool has_length, uint64_t length, char *buf, size_t cap)
{
    const char *end = buf + cap;
    char *p = buf;
    bool no_body = status == 204 || status == 304 || status < 200;

    p = puts_(p, end, "HTTP/1.1 ");
    p = put_uint(p, end, (uint64_t)status, 10);
    p = puts_(p, end, " ");
    p = puts_(p, end, http_status_str((enum http_status)status));
    p = puts_(p, end, "\r\n");
    p = puts_(p, end, date_line());
    if (content_type) {
        p = puts_(p, end, "Content-Type: ");
        p = puts_(p, end, content_type);
        p = puts_(p, end, "\r\n");
    }
    if (no_body) {
        /* nothing */
    } else if (has_length) {
        p = puts_(p, end, "Content-Length: ");
        p = put_uint(p, end, length, 10);
        p = puts_(p, end, "\r\n");
    } else if (c->chunked_out) {
        p = puts_(p, end, "Transfer-Encoding: chunked\r\n");
    }
    if (!c->keep_alive)
        p = puts_(p, end, "Connection: close\r\n");
    else if (c->req.minor == 0)
        p = puts_(p, end, "Connection: keep-alive\r\n");
    p = put(p, end, c->extra, c->extra_len);
    p = puts_(p, end, "\r\n");
    return p ? (size_t)(p - buf) : 0;
}

size_t
http_reply_error_body(const char *code, const char *message, char *buf,
                      size_t cap)
{
    static const char tail[] = "\"}}\n";
    const char *end = buf + cap - (sizeof tail - 1);
    char *p = buf;

    p = puts_(p, end, "{\"error\":{\"code\":\"");
    p = puts_(p, end, code);
    p = puts_(p, end, "\",\"message\":\"");
    for (const unsigned char *m = (const unsigned char *)message; p && *m;
         m++) {
        char esc[8];
        if (*m == '"' || *m == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*m;
            if ((size_t)(end - p) < 2)
                break;
            p = put(p, end, esc, 2);
        } else if (*m < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *m);
            if ((size_t)(end - p) < 6)
                break;
            p = put(p, end, esc, 6);
        } else {
            if (p == end)
                break;
            *p++ = (char)*m;
        }
    }
    if (p == NULL)
        return 0;
    memcpy(p, tail, sizeof tail - 1);
    return (size_t)(p - buf) + sizeof tail - 1;
}

/* ---- answers --------------------------------------------------------------
 */

static int
extra_add(struct http_conn *c, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);

    if (strpbrk(value, "\r\n") || strpbrk(name, "\r\n: ") ||
        c->extra_len + nl + vl + 4 > sizeof c->extra)
        return -1;
    char *p = c->extra + c->extra_len;
    memcpy(p, name, nl);
    memcpy(p + nl, ": ", 2);
    memcpy(p + nl + 2, value, vl);
    memcpy(p + nl + 2 + vl, "\r\n", 2);
    c->extra_len += nl + vl + 4;
    return 0;
}

int
http_request_add_header(struct http_request *req, const char *name,
                        const char *value)
{
    return extra_add(req->conn, name, value);
}

void
http_reply(struct http_request *req, int status, const char *content_type,
           const void *body, size_t len)
{
    http_reply_fields(req, status, content_type, NULL, 0, body, len);
}

void
http_reply_fields(struct http_request *req, int status,
                  const char *content_type, const char *fields,
                  size_t fields_len, const void *body, size_t len)
{
    struct http_conn *c = req->conn;
    char head[512 + HTTP_EXTRA_HEADERS];

    if (c->state != HTTP_CONN_DEAD) {
        size_t hl = http_reply_head(c, status, content_type, true, len, head,
                                    sizeof head);
        /* The head ends in the blank line: the fields go before it. */
        struct iovec iov[4] = {
            { head, hl >= 2 ? hl - 2 : 0 },
            { http_iov_base(fields), fields_len },
            { http_iov_base("\r\n"), 2 },
            { http_iov_base(body), req->head ? 0 : len },
        };
        http_conn_send(c, iov, 4);
    }
    http_conn_answered(c);
}

void
http_reply_error(struct http_request *req, int status, const char *code,
                 const char *message)
{
    char body[512];
    size_t n = http_reply_error_body(code, message, body, sizeof body);
    http_reply(req, status, "application/json", body, n);
}

void
http_conn_refuse(struct http_conn *c, int status, const char *code,
                 const char *msg)
{
    char head[512 + HTTP_EXTRA_HEADERS];
    char body[512];

    c->srv->st.refused++;
    log_info("api: %s: refused %d %s: %s", c->peer.text, status, code, msg);
    c->keep_alive = false;
    c->chunked_out = false;
    c->state = HTTP_CONN_CLOSING;
    c->extra_len = 0;
    size_t bl = http_reply_error_body(code, msg, body, sizeof body);
    if (status == 503 || status == 429)
        extra_add(c, "Retry-After", "1");
    size_t hl = http_reply_head(c, status, "application/json", true, bl, head,
                                sizeof head);
    struct iovec iov[2] = { { head, hl }, { body, bl } };
    if (http_conn_send(c, iov, 2) != 0)
        return; /* broken: the read event closes it */
    if (http_conn_pending(c) == 0)
        http_conn_linger(c);
}

/* ---- streams --------------------------------------------------------------
 */

void
http_stream_start(struct http_request *req, int status,
                  const char *content_type)
{
    struct http_conn *c = req->conn;
    char head[512 + HTTP_EXTRA_HEADERS];

    if (c->state == HTTP_CONN_DEAD)
        return;
    c->chunked_out = req->minor >= 1;
    if (!c->chunked_out)
        c->keep_alive = false; /* the end of the bytes is the close */
    c->state = HTTP_CONN_STREAM;
    size_t hl =
        http_reply_head(c, status, content_type, false, 0, head, sizeof head);
    struct iovec iov = { head, hl };
    http_conn_send(c, &iov, 1);
    http_conn_timer_update(c);
}

int
http_stream_write(struct http_request *req, const void *data, size_t len,
                  size_t max_pending)
{
    struct http_conn *c = req->conn;
    char size[24];

    if (c->state != HTTP_CONN_STREAM || c->broken ||
        http_conn_pending(c) > max_pending)
        return -1;
    if (req->head || len == 0)
        return 0;
    if (!c->chunked_out) {
        struct iovec iov = { http_iov_base(data), len };
        return http_conn_send(c, &iov, 1);
    }
    char *p = put_uint(size, size + sizeof size - 2, len, 16);
    memcpy(p, "\r\n", 2);
    struct iovec iov[3] = {
        { size, (size_t)(p + 2 - size) },
        { http_iov_base(data), len },
        { http_iov_base("\r\n"), 2 },
    };
    return http_conn_send(c, iov, 3);
}

void
http_stream_end(struct http_request *req)
{
    struct http_conn *c = req->conn;

    if (c->state == HTTP_CONN_STREAM && c->chunked_out && !req->head) {
        struct iovec iov = { http_iov_base("0\r\n\r\n"), 5 };
        http_conn_send(c, &iov, 1);
    }
    http_conn_answered(c);
}
