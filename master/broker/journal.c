/*
 * journal.c — the write-ahead journal (journal.h): segment files written
 * by one thread with group commit, liveness kept per segment, damage
 * repaired at open.  This file holds the format, the loop thread's
 * bookkeeping, open and close, and the API; journal_writer.c the writer
 * thread (and the durability policies), journal_replay.c the reading of
 * the segments at open and in journal_replay() (and the rules that find a
 * valid record); journal_private.h what they share.
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
 *
 * Open reads every segment, repairs what a crash left (journal_replay.c),
 * then opens the newest segment for appending when it has room (so that
 * restarts do not leave a trail of small segments), else creates a fresh
 * one.  next_lsn is one past the last lsn of the newest segment, or its
 * first lsn when it is empty, or the first lsn of a torn newest segment
 * that was removed (a fresh segment then continues from there): lsns never
 * repeat, even after every record was released and every older segment
 * deleted.
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
 * through an eventfd.  A small batch under the batch or off policy (one
 * write(2), nothing to sync before its completion) the loop writes itself
 * at the end of its turn when the writer is idle, saving two thread
 * switches (journal_writer_inline()).  The loop runs the callbacks of
 * every lsn up to there from a FIFO, in append order.  So the segment of every
 * lsn is known on the loop without asking the writer, and the writer never
 * reads loop state.
 *
 * Durability (journal.h's policies, as the writer applies them):
 * journal_writer.c.
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
 * Failure and recovery.  The first write, fdatasync or segment creation
 * error fails the journal: the writer logs it, writes nothing more, and
 * completes every batch with that errno; appends return EIO once the loop
 * has seen it.  The loop then forgets what will not be kept (the failed
 * records' liveness and bytes, the segments created after the last good
 * record), tells the owner (the state hook), and asks the writer to
 * recover every JOURNAL_RETRY_MS and on a refused LIVE append, one
 * attempt at a time: the failed segment truncated to its last good
 * record, a fresh segment at next_lsn.  Once one works, the fresh segment
 * is the active one, the AUX records kept meanwhile (jn_defer) are
 * appended first, and appends go on.  The failed lsns are skipped, never
 * reused (a segment's first lsn is then more than one above the last lsn
 * before it, which the reading at open allows).
 */
#include "config.h"

#include "master/broker/journal.h"
#include "master/broker/journal_private.h"

#include "lib/errbuf.h"
#include "master/core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
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

/* "%016" PRIx64 ".wmj": the hex digits and the suffix. */
#define JN_NAME_HEX 16
#define JN_SUFFIX ".wmj"
/* CRC-32C (Castagnoli), reflected. */
#define JN_CRC_POLY 0x82F63B78u

#define JN_DEFAULT_SEGMENT (64ull << 20)
#define JN_DEFAULT_MAX (1ull << 30)
#define JN_DEFAULT_SYNC_MS 100u
/* AUX records kept while the journal cannot write, at most. */
#define JN_DEFER_MAX (4u << 20)

/* ---- small helpers ----------------------------------------------------- */

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

/* The one journal_crc32c() calls: the table's until jn_crc_init() finds
 * SSE4.2. */
static uint32_t (*jn_crc32c_best)(uint32_t crc, const uint8_t *p,
                                  size_t len) = jn_crc32c_table;

uint32_t
journal_crc32c(uint32_t crc, const uint8_t *p, size_t len)
{
    return jn_crc32c_best(crc, p, len);
}

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
        jn_crc32c_best = jn_crc32c_sse42;
#endif
}

void
journal_segment_name(char out[JN_NAME_SIZE], uint64_t first_lsn)
{
    snprintf(out, JN_NAME_SIZE, "%016" PRIx64 JN_SUFFIX, first_lsn);
}

/* Lower-case hex only, as journal_segment_name() writes it. */
bool
journal_segment_name_parse(const char *name, uint64_t *lsn)
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

