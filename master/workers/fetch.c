/*
 * fetch.c — worker code from URLs (see fetch.h for the rules).
 *
 * Why a thread per fetch rather than libcurl's multi interface on the
 * loop: the addresses must be known and checked before libcurl connects,
 * and the system resolver (getaddrinfo, which honours /etc/hosts and
 * nsswitch as every other program on the machine does) blocks.  A fetch is
 * rare (a create or reload) and each is bounded by code_fetch_timeout_ms,
 * so a thread each, at most FETCH_MAX_RUNNING at once, costs nothing that
 * matters and keeps one straight-line procedure per fetch.
 *
 * One hop of a fetch: parse and check the URL (fetch_url_check); resolve
 * its host and refuse it if any address is not public and not in
 * code_source_allowed_networks; hand libcurl exactly those addresses
 * (CURLOPT_RESOLVE) so it does not resolve again; and check, when libcurl
 * opens a socket (CURLOPT_OPENSOCKETFUNCTION), that the address is one of
 * them — the guarantee against DNS rebinding does not rest on the RESOLVE
 * entry matching.  Proxies from the environment are ignored (a proxy
 * would connect for us, to whatever the name means to it).  libcurl never
 * follows a redirect itself: a 3xx ends the hop, and its Location is the
 * next hop's URL, checked from the start.
 *
 * Invariants: a job is on f->jobs from fetch_start until its callback has
 * run; only its thread writes its result until it sets done (under
 * f->lock), only the loop thread reads it after.  Sockets libcurl opens are
 * close-on-exec (opened here): nothing the daemon execs inherits one.
 */
#include "config.h"

#include "master/workers/fetch.h"

#include "lib/timestamp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <openssl/evp.h>

#include "lib/hex.h"
#include "lib/thread.h"
#include "master/core/conf.h"
#include "master/core/log.h"

/* The most distinct addresses of one name that are checked and pinned;
 * more are refused rather than silently dropped. */
#define HOP_MAX_ADDRS 32

/* Credentials of one code source host (code_source_credentials_file). */
struct cred {
    char *host;
    bool bearer;  /* else basic */
    char *secret; /* the token, or USER:PASSWORD */
};

struct job {
    struct fetcher *f;
    struct job *next; /* on f->jobs */
    pthread_t thread;
    bool done; /* under f->lock: the thread wrote its result */
    char url[FETCH_URL_MAX];
    char want[65]; /* the expected SHA-256, "" when none */
    fetch_done_cb cb;
    void *arg;
    struct fetch_result r;
};

struct fetcher {
    struct event_base *base;
    struct event *ev;
    int efd;
    pthread_mutex_t lock;
    struct job *jobs;
    size_t running;
    atomic_bool cancelled;
    struct fetch_policy policy;
    const char *ca_file; /* NULL: the system's authorities */
    /* Its contents, read at start with the daemon's rights (the master
     * drops them before any fetch: privdrop.h). */
    char *ca_pem;
    size_t ca_len;
    uint64_t max_bytes;
    uint64_t timeout_ms;
    struct cred *creds;
    size_t ncreds;
};

/* One request of a fetch: its checked addresses and its body. */
struct hop {
    struct job *j;
    struct sockaddr_storage addrs[HOP_MAX_ADDRS];
    size_t naddrs;
    uint8_t *buf;
    size_t len, cap;
    bool too_big;
    char sock_refused[256]; /* set when a connection was refused */
};

/* ---- the rules without the network --------------------------------- */

static enum fetch_status fail(char *why, size_t whylen, enum fetch_status st,
                              const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum fetch_status
fail(char *why, size_t whylen, enum fetch_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return st;
}

/* Host names compare without case and without a final dot. */
static bool
host_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 0 && a[la - 1] == '.')
        la--;
    if (lb > 0 && b[lb - 1] == '.')
        lb--;
    return la == lb && strncasecmp(a, b, la) == 0;
}

