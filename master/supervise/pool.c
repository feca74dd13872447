/*
 * pool.c — the warm pool (supervise.h): for an engine whose descriptor
 * says warm = N, N host processes kept started, confined and handshaken
 * with no worker, for the next new process of a worker of the engine to
 * take.
 *
 * A struct pool per engine holds procs with no host (p->h NULL, p->pool
 * set, linked by hlink like a worker's): spawned through the launcher
 * without waiting (p->spawning until its answer, which
 * sv_launcher_on_read() reads with the death reports; the channel opens
 * then), ready once their Hello is accepted, then heartbeaten (never
 * idle-reaped, never loaded).  sv_pool_take() moves a ready one into a
 * host, with its worker's id, and sends the Load; the rest of its life is
 * a worker's proc's.  A pool proc's death is a failure of its pool
 * (sv_pool_lost()), replaced after a backoff, and not after
 * POOL_FAILURES_MAX in a row until a worker's host of the engine loads;
 * the daemon's shutdown ends them with the others (sv->procs holds every
 * proc).
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "master/core/conf.h"
#include "master/core/engines.h"
#include "master/core/log.h"
#include "master/core/tenant_meter.h"
#include "master/core/tenant_share.h"
#include "master/supervise/launcher_client.h"
#include "master/supervise/supervise_internal.h"
#include "master/workers/activity.h"

/* A pool host's cgroup memory limit and RLIMIT_AS: none, as a worker's
 * that does not set limits.memory_mb, the only one that takes it. */
#define POOL_MEMORY_MB 0u
/* Failures in a row (a refused spawn, a failed handshake, a death while
 * waiting) after which an engine's pool is not refilled until a worker's
 * host of the engine loads its code. */
#define POOL_FAILURES_MAX 3u
/* How soon a refill looks again while a worker's host of the engine
 * starts (pool_busy()). */
#define POOL_BUSY_RETRY_MS 5u
/* How long after a take the replacement's spawn waits: the fork, the
 * confinement and the new host's start would otherwise take a CPU from
 * the taker's first events (bench/README.md, "The warm pool": the create
 * -> first event median went from 4.1-5.5 to 3.9-4.1 ms on 2 vCPUs). */
#define POOL_REFILL_DELAY_MS 20u

static struct pool *
pool_of(struct supervisor *sv, const struct engines_entry *e)
{
    for (size_t i = 0; i < sv->npools; i++)
        if (sv->pools[i].e == e)
            return &sv->pools[i];
    return NULL;
}

/* p waits in its pool, said hello and may be taken. */
static bool
pool_ready(const struct proc *p)
{
    return p->ready && sv_proc_serving(p);
}

/* Refills pool after delay_ms, unless a refill (or its backoff) is due
 * already. */
static void
pool_schedule(struct pool *pool, uint64_t delay_ms)
{
    if (pool->given_up || pool->sv->shutting_down ||
        evtimer_pending(pool->refill, NULL))
        return;
    sv_timer_ms(pool->refill, delay_ms);
}

/* One more failure in a row: the next pool host after a backoff (as a
 * worker's restart), none after POOL_FAILURES_MAX. */
static void
pool_failed(struct pool *pool, const char *why)
{
    const struct conf *c = pool->sv->conf;

    if (++pool->failures >= POOL_FAILURES_MAX) {
        if (!pool->given_up)
            log_warning("engine %s: %u pool hosts failed in a row, the last "
                        "%s: its pool is not refilled until a worker's host "
                        "of the engine starts",
                        pool->e->name, pool->failures, why);
        pool->given_up = true;
        evtimer_del(pool->refill);
        return;
    }
    uint64_t delay = c->restart_base_delay_ms << (pool->failures - 1);
    if (delay > c->restart_max_delay_ms)
        delay = c->restart_max_delay_ms;
    log_info("engine %s: a pool host failed (%s): another in %llu ms",
             pool->e->name, why, (unsigned long long)delay);
    evtimer_del(pool->refill);
    sv_timer_ms(pool->refill, delay);
}

/* Takes p out of its pool. */
static void
pool_remove(struct proc *p)
{
    struct pool *pool = p->pool;

    TAILQ_REMOVE(&pool->procs, p, hlink);
    pool->nprocs--;
    p->pool = NULL;
    p->ready = false;
}

/* Asks the launcher for one more pool host, without waiting: its answer
 * comes with the death reports (sv_pool_spawned()).  0, or -1 (a failure
 * counted). */
