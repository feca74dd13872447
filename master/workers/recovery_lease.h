/*
 * recovery_lease.h — the recovery lease (seeds/003's recovery leader, the
 * original's workmanager/recovery/leader): of several instances sharing a
 * store that recover at once, one does what is done once for all of them.
 *
 * Every instance restores every worker into its own registry (each runs
 * every worker).  The work done once is the broker's: with broker = nats,
 * deleting the consumers that no worker of the store names any more (a
 * worker deleted while every instance was down).  The embedded broker's
 * recovery is each instance's own (its journal is local): recovery.c runs
 * it whatever the lease says.
 *
 * The lease is the record RECOVERY_LEASE_KEY in the store: "<holder>
 * <expires unix ms>", written with compare-and-set (created when absent,
 * taken over when expired).  It is kept until it expires, RECOVERY_LEASE_MS
 * after it was taken, so that instances started together see one leader
 * however fast each recovers, and deleted when its holder stops cleanly;
 * a holder that dies leaves a record that expires.  With
 * store = file (one daemon per state directory) it is always this
 * instance's and no record is written.
 */
#ifndef WM_MASTER_RECOVERY_LEASE_H
#define WM_MASTER_RECOVERY_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct daemon;

#define RECOVERY_LEASE_KEY "workmanager/recovery/leader"
#define RECOVERY_LEASE_MS 30000

/* leader: this instance holds the lease (holder is its own holder
 * string), else holder names the instance that does, or says why the
 * lease could not be read ("" never). */
typedef void (*recovery_lease_cb)(bool leader, const char *holder, void *arg);

/* Takes the lease if it is free or expired; cb runs once, on a later loop
 * turn or from a store callback, never inside this call. */
void recovery_lease_take(struct daemon *d, recovery_lease_cb cb, void *arg);

/* Gives the lease back (deletes the record take wrote, if this instance
 * holds it): at shutdown. */
void recovery_lease_release(struct daemon *d);

/* The pure rule, for the tests: whether a record value (len bytes) leaves
 * the lease to whoever asks at now_ms; *holder gets the record's holder
 * (empty when it is unreadable: then it is free). */
bool recovery_lease_free(const uint8_t *value, size_t len, int64_t now_ms,
                         char *holder, size_t size);

#endif /* WM_MASTER_RECOVERY_LEASE_H */
