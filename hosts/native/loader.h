/*
 * loader.h — a native worker's library inside a process (DESIGN §4): opened
 * from a memfd through /proc/self/fd (no file on disk), called by a pool of
 * threads, its output verified, FreeResult paired with every non-NULL
 * output.  Shared by wm-host-native and the master's opt-in in-process path
 * (master/supervise/inproc.c), which is why it knows nothing of channels or of
 * the master: its owner runs one event loop thread and talks to the pool
 * through this interface.
 *
 * The owner submits jobs; pool threads call Process and queue the finished
 * jobs, and the worker's log lines and gateway calls, for the owner, whom
 * they wake through native_loader_fd() (an eventfd, readable once per
 * batch).  The owner takes them with native_loader_take(), turns each job
 * into its outcome with native_job_outcome() and frees it with
 * native_job_free() (FreeResult runs there), and answers each gateway call
 * with native_call_reply() — the worker's thread blocks until then.
 *
 * Only the owner's thread calls these functions, except where noted.
 */
#ifndef WM_HOSTS_NATIVE_LOADER_H
#define WM_HOSTS_NATIVE_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/cloudevent.h"
#include "ipc/frame.h"
#include "workmanager/worker_api.h"

/* The most pool threads one library gets (limits.concurrency). */
#define NATIVE_LOADER_MAX_THREADS 64

struct native_loader;

/* One call of Process: the input (held with the job, 8-aligned) and, once
 * the pool is done with it, the worker's answer. */
struct native_job {
    struct native_job *next;
    void *ctx;    /* the owner's; set to NULL to drop the job's outcome */
    uint64_t seq; /* the owner's */
    uint8_t *in;
    int32_t in_len;
    int32_t rc;
    uint8_t *out;
    int32_t out_len;
    virtufin_free_result_fn free_result; /* of the library that made out */
};

/* A log line (is_log) or a gateway call of the worker.  text is the line,
 * or the service; method and req[0..req_len) the call's. */
struct native_call {
    struct native_call *next;
    bool is_log;
    int32_t level; /* 0 trace … 4 error */
    char *text;
    char *method;
    uint8_t *req;
    int32_t req_len;
    /* private: the answer, under the loader's lock */
    struct native_loader *loader;
    bool done;
    int32_t status;
    uint8_t *resp;
    int32_t resp_len;
};

/* The identity a library sees in its environment (NUL-terminated; NULL is
 * empty). */
struct native_identity {
    const char *id;
    const char *group;
    const char *topic;
};

/* A loader with no library and no thread; NULL with errno. */
struct native_loader *native_loader_new(void);

/* Readable when finished jobs or worker calls wait for native_loader_take;
 * owned by the loader. */
int native_loader_fd(const struct native_loader *nl);

/*
 * Opens the library held by lib_fd (a memfd, or any file descriptor) as
 * /proc/self/fd/N and resolves entry and free_result.  The identity
 * variables (VIRTUFIN_WORKER_ID, _GROUP, _TOPIC) are set before; the values
 * they had before the loader's first open are restored when it is closed.
 * The loader takes lib_fd in every case.  On success the library replaces
 * the one in use, which is closed: the caller makes sure no job is in
 * flight then (a reload waits for them).  Returns 0, or -1 with a message
 * naming `label` (the library's name for the reader) in err, the library
 * in use unchanged.
 */
int native_loader_open(struct native_loader *nl, int lib_fd, const char *label,
                       const char *entry, const char *free_result,
                       const struct native_identity *id, char *err,
                       size_t errlen);

/* Grows the pool to n threads (1 … NATIVE_LOADER_MAX_THREADS); it never
 * shrinks.  Asynchronous signals are blocked in pool threads; a fault of
 * the worker (SIGSEGV, SIGABRT, ...) still reaches its own thread.
 * Returns 0, or -1 with errno. */
int native_loader_threads(struct native_loader *nl, unsigned n);

/* Whether a library is open. */
bool native_loader_ready(const struct native_loader *nl);

/* A job for in[0..len), copied.  NULL with errno. */
struct native_job *native_job_new(const uint8_t *in, size_t len);

/* Hands jobs (one, or a list linked by next, oldest first) to the pool at
 * once (the loader must be ready). */
void native_loader_submit(struct native_loader *nl, struct native_job *jobs);

/* Takes the finished jobs and the worker calls, each list oldest first,
 * and clears the wake-up.  Either pointer may be NULL to leave that list. */
void native_loader_take(struct native_loader *nl, struct native_job **jobs,
                        struct native_call **calls);

/* The outcome of finished job j: NULL for success, with *wr the worker's
 * response (has_result: its output event; valid until native_job_free);
 * or the error type ("worker_error") with a message naming the cause in
 * msg (*wr may then still carry the worker's error_message). */
const char *native_job_outcome(const struct native_job *j,
                               struct ipc_worker_response *wr, char *msg,
                               size_t msglen);

/* The same outcome as the body of a Result frame (ipc/frame.h), for the
 * host's channel and the in-process path alike: *r is zeroed, then holds
 * the output event (a view into *wr) and, on failure, the error type and
 * msg.  Returns what native_job_outcome() returns; *r and *wr are valid
 * until native_job_free(j), msg as long as the caller keeps it. */
const char *native_job_result(const struct native_job *j, struct ipc_result *r,
                              struct ipc_worker_response *wr, char *msg,
                              size_t msglen);

/* Frees j: FreeResult on its non-NULL output first, exactly once. */
void native_job_free(struct native_job *j);

/* Answers worker call c (status 200 with the response, or an error status
 * with an error message in resp) and lets its thread go on; a log line
 * only needs freeing, which this does.  resp is copied. */
void native_call_reply(struct native_call *c, int32_t status,
                       const uint8_t *resp, size_t len);

/* Jobs submitted and not yet taken back. */
unsigned native_loader_busy(const struct native_loader *nl);

/*
 * Closes the loader: idle threads end, the library is closed, the identity
 * variables are restored and every resource goes.  Jobs still queued are
 * dropped (their outputs freed); calls still running in Process cannot be
 * stopped: the loader then lives on, detached, until the last of them
 * returns, and the last pool thread frees it (the library stays mapped
 * until then).  Worker calls not yet answered are answered 503.
 */
void native_loader_close(struct native_loader *nl);

#endif /* WM_HOSTS_NATIVE_LOADER_H */
