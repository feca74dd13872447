/*
 * test_instances.c — the state rule of the instances that share a store
 * (master/workers/instance_state.c): connected while the heartbeat is
 * fresh, disconnected from instance_disconnected_ms of silence, dead from
 * instance_dead_ms, boundaries included; and the states' names.
 * (Boundaries after the helper "instances"'s test on its branch.)
 */
#include "config.h"

#include "master/workers/instances.h"
#include "tests/unit/check.h"

static void
test_thresholds(void)
{
    CHECK(instance_state_of(0, 3000, 10000) == INSTANCE_CONNECTED);
    CHECK(instance_state_of(2999, 3000, 10000) == INSTANCE_CONNECTED);
    CHECK(instance_state_of(3000, 3000, 10000) == INSTANCE_DISCONNECTED);
    CHECK(instance_state_of(9999, 3000, 10000) == INSTANCE_DISCONNECTED);
    CHECK(instance_state_of(10000, 3000, 10000) == INSTANCE_DEAD);
    CHECK(instance_state_of(500000, 3000, 10000) == INSTANCE_DEAD);
}

static void
test_a_heartbeat_seen_after_now(void)
{
    /* Ages are this daemon's monotonic clock; a negative one (a change
     * seen in the same turn) is fresh. */
    CHECK(instance_state_of(-5, 3000, 10000) == INSTANCE_CONNECTED);
}

static void
test_names(void)
{
    CHECK_STR(instance_state_name(INSTANCE_CONNECTED), "connected");
    CHECK_STR(instance_state_name(INSTANCE_DISCONNECTED), "disconnected");
    CHECK_STR(instance_state_name(INSTANCE_DEAD), "dead");
}

int
main(void)
{
    RUN(test_thresholds);
    RUN(test_a_heartbeat_seen_after_now);
    RUN(test_names);
    return check_result();
}
