/*
 * route_metrics.c — GET /metrics: the Prometheus text exposition format
 * (version 0.0.4) of the daemon's counters (DESIGN §8).
 *
 * Per worker (labels worker = id, name, tenant): attempts that succeeded
 * (processed) and that failed, each delivery or invoke counted once in
 * one of them; events published, redelivered, dead-lettered; host
 * restarts.  Per tenant (label tenant; tenant_meter.h), what an operator
 * bills from: events in and out, invocations, quota refusals (label
 * quota), and its hosts' CPU seconds and memory from its cgroup where the
 * machine accounts them.  Daemon-wide:
 * workers by status and by host state, host processes, the processing
 * latency histogram, the broker's counters, its journal's size and
 * whether it writes (failures, recoveries), group lock
 * acquisitions, steals, contention and waits, event streams.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "master/api/api.h"
#include "master/api/events.h"
#include "master/api/http_server.h"
#include "master/broker/admit.h"
#include "master/broker/broker.h"
#include "master/broker/flow.h"
#include "master/core/daemon.h"
#include "master/core/engines.h"
#include "master/core/tenant_meter.h"
#include "master/store/grouplock.h"
#include "master/store/store.h"
#include "master/supervise/supervise.h"
#include "master/workers/registry.h"
#include "master/workers/worker.h"
#include "sandbox/cgroup.h"

struct text {
    char *p;
    size_t len, cap;
    bool oom;
};

static void add(struct text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
add(struct text *t, const char *fmt, ...)
{
    va_list ap;

    for (;;) {
        if (t->oom)
            return;
        va_start(ap, fmt);
        int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->oom = true;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n;
        char *p = realloc(t->p, cap);
        if (p == NULL) {
            t->oom = true;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
}

static void
head(struct text *t, const char *name, const char *type, const char *help)
{
    add(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
scalar(struct text *t, const char *name, const char *type, const char *help,
       uint64_t v)
{
    head(t, name, type, help);
    add(t, "%s %" PRIu64 "\n", name, v);
}

/* A label value with \, " and newlines escaped (names and ids cannot hold
 * them, but tenants are free text). */
static const char *
esc(const char *s, char *buf, size_t len)
{
    size_t k = 0;
    for (; *s && k + 3 < len; s++) {
        if (*s == '\\' || *s == '"') {
            buf[k++] = '\\';
            buf[k++] = *s;
        } else if (*s == '\n') {
            buf[k++] = '\\';
            buf[k++] = 'n';
        } else {
            buf[k++] = *s;
        }
    }
    buf[k] = '\0';
    return buf;
}

/* A series of every worker of the tenant (NULL: of every tenant). */
static void
per_worker(struct text *t, const struct registry *r, const char *tenant,
           const char *name, const char *help, size_t offset)
{
    char a[300], b[300];

    head(t, name, "counter", help);
    for (size_t i = 0; i < registry_count(r); i++) {
        const struct worker *w = registry_at(r, i);
        uint64_t v;
        if (tenant && strcmp(w->tenant, tenant) != 0)
            continue;
        if (offset == SIZE_MAX)
            v = w->restarts;
        else
            memcpy(&v, (const char *)&w->counters + offset, sizeof v);
        add(t, "%s{worker=\"%s\",name=\"%s\",tenant=\"%s\"} %" PRIu64 "\n",
            name, w->id, esc(w->name, a, sizeof a), esc(w->tenant, b, sizeof b),
            v);
    }
}

/* One series of each tenant's meter (only: of that tenant alone). */
static void
per_tenant(struct text *t, const char *only, const char *name, const char *type,
           const char *help, size_t offset)
{
    char a[300];

    head(t, name, type, help);
    for (size_t i = 0; i < tenant_meter_count(); i++) {
        const struct tenant_meter *m = tenant_meter_at(i);
        uint64_t v;
        if (only && strcmp(m->tenant, only) != 0)
            continue;
        memcpy(&v, (const char *)m + offset, sizeof v);
        add(t, "%s{tenant=\"%s\"} %" PRIu64 "\n", name,
            esc(m->tenant, a, sizeof a), v);
    }
}

