/*
 * grouplock.c — group locks with fencing tokens (grouplock.h, DESIGN §6).
 *
 * The lock of a group is one record in the state store (GroupLock of
 * records.proto), changed only by compare-and-set on the revision that was
 * read, so that masters sharing a store exclude each other: of two that
 * read the same revision, one write wins and the other conflicts.  The file
 * backend decides CAS when a write is submitted and answers reads from
 * submitted writes (store_file.c), so a read followed by a put in the same
 * loop turn is atomic with respect to everything else this process does;
 * another master (a shared backend) shows up as a CONFLICT.
 *
 * The record holds a block of tokens, and the lock is kept as a lease
 * across the group's consecutive holdings (grouplock_lease.c): a holding
 * the lease can serve takes its token without the store; one that it
 * cannot goes the way below.
 *
 * Within one master the acquisitions of a group wait in a FIFO (struct
 * gl_group): only its head works on the store, through the group's timer
 * (an immediate attempt, or a backoff wait), and the next one starts only
 * when the head gave up or its lock was released.  Local waiters therefore
 * never poll the store and never count retries against each other.
 *
 * Every request (acquire, note_write, release, the start-up freeing of
 * stale own locks) is a struct gl_req, which carries its names, its
 * callback and, once decided, its result.  A callback never runs inside
 * the function that was called: a result decided there is queued and
 * delivered from gl->done_ev on the next loop turn; results decided in a
 * timer or a store completion are delivered at once (they already run on
 * the loop).  The one exception is running out of memory for the request
 * itself, which is reported at once (there is nothing to queue).
 *
 * Shutdown.  The store runs the callbacks of writes still queued when it
 * is closed (store_close), possibly after grouplocks_free.  A request
 * whose put is in flight is therefore "orphaned" by grouplocks_free: its
 * user is told "shutting down" there, and its store completion only frees
 * it, touching nothing else.  grouplocks_free must be called before
 * store_close, on the loop thread, and not from one of its callbacks.
 *
 * Invariants:
 *   - a group's head is the only request of that group with a timer
 *     pending or a put in flight (head->busy); no head is busy while the
 *     group is held locally (g->held);
 *   - gl->ops lists exactly the non-orphaned requests with a put in flight;
 *   - a group is freed once it has no waiter, is not held, holds no
 *     lease (grouplock_lease.c) and no function of this file is working
 *     on it (g->busy == 0), so gl->groups holds only the groups in use;
 *   - a request is in at most one group FIFO and one of gl->ops or
 *     gl->done, and is freed exactly once: after its callback, or by its
 *     store completion when orphaned.
 */
#include "config.h"

#include "master/store/grouplock.h"

#include "lib/timestamp.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "lib/errbuf.h"
#include "master/core/log.h"
#include "master/store/grouplock_private.h"
#include "master/store/store.h"

static void on_group_timer(evutil_socket_t fd, short what, void *arg);

/* Reads the record of key: 0 with *have false (no record: free, token 0)
 * or true with *cur and its revision; -1 with a message. */
static int
record_read(struct grouplocks *gl, const char *key,
            struct grouplock_record *cur, bool *have, uint64_t *rev, char *msg,
            size_t msglen)
{
    char err[GL_MSG_MAX] = "";
    enum store_status s;
    uint8_t *value = NULL;
    size_t len = 0;
    int rc = -1;

    *have = false;
    *rev = 0;
    memset(cur, 0, sizeof *cur);
    s = store_get(gl->st, key, &value, &len, rev, err, sizeof err);
    if (s == STORE_NOT_FOUND) {
        *rev = 0;
        rc = 0;
    } else if (s != STORE_OK) {
        errbuf_set(msg, msglen, "group lock %s: %s", key,
                   err[0] != '\0' ? err : store_status_name(s));
    } else if (grouplock_record_decode(value, len, cur, err, sizeof err) != 0) {
        errbuf_set(msg, msglen, "group lock %s: %s", key, err);
    } else {
        *have = true;
        rc = 0;
    }
    free(value);
    return rc;
}

/* ---- requests --------------------------------------------------------- */

