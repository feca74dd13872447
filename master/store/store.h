/*
 * store.h — the state store interface (DESIGN §9).
 *
 * The room master/store/: persistence — this interface and its backends
 * (store.c selects one through store_backend.h's ops table;
 * store_file*.c are `file`), the persisted worker record (record.c over
 * records.proto, protobuf-c) and group locks with fencing tokens (grouplock.c),
 * which live in the store so that a second instance can share them.
 *
 * One interface, several backends: `file` (store_file*.c, the default: one
 * file per key under state_dir, written tmp → fsync → rename → fsync dir on
 * a writer thread) and `nats` (store_nats*.c: JetStream KV buckets, when
 * configure found libnats).  Callers see keys,
 * opaque values and revisions, never files: the records' encoding
 * (protobuf-c) belongs to their owners (record.c).
 *
 * Keys are printable strings such as `workmanager/workers/{id}`,
 * `workmanager/recovery/leader`, `workmanager/groups/{group}/lock`: at most
 * 512 bytes of [A-Za-z0-9._/-], no empty segment, no "." or ".." segment.
 *
 * Revisions: a key's revision is 1 after its first write and grows by one
 * with each later write; compare-and-set succeeds only when the current
 * revision equals the expected one (0 = the key must not exist).  In the
 * nats backend the revision is JetStream's, which doubles as a fencing
 * token.
 *
 * Threads: every function is called on the loop thread.  Writes complete
 * asynchronously: the callback runs on the loop thread once the write is
 * durable (or has failed); the loop never waits for a disk.  Reads are
 * synchronous (recovery and rare lookups; the registry caches what it
 * needs).
 *
 * Code blobs are content-addressed by their SHA-256 (lowercase hex).  A blob
 * whose bytes no longer hash to their name is reported corrupt, never
 * returned.
 */
#ifndef WM_MASTER_STORE_H
#define WM_MASTER_STORE_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct store;

#define STORE_KEY_MAX 512
/* Expected revision meaning "whatever it is now". */
#define STORE_ANY_REVISION UINT64_MAX
/* 64 hex digits and a NUL. */
#define STORE_SHA256_HEX 65

enum store_status {
    STORE_OK = 0,
    STORE_NOT_FOUND,
    STORE_CONFLICT, /* compare-and-set: the revision differs */
    STORE_CORRUPT,  /* a record or blob fails its checksum or framing */
    STORE_IO,       /* the disk (or server) failed: see the message */
    STORE_NOSPACE,  /* a write found the disk full (ENOSPC, EDQUOT): the
                       same key can be written again once there is room */
    STORE_INVALID,  /* a bad key or argument */
};

struct nats_link_config;

struct store_config {
    const char *backend;   /* "file" or "nats" */
    const char *state_dir; /* file: where records and blobs live */
    /* file: "always" (fsync each write), "batch" (group commit), "off" */
    const char *fsync;
    /* nats (store_nats.c): the connection (master/core/nats_link.h: the
     * servers, credentials and TLS files), how the buckets are made when
     * missing, and their names' prefix. */
    const struct nats_link_config *nats;
    unsigned nats_replicas;  /* 0 means 1 */
    int nats_memory;         /* non-zero: memory storage, else file */
    const char *nats_prefix; /* NULL or "": "wm" */
};

/* Whether this build has the nats backend (configure found libnats), and
 * the libnats version it was built with ("" without). */
int store_nats_available(void);
const char *store_nats_version(void);

/* Completion of an asynchronous write.  revision is the key's new revision
 * (0 after a delete); message names the cause when status != STORE_OK. */
typedef void (*store_done_cb)(enum store_status status, uint64_t revision,
                              const char *message, void *arg);

/* One entry of store_list().  status is STORE_OK with the value, or
 * STORE_CORRUPT with value NULL and message naming what is wrong: a corrupt
 * record is reported, never skipped silently and never fatal.  Return
 * non-zero to stop the listing. */
