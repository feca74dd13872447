/*
 * broker_nats.c — the `nats` broker backend (broker = nats, DESIGN §9):
 * the topics' events in one NATS JetStream stream, each durable
 * subscription a durable pull consumer that every instance of the daemon
 * binds, so that an event is processed once per subscription across all
 * of them (broker_nats_private.h has the names and says which file does
 * what).
 *
 * Open connects (nats_link.h: an unreachable server fails the open with a
 * message naming the URL), creates the stream or updates its settings,
 * and subscribes the instance's inbox.  Once open, the broker keeps
 * serving while NATS is away: publishes fail at once (EIO, and
 * broker_health() says "not connected": the API answers 503
 * broker_unavailable, never a false 202), deliveries pause (the storage
 * hook tells the flow), and libnats reconnects by itself; on its return
 * every subscription pulls again.
 *
 * What differs from the embedded backend (broker.h):
 *   - a publish is durable once JetStream's PubAck says so (replicated
 *     when the stream has replicas); the event's id is its Nats-Msg-Id,
 *     so a publish retried within two minutes is stored once;
 *   - broker_admit() accepts: the stream's limits refuse instead, and the
 *     backlog quotas (broker_tenant_backlog()) count nothing;
 *   - a stopped subscription (BROKER_SUB_CLOSED) keeps its consumer, which
 *     keeps receiving events: they wait for the worker's start;
 *   - a delivery's count is JetStream's: a delivery released by the flow
 *     is held here (told in progress) and keeps its count, but one that
 *     was pulled and not handed on before a crash counts once more;
 *   - broker_recovered() deletes the consumers no worker names (only the
 *     recovery lease's holder calls it, and only for consumers made
 *     before this broker opened: another instance may be making one for
 *     a worker this one has not seen yet); broker_purge() drops nothing
 *     (a deleted worker's consumer goes with its unsubscribe);
 *   - an event delivered nats_max_deliver times without a settlement
 *     (instances that died holding it) is no longer delivered: the
 *     max-deliveries advisory, taken by one instance (a queue group),
 *     hands the stored event to the exhausted hook, which dead-letters
 *     it.  The flow dead-letters failing deliveries itself before that,
 *     after max_redeliveries, counting JetStream's deliveries.
 */
#include "config.h"

#include "master/broker/broker_nats_private.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "lib/base64.h"
#include "lib/errbuf.h"
#include "lib/timestamp.h"
#include "lib/uuid.h"
#include "master/broker/event_bundle.h"
#include "master/core/log.h"
#include "master/core/nats_link.h"

static const struct broker_ops broker_nats_ops;

/* ---- the connection's state ------------------------------------------ */

/* The server a connection is on, for the log. */
static const char *
server_of(natsConnection *nc, char *buf, size_t size)
{
    if (natsConnection_GetConnectedUrl(nc, buf, size) != NATS_OK ||
        buf[0] == '\0')
        snprintf(buf, size, "(none)");
    return buf;
}

/* How many times libnats has reconnected nc (0 when it cannot say). */
static uint64_t
reconnects_of(struct broker_nats *b, natsConnection *nc)
{
    uint64_t n = 0;

    if (b->stats != NULL && natsConnection_GetStats(nc, b->stats) == NATS_OK)
        natsStatistics_GetCounts(b->stats, NULL, NULL, NULL, NULL, &n);
    return n;
}

/* bulk reconnects on its own (libnats keeps what is sent meanwhile):
 * only logged, so that an operator sees why acknowledgements and outputs
 * wait, and where they go. */
static void
bulk_watch(struct broker_nats *b)
{
    bool up = natsConnection_Status(b->bulk) == NATS_CONN_STATUS_CONNECTED;
    uint64_t n = reconnects_of(b, b->bulk);
    bool moved = n != b->bulk_reconnects;
    char url[256];

    b->bulk_reconnects = n;
    if (up == b->bulk_connected && !(up && moved))
        return;
    b->bulk_connected = up;
    if (up)
        log_notice("broker: the connection for acknowledgements and outputs "
                   "is up again, at %s",
                   server_of(b->bulk, url, sizeof url));
    else
        log_warning("broker: the connection for acknowledgements and "
                    "outputs to NATS at %s is lost (reconnecting; what it "
                    "carries waits)",
                    b->url);
}

