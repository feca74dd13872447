/*
 * outcome.c — the rules of outcome.h.
 */
#include "config.h"

#include "master/broker/outcome.h"

#include <stddef.h>
#include <string.h>

bool
outcome_is_worker_error(const char *error_type)
{
    static const char *const own[] = { "exception", "worker_error",
                                       "output_too_large" };

    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (strcmp(error_type, own[i]) == 0)
            return true;
    return false;
}

enum outcome_action
outcome_decide(const char *error_type, uint32_t count,
               unsigned max_redeliveries, bool retry_on_error)
{
    if (error_type == NULL)
        return OUTCOME_ACK;
    if (strcmp(error_type, "stopped") == 0 ||
        strcmp(error_type, "deleted") == 0)
        return OUTCOME_REQUEUE;
    if (outcome_is_worker_error(error_type) && !retry_on_error)
        return OUTCOME_ACK;
    /* count deliveries happened; max_redeliveries + 1 are allowed. */
    if (count > max_redeliveries)
        return OUTCOME_DEAD;
    return OUTCOME_RETRY;
}

enum outcome_action
outcome_unstored(enum outcome_action action, uint32_t count,
                 unsigned max_redeliveries)
{
    if (action == OUTCOME_ACK)
        action = outcome_decide(OUTCOME_OUTPUT_REFUSED, count, max_redeliveries,
                                false);
    else if (action == OUTCOME_DEAD)
        action = OUTCOME_RETRY;
    return action;
}

uint32_t
outcome_delay_ms(uint64_t base_ms, uint32_t n)
{
    uint64_t d = base_ms;

    for (uint32_t i = 1; i < n && d < OUTCOME_MAX_DELAY_MS; i++)
        d *= 2;
    return d > OUTCOME_MAX_DELAY_MS ? OUTCOME_MAX_DELAY_MS : (uint32_t)d;
}

uint32_t
outcome_hops(const char *value, size_t len)
{
    uint32_t n = 0;

    if (value == NULL || len == 0 || len > 9)
        return 0;
    for (size_t i = 0; i < len; i++) {
        if (value[i] < '0' || value[i] > '9')
            return 0;
        n = n * 10 + (uint32_t)(value[i] - '0');
    }
    return n;
}