enum fetch_status
fetch_url_check(const struct fetch_policy *p, const char *url,
                struct fetch_url *out, char *why, size_t whylen)
{
    enum fetch_status st = FETCH_INVALID;
    char *scheme = NULL, *user = NULL, *pass = NULL, *host = NULL;
    char *port = NULL;
    CURLU *u = NULL;
    CURLUcode uc;

    memset(out, 0, sizeof *out);
    if (strlen(url) >= FETCH_URL_MAX)
        return fail(why, whylen, FETCH_INVALID,
                    "the URL is longer than %d bytes", FETCH_URL_MAX - 1);
    /* Printable ASCII only (the rest percent-encoded), which also keeps
     * the messages that quote a URL (a server's Location included) fit for
     * a JSON answer and a log line. */
    for (const char *c = url; *c; c++)
        if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
            return fail(why, whylen, FETCH_INVALID,
                        "the URL holds a blank, a control character or a "
                        "character beyond ASCII (percent-encode it)");
    u = curl_url();
    if (u == NULL)
        return fail(why, whylen, FETCH_FAILED, "out of memory");
    /* No default scheme: a relative or scheme-less URL is an error.  Other
     * schemes parse, to be refused by name below. */
    uc = curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
    if (uc != CURLUE_OK) {
        st = fail(why, whylen, FETCH_INVALID, "%s is not an absolute URL: %s",
                  url, curl_url_strerror(uc));
        goto out;
    }
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host) {
        st = fail(why, whylen, FETCH_INVALID, "%s names no host", url);
        goto out;
    }
    if (strcmp(scheme, "https") != 0 && strcmp(scheme, "http") != 0) {
        st = fail(why, whylen, FETCH_INVALID,
                  "%s: scheme %s is not supported: code comes over https (or "
                  "http when code_source_allow_http is set)",
                  url, scheme);
        goto out;
    }
    if (strcmp(scheme, "http") == 0 && !p->allow_http) {
        st = fail(why, whylen, FETCH_REFUSED,
                  "%s: http is refused: code comes over https unless "
                  "code_source_allow_http is set",
                  url);
        goto out;
    }
    if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
        curl_url_get(u, CURLUPART_PASSWORD, &pass, 0) == CURLUE_OK) {
        st =
            fail(why, whylen, FETCH_INVALID,
                 "the URL carries user:password: credentials for a code source "
                 "come from the operator's code_source_credentials_file, never "
                 "from a request");
        goto out;
    }
    if (curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) !=
        CURLUE_OK) {
        st = fail(why, whylen, FETCH_INVALID, "%s has no usable port", url);
        goto out;
    }
    /* IPv6 literals come bracketed; the resolver and messages want them
     * bare. */
    size_t hl = strlen(host);
    const char *h = host;
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        h = host + 1;
        hl -= 2;
    }
    if (hl >= sizeof out->host) {
        st = fail(why, whylen, FETCH_INVALID, "the host name is too long");
        goto out;
    }
    /* libcurl percent-decodes the host: what comes out must still be a
     * DNS name or an address (and is then safe to quote). */
    for (size_t i = 0; i < hl; i++) {
        char ch = h[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' ||
              ch == ':')) {
            st = fail(why, whylen, FETCH_INVALID,
                      "%s: the host is not a DNS name or an IP address", url);
            goto out;
        }
    }
    memcpy(out->host, h, hl);
    out->host[hl] = '\0';
    snprintf(out->scheme, sizeof out->scheme, "%s", scheme);
    unsigned long pn = strtoul(port, NULL, 10);
    if (pn == 0 || pn > 65535) {
        st = fail(why, whylen, FETCH_INVALID, "%s: port %s is not a port", url,
                  port);
        goto out;
    }
    out->port = (unsigned)pn;
    if (p->nallowed_hosts > 0) {
        bool ok = false;
        for (size_t i = 0; i < p->nallowed_hosts && !ok; i++)
            ok = host_equal(p->allowed_hosts[i], out->host);
        if (!ok) {
            st = fail(why, whylen, FETCH_REFUSED,
                      "host %s is not in allowed_code_source_hosts", out->host);
            goto out;
        }
    }
    st = FETCH_OK;