typedef int (*store_list_cb)(const char *key, enum store_status status,
                             const uint8_t *value, size_t len,
                             uint64_t revision, const char *message, void *arg);

/* One change of a key under a watched prefix (store_watch()): its new
 * value and revision, or value NULL when it was deleted. */
typedef void (*store_watch_cb)(const char *key, const uint8_t *value,
                               size_t len, uint64_t revision, void *arg);

/* Opens the backend named by cfg->backend.  Returns NULL with a message in
 * err naming the cause (an unknown backend, an unusable state_dir). */
struct store *store_open(const struct store_config *cfg,
                         struct event_base *base, char *err, size_t errlen);
/* Waits for queued writes (running their callbacks), then frees. */
void store_close(struct store *st);
/* Waits for queued writes and runs their callbacks (and those of the
 * writes they submit), now, blocking: at shutdown, while what the
 * callbacks answer (the API's requests) still exists.  Not from a
 * callback.  NULL is fine. */
void store_flush(struct store *st);

/* Reads a key: STORE_OK with *value (malloc'd, the caller frees), *len and
 * *revision; STORE_NOT_FOUND; STORE_CORRUPT or STORE_IO with a message. */
enum store_status store_get(struct store *st, const char *key, uint8_t **value,
                            size_t *len, uint64_t *revision, char *err,
                            size_t errlen);

/* Calls cb for every key starting with prefix, in key order. */
enum store_status store_list(struct store *st, const char *prefix,
                             store_list_cb cb, void *arg, char *err,
                             size_t errlen);

/* Writes value under key if its revision equals expected (or expected is
 * STORE_ANY_REVISION).  The value is copied; cb may be NULL.  Returns 0
 * once queued, -1 for an invalid key (cb not called). */
int store_put(struct store *st, const char *key, const uint8_t *value,
              size_t len, uint64_t expected, store_done_cb cb, void *arg);

/* Deletes key if its revision equals expected (or STORE_ANY_REVISION);
 * deleting a missing key is STORE_NOT_FOUND. */
int store_delete(struct store *st, const char *key, uint64_t expected,
                 store_done_cb cb, void *arg);

/* Stores a blob under its SHA-256 (computed here, written into sha256_hex
 * before returning).  Idempotent: an existing intact blob is kept. */
int store_blob_put(struct store *st, const uint8_t *data, size_t len,
                   char sha256_hex[STORE_SHA256_HEX], store_done_cb cb,
                   void *arg);

/* Reads a blob and checks its hash: STORE_OK with *data (malloc'd) and
 * *len, STORE_NOT_FOUND, STORE_CORRUPT (hash mismatch) or STORE_IO. */
enum store_status store_blob_get(struct store *st, const char *sha256_hex,
                                 uint8_t **data, size_t *len, char *err,
                                 size_t errlen);

/* Deletes blobs that no key references is the caller's business (it knows
 * the references); this removes one. */
int store_blob_delete(struct store *st, const char *sha256_hex,
                      store_done_cb cb, void *arg);

const char *store_status_name(enum store_status status);

/* Follows the keys under prefix: cb runs on the loop thread for each key
 * as it is now, then for each change, whoever made it (this daemon's own
 * writes come back too: compare revisions), in the order the store
 * applied them.  For a store only this daemon writes (file) there is
 * nothing to follow: 0, and cb never runs.  One watch per store; it ends
 * with store_close().  -1 with a message when it cannot start. */
int store_watch(struct store *st, const char *prefix, store_watch_cb cb,
                void *arg, char *err, size_t errlen);

/* The synchronous reads made so far (store_get(), store_list(),
 * store_blob_get()): each one blocks the caller, which with store = nats
 * is a round trip to the server (/metrics: workmanager_store_reads_total). */
uint64_t store_reads(const struct store *st);

/* Computes the SHA-256 of data as lowercase hex (libcrypto). */
void store_sha256_hex(const uint8_t *data, size_t len,
                      char out[STORE_SHA256_HEX]);

#endif /* WM_MASTER_STORE_H */
