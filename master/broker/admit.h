/*
 * admit.h — backpressure at the door (DESIGN §6): whether a publish or an
 * invoke is accepted while the queues behind it are full, and the count of
 * what was refused.
 *
 * The rule (broker.h, Backpressure): an event is accepted only if every
 * queue it goes to can hold it, so that nothing answered 202 is dropped
 * afterwards; a publish that does not fit is refused whole with 503 and
 * Retry-After.  Topics named by drop_oldest_topics, and the daemon's own
 * (workmanager.*: its events never wait for a subscriber), choose the
 * other policy: their full queues dead-letter their oldest waiting event
 * (reason backlog_overflow) and take every publish.
 */
#ifndef WM_MASTER_BROKER_ADMIT_H
#define WM_MASTER_BROKER_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct conf;
struct daemon;

/* Why a request was refused at the door (the `reason` label of
 * workmanager_publish_refused_total). */
enum admit_reason {
    ADMIT_SUBSCRIBER_FULL = 0, /* a subscriber's queue is full */
    ADMIT_JOURNAL_FULL,        /* the journal's budget is exhausted */
    ADMIT_NREASONS
};

/* Whether subscriptions to topic drop their oldest event when full
 * (drop_oldest_topics, or a workmanager.* topic) rather than refuse. */
bool admit_drop_oldest(const struct conf *c, const char *topic);

/* Whether n events published to (tenant, topic) fit every queue of the
 * topic now (broker_admit()).  Returns 0, or -1 with errno EAGAIN, the
 * refusal counted (ADMIT_SUBSCRIBER_FULL), a message in why naming the
 * full worker (or group) and queue_max_events, and the subscription's
 * name (a worker id, or group:<name>) in who. */
int admit_publish(struct daemon *d, const char *tenant, const char *topic,
                  size_t n, char *why, size_t whylen, char *who, size_t wholen);

/* Counts one request refused at the door for reason r. */
void admit_note_refused(enum admit_reason r);

/* Requests refused at the door for reason r, since start-up. */
uint64_t admit_refused(enum admit_reason r);
/* The metric label of r: "subscriber_full", "journal_full". */
const char *admit_reason_name(enum admit_reason r);

#endif /* WM_MASTER_BROKER_ADMIT_H */