out:
    curl_free(scheme);
    curl_free(user);
    curl_free(pass);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return st;
}

int
fetch_sha256_parse(const char *text, char out[65])
{
    if (strlen(text) != 64)
        return -1;
    for (int i = 0; i < 64; i++) {
        char c = text[i];
        if (hex_digit_value(c) < 0)
            return -1;
        out[i] = c >= 'A' && c <= 'F' ? (char)(c - 'A' + 'a') : c;
    }
    out[64] = '\0';
    return 0;
}

/* ---- one hop ------------------------------------------------------- */

static bool
allowed_net(const struct fetch_policy *p, const struct sockaddr *sa)
{
    for (size_t i = 0; i < p->nallowed_nets; i++)
        if (netrange_net_contains(&p->allowed_nets[i], sa))
            return true;
    return false;
}

static bool
same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return false;
    if (a->sa_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)(const void *)a)->sin_addr,
                      &((const struct sockaddr_in *)(const void *)b)->sin_addr,
                      sizeof(struct in_addr)) == 0;
    return memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr,
                  sizeof(struct in6_addr)) == 0;
}

/* Resolves u->host and checks every address; fills h->addrs. */
static enum fetch_status
hop_resolve(struct hop *h, const struct fetch_url *u, char *why, size_t whylen)
{
    const struct fetch_policy *p = &h->j->f->policy;
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM };
    struct addrinfo *res = NULL;
    enum fetch_status st = FETCH_OK;

    int rc = getaddrinfo(u->host, NULL, &hints, &res);
    if (rc != 0)
        return fail(why, whylen, FETCH_FAILED, "cannot resolve host %s: %s",
                    u->host,
                    rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    h->naddrs = 0;
    for (struct addrinfo *ai = res; ai && st == FETCH_OK; ai = ai->ai_next) {
        char range[64], text[FETCH_ADDR_MAX];
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        enum netrange_kind k =
            netrange_classify(ai->ai_addr, range, sizeof range);
        netrange_addr_format(ai->ai_addr, text, sizeof text);
        if (k != NETRANGE_PUBLIC && !allowed_net(p, ai->ai_addr)) {
            st = fail(why, whylen, FETCH_REFUSED,
                      "host %s resolves to %s, a %s address (%s): refused "
                      "(code_source_allowed_networks may allow it)",
                      u->host, text, netrange_kind_name(k), range);
            break;
        }
        bool seen = false;
        for (size_t i = 0; i < h->naddrs && !seen; i++)
            seen =
                same_addr((const struct sockaddr *)&h->addrs[i], ai->ai_addr);
        if (seen)
            continue;
        if (h->naddrs == HOP_MAX_ADDRS) {
            st = fail(why, whylen, FETCH_REFUSED,
                      "host %s resolves to more than %d addresses", u->host,
                      HOP_MAX_ADDRS);
            break;
        }
        memcpy(&h->addrs[h->naddrs++], ai->ai_addr, ai->ai_addrlen);
    }
    freeaddrinfo(res);
    if (st == FETCH_OK && h->naddrs == 0)
        st = fail(why, whylen, FETCH_FAILED,
                  "host %s has no IPv4 or IPv6 address", u->host);
    return st;
}

/* The RESOLVE entry pinning u->host to the checked addresses, or NULL
 * for an address literal (libcurl resolves nothing then). */
