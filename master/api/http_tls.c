/*
 * http_tls.c — TLS for the admin API's HTTP server (http_server.h): the
 * server's setting (certificate, key, oldest version, client
 * certificates) and a connection's TLS I/O in the place of the plain
 * socket's (struct http_io, http_private.h).
 *
 * Why this way: OpenSSL runs straight on the connection's non-blocking
 * socket, driven by the connection's existing read and write events, with
 * no bufferevent and no memory BIO: the handshake happens inside the first
 * SSL_read() calls of on_readable(), an answer's SSL_write() inside the
 * server's writes.  A write that would block is retried by the server
 * with the same bytes at the front of its output queue, which is what
 * OpenSSL asks (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER allows the queue to
 * move).  Several small pieces (an answer's head and body) go as one
 * record.  Renegotiation is off, so a write never needs a read, and no
 * answer is written before the handshake is done (a connection the server
 * refuses that early is closed without one).  Plain connections do not
 * come here: they keep their writev() path.
 *
 * The handshake has the head's deadline (http_header_timeout_ms from the
 * accept), so a client that stalls or trickles it is cut off.
 *
 * Invariants: c->ssl is set exactly while c->io is tls_io; c->peer's TLS
 * fields are filled once, when the handshake is done, before any byte of
 * a request is returned; failed handshakes are counted, and logged with
 * the peer and OpenSSL's reason at most once per TLS_LOG_EVERY_MS.
 */
#include "config.h"

#include "master/api/http_private.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "lib/errbuf.h"
#include "master/core/log.h"

/* At most one log line about failed handshakes this often. */
#define TLS_LOG_EVERY_MS 10000
/* Pieces of a write up to this size together go as one record. */
#define TLS_COALESCE_BYTES 16384

struct http_tls {
    SSL_CTX *ctx;
    int64_t not_after;
    uint64_t failures;
    int64_t log_ms;    /* when the last failure was logged */
    uint64_t unlogged; /* failures since */
};

static int tls_ex_index = -1;

/* What an operator makes of the commonest handshake failures. */
static const char *
reason_hint(unsigned long e)
{
    if (ERR_GET_LIB(e) != ERR_LIB_SSL)
        return "";
    switch (ERR_GET_REASON(e)) {
    case SSL_R_HTTP_REQUEST:
        return " (plain HTTP sent to the TLS port: the client must use "
               "https://)";
    case SSL_R_UNSUPPORTED_PROTOCOL:
        return " (the client offers no TLS version from tls_min_version "
               "up)";
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
        return " (tls_client_cert = required)";
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
        return " (the client certificate does not chain to "
               "tls_client_ca_file, or has expired)";
    default:
        return "";
    }
}

/* OpenSSL's first queued reason (and a hint), or fallback. */
static const char *
ssl_reason(char *buf, size_t cap, const char *fallback)
{
    unsigned long e = ERR_peek_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    if (e == 0)
        snprintf(buf, cap, "%s", fallback);
    else if (r)
        snprintf(buf, cap, "%s%s", r, reason_hint(e));
    else
        ERR_error_string_n(e, buf, cap);
    ERR_clear_error();
    return buf;
}

/* ---- the setting ---------------------------------------------------------
 */

static int64_t
cert_not_after(SSL_CTX *ctx)
{
    X509 *x = SSL_CTX_get0_certificate(ctx);
    struct tm tm;
    if (x == NULL || ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) != 1)
        return 0;
    return (int64_t)timegm(&tm);
}

