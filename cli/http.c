/*
 * http.c — the HTTP client of wmctl (see http.h), on libcurl's easy
 * interface: one handle per request, since wmctl makes a few requests and
 * exits.
 *
 * The control socket is reached with CURLOPT_UNIX_SOCKET_PATH and a
 * placeholder host ("http://localhost"), which the daemon ignores.  No total
 * timeout: an invoke lasts as long as the worker's own deadline, a
 * subscription as long as the user wants; only connecting is bounded.
 */
#include "config.h"

#include "cli/http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

/* Seconds to wait for a connection; the daemon accepts at once when up. */
#define CONNECT_TIMEOUT_S 10L

struct http_client {
    char *socket_path; /* NULL on TCP */
    char *base;        /* "http://localhost" or the URL, without a '/' end */
    char *auth;        /* "Authorization: Bearer ..." or NULL */
    char *ca_file;     /* HTTPS: NULL for the system's CAs */
    char *cert;        /* a client certificate, or NULL */
    char *key;         /* its key, or NULL (in cert) */
};

/* A growing buffer for an answer's body. */
struct sink {
    char *data;
    size_t len, cap;
    int failed;
};

/* What a stream's write callback needs. */
struct stream {
    CURL *h;
    struct sink whole; /* the body of a non-200 answer */
    http_chunk_fn chunk;
    void *arg;
    const volatile sig_atomic_t *stop;
    int ended; /* chunk asked to end */
};

static int
sink_add(struct sink *s, const char *data, size_t len)
{
    if (s->len + len + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + len + 1)
            cap *= 2;
        char *p = realloc(s->data, cap);
        if (p == NULL) {
            s->failed = 1;
            return -1;
        }
        s->data = p;
        s->cap = cap;
    }
    memcpy(s->data + s->len, data, len);
    s->len += len;
    s->data[s->len] = '\0';
    return 0;
}

static size_t
on_body(char *data, size_t size, size_t n, void *arg)
{
    return sink_add(arg, data, size * n) == 0 ? size * n : 0;
}

static size_t
on_stream_body(char *data, size_t size, size_t n, void *arg)
{
    struct stream *st = arg;
    long status = 0;

    curl_easy_getinfo(st->h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200)
        return sink_add(&st->whole, data, size * n) == 0 ? size * n : 0;
    if (*st->stop || st->chunk(data, size * n, st->arg) != 0) {
        st->ended = 1;
        return 0; /* curl stops with CURLE_WRITE_ERROR */
    }
    return size * n;
}

/* Called about once a second while the transfer waits: a signal sets
 * *stop and ends the stream here. */
static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
            curl_off_t ulnow)
{
    struct stream *st = arg;
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    if (*st->stop) {
        st->ended = 1;
        return 1;
    }
    return 0;
}

struct http_client *
http_client_new(const char *socket_path, const char *url, const char *token)
{
    struct http_client *c = calloc(1, sizeof *c);
    int n;

    if (c == NULL)
        return NULL;
    if (url) {
        c->base = strdup(url);
        if (c->base) {
            size_t len = strlen(c->base);
            while (len > 0 && c->base[len - 1] == '/')
                c->base[--len] = '\0';
        }
    } else {
        c->base = strdup("http://localhost");
        c->socket_path = strdup(socket_path);
        if (c->socket_path == NULL)
            goto fail;
    }
    if (c->base == NULL)
        goto fail;
    if (token) {
        size_t cap = strlen(token) + 32;
        c->auth = malloc(cap);
        if (c->auth == NULL)
            goto fail;
        n = snprintf(c->auth, cap, "Authorization: Bearer %s", token);
        if (n < 0 || (size_t)n >= cap)
            goto fail;
    }
    return c;
fail:
    http_client_free(c);
    return NULL;
}

void
http_client_free(struct http_client *c)
{
    if (c == NULL)
        return;
    free(c->socket_path);
    free(c->base);
    free(c->auth);
    free(c->ca_file);
    free(c->cert);
    free(c->key);
    free(c);
}

/* A copy of s, or NULL for NULL; -1 when out of memory. */
static int
dup_or_null(char **to, const char *s)
{
    *to = s ? strdup(s) : NULL;
    return s && *to == NULL ? -1 : 0;
}