/* nc is connected again (how: for the log): counted, said, and what was
 * asked of the server it left is asked again. */
static void
back_again(struct broker_nats *b, const char *how)
{
    char url[256];

    b->health.recoveries++;
    log_notice("broker: connected to NATS at %s again (server %s)%s", b->url,
               server_of(b->nc, url, sizeof url), how);
    bn_sub_reconnected(b);
}

/* Once a tick: both connections' state.  In a cluster libnats reconnects
 * to the next server at once, often between two ticks: that shows only in
 * its count, and is handled as a reconnect all the same (nc's pulls at
 * the server it left are gone with it).  The count is compared only with
 * one read while nc was up with no change of state since (bn_connected(),
 * called on publishes too, handles the changes it sees itself). */
static void
watch(struct broker_nats *b)
{
    bool up = bn_connected(b);
    uint64_t n = reconnects_of(b, b->nc);
    bool missed = up && b->nc_counted && n != b->nc_reconnects;

    b->nc_reconnects = n;
    b->nc_counted = up;
    bulk_watch(b);
    if (!missed)
        return;
    b->health.failures++;
    back_again(b, ", after a disconnection shorter than a tick (100 ms)");
}

bool
bn_connected(struct broker_nats *b)
{
    bool up = natsConnection_Status(b->nc) == NATS_CONN_STATUS_CONNECTED;

    if (up == b->connected)
        return up;
    b->connected = up;
    b->nc_counted = false; /* watch() reads the count afresh */
    b->health.writable = up;
    if (!up) {
        b->health.error = EIO;
        b->health.since = (int64_t)time(NULL);
        b->health.failures++;
        snprintf(b->health.message, sizeof b->health.message,
                 "not connected to NATS at %s (reconnecting every 0.5 s)",
                 b->url);
        log_err("broker: %s", b->health.message);
    } else {
        b->health.error = 0;
        b->health.message[0] = '\0';
        back_again(b, "");
    }
    if (b->storage_cb)
        b->storage_cb(up, b->storage_arg);
    return up;
}

/* ---- libnats's threads → the loop ------------------------------------ */

/* On a libnats thread: queue m for the loop. */
static void
on_message(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *arg)
{
    struct broker_nats *b = arg;
    bool wake = false;

    (void)nc;
    (void)sub;
    pthread_mutex_lock(&b->mu);
    if (b->qn == b->qcap) {
        size_t cap = b->qcap ? b->qcap * 2 : 256;
        natsMsg **q = realloc(b->q, cap * sizeof *q);
        if (q == NULL) {
            pthread_mutex_unlock(&b->mu);
            natsMsg_Destroy(m); /* a pull or a PubAck times out */
            return;
        }
        b->q = q;
        b->qcap = cap;
    }
    wake = b->qn == 0;
    b->q[b->qn++] = m;
    pthread_mutex_unlock(&b->mu);
    if (wake) {
        uint64_t one = 1;
        ssize_t w = write(b->efd, &one, sizeof one);
        (void)w; /* a full counter wakes the loop all the same */
    }
}

/* ---- dead letters from the max-deliveries advisory ------------------- */

/* The stored message of stream sequence seq (an event or a bundle of
 * them), decoded, not checked: *tenant, *topic and *event malloc'd; -1
 * (logged) when it cannot be had. */
static int
stored_event(struct broker_nats *b, uint64_t seq, char **tenant, char **topic,
             uint8_t **event, size_t *len)
{
    char subj[256], body[64], t[256], p[1024];
    natsMsg *reply = NULL;
    json_t *root, *msg;
    const char *s, *d;
    int rc = -1;

    snprintf(subj, sizeof subj, "$JS.API.STREAM.MSG.GET.%s", b->stream);
    snprintf(body, sizeof body, "{\"seq\":%" PRIu64 "}", seq);
    if (natsConnection_RequestString(&reply, b->nc, subj, body, 5000) !=
        NATS_OK) {
        log_err("broker: event %" PRIu64 " of stream %s cannot be read "
                "(JetStream did not answer)",
                seq, b->stream);
        return -1;
    }
    root = json_loads(natsMsg_GetData(reply), 0, NULL);
    natsMsg_Destroy(reply);
    msg = json_object_get(root, "message");
    s = json_string_value(json_object_get(msg, "subject"));
    d = json_string_value(json_object_get(msg, "data"));
    if (s == NULL || d == NULL ||
        bn_subject_parse(b, s, t, sizeof t, p, sizeof p) != 0 ||
        base64_decode(d, strlen(d), event, len) != 0) {
        log_err("broker: event %" PRIu64 " of stream %s is not there any "
                "more, or not one of this system's",
                seq, b->stream);
    } else if ((*tenant = strdup(t)) == NULL || (*topic = strdup(p)) == NULL) {
        free(*tenant);
        free(*event);
    } else {
        rc = 0;
    }
    json_decref(root);
    return rc;
}

