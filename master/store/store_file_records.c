/*
 * store_file_records.c — where the `file` store backend keeps things under
 * state_dir, the record format, and what the loop thread knows of the
 * records: the key map, reading a record, and the scan of records/ at open
 * (store_file_private.h; the backend is described in store_file.c).
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
 * never fatal.  Blobs are raw bytes: their name is their checksum.  The
 * writer thread encodes headers with store_file_header_encode(), so the
 * format is written down here only.
 *
 * The key map is a sorted array of every key with its revision as of the
 * last submitted write (store_file.c says why); entries[] is sorted by
 * strcmp, which the scan at open establishes with one qsort.
 */
#include "config.h"

#include "master/store/store_file_private.h"

#include "lib/errbuf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SF_MAGIC "WMR1"
#define SF_MAGIC_LEN 4
#define SF_OFF_REV 4
#define SF_OFF_LEN 12
#define SF_OFF_SHA 20
/* Longest record file name before it is chunked: 240 + '+' stays under
 * NAME_MAX (255) on every Linux file system. */
#define SF_NAME_CHUNK 240
/* A 512-byte key needs two chunk directories; one more level is slack. */
#define SF_MAX_DEPTH 3

/* ---- small helpers ---------------------------------------------------- */

char *
store_file_printf(const char *fmt, ...)
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

ssize_t
store_file_read_full(int fd, void *buf, size_t len)
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

/* The path of key's record file: records/ + the key with '/' → '%', cut
 * into "<chunk>+/" directories when longer than a file name may be. */
char *
store_file_record_path(const struct store_file *sf, const char *key)
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

char *
store_file_blob_path(const struct store_file *sf, const char *hex)
{
    return store_file_printf("%s/%.2s/%s", sf->blobs, hex, hex);
}

/* ---- the key map (loop thread) ----------------------------------------- */

/* Binary search. */
struct sf_entry *
store_file_entry_find(const struct store_file *sf, const char *key, size_t *pos)
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

/* A sorted array: lookups are O(log n) and inserting moves pointers, which is
 * cheap at the scale of a daemon's workers and keeps list-in-order trivial. */
struct sf_entry *
store_file_entry_insert(struct store_file *sf, size_t pos, const char *key)
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

void
store_file_entry_remove(struct store_file *sf, size_t pos)
{
    struct sf_entry *e = sf->entries[pos];

    memmove(&sf->entries[pos], &sf->entries[pos + 1],
            (sf->nentries - pos - 1) * sizeof *sf->entries);
    sf->nentries--;
    free(e->key);
    free(e);
}

void
store_file_entries_free(struct store_file *sf)
{
    for (size_t i = 0; i < sf->nentries; i++) {
        free(sf->entries[i]->key);
        free(sf->entries[i]);
    }
    free(sf->entries);
    sf->entries = NULL;
    sf->nentries = sf->capentries = 0;
}

/* ---- reading records (loop thread) ------------------------------------- */

/* ENOTDIR too, since a path component that is not a directory (a long
 * key's chunk) leaves no room for the file. */
bool
store_file_absent(int err)
{
    return err == ENOENT || err == ENOTDIR;
}

int
store_file_header_encode(uint8_t h[SF_HEADER], uint64_t rev,
                         const uint8_t *value, size_t len)
{
    memcpy(h, SF_MAGIC, SF_MAGIC_LEN);
    sf_put_le64(h + SF_OFF_REV, rev);
    sf_put_le64(h + SF_OFF_LEN, len);
    return store_sha256(value, len, h + SF_OFF_SHA);
}

enum sf_hdr
store_file_record_rev(const char *path, uint64_t *rev)
{
    uint8_t h[SF_HEADER];
    enum sf_hdr r = SF_HDR_BAD;
    ssize_t n;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return store_file_absent(errno) ? SF_HDR_MISSING : SF_HDR_BAD;
    n = store_file_read_full(fd, h, sizeof h);
    if (n == (ssize_t)sizeof h && memcmp(h, SF_MAGIC, SF_MAGIC_LEN) == 0) {
        *rev = sf_get_le64(h + SF_OFF_REV);
        r = SF_HDR_OK;
    }
    (void)close(fd); /* read-only: nothing to lose */
    return r;
}

