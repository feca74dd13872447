/*
 * lifecycle.h — lifecycle events of workers (DESIGN §7).
 *
 * Every transition produces a CloudEvent of type
 * com.virtufin.workmanager.lifecycle.<name> for the topic
 * workmanager.lifecycle, source urn:workmanager:<instance>, subject the
 * worker id.  Until the broker exists they are written to the log as one
 * `lifecycle: {json}` line each, which the integration tests read.
 */
#ifndef WM_MASTER_LIFECYCLE_H
#define WM_MASTER_LIFECYCLE_H

#include <jansson.h>

struct daemon;
struct worker;

/* Emits event `name` (created, started, stopped, suspended, resumed,
 * reloaded, rolledback, deleted, error, restarting) for w; extra (stolen,
 * may be NULL) adds members to its data. */
void lifecycle_emit(struct daemon *d, const struct worker *w, const char *name,
                    json_t *extra);

/* The error event of a host exit: error_type from last_exit, signal,
 * exit_code, syscall. */
void lifecycle_emit_exit(struct daemon *d, const struct worker *w);

#endif /* WM_MASTER_LIFECYCLE_H */
