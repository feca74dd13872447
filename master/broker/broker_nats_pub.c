/*
 * broker_nats_pub.c — publishes of the `nats` broker and what waits on
 * them (broker_nats_private.h).
 *
 * A publish is a core NATS message to the topic's subject with a reply
 * subject of the instance's inbox (p.<seq>): JetStream answers it with a
 * PubAck once the event is stored (on a quorum of the stream's replicas),
 * or with an error.  Publishes are numbered in the order they are made and
 * finished in that order: a PubAck that comes early waits for the ones
 * before it.  A publish's callback says the first failure since the last
 * callback, so that the API's batch (one callback, on its last event)
 * never answers 202 while one of its events was refused; unhurried
 * publishes (outputs, dead letters, the daemon's events: nobody's batch)
 * are left out of that, so that their failures do not fail a batch
 * published after them.  They are written on the buffered connection
 * (broker_nats_private.h), the others at once.  A publish with
 * no answer within BN_PUBACK_MS fails (EIO; an answer that came while the
 * loop was held up counts: broker_nats.c's tick reads it first): it may
 * still be stored, and a retry of it by the client is then a duplicate
 * that JetStream drops by its Nats-Msg-Id (tenant/topic/hash of the
 * source/the event's id).
 *
 * Batches.  broker_publish_batch() stores its events as bundles
 * (event_bundle.h), as many per message as the server's max_payload
 * takes, numbered in the ring like single publishes, the callback on the
 * last: nats-server's cost is per message, so a batch of 100 costs it
 * about what one event does.  A bundle's Nats-Msg-Id hashes the sources
 * and ids of its events: the same batch retried is stored once.
 *
 * Settlements after outputs.  The message flow publishes a job's outputs
 * (or its dead letter) and then acknowledges its input, counting on the
 * outputs being stored first (the embedded journal writes in order).
 * Here an ack waits until every publish made before it is finished, and
 * becomes a "-NAK" (deliver again) when one made since its delivery
 * arrived failed: an input is never acknowledged over a lost output.
 */
#include "config.h"

#include "master/broker/broker_nats_private.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/cloudevent.h"
#include "lib/timestamp.h"
#include "master/broker/event_bundle.h"
#include "master/core/log.h"

/* ---- names ----------------------------------------------------------- */

static size_t
enc_token(const char *s, char *out, size_t size)
{
    size_t n = 0;

    for (; *s != '\0'; s++) {
        if (*s == '.') {
            if (n + 3 >= size)
                return size;
            memcpy(out + n, "=2E", 3);
            n += 3;
        } else {
            if (n + 1 >= size)
                return size;
            out[n++] = *s;
        }
    }
    out[n] = '\0';
    return n;
}

