/*
 * journal.c — the write-ahead journal (journal.h): segment files written
 * by one thread with group commit, liveness kept per segment, damage
 * repaired at open.
 *
 * Files.  cfg->dir holds segments named by the lsn of their first record,
 * "%016" PRIx64 ".wmj" (so that names sort as lsns do); other names in the
 * directory are neither read nor removed.  The directory itself is
 * flock()ed while the journal is open: one journal per directory.  A
 * segment is a header then records, every integer little-endian:
 *
 *   header  (20 bytes)   "WMJ1" | u32 version (1) | u64 first lsn
 *                        | u32 CRC-32C of the 16 bytes before it
 *   record  (18 + n)     u32 n, the payload's length
 *                        | u32 CRC-32C of the 10 + n bytes after it
 *                        | u64 lsn | u8 type | u8 flags | payload (n)
 *
 * The length is outside the checksum: a damaged length makes the checksum
 * cover other bytes, which fails it just the same.  Flags are journal.h's
 * (JOURNAL_LIVE); the type is the owner's.
 *
 * Invariants of the files (what the repair at open relies on):
 *   - the records of a segment have consecutive lsns starting at the first
 *     lsn of its header, which its name repeats; a segment's first lsn is
 *     above every lsn of the segments before it;
 *   - only the newest segment is ever appended to: every other one was
 *     fdatasync()ed before the next was created, so a record cut short can
 *     only be at the end of the newest (a torn tail);
 *   - a segment's header is written and fdatasync()ed, and the directory
 *     fsync()ed, before any record goes into it: a header that is short or
 *     unreadable is a crash during creation only when it is the newest
 *     file and nothing follows it.
 * A record is valid when its checksum matches and its lsn fits: above the
 * last valid lsn, and at most one more than that per 18 bytes since the
 * last valid record (each record between takes at least 18 bytes).  The
 * second test keeps the byte-by-byte search for the next valid record
 * after a damaged one cheap and makes a stray match in a payload
 * practically impossible.
 *
 * Open.  Every segment is read in full, oldest first (one 1 MiB window at
 * a time, never the whole journal).  A bad record with a valid one after
 * it, anywhere, is corrupt: counted, logged, skipped.  A bad record with
 * nothing valid after it is a torn tail when in the newest segment: the
 * file is truncated to the end of the last valid record (and
 * fdatasync()ed); elsewhere it is corrupt, and left in place.  A newest
 * segment no longer than a header whose header is unreadable is removed.
 * Any other unreadable header, or a read error, fails the open naming the
 * file.  New appends go to the end of the newest segment when it has room
 * (so that restarts do not leave a trail of small segments), else to a
 * fresh one created at open.  next_lsn is one past the last lsn of the
 * newest segment, or its first lsn when it is empty, or the first lsn of
 * a torn newest segment that was removed (a fresh segment then continues
 * from there): lsns never repeat, even after every record was released
 * and every older segment deleted.
 * journal_replay() reads the segments again with the same checks (so it
 * sees exactly the records open counted), up to where open left each.
 *
 * Threads.  Every exported function runs on the loop thread, which owns
 * the segment table and does all the bookkeeping: it frames each record
 * (checksum included) into the pending work under the mutex, decides
 * there when a segment is full (a "cut": the offset in the pending bytes
 * where the writer switches to a new file) and which segments to delete.
 * The writer thread swaps the pending work out and executes it: one
 * write() per segment touched, the cuts (fdatasync the old file, create
 * the new one), the fsync policy, the deletions (unlink, then one fsync
 * of the directory); then it publishes, under the mutex, the last lsn of
 * the batch done (and the last one done without error) and wakes the loop
 * through an eventfd.  The loop runs the callbacks of every lsn up to
 * there from a FIFO, in append order.  So the segment of every lsn is
 * known on the loop without asking the writer, and the writer never reads
 * loop state.
 *
 * Durability.  always: the batch is fdatasync()ed before its completion is
 * published (one fdatasync for everything queued meanwhile: group
 * commit).  batch: published after write(); the writer's timed condvar
 * wait fdatasyncs sync_interval_ms after the first write not yet synced.
 * off: no fdatasync but the old file's at a cut, the new file's header,
 * and at close.  stats.syncs counts the writer's fdatasync calls (of
 * segment files: policy, cuts, new headers, close), not those of open.
 *
 * Liveness.  Each segment has a count of its LIVE records not released
 * and a bitmap, indexed by lsn - first lsn, of which ones those are; a
 * release finds the segment by binary search over first lsns (O(log
 * segments)) and clears a bit (O(1)).  Unknown and repeated releases find
 * the bit clear and change nothing.  A bitmap is freed when its count
 * reaches zero (the active segment's is kept, it grows with the appends),
 * so memory is one bit per record of the segments that still hold live
 * ones: 1M live records among 3M records cost ~375 KiB, where a hash set
 * of lsns would take ~16 MiB.  The oldest segment is deleted once it is
 * not the active one and its count is zero, then the next, and so on;
 * deletions wait until the replay is over (the replay reads them) or the
 * first append.  Compaction is due when there are three segments or more
 * and the oldest is pinned; the hook is called from a deferred event with
 * the first lsn of the second oldest segment, not again for the same
 * bound and segment count.
 *
 * Budget.  stats.bytes is the size of every segment, queued records
 * included, as the loop counts it (a deleted segment stops counting when
 * its deletion is queued).  A LIVE append is refused (ENOSPC) once it
 * reaches max_bytes; AUX appends, which settle LIVE records and so let
 * segments go, are always accepted.
 *
 * Failure.  The first write, fdatasync or segment creation error fails
 * the journal: the writer logs it, does no more I/O, and completes every
 * batch with that errno; appends return EIO once the loop has seen it.
 */
#include "config.h"

#include "master/broker/journal.h"

#include "lib/errbuf.h"
#include "master/core/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#define JN_MAGIC "WMJ1"
#define JN_MAGIC_LEN 4
#define JN_VERSION 1u
/* Segment header: magic (4), version (4), first lsn (8), CRC-32C (4). */
#define JN_HDR 20
#define JN_HDR_VERSION 4
#define JN_HDR_LSN 8
#define JN_HDR_CRC 16
/* Record frame: length (4), CRC-32C (4), lsn (8), type (1), flags (1). */
#define JN_FRAME 18
#define JN_FRAME_CRC 4
#define JN_FRAME_LSN 8 /* the checksum covers from here to the end */
#define JN_FRAME_TYPE 16
#define JN_FRAME_FLAGS 17
/* "%016" PRIx64 ".wmj" and its NUL. */
#define JN_NAME_HEX 16
#define JN_SUFFIX ".wmj"
#define JN_NAME_SIZE 21
/* Reads at open and replay go through a window of this size (larger only
 * for a larger record). */
#define JN_READ_CHUNK (1u << 20)
/* The writer keeps its batch buffer for the next batch up to this size;
 * a larger one (a burst, a huge record) is freed after use. */
#define JN_WORK_KEEP (4u << 20)
/* CRC-32C (Castagnoli), reflected. */
#define JN_CRC_POLY 0x82F63B78u

#define JN_DEFAULT_SEGMENT (64ull << 20)
#define JN_DEFAULT_MAX (1ull << 30)
#define JN_DEFAULT_SYNC_MS 100u

struct jn_seg {
    uint64_t first_lsn;
    uint64_t last_lsn; /* first_lsn - 1 while it holds no record */
    uint64_t size;     /* bytes on disk, queued ones included */
    uint64_t scan_end; /* what open left valid: what the replay reads */
    uint64_t live;     /* LIVE records not released */
    uint64_t *bits;    /* bit lsn - first_lsn: that record is live */
    size_t nwords;
};

