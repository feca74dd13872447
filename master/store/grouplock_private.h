/*
 * grouplock_private.h — what the files of the group locks share
 * (grouplock.c: requests, groups, acquisition, note_write, release and the
 * API; grouplock_lease.c: the lease that lets one store acquisition serve
 * many events).  Included only by those two files.
 *
 * The structures and their invariants are described in grouplock.c's
 * opening comment; the lease's in grouplock_lease.c's.
 */
#ifndef WM_MASTER_GROUPLOCK_PRIVATE_H
#define WM_MASTER_GROUPLOCK_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>

#include "master/store/grouplock.h"
#include "master/store/store.h"

#define GL_PREFIX GROUPLOCK_KEY_PREFIX
#define GL_SUFFIX GROUPLOCK_KEY_SUFFIX
/* Room for a message naming a key, a holder and a few numbers. */
#define GL_MSG_MAX 1536
/* CAS conflicts one note_write or release survives before it reports an
 * error: each means another master changed the record between our read and
 * our write, so a handful already means the store is fought over. */
#define GL_CONFLICTS_MAX 8
/* The longest backoff wait: it only keeps retry_base_ms << n from
 * overflowing with a silly policy (conf_keys.c bounds the real ones). */
#define GL_BACKOFF_MAX_MS (24 * 3600 * 1000ULL)

enum gl_kind {
    GL_REQ_ACQUIRE,
    GL_REQ_NOTE,
    GL_REQ_RELEASE,
    GL_REQ_FREE_STALE, /* grouplocks_release_stale_own: no callback */
};

struct gl_group;

struct gl_req {
    struct grouplocks *gl;
    enum gl_kind kind;
    char key[STORE_KEY_MAX + 1];
    /* "<tenant>\0<group>\0": both are in the key, so they fit. */
    char names[STORE_KEY_MAX];
    const char *tenant, *group; /* into names */
    grouplock_cb cb;            /* NULL: nobody to tell */
    void *arg;
    uint64_t token;       /* wanted (ACQUIRE, once decided) or checked */
    uint64_t hwm;         /* the block's high-water mark it puts or checks */
    int64_t at_ms;        /* ACQUIRE: the wall clock its put records */
    bool ours;            /* NOTE, RELEASE: token is the one held here */
    bool extend;          /* ACQUIRE: the put extends this master's lease */
    bool written;         /* ACQUIRE: the extended lease was written under */
    bool stolen;          /* ACQUIRE: the put takes a stale holder's lock */
    bool busy;            /* ACQUIRE: its timer is pending or put in flight */
    bool orphaned;        /* grouplocks_free ran while its put was in flight */
    unsigned retries;     /* ACQUIRE: backoff waits and CAS conflicts */
    unsigned conflicts;   /* NOTE, RELEASE: CAS conflicts */
    int64_t start_ms;     /* monotonic, for the wait statistics */
    struct gl_group *g;   /* ACQUIRE: the group whose FIFO holds it */
    struct gl_req *qnext; /* in g's FIFO */
    struct gl_req *oprev, *onext; /* in gl->ops */
    struct gl_req *dnext;         /* in gl->done */
    enum grouplock_status status; /* the decided result */
    char message[GL_MSG_MAX];     /* its message ("" for none) */
};

/* The local side of one group's lock. */
struct gl_group {
    struct grouplocks *gl;
    struct gl_group *next; /* in gl->groups */
    char key[STORE_KEY_MAX + 1];
    struct gl_req *head, **tail; /* the FIFO of acquisitions */
    struct event *timer;         /* drives the head's attempts */
    bool held;                   /* a local waiter holds the lock */
    uint64_t token;              /* and its token (the last handed out) */
    unsigned shares; /* more events holding it under token (share) */
    /* The lease: the store's record is this master's, under tokens up to
     * hwm (persisted), renewed (acquired_ms) at renewed_ms, written under
     * (last_write_token == hwm) when written. */
    bool leased;
    bool written;
    uint64_t hwm;
    int64_t renewed_ms;
    struct event *idle; /* ends an idle lease (lease_idle_ms) */
    unsigned busy;      /* nesting of the functions using it */
};

struct grouplocks {
    struct store *st;
    struct event_base *base;
    char holder[GROUPLOCK_HOLDER_MAX];
    struct grouplock_policy policy;
    grouplock_change_cb hook;
    void *hook_arg;
    int64_t (*now_ms)(void *);
    void *now_arg;
    struct gl_group *groups;
    struct gl_req *ops;               /* puts in flight */
    struct gl_req *done, **done_tail; /* results to deliver */
    struct event *done_ev;
    bool closing;
    struct grouplock_stats stats;
};

/* grouplock.c */

/* The wall clock of gl, in ms (injectable: grouplocks_set_clock). */
int64_t grouplock_now(const struct grouplocks *gl);
/* A new request, or NULL when out of memory (cb told at once). */
struct gl_req *grouplock_req_new(struct grouplocks *gl, enum gl_kind kind,
                                 grouplock_cb cb, void *arg);
/* r's key and names from a lock's store key; -1 when it is not one. */
int grouplock_req_names_from_key(struct gl_req *r, const char *key);
/* Completes r on the next loop turn (for results decided inside a call). */
void grouplock_req_defer(struct gl_req *r, enum grouplock_status status,
                         uint64_t token, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Checks r (NOTE, RELEASE) against the record and writes what follows. */
void grouplock_req_check(struct gl_req *r);
/* Submits next for r's key under compare-and-set on expected; -1 with the
 * cause in r->message. */
int grouplock_req_put(struct gl_req *r, const struct grouplock_record *next,
                      uint64_t expected);
/* Takes the head out of g's FIFO. */
struct gl_req *grouplock_group_pop(struct gl_group *g);
/* Starts g's head when it may, arms the idle lease, frees g unused. */
void grouplock_group_settle(struct gl_group *g);
/* The head is done: told now; g held under token when status is OK. */
void grouplock_group_finish(struct gl_group *g, enum grouplock_status status,
                            uint64_t token, const char *message);

/* grouplock_lease.c */

/* Tokens reserved per store write (policy.token_block, at least 1). */
uint64_t grouplock_token_block(const struct grouplocks *gl);
/* Hands g's head the lease's next token without the store when it may;
 * true when it did (the result is delivered on the next turn). */
bool grouplock_lease_hand_over(struct gl_group *g);
/* Whether g is leased and renewed less than half max_age_ms ago. */
bool grouplock_lease_fresh(const struct gl_group *g);
/* Ends g's lease: frees its record in the store; the caller settles g. */
void grouplock_lease_end(struct gl_group *g);
/* g's idle timer: ends the lease when nothing holds or waits. */
void grouplock_lease_on_idle(evutil_socket_t fd, short what, void *arg);
/* The head's store attempt on a lease still ours (cur at rev): reserves
 * the next block and renews the record in one compare-and-set. */
void grouplock_lease_extend(struct gl_group *g,
                            const struct grouplock_record *cur, uint64_t rev,
                            int64_t now);

#endif /* WM_MASTER_GROUPLOCK_PRIVATE_H */
