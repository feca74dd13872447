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

struct daemon;

/* Starts recovery; done (may be NULL) runs on the loop when it ends.
 * Workers already registered are left as they are, so it can run again
 * (POST /v1/recover).  Returns -1 if one is already running. */
int recovery_start(struct daemon *d, void (*done)(struct daemon *d));

#endif /* WM_MASTER_RECOVERY_H */
