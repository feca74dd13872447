/*
 * storage_error.c — the one answer to a write the storage could not make
 * (the journal of the embedded broker, the store): publishes, creates and
 * updates answer it alike.
 *
 * A full disk (ENOSPC, EDQUOT) is 507 insufficient_storage (RFC 4918):
 * retrying does not help until an operator frees space.  Any other write
 * error (EIO...) is 503 storage_unavailable with Retry-After.  The
 * message names what failed (the file and the error, from the caller) and
 * what the operator does; the daemon needs no restart either way.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "master/api/api.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"

void
api_error_storage(struct api_req *rq, int err, json_t *extra, const char *fmt,
                  ...)
{
    bool full = err == ENOSPC || err == EDQUOT;
    char what[768];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!full)
        api_reply_header(rq, "Retry-After", "1");
    api_error_extra(
        rq, full ? 507 : 503,
        full ? "insufficient_storage" : "storage_unavailable", extra,
        "%s; %s under state_dir %s, the daemon goes on by itself "
        "once it can write again",
        what, full ? "free space (or raise the quota)" : "check the disk",
        rq->d->conf->state_dir);
}
