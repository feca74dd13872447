/*
 * api.h — master/api/, the admin API room (DESIGN §8): HTTP/1.1 + JSON over
 * the room's own HTTP server (http_server.h: http_conn.c, http_reply.c,
 * http_listen.c, on libevent's loop) on the control socket (unix, mode and
 * group configurable, peer credentials logged and mapped to a principal)
 * and optionally on TCP with a bearer token.  router.c holds the
 * listeners, the gate and the route table; principal.c what a principal
 * may do (role x action x tenant); route_tokens.c and route_tenants.c
 * the tokens and tenants; request.c a request's life (reading its body,
 * answering, the audit trail); one route_*.c per resource (workers,
 * with worker_body.c for a worker's JSON both ways, route_invoke.c for
 * invoke and route_logs.c for a worker's log lines; topics; tenants;
 * tokens; health, engines and recover; metrics); events.c and events_json.c the
 * CloudEvents codec of the edges (events.h).  A handler either answers at
 * once or keeps its struct api_req until an asynchronous step (a store
 * write, a host's Loaded) completes; a client that hangs up meanwhile
 * marks the request gone and the late answer is dropped.
 */
#ifndef WM_MASTER_API_H
#define WM_MASTER_API_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "lib/uuid.h"
#include "master/api/principal.h"

struct daemon;
struct api;
struct http_request;
struct http_header;
struct worker;

/* The most path segments a request may have: /v1/workers/{id}/{action} is
 * four; longer paths are refused as unknown routes. */
#define API_MAX_SEGMENTS 6
/* The most query parameters read; later ones are ignored. */
#define API_MAX_PARAMS 32

/* A request's query parameters, decoded (text holds them). */
struct api_params {
    unsigned n;
    const char *name[API_MAX_PARAMS];
    const char *value[API_MAX_PARAMS];
    char text[];
};

struct api_req {
    struct api *api;
    struct daemon *d;
    struct http_request *hreq;   /* the server's, until the answer */
    const char *method;          /* "GET", "POST", ... */
    char *path;                  /* decoded path, without the query */
    char *query;                 /* raw query string, or NULL */
    char *seg[API_MAX_SEGMENTS]; /* path segments (pointers into segbuf) */
    int nseg;
    char *segbuf;
    char peer[160]; /* who: http_peer.text */
    /* Whose credentials (principal.h): made by the gate before any
     * route runs. */
    struct api_principal principal;
    bool gone;                 /* the client hung up before the answer */
    bool mutation;             /* audited */
    char worker[UUID_SIZE];    /* the worker concerned, for the audit trail */
    struct api_params *params; /* the parsed query, once api_query() ran */
    void (*stream_gone)(void *arg);
    void *stream_arg;
};

/* Starts listening as the configuration says.  Returns NULL with a
 * message naming the cause (socket in use, bad listen address, missing
 * token file). */
struct api *api_new(struct daemon *d, char *err, size_t errlen);
/* Stops accepting new connections (shutdown). */
void api_stop_listening(struct api *api);
/* The TCP listener's TLS for /health: {"enabled": false}, or enabled,
 * min_version, not_after (the certificate's expiry), days_left,
 * client_cert and handshake_failures. */
json_t *api_tls_json(const struct api *api);
/* The TCP listener's TLS setting, or NULL (no TLS). */
const struct http_tls *api_tls(const struct api *api);
void api_free(struct api *api);

/* For the router (request.c): the request of req as the routes see it,
 * with the gone callback that marks it gone.  Returns NULL when it has
 * already been answered (500 out of memory; 404 for a path that does not
 * decode or has more than API_MAX_SEGMENTS segments). */
struct api_req *api_req_new(struct api *api, struct daemon *d,
                            struct http_request *req);

/* Answers with status and a JSON body (the reference is stolen; NULL for
 * no body) and frees rq. */
void api_reply(struct api_req *rq, int status, json_t *body);
/* An instant (milliseconds since the epoch) as the API writes it: RFC 3339
 * text, or null for 0 (never happened).  A new reference. */