void *
journal_grow(void *p, size_t *cap, size_t need, size_t size)
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
int
journal_dir_sync(struct journal *j)
{
    if (fsync(j->dirfd) != 0) {
        log_errno_err("journal: fsync %s", j->dir);
        return -1;
    }
    return 0;
}

/* ---- liveness bitmaps --------------------------------------------------- */

int
journal_bits_reserve(uint64_t **bits, size_t *nwords, uint64_t idx)
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

void
journal_seg_mark(struct jn_seg *s, uint64_t lsn)
{
    uint64_t idx = lsn - s->first_lsn;

    s->bits[idx / 64] |= (uint64_t)1 << (idx % 64);
    s->live++;
}

void
journal_seg_drop_bits(struct jn_seg *s)
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

/* ---- failure and recovery (loop thread) --------------------------------- */

/* Adds the table's entry of a new empty segment at next_lsn (room
 * reserved), the newest. */
static void
jn_seg_push_empty(struct journal *j)
{
    j->segs[j->nsegs++] = (struct jn_seg){
        .first_lsn = j->next_lsn,
        .last_lsn = j->next_lsn - 1,
        .size = JN_HDR,
        .scan_end = JN_HDR,
    };
    j->bytes += JN_HDR;
}

static void
jn_retry_later(struct journal *j)
{
    struct timeval tv = {
        .tv_sec = JOURNAL_RETRY_MS / 1000,
        .tv_usec = (JOURNAL_RETRY_MS % 1000) * 1000,
    };

    if (evtimer_add(j->ev_retry, &tv) != 0)
        log_err("journal: cannot arm the recovery timer of %s: recovery "
                "waits for the next publish",
                j->dir);
}

/* The writer failed: what it keeps ends at lsn ok, and in the segment
 * fail_seg (still open; 0: none) at byte fail_good.  Forgets the rest. */
static void
jn_fail(struct journal *j, int werr, uint64_t ok, uint64_t fail_seg,
        uint64_t fail_good, const char *msg)
{
    struct jn_seg *s;

    j->failed = true;
    j->fail_err = werr;
    j->fail_since = (int64_t)time(NULL);
    j->failures++;
    if (msg[0] != '\0')
        snprintf(j->fail_msg, sizeof j->fail_msg, "%s", msg);
    else
        snprintf(j->fail_msg, sizeof j->fail_msg, "writing %s: %s", j->dir,
                 strerror(werr));
    /* Segments begun after the last good record, but the open one. */
    while (j->nsegs > 1 && j->segs[j->nsegs - 1].first_lsn > ok &&
           j->segs[j->nsegs - 1].first_lsn != fail_seg) {
        s = &j->segs[j->nsegs - 1];
        j->live -= s->live;
        journal_seg_drop_bits(s);
        j->nsegs--;
    }
    s = &j->segs[j->nsegs - 1];
    for (uint64_t lsn = ok + 1; lsn <= s->last_lsn; lsn++) {
        uint64_t idx = lsn - s->first_lsn, bit = (uint64_t)1 << (idx % 64);

        if (lsn < s->first_lsn || idx / 64 >= s->nwords ||
            (s->bits[idx / 64] & bit) == 0)
            continue;
        s->bits[idx / 64] &= ~bit;
        s->live--;
        j->live--;
    }
    if (s->last_lsn > ok)
        s->last_lsn = ok >= s->first_lsn ? ok : s->first_lsn - 1;
    if (s->first_lsn == fail_seg)
        s->size = fail_good;
    j->bytes = 0;
    for (size_t i = 0; i < j->nsegs; i++)
        j->bytes += j->segs[i].size;
    jn_retry_later(j);
}

/* Asks the writer to recover, unless it is at it already. */
static void
jn_recover(struct journal *j)
{
    void *q;

    if (!j->failed || j->recovering)
        return;
    /* Room for the fresh segment, so that its success cannot fail. */
    q = journal_grow(j->segs, &j->capsegs, j->nsegs + 1, sizeof *j->segs);
    if (q == NULL) {
        jn_retry_later(j);
        return;
    }
    j->segs = q;
    j->recovering = true;
    journal_writer_recover(j, j->next_lsn);
}

