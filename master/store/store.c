/*
 * store.c — the state store's generic API (DESIGN §9): backend selection by
 * name and dispatch through its ops table (store_backend.h).
 *
 * Everything that does not depend on the backend lives here, once: the key
 * grammar of store.h, blob-name checks, argument checks, the SHA-256 of a
 * blob (so every backend names blobs alike) and status names.  A backend is
 * only ever called with valid arguments; an invalid one is refused here
 * without reaching it (store_put and friends return -1 and do not call the
 * callback; the reads return STORE_INVALID with the reason).
 *
 * Invariants: every function runs on the loop thread (store.h); nothing
 * here keeps state of its own.
 */
#include "config.h"

#include "master/store/store.h"
#include "master/store/store_backend.h"

#include "lib/errbuf.h"
#include "lib/hex.h"
#include "lib/name.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

/* The known backends; the first is the default. */
static const struct store_backend *const backends[] = {
    &store_file_backend,
#ifdef WM_NATS
    &store_nats_backend,
#endif
};

#define NBACKENDS (sizeof backends / sizeof backends[0])

/* A key's bytes: the words of lib/name.h and the segments' '/'. */
static bool
key_char_ok(char c)
{
    return name_word_char(c) || c == '/';
}

int
store_key_check(const char *key, char *err, size_t errlen)
{
    const char *seg, *p;
    size_t len;

    if (key == NULL) {
        errbuf_set(err, errlen, "no key");
        return -1;
    }
    len = strnlen(key, STORE_KEY_MAX + 1);
    if (len == 0) {
        errbuf_set(err, errlen, "empty key");
        return -1;
    }
    if (len > STORE_KEY_MAX) {
        errbuf_set(err, errlen, "key longer than %d bytes", STORE_KEY_MAX);
        return -1;
    }
    for (p = key; *p != '\0'; p++) {
        if (!key_char_ok(*p)) {
            errbuf_set(err, errlen,
                       "key \"%s\": byte 0x%02x at offset %zu is not one "
                       "of [A-Za-z0-9._/-]",
                       key, (unsigned)(unsigned char)*p, (size_t)(p - key));
            return -1;
        }
    }
    /* Segments: no empty one (leading, trailing or doubled '/'), no "."
     * or "..", which would read as paths to a human and to a backend. */
    seg = key;
    for (p = key;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        if (p == seg) {
            errbuf_set(err, errlen, "key \"%s\": empty segment", key);
            return -1;
        }
        if ((p - seg == 1 && seg[0] == '.') ||
            (p - seg == 2 && seg[0] == '.' && seg[1] == '.')) {
            errbuf_set(err, errlen, "key \"%s\": \"%.*s\" segment", key,
                       (int)(p - seg), seg);
            return -1;
        }
        if (*p == '\0')
            break;
        seg = p + 1;
    }
    return 0;
}

/* A list prefix: any beginning of a key, so only the alphabet and the
 * length are checked ("" lists everything). */
static int
prefix_check(const char *prefix, char *err, size_t errlen)
{
    const char *p;

    if (strnlen(prefix, STORE_KEY_MAX + 1) > STORE_KEY_MAX) {
        errbuf_set(err, errlen, "prefix longer than %d bytes", STORE_KEY_MAX);
        return -1;
    }
    for (p = prefix; *p != '\0'; p++) {
        if (!key_char_ok(*p)) {
            errbuf_set(err, errlen,
                       "prefix \"%s\": byte 0x%02x is not one of "
                       "[A-Za-z0-9._/-]",
                       prefix, (unsigned)(unsigned char)*p);
            return -1;
        }
    }
    return 0;
}

int
store_blob_name_check(const char *hex, char *err, size_t errlen)
{
    size_t n;

    if (hex == NULL) {
        errbuf_set(err, errlen, "no blob name");
        return -1;
    }
    n = strnlen(hex, STORE_SHA256_HEX);
    if (n < STORE_SHA256_HEX - 1 ||
        !hex_lower_valid(hex, STORE_SHA256_HEX - 1)) {
        errbuf_set(err, errlen,
                   "blob name \"%.*s\" is not 64 lowercase hex digits",
                   STORE_SHA256_HEX - 1, hex);
        return -1;
    }
    if (n == STORE_SHA256_HEX) {
        errbuf_set(err, errlen,
                   "blob name \"%.*s...\" is longer than 64 hex digits",
                   STORE_SHA256_HEX - 1, hex);
        return -1;
    }
    return 0;
}

int
store_sha256(const uint8_t *data, size_t len, uint8_t out[32])
{
    static const uint8_t empty;
    unsigned int outlen = 0;

    /* EVP_Digest wants a pointer even for no bytes. */
    if (EVP_Digest(len > 0 ? data : &empty, len, out, &outlen, EVP_sha256(),
                   NULL) != 1 ||
        outlen != 32)
        return -1;
    return 0;
}

void
store_fail_v(enum store_status *status, char **message, enum store_status st,
             const char *fmt, va_list ap)
{
    char *m;

    if (vasprintf(&m, fmt, ap) < 0)
        m = NULL;
    free(*message);
    *message = m;
    *status = st;
}

void
store_hex(const uint8_t in[32], char out[STORE_SHA256_HEX])
{
    hex_encode(in, 32, out);
}

void
store_sha256_hex(const uint8_t *data, size_t len, char out[STORE_SHA256_HEX])
{
    uint8_t md[32];

    /* libcrypto fails here only without memory: an empty string is never a
     * valid blob name, so whoever uses it gets a clean refusal. */
    if (store_sha256(data, len, md) != 0) {
        out[0] = '\0';
        return;
    }
    store_hex(md, out);
}

