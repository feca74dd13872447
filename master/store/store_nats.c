/*
 * store_nats.c — the `nats` state store backend (store = nats, DESIGN §9):
 * records and code blobs in NATS JetStream KV buckets, so that several
 * daemons can share them (store_nats_private.h says which file does
 * what; store_nats_kv.c speaks to JetStream).
 *
 * Open connects to nats_url (every URL of the list is a server of one
 * cluster) with the configured credentials and TLS files, binds the two
 * buckets, creating them when missing (replicas and storage as
 * configured; History 1: the store keeps no history of a key), and starts
 * the writer thread.  An unreachable server fails the open with a message
 * naming the URL: start-up stops there rather than serving without its
 * state.  Once connected, libnats reconnects by itself (without limit,
 * every half second); a write or read meanwhile fails with STORE_IO after
 * SN_WAIT_MS.
 *
 * Why a writer thread rather than libnats's libevent adapter: the
 * adapter only moves socket I/O onto the loop, and libnats's JetStream
 * and KV calls block on replies that the loop would then have to deliver
 * (they time out when called on it).  One thread doing the blocking calls
 * in order keeps each key's writes in submission order, as the file
 * backend does, and its completions come back through an eventfd, so
 * every callback runs on the loop thread.
 *
 * Signals: libnats starts threads of its own (at the first options
 * object, at connect, at each reconnect from its reader); they are
 * created with every signal blocked, as lib/thread.h does for ours, so
 * the loop's signal events keep seeing the daemon's signals.
 *
 * Invariants: inflight counts the ops submitted and not yet completed
 * (loop thread only); the writer takes ops in order and posts each back
 * exactly once; the callbacks run on the loop thread, in order, never
 * inside the call that submitted them.
 */
#include "config.h"

#include "master/store/store_nats_private.h"

#include "lib/errbuf.h"
#include "lib/thread.h"
#include "master/core/nats_link.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

/* The most bytes of a blob per message: below nats-server's default
 * max_payload (1 MiB), with room for the headers. */
#define SN_CHUNK_MAX (512 * 1024)
#define SN_CHUNK_MIN 4096
#define SN_CHUNK_SLACK 4096

int
store_nats_available(void)
{
    return 1;
}

const char *
store_nats_version(void)
{
    return nats_GetVersion();
}

/* ---- submission and completion (loop thread) --------------------------- */

static void
sn_op_free(struct sn_op *op)
{
    free(op->name);
    free(op->value);
    free(op->message);
    free(op);
}

static int
sn_submit(struct store_nats *sn, enum sn_kind kind, const char *name,
          const uint8_t *value, size_t len, uint64_t expected, store_done_cb cb,
          void *arg)
{
    struct sn_op *op = calloc(1, sizeof *op);

    if (op == NULL || (op->name = strdup(name)) == NULL)
        goto fail;
    if (len > 0) {
        if ((op->value = malloc(len)) == NULL)
            goto fail;
        memcpy(op->value, value, len);
        op->len = len;
    }
    op->kind = kind;
    op->expected = expected;
    op->cb = cb;
    op->arg = arg;
    pthread_mutex_lock(&sn->mu);
    *sn->qtail = op;
    sn->qtail = &op->next;
    pthread_cond_signal(&sn->qcv);
    pthread_mutex_unlock(&sn->mu);
    sn->inflight++;
    return 0;
fail:
    if (op != NULL)
        sn_op_free(op);
    return -1;
}

/* Runs the callbacks of everything the writer has finished. */
static void
sn_drain(struct store_nats *sn)
{
    struct sn_op *op, *next;

    pthread_mutex_lock(&sn->mu);
    op = sn->chead;
    sn->chead = NULL;
    sn->ctail = &sn->chead;
    pthread_mutex_unlock(&sn->mu);
    for (; op != NULL; op = next) {
        next = op->next;
        sn->inflight--;
        if (op->cb != NULL)
            op->cb(op->status, op->status == STORE_OK ? op->new_rev : 0,
                   op->status == STORE_OK ? NULL
                   : op->message != NULL  ? op->message
                                          : store_status_name(op->status),
                   op->arg);
        sn_op_free(op);
    }
}

