/*
 * journal.h — the write-ahead journal of the embedded broker (DESIGN §6).
 *
 * An append-only sequence of records in segment files under one directory.
 * The broker (broker_embedded.c) appends a LIVE record for each accepted
 * message and AUX records for what happens to it (a settlement, a delivery
 * count); it gives the journal no meaning beyond that: payloads are opaque.
 *
 * Records carry a log sequence number (lsn): 1, 2, 3, … across segments,
 * never reused.  A LIVE record stays needed until the owner calls
 * journal_release() on its lsn; an AUX record needs no release.
 *
 * Disk stays bounded: a segment is deleted when it is the oldest, not the
 * one being written, and holds no LIVE record that was not released (AUX
 * records in it can then only refer to released records, since an AUX
 * record is always appended after the record it refers to).  When old
 * segments stay pinned by a few live records, the journal asks its owner
 * to compact (journal_set_compact_hook): the owner re-appends the current
 * state of every live record below a bound as new LIVE records (noting in
 * its payload which record it replaces) and releases the old ones.
 *
 * Durability (journal_fsync, journal_config.fsync):
 *   always  an append's callback runs after the record is written and
 *           fdatasync()ed (group commit: appends queued together share one
 *           fdatasync, so throughput grows with concurrency);
 *   batch   the callback runs once the record is written to the kernel
 *           (survives a kill -9 of the master, not a power loss); the file
 *           is fdatasync()ed at most sync_interval_ms later;
 *   off     written to the kernel, never fdatasync()ed except at rotation
 *           and close.
 *
 * Threads: every function runs on the loop thread; writes happen on one
 * writer thread, which hands completions back through an eventfd watched
 * by the loop; callbacks run on the loop thread in append order.  The
 * loop never waits for the disk except in journal_open/replay/close.
 *
 * Failure: a write, fdatasync or segment creation that fails (ENOSPC,
 * EDQUOT, EIO...) stops the journal writing: the appends queued with it
 * complete with that errno, later ones are refused (EIO), and
 * journal_health() names the file, the error and the time; an AUX append
 * without a callback is kept meanwhile (JOURNAL_DEFERRED) and written first
 * once the journal writes again, so that an owner's settlements made
 * during the outage are not lost.  The journal
 * recovers by itself: every JOURNAL_RETRY_MS, and at once on a refused
 * LIVE append, it truncates the failed segment to the end of its last good
 * record and starts a fresh segment; once that works it writes again (the
 * lsns of the failed appends are never used).  The state hook tells the
 * owner both changes, so that it can stop what needs the journal meanwhile.
 *
 * Damage: at open, a record cut short at the end of the newest segment (a
 * torn tail, from a crash mid-write) is truncated away; a record whose
 * checksum fails with valid records after it is counted as corrupt,
 * skipped, and reading resumes at the next valid record.  Both are logged
 * (log.h) and counted in journal_stats; neither stops the daemon.
 */
#ifndef WM_MASTER_JOURNAL_H
#define WM_MASTER_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct journal;

enum journal_fsync {
    JOURNAL_FSYNC_ALWAYS = 0,
    JOURNAL_FSYNC_BATCH,
    JOURNAL_FSYNC_OFF,
};

/* journal_append() flags. */
#define JOURNAL_LIVE 0x1u /* needed until journal_release() */

/* While the journal cannot write, it tries to recover this often. */
#define JOURNAL_RETRY_MS 500u

/* What journal_append() returns for an AUX record kept while the journal
 * cannot write (it gets its lsn when written). */
#define JOURNAL_DEFERRED UINT64_MAX

/* The largest payload of one record. */
#define JOURNAL_MAX_PAYLOAD (64u << 20)

struct journal_config {
    const char *dir;           /* created (0700) if missing */
    enum journal_fsync fsync;  /* see above */
    uint64_t segment_bytes;    /* rotate past this size (0: 64 MiB) */
    uint64_t max_bytes;        /* budget (0: 1 GiB), see journal_append */
    uint32_t sync_interval_ms; /* batch: the fdatasync delay (0: 100) */
};

