/*
 * outcome.h — what happens to an event after its worker ran (DESIGN §6):
 * the pure rules, apart from the machinery that applies them (flow.c),
 * so that they are tested on their own.
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

/* The delay before redelivery number n (n >= 1): base × 2^(n−1), capped at
 * OUTCOME_MAX_DELAY_MS. */
uint32_t outcome_delay_ms(uint64_t base_ms, uint32_t n);

/* The hop count of an event from its wmhops extension (0 when absent or
 * not a plain decimal number). */
uint32_t outcome_hops(const char *value, size_t len);

#endif /* WM_MASTER_OUTCOME_H */
