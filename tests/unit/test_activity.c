/*
 * test_activity.c — a worker's last error and log ring
 * (master/workers/activity.c): the ring keeps at most its limit in bytes,
 * dropping the oldest lines first, numbers every line, escapes what a
 * host sends, tells followers of each line and of the worker's end; the
 * last error keeps a death's signal only for the same death.
 */
#include "config.h"

#include <string.h>

#include "ipc/frame.h"
#include "master/workers/activity.h"
#include "master/workers/worker.h"
#include "tests/unit/check.h"

static struct worker *
worker_new(void)
{
    struct worker *w = calloc(1, sizeof *w);
    snprintf(w->id, sizeof w->id, "%s", "7d4c8a30-5b1e-4f6a-9c2d-0e1f2a3b4c5d");
    w->name = strdup("pricer");
    return w;
}

static void
test_ring_bound(void)
{
    struct worker *w = worker_new();
    char line[16];

    activity_log_limit_set(40); /* four lines of 10 bytes */
    CHECK(activity_log_count(w) == 0 && activity_log_at(w, 0) == NULL);
    for (int i = 0; i < 6; i++) {
        snprintf(line, sizeof line, "line %05d", i);
        activity_log_add(w, LOG_INFO, true, line, strlen(line));
    }
    REQUIRE(activity_log_count(w) == 4);
    CHECK(strcmp(activity_log_at(w, 0)->text, "line 00002") == 0);
    CHECK(activity_log_at(w, 0)->seq == 3);
    CHECK(strcmp(activity_log_at(w, 3)->text, "line 00005") == 0);
    CHECK(activity_log_at(w, 3)->seq == 6 && activity_log_at(w, 3)->host);
    CHECK(activity_log_at(w, 4) == NULL);
    /* Longer than the limit alone: not kept, but counted. */
    char big[41];
    memset(big, 'x', sizeof big);
    activity_log_add(w, LOG_INFO, true, big, sizeof big);
    CHECK(activity_log_count(w) == 4);
    activity_log_add(w, LOG_INFO, false, "short", 5);
    CHECK(activity_log_at(w, 3)->seq == 8 && !activity_log_at(w, 3)->host);
    activity_log_limit_set(0);
    activity_log_add(w, LOG_INFO, true, "dropped", 7);
    CHECK(activity_log_count(w) == 4);
    activity_log_limit_set(64 * 1024);
    worker_free(w);
}

static void
test_escaped(void)
{
    struct worker *w = worker_new();
    const char raw[] = "a\nb\x1b[31m\xff\\";

    activity_log_add(w, LOG_WARNING, true, raw, sizeof raw - 1);
    REQUIRE(activity_log_count(w) == 1);
    const struct activity_line *l = activity_log_at(w, 0);
    CHECK(strcmp(l->text, "a\\x0ab\\x1b[31m\\xff\\x5c") == 0);
    CHECK(l->len == strlen(l->text) && l->level == LOG_WARNING);
    worker_free(w);
}

static int seen, ended;

static void
on_line(const struct activity_line *l, void *arg)
{
    (void)arg;
    if (l)
        seen++;
    else
        ended++;
}

static void
test_followers(void)
{
    struct worker *w = worker_new();
    struct activity_follower *a = activity_follow(w, on_line, NULL);
    struct activity_follower *b = activity_follow(w, on_line, NULL);
    char label[160];

    REQUIRE(a && b);
    activity_log(w, LOG_INFO, "host pid %d exited", 42);
    CHECK(seen == 2);
    CHECK(strcmp(activity_log_at(w, 0)->text, "host pid 42 exited") == 0);
    activity_unfollow(a);
    activity_log_add(w, LOG_INFO, true, "x", 1);
    CHECK(seen == 3);
    CHECK(strcmp(activity_label(w, label, sizeof label),
                 "pricer (7d4c8a30-5b1e-4f6a-9c2d-0e1f2a3b4c5d)") == 0);
    worker_free(w); /* b is told, and freed by the ring */
    CHECK(ended == 1);
}

static void
test_last_error(void)
{
    struct worker *w = worker_new();
    struct ipc_error e = {
        .exception_type = { "ValueError", 10 },
        .traceback = { "Traceback ...", 13 },
    };

    CHECK(activity_error_last(w) == NULL);
    activity_error_note(w, "exception", "ValueError: bad", &e);
    const struct activity_error *x = activity_error_last(w);
    REQUIRE(x != NULL);
    CHECK(strcmp(x->type, "exception") == 0 && x->at_ms > 0);
    CHECK(strcmp(x->exception_type, "ValueError") == 0);
    CHECK(strcmp(x->traceback, "Traceback ...") == 0);
    CHECK(x->signal == 0 && x->exit_code == -1 && x->syscall == -1);

    /* A death: its signal and system call when the exit is that one. */
    w->last_exit = (struct worker_exit){ .present = true,
                                         .reason = "seccomp",
                                         .signal = 31,
                                         .code = -1,
                                         .syscall = 41,
                                         .syscall_name = "socket" };
    activity_error_note(w, "seccomp", "the host ended with signal 31", NULL);
    x = activity_error_last(w);
    CHECK(x->signal == 31 && x->syscall == 41);
    CHECK(strcmp(x->syscall_name, "socket") == 0);
    CHECK(x->exception_type == NULL && x->traceback == NULL);
    activity_error_note(w, "load_error", NULL, NULL);
    x = activity_error_last(w);
    CHECK(x->signal == 0 && strcmp(x->message, "load_error") == 0);
    worker_free(w);
}

int
main(void)
{
    RUN(test_ring_bound);
    RUN(test_escaped);
    RUN(test_followers);
    RUN(test_last_error);
    return check_result();
}