/* Keeps an AUX record appended while the journal cannot write.  0, or -1
 * (past JN_DEFER_MAX, out of memory). */
static int
jn_defer(struct journal *j, uint8_t type, unsigned flags, const void *payload,
         size_t len)
{
    struct jn_deferred *d;

    if (j->defer_bytes + len > JN_DEFER_MAX ||
        (d = malloc(sizeof *d + len)) == NULL)
        return -1;
    *d = (struct jn_deferred){ .type = type,
                               .flags = (uint8_t)flags,
                               .len = len };
    if (len > 0)
        memcpy(d->payload, payload, len);
    *j->defer_tail = d;
    j->defer_tail = &d->next;
    j->defer_bytes += len;
    return 0;
}

/* Appends the kept records (write) or drops them (the journal closes),
 * logging what is lost. */
static void
jn_flush_deferred(struct journal *j, bool write)
{
    struct jn_deferred *d;
    size_t lost = 0;

    while ((d = j->defer_head) != NULL) {
        j->defer_head = d->next;
        if (!write || journal_append(j, d->type, d->flags, d->payload, d->len,
                                     NULL, NULL) == 0)
            lost++;
        free(d);
    }
    j->defer_tail = &j->defer_head;
    j->defer_bytes = 0;
    if (lost > 0)
        log_err("journal: %s: %zu record(s) kept while it could not write "
                "are lost",
                j->dir, lost);
}

/* The writer answered a recovery: err 0, it writes again at next_lsn. */
static void
jn_recovered(struct journal *j, int err, const char *msg)
{
    j->recovering = false;
    if (err != 0) {
        j->fail_err = err;
        if (msg[0] != '\0')
            snprintf(j->fail_msg, sizeof j->fail_msg, "%s", msg);
        jn_retry_later(j);
        return;
    }
    jn_seg_push_empty(j);
    j->failed = false;
    j->recoveries++;
    log_notice("journal: %s is written again (it failed %" PRId64
               " s earlier: %s)",
               j->dir, (int64_t)time(NULL) - j->fail_since, j->fail_msg);
    jn_flush_deferred(j, true);
    journal_collect(j);
}

static void
jn_on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    jn_recover(arg);
}

/* ---- completions, deletion, compaction (loop thread) -------------------- */

/* Runs the callbacks of every lsn the writer is done with, in order, and
 * takes up the writer's failures and recoveries. */
static void
jn_drain(struct journal *j)
{
    char msg[JN_MSG_SIZE];
    uint64_t done, ok, fail_seg, fail_good;
    bool writable = !j->failed, answered;
    int werr;

    pthread_mutex_lock(&j->mu);
    done = j->done_lsn;
    ok = j->ok_lsn;
    werr = j->werr;
    fail_seg = j->fail_seg;
    fail_good = j->fail_good;
    answered = j->recovering && j->recover_lsn == 0;
    memcpy(msg, j->wmsg, sizeof msg);
    pthread_mutex_unlock(&j->mu);
    if (werr != 0 && !j->failed)
        jn_fail(j, werr, ok, fail_seg, fail_good, msg);
    else if (answered)
        jn_recovered(j, werr, msg);
    j->seen_lsn = done;
    /* Pop before the call: a callback may append (and grow the ring). */
    while (j->wq_len > 0 && j->wq[j->wq_head].lsn <= done) {
        struct jn_waiter w = j->wq[j->wq_head];

        j->wq_head = (j->wq_head + 1) % j->wq_cap;
        j->wq_len--;
        w.cb(w.lsn <= ok ? 0 : (j->fail_err != 0 ? j->fail_err : EIO), w.arg);
    }
    if (writable == j->failed && j->state_cb != NULL)
        j->state_cb(!j->failed, j->state_arg);
}

/* The end of a loop turn that appended: a small batch is written here
 * (journal_writer_inline()), saving the writer's wake-up and the eventfd
 * back; the rest goes to the writer. */
