/*
 * activity.h — what an operator sees of a worker's recent life beyond its
 * state: its last error and a bounded ring of its log lines (DESIGN §7,
 * §8; the worker view of GET /v1/workers/{id} and the lines of
 * GET /v1/workers/{id}/logs).
 *
 * The last error is the last thing that went wrong with the worker: an
 * event it failed (an exception, a worker error, a timeout), an unasked
 * death of its host (crash with its signal, seccomp with its system call,
 * oom, protocol), a failed load.  Each new one replaces the one before.
 *
 * The log ring holds the worker's most recent lines: those its hosts sent
 * (their stdout, stderr and workmanager.log(), source "host") and the
 * daemon's own lines about it (source "daemon"), each also written to the
 * daemon's log naming the worker by name and id.  It is bounded by bytes
 * (worker_log_bytes, activity_log_limit_set()): the oldest lines go first.
 * Lines are stored escaped as the daemon's log escapes them (log.h), so a
 * line is one line of printable UTF-8 whatever a host sent.
 *
 * Observed, never persisted: a restart of the daemon starts every worker
 * with no last error and an empty ring.  Memory: nothing until the first
 * line or error; then at most the limit, plus one line's overhead.
 *
 * Single-threaded: the event loop's thread only.
 */
#ifndef WM_MASTER_ACTIVITY_H
#define WM_MASTER_ACTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "master/core/log.h"

struct ipc_error;
struct worker;

/* A worker's last error.  type is a word of DESIGN §6's vocabulary
 * (exception, worker_error, timeout, crash, oom, seccomp, protocol,
 * load_error, ...). */
struct activity_error {
    int64_t at_ms;
    char type[24];
    char *message;        /* never NULL in a recorded error */
    char *exception_type; /* the worker's exception class, or NULL */
    char *traceback;      /* as the host sent it, or NULL */
    int signal;           /* the host's fatal signal, 0 if none */
    int exit_code;        /* the host's exit code, -1 if none */
    int syscall;          /* seccomp: the offending system call, -1 */
    char syscall_name[32];
};

/* One line of the ring. */
struct activity_line {
    uint64_t seq; /* 1, 2, ... per worker, never reused */
    int64_t at_ms;
    int level; /* a syslog priority (LOG_ERR ... LOG_DEBUG) */
    bool host; /* sent by one of the worker's hosts; else the daemon's */
    size_t len;
    char text[]; /* len bytes, NUL-terminated, escaped */
};

/* Bytes of text a worker's ring keeps (0: none); the daemon sets it once
 * from worker_log_bytes at start-up.  Default 64 KiB. */
void activity_log_limit_set(size_t bytes);

/* Records type/msg as w's last error, at now: with the exception type
 * and traceback of e (a host's Error; may be NULL), and the signal, exit
 * code and system call of w->last_exit when it tells of the same death
 * (its reason is type). */
void activity_error_note(struct worker *w, const char *type, const char *msg,
                         const struct ipc_error *e);

/* w's last error, or NULL when none happened since the daemon started. */
const struct activity_error *activity_error_last(const struct worker *w);

/* Appends len bytes of msg (need not be NUL-terminated nor valid UTF-8;
 * escaped here) as one line of w's ring, from w's host or the daemon. */
void activity_log_add(struct worker *w, int level, bool host, const char *msg,
                      size_t len);

/* Writes "worker NAME (ID): <message>" to the daemon's log (just the id
 * when the name is the id) and appends the message to w's ring as the
 * daemon's. */
void activity_log(struct worker *w, int level, const char *fmt, ...)
    LOG_PRINTF(3, 4);

/* The label the daemon's log gives w: "NAME (ID)", or "ID" when the name
 * is the id.  Returns buf. */
const char *activity_label(const struct worker *w, char *buf, size_t len);

/* The lines w's ring holds, and the i-th of them, oldest first (0 ..
 * count-1; NULL past the end).  Valid until the ring changes. */
size_t activity_log_count(const struct worker *w);
const struct activity_line *activity_log_at(const struct worker *w, size_t i);

/* A follower of w's ring: line runs for each line appended from now on;
 * line is NULL once, when w is freed (deleted): the follower is gone
 * then and must not be removed.  Returns NULL when out of memory. */
struct activity_follower;
struct activity_follower *
activity_follow(struct worker *w,
                void (*line)(const struct activity_line *l, void *arg),
                void *arg);
/* Stops following (f may be NULL). */
void activity_unfollow(struct activity_follower *f);

/* Frees w's activity (worker_free() calls it); followers are told. */
void activity_free(struct worker *w);

#endif /* WM_MASTER_ACTIVITY_H */