int
http_client_set_tls(struct http_client *c, const char *ca_file,
                    const char *cert, const char *key)
{
    if (dup_or_null(&c->ca_file, ca_file) || dup_or_null(&c->cert, cert) ||
        dup_or_null(&c->key, key))
        return -1;
    return 0;
}

const char *
http_client_target(const struct http_client *c)
{
    return c->socket_path ? c->socket_path : c->base;
}

void
http_reply_free(struct http_reply *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

char *
http_escape(const char *s)
{
    char *e = curl_easy_escape(NULL, s, 0);
    char *out = e ? strdup(e) : NULL;
    curl_free(e);
    return out;
}

/* A handle for method path, with the headers it needs in *hdrs. */
static CURL *
handle_new(struct http_client *c, const char *method, const char *path,
           const char *content_type, struct curl_slist **hdrs, char *errbuf)
{
    CURL *h = curl_easy_init();
    size_t cap = strlen(c->base) + strlen(path) + 1;
    char *url = malloc(cap);
    char ct[256];

    *hdrs = NULL;
    if (h == NULL || url == NULL) {
        free(url);
        curl_easy_cleanup(h);
        return NULL;
    }
    snprintf(url, cap, "%s%s", c->base, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    free(url); /* curl keeps its own copy */
    if (c->socket_path)
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->socket_path);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (c->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    if (c->cert)
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert);
    if (c->key)
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->key);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "wmctl/" PACKAGE_VERSION);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    /* No 100-continue round trip: the daemon refuses a body announced too
     * large before reading it either way. */
    *hdrs = curl_slist_append(*hdrs, "Expect:");
    if (c->auth)
        *hdrs = curl_slist_append(*hdrs, c->auth);
    if (content_type) {
        snprintf(ct, sizeof ct, "Content-Type: %s", content_type);
        *hdrs = curl_slist_append(*hdrs, ct);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    return h;
}

/* The reason a transfer failed: the system's when there is one. */
static void
failure(CURL *h, CURLcode rc, const char *errbuf, char *err, size_t errlen)
{
    long oserr = 0;

    curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &oserr);
    if (oserr != 0)
        snprintf(err, errlen, "%s", strerror((int)oserr));
    else if (*errbuf)
        snprintf(err, errlen, "%s", errbuf);
    else
        snprintf(err, errlen, "%s", curl_easy_strerror(rc));
}

int
http_client_request(struct http_client *c, const char *method, const char *path,
                    const char *content_type, const char *body, size_t len,
                    struct http_reply *out, char *err, size_t errlen)
{
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs;
    struct sink sink = { 0 };
    int rc = -1;

    memset(out, 0, sizeof *out);
    CURL *h = handle_new(c, method, path, content_type, &hdrs, errbuf);
    if (h == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* A POST without a body still says so (Content-Length: 0). */
    if (body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)(body ? len : 0));
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    CURLcode cr = curl_easy_perform(h);
    if (sink.failed) {
        snprintf(err, errlen, "out of memory");
    } else if (cr != CURLE_OK) {
        failure(h, cr, errbuf, err, errlen);
    } else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
        out->body = sink.data;
        out->len = sink.len;
        sink.data = NULL;
        rc = 0;
    }
    free(sink.data);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return rc;
}

int
http_client_stream(struct http_client *c, const char *path, http_chunk_fn chunk,
                   void *arg, const volatile sig_atomic_t *stop,
                   struct http_reply *out, char *err, size_t errlen)
{
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs;
    struct stream st = { .chunk = chunk, .arg = arg, .stop = stop };
    int rc = -1;

    memset(out, 0, sizeof *out);
    st.h = handle_new(c, "GET", path, NULL, &hdrs, errbuf);
    if (st.h == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    curl_easy_setopt(st.h, CURLOPT_WRITEFUNCTION, on_stream_body);
    curl_easy_setopt(st.h, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(st.h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(st.h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(st.h, CURLOPT_XFERINFODATA, &st);
    CURLcode cr = curl_easy_perform(st.h);
    if (st.whole.failed) {
        snprintf(err, errlen, "out of memory");
    } else if (cr != CURLE_OK && !st.ended) {
        failure(st.h, cr, errbuf, err, errlen);
    } else {
        curl_easy_getinfo(st.h, CURLINFO_RESPONSE_CODE, &out->status);
        out->body = st.whole.data;
        out->len = st.whole.len;
        st.whole.data = NULL;
        rc = 0;
    }
    free(st.whole.data);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(st.h);
    return rc;
}
