/*
 * flow.c — the message flow (see flow.h).
 *
 * A job is one event on its way through a worker: a delivery of the
 * broker, or an invoke.  Its steps:
 *
 *   start    decode; stamp the worker's config; grouped: acquire the lock
 *   process  supervise_process_delivery() on the worker's host
 *   settle   prepare the outputs (or the error reply) while the host's
 *            Result is valid; grouped: note the write under the token;
 *            publish; ack / nack / dead-letter; release the lock
 *
 * Jobs hang on their binding, so that a delete (flow_detach) can cut
 * them loose: a job whose worker is gone requeues its delivery and
 * releases its lock when its pending step completes.  Bindings and groups,
 * and the broker's callbacks that start jobs, are flow_bind.c's
 * (flow_private.h).
 */
#include "config.h"

#include "master/broker/flow.h"
#include "master/broker/flow_private.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include "lib/uuid.h"
#include "master/api/events.h"
#include "master/broker/admit.h"
#include "master/broker/outcome.h"
#include "master/broker/stamp.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/log.h"
#include "master/core/tenant_meter.h"
#include "master/store/grouplock.h"
#include "master/supervise/supervise.h"
#include "master/workers/activity.h"
#include "master/workers/lifecycle.h"
#include "master/workers/worker.h"

const double flow_bucket_bounds[DISPATCH_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
    0.025,  0.05,    0.1,    0.25,  0.5,    1,     10,
};

/* ---- helpers ---------------------------------------------------------- */

