/*
 * state_sizes.h — the size of each workmanager.state key in the store,
 * kept by the gateway (gateway.c) for the state quotas (quota.h), so that
 * admitting a put or a delete needs no store read (state_sizes.c says
 * why).  Keys are the store's keys (workmanager/state/<worker>/<name>).
 *
 * With several instances on one store (store = nats) each counts the
 * writes it made itself and what it found at start-up, as the state
 * usage of quota.h does.
 *
 * Threads: the loop thread only.
 */
#ifndef WM_MASTER_BROKER_STATE_SIZES_H
#define WM_MASTER_BROKER_STATE_SIZES_H

#include <stdbool.h>
#include <stddef.h>

/* Whether key is known, and its size in *len. */
bool state_sizes_get(const char *key, size_t *len);
/* key holds len bytes now (added or changed): 0, or -1 out of memory
 * (nothing changed). */
int state_sizes_put(const char *key, size_t len);
/* key is gone (a no-op for an unknown key). */
void state_sizes_remove(const char *key);
/* How many keys are known. */
size_t state_sizes_count(void);
/* Forgets every key (before counting them again; at close). */
void state_sizes_clear(void);

#endif /* WM_MASTER_BROKER_STATE_SIZES_H */
