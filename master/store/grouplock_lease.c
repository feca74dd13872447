/*
 * grouplock_lease.c — the group lock as a lease (grouplock.h, DESIGN §6).
 *
 * One store acquisition serves a run of events: it writes the record with
 * a block of tokens (record.token = the block's high-water mark, cur + 1
 * handed out first), and while the lease lasts each next holding of the
 * group takes the next token of the block locally, with no store access.
 * Why: the store's compare-and-set write is fsynced, and one (or three)
 * per event capped a group at a few hundred events/s.
 *
 * The lease is renewed in the store (next block, acquired_ms = now) when
 * its block is used up or half of max_age_ms went by since its last
 * renewal, and only when a holding starts: a holder that stalls lets its
 * record grow stale, so the stale-lock rule (grouplock_decide) still lets
 * another master take a lock nobody wrote under.  A lease that was
 * written under (last_write_token == token) stays so across renewals: the
 * steal stays aborted while it lasts, which is also why a later write
 * under the same lease needs no store access.  The lease ends, with one
 * store write, once nothing has held or waited for lease_idle_ms.
 *
 * Invariants:
 *   - a token is handed out only once the put that made its block's
 *     high-water mark durable has completed (acquire_done), so a token
 *     never repeats across a crash: the next run starts above hwm;
 *   - g->token <= g->hwm while g->leased, and tokens only grow;
 *   - g->idle is pending only while the lease is idle (nothing held, no
 *     waiter).
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "lib/errbuf.h"
#include "master/store/grouplock_private.h"

uint64_t
grouplock_token_block(const struct grouplocks *gl)
{
    return gl->policy.token_block > 0 ? gl->policy.token_block : 1;
}

bool
grouplock_lease_fresh(const struct gl_group *g)
{
    int64_t now = grouplock_now(g->gl);

    return g->leased &&
           !(now > g->renewed_ms &&
             (uint64_t)(now - g->renewed_ms) >= g->gl->policy.max_age_ms / 2);
}

/* Gives the head the lease's next token without the store, when the
 * block has one left and the lease is fresh (so no other master can find
 * it stale while it is used).  true when handed over (delivered on the
 * next turn). */
bool
grouplock_lease_hand_over(struct gl_group *g)
{
    struct grouplocks *gl = g->gl;
    struct gl_req *r;

    if (g->token >= g->hwm || !grouplock_lease_fresh(g))
        return false;
    r = grouplock_group_pop(g);
    g->held = true;
    g->token++;
    gl->stats.tokens++;
    evtimer_del(g->idle);
    grouplock_req_defer(r, GROUPLOCK_OK, g->token, NULL);
    return true;
}

/* Ends g's lease: its record is freed in the store (compare-and-set, the
 * token kept); the change hook says "released" once durable.  The caller
 * settles g. */
void
grouplock_lease_end(struct gl_group *g)
{
    struct gl_req *r;

    if (!g->leased)
        return;
    g->leased = false;
    g->written = false;
    evtimer_del(g->idle);
    r = grouplock_req_new(g->gl, GL_REQ_RELEASE, NULL, NULL);
    if (r == NULL)
        return; /* logged: the record stays held until a restart frees it */
    if (grouplock_req_names_from_key(r, g->key) != 0) {
        free(r);
        return;
    }
    r->token = g->token;
    r->hwm = g->hwm;
    r->ours = true;
    grouplock_req_check(r);
}

void
grouplock_lease_on_idle(evutil_socket_t fd, short what, void *arg)
{
    struct gl_group *g = arg;

    (void)fd;
    (void)what;
    if (g->held || g->head != NULL)
        return;
    g->busy++;
    grouplock_lease_end(g);
    g->busy--;
    grouplock_group_settle(g);
}

/* The head's attempt on a lease whose block is used up or whose renewal is
 * due: the record (cur, at rev) is still ours, so the next block is
 * reserved and the record renewed in one compare-and-set. */
void
grouplock_lease_extend(struct gl_group *g, const struct grouplock_record *cur,
                       uint64_t rev, int64_t now)
{
    struct gl_req *r = g->head;
    struct grouplocks *gl = g->gl;
    struct grouplock_record next = *cur;
    char msg[GL_MSG_MAX];

    if (cur->token > UINT64_MAX - grouplock_token_block(gl)) {
        errbuf_set(msg, sizeof msg,
                   "group %s/%s: the lock's tokens are exhausted", r->tenant,
                   r->group);
        grouplock_group_finish(g, GROUPLOCK_ERROR, 0, msg);
        return;
    }
    next.token = cur->token + grouplock_token_block(gl);
    next.acquired_ms = now;
    /* A lease written under stays so: no steal while it lasts. */
    r->written = cur->last_write_token == cur->token;
    if (r->written)
        next.last_write_token = next.token;
    r->token = g->token + 1;
    r->hwm = next.token;
    r->at_ms = now;
    r->extend = true;
    r->stolen = false;
    if (grouplock_req_put(r, &next, rev) != 0)
        grouplock_group_finish(g, GROUPLOCK_ERROR, 0, r->message);
}
