/*
 * journal_writer.c — the write-ahead journal's writer thread (journal.c
 * describes the journal; journal_private.h what its files share): the work
 * the loop hands it, segment creation, and the thread that executes the
 * work.
 *
 * The loop frames each record (checksum included) into the pending work
 * under the mutex and decides there where a segment is full (a cut) and
 * which segments go.  The writer swaps the pending work out and executes
 * it: one write() per segment touched, the cuts (fdatasync the old file,
 * create the new one), the fsync policy, the deletions (unlink, then one
 * fsync of the directory); then it publishes, under the mutex, the last
 * lsn of the batch done (and the last one done without error) and wakes
 * the loop through an eventfd.  It never reads loop state.  The loop may
 * execute a small batch itself instead (journal_writer_inline()); `busy`
 * says who owns the file meanwhile, and the writer waits for it.
 *
 * Durability.  always: the batch is fdatasync()ed before its completion is
 * published (one fdatasync for everything queued meanwhile: group
 * commit).  batch: published after write(); the writer's timed condvar
 * wait fdatasyncs sync_interval_ms after the first write not yet synced.
 * off: no fdatasync but the old file's at a cut, the new file's header,
 * and at close.  stats.syncs counts the writer's fdatasync calls (of
 * segment files: policy, cuts, new headers, close), not those of open.
 *
 * Failure.  The first write, fdatasync or segment creation error fails
 * the journal: the writer logs it, notes where the last good record ends
 * (fail_seg, fail_good) and why (wmsg), writes nothing more (werr) but
 * the deletions (which free space), and completes every batch with that
 * errno.  The records of a batch before a cut whose old segment was
 * synced are good (ok_lsn covers them); the rest fail.
 *
 * Recovery.  Asked by the loop (journal_writer_recover(), recover_lsn),
 * after the pending batches: the failed segment is truncated to its last
 * good record, fdatasync()ed and closed, and a fresh segment is created at
 * the lsn the loop gives (a file of that name can only be an earlier
 * attempt's: it is removed first).  Success clears werr; a failure sets it
 * to the new errno.  Either way recover_lsn goes back to 0 and the loop is
 * woken.  A failure repeated with the same message is not logged again.
 */
#include "config.h"

#include "master/broker/journal_private.h"

#include "lib/errbuf.h"
#include "lib/thread.h"
#include "master/core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The writer keeps its batch buffer for the next batch up to this size;
 * a larger one (a burst, a huge record) is freed after use. */
#define JN_WORK_KEEP (4u << 20)
/* The loop writes pending work itself up to this size (a few records of
 * a quiet turn); larger batches go to the writer, which then runs beside
 * the loop. */
#define JN_INLINE_MAX (64u << 10)

/* ---- the work queue ---------------------------------------------------- */

bool
journal_work_empty(const struct jn_work *w)
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

void
journal_work_free(struct jn_work *w)
{
    free(w->buf);
    free(w->cuts);
    free(w->dels);
}

int
journal_work_add(struct jn_work *w, const uint8_t hdr[JN_FRAME],
                 const void *payload, size_t len, uint64_t lsn, bool cut)
{
    void *q;

    if (cut) {
        q = journal_grow(w->cuts, &w->capcuts, w->ncuts + 1, sizeof *w->cuts);
        if (q == NULL)
            return -1;
        w->cuts = q;
    }
    q = journal_grow(w->buf, &w->cap, w->len + JN_FRAME + len, 1);
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

/* ---- failures ----------------------------------------------------------- */

/* Notes a failure of the writer: its message (the operation, the file,
 * the error) for journal_health(), logged unless it repeats the last one.
 * Returns the errno e (EIO for 0), also left in errno. */
static int
jn_failure_msg(struct journal *j, int e, const char *msg)
{
    bool repeated;

    if (e == 0)
        e = EIO;
    pthread_mutex_lock(&j->mu);
    repeated = strcmp(j->wmsg, msg) == 0;
    (void)snprintf(j->wmsg, sizeof j->wmsg, "%s", msg);
    pthread_mutex_unlock(&j->mu);
    if (!repeated)
        log_err("journal: %s", msg);
    errno = e;
    return e;
}

/* The same, the message made of fmt (the operation and the file) and e. */
__attribute__((format(printf, 3, 4))) static int
jn_failure(struct journal *j, int e, const char *fmt, ...)
{
    char msg[JN_MSG_SIZE];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof msg)
        (void)snprintf(msg + n, sizeof msg - (size_t)n, ": %s",
                       strerror(e != 0 ? e : EIO));
    return jn_failure_msg(j, e, msg);
}