const char *
store_status_name(enum store_status status)
{
    switch (status) {
    case STORE_OK:
        return "ok";
    case STORE_NOT_FOUND:
        return "not found";
    case STORE_CONFLICT:
        return "conflict";
    case STORE_CORRUPT:
        return "corrupt";
    case STORE_IO:
        return "i/o error";
    case STORE_NOSPACE:
        return "no space left";
    case STORE_INVALID:
        return "invalid";
    }
    return "unknown status";
}

struct store *
store_open(const struct store_config *cfg, struct event_base *base, char *err,
           size_t errlen)
{
    const char *name;
    size_t i;

    if (cfg == NULL || base == NULL) {
        errbuf_set(err, errlen, "state store: no configuration or loop");
        return NULL;
    }
    name = cfg->backend != NULL && cfg->backend[0] != '\0' ? cfg->backend
                                                           : backends[0]->name;
    for (i = 0; i < NBACKENDS; i++) {
        if (strcmp(backends[i]->name, name) == 0)
            return backends[i]->open(cfg, base, err, errlen);
    }
#ifndef WM_NATS
    if (strcmp(name, "nats") == 0) {
        errbuf_set(err, errlen,
                   "store = nats: this workmanagerd was built without NATS "
                   "support (configured --without-nats, or libnats was not "
                   "found); install libnats-dev and rebuild, or use "
                   "store = file");
        return NULL;
    }
#endif
    errbuf_set(err, errlen, "unknown state store backend \"%s\" (known: %s%s)",
               name, backends[0]->name, NBACKENDS > 1 ? ", nats" : "");
    return NULL;
}

#ifndef WM_NATS
int
store_nats_available(void)
{
    return 0;
}

const char *
store_nats_version(void)
{
    return "";
}
#endif

void
store_close(struct store *st)
{
    if (st != NULL)
        st->backend->close(st);
}

void
store_flush(struct store *st)
{
    if (st != NULL)
        st->backend->flush(st);
}

enum store_status
store_get(struct store *st, const char *key, uint8_t **value, size_t *len,
          uint64_t *revision, char *err, size_t errlen)
{
    if (value != NULL)
        *value = NULL;
    if (st == NULL || value == NULL || len == NULL || revision == NULL) {
        errbuf_set(err, errlen, "store_get: missing argument");
        return STORE_INVALID;
    }
    *len = 0;
    *revision = 0;
    if (store_key_check(key, err, errlen) != 0)
        return STORE_INVALID;
    st->reads++;
    return st->backend->get(st, key, value, len, revision, err, errlen);
}

enum store_status
store_list(struct store *st, const char *prefix, store_list_cb cb, void *arg,
           char *err, size_t errlen)
{
    if (st == NULL || cb == NULL) {
        errbuf_set(err, errlen, "store_list: missing argument");
        return STORE_INVALID;
    }
    if (prefix == NULL)
        prefix = "";
    if (prefix_check(prefix, err, errlen) != 0)
        return STORE_INVALID;
    st->reads++;
    return st->backend->list(st, prefix, cb, arg, err, errlen);
}

int
store_put(struct store *st, const char *key, const uint8_t *value, size_t len,
          uint64_t expected, store_done_cb cb, void *arg)
{
    if (st == NULL || (value == NULL && len > 0) ||
        store_key_check(key, NULL, 0) != 0)
        return -1;
    return st->backend->put(st, key, value, len, expected, cb, arg);
}

int
store_delete(struct store *st, const char *key, uint64_t expected,
             store_done_cb cb, void *arg)
{
    if (st == NULL || store_key_check(key, NULL, 0) != 0)
        return -1;
    return st->backend->del(st, key, expected, cb, arg);
}

int
store_blob_put(struct store *st, const uint8_t *data, size_t len,
               char sha256_hex[STORE_SHA256_HEX], store_done_cb cb, void *arg)
{
    if (st == NULL || sha256_hex == NULL || (data == NULL && len > 0))
        return -1;
    store_sha256_hex(data, len, sha256_hex);
    if (sha256_hex[0] == '\0')
        return -1;
    return st->backend->blob_put(st, data, len, sha256_hex, cb, arg);
}

enum store_status
store_blob_get(struct store *st, const char *sha256_hex, uint8_t **data,
               size_t *len, char *err, size_t errlen)
{
    if (data != NULL)
        *data = NULL;
    if (st == NULL || data == NULL || len == NULL) {
        errbuf_set(err, errlen, "store_blob_get: missing argument");
        return STORE_INVALID;
    }
    *len = 0;
    if (store_blob_name_check(sha256_hex, err, errlen) != 0)
        return STORE_INVALID;
    st->reads++;
    return st->backend->blob_get(st, sha256_hex, data, len, err, errlen);
}

int
store_blob_delete(struct store *st, const char *sha256_hex, store_done_cb cb,
                  void *arg)
{
    if (st == NULL || store_blob_name_check(sha256_hex, NULL, 0) != 0)
        return -1;
    return st->backend->blob_delete(st, sha256_hex, cb, arg);
}

uint64_t
store_reads(const struct store *st)
{
    return st ? st->reads : 0;
}

int
store_watch(struct store *st, const char *prefix, store_watch_cb cb, void *arg,
            char *err, size_t errlen)
{
    if (st == NULL || prefix == NULL || cb == NULL)
        return errbuf_set(err, errlen, "store_watch: missing argument");
    if (st->backend->watch == NULL)
        return 0;
    return st->backend->watch(st, prefix, cb, arg, err, errlen);
}