static void
sn_on_wakeup(evutil_socket_t fd, short what, void *arg)
{
    uint64_t n;

    (void)what;
    /* The counter is reset before the list is taken (the writer appends,
     * then writes): whatever the read finds, the list is drained. */
    if (read(fd, &n, sizeof n) < 0)
        n = 0;
    sn_drain(arg);
}

/* ---- the writer thread -------------------------------------------------- */

static void *
sn_writer(void *arg)
{
    struct store_nats *sn = arg;
    uint64_t one = 1;

    for (;;) {
        struct sn_op *op;

        pthread_mutex_lock(&sn->mu);
        while (sn->qhead == NULL && !sn->stop)
            pthread_cond_wait(&sn->qcv, &sn->mu);
        op = sn->qhead;
        if (op == NULL) { /* stopping, and nothing is left */
            pthread_mutex_unlock(&sn->mu);
            return NULL;
        }
        sn->qhead = op->next;
        if (sn->qhead == NULL)
            sn->qtail = &sn->qhead;
        pthread_mutex_unlock(&sn->mu);

        op->next = NULL;
        store_nats_run(sn, op);

        pthread_mutex_lock(&sn->mu);
        *sn->ctail = op;
        sn->ctail = &op->next;
        pthread_cond_signal(&sn->ccv);
        pthread_mutex_unlock(&sn->mu);
        /* An eventfd write fails only when the counter would overflow,
         * and then the loop has a wakeup pending anyway. */
        if (write(sn->efd, &one, sizeof one) < 0)
            continue;
    }
}

/* ---- the backend's entry points ---------------------------------------- */

static enum store_status
sn_get(struct store *st, const char *key, uint8_t **value, size_t *len,
       uint64_t *revision, char *err, size_t errlen)
{
    return store_nats_get((struct store_nats *)st, key, value, len, revision,
                          err, errlen);
}

static enum store_status
sn_list(struct store *st, const char *prefix, store_list_cb cb, void *arg,
        char *err, size_t errlen)
{
    return store_nats_list((struct store_nats *)st, prefix, cb, arg, err,
                           errlen);
}

static int
sn_put(struct store *st, const char *key, const uint8_t *value, size_t len,
       uint64_t expected, store_done_cb cb, void *arg)
{
    return sn_submit((struct store_nats *)st, SN_PUT, key, value, len, expected,
                     cb, arg);
}

static int
sn_del(struct store *st, const char *key, uint64_t expected, store_done_cb cb,
       void *arg)
{
    return sn_submit((struct store_nats *)st, SN_DELETE, key, NULL, 0, expected,
                     cb, arg);
}

static int
sn_blob_put(struct store *st, const uint8_t *data, size_t len,
            const char *sha256_hex, store_done_cb cb, void *arg)
{
    return sn_submit((struct store_nats *)st, SN_BLOB_PUT, sha256_hex, data,
                     len, 0, cb, arg);
}

static enum store_status
sn_blob_get(struct store *st, const char *sha256_hex, uint8_t **data,
            size_t *len, char *err, size_t errlen)
{
    return store_nats_blob_get((struct store_nats *)st, sha256_hex, data, len,
                               err, errlen);
}

static int
sn_blob_delete(struct store *st, const char *sha256_hex, store_done_cb cb,
               void *arg)
{
    return sn_submit((struct store_nats *)st, SN_BLOB_DELETE, sha256_hex, NULL,
                     0, 0, cb, arg);
}

/* Runs every outstanding callback (and those of the writes they submit).
 * Blocks the loop thread; never from a callback. */
static void
sn_flush(struct store *st)
{
    struct store_nats *sn = (struct store_nats *)st;

    while (sn->inflight > 0) {
        pthread_mutex_lock(&sn->mu);
        while (sn->chead == NULL)
            pthread_cond_wait(&sn->ccv, &sn->mu);
        pthread_mutex_unlock(&sn->mu);
        sn_drain(sn);
    }
}

