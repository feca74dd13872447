/*
 * route_topics.c — publishing and following topics (DESIGN §8):
 *
 *   POST /v1/topics/{topic}/events[?tenant=T]
 *       structured (application/cloudevents+json), batched
 *       (application/cloudevents-batch+json) or binary mode (ce-* headers,
 *       the body as data) → 202 {"ids": [...]} once every event is
 *       journaled; 503 subscriber_full with Retry-After, nothing accepted,
 *       when a subscriber's queue cannot hold them all (admit.h: a batch
 *       is accepted whole or not at all); 503 backlog_full with
 *       Retry-After when the journal's budget is exhausted (the ids
 *       accepted before it are listed); 507 insufficient_storage when the
 *       journal's disk is full, 503 storage_unavailable for another write
 *       error (storage_error.c).
 *   GET /v1/topics/{topic}/events[?tenant=T]
 *       Server-Sent Events: each event published to the topic from now on,
 *       as `id: <id>`, `event: <type>`, `data: <structured JSON>`; `*` as
 *       the topic follows every topic of the tenant, `tenant=*` every
 *       tenant.  A client that reads too slowly loses events (counted in
 *       /metrics), never the daemon's memory.
 *
 * The tenant defaults to "default".  workmanager.* topics are the daemon's:
 * publishing there is refused; following them is how operators watch
 * lifecycle and infra events.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "lib/name.h"
#include "lib/timestamp.h"
#include "master/api/api.h"
#include "master/api/events.h"
#include "master/api/events_http.h"
#include "master/api/http_server.h"
#include "master/api/quota_http.h"
#include "master/api/tokens.h"
#include "master/broker/admit.h"
#include "master/broker/broker.h"
#include "master/broker/flow.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/log.h"

/* Unsent bytes past which a stream drops events. */
#define STREAM_MAX_PENDING (4u << 20)
/* A comment line this often keeps proxies and idle timers quiet. */
#define STREAM_KEEPALIVE_S 15

static uint64_t streams_dropped;
static uint64_t streams_open;
static LIST_HEAD(, stream) streams = LIST_HEAD_INITIALIZER(streams);

uint64_t
api_topics_dropped(void)
{
    return streams_dropped;
}

uint64_t
api_topics_streams(void)
{
    return streams_open;
}

/* The tenant a request means: ?tenant=, else its principal's own
 * (principal.h: "default" for an operator). */
static const char *
tenant_of(struct api_req *rq)
{
    return api_scope_tenant(rq, api_query(rq, "tenant"));
}

/* The daemon's topic a tenant's principal may follow in its own tenant:
 * the lifecycle events of its workers.  Every other workmanager.* topic
 * is the operators'. */
#define TENANT_DAEMON_TOPIC "workmanager.lifecycle"

static bool
tenant_may_follow(const char *topic)
{
    return !flow_topic_reserved(topic) ||
           strcmp(topic, TENANT_DAEMON_TOPIC) == 0;
}

/* Whether rq's principal may do a on the topics of tenant (`*`: every
 * tenant's, an operator's); else answers 403 and returns true.  A topic
 * is no object whose existence could leak: another tenant's is 403. */
static bool
topic_refuse(struct api_req *rq, enum api_action a, const char *tenant,
             const char *topic)
{
    const struct api_principal *p = &rq->principal;

    if (p->role == ROLE_OPERATOR)
        return false;
    if (strcmp(tenant, "*") == 0 || strcmp(tenant, p->tenant) != 0) {
        api_error(rq, 403, "forbidden",
                  "a credential of tenant %s reaches the topics of tenant %s "
                  "only (tenant=* is for operators)",
                  p->tenant, p->tenant);
        return true;
    }
    if (a == API_READ && !tenant_may_follow(topic)) {
        api_error(rq, 403, "forbidden",
                  "topic %s is the daemon's, for operators; a tenant follows "
                  "its workers' lifecycle on " TENANT_DAEMON_TOPIC,
                  topic);
        return true;
    }
    return api_scope_refuse(rq, a, tenant, "topic");
}

/* ---- publish ----------------------------------------------------------- */

/* A publish waiting for the broker: its answer, written before (the ids
 * are the events', which the broker keeps no copy of for us). */