/* One exhausted event to the hook, once it passes the check. */
static void
exhaust_one(struct broker_nats *b, const char *tenant, const char *topic,
            const uint8_t *ev, size_t len, uint32_t times)
{
    b->st.exhausted++;
    if (b->verify && b->verify(ev, len) != 0)
        log_err("broker: an exhausted event of %s/%s fails the check: "
                "dropped",
                tenant, topic);
    else if (b->exhausted_cb)
        b->exhausted_cb(tenant, topic, ev, len, times, b->exhausted_arg);
}

/* JetStream stopped delivering an event to a consumer (MaxDeliver
 * deliveries, none settled): it goes to the exhausted hook (the flow's
 * dead letters).  One instance of the queue group gets each advisory. */
static void
on_advisory(struct broker_nats *b, natsMsg *m)
{
    json_t *root = json_loads(natsMsg_GetData(m), 0, NULL);
    json_int_t seq = json_integer_value(json_object_get(root, "stream_seq"));
    json_int_t n = json_integer_value(json_object_get(root, "deliveries"));
    const char *consumer = json_string_value(json_object_get(root, "consumer"));
    char *tenant = NULL, *topic = NULL;
    uint8_t *event = NULL;
    size_t len = 0;

    if (seq <= 0 || consumer == NULL ||
        strncmp(consumer, b->prefix, strlen(b->prefix)) != 0) {
        json_decref(root);
        return;
    }
    log_warning("broker: event %" PRId64 " of stream %s was delivered %" PRId64
                " times to consumer %s without being settled: dead-lettered",
                (int64_t)seq, b->stream, (int64_t)n, consumer);
    if (stored_event(b, (uint64_t)seq, &tenant, &topic, &event, &len) != 0) {
        b->st.exhausted++; /* at least one, lost */
    } else {
        struct event_bundle_iter it;
        const uint8_t *ev;
        size_t evlen;
        uint32_t times = n > 0 && n < UINT32_MAX ? (uint32_t)n : 0;

        if (!event_bundle_is(event, len)) {
            exhaust_one(b, tenant, topic, event, len, times);
        } else if (event_bundle_count(event, len) < 1) {
            log_err("broker: message %" PRId64 " of stream %s is no "
                    "well-formed bundle of events",
                    (int64_t)seq, b->stream);
        } else {
            /* each event of a bundle was delivered as often */
            event_bundle_iter_init(&it, event, len);
            while (event_bundle_next(&it, &ev, &evlen))
                exhaust_one(b, tenant, topic, ev, evlen, times);
        }
        free(tenant);
        free(topic);
        free(event);
    }
    json_decref(root);
}

static void
dispatch(struct broker_nats *b, natsMsg *m)
{
    const char *subj = natsMsg_GetSubject(m);
    size_t pl = strlen(b->inbox_prefix);

    if (strncmp(subj, b->inbox_prefix, pl) == 0 && subj[pl] == 'p' &&
        subj[pl + 1] == '.') {
        bn_puback(b, strtoull(subj + pl + 2, NULL, 10), m);
        natsMsg_Destroy(m);
        return;
    }
    if (strncmp(subj, "$JS.EVENT.ADVISORY.", 19) == 0) {
        on_advisory(b, m);
        natsMsg_Destroy(m);
        return;
    }
    bn_sub_message(b, m); /* takes m */
}

