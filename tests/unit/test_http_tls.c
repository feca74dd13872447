/*
 * test_http_tls.c — TLS on the admin API's HTTP server (http_tls.c, the
 * connection I/O seam of http_private.h) over loopback TCP: a request and
 * an answer far larger than the socket takes at once (partial writes, the
 * retry from the output queue), pipelined requests, a verified client
 * certificate's subject and tenant on the request's peer, a client
 * without the required certificate refused, plain bytes to the TLS port
 * closed without an answer, and a key that does not match refused.
 *
 * The CA and certificates are made here with OpenSSL's API, in a
 * temporary directory.  The client is OpenSSL on a non-blocking socket;
 * the test turns the server's loop and the client in turns until what it
 * waits for has happened (or WAIT_S pass).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "master/api/http_private.h"
#include "tests/unit/check.h"

/* The answer of /big: many times what the client's small receive buffer
 * (CLIENT_RCVBUF) lets the server write at once. */
#define BIG_BYTES (1u << 20)
#define CLIENT_RCVBUF 16384
/* A cap, not an expectation (slow under valgrind). */
#define WAIT_S 10

static char dir[] = "/tmp/test_http_tls.XXXXXX";
static struct event_base *base;
static struct http_server *srv;
static struct http_tls *tls;
static int port;
static struct http_peer seen; /* the last request's peer */
static char *big;

static void
handler(struct http_request *req, void *arg)
{
    (void)arg;
    seen = *req->peer;
    if (req->path_len == 4 && memcmp(req->path, "/big", 4) == 0) {
        /* A small send buffer: SSL_write() must stop part-way and the
         * rest go from the output queue. */
        int sndbuf = 4096;
        setsockopt(req->conn->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf,
                   sizeof sndbuf);
        http_reply(req, 200, "text/plain", big, BIG_BYTES);
        return;
    }
    http_reply(req, 200, "text/plain", req->path, req->path_len);
}

/* No deadlines (0): the test's own WAIT_S bounds each wait. */
static const struct http_limits limits = {
    .max_header_bytes = 4096,
    .max_headers = 20,
    .max_url_bytes = 512,
    .max_body_bytes = 1000,
};

/* ---- certificates --------------------------------------------------------
 */

static char *
path_of(const char *name)
{
    static char p[8][128];
    static int i;
    char *s = p[i++ % 8];
    snprintf(s, sizeof p[0], "%s/%s", dir, name);
    return s;
}

static void
save(const char *name, EVP_PKEY *key, X509 *x)
{
    FILE *f = fopen(path_of(name), "w");
    if (f == NULL)
        return;
    if (x)
        PEM_write_X509(f, x);
    if (key)
        PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
    fclose(f);
}

/* A certificate for cn signed by (ca, ca_key), or self-signed. */
static X509 *
cert_new(const char *cn, EVP_PKEY *key, X509 *ca, EVP_PKEY *ca_key)
{
    static long serial = 1;
    X509 *x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, ca ? X509_get_subject_name(ca) : name);
    if (ca == NULL) {
        X509_EXTENSION *ext = X509V3_EXT_conf_nid(
            NULL, NULL, NID_basic_constraints, "critical,CA:TRUE");
        X509_add_ext(x, ext, -1);
        X509_EXTENSION_free(ext);
    }
    X509_sign(x, ca_key ? ca_key : key, EVP_sha256());
    return x;
}

static void
make_pki(void)
{
    EVP_PKEY *ca_key = EVP_EC_gen("P-256");
    EVP_PKEY *key = EVP_EC_gen("P-256");
    EVP_PKEY *other = EVP_EC_gen("P-256");
    X509 *ca = cert_new("test ca", ca_key, NULL, NULL);
    X509 *server = cert_new("localhost", key, ca, ca_key);
    X509 *client = cert_new("acme", key, ca, ca_key);
    save("ca.pem", NULL, ca);
    save("server.pem", key, server);
    save("client.pem", key, client);
    save("other.key", other, NULL);
    X509_free(ca);
    X509_free(server);
    X509_free(client);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
    EVP_PKEY_free(other);
}

/* ---- the server and the client -------------------------------------------
 */

