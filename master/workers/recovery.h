/*
 * recovery.h — restoring persisted workers (DESIGN §7).
 *
 * Recovery reads every worker record, checks each current code blob
 * against its SHA-256 and puts the workers back in the registry in their
 * desired status (hosts start lazily), a slice per loop turn so that the
 * API keeps answering (503 `recovering` for mutations, /health Degraded).
 * A worker that cannot be restored is registered anyway, state failed with
 * the reason and a lifecycle error event; only a store that cannot be read
 * at all fails recovery (/health Unhealthy).
 */
#ifndef WM_MASTER_RECOVERY_H
#define WM_MASTER_RECOVERY_H

#include <stddef.h>
#include <stdint.h>

struct daemon;
struct worker;

/* Starts recovery; done (may be NULL) runs on the loop when it ends.
 * Workers already registered are left as they are, so it can run again
 * (POST /v1/recover).  Returns -1 if one is already running. */
int recovery_start(struct daemon *d, void (*done)(struct daemon *d));

/* Restores one worker from its record (value, len; NULL with message for
 * one the store could not read) as recovery does: its code read and
 * checked, its engine and isolation allowed here, else restored failed
 * with the reason; in the registry with its subscription.  The worker, or
 * NULL when its id or name is in the registry already (nothing done).
 * Also for a worker another instance created (remote_workers.c). */
struct worker *recovery_restore_one(struct daemon *d, const char *id,
                                    const uint8_t *value, size_t len,
                                    uint64_t revision, const char *message);

#endif /* WM_MASTER_RECOVERY_H */