static double
elapsed_s(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) +
           (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* One more event accepted for a topic of tenant (tenant_meter.h). */
static void
meter_in(const char *tenant)
{
    struct tenant_meter *m = tenant_meter_get(tenant);
    if (m)
        m->events_in++;
}

static void
observe(struct flow *dp, double s)
{
    for (int i = 0; i < DISPATCH_BUCKETS; i++)
        if (s <= flow_bucket_bounds[i])
            dp->st.buckets[i]++;
    dp->st.count++;
    dp->st.sum += s;
}

int
flow_event_verify(const uint8_t *event, size_t len)
{
    struct ipc_cloudevent ce;
    struct ipc_fb_error fe;
    char why[256];

    if (ipc_cloudevent_read(event, len, &ce, &fe) == 0 &&
        ipc_cloudevent_check(&ce, &fe) == 0)
        return 0;
    ipc_fb_error_format(&fe, why, sizeof why);
    log_warning("flow: an event read back is malformed: %s", why);
    return -1;
}

bool
flow_topic_reserved(const char *topic)
{
    return strncmp(topic, "workmanager.", 12) == 0;
}

static void
out_free(struct out *o)
{
    free(o->tenant);
    free(o->topic);
    ipc_fb_builder_free(&o->fb);
}

static void
job_free(struct job *j)
{
    if (j->bd && j->icb)
        j->bd->invokes--;
    if (j->bd && j->turn)
        flow_group_turn_done(j->bd);
    if (j->bd)
        LIST_REMOVE(j, link);
    for (size_t i = 0; i < j->nouts; i++)
        out_free(&j->outs[i]);
    free(j->outs);
    ipc_fb_builder_free(&j->stamped);
    free(j);
}

/* The copy of an output as published: correlationid, traceparent and
 * tracestate from the input when the output lacks them; wmhops set. */
int
flow_prepare_output(const struct ipc_cloudevent *in,
                    const struct ipc_cloudevent *o, uint32_t hops,
                    struct ipc_fb_builder *fb, char *err, size_t errlen)
{
    static const char *const carried[] = { "correlationid", "traceparent",
                                           "tracestate" };
    struct ipc_pair set[4];
    char hopbuf[16];
    size_t n = 0;

    for (size_t i = 0; i < 3; i++) {
        struct ipc_str v = ipc_cloudevent_extension(in, carried[i]);
        if (v.ptr && !ipc_cloudevent_extension(o, carried[i]).ptr) {
            set[n].name = ipc_str_c(carried[i]);
            set[n].value = v;
            n++;
        }
    }
    if (hops) {
        snprintf(hopbuf, sizeof hopbuf, "%" PRIu32, hops);
        set[n].name = ipc_str_c("wmhops");
        set[n].value = ipc_str_c(hopbuf);
        n++;
    }
    return stamp_extensions(o, set, n, STAMP_REPLACE, fb, err, errlen);
}

/* Publishes a dead letter of event (of tenant/topic) to <topic>-dead.
 * Returns 0 when it is stored (or dropped by rule: a dead letter is not
 * dead-lettered again; an event that cannot carry the two extensions is
 * dropped with an error), -1 when the broker refused it. */
int
flow_dead_letter(struct flow *dp, const char *tenant, const char *topic,
                 const uint8_t *event, const char *reason, uint32_t count)
{
    struct ipc_cloudevent ce;
    struct ipc_fb_builder fb;
    struct ipc_pair set[2];
    char countbuf[16], dead[512], err[256];
    size_t tl = strlen(topic);
    int rc = 0;

    if (tl >= 5 && strcmp(topic + tl - 5, "-dead") == 0) {
        dp->st.dead_lettered++;
        log_warning("flow: an event of %s/%s dropped (%s): dead letters "
                    "are not dead-lettered again",
                    tenant, topic, reason);
        return 0;
    }
    ipc_cloudevent_decode_trusted(event, &ce); /* a delivery, an output */
    snprintf(countbuf, sizeof countbuf, "%" PRIu32, count);
    snprintf(dead, sizeof dead, "%s-dead", topic);
    set[0].name = ipc_str_c("deadletterreason");
    set[0].value = ipc_str_c(reason);
    set[1].name = ipc_str_c("deliverycount");
    set[1].value = ipc_str_c(countbuf);
    ipc_fb_builder_init(&fb);
    if (stamp_extensions(&ce, set, 2, STAMP_REPLACE, &fb, err, sizeof err)) {
        dp->st.dead_lettered++;
        log_err("flow: cannot dead-letter event %.*s of %s/%s: %s",
                (int)ce.id.len, ce.id.ptr, tenant, topic, err);
    } else if (broker_publish_unhurried(dp->d->broker, tenant, dead, fb.buf,
                                        fb.len) < 0) {
        log_err("flow: cannot dead-letter event %.*s to %s/%s: %s",
                (int)ce.id.len, ce.id.ptr, tenant, dead, strerror(errno));
        rc = -1;
    } else {
        dp->st.dead_lettered++;
        log_info("flow: event %.*s of %s/%s dead-lettered to %s "
                 "(reason %s, deliveries %" PRIu32 ")",
                 (int)ce.id.len, ce.id.ptr, tenant, topic, dead, reason, count);
    }
    ipc_fb_builder_free(&fb);
    return rc;
}

/* ---- settling --------------------------------------------------------- */

static void
job_release_lock(struct job *j)
{
    if (!j->locked)
        return;
    j->locked = false;
    if (j->bd && !j->turn)
        j->bd->token = 0; /* a turn's: when it ends (flow_bind.c) */
    grouplocks_release(j->dp->d->locks, j->tenant, j->group, j->token, NULL,
                       NULL);
}

/* Publishes the job's outputs (and loop dead letters).  Returns how many
 * the broker refused.
 *
 * Only a refusal at the call is seen here (the journal's budget is
 * exhausted, or the journal cannot write: ENOSPC, EIO).  A write that
 * fails later, on the journal's writer (a disk that fills up now), fails
 * the journal: what it wrote from that write on is truncated away when
 * it recovers, the input's settlement, appended after the outputs, with
 * it, so the input comes back at the next start.  Waiting for each output's
 * durability before the ack would cost a journal round trip per event for
 * no more safety. */
static size_t
publish_outputs(struct job *j, struct worker *w, uint32_t count)
{
    struct flow *dp = j->dp;
    size_t refused = 0;

    for (size_t i = 0; i < j->nouts; i++) {
        struct out *o = &j->outs[i];
        if (o->dead) {
            if (flow_dead_letter(dp, o->tenant, o->topic, o->fb.buf, "loop",
                                 count) != 0)
                refused++;
            continue;
        }
        if (broker_publish_unhurried(dp->d->broker, o->tenant, o->topic,
                                     o->fb.buf, o->fb.len) < 0) {
            if (w)
                activity_log(w, LOG_ERR, "an output to %s/%s is refused: %s",
                             o->tenant, o->topic, strerror(errno));
            else
                log_err("flow: an output of a deleted worker to %s/%s is "
                        "refused: %s",
                        o->tenant, o->topic, strerror(errno));
            dp->st.refused_outputs++;
            refused++;
            continue;
        }
        meter_in(o->tenant);
        if (w)
            w->counters.published++;
    }
    return refused;
}

/* The last step: the outputs, the delivery's action, the lock, the job.
 * The delivery is acknowledged only once what replaces it is stored
 * (outcome.h). */
static void
job_finish(struct job *j)
{
    struct flow *dp = j->dp;
    struct worker *w = j->bd ? j->bd->w : NULL;
    struct broker_delivery *d = j->d;
    unsigned max = dp->d->conf->max_redeliveries;

    if (publish_outputs(j, w, d ? d->count : 1) > 0 && d) {
        j->action = outcome_unstored(j->action, d->count, max);
        snprintf(j->reason, sizeof j->reason, "%s", OUTCOME_OUTPUT_REFUSED);
        log_warning("flow: an event of %s/%s is not acknowledged: its "
                    "outputs were refused (delivery %" PRIu32 ")",
                    d->tenant, d->topic, d->count);
    }
    if (d && j->action == OUTCOME_DEAD) {
        if (flow_dead_letter(dp, d->tenant, d->topic, d->event, j->reason,
                             d->count) != 0)
            j->action = outcome_unstored(j->action, d->count, max);
        else if (w)
            w->counters.dead_lettered++;
    }
    if (d) {
        switch (j->action) {
        case OUTCOME_ACK:
        case OUTCOME_DEAD: /* its dead letter is stored */
            broker_ack(d);
            break;
        case OUTCOME_RETRY:
            if (w)
                w->counters.redelivered++;
            broker_nack(d,
                        outcome_delay_ms(dp->d->conf->redelivery_base_delay_ms,
                                         d->count));
            break;
        case OUTCOME_REQUEUE: /* not tried: the same delivery, later */
            broker_release(
                d, outcome_delay_ms(dp->d->conf->redelivery_base_delay_ms, 1));
            break;
        }
    }
    job_release_lock(j);
    job_free(j);
}

static void
on_write_noted(enum grouplock_status st, uint64_t token, const char *message,
               void *arg)
{
    struct job *j = arg;

    (void)token;
    if (st != GROUPLOCK_OK) {
        /* Stale: another holder has the lock; nothing of ours goes out and
         * the event is tried again under a fresh lock. */
        log_warning("flow: outputs of an event of %s/%s refused: %s", j->tenant,
                    j->d ? j->d->topic : "(invoke)", message);
        j->dp->st.refused_outputs += j->nouts;
        for (size_t i = 0; i < j->nouts; i++)
            out_free(&j->outs[i]);
        j->nouts = 0;
        if (j->action == OUTCOME_ACK) {
            j->action = OUTCOME_RETRY;
            snprintf(j->reason, sizeof j->reason, "lock_contention");
            if (j->d && j->d->count > j->dp->d->conf->max_redeliveries)
                j->action = OUTCOME_DEAD;
        }
        /* job_finish() still releases: the record is left alone (not
         * ours), the next local waiter is served. */
    }
    job_finish(j);
}

static int
add_out(struct job *j, const char *tenant, const char *topic,
        struct ipc_fb_builder *fb, bool dead)
{
    struct out *o = realloc(j->outs, (j->nouts + 1) * sizeof *o);
    if (o == NULL)
        return -1;
    j->outs = o;
    o = &j->outs[j->nouts];
    o->tenant = strdup(tenant);
    o->topic = strdup(topic);
    o->fb = *fb;
    o->dead = dead;
    ipc_fb_builder_init(fb);
    if (!o->tenant || !o->topic) {
        out_free(o);
        return -1;
    }
    j->nouts++;
    return 0;
}

/* The error reply to the input's replytopic. */
static void
prepare_error_reply(struct job *j, const struct ipc_cloudevent *in,
                    const char *type, const char *message,
                    const struct ipc_error *e)
{
    struct ipc_str reply = ipc_cloudevent_extension(in, "replytopic");
    struct worker *w = j->bd->w;
    struct ipc_fb_builder fb;
    char topic[256], err[256], id[UUID_SIZE], source[300];

    if (reply.ptr == NULL || reply.len >= sizeof topic)
        return;
    snprintf(topic, sizeof topic, "%.*s", (int)reply.len, reply.ptr);
    if (flow_topic_reserved(topic))
        return;
    json_t *data = json_pack(
        "{s:s, s:b, s:s, s:s, s:s, s:s%}", "command", "error", "success", 0,
        "message", message, "error_type", type, "worker_id", w->id,
        "exception_type",
        e && e->exception_type.ptr ? e->exception_type.ptr : "",
        e && e->exception_type.ptr ? (size_t)e->exception_type.len : (size_t)0);
    if (e == NULL || e->exception_type.ptr == NULL)
        json_object_del(data, "exception_type");
    size_t dlen;
    char *text = events_json_dumps(data, &dlen);
    json_decref(data);
    if (text == NULL)
        return;
    uuid_new(id);
    snprintf(source, sizeof source, "urn:workmanager:%s:worker:%s",
             j->dp->d->conf->instance, w->id);
    struct ipc_cloudevent o;
    memset(&o, 0, sizeof o);
    o.id = ipc_str_c(id);
    o.type = ipc_str_c("com.virtufin.workmanager.worker.error");
    o.source = ipc_str_c(source);
    o.specversion = ipc_str_c("1.0");
    o.subject = ipc_str_c(w->id);
    o.datacontenttype = ipc_str_c("application/json");
    o.data.ptr = (const uint8_t *)text;
    o.data.len = (uint32_t)dlen;
    ipc_fb_builder_init(&fb);
    if (flow_prepare_output(in, &o, j->hops + 1, &fb, err, sizeof err) == 0)
        add_out(j, w->tenant, topic, &fb, j->hops + 1 > OUTCOME_MAX_HOPS);
    ipc_fb_builder_free(&fb);
    free(text);
}

/* The outputs of a successful Result, as published. */
static void
prepare_outputs(struct job *j, const struct ipc_cloudevent *in,
                const struct ipc_result *r)
{
    struct worker *w = j->bd->w;
    struct ipc_str reply = ipc_cloudevent_extension(in, "replytopic");
    char topic[256], err[256];

    for (uint32_t i = 0; i < r->outputs.n; i++) {
        struct ipc_cloudevent o;
        struct ipc_fb_builder fb;
        ipc_cloudevent_list_get(&r->outputs, i, &o);
        struct ipc_str t = reply.ptr ? reply : o.type;
        if (t.len == 0 || t.len >= sizeof topic) {
            activity_log(w, LOG_WARNING,
                         "an output has no usable topic; dropped");
            j->dp->st.refused_outputs++;
            continue;
        }
        memcpy(topic, t.ptr, t.len);
        topic[t.len] = '\0';
        if (flow_topic_reserved(topic)) {
            activity_log(w, LOG_WARNING,
                         "an output to the reserved topic %s is refused",
                         topic);
            j->dp->st.refused_outputs++;
            continue;
        }
        ipc_fb_builder_init(&fb);
        if (flow_prepare_output(in, &o, j->hops + 1, &fb, err, sizeof err) !=
            0) {
            activity_log(w, LOG_WARNING, "an output is refused: %s", err);
            j->dp->st.refused_outputs++;
        } else {
            bool loop = j->hops + 1 > OUTCOME_MAX_HOPS;
            if (loop)
                j->dp->st.loops++;
            add_out(j, w->tenant, topic, &fb, loop);
        }
        ipc_fb_builder_free(&fb);
    }
}

/* An attempt of j on w that ended in error_type (not a requeue).  A
 * worker's own error (an exception, a worker error) becomes its last
 * error, a line of its log and a lifecycle error event, the same for a
 * delivery and an invoke; a host's death is recorded where its exit is
 * classified (exits.c), which knows the signal.  The event carries the
 * input's wmhops + 1 (lifecycle.h). */
static void
attempt_failed(struct job *j, struct worker *w, const char *error_type,
               const char *message, const struct ipc_error *e)
{
    w->counters.failed++;
    if (!outcome_is_worker_error(error_type))
        return;
    activity_error_note(w, error_type, message, e);
    activity_log(w, LOG_WARNING, "%s of event %.*s failed: %s",
                 j->d ? "a delivery" : "an invoke", (int)j->in.id.len,
                 j->in.id.ptr ? j->in.id.ptr : "", message);
    json_t *extra = json_pack("{s:s, s:s, s:I, s:s%}", "error_type", error_type,
                              "error_message", message, "delivery",
                              (json_int_t)(j->d ? j->d->count : 1), "event_id",
                              j->in.id.ptr ? j->in.id.ptr : "",
                              j->in.id.ptr ? (size_t)j->in.id.len : (size_t)0);
    if (e && e->exception_type.ptr)
        json_object_set_new(
            extra, "exception_type",
            json_stringn(e->exception_type.ptr, e->exception_type.len));
    if (j->d == NULL)
        json_object_set_new(extra, "invoke", json_true());
    lifecycle_emit_hops(j->dp->d, w, "error", extra, j->hops + 1);
}

static void
on_processed(struct worker *w, const struct ipc_result *r,
             const char *error_type, const char *message, bool delivered,
             void *arg)
{
    struct job *j = arg;
    struct flow *dp = j->dp;
    const struct ipc_error *e = r && r->error.type.ptr ? &r->error : NULL;
    const struct ipc_cloudevent *in = &j->in;
    char msgbuf[512];

    observe(dp, elapsed_s(&j->start));
    if (j->bd == NULL) {
        /* Deleted meanwhile. */
        if (j->icb)
            j->icb(NULL, NULL, "deleted", "the worker was deleted", j->iarg);
        j->icb = NULL;
        j->action = OUTCOME_REQUEUE;
        job_finish(j);
        return;
    }
    if (e) {
        snprintf(msgbuf, sizeof msgbuf, "%.*s", (int)e->message.len,
                 e->message.ptr ? e->message.ptr : "");
        message = msgbuf;
    }
    if (j->icb == NULL && error_type && !delivered &&
        !outcome_is_worker_error(error_type)) {
        /* It never reached the worker's code (supervise_event_cb): its
         * worker failed or stopped, or its host died for a cause not the
         * worker's.  Not a delivery: it waits, uncounted (its worker's
         * subscription is paused while the worker is failed). */
        j->action = OUTCOME_REQUEUE;
        job_finish(j);
        return;
    }
    /* A requeue (stopped, deleted) is no attempt: the event never ran. */
    if (error_type == NULL)
        w->counters.processed++;
    else if (outcome_decide(error_type, 1, 1, false) != OUTCOME_REQUEUE)
        attempt_failed(j, w, error_type, message ? message : error_type, e);
    if (j->icb) {
        j->icb(w, r, error_type, message, j->iarg);
        j->action = OUTCOME_ACK;
        job_release_lock(j);
        job_free(j);
        return;
    }
    j->action =
        outcome_decide(error_type, j->d->count, dp->d->conf->max_redeliveries,
                       dp->d->conf->retry_on_error);
    snprintf(j->reason, sizeof j->reason, "%s", error_type ? error_type : "");
    if (error_type == NULL)
        prepare_outputs(j, in, r);
    else if (outcome_is_worker_error(error_type) && j->action == OUTCOME_ACK)
        prepare_error_reply(j, in, error_type, message ? message : error_type,
                            e);
    if (j->locked && j->nouts) {
        grouplocks_note_write(dp->d->locks, j->tenant, j->group, j->token,
                              on_write_noted, j);
        return;
    }
    job_finish(j);
}

static void
job_process(struct job *j)
{
    struct worker *w = j->bd ? j->bd->w : NULL;
    uint32_t count = j->d ? j->d->count : 1;

    if (w)
        j->bd->token = j->token;
    clock_gettime(CLOCK_MONOTONIC, &j->start);
    /* An invoke (no broker delivery) has no settlement to store: it is
     * not held while the journal cannot write. */
    int rc = w == NULL ? -1
             : j->d
                 ? supervise_process_delivery(j->dp->d->sv, w, j->ev, j->evlen,
                                              count, on_processed, j)
                 : supervise_process(j->dp->d->sv, w, j->ev, j->evlen,
                                     on_processed, j);
    if (rc != 0) {
        if (j->icb) {
            j->icb(w, NULL, "stopped", "the worker cannot take events now",
                   j->iarg);
            job_release_lock(j);
            job_free(j);
            return;
        }
        j->action = OUTCOME_REQUEUE;
        job_finish(j);
    }
}

static void
on_locked(enum grouplock_status st, uint64_t token, const char *message,
          void *arg)
{
    struct job *j = arg;

    if (st == GROUPLOCK_OK) {
        j->locked = true;
        j->token = token;
        if (j->turn && j->bd)
            flow_group_locked(j->bd, token);
        job_process(j);
        return;
    }
    log_info("flow: group %s/%s: %s", j->tenant, j->group, message);
    if (j->icb) {
        j->icb(j->bd ? j->bd->w : NULL, NULL, "lock_contention", message,
               j->iarg);
        job_free(j);
        return;
    }
    j->action = outcome_decide("lock_contention", j->d->count,
                               j->dp->d->conf->max_redeliveries, false);
    snprintf(j->reason, sizeof j->reason, "lock_contention");
    job_finish(j);
}

/* Starts a job on bd's worker with event, stamped with the worker's
 * config when it lacks some of it (a copy then; else borrowed: see struct
 * job).  The event is a broker delivery or an invoke's, both verified or
 * built by the daemon before (flow.h): decoded here, not verified. */
static struct job *
job_new(struct flow *dp, struct binding *bd, const uint8_t *event, size_t len,
        char *err, size_t errlen)
{
    struct worker *w = bd->w;
    struct job *j = calloc(1, sizeof *j);
    struct ipc_cloudevent ce;
    int stamped;

    if (j == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    j->dp = dp;
    j->bd = bd;
    LIST_INSERT_HEAD(&bd->jobs, j, link);
    ipc_fb_builder_init(&j->stamped);
    ipc_cloudevent_decode_trusted(event, &ce);
    stamped =
        stamp_config(&ce, w->config, w->nconfig, &j->stamped, err, errlen);
    if (stamped < 0) {
        job_free(j);
        return NULL;
    }
    if (stamped) {
        j->ev = j->stamped.buf;
        j->evlen = j->stamped.len;
        ipc_cloudevent_decode_trusted(j->ev, &j->in);
    } else {
        j->ev = event;
        j->evlen = len;
        j->in = ce;
    }
    struct ipc_str h = ipc_cloudevent_extension(&j->in, "wmhops");
    j->hops = outcome_hops(h.ptr, h.len);
    snprintf(j->tenant, sizeof j->tenant, "%s", w->tenant);
    if (w->group)
        snprintf(j->group, sizeof j->group, "%s", w->group);
    return j;
}

static void
job_start(struct job *j)
{
    struct worker *w = j->bd->w;

    if (w->group)
        grouplocks_acquire(j->dp->d->locks, w->tenant, w->group, on_locked, j);
    else
        job_process(j);
}

/* A delivery that cannot start: back to the queue, later, uncounted (it
 * did not reach a worker). */
void
flow_delivery_refuse(struct flow *dp, struct broker_delivery *d,
                     const char *why)
{
    log_warning("flow: an event of %s/%s cannot start: %s", d->tenant, d->topic,
                why);
    broker_release(
        d, outcome_delay_ms(dp->d->conf->redelivery_base_delay_ms, d->count));
}

/* The job of delivery d on bd's worker, not started; NULL when the event
 * cannot be processed by it (settled here: dead-lettered, or released). */
static struct job *
delivery_job(struct flow *dp, struct binding *bd, struct broker_delivery *d)
{
    char err[256] = "";
    struct job *j = job_new(dp, bd, d->event, d->len, err, sizeof err);

    if (j == NULL) {
        /* Config stamping failed (too many extensions): the event itself
         * cannot be processed by this worker, ever.  Acknowledged once
         * its dead letter is stored. */
        activity_log(bd->w, LOG_WARNING, "an event of %s is dead-lettered: %s",
                     d->topic, err);
        if (flow_dead_letter(dp, d->tenant, d->topic, d->event, "worker_error",
                             d->count) != 0) {
            flow_delivery_refuse(dp, d, "its dead letter was refused");
            return NULL;
        }
        bd->w->counters.dead_lettered++;
        broker_ack(d);
        return NULL;
    }
    j->d = d;
    struct tenant_meter *m = tenant_meter_get(bd->w->tenant);
    if (m)
        m->events_out++;
    return j;
}

void
flow_deliver_to(struct flow *dp, struct binding *bd, struct broker_delivery *d)
{
    struct job *j = delivery_job(dp, bd, d);

    if (j)
        job_start(j);
}

bool
flow_deliver_turn(struct flow *dp, struct binding *bd,
                  struct broker_delivery *d, uint64_t token)
{
    struct job *j = delivery_job(dp, bd, d);

    if (j == NULL)
        return false;
    j->turn = true;
    if (token == 0) {
        job_start(j);
        return true;
    }
    j->locked = true;
    j->token = token;
    job_process(j);
    return true;
}

/* ---- the API's doors --------------------------------------------------- */

int
flow_publish(struct flow *dp, const char *tenant, const char *topic,
             const uint8_t *event, size_t len, broker_publish_cb cb, void *arg)
{
    int rc = broker_publish(dp->d->broker, tenant, topic, event, len, cb, arg);

    if (rc == 0)
        meter_in(tenant);
    return rc;
}

int
flow_publish_batch(struct flow *dp, const char *tenant, const char *topic,
                   const struct broker_event *evs, size_t n,
                   broker_publish_cb cb, void *arg, size_t *accepted)
{
    size_t ok = 0;
    int rc = broker_publish_batch(dp->d->broker, tenant, topic, evs, n, cb, arg,
                                  &ok);
    struct tenant_meter *m = tenant_meter_get(tenant);

    if (m)
        m->events_in += ok;
    if (accepted)
        *accepted = ok;
    return rc;
}

int
flow_invoke(struct flow *dp, struct worker *w, const uint8_t *event, size_t len,
            flow_invoke_cb cb, void *arg)
{
    char err[256] = "";
    struct binding *bd;
    struct job *j;

    if (w->binding == NULL || w->status != WORKER_RUNNING) {
        errno = ENOTCONN;
        return -1;
    }
    /* Its queue: what its subscription holds and the invokes under way. */
    bd = w->binding;
    if (broker_sub_backlog(bd->sub ? bd->sub : bd->g->sub) + bd->invokes >=
        dp->d->conf->queue_max_events) {
        admit_note_refused(ADMIT_SUBSCRIBER_FULL);
        w->counters.refused++;
        errno = EAGAIN;
        return -1;
    }
    j = job_new(dp, bd, event, len, err, sizeof err);
    if (j == NULL) {
        errno = ENOMEM;
        return -1;
    }
    j->icb = cb;
    j->iarg = arg;
    bd->invokes++;
    struct tenant_meter *m = tenant_meter_get(w->tenant);
    if (m)
        m->invocations++;
    job_start(j);
    return 0;
}

struct noted {
    void (*cb)(int rc, const char *message, void *arg);
    void *arg;
};

static void
on_noted(enum grouplock_status st, uint64_t token, const char *message,
         void *arg)
{
    struct noted *n = arg;

    (void)token;
    n->cb(st == GROUPLOCK_OK ? 0 : -1, message, n->arg);
    free(n);
}

void
flow_note_write(struct flow *dp, struct worker *w,
                void (*cb)(int rc, const char *message, void *arg), void *arg)
{
    struct noted *n;
    uint64_t token = flow_token(w);

    if (w->group == NULL || token == 0 || (n = malloc(sizeof *n)) == NULL) {
        /* Not grouped, or not processing an event under a lock: no fence
         * applies. */
        cb(0, NULL, arg);
        return;
    }
    n->cb = cb;
    n->arg = arg;
    grouplocks_note_write(dp->d->locks, w->tenant, w->group, token, on_noted,
                          n);
}

/* ---- life ------------------------------------------------------------ */

/* The broker cannot store settlements (a full disk), or can again: the
 * deliveries taken but not yet in a host wait meanwhile. */
static void
on_storage(bool writable, void *arg)
{
    struct flow *dp = arg;

    if (dp->d->sv)
        supervise_hold_deliveries(dp->d->sv, !writable);
}

/* The broker stopped delivering an event whose deliveries all ended
 * without an outcome (their instances died): its dead letter says
 * timeout, as for a delivery that never answered. */
static void
on_exhausted(const char *tenant, const char *topic, const uint8_t *event,
             size_t len, uint32_t deliveries, void *arg)
{
    (void)len;
    flow_dead_letter(arg, tenant, topic, event, "timeout", deliveries);
}

struct flow *
flow_new(struct daemon *d)
{
    struct flow *dp = calloc(1, sizeof *dp);

    if (dp == NULL)
        return NULL;
    dp->d = d;
    LIST_INIT(&dp->groups);
    LIST_INIT(&dp->bindings);
    if (d->broker) {
        broker_set_storage_hook(d->broker, on_storage, dp);
        broker_set_exhausted_hook(d->broker, on_exhausted, dp);
    }
    return dp;
}

void
flow_free(struct flow *dp)
{
    struct binding *bd;
    struct group *g;

    if (dp == NULL)
        return;
    if (dp->d->broker) {
        broker_set_storage_hook(dp->d->broker, NULL, NULL);
        broker_set_exhausted_hook(dp->d->broker, NULL, NULL);
    }
    /* Shutdown: the broker, closed next, frees the subscriptions; their
     * backlogs stay journaled for the next start. */
    while ((bd = LIST_FIRST(&dp->bindings)) != NULL) {
        struct job *j;
        while ((j = LIST_FIRST(&bd->jobs)) != NULL) {
            LIST_REMOVE(j, link);
            j->bd = NULL;
        }
        LIST_REMOVE(bd, link);
        bd->w->binding = NULL;
        free(bd);
    }
    while ((g = LIST_FIRST(&dp->groups)) != NULL) {
        LIST_REMOVE(g, link);
        flow_group_free(g);
    }
    free(dp);
}

void
flow_stats(const struct flow *dp, struct flow_stats *out)
{
    *out = dp->st;
}