static void
setup_with(enum http_tls_client client_cert, const struct http_limits *lim)
{
    struct http_tls_conf tc = {
        .cert_file = path_of("server.pem"),
        .client_ca_file = path_of("ca.pem"),
        .client = client_cert,
    };
    char err[256] = "";
    struct sockaddr_in sa = { .sin_family = AF_INET,
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sa;

    memset(&seen, 0, sizeof seen);
    base = event_base_new();
    srv = http_server_new(base, lim, handler, NULL);
    tls = http_tls_new(&tc, err, sizeof err);
    if (tls == NULL)
        FAIL("http_tls_new: %s", err);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    bind(fd, (struct sockaddr *)&sa, sizeof sa);
    listen(fd, 8);
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    port = ntohs(sa.sin_port);
    struct http_listener *l = http_listener_new(srv, fd, "tcp test", 8, 0);
    if (tls && l)
        http_listener_set_tls(l, tls);
}

static void
setup(enum http_tls_client client_cert)
{
    setup_with(client_cert, &limits);
}

static void
teardown(void)
{
    http_server_free(srv);
    http_tls_free(tls);
    event_base_free(base);
}

static int
connect_tcp(void)
{
    struct sockaddr_in sa = { .sin_family = AF_INET,
                              .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rcvbuf = CLIENT_RCVBUF;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

struct client {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    char *in;
    size_t len;
    bool failed; /* the handshake or a read failed */
    bool eof;
};

static void
client_open(struct client *c, bool with_cert)
{
    memset(c, 0, sizeof *c);
    c->in = calloc(1, BIG_BYTES + 65536);
    c->ctx = SSL_CTX_new(TLS_client_method());
    if (with_cert) {
        SSL_CTX_use_certificate_file(c->ctx, path_of("client.pem"),
                                     SSL_FILETYPE_PEM);
        SSL_CTX_use_PrivateKey_file(c->ctx, path_of("client.pem"),
                                    SSL_FILETYPE_PEM);
    }
    c->fd = connect_tcp();
    c->ssl = SSL_new(c->ctx);
    SSL_set_fd(c->ssl, c->fd);
    SSL_set_connect_state(c->ssl);
}

static void
client_close(struct client *c)
{
    SSL_free(c->ssl);
    SSL_CTX_free(c->ctx);
    close(c->fd);
    free(c->in);
}

/* One turn of the client: reads what there is. */
static void
client_turn(struct client *c)
{
    while (!c->failed && !c->eof) {
        size_t n = 0;
        ERR_clear_error();
        if (SSL_read_ex(c->ssl, c->in + c->len, BIG_BYTES + 65535 - c->len,
                        &n) == 1) {
            c->len += n;
            c->in[c->len] = '\0';
            continue;
        }
        int e = SSL_get_error(c->ssl, 0);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return;
        if (e == SSL_ERROR_ZERO_RETURN)
            c->eof = true;
        else
            c->failed = true;
    }
}

/* Turns the server's loop and the client until done(c) or WAIT_S pass. */
static bool
run_until(struct client *c, bool (*done)(const struct client *c))
{
    time_t end = time(NULL) + WAIT_S;
    while (time(NULL) <= end) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        client_turn(c);
        if (done(c))
            return true;
        usleep(1000);
    }
    return false;
}

static bool
ended(const struct client *c)
{
    return c->failed || c->eof;
}

/* Writes s whole (the handshake runs within). */
static bool
client_send(struct client *c, const char *s)
{
    size_t off = 0, n = strlen(s);
    time_t end = time(NULL) + WAIT_S;
    while (off < n && time(NULL) <= end) {
        size_t w = 0;
        ERR_clear_error();
        if (SSL_write_ex(c->ssl, s + off, n - off, &w) == 1) {
            off += w;
            continue;
        }
        int e = SSL_get_error(c->ssl, 0);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            c->failed = true;
            return false;
        }
        event_base_loop(base, EVLOOP_NONBLOCK);
        usleep(1000);
    }
    return off == n;
}

/* Both answers of the pipeline are in: the second ends the bytes. */
static bool
second_in(const struct client *c)
{
    return c->failed || c->eof ||
           (c->len > BIG_BYTES && memcmp(c->in + c->len - 4, "/two", 4) == 0);
}

/* ---- the tests -----------------------------------------------------------
 */

static void
test_big_answer_and_pipeline(void)
{
    struct client c;

    setup(HTTP_TLS_CLIENT_NONE);
    REQUIRE(tls != NULL);
    client_open(&c, false);
    REQUIRE(c.fd >= 0);
    CHECK(client_send(&c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"
                          "GET /two HTTP/1.1\r\nHost: x\r\n\r\n"));
    CHECK(run_until(&c, second_in));
    CHECK(!c.failed);
    const char *body = strstr(c.in, "\r\n\r\n");
    REQUIRE(body != NULL);
    body += 4;
    CHECK(strncmp(c.in, "HTTP/1.1 200", 12) == 0);
    CHECK(memcmp(body, big, BIG_BYTES) == 0);
    /* The pipelined request's answer follows the big one, in order. */
    const char *second = body + BIG_BYTES;
    CHECK(strncmp(second, "HTTP/1.1 200", 12) == 0);
    CHECK(strstr(second, "\r\n\r\n/two") != NULL);
    CHECK(seen.tls);
    CHECK(!seen.client_cert);
    CHECK(strstr(seen.text, "tls") == NULL);
    client_close(&c);
    teardown();
}

static bool
answered(const struct client *c)
{
    return c->failed || strstr(c->in, "\r\n\r\n/who") != NULL;
}

static void
test_client_cert_names_the_tenant(void)
{
    struct client c;

    setup(HTTP_TLS_CLIENT_REQUIRED);
    REQUIRE(tls != NULL);
    client_open(&c, true);
    CHECK(client_send(&c, "GET /who HTTP/1.1\r\nHost: x\r\n\r\n"));
    CHECK(run_until(&c, answered));
    CHECK(!c.failed);
    CHECK(seen.tls);
    CHECK(seen.client_cert);
    CHECK_STR(seen.tenant, "acme");
    CHECK_STR(seen.subject, "CN=acme");
    CHECK(strstr(seen.text, "tcp 127.0.0.1:") == seen.text);
    CHECK(strstr(seen.text, " tls cn=acme") != NULL);
    client_close(&c);

    /* Without a certificate: no answer, the failure counted. */
    memset(&seen, 0, sizeof seen);
    client_open(&c, false);
    client_send(&c, "GET /who HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(run_until(&c, ended));
    CHECK(c.failed);
    CHECK(strstr(c.in, "HTTP/") == NULL);
    CHECK(!seen.tls);
    CHECK_EQ(http_tls_failures(tls), 1);
    client_close(&c);
    teardown();
}

static void
test_plain_bytes_get_no_answer(void)
{
    static const char req[] = "GET /who HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[4096];
    size_t len = 0;
    bool closed = false;

    setup(HTTP_TLS_CLIENT_NONE);
    REQUIRE(tls != NULL);
    int fd = connect_tcp();
    REQUIRE(fd >= 0);
    CHECK(write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1));
    time_t end = time(NULL) + WAIT_S;
    while (!closed && time(NULL) <= end) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
        if (n > 0)
            len += (size_t)n;
        else if (n == 0 || errno != EAGAIN)
            closed = true;
        else
            usleep(1000);
    }
    buf[len] = '\0';
    /* Closed (or reset) with no HTTP answer (an alert at most). */
    CHECK(closed);
    CHECK(memmem(buf, len, "HTTP/", 5) == NULL);
    CHECK_EQ(http_tls_failures(tls), 1);
    close(fd);
    teardown();
}