static void
jn_on_wake(evutil_socket_t fd, short what, void *arg)
{
    struct journal *j = arg;

    (void)fd;
    (void)what;
    if (journal_writer_inline(j)) {
        j->inline_writes++;
        jn_drain(j);
        return;
    }
    pthread_mutex_lock(&j->mu);
    pthread_cond_signal(&j->wcv);
    pthread_mutex_unlock(&j->mu);
}

static void
jn_on_done(evutil_socket_t fd, short what, void *arg)
{
    uint64_t n;

    (void)what;
    /* Reset the counter before reading the state (see jn_publish() in
     * journal_writer.c).  It fails only with EAGAIN (a spurious wakeup) or
     * EINTR; the state is read in every case, so nothing is lost. */
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
    q = journal_grow(w->dels, &w->capdels, w->ndels + 1, sizeof *w->dels);
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

/* The hook itself runs later, from the event loop. */
void
journal_collect(struct journal *j)
{
    char name[JN_NAME_SIZE];

    if (j->hold)
        return;
    while (j->nsegs > 1 && j->segs[0].live == 0) {
        if (jn_queue_delete(j, j->segs[0].first_lsn) != 0) {
            journal_segment_name(name, j->segs[0].first_lsn);
            log_err("journal: out of memory: %s/%s kept for now", j->dir, name);
            break;
        }
        j->bytes -= j->segs[0].size;
        journal_seg_drop_bits(&j->segs[0]);
        memmove(j->segs, j->segs + 1, (j->nsegs - 1) * sizeof *j->segs);
        j->nsegs--;
    }
    if (!j->compact_scheduled && jn_compact_due(j)) {
        j->compact_scheduled = true;
        event_active(j->ev_compact, EV_TIMEOUT, 0);
    }
}

/* ---- open and close ------------------------------------------------------ */

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
            journal_segment_name(name, s->first_lsn);
            fd = openat(j->dirfd, name, O_WRONLY | O_APPEND | O_CLOEXEC);
            if (fd < 0)
                return errbuf_set(err, errlen, "journal: open %s/%s: %s",
                                  j->dir, name, strerror(errno));
            j->wfd = fd;
            j->wseg = s->first_lsn;
            j->wsize = j->wgood = s->size;
            return 0;
        }
    }
    q = journal_grow(j->segs, &j->capsegs, j->nsegs + 1, sizeof *j->segs);
    if (q == NULL)
        return errbuf_set(err, errlen, "journal: %s: out of memory", j->dir);
    j->segs = q;
    if (journal_segment_create(j, j->next_lsn, &fd, err, errlen) != 0)
        return -1;
    jn_seg_push_empty(j);
    j->wfd = fd;
    j->wseg = j->next_lsn;
    j->wsize = j->wgood = JN_HDR;
    return 0;
}

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
static void
jn_free(struct journal *j)
{
    if (j->ev_done != NULL)
        event_free(j->ev_done);
    if (j->ev_compact != NULL)
        event_free(j->ev_compact);
    if (j->ev_wake)
        event_free(j->ev_wake);
    if (j->ev_retry)
        event_free(j->ev_retry);
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
    jn_flush_deferred(j, false);
    free(j->segs);
    free(j->wq);
    journal_work_free(&j->pending);
    journal_work_free(&j->work);
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
    j->defer_tail = &j->defer_head;
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
    if (journal_load(j, err, errlen) != 0)
        goto fail;
    /* One past the newest segment's last lsn; its first lsn when it holds
     * none (last_lsn is first_lsn - 1 then), 1 for a new journal; never
     * below a torn newest segment's first lsn (jn_drop_torn_newest() in
     * journal_replay.c). */
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
    j->ev_retry = evtimer_new(base, jn_on_retry, j);
    if (j->ev_done == NULL || j->ev_compact == NULL || j->ev_wake == NULL ||
        j->ev_retry == NULL || event_add(j->ev_done, NULL) != 0) {
        errbuf_set(err, errlen, "journal: cannot register its events");
        goto fail;
    }
    if (jn_sync_init(j, err, errlen) != 0 ||
        journal_writer_start(j, err, errlen) != 0)
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
    journal_writer_stop(j);
    jn_free(j);
}