static struct curl_slist *
hop_pin(const struct hop *h, const struct fetch_url *u)
{
    char entry[HOP_MAX_ADDRS * (FETCH_ADDR_MAX + 3) + 300];
    struct in6_addr a6;
    struct in_addr a4;
    size_t used;

    if (inet_pton(AF_INET, u->host, &a4) == 1 ||
        inet_pton(AF_INET6, u->host, &a6) == 1)
        return NULL;
    used = (size_t)snprintf(entry, sizeof entry, "%s:%u:", u->host, u->port);
    for (size_t i = 0; i < h->naddrs && used < sizeof entry; i++) {
        const struct sockaddr *sa = (const struct sockaddr *)&h->addrs[i];
        char text[FETCH_ADDR_MAX];
        netrange_addr_format(sa, text, sizeof text);
        used += (size_t)snprintf(entry + used, sizeof entry - used,
                                 sa->sa_family == AF_INET6 ? "%s[%s]" : "%s%s",
                                 i ? "," : "", text);
    }
    return curl_slist_append(NULL, entry);
}

static size_t
on_body(char *data, size_t size, size_t n, void *arg)
{
    struct hop *h = arg;
    size_t add = size * n;
    uint64_t max = h->j->f->max_bytes;

    if (add > max || h->len > max - add) {
        h->too_big = true;
        return 0; /* libcurl ends the transfer: CURLE_WRITE_ERROR */
    }
    if (h->len + add > h->cap) {
        size_t cap = h->cap ? h->cap : 65536;
        while (cap < h->len + add)
            cap *= 2;
        uint8_t *nb = realloc(h->buf, cap);
        if (nb == NULL)
            return 0;
        h->buf = nb;
        h->cap = cap;
    }
    memcpy(h->buf + h->len, data, add);
    h->len += add;
    return add;
}

static int
on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
            curl_off_t ulnow)
{
    struct hop *h = arg;
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    return atomic_load(&h->j->f->cancelled) ? 1 : 0;
}

/* libcurl is about to connect: only to an address this hop checked. */
static curl_socket_t
on_open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct hop *h = arg;
    (void)purpose;
    for (size_t i = 0; i < h->naddrs; i++)
        if (same_addr((const struct sockaddr *)&h->addrs[i], &a->addr))
            return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    char text[FETCH_ADDR_MAX];
    netrange_addr_format(&a->addr, text, sizeof text);
    snprintf(h->sock_refused, sizeof h->sock_refused,
             "a connection to %s, which was not among the checked addresses, "
             "was refused",
             text);
    return CURL_SOCKET_BAD;
}

static const struct cred *
cred_find(const struct fetcher *f, const char *host)
{
    for (size_t i = 0; i < f->ncreds; i++)
        if (host_equal(f->creds[i].host, host))
            return &f->creds[i];
    return NULL;
}

/* One request.  On FETCH_OK, *redirect is the next URL (malloc'd) or
 * NULL when the body in h is the answer. */
