/*
 * test_http_server.c — the admin API's HTTP/1.1 server (http_server.h)
 * over socketpairs and loopback TCP: keep-alive, pipelining in order,
 * chunked bodies, Expect: 100-continue, HEAD, HTTP/1.0, Connection: close,
 * each limit with its status and JSON body, the head's deadline (not
 * restarted by each byte), the idle timeout, hang-ups, streams, the caps
 * per listener and per peer, and the pause when descriptors run out.
 *
 * The client side is raw bytes on the other end of a socket; the test runs
 * the server's loop until what it waits for has arrived (or 3 s pass).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "master/api/http_server.h"
#include "tests/unit/check.h"

static struct event_base *base;
static struct http_server *srv;
static struct http_request *held;   /* /async's request */
static struct http_request *stream; /* /stream's */
static int gone_calls;

static void
on_gone(void *arg)
{
    (void)arg;
    gone_calls++;
    if (stream) /* the stream is over: the server frees it */
        stream = NULL;
}

static void
handler(struct http_request *req, void *arg)
{
    char out[8192];
    (void)arg;

    if (req->path_len == 6 && memcmp(req->path, "/async", 6) == 0) {
        held = req;
        http_request_on_gone(req, on_gone, NULL);
        return;
    }
    if (req->path_len == 7 && memcmp(req->path, "/stream", 7) == 0) {
        stream = req;
        http_request_on_gone(req, on_gone, NULL);
        http_request_add_header(req, "Cache-Control", "no-cache");
        http_stream_start(req, 200, "text/event-stream");
        http_stream_write(req, "data: 1\n\n", 9, 1 << 20);
        return;
    }
    if (req->path_len == 4 && memcmp(req->path, "/hdr", 4) == 0) {
        const char *v = http_request_header(req, "X-Test");
        http_reply(req, 200, "text/plain", v ? v : "-", v ? strlen(v) : 1);
        return;
    }
    int n = snprintf(out, sizeof out, "%s %.*s ?%.*s [%.*s]", req->method,
                     (int)req->path_len, req->path, (int)req->query_len,
                     req->query ? req->query : "", (int)req->body_len,
                     (const char *)req->body);
    http_reply(req, 200, "text/plain", out, (size_t)n);
}

static const struct http_limits limits = {
    .max_header_bytes = 4096,
    .max_headers = 20,
    .max_url_bytes = 512,
    .max_body_bytes = 1000,
    .header_timeout_ms = 3000,
    .body_timeout_ms = 3000,
    .idle_timeout_ms = 3000,
    .write_timeout_ms = 3000,
};

static void
setup(const struct http_limits *lim)
{
    base = event_base_new();
    srv = http_server_new(base, lim ? lim : &limits, handler, NULL);
    held = stream = NULL;
    gone_calls = 0;
}

static void
teardown(void)
{
    http_server_free(srv);
    event_base_free(base);
}

/* A client end of a new connection of the server. */
static int
client(void)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    if (http_server_adopt(srv, sv[1]) != 0)
        return -1;
    return sv[0];
}

struct got {
    char buf[65536];
    size_t len;
    bool eof;
};

static void
send_str(int fd, const char *s)
{
    size_t n = strlen(s), off = 0;
    while (off < n) {
        ssize_t w = write(fd, s + off, n - off);
        if (w <= 0)
            return;
        off += (size_t)w;
    }
}

static int
count(const struct got *g, const char *needle)
{
    int n = 0;
    const char *p = g->buf;
    while ((p = strstr(p, needle)) != NULL) {
        n++;
        p++;
    }
    return n;
}