/* Dispatches what libnats's threads queued. */
static void
drain(struct broker_nats *b)
{
    natsMsg **q;
    size_t qn;

    for (;;) {
        pthread_mutex_lock(&b->mu);
        q = b->q;
        qn = b->qn;
        b->q = NULL;
        b->qn = b->qcap = 0;
        pthread_mutex_unlock(&b->mu);
        if (qn == 0)
            break;
        for (size_t i = 0; i < qn; i++)
            dispatch(b, q[i]);
        free(q);
    }
}

static void
on_wake(evutil_socket_t fd, short what, void *arg)
{
    struct broker_nats *b = arg;
    uint64_t n;

    (void)what;
    if (read(fd, &n, sizeof n) < 0 && errno != EAGAIN)
        log_warning("broker: eventfd: %s", strerror(errno));
    drain(b);
}

/* The tick.  When the loop was held up (a blocking call elsewhere in the
 * daemon, the process stopped), the answers that came meanwhile are
 * dispatched first, and the publishes still unanswered get their whole
 * BN_PUBACK_MS again from now: libnats's threads were held up too, and
 * may not yet have read (or even sent: a large batch's message is
 * flushed by its thread) what belongs to them.  A publish is failed only
 * when its PubAck is missing, not when the daemon was late. */
static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct broker_nats *b = arg;
    int64_t now = timestamp_mono_ms();
    bool held_up = now - b->tick_ms > BN_HELD_UP_MS;

    (void)fd;
    (void)what;
    b->tick_ms = now;
    drain(b);
    watch(b);
    if (held_up)
        bn_pub_restart(b, now);
    else
        bn_pub_expire(b, false);
    bn_sub_tick(b, now);
}

/* ---- open and close -------------------------------------------------- */

/* Creates the stream, or brings an existing one to these settings. */
static int
stream_ensure(struct broker_nats *b, const struct broker_config *cfg, char *err,
              size_t errlen)
{
    char subjects[80];
    const char *list[1] = { subjects };
    jsStreamConfig sc;
    jsOptions jo;
    jsErrCode code = 0;
    jsCtx *js = NULL;
    natsStatus s;

    snprintf(subjects, sizeof subjects, "%s.ev.>", b->prefix);
    jsOptions_Init(&jo);
    jo.Wait = 5000;
    s = natsConnection_JetStream(&js, b->nc, &jo);
    if (s != NATS_OK)
        return nats_link_fail(err, errlen, s, "nats broker: JetStream at %s",
                              b->url);
    jsStreamConfig_Init(&sc);
    sc.Name = b->stream;
    sc.Description = "workmanager: the topics' events";
    sc.Subjects = list;
    sc.SubjectsLen = 1;
    sc.Retention = js_LimitsPolicy;
    sc.MaxAge =
        (int64_t)(cfg->nats_max_age_s ? cfg->nats_max_age_s : BN_MAX_AGE_S) *
        1000000000;
    sc.Storage = cfg->nats_memory ? js_MemoryStorage : js_FileStorage;
    sc.Replicas = cfg->nats_replicas ? (int64_t)cfg->nats_replicas : 1;
    sc.Duplicates = (int64_t)120 * 1000000000;
    s = js_AddStream(NULL, js, &sc, NULL, &code);
    if (s != NATS_OK && code == JSStreamNameExistErr)
        s = js_UpdateStream(NULL, js, &sc, NULL, &code);
    jsCtx_Destroy(js);
    if (s != NATS_OK)
        return nats_link_fail(err, errlen, s,
                              "nats broker: stream %s at %s (JetStream code "
                              "%d; does the server run JetStream, "
                              "nats-server -js, may this user use it, and "
                              "does an existing stream of that name allow "
                              "these settings?)",
                              b->stream, b->url, (int)code);
    return 0;
}

