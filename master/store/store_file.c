/*
 * store_file.c — the `file` state store backend (DESIGN §9, store.h).
 *
 * Layout under state_dir:
 *
 *   lock               flock()ed while open: one store per state_dir
 *   records/<name>     one file per key; <name> is the key with every '/'
 *                      written as '%' (not in the key alphabet, so the
 *                      mapping is reversible).  A name longer than
 *                      SF_NAME_CHUNK bytes (keys reach 512, file names stop
 *                      at 255) is cut into chunks of SF_NAME_CHUNK: every
 *                      chunk but the last is a directory named "<chunk>+"
 *                      ('+' is in neither alphabet, so a directory never
 *                      collides with a record's file).
 *   blobs/<2 hex>/<64 hex>   code blobs, named by the SHA-256 of their bytes
 *   tmp/               in-progress writes; whatever is left there from a
 *                      crash is removed at open
 *
 * A record file is a 52-byte header then the value:
 *   "WMR1" | u64 revision | u64 length | SHA-256 of the value (32 bytes),
 * integers little-endian.  A file that is short, has another magic, a
 * length other than what follows or a checksum that does not match is
 * reported STORE_CORRUPT naming the key and the defect; never skipped,
 * never fatal.  Blobs are raw bytes: their name is their checksum.
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
 * revision that CAS will check.
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

#include "master/store/store_backend.h"

#include "lib/errbuf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/evp.h>

#define SF_MAGIC "WMR1"
#define SF_MAGIC_LEN 4
/* magic (4) + revision (8) + length (8) + SHA-256 (32) */
#define SF_HEADER 52
#define SF_OFF_REV 4
#define SF_OFF_LEN 12
#define SF_OFF_SHA 20
/* Longest record file name before it is chunked: 240 + '+' stays under
 * NAME_MAX (255) on every Linux file system. */
#define SF_NAME_CHUNK 240
/* A 512-byte key needs two chunk directories; one more level is slack. */
#define SF_MAX_DEPTH 3
/* Room for a state_dir path; the rest of a path is at most ~530 bytes. */
#define SF_DIR_MAX 2048
/* Blob files are hashed in pieces of this size. */
#define SF_HASH_BUF 65536

enum sf_fsync {
    SF_FSYNC_ALWAYS,
    SF_FSYNC_BATCH,
    SF_FSYNC_OFF,
};

enum sf_kind {
    SF_PUT,
    SF_DELETE,
    SF_BLOB_PUT,
    SF_BLOB_DELETE,
    SF_REJECT,   /* decided at submit (conflict, not found): passes through */
    SF_UNPOISON, /* marker: the loop has resynchronised this key */
};

/* One queued operation.  The loop fills it and never changes the request
 * fields after submission; the writer fills the result fields, which the
 * loop reads only after the op came back through the completion list (its
 * mutex orders the two). */
struct sf_op {
    struct sf_op *next;
    enum sf_kind kind;
    char *name;     /* key or blob name */
    char *path;     /* the record or blob file */
    uint8_t *value; /* owned; NULL when len == 0 */
    size_t len;
    uint64_t new_rev; /* the key's revision once done (0: deleted) */
    store_done_cb cb;
    void *arg;
    /* results */
    enum store_status status;
    char *message;     /* malloc'd; NULL on success */
    bool root_failure; /* this op's own write failed (not poisoned) */
    long dir_idx;      /* batch mode: directory to fsync, or -1 */
};

struct sf_entry {
    char *key;
    uint64_t rev;     /* current revision (meaningless if rev_unknown) */
    bool rev_unknown; /* the file's header is unreadable */
    struct sf_op *last;
};

/* A key whose write failed, until the loop's marker (writer thread only). */
struct sf_poison {
    struct sf_poison *next;
    char *key;
    char *message;
};

/* The directories to fsync at the end of a batch (writer thread only). */
struct sf_dirset {
    char **dirs;
    char **errors; /* per directory: NULL, or why its fsync failed */
    size_t n, cap;
};

