/*
 * gateway.h — the gateway services workers call through GatewayCall frames
 * (DESIGN §6; the Python `workmanager` module and the native
 * `gateway_call` reach them).
 *
 *   workmanager.publish  publish {"topic", "event": <structured CloudEvent>}
 *                        within the worker's tenant → {"id"}; reserved
 *                        workmanager.* topics are refused (403)
 *   workmanager.state    get {"key"} → {"key", "value"} (404 when absent),
 *                        put {"key", "value": <JSON>} → {"key"},
 *                        delete {"key"} → {"key"} (404 when absent);
 *                        keys [A-Za-z0-9._-]{1,128}, values up to 1 MiB,
 *                        scoped to the worker (store keys
 *                        workmanager/state/<worker id>/<key>), removed
 *                        with it
 *
 * Requests and responses are JSON.  Statuses follow HTTP: 200, 400 (a bad
 * request, named), 403, 404 (no such key, service or method, named), 409
 * (a write under a stale group lock token), 500 (the store failed), 403
 * ("quota_exceeded: ..." : a publish over the tenant's backlog quota or a
 * put over its state quota, quota.h), 429 ("rate_limited: ..."), 503
 * (a publish with no room: "subscriber_full: ..." naming the full worker or
 * group, as admit.h refuses a client's, or the journal's budget).
 * Publishes and state writes of a grouped worker are writes under its
 * lock token (flow_note_write).
 */
#ifndef WM_MASTER_GATEWAY_H
#define WM_MASTER_GATEWAY_H

#include "ipc/frame.h"

struct daemon;
struct worker;
struct supervise_call;

/* The supervisor's gateway hook. */
void gateway_handle(struct daemon *d, struct worker *w,
                    const struct ipc_gateway_call *call,
                    struct supervise_call *c);

/* Deletes w's state keys (its delete), given back to its tenant's state
 * quotas. */
void gateway_forget(struct daemon *d, const struct worker *w);

/* Counts every tenant's state keys and their bytes from the store, anew
 * (quota_state_add()), and each key's size (state_sizes.h): once the
 * workers are recovered at start-up. */
void gateway_state_count(struct daemon *d);
/* Frees what gateway_state_count() keeps (at exit). */
void gateway_free(void);

#endif /* WM_MASTER_GATEWAY_H */