static void
bn_free(struct broker_nats *b)
{
    if (b->inbox)
        natsSubscription_Destroy(b->inbox);
    if (b->live_all)
        natsSubscription_Destroy(b->live_all);
    if (b->advisories)
        natsSubscription_Destroy(b->advisories);
    if (b->nc) {
        natsConnection_Close(b->nc);
        natsConnection_Destroy(b->nc);
    }
    if (b->bulk) {
        natsConnection_Close(b->bulk);
        natsConnection_Destroy(b->bulk);
    }
    natsOptions_Destroy(b->opts);
    natsOptions_Destroy(b->bulk_opts);
    if (b->stats != NULL)
        natsStatistics_Destroy(b->stats);
    /* No handler runs once the connection is closed. */
    for (size_t i = 0; i < b->qn; i++)
        natsMsg_Destroy(b->q[i]);
    free(b->q);
    bn_sub_free_all(b);
    bn_pub_free(b);
    if (b->wake)
        event_free(b->wake);
    if (b->tick)
        event_free(b->tick);
    if (b->efd >= 0)
        close(b->efd);
    if (b->mu_ready)
        pthread_mutex_destroy(&b->mu);
    free(b->url);
    free(b->prefix);
    free(b->stream);
    free(b->inbox_prefix);
    free(b);
}

static void
bn_close(struct broker *bb)
{
    struct broker_nats *b = (struct broker_nats *)bb;

    /* What was settled goes out before the connection closes; what is
     * not answered yet fails (its callers answer 503). */
    if (b->nc && bn_connected(b)) {
        natsConnection_FlushTimeout(b->bulk, 1000);
        natsConnection_FlushTimeout(b->nc, 1000);
    }
    bn_pub_expire(b, true);
    bn_free(b);
}

struct broker *
broker_nats_open(const struct broker_config *cfg, struct event_base *base,
                 char *err, size_t errlen)
{
    struct broker_nats *b = calloc(1, sizeof *b);
    char inst[UUID_SIZE], subj[160], queue[64];
    natsStatus s;

    if (b == NULL || cfg->nats == NULL) {
        free(b);
        errbuf_set(err, errlen, "nats broker: %s",
                   b ? "no connection settings" : "out of memory");
        return NULL;
    }
    b->head.ops = &broker_nats_ops;
    b->base = base;
    b->efd = -1;
    b->verify = cfg->verify;
    b->ack_wait_ms = cfg->nats_ack_wait_ms ? cfg->nats_ack_wait_ms : 30000;
    b->max_deliver = cfg->nats_max_deliver ? (int)cfg->nats_max_deliver : -1;
    b->health.writable = true;
    b->health.remote = true;
    b->connected = b->bulk_connected = true;
    b->pub_head_seq = 1;
    b->opened_ms = timestamp_now_ms();
    LIST_INIT(&b->subs);
    b->kicked_tail = &b->kicked;
    TAILQ_INIT(&b->out);
    STAILQ_INIT(&b->held);
    uuid_new(inst);
    b->url = strdup(cfg->nats->url);
    b->prefix = strdup(
        cfg->nats_prefix && cfg->nats_prefix[0] ? cfg->nats_prefix : "wm");
    if (b->url == NULL || b->prefix == NULL ||
        asprintf(&b->stream, "%s_events", b->prefix) < 0 ||
        asprintf(&b->inbox_prefix, "_WM.%s.%.8s.", b->prefix, inst) < 0) {
        b->stream = b->inbox_prefix = NULL;
        errbuf_set(err, errlen, "nats broker: out of memory");
        goto fail;
    }
    if (pthread_mutex_init(&b->mu, NULL) != 0) {
        errbuf_set(err, errlen, "nats broker: mutex: %s", strerror(errno));
        goto fail;
    }
    b->mu_ready = true;
    b->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (b->efd < 0) {
        errbuf_set(err, errlen, "nats broker: eventfd: %s", strerror(errno));
        goto fail;
    }
    b->wake = event_new(base, b->efd, EV_READ | EV_PERSIST, on_wake, b);
    b->tick = event_new(base, -1, EV_PERSIST, on_tick, b);
    if (b->wake == NULL || b->tick == NULL || event_add(b->wake, NULL) != 0) {
        errbuf_set(err, errlen, "nats broker: cannot register its events");
        goto fail;
    }
    struct nats_link_config bulk = *cfg->nats;
    bulk.buffered = true;
    if (natsStatistics_Create(&b->stats) != NATS_OK)
        b->stats = NULL; /* the quick reconnects go unseen */
    if (nats_link_connect(cfg->nats, &b->opts, &b->nc, err, errlen) != 0 ||
        nats_link_connect(&bulk, &b->bulk_opts, &b->bulk, err, errlen) != 0 ||
        stream_ensure(b, cfg, err, errlen) != 0)
        goto fail;
    snprintf(subj, sizeof subj, "%s>", b->inbox_prefix);
    s = natsConnection_Subscribe(&b->inbox, b->nc, subj, on_message, b);
    if (s == NATS_OK)
        s = natsSubscription_SetPendingLimits(b->inbox, -1, -1);
    if (s != NATS_OK) {
        nats_link_fail(err, errlen, s, "nats broker: subscribing %s", subj);
        goto fail;
    }
    snprintf(subj, sizeof subj,
             "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.*", b->stream);
    snprintf(queue, sizeof queue, "%s_dead_letters", b->prefix);
    s = natsConnection_QueueSubscribe(&b->advisories, b->nc, subj, queue,
                                      on_message, b);
    if (s != NATS_OK) {
        nats_link_fail(err, errlen, s, "nats broker: subscribing %s", subj);
        goto fail;
    }
    struct timeval tv = { 0, BN_TICK_MS * 1000 };
    event_add(b->tick, &tv);
    b->tick_ms = timestamp_mono_ms(); /* a hold before the first tick too */
    char on[256], bulk_on[256];
    log_info("broker: NATS JetStream at %s, stream %s (connected to %s and, "
             "for acknowledgements and outputs, %s)",
             b->url, b->stream, server_of(b->nc, on, sizeof on),
             server_of(b->bulk, bulk_on, sizeof bulk_on));
    return &b->head;
fail:
    bn_free(b);
    return NULL;
}

