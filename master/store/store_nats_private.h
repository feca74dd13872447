/*
 * store_nats_private.h — what the two files of the `nats` store backend
 * share; nothing outside master/store/store_nats*.c includes it.
 *
 *   store_nats.c     the backend's entry points (store_backend.h): the
 *                    connection, the buckets, submission and completion
 *                    on the loop thread, the writer thread;
 *   store_nats_kv.c  what is said to JetStream: key encoding, reads and
 *                    listings, compare-and-set writes and deletes, blobs
 *                    in chunks.
 *
 * Two KV buckets: PREFIX_state holds the keys (one KV key per store key,
 * the revision being JetStream's sequence), PREFIX_blobs the code blobs
 * (nats-server 2.9 has no object store): a blob of SHA-256 H is the
 * chunks H.0, H.1, ... and then its manifest H, written last, so a blob
 * whose manifest is readable is complete; a chunk missing behind a
 * manifest reads as STORE_CORRUPT.
 *
 * Threads.  libnats runs its own threads and its blocking calls must not
 * wait on the loop, so writes run on the writer thread (one at a time, in
 * submission order, on the plain connection), and come back through the
 * completion list and an eventfd: every store_done_cb runs on the loop
 * thread.  Reads are synchronous on the loop thread (store.h), one
 * request each over the same connection (libnats connections are
 * thread-safe).  The two threads meet only in the submission queue and
 * the completion list, under sn->mu.
 */
#ifndef WM_MASTER_STORE_NATS_PRIVATE_H
#define WM_MASTER_STORE_NATS_PRIVATE_H

#include "master/store/store_backend.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nats/nats.h>

/* How long a JetStream request may take before it fails (ms). */
#define SN_WAIT_MS 5000

enum sn_kind {
    SN_PUT,
    SN_DELETE,
    SN_BLOB_PUT,
    SN_BLOB_DELETE,
};

/* One queued write.  The loop fills the request fields and never changes
 * them after submission; the writer fills the results, which the loop
 * reads only after the op came back through the completion list. */
struct sn_op {
    struct sn_op *next;
    enum sn_kind kind;
    char *name;     /* key or blob name */
    uint8_t *value; /* owned; NULL when len == 0 */
    size_t len;
    uint64_t expected; /* SN_PUT, SN_DELETE */
    store_done_cb cb;
    void *arg;
    /* results */
    enum store_status status;
    uint64_t new_rev; /* 0 after a delete */
    char *message;    /* malloc'd; NULL on success */
};

struct store_nats {
    struct store base; /* first: store.c's view */
    natsOptions *opts;
    natsConnection *nc;
    jsCtx *js;
    kvStore *state, *blobs;
    char *state_bucket, *blob_bucket; /* PREFIX_state, PREFIX_blobs */
    char *state_stream, *blob_stream; /* KV_<bucket> */
    char *url;                        /* nats_url, for messages */
    size_t chunk;                     /* bytes per blob chunk */
    int efd;
    struct event *ev;

    /* loop thread only */
    size_t inflight;

    /* under mu: the submission queue (loop → writer), the completion
     * list (writer → loop) */
    pthread_mutex_t mu;
    pthread_cond_t qcv, ccv;
    struct sn_op *qhead, **qtail;
    struct sn_op *chead, **ctail;
    bool stop;

    pthread_t thread;
    bool sync_ready, thread_started;

    struct sn_watch *watch; /* store_nats_watch.c; NULL until one starts */
};

/* ---- store_nats_kv.c ---------------------------------------------------- */

/* Sets err to "what: libnats's status text (its last error)" and returns
 * STORE_IO. */
enum store_status store_nats_fail(char *err, size_t errlen, natsStatus s,
                                  const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The reads of store.h on the state bucket (any thread). */
enum store_status store_nats_get(struct store_nats *sn, const char *key,
                                 uint8_t **value, size_t *len, uint64_t *rev,
                                 char *err, size_t errlen);
enum store_status store_nats_list(struct store_nats *sn, const char *prefix,
                                  store_list_cb cb, void *arg, char *err,
                                  size_t errlen);
enum store_status store_nats_blob_get(struct store_nats *sn, const char *hex,
                                      uint8_t **data, size_t *len, char *err,
                                      size_t errlen);

/* Runs one write (writer thread): fills op's results. */
void store_nats_run(struct store_nats *sn, struct sn_op *op);

/* The store key of KV key k, in place. */
void store_nats_key_decode(char *k);

/* ---- store_nats_watch.c ------------------------------------------------- */

/* store_watch() of the nats backend: a thread of its own follows the state
 * bucket (kvStore_WatchAll) and hands the changes under prefix to the loop
 * through an eventfd. */
int store_nats_watch(struct store *st, const char *prefix, store_watch_cb cb,
                     void *arg, char *err, size_t errlen);
/* Stops and frees the watch (its thread joined); NULL is fine. */
void store_nats_watch_free(struct store_nats *sn);

#endif /* WM_MASTER_STORE_NATS_PRIVATE_H */
