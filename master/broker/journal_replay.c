/*
 * journal_replay.c — reading the write-ahead journal's segments back: the
 * scan and repair at open (journal_load()) and journal_replay() (journal.c
 * describes the journal and its files; journal_private.h what its files
 * share).
 *
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
 * file.
 * journal_replay() reads the segments again with the same checks (so it
 * sees exactly the records open counted), up to where open left each.
 */
#include "config.h"

#include "master/broker/journal.h"
#include "master/broker/journal_private.h"

#include "lib/errbuf.h"
#include "master/core/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* Reads at open and replay go through a window of this size (larger only
 * for a larger record). */
#define JN_READ_CHUNK (1u << 20)

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
    if (journal_crc32c(0, p + JN_FRAME_LSN, JN_FRAME - JN_FRAME_LSN + len) !=
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
    if (journal_bits_reserve(&s->bits, &s->nwords, rec->lsn - s->first_lsn) !=
        0)
        return -1;
    journal_seg_mark(s, rec->lsn);
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

    journal_segment_name(name, first_lsn);
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
        journal_crc32c(0, h, JN_HDR_CRC) != jn_get_le32(h + JN_HDR_CRC)) {
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

        if (!journal_segment_name_parse(de->d_name, &lsn))
            continue;
        v = journal_grow(j->segs, &j->capsegs, j->nsegs + 1, sizeof *j->segs);
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

    journal_segment_name(name, s->first_lsn);
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
    if (journal_dir_sync(j) != 0)
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

int
journal_load(struct journal *j, char *err, size_t errlen)
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

        journal_segment_name(name, s->first_lsn);
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
            journal_seg_drop_bits(s);
    }
    return 0;
}

/* ---- the replay ------------------------------------------------------ */

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
        journal_segment_name(name, sc.first_lsn);
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
    journal_collect(j);
    return rc;
}