/* The tenants' meters, and their cgroups' usage. */
static void
tenant_series(struct text *t, const char *only)
{
    char a[300], b[100];

    per_tenant(t, only, "workmanager_tenant_events_in_total", "counter",
               "Events accepted for a tenant's topics (publishes, gateway "
               "publishes, its workers' outputs).",
               offsetof(struct tenant_meter, events_in));
    per_tenant(t, only, "workmanager_tenant_events_out_total", "counter",
               "Deliveries handed to a tenant's workers, redeliveries "
               "included.",
               offsetof(struct tenant_meter, events_out));
    per_tenant(t, only, "workmanager_tenant_invocations_total", "counter",
               "Invokes of a tenant's workers started.",
               offsetof(struct tenant_meter, invocations));
    head(t, "workmanager_tenant_quota_refusals_total", "counter",
         "Requests of a tenant refused for one of its quotas.");
    for (size_t i = 0; i < tenant_meter_count(); i++) {
        const struct tenant_meter *m = tenant_meter_at(i);
        if (only && strcmp(m->tenant, only) != 0)
            continue;
        for (size_t k = 0; k < m->nquotas; k++)
            add(t,
                "workmanager_tenant_quota_refusals_total{tenant=\"%s\","
                "quota=\"%s\"} %" PRIu64 "\n",
                esc(m->tenant, a, sizeof a),
                esc(m->quotas[k].name, b, sizeof b), m->quotas[k].refusals);
    }
    /* From the cgroup that holds a tenant's hosts: only the figures the
     * machine accounts (no memory controller: no memory series). */
    struct text cpu = { malloc(256), 0, 256, false },
                mem = { malloc(256), 0, 256, false };
    cpu.oom = cpu.p == NULL;
    mem.oom = mem.p == NULL;
    for (size_t i = 0; i < tenant_meter_count(); i++) {
        const struct tenant_meter *m = tenant_meter_at(i);
        uint64_t usec = 0, bytes = 0;
        if (only && strcmp(m->tenant, only) != 0)
            continue;
        unsigned got = sandbox_cg_tenant_usage(m->tenant, &usec, &bytes);
        if (got & SANDBOX_CG_CPU)
            add(&cpu,
                "workmanager_tenant_cpu_seconds_total{tenant=\"%s\"} "
                "%.6f\n",
                esc(m->tenant, a, sizeof a), (double)usec / 1e6);
        if (got & SANDBOX_CG_MEMORY)
            add(&mem,
                "workmanager_tenant_memory_bytes{tenant=\"%s\"} %" PRIu64 "\n",
                esc(m->tenant, a, sizeof a), bytes);
    }
    head(t, "workmanager_tenant_cpu_seconds_total", "counter",
         "CPU time of a tenant's hosts (its cgroup's; absent where the "
         "machine has no cpu accounting).");
    if (cpu.len)
        add(t, "%s", cpu.p);
    head(t, "workmanager_tenant_memory_bytes", "gauge",
         "Memory of a tenant's hosts now (its cgroup's; absent where the "
         "machine has no memory controller).");
    if (mem.len)
        add(t, "%s", mem.p);
    t->oom = t->oom || cpu.oom || mem.oom;
    free(cpu.p);
    free(mem.p);
}

