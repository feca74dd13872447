/*
 * store_backend.h — the ops table behind store.h (internal to the store).
 *
 * store.c owns the generic API: it validates keys, blob names and
 * arguments, computes blob hashes, then dispatches through the backend's
 * const ops table, so a backend only ever sees valid input.  Adding a
 * backend (store_nats.c) was adding a table and a row in store.c's list;
 * callers of store.h do not change.
 *
 * Every backend's handle begins with `struct store` (its first member), so
 * store.c can find the table from the opaque pointer and the backend can
 * cast back to its own type.
 *
 * Only store.c and the backends include this header.
 */
#ifndef WM_MASTER_STORE_BACKEND_H
#define WM_MASTER_STORE_BACKEND_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "master/store/store.h"

struct event_base;
struct store_backend;

/* The first member of every backend's handle. */
struct store {
    const struct store_backend *backend;
    uint64_t reads; /* store_reads(): counted by store.c */
};

/* One backend.  The arguments were checked by store.c: keys satisfy
 * store_key_check(), blob names store_blob_name_check(), output pointers
 * are non-NULL, value is non-NULL whenever len > 0.  The contracts are
 * those of the store.h function of the same name. */
struct store_backend {
    const char *name;
    struct store *(*open)(const struct store_config *cfg,
                          struct event_base *base, char *err, size_t errlen);
    void (*close)(struct store *st);
    void (*flush)(struct store *st);
    enum store_status (*get)(struct store *st, const char *key, uint8_t **value,
                             size_t *len, uint64_t *revision, char *err,
                             size_t errlen);
    enum store_status (*list)(struct store *st, const char *prefix,
                              store_list_cb cb, void *arg, char *err,
                              size_t errlen);
    int (*put)(struct store *st, const char *key, const uint8_t *value,
               size_t len, uint64_t expected, store_done_cb cb, void *arg);
    int (*del)(struct store *st, const char *key, uint64_t expected,
               store_done_cb cb, void *arg);
    /* sha256_hex is the hash of data, computed by store.c. */
    int (*blob_put)(struct store *st, const uint8_t *data, size_t len,
                    const char *sha256_hex, store_done_cb cb, void *arg);
    enum store_status (*blob_get)(struct store *st, const char *sha256_hex,
                                  uint8_t **data, size_t *len, char *err,
                                  size_t errlen);
    int (*blob_delete)(struct store *st, const char *sha256_hex,
                       store_done_cb cb, void *arg);
    /* NULL: the backend has nothing to watch (only this daemon writes it:
     * file). */
    int (*watch)(struct store *st, const char *prefix, store_watch_cb cb,
                 void *arg, char *err, size_t errlen);
};

extern const struct store_backend store_file_backend;
/* store_nats.c, in builds with libnats (WM_NATS). */
extern const struct store_backend store_nats_backend;

/* 0 when key is a valid store key (store.h), else -1 with the reason in
 * err. */
int store_key_check(const char *key, char *err, size_t errlen);

/* 0 when hex is 64 lowercase hex digits, else -1 with the reason. */
int store_blob_name_check(const char *hex, char *err, size_t errlen);

/* SHA-256 of data into out (32 bytes) with libcrypto's EVP.  0, or -1 when
 * libcrypto fails (out of memory). */
int store_sha256(const uint8_t *data, size_t len, uint8_t out[32]);

/* A queued write's failure, for the backends: sets *status to st and
 * replaces *message (freed) with the formatted text, or with NULL when out
 * of memory (the callback then gets the status name only). */
void store_fail_v(enum store_status *status, char **message,
                  enum store_status st, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* 32 bytes as 64 lowercase hex digits and a NUL. */
void store_hex(const uint8_t in[32], char out[STORE_SHA256_HEX]);

#endif /* WM_MASTER_STORE_BACKEND_H */
