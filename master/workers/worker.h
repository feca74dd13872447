/*
 * worker.h — a worker: its persisted definition and desired status, and its
 * observed host state (DESIGN §7, seeds/004).
 *
 * The room master/workers/: the worker as an object — its struct and
 * states (worker.c), the registry by id and name (registry.c), lifecycle
 * events (lifecycle.c), restoring persisted workers at start-up
 * (recovery.c) and worker code fetched from URLs (fetch.c).  The routes
 * that change workers are in api/; the processes that run them in
 * supervise/; their persisted form in store/record.c.
 *
 * The desired status (running, suspended, stopped) is what an operator
 * asked for; it is persisted.  The host state is what the supervisor
 * observes of the worker's host process; it is never persisted.  The two
 * are kept apart: a crash changes the state, never the status.
 *
 * Memory: a stopped worker costs its struct, its strings and its history
 * entries (no code: blobs stay in the store), so 10,000 registered workers
 * fit in a few tens of MiB.
 */
#ifndef WM_MASTER_WORKER_H
#define WM_MASTER_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/uuid.h"

struct activity;
struct engines_entry;
struct host;
struct binding;

enum worker_status {
    WORKER_RUNNING = 0,
    WORKER_SUSPENDED,
    WORKER_STOPPED,
};

enum worker_state {
    WORKER_STATE_IDLE = 0, /* no process; one starts on the next event */
    WORKER_STATE_STARTING,
    WORKER_STATE_RUNNING,
    WORKER_STATE_SUSPENDED,
    WORKER_STATE_STOPPING,
    WORKER_STATE_STOPPED,
    WORKER_STATE_PENDING, /* restart backoff */
    WORKER_STATE_FAILED,
    WORKER_STATE_KILLED,
    WORKER_STATE_FINISHED,
    WORKER_STATE_NO_CODE, /* created without code: stopped until loaded */
};
#define WORKER_STATE_LAST WORKER_STATE_NO_CODE

/* How the last host process ended.  reason is a word of DESIGN §6's
 * vocabulary (crash, timeout, oom, seccomp, protocol, handshake, ...) or
 * "stopped"/"idle" for requested exits. */
struct worker_exit {
    bool present;
    char reason[24];
    int signal;            /* 0 if none */
    int code;              /* exit code, -1 if killed by a signal */
    int syscall;           /* seccomp: the offending syscall, else -1 */
    char syscall_name[32]; /* its name ("socket"), or "" */
    int64_t at_ms;
};

struct worker_pair {
    char *name;
    char *value;
};

struct worker_version {
    uint32_t version;
    char sha256[65];
    uint64_t size;
    int64_t at_ms;
    char *source;         /* "content", or the URL */
    uint32_t rollback_of; /* 0, or the version this one restored */
    /* Code from a URL (fetch.h): the address it came from, and the URL
     * that answered when redirects led elsewhere; NULL when not so. */
    char *address;
    char *final_url;
};

struct worker_limits {
    uint32_t timeout_ms;  /* 0 = the daemon's message_timeout_ms */
    uint32_t memory_mb;   /* 0 = no limit */
    uint32_t concurrency; /* >= 1 */
};

/* Counters of the events a worker saw since the daemon started (/metrics
 * and the worker view; observed, never persisted).  processed and failed
 * count attempts: each delivery or invoke that reached an end counts once
 * in one of them, so an event tried three times that fails twice and then
 * succeeds is 1 processed and 2 failed.  dead_lettered counts events. */
struct worker_counters {
    uint64_t processed;     /* attempts that succeeded */
    uint64_t failed;        /* attempts that ended in an error */
    uint64_t published;     /* outputs it published */
    uint64_t redelivered;   /* deliveries nacked for a later retry */
    uint64_t dead_lettered; /* events it gave up on */
    uint64_t refused;       /* events refused at the door: its queue full */
};

struct worker {
    char id[UUID_SIZE]; /* lowercase UUIDv4 */
    char *name; /* [a-z0-9][a-z0-9_.-]{0,63}, unique; may equal the id */
    char *tenant;
    char *mime_type;
    char *topic;
    char *group; /* NULL if none */
    enum worker_status status;
    struct worker_pair *config;
    size_t nconfig;
    struct worker_pair *tags;
    size_t ntags;
    struct worker_limits limits;
    bool in_process;
    uint32_t idle_timeout_s; /* 0 = the daemon's idle_timeout_s */
    int64_t created_at_ms;
    int64_t updated_at_ms;
    struct worker_version *history; /* versions 1..n, append-only */
    size_t nhistory;
    uint32_t version;  /* the version in use; 0 with no history: created
                        * without code, stopped until its first load */
    uint64_t revision; /* of its store record */

    /* Observed, never persisted. */
    enum worker_state state;
    pid_t pid;
    uint32_t restarts;
    struct worker_exit last_exit;
    char *error; /* why the worker is failed (recovery, load), or NULL */
    const struct engines_entry *engine;
    struct host *host; /* owned by the supervisor */
    bool busy;         /* an API change to it is in flight (route_workers.c) */
    /* The code of a create still being stored: its host loads these bytes
     * (main.c's code hook) instead of reading the blob back. */
    const uint8_t *pending_code;
    size_t pending_len;
    struct binding *binding; /* its subscription (flow.c) */
    struct worker_counters counters;
    struct activity *activity; /* last error, log ring (activity.h) */
};

const char *worker_status_name(enum worker_status s);
int worker_status_parse(const char *name, enum worker_status *out);
const char *worker_state_name(enum worker_state s);

/* The history entry of version v, or NULL. */
const struct worker_version *worker_version_find(const struct worker *w,
                                                 uint32_t v);

void worker_free(struct worker *w);
/* Frees n pairs (their names and values) and the array; p may be NULL. */
void worker_pairs_free(struct worker_pair *p, size_t n);

#endif /* WM_MASTER_WORKER_H */