struct store_file {
    struct store base; /* first: store.c's view */
    char *dir, *records, *blobs, *tmp;
    enum sf_fsync fsync;
    int lock_fd;
    int efd;
    struct event *ev;

    /* loop thread only */
    struct sf_entry **entries;
    size_t nentries, capentries;
    size_t inflight;

    /* submission queue: loop → writer */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    struct sf_op *qhead, **qtail;
    bool stop;

    /* completion list: writer → loop */
    pthread_mutex_t cmu;
    pthread_cond_t ccv;
    struct sf_op *chead, **ctail;

    pthread_t thread;
    bool sync_ready, thread_started;

    /* writer thread only */
    struct sf_poison *poison;
    uint64_t tmp_seq;
};

/* ---- small helpers ---------------------------------------------------- */

static char *sf_printf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static char *
sf_printf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : s;
}

static void
sf_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
sf_get_le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Reads up to len bytes; fewer only at end of file.  -1 on error. */
static ssize_t
sf_read_full(int fd, void *buf, size_t len)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = read(fd, (char *)buf + done, len - done);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

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

/* The path of key's record file: records/ + the key with '/' → '%', cut
 * into "<chunk>+/" directories when longer than a file name may be. */
static char *
sf_record_path(const struct store_file *sf, const char *key)
{
    size_t rlen = strlen(sf->records), klen = strlen(key), n, i;
    char *p = malloc(rlen + 1 + klen + 2 * (klen / SF_NAME_CHUNK + 1) + 1);

    if (p == NULL)
        return NULL;
    memcpy(p, sf->records, rlen);
    n = rlen;
    p[n++] = '/';
    for (i = 0; i < klen; i++) {
        /* Every full chunk that is not the end of the name is a
         * directory: the file keeps 1..SF_NAME_CHUNK bytes. */
        if (i > 0 && i % SF_NAME_CHUNK == 0) {
            p[n++] = '+';
            p[n++] = '/';
        }
        p[n++] = key[i] == '/' ? '%' : key[i];
    }
    p[n] = '\0';
    return p;
}

static char *
sf_blob_path(const struct store_file *sf, const char *hex)
{
    return sf_printf("%s/%.2s/%s", sf->blobs, hex, hex);
}

/* What a 0-byte value points at when no buffer holds it. */
static const uint8_t sf_empty;

/* ---- the key map (loop thread) ----------------------------------------- */