/* ---- the API (loop thread) ---------------------------------------------- */

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

    if (len > JOURNAL_MAX_PAYLOAD) {
        errno = EMSGSIZE;
        return 0;
    }
    if (flags > UINT8_MAX || (len > 0 && payload == NULL)) {
        errno = EINVAL;
        return 0;
    }
    if (j->failed) {
        if (live)
            jn_recover(j); /* the next publish tries too */
        else if (cb == NULL && jn_defer(j, type, flags, payload, len) == 0)
            return JOURNAL_DEFERRED;
        errno = EIO;
        return 0;
    }
    if (live && j->bytes >= j->max_bytes) {
        errno = ENOSPC;
        return 0;
    }
    /* Whatever can fail comes first, so that a failure changes nothing. */
    rotate = act->size >= j->segment_bytes && act->last_lsn >= act->first_lsn;
    if (rotate) {
        void *q =
            journal_grow(j->segs, &j->capsegs, j->nsegs + 1, sizeof *j->segs);

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
    if (live &&
        journal_bits_reserve(&to->bits, &to->nwords, lsn - to->first_lsn))
        goto nomem;
    if (cb != NULL && jn_wq_reserve(j) != 0)
        goto nomem;
    jn_put_le32(hdr, (uint32_t)len);
    jn_put_le64(hdr + JN_FRAME_LSN, lsn);
    hdr[JN_FRAME_TYPE] = type;
    hdr[JN_FRAME_FLAGS] = (uint8_t)flags;
    crc = journal_crc32c(0, hdr + JN_FRAME_LSN, JN_FRAME - JN_FRAME_LSN);
    if (len > 0)
        crc = journal_crc32c(crc, payload, len);
    jn_put_le32(hdr + JN_FRAME_CRC, crc);

    pthread_mutex_lock(&j->mu);
    /* The writer waits only when nothing is pending: the first record of
     * a loop turn schedules its wake-up at the end of the turn, so that
     * the records appended meanwhile go in the same write (and, for
     * `always`, the same fdatasync). */
    wake = journal_work_empty(&j->pending);
    if (j->werr != 0)
        rc = EIO;
    else if (journal_work_add(&j->pending, hdr, payload, len, lsn, rotate) != 0)
        rc = ENOMEM;
    pthread_mutex_unlock(&j->mu);
    if (rc == 0 && wake)
        event_active(j->ev_wake, EV_TIMEOUT, 1);
    if (rc != 0) {
        /* EIO: the writer failed; the next drain takes it up. */
        free(fresh.bits);
        errno = rc;
        return 0;
    }

    if (rotate) {
        if (act->live == 0)
            journal_seg_drop_bits(act);
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
        journal_seg_mark(to, lsn);
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
        journal_collect(j);
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
        journal_seg_drop_bits(s);
    journal_collect(j);
}

void
journal_set_compact_hook(struct journal *j, journal_compact_cb cb, void *arg)
{
    j->compact_cb = cb;
    j->compact_arg = arg;
    j->compact_bound = 0;
    j->compact_nsegs = 0;
    journal_collect(j);
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
        .inline_writes = j->inline_writes,
    };
}

bool
journal_writable(const struct journal *j)
{
    return !j->failed;
}

void
journal_health(const struct journal *j, struct journal_health *out)
{
    *out = (struct journal_health){
        .writable = !j->failed,
        .error = j->failed ? j->fail_err : 0,
        .since = j->failed ? j->fail_since : 0,
        .failures = j->failures,
        .recoveries = j->recoveries,
    };
    if (j->failed)
        snprintf(out->message, sizeof out->message, "%s", j->fail_msg);
}

void
journal_set_state_hook(struct journal *j, journal_state_cb cb, void *arg)
{
    j->state_cb = cb;
    j->state_arg = arg;
}
