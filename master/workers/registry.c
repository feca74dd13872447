/*
 * registry.c — workers by id and by name: two open-addressing hash tables
 * (linear probing, tombstones, FNV-1a) over pointers into the workers, and
 * an array in creation order for listing.
 *
 * Invariants: every worker in `order` is in both tables exactly once; the
 * tables are at most half full (tombstones included), so probes stay short
 * and always meet an empty slot.
 */
#include "config.h"

#include "master/workers/registry.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A slot that held a worker: probing continues past it. */
static struct worker tombstone_mark;
#define TOMBSTONE (&tombstone_mark)

struct table {
    struct worker **slots;
    size_t cap;  /* a power of two */
    size_t used; /* workers + tombstones */
};

struct registry {
    struct table by_id;
    struct table by_name;
    struct worker **order;
    size_t count;
    size_t cap;
};

static uint64_t
hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s) {
        h ^= (unsigned char)*s++;
        h *= 1099511628211ull;
    }
    return h;
}

static const char *
id_of(const struct worker *w)
{
    return w->id;
}

static const char *
name_of(const struct worker *w)
{
    return w->name;
}

typedef const char *(*key_fn)(const struct worker *);

static struct worker **
probe(const struct table *t, const char *key, key_fn k, bool for_insert)
{
    size_t i = hash(key) & (t->cap - 1);
    struct worker **grave = NULL;

    for (;;) {
        struct worker **s = &t->slots[i];
        if (*s == NULL)
            return for_insert && grave ? grave : s;
        if (*s == TOMBSTONE) {
            if (grave == NULL)
                grave = s;
        } else if (strcmp(k(*s), key) == 0) {
            return s;
        }
        i = (i + 1) & (t->cap - 1);
    }
}

static int
grow(struct table *t, key_fn k)
{
    if (t->slots && (t->used + 1) * 2 <= t->cap)
        return 0;
    size_t cap = t->cap ? t->cap * 2 : 64;
    struct worker **old = t->slots;
    size_t oldcap = t->cap;

    t->slots = calloc(cap, sizeof *t->slots);
    if (t->slots == NULL) {
        t->slots = old;
        return -1;
    }
    t->cap = cap;
    t->used = 0;
    for (size_t i = 0; i < oldcap; i++) {
        if (old[i] && old[i] != TOMBSTONE) {
            *probe(t, k(old[i]), k, true) = old[i];
            t->used++;
        }
    }
    free(old);
    return 0;
}

struct registry *
registry_new(void)
{
    return calloc(1, sizeof(struct registry));
}

void
registry_free(struct registry *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->count; i++)
        worker_free(r->order[i]);
    free(r->order);
    free(r->by_id.slots);
    free(r->by_name.slots);
    free(r);
}

int
registry_add(struct registry *r, struct worker *w)
{
    if (registry_lookup(r, w->id) || registry_lookup(r, w->name))
        return -1;
    if (grow(&r->by_id, id_of) || grow(&r->by_name, name_of))
        return -1;
    if (r->count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        struct worker **o = realloc(r->order, cap * sizeof *o);
        if (o == NULL)
            return -1;
        r->order = o;
        r->cap = cap;
    }
    struct worker **s = probe(&r->by_id, w->id, id_of, true);
    if (*s == NULL)
        r->by_id.used++;
    *s = w;
    s = probe(&r->by_name, w->name, name_of, true);
    if (*s == NULL)
        r->by_name.used++;
    *s = w;
    r->order[r->count++] = w;
    return 0;
}

void
registry_remove(struct registry *r, struct worker *w)
{
    struct worker **s = probe(&r->by_id, w->id, id_of, false);
    if (*s == w)
        *s = TOMBSTONE;
    s = probe(&r->by_name, w->name, name_of, false);
    if (*s == w)
        *s = TOMBSTONE;
    for (size_t i = 0; i < r->count; i++) {
        if (r->order[i] == w) {
            memmove(&r->order[i], &r->order[i + 1],
                    (r->count - i - 1) * sizeof *r->order);
            r->count--;
            break;
        }
    }
}

static struct worker *
find(const struct table *t, const char *key, key_fn k)
{
    if (t->cap == 0)
        return NULL;
    struct worker *w = *probe(t, key, k, false);
    return w == TOMBSTONE ? NULL : w;
}

struct worker *
registry_lookup(const struct registry *r, const char *key)
{
    struct worker *w = find(&r->by_id, key, id_of);
    return w ? w : find(&r->by_name, key, name_of);
}

struct worker *
registry_lookup_name(const struct registry *r, const char *name)
{
    return find(&r->by_name, name, name_of);
}

size_t
registry_count(const struct registry *r)
{
    return r->count;
}

struct worker *
registry_at(const struct registry *r, size_t i)
{
    return r->order[i];
}