static int
pool_spawn(struct pool *pool)
{
    struct supervisor *sv = pool->sv;
    struct launcher_spawn q = { .type = LAUNCHER_SPAWN,
                                .seq = ++sv->spawn_seq,
                                .memory_mb = POOL_MEMORY_MB };
    char err[512];
    int sp[2] = { -1, -1 };
    struct proc *p = sv_proc_new(sv, NULL);

    if (p == NULL) {
        pool_failed(pool, "out of memory");
        return -1;
    }
    snprintf(p->worker_id, sizeof p->worker_id, "%s pool", pool->e->name);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
        snprintf(err, sizeof err, "socketpair: %s", strerror(errno));
        sv_proc_free(p);
        pool_failed(pool, err);
        return -1;
    }
    /* Confined as a worker's host (the launcher knows no difference); its
     * cgroup is pool-N. */
    snprintf(q.engine, sizeof q.engine, "%s", pool->e->name);
    snprintf(q.worker_id, sizeof q.worker_id, "pool");
    int rc =
        launcher_client_spawn_send(sv->launcher, &q, sp[1], err, sizeof err);
    close(sp[1]);
    if (rc < 0) {
        close(sp[0]);
        sv_proc_free(p);
        pool_failed(pool, err);
        return -1;
    }
    p->seq = q.seq;
    p->chan_fd = sp[0];
    p->spawning = true;
    p->pool = pool;
    LIST_INSERT_HEAD(&sv->procs, p, link);
    sv->nprocs++;
    TAILQ_INSERT_TAIL(&pool->procs, p, hlink);
    pool->nprocs++;
    return 0;
}

/* Whether a worker's host of e is starting or loading code: a refill
 * waits for it, as the launcher answers one spawn at a time and a burst's
 * other hosts would wait behind the pool's, and as the CPUs are the
 * Load's. */
static bool
pool_busy(const struct supervisor *sv, const struct engines_entry *e)
{
    const struct proc *p;

    LIST_FOREACH (p, &sv->procs, link)
        if (p->h && p->h->w->engine == e && sv_proc_serving(p) &&
            (!p->loaded || p->load_sent))
            return true;
    return false;
}

static void
on_pool_refill(evutil_socket_t fd, short what, void *arg)
{
    struct pool *pool = arg;
    struct supervisor *sv = pool->sv;

    (void)fd;
    (void)what;
    if (pool->nprocs < pool->e->warm && pool_busy(sv, pool->e)) {
        sv_timer_ms(pool->refill, POOL_BUSY_RETRY_MS);
        return;
    }
    while (pool->nprocs < pool->e->warm && !pool->given_up &&
           !sv->shutting_down && sv->launcher_ev != NULL && pool->e->available)
        if (pool_spawn(pool) < 0)
            break;
}

void
sv_pool_spawned(struct supervisor *sv, const struct launcher_spawned *r)
{
    struct proc *p;

    LIST_FOREACH (p, &sv->procs, link)
        if (p->spawning && p->seq == r->seq)
            break;
    if (p == NULL)
        return; /* cannot happen: only pool hosts are spawned so */
    p->spawning = false;
    if (r->error) {
        struct pool *pool = p->pool;
        char why[sizeof r->why + 64];

        snprintf(why, sizeof why, "its spawn was refused (%s): %s",
                 r->fail_type, r->why);
        log_warning("engine %s: a pool host did not start: %s", pool->e->name,
                    why);
        pool_remove(p);
        LIST_REMOVE(p, link);
        sv->nprocs--;
        sv_proc_free(p);
        if (!sv->shutting_down)
            pool_failed(pool, why);
        sv_shutdown_check(sv);
        return;
    }
    p->pid = r->pid;
    p->has_init = r->init != 0;
    p->host_pid = r->host_pid > 0 ? r->host_pid : r->pid;
    if (p->kill_reason)
        return; /* the launcher kills it: its death report follows */
    if (p->stop != STOP_NONE) { /* the daemon is stopping */
        sv_proc_kill(p, "stopped", "the daemon is shutting down");
        return;
    }
    p->ch = sv_channel_open(p, p->chan_fd);
    p->chan_fd = -1;
    int saved = errno;
    log_info("engine %s: pool host %s started, pid %d%s, uid %u",
             p->pool->e->name, p->pool->e->host_path, sv_proc_pid(p),
             p->has_init ? " (with its init)" : "", (unsigned)r->uid);
    if (p->ch == NULL)
        sv_proc_kill(p, "crash", "cannot set up its channel: %s",
                     strerror(saved));
}

