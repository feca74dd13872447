/*
 * instances.h — the daemons that share one store (issue 23; DESIGN §9;
 * seeds/003: a node's states), as this daemon sees them.
 *
 * Each daemon start is an instance with an id of its own (a UUID made at
 * start-up, daemon.h's instance_id) and a name (the `instance` key: the
 * host name by default).  With a shared store (store = nats) every
 * instance writes its heartbeat, workmanager/instances/<id>, every
 * instance_heartbeat_ms, and reads the others' as often.  The state of
 * another instance is judged by this daemon's own clock, from when its
 * heartbeat last changed (never from the writer's clock, which may be
 * skewed):
 *
 *   connected     a heartbeat within instance_disconnected_ms
 *   disconnected  none since then, but for less than instance_dead_ms
 *   dead          none for instance_dead_ms: its key is removed
 *                 (compare-and-set on the revision seen, so an instance
 *                 that came back in the meantime keeps it)
 *
 * and an instance that comes back (a new heartbeat) is connected again.
 * Each change of another instance's state is an infra event (type
 * com.virtufin.workmanager.infra.instance.<state>, topic
 * workmanager.infra.instance of tenant default, subject its id).  This
 * daemon itself is connected while its heartbeat is stored and
 * disconnected while it cannot reach the store; it never judges the others
 * while it cannot read (they are not less alive for it).
 *
 * With the file store (one instance) nothing is written: the list holds
 * this daemon alone.
 *
 * Threads: the loop thread only.
 */
#ifndef WM_MASTER_INSTANCES_H
#define WM_MASTER_INSTANCES_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct daemon;

enum instance_state {
    INSTANCE_CONNECTED,
    INSTANCE_DISCONNECTED,
    INSTANCE_DEAD,
};

const char *instance_state_name(enum instance_state s);

/* The state of an instance whose heartbeat last changed age_ms ago. */
enum instance_state
instance_state_of(long long age_ms, unsigned disconnected_ms, unsigned dead_ms);

/* Starts the heartbeats (with a shared store).  0, or -1 with a message. */
int instances_start(struct daemon *d, char *err, size_t errlen);
/* Stops them and removes this instance's heartbeat (a clean stop is not a
 * death). */
void instances_stop(struct daemon *d);

/* A key of the store changed (its watch, remote_workers.c; value NULL:
 * deleted): an instance's heartbeat is taken, anything else ignored. */
void instances_changed(struct daemon *d, const char *key, const uint8_t *value,
                       size_t len, uint64_t revision);

/* The instances as a JSON array (new reference): id, name, host, pid,
 * started, listen, version, state, last_seen (this daemon's clock, RFC
 * 3339), self. */
json_t *instances_json(struct daemon *d);

#endif /* WM_MASTER_INSTANCES_H */