/* The daemon's own gauges: workers by status and state, hosts, pools. */
static void
daemon_gauges(struct text *t, struct daemon *d)
{
    size_t by_status[3] = { 0 }, by_state[WORKER_STATE_LAST + 1] = { 0 };

    for (size_t i = 0; i < registry_count(d->registry); i++) {
        const struct worker *w = registry_at(d->registry, i);
        by_status[w->status]++;
        by_state[w->state]++;
    }
    head(t, "workmanager_workers", "gauge",
         "Registered workers by desired status.");
    for (int s = WORKER_RUNNING; s <= WORKER_STOPPED; s++)
        add(t, "workmanager_workers{status=\"%s\"} %zu\n",
            worker_status_name((enum worker_status)s), by_status[s]);
    head(t, "workmanager_worker_hosts", "gauge",
         "Registered workers by observed host state.");
    for (int s = WORKER_STATE_IDLE; s <= WORKER_STATE_LAST; s++)
        add(t, "workmanager_worker_hosts{state=\"%s\"} %zu\n",
            worker_state_name((enum worker_state)s), by_state[s]);
    scalar(t, "workmanager_host_processes", "gauge",
           "Engine-host processes alive.", supervise_hosts(d->sv));
    /* The warm pools (supervise.h): ready now, and configured. */
    head(t, "workmanager_engine_warm_hosts", "gauge",
         "Pool hosts of an engine ready for a worker to take.");
    for (size_t i = 0; i < d->engines->n; i++)
        add(t, "workmanager_engine_warm_hosts{engine=\"%s\"} %zu\n",
            d->engines->v[i].name,
            supervise_pool_ready(d->sv, &d->engines->v[i]));
    head(t, "workmanager_engine_warm_hosts_wanted", "gauge",
         "Pool hosts an engine keeps warm (its descriptor's warm).");
    for (size_t i = 0; i < d->engines->n; i++)
        add(t, "workmanager_engine_warm_hosts_wanted{engine=\"%s\"} %u\n",
            d->engines->v[i].name, d->engines->v[i].warm);
}