static void
sn_free(struct store_nats *sn)
{
    if (sn->thread_started) {
        pthread_mutex_lock(&sn->mu);
        sn->stop = true;
        pthread_cond_signal(&sn->qcv);
        pthread_mutex_unlock(&sn->mu);
        pthread_join(sn->thread, NULL);
    }
    store_nats_watch_free(sn);
    if (sn->ev != NULL)
        event_free(sn->ev);
    if (sn->efd >= 0)
        (void)close(sn->efd); /* an eventfd: nothing to lose */
    if (sn->sync_ready) {
        pthread_mutex_destroy(&sn->mu);
        pthread_cond_destroy(&sn->qcv);
        pthread_cond_destroy(&sn->ccv);
    }
    kvStore_Destroy(sn->state);
    kvStore_Destroy(sn->blobs);
    jsCtx_Destroy(sn->js);
    if (sn->nc != NULL) {
        natsConnection_Close(sn->nc);
        natsConnection_Destroy(sn->nc);
    }
    natsOptions_Destroy(sn->opts);
    free(sn->state_bucket);
    free(sn->blob_bucket);
    free(sn->state_stream);
    free(sn->blob_stream);
    free(sn->url);
    free(sn);
}

static void
sn_close(struct store *st)
{
    sn_flush(st);
    sn_free((struct store_nats *)st);
}

/* ---- open --------------------------------------------------------------- */

static bool
sn_set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

/* Binds bucket, creating it when missing. */
static int
sn_bucket(struct store_nats *sn, const struct store_config *cfg,
          const char *bucket, kvStore **kv, char *err, size_t errlen)
{
    kvConfig kc;
    natsStatus s = js_KeyValue(kv, sn->js, bucket);

    if (s == NATS_OK)
        return 0;
    if (s == NATS_NOT_FOUND) {
        kvConfig_Init(&kc);
        kc.Bucket = bucket;
        kc.History = 1;
        kc.Replicas = cfg->nats_replicas > 0 ? (int)cfg->nats_replicas : 1;
        kc.StorageType = cfg->nats_memory ? js_MemoryStorage : js_FileStorage;
        s = js_CreateKeyValue(kv, sn->js, &kc);
        if (s == NATS_OK)
            return 0;
    }
    store_nats_fail(err, errlen, s,
                    "NATS KV bucket %s at %s (does the server run "
                    "JetStream, nats-server -js, and may this user use it?)",
                    bucket, sn->url);
    return -1;
}

/* Connects and binds the buckets; libnats's threads start here. */
static int
sn_connect(struct store_nats *sn, const struct store_config *cfg, char *err,
           size_t errlen)
{
    struct nats_link_config lc = { 0 };
    jsOptions jo;
    natsStatus s;

    if (cfg->nats != NULL)
        lc = *cfg->nats;
    lc.url = sn->url;
    lc.who = "nats store";

    if (nats_link_connect(&lc, &sn->opts, &sn->nc, err, errlen) != 0)
        return -1;
    jsOptions_Init(&jo);
    jo.Wait = SN_WAIT_MS;
    s = natsConnection_JetStream(&sn->js, sn->nc, &jo);
    if (s != NATS_OK) {
        store_nats_fail(err, errlen, s, "nats store: JetStream at %s", sn->url);
        return -1;
    }
    if (sn_bucket(sn, cfg, sn->state_bucket, &sn->state, err, errlen) != 0 ||
        sn_bucket(sn, cfg, sn->blob_bucket, &sn->blobs, err, errlen) != 0)
        return -1;
    int64_t max = natsConnection_GetMaxPayload(sn->nc);
    sn->chunk = SN_CHUNK_MAX;
    if (max > 0 && (uint64_t)max < SN_CHUNK_MAX + SN_CHUNK_SLACK)
        sn->chunk = (uint64_t)max > SN_CHUNK_MIN + SN_CHUNK_SLACK
                        ? (size_t)max - SN_CHUNK_SLACK
                        : SN_CHUNK_MIN;
    return 0;
}

