/*
 * instance_state.c — the state rule of the instances sharing a store
 * (instances.h): a pure function of how long ago another instance's
 * heartbeat last changed, apart from the daemon so that a unit test
 * (tests/unit/test_instances) can hold it to its boundaries.
 */
#include "config.h"

#include "master/workers/instances.h"

static const char *const state_names[] = {
    [INSTANCE_CONNECTED] = "connected",
    [INSTANCE_DISCONNECTED] = "disconnected",
    [INSTANCE_DEAD] = "dead",
};

const char *
instance_state_name(enum instance_state s)
{
    return state_names[s];
}

enum instance_state
instance_state_of(long long age_ms, unsigned disconnected_ms, unsigned dead_ms)
{
    if (age_ms >= (long long)dead_ms)
        return INSTANCE_DEAD;
    if (age_ms >= (long long)disconnected_ms)
        return INSTANCE_DISCONNECTED;
    return INSTANCE_CONNECTED;
}