/* Binary search: the entry of key, or NULL with *pos where it would go. */
static struct sf_entry *
sf_find(const struct store_file *sf, const char *key, size_t *pos)
{
    size_t lo = 0, hi = sf->nentries;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(sf->entries[mid]->key, key);

        if (c == 0) {
            if (pos != NULL)
                *pos = mid;
            return sf->entries[mid];
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (pos != NULL)
        *pos = lo;
    return NULL;
}

static int
sf_entries_grow(struct store_file *sf)
{
    struct sf_entry **v;
    size_t cap;

    if (sf->nentries < sf->capentries)
        return 0;
    cap = sf->capentries ? 2 * sf->capentries : 64;
    v = realloc(sf->entries, cap * sizeof *v);
    if (v == NULL)
        return -1;
    sf->entries = v;
    sf->capentries = cap;
    return 0;
}

/* Inserts a new entry at pos (from sf_find).  A sorted array: lookups are
 * O(log n) and inserting moves pointers, which is cheap at the scale of a
 * daemon's workers and keeps list-in-order trivial. */
static struct sf_entry *
sf_insert(struct store_file *sf, size_t pos, const char *key)
{
    struct sf_entry *e;

    if (sf_entries_grow(sf) != 0)
        return NULL;
    e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    e->key = strdup(key);
    if (e->key == NULL) {
        free(e);
        return NULL;
    }
    memmove(&sf->entries[pos + 1], &sf->entries[pos],
            (sf->nentries - pos) * sizeof *sf->entries);
    sf->entries[pos] = e;
    sf->nentries++;
    return e;
}

static void
sf_remove(struct store_file *sf, size_t pos)
{
    struct sf_entry *e = sf->entries[pos];

    memmove(&sf->entries[pos], &sf->entries[pos + 1],
            (sf->nentries - pos - 1) * sizeof *sf->entries);
    sf->nentries--;
    free(e->key);
    free(e);
}

/* ---- reading records (loop thread) ------------------------------------- */

/* An open() failure meaning "no such file": ENOTDIR too, since a path
 * component that is not a directory (a long key's chunk) leaves no room
 * for the file. */
static bool
sf_absent(int err)
{
    return err == ENOENT || err == ENOTDIR;
}

enum sf_hdr {
    SF_HDR_OK,
    SF_HDR_MISSING,
    SF_HDR_BAD, /* unreadable, short or foreign: the revision is unknown */
};

/* The revision in a record's header, without reading the value. */
static enum sf_hdr
sf_read_rev(const char *path, uint64_t *rev)
{
    uint8_t h[SF_HEADER];
    enum sf_hdr r = SF_HDR_BAD;
    ssize_t n;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sf_absent(errno) ? SF_HDR_MISSING : SF_HDR_BAD;
    n = sf_read_full(fd, h, sizeof h);
    if (n == (ssize_t)sizeof h && memcmp(h, SF_MAGIC, SF_MAGIC_LEN) == 0) {
        *rev = sf_get_le64(h + SF_OFF_REV);
        r = SF_HDR_OK;
    }
    (void)close(fd); /* read-only: nothing to lose */
    return r;
}

/* Reads and checks a whole record.  STORE_OK with *value (malloc'd),
 * *len, *rev; STORE_NOT_FOUND; STORE_CORRUPT (with *rev when the header
 * was readable, else 0) or STORE_IO, with a message naming key and path. */
static enum store_status
sf_read_record(const char *key, const char *path, uint8_t **value, size_t *len,
               uint64_t *rev, char *err, size_t errlen)
{
    enum store_status rc = STORE_IO;
    uint8_t h[SF_HEADER], md[32];
    uint8_t *buf = NULL;
    uint64_t hlen, have;
    struct stat sb;
    ssize_t n;
    int fd;

    *value = NULL;
    *len = 0;
    *rev = 0;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (sf_absent(errno))
            return STORE_NOT_FOUND;
        errbuf_set(err, errlen, "record %s: open %s: %s", key, path,
                   strerror(errno));
        return STORE_IO;
    }
    if (fstat(fd, &sb) != 0) {
        errbuf_set(err, errlen, "record %s: fstat %s: %s", key, path,
                   strerror(errno));
        goto out;
    }
    n = sf_read_full(fd, h, sizeof h);
    if (n < 0) {
        errbuf_set(err, errlen, "record %s: read %s: %s", key, path,
                   strerror(errno));
        goto out;
    }
    rc = STORE_CORRUPT;
    if (n < (ssize_t)sizeof h) {
        errbuf_set(err, errlen, "record %s (%s): torn header: %zd of %d bytes",
                   key, path, n, SF_HEADER);
        goto out;
    }
    if (memcmp(h, SF_MAGIC, SF_MAGIC_LEN) != 0) {
        errbuf_set(err, errlen,
                   "record %s (%s): bad magic %02x%02x%02x%02x, expected "
                   "\"%s\"",
                   key, path, h[0], h[1], h[2], h[3], SF_MAGIC);
        goto out;
    }
    *rev = sf_get_le64(h + SF_OFF_REV);
    hlen = sf_get_le64(h + SF_OFF_LEN);
    /* The file cannot be shorter than what was just read, unless it is
     * being changed behind our back: then it is torn, too. */
    have = sb.st_size >= SF_HEADER ? (uint64_t)sb.st_size - SF_HEADER : 0;
    if (hlen != have) {
        errbuf_set(err, errlen,
                   "record %s (%s): length mismatch: the header says %" PRIu64
                   " bytes, the file holds %" PRIu64 " (torn write?)",
                   key, path, hlen, have);
        goto out;
    }
    if (hlen > SIZE_MAX - 1) {
        rc = STORE_IO;
        errbuf_set(err, errlen, "record %s (%s): %" PRIu64 " bytes: too big",
                   key, path, hlen);
        goto out;
    }
    buf = malloc(hlen > 0 ? (size_t)hlen : 1);
    if (buf == NULL) {
        rc = STORE_IO;
        errbuf_set(err, errlen, "record %s: %" PRIu64 " bytes: out of memory",
                   key, hlen);
        goto out;
    }
    n = sf_read_full(fd, buf, (size_t)hlen);
    if (n < 0) {
        rc = STORE_IO;
        errbuf_set(err, errlen, "record %s: read %s: %s", key, path,
                   strerror(errno));
        goto out;
    }
    if ((uint64_t)n != hlen) {
        errbuf_set(err, errlen,
                   "record %s (%s): short value: %zd of %" PRIu64 " bytes", key,
                   path, n, hlen);
        goto out;
    }
    if (store_sha256(buf, (size_t)hlen, md) != 0) {
        rc = STORE_IO;
        errbuf_set(err, errlen, "record %s: SHA-256 failed (out of memory)",
                   key);
        goto out;
    }
    if (memcmp(md, h + SF_OFF_SHA, sizeof md) != 0) {
        errbuf_set(err, errlen,
                   "record %s (%s): checksum mismatch: the value does not "
                   "hash to the header's SHA-256",
                   key, path);
        goto out;
    }
    *value = buf;
    *len = (size_t)hlen;
    buf = NULL;
    rc = STORE_OK;
out:
    free(buf);
    (void)close(fd); /* read-only: nothing to lose */
    return rc;
}