bool
sv_pool_take(struct host *h)
{
    struct supervisor *sv = h->sv;
    struct worker *w = h->w;
    struct pool *pool = pool_of(sv, w->engine);
    struct proc *p;
    char err[512];

    if (pool == NULL || w->limits.memory_mb != POOL_MEMORY_MB)
        return false;
    TAILQ_FOREACH (p, &pool->procs, hlink)
        if (pool_ready(p))
            break;
    if (p == NULL)
        return false;
    if (sv_load_take_code(p, w, err, sizeof err) != 0) {
        sv_host_fail(h, "load_error", err); /* p stays in the pool */
        return true;
    }
    /* Into its tenant's cgroup, as a host spawned for w would be. */
    struct launcher_adopt a = { .type = LAUNCHER_ADOPT, .seq = p->seq };
    snprintf(a.worker_id, sizeof a.worker_id, "%s", w->id);
    snprintf(a.tenant, sizeof a.tenant, "%s", w->tenant);
    tenant_share_get(sv->conf, w->tenant, &a.cpu_weight, &a.cpu_max);
    (void)tenant_meter_get(w->tenant);
    if (launcher_client_adopt(sv->launcher, &a) < 0)
        log_warning("pool: host pid %d of %s stays out of tenant %s's "
                    "cgroup: the launcher is gone",
                    sv_proc_pid(p), w->engine->name, w->tenant);
    pool_remove(p);
    sv_timer_del(p->hb);
    sv_timer_del(p->hb_timeout);
    p->hb_outstanding = false;
    p->h = h;
    p->from_pool = true;
    p->validator = w->in_process;
    snprintf(p->worker_id, sizeof p->worker_id, "%s", w->id);
    TAILQ_INSERT_TAIL(&h->procs, p, hlink);
    h->nprocs++;
    activity_log(w, LOG_INFO, "takes host pid %d from the %s pool%s",
                 sv_proc_pid(p), w->engine->name,
                 p->validator ? " to validate the in-process library" : "");
    if (h->ip == NULL) {
        sv_host_update_pid(h);
        if (!sv_host_serving_other(h, p))
            sv_state_set(sv, w, WORKER_STATE_STARTING);
    }
    if (sv_load_send(p) < 0)
        sv_proc_kill(p, errno == EAGAIN ? "timeout" : "crash",
                     "cannot send the Load: %s", strerror(errno));
    pool_schedule(pool, POOL_REFILL_DELAY_MS);
    return true;
}

void
sv_pool_worker_started(struct supervisor *sv, const struct engines_entry *e)
{
    struct pool *pool = pool_of(sv, e);

    if (pool == NULL)
        return;
    pool->failures = 0;
    if (pool->given_up) {
        pool->given_up = false;
        log_info("engine %s: a worker's host started: refilling its pool",
                 e->name);
        pool_schedule(pool, 0);
    }
}

void
sv_pool_lost(struct proc *p, const char *reason, const char *how)
{
    struct pool *pool = p->pool;
    char why[256];

    pool_remove(p);
    /* (No launcher: no host starts any more, none is replaced.) */
    if (p->stop != STOP_NONE || p->sv->shutting_down ||
        p->sv->launcher_ev == NULL)
        return;
    if (p->blameless) { /* its zygote died: not a failure of the pool's */
        log_info("engine %s: pool host pid %d died (%s): another in %llu ms",
                 pool->e->name, sv_proc_pid(p), p->blameless,
                 (unsigned long long)p->sv->conf->restart_base_delay_ms);
        pool_schedule(pool, p->sv->conf->restart_base_delay_ms);
        return;
    }
    snprintf(why, sizeof why, "pid %d ended with %s (%s)", sv_proc_pid(p), how,
             reason);
    pool_failed(pool, why);
}

int
sv_pool_init(struct supervisor *sv, const struct engines *engines)
{
    size_t want = 0;

    for (size_t i = 0; i < engines->n; i++)
        want += engines->v[i].warm > 0;
    if (want && (sv->pools = calloc(want, sizeof *sv->pools)) == NULL)
        return -1;
    for (size_t i = 0; i < engines->n; i++) {
        struct pool *pool;
        if (engines->v[i].warm == 0)
            continue;
        /* Only here: with no warm engine, sv->pools is NULL, and even
         * &NULL[0] is undefined (UBSan's "zero offset to null pointer"). */
        pool = &sv->pools[sv->npools];
        pool->sv = sv;
        pool->e = &engines->v[i];
        TAILQ_INIT(&pool->procs);
        pool->refill = evtimer_new(sv->base, on_pool_refill, pool);
        if (pool->refill == NULL)
            return -1;
        sv->npools++;
    }
    return 0;
}

void
sv_pool_stop(struct supervisor *sv)
{
    for (size_t i = 0; i < sv->npools; i++)
        evtimer_del(sv->pools[i].refill);
}

void
sv_pool_free(struct supervisor *sv)
{
    for (size_t i = 0; i < sv->npools; i++)
        event_free(sv->pools[i].refill);
    free(sv->pools);
}

void
supervise_pool_fill(struct supervisor *sv)
{
    for (size_t i = 0; i < sv->npools; i++) {
        struct pool *pool = &sv->pools[i];
        if (!pool->e->available || pool->nprocs >= pool->e->warm)
            continue;
        log_info("engine %s: keeping %u host%s warm", pool->e->name,
                 pool->e->warm, pool->e->warm == 1 ? "" : "s");
        pool_schedule(pool, 0);
    }
}

size_t
supervise_pool_ready(const struct supervisor *sv, const struct engines_entry *e)
{
    const struct pool *pool = NULL;
    const struct proc *p;
    size_t n = 0;

    for (size_t i = 0; i < sv->npools; i++)
        if (sv->pools[i].e == e)
            pool = &sv->pools[i];
    if (pool)
        TAILQ_FOREACH (p, &pool->procs, hlink)
            n += pool_ready(p);
    return n;
}
