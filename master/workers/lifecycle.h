/*
 * lifecycle.h — lifecycle events of workers (DESIGN §7).
 *
 * Every transition produces a CloudEvent of type
 * com.virtufin.workmanager.lifecycle.<name> for the topic
 * workmanager.lifecycle of the worker's tenant, source
 * urn:workmanager:<instance>, subject the worker id, published through the
 * broker (emit_publish(), master/broker/emit.h) and written to the log as
 * one `lifecycle: {json}` line each.
 *
 * An error caused by an event carries that event's wmhops + 1, so that a
 * worker subscribed to workmanager.lifecycle whose processing fails cannot
 * feed itself error events forever (the loop guard stops it).
 */
#ifndef WM_MASTER_LIFECYCLE_H
#define WM_MASTER_LIFECYCLE_H

#include <stdint.h>

#include <jansson.h>

struct daemon;
struct worker;

/* Emits event `name` (created, started, stopped, suspended, resumed,
 * reloaded, rolledback, deleted, error, restarting) for w; extra (stolen,
 * may be NULL) adds members to its data. */
void lifecycle_emit(struct daemon *d, const struct worker *w, const char *name,
                    json_t *extra);
/* The same with a wmhops extension (0: none). */
void lifecycle_emit_hops(struct daemon *d, const struct worker *w,
                         const char *name, json_t *extra, uint32_t hops);

/* An infra event on workmanager.infra.worker of tenant: type
 * com.virtufin.workmanager.infra.<what> (worker.heartbeat,
 * grouplock.acquired, grouplock.released, grouplock.stolen), data stolen. */
void lifecycle_emit_infra(struct daemon *d, const char *tenant,
                          const char *what, const char *subject, json_t *data);
/* The same on another workmanager.infra.* topic (the instances' events,
 * instances.h: workmanager.infra.instance). */
void lifecycle_emit_infra_on(struct daemon *d, const char *tenant,
                             const char *topic, const char *what,
                             const char *subject, json_t *data);

/* The error event of a host exit: error_type from last_exit, signal,
 * exit_code, syscall. */
void lifecycle_emit_exit(struct daemon *d, const struct worker *w);

#endif /* WM_MASTER_LIFECYCLE_H */