static enum fetch_status
hop_run(struct hop *h, const char *url, const struct fetch_url *u,
        int64_t deadline, char **redirect, char *why, size_t whylen)
{
    struct fetcher *f = h->j->f;
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *pin = NULL;
    enum fetch_status st = FETCH_OK;
    bool timed_out = false;
    long code = 0;
    CURL *c;

    *redirect = NULL;
    const struct cred *cred = cred_find(f, u->host);
    if (cred && strcmp(u->scheme, "https") != 0)
        return fail(why, whylen, FETCH_REFUSED,
                    "%s: credentials are configured for host %s and are "
                    "sent over https only",
                    url, u->host);
    if ((st = hop_resolve(h, u, why, whylen)) != FETCH_OK)
        return st;
    int64_t left = deadline - timestamp_mono_ms();
    if (left <= 0)
        goto timeout;
    if ((c = curl_easy_init()) == NULL)
        return fail(why, whylen, FETCH_FAILED, "out of memory");
    pin = hop_pin(h, u);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* threads */
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS,
                     (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROXY, ""); /* none, whatever the env says */
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)left);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)f->max_bytes);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, h);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, h);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, h);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "workmanagerd/" PACKAGE_VERSION);
    if (pin)
        curl_easy_setopt(c, CURLOPT_RESOLVE, pin);
    if (f->ca_file) {
        /* Exactly the operator's authorities, not theirs and the system's. */
        struct curl_blob ca = { .data = f->ca_pem,
                                .len = f->ca_len,
                                .flags = CURL_BLOB_NOCOPY };
        curl_easy_setopt(c, CURLOPT_CAINFO, NULL);
        curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
        curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
    }
    if (cred && cred->bearer) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, cred->secret);
    } else if (cred) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERPWD, cred->secret);
    }
    CURLcode rc = curl_easy_perform(c);
    char *ip = NULL, *loc = NULL;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(c, CURLINFO_PRIMARY_IP, &ip);
    curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &loc);
    if (ip && *ip)
        snprintf(h->j->r.address, sizeof h->j->r.address, "%s", ip);

    if (atomic_load(&f->cancelled))
        st = fail(why, whylen, FETCH_CANCELLED, "the daemon is shutting down");
    else if (h->sock_refused[0])
        st = fail(why, whylen, FETCH_REFUSED, "%s: %s", url, h->sock_refused);
    else if (h->too_big || rc == CURLE_FILESIZE_EXCEEDED)
        st = fail(why, whylen, FETCH_REFUSED,
                  "the body of %s exceeds code_fetch_max_bytes (%llu bytes)",
                  url, (unsigned long long)f->max_bytes);
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        timed_out = true;
    else if (rc != CURLE_OK)
        st = fail(why, whylen, FETCH_FAILED, "fetching %s: %s", url,
                  errbuf[0] ? errbuf : curl_easy_strerror(rc));
    else if (code == 301 || code == 302 || code == 303 || code == 307 ||
             code == 308) {
        if (loc == NULL)
            st = fail(why, whylen, FETCH_FAILED,
                      "%s answered %ld without a Location", url, code);
        else if ((*redirect = strdup(loc)) == NULL)
            st = fail(why, whylen, FETCH_FAILED, "out of memory");
    } else if (code != 200)
        st = fail(why, whylen, FETCH_FAILED, "%s answered HTTP %ld, not 200",
                  url, code);
    curl_easy_cleanup(c);
    curl_slist_free_all(pin);
    if (!timed_out)
        return st;
timeout:
    return fail(why, whylen, FETCH_REFUSED,
                "fetching %s took longer than code_fetch_timeout_ms (%llu ms)",
                url, (unsigned long long)f->timeout_ms);
}

/* ---- a fetch: its thread ------------------------------------------- */

static enum fetch_status
job_fetch(struct job *j, char *why, size_t whylen)
{
    struct fetcher *f = j->f;
    int64_t deadline = timestamp_mono_ms() + (int64_t)f->timeout_ms;
    char *url = strdup(j->url);
    enum fetch_status st = FETCH_FAILED;
    struct hop *h = calloc(1, sizeof *h);

    if (url == NULL || h == NULL) {
        free(url);
        free(h);
        return fail(why, whylen, FETCH_FAILED, "out of memory");
    }
    for (int hops = 0;; hops++) {
        struct fetch_url u;
        char *next = NULL;
        char reason[400];

        free(h->buf);
        memset(h, 0, sizeof *h);
        h->j = j;
        st = fetch_url_check(&f->policy, url, &u, reason, sizeof reason);
        if (st == FETCH_OK)
            st = hop_run(h, url, &u, deadline, &next, reason, sizeof reason);
        if (st != FETCH_OK) {
            if (hops > 0)
                fail(why, whylen, st, "redirected to %s: %s", url, reason);
            else
                fail(why, whylen, st, "%s", reason);
            break;
        }
        if (next == NULL) {
            if (hops > 0)
                snprintf(j->r.final_url, sizeof j->r.final_url, "%s", url);
            j->r.body = h->buf;
            j->r.len = h->len;
            h->buf = NULL;
            break;
        }
        if (hops == FETCH_MAX_REDIRECTS) {
            st = fail(why, whylen, FETCH_REFUSED, "%s: more than %d redirects",
                      j->url, FETCH_MAX_REDIRECTS);
            free(next);
            break;
        }
        free(url);
        url = next;
    }
    free(h->buf);
    free(h);
    free(url);
    return st;
}

