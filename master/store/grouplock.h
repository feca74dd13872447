/*
 * grouplock.h — group locks with fencing tokens (DESIGN §6, seeds/000).
 *
 * Workers that share a group process one event at a time, each under the
 * group's lock.  The lock is a record in the state store interface (key
 * workmanager/groups/<tenant>/<group>/lock), so that several masters
 * sharing a store (the NATS backend, later) exclude each other; within one
 * master the acquisitions of a group wait in line locally and never poll.
 *
 * The record: holder (the acquiring master's "<instance>/<boot id>", ""
 * when free), token (incremented by every acquisition, kept across
 * releases so that tokens only grow), acquired_ms (wall clock), and
 * last_write_token (the token under which the last write was made).
 *
 * Rules (grouplock_decide):
 *   free                                   → acquire (token + 1)
 *   held, younger than max_age_ms          → held (retry with backoff)
 *   held, older, no write under its token  → steal (token + 1)
 *   held, older, a write under its token   → held (the steal is aborted:
 *                                            a slow but valid holder)
 * Acquisition retries with backoff: retry_base_ms × 2^(n−1) before retry
 * n, at most max_retries retries, then GROUPLOCK_CONTENTION (the caller
 * nacks the event: LockContention).
 *
 * A write under token t (an output publish, a gateway state write) is
 * checked first: when the record's token is still t and ours, it is
 * recorded as last_write_token = t; otherwise it is refused as stale.
 *
 * Callbacks run on the loop thread and never inside the function that was
 * called (a result known at once is delivered on the next loop turn), so a
 * caller may finish setting up after the call; the one exception is out of
 * memory for the request itself, reported at once.
 *
 * A holder that wrote under its token and then died keeps its lock from
 * other masters (every steal is aborted) until its own instance restarts
 * and calls grouplocks_release_stale_own(): the rule prefers a stuck group
 * to a message processed twice.
 */
#ifndef WM_MASTER_GROUPLOCK_H
#define WM_MASTER_GROUPLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct store;
struct grouplocks;

#define GROUPLOCK_HOLDER_MAX 128

struct grouplock_record {
    char holder[GROUPLOCK_HOLDER_MAX]; /* "" when free */
    uint64_t token;
    int64_t acquired_ms;
    uint64_t last_write_token;
};

enum grouplock_decision {
    GROUPLOCK_ACQUIRE = 0, /* free: take it */
    GROUPLOCK_STEAL,       /* stale, no write under its token: take it */
    GROUPLOCK_HELD,        /* held and fresh: wait */
    GROUPLOCK_ABORT_STEAL, /* stale but written under its token: wait */
};

/* How long r has been held at now_ms (0 when the clock went back: a lock
 * is then young, never stale). */
uint64_t grouplock_record_age(const struct grouplock_record *r, int64_t now_ms);

/* The pure rule.  cur NULL means no record yet (free, token 0). */
enum grouplock_decision grouplock_decide(const struct grouplock_record *cur,
                                         int64_t now_ms, uint64_t max_age_ms);

/* The record's encoding in the store (records.proto GroupLock). */
int grouplock_record_encode(const struct grouplock_record *r, uint8_t **out,
                            size_t *len);
int grouplock_record_decode(const uint8_t *data, size_t len,
                            struct grouplock_record *r, char *err,
                            size_t errlen);

/* "workmanager/groups/<tenant>/<group>/lock" into out. */
#define GROUPLOCK_KEY_PREFIX "workmanager/groups/"
#define GROUPLOCK_KEY_SUFFIX "/lock"
int grouplock_key(const char *tenant, const char *group, char *out,
                  size_t outlen);

enum grouplock_status {
    GROUPLOCK_OK = 0,
    GROUPLOCK_CONTENTION, /* not acquired after every retry */
    GROUPLOCK_STALE,      /* a write under a token that is no longer ours */
    GROUPLOCK_ERROR,      /* the store failed: see the message */
};

struct grouplock_policy {
    uint64_t max_age_ms;    /* lock_max_age_ms */
    uint64_t retry_base_ms; /* group_lock_retry_base_delay_ms */
    unsigned max_retries;   /* group_lock_max_retries */
    uint64_t token_block;   /* group_lock_token_block (0 counts as 1) */
    uint64_t lease_idle_ms; /* group_lock_lease_idle_ms (0: no lease) */
};

/* What changed, for the infra events (acquired, released, stolen). */
typedef void (*grouplock_change_cb)(const char *tenant, const char *group,
                                    const char *what, uint64_t token,
                                    void *arg);

