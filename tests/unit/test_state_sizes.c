/*
 * test_state_sizes.c — unit tests of master/broker/state_sizes.c: the
 * sizes of the state keys the gateway keeps for the state quotas: put,
 * replace, remove, growth past many buckets with every key still found,
 * and clear.
 */
#include "config.h"

#include <stdio.h>

#include "master/broker/state_sizes.h"

#include "tests/unit/check.h"

static void
test_put_get_remove(void)
{
    size_t len = 99;

    CHECK(!state_sizes_get("workmanager/state/w/a", &len));
    CHECK_EQ(len, 99u);                          /* untouched when unknown */
    state_sizes_remove("workmanager/state/w/a"); /* unknown: no-op */
    CHECK_EQ(state_sizes_put("workmanager/state/w/a", 5), 0);
    CHECK(state_sizes_get("workmanager/state/w/a", &len));
    CHECK_EQ(len, 5u);
    CHECK_EQ(state_sizes_put("workmanager/state/w/a", 0), 0); /* replaced */
    CHECK(state_sizes_get("workmanager/state/w/a", &len));
    CHECK_EQ(len, 0u);
    CHECK_EQ(state_sizes_count(), 1u);
    CHECK(!state_sizes_get("workmanager/state/w/b", &len));
    state_sizes_remove("workmanager/state/w/a");
    CHECK(!state_sizes_get("workmanager/state/w/a", &len));
    CHECK_EQ(state_sizes_count(), 0u);
}

static void
test_many_keys(void)
{
    char key[64];
    size_t len;
    unsigned missing = 0;

    for (unsigned i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "workmanager/state/w%u/k", i);
        REQUIRE(state_sizes_put(key, i) == 0);
    }
    CHECK_EQ(state_sizes_count(), 5000u);
    for (unsigned i = 0; i < 5000; i += 2) {
        snprintf(key, sizeof key, "workmanager/state/w%u/k", i);
        state_sizes_remove(key);
    }
    CHECK_EQ(state_sizes_count(), 2500u);
    for (unsigned i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "workmanager/state/w%u/k", i);
        bool found = state_sizes_get(key, &len);
        if (found != (i % 2 == 1) || (found && len != i))
            missing++;
    }
    CHECK_EQ(missing, 0u);
    state_sizes_clear();
    CHECK_EQ(state_sizes_count(), 0u);
    CHECK(!state_sizes_get("workmanager/state/w1/k", &len));
    CHECK_EQ(state_sizes_put("workmanager/state/w1/k", 3), 0); /* reusable */
    state_sizes_clear();
}

int
main(void)
{
    RUN(test_put_get_remove);
    RUN(test_many_keys);
    return check_result();
}