/* ---- segment files ------------------------------------------------------ */

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

int
journal_segment_create(struct journal *j, uint64_t first_lsn, int *fdp,
                       char *err, size_t errlen)
{
    char name[JN_NAME_SIZE];
    uint8_t h[JN_HDR];
    int fd;

    journal_segment_name(name, first_lsn);
    memcpy(h, JN_MAGIC, JN_MAGIC_LEN);
    jn_put_le32(h + JN_HDR_VERSION, JN_VERSION);
    jn_put_le64(h + JN_HDR_LSN, first_lsn);
    jn_put_le32(h + JN_HDR_CRC, journal_crc32c(0, h, JN_HDR_CRC));
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
        /* Holds no record: gone, so that a later attempt can create it. */
        (void)unlinkat(j->dirfd, name, 0);
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
        journal_segment_name(name, j->wseg);
        (void)jn_failure(j, errno, "fdatasync %s/%s", j->dir, name);
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

/* Closes the full segment (durable first: *good then covers every lsn
 * before first_lsn) and opens the new one. */
static int
jn_rotate(struct journal *j, uint64_t first_lsn, uint64_t *good)
{
    char err[1024], name[JN_NAME_SIZE];
    int fd;

    if (j->unsynced && jn_sync(j) != 0)
        return -1;
    *good = first_lsn - 1;
    if (close(j->wfd) != 0) {
        /* Synced already: nothing of it can be lost now. */
        journal_segment_name(name, j->wseg);
        log_errno_warning("journal: close %s/%s", j->dir, name);
    }
    j->wfd = -1;
    if (journal_segment_create(j, first_lsn, &fd, err, sizeof err) != 0) {
        (void)jn_failure_msg(j, errno, err + strlen("journal: "));
        return -1;
    }
    __atomic_fetch_add(&j->syncs, 1, __ATOMIC_RELAXED); /* its header */
    j->wfd = fd;
    j->wseg = first_lsn;
    j->wsize = j->wgood = JN_HDR;
    return 0;
}

/* Removes segments that hold nothing needed.  A failure only leaves a
 * file behind (it is no longer counted): logged, not fatal. */
static void
jn_delete_segments(struct journal *j, const uint64_t *dels, size_t n)
{
    char name[JN_NAME_SIZE];

    for (size_t i = 0; i < n; i++) {
        journal_segment_name(name, dels[i]);
        if (unlinkat(j->dirfd, name, 0) != 0)
            log_errno_err("journal: unlink %s/%s", j->dir, name);
    }
    if (n > 0)
        (void)journal_dir_sync(j); /* logged; the files are gone either way */
}

/* Executes one batch: *good is the last lsn of it written without error
 * (0: none).  0, or the errno of the failure (logged). */
static int
jn_write_batch(struct journal *j, const struct jn_work *w, uint64_t *good)
{
    char name[JN_NAME_SIZE];
    size_t pos = 0;

    *good = 0;
    if (j->werr != 0) {
        /* Deleting frees space: still done. */
        jn_delete_segments(j, w->dels, w->ndels);
        return j->werr;
    }
    for (size_t c = 0; c <= w->ncuts; c++) {
        size_t end = c < w->ncuts ? w->cuts[c].off : w->len;

        if (end > pos) {
            if (jn_write_full(j->wfd, w->buf + pos, end - pos) != 0) {
                journal_segment_name(name, j->wseg);
                return jn_failure(j, errno, "write %s/%s", j->dir, name);
            }
            j->wsize += end - pos;
            jn_mark_unsynced(j);
            pos = end;
        }
        if (c < w->ncuts && jn_rotate(j, w->cuts[c].first_lsn, good) != 0)
            return errno != 0 ? errno : EIO;
    }
    /* Group commit: one fdatasync for the whole batch. */
    if (j->fsync == JOURNAL_FSYNC_ALWAYS && j->unsynced && jn_sync(j) != 0)
        return errno != 0 ? errno : EIO;
    j->wgood = j->wsize;
    *good = w->last_lsn;
    jn_delete_segments(j, w->dels, w->ndels);
    return 0;
}

static void
jn_wake_loop(struct journal *j)
{
    static const uint64_t one = 1;

    /* Outside the mutex, which the loop's appends take.  EAGAIN means the
     * counter is saturated, so the loop is woken anyway; an eventfd
     * accepts an 8-byte write in every other case. */
    while (write(j->efd, &one, sizeof one) < 0 && errno == EINTR)
        continue;
}

/* Notes a batch's outcome (done up to last_lsn, without error up to
 * good_lsn), mu held. */
static void
jn_note_done(struct journal *j, uint64_t last_lsn, uint64_t good_lsn, int err)
{
    if (err != 0 && j->werr == 0) {
        j->werr = err;
        j->fail_seg = j->wfd >= 0 ? j->wseg : 0;
        j->fail_good = j->wgood;
    }
    if (last_lsn != 0)
        j->done_lsn = last_lsn;
    if (good_lsn > j->ok_lsn)
        j->ok_lsn = good_lsn;
    pthread_cond_broadcast(&j->dcv);
}

/* Publishes a batch's outcome and wakes the loop. */
static void
jn_publish(struct journal *j, uint64_t last_lsn, uint64_t good_lsn, int err)
{
    if (last_lsn == 0 && err == 0)
        return; /* deletions only: nothing for the loop */
    pthread_mutex_lock(&j->mu);
    jn_note_done(j, last_lsn, good_lsn, err);
    pthread_mutex_unlock(&j->mu);
    jn_wake_loop(j);
}

/* The recovery (see the top): 0, or the errno of its failure (noted). */
static int
jn_recover(struct journal *j, uint64_t lsn)
{
    char err[1024], name[JN_NAME_SIZE];
    int fd;

    if (j->wfd >= 0) {
        journal_segment_name(name, j->wseg);
        if (ftruncate(j->wfd, (off_t)j->wgood) != 0)
            return jn_failure(j, errno, "truncate %s/%s to its last record",
                              j->dir, name);
        if (fdatasync(j->wfd) != 0)
            return jn_failure(j, errno, "fdatasync %s/%s", j->dir, name);
        __atomic_fetch_add(&j->syncs, 1, __ATOMIC_RELAXED);
        if (close(j->wfd) != 0) /* synced: nothing of it can be lost */
            log_errno_warning("journal: close %s/%s", j->dir, name);
        j->wfd = -1;
        j->unsynced = false;
    }
    journal_segment_name(name, lsn);
    if (unlinkat(j->dirfd, name, 0) != 0 && errno != ENOENT)
        return jn_failure(j, errno, "unlink %s/%s", j->dir, name);
    if (journal_segment_create(j, lsn, &fd, err, sizeof err) != 0)
        return jn_failure_msg(j, errno, err + strlen("journal: "));
    __atomic_fetch_add(&j->syncs, 1, __ATOMIC_RELAXED); /* its header */
    j->wfd = fd;
    j->wseg = lsn;
    j->wsize = j->wgood = JN_HDR;
    return 0;
}

static bool
jn_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec ||
           (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* Under j->mu: the pending work becomes the file's owner's (busy), the
 * buffers swapped so that both keep their capacity. */
static void
take_pending(struct journal *j)
{
    struct jn_work t = j->pending;

    j->pending = j->work;
    j->work = t;
    j->busy = true;
}

/* Without j->mu, by whoever took the pending work: writes it; 0 or the
 * errno of the failure, *last its last LSN, *good as jn_write_batch(). */
static int
write_taken(struct journal *j, uint64_t *last, uint64_t *good)
{
    int err = jn_write_batch(j, &j->work, good);

    *last = j->work.last_lsn;
    jn_work_reset(&j->work);
    return err;
}

static void *
jn_writer(void *arg)
{
    struct journal *j = arg;
    struct timespec now;
    uint64_t last, good, lsn;
    int err;

    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (j->busy) {
            /* The loop writes (journal_writer_inline()): the file is its
             * until it wakes us. */
            j->writer_waits = true;
            pthread_cond_wait(&j->wcv, &j->mu);
            continue;
        }
        if (!journal_work_empty(&j->pending)) {
            take_pending(j);
            pthread_mutex_unlock(&j->mu);
            err = write_taken(j, &last, &good);
            jn_publish(j, last, good, err);
            pthread_mutex_lock(&j->mu);
            j->busy = false;
            continue;
        }
        if (j->recover_lsn != 0) {
            lsn = j->recover_lsn;
            j->busy = true;
            pthread_mutex_unlock(&j->mu);
            err = j->werr != 0 ? jn_recover(j, lsn) : 0;
            pthread_mutex_lock(&j->mu);
            j->busy = false;
            j->werr = err;
            if (err == 0)
                j->wmsg[0] = '\0';
            j->recover_lsn = 0;
            pthread_mutex_unlock(&j->mu);
            jn_wake_loop(j);
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
            j->busy = true;
            pthread_mutex_unlock(&j->mu);
            err = jn_sync(j) != 0 ? (errno != 0 ? errno : EIO) : 0;
            jn_publish(j, 0, 0, err);
            pthread_mutex_lock(&j->mu);
            j->busy = false;
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

bool
journal_writer_inline(struct journal *j)
{
    uint64_t good, last;
    bool was_unsynced, wake;
    int err;

    if (j->fsync == JOURNAL_FSYNC_ALWAYS)
        return false;
    pthread_mutex_lock(&j->mu);
    if (j->busy || j->werr != 0 || j->recover_lsn != 0 || j->stop ||
        j->pending.len == 0 || j->pending.len > JN_INLINE_MAX ||
        j->pending.ncuts != 0 || j->pending.ndels != 0) {
        pthread_mutex_unlock(&j->mu);
        return false;
    }
    take_pending(j);
    pthread_mutex_unlock(&j->mu);

    was_unsynced = j->unsynced;
    err = write_taken(j, &last, &good);

    pthread_mutex_lock(&j->mu);
    jn_note_done(j, last, good, err);
    j->busy = false;
    /* The writer arms the sync timer (batch) once there is something to
     * sync; otherwise it has nothing to do, unless it waited for us. */
    wake = j->writer_waits ||
           (j->fsync == JOURNAL_FSYNC_BATCH && j->unsynced && !was_unsynced);
    j->writer_waits = false;
    if (wake)
        pthread_cond_signal(&j->wcv);
    pthread_mutex_unlock(&j->mu);
    return true;
}

int
journal_writer_start(struct journal *j, char *err, size_t errlen)
{
    int rc = thread_start_quiet(&j->thread, jn_writer, j, false);

    if (rc != 0)
        return errbuf_set(err, errlen,
                          "journal: starting the writer thread: %s",
                          strerror(rc));
    j->thread_started = true;
    return 0;
}

void
journal_writer_recover(struct journal *j, uint64_t lsn)
{
    pthread_mutex_lock(&j->mu);
    j->recover_lsn = lsn;
    pthread_cond_signal(&j->wcv);
    pthread_mutex_unlock(&j->mu);
}

void
journal_writer_stop(struct journal *j)
{
    pthread_mutex_lock(&j->mu);
    j->stop = true;
    pthread_cond_signal(&j->wcv);
    pthread_mutex_unlock(&j->mu);
    pthread_join(j->thread, NULL);
}