/* Where the writer switches to a new segment, in the batch's bytes. */
struct jn_cut {
    size_t off;
    uint64_t first_lsn;
};

/* Work handed from the loop to the writer: framed records (buf), the cuts
 * among them, the segments to delete once they are written. */
struct jn_work {
    uint8_t *buf;
    size_t len, cap;
    struct jn_cut *cuts;
    size_t ncuts, capcuts;
    uint64_t *dels;
    size_t ndels, capdels;
    uint64_t last_lsn; /* of the last record in buf; 0: none */
};

/* An append's callback, until its lsn is done. */
struct jn_waiter {
    uint64_t lsn;
    journal_done_cb cb;
    void *arg;
};

struct journal {
    char *dir;
    int dirfd; /* flock()ed; fsync()ed for the directory's entries */
    enum journal_fsync fsync;
    uint64_t segment_bytes, max_bytes;
    uint32_t sync_ms;
    int efd;
    struct event *ev_done, *ev_compact;
    /* Wakes the writer once per loop turn (appends of a turn share it). */
    struct event *ev_wake;

    /* loop thread only */
    struct jn_seg *segs; /* by first lsn; the last one is active */
    size_t nsegs, capsegs;
    uint64_t next_lsn, bytes, live, appends, torn_bytes, corrupt_records;
    uint64_t seen_lsn; /* completions taken up to here */
    bool failed;       /* the loop has seen the writer's error */
    bool hold;         /* no deletion until the replay or an append */
    bool replayed, replaying;
    struct jn_waiter *wq; /* a ring, in lsn order */
    size_t wq_head, wq_len, wq_cap;
    journal_compact_cb compact_cb;
    void *compact_arg;
    bool compact_scheduled;
    uint64_t compact_bound; /* of the last call, with its segment count */
    size_t compact_nsegs;

    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t wcv; /* to the writer: work, or stop (monotonic) */
    pthread_cond_t dcv; /* to journal_close: a batch is done */
    struct jn_work pending;
    uint64_t done_lsn; /* every lsn up to here is done... */
    uint64_t ok_lsn;   /* ...and up to here without error */
    int werr;          /* the failure, or 0; written by the writer only */
    bool stop;

    /* writer thread only (the loop's before it starts, after it ends) */
    struct jn_work work;
    int wfd;
    uint64_t wseg; /* the first lsn of wfd's segment */
    bool unsynced;
    struct timespec deadline; /* batch: when the unsynced bytes sync */

    uint64_t syncs; /* __atomic: written by the writer, read anywhere */
    pthread_t thread;
    bool sync_ready, thread_started;
};

/* ---- small helpers ----------------------------------------------------- */

static void
jn_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void
jn_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t
jn_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t
jn_get_le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t jn_crc_table[256];
static pthread_once_t jn_crc_once = PTHREAD_ONCE_INIT;

/* CRC-32C of len bytes, continuing crc (0 to start): a byte at a time
 * from a table, several hundred MB/s. */
