/*
 * store_nats_watch.c — store_watch() of the nats backend (store.h): the
 * changes of the state bucket, made by any daemon sharing it, handed to
 * the loop.
 *
 * A thread of its own opens a watcher on the whole state bucket
 * (kvStore_WatchAll: an ordered consumer of the bucket's stream, which
 * libnats re-creates after a reconnect), waits in kvWatcher_Next() and
 * keeps the entries under the prefix (KV keys have no '/' token, so the
 * prefix is matched here, after decoding the key).  Each goes on a list
 * under the mutex and the eventfd wakes the loop, which takes the list and
 * runs the callback for each, in order.  The watcher first sends every key
 * as it is (then a NULL entry, skipped), which is what store.h promises.
 *
 * Why a thread: kvWatcher_Next() blocks, as every libnats JetStream call
 * does (store_nats.c says why the loop does not call them).
 *
 * Invariants: the thread touches only the list, stop and the eventfd;
 * the callback runs on the loop thread, never inside store_watch().
 */
#include "config.h"

#include "master/store/store_nats_private.h"

#include "lib/errbuf.h"
#include "lib/thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

/* How long kvWatcher_Next() waits before the thread looks at stop. */
#define WATCH_POLL_MS 250

struct change {
    struct change *next;
    uint8_t *value; /* NULL: deleted */
    size_t len;
    uint64_t revision;
    char key[]; /* decoded */
};

struct sn_watch {
    struct store_nats *sn;
    char *prefix;
    store_watch_cb cb;
    void *arg;
    int efd;
    struct event *ev;
    pthread_t thread;
    bool started;
    kvWatcher *watcher;
    /* under mu */
    pthread_mutex_t mu;
    struct change *head, **tail;
    bool stop;
};

static void
on_wakeup(evutil_socket_t fd, short what, void *arg)
{
    struct sn_watch *w = arg;
    struct change *c, *next;
    uint64_t n;

    (void)what;
    if (read(fd, &n, sizeof n) < 0)
        n = 0;
    pthread_mutex_lock(&w->mu);
    c = w->head;
    w->head = NULL;
    w->tail = &w->head;
    pthread_mutex_unlock(&w->mu);
    for (; c != NULL; c = next) {
        next = c->next;
        w->cb(c->key, c->value, c->len, c->revision, w->arg);
        free(c->value);
        free(c);
    }
}

/* Queues entry e if its key is under the prefix. */
static void
take(struct sn_watch *w, kvEntry *e)
{
    const char *k = kvEntry_Key(e);
    size_t klen = strlen(k) + 1;
    struct change *c = malloc(sizeof *c + klen);
    kvOperation op = kvEntry_Operation(e);
    uint64_t one = 1;

    if (c == NULL)
        return;
    memcpy(c->key, k, klen);
    store_nats_key_decode(c->key);
    if (strncmp(c->key, w->prefix, strlen(w->prefix)) != 0) {
        free(c);
        return;
    }
    c->next = NULL;
    c->revision = kvEntry_Revision(e);
    c->len = 0;
    c->value = NULL;
    if (op == kvOp_Put) {
        c->len = (size_t)kvEntry_ValueLen(e);
        c->value = malloc(c->len ? c->len : 1);
        if (c->value == NULL) {
            free(c);
            return;
        }
        memcpy(c->value, kvEntry_Value(e), c->len);
    }
    pthread_mutex_lock(&w->mu);
    *w->tail = c;
    w->tail = &c->next;
    pthread_mutex_unlock(&w->mu);
    /* EAGAIN: the counter is full, the loop is woken anyway */
    (void)!write(w->efd, &one, sizeof one);
}

static bool
stopping(struct sn_watch *w)
{
    pthread_mutex_lock(&w->mu);
    bool stop = w->stop;
    pthread_mutex_unlock(&w->mu);
    return stop;
}

static void *
watch_thread(void *arg)
{
    struct sn_watch *w = arg;

    while (!stopping(w)) {
        kvEntry *e = NULL;
        natsStatus s = kvWatcher_Next(&e, w->watcher, WATCH_POLL_MS);

        if (s == NATS_OK && e != NULL) {
            take(w, e);
            kvEntry_Destroy(e);
        } else if (s != NATS_OK && s != NATS_TIMEOUT) {
            /* stopped (NATS_ILLEGAL_STATE), or the connection is gone for
             * now: wait a little, as the reconnect does */
            usleep(WATCH_POLL_MS * 1000);
        }
    }
    return NULL;
}

void
store_nats_watch_free(struct store_nats *sn)
{
    struct sn_watch *w = sn->watch;

    if (w == NULL)
        return;
    if (w->started) {
        pthread_mutex_lock(&w->mu);
        w->stop = true;
        pthread_mutex_unlock(&w->mu);
        kvWatcher_Stop(w->watcher);
        pthread_join(w->thread, NULL);
    }
    kvWatcher_Destroy(w->watcher);
    if (w->ev)
        event_free(w->ev);
    if (w->efd >= 0)
        (void)close(w->efd);
    while (w->head) {
        struct change *c = w->head;
        w->head = c->next;
        free(c->value);
        free(c);
    }
    pthread_mutex_destroy(&w->mu);
    free(w->prefix);
    free(w);
    sn->watch = NULL;
}

int
store_nats_watch(struct store *st, const char *prefix, store_watch_cb cb,
                 void *arg, char *err, size_t errlen)
{
    struct store_nats *sn = (struct store_nats *)st;
    struct event_base *base = event_get_base(sn->ev);
    kvWatchOptions o;
    natsStatus s;
    int rc;

    if (sn->watch != NULL)
        return errbuf_set(err, errlen, "nats store: one watch per store");
    struct sn_watch *w = calloc(1, sizeof *w);
    if (w == NULL)
        return errbuf_set(err, errlen, "nats store: out of memory");
    w->sn = sn;
    w->cb = cb;
    w->arg = arg;
    w->efd = -1;
    w->tail = &w->head;
    pthread_mutex_init(&w->mu, NULL);
    sn->watch = w;
    if ((w->prefix = strdup(prefix)) == NULL) {
        errbuf_set(err, errlen, "nats store: out of memory");
        goto fail;
    }
    kvWatchOptions_Init(&o);
    s = kvStore_WatchAll(&w->watcher, sn->state, &o);
    if (s != NATS_OK) {
        store_nats_fail(err, errlen, s, "nats store: watching %s",
                        sn->state_bucket);
        goto fail;
    }
    w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    w->ev = w->efd >= 0
                ? event_new(base, w->efd, EV_READ | EV_PERSIST, on_wakeup, w)
                : NULL;
    if (w->ev == NULL || event_add(w->ev, NULL) != 0) {
        errbuf_set(err, errlen, "nats store: watch: no eventfd event");
        goto fail;
    }
    rc = thread_start_quiet(&w->thread, watch_thread, w, false);
    if (rc != 0) {
        errbuf_set(err, errlen, "nats store: watch thread: %s", strerror(rc));
        goto fail;
    }
    w->started = true;
    return 0;
fail:
    store_nats_watch_free(sn);
    return -1;
}