/* ---- the writer thread ------------------------------------------------- */

static void sf_op_fail(struct sf_op *op, enum store_status status,
                       const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
sf_op_fail(struct sf_op *op, enum store_status status, const char *fmt, ...)
{
    va_list ap;
    char *m;

    va_start(ap, fmt);
    if (vasprintf(&m, fmt, ap) < 0)
        m = NULL; /* the callback then gets the status name only */
    va_end(ap);
    free(op->message);
    op->message = m;
    op->status = status;
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

static int
sf_sync_dir(struct sf_op *op, const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0) {
        sf_op_fail(op, STORE_IO, "open %s: %s", dir, strerror(errno));
        return -1;
    }
    if (fsync(fd) != 0) {
        sf_op_fail(op, STORE_IO, "fsync %s: %s", dir, strerror(errno));
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
                r = sf_sync_dir(op, parent);
                free(parent);
                if (r != 0)
                    goto out;
            }
        } else if (errno != EEXIST) {
            sf_op_fail(op, STORE_IO, "mkdir %s: %s", p, strerror(errno));
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
        rc = sf_sync_dir(op, dir);
    free(dir);
    return rc;
}

/* tmp/<n> ← head + data, fsync, rename over op->path, directory sync. */
static int
sf_atomic_write(struct store_file *sf, struct sf_op *op, const char *root,
                const uint8_t *head, size_t headlen, struct sf_dirset *ds)
{
    char *tmp = sf_printf("%s/w%" PRIu64, sf->tmp, ++sf->tmp_seq);
    int fd = -1, rc = -1;

    if (tmp == NULL) {
        sf_op_fail(op, STORE_IO, "%s: out of memory", op->path);
        return -1;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        sf_op_fail(op, STORE_IO, "open %s: %s", tmp, strerror(errno));
        goto out;
    }
    if ((headlen > 0 && sf_write_full(fd, head, headlen) != 0) ||
        (op->len > 0 && sf_write_full(fd, op->value, op->len) != 0)) {
        sf_op_fail(op, STORE_IO, "write %s: %s", tmp, strerror(errno));
        goto out;
    }
    /* The data must be on disk before the rename can point at it, or a
     * power failure could leave the new name on an empty file. */
    if (sf->fsync != SF_FSYNC_OFF && fsync(fd) != 0) {
        sf_op_fail(op, STORE_IO, "fsync %s: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        sf_op_fail(op, STORE_IO, "close %s: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (sf_make_dirs(sf, op, root, op->path) != 0)
        goto out;
    if (rename(tmp, op->path) != 0) {
        sf_op_fail(op, STORE_IO, "rename %s to %s: %s", tmp, op->path,
                   strerror(errno));
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

    memcpy(h, SF_MAGIC, SF_MAGIC_LEN);
    sf_put_le64(h + SF_OFF_REV, op->new_rev);
    sf_put_le64(h + SF_OFF_LEN, op->len);
    if (store_sha256(op->value, op->len, h + SF_OFF_SHA) != 0) {
        sf_op_fail(op, STORE_IO, "record %s: SHA-256 failed", op->name);
        return;
    }
    (void)sf_atomic_write(sf, op, sf->records, h, sizeof h, ds);
}

static void
sf_do_unlink(struct store_file *sf, struct sf_op *op, struct sf_dirset *ds)
{
    if (unlink(op->path) != 0) {
        if (!sf_absent(errno)) {
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
        if (sf_absent(errno))
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
    while ((n = sf_read_full(fd, buf, SF_HASH_BUF)) > 0) {
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

        if (sf_sync_dir(&probe, ds.dirs[i]) != 0)
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

    e = sf_find(sf, key, &pos);
    h = sf_read_rev(path, &rev);
    if (h == SF_HDR_MISSING) {
        if (e != NULL)
            sf_remove(sf, pos);
        return;
    }
    /* Out of memory the key reads as absent until the next open. */
    if (e == NULL && (e = sf_insert(sf, pos, key)) == NULL)
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
        struct sf_entry *e = sf_find(sf, op->name, &pos);

        if (status != STORE_OK &&
            (op->root_failure || (e != NULL && e->last == op))) {
            sf_resync(sf, op->name, op->path);
        } else if (e != NULL && e->last == op) {
            e->last = NULL;
            if (op->kind == SF_DELETE)
                sf_remove(sf, pos);
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
    /* Reset the counter before taking the list (see sf_post).  The read
     * fails only with EAGAIN (a spurious wakeup) or EINTR; the list is
     * drained in every case, so nothing is lost. */
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

    op = sf_op_new(SF_PUT, key, sf_record_path(sf, key), value, len, cb, arg);
    if (op == NULL)
        return -1;
    e = sf_find(sf, key, &pos);
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
        if (e == NULL && (e = sf_insert(sf, pos, key)) == NULL) {
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

    op = sf_op_new(SF_DELETE, key, sf_record_path(sf, key), NULL, 0, cb, arg);
    if (op == NULL)
        return -1;
    e = sf_find(sf, key, NULL);
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

    e = sf_find(sf, key, &pos);
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
    path = sf_record_path(sf, key);
    if (path == NULL) {
        errbuf_set(err, errlen, "record %s: out of memory", key);
        return STORE_IO;
    }
    rc = sf_read_record(key, path, value, len, revision, err, errlen);
    if (rc == STORE_NOT_FOUND) {
        /* Removed behind our back: the disk is the truth. */
        sf_remove(sf, pos);
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
    (void)sf_find(sf, prefix, &first);
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
        struct sf_entry *e = sf_find(sf, keys[i], NULL);
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
        path = sf_record_path(sf, keys[i]);
        if (path == NULL) {
            errbuf_set(err, errlen, "list %s: out of memory", prefix);
            rc = STORE_IO;
            break;
        }
        r = sf_read_record(keys[i], path, &value, &len, &rev, msg, sizeof msg);
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

    op = sf_op_new(SF_BLOB_PUT, sha256_hex, sf_blob_path(sf, sha256_hex), data,
                   len, cb, arg);
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

    op = sf_op_new(SF_BLOB_DELETE, sha256_hex, sf_blob_path(sf, sha256_hex),
                   NULL, 0, cb, arg);
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

    path = sf_blob_path(sf, sha256_hex);
    if (path == NULL) {
        errbuf_set(err, errlen, "blob %s: out of memory", sha256_hex);
        return STORE_IO;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (sf_absent(errno)) {
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
    n = sf_read_full(fd, buf, size);
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

/* Removes what a crash left in tmp/: never a live write, since the lock
 * says no other store has this state_dir open. */
static int
sf_clean_tmp(struct store_file *sf, char *err, size_t errlen)
{
    struct dirent *de;
    int rc = -1;
    DIR *d;

    d = opendir(sf->tmp);
    if (d == NULL) {
        errbuf_set(err, errlen, "state_dir: opendir %s: %s", sf->tmp,
                   strerror(errno));
        return -1;
    }
    for (;;) {
        errno = 0;
        de = readdir(d);
        if (de == NULL)
            break;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        /* EISDIR: not a file of ours; leave it to the operator. */
        if (unlinkat(dirfd(d), de->d_name, 0) != 0 && errno != EISDIR &&
            errno != ENOENT) {
            errbuf_set(err, errlen,
                       "state_dir: removing the leftover %s/%s: %s", sf->tmp,
                       de->d_name, strerror(errno));
            goto out;
        }
    }
    if (errno != 0) {
        errbuf_set(err, errlen, "state_dir: readdir %s: %s", sf->tmp,
                   strerror(errno));
        goto out;
    }
    rc = 0;
out:
    (void)closedir(d); /* a directory stream: nothing to lose */
    return rc;
}

/* One file found under records/: raw is its name relative to records/
 * with the chunk separators removed. */
static int
sf_scan_file(struct store_file *sf, const char *raw, const char *path,
             char *err, size_t errlen)
{
    struct sf_entry *e;
    uint64_t rev = 0;
    char *key, *canon, *p;
    enum sf_hdr h;

    key = strdup(raw);
    if (key == NULL)
        goto oom;
    for (p = key; *p != '\0'; p++) {
        if (*p == '%')
            *p = '/';
    }
    /* A name that is not the canonical path of a valid key is not ours
     * (an editor's backup, a stray copy): it cannot be a record. */
    if (store_key_check(key, NULL, 0) != 0) {
        free(key);
        return 0;
    }
    canon = sf_record_path(sf, key);
    if (canon == NULL) {
        free(key);
        goto oom;
    }
    if (strcmp(canon, path) != 0) {
        free(canon);
        free(key);
        return 0;
    }
    free(canon);
    h = sf_read_rev(path, &rev);
    if (h == SF_HDR_MISSING) {
        free(key);
        return 0;
    }
    if (sf_entries_grow(sf) != 0 || (e = calloc(1, sizeof *e)) == NULL) {
        free(key);
        goto oom;
    }
    e->key = key;
    e->rev = h == SF_HDR_OK ? rev : 0;
    e->rev_unknown = h != SF_HDR_OK;
    sf->entries[sf->nentries++] = e;
    return 0;
oom:
    errbuf_set(err, errlen, "state_dir: scanning %s: out of memory", path);
    return -1;
}

static int
sf_scan(struct store_file *sf, const char *dir, const char *raw, int depth,
        char *err, size_t errlen)
{
    struct dirent *de;
    int rc = -1;
    DIR *d;

    d = opendir(dir);
    if (d == NULL) {
        errbuf_set(err, errlen, "state_dir: opendir %s: %s", dir,
                   strerror(errno));
        return -1;
    }
    for (;;) {
        size_t nlen;
        struct stat sb;
        char *path, *sub;
        int r;

        errno = 0;
        de = readdir(d);
        if (de == NULL)
            break;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        path = sf_printf("%s/%s", dir, de->d_name);
        if (path == NULL) {
            errbuf_set(err, errlen, "state_dir: scanning %s: out of memory",
                       dir);
            goto out;
        }
        if (lstat(path, &sb) != 0) {
            if (errno == ENOENT) {
                free(path);
                continue;
            }
            errbuf_set(err, errlen, "state_dir: lstat %s: %s", path,
                       strerror(errno));
            free(path);
            goto out;
        }
        nlen = strlen(de->d_name);
        r = 0;
        if (S_ISDIR(sb.st_mode) && nlen > 1 && de->d_name[nlen - 1] == '+' &&
            depth < SF_MAX_DEPTH) {
            sub = sf_printf("%s%.*s", raw, (int)(nlen - 1), de->d_name);
            if (sub == NULL) {
                errbuf_set(err, errlen, "state_dir: scanning %s: out of memory",
                           dir);
                r = -1;
            } else {
                r = sf_scan(sf, path, sub, depth + 1, err, errlen);
                free(sub);
            }
        } else if (S_ISREG(sb.st_mode)) {
            sub = sf_printf("%s%s", raw, de->d_name);
            if (sub == NULL) {
                errbuf_set(err, errlen, "state_dir: scanning %s: out of memory",
                           dir);
                r = -1;
            } else {
                r = sf_scan_file(sf, sub, path, err, errlen);
                free(sub);
            }
        }
        free(path);
        if (r != 0)
            goto out;
    }
    if (errno != 0) {
        errbuf_set(err, errlen, "state_dir: readdir %s: %s", dir,
                   strerror(errno));
        goto out;
    }
    rc = 0;
out:
    (void)closedir(d); /* a directory stream: nothing to lose */
    return rc;
}

static int
sf_entry_cmp(const void *a, const void *b)
{
    const struct sf_entry *const *x = a, *const *y = b;

    return strcmp((*x)->key, (*y)->key);
}

static void
sf_free(struct store_file *sf)
{
    size_t i;

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
    for (i = 0; i < sf->nentries; i++) {
        free(sf->entries[i]->key);
        free(sf->entries[i]);
    }
    free(sf->entries);
    while (sf->poison != NULL)
        sf_poison_remove(sf, sf->poison->key);
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

/* The writer takes no signal: they belong to the loop (libevent). */
static int
sf_start_writer(struct store_file *sf, char *err, size_t errlen)
{
    sigset_t all, old;
    int rc;

    if (sigfillset(&all) != 0) {
        errbuf_set(err, errlen, "state store: sigfillset: %s", strerror(errno));
        return -1;
    }
    rc = pthread_sigmask(SIG_SETMASK, &all, &old);
    if (rc != 0) {
        errbuf_set(err, errlen, "state store: pthread_sigmask: %s",
                   strerror(rc));
        return -1;
    }
    rc = pthread_create(&sf->thread, NULL, sf_writer, sf);
    /* Restoring a mask read a moment ago cannot fail. */
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errbuf_set(err, errlen, "state store: starting the writer thread: %s",
                   strerror(rc));
        return -1;
    }
    sf->thread_started = true;
    return 0;
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
    sf->records = sf_printf("%s/records", cfg->state_dir);
    sf->blobs = sf_printf("%s/blobs", cfg->state_dir);
    sf->tmp = sf_printf("%s/tmp", cfg->state_dir);
    lock = sf_printf("%s/lock", cfg->state_dir);
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

        if (sf_sync_dir(&probe, sf->dir) != 0) {
            errbuf_set(err, errlen, "state_dir: %s", probe.message);
            free(probe.message);
            goto fail;
        }
    }
    if (sf_clean_tmp(sf, err, errlen) != 0 ||
        sf_scan(sf, sf->records, "", 0, err, errlen) != 0)
        goto fail;
    if (sf->nentries > 1)
        qsort(sf->entries, sf->nentries, sizeof *sf->entries, sf_entry_cmp);
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
        sf_start_writer(sf, err, errlen) != 0)
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
    pthread_mutex_lock(&sf->qmu);
    sf->stop = true;
    pthread_cond_signal(&sf->qcv);
    pthread_mutex_unlock(&sf->qmu);
    if (sf->thread_started)
        pthread_join(sf->thread, NULL);
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