static int
answers(const struct client *c)
{
    int n = 0;
    for (const char *p = c->in; (p = strstr(p, "HTTP/1.1 200")) != NULL; p++)
        n++;
    return n;
}

static int want_answers;

static bool
all_answered(const struct client *c)
{
    return c->failed || c->eof || answers(c) >= want_answers;
}

/* A record larger than the room left in the read buffer: OpenSSL keeps
 * the rest, which makes no read event; the server must still read it
 * (http_io.pending). */
static void
test_record_larger_than_the_room(void)
{
    static const char one[] = "GET /p HTTP/1.1\r\nHost: x\r\n\r\n";
    char *many = malloc(20000);
    size_t len = 0;
    int n = 0;
    struct client c;

    REQUIRE(many != NULL);
    /* The rest of a first request (padded), then 580 requests: 16380
     * bytes, one record (at most 16384), more than the 16367 bytes of
     * room after the first part's 17. */
    len = (size_t)snprintf(many, 20000, "X-Pad: %0120d\r\nHost: x\r\n\r\n", 0);
    n = 1;
    for (int i = 0; i < 580; i++) {
        memcpy(many + len, one, sizeof one - 1);
        len += sizeof one - 1;
        n++;
    }
    many[len] = '\0';
    CHECK_EQ(len, 16380);
    setup(HTTP_TLS_CLIENT_NONE);
    REQUIRE(tls != NULL);
    client_open(&c, false);
    CHECK(client_send(&c, "GET /p HTTP/1.1\r\n"));
    for (int i = 0; i < 50; i++) { /* the server reads the first part */
        event_base_loop(base, EVLOOP_NONBLOCK);
        usleep(1000);
    }
    CHECK(client_send(&c, many));
    want_answers = n;
    CHECK(run_until(&c, all_answered));
    CHECK_EQ(answers(&c), n);
    client_close(&c);
    teardown();
    free(many);
}