/* Subscribes every event subject for the live subscriptions (SSE), while
 * one exists; the loop picks each one's topics. */
int
bn_live_need(struct broker_nats *b, bool need)
{
    char subj[80];

    if (need && b->live_all == NULL) {
        snprintf(subj, sizeof subj, "%s.ev.>", b->prefix);
        if (natsConnection_Subscribe(&b->live_all, b->nc, subj, on_message,
                                     b) != NATS_OK) {
            b->live_all = NULL;
            errno = EIO;
            return -1;
        }
        natsSubscription_SetPendingLimits(b->live_all, -1, -1);
    } else if (!need && b->live_all != NULL) {
        natsSubscription_Unsubscribe(b->live_all);
        natsSubscription_Destroy(b->live_all);
        b->live_all = NULL;
    }
    return 0;
}

/* ---- what the backend says about itself ------------------------------ */

static int
bn_admit(struct broker *bb, const char *tenant, const char *topic, size_t n,
         struct broker_sub **full)
{
    (void)bb;
    (void)tenant;
    (void)topic;
    (void)n;
    if (full)
        *full = NULL;
    return 0;
}

/* The unix time in ms of an RFC 3339 timestamp in UTC
 * ("2026-11-29T02:52:46.66Z"); 0 when unreadable. */
static int64_t
rfc3339_ms(const char *t)
{
    struct tm tm;
    const char *p;
    int64_t ms = 0, scale = 100;

    memset(&tm, 0, sizeof tm);
    if (t == NULL || (p = strptime(t, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
        return 0;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
            ms += (*p - '0') * scale;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

/* One page of the stream's consumers: deletes those of this system
 * ("workmanager tenant/topic/name" descriptions) made before the broker
 * opened whose name known() disowns.  Returns how many the page held,
 * -1 on failure. */
static int
purge_page(struct broker_nats *b, int offset, broker_known_cb known, void *arg,
           size_t *deleted)
{
    char subj[256], body[64], what[600];
    natsMsg *reply = NULL;
    json_t *root, *list, *c;
    size_t i;
    int n;

    snprintf(subj, sizeof subj, "$JS.API.CONSUMER.LIST.%s", b->stream);
    snprintf(body, sizeof body, "{\"offset\":%d}", offset);
    if (natsConnection_RequestString(&reply, b->nc, subj, body, 5000) !=
        NATS_OK)
        return -1;
    root = json_loads(natsMsg_GetData(reply), 0, NULL);
    natsMsg_Destroy(reply);
    list = json_object_get(root, "consumers");
    if (!json_is_array(list)) {
        json_decref(root);
        return -1;
    }
    n = (int)json_array_size(list);
    json_array_foreach(list, i, c)
    {
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *desc = json_string_value(
            json_object_get(json_object_get(c, "config"), "description"));
        const char *created = json_string_value(json_object_get(c, "created"));
        char *tenant, *topic, *sub;

        if (name == NULL || desc == NULL ||
            strncmp(desc, "workmanager ", 12) != 0 ||
            rfc3339_ms(created) >= b->opened_ms)
            continue;
        snprintf(what, sizeof what, "%s", desc + 12);
        tenant = what;
        if ((topic = strchr(tenant, '/')) == NULL)
            continue;
        *topic++ = '\0';
        if ((sub = strchr(topic, '/')) == NULL)
            continue;
        *sub++ = '\0';
        if (known(tenant, topic, sub, arg))
            continue;
        snprintf(subj, sizeof subj, "$JS.API.CONSUMER.DELETE.%s.%s", b->stream,
                 name);
        if (natsConnection_RequestString(&reply, b->nc, subj, "", 5000) ==
            NATS_OK) {
            natsMsg_Destroy(reply);
            (*deleted)++;
            log_notice("broker: consumer %s of %s/%s (%s) deleted: no "
                       "worker has it any more",
                       name, tenant, topic, sub);
        }
    }
    json_decref(root);
    return n;
}

static void
bn_recovered(struct broker *bb, broker_known_cb known, void *arg)
{
    struct broker_nats *b = (struct broker_nats *)bb;
    size_t deleted = 0;
    int offset = 0, n;

    if (known == NULL || !bn_connected(b))
        return;
    /* Deleting shifts the pages: read from the start until a page
     * deletes nothing. */
    for (int pages = 0; pages < 1000; pages++) {
        size_t before = deleted;
        n = purge_page(b, offset, known, arg, &deleted);
        if (n <= 0)
            break;
        offset = deleted > before ? offset : offset + n;
    }
    if (n < 0)
        log_warning("broker: the consumers of stream %s could not be "
                    "listed: those of deleted workers stay",
                    b->stream);
    log_info("broker: recovery: %zu consumer(s) of deleted workers deleted",
             deleted);
}

static size_t
bn_purge(struct broker *bb, const char *tenant, const char *topic)
{
    (void)bb;
    (void)tenant;
    (void)topic;
    return 0;
}

static void
bn_stats(const struct broker *bb, struct broker_stats *out)
{
    const struct broker_nats *b = (const struct broker_nats *)bb;
    const struct bn_sub *s;

    *out = b->st;
    out->pending = 0;
    LIST_FOREACH (s, &b->subs, link)
        out->pending += s->nwaiting + s->nout + s->ndelayed;
}

static void
bn_tenant_backlog(const struct broker *bb, const char *tenant, uint64_t *events,
                  uint64_t *bytes)
{
    (void)bb;
    (void)tenant;
    *events = 0;
    *bytes = 0;
}

static void
bn_health(const struct broker *bb, struct broker_health *out)
{
    const struct broker_nats *b = (const struct broker_nats *)bb;

    *out = b->health;
}

static void
bn_set_storage_hook(struct broker *bb, broker_storage_cb cb, void *arg)
{
    struct broker_nats *b = (struct broker_nats *)bb;

    b->storage_cb = cb;
    b->storage_arg = arg;
}

static void
bn_set_exhausted_hook(struct broker *bb, broker_exhausted_cb cb, void *arg)
{
    struct broker_nats *b = (struct broker_nats *)bb;

    b->exhausted_cb = cb;
    b->exhausted_arg = arg;
}

static const struct broker_ops broker_nats_ops = {
    .name = "nats",
    .close = bn_close,
    .publish = bn_publish,
    .publish_batch = bn_publish_batch,
    .admit = bn_admit,
    .subscribe = bn_subscribe,
    .set_mode = bn_set_mode,
    .set_max_inflight = bn_set_max_inflight,
    .unsubscribe = bn_unsubscribe,
    .ack = bn_ack,
    .nack = bn_nack,
    .release = bn_release,
    .recovered = bn_recovered,
    .purge = bn_purge,
    .stats = bn_stats,
    .tenant_backlog = bn_tenant_backlog,
    .health = bn_health,
    .set_storage_hook = bn_set_storage_hook,
    .set_exhausted_hook = bn_set_exhausted_hook,
    .sub_backlog = bn_sub_backlog,
    .sub_name = bn_sub_name,
};