struct http_tls *
http_tls_new(const struct http_tls_conf *conf, char *err, size_t errlen)
{
    char why[256];
    const char *key =
        conf->key_file && *conf->key_file ? conf->key_file : conf->cert_file;
    const char *key_name =
        conf->key_file && *conf->key_file ? "tls_key_file" : "tls_cert_file";
    struct http_tls *tls = calloc(1, sizeof *tls);

    if (tls_ex_index < 0)
        tls_ex_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    if (tls == NULL || tls_ex_index < 0 ||
        (tls->ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
        errbuf_set(err, errlen, "TLS: cannot set up OpenSSL: %s",
                   ssl_reason(why, sizeof why, "out of memory"));
        goto fail;
    }
    SSL_CTX_set_min_proto_version(tls->ctx, conf->min_tls13 ? TLS1_3_VERSION
                                                            : TLS1_2_VERSION);
    SSL_CTX_set_options(tls->ctx, SSL_OP_NO_RENEGOTIATION |
                                      SSL_OP_IGNORE_UNEXPECTED_EOF |
                                      SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(tls->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                                   SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                   SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(tls->ctx, SSL_SESS_CACHE_SERVER);
    if (SSL_CTX_use_certificate_chain_file(tls->ctx, conf->cert_file) != 1) {
        errbuf_set(err, errlen,
                   "tls_cert_file %s: cannot load the certificate: %s",
                   conf->cert_file, ssl_reason(why, sizeof why, "?"));
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(tls->ctx, key, SSL_FILETYPE_PEM) != 1 &&
        ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH) {
        errbuf_set(err, errlen, "%s %s: cannot load the private key: %s",
                   key_name, key, ssl_reason(why, sizeof why, "?"));
        goto fail;
    }
    ERR_clear_error();
    if (SSL_CTX_check_private_key(tls->ctx) != 1) {
        errbuf_set(err, errlen,
                   "%s %s: the private key does not match the certificate "
                   "of tls_cert_file %s",
                   key_name, key, conf->cert_file);
        goto fail;
    }
    if (conf->client != HTTP_TLS_CLIENT_NONE) {
        const char *ca = conf->client_ca_file;
        if (ca == NULL || *ca == '\0') {
            errbuf_set(err, errlen,
                       "tls_client_cert = %s needs tls_client_ca_file (the "
                       "CA certificates client certificates must chain to)",
                       conf->client == HTTP_TLS_CLIENT_REQUIRED ? "required"
                                                                : "optional");
            goto fail;
        }
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca);
        if (names == NULL ||
            SSL_CTX_load_verify_locations(tls->ctx, ca, NULL) != 1) {
            if (names)
                sk_X509_NAME_pop_free(names, X509_NAME_free);
            errbuf_set(err, errlen,
                       "tls_client_ca_file %s: cannot load the CA "
                       "certificates: %s",
                       ca, ssl_reason(why, sizeof why, "no certificate"));
            goto fail;
        }
        SSL_CTX_set_client_CA_list(tls->ctx, names);
        SSL_CTX_set_verify(tls->ctx,
                           conf->client == HTTP_TLS_CLIENT_REQUIRED
                               ? SSL_VERIFY_PEER |
                                     SSL_VERIFY_FAIL_IF_NO_PEER_CERT
                               : SSL_VERIFY_PEER,
                           NULL);
        /* Sessions resumed by another listener's clients: none. */
        static const unsigned char sid[] = "workmanagerd";
        SSL_CTX_set_session_id_context(tls->ctx, sid, sizeof sid - 1);
    }
    tls->not_after = cert_not_after(tls->ctx);
    return tls;
fail:
    http_tls_free(tls);
    return NULL;
}

void
http_tls_free(struct http_tls *tls)
{
    if (tls == NULL)
        return;
    SSL_CTX_free(tls->ctx);
    free(tls);
}

int64_t
http_tls_not_after(const struct http_tls *tls)
{
    return tls->not_after;
}

uint64_t
http_tls_failures(const struct http_tls *tls)
{
    return tls->failures;
}

/* ---- a connection --------------------------------------------------------
 */

static struct http_tls *
conn_tls(const struct http_conn *c)
{
    return SSL_get_ex_data(c->ssl, tls_ex_index);
}

static void
note_failure(struct http_conn *c, const char *reason)
{
    struct http_tls *tls = conn_tls(c);

    tls->failures++;
    if (!http_log_due(&tls->log_ms, &tls->unlogged, TLS_LOG_EVERY_MS))
        return;
    log_warning("api: %s: TLS handshake failed: %s (%llu more since the "
                "last such line)",
                c->peer.text, reason, (unsigned long long)tls->unlogged);
    tls->unlogged = 0;
}

/* The handshake is done: who the peer is. */
static void
handshake_done(struct http_conn *c)
{
    struct http_peer *p = &c->peer;
    X509 *x = SSL_get0_peer_certificate(c->ssl);

    p->tls = true;
    if (x == NULL || SSL_get_verify_result(c->ssl) != X509_V_OK)
        return;
    X509_NAME *name = X509_get_subject_name(x);
    BIO *b = BIO_new(BIO_s_mem());
    if (b && X509_NAME_print_ex(b, name, 0, XN_FLAG_RFC2253) >= 0) {
        int n = BIO_read(b, p->subject, (int)sizeof p->subject - 1);
        p->subject[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
    int n = X509_NAME_get_text_by_NID(name, NID_commonName, p->tenant,
                                      (int)sizeof p->tenant);
    if (n < 0 || (size_t)n >= sizeof p->tenant - 1)
        p->tenant[0] = '\0'; /* none, or too long to be a tenant */
    p->client_cert = true;
    size_t len = strlen(p->text);
    snprintf(p->text + len, sizeof p->text - len, " tls cn=%s",
             p->tenant[0] ? p->tenant : "?");
}

/* What a failed SSL call ret means, as the system call's result. */
static ssize_t
tls_result(struct http_conn *c, int ret)
{
    char why[256];
    int saved = errno;

    switch (SSL_get_error(c->ssl, ret)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0; /* the peer's close_notify, or its end of stream */
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        errno = saved ? saved : ECONNRESET;
        return -1;
    default:
        ssl_reason(why, sizeof why, "protocol error");
        if (!c->peer.tls)
            note_failure(c, why);
        else
            log_info("api: %s: TLS error: %s", c->peer.text, why);
        errno = EPROTO;
        return -1;
    }
}

static ssize_t
tls_read(struct http_conn *c, void *buf, size_t len)
{
    size_t got = 0;

    ERR_clear_error();
    errno = 0;
    int ret = SSL_read_ex(c->ssl, buf, len, &got);
    if (!c->peer.tls && SSL_is_init_finished(c->ssl))
        handshake_done(c);
    if (ret == 1)
        return (ssize_t)got;
    return tls_result(c, ret);
}

static ssize_t
tls_write(struct http_conn *c, const void *buf, size_t len)
{
    size_t put = 0;

    ERR_clear_error();
    errno = 0;
    int ret = SSL_write_ex(c->ssl, buf, len, &put);
    if (ret == 1)
        return (ssize_t)put;
    return tls_result(c, ret);
}

static ssize_t
tls_writev(struct http_conn *c, const struct iovec *iov, int n)
{
    size_t total = 0;
    ssize_t done = 0;

    if (!c->peer.tls) {
        /* Nothing is answered before the handshake (see above). */
        errno = EPIPE;
        return -1;
    }
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    if (n > 1 && total <= TLS_COALESCE_BYTES) {
        char one[TLS_COALESCE_BYTES];
        size_t at = 0;
        for (int i = 0; i < n; i++) {
            if (iov[i].iov_len > 0) /* an empty piece may have no base */
                memcpy(one + at, iov[i].iov_base, iov[i].iov_len);
            at += iov[i].iov_len;
        }
        return tls_write(c, one, total);
    }
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len == 0)
            continue;
        ssize_t w = tls_write(c, iov[i].iov_base, iov[i].iov_len);
        if (w < 0)
            return done > 0 ? done : -1;
        done += w;
        if ((size_t)w < iov[i].iov_len)
            break;
    }
    return done;
}

static int
tls_shutdown(struct http_conn *c)
{
    /* close_notify, best effort: the socket's write side ends anyway. */
    if (c->peer.tls) {
        ERR_clear_error();
        SSL_shutdown(c->ssl);
        ERR_clear_error();
    }
    return shutdown(c->fd, SHUT_WR);
}

static size_t
tls_pending(const struct http_conn *c)
{
    int n = SSL_pending(c->ssl);
    return n > 0 ? (size_t)n : 0;
}

static void
tls_close(struct http_conn *c)
{
    SSL_free(c->ssl);
    c->ssl = NULL;
    ERR_clear_error();
    close(c->fd);
}

static const struct http_io tls_io = {
    .read = tls_read,
    .writev = tls_writev,
    .shutdown = tls_shutdown,
    .pending = tls_pending,
    .close = tls_close,
};

int
http_tls_attach(struct http_conn *c, struct http_tls *tls)
{
    SSL *ssl = SSL_new(tls->ctx);
    if (ssl == NULL || SSL_set_fd(ssl, c->fd) != 1 ||
        SSL_set_ex_data(ssl, tls_ex_index, tls) != 1) {
        SSL_free(ssl);
        ERR_clear_error();
        return -1;
    }
    SSL_set_accept_state(ssl);
    c->ssl = ssl;
    c->io = &tls_io;
    /* The handshake is part of the first request's head: both within
     * http_header_timeout_ms of the accept, not restarted by each byte
     * (a handshake trickled a byte at a time is cut off as a head is). */
    if (c->srv->lim.header_timeout_ms) {
        c->msg_begun = true;
        c->head_deadline = http_now_ms() + c->srv->lim.header_timeout_ms;
        http_conn_timer_update(c);
    }
    return 0;
}