/* A client that connects and sends nothing (or trickles its handshake)
 * is cut off at the head's deadline, idle timeout or not. */
static void
test_stalled_handshake_cut_off(void)
{
    struct http_limits lim = limits;
    char b;

    lim.header_timeout_ms = 200;
    setup_with(HTTP_TLS_CLIENT_NONE, &lim);
    REQUIRE(tls != NULL);
    int fd = connect_tcp();
    REQUIRE(fd >= 0);
    CHECK(write(fd, "\x16", 1) == 1); /* a handshake record begins */
    bool closed = false;
    time_t end = time(NULL) + WAIT_S;
    while (!closed && time(NULL) <= end) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        ssize_t n = read(fd, &b, 1);
        closed = n == 0 || (n < 0 && errno != EAGAIN);
        usleep(1000);
    }
    CHECK(closed);
    struct http_server_stats st;
    http_server_stats(srv, &st);
    CHECK_EQ(st.timeouts, 1);
    CHECK_EQ(st.connections, 0);
    close(fd);
    teardown();
}

static void
test_refusals_of_the_setting(void)
{
    struct http_tls_conf tc = { .cert_file = path_of("server.pem"),
                                .key_file = path_of("other.key") };
    char err[256] = "";

    CHECK(http_tls_new(&tc, err, sizeof err) == NULL);
    CHECK(strstr(err, "tls_key_file") != NULL);
    CHECK(strstr(err, "does not match") != NULL);
    tc.key_file = NULL;
    tc.cert_file = path_of("missing.pem");
    CHECK(http_tls_new(&tc, err, sizeof err) == NULL);
    CHECK(strstr(err, "tls_cert_file") != NULL);
    tc.cert_file = path_of("server.pem");
    tc.client = HTTP_TLS_CLIENT_REQUIRED;
    CHECK(http_tls_new(&tc, err, sizeof err) == NULL);
    CHECK(strstr(err, "tls_client_ca_file") != NULL);
}

int
main(void)
{
    if (mkdtemp(dir) == NULL)
        return 99;
    big = malloc(BIG_BYTES);
    for (size_t i = 0; i < BIG_BYTES; i++)
        big[i] = (char)('a' + i % 26);
    make_pki();
    RUN(test_big_answer_and_pipeline);
    RUN(test_client_cert_names_the_tenant);
    RUN(test_plain_bytes_get_no_answer);
    RUN(test_record_larger_than_the_room);
    RUN(test_stalled_handshake_cut_off);
    RUN(test_refusals_of_the_setting);
    const char *files[] = { "ca.pem", "server.pem", "client.pem", "other.key" };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(path_of(files[i]));
    rmdir(dir);
    free(big);
    return check_failures ? 1 : 0;
}