void
api_metrics_route(struct api_req *rq)
{
    struct daemon *d = rq->d;
    struct text t = { malloc(65536), 0, 65536, false };
    struct broker_stats bs;
    struct events_scan_counts sc;
    struct events_answer_counts ac;
    struct broker_health bh;
    struct flow_stats ds;
    struct grouplock_stats gs;

    /* A tenant's reader or admin: its workers' series only. */
    const char *only = NULL;
    if (api_principal_decide(&rq->principal, API_OPERATE, NULL) !=
        API_SCOPE_ALLOW) {
        if (api_scope_refuse(rq, API_READ, NULL, "metrics")) {
            free(t.p);
            return;
        }
        only = rq->principal.tenant;
    }
    if (t.p == NULL) {
        api_error(rq, 500, "internal", "out of memory");
        return;
    }
    if (only == NULL)
        daemon_gauges(&t, d);
    /* Several per worker for an engine of concurrency processes. */
    head(&t, "workmanager_worker_host_processes", "gauge",
         "Engine-host processes of a worker.");
    for (size_t i = 0; i < registry_count(d->registry); i++) {
        const struct worker *w = registry_at(d->registry, i);
        char a[300], b[300];
        if (only && strcmp(w->tenant, only) != 0)
            continue;
        add(&t,
            "workmanager_worker_host_processes{worker=\"%s\",name=\"%s\","
            "tenant=\"%s\"} %zu\n",
            w->id, esc(w->name, a, sizeof a), esc(w->tenant, b, sizeof b),
            supervise_pids(w, NULL, 0));
    }

    per_worker(&t, d->registry, only,
               "workmanager_worker_events_processed_total",
               "Attempts (deliveries and invokes) a worker completed "
               "successfully.",
               offsetof(struct worker_counters, processed));
    per_worker(&t, d->registry, only, "workmanager_worker_events_failed_total",
               "Attempts (deliveries and invokes) of a worker that ended "
               "in an error; a redelivered event counts once per attempt.",
               offsetof(struct worker_counters, failed));
    per_worker(&t, d->registry, only,
               "workmanager_worker_events_published_total",
               "Output events a worker published.",
               offsetof(struct worker_counters, published));
    per_worker(&t, d->registry, only,
               "workmanager_worker_events_redelivered_total",
               "Deliveries to a worker nacked for a later retry.",
               offsetof(struct worker_counters, redelivered));
    per_worker(&t, d->registry, only,
               "workmanager_worker_events_dead_lettered_total",
               "Events a worker's subscription gave up on.",
               offsetof(struct worker_counters, dead_lettered));
    per_worker(&t, d->registry, only, "workmanager_worker_events_refused_total",
               "Events refused at the door (503 subscriber_full): a "
               "worker's queue was full.",
               offsetof(struct worker_counters, refused));
    per_worker(&t, d->registry, only, "workmanager_worker_restarts_total",
               "Restarts of a worker's host after a crash.", SIZE_MAX);
    tenant_series(&t, only);

    if (only)
        goto answer;
    flow_stats(d->flow, &ds);
    head(&t, "workmanager_event_processing_seconds", "histogram",
         "Time from handing an event to a host to its Result.");
    for (int i = 0; i < DISPATCH_BUCKETS; i++)
        add(&t,
            "workmanager_event_processing_seconds_bucket{le=\"%g\"} %" PRIu64
            "\n",
            flow_bucket_bounds[i], ds.buckets[i]);
    add(&t,
        "workmanager_event_processing_seconds_bucket{le=\"+Inf\"} %" PRIu64
        "\n",
        ds.count);
    add(&t, "workmanager_event_processing_seconds_sum %.6f\n", ds.sum);
    add(&t, "workmanager_event_processing_seconds_count %" PRIu64 "\n",
        ds.count);
    scalar(&t, "workmanager_events_dead_lettered_total", "counter",
           "Events sent to a <topic>-dead topic.", ds.dead_lettered);
    scalar(&t, "workmanager_events_loops_total", "counter",
           "Outputs stopped by the wmhops loop guard.", ds.loops);
    scalar(&t, "workmanager_outputs_refused_total", "counter",
           "Outputs refused (reserved topics, stale lock tokens, invalid, "
           "not stored by the broker).",
           ds.refused_outputs);

    broker_stats(d->broker, &bs);
    scalar(&t, "workmanager_events_published_total", "counter",
           "Events accepted by the broker.", bs.published);
    scalar(&t, "workmanager_events_delivered_total", "counter",
           "Deliveries started, redeliveries included.", bs.delivered);
    scalar(&t, "workmanager_events_acked_total", "counter",
           "Deliveries acknowledged.", bs.acked);
    scalar(&t, "workmanager_events_nacked_total", "counter",
           "Deliveries negatively acknowledged (retried later).", bs.nacked);
    scalar(&t, "workmanager_events_overflowed_total", "counter",
           "Oldest events dead-lettered by full queues of "
           "drop_oldest_topics.",
           bs.overflowed);
    head(&t, "workmanager_publish_refused_total", "counter",
         "Publishes and invokes refused with 503 at the door, by reason.");
    for (int r = 0; r < ADMIT_NREASONS; r++)
        add(&t,
            "workmanager_publish_refused_total{reason=\"%s\"} %" PRIu64 "\n",
            admit_reason_name(r), admit_refused(r));
    events_scan_stats(&sc);
    head(&t, "workmanager_event_bodies_total", "counter",
         "Structured and batched request bodies by their reader: the "
         "scanner, or the jansson path for a body that breaks a rule "
         "(invalid) or has a shape the scanner leaves to it (unusual).");
    add(&t, "workmanager_event_bodies_total{reader=\"scanner\"} %" PRIu64 "\n",
        sc.scanned);
    add(&t,
        "workmanager_event_bodies_total{reader=\"jansson\",cause=\"invalid\"} "
        "%" PRIu64 "\n",
        sc.rejected);
    add(&t,
        "workmanager_event_bodies_total{reader=\"jansson\",cause=\"unusual\"} "
        "%" PRIu64 "\n",
        sc.fallbacks);
    events_answer_stats(&ac);
    head(&t, "workmanager_event_answers_total", "counter",
         "Structured and batched answers of events by their writer: "
         "straight from the buffers, or the jansson path for data of a "
         "shape the writer leaves to it.");
    add(&t, "workmanager_event_answers_total{writer=\"direct\"} %" PRIu64 "\n",
        ac.written);
    add(&t, "workmanager_event_answers_total{writer=\"jansson\"} %" PRIu64 "\n",
        ac.fallbacks);
    scalar(&t, "workmanager_events_dropped_total", "counter",
           "Pending events dropped with their deleted subscriber.", bs.dropped);
    scalar(&t, "workmanager_events_pending", "gauge",
           "Deliveries not settled yet.", bs.pending);
    scalar(&t, "workmanager_events_exhausted_total", "counter",
           "Events the NATS broker stopped delivering after "
           "nats_max_deliver unsettled deliveries (dead-lettered with "
           "reason timeout).",
           bs.exhausted);
    scalar(&t, "workmanager_store_reads_total", "counter",
           "Synchronous reads of the state store (records, lists, code "
           "blobs): with store = nats, each is a round trip on the "
           "daemon's loop.",
           store_reads(d->store));
    scalar(&t, "workmanager_journal_bytes", "gauge",
           "Size of the broker's journal on disk.", bs.journal_bytes);
    scalar(&t, "workmanager_journal_segments", "gauge",
           "Segment files of the broker's journal.", bs.journal_segments);
    broker_health(d->broker, &bh);
    scalar(&t, "workmanager_journal_writable", "gauge",
           "1 while the broker's journal writes, 0 while it cannot (a full "
           "disk): see /health.",
           bh.writable ? 1 : 0);
    scalar(&t, "workmanager_journal_write_failures_total", "counter",
           "Times the broker's journal stopped writing.", bh.failures);
    scalar(&t, "workmanager_journal_recoveries_total", "counter",
           "Times the broker's journal wrote again after a failure.",
           bh.recoveries);

    grouplocks_stats(d->locks, &gs);
    scalar(&t, "workmanager_grouplock_acquired_total", "counter",
           "Group locks taken in the store (a lease serves many events).",
           gs.acquired);
    scalar(&t, "workmanager_grouplock_tokens_total", "counter",
           "Fencing tokens handed out: one per turn of a group (or per "
           "event processed under a group lock outside a turn).",
           gs.tokens);
    scalar(&t, "workmanager_grouplock_shared_total", "counter",
           "Events that shared their turn's holding of a group lock "
           "(pipelined to one member).",
           gs.shared);
    scalar(&t, "workmanager_grouplock_renewals_total", "counter",
           "Group lock leases extended by a new block of tokens.", gs.renewals);
    scalar(&t, "workmanager_grouplock_stolen_total", "counter",
           "Stale group locks stolen.", gs.stolen);
    scalar(&t, "workmanager_grouplock_contention_total", "counter",
           "Acquisitions that gave up (lock_contention).", gs.contention);
    scalar(&t, "workmanager_grouplock_retries_total", "counter",
           "Backoff waits of acquisitions.", gs.retries);
    scalar(&t, "workmanager_grouplock_stale_writes_total", "counter",
           "Writes refused under a stale token.", gs.stale_writes);
    head(&t, "workmanager_grouplock_wait_seconds", "summary",
         "Time from asking for a group lock to the answer.");
    add(&t, "workmanager_grouplock_wait_seconds_sum %.3f\n",
        (double)gs.wait_ms_total / 1000.0);
    add(&t, "workmanager_grouplock_wait_seconds_count %" PRIu64 "\n", gs.waits);

    scalar(&t, "workmanager_event_streams", "gauge",
           "Open Server-Sent Events streams.", api_topics_streams());
    scalar(&t, "workmanager_event_streams_dropped_total", "counter",
           "Events not sent to a stream that read too slowly.",
           api_topics_dropped());
    const struct http_tls *tls = api_tls(rq->api);
    if (tls) {
        scalar(&t, "workmanager_tls_certificate_expiry_seconds", "gauge",
               "When tls_cert_file's certificate expires (Unix seconds).",
               (uint64_t)http_tls_not_after(tls));
        scalar(&t, "workmanager_tls_handshake_failures_total", "counter",
               "TLS handshakes on the TCP listener that failed.",
               http_tls_failures(tls));
    }

answer:
    if (t.oom)
        api_error(rq, 500, "internal", "out of memory");
    else
        api_reply_text(rq, 200, "text/plain; version=0.0.4; charset=utf-8", t.p,
                       t.len);
    free(t.p);
}