enum store_status
store_file_record_read(const char *key, const char *path, uint8_t **value,
                       size_t *len, uint64_t *rev, char *err, size_t errlen)
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
        if (store_file_absent(errno))
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
    n = store_file_read_full(fd, h, sizeof h);
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
    n = store_file_read_full(fd, buf, (size_t)hlen);
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

/* ---- the scan of records/ at open ------------------------------------- */

int
store_file_dir_each(struct store_file *sf, const char *dir,
                    int (*each)(struct store_file *sf, int dirfd,
                                const char *name, void *arg, char *err,
                                size_t errlen),
                    void *arg, char *err, size_t errlen)
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
        errno = 0;
        de = readdir(d);
        if (de == NULL)
            break;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (each(sf, dirfd(d), de->d_name, arg, err, errlen) != 0)
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
    canon = store_file_record_path(sf, key);
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
    h = store_file_record_rev(path, &rev);
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

/* Where sf_scan_entry() is: the directory, the key's text so far (chunk
 * directories joined), and how deep in chunk directories. */
struct sf_scan_at {
    const char *dir;
    const char *raw;
    int depth;
};

static int sf_scan(struct store_file *sf, const char *dir, const char *raw,
                   int depth, char *err, size_t errlen);

/* One entry of a directory under records/: a record's file, a chunk
 * directory, or something not ours (left alone). */
static int
sf_scan_entry(struct store_file *sf, int dirfd, const char *name, void *arg,
              char *err, size_t errlen)
{
    const struct sf_scan_at *at = arg;
    size_t nlen = strlen(name);
    struct stat sb;
    char *path, *sub;
    int r = 0;

    (void)dirfd;
    path = store_file_printf("%s/%s", at->dir, name);
    if (path == NULL)
        return errbuf_set(err, errlen, "state_dir: scanning %s: out of memory",
                          at->dir);
    if (lstat(path, &sb) != 0) {
        if (errno != ENOENT)
            r = errbuf_set(err, errlen, "state_dir: lstat %s: %s", path,
                           strerror(errno));
        free(path);
        return r;
    }
    if (S_ISDIR(sb.st_mode) && nlen > 1 && name[nlen - 1] == '+' &&
        at->depth < SF_MAX_DEPTH) {
        sub = store_file_printf("%s%.*s", at->raw, (int)(nlen - 1), name);
        if (sub == NULL) {
            errbuf_set(err, errlen, "state_dir: scanning %s: out of memory",
                       at->dir);
            r = -1;
        } else {
            r = sf_scan(sf, path, sub, at->depth + 1, err, errlen);
            free(sub);
        }
    } else if (S_ISREG(sb.st_mode)) {
        sub = store_file_printf("%s%s", at->raw, name);
        if (sub == NULL) {
            errbuf_set(err, errlen, "state_dir: scanning %s: out of memory",
                       at->dir);
            r = -1;
        } else {
            r = sf_scan_file(sf, sub, path, err, errlen);
            free(sub);
        }
    }
    free(path);
    return r;
}

static int
sf_scan(struct store_file *sf, const char *dir, const char *raw, int depth,
        char *err, size_t errlen)
{
    struct sf_scan_at at = { .dir = dir, .raw = raw, .depth = depth };

    return store_file_dir_each(sf, dir, sf_scan_entry, &at, err, errlen);
}

static int
sf_entry_cmp(const void *a, const void *b)
{
    const struct sf_entry *const *x = a, *const *y = b;

    return strcmp((*x)->key, (*y)->key);
}

int
store_file_records_scan(struct store_file *sf, char *err, size_t errlen)
{
    if (sf_scan(sf, sf->records, "", 0, err, errlen) != 0)
        return -1;
    if (sf->nentries > 1)
        qsort(sf->entries, sf->nentries, sizeof *sf->entries, sf_entry_cmp);
    return 0;
}