struct publish {
    struct api_req *rq;
    size_t len;
    char body[]; /* {"ids":[...]} and a newline, as jansson dumps it */
};

/* Answers a publish the broker did not store: error is its errno, or
 * EIO for "the journal cannot write now" (503 storage_unavailable) or
 * "NATS is not reachable now" (503 broker_unavailable), whose cause
 * broker_health() has. */
static void
refuse_unstored(struct api_req *rq, int error, json_t *extra)
{
    char since[TIMESTAMP_SIZE];
    struct broker_health h;

    broker_health(rq->d->broker, &h);
    if (h.remote && error == ENOSPC) {
        api_error_extra(rq, 507, "insufficient_storage", extra,
                        "NATS JetStream refused the event: its storage is "
                        "full (the server's JetStream limits); free space "
                        "there or settle the backlog");
    } else if (h.remote) {
        api_reply_header(rq, "Retry-After", "1");
        if (!h.writable) {
            timestamp_format(h.since * 1000, since);
            api_error_extra(rq, 503, "broker_unavailable", extra,
                            "the broker cannot store events since %s: %s; "
                            "the daemon goes on by itself once it is "
                            "reachable",
                            since, h.message);
        } else {
            api_error_extra(rq, 503, "broker_unavailable", extra,
                            "the broker did not confirm that it stored the "
                            "event (%s); publish it again: one stored "
                            "already is not stored twice",
                            strerror(error));
        }
    } else if (!h.writable) {
        timestamp_format(h.since * 1000, since);
        api_error_storage(rq, h.error, extra,
                          "the journal cannot write since %s: %s", since,
                          h.message);
    } else {
        api_error_storage(rq, error, extra, "the journal failed: %s",
                          strerror(error));
    }
}

static void
on_durable(int error, void *arg)
{
    struct publish *p = arg;

    if (error)
        refuse_unstored(p->rq, error, NULL);
    else
        api_reply_text(p->rq, 202, "application/json", p->body, p->len);
    free(p);
}

/* The answer to the publish of evs[0..n), written by hand (no tree per
 * publish: issue 24), the bytes json_dumpb(JSON_COMPACT) would give.  The
 * events are events.c's, checked: their ids are read, not verified. */
static struct publish *
publish_new(struct api_req *rq, const struct broker_event *evs, size_t n)
{
    static const char head[] = "{\"ids\":[", tail[] = "]}\n";
    size_t len = sizeof head - 1 + sizeof tail - 1 + (n ? n - 1 : 0);
    struct publish *p;
    char *o;

    for (size_t i = 0; i < n; i++) {
        struct ipc_str id = ipc_cloudevent_id_trusted(evs[i].event);
        len += events_json_quote(id.ptr, id.len, NULL);
    }
    if ((p = malloc(sizeof *p + len)) == NULL)
        return NULL;
    p->rq = rq;
    p->len = len;
    o = p->body;
    memcpy(o, head, sizeof head - 1);
    o += sizeof head - 1;
    for (size_t i = 0; i < n; i++) {
        struct ipc_str id = ipc_cloudevent_id_trusted(evs[i].event);
        if (i > 0)
            *o++ = ',';
        o += events_json_quote(id.ptr, id.len, o);
    }
    memcpy(o, tail, sizeof tail - 1);
    return p;
}

/* The ids of evs[0..n) as a JSON array (a refusal's "accepted"). */
static json_t *
ids_json(const struct broker_event *evs, size_t n)
{
    json_t *ids = json_array();

    for (size_t i = 0; i < n && ids; i++) {
        struct ipc_str id = ipc_cloudevent_id_trusted(evs[i].event);
        json_array_append_new(ids, json_stringn(id.ptr, id.len));
    }
    return ids;
}

void
api_backpressure_refuse(struct api_req *rq, const char *code, json_t *extra,
                        const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    api_reply_header(rq, "Retry-After", "1");
    api_error_extra(rq, 503, code, extra, "%s", msg);
}

/* Publishes the events of batch, all of them or none when a subscriber's
 * queue cannot hold them (admit.h); answers. */
