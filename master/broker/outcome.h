/*
 * outcome.h — what happens to an event after its worker ran (DESIGN §6):
 * the pure rules, apart from the machinery that applies them (flow.c),
 * so that they are tested on their own.
 *
 * An event is acknowledged only once what replaces it is stored: its
 * outputs (and error reply) when it succeeded, its dead letter when it
 * dies.  When the broker refuses one of them (the journal's budget is
 * exhausted, its disk is full, it failed), the event is not acknowledged:
 * outcome_unstored() turns the action into a redelivery, under the
 * transient-failure rules with the reason `output_refused` (redelivered
 * with a growing delay, then dead-lettered), and a dead letter that cannot
 * be stored either keeps the event for another try.  A redelivery
 * publishes again the outputs that were stored the first time: at least
 * once, as everywhere.
 */
#ifndef WM_MASTER_OUTCOME_H
#define WM_MASTER_OUTCOME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Routing loops stop here: an output whose wmhops would exceed it is
 * dead-lettered with reason `loop`. */
#define OUTCOME_MAX_HOPS 16u
/* The cap of the redelivery delay. */
#define OUTCOME_MAX_DELAY_MS 10000u

enum outcome_action {
    OUTCOME_ACK = 0, /* done: success, or a worker error acknowledged */
    OUTCOME_RETRY,   /* nack: deliver again after outcome_delay_ms() */
    OUTCOME_DEAD,    /* dead-letter to <topic>-dead, then ack */
    OUTCOME_REQUEUE, /* not the event's fault (its worker stopped): back to
                        the queue without counting a delivery */
};

/* Whether error_type (DESIGN §6's vocabulary) is the worker's own error
 * (exception, worker_error, output_too_large) rather than a transient
 * failure of its host or of the infrastructure. */
bool outcome_is_worker_error(const char *error_type);

/* The action for an event's delivery number `count` (1 = first) that ended
 * with error_type (NULL = success).  Worker errors are acknowledged unless
 * retry_on_error; transient failures retry until count exceeds
 * max_redeliveries, then dead-letter; "stopped" and "deleted" (the worker
 * went away meanwhile) requeue. */
enum outcome_action outcome_decide(const char *error_type, uint32_t count,
                                   unsigned max_redeliveries,
                                   bool retry_on_error);

/* The reason of an event whose outputs the broker refused (a transient
 * failure of the infrastructure, not the worker's). */
#define OUTCOME_OUTPUT_REFUSED "output_refused"

/* The action that replaces `action` (chosen for delivery `count`) when
 * something it would have stored was refused by the broker: an ACK (its
 * outputs refused) becomes outcome_decide(OUTCOME_OUTPUT_REFUSED, ...),
 * that is a RETRY, or DEAD past max_redeliveries; a DEAD (its dead letter
 * refused) becomes RETRY, so that the event waits for room rather than
 * being lost.  Never ACK. */
enum outcome_action outcome_unstored(enum outcome_action action, uint32_t count,
                                     unsigned max_redeliveries);

/* The delay before redelivery number n (n >= 1): base × 2^(n−1), capped at
 * OUTCOME_MAX_DELAY_MS. */
uint32_t outcome_delay_ms(uint64_t base_ms, uint32_t n);

/* The hop count of an event from its wmhops extension (0 when absent or
 * not a plain decimal number). */
uint32_t outcome_hops(const char *value, size_t len);

#endif /* WM_MASTER_OUTCOME_H */