struct journal_stats {
    uint64_t segments;        /* files on disk */
    uint64_t bytes;           /* their total size, queued appends included */
    uint64_t live_records;    /* LIVE records not released */
    uint64_t next_lsn;        /* what the next append gets */
    uint64_t torn_bytes;      /* truncated at open */
    uint64_t corrupt_records; /* skipped at open */
    uint64_t syncs;           /* fdatasync calls so far */
    uint64_t appends;         /* records appended since open */
    uint64_t inline_writes;   /* batches the loop wrote itself */
};

/* Completion of an append: error 0 once durable per the policy, else an
 * errno (the record may or may not be on disk). */
typedef void (*journal_done_cb)(int error, void *arg);

/* One record during replay.  Return non-zero to stop the replay. */
typedef int (*journal_replay_cb)(uint64_t lsn, uint8_t type, unsigned flags,
                                 const uint8_t *payload, size_t len, void *arg);

/* Asks the owner to re-append the live records whose lsn is below `below`
 * (and release the old ones), so that the oldest segments can go.  Runs on
 * the loop thread, from a deferred callback (never inside an append or a
 * release). */
typedef void (*journal_compact_cb)(uint64_t below, void *arg);

/* Opens the journal in cfg->dir: scans every segment (repairing a torn
 * tail) and starts the writer thread.  Returns NULL with a message in err
 * naming the cause (the directory, a segment that cannot be read).  The
 * directory is locked (flock) until journal_close: one journal each. */
struct journal *journal_open(const struct journal_config *cfg,
                             struct event_base *base, char *err, size_t errlen);

/* Calls cb for every record, oldest first, each LIVE record counted live
 * until the owner releases it (the owner releases, during or after the
 * replay, what its later AUX records settled).  Call once, after open and
 * before the first append.  Returns 0, or -1 with a message (a read
 * error). */
int journal_replay(struct journal *j, journal_replay_cb cb, void *arg,
                   char *err, size_t errlen);

/* Appends one record (the payload is copied).  Returns its lsn, or 0 with
 * errno: ENOSPC when flags has JOURNAL_LIVE and the journal's bytes reached
 * max_bytes (AUX records are always accepted, so that the journal can
 * drain), EMSGSIZE for a payload over JOURNAL_MAX_PAYLOAD, EIO while the
 * journal cannot write (journal_health() says why; see Failure: an AUX
 * record without cb is kept then, JOURNAL_DEFERRED, up to 4 MiB), EINVAL
 * for flags above 0xff (a record keeps one byte of them) or a NULL payload
 * with len > 0, ENOMEM.  cb may be NULL; it is never called from inside
 * journal_append. */
uint64_t journal_append(struct journal *j, uint8_t type, unsigned flags,
                        const void *payload, size_t len, journal_done_cb cb,
                        void *arg);

/* The LIVE record lsn is no longer needed (unknown or repeated lsns are
 * ignored). */
void journal_release(struct journal *j, uint64_t lsn);

/* Whether the journal writes, and if not since when and why. */
struct journal_health {
    bool writable;
    int error;           /* while not writable: the errno (ENOSPC, EIO...) */
    int64_t since;       /* while not writable: when it stopped (unix s) */
    uint64_t failures;   /* times it stopped writing since open */
    uint64_t recoveries; /* times it wrote again after stopping */
    char message[320];   /* while not writable: the operation, the file and
                            the error, e.g. "write <dir>/<segment>: No space
                            left on device" */
};
void journal_health(const struct journal *j, struct journal_health *out);
/* journal_health()'s writable alone. */
bool journal_writable(const struct journal *j);

/* Called on the loop thread when the journal stops writing (writable
 * false) and when it writes again (true). */
typedef void (*journal_state_cb)(bool writable, void *arg);
void journal_set_state_hook(struct journal *j, journal_state_cb cb, void *arg);

/* Sets the compaction hook.  Compaction is due when there are at least
 * three segments and the oldest is pinned by live records. */
void journal_set_compact_hook(struct journal *j, journal_compact_cb cb,
                              void *arg);

void journal_stats(const struct journal *j, struct journal_stats *out);

/* Waits for queued appends (running their callbacks), syncs, closes. */
void journal_close(struct journal *j);

#endif /* WM_MASTER_JOURNAL_H */
