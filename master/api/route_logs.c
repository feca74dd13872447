/*
 * route_logs.c — GET /v1/workers/{id}/logs[?n=N][&follow=1] (DESIGN §8):
 * a worker's recent log lines, from the ring master/workers/activity.h
 * keeps of its hosts' output and the daemon's lines about it.
 *
 * Without follow: 200 {"lines": [line, ...]}, the last N lines (default
 * LOGS_DEFAULT_N), oldest first.  With follow=1: Server-Sent Events, as
 * GET /v1/topics/{t}/events streams, each line one `id: <seq>` and
 * `data: <line>` event, the last N first and then each new line as it
 * comes, until the client hangs up or the worker is deleted (the stream
 * ends then).  A line is {"seq", "at", "level", "source": "host" |
 * "daemon", "text"}; a gap in seq is lines the ring dropped (or, while
 * following, that a slow client did not take).
 *
 * Invariant: a stream is in `streams` and follows its worker's ring from
 * its start until one of three ends: the client hangs up (its follower
 * is removed), the worker is freed (the ring's last call, with no line:
 * the follower is gone already), or the daemon stops
 * (api_logs_close_streams()).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "master/api/api.h"
#include "master/core/daemon.h"
#include "master/core/log.h"
#include "master/workers/activity.h"
#include "master/workers/worker.h"

/* The lines answered when the request says no n, and the most it may
 * ask for (the ring rarely holds more: 64 KiB of lines by default). */
#define LOGS_DEFAULT_N 100
#define LOGS_MAX_N 100000
/* Unsent bytes past which a stream drops lines, as topics' streams. */
#define LOGS_MAX_PENDING (1u << 20)
/* A comment line this often keeps proxies and idle timers quiet. */
#define LOGS_KEEPALIVE_S 15

struct logs_stream {
    LIST_ENTRY(logs_stream) link;
    struct api_req *rq;
    struct activity_follower *f;
    struct event *keepalive;
};

static LIST_HEAD(, logs_stream) streams = LIST_HEAD_INITIALIZER(streams);

static json_t *
line_json(const struct activity_line *l)
{
    return json_pack("{s:I, s:o, s:s, s:s, s:s}", "seq", (json_int_t)l->seq,
                     "at", api_json_time(l->at_ms), "level",
                     log_level_name(l->level), "source",
                     l->host ? "host" : "daemon", "text", l->text);
}

/* ---- following ------------------------------------------------------- */

static void
stream_free(struct logs_stream *s)
{
    LIST_REMOVE(s, link);
    activity_unfollow(s->f);
    if (s->keepalive)
        event_free(s->keepalive);
    free(s);
}

static void
on_gone(void *arg)
{
    stream_free(arg);
}

static void
stream_line(struct logs_stream *s, const struct activity_line *l)
{
    json_t *j = line_json(l);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;

    json_decref(j);
    if (text == NULL)
        return;
    size_t cap = strlen(text) + 48;
    char *msg = malloc(cap);
    int n = msg ? snprintf(msg, cap, "id: %llu\ndata: %s\n\n",
                           (unsigned long long)l->seq, text)
                : -1;
    if (n > 0)
        (void)api_stream_write(s->rq, msg, (size_t)n, LOGS_MAX_PENDING);
    free(msg);
    free(text);
}

static void
on_line(const struct activity_line *l, void *arg)
{
    struct logs_stream *s = arg;
    struct api_req *rq = s->rq;

    if (l != NULL) {
        stream_line(s, l);
        return;
    }
    /* The worker is freed: its ring removed the follower already. */
    s->f = NULL;
    stream_free(s);
    api_stream_end(rq);
}

static void
on_keepalive(evutil_socket_t fd, short what, void *arg)
{
    struct logs_stream *s = arg;

    (void)fd;
    (void)what;
    api_stream_write(s->rq, ": keepalive\n\n", 13, LOGS_MAX_PENDING);
}

static void
follow(struct api_req *rq, struct worker *w, size_t first)
{
    struct logs_stream *s = calloc(1, sizeof *s);
    struct timeval tv = { LOGS_KEEPALIVE_S, 0 };

    if (s == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        return;
    }
    s->rq = rq;
    LIST_INSERT_HEAD(&streams, s, link);
    s->f = activity_follow(w, on_line, s);
    s->keepalive = event_new(rq->d->base, -1, EV_PERSIST, on_keepalive, s);
    if (s->f == NULL || s->keepalive == NULL) {
        stream_free(s);
        api_error(rq, 500, "internal", "out of memory");
        return;
    }
    event_add(s->keepalive, &tv);
    api_stream_start(rq, "text/event-stream", on_gone, s);
    api_stream_write(rq, ": following\n\n", 14, LOGS_MAX_PENDING);
    for (size_t i = first; i < activity_log_count(w); i++)
        stream_line(s, activity_log_at(w, i));
}

void
api_logs_close_streams(void)
{
    struct logs_stream *s;

    while ((s = LIST_FIRST(&streams)) != NULL) {
        struct api_req *rq = s->rq;
        stream_free(s);
        api_stream_end(rq);
    }
}

/* ---- the route -------------------------------------------------------- */

void
api_logs_route(struct api_req *rq, struct worker *w)
{
    const char *nq = api_query(rq, "n");
    const char *fq = api_query(rq, "follow");
    unsigned long n = LOGS_DEFAULT_N;
    bool following = false;

    if (nq) {
        char *end;
        n = strtoul(nq, &end, 10);
        if (*nq < '0' || *nq > '9' || *end || n > LOGS_MAX_N) {
            api_error(rq, 400, "invalid_argument",
                      "n must be an integer from 0 to %d", LOGS_MAX_N);
            return;
        }
    }
    if (fq) {
        if (strcmp(fq, "1") != 0 && strcmp(fq, "true") != 0 &&
            strcmp(fq, "0") != 0 && strcmp(fq, "false") != 0) {
            api_error(rq, 400, "invalid_argument",
                      "follow must be 1, true, 0 or false");
            return;
        }
        following = strcmp(fq, "1") == 0 || strcmp(fq, "true") == 0;
    }
    size_t count = activity_log_count(w);
    size_t first = count > n ? count - n : 0;
    if (following) {
        follow(rq, w, first);
        return;
    }
    json_t *lines = json_array();
    for (size_t i = first; i < count; i++)
        json_array_append_new(lines, line_json(activity_log_at(w, i)));
    api_reply(rq, 200, json_pack("{s:o}", "lines", lines));
}
