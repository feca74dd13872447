/*
 * registry.h — the workers the master knows, by id and by name.
 *
 * The registry owns its workers.  Lookups accept an id or a name (the API's
 * `{id}` is either); ids are UUIDs and names cannot be UUIDs, so the two
 * never collide.  Iteration is in creation order.
 */
#ifndef WM_MASTER_REGISTRY_H
#define WM_MASTER_REGISTRY_H

#include <stddef.h>

#include "master/workers/worker.h"

struct registry;

struct registry *registry_new(void);
/* Frees the registry and every worker in it. */
void registry_free(struct registry *r);

/* Adds w (taking ownership).  -1 if its id or name is already present. */
int registry_add(struct registry *r, struct worker *w);
/* Removes w without freeing it. */
void registry_remove(struct registry *r, struct worker *w);
/* A worker by id or name, or NULL. */
struct worker *registry_lookup(const struct registry *r, const char *key);
/* The worker holding `name`, or NULL. */
struct worker *registry_lookup_name(const struct registry *r, const char *name);
size_t registry_count(const struct registry *r);
/* The i-th worker in creation order (i < count). */
struct worker *registry_at(const struct registry *r, size_t i);

#endif /* WM_MASTER_REGISTRY_H */