static void
publish_batch(struct api_req *rq, const char *tenant, const char *topic,
              const struct events_batch *batch)
{
    char why[512], who[300];

    if (batch->n == 0) {
        api_reply(rq, 202, json_pack("{s:[]}", "ids"));
        return;
    }
    if (admit_publish(rq->d, tenant, topic, batch->n, why, sizeof why, who,
                      sizeof who) != 0) {
        api_backpressure_refuse(
            rq, "subscriber_full",
            json_pack("{s:[], s:s}", "accepted", "subscriber", who), "%s", why);
        return;
    }
    /* After admission and the backlog quotas, which take nothing: a
     * refused publish spends no tokens. */
    struct broker_event *evs = malloc(batch->n * sizeof *evs);
    struct publish *p = NULL;
    size_t accepted = 0;
    uint64_t bytes = 0;
    if (evs == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        return;
    }
    for (size_t i = 0; i < batch->n; i++) {
        evs[i].event = events_batch_get(batch, i, &evs[i].len);
        bytes += evs[i].len;
    }
    if (api_quota_refuse_backlog(rq, tenant, batch->n, bytes) ||
        api_quota_refuse_rate(rq, tenant, batch->n, bytes)) {
        free(evs);
        return;
    }
    if ((p = publish_new(rq, evs, batch->n)) == NULL) {
        free(evs);
        api_error(rq, 500, "internal", "out of memory");
        return;
    }
    /* on_durable runs later, from the loop, never inside the call. */
    if (flow_publish_batch(rq->d->flow, tenant, topic, evs, batch->n,
                           on_durable, p, &accepted) != 0) {
        int e = errno;
        json_t *extra = json_pack("{s:o}", "accepted", ids_json(evs, accepted));
        free(p);
        if (e == ENOSPC) {
            admit_note_refused(ADMIT_JOURNAL_FULL);
            api_backpressure_refuse(
                rq, "backlog_full", extra,
                "the journal is full (journal_max_bytes); %zu of %zu "
                "events accepted",
                accepted, batch->n);
        } else if (e == EIO) {
            refuse_unstored(rq, e, extra);
        } else {
            api_error_extra(rq, 500, "internal", extra,
                            "event %zu was not accepted: %s", accepted,
                            strerror(e));
        }
    }
    free(evs);
}

static void
publish(struct api_req *rq, const char *topic)
{
    const char *tenant = tenant_of(rq);
    struct events_batch batch;
    enum events_http_mode mode;

    if (flow_topic_reserved(topic)) {
        api_error(rq, 400, "invalid_argument",
                  "topic %s is reserved for the daemon's own events", topic);
        return;
    }
    events_batch_init(&batch);
    if (events_http_read(rq, 0, &batch, &mode) == 0)
        publish_batch(rq, tenant, topic, &batch);
    events_batch_free(&batch);
}

/* ---- follow (SSE) ---------------------------------------------------- */

struct stream {
    LIST_ENTRY(stream) link;
    struct api_req *rq;
    struct broker_sub *sub;
    struct event *keepalive;
    uint64_t dropped;
    bool operator; /* else the daemon's topics but one are left out */
};

static void
stream_free(struct stream *s)
{
    LIST_REMOVE(s, link);
    if (s->sub)
        broker_unsubscribe(s->sub, false);
    if (s->keepalive)
        event_free(s->keepalive);
    streams_open--;
    free(s);
}

static void
on_stream_gone(void *arg)
{
    stream_free(arg);
}

static void
on_stream_event(struct broker_delivery *d, void *arg)
{
    struct stream *s = arg;
    struct ipc_cloudevent ce;

    if (!s->operator&& !tenant_may_follow(d->topic))
        return; /* `*` of a tenant: not the daemon's infra events */
    /* A broker's event: verified or built before (broker.h, Trust). */
    ipc_cloudevent_decode_trusted(d->event, &ce);
    json_t *obj = events_to_json(&ce);
    size_t len;
    char *text = obj ? events_json_dumps(obj, &len) : NULL;
    json_decref(obj);
    if (text == NULL)
        return;
    size_t cap = len + ce.id.len + ce.type.len + 64;
    char *msg = malloc(cap);
    if (msg) {
        int n = snprintf(msg, cap, "id: %.*s\nevent: %.*s\ndata: %s\n\n",
                         (int)ce.id.len, ce.id.ptr, (int)ce.type.len,
                         ce.type.ptr, text);
        if (n > 0 &&
            api_stream_write(s->rq, msg, (size_t)n, STREAM_MAX_PENDING) != 0) {
            s->dropped++;
            streams_dropped++;
        }
    }
    free(msg);
    free(text);
}