/* a "_" b, malloc'd, or NULL. */
static char *
sn_join(const char *a, const char *b)
{
    char *s;

    return asprintf(&s, "%s_%s", a, b) < 0 ? NULL : s;
}

static int
sn_sync_init(struct store_nats *sn, char *err, size_t errlen)
{
    int rc = pthread_mutex_init(&sn->mu, NULL);

    if (rc != 0)
        goto fail;
    if ((rc = pthread_cond_init(&sn->qcv, NULL)) != 0) {
        pthread_mutex_destroy(&sn->mu);
        goto fail;
    }
    if ((rc = pthread_cond_init(&sn->ccv, NULL)) != 0) {
        pthread_cond_destroy(&sn->qcv);
        pthread_mutex_destroy(&sn->mu);
        goto fail;
    }
    sn->sync_ready = true;
    return 0;
fail:
    return errbuf_set(err, errlen, "nats store: pthread init: %s",
                      strerror(rc));
}

static struct store *
sn_open(const struct store_config *cfg, struct event_base *base, char *err,
        size_t errlen)
{
    const char *prefix = sn_set(cfg->nats_prefix) ? cfg->nats_prefix : "wm";
    struct store_nats *sn = calloc(1, sizeof *sn);
    sigset_t all, old;
    int rc, connected;

    if (sn == NULL) {
        errbuf_set(err, errlen, "nats store: out of memory");
        return NULL;
    }
    sn->base.backend = &store_nats_backend;
    sn->efd = -1;
    sn->qtail = &sn->qhead;
    sn->ctail = &sn->chead;
    sn->url =
        strdup(cfg->nats && sn_set(cfg->nats->url) ? cfg->nats->url
                                                   : "nats://127.0.0.1:4222");
    sn->state_bucket = sn_join(prefix, "state");
    sn->blob_bucket = sn_join(prefix, "blobs");
    sn->state_stream =
        sn->state_bucket != NULL ? sn_join("KV", sn->state_bucket) : NULL;
    sn->blob_stream =
        sn->blob_bucket != NULL ? sn_join("KV", sn->blob_bucket) : NULL;
    if (sn->url == NULL || sn->state_bucket == NULL ||
        sn->blob_bucket == NULL || sn->state_stream == NULL ||
        sn->blob_stream == NULL) {
        errbuf_set(err, errlen, "nats store: out of memory");
        goto fail;
    }
    /* libnats's threads inherit this mask (see the opening comment). */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    connected = sn_connect(sn, cfg, err, errlen);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (connected != 0)
        goto fail;
    sn->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (sn->efd < 0) {
        errbuf_set(err, errlen, "nats store: eventfd: %s", strerror(errno));
        goto fail;
    }
    sn->ev = event_new(base, sn->efd, EV_READ | EV_PERSIST, sn_on_wakeup, sn);
    if (sn->ev == NULL || event_add(sn->ev, NULL) != 0) {
        errbuf_set(err, errlen, "nats store: cannot register its event");
        goto fail;
    }
    if (sn_sync_init(sn, err, errlen) != 0)
        goto fail;
    rc = thread_start_quiet(&sn->thread, sn_writer, sn, false);
    if (rc != 0) {
        errbuf_set(err, errlen, "nats store: writer thread: %s", strerror(rc));
        goto fail;
    }
    sn->thread_started = true;
    return &sn->base;
fail:
    sn_free(sn);
    return NULL;
}

const struct store_backend store_nats_backend = {
    .name = "nats",
    .open = sn_open,
    .close = sn_close,
    .flush = sn_flush,
    .get = sn_get,
    .list = sn_list,
    .put = sn_put,
    .del = sn_del,
    .blob_put = sn_blob_put,
    .blob_get = sn_blob_get,
    .blob_delete = sn_blob_delete,
    .watch = store_nats_watch,
};
