/*
 * stamp.h — per-worker config stamped on incoming events (DESIGN §6).
 *
 * Each config entry becomes an extension of the event the worker receives,
 * unless the event already has an extension of that name (the event wins).
 * Names are checked when the worker is created (never correlationid,
 * replytopic, traceparent or a core attribute).
 */
#ifndef WM_MASTER_STAMP_H
#define WM_MASTER_STAMP_H

#include <stddef.h>

#include "ipc/cloudevent.h"
#include "ipc/fb.h"
#include "master/workers/worker.h"

/* Stamps the config entries that event ce (decoded from a verified or
 * daemon-built buffer) lacks: encodes the stamped copy into `out` (emptied
 * first) and returns 1; returns 0, out untouched, when nothing is missing
 * (the event goes as it is, uncopied); -1 with a message when the result
 * would break the CloudEvent rules (too many extensions) or memory runs
 * out. */
int stamp_config(const struct ipc_cloudevent *ce,
                 const struct worker_pair *config, size_t n,
                 struct ipc_fb_builder *out, char *err, size_t errlen);

/* How stamp_extensions() treats a name the event has already. */
enum stamp_mode {
    STAMP_IF_MISSING, /* the event's value wins */
    STAMP_REPLACE,    /* the given value wins */
};

/* Encodes into `out` (emptied first) a copy of the decoded event ce with
 * the n extensions `set` added (in their order, after ce's own) or, for
 * names ce has, replaced or kept per mode; a pair whose value ptr is NULL
 * removes that extension.  The copy is a new event, whose CloudEvent rules
 * are checked here (ipc_cloudevent_check(): the count of extensions and
 * the names added can break them); ce's buffer is not verified again.
 * Returns 0, or -1 with a message (the result would break the CloudEvent
 * rules, memory). */
int stamp_extensions(const struct ipc_cloudevent *ce,
                     const struct ipc_pair *set, size_t n, enum stamp_mode mode,
                     struct ipc_fb_builder *out, char *err, size_t errlen);

#endif /* WM_MASTER_STAMP_H */