static int64_t
realtime_ms(void *arg)
{
    struct timespec ts;

    (void)arg;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
grouplock_now(const struct grouplocks *gl)
{
    return gl->now_ms(gl->now_arg);
}

/* A new request, or NULL when out of memory, in which case cb has been
 * told (the one callback that runs inside the called function: there is
 * nothing left to queue it with). */
struct gl_req *
grouplock_req_new(struct grouplocks *gl, enum gl_kind kind, grouplock_cb cb,
                  void *arg)
{
    struct gl_req *r = calloc(1, sizeof *r);

    if (r == NULL) {
        log_err("group locks: out of memory");
        if (cb != NULL)
            cb(GROUPLOCK_ERROR, 0, "group lock: out of memory", arg);
        return NULL;
    }
    r->gl = gl;
    r->kind = kind;
    r->cb = cb;
    r->arg = arg;
    r->tenant = r->group = r->names; /* "" until named */
    r->start_ms = timestamp_mono_ms();
    return r;
}

/* Copies the names of r's key (which holds both, so they fit). */
static void
req_set_names(struct gl_req *r, const char *tenant, size_t tlen,
              const char *group, size_t glen)
{
    memcpy(r->names, tenant, tlen);
    r->names[tlen] = '\0';
    memcpy(r->names + tlen + 1, group, glen);
    r->names[tlen + 1 + glen] = '\0';
    r->tenant = r->names;
    r->group = r->names + tlen + 1;
}

/* Fills r's key and names; -1 when they make no key. */
static int
req_names(struct gl_req *r, const char *tenant, const char *group)
{
    if (grouplock_key(tenant, group, r->key, sizeof r->key) != 0) {
        errbuf_set(r->message, sizeof r->message,
                   "group lock: tenant \"%.64s\" and group \"%.64s\" make no "
                   "store key (one segment each of [A-Za-z0-9._-])",
                   tenant != NULL ? tenant : "(null)",
                   group != NULL ? group : "(null)");
        return -1;
    }
    req_set_names(r, tenant, strlen(tenant), group, strlen(group));
    return 0;
}

static void
req_set_result(struct gl_req *r, enum grouplock_status status, uint64_t token,
               const char *message)
{
    r->status = status;
    r->token = token;
    if (message != r->message)
        snprintf(r->message, sizeof r->message, "%s",
                 message != NULL ? message : "");
}

/* Tells r's user its result and frees r (unless orphaned: its store
 * completion will). */
static void
req_deliver(struct gl_req *r)
{
    struct grouplocks *gl = r->gl;

    if (r->kind == GL_REQ_ACQUIRE) {
        int64_t waited = timestamp_mono_ms() - r->start_ms;

        gl->stats.waits++;
        gl->stats.wait_ms_total += waited > 0 ? (uint64_t)waited : 0;
        if (r->status == GROUPLOCK_CONTENTION)
            gl->stats.contention++;
    }
    if (r->cb != NULL)
        r->cb(r->status, r->status == GROUPLOCK_OK ? r->token : 0,
              r->message[0] != '\0' ? r->message : NULL, r->arg);
    r->cb = NULL;
    if (!r->orphaned)
        free(r);
}

/* Completes r now (we run on the loop, not inside an API call). */
static void
req_finish(struct gl_req *r, enum grouplock_status status, uint64_t token,
           const char *message)
{
    req_set_result(r, status, token, message);
    req_deliver(r);
}

/* Completes r on the next loop turn: for results decided inside an API
 * call. */
void
grouplock_req_defer(struct gl_req *r, enum grouplock_status status,
                    uint64_t token, const char *fmt, ...)
{
    struct grouplocks *gl = r->gl;
    va_list ap;

    r->status = status;
    r->token = token;
    if (fmt != NULL) {
        va_start(ap, fmt);
        vsnprintf(r->message, sizeof r->message, fmt, ap);
        va_end(ap);
    }
    r->dnext = NULL;
    *gl->done_tail = r;
    gl->done_tail = &r->dnext;
    /* event_active allocates nothing, so this cannot fail. */
    event_active(gl->done_ev, EV_TIMEOUT, 0);
}

static void
on_done(evutil_socket_t fd, short what, void *arg)
{
    struct grouplocks *gl = arg;
    struct gl_req *r;

    (void)fd;
    (void)what;
    /* One at a time: a callback may queue more, which this loop also
     * delivers. */
    while ((r = gl->done) != NULL) {
        gl->done = r->dnext;
        if (gl->done == NULL)
            gl->done_tail = &gl->done;
        req_deliver(r);
    }
}

static void
ops_link(struct grouplocks *gl, struct gl_req *r)
{
    r->oprev = NULL;
    r->onext = gl->ops;
    if (gl->ops != NULL)
        gl->ops->oprev = r;
    gl->ops = r;
}

static void
ops_unlink(struct grouplocks *gl, struct gl_req *r)
{
    if (r->oprev != NULL)
        r->oprev->onext = r->onext;
    else
        gl->ops = r->onext;
    if (r->onext != NULL)
        r->onext->oprev = r->oprev;
    r->oprev = r->onext = NULL;
}

static void on_put(enum store_status status, uint64_t revision,
                   const char *message, void *arg);

/* Submits next for r's key under compare-and-set on expected.  -1 with
 * the cause in r->message. */
int
grouplock_req_put(struct gl_req *r, const struct grouplock_record *next,
                  uint64_t expected)
{
    struct grouplocks *gl = r->gl;
    uint8_t *buf;
    size_t len;
    int rc;

    if (grouplock_record_encode(next, &buf, &len) != 0) {
        errbuf_set(r->message, sizeof r->message,
                   "group lock %s: cannot encode the record (out of memory)",
                   r->key);
        return -1;
    }
    ops_link(gl, r);
    rc = store_put(gl->st, r->key, buf, len, expected, on_put, r);
    free(buf);
    if (rc != 0) {
        ops_unlink(gl, r);
        errbuf_set(r->message, sizeof r->message,
                   "group lock %s: the store refused the write", r->key);
    }
    return rc;
}

static void
hook(struct grouplocks *gl, const struct gl_req *r, const char *what,
     uint64_t token)
{
    if (gl->hook != NULL)
        gl->hook(r->tenant, r->group, what, token, gl->hook_arg);
}

/* ---- groups ----------------------------------------------------------- */

static struct gl_group *
group_find(struct grouplocks *gl, const char *key)
{
    struct gl_group *g;

    for (g = gl->groups; g != NULL; g = g->next)
        if (strcmp(g->key, key) == 0)
            return g;
    return NULL;
}

static struct gl_group *
group_get(struct grouplocks *gl, const char *key)
{
    struct gl_group *g = group_find(gl, key);

    if (g != NULL)
        return g;
    g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    g->timer = evtimer_new(gl->base, on_group_timer, g);
    g->idle = evtimer_new(gl->base, grouplock_lease_on_idle, g);
    if (g->timer == NULL || g->idle == NULL) {
        if (g->timer != NULL)
            event_free(g->timer);
        if (g->idle != NULL)
            event_free(g->idle);
        free(g);
        return NULL;
    }
    g->gl = gl;
    memcpy(g->key, key, strlen(key) + 1);
    g->tail = &g->head;
    g->next = gl->groups;
    gl->groups = g;
    return g;
}

static void
group_free(struct gl_group *g)
{
    struct gl_group **pp;

    for (pp = &g->gl->groups; *pp != NULL; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    event_free(g->timer);
    event_free(g->idle);
    free(g);
}

struct gl_req *
grouplock_group_pop(struct gl_group *g)
{
    struct gl_req *r = g->head;

    g->head = r->qnext;
    if (g->head == NULL)
        g->tail = &g->head;
    r->qnext = NULL;
    r->busy = false;
    r->g = NULL;
    return r;
}

/* Arms ev to fire in ms.  -1 when libevent cannot (out of memory). */
static int
timer_arm(struct event *ev, uint64_t ms)
{
    struct timeval tv = {
        .tv_sec = (time_t)(ms / 1000),
        .tv_usec = (suseconds_t)(ms % 1000) * 1000,
    };

    return evtimer_add(ev, &tv);
}

/* Schedules the head's next attempt after delay_ms.  -1 when libevent
 * cannot (out of memory). */
static int
group_schedule(struct gl_group *g, uint64_t delay_ms)
{
    g->head->busy = true;
    return timer_arm(g->timer, delay_ms);
}

/* Starts the head when the lock is not held here and it is idle; frees
 * the group when nothing uses it.  Safe to call from anywhere: it only
 * schedules (a failure to schedule is delivered on the next turn). */
void
grouplock_group_settle(struct gl_group *g)
{
    while (!g->held && g->head != NULL && !g->head->busy &&
           !grouplock_lease_hand_over(g) && group_schedule(g, 0) != 0) {
        struct gl_req *r = grouplock_group_pop(g);

        grouplock_req_defer(
            r, GROUPLOCK_ERROR, 0,
            "group %s/%s: cannot schedule the lock's acquisition (out "
            "of memory)",
            r->tenant, r->group);
    }
    if (g->leased && !g->held && g->head == NULL &&
        !evtimer_pending(g->idle, NULL) &&
        timer_arm(g->idle, g->gl->policy.lease_idle_ms) != 0)
        grouplock_lease_end(g); /* out of memory: no idle lease then */
    if (g->busy == 0 && !g->held && !g->leased && g->head == NULL)
        group_free(g);
}

/* The head is done: tell its user (we run on the loop), then let the
 * next one start unless the lock is now held here. */
void
grouplock_group_finish(struct gl_group *g, enum grouplock_status status,
                       uint64_t token, const char *message)
{
    struct gl_req *r = grouplock_group_pop(g);

    if (status == GROUPLOCK_OK) {
        g->held = true;
        g->token = token;
    }
    req_finish(r, status, token, message);
}

/* retry_base_ms × 2^(n−1), saturated. */
static uint64_t
backoff_ms(uint64_t base, unsigned n)
{
    unsigned shift = n > 0 ? n - 1 : 0;

    if (base == 0)
        return 0;
    if (shift >= 63 || base > (GL_BACKOFF_MAX_MS >> shift))
        return GL_BACKOFF_MAX_MS;
    return base << shift;
}

/* The head's attempt: read, decide, then write or wait. */
static void
acquire_attempt(struct gl_group *g)
{
    struct gl_req *r = g->head;
    struct grouplocks *gl = r->gl;
    struct grouplock_record cur, next;
    char msg[GL_MSG_MAX];
    enum grouplock_decision d;
    uint64_t rev, age;
    int64_t now;
    bool have;

    if (record_read(gl, r->key, &cur, &have, &rev, msg, sizeof msg) != 0) {
        grouplock_group_finish(g, GROUPLOCK_ERROR, 0, msg);
        return;
    }
    now = grouplock_now(gl);
    if (g->leased) {
        if (have && strcmp(cur.holder, gl->holder) == 0 &&
            cur.token == g->hwm) {
            grouplock_lease_extend(g, &cur, rev, now);
            return;
        }
        log_warning("group %s/%s: the lease under tokens up to %" PRIu64
                    " is lost: the lock is %s%s under token %" PRIu64,
                    r->tenant, r->group, g->hwm,
                    cur.holder[0] != '\0' ? "held by " : "free", cur.holder,
                    cur.token);
        g->leased = false;
        g->written = false;
    }
    d = grouplock_decide(have ? &cur : NULL, now, gl->policy.max_age_ms);
    age = grouplock_record_age(&cur, now);
    switch (d) {
    case GROUPLOCK_ACQUIRE:
    case GROUPLOCK_STEAL:
        if (cur.token > UINT64_MAX - grouplock_token_block(gl)) {
            errbuf_set(msg, sizeof msg,
                       "group %s/%s: the lock's tokens are exhausted",
                       r->tenant, r->group);
            grouplock_group_finish(g, GROUPLOCK_ERROR, 0, msg);
            return;
        }
        memset(&next, 0, sizeof next);
        memcpy(next.holder, gl->holder, sizeof next.holder);
        /* A block of tokens: cur.token + 1 now, the rest handed over
         * locally while the lease lasts; none is used before the put
         * that makes the block's high-water mark durable completes. */
        next.token = cur.token + grouplock_token_block(gl);
        next.acquired_ms = now;
        next.last_write_token = cur.last_write_token;
        r->token = cur.token + 1;
        r->hwm = next.token;
        r->at_ms = now;
        r->extend = false;
        r->stolen = d == GROUPLOCK_STEAL;
        if (r->stolen)
            log_notice("group %s/%s: taking the lock from %s (token %" PRIu64
                       ", %" PRIu64 " ms old, no write under it)",
                       r->tenant, r->group, cur.holder, cur.token, age);
        if (grouplock_req_put(r, &next, rev) != 0)
            grouplock_group_finish(g, GROUPLOCK_ERROR, 0, r->message);
        return;
    case GROUPLOCK_HELD:
    case GROUPLOCK_ABORT_STEAL:
        break;
    }
    if (r->retries >= gl->policy.max_retries) {
        if (d == GROUPLOCK_HELD)
            errbuf_set(msg, sizeof msg,
                       "group %s/%s: the lock is held by %s under token "
                       "%" PRIu64 " for %" PRIu64 " ms; gave up after %u "
                       "retries",
                       r->tenant, r->group, cur.holder, cur.token, age,
                       r->retries);
        else
            errbuf_set(msg, sizeof msg,
                       "group %s/%s: the lock is held by %s under token "
                       "%" PRIu64 " for %" PRIu64 " ms, past the max age of "
                       "%" PRIu64 " ms, but it was written under its token "
                       "(a slow holder), so it is not stolen; gave up after "
                       "%u retries",
                       r->tenant, r->group, cur.holder, cur.token, age,
                       gl->policy.max_age_ms, r->retries);
        grouplock_group_finish(g, GROUPLOCK_CONTENTION, 0, msg);
        return;
    }
    r->retries++;
    gl->stats.retries++;
    if (group_schedule(g, backoff_ms(gl->policy.retry_base_ms, r->retries)) !=
        0) {
        errbuf_set(msg, sizeof msg,
                   "group %s/%s: cannot schedule a retry (out of memory)",
                   r->tenant, r->group);
        grouplock_group_finish(g, GROUPLOCK_ERROR, 0, msg);
    }
}

static void
on_group_timer(evutil_socket_t fd, short what, void *arg)
{
    struct gl_group *g = arg;

    (void)fd;
    (void)what;
    g->busy++;
    acquire_attempt(g);
    g->busy--;
    grouplock_group_settle(g);
}

/* The head's put completed. */
static void
acquire_done(struct gl_req *r, enum store_status status, const char *message)
{
    struct gl_group *g = r->g;
    struct grouplocks *gl = r->gl;
    char msg[GL_MSG_MAX];

    g->busy++;
    if (status == STORE_OK) {
        if (r->extend) {
            gl->stats.renewals++;
        } else {
            if (r->stolen)
                gl->stats.stolen++;
            else
                gl->stats.acquired++;
            hook(gl, r, r->stolen ? "stolen" : "acquired", r->token);
        }
        gl->stats.tokens++;
        g->leased = true;
        g->written = r->extend && r->written;
        g->hwm = r->hwm;
        g->renewed_ms = r->at_ms;
        grouplock_group_finish(g, GROUPLOCK_OK, r->token, NULL);
    } else if (status == STORE_CONFLICT) {
        /* Another master wrote between our read and our write: read
         * again at once, which uses up one retry. */
        if (r->retries >= gl->policy.max_retries) {
            errbuf_set(msg, sizeof msg,
                       "group %s/%s: the lock record changed under every "
                       "attempt; gave up after %u retries (%s)",
                       r->tenant, r->group, r->retries,
                       message != NULL ? message : "conflict");
            grouplock_group_finish(g, GROUPLOCK_CONTENTION, 0, msg);
        } else {
            r->retries++;
            r->busy = false; /* grouplock_group_settle schedules it again */
        }
    } else {
        errbuf_set(msg, sizeof msg, "group lock %s: %s", r->key,
                   message != NULL ? message : store_status_name(status));
        grouplock_group_finish(g, GROUPLOCK_ERROR, 0, msg);
    }
    g->busy--;
    grouplock_group_settle(g);
}

/* ---- note_write and release ------------------------------------------ */

/* A write under r's lease is durable: later writes under the same lease
 * need no store access (no other master may steal a lease written
 * under). */
static void
note_written(struct gl_req *r)
{
    struct gl_group *g = group_find(r->gl, r->key);

    if (g != NULL && g->leased && g->hwm == r->hwm)
        g->written = true;
}

/* Checks r's token against the record and writes what follows; the result
 * of a decision made here is deferred (we may be inside an API call). */
void
grouplock_req_check(struct gl_req *r)
{
    struct grouplocks *gl = r->gl;
    struct grouplock_record cur, next;
    char msg[GL_MSG_MAX];
    uint64_t rev;
    bool have;

    if (record_read(gl, r->key, &cur, &have, &rev, msg, sizeof msg) != 0) {
        grouplock_req_defer(r, GROUPLOCK_ERROR, 0, "%s", msg);
        return;
    }
    if (!r->ours || !have || strcmp(cur.holder, gl->holder) != 0 ||
        cur.token != r->hwm) {
        if (r->kind == GL_REQ_NOTE) {
            gl->stats.stale_writes++;
            log_warning("group %s/%s: a write under token %" PRIu64
                        " refused: the lock is %s%s under token %" PRIu64,
                        r->tenant, r->group, r->token,
                        cur.holder[0] != '\0' ? "held by " : "free", cur.holder,
                        cur.token);
        }
        grouplock_req_defer(r, GROUPLOCK_STALE, 0,
                            "group %s/%s: token %" PRIu64 " is no longer this "
                            "master's: the lock is %s%s under token %" PRIu64,
                            r->tenant, r->group, r->token,
                            cur.holder[0] != '\0' ? "held by " : "free",
                            cur.holder, cur.token);
        return;
    }
    next = cur;
    if (r->kind == GL_REQ_NOTE) {
        if (cur.last_write_token == cur.token) {
            /* Already recorded: a steal is already aborted. */
            note_written(r);
            grouplock_req_defer(r, GROUPLOCK_OK, r->token, NULL);
            return;
        }
        /* The whole block: the lease is written under. */
        next.last_write_token = cur.token;
    } else {
        next.holder[0] = '\0';
        next.acquired_ms = 0;
    }
    if (grouplock_req_put(r, &next, rev) != 0)
        grouplock_req_defer(r, GROUPLOCK_ERROR, 0, NULL);
}

/* A note_write's or release's put completed. */
static void
check_done(struct gl_req *r, enum store_status status, const char *message)
{
    struct grouplocks *gl = r->gl;
    char msg[GL_MSG_MAX];

    if (status == STORE_OK) {
        if (r->kind == GL_REQ_RELEASE)
            hook(gl, r, "released", r->token);
        else
            note_written(r);
        req_finish(r, GROUPLOCK_OK, r->token, NULL);
    } else if (status == STORE_CONFLICT && r->conflicts < GL_CONFLICTS_MAX) {
        /* The record changed since we read it (another master): decide
         * again on what it is now. */
        r->conflicts++;
        grouplock_req_check(r);
    } else {
        errbuf_set(msg, sizeof msg, "group lock %s: %s", r->key,
                   message != NULL ? message : store_status_name(status));
        req_finish(r, GROUPLOCK_ERROR, 0, msg);
    }
}

static void
free_stale_done(struct gl_req *r, enum store_status status, const char *message)
{
    if (status == STORE_OK) {
        log_info("group %s/%s: freed the lock left by an earlier run "
                 "(token %" PRIu64 ")",
                 r->tenant, r->group, r->token);
        hook(r->gl, r, "released", r->token);
    } else {
        log_warning("group %s/%s: the lock left by an earlier run is not "
                    "freed: %s",
                    r->tenant, r->group,
                    message != NULL ? message : store_status_name(status));
    }
    free(r);
}

static void
on_put(enum store_status status, uint64_t revision, const char *message,
       void *arg)
{
    struct gl_req *r = arg;

    (void)revision;
    if (r->orphaned) {
        /* grouplocks_free already told its user "shutting down". */
        free(r);
        return;
    }
    ops_unlink(r->gl, r);
    switch (r->kind) {
    case GL_REQ_ACQUIRE:
        acquire_done(r, status, message);
        break;
    case GL_REQ_NOTE:
    case GL_REQ_RELEASE:
        check_done(r, status, message);
        break;
    case GL_REQ_FREE_STALE:
        free_stale_done(r, status, message);
        break;
    }
}

/* ---- the API ---------------------------------------------------------- */

struct grouplocks *
grouplocks_new(struct store *st, struct event_base *base, const char *holder,
               const struct grouplock_policy *policy)
{
    struct grouplocks *gl;

    if (st == NULL || base == NULL || holder == NULL || policy == NULL)
        return NULL;
    if (holder[0] == '\0' || strlen(holder) >= GROUPLOCK_HOLDER_MAX) {
        log_err("group locks: the holder \"%s\" is empty or longer than %d "
                "bytes",
                holder, GROUPLOCK_HOLDER_MAX - 1);
        return NULL;
    }
    gl = calloc(1, sizeof *gl);
    if (gl == NULL)
        return NULL;
    gl->done_ev = event_new(base, -1, 0, on_done, gl);
    if (gl->done_ev == NULL) {
        free(gl);
        return NULL;
    }
    gl->st = st;
    gl->base = base;
    memcpy(gl->holder, holder, strlen(holder) + 1);
    gl->policy = *policy;
    gl->now_ms = realtime_ms;
    gl->done_tail = &gl->done;
    return gl;
}

void
grouplocks_free(struct grouplocks *gl)
{
    struct gl_req *r, *rnext;
    struct gl_group *g;

    if (gl == NULL)
        return;
    /* From here on every call completes with "shutting down" and touches
     * no group. */
    gl->closing = true;
    /* Idle leases are freed in the store (their puts orphaned below); a
     * lock held by a waiter stays held (grouplocks_release_stale_own). */
    for (g = gl->groups; g != NULL; g = g->next)
        if (!g->held)
            grouplock_lease_end(g);
    /* Puts in flight: their completions (run by the store, even after
     * this) only free them. */
    for (r = gl->ops; r != NULL; r = rnext) {
        rnext = r->onext;
        r->oprev = r->onext = NULL;
        r->orphaned = true;
        if (r->kind == GL_REQ_NOTE || r->kind == GL_REQ_RELEASE)
            grouplock_req_defer(r, GROUPLOCK_ERROR, 0,
                                "group lock: shutting down");
    }
    gl->ops = NULL;
    while ((g = gl->groups) != NULL) {
        while (g->head != NULL) {
            r = grouplock_group_pop(g);
            grouplock_req_defer(r, GROUPLOCK_ERROR, 0,
                                "group lock: shutting down");
        }
        gl->groups = g->next;
        event_free(g->timer);
        event_free(g->idle);
        free(g);
    }
    /* Deliver everything decided, including what the callbacks ask for
     * (which closing answers at once, so this ends). */
    on_done(-1, 0, gl);
    event_free(gl->done_ev);
    free(gl);
}

void
grouplocks_set_change_hook(struct grouplocks *gl, grouplock_change_cb cb,
                           void *arg)
{
    gl->hook = cb;
    gl->hook_arg = arg;
}

void
grouplocks_set_clock(struct grouplocks *gl, int64_t (*now_ms)(void *),
                     void *arg)
{
    gl->now_ms = now_ms != NULL ? now_ms : realtime_ms;
    gl->now_arg = now_ms != NULL ? arg : NULL;
}

/* The request of an API call, named; NULL when it is already answered
 * (out of memory, shutting down, names that make no key). */
static struct gl_req *
req_start(struct grouplocks *gl, enum gl_kind kind, const char *tenant,
          const char *group, uint64_t token, grouplock_cb cb, void *arg)
{
    struct gl_req *r = grouplock_req_new(gl, kind, cb, arg);

    if (r == NULL)
        return NULL;
    r->token = token;
    if (gl->closing) {
        grouplock_req_defer(r, GROUPLOCK_ERROR, 0, "group lock: shutting down");
        return NULL;
    }
    if (req_names(r, tenant, group) != 0) {
        grouplock_req_defer(r, GROUPLOCK_ERROR, 0, NULL);
        return NULL;
    }
    return r;
}

void
grouplocks_acquire(struct grouplocks *gl, const char *tenant, const char *group,
                   grouplock_cb cb, void *arg)
{
    struct gl_req *r = req_start(gl, GL_REQ_ACQUIRE, tenant, group, 0, cb, arg);
    struct gl_group *g;

    if (r == NULL)
        return;
    g = group_get(gl, r->key);
    if (g == NULL) {
        grouplock_req_defer(r, GROUPLOCK_ERROR, 0, "group %s/%s: out of memory",
                            r->tenant, r->group);
        return;
    }
    r->g = g;
    *g->tail = r;
    g->tail = &r->qnext;
    grouplock_group_settle(g);
}

int
grouplocks_share(struct grouplocks *gl, const char *tenant, const char *group,
                 uint64_t token)
{
    char key[STORE_KEY_MAX + 1];
    struct gl_group *g;

    if (gl->closing || gl->policy.lease_idle_ms == 0 ||
        grouplock_key(tenant, group, key, sizeof key) != 0 ||
        (g = group_find(gl, key)) == NULL || !g->held || g->token != token ||
        !grouplock_lease_fresh(g))
        return -1;
    g->shares++;
    gl->stats.shared++;
    return 0;
}

void
grouplocks_note_write(struct grouplocks *gl, const char *tenant,
                      const char *group, uint64_t token, grouplock_cb cb,
                      void *arg)
{
    struct gl_req *r =
        req_start(gl, GL_REQ_NOTE, tenant, group, token, cb, arg);
    struct gl_group *g;

    if (r == NULL)
        return;
    g = group_find(gl, r->key);
    r->ours = g != NULL && g->leased && g->held && g->token == token;
    r->hwm = r->ours ? g->hwm : 0;
    if (r->ours && g->written)
        grouplock_req_defer(r, GROUPLOCK_OK, token, NULL); /* durable already */
    else
        grouplock_req_check(r);
}

void
grouplocks_release(struct grouplocks *gl, const char *tenant, const char *group,
                   uint64_t token, grouplock_cb cb, void *arg)
{
    struct gl_req *r =
        req_start(gl, GL_REQ_RELEASE, tenant, group, token, cb, arg);
    struct gl_group *g;

    if (r == NULL)
        return;
    /* The store write is submitted below, before the next local waiter's
     * first read can run (it waits for the group's timer): since the store
     * decides CAS at submission and reads see submitted writes, that read
     * already finds the lock free, and its put is decided after ours. */
    g = group_find(gl, r->key);
    if (g != NULL && g->held && g->token == token && g->shares > 0) {
        g->shares--; /* one of the holding's events: it stays held */
        grouplock_req_defer(r, GROUPLOCK_OK, token, NULL);
        return;
    }
    if (g != NULL && g->held && g->token == token) {
        g->held = false;
        r->ours = g->leased;
        r->hwm = g->hwm;
        if (g->leased && gl->policy.lease_idle_ms > 0) {
            /* The lease stays: the next waiter (now or within
             * lease_idle_ms) takes the next token. */
            grouplock_group_settle(g);
            grouplock_req_defer(r, GROUPLOCK_OK, token, NULL);
            return;
        }
        g->leased = false;
        g->written = false;
        grouplock_group_settle(g);
    }
    grouplock_req_check(r);
}

struct stale_scan {
    struct grouplocks *gl;
    const char *instance;
    size_t ilen;
    unsigned freed;
};

/* "workmanager/groups/<tenant>/<group>/lock" into r's names; -1 when key
 * is not a lock's. */
int
grouplock_req_names_from_key(struct gl_req *r, const char *key)
{
    const char *t = key + strlen(GL_PREFIX), *slash, *end;
    size_t klen = strlen(key), slen = strlen(GL_SUFFIX);

    if (klen <= strlen(GL_PREFIX) + slen ||
        strcmp(key + klen - slen, GL_SUFFIX) != 0)
        return -1;
    end = key + klen - slen;
    slash = memchr(t, '/', (size_t)(end - t));
    if (slash == NULL || slash == t || slash + 1 >= end ||
        memchr(slash + 1, '/', (size_t)(end - slash - 1)) != NULL)
        return -1;
    if (klen >= sizeof r->key)
        return -1;
    memcpy(r->key, key, klen + 1);
    req_set_names(r, t, (size_t)(slash - t), slash + 1,
                  (size_t)(end - slash - 1));
    return 0;
}

static int
on_stale_entry(const char *key, enum store_status status, const uint8_t *value,
               size_t len, uint64_t revision, const char *message, void *arg)
{
    struct stale_scan *sc = arg;
    struct grouplocks *gl = sc->gl;
    struct grouplock_record cur, next;
    char err[GL_MSG_MAX];
    struct gl_req *r;

    if (status != STORE_OK) {
        log_warning("group locks: %s: %s", key,
                    message != NULL ? message : store_status_name(status));
        return 0;
    }
    if (strlen(key) <= strlen(GL_SUFFIX) ||
        strcmp(key + strlen(key) - strlen(GL_SUFFIX), GL_SUFFIX) != 0)
        return 0; /* not a lock */
    if (grouplock_record_decode(value, len, &cur, err, sizeof err) != 0) {
        log_warning("group locks: %s: %s", key, err);
        return 0;
    }
    if (strncmp(cur.holder, sc->instance, sc->ilen) != 0 ||
        cur.holder[sc->ilen] != '/' || strcmp(cur.holder, gl->holder) == 0)
        return 0;
    r = grouplock_req_new(gl, GL_REQ_FREE_STALE, NULL, NULL);
    if (r == NULL)
        return 1; /* out of memory: stop */
    if (grouplock_req_names_from_key(r, key) != 0) {
        log_warning("group locks: %s is not a lock's key", key);
        free(r);
        return 0;
    }
    r->token = cur.token;
    next = cur;
    next.holder[0] = '\0';
    next.acquired_ms = 0;
    if (grouplock_req_put(r, &next, revision) != 0) {
        log_warning("%s", r->message);
        free(r);
        return 0;
    }
    sc->freed++;
    return 0;
}

unsigned
grouplocks_release_stale_own(struct grouplocks *gl, const char *instance)
{
    struct stale_scan sc = {
        .gl = gl,
        .instance = instance,
        .ilen = instance != NULL ? strlen(instance) : 0,
    };
    char err[GL_MSG_MAX] = "";
    enum store_status s;

    if (gl->closing || instance == NULL || instance[0] == '\0')
        return 0;
    s = store_list(gl->st, GL_PREFIX, on_stale_entry, &sc, err, sizeof err);
    if (s != STORE_OK)
        log_warning("group locks: listing %s: %s", GL_PREFIX,
                    err[0] != '\0' ? err : store_status_name(s));
    return sc.freed;
}

void
grouplocks_stats(const struct grouplocks *gl, struct grouplock_stats *out)
{
    *out = gl->stats;
}