static void
sha256_hex(const uint8_t *data, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != 32) {
        out[0] = '\0';
        return;
    }
    hex_encode(md, 32, out);
}

static void *
job_run(void *arg)
{
    struct job *j = arg;
    struct fetch_result *r = &j->r;
    uint64_t one = 1;

    r->status = job_fetch(j, r->message, sizeof r->message);
    if (r->status == FETCH_OK) {
        sha256_hex(r->body, r->len, r->sha256);
        if (r->sha256[0] == '\0') {
            r->status = fail(r->message, sizeof r->message, FETCH_FAILED,
                             "SHA-256 (libcrypto) failed");
        } else if (r->len == 0) {
            r->status = fail(r->message, sizeof r->message, FETCH_FAILED,
                             "%s answered an empty body", j->url);
        } else if (j->want[0] && strcmp(j->want, r->sha256) != 0) {
            r->status = fail(r->message, sizeof r->message, FETCH_REFUSED,
                             "the body of %s (%zu bytes) has SHA-256 %s, not "
                             "the %s the request gave",
                             j->url, r->len, r->sha256, j->want);
        }
        if (r->status != FETCH_OK) {
            free(r->body);
            r->body = NULL;
            r->len = 0;
        }
    }
    pthread_mutex_lock(&j->f->lock);
    j->done = true;
    pthread_mutex_unlock(&j->f->lock);
    /* An eventfd takes an 8-byte write unless its counter would overflow,
     * which a handful of fetches cannot make it. */
    while (write(j->f->efd, &one, sizeof one) < 0 && errno == EINTR)
        ;
    return NULL;
}

/* ---- the loop's side ----------------------------------------------- */

/* Unlinks one job whose thread is done (or any job, when all), or NULL. */
static struct job *
take_job(struct fetcher *f, bool all)
{
    pthread_mutex_lock(&f->lock);
    struct job **pp = &f->jobs;
    while (*pp && !(all || (*pp)->done))
        pp = &(*pp)->next;
    struct job *j = *pp;
    if (j) {
        *pp = j->next;
        f->running--;
    }
    pthread_mutex_unlock(&f->lock);
    return j;
}

static void
job_finish(struct fetcher *f, struct job *j)
{
    /* The thread has set done (or is about to end): the join is short. */
    pthread_join(j->thread, NULL);
    if (atomic_load(&f->cancelled) && j->r.status != FETCH_CANCELLED) {
        free(j->r.body);
        j->r.body = NULL;
        j->r.len = 0;
        j->r.status = FETCH_CANCELLED;
        snprintf(j->r.message, sizeof j->r.message,
                 "the daemon is shutting down");
    }
    if (j->r.status == FETCH_OK)
        log_info("fetch: %s: %zu bytes from %s, sha256 %s", j->url, j->r.len,
                 j->r.address, j->r.sha256);
    else
        log_notice("fetch: %s: %s", j->url, j->r.message);
    j->cb(&j->r, j->arg);
    free(j->r.body);
    free(j);
}

static void
on_wake(evutil_socket_t fd, short what, void *arg)
{
    struct fetcher *f = arg;
    uint64_t n;
    struct job *j;
    (void)what;

    if (read(fd, &n, sizeof n) < 0 && errno != EAGAIN)
        log_err("fetch: reading the eventfd: %s", strerror(errno));
    while ((j = take_job(f, false)) != NULL)
        job_finish(f, j);
}

