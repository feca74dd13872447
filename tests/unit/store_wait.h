/*
 * store_wait.h — what the state store's unit tests (test_store.c,
 * test_store_nats.c) share: a write's result, its callback and waiting on
 * the test's loop until every callback expected has run.
 *
 * A test program includes it once, after check.h, and sets `base` to its
 * event_base before the first write; `pending` counts the callbacks still
 * expected.  The callback notes whether it ran on the thread that set
 * `loop_thread` (store.h: every callback runs on the loop thread).
 */
#ifndef WM_TESTS_STORE_WAIT_H
#define WM_TESTS_STORE_WAIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "master/store/store.h"

static struct event_base *base;
static pthread_t loop_thread;
static int pending; /* callbacks expected and not yet run */

struct result {
    bool done, on_loop;
    enum store_status status;
    uint64_t revision;
    char message[2048];
};

static void
on_done(enum store_status status, uint64_t revision, const char *message,
        void *arg)
{
    struct result *r = arg;

    r->done = true;
    r->on_loop = pthread_equal(pthread_self(), loop_thread) != 0;
    r->status = status;
    r->revision = revision;
    snprintf(r->message, sizeof r->message, "%s",
             message != NULL ? message : "");
    pending--;
}

/* Runs the loop until every expected callback has run. */
static void
wait_all(void)
{
    while (pending > 0) {
        if (event_base_loop(base, EVLOOP_ONCE) < 0) {
            fprintf(stderr, "event_base_loop failed\n");
            abort();
        }
    }
}

static struct result
put_wait(struct store *st, const char *key, const char *value,
         uint64_t expected)
{
    struct result r = { 0 };

    pending++;
    if (store_put(st, key, (const uint8_t *)value, strlen(value), expected,
                  on_done, &r) != 0) {
        pending--;
        r.status = STORE_INVALID;
        return r;
    }
    wait_all();
    return r;
}

static struct result
delete_wait(struct store *st, const char *key, uint64_t expected)
{
    struct result r = { 0 };

    pending++;
    if (store_delete(st, key, expected, on_done, &r) != 0) {
        pending--;
        r.status = STORE_INVALID;
        return r;
    }
    wait_all();
    return r;
}

#endif /* WM_TESTS_STORE_WAIT_H */
