/*
 * journal_private.h — what the three files of the write-ahead journal
 * share; nothing outside master/broker/journal*.c includes it.
 *
 *   journal.c         the file format, the bookkeeping on the loop thread
 *                     (liveness, completions, deletion, compaction, the
 *                     budget), open and close, and the API;
 *   journal_writer.c  the work handed to the writer thread, segment
 *                     creation, and the writer thread itself;
 *   journal_replay.c  reading the segments back: the scan and repair at
 *                     open, and journal_replay().
 *
 * The types and constants keep the journal's short private prefix (jn_,
 * JN_); the functions one file lends another are named journal_*, beside
 * journal.h's public ones.  Which thread may touch what is said at each
 * field of struct journal: the loop and the writer meet only in the fields
 * "shared, under mu".
 */
#ifndef WM_MASTER_JOURNAL_PRIVATE_H
#define WM_MASTER_JOURNAL_PRIVATE_H

#include "master/broker/journal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The layout of a segment (journal.c describes it). */
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
#define JN_NAME_SIZE 21
/* A failure's message: the operation, the file, the error. */
#define JN_MSG_SIZE 320

struct event;

/* An AUX record appended while the journal could not write, kept until it
 * writes again (journal.c). */
struct jn_deferred {
    struct jn_deferred *next;
    uint8_t type, flags;
    size_t len;
    uint8_t payload[];
};

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
    uint64_t seen_lsn;  /* completions taken up to here */
    bool failed;        /* the loop has seen the writer's error */
    bool recovering;    /* a recovery asked of the writer, not answered */
    int fail_err;       /* while failed: the errno */
    int64_t fail_since; /* while failed: when (unix seconds) */
    uint64_t failures, recoveries;
    char fail_msg[JN_MSG_SIZE]; /* while failed: which file, which error */
    struct event *ev_retry;     /* while failed: the next recovery */
    struct jn_deferred *defer_head, **defer_tail; /* in append order */
    uint64_t defer_bytes;
    journal_state_cb state_cb;
    void *state_arg;
    bool hold; /* no deletion until the replay or an append */
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
    uint64_t done_lsn;      /* every lsn up to here is done... */
    uint64_t ok_lsn;        /* ...and up to here without error */
    int werr;               /* the failure, or 0; written by whoever is busy */
    char wmsg[JN_MSG_SIZE]; /* werr's message: the file and the error */
    uint64_t fail_seg;      /* at the failure: wseg, or 0 when wfd was closed */
    uint64_t fail_good;     /* ...and wgood */
    uint64_t recover_lsn;   /* the loop asks for a recovery at this lsn (0:
                               none asked, or the writer has answered) */
    bool stop;
    /* Someone executes work (the fields below are theirs): the writer, or
     * the loop writing a small batch itself (journal_writer_inline()). */
    bool busy;
    bool writer_waits; /* the writer found busy set by the loop: wake it */

    /* whoever set busy (the writer's, or the loop's before the writer
     * starts, after it ends, and inside journal_writer_inline()) */
    struct jn_work work;
    int wfd;
    uint64_t wseg;         /* the first lsn of wfd's segment */
    uint64_t wsize, wgood; /* wfd's bytes written, and known good */
    bool unsynced;
    struct timespec deadline; /* batch: when the unsynced bytes sync */

    uint64_t syncs;         /* __atomic: written by the writer, read anywhere */
    uint64_t inline_writes; /* loop thread only */
    pthread_t thread;
    bool sync_ready, thread_started;
};

/* Little-endian integers of the format. */
static inline void
jn_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void
jn_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t
jn_get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline uint64_t
jn_get_le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* ---- journal.c -------------------------------------------------------- */

/* CRC-32C of len bytes, continuing crc (0 to start); the fastest way this
 * CPU has once journal_open() ran. */
uint32_t journal_crc32c(uint32_t crc, const uint8_t *p, size_t len);

/* The file name of the segment of first_lsn, "%016" PRIx64 ".wmj". */
void journal_segment_name(char out[JN_NAME_SIZE], uint64_t first_lsn);

/* The first lsn a segment's file name gives, or false when the name is
 * not a segment's. */
bool journal_segment_name_parse(const char *name, uint64_t *lsn);

/* p grown to hold need elements of size bytes (doubling from 16), or NULL
 * when out of memory, p and *cap then untouched. */
void *journal_grow(void *p, size_t *cap, size_t need, size_t size);

/* fsync()s the directory, making a segment created or removed durable.
 * 0, or -1 (logged, errno kept). */
int journal_dir_sync(struct journal *j);

/* Makes room in a bitmap for bit idx.  0, or -1 when out of memory. */
int journal_bits_reserve(uint64_t **bits, size_t *nwords, uint64_t idx);

/* Marks lsn live in s (room reserved) and counts it. */
void journal_seg_mark(struct jn_seg *s, uint64_t lsn);

/* Frees s's bitmap (none of its records is live any more). */
void journal_seg_drop_bits(struct jn_seg *s);

/* Deletes the oldest segments while they hold nothing live (never the
 * active one), then schedules compaction when it is due. */
void journal_collect(struct journal *j);

/* ---- journal_writer.c ------------------------------------------------- */

/* Whether w holds nothing for the writer. */
bool journal_work_empty(const struct jn_work *w);

/* Queues one framed record (mu held), after a cut when cut is set.  0, or
 * -1 when out of memory, the queue then unchanged. */
int journal_work_add(struct jn_work *w, const uint8_t hdr[JN_FRAME],
                     const void *payload, size_t len, uint64_t lsn, bool cut);

/* Frees w's buffers. */
void journal_work_free(struct jn_work *w);

/*
 * Creates the segment of first_lsn: header written and fdatasync()ed, the
 * directory fsync()ed, the file open for appending in *fdp.  0, or -1 with
 * the message in err.
 */
int journal_segment_create(struct journal *j, uint64_t first_lsn, int *fdp,
                           char *err, size_t errlen);

/* Starts the writer thread, with every signal blocked (they belong to the
 * loop).  0, or -1 with the message in err. */
int journal_writer_start(struct journal *j, char *err, size_t errlen);

/* Starts a recovery on the writer (the loop, while failed, nothing being
 * appended): the failed segment truncated to its last good record, synced
 * and closed, a fresh segment created at lsn.  The writer answers through
 * the completion eventfd: werr cleared, or set to the new failure. */
void journal_writer_recover(struct journal *j, uint64_t lsn);

/*
 * Executes the pending work on the loop thread instead of waking the
 * writer, when that only costs one write(2): the policy is batch or off
 * (no fdatasync before the completion), the work is small and has no cut
 * and no deletion, and the writer is idle and not failed.  Completions
 * are then published as the writer's are (jn_drain() takes them up); the
 * writer is woken only to arm its sync timer (the first write since a
 * sync) or when it waited for the loop.  Returns whether it did.
 */
bool journal_writer_inline(struct journal *j);

/* Tells the writer to stop once its work is done, and joins it; it syncs
 * and closes the active segment on its way out. */
void journal_writer_stop(struct journal *j);

/* ---- journal_replay.c ------------------------------------------------- */

/*
 * Reads every segment at open, oldest first: the segment table, liveness,
 * the last lsn, the repairs (a torn tail truncated, a torn newest header
 * removed, corrupt records counted).  0, or -1 with the message in err.
 */
int journal_load(struct journal *j, char *err, size_t errlen);

#endif /* WM_MASTER_JOURNAL_PRIVATE_H */
