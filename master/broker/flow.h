/*
 * flow.h — the message flow between the broker and the workers
 * (DESIGN §6): subscriptions of workers and groups, group locks, outcomes,
 * output routing, dead letters.  The daemon's own events are emit.h's.
 *
 * Each worker is bound to one durable broker subscription: its own (named
 * by its id) or, for a worker with a group, the group's subscription on its
 * topic (named "group:<group>"), whose deliveries go to one running member
 * at a time, round robin in turns of a few events each (a host fed in a row
 * stays awake), under the group lock.  The subscription follows
 * the worker's desired status: running delivers, suspended queues, stopped
 * keeps its backlog and queues nothing new; a running worker whose state is
 * failed (a crash loop, a failed load) queues as a suspended one does,
 * until a start resets it (its events wait, DESIGN §6, §7).
 *
 * A delivery is stamped with the worker's config, processed on its host,
 * then settled by outcome.h's rules: outputs published (to the input's
 * replytopic, else to their type; correlationid, traceparent and
 * tracestate carried over; wmhops counted) and the event acked; a worker
 * error acked with a worker.error event and an error reply to replytopic;
 * a transient failure nacked with a growing delay, then dead-lettered to
 * <topic>-dead with deadletterreason and deliverycount.  An event is
 * acknowledged only once its outputs (or its dead letter) are stored: one
 * the broker refuses makes it a transient failure, output_refused.  Only
 * an attempt that reached the worker's host counts as a delivery
 * (supervise_event_cb): one that failed while queued in the master, or
 * whose host died for a cause not the worker's, goes back uncounted
 * (broker_release()).
 *
 * Trust: an event is verified once, where it comes into the process, and
 * decoded afterwards with ipc_cloudevent_decode_trusted(), never verified
 * again (its bytes do not change on the way):
 *   - a client's event (publish, invoke) and a worker's gateway publish
 *     are built by events.c from JSON whose every rule it checked;
 *   - a host's outputs are verified with its Result frame (ipc_frame_read()
 *     in ipc/, by the supervisor's channel), the CloudEvent rules included;
 *   - the journal's events are checked as they are replayed
 *     (flow_event_verify(), as broker_config.verify);
 *   - the daemon's own (stamped copies, outputs as published, dead
 *     letters, error replies, its events) are written by
 *     ipc_cloudevent_encode() (stamp.c checks the CloudEvent rules of each
 *     such new event).
 * A job borrows its event: the delivery's bytes (valid until the job
 * settles it) or the invoke's (valid until its callback), and lends them
 * to the supervisor until its callback; a copy is made only when the
 * worker's config adds extensions.
 */
#ifndef WM_MASTER_DISPATCH_H
#define WM_MASTER_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ipc/cloudevent.h"
#include "ipc/frame.h"
#include "master/broker/broker.h"

struct daemon;
struct flow;
struct worker;

struct flow *flow_new(struct daemon *d);
void flow_free(struct flow *dp);

/* Binds w to its subscription, in the mode of its status.  Returns 0, or
 * -1 with a message. */
int flow_attach(struct flow *dp, struct worker *w, char *err, size_t errlen);
/* w's status changed, or its state went to or from failed. */
void flow_status(struct flow *dp, struct worker *w);
/* w is being deleted: its backlog is dropped (a group's stays while the
 * group has members), its events in flight end. */
void flow_detach(struct flow *dp, struct worker *w);

/* The check of an event read back from outside the process (the
 * journal's, as it is replayed: broker_config.verify): a well-formed ABI
 * CloudEvent buffer that keeps the CloudEvent rules.  Returns 0, or -1
 * (the cause logged). */
int flow_event_verify(const uint8_t *event, size_t len);

/* Whether topic is one of the daemon's own (workmanager.*): only the
 * daemon publishes there, never a worker's output, the publish route or
 * the gateway. */
bool flow_topic_reserved(const char *topic);

/* Publishes an event from outside (the API, the gateway): see
 * broker_publish(). */
int flow_publish(struct flow *dp, const char *tenant, const char *topic,
                 const uint8_t *event, size_t len, broker_publish_cb cb,
                 void *arg);

/* Publishes a batch from the API: see broker_publish_batch(). */
int flow_publish_batch(struct flow *dp, const char *tenant, const char *topic,
                       const struct broker_event *evs, size_t n,
                       broker_publish_cb cb, void *arg, size_t *accepted);

/* Invoke: processes one event (an ABI CloudEvent buffer, 8-aligned, built
 * or verified by the caller: see Trust above) on w, stamped with w's
 * config, under its group lock, outside the broker; cb gets the Result.
 * The event is borrowed: it must stay valid until cb runs (cb may free
 * it).  Returns -1 (cb not called) with errno EAGAIN when w's queue (its
 * subscription's backlog and its invokes under way) holds
 * queue_max_events already (the refusal counted: admit.h), else when w
 * cannot take events now. */
typedef void (*flow_invoke_cb)(struct worker *w, const struct ipc_result *r,
                               const char *error_type, const char *message,
                               void *arg);
int flow_invoke(struct flow *dp, struct worker *w, const uint8_t *event,
                size_t len, flow_invoke_cb cb, void *arg);

/* The copy of output o of input `in` as published: correlationid,
 * traceparent and tracestate from the input when o lacks them; wmhops set
 * to hops (0: left out).  Returns 0, or -1 with a message. */
int flow_prepare_output(const struct ipc_cloudevent *in,
                        const struct ipc_cloudevent *o, uint32_t hops,
                        struct ipc_fb_builder *fb, char *err, size_t errlen);

/* The group lock token under which w is processing now, 0 if none (the
 * gateway's writes are writes under it). */
uint64_t flow_token(const struct worker *w);

/* A write under w's token (gateway state, publish): cb(0) when allowed,
 * cb(-1) with a message when the token is stale. */
void flow_note_write(struct flow *dp, struct worker *w,
                     void (*cb)(int rc, const char *message, void *arg),
                     void *arg);

/* The processing latency histogram (seconds), for /metrics. */
#define DISPATCH_BUCKETS 14
extern const double flow_bucket_bounds[DISPATCH_BUCKETS];
struct flow_stats {
    uint64_t buckets[DISPATCH_BUCKETS]; /* cumulative per bound */
    uint64_t count;
    double sum;
    uint64_t dead_lettered;
    uint64_t loops;
    uint64_t refused_outputs; /* reserved topics, stale tokens, the broker */
};
void flow_stats(const struct flow *dp, struct flow_stats *out);

#endif /* WM_MASTER_DISPATCH_H */
