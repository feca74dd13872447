/*
 * activity.c — a worker's last error and the ring of its log lines (see
 * activity.h).
 *
 * Why a ring of separately allocated lines behind a circular array of
 * pointers: lines are appended and dropped one at a time, read by index
 * (a route answers the last N), and vary from a few bytes to a log
 * line's 4 KiB; a byte buffer would need its own framing for the same.
 *
 * Invariants: a worker's struct activity exists from its first line or
 * error on (w->activity, NULL before); ring.bytes is the sum of the kept
 * lines' len and stays at most the limit after every append (a line
 * longer than the limit alone is not kept); seq grows by one per line
 * appended, kept or not, so a follower can tell lines it missed.
 */
#include "config.h"

#include "master/workers/activity.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "ipc/frame.h"
#include "lib/timestamp.h"
#include "master/workers/worker.h"

/* The default of worker_log_bytes (conf_keys.c), until the daemon sets
 * it. */
#define DEFAULT_LIMIT (64u * 1024u)

struct activity_follower {
    LIST_ENTRY(activity_follower) link;
    void (*line)(const struct activity_line *l, void *arg);
    void *arg;
};

struct activity {
    bool has_error;
    struct activity_error error;
    struct activity_line **lines; /* circular: first, n of cap */
    size_t first, n, cap;
    size_t bytes;
    uint64_t seq;
    LIST_HEAD(, activity_follower) followers;
};

static size_t limit = DEFAULT_LIMIT;

void
activity_log_limit_set(size_t bytes)
{
    limit = bytes;
}

static struct activity *
activity_of(struct worker *w)
{
    if (w->activity == NULL) {
        w->activity = calloc(1, sizeof *w->activity);
        if (w->activity)
            LIST_INIT(&w->activity->followers);
    }
    return w->activity;
}

static void
error_clear(struct activity_error *e)
{
    free(e->message);
    free(e->exception_type);
    free(e->traceback);
    memset(e, 0, sizeof *e);
}

/* ---- the last error --------------------------------------------------- */

void
activity_error_note(struct worker *w, const char *type, const char *msg,
                    const struct ipc_error *e)
{
    const struct worker_exit *x = &w->last_exit;
    bool same = x->present && strcmp(x->reason, type) == 0;
    struct activity *a = activity_of(w);

    if (a == NULL)
        return;
    error_clear(&a->error);
    a->error = (struct activity_error){
        .at_ms = timestamp_now_ms(),
        .message = strdup(msg ? msg : type),
        .signal = same ? x->signal : 0,
        .exit_code = same ? x->code : -1,
        .syscall = same ? x->syscall : -1,
    };
    snprintf(a->error.type, sizeof a->error.type, "%s", type);
    if (same)
        snprintf(a->error.syscall_name, sizeof a->error.syscall_name, "%s",
                 x->syscall_name);
    if (e && e->exception_type.ptr)
        a->error.exception_type =
            strndup(e->exception_type.ptr, e->exception_type.len);
    if (e && e->traceback.ptr)
        a->error.traceback = strndup(e->traceback.ptr, e->traceback.len);
    a->has_error = a->error.message != NULL;
}

const struct activity_error *
activity_error_last(const struct worker *w)
{
    return w->activity && w->activity->has_error ? &w->activity->error : NULL;
}

/* ---- the ring --------------------------------------------------------- */

static void
ring_drop_oldest(struct activity *a)
{
    struct activity_line *l = a->lines[a->first];

    a->bytes -= l->len;
    free(l);
    a->first = (a->first + 1) % a->cap;
    a->n--;
}

static int
ring_grow(struct activity *a)
{
    size_t cap = a->cap ? a->cap * 2 : 16;
    struct activity_line **v = malloc(cap * sizeof *v);

    if (v == NULL)
        return -1;
    for (size_t i = 0; i < a->n; i++)
        v[i] = a->lines[(a->first + i) % a->cap];
    free(a->lines);
    a->lines = v;
    a->cap = cap;
    a->first = 0;
    return 0;
}

void
activity_log_add(struct worker *w, int level, bool host, const char *msg,
                 size_t len)
{
    char text[LOG_LINE_MAX];
    struct activity *a;
    struct activity_follower *f, *next;

    if (limit == 0 || (a = activity_of(w)) == NULL)
        return;
    size_t n = log_escape(text, sizeof text, msg, len);
    struct activity_line *l = malloc(sizeof *l + n + 1);
    if (l == NULL)
        return;
    l->seq = ++a->seq;
    l->at_ms = timestamp_now_ms();
    l->level = level;
    l->host = host;
    l->len = n;
    memcpy(l->text, text, n + 1);
    /* Followers see every line, even one too long to keep. */
    for (f = LIST_FIRST(&a->followers); f; f = next) {
        next = LIST_NEXT(f, link);
        f->line(l, f->arg);
    }
    if (n > limit || (a->n == a->cap && ring_grow(a) != 0)) {
        free(l);
        return;
    }
    while (a->n > 0 && a->bytes + n > limit)
        ring_drop_oldest(a);
    a->lines[(a->first + a->n) % a->cap] = l;
    a->n++;
    a->bytes += n;
}

const char *
activity_label(const struct worker *w, char *buf, size_t len)
{
    if (strcmp(w->name, w->id) == 0)
        snprintf(buf, len, "%s", w->id);
    else
        snprintf(buf, len, "%s (%s)", w->name, w->id);
    return buf;
}

void
activity_log(struct worker *w, int level, const char *fmt, ...)
{
    char msg[LOG_LINE_MAX], label[160];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    log_write(level, "worker %s: %s", activity_label(w, label, sizeof label),
              msg);
    activity_log_add(w, level, false, msg,
                     (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
}

size_t
activity_log_count(const struct worker *w)
{
    return w->activity ? w->activity->n : 0;
}

const struct activity_line *
activity_log_at(const struct worker *w, size_t i)
{
    const struct activity *a = w->activity;

    if (a == NULL || i >= a->n)
        return NULL;
    return a->lines[(a->first + i) % a->cap];
}

/* ---- followers -------------------------------------------------------- */

struct activity_follower *
activity_follow(struct worker *w,
                void (*line)(const struct activity_line *l, void *arg),
                void *arg)
{
    struct activity *a = activity_of(w);
    struct activity_follower *f = a ? calloc(1, sizeof *f) : NULL;

    if (f == NULL)
        return NULL;
    f->line = line;
    f->arg = arg;
    LIST_INSERT_HEAD(&a->followers, f, link);
    return f;
}

void
activity_unfollow(struct activity_follower *f)
{
    if (f == NULL)
        return;
    LIST_REMOVE(f, link);
    free(f);
}

void
activity_free(struct worker *w)
{
    struct activity *a = w->activity;
    struct activity_follower *f;

    if (a == NULL)
        return;
    while ((f = LIST_FIRST(&a->followers)) != NULL) {
        LIST_REMOVE(f, link);
        f->line(NULL, f->arg);
        free(f);
    }
    while (a->n > 0)
        ring_drop_oldest(a);
    free(a->lines);
    error_clear(&a->error);
    free(a);
    w->activity = NULL;
}
