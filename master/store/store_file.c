/*
 * store_file.c — the `file` state store backend (DESIGN §9, store.h): its
 * entry points, submission and completion on the loop thread, open and
 * close.  The layout under state_dir and the record format are described
 * in store_file_records.c, the writer thread and the fsync policy in
 * store_file_writer.c; what the three files share is in
 * store_file_private.h.
 *
 * Threads.  Every exported entry point runs on the loop thread.  Writes go
 * to ONE writer thread through a FIFO queue; it writes tmp/<n>, fsyncs it,
 * renames it into place and fsyncs the directory, then hands the op back
 * through a completion list and an eventfd that a libevent event on the
 * loop watches; callbacks run there, in submission order.  The loop never
 * touches the disk for a write.  Reads (get, list, blob_get) are
 * synchronous, as store.h allows.
 *
 * Revisions and compare-and-set.  The loop keeps a sorted array of every
 * key (filled at open by scanning records/ and reading each header) with
 * its revision as of the last *submitted* write.  CAS is decided at submit
 * time against that array, so two conflicting puts submitted back to back
 * give one OK and one CONFLICT deterministically, and no CAS reads the
 * disk.  A decided conflict still travels through the queue (as
 * SF_REJECT) so that callbacks keep submission order.  Reads see submitted
 * writes: while a key has a write in flight (entry->last), get and list
 * answer from that op's value, so a get after a put agrees with the
 * revision that CAS will check.  A write that fails on disk poisons its
 * key in the writer until the loop has resynchronised the key's entry from
 * the disk (sf_resync(), sf_complete()).
 *
 * Invariants:
 *   - entries[] is sorted by strcmp and holds exactly the keys that exist
 *     once every submitted op has completed (a pending delete keeps its
 *     entry, with last->kind == SF_DELETE, until it completes).
 *   - entry->last, when set, is the newest submitted and not yet completed
 *     put or delete of that key; its value is immutable and freed only on
 *     the loop thread after its completion.
 *   - Only the writer thread writes under state_dir after open; only the
 *     loop reads records, except that the writer reads blobs it may replace.
 *   - inflight counts ops submitted and not yet completed (markers too).
 */
#include "config.h"

#include "master/store/store_file_private.h"

#include "lib/errbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

/* Room for a state_dir path; the rest of a path is at most ~530 bytes. */
#define SF_DIR_MAX 2048

/* What a 0-byte value points at when no buffer holds it. */
static const uint8_t sf_empty;

/* ---- submission and completion (loop thread) --------------------------- */

static void
sf_op_free(struct sf_op *op)
{
    free(op->name);
    free(op->path);
    free(op->value);
    free(op->message);
    free(op);
}

static struct sf_op *
sf_op_new(enum sf_kind kind, const char *name, char *path, const uint8_t *value,
          size_t len, store_done_cb cb, void *arg)
{
    struct sf_op *op = calloc(1, sizeof *op);

    if (op == NULL || path == NULL)
        goto fail;
    op->kind = kind;
    op->path = path;
    op->name = strdup(name);
    if (op->name == NULL)
        goto fail;
    if (len > 0) {
        op->value = malloc(len);
        if (op->value == NULL)
            goto fail;
        memcpy(op->value, value, len);
        op->len = len;
    }
    op->cb = cb;
    op->arg = arg;
    op->status = STORE_OK;
    op->dir_idx = -1;
    return op;
fail:
    if (op != NULL) {
        op->path = NULL;
        sf_op_free(op);
    }
    free(path);
    return NULL;
}

static void
sf_enqueue(struct store_file *sf, struct sf_op *op)
{
    op->next = NULL;
    pthread_mutex_lock(&sf->qmu);
    *sf->qtail = op;
    sf->qtail = &op->next;
    pthread_cond_signal(&sf->qcv);
    pthread_mutex_unlock(&sf->qmu);
    sf->inflight++;
}