int
bn_subject(const struct broker_nats *b, const char *tenant, const char *topic,
           char *buf, size_t size)
{
    char t[256], p[1024];

    if (enc_token(tenant, t, sizeof t) >= sizeof t ||
        enc_token(topic, p, sizeof p) >= sizeof p)
        return -1;
    int n = snprintf(buf, size, "%s.ev.%s.%s", b->prefix, t, p);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* Copies token [s, end) decoded ("=2E" is ".") into out. */
static int
dec_token(const char *s, const char *end, char *out, size_t size)
{
    size_t n = 0;

    for (; s < end; s++) {
        if (n + 1 >= size)
            return -1;
        if (end - s >= 3 && s[0] == '=' && s[1] == '2' && s[2] == 'E') {
            out[n++] = '.';
            s += 2;
        } else {
            out[n++] = *s;
        }
    }
    out[n] = '\0';
    return n > 0 ? 0 : -1;
}

int
bn_subject_parse(const struct broker_nats *b, const char *subj, char *tenant,
                 size_t tsize, char *topic, size_t psize)
{
    size_t pl = strlen(b->prefix);
    const char *t, *dot;

    if (strncmp(subj, b->prefix, pl) != 0 || strncmp(subj + pl, ".ev.", 4))
        return -1;
    t = subj + pl + 4;
    if ((dot = strchr(t, '.')) == NULL || strchr(dot + 1, '.') != NULL)
        return -1;
    if (dec_token(t, dot, tenant, tsize) != 0 ||
        dec_token(dot + 1, dot + 1 + strlen(dot + 1), topic, psize) != 0)
        return -1;
    return 0;
}

#define FNV64_BASIS 0xcbf29ce484222325ull

/* FNV-1a-64 of h's bytes so far, then s's. */
static uint64_t
fnv64_more(uint64_t h, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t
fnv64(const char *s, size_t len)
{
    return fnv64_more(FNV64_BASIS, s, len);
}

/* The event's Nats-Msg-Id: tenant/topic/hash of its source/its id (the
 * id hashed too when it holds bytes a header cannot). */
static void
msg_id(const char *tenant, const char *topic, const uint8_t *event, char *buf,
       size_t size)
{
    struct ipc_cloudevent ce;
    bool plain = true;

    ipc_cloudevent_decode_trusted(event, &ce);
    for (size_t i = 0; i < ce.id.len && plain; i++)
        plain = (uint8_t)ce.id.ptr[i] > 0x20 && (uint8_t)ce.id.ptr[i] < 0x7f;
    if (plain && ce.id.len <= 200)
        snprintf(buf, size, "%s/%s/%016" PRIx64 "/%.*s", tenant, topic,
                 fnv64(ce.source.ptr, ce.source.len), (int)ce.id.len,
                 ce.id.ptr);
    else
        snprintf(buf, size, "%s/%s/%016" PRIx64 "/#%016" PRIx64, tenant, topic,
                 fnv64(ce.source.ptr, ce.source.len),
                 fnv64(ce.id.ptr, ce.id.len));
}

/* ---- the ring of publishes awaiting their answer --------------------- */

static struct bn_pub *
pub_at(struct broker_nats *b, uint64_t seq)
{
    return &b->pubs[(b->pub_start + (seq - b->pub_head_seq)) % b->pub_cap];
}

static int
pub_grow(struct broker_nats *b)
{
    size_t cap = b->pub_cap ? b->pub_cap * 2 : 1024;
    struct bn_pub *p = malloc(cap * sizeof *p);

    if (p == NULL)
        return -1;
    for (size_t i = 0; i < b->pub_n; i++)
        p[i] = b->pubs[(b->pub_start + i) % b->pub_cap];
    free(b->pubs);
    b->pubs = p;
    b->pub_cap = cap;
    b->pub_start = 0;
    return 0;
}

static void
send_ack(struct broker_nats *b, const char *reply, uint64_t mark)
{
    bool failed = b->pub_failed > mark;

    natsConnection_PublishString(b->bulk, reply, failed ? "-NAK" : "+ACK");
    if (failed)
        log_warning("broker: an event is delivered again: an output "
                    "published while it was processed was not stored");
}

/* Sends the settlements whose publishes are all finished. */
static void
held_flush(struct broker_nats *b)
{
    struct bn_held *h;

    while ((h = STAILQ_FIRST(&b->held)) != NULL && h->after < b->pub_head_seq) {
        STAILQ_REMOVE_HEAD(&b->held, link);
        send_ack(b, h->reply, h->mark);
        free(h->reply);
        free(h);
    }
}

/* Finishes the oldest publishes that are answered, in order. */
static void
pub_pop(struct broker_nats *b)
{
    while (b->pub_n > 0 && b->pubs[b->pub_start].done) {
        struct bn_pub e = b->pubs[b->pub_start];
        uint64_t seq = b->pub_head_seq;

        b->pub_start = (b->pub_start + 1) % b->pub_cap;
        b->pub_n--;
        b->pub_head_seq++;
        if (e.error) {
            if (!e.unhurried)
                b->pub_carry = e.error;
            b->pub_failed = seq;
        }
        if (e.cb) {
            int error = e.error ? e.error : b->pub_carry;
            b->pub_carry = 0;
            e.cb(error, e.arg); /* may publish: the ring may move */
        }
    }
    held_flush(b);
}

/* Sends data to subj with the dedup id, numbered in the ring; -1 with
 * errno when it cannot be sent (nothing numbered). */
static int
pub_send(struct broker_nats *b, const char *subj, const void *data, size_t len,
         const char *id, broker_publish_cb cb, void *arg, bool unhurried)
{
    char reply[128];
    natsMsg *m = NULL;
    natsStatus s;

    if (b->pub_n == b->pub_cap && pub_grow(b) != 0) {
        errno = ENOMEM;
        return -1;
    }
    uint64_t seq = b->pub_issued + 1;
    snprintf(reply, sizeof reply, "%sp.%" PRIu64, b->inbox_prefix, seq);
    s = natsMsg_Create(&m, subj, reply, data, (int)len);
    if (s == NATS_OK)
        s = natsMsgHeader_Set(m, "Nats-Msg-Id", id);
    /* Nobody waits for an unhurried publish (an output, a dead letter):
     * it may wait for the flusher. */
    if (s == NATS_OK)
        s = natsConnection_PublishMsg(unhurried ? b->bulk : b->nc, m);
    natsMsg_Destroy(m);
    if (s != NATS_OK) {
        log_warning("broker: publish to %s: %s", subj, natsStatus_GetText(s));
        errno = s == NATS_NO_MEMORY ? ENOMEM : EIO;
        return -1;
    }
    b->pub_issued = seq;
    b->pub_n++;
    *pub_at(b, seq) = (struct bn_pub){
        .cb = cb,
        .arg = arg,
        .sent_ms = timestamp_mono_ms(),
        .unhurried = unhurried,
    };
    return 0;
}

/* The subject of (tenant, topic) in subj, when the connection is up; -1
 * with errno else. */
static int
pub_subject(struct broker_nats *b, const char *tenant, const char *topic,
            char *subj, size_t size)
{
    if (!bn_connected(b)) {
        errno = EIO;
        return -1;
    }
    if (bn_subject(b, tenant, topic, subj, size) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int
bn_publish(struct broker *bb, const char *tenant, const char *topic,
           const uint8_t *event, size_t len, broker_publish_cb cb, void *arg,
           bool unhurried)
{
    struct broker_nats *b = (struct broker_nats *)bb;
    char subj[1400], id[512];

    if (pub_subject(b, tenant, topic, subj, sizeof subj) != 0)
        return -1;
    msg_id(tenant, topic, event, id, sizeof id);
    if (pub_send(b, subj, event, len, id, cb, arg, unhurried) != 0)
        return -1;
    b->st.published++;
    return 0;
}

/* The events of a bundle that fit in one message of at most max bytes
 * from evs[0] (at least one), their bundle's size in *size. */
static size_t
chunk_of(const struct broker_event *evs, size_t n, size_t max, size_t *size)
{
    size_t k = 0, at = EVENT_BUNDLE_HEAD;

    while (k < n && (k == 0 || at + event_bundle_record(evs[k].len) <= max))
        at += event_bundle_record(evs[k++].len);
    *size = at;
    return k;
}

/* A bundle's Nats-Msg-Id: tenant/topic/b<hash of its events' sources and
 * ids>.<count>, the same for the same events again (a client's retry). */
static void
bundle_id(const char *tenant, const char *topic, const struct broker_event *evs,
          size_t n, char *buf, size_t size)
{
    uint64_t h = FNV64_BASIS;

    for (size_t i = 0; i < n; i++) {
        struct ipc_cloudevent ce;
        ipc_cloudevent_decode_trusted(evs[i].event, &ce);
        h = fnv64_more(h, ce.source.ptr, ce.source.len);
        h = fnv64_more(h, "\n", 1);
        h = fnv64_more(h, ce.id.ptr, ce.id.len);
        h = fnv64_more(h, "\n", 1);
    }
    snprintf(buf, size, "%s/%s/b%016" PRIx64 ".%zu", tenant, topic, h, n);
}

int
bn_publish_batch(struct broker *bb, const char *tenant, const char *topic,
                 const struct broker_event *evs, size_t n, broker_publish_cb cb,
                 void *arg, size_t *accepted)
{
    struct broker_nats *b = (struct broker_nats *)bb;
    char subj[1400], id[512];
    size_t done = 0;

    if (accepted)
        *accepted = 0;
    if (n == 1) {
        if (bn_publish(bb, tenant, topic, evs[0].event, evs[0].len, cb, arg,
                       false) != 0)
            return -1;
        if (accepted)
            *accepted = 1;
        return 0;
    }
    if (pub_subject(b, tenant, topic, subj, sizeof subj) != 0)
        return -1;
    /* Room for the headers under the server's max_payload. */
    int64_t mp = natsConnection_GetMaxPayload(b->nc);
    size_t max = mp > 4096 ? (size_t)mp - 1024 : 3072;
    while (done < n) {
        size_t size, k = chunk_of(evs + done, n - done, max, &size);
        uint8_t *buf = malloc(size);
        if (buf == NULL) {
            errno = ENOMEM;
            return -1;
        }
        event_bundle_begin(buf, (uint32_t)k);
        size_t at = EVENT_BUNDLE_HEAD;
        for (size_t i = 0; i < k; i++)
            at = event_bundle_put(buf, at, evs[done + i].event,
                                  evs[done + i].len);
        bundle_id(tenant, topic, evs + done, k, id, sizeof id);
        bool last = done + k == n;
        int rc = pub_send(b, subj, buf, size, id, last ? cb : NULL,
                          last ? arg : NULL, false);
        free(buf);
        if (rc != 0)
            return -1;
        done += k;
        b->st.published += k;
        if (accepted)
            *accepted = done;
    }
    return 0;
}

/* The errno of an error answer: a full stream is ENOSPC (the API's
 * backlog_full), anything else EIO. */
static int
answer_error(const char *data, const char **why)
{
    const char *d = strstr(data, "\"description\":\"");

    *why = d ? d + strlen("\"description\":\"") : data;
    if (strstr(data, "maximum messages") || strstr(data, "maximum bytes") ||
        strstr(data, "insufficient resources"))
        return ENOSPC;
    return EIO;
}

void
bn_puback(struct broker_nats *b, uint64_t seq, natsMsg *m)
{
    const char *status = NULL, *data = natsMsg_GetData(m), *why = "";
    int error = 0;

    if (seq < b->pub_head_seq || seq > b->pub_issued)
        return; /* expired already */
    if (natsMsgHeader_Get(m, "Status", &status) == NATS_OK && status != NULL) {
        error = EIO;
        why =
            strcmp(status, "503") == 0 ? "no JetStream stream answers" : status;
    } else if (data == NULL || strstr(data, "\"error\"") != NULL) {
        error = data ? answer_error(data, &why) : EIO;
    }
    if (error)
        log_warning("broker: JetStream refused a publish: %.200s", why);
    struct bn_pub *p = pub_at(b, seq);
    p->done = true;
    p->error = error;
    pub_pop(b);
}

void
bn_pub_expire(struct broker_nats *b, bool all)
{
    int64_t now = timestamp_mono_ms();
    uint64_t n = 0;

    for (uint64_t seq = b->pub_head_seq; seq <= b->pub_issued; seq++) {
        struct bn_pub *p = pub_at(b, seq);
        if (!all && now - p->sent_ms < BN_PUBACK_MS)
            break;
        if (!p->done) {
            p->done = true;
            p->error = EIO;
            n++;
        }
    }
    if (n > 0) {
        log_warning("broker: %" PRIu64 " publish(es) to NATS at %s not "
                    "answered%s: failed",
                    n, b->url, all ? " at close" : " within 5 s");
        pub_pop(b);
    }
}

void
bn_pub_restart(struct broker_nats *b, int64_t now)
{
    for (uint64_t seq = b->pub_head_seq; seq <= b->pub_issued; seq++)
        pub_at(b, seq)->sent_ms = now;
}

void
bn_settle_ack(struct broker_nats *b, const char *reply, uint64_t mark)
{
    if (b->pub_issued < b->pub_head_seq) {
        send_ack(b, reply, mark);
        return;
    }
    struct bn_held *p = malloc(sizeof *p);
    if (p == NULL || (p->reply = strdup(reply)) == NULL) {
        free(p);
        return; /* not acknowledged: delivered again after AckWait */
    }
    p->after = b->pub_issued;
    p->mark = mark;
    STAILQ_INSERT_TAIL(&b->held, p, link);
}

void
bn_pub_free(struct broker_nats *b)
{
    struct bn_held *h;

    while ((h = STAILQ_FIRST(&b->held)) != NULL) {
        STAILQ_REMOVE_HEAD(&b->held, link);
        free(h->reply);
        free(h);
    }
    free(b->pubs);
    b->pubs = NULL;
    b->pub_n = b->pub_cap = 0;
}
