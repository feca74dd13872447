/*
 * store_file_writer.c — the `file` store backend's writer thread: every
 * write under state_dir after open (store_file_private.h; the backend is
 * described in store_file.c).
 *
 * The loop queues ops (store_file.c); this thread takes the whole queue
 * at once, runs each op — tmp/<n>, fsync, rename into place, fsync the
 * directory — and hands the ops back through the completion list and an
 * eventfd, in submission order.  It never calls a callback.
 *
 * When a write fails on disk, later queued writes of the same key were
 * decided against a revision that will never exist.  The writer therefore
 * "poisons" the key at the failure (a writer-private list): every later op
 * on it fails with STORE_IO naming the first failure, until the loop has
 * resynchronised its entry from the disk and queued an SF_UNPOISON marker
 * behind them.  Ops submitted after the marker were decided against the
 * disk's truth and run normally.
 *
 * fsync policy (cfg->fsync):
 *   always  each write: fsync(file) before rename, fsync(dir) after; the
 *           callback runs once both are done.
 *   batch   group commit: the writer drains the whole queue at once; each
 *           file is still fsynced before its rename (so a rename can never
 *           expose a torn file), but each directory touched is fsynced once
 *           at the end of the batch, and only then do the batch's callbacks
 *           run.  Nothing acknowledged is less durable than with "always";
 *           the cost is latency (an early op of a batch waits for the last
 *           one), the gain fewer directory fsyncs under load.  A directory
 *           fsync failure fails every op of the batch that renamed into it.
 *   off     no fsync at all: a power failure may lose recent writes (a key
 *           reads as an older revision) but never tears a record, since
 *           the rename is still atomic.
 *
 * Invariants: the poison list and tmp_seq are this thread's alone; an op's
 * result fields are written here and read by the loop only after the op
 * came back through the completion list.
 */
#include "config.h"

#include "master/store/store_file_private.h"

#include "lib/errbuf.h"
#include "lib/thread.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

/* Blob files are hashed in pieces of this size. */
#define SF_HASH_BUF 65536

/* A key whose write failed, until the loop's marker. */
struct sf_poison {
    struct sf_poison *next;
    char *key;
    char *message;
};

/* The directories to fsync at the end of a batch. */
struct sf_dirset {
    char **dirs;
    char **errors; /* per directory: NULL, or why its fsync failed */
    size_t n, cap;
};

static int
sf_write_full(int fd, const void *buf, size_t len)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = write(fd, (const char *)buf + done, len - done);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