typedef void (*grouplock_cb)(enum grouplock_status status, uint64_t token,
                             const char *message, void *arg);

/* holder: this master's identity, "<instance>/<boot id>", non-empty and
 * shorter than GROUPLOCK_HOLDER_MAX (else NULL, logged).  NULL also when
 * out of memory.  The store and the loop must outlive it. */
struct grouplocks *grouplocks_new(struct store *st, struct event_base *base,
                                  const char *holder,
                                  const struct grouplock_policy *policy);
/* Pending acquisitions, and note_writes and releases whose write is in
 * flight, complete with GROUPLOCK_ERROR "shutting down" before it returns;
 * so do calls made from those callbacks, and no callback runs after it.
 * Call it on the loop thread, not from one of its callbacks, and before
 * store_close(), which runs the completions of writes still queued (they
 * then only free what this module left for them).  Locks held at that
 * moment stay held in the store (see grouplocks_release_stale_own). */
void grouplocks_free(struct grouplocks *gl);

void grouplocks_set_change_hook(struct grouplocks *gl, grouplock_change_cb cb,
                                void *arg);
/* Tests: the wall clock in ms (default: CLOCK_REALTIME). */
void grouplocks_set_clock(struct grouplocks *gl, int64_t (*now_ms)(void *),
                          void *arg);

/* Acquires the lock of (tenant, group); cb once with OK and the token, or
 * CONTENTION / ERROR.  Acquisitions of one group by this master are served
 * one at a time in FIFO order (the next starts when the holder releases,
 * or when the one before it gave up).  A compare-and-set conflict (another
 * master wrote between our read and our write) is read again at once and
 * uses up a retry; only backoff waits count in grouplock_stats.retries.
 * tenant and group are one store key segment each ([A-Za-z0-9._-]). */
void grouplocks_acquire(struct grouplocks *gl, const char *tenant,
                        const char *group, grouplock_cb cb, void *arg);

/* Shares the holding of (tenant, group) under token with one more event
 * (a group's turn, pipelined to one member: master/broker/flow_bind.c):
 * 0 when the lock is held here under token as a lease renewed less than
 * half max_age_ms ago (so the share needs no store access and no other
 * master can find the lock stale meanwhile); the share ends with one more
 * grouplocks_release() under token, and the lock is released with the
 * last.  -1 otherwise (no lease, or leases off: lease_idle_ms 0; another
 * token; a lease due for renewal): acquire instead. */
int grouplocks_share(struct grouplocks *gl, const char *tenant,
                     const char *group, uint64_t token);

/* Checks and records a write under token: cb with OK, or STALE when the
 * record's token or holder is no longer ours (the write must be refused),
 * or ERROR. */
void grouplocks_note_write(struct grouplocks *gl, const char *tenant,
                           const char *group, uint64_t token, grouplock_cb cb,
                           void *arg);

/* Releases the lock if it is still ours under token (a stolen lock is left
 * alone: cb gets STALE); cb may be NULL.  When token is the one held here,
 * the next local waiter starts at once, without waiting for the release to
 * be durable: the store decides compare-and-set when a write is submitted
 * and reads see submitted writes, so its first read finds the lock free. */
void grouplocks_release(struct grouplocks *gl, const char *tenant,
                        const char *group, uint64_t token, grouplock_cb cb,
                        void *arg);

/* Start-up: frees every lock record whose holder is this instance under a
 * previous boot id (its holder died with that master; the file backend's
 * flock guarantees no other master shares the store).  Synchronous list,
 * asynchronous writes (compare-and-set on the listed revision; the change
 * hook says "released" for each once durable); returns how many frees were
 * submitted. */
unsigned grouplocks_release_stale_own(struct grouplocks *gl,
                                      const char *instance);

/* Counters for /metrics. */
struct grouplock_stats {
    uint64_t acquired; /* leases taken in the store (not tokens) */
    uint64_t tokens;   /* fencing tokens handed out, one per holding */
    uint64_t shared;   /* events that shared a holding (grouplocks_share) */
    uint64_t renewals; /* lease blocks extended (and renewed) */
    uint64_t stolen;
    uint64_t contention; /* acquisitions that gave up */
    uint64_t retries;    /* backoff waits */
    uint64_t stale_writes;
    uint64_t wait_ms_total; /* time from acquire() to its callback */
    uint64_t waits;
};
void grouplocks_stats(const struct grouplocks *gl, struct grouplock_stats *out);

#endif /* WM_MASTER_GROUPLOCK_H */