enum fetch_status
fetch_start(struct fetcher *f, const char *url, const char *sha256,
            fetch_done_cb cb, void *arg, char *why, size_t whylen)
{
    struct fetch_url u;
    enum fetch_status st;

    if (atomic_load(&f->cancelled))
        return fail(why, whylen, FETCH_CANCELLED,
                    "the daemon is shutting down");
    if ((st = fetch_url_check(&f->policy, url, &u, why, whylen)) != FETCH_OK)
        return st;
    if (f->running >= FETCH_MAX_RUNNING)
        return fail(why, whylen, FETCH_BUSY,
                    "%d code fetches are running already; retry",
                    FETCH_MAX_RUNNING);
    struct job *j = calloc(1, sizeof *j);
    if (j == NULL)
        return fail(why, whylen, FETCH_FAILED, "out of memory");
    j->f = f;
    snprintf(j->url, sizeof j->url, "%s", url);
    snprintf(j->want, sizeof j->want, "%s", sha256 ? sha256 : "");
    j->cb = cb;
    j->arg = arg;
    /* The thread takes no signal: the loop's handlers stay the loop's. */
    int rc = thread_start_quiet(&j->thread, job_run, j, false);
    if (rc != 0) {
        free(j);
        return fail(why, whylen, FETCH_FAILED, "cannot start a thread: %s",
                    strerror(rc));
    }
    pthread_mutex_lock(&f->lock);
    j->next = f->jobs;
    f->jobs = j;
    f->running++;
    pthread_mutex_unlock(&f->lock);
    return FETCH_OK;
}

/* ---- set-up -------------------------------------------------------- */

/* Reads code_source_credentials_file: `host = bearer TOKEN` or
 * `host = basic USER:PASSWORD` lines, '#' comments. */
static int
creds_load(struct fetcher *f, const char *path, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "re");
    char line[4096];
    unsigned lineno = 0;
    int rc = 0;

    if (fp == NULL) {
        snprintf(err, errlen, "code_source_credentials_file %s: %s", path,
                 strerror(errno));
        return -1;
    }
    while (rc == 0 && fgets(line, sizeof line, fp)) {
        char *key, *value, why[256];
        lineno++;
        line[strcspn(line, "\n")] = '\0';
        if (conf_line_split(line, &key, &value, why, sizeof why) != 0) {
            snprintf(err, errlen, "%s:%u: %s", path, lineno, why);
            rc = -1;
            break;
        }
        if (key == NULL)
            continue;
        char *sp = value + strcspn(value, " \t");
        char *secret = sp + strspn(sp, " \t");
        bool bearer =
            (size_t)(sp - value) == 6 && strncasecmp(value, "bearer", 6) == 0;
        bool basic =
            (size_t)(sp - value) == 5 && strncasecmp(value, "basic", 5) == 0;
        if ((!bearer && !basic) || *secret == '\0' ||
            (basic && strchr(secret, ':') == NULL)) {
            snprintf(err, errlen,
                     "%s:%u: the value must be \"bearer TOKEN\" or \"basic "
                     "USER:PASSWORD\"",
                     path, lineno);
            rc = -1;
            break;
        }
        if (cred_find(f, key)) {
            snprintf(err, errlen, "%s:%u: host %s is given twice", path, lineno,
                     key);
            rc = -1;
            break;
        }
        struct cred *nc = realloc(f->creds, (f->ncreds + 1) * sizeof *nc);
        if (nc == NULL) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        f->creds = nc;
        nc[f->ncreds] = (struct cred){ .host = strdup(key),
                                       .bearer = bearer,
                                       .secret = strdup(secret) };
        if (!nc[f->ncreds].host || !nc[f->ncreds].secret) {
            free(nc[f->ncreds].host);
            free(nc[f->ncreds].secret);
            snprintf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        f->ncreds++;
    }
    if (rc == 0 && ferror(fp)) {
        snprintf(err, errlen, "code_source_credentials_file %s: %s", path,
                 strerror(errno));
        rc = -1;
    }
    fclose(fp);
    return rc;
}

/* The largest code_source_ca_file read (a bundle of every public
 * authority is about 200 KiB). */
#define CA_FILE_MAX (4u << 20)