static void
on_keepalive(evutil_socket_t fd, short what, void *arg)
{
    struct stream *s = arg;
    (void)fd;
    (void)what;
    api_stream_write(s->rq, ": keepalive\n\n", 13, STREAM_MAX_PENDING);
}

static void
follow(struct api_req *rq, const char *topic)
{
    const char *tenant = tenant_of(rq);
    struct stream *s = calloc(1, sizeof *s);
    struct timeval tv = { STREAM_KEEPALIVE_S, 0 };

    if (s == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        return;
    }
    s->rq = rq;
    s->operator= rq->principal.role == ROLE_OPERATOR;
    LIST_INSERT_HEAD(&streams, s, link);
    struct broker_sub_spec spec = {
        .tenant = tenant,
        .topic = topic,
        .name = "",
        .live = true,
        .deliver = on_stream_event,
        .arg = s,
    };
    s->sub = broker_subscribe(rq->d->broker, &spec);
    s->keepalive = event_new(rq->d->base, -1, EV_PERSIST, on_keepalive, s);
    if (s->sub == NULL || s->keepalive == NULL) {
        streams_open++;
        stream_free(s);
        api_error(rq, 500, "internal", "cannot subscribe: %s", strerror(errno));
        return;
    }
    streams_open++;
    event_add(s->keepalive, &tv);
    api_stream_start(rq, "text/event-stream", on_stream_gone, s);
    /* A first comment: the client knows the stream is live. */
    api_stream_write(rq, ": subscribed\n\n", 14, STREAM_MAX_PENDING);
}

void
api_topics_close_streams(void)
{
    struct stream *s;

    while ((s = LIST_FIRST(&streams)) != NULL) {
        struct api_req *rq = s->rq;
        stream_free(s);
        api_stream_end(rq);
    }
}

void
api_topics_route(struct api_req *rq)
{
    /* /v1/topics/{topic}/events */
    if (rq->nseg != 4 || strcmp(rq->seg[3], "events") != 0) {
        api_error(rq, 404, "not_found", "no route %s %s", rq->method, rq->path);
        return;
    }
    const char *topic = rq->seg[2];
    bool all = strcmp(topic, "*") == 0;
    if (!all && !name_word_valid(topic, API_TOPIC_MAX)) {
        api_error(rq, 400, "invalid_argument",
                  "topic \"%s\" is invalid: " API_TOPIC_RULE
                  " (or * to follow every topic)",
                  topic);
        return;
    }
    const char *tenant = api_query(rq, "tenant");
    if (tenant && strcmp(tenant, "*") != 0 &&
        !name_word_valid(tenant, API_TOPIC_MAX)) {
        api_error(rq, 400, "invalid_argument",
                  "tenant \"%s\" is not [A-Za-z0-9_.-]{1,128}", tenant);
        return;
    }
    tenant = tenant_of(rq);
    if (strcmp(rq->method, "GET") == 0) {
        if (!topic_refuse(rq, API_READ, tenant, topic))
            follow(rq, topic);
    } else if (strcmp(rq->method, "POST") == 0) {
        if (topic_refuse(rq, API_PUBLISH, tenant, topic))
            return;
        if (all || strcmp(tenant, "*") == 0) {
            api_error(rq, 400, "invalid_argument",
                      "publish to one topic of one tenant");
            return;
        }
        if (api_tenants_suspended(tenant)) {
            api_error(rq, 409, "tenant_suspended",
                      "tenant %s is suspended: its publishes are refused "
                      "until an operator resumes it (wmctl tenant resume %s)",
                      tenant, tenant);
            return;
        }
        if (!api_refuse_while_recovering(rq))
            publish(rq, topic);
    } else {
        api_error(rq, 405, "invalid_argument", "%s is not allowed on %s",
                  rq->method, rq->path);
    }
}