/* Runs the loop and reads fd into g until done(g) or ms pass. */
static void
pump(int fd, struct got *g, bool (*done)(const struct got *, int), int want,
     int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (fd >= 0 && !g->eof && poll(&p, 1, 5) > 0) {
            ssize_t n = read(fd, g->buf + g->len, sizeof g->buf - 1 - g->len);
            if (n > 0)
                g->len += (size_t)n;
            else if (n == 0 || errno != EAGAIN)
                g->eof = true;
            g->buf[g->len] = '\0';
        } else if (fd < 0 || g->eof) {
            struct timespec ts = { 0, 2000000 };
            nanosleep(&ts, NULL);
        }
        if (done && done(g, want))
            return;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >
            ms)
            return;
    }
}

static bool
answers(const struct got *g, int n)
{
    return count(g, "HTTP/1.1 ") >= n;
}

static bool
closed(const struct got *g, int n)
{
    (void)n;
    return g->eof;
}

static bool
never(const struct got *g, int n)
{
    (void)g;
    (void)n;
    return false;
}

/* ---- the tests ------------------------------------------------------------
 */

static void
test_keepalive(void)
{
    setup(NULL);
    int fd = client();
    struct got g = { 0 };
    send_str(fd, "GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    pump(fd, &g, answers, 1, 3000);
    send_str(fd, "POST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyz");
    pump(fd, &g, answers, 2, 3000);
    CHECK(strstr(g.buf, "GET /a ?x=1 []") != NULL);
    CHECK(strstr(g.buf, "POST /b ? [xyz]") != NULL);
    CHECK(strstr(g.buf, "Connection: close") == NULL);
    CHECK(strstr(g.buf, "Date: ") != NULL);
    CHECK(!g.eof);
    close(fd);
    teardown();
}

static void
test_pipeline_in_order(void)
{
    setup(NULL);
    int fd = client();
    struct got g = { 0 };
    send_str(fd, "GET /async HTTP/1.1\r\n\r\n"
                 "GET /one HTTP/1.1\r\n\r\n"
                 "POST /two HTTP/1.1\r\nContent-Length: 2\r\n\r\nok");
    pump(fd, &g, never, 0, 100);
    CHECK(g.len == 0); /* the first is not answered: nothing goes */
    REQUIRE(held != NULL);
    http_reply(held, 200, "text/plain", "first", 5);
    held = NULL;
    pump(fd, &g, answers, 3, 3000);
    char *a = strstr(g.buf, "first"), *b = strstr(g.buf, "GET /one"),
         *c = strstr(g.buf, "POST /two ? [ok]");
    CHECK(a && b && c && a < b && b < c);
    close(fd);
    teardown();
}

static void
test_chunked_body(void)
{
    setup(NULL);
    int fd = client();
    struct got g = { 0 };
    send_str(fd, "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
    pump(fd, &g, answers, 1, 3000);
    CHECK(strstr(g.buf, "POST /c ? [abcde]") != NULL);
    close(fd);
    teardown();
}

static void
test_expect_continue(void)
{
    setup(NULL);
    int fd = client();
    struct got g = { 0 };
    send_str(fd, "PUT /e HTTP/1.1\r\nContent-Length: 4\r\n"
                 "Expect: 100-continue\r\n\r\n");
    pump(fd, &g, answers, 1, 3000);
    CHECK(strncmp(g.buf, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0);
    send_str(fd, "body");
    pump(fd, &g, answers, 2, 3000);
    CHECK(strstr(g.buf, "PUT /e ? [body]") != NULL);
    close(fd);
    teardown();
}

static void
test_head(void)
{
    setup(NULL);
    int fd = client();
    struct got g = { 0 };
    send_str(fd, "HEAD /h HTTP/1.1\r\n\r\nGET /x HTTP/1.1\r\n\r\n");
    pump(fd, &g, answers, 2, 3000);
    pump(fd, &g, never, 0, 50);
    /* The first answer has its length and no body: the second follows
     * its blank line at once. */
    CHECK(strstr(g.buf, "Content-Length: 12\r\n") != NULL);
    CHECK(strstr(g.buf, "\r\n\r\nHTTP/1.1 200") != NULL);
    CHECK(strstr(g.buf, "HEAD /h") == NULL);
    CHECK(strstr(g.buf, "GET /x") != NULL);
    close(fd);
    teardown();
}

static void
test_http10_and_close(void)
{
    setup(NULL);
    int fd = client();
    struct got g = { 0 };
    send_str(fd, "GET /old HTTP/1.0\r\n\r\n");
    pump(fd, &g, closed, 0, 3000);
    CHECK(strstr(g.buf, "GET /old") != NULL);
    CHECK(strstr(g.buf, "Connection: close") != NULL);
    CHECK(g.eof);
    close(fd);

    fd = client();
    struct got k = { 0 };
    send_str(fd, "GET /ka HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    pump(fd, &k, answers, 1, 3000);
    pump(fd, &k, never, 0, 50);
    CHECK(strstr(k.buf, "Connection: keep-alive") != NULL);
    CHECK(!k.eof);
    close(fd);

    fd = client();
    struct got c = { 0 };
    send_str(fd, "GET /bye HTTP/1.1\r\nConnection: close\r\n\r\n");
    pump(fd, &c, closed, 0, 3000);
    CHECK(strstr(c.buf, "GET /bye") != NULL);
    CHECK(c.eof);
    close(fd);
    teardown();
}

/* Sends req on a new connection: the answer is status with the JSON error
 * of code, and the connection is closed after it. */
static void
refused(const char *req, int status, const char *code)
{
    char want[64], wcode[64];
    int fd = client();
    struct got g = { 0 };
    send_str(fd, req);
    pump(fd, &g, closed, 0, 3000);
    snprintf(want, sizeof want, "HTTP/1.1 %d ", status);
    snprintf(wcode, sizeof wcode, "{\"error\":{\"code\":\"%s\",", code);
    if (strncmp(g.buf, want, strlen(want)) != 0 || !strstr(g.buf, wcode) ||
        !strstr(g.buf, "Content-Type: application/json") || !g.eof) {
        FAIL("%s: want %d %s, got %s", req, status, code, g.buf);
    }
    close(fd);
}

static void
test_limits(void)
{
    static char big[8192], many[4096], url[1024];
    setup(NULL);
    snprintf(big, sizeof big, "GET / HTTP/1.1\r\nX-Big: %05000d\r\n\r\n", 0);
    refused(big, 431, "headers_too_large");
    char *p = many + sprintf(many, "GET / HTTP/1.1\r\n");
    for (int i = 0; i < 25; i++)
        p += sprintf(p, "X-%d: v\r\n", i);
    sprintf(p, "\r\n");
    refused(many, 431, "headers_too_large");
    snprintf(url, sizeof url, "GET /%0600d HTTP/1.1\r\n\r\n", 0);
    refused(url, 414, "uri_too_long");
    /* Announced too large: answered before any byte of the body. */
    refused("POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", 413,
            "payload_too_large");
    refused("GET / HTTP/2.0\r\n\r\n", 505, "http_version_not_supported");
    refused("BREW / HTTP/1.1\r\n\r\n", 501, "not_implemented");
    refused("OPTIONS / HTTP/1.1\r\n\r\n", 501, "not_implemented");
    refused("\x16\x03\x01\x02\x00\x01garbage\r\n\r\n", 400, "bad_request");
    refused("GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 400, "bad_request");
    refused("POST / HTTP/1.1\r\nContent-Length: 1\r\nExpect: tea\r\n\r\n", 417,
            "expectation_failed");
    teardown();
}

static void
test_chunked_over_limit(void)
{
    static char req[4096];
    setup(NULL);
    char *p = req + sprintf(req, "POST / HTTP/1.1\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 3; i++) {
        p += sprintf(p, "1f4\r\n");
        memset(p, 'a', 500);
        p += 500;
        p += sprintf(p, "\r\n");
    }
    refused(req, 413, "payload_too_large");
    teardown();
}

static void
test_header_deadline(void)
{
    struct http_limits lim = limits;
    lim.header_timeout_ms = 300;
    setup(&lim);
    int fd = client();
    struct got g = { 0 };
    /* A byte every 50 ms: each would restart a per-byte timeout. */
    send_str(fd, "GET / HTTP/1.1\r\nX-Slow: ");
    for (int i = 0; i < 20 && !g.eof; i++) {
        send_str(fd, "a");
        pump(fd, &g, closed, 0, 50);
    }
    CHECK(g.eof);
    CHECK(strncmp(g.buf, "HTTP/1.1 408 ", 13) == 0);
    CHECK(strstr(g.buf, "\"code\":\"request_timeout\"") != NULL);
    close(fd);
    teardown();
}

static void
test_idle_timeout(void)
{
    struct http_limits lim = limits;
    lim.idle_timeout_ms = 100;
    setup(&lim);
    int fd = client();
    struct got g = { 0 };
    send_str(fd, "GET / HTTP/1.1\r\n\r\n");
    pump(fd, &g, answers, 1, 3000);
    size_t after_answer = g.len;
    pump(fd, &g, closed, 0, 2000);
    CHECK(g.eof);
    CHECK(g.len == after_answer); /* closed without a word */
    struct http_server_stats st;
    http_server_stats(srv, &st);
    CHECK_EQ(st.connections, 0);
    close(fd);
    teardown();
}

static void
test_hangup_marks_gone(void)
{
    setup(NULL);
    int fd = client();
    struct got g = { 0 };
    send_str(fd, "POST /async HTTP/1.1\r\nContent-Length: 1\r\n\r\nx");
    pump(fd, &g, never, 0, 50);
    REQUIRE(held != NULL);
    close(fd);
    pump(-1, &g, never, 0, 50);
    CHECK_EQ(gone_calls, 1);
    CHECK(http_request_gone(held));
    struct http_server_stats st;
    http_server_stats(srv, &st);
    CHECK_EQ(st.connections, 0); /* the descriptor is back already */
    /* The late answer is dropped; the request is freed. */
    http_reply(held, 200, "text/plain", "late", 4);
    held = NULL;
    teardown();
}

static void
test_stream(void)
{
    setup(NULL);
    int fd = client();
    struct got g = { 0 };
    send_str(fd, "GET /stream HTTP/1.1\r\n\r\n");
    pump(fd, &g, never, 0, 50);
    REQUIRE(stream != NULL);
    CHECK(strstr(g.buf, "Transfer-Encoding: chunked") != NULL);
    CHECK(strstr(g.buf, "Cache-Control: no-cache") != NULL);
    CHECK(strstr(g.buf, "9\r\ndata: 1\n\n\r\n") != NULL);
    CHECK(http_stream_write(stream, "data: 2\n\n", 9, 1 << 20) == 0);
    pump(fd, &g, never, 0, 30);
    CHECK(strstr(g.buf, "data: 2") != NULL);
    close(fd);
    pump(-1, &g, never, 0, 50);
    CHECK_EQ(gone_calls, 1);
    CHECK(stream == NULL);
    teardown();
}

/* ---- listeners ------------------------------------------------------------
 */

static int
tcp_listener(uint16_t *port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t sl = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
        return -1;
    *port = ntohs(sa.sin_port);
    return fd;
}

static int
tcp_client(uint16_t port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        return -1;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

static void
test_listener_cap(void)
{
    uint16_t port;
    setup(NULL);
    int lfd = tcp_listener(&port);
    REQUIRE(lfd >= 0);
    REQUIRE(http_listener_new(srv, lfd, "test", 2, 0) != NULL);
    int a = tcp_client(port), b = tcp_client(port), c = tcp_client(port);
    struct got ga = { 0 }, gc = { 0 };
    pump(a, &ga, never, 0, 50);
    send_str(c, "GET /third HTTP/1.1\r\n\r\n");
    pump(c, &gc, answers, 1, 200);
    CHECK(gc.len == 0); /* waits in the backlog */
    close(a);
    pump(c, &gc, answers, 1, 3000);
    CHECK(strstr(gc.buf, "GET /third") != NULL);
    close(b);
    close(c);
    teardown();
}

static void
test_peer_cap(void)
{
    uint16_t port;
    setup(NULL);
    int lfd = tcp_listener(&port);
    REQUIRE(lfd >= 0);
    REQUIRE(http_listener_new(srv, lfd, "test", 10, 1) != NULL);
    int a = tcp_client(port), b = tcp_client(port);
    struct got ga = { 0 }, gb = { 0 };
    send_str(b, "GET / HTTP/1.1\r\n\r\n");
    pump(b, &gb, closed, 0, 3000);
    CHECK(strncmp(gb.buf, "HTTP/1.1 429 ", 13) == 0);
    CHECK(strstr(gb.buf, "\"code\":\"too_many_connections\"") != NULL);
    CHECK(strstr(gb.buf, "Retry-After: 1") != NULL);
    send_str(a, "GET /first HTTP/1.1\r\n\r\n");
    pump(a, &ga, answers, 1, 3000);
    CHECK(strstr(ga.buf, "GET /first") != NULL);
    close(a);
    close(b);
    teardown();
}

/* With no descriptor left, accepting pauses instead of spinning, and
 * resumes once there are descriptors again. */
static void
test_emfile_pauses(void)
{
    uint16_t port;
    struct rlimit old, low;
    setup(NULL);
    int lfd = tcp_listener(&port);
    REQUIRE(lfd >= 0);
    REQUIRE(http_listener_new(srv, lfd, "test", 10, 0) != NULL);
    int a = tcp_client(port);
    REQUIRE(a >= 0);
    int lowest = dup(0);
    close(lowest);
    getrlimit(RLIMIT_NOFILE, &old);
    low = old;
    low.rlim_cur = (rlim_t)lowest; /* every descriptor taken */
    REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
    struct got g = { 0 };
    send_str(a, "GET /late HTTP/1.1\r\n\r\n");
    pump(a, &g, never, 0, 300);
    struct http_server_stats st;
    http_server_stats(srv, &st);
    CHECK(st.accept_pauses >= 1 && st.accept_pauses <= 2);
    CHECK_EQ(st.accepted, 0);
    setrlimit(RLIMIT_NOFILE, &old);
    pump(a, &g, answers, 1, 3000);
    CHECK(strstr(g.buf, "GET /late") != NULL);

    /* The reserve: a descriptor that high is refused the same way. */
    int b = tcp_client(port);
    lowest = dup(0);
    close(lowest);
    http_server_set_fd_reserve(srv, (unsigned)lowest + 4, 4);
    struct got gb = { 0 };
    send_str(b, "GET /b HTTP/1.1\r\n\r\n");
    pump(b, &gb, never, 0, 100);
    http_server_stats(srv, &st);
    CHECK(gb.len == 0);
    CHECK(st.accept_pauses >= 2);
    /* b was closed unanswered; once descriptors are spare, the next
     * client is served. */
    http_server_set_fd_reserve(srv, 0, 0);
    int c = tcp_client(port);
    struct got gc = { 0 };
    send_str(c, "GET /c HTTP/1.1\r\n\r\n");
    pump(c, &gc, answers, 1, 3000);
    CHECK(strstr(gc.buf, "GET /c") != NULL);
    close(a);
    close(b);
    close(c);
    teardown();
}

int
main(void)
{
    RUN(test_keepalive);
    RUN(test_pipeline_in_order);
    RUN(test_chunked_body);
    RUN(test_expect_continue);
    RUN(test_head);
    RUN(test_http10_and_close);
    RUN(test_limits);
    RUN(test_chunked_over_limit);
    RUN(test_header_deadline);
    RUN(test_idle_timeout);
    RUN(test_hangup_marks_gone);
    RUN(test_stream);
    RUN(test_listener_cap);
    RUN(test_peer_cap);
    RUN(test_emfile_pauses);
    return check_result();
}
