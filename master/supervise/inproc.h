/*
 * inproc.h — the opt-in in-process path of native workers (DESIGN §4): the
 * library a sandboxed wm-host-native validated and handed back as a sealed
 * memfd, opened in the master with the hosts' own loader
 * (hosts/native/loader.h) and called on its pool of threads, never on the
 * event loop.  Private to the supervisor (inproc_path.c), which decides when
 * one opens and closes; this file only bridges the pool to the loop.
 *
 * Caveats, by construction: a crash of the worker is a crash of the
 * master; a call that overruns its deadline cannot be stopped (the
 * supervisor answers it `timeout` and drops its result when it comes); the
 * identity variables are process-wide (set at open, restored at close).
 */
#ifndef WM_MASTER_INPROC_H
#define WM_MASTER_INPROC_H

#include <stddef.h>
#include <stdint.h>

#include "hosts/native/loader.h"
#include "ipc/frame.h"

struct event_base;
struct inproc;

struct inproc_hooks {
    /* An event's outcome, as supervise_done_cb has it: type NULL and r the
     * outputs, or type and msg (r may carry the worker's error).  ctx as
     * given to inproc_submit(); r is valid during the call only. */
    void (*result)(void *ctx, const struct ipc_result *r, const char *type,
                   const char *msg, void *arg);
    /* A log line of the worker (level 0 trace … 4 error). */
    void (*log)(int32_t level, const char *msg, void *arg);
    /* A gateway call of the worker: answer it exactly once with
     * native_call_reply(), now or later; its thread waits until then. */
    void (*call)(struct native_call *c, void *arg);
};

/*
 * Opens the library in lib_fd (taken in every case) with `threads` pool
 * threads.  label names it in messages; entry and free_result are the
 * manifest's exports; id the identity variables.  Returns the instance, or
 * NULL with a message in err.
 */
struct inproc *inproc_open(struct event_base *base, int lib_fd,
                           const char *label, const char *entry,
                           const char *free_result,
                           const struct native_identity *id, unsigned threads,
                           const struct inproc_hooks *hooks, void *arg,
                           char *err, size_t errlen);

/* Queues one event (an ABI CloudEvent buffer, copied) for the pool; its
 * outcome comes to hooks->result with ctx.  Returns the job (for
 * inproc_abandon), or NULL with errno.  inproc_flush() hands what is
 * queued to the pool at once. */
struct native_job *inproc_submit(struct inproc *ip, const uint8_t *event,
                                 size_t len, void *ctx);
void inproc_flush(struct inproc *ip);

/* Its outcome is no longer wanted (a deadline passed, the worker went):
 * the call finishes in its thread and its output is freed unseen. */
void inproc_abandon(struct native_job *j);

/* Jobs handed to the pool whose outcome has not come back (abandoned ones
 * included). */
unsigned inproc_busy(const struct inproc *ip);

/* Closes the library (native_loader_close: calls still running keep it
 * until they return).  Safe from within a hook. */
void inproc_close(struct inproc *ip);

#endif /* WM_MASTER_INPROC_H */