/* Reads code_source_ca_file into f->ca_pem. */
static int
ca_load(struct fetcher *f, char *err, size_t errlen)
{
    FILE *fp = fopen(f->ca_file, "re");
    size_t n = 0;

    if (fp == NULL) {
        snprintf(err, errlen, "code_source_ca_file %s: %s", f->ca_file,
                 strerror(errno));
        return -1;
    }
    f->ca_pem = malloc(CA_FILE_MAX);
    if (f->ca_pem == NULL) {
        fclose(fp);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    n = fread(f->ca_pem, 1, CA_FILE_MAX, fp);
    int bad = ferror(fp) || (n == CA_FILE_MAX && fgetc(fp) != EOF);
    fclose(fp);
    if (bad || n == 0) {
        snprintf(err, errlen, "code_source_ca_file %s: %s", f->ca_file,
                 n == 0 ? "empty, or unreadable" : "larger than 4 MiB");
        return -1;
    }
    f->ca_len = n;
    return 0;
}

struct fetcher *
fetch_new(struct event_base *base, const struct conf *conf, char *err,
          size_t errlen)
{
    struct fetcher *f = calloc(1, sizeof *f);
    const struct conf_list *nets = &conf->code_source_allowed_networks;

    if (f == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    f->efd = -1;
    pthread_mutex_init(&f->lock, NULL);
    atomic_init(&f->cancelled, false);
    /* Once, before any thread: curl_global_init is not thread-safe. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "libcurl does not initialise");
        goto fail;
    }
    f->base = base;
    f->policy.allow_http = conf->code_source_allow_http;
    f->policy.allowed_hosts = conf->allowed_code_source_hosts.v;
    f->policy.nallowed_hosts = conf->allowed_code_source_hosts.n;
    f->policy.allowed_nets =
        calloc(nets->n + 1, sizeof *f->policy.allowed_nets);
    if (f->policy.allowed_nets == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < nets->n; i++) {
        char why[256];
        /* conf_values.c checked them: a failure here is a bug, said as such. */
        if (netrange_net_parse(nets->v[i], &f->policy.allowed_nets[i], why,
                               sizeof why) != 0) {
            snprintf(err, errlen, "code_source_allowed_networks: %s", why);
            goto fail;
        }
    }
    f->policy.nallowed_nets = nets->n;
    f->ca_file = *conf->code_source_ca_file ? conf->code_source_ca_file : NULL;
    if (f->ca_file && ca_load(f, err, errlen) != 0)
        goto fail;
    f->max_bytes = conf->code_fetch_max_bytes;
    f->timeout_ms = conf->code_fetch_timeout_ms;
    if (*conf->code_source_credentials_file &&
        creds_load(f, conf->code_source_credentials_file, err, errlen) != 0)
        goto fail;
    f->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (f->efd < 0) {
        snprintf(err, errlen, "fetch: eventfd: %s", strerror(errno));
        goto fail;
    }
    f->ev = event_new(base, f->efd, EV_READ | EV_PERSIST, on_wake, f);
    if (f->ev == NULL || event_add(f->ev, NULL) != 0) {
        snprintf(err, errlen, "fetch: cannot watch the eventfd");
        goto fail;
    }
    return f;
fail:
    fetch_free(f);
    return NULL;
}

void
fetch_cancel_all(struct fetcher *f)
{
    if (f)
        atomic_store(&f->cancelled, true);
}

void
fetch_free(struct fetcher *f)
{
    struct job *j;

    if (f == NULL)
        return;
    fetch_cancel_all(f);
    while ((j = take_job(f, true)) != NULL)
        job_finish(f, j);
    if (f->ev)
        event_free(f->ev);
    if (f->efd >= 0)
        (void)close(f->efd); /* an eventfd: nothing to lose */
    for (size_t i = 0; i < f->ncreds; i++) {
        free(f->creds[i].host);
        free(f->creds[i].secret);
    }
    free(f->creds);
    free(f->ca_pem);
    free(f->policy.allowed_nets);
    pthread_mutex_destroy(&f->lock);
    if (f->base)
        curl_global_cleanup();
    free(f);
}