/* Turns op into a pass-through carrying a decision made at submit. */
static void sf_reject(struct sf_op *op, enum store_status status,
                      const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
sf_reject(struct sf_op *op, enum store_status status, const char *fmt, ...)
{
    va_list ap;

    op->kind = SF_REJECT;
    op->status = status;
    va_start(ap, fmt);
    if (vasprintf(&op->message, fmt, ap) < 0)
        op->message = NULL;
    va_end(ap);
    free(op->value);
    op->value = NULL;
    op->len = 0;
}

/* After a failed write: the entry of key becomes what the disk holds (the
 * key is poisoned in the writer, so nothing writes it meanwhile).  This is
 * the only disk read the loop makes on a write's behalf, and only on
 * failure. */
static void
sf_resync(struct store_file *sf, const char *key, const char *path)
{
    uint64_t rev = 0;
    struct sf_entry *e;
    enum sf_hdr h;
    size_t pos;

    e = store_file_entry_find(sf, key, &pos);
    h = store_file_record_rev(path, &rev);
    if (h == SF_HDR_MISSING) {
        if (e != NULL)
            store_file_entry_remove(sf, pos);
        return;
    }
    /* Out of memory the key reads as absent until the next open. */
    if (e == NULL && (e = store_file_entry_insert(sf, pos, key)) == NULL)
        return;
    e->last = NULL;
    e->rev = h == SF_HDR_OK ? rev : 0;
    e->rev_unknown = h != SF_HDR_OK;
}

static void
sf_complete(struct store_file *sf, struct sf_op *op)
{
    enum store_status status = op->status;
    store_done_cb cb = op->cb;
    void *arg = op->arg;
    char *message;
    uint64_t rev;

    if (op->kind == SF_PUT || op->kind == SF_DELETE) {
        size_t pos;
        struct sf_entry *e = store_file_entry_find(sf, op->name, &pos);

        if (status != STORE_OK &&
            (op->root_failure || (e != NULL && e->last == op))) {
            sf_resync(sf, op->name, op->path);
        } else if (e != NULL && e->last == op) {
            e->last = NULL;
            if (op->kind == SF_DELETE)
                store_file_entry_remove(sf, pos);
        }
        if (op->root_failure) {
            /* The op itself becomes the marker that lifts the poison: it
             * is queued before the callback can submit anything, so every
             * op behind it was decided against the resynchronised entry.
             * inflight stays counted until the marker comes back. */
            message = op->message;
            op->message = NULL;
            free(op->value);
            op->value = NULL;
            op->len = 0;
            op->kind = SF_UNPOISON;
            op->cb = NULL;
            op->status = STORE_OK;
            op->root_failure = false;
            sf->inflight--;
            sf_enqueue(sf, op);
            if (cb != NULL)
                cb(status, 0,
                   message != NULL ? message : store_status_name(status), arg);
            free(message);
            return;
        }
    }
    rev = status == STORE_OK ? op->new_rev : 0;
    if (cb != NULL)
        cb(status, rev,
           status == STORE_OK
               ? NULL
               : (op->message != NULL ? op->message
                                      : store_status_name(status)),
           arg);
    sf_op_free(op);
    sf->inflight--;
}

/* Runs the callbacks of everything the writer has finished. */
static void
sf_drain(struct store_file *sf)
{
    struct sf_op *op, *next;

    pthread_mutex_lock(&sf->cmu);
    op = sf->chead;
    sf->chead = NULL;
    sf->ctail = &sf->chead;
    pthread_mutex_unlock(&sf->cmu);
    for (; op != NULL; op = next) {
        next = op->next;
        sf_complete(sf, op);
    }
}

static void
sf_on_wakeup(evutil_socket_t fd, short what, void *arg)
{
    uint64_t n;

    (void)what;
    /* Reset the counter before taking the list (see sf_post() in
     * store_file_writer.c).  The read fails only with EAGAIN (a spurious
     * wakeup) or EINTR; the list is drained in every case, so nothing is
     * lost. */
    if (read(fd, &n, sizeof n) < 0)
        n = 0;
    sf_drain(arg);
}

/* ---- the backend's entry points ------------------------------------------ */

static int
sf_put(struct store *st, const char *key, const uint8_t *value, size_t len,
       uint64_t expected, store_done_cb cb, void *arg)
{
    struct store_file *sf = (struct store_file *)st;
    struct sf_entry *e;
    struct sf_op *op;
    bool exists;
    size_t pos;

    op = sf_op_new(SF_PUT, key, store_file_record_path(sf, key), value, len, cb,
                   arg);
    if (op == NULL)
        return -1;
    e = store_file_entry_find(sf, key, &pos);
    exists = e != NULL && !(e->last != NULL && e->last->kind == SF_DELETE);
    if (expected != STORE_ANY_REVISION) {
        if (!exists && expected != 0) {
            sf_reject(op, STORE_CONFLICT,
                      "key %s: expected revision %" PRIu64
                      ", but it does not exist",
                      key, expected);
        } else if (exists && e->rev_unknown) {
            sf_reject(op, STORE_CONFLICT,
                      "key %s: its record is corrupt, so its revision is "
                      "unknown; only an unconditional put replaces it",
                      key);
        } else if (exists && expected == 0) {
            sf_reject(op, STORE_CONFLICT,
                      "key %s: expected it absent, found revision %" PRIu64,
                      key, e->rev);
        } else if (exists && e->rev != expected) {
            sf_reject(op, STORE_CONFLICT,
                      "key %s: expected revision %" PRIu64 ", found %" PRIu64,
                      key, expected, e->rev);
        }
    }
    if (op->kind == SF_PUT) {
        if (e == NULL && (e = store_file_entry_insert(sf, pos, key)) == NULL) {
            sf_op_free(op);
            return -1;
        }
        op->new_rev = exists && !e->rev_unknown ? e->rev + 1 : 1;
        e->rev = op->new_rev;
        e->rev_unknown = false;
        e->last = op;
    }
    sf_enqueue(sf, op);
    return 0;
}

static int
sf_del(struct store *st, const char *key, uint64_t expected, store_done_cb cb,
       void *arg)
{
    struct store_file *sf = (struct store_file *)st;
    struct sf_entry *e;
    struct sf_op *op;

    op = sf_op_new(SF_DELETE, key, store_file_record_path(sf, key), NULL, 0, cb,
                   arg);
    if (op == NULL)
        return -1;
    e = store_file_entry_find(sf, key, NULL);
    if (e == NULL || (e->last != NULL && e->last->kind == SF_DELETE)) {
        sf_reject(op, STORE_NOT_FOUND, "key %s: not found", key);
    } else if (expected != STORE_ANY_REVISION && e->rev_unknown) {
        sf_reject(op, STORE_CONFLICT,
                  "key %s: its record is corrupt, so its revision is "
                  "unknown; only an unconditional delete removes it",
                  key);
    } else if (expected != STORE_ANY_REVISION && e->rev != expected) {
        sf_reject(op, STORE_CONFLICT,
                  "key %s: expected revision %" PRIu64 ", found %" PRIu64, key,
                  expected, e->rev);
    } else {
        op->new_rev = 0;
        e->rev = 0;
        e->rev_unknown = false;
        e->last = op;
    }
    sf_enqueue(sf, op);
    return 0;
}

static enum store_status
sf_get(struct store *st, const char *key, uint8_t **value, size_t *len,
       uint64_t *revision, char *err, size_t errlen)
{
    struct store_file *sf = (struct store_file *)st;
    enum store_status rc;
    struct sf_entry *e;
    char *path;
    size_t pos;

    e = store_file_entry_find(sf, key, &pos);
    if (e == NULL)
        return STORE_NOT_FOUND;
    if (e->last != NULL) {
        /* A write in flight: answer what it will make durable. */
        if (e->last->kind == SF_DELETE)
            return STORE_NOT_FOUND;
        *value = malloc(e->last->len > 0 ? e->last->len : 1);
        if (*value == NULL) {
            errbuf_set(err, errlen, "record %s: out of memory", key);
            return STORE_IO;
        }
        if (e->last->len > 0)
            memcpy(*value, e->last->value, e->last->len);
        *len = e->last->len;
        *revision = e->last->new_rev;
        return STORE_OK;
    }
    path = store_file_record_path(sf, key);
    if (path == NULL) {
        errbuf_set(err, errlen, "record %s: out of memory", key);
        return STORE_IO;
    }
    rc = store_file_record_read(key, path, value, len, revision, err, errlen);
    if (rc == STORE_NOT_FOUND) {
        /* Removed behind our back: the disk is the truth. */
        store_file_entry_remove(sf, pos);
    } else if (rc != STORE_OK) {
        *revision = 0;
    }
    free(path);
    return rc;
}

static enum store_status
sf_list(struct store *st, const char *prefix, store_list_cb cb, void *arg,
        char *err, size_t errlen)
{
    struct store_file *sf = (struct store_file *)st;
    size_t plen = strlen(prefix), first, n = 0, i;
    enum store_status rc = STORE_OK;
    char **keys = NULL;

    /* Snapshot the matching keys: the callback may put or delete, which
     * moves the array under us. */
    (void)store_file_entry_find(sf, prefix, &first);
    while (first + n < sf->nentries &&
           strncmp(sf->entries[first + n]->key, prefix, plen) == 0)
        n++;
    if (n > 0) {
        keys = calloc(n, sizeof *keys);
        if (keys == NULL) {
            errbuf_set(err, errlen, "list %s: out of memory", prefix);
            return STORE_IO;
        }
    }
    for (i = 0; i < n; i++) {
        keys[i] = strdup(sf->entries[first + i]->key);
        if (keys[i] == NULL) {
            errbuf_set(err, errlen, "list %s: out of memory", prefix);
            rc = STORE_IO;
            goto out;
        }
    }
    for (i = 0; i < n; i++) {
        struct sf_entry *e = store_file_entry_find(sf, keys[i], NULL);
        char msg[1024];
        uint8_t *value = NULL;
        uint64_t rev = 0;
        size_t len = 0;
        enum store_status r;
        char *path;
        int stop;

        if (e == NULL)
            continue;
        if (e->last != NULL) {
            if (e->last->kind == SF_DELETE)
                continue;
            /* STORE_OK always comes with a pointer, even for 0 bytes. */
            if (cb(keys[i], STORE_OK,
                   e->last->value != NULL ? e->last->value : &sf_empty,
                   e->last->len, e->last->new_rev, NULL, arg) != 0)
                break;
            continue;
        }
        path = store_file_record_path(sf, keys[i]);
        if (path == NULL) {
            errbuf_set(err, errlen, "list %s: out of memory", prefix);
            rc = STORE_IO;
            break;
        }
        r = store_file_record_read(keys[i], path, &value, &len, &rev, msg,
                                   sizeof msg);
        free(path);
        if (r == STORE_NOT_FOUND)
            continue; /* removed behind our back: it is not there */
        if (r == STORE_IO) {
            /* The callback's contract knows OK and CORRUPT only: an
             * unreadable file stops the listing with the cause. */
            errbuf_set(err, errlen, "%s", msg);
            rc = STORE_IO;
            break;
        }
        if (r == STORE_OK)
            stop = cb(keys[i], STORE_OK, value, len, rev, NULL, arg);
        else
            stop = cb(keys[i], STORE_CORRUPT, NULL, 0, rev, msg, arg);
        free(value);
        if (stop != 0)
            break;
    }
out:
    for (i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
    return rc;
}

static int
sf_blob_put(struct store *st, const uint8_t *data, size_t len,
            const char *sha256_hex, store_done_cb cb, void *arg)
{
    struct store_file *sf = (struct store_file *)st;
    struct sf_op *op;

    op = sf_op_new(SF_BLOB_PUT, sha256_hex,
                   store_file_blob_path(sf, sha256_hex), data, len, cb, arg);
    if (op == NULL)
        return -1;
    sf_enqueue(sf, op);
    return 0;
}

static int
sf_blob_delete(struct store *st, const char *sha256_hex, store_done_cb cb,
               void *arg)
{
    struct store_file *sf = (struct store_file *)st;
    struct sf_op *op;

    op = sf_op_new(SF_BLOB_DELETE, sha256_hex,
                   store_file_blob_path(sf, sha256_hex), NULL, 0, cb, arg);
    if (op == NULL)
        return -1;
    sf_enqueue(sf, op);
    return 0;
}

static enum store_status
sf_blob_get(struct store *st, const char *sha256_hex, uint8_t **data,
            size_t *len, char *err, size_t errlen)
{
    struct store_file *sf = (struct store_file *)st;
    enum store_status rc = STORE_IO;
    char hex[STORE_SHA256_HEX];
    uint8_t md[32], *buf = NULL;
    struct stat sb;
    char *path;
    size_t size;
    ssize_t n;
    int fd;

    path = store_file_blob_path(sf, sha256_hex);
    if (path == NULL) {
        errbuf_set(err, errlen, "blob %s: out of memory", sha256_hex);
        return STORE_IO;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (store_file_absent(errno)) {
            rc = STORE_NOT_FOUND;
            errbuf_set(err, errlen, "blob %s: not found", sha256_hex);
        } else {
            errbuf_set(err, errlen, "blob %s: open %s: %s", sha256_hex, path,
                       strerror(errno));
        }
        free(path);
        return rc;
    }
    if (fstat(fd, &sb) != 0) {
        errbuf_set(err, errlen, "blob %s: fstat %s: %s", sha256_hex, path,
                   strerror(errno));
        goto out;
    }
    size = (size_t)sb.st_size;
    buf = malloc(size > 0 ? size : 1);
    if (buf == NULL) {
        errbuf_set(err, errlen, "blob %s: %zu bytes: out of memory", sha256_hex,
                   size);
        goto out;
    }
    n = store_file_read_full(fd, buf, size);
    if (n < 0) {
        errbuf_set(err, errlen, "blob %s: read %s: %s", sha256_hex, path,
                   strerror(errno));
        goto out;
    }
    if (store_sha256(buf, (size_t)n, md) != 0) {
        errbuf_set(err, errlen, "blob %s: SHA-256 failed (out of memory)",
                   sha256_hex);
        goto out;
    }
    store_hex(md, hex);
    if (strcmp(hex, sha256_hex) != 0) {
        rc = STORE_CORRUPT;
        errbuf_set(err, errlen,
                   "blob %s (%s): corrupt: its %zd bytes hash to %s",
                   sha256_hex, path, n, hex);
        goto out;
    }
    *data = buf;
    *len = (size_t)n;
    buf = NULL;
    rc = STORE_OK;
out:
    free(buf);
    free(path);
    (void)close(fd); /* read-only: nothing to lose */
    return rc;
}

/* ---- open and close ------------------------------------------------------ */

static int
sf_mkdir(const char *path, bool *created, char *err, size_t errlen)
{
    struct stat sb;

    if (mkdir(path, 0700) == 0) {
        *created = true;
        return 0;
    }
    if (errno != EEXIST) {
        errbuf_set(err, errlen, "state_dir: mkdir %s: %s", path,
                   strerror(errno));
        return -1;
    }
    if (stat(path, &sb) != 0) {
        errbuf_set(err, errlen, "state_dir: stat %s: %s", path,
                   strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        errbuf_set(err, errlen, "state_dir: %s is not a directory", path);
        return -1;
    }
    return 0;
}

/* One file left in tmp/ by a crash: removed.  EISDIR: not a file of
 * ours; left to the operator. */
static int
sf_clean_tmp_entry(struct store_file *sf, int dirfd, const char *name,
                   void *arg, char *err, size_t errlen)
{
    (void)arg;
    if (unlinkat(dirfd, name, 0) != 0 && errno != EISDIR && errno != ENOENT)
        return errbuf_set(err, errlen,
                          "state_dir: removing the leftover %s/%s: %s", sf->tmp,
                          name, strerror(errno));
    return 0;
}

/* Removes what a crash left in tmp/: never a live write, since the lock
 * says no other store has this state_dir open. */
static int
sf_clean_tmp(struct store_file *sf, char *err, size_t errlen)
{
    return store_file_dir_each(sf, sf->tmp, sf_clean_tmp_entry, NULL, err,
                               errlen);
}

static void
sf_free(struct store_file *sf)
{
    if (sf->ev != NULL)
        event_free(sf->ev);
    if (sf->efd >= 0)
        (void)close(sf->efd); /* an eventfd: nothing to lose */
    if (sf->lock_fd >= 0)
        (void)close(sf->lock_fd); /* releases the flock */
    if (sf->sync_ready) {
        pthread_mutex_destroy(&sf->qmu);
        pthread_cond_destroy(&sf->qcv);
        pthread_mutex_destroy(&sf->cmu);
        pthread_cond_destroy(&sf->ccv);
    }
    store_file_entries_free(sf);
    store_file_poison_clear(sf);
    free(sf->dir);
    free(sf->records);
    free(sf->blobs);
    free(sf->tmp);
    free(sf);
}

static int
sf_sync_init(struct store_file *sf, char *err, size_t errlen)
{
    int rc;

    if ((rc = pthread_mutex_init(&sf->qmu, NULL)) != 0)
        goto fail;
    if ((rc = pthread_cond_init(&sf->qcv, NULL)) != 0)
        goto fail_qmu;
    if ((rc = pthread_mutex_init(&sf->cmu, NULL)) != 0)
        goto fail_qcv;
    if ((rc = pthread_cond_init(&sf->ccv, NULL)) != 0)
        goto fail_cmu;
    sf->sync_ready = true;
    return 0;
fail_cmu:
    pthread_mutex_destroy(&sf->cmu);
fail_qcv:
    pthread_cond_destroy(&sf->qcv);
fail_qmu:
    pthread_mutex_destroy(&sf->qmu);
fail:
    errbuf_set(err, errlen, "state store: pthread init: %s", strerror(rc));
    return -1;
}

static struct store *
sf_open(const struct store_config *cfg, struct event_base *base, char *err,
        size_t errlen)
{
    struct store_file *sf;
    bool created = false;
    char *lock = NULL;

    if (cfg->state_dir == NULL || cfg->state_dir[0] == '\0') {
        errbuf_set(err, errlen, "file store: no state_dir");
        return NULL;
    }
    if (strlen(cfg->state_dir) > SF_DIR_MAX) {
        errbuf_set(err, errlen, "file store: state_dir longer than %d bytes",
                   SF_DIR_MAX);
        return NULL;
    }
    sf = calloc(1, sizeof *sf);
    if (sf == NULL) {
        errbuf_set(err, errlen, "file store: out of memory");
        return NULL;
    }
    sf->base.backend = &store_file_backend;
    sf->lock_fd = -1;
    sf->efd = -1;
    sf->qtail = &sf->qhead;
    sf->ctail = &sf->chead;
    if (cfg->fsync == NULL || strcmp(cfg->fsync, "always") == 0) {
        sf->fsync = SF_FSYNC_ALWAYS;
    } else if (strcmp(cfg->fsync, "batch") == 0) {
        sf->fsync = SF_FSYNC_BATCH;
    } else if (strcmp(cfg->fsync, "off") == 0) {
        sf->fsync = SF_FSYNC_OFF;
    } else {
        errbuf_set(err, errlen,
                   "file store: fsync \"%s\": expected always, batch or off",
                   cfg->fsync);
        goto fail;
    }
    sf->dir = strdup(cfg->state_dir);
    sf->records = store_file_printf("%s/records", cfg->state_dir);
    sf->blobs = store_file_printf("%s/blobs", cfg->state_dir);
    sf->tmp = store_file_printf("%s/tmp", cfg->state_dir);
    lock = store_file_printf("%s/lock", cfg->state_dir);
    if (sf->dir == NULL || sf->records == NULL || sf->blobs == NULL ||
        sf->tmp == NULL || lock == NULL) {
        errbuf_set(err, errlen, "file store: out of memory");
        goto fail;
    }
    if (sf_mkdir(sf->dir, &created, err, errlen) != 0)
        goto fail;
    sf->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (sf->lock_fd < 0) {
        errbuf_set(err, errlen, "state_dir: open %s: %s", lock,
                   strerror(errno));
        goto fail;
    }
    if (flock(sf->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            errbuf_set(err, errlen,
                       "state_dir %s is in use by another store (%s is "
                       "locked)",
                       sf->dir, lock);
        else
            errbuf_set(err, errlen, "state_dir: flock %s: %s", lock,
                       strerror(errno));
        goto fail;
    }
    created = false;
    if (sf_mkdir(sf->records, &created, err, errlen) != 0 ||
        sf_mkdir(sf->blobs, &created, err, errlen) != 0 ||
        sf_mkdir(sf->tmp, &created, err, errlen) != 0)
        goto fail;
    if (created && sf->fsync != SF_FSYNC_OFF) {
        struct sf_op probe = { .status = STORE_OK };

        if (store_file_dir_sync(&probe, sf->dir) != 0) {
            errbuf_set(err, errlen, "state_dir: %s", probe.message);
            free(probe.message);
            goto fail;
        }
    }
    if (sf_clean_tmp(sf, err, errlen) != 0 ||
        store_file_records_scan(sf, err, errlen) != 0)
        goto fail;
    sf->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (sf->efd < 0) {
        errbuf_set(err, errlen, "file store: eventfd: %s", strerror(errno));
        goto fail;
    }
    sf->ev = event_new(base, sf->efd, EV_READ | EV_PERSIST, sf_on_wakeup, sf);
    if (sf->ev == NULL || event_add(sf->ev, NULL) != 0) {
        errbuf_set(err, errlen, "file store: cannot register its event");
        goto fail;
    }
    if (sf_sync_init(sf, err, errlen) != 0 ||
        store_file_writer_start(sf, err, errlen) != 0)
        goto fail;
    free(lock);
    return &sf->base;
fail:
    free(lock);
    sf_free(sf);
    return NULL;
}

/* Runs every outstanding callback (including those of writes the
 * callbacks submit).  Blocks the calling (loop) thread.  Must not be
 * called from a callback. */
static void
sf_flush(struct store *st)
{
    struct store_file *sf = (struct store_file *)st;

    while (sf->inflight > 0) {
        pthread_mutex_lock(&sf->cmu);
        while (sf->chead == NULL)
            pthread_cond_wait(&sf->ccv, &sf->cmu);
        pthread_mutex_unlock(&sf->cmu);
        sf_drain(sf);
    }
}

/* sf_flush(), then stops and joins the writer: it is the end. */
static void
sf_close(struct store *st)
{
    struct store_file *sf = (struct store_file *)st;

    sf_flush(st);
    store_file_writer_stop(sf);
    sf_free(sf);
}

const struct store_backend store_file_backend = {
    .name = "file",
    .open = sf_open,
    .close = sf_close,
    .flush = sf_flush,
    .get = sf_get,
    .list = sf_list,
    .put = sf_put,
    .del = sf_del,
    .blob_put = sf_blob_put,
    .blob_get = sf_blob_get,
    .blob_delete = sf_blob_delete,
};