json_t *api_json_time(int64_t ms);
/* Answers {"error": {"code", "message"}} and frees rq. */
void api_error(struct api_req *rq, int status, const char *code,
               const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* As api_error with extra members in the error object (stolen). */
void api_error_extra(struct api_req *rq, int status, const char *code,
                     json_t *extra, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Answers a write the storage (the journal, the store) could not make,
 * err its errno: 507 insufficient_storage for a full disk (ENOSPC,
 * EDQUOT), else 503 storage_unavailable with Retry-After; the message is
 * fmt's (what failed) followed by what the operator does.  extra as in
 * api_error_extra (may be NULL). */
void api_error_storage(struct api_req *rq, int err, json_t *extra,
                       const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The request body parsed as a JSON object; on failure answers
 * invalid_json / invalid_argument itself and returns NULL. */
json_t *api_body_object(struct api_req *rq);
/* The raw body (valid until the answer). */
const unsigned char *api_body_raw(struct api_req *rq, size_t *len);
/* A request header, or NULL. */
const char *api_header(struct api_req *rq, const char *name);
/* Every request header, in the order sent (*n of them; valid until the
 * answer). */
const struct http_header *api_headers(struct api_req *rq, size_t *n);
/* Adds a header to the answer (Retry-After, WWW-Authenticate), before
 * it. */
void api_reply_header(struct api_req *rq, const char *name, const char *value);

/* A query parameter (decoded), or NULL. */
const char *api_query(struct api_req *rq, const char *name);

/* An optional string member of obj into *out (borrowed from obj; NULL when
 * absent or null).  Returns 0, or -1 having answered 400 when it is not a
 * string. */
int api_member_str(struct api_req *rq, json_t *obj, const char *key,
                   const char **out);
/* An optional integer member of obj from min to max into *out (left as it
 * is when absent or null).  Returns 0, or -1 having answered 400
 * `<what><key> must be an integer from <min> to <max>`. */
int api_member_uint(struct api_req *rq, json_t *obj, const char *key,
                    const char *what, uint32_t min, uint32_t max,
                    uint32_t *out);

/* The longest topic name: a topic is a word of lib/name.h,
 * [A-Za-z0-9_.-]{1,128}, checked with name_word_valid(). */
#define API_TOPIC_MAX 128
/* The rule of a topic name, as messages state it. */
#define API_TOPIC_RULE "a topic is 1 to 128 of [A-Za-z0-9_.-]"

/* Answers with a body of another type than JSON and frees rq. */
void api_reply_text(struct api_req *rq, int status, const char *content_type,
                    const char *text, size_t len);

/* Answers with more header lines (http_reply_fields(): whole lines,
 * made safe by the caller) and a body of content_type (NULL with len 0:
 * none), and frees rq. */
void api_reply_fields(struct api_req *rq, int status, const char *content_type,
                      const char *fields, size_t fields_len, const void *body,
                      size_t len);

/* Streaming (Server-Sent Events): starts a chunked 200 answer; gone runs
 * once if the client hangs up (then rq is freed by the API: stop using
 * it).  api_stream_write() sends a chunk (dropped, returning -1, when the
 * client's unsent output passes max_pending bytes); api_stream_end()
 * finishes the answer and frees rq. */
void api_stream_start(struct api_req *rq, const char *content_type,
                      void (*gone)(void *arg), void *arg);
int api_stream_write(struct api_req *rq, const char *data, size_t len,
                     size_t max_pending);
void api_stream_end(struct api_req *rq);

/* While recovery runs, mutating routes answer 503 `recovering` with
 * Retry-After; true if it answered. */
bool api_refuse_while_recovering(struct api_req *rq);

/* Routes (route_workers.c, route_health.c, route_topics.c,
 * route_metrics.c).  Each answers or keeps rq. */
void api_workers_route(struct api_req *rq);
void api_health_route(struct api_req *rq);
void api_engines_route(struct api_req *rq);
void api_recover_route(struct api_req *rq);
void api_instances_route(struct api_req *rq); /* route_instances.c */
/* GET /v1/export, POST /v1/import (route_export.c). */
void api_export_route(struct api_req *rq);
void api_topics_route(struct api_req *rq);
/* Follows the workers' records other instances change (remote_workers.c;
 * a shared store only): once recovery is done. */
void api_remote_workers_start(struct daemon *d);
/* Whether a /v1/workers operation on worker id (its create included) is in
 * progress here (route_workers.c): its store write is not settled yet. */
bool api_workers_in_flight(const char *id);
/* A tenant's workers at once (tenant_workers.c).  Stops (run false) or starts
 * worker w without a request (its tenant's suspension and resumption); its
 * record follows.  -1 while an API change to it is in flight. */
int api_workers_set_status(struct daemon *d, struct worker *w, bool run);
/* Takes w out of this daemon (its subscription, its host, the registry),
 * emits "deleted" (extra, stolen, may be NULL, adds to its data) and frees
 * it; the store is the caller's business. */
void api_workers_drop(struct daemon *d, struct worker *w, json_t *extra);
/* Deletes every worker of tenant (its deletion); returns how many. */
unsigned api_workers_remove_tenant(struct daemon *d, const char *tenant);
/* How many workers tenant has. */
unsigned api_workers_count_tenant(struct daemon *d, const char *tenant);
/* Answers 409 conflict for worker w, created without code, that was asked
 * to start, to roll back or to take an event: its message says how to
 * load the code. */
void api_workers_refuse_no_code(struct api_req *rq, const struct worker *w);
/* POST /v1/workers/{id}/invoke of worker w (route_invoke.c). */
void api_invoke_route(struct api_req *rq, struct worker *w);
/* GET /v1/workers/{id}/logs of worker w (route_logs.c), and the end of
 * every stream following a worker's lines (shutdown). */
void api_logs_route(struct api_req *rq, struct worker *w);
void api_logs_close_streams(void);
/* Open event streams, and events they dropped (route_topics.c). */
uint64_t api_topics_streams(void);
/* Ends every stream (shutdown). */
void api_topics_close_streams(void);
uint64_t api_topics_dropped(void);
/* Backpressure (master/broker/admit.h): answers 503 with Retry-After: 1,
 * the error `code` (backlog_full, subscriber_full), extra members (stolen,
 * may be NULL) and the message. */
void api_backpressure_refuse(struct api_req *rq, const char *code,
                             json_t *extra, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void api_metrics_route(struct api_req *rq);

#endif /* WM_MASTER_API_H */