static uint32_t
jn_crc32c_table(uint32_t crc, const uint8_t *p, size_t len)
{
    crc = ~crc;
    while (len-- > 0)
        crc = jn_crc_table[(crc ^ *p++) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* The same with SSE4.2's crc32 instruction (the Castagnoli polynomial),
 * eight bytes at a time: on the loop thread for every record appended,
 * where the table's version was the daemon's hottest function of its own
 * (bench/README.md). */
__attribute__((target("sse4.2"))) static uint32_t
jn_crc32c_sse42(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t c = (uint32_t)~crc;

    for (; len >= 8; p += 8, len -= 8) {
        uint64_t v;

        memcpy(&v, p, sizeof v);
        c = __builtin_ia32_crc32di(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    while (len-- > 0)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#endif

static uint32_t (*jn_crc32c)(uint32_t crc, const uint8_t *p,
                             size_t len) = jn_crc32c_table;

static void
jn_crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;

        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (JN_CRC_POLY & (0u - (c & 1u)));
        jn_crc_table[i] = c;
    }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2"))
        jn_crc32c = jn_crc32c_sse42;
#endif
}

static void
jn_name(char out[JN_NAME_SIZE], uint64_t first_lsn)
{
    snprintf(out, JN_NAME_SIZE, "%016" PRIx64 JN_SUFFIX, first_lsn);
}

/* The first lsn a segment's file name gives, or false when the name is
 * not a segment's (lower-case hex only, as jn_name writes it). */
static bool
jn_name_parse(const char *name, uint64_t *lsn)
{
    uint64_t v = 0;

    if (strlen(name) != JN_NAME_SIZE - 1 ||
        strcmp(name + JN_NAME_HEX, JN_SUFFIX) != 0)
        return false;
    for (int i = 0; i < JN_NAME_HEX; i++) {
        char c = name[i];

        if (c >= '0' && c <= '9')
            v = v << 4 | (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v << 4 | (uint64_t)(c - 'a' + 10);
        else
            return false;
    }
    *lsn = v;
    return v != 0;
}

/* p grown to hold need elements of size bytes (doubling from 16), or NULL
 * when out of memory, p and *cap then untouched. */
static void *
jn_grow(void *p, size_t *cap, size_t need, size_t size)
{
    size_t n = *cap > 0 ? *cap : 16;
    void *q;

    if (need <= *cap)
        return p;
    while (n < need)
        n *= 2;
    if (n > SIZE_MAX / size)
        return NULL;
    q = realloc(p, n * size);
    if (q != NULL)
        *cap = n;
    return q;
}

static int
jn_write_full(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = EIO; /* a regular file never takes nothing */
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Makes the directory's entries (a segment created or removed) durable. */
static int
jn_sync_dir(struct journal *j)
{
    if (fsync(j->dirfd) != 0) {
        log_errno_err("journal: fsync %s", j->dir);
        return -1;
    }
    return 0;
}

/* ---- liveness bitmaps --------------------------------------------------- */

/* Makes room in a bitmap for bit idx. */
static int
jn_bits_reserve(uint64_t **bits, size_t *nwords, uint64_t idx)
{
    size_t need = (size_t)(idx / 64) + 1, n;
    uint64_t *b;

    if (need <= *nwords)
        return 0;
    n = *nwords > 0 ? 2 * *nwords : 16;
    if (n < need)
        n = need;
    b = realloc(*bits, n * sizeof *b);
    if (b == NULL)
        return -1;
    memset(b + *nwords, 0, (n - *nwords) * sizeof *b);
    *bits = b;
    *nwords = n;
    return 0;
}

/* Marks lsn live in s (room reserved). */
static void
jn_seg_mark(struct jn_seg *s, uint64_t lsn)
{
    uint64_t idx = lsn - s->first_lsn;

    s->bits[idx / 64] |= (uint64_t)1 << (idx % 64);
    s->live++;
}

static void
jn_seg_drop_bits(struct jn_seg *s)
{
    free(s->bits);
    s->bits = NULL;
    s->nwords = 0;
}

/* The segment holding lsn, or NULL. */
static struct jn_seg *
jn_seg_find(struct journal *j, uint64_t lsn)
{
    size_t lo = 0, hi = j->nsegs;
    struct jn_seg *s;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (j->segs[mid].first_lsn <= lsn)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    s = &j->segs[lo - 1];
    return lsn <= s->last_lsn ? s : NULL;
}

/* ---- the work queue ---------------------------------------------------- */

static bool
jn_work_empty(const struct jn_work *w)
{
    return w->len == 0 && w->ncuts == 0 && w->ndels == 0;
}

static void
jn_work_reset(struct jn_work *w)
{
    w->len = 0;
    w->ncuts = 0;
    w->ndels = 0;
    w->last_lsn = 0;
    if (w->cap > JN_WORK_KEEP) {
        free(w->buf);
        w->buf = NULL;
        w->cap = 0;
    }
}

static void
jn_work_free(struct jn_work *w)
{
    free(w->buf);
    free(w->cuts);
    free(w->dels);
}

/* Queues one framed record (mu held), after a cut when cut is set.
 * 0, or -1 when out of memory, the queue then unchanged. */
static int
jn_work_add(struct jn_work *w, const uint8_t hdr[JN_FRAME], const void *payload,
            size_t len, uint64_t lsn, bool cut)
{
    void *q;

    if (cut) {
        q = jn_grow(w->cuts, &w->capcuts, w->ncuts + 1, sizeof *w->cuts);
        if (q == NULL)
            return -1;
        w->cuts = q;
    }
    q = jn_grow(w->buf, &w->cap, w->len + JN_FRAME + len, 1);
    if (q == NULL)
        return -1;
    w->buf = q;
    if (cut)
        w->cuts[w->ncuts++] =
            (struct jn_cut){ .off = w->len, .first_lsn = lsn };
    memcpy(w->buf + w->len, hdr, JN_FRAME);
    if (len > 0)
        memcpy(w->buf + w->len + JN_FRAME, payload, len);
    w->len += JN_FRAME + len;
    w->last_lsn = lsn;
    return 0;
}

/* ---- segment files ------------------------------------------------------ */

/* Creates the segment of first_lsn: header written and fdatasync()ed, the
 * directory fsync()ed, the file open for appending in *fdp. */
static int
jn_segment_create(struct journal *j, uint64_t first_lsn, int *fdp, char *err,
                  size_t errlen)
{
    char name[JN_NAME_SIZE];
    uint8_t h[JN_HDR];
    int fd;

    jn_name(name, first_lsn);
    memcpy(h, JN_MAGIC, JN_MAGIC_LEN);
    jn_put_le32(h + JN_HDR_VERSION, JN_VERSION);
    jn_put_le64(h + JN_HDR_LSN, first_lsn);
    jn_put_le32(h + JN_HDR_CRC, jn_crc32c(0, h, JN_HDR_CRC));
    /* O_EXCL: every file of a segment's name is in the table, so one here
     * would mean two segments with one first lsn. */
    fd = openat(j->dirfd, name,
                O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return errbuf_set(err, errlen, "journal: create %s/%s: %s", j->dir,
                          name, strerror(errno));
    if (jn_write_full(fd, h, sizeof h) != 0 || fdatasync(fd) != 0) {
        int e = errno;

        (void)close(fd); /* failed already: its error adds nothing */
        errno = e;
        return errbuf_set(err, errlen,
                          "journal: writing the header of %s/%s: %s", j->dir,
                          name, strerror(e));
    }
    if (fsync(j->dirfd) != 0) {
        int e = errno;

        (void)close(fd);
        errno = e;
        return errbuf_set(err, errlen, "journal: fsync %s: %s", j->dir,
                          strerror(e));
    }
    *fdp = fd;
    return 0;
}

/* ---- the writer thread -------------------------------------------------- */

/* fdatasync of the active segment. */
static int
jn_sync(struct journal *j)
{
    char name[JN_NAME_SIZE];

    if (fdatasync(j->wfd) != 0) {
        jn_name(name, j->wseg);
        log_errno_err("journal: fdatasync %s/%s", j->dir, name);
        return -1;
    }
    __atomic_fetch_add(&j->syncs, 1, __ATOMIC_RELAXED);
    j->unsynced = false;
    return 0;
}

static void
jn_mark_unsynced(struct journal *j)
{
    if (j->unsynced)
        return;
    j->unsynced = true;
    if (j->fsync != JOURNAL_FSYNC_BATCH)
        return;
    /* CLOCK_MONOTONIC exists on Linux: this cannot fail. */
    (void)clock_gettime(CLOCK_MONOTONIC, &j->deadline);
    j->deadline.tv_sec += j->sync_ms / 1000;
    j->deadline.tv_nsec += (long)(j->sync_ms % 1000) * 1000000L;
    if (j->deadline.tv_nsec >= 1000000000L) {
        j->deadline.tv_sec++;
        j->deadline.tv_nsec -= 1000000000L;
    }
}

/* Closes the full segment (durable first) and opens the new one. */
static int
jn_rotate(struct journal *j, uint64_t first_lsn)
{
    char err[1024], name[JN_NAME_SIZE];
    int fd;

    if (j->unsynced && jn_sync(j) != 0)
        return -1;
    if (close(j->wfd) != 0) {
        /* Synced already: nothing of it can be lost now. */
        jn_name(name, j->wseg);
        log_errno_warning("journal: close %s/%s", j->dir, name);
    }
    j->wfd = -1;
    if (jn_segment_create(j, first_lsn, &fd, err, sizeof err) != 0) {
        log_err("%s", err);
        return -1;
    }
    __atomic_fetch_add(&j->syncs, 1, __ATOMIC_RELAXED); /* its header */
    j->wfd = fd;
    j->wseg = first_lsn;
    return 0;
}

/* Removes segments that hold nothing needed.  A failure only leaves a
 * file behind (it is no longer counted): logged, not fatal. */
static void
jn_delete_segments(struct journal *j, const uint64_t *dels, size_t n)
{
    char name[JN_NAME_SIZE];

    for (size_t i = 0; i < n; i++) {
        jn_name(name, dels[i]);
        if (unlinkat(j->dirfd, name, 0) != 0)
            log_errno_err("journal: unlink %s/%s", j->dir, name);
    }
    if (n > 0)
        (void)jn_sync_dir(j); /* logged; the files are gone either way */
}

/* Executes one batch.  0, or the errno of the failure (logged). */
static int
jn_write_batch(struct journal *j, const struct jn_work *w)
{
    char name[JN_NAME_SIZE];
    size_t pos = 0;

    if (j->werr != 0)
        return j->werr;
    for (size_t c = 0; c <= w->ncuts; c++) {
        size_t end = c < w->ncuts ? w->cuts[c].off : w->len;

        if (end > pos) {
            if (jn_write_full(j->wfd, w->buf + pos, end - pos) != 0) {
                jn_name(name, j->wseg);
                log_errno_err("journal: write %s/%s", j->dir, name);
                return errno != 0 ? errno : EIO;
            }
            jn_mark_unsynced(j);
            pos = end;
        }
        if (c < w->ncuts && jn_rotate(j, w->cuts[c].first_lsn) != 0)
            return errno != 0 ? errno : EIO;
    }
    /* Group commit: one fdatasync for the whole batch. */
    if (j->fsync == JOURNAL_FSYNC_ALWAYS && j->unsynced && jn_sync(j) != 0)
        return errno != 0 ? errno : EIO;
    jn_delete_segments(j, w->dels, w->ndels);
    return 0;
}

/* Publishes a batch's outcome and wakes the loop. */
static void
jn_publish(struct journal *j, uint64_t last_lsn, int err)
{
    static const uint64_t one = 1;

    if (last_lsn == 0 && err == 0)
        return; /* deletions only: nothing for the loop */
    pthread_mutex_lock(&j->mu);
    if (err != 0 && j->werr == 0)
        j->werr = err;
    if (last_lsn != 0) {
        j->done_lsn = last_lsn;
        if (j->werr == 0)
            j->ok_lsn = last_lsn;
    }
    pthread_cond_broadcast(&j->dcv);
    pthread_mutex_unlock(&j->mu);
    /* Outside the mutex, which the loop's appends take.  EAGAIN means the
     * counter is saturated, so the loop is woken anyway; an eventfd
     * accepts an 8-byte write in every other case. */
    while (write(j->efd, &one, sizeof one) < 0 && errno == EINTR)
        continue;
}

static bool
jn_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec ||
           (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void *
jn_writer(void *arg)
{
    struct journal *j = arg;
    struct timespec now;
    uint64_t last;
    int err;

    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (!jn_work_empty(&j->pending)) {
            struct jn_work t = j->pending;

            /* Swap, so that both buffers keep their capacity. */
            j->pending = j->work;
            j->work = t;
            pthread_mutex_unlock(&j->mu);
            err = jn_write_batch(j, &j->work);
            last = j->work.last_lsn;
            jn_work_reset(&j->work);
            jn_publish(j, last, err);
            pthread_mutex_lock(&j->mu);
            continue;
        }
        if (j->stop)
            break;
        if (j->unsynced && j->fsync == JOURNAL_FSYNC_BATCH && j->werr == 0) {
            (void)clock_gettime(CLOCK_MONOTONIC, &now);
            if (jn_before(&now, &j->deadline)) {
                /* ETIMEDOUT or a signal: the loop looks again. */
                (void)pthread_cond_timedwait(&j->wcv, &j->mu, &j->deadline);
                continue;
            }
            pthread_mutex_unlock(&j->mu);
            err = jn_sync(j) != 0 ? (errno != 0 ? errno : EIO) : 0;
            jn_publish(j, 0, err);
            pthread_mutex_lock(&j->mu);
            continue;
        }
        pthread_cond_wait(&j->wcv, &j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    /* Close: everything written becomes durable, whatever the policy.  A
     * failure is logged; no callback is left to report it to. */
    if (j->wfd >= 0) {
        if (j->werr == 0 && j->unsynced)
            (void)jn_sync(j);
        if (close(j->wfd) != 0)
            log_errno_warning("journal: close a segment of %s", j->dir);
        j->wfd = -1;
    }
    return NULL;
}

/* ---- completions, deletion, compaction (loop thread) -------------------- */

/* Runs the callbacks of every lsn the writer is done with, in order. */
static void
jn_drain(struct journal *j)
{
    uint64_t done, ok;
    int werr;

    pthread_mutex_lock(&j->mu);
    done = j->done_lsn;
    ok = j->ok_lsn;
    werr = j->werr;
    pthread_mutex_unlock(&j->mu);
    if (werr != 0)
        j->failed = true;
    j->seen_lsn = done;
    /* Pop before the call: a callback may append (and grow the ring). */
    while (j->wq_len > 0 && j->wq[j->wq_head].lsn <= done) {
        struct jn_waiter w = j->wq[j->wq_head];

        j->wq_head = (j->wq_head + 1) % j->wq_cap;
        j->wq_len--;
        w.cb(w.lsn <= ok ? 0 : (werr != 0 ? werr : EIO), w.arg);
    }
}

static void
jn_on_wake(evutil_socket_t fd, short what, void *arg)
{
    struct journal *j = arg;

    (void)fd;
    (void)what;
    pthread_mutex_lock(&j->mu);
    pthread_cond_signal(&j->wcv);
    pthread_mutex_unlock(&j->mu);
}

static void
jn_on_done(evutil_socket_t fd, short what, void *arg)
{
    uint64_t n;

    (void)what;
    /* Reset the counter before reading the state (see jn_publish).  It
     * fails only with EAGAIN (a spurious wakeup) or EINTR; the state is
     * read in every case, so nothing is lost. */
    if (read(fd, &n, sizeof n) < 0)
        n = 0;
    jn_drain(arg);
}

static int
jn_wq_reserve(struct journal *j)
{
    struct jn_waiter *q;
    size_t cap;

    if (j->wq_len < j->wq_cap)
        return 0;
    cap = j->wq_cap > 0 ? 2 * j->wq_cap : 64;
    q = malloc(cap * sizeof *q);
    if (q == NULL)
        return -1;
    for (size_t i = 0; i < j->wq_len; i++)
        q[i] = j->wq[(j->wq_head + i) % j->wq_cap];
    free(j->wq);
    j->wq = q;
    j->wq_cap = cap;
    j->wq_head = 0;
    return 0;
}

/* Queues a deletion for the writer: after every record queued so far, so
 * after the segment's last write and its cut. */
static int
jn_queue_delete(struct journal *j, uint64_t first_lsn)
{
    struct jn_work *w = &j->pending;
    void *q;
    int rc = -1;

    pthread_mutex_lock(&j->mu);
    q = jn_grow(w->dels, &w->capdels, w->ndels + 1, sizeof *w->dels);
    if (q != NULL) {
        w->dels = q;
        w->dels[w->ndels++] = first_lsn;
        pthread_cond_signal(&j->wcv);
        rc = 0;
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

static bool
jn_compact_due(const struct journal *j)
{
    return j->compact_cb != NULL && !j->hold && j->nsegs >= 3 &&
           j->segs[0].live > 0 &&
           (j->segs[1].first_lsn != j->compact_bound ||
            j->nsegs != j->compact_nsegs);
}

static void
jn_on_compact(evutil_socket_t fd, short what, void *arg)
{
    struct journal *j = arg;

    (void)fd;
    (void)what;
    j->compact_scheduled = false;
    if (!jn_compact_due(j))
        return; /* the segments went meanwhile */
    j->compact_bound = j->segs[1].first_lsn;
    j->compact_nsegs = j->nsegs;
    j->compact_cb(j->compact_bound, j->compact_arg);
}

/* Deletes the oldest segments while they hold nothing live (never the
 * active one), then sees whether compaction is due; the hook itself runs
 * later, from the event loop. */
static void
jn_collect(struct journal *j)
{
    char name[JN_NAME_SIZE];

    if (j->hold)
        return;
    while (j->nsegs > 1 && j->segs[0].live == 0) {
        if (jn_queue_delete(j, j->segs[0].first_lsn) != 0) {
            jn_name(name, j->segs[0].first_lsn);
            log_err("journal: out of memory: %s/%s kept for now", j->dir, name);
            break;
        }
        j->bytes -= j->segs[0].size;
        jn_seg_drop_bits(&j->segs[0]);
        memmove(j->segs, j->segs + 1, (j->nsegs - 1) * sizeof *j->segs);
        j->nsegs--;
    }
    if (!j->compact_scheduled && jn_compact_due(j)) {
        j->compact_scheduled = true;
        event_active(j->ev_compact, EV_TIMEOUT, 0);
    }
}

/* ---- reading segments (open and replay) ---------------------------------- */

/* A window on a segment file: pread() a chunk at a time. */
struct jn_reader {
    int fd;
    uint64_t size; /* how much of the file to read */
    uint8_t *buf;
    size_t cap, have;
    uint64_t start; /* the file offset of buf[0] */
};

/* Points *p at the len bytes at off (off + len <= size).  -1 with errno
 * on a read error, or EIO when the file is shorter than it was. */
static int
jn_reader_get(struct jn_reader *r, uint64_t off, size_t len, const uint8_t **p)
{
    size_t want, got = 0;

    if (off >= r->start && off - r->start <= r->have &&
        len <= r->have - (size_t)(off - r->start)) {
        *p = r->buf + (off - r->start);
        return 0;
    }
    want = len > JN_READ_CHUNK ? len : JN_READ_CHUNK;
    if (want > r->size - off)
        want = (size_t)(r->size - off);
    if (want > r->cap) {
        uint8_t *b = malloc(want);

        if (b == NULL)
            return -1;
        free(r->buf);
        r->buf = b;
        r->cap = want;
    }
    r->have = 0;
    while (got < want) {
        ssize_t n = pread(r->fd, r->buf + got, want - got, (off_t)(off + got));

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        got += (size_t)n;
    }
    r->start = off;
    r->have = got;
    *p = r->buf;
    return 0;
}

struct jn_rec {
    uint64_t lsn;
    uint8_t type, flags;
    const uint8_t *payload; /* in the reader's window */
    size_t len;
};

enum jn_parse {
    JN_PARSE_OK,
    JN_PARSE_BAD,
    JN_PARSE_ERROR, /* read error: errno */
};

/* Parses the frame at off as the next valid record after prev_lsn, whose
 * record ended at prev_end (see the top of the file for the lsn bound). */
static enum jn_parse
jn_frame_at(struct jn_reader *r, uint64_t off, uint64_t prev_lsn,
            uint64_t prev_end, struct jn_rec *rec)
{
    const uint8_t *p;
    uint64_t lsn, len;

    if (r->size - off < JN_FRAME)
        return JN_PARSE_BAD;
    if (jn_reader_get(r, off, JN_FRAME, &p) != 0)
        return JN_PARSE_ERROR;
    len = jn_get_le32(p);
    lsn = jn_get_le64(p + JN_FRAME_LSN);
    if (lsn <= prev_lsn || lsn - prev_lsn > 1 + (off - prev_end) / JN_FRAME)
        return JN_PARSE_BAD;
    if (len > JOURNAL_MAX_PAYLOAD || len > r->size - off - JN_FRAME)
        return JN_PARSE_BAD;
    if (jn_reader_get(r, off, JN_FRAME + (size_t)len, &p) != 0)
        return JN_PARSE_ERROR;
    if (jn_crc32c(0, p + JN_FRAME_LSN, JN_FRAME - JN_FRAME_LSN + len) !=
        jn_get_le32(p + JN_FRAME_CRC))
        return JN_PARSE_BAD;
    rec->lsn = lsn;
    rec->type = p[JN_FRAME_TYPE];
    rec->flags = p[JN_FRAME_FLAGS];
    rec->payload = p + JN_FRAME;
    rec->len = (size_t)len;
    return JN_PARSE_OK;
}

/* One segment's scan.  At open (seg set) it marks the LIVE records and
 * repairs: counts, logs, truncates a torn tail (newest).  At replay (cb
 * set) it only calls back; the same checks over the same bytes find the
 * same records, silently. */
struct jn_scan {
    uint64_t first_lsn;
    const char *name;
    struct jn_seg *seg; /* open */
    bool newest;        /* open */
    uint64_t end;       /* open, out: the segment's size after repair */
    journal_replay_cb cb;
    void *arg;
    bool stopped; /* replay: the callback asked to stop */
};

static int
jn_scan_record(struct journal *j, struct jn_scan *sc, const struct jn_rec *rec)
{
    struct jn_seg *s = sc->seg;

    if (s == NULL) {
        if (sc->cb(rec->lsn, rec->type, rec->flags, rec->payload, rec->len,
                   sc->arg) != 0)
            sc->stopped = true;
        return 0;
    }
    s->last_lsn = rec->lsn;
    if ((rec->flags & JOURNAL_LIVE) == 0)
        return 0;
    if (jn_bits_reserve(&s->bits, &s->nwords, rec->lsn - s->first_lsn) != 0)
        return -1;
    jn_seg_mark(s, rec->lsn);
    j->live++;
    return 0;
}

/* What follows a bad frame at off with nothing valid after it. */
static int
jn_scan_tail(struct journal *j, struct jn_scan *sc, int fd, uint64_t off,
             uint64_t size, uint64_t prev_lsn, char *err, size_t errlen)
{
    if (!sc->newest) {
        j->corrupt_records++;
        log_err("journal: %s/%s: bad record at offset %" PRIu64
                " (after lsn %" PRIu64 "): the last %" PRIu64 " bytes skipped",
                j->dir, sc->name, off, prev_lsn, size - off);
        return 0;
    }
    if (ftruncate(fd, (off_t)off) != 0 || fdatasync(fd) != 0)
        return errbuf_set(err, errlen,
                          "journal: truncating the torn tail of %s/%s: %s",
                          j->dir, sc->name, strerror(errno));
    j->torn_bytes += size - off;
    sc->end = off;
    log_warning("journal: %s/%s: torn tail at offset %" PRIu64
                " (after lsn %" PRIu64 "): %" PRIu64 " bytes dropped",
                j->dir, sc->name, off, prev_lsn, size - off);
    return 0;
}

/* Reads the records of one segment of size bytes (header checked). */
static int
jn_scan(struct journal *j, struct jn_scan *sc, int fd, uint64_t size, char *err,
        size_t errlen)
{
    struct jn_reader r = { .fd = fd, .size = size };
    uint64_t off = JN_HDR, prev_end = JN_HDR, prev_lsn = sc->first_lsn - 1;
    struct jn_rec rec;
    enum jn_parse p;
    int rc = -1;

    sc->end = size;
    while (off < size && !sc->stopped) {
        uint64_t next;

        p = jn_frame_at(&r, off, prev_lsn, prev_end, &rec);
        if (p == JN_PARSE_OK) {
            if (jn_scan_record(j, sc, &rec) != 0) {
                errbuf_set(err, errlen, "journal: reading %s/%s: out of memory",
                           j->dir, sc->name);
                goto out;
            }
            prev_lsn = rec.lsn;
            off += JN_FRAME + rec.len;
            prev_end = off;
            continue;
        }
        if (p == JN_PARSE_ERROR)
            goto read_error;
        /* A bad frame: is there a valid record further on? */
        for (next = off + 1; size - next >= JN_FRAME; next++) {
            p = jn_frame_at(&r, next, prev_lsn, prev_end, &rec);
            if (p != JN_PARSE_BAD)
                break;
        }
        if (p == JN_PARSE_ERROR)
            goto read_error;
        if (p == JN_PARSE_BAD) {
            if (sc->seg != NULL &&
                jn_scan_tail(j, sc, fd, off, size, prev_lsn, err, errlen) != 0)
                goto out;
            break;
        }
        if (sc->seg != NULL) {
            j->corrupt_records++;
            log_err("journal: %s/%s: corrupt record at offset %" PRIu64
                    " (after lsn %" PRIu64 "): %" PRIu64 " bytes skipped",
                    j->dir, sc->name, off, prev_lsn, next - off);
        }
        off = next;
    }
    rc = 0;
    goto out;
read_error:
    errbuf_set(err, errlen, "journal: read %s/%s: %s", j->dir, sc->name,
               strerror(errno));
out:
    free(r.buf);
    return rc;
}

enum jn_hdr {
    JN_HDR_OK,
    JN_HDR_TORN, /* short, or not a header at all */
    JN_HDR_BAD,  /* a header, but not this segment's or of another format */
    JN_HDR_ERROR,
};

/* Reads and checks the header of the segment open at fd; *size is the
 * file's.  A message in err for anything but JN_HDR_OK. */
static enum jn_hdr
jn_header_check(struct journal *j, int fd, uint64_t first_lsn, uint64_t *size,
                char *err, size_t errlen)
{
    char name[JN_NAME_SIZE];
    uint8_t h[JN_HDR];
    struct stat sb;
    size_t got = 0;
    uint32_t version;
    uint64_t lsn;

    jn_name(name, first_lsn);
    if (fstat(fd, &sb) != 0) {
        errbuf_set(err, errlen, "journal: fstat %s/%s: %s", j->dir, name,
                   strerror(errno));
        return JN_HDR_ERROR;
    }
    *size = (uint64_t)sb.st_size;
    while (got < sizeof h) {
        ssize_t n = pread(fd, h + got, sizeof h - got, (off_t)got);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            errbuf_set(err, errlen, "journal: read %s/%s: %s", j->dir, name,
                       strerror(errno));
            return JN_HDR_ERROR;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got < sizeof h || memcmp(h, JN_MAGIC, JN_MAGIC_LEN) != 0 ||
        jn_crc32c(0, h, JN_HDR_CRC) != jn_get_le32(h + JN_HDR_CRC)) {
        errbuf_set(err, errlen,
                   "journal: %s/%s is not a journal segment (%s header)",
                   j->dir, name, got < sizeof h ? "short" : "bad");
        return JN_HDR_TORN;
    }
    version = jn_get_le32(h + JN_HDR_VERSION);
    lsn = jn_get_le64(h + JN_HDR_LSN);
    if (version != JN_VERSION) {
        errbuf_set(err, errlen,
                   "journal: %s/%s has format version %" PRIu32
                   " (this build reads %u)",
                   j->dir, name, version, JN_VERSION);
        return JN_HDR_BAD;
    }
    if (lsn != first_lsn) {
        errbuf_set(err, errlen,
                   "journal: %s/%s: its header says first lsn %" PRIu64, j->dir,
                   name, lsn);
        return JN_HDR_BAD;
    }
    return JN_HDR_OK;
}

static int
jn_seg_cmp(const void *a, const void *b)
{
    const struct jn_seg *x = a, *y = b;

    return x->first_lsn < y->first_lsn ? -1 : x->first_lsn > y->first_lsn;
}

/* The segments in the directory, sorted, with nothing read yet. */
static int
jn_list(struct journal *j, char *err, size_t errlen)
{
    struct dirent *de;
    DIR *d = NULL;
    uint64_t lsn;
    int fd, rc = -1;

    fd = openat(j->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || (d = fdopendir(fd)) == NULL) {
        errbuf_set(err, errlen, "journal: opendir %s: %s", j->dir,
                   strerror(errno));
        if (fd >= 0)
            (void)close(fd); /* read-only */
        return -1;
    }
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        struct jn_seg *v;

        if (!jn_name_parse(de->d_name, &lsn))
            continue;
        v = jn_grow(j->segs, &j->capsegs, j->nsegs + 1, sizeof *j->segs);
        if (v == NULL) {
            errbuf_set(err, errlen, "journal: %s: out of memory", j->dir);
            goto out;
        }
        j->segs = v;
        j->segs[j->nsegs++] =
            (struct jn_seg){ .first_lsn = lsn, .last_lsn = lsn - 1 };
    }
    if (errno != 0) {
        errbuf_set(err, errlen, "journal: readdir %s: %s", j->dir,
                   strerror(errno));
        goto out;
    }
    if (j->nsegs > 1)
        qsort(j->segs, j->nsegs, sizeof *j->segs, jn_seg_cmp);
    rc = 0;
out:
    (void)closedir(d); /* read-only */
    return rc;
}

/* A newest segment whose header is torn and which holds nothing else is
 * what a crash during its creation leaves: removed. */
static int
jn_drop_torn_newest(struct journal *j, char *err, size_t errlen)
{
    struct jn_seg *s = &j->segs[j->nsegs - 1];
    char name[JN_NAME_SIZE], msg[1024];
    enum jn_hdr h;
    uint64_t size = 0;
    int fd;

    jn_name(name, s->first_lsn);
    fd = openat(j->dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errbuf_set(err, errlen, "journal: open %s/%s: %s", j->dir, name,
                          strerror(errno));
    h = jn_header_check(j, fd, s->first_lsn, &size, msg, sizeof msg);
    (void)close(fd); /* read-only */
    if (h != JN_HDR_TORN || size > JN_HDR)
        return 0; /* the scan reports whatever else is wrong */
    if (unlinkat(j->dirfd, name, 0) != 0)
        return errbuf_set(err, errlen, "journal: unlink %s/%s: %s", j->dir,
                          name, strerror(errno));
    if (jn_sync_dir(j) != 0)
        return errbuf_set(err, errlen, "journal: fsync %s: %s", j->dir,
                          strerror(errno));
    log_warning("journal: %s/%s: torn segment header (%" PRIu64
                " bytes): removed",
                j->dir, name, size);
    j->torn_bytes += size;
    j->nsegs--;
    /* Its lsns were never used, but may have been handed out: skip them
     * (see journal_open). */
    j->next_lsn = s->first_lsn;
    return 0;
}

/* Scans every segment: liveness, last lsn, repairs. */
static int
jn_load(struct journal *j, char *err, size_t errlen)
{
    char name[JN_NAME_SIZE];

    if (jn_list(j, err, errlen) != 0)
        return -1;
    if (j->nsegs > 0 && jn_drop_torn_newest(j, err, errlen) != 0)
        return -1;
    for (size_t i = 0; i < j->nsegs; i++) {
        struct jn_seg *s = &j->segs[i];
        bool newest = i + 1 == j->nsegs;
        struct jn_scan sc = {
            .first_lsn = s->first_lsn,
            .name = name,
            .seg = s,
            .newest = newest,
        };
        uint64_t size = 0;
        int fd, rc;

        jn_name(name, s->first_lsn);
        if (i > 0 && s->first_lsn <= j->segs[i - 1].last_lsn)
            return errbuf_set(err, errlen,
                              "journal: %s/%s overlaps the segment before "
                              "it (lsn %" PRIu64 ")",
                              j->dir, name, j->segs[i - 1].last_lsn);
        fd = openat(j->dirfd, name, (newest ? O_RDWR : O_RDONLY) | O_CLOEXEC);
        if (fd < 0)
            return errbuf_set(err, errlen, "journal: open %s/%s: %s", j->dir,
                              name, strerror(errno));
        rc = jn_header_check(j, fd, s->first_lsn, &size, err, errlen) ==
                     JN_HDR_OK
                 ? jn_scan(j, &sc, fd, size, err, errlen)
                 : -1;
        if (close(fd) != 0 && rc == 0)
            rc = errbuf_set(err, errlen, "journal: close %s/%s: %s", j->dir,
                            name, strerror(errno));
        if (rc != 0)
            return -1;
        s->size = sc.end;
        s->scan_end = sc.end;
        j->bytes += s->size;
        if (s->live == 0)
            jn_seg_drop_bits(s);
    }
    return 0;
}

/* The file new appends go to: the newest segment while it has room, else
 * a new one. */
static int
jn_open_active(struct journal *j, char *err, size_t errlen)
{
    char name[JN_NAME_SIZE];
    struct jn_seg *s;
    void *q;
    int fd;

    if (j->nsegs > 0) {
        s = &j->segs[j->nsegs - 1];
        /* Its lsns must stay consecutive: not after a torn newest segment
         * was removed (next_lsn is past it then). */
        if (s->last_lsn + 1 == j->next_lsn &&
            (s->size < j->segment_bytes || s->last_lsn < s->first_lsn)) {
            jn_name(name, s->first_lsn);
            fd = openat(j->dirfd, name, O_WRONLY | O_APPEND | O_CLOEXEC);
            if (fd < 0)
                return errbuf_set(err, errlen, "journal: open %s/%s: %s",
                                  j->dir, name, strerror(errno));
            j->wfd = fd;
            j->wseg = s->first_lsn;
            return 0;
        }
    }
    q = jn_grow(j->segs, &j->capsegs, j->nsegs + 1, sizeof *j->segs);
    if (q == NULL)
        return errbuf_set(err, errlen, "journal: %s: out of memory", j->dir);
    j->segs = q;
    if (jn_segment_create(j, j->next_lsn, &fd, err, errlen) != 0)
        return -1;
    j->segs[j->nsegs++] = (struct jn_seg){
        .first_lsn = j->next_lsn,
        .last_lsn = j->next_lsn - 1,
        .size = JN_HDR,
        .scan_end = JN_HDR,
    };
    j->bytes += JN_HDR;
    j->wfd = fd;
    j->wseg = j->next_lsn;
    return 0;
}

/* ---- open and close ------------------------------------------------------ */

/* Creates dir when missing, durably (its entry fsync()ed in the parent). */
static int
jn_mkdir(const char *dir, char *err, size_t errlen)
{
    char *parent, *slash;
    int fd, rc = -1;

    if (mkdir(dir, 0700) != 0) {
        if (errno == EEXIST)
            return 0; /* opening it tells whether it is a directory */
        return errbuf_set(err, errlen, "journal: mkdir %s: %s", dir,
                          strerror(errno));
    }
    parent = strdup(dir);
    if (parent == NULL)
        return errbuf_set(err, errlen, "journal: %s: out of memory", dir);
    while ((slash = strrchr(parent, '/')) != NULL && slash[1] == '\0' &&
           slash != parent)
        *slash = '\0'; /* trailing slashes */
    slash = strrchr(parent, '/');
    if (slash == NULL)
        strcpy(parent, ".");
    else
        slash[slash == parent ? 1 : 0] = '\0';
    fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        errbuf_set(err, errlen, "journal: fsync %s: %s", parent,
                   strerror(errno));
        if (fd >= 0)
            (void)close(fd); /* failed already */
        goto out;
    }
    if (close(fd) != 0) {
        errbuf_set(err, errlen, "journal: close %s: %s", parent,
                   strerror(errno));
        goto out;
    }
    rc = 0;
out:
    free(parent);
    return rc;
}

static int
jn_sync_init(struct journal *j, char *err, size_t errlen)
{
    pthread_condattr_t ca;
    int rc;

    if ((rc = pthread_condattr_init(&ca)) != 0)
        goto fail;
    /* The batch timer must not jump with the wall clock. */
    if ((rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) != 0)
        goto fail_ca;
    if ((rc = pthread_mutex_init(&j->mu, NULL)) != 0)
        goto fail_ca;
    if ((rc = pthread_cond_init(&j->wcv, &ca)) != 0)
        goto fail_mu;
    if ((rc = pthread_cond_init(&j->dcv, NULL)) != 0)
        goto fail_wcv;
    pthread_condattr_destroy(&ca);
    j->sync_ready = true;
    return 0;
fail_wcv:
    pthread_cond_destroy(&j->wcv);
fail_mu:
    pthread_mutex_destroy(&j->mu);
fail_ca:
    pthread_condattr_destroy(&ca);
fail:
    return errbuf_set(err, errlen, "journal: pthread init: %s", strerror(rc));
}

/* The writer takes no signal: they belong to the loop (libevent). */
static int
jn_start_writer(struct journal *j, char *err, size_t errlen)
{
    sigset_t all, old;
    int rc;

    if (sigfillset(&all) != 0)
        return errbuf_set(err, errlen, "journal: sigfillset: %s",
                          strerror(errno));
    rc = pthread_sigmask(SIG_SETMASK, &all, &old);
    if (rc != 0)
        return errbuf_set(err, errlen, "journal: pthread_sigmask: %s",
                          strerror(rc));
    rc = pthread_create(&j->thread, NULL, jn_writer, j);
    /* Restoring a mask read a moment ago cannot fail. */
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return errbuf_set(err, errlen,
                          "journal: starting the writer thread: %s",
                          strerror(rc));
    j->thread_started = true;
    return 0;
}

static void
jn_free(struct journal *j)
{
    if (j->ev_done != NULL)
        event_free(j->ev_done);
    if (j->ev_compact != NULL)
        event_free(j->ev_compact);
    if (j->ev_wake)
        event_free(j->ev_wake);
    if (j->efd >= 0)
        (void)close(j->efd); /* an eventfd: nothing to lose */
    if (j->wfd >= 0)
        (void)close(j->wfd); /* only when open failed: nothing written */
    if (j->dirfd >= 0)
        (void)close(j->dirfd); /* releases the flock */
    if (j->sync_ready) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->wcv);
        pthread_cond_destroy(&j->dcv);
    }
    for (size_t i = 0; i < j->nsegs; i++)
        free(j->segs[i].bits);
    free(j->segs);
    free(j->wq);
    jn_work_free(&j->pending);
    jn_work_free(&j->work);
    free(j->dir);
    free(j);
}

struct journal *
journal_open(const struct journal_config *cfg, struct event_base *base,
             char *err, size_t errlen)
{
    struct journal *j;
    uint64_t last;

    if (cfg->dir == NULL || cfg->dir[0] == '\0') {
        errbuf_set(err, errlen, "journal: no directory");
        return NULL;
    }
    if (cfg->fsync != JOURNAL_FSYNC_ALWAYS &&
        cfg->fsync != JOURNAL_FSYNC_BATCH && cfg->fsync != JOURNAL_FSYNC_OFF) {
        errbuf_set(err, errlen, "journal %s: unknown fsync policy %d", cfg->dir,
                   (int)cfg->fsync);
        return NULL;
    }
    (void)pthread_once(&jn_crc_once, jn_crc_init);
    j = calloc(1, sizeof *j);
    if (j == NULL) {
        errbuf_set(err, errlen, "journal: out of memory");
        return NULL;
    }
    j->dirfd = -1;
    j->efd = -1;
    j->wfd = -1;
    j->hold = true;
    j->fsync = cfg->fsync;
    j->segment_bytes =
        cfg->segment_bytes > 0 ? cfg->segment_bytes : JN_DEFAULT_SEGMENT;
    j->max_bytes = cfg->max_bytes > 0 ? cfg->max_bytes : JN_DEFAULT_MAX;
    j->sync_ms =
        cfg->sync_interval_ms > 0 ? cfg->sync_interval_ms : JN_DEFAULT_SYNC_MS;
    j->dir = strdup(cfg->dir);
    if (j->dir == NULL) {
        errbuf_set(err, errlen, "journal: out of memory");
        goto fail;
    }
    if (jn_mkdir(j->dir, err, errlen) != 0)
        goto fail;
    j->dirfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (j->dirfd < 0) {
        if (errno == ENOTDIR)
            errbuf_set(err, errlen, "journal: %s is not a directory", j->dir);
        else
            errbuf_set(err, errlen, "journal: open %s: %s", j->dir,
                       strerror(errno));
        goto fail;
    }
    if (flock(j->dirfd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            errbuf_set(err, errlen,
                       "journal: %s is in use by another journal (locked)",
                       j->dir);
        else
            errbuf_set(err, errlen, "journal: flock %s: %s", j->dir,
                       strerror(errno));
        goto fail;
    }
    if (jn_load(j, err, errlen) != 0)
        goto fail;
    /* One past the newest segment's last lsn; its first lsn when it holds
     * none (last_lsn is first_lsn - 1 then), 1 for a new journal; never
     * below a torn newest segment's first lsn (jn_drop_torn_newest). */
    last = j->nsegs > 0 ? j->segs[j->nsegs - 1].last_lsn : 0;
    if (j->next_lsn < last + 1)
        j->next_lsn = last + 1;
    if (jn_open_active(j, err, errlen) != 0)
        goto fail;
    j->done_lsn = j->ok_lsn = j->seen_lsn = j->next_lsn - 1;
    j->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (j->efd < 0) {
        errbuf_set(err, errlen, "journal: eventfd: %s", strerror(errno));
        goto fail;
    }
    j->ev_done = event_new(base, j->efd, EV_READ | EV_PERSIST, jn_on_done, j);
    j->ev_compact = event_new(base, -1, 0, jn_on_compact, j);
    j->ev_wake = event_new(base, -1, 0, jn_on_wake, j);
    if (j->ev_done == NULL || j->ev_compact == NULL || j->ev_wake == NULL ||
        event_add(j->ev_done, NULL) != 0) {
        errbuf_set(err, errlen, "journal: cannot register its events");
        goto fail;
    }
    if (jn_sync_init(j, err, errlen) != 0 ||
        jn_start_writer(j, err, errlen) != 0)
        goto fail;
    return j;
fail:
    jn_free(j);
    return NULL;
}

/* Runs every outstanding callback (including those of appends the
 * callbacks make), then stops and joins the writer, which syncs.  Blocks
 * the loop: it is the end.  Must not be called from a callback. */
void
journal_close(struct journal *j)
{
    if (j == NULL)
        return;
    for (;;) {
        jn_drain(j);
        if (j->seen_lsn + 1 >= j->next_lsn)
            break;
        pthread_mutex_lock(&j->mu);
        /* Its wake-up (ev_wake) may still wait for the loop: wake it. */
        pthread_cond_signal(&j->wcv);
        while (j->done_lsn == j->seen_lsn)
            pthread_cond_wait(&j->dcv, &j->mu);
        pthread_mutex_unlock(&j->mu);
    }
    pthread_mutex_lock(&j->mu);
    j->stop = true;
    pthread_cond_signal(&j->wcv);
    pthread_mutex_unlock(&j->mu);
    pthread_join(j->thread, NULL);
    jn_free(j);
}

/* ---- the API (loop thread) ---------------------------------------------- */

int
journal_replay(struct journal *j, journal_replay_cb cb, void *arg, char *err,
               size_t errlen)
{
    char name[JN_NAME_SIZE];
    size_t n = j->nsegs;
    int rc = 0;

    if (j->replayed || j->appends > 0)
        return errbuf_set(err, errlen,
                          "journal %s: a replay comes once, before the "
                          "first append",
                          j->dir);
    j->replayed = true;
    j->replaying = true;
    /* No segment is deleted while this runs (hold), so indices stay. */
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct jn_scan sc = {
            .first_lsn = j->segs[i].first_lsn,
            .name = name,
            .cb = cb,
            .arg = arg,
        };
        uint64_t end = j->segs[i].scan_end;
        int fd;

        if (end <= JN_HDR)
            continue; /* no record */
        jn_name(name, sc.first_lsn);
        fd = openat(j->dirfd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            rc = errbuf_set(err, errlen, "journal: open %s/%s: %s", j->dir,
                            name, strerror(errno));
            break;
        }
        rc = jn_scan(j, &sc, fd, end, err, errlen);
        (void)close(fd); /* read-only */
        if (sc.stopped)
            break;
    }
    j->replaying = false;
    j->hold = false;
    jn_collect(j);
    return rc;
}

uint64_t
journal_append(struct journal *j, uint8_t type, unsigned flags,
               const void *payload, size_t len, journal_done_cb cb, void *arg)
{
    struct jn_seg *act = &j->segs[j->nsegs - 1], fresh = { 0 }, *to;
    bool live = (flags & JOURNAL_LIVE) != 0, rotate, collect, wake;
    uint64_t lsn = j->next_lsn;
    uint8_t hdr[JN_FRAME];
    uint32_t crc;
    int rc = 0;

    if (j->failed) {
        errno = EIO;
        return 0;
    }
    if (len > JOURNAL_MAX_PAYLOAD) {
        errno = EMSGSIZE;
        return 0;
    }
    if (flags > UINT8_MAX || (len > 0 && payload == NULL)) {
        errno = EINVAL;
        return 0;
    }
    if (live && j->bytes >= j->max_bytes) {
        errno = ENOSPC;
        return 0;
    }
    /* Whatever can fail comes first, so that a failure changes nothing. */
    rotate = act->size >= j->segment_bytes && act->last_lsn >= act->first_lsn;
    if (rotate) {
        void *q = jn_grow(j->segs, &j->capsegs, j->nsegs + 1, sizeof *j->segs);

        if (q == NULL)
            goto nomem;
        j->segs = q;
        act = &j->segs[j->nsegs - 1];
        fresh = (struct jn_seg){
            .first_lsn = lsn,
            .last_lsn = lsn - 1,
            .size = JN_HDR,
        };
    }
    to = rotate ? &fresh : act;
    if (live && jn_bits_reserve(&to->bits, &to->nwords, lsn - to->first_lsn))
        goto nomem;
    if (cb != NULL && jn_wq_reserve(j) != 0)
        goto nomem;
    jn_put_le32(hdr, (uint32_t)len);
    jn_put_le64(hdr + JN_FRAME_LSN, lsn);
    hdr[JN_FRAME_TYPE] = type;
    hdr[JN_FRAME_FLAGS] = (uint8_t)flags;
    crc = jn_crc32c(0, hdr + JN_FRAME_LSN, JN_FRAME - JN_FRAME_LSN);
    if (len > 0)
        crc = jn_crc32c(crc, payload, len);
    jn_put_le32(hdr + JN_FRAME_CRC, crc);

    pthread_mutex_lock(&j->mu);
    /* The writer waits only when nothing is pending: the first record of
     * a loop turn schedules its wake-up at the end of the turn, so that
     * the records appended meanwhile go in the same write (and, for
     * `always`, the same fdatasync). */
    wake = jn_work_empty(&j->pending);
    if (j->werr != 0)
        rc = EIO;
    else if (jn_work_add(&j->pending, hdr, payload, len, lsn, rotate) != 0)
        rc = ENOMEM;
    pthread_mutex_unlock(&j->mu);
    if (rc == 0 && wake)
        event_active(j->ev_wake, EV_TIMEOUT, 1);
    if (rc != 0) {
        j->failed = rc == EIO;
        free(fresh.bits);
        errno = rc;
        return 0;
    }

    if (rotate) {
        if (act->live == 0)
            jn_seg_drop_bits(act);
        j->segs[j->nsegs++] = fresh;
        to = &j->segs[j->nsegs - 1];
        j->bytes += JN_HDR;
    }
    to->size += JN_FRAME + len;
    to->last_lsn = lsn;
    j->bytes += JN_FRAME + len;
    j->next_lsn++;
    j->appends++;
    if (live) {
        jn_seg_mark(to, lsn);
        j->live++;
    }
    if (cb != NULL) {
        j->wq[(j->wq_head + j->wq_len) % j->wq_cap] = (struct jn_waiter){
            .lsn = lsn,
            .cb = cb,
            .arg = arg,
        };
        j->wq_len++;
    }
    /* The first append ends the hold (unless made inside the replay,
     * which still reads the segments). */
    collect = rotate || (j->hold && !j->replaying);
    if (!j->replaying)
        j->hold = false;
    if (collect)
        jn_collect(j);
    return lsn;
nomem:
    free(fresh.bits);
    errno = ENOMEM;
    return 0;
}

void
journal_release(struct journal *j, uint64_t lsn)
{
    struct jn_seg *s = jn_seg_find(j, lsn);
    uint64_t idx, bit;

    if (s == NULL || s->bits == NULL)
        return;
    idx = lsn - s->first_lsn;
    if (idx / 64 >= s->nwords)
        return;
    bit = (uint64_t)1 << (idx % 64);
    if ((s->bits[idx / 64] & bit) == 0)
        return; /* not LIVE, or released already */
    s->bits[idx / 64] &= ~bit;
    s->live--;
    j->live--;
    if (s->live > 0)
        return;
    if (s != &j->segs[j->nsegs - 1])
        jn_seg_drop_bits(s);
    jn_collect(j);
}

void
journal_set_compact_hook(struct journal *j, journal_compact_cb cb, void *arg)
{
    j->compact_cb = cb;
    j->compact_arg = arg;
    j->compact_bound = 0;
    j->compact_nsegs = 0;
    jn_collect(j);
}

void
journal_stats(const struct journal *j, struct journal_stats *out)
{
    *out = (struct journal_stats){
        .segments = j->nsegs,
        .bytes = j->bytes,
        .live_records = j->live,
        .next_lsn = j->next_lsn,
        .torn_bytes = j->torn_bytes,
        .corrupt_records = j->corrupt_records,
        .syncs = __atomic_load_n(&j->syncs, __ATOMIC_RELAXED),
        .appends = j->appends,
    };
}