static void sf_op_fail(struct sf_op *op, enum store_status status,
                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A write's failure: STORE_NOSPACE for a full disk, else STORE_IO. */
static enum store_status
sf_disk_status(int e)
{
    return e == ENOSPC || e == EDQUOT ? STORE_NOSPACE : STORE_IO;
}

static void
sf_op_fail(struct sf_op *op, enum store_status status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    store_fail_v(&op->status, &op->message, status, fmt, ap);
    va_end(ap);
}

static struct sf_poison *
sf_poison_find(struct store_file *sf, const char *key)
{
    struct sf_poison *p;

    for (p = sf->poison; p != NULL; p = p->next) {
        if (strcmp(p->key, key) == 0)
            return p;
    }
    return NULL;
}

/* Poisons key after its write failed.  Out of memory, the key stays
 * unpoisoned: later writes are then tried (and probably fail) on their own,
 * which loses the "decided on a stale revision" check only. */
static void
sf_poison_add(struct store_file *sf, const char *key, const char *message)
{
    struct sf_poison *p;

    if (sf_poison_find(sf, key) != NULL)
        return;
    p = calloc(1, sizeof *p);
    if (p == NULL)
        return;
    p->key = strdup(key);
    p->message = strdup(message != NULL ? message : "i/o error");
    if (p->key == NULL || p->message == NULL) {
        free(p->key);
        free(p->message);
        free(p);
        return;
    }
    p->next = sf->poison;
    sf->poison = p;
}

static void
sf_poison_remove(struct store_file *sf, const char *key)
{
    struct sf_poison **pp, *p;

    for (pp = &sf->poison; (p = *pp) != NULL; pp = &p->next) {
        if (strcmp(p->key, key) == 0) {
            *pp = p->next;
            free(p->key);
            free(p->message);
            free(p);
            return;
        }
    }
}

int
store_file_dir_sync(struct sf_op *op, const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0) {
        sf_op_fail(op, STORE_IO, "open %s: %s", dir, strerror(errno));
        return -1;
    }
    if (fsync(fd) != 0) {
        sf_op_fail(op, sf_disk_status(errno), "fsync %s: %s", dir,
                   strerror(errno));
        (void)close(fd);
        return -1;
    }
    if (close(fd) != 0) {
        sf_op_fail(op, STORE_IO, "close %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* The directory part of path, malloc'd. */
static char *
sf_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');

    return strndup(path, slash != NULL ? (size_t)(slash - path) : 0);
}

/* Creates the directories between root and path's file (a blob's fan-out
 * directory, a long key's chunks).  A directory created here is made
 * durable in its parent before anything is renamed into it. */
static int
sf_make_dirs(struct store_file *sf, struct sf_op *op, const char *root,
             const char *path)
{
    char *p = strdup(path), *s, *slash;
    int rc = -1;

    if (p == NULL) {
        sf_op_fail(op, STORE_IO, "%s: out of memory", path);
        return -1;
    }
    for (s = p + strlen(root) + 1; (slash = strchr(s, '/')) != NULL;
         s = slash + 1) {
        *slash = '\0';
        if (mkdir(p, 0700) == 0) {
            if (sf->fsync != SF_FSYNC_OFF) {
                char *parent = sf_dirname(p);
                int r;

                if (parent == NULL) {
                    sf_op_fail(op, STORE_IO, "%s: out of memory", p);
                    goto out;
                }
                r = store_file_dir_sync(op, parent);
                free(parent);
                if (r != 0)
                    goto out;
            }
        } else if (errno != EEXIST) {
            sf_op_fail(op, sf_disk_status(errno), "mkdir %s: %s", p,
                       strerror(errno));
            goto out;
        }
        *slash = '/';
    }
    rc = 0;
out:
    free(p);
    return rc;
}

static long
sf_dirset_add(struct sf_dirset *ds, const char *dir)
{
    size_t i;

    for (i = 0; i < ds->n; i++) {
        if (strcmp(ds->dirs[i], dir) == 0)
            return (long)i;
    }
    if (ds->n == ds->cap) {
        size_t cap = ds->cap ? 2 * ds->cap : 8;
        char **d = realloc(ds->dirs, cap * sizeof *d);

        if (d == NULL)
            return -1;
        ds->dirs = d;
        d = realloc(ds->errors, cap * sizeof *d);
        if (d == NULL)
            return -1;
        ds->errors = d;
        ds->cap = cap;
    }
    ds->dirs[ds->n] = strdup(dir);
    if (ds->dirs[ds->n] == NULL)
        return -1;
    ds->errors[ds->n] = NULL;
    return (long)ds->n++;
}

/* After a rename or unlink in path's directory: make it durable now
 * (always), at the end of the batch (batch; directory remembered in
 * op->dir_idx), or not at all (off). */
static int
sf_sync_parent(struct store_file *sf, struct sf_op *op, const char *path,
               struct sf_dirset *ds)
{
    char *dir;
    int rc = 0;

    if (sf->fsync == SF_FSYNC_OFF)
        return 0;
    dir = sf_dirname(path);
    if (dir == NULL) {
        sf_op_fail(op, STORE_IO, "%s: out of memory", path);
        return -1;
    }
    if (sf->fsync == SF_FSYNC_BATCH && ds != NULL)
        op->dir_idx = sf_dirset_add(ds, dir);
    /* Out of memory for the set: fsync now rather than not at all. */
    if (sf->fsync == SF_FSYNC_ALWAYS || op->dir_idx < 0)
        rc = store_file_dir_sync(op, dir);
    free(dir);
    return rc;
}

/* tmp/<n> ← head + data, fsync, rename over op->path, directory sync. */
static int
sf_atomic_write(struct store_file *sf, struct sf_op *op, const char *root,
                const uint8_t *head, size_t headlen, struct sf_dirset *ds)
{
    char *tmp = store_file_printf("%s/w%" PRIu64, sf->tmp, ++sf->tmp_seq);
    int fd = -1, rc = -1;

    if (tmp == NULL) {
        sf_op_fail(op, STORE_IO, "%s: out of memory", op->path);
        return -1;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        sf_op_fail(op, sf_disk_status(errno), "open %s: %s", tmp,
                   strerror(errno));
        goto out;
    }
    if ((headlen > 0 && sf_write_full(fd, head, headlen) != 0) ||
        (op->len > 0 && sf_write_full(fd, op->value, op->len) != 0)) {
        sf_op_fail(op, sf_disk_status(errno), "write %s: %s", tmp,
                   strerror(errno));
        goto out;
    }
    /* The data must be on disk before the rename can point at it, or a
     * power failure could leave the new name on an empty file. */
    if (sf->fsync != SF_FSYNC_OFF && fsync(fd) != 0) {
        sf_op_fail(op, sf_disk_status(errno), "fsync %s: %s", tmp,
                   strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        sf_op_fail(op, sf_disk_status(errno), "close %s: %s", tmp,
                   strerror(errno));
        goto out;
    }
    fd = -1;
    if (sf_make_dirs(sf, op, root, op->path) != 0)
        goto out;
    if (rename(tmp, op->path) != 0) {
        sf_op_fail(op, sf_disk_status(errno), "rename %s to %s: %s", tmp,
                   op->path, strerror(errno));
        goto out;
    }
    free(tmp);
    tmp = NULL;
    rc = sf_sync_parent(sf, op, op->path, ds);
out:
    if (fd >= 0)
        (void)close(fd); /* already failing: the first error is reported */
    if (tmp != NULL) {
        /* Best effort: open() removes whatever is left in tmp/. */
        (void)unlink(tmp);
        free(tmp);
    }
    return rc;
}

static void
sf_do_put(struct store_file *sf, struct sf_op *op, struct sf_dirset *ds)
{
    uint8_t h[SF_HEADER];

    if (store_file_header_encode(h, op->new_rev, op->value, op->len) != 0) {
        sf_op_fail(op, STORE_IO, "record %s: SHA-256 failed", op->name);
        return;
    }
    (void)sf_atomic_write(sf, op, sf->records, h, sizeof h, ds);
}

static void
sf_do_unlink(struct store_file *sf, struct sf_op *op, struct sf_dirset *ds)
{
    if (unlink(op->path) != 0) {
        if (!store_file_absent(errno)) {
            sf_op_fail(op, STORE_IO, "unlink %s: %s", op->path,
                       strerror(errno));
            return;
        }
        /* A blob's absence was not known before: report it.  A record's
         * absence means it vanished behind our back: the goal is met. */
        if (op->kind == SF_BLOB_DELETE) {
            sf_op_fail(op, STORE_NOT_FOUND, "blob %s: not found", op->name);
            return;
        }
        return;
    }
    (void)sf_sync_parent(sf, op, op->path, ds);
}

/* Hashes a blob file: 0 with hex, 1 when absent, -1 (message in op). */
static int
sf_hash_file(struct sf_op *op, const char *path, char hex[STORE_SHA256_HEX])
{
    uint8_t md[32], *buf = NULL;
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = NULL;
    int fd, rc = -1;
    ssize_t n;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (store_file_absent(errno))
            return 1;
        sf_op_fail(op, STORE_IO, "open %s: %s", path, strerror(errno));
        return -1;
    }
    buf = malloc(SF_HASH_BUF);
    ctx = EVP_MD_CTX_new();
    if (buf == NULL || ctx == NULL ||
        EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        sf_op_fail(op, STORE_IO, "blob %s: SHA-256: out of memory", op->name);
        goto out;
    }
    while ((n = store_file_read_full(fd, buf, SF_HASH_BUF)) > 0) {
        if (EVP_DigestUpdate(ctx, buf, (size_t)n) != 1) {
            sf_op_fail(op, STORE_IO, "blob %s: SHA-256 failed", op->name);
            goto out;
        }
    }
    if (n < 0) {
        sf_op_fail(op, STORE_IO, "read %s: %s", path, strerror(errno));
        goto out;
    }
    if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != sizeof md) {
        sf_op_fail(op, STORE_IO, "blob %s: SHA-256 failed", op->name);
        goto out;
    }
    store_hex(md, hex);
    rc = 0;
out:
    EVP_MD_CTX_free(ctx);
    free(buf);
    (void)close(fd); /* read-only: nothing to lose */
    return rc;
}

/* Idempotent: an intact blob is kept; an absent or corrupt one is
 * (re)written. */
static void
sf_do_blob_put(struct store_file *sf, struct sf_op *op, struct sf_dirset *ds)
{
    char hex[STORE_SHA256_HEX];
    int r = sf_hash_file(op, op->path, hex);

    if (r < 0)
        return;
    if (r == 0 && strcmp(hex, op->name) == 0)
        return;
    (void)sf_atomic_write(sf, op, sf->blobs, NULL, 0, ds);
}

/* Posts first..last (linked) to the loop: completion list, then a wakeup
 * (read before the list is taken, so no wakeup is lost). */
static void
sf_post(struct store_file *sf, struct sf_op *first, struct sf_op *last)
{
    static const uint64_t one = 1;

    last->next = NULL;
    pthread_mutex_lock(&sf->cmu);
    *sf->ctail = first;
    sf->ctail = &last->next;
    pthread_cond_signal(&sf->ccv);
    pthread_mutex_unlock(&sf->cmu);
    /* EAGAIN means the counter is saturated, so the loop is woken anyway;
     * an eventfd accepts an 8-byte write in every other case. */
    while (write(sf->efd, &one, sizeof one) < 0 && errno == EINTR)
        continue;
}

static void
sf_run_op(struct store_file *sf, struct sf_op *op, struct sf_dirset *ds)
{
    struct sf_poison *p;

    switch (op->kind) {
    case SF_PUT:
    case SF_DELETE:
        p = sf_poison_find(sf, op->name);
        if (p != NULL) {
            sf_op_fail(op, STORE_IO,
                       "record %s: not written: an earlier write of this key "
                       "failed (%s)",
                       op->name, p->message);
            return;
        }
        if (op->kind == SF_PUT)
            sf_do_put(sf, op, ds);
        else
            sf_do_unlink(sf, op, ds);
        if (op->status != STORE_OK) {
            op->root_failure = true;
            sf_poison_add(sf, op->name, op->message);
        }
        return;
    case SF_BLOB_PUT:
        sf_do_blob_put(sf, op, ds);
        return;
    case SF_BLOB_DELETE:
        sf_do_unlink(sf, op, ds);
        return;
    case SF_UNPOISON:
        sf_poison_remove(sf, op->name);
        return;
    case SF_REJECT:
        return;
    }
}

/* One batch: everything that was queued when the writer woke up. */
static void
sf_run_batch(struct store_file *sf, struct sf_op *batch)
{
    struct sf_dirset ds = { 0 };
    struct sf_op *op, *next, *last = NULL;
    size_t i;

    for (op = batch; op != NULL; op = next) {
        next = op->next;
        sf_run_op(sf, op, &ds);
        if (sf->fsync != SF_FSYNC_BATCH)
            sf_post(sf, op, op);
        last = op;
    }
    if (sf->fsync != SF_FSYNC_BATCH || last == NULL)
        return;
    /* Group commit: one fsync per directory touched, then the callbacks. */
    for (i = 0; i < ds.n; i++) {
        struct sf_op probe = { .status = STORE_OK };

        if (store_file_dir_sync(&probe, ds.dirs[i]) != 0)
            ds.errors[i] = probe.message;
    }
    for (op = batch; op != NULL; op = op->next) {
        if (op->dir_idx < 0 || op->status != STORE_OK ||
            ds.errors[op->dir_idx] == NULL)
            continue;
        sf_op_fail(op, STORE_IO,
                   "%s: %s (the write may not survive a "
                   "power failure)",
                   op->name, ds.errors[op->dir_idx]);
        if (op->kind == SF_PUT || op->kind == SF_DELETE) {
            op->root_failure = true;
            sf_poison_add(sf, op->name, op->message);
        }
    }
    for (i = 0; i < ds.n; i++) {
        free(ds.dirs[i]);
        free(ds.errors[i]);
    }
    free(ds.dirs);
    free(ds.errors);
    sf_post(sf, batch, last);
}

static void *
sf_writer(void *arg)
{
    struct store_file *sf = arg;

    for (;;) {
        struct sf_op *batch;

        pthread_mutex_lock(&sf->qmu);
        while (sf->qhead == NULL && !sf->stop)
            pthread_cond_wait(&sf->qcv, &sf->qmu);
        batch = sf->qhead;
        sf->qhead = NULL;
        sf->qtail = &sf->qhead;
        pthread_mutex_unlock(&sf->qmu);
        if (batch == NULL)
            break; /* stop, and nothing left */
        sf_run_batch(sf, batch);
    }
    return NULL;
}

/* The writer takes no signal: they belong to the loop (libevent). */
int
store_file_writer_start(struct store_file *sf, char *err, size_t errlen)
{
    int rc = thread_start_quiet(&sf->thread, sf_writer, sf, false);

    if (rc != 0) {
        errbuf_set(err, errlen, "state store: starting the writer thread: %s",
                   strerror(rc));
        return -1;
    }
    sf->thread_started = true;
    return 0;
}

void
store_file_writer_stop(struct store_file *sf)
{
    pthread_mutex_lock(&sf->qmu);
    sf->stop = true;
    pthread_cond_signal(&sf->qcv);
    pthread_mutex_unlock(&sf->qmu);
    if (sf->thread_started)
        pthread_join(sf->thread, NULL);
}

void
store_file_poison_clear(struct store_file *sf)
{
    while (sf->poison != NULL)
        sf_poison_remove(sf, sf->poison->key);
}
