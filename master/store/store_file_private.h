/*
 * store_file_private.h — what the three files of the `file` store backend
 * share; nothing outside master/store/store_file*.c includes it.
 *
 *   store_file.c          the backend's entry points (store_backend.h),
 *                         submission and completion on the loop thread,
 *                         open and close;
 *   store_file_records.c  the on-disk layout and record format, the key
 *                         map, reading records and the scan of records/ at
 *                         open (loop thread);
 *   store_file_writer.c   the writer thread: every write under state_dir.
 *
 * The types keep the backend's short private prefix (sf_, SF_); the
 * functions one file lends another are named store_file_*.  Which thread
 * may touch what is said at each field of struct store_file: the two
 * threads meet only in the submission queue and the completion list, each
 * under its mutex.
 */
#ifndef WM_MASTER_STORE_FILE_PRIVATE_H
#define WM_MASTER_STORE_FILE_PRIVATE_H

#include "master/store/store_backend.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* magic (4) + revision (8) + length (8) + SHA-256 (32) */
#define SF_HEADER 52

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

/* A key whose write failed (store_file_writer.c). */
struct sf_poison;

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

/* ---- store_file_records.c: layout, key map, reading (loop thread) ---- */

/* vasprintf() that returns the string, or NULL. */
char *store_file_printf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* Reads up to len bytes; fewer only at end of file.  -1 on error. */
ssize_t store_file_read_full(int fd, void *buf, size_t len);

/* The path of key's record file, and of blob hex's file; malloc'd, NULL
 * when out of memory. */
char *store_file_record_path(const struct store_file *sf, const char *key);
char *store_file_blob_path(const struct store_file *sf, const char *hex);

/* Whether an open() failure errno `err` means "no such file". */
bool store_file_absent(int err);

/* Fills h with the header of a record of `len` bytes of value at revision
 * rev.  0, or -1 when the SHA-256 fails (out of memory). */
int store_file_header_encode(uint8_t h[SF_HEADER], uint64_t rev,
                             const uint8_t *value, size_t len);

enum sf_hdr {
    SF_HDR_OK,
    SF_HDR_MISSING,
    SF_HDR_BAD, /* unreadable, short or foreign: the revision is unknown */
};

/* The revision in the header of record file `path`, without reading the
 * value. */
enum sf_hdr store_file_record_rev(const char *path, uint64_t *rev);

/*
 * Reads and checks the whole record of key at path.  STORE_OK with *value
 * (malloc'd), *len, *rev; STORE_NOT_FOUND; STORE_CORRUPT (with *rev when
 * the header was readable, else 0) or STORE_IO, with a message naming key
 * and path in err.
 */
enum store_status store_file_record_read(const char *key, const char *path,
                                         uint8_t **value, size_t *len,
                                         uint64_t *rev, char *err,
                                         size_t errlen);

/* The entry of key, or NULL with *pos (when pos is not NULL) where it
 * would go. */
struct sf_entry *store_file_entry_find(const struct store_file *sf,
                                       const char *key, size_t *pos);

/* A new entry for key at pos (from store_file_entry_find()), or NULL when
 * out of memory. */
struct sf_entry *store_file_entry_insert(struct store_file *sf, size_t pos,
                                         const char *key);

/* Removes and frees the entry at pos. */
void store_file_entry_remove(struct store_file *sf, size_t pos);

/* Frees every entry (at close). */
void store_file_entries_free(struct store_file *sf);

/*
 * Calls each(sf, dirfd, name, arg) for every entry of directory `dir` but
 * "." and "..", until one returns non-zero.  Returns 0, or -1 with the
 * message in err: the failing callback's, or "state_dir: opendir/readdir
 * DIR: why".
 */
int store_file_dir_each(struct store_file *sf, const char *dir,
                        int (*each)(struct store_file *sf, int dirfd,
                                    const char *name, void *arg, char *err,
                                    size_t errlen),
                        void *arg, char *err, size_t errlen);

/* Fills the key map from the files under records/ (at open), sorted. */
int store_file_records_scan(struct store_file *sf, char *err, size_t errlen);

/* ---- store_file_writer.c: the writer thread ---------------------------- */

/*
 * fsyncs directory dir.  0, or -1 with op's status STORE_IO and its
 * message saying which step failed (open, fsync, close).
 */
int store_file_dir_sync(struct sf_op *op, const char *dir);

/* Starts the writer thread, with every signal blocked (they belong to the
 * loop).  0, or -1 with the message in err. */
int store_file_writer_start(struct store_file *sf, char *err, size_t errlen);

/* Tells the writer to stop once the queue is empty and joins it (when it
 * was started). */
void store_file_writer_stop(struct store_file *sf);

/* Frees the writer's poisoned keys (at close, the writer stopped). */
void store_file_poison_clear(struct store_file *sf);

#endif /* WM_MASTER_STORE_FILE_PRIVATE_H */
