/*
 * fetch.h — worker code from URLs (DESIGN §8; the spec's Worker Code
 * Sources): fetched with libcurl off the event loop, under the operator's
 * rules against server-side request forgery.
 *
 * The rules, each refusal naming what it refused:
 *   - the URL is absolute, https (http only with code_source_allow_http),
 *     carries no user:password (credentials come from the operator's
 *     code_source_credentials_file, never from a request);
 *   - its host is in allowed_code_source_hosts when that list is set;
 *   - every address the host resolves to is public (netrange.h) or in
 *     code_source_allowed_networks; the connection is made only to those
 *     checked addresses (no second resolution, so no DNS rebinding);
 *   - a redirect is followed only after the same checks on its target, at
 *     most FETCH_MAX_REDIRECTS times;
 *   - the body is at most code_fetch_max_bytes and the whole fetch takes at
 *     most code_fetch_timeout_ms;
 *   - the body's SHA-256 matches the one the request gave, if it gave one.
 *
 * Threads: every function is called on the loop thread; each fetch runs on
 * a thread of its own (name resolution and the transfer block), whose
 * result comes back to the loop through an eventfd, where the callback
 * runs.  At most FETCH_MAX_RUNNING fetches run at once: each holds up to
 * code_fetch_max_bytes of memory.
 */
#ifndef WM_MASTER_FETCH_H
#define WM_MASTER_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master/core/netrange.h"

struct event_base;
struct conf;
struct fetcher;

#define FETCH_MAX_REDIRECTS 5
#define FETCH_MAX_RUNNING 8
/* Longer URLs are refused before any parsing: no source needs more. */
#define FETCH_URL_MAX 4096
/* An address as recorded: IPv6 text with room to spare. */
#define FETCH_ADDR_MAX 64

enum fetch_status {
    FETCH_OK = 0,
    FETCH_INVALID,   /* the URL or digest is malformed (400) */
    FETCH_REFUSED,   /* a rule refused it (403 security_rejected) */
    FETCH_FAILED,    /* the source could not be read (422 load_failed) */
    FETCH_BUSY,      /* FETCH_MAX_RUNNING fetches are running (503) */
    FETCH_CANCELLED, /* the daemon is shutting down (503) */
};

/* The rules, from the configuration (fetch_new) or a test. */
struct fetch_policy {
    bool allow_http;
    char **allowed_hosts; /* none: every host */
    size_t nallowed_hosts;
    struct netrange_net *allowed_nets;
    size_t nallowed_nets;
};

/* A URL that passed the syntactic rules (fetch_url_check). */
struct fetch_url {
    char scheme[8]; /* "https" or "http" */
    char host[256]; /* as written, without IPv6 brackets */
    unsigned port;
};

/* The outcome of a fetch, owned by the fetcher until the callback
 * returns; the callback may take body (setting it to NULL). */
struct fetch_result {
    enum fetch_status status;
    char message[512]; /* the cause, when status != FETCH_OK */
    uint8_t *body;
    size_t len;
    char sha256[65];               /* of body, lowercase hex */
    char address[FETCH_ADDR_MAX];  /* the address the body came from */
    char final_url[FETCH_URL_MAX]; /* after redirects; "" when none */
};

typedef void (*fetch_done_cb)(struct fetch_result *r, void *arg);

/*
 * Checks url against the rules that need no network: length, syntax
 * (libcurl's URL parser), scheme, user:password, the host allowlist.
 * Fills *out and returns FETCH_OK, or FETCH_INVALID / FETCH_REFUSED with
 * the cause in why.  Pure: any thread, no I/O.
 */
enum fetch_status fetch_url_check(const struct fetch_policy *p, const char *url,
                                  struct fetch_url *out, char *why,
                                  size_t whylen);

/*
 * Checks a 64-digit hex SHA-256 and writes it lowercase into out.
 * Returns 0, or -1 when it is not one.
 */
int fetch_sha256_parse(const char *text, char out[65]);

/* Initialises libcurl (once, before any thread), reads the credentials
 * file, and registers the completion event on base.  Returns NULL with
 * the cause in err (a bad credentials file names its line). */
struct fetcher *fetch_new(struct event_base *base, const struct conf *conf,
                          char *err, size_t errlen);

/*
 * Starts fetching url, whose body must hash to sha256 when that is not
 * NULL (lowercase hex, fetch_sha256_parse).  Returns 0, and cb runs later
 * on the loop thread with the result; or a status other than FETCH_OK with
 * the cause in why (a rule refused it at once, or FETCH_BUSY), and cb is
 * never called.
 */
enum fetch_status fetch_start(struct fetcher *f, const char *url,
                              const char *sha256, fetch_done_cb cb, void *arg,
                              char *why, size_t whylen);

/* Makes every running fetch end soon with FETCH_CANCELLED (shutdown); new
 * ones are refused from then on. */
void fetch_cancel_all(struct fetcher *f);

/* Cancels what runs, waits for its threads, runs their callbacks (with
 * FETCH_CANCELLED), and frees.  Call while what the callbacks use (the
 * API, the supervisor) still exists. */
void fetch_free(struct fetcher *f);

#endif /* WM_MASTER_FETCH_H */
