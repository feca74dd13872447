/*
 * test_outcome.c — the rules of master/broker/outcome.h: what each outcome does
 * to an event, the redelivery schedule, the hop counter.
 */
#include "config.h"

#include "master/broker/outcome.h"

#include "check.h"

static void
test_decide(void)
{
    /* Success acks. */
    CHECK_EQ(outcome_decide(NULL, 1, 3, false), OUTCOME_ACK);
    /* A worker's own error acks, unless retry_on_error. */
    CHECK_EQ(outcome_decide("exception", 1, 3, false), OUTCOME_ACK);
    CHECK_EQ(outcome_decide("worker_error", 1, 3, false), OUTCOME_ACK);
    CHECK_EQ(outcome_decide("output_too_large", 1, 3, false), OUTCOME_ACK);
    CHECK_EQ(outcome_decide("exception", 1, 3, true), OUTCOME_RETRY);
    CHECK_EQ(outcome_decide("exception", 4, 3, true), OUTCOME_DEAD);
    /* Transient failures retry max_redeliveries times: 4 deliveries in
     * all, the 4th failure dead-letters. */
    static const char *const transient[] = { "crash",     "timeout",
                                             "oom",       "seccomp",
                                             "protocol",  "lock_contention",
                                             "load_error" };
    for (size_t i = 0; i < sizeof transient / sizeof transient[0]; i++) {
        for (uint32_t n = 1; n <= 3; n++)
            CHECK_EQ(outcome_decide(transient[i], n, 3, false), OUTCOME_RETRY);
        CHECK_EQ(outcome_decide(transient[i], 4, 3, false), OUTCOME_DEAD);
    }
    CHECK_EQ(outcome_decide("crash", 1, 0, false), OUTCOME_DEAD);
    /* The worker went away: not the event's fault. */
    CHECK_EQ(outcome_decide("stopped", 7, 3, false), OUTCOME_REQUEUE);
    CHECK_EQ(outcome_decide("deleted", 1, 3, false), OUTCOME_REQUEUE);
    CHECK(outcome_is_worker_error("exception"));
    CHECK(!outcome_is_worker_error("crash"));
}

static void
test_unstored(void)
{
    /* Outputs refused: a transient failure, output_refused. */
    CHECK_EQ(outcome_decide(OUTCOME_OUTPUT_REFUSED, 1, 3, true), OUTCOME_RETRY);
    for (uint32_t n = 1; n <= 3; n++)
        CHECK_EQ(outcome_unstored(OUTCOME_ACK, n, 3), OUTCOME_RETRY);
    CHECK_EQ(outcome_unstored(OUTCOME_ACK, 4, 3), OUTCOME_DEAD);
    CHECK_EQ(outcome_unstored(OUTCOME_ACK, 1, 0), OUTCOME_DEAD);
    /* The dead letter refused: kept for another try, however late. */
    CHECK_EQ(outcome_unstored(OUTCOME_DEAD, 4, 3), OUTCOME_RETRY);
    CHECK_EQ(outcome_unstored(OUTCOME_DEAD, 1000, 3), OUTCOME_RETRY);
    /* Nothing stored by these: unchanged. */
    CHECK_EQ(outcome_unstored(OUTCOME_RETRY, 1, 3), OUTCOME_RETRY);
    CHECK_EQ(outcome_unstored(OUTCOME_REQUEUE, 9, 3), OUTCOME_REQUEUE);
    CHECK(!outcome_is_worker_error(OUTCOME_OUTPUT_REFUSED));
}

static void
test_schedule(void)
{
    /* base × 2^(n−1), capped at 10 s. */
    CHECK_EQ(outcome_delay_ms(200, 1), 200);
    CHECK_EQ(outcome_delay_ms(200, 2), 400);
    CHECK_EQ(outcome_delay_ms(200, 3), 800);
    CHECK_EQ(outcome_delay_ms(200, 4), 1600);
    CHECK_EQ(outcome_delay_ms(200, 6), 6400);
    CHECK_EQ(outcome_delay_ms(200, 7), 10000);
    CHECK_EQ(outcome_delay_ms(200, 1000), 10000);
    CHECK_EQ(outcome_delay_ms(60000, 1), 10000);
    CHECK_EQ(outcome_delay_ms(1, 0), 1);
}

static void
test_hops(void)
{
    CHECK_EQ(outcome_hops(NULL, 0), 0);
    CHECK_EQ(outcome_hops("0", 1), 0);
    CHECK_EQ(outcome_hops("15", 2), 15);
    CHECK_EQ(outcome_hops("16", 2), 16);
    CHECK_EQ(outcome_hops("1x", 2), 0);
    CHECK_EQ(outcome_hops("-3", 2), 0);
    CHECK_EQ(outcome_hops("12345678901", 11), 0);
    CHECK_EQ(OUTCOME_MAX_HOPS, 16);
}

int
main(void)
{
    RUN(test_decide);
    RUN(test_unstored);
    RUN(test_schedule);
    RUN(test_hops);
    return check_result();
}
