/*
 * state_sizes.c — the size of every workmanager.state key the store holds
 * (state_sizes.h), so that the state quotas know what a put replaces or a
 * delete gives back without reading the store.
 *
 * Why: a put's admission needs the key's old size (is it new? how many
 * bytes does it add?).  Reading it from the store is a local read with
 * the file store but a synchronous round trip to NATS on the master's loop
 * with store = nats, for every state write.  The sizes are known anyway:
 * counted from the store at start-up (gateway_state_count()), then changed
 * only by this daemon's writes.
 *
 * A chained hash table of the keys (FNV-1a), doubled when it holds more
 * keys than buckets.  A node is one allocation: its key follows it.
 *
 * Invariants: one node per key; count is the number of nodes; the loop
 * thread only.
 */
#include "config.h"

#include "master/broker/state_sizes.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct node {
    struct node *next;
    uint64_t hash;
    size_t len;
    char key[];
};

static struct {
    struct node **b;
    size_t nb, count;
} tab;

static uint64_t
fnv1a(const char *s)
{
    uint64_t h = 14695981039346656037ull;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The link that points at key's node, or at the NULL ending its chain. */
static struct node **
slot(const char *key, uint64_t h)
{
    struct node **p = &tab.b[h & (tab.nb - 1)];

    while (*p && ((*p)->hash != h || strcmp((*p)->key, key) != 0))
        p = &(*p)->next;
    return p;
}

static int
grow(void)
{
    size_t nb = tab.nb ? tab.nb * 2 : 64;
    struct node **b = calloc(nb, sizeof *b);

    if (b == NULL)
        return -1;
    for (size_t i = 0; i < tab.nb; i++)
        for (struct node *n = tab.b[i], *next; n; n = next) {
            next = n->next;
            n->next = b[n->hash & (nb - 1)];
            b[n->hash & (nb - 1)] = n;
        }
    free(tab.b);
    tab.b = b;
    tab.nb = nb;
    return 0;
}

bool
state_sizes_get(const char *key, size_t *len)
{
    if (tab.nb == 0)
        return false;
    struct node *n = *slot(key, fnv1a(key));
    if (n == NULL)
        return false;
    *len = n->len;
    return true;
}

int
state_sizes_put(const char *key, size_t len)
{
    uint64_t h = fnv1a(key);
    struct node **p;

    if (tab.nb == 0 && grow() != 0)
        return -1;
    p = slot(key, h);
    if (*p) {
        (*p)->len = len;
        return 0;
    }
    if (tab.count >= tab.nb) {
        if (grow() != 0)
            return -1;
        p = slot(key, h);
    }
    size_t klen = strlen(key) + 1;
    struct node *n = malloc(sizeof *n + klen);
    if (n == NULL)
        return -1;
    n->next = NULL;
    n->hash = h;
    n->len = len;
    memcpy(n->key, key, klen);
    *p = n;
    tab.count++;
    return 0;
}

void
state_sizes_remove(const char *key)
{
    if (tab.nb == 0)
        return;
    struct node **p = slot(key, fnv1a(key)), *n = *p;
    if (n == NULL)
        return;
    *p = n->next;
    free(n);
    tab.count--;
}

size_t
state_sizes_count(void)
{
    return tab.count;
}

void
state_sizes_clear(void)
{
    for (size_t i = 0; i < tab.nb; i++)
        for (struct node *n = tab.b[i], *next; n; n = next) {
            next = n->next;
            free(n);
        }
    free(tab.b);
    memset(&tab, 0, sizeof tab);
}
