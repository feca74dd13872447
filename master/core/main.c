/*
 * main.c — workmanagerd: start-up, signals, readiness, shutdown.
 *
 * Start-up order: configuration (any error stops here, naming the key) →
 * logging → state and runtime directories → engines → the lock on the
 * range of host uids (uidlock.h) → sandbox detection
 * and cgroups → supervisor, which forks the privileged launcher → API
 * sockets bound → the master drops to its user (privdrop.h) → store →
 * audit trail → broker → registry → the loop (the control socket answers
 * from here on, /health Degraded) → recovery → READY=1 (systemd) once
 * recovery is done.
 *
 * SIGHUP reopens the audit log (logrotate's postrotate).
 *
 * Shutdown (SIGTERM, SIGINT): STOPPING=1, stop accepting connections,
 * Shutdown to every host with shutdown_grace_ms, SIGKILL after it, drain
 * the store's writes, exit 0.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "lib/timestamp.h"
#include "lib/uuid.h"
#include "master/api/api.h"
#include "master/api/tokens.h"
#include "master/broker/broker.h"
#include "master/broker/flow.h"
#include "master/broker/gateway.h"
#include "master/broker/journal.h"
#include "master/core/audit.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/engines.h"
#include "master/core/log.h"
#include "master/core/nats_link.h"
#include "master/core/privdrop.h"
#include "master/core/tenant_meter.h"
#include "master/core/tokenfile.h"
#include "master/core/uidlock.h"
#include "master/store/grouplock.h"
#include "master/store/store.h"
#include "master/supervise/supervise.h"
#include "master/workers/activity.h"
#include "master/workers/fetch.h"
#include "master/workers/instances.h"
#include "master/workers/lifecycle.h"
#include "master/workers/quota.h"
#include "master/workers/recovery.h"
#include "master/workers/recovery_lease.h"
#include "master/workers/registry.h"
#include "sandbox/cgroup.h"
#include "sandbox/sandbox.h"

#define MAX_OVERRIDES 256

static void
usage(FILE *f)
{
    fprintf(f, "usage: workmanagerd [--foreground] [--config FILE] "
               "[-o key=value]...\n"
               "       workmanagerd --print-config [--config FILE] "
               "[-o key=value]...\n"
               "       workmanagerd --version\n"
               "See workmanagerd(8) and workmanager.conf(5).\n");
}

/* The store and broker combinations this build runs: broker = embedded
 * with store = file, or store = nats when built with libnats.  The NATS
 * broker is not there yet: refused here, before anything is opened, with
 * the key's origin, rather than failing later with less to say. */
static int
backends_check(const struct conf *c, char *err, size_t errlen)
{
    char origin[320]; /* conf_origin_format(): "file PATH:LINE" */

    if (c->broker == CONF_BROKER_NATS && c->store != CONF_STORE_NATS) {
        conf_origin_format(c, "broker", origin, sizeof origin);
        snprintf(err, errlen,
                 "broker = nats (%s) needs store = nats: the instances that "
                 "share a NATS broker share their workers, locks and "
                 "instances through it too (supported: broker = embedded "
                 "with store = file or store = nats, broker = nats with "
                 "store = nats)",
                 origin);
        return -1;
    }
    if (c->store == CONF_STORE_NATS && !store_nats_available()) {
        conf_origin_format(c, "store", origin, sizeof origin);
        snprintf(err, errlen,
                 "store = nats (%s): this workmanagerd was built without "
                 "NATS support (configured --without-nats, or libnats "
                 "was not found); install libnats-dev and rebuild, or use "
                 "store = file",
                 origin);
        return -1;
    }
    return 0;
}

/* ---- supervisor hooks ------------------------------------------------- */

static bool
registered(struct daemon *d, const struct worker *w)
{
    return registry_lookup(d->registry, w->id) == w;
}

static void
on_state(struct worker *w, enum worker_state old, void *arg)
{
    struct daemon *d = arg;
    if (!registered(d, w))
        return;
    log_debug("worker %s: %s -> %s", w->id, worker_state_name(old),
              worker_state_name(w->state));
    bool unasked = w->last_exit.present &&
                   strcmp(w->last_exit.reason, "stopped") != 0 &&
                   strcmp(w->last_exit.reason, "idle") != 0;
    if (w->state == WORKER_STATE_PENDING && old != WORKER_STATE_PENDING) {
        if (unasked)
            lifecycle_emit_exit(d, w);
        lifecycle_emit(d, w, "restarting", NULL);
    } else if (w->state == WORKER_STATE_FAILED && old != WORKER_STATE_FAILED &&
               unasked) {
        lifecycle_emit_exit(d, w);
    }
    /* A failed worker's events wait for its start (flow.h). */
    if ((w->state == WORKER_STATE_FAILED) != (old == WORKER_STATE_FAILED) &&
        d->flow)
        flow_status(d->flow, w);
}

/* An in-process call past its deadline: the worker.error a host's death
 * would have brought. */
static void
on_stuck(struct worker *w, const char *message, void *arg)
{
    struct daemon *d = arg;
    if (!registered(d, w))
        return;
    activity_error_note(w, "timeout", message, NULL);
    lifecycle_emit(d, w, "error",
                   json_pack("{s:s, s:s}", "error_type", "timeout",
                             "error_message", message));
}

/* SIGHUP: logrotate moved the audit log away; write to a new one. */
static void
on_sighup(evutil_socket_t sig, short what, void *arg)
{
    char err[512];

    (void)sig;
    (void)what;
    (void)arg;
    if (audit_reopen(err, sizeof err) != 0)
        log_warning("%s", err);
    else
        log_notice("SIGHUP: audit log reopened");
}

static int
code_of(struct worker *w, uint8_t **data, size_t *len, char *err, size_t errlen,
        void *arg)
{
    struct daemon *d = arg;
    const struct worker_version *v = worker_version_find(w, w->version);
    if (w->pending_code) {
        *data = malloc(w->pending_len ? w->pending_len : 1);
        if (*data == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        memcpy(*data, w->pending_code, w->pending_len);
        *len = w->pending_len;
        return 0;
    }
    if (v == NULL) {
        snprintf(err, errlen, "worker %s has no version %u", w->id,
                 (unsigned)w->version);
        return -1;
    }
    return store_blob_get(d->store, v->sha256, data, len, err, errlen) ==
                   STORE_OK
               ? 0
               : -1;
}

static void
on_gateway(struct worker *w, const struct ipc_gateway_call *call,
           struct supervise_call *c, void *arg)
{
    gateway_handle(arg, w, call, c);
}

static void
on_heartbeat(struct worker *w, void *arg)
{
    struct daemon *d = arg;
    if (!registered(d, w))
        return;
    lifecycle_emit_infra(d, w->tenant, "worker.heartbeat", w->id,
                         json_pack("{s:s, s:s, s:i}", "worker_id", w->id,
                                   "name", w->name, "pid", (int)w->pid));
}

static void begin_shutdown(struct daemon *d);

/* Without the launcher no host can start again: the daemon ends, with a
 * failure status (systemd restarts it, launcher and all). */
static void
on_launcher_lost(const char *why, void *arg)
{
    struct daemon *d = arg;

    log_err("the launcher %s: shutting down to be restarted", why);
    d->exit_status = 1;
    if (!d->stopping)
        begin_shutdown(d);
}

static const struct supervise_hooks hooks = {
    .on_state = on_state,
    .code = code_of,
    .gateway = on_gateway,
    .heartbeat = on_heartbeat,
    .stuck = on_stuck,
    .launcher_lost = on_launcher_lost,
};

/* Group lock changes become infra events. */
static void
on_lock_change(const char *tenant, const char *group, const char *what,
               uint64_t token, void *arg)
{
    struct daemon *d = arg;
    char subject[300];
    snprintf(subject, sizeof subject, "%s/%s", tenant, group);
    char type[64];
    snprintf(type, sizeof type, "grouplock.%s", what);
    lifecycle_emit_infra(d, tenant, type, subject,
                         json_pack("{s:s, s:s, s:I, s:s}", "tenant", tenant,
                                   "group", group, "token", (json_int_t)token,
                                   "holder", d->holder));
}

/* The backlog quotas' source (quota.h): what the broker holds. */
static void
backlog_of(const void *arg, const char *tenant, uint64_t *events,
           uint64_t *bytes)
{
    broker_tenant_backlog(arg, tenant, events, bytes);
}

/* The NATS connection the configuration describes, for who. */
static struct nats_link_config
nats_link_of(const struct conf *c, const char *who)
{
    return (struct nats_link_config){
        .url = c->nats_url,
        .user = c->nats_user,
        .password = c->nats_password,
        .token = c->nats_token,
        .creds_file = c->nats_creds_file,
        .ca_file = c->nats_ca_file,
        .cert_file = c->nats_cert_file,
        .key_file = c->nats_key_file,
        .who = who,
    };
}

/* Opens the broker, the group locks and the message flow. */
static int
messages_open(struct daemon *d, char *err, size_t errlen)
{
    const struct conf *c = d->conf;
    struct nats_link_config nl = nats_link_of(c, "nats broker");
    struct broker_config bc = {
        .backend = c->broker == CONF_BROKER_NATS ? "nats" : "embedded",
        .state_dir = c->state_dir,
        .fsync = c->journal_fsync == CONF_FSYNC_ALWAYS  ? JOURNAL_FSYNC_ALWAYS
                 : c->journal_fsync == CONF_FSYNC_BATCH ? JOURNAL_FSYNC_BATCH
                                                        : JOURNAL_FSYNC_OFF,
        .journal_max_bytes = c->journal_max_bytes,
        .journal_segment_bytes = c->journal_segment_bytes,
        .queue_max = c->queue_max_events,
        .verify = flow_event_verify,
        .nats = &nl,
        .nats_prefix = c->nats_bucket_prefix,
        .nats_replicas = c->nats_stream_replicas,
        .nats_memory = c->nats_storage == CONF_NATS_STORAGE_MEMORY,
        .nats_ack_wait_ms = c->nats_ack_wait_ms,
        .nats_max_age_s = c->nats_stream_max_age_s,
        /* The flow dead-letters a failing delivery after
         * max_redeliveries; JetStream stops one delivery later, for
         * deliveries that all ended without an outcome. */
        .nats_max_deliver = c->max_redeliveries + 2,
    };
    uuid_new(d->instance_id);
    snprintf(d->holder, sizeof d->holder, "%s/%.8s", c->instance,
             d->instance_id);
    d->broker = broker_open(&bc, d->base, err, errlen);
    if (d->broker == NULL)
        return -1;
    quota_backlog_source_set(backlog_of, d->broker);
    struct grouplock_policy gp = {
        .max_age_ms = c->lock_max_age_ms,
        .retry_base_ms = c->group_lock_retry_base_delay_ms,
        .max_retries = c->group_lock_max_retries,
        .token_block = c->group_lock_token_block,
        .lease_idle_ms = c->group_lock_lease_idle_ms,
    };
    d->locks = grouplocks_new(d->store, d->base, d->holder, &gp);
    d->flow = flow_new(d);
    if (d->locks == NULL || d->flow == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    grouplocks_set_change_hook(d->locks, on_lock_change, d);
    /* The file store's flock makes this master its only user: locks held
     * by an earlier run of this instance died with it. */
    unsigned freed = grouplocks_release_stale_own(d->locks, c->instance);
    if (freed)
        log_notice("group locks: %u held by an earlier run freed", freed);
    return 0;
}

/* ---- readiness, watchdog, shutdown ------------------------------------ */

static void
on_recovered(struct daemon *d)
{
    gateway_state_count(d);
    /* From now on, what other instances change reaches the registry (its
     * first pass finds the records as recovery left them). */
    if (d->remote_followed == false) {
        d->remote_followed = true;
        api_remote_workers_start(d);
    }
    sd_notify(0, "READY=1\nSTATUS=ready");
    /* Ready first: the pool hosts start in the background. */
    supervise_pool_fill(d->sv);
}

static void
on_watchdog(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    sd_notify(0, "WATCHDOG=1");
}

static void
on_hosts_gone(void *arg)
{
    struct daemon *d = arg;
    event_base_loopexit(d->base, NULL);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct daemon *d = arg;
    (void)what;
    if (d->stopping) {
        log_notice("signal %d again: still stopping", (int)sig);
        return;
    }
    log_notice("signal %d: shutting down (grace %llu ms)", (int)sig,
               (unsigned long long)d->conf->shutdown_grace_ms);
    begin_shutdown(d);
}

static void
begin_shutdown(struct daemon *d)
{
    d->stopping = true;
    sd_notify(0, "STOPPING=1");
    api_stop_listening(d->api);
    /* Creates and reloads waiting for a fetch answer 503 now. */
    fetch_cancel_all(d->fetcher);
    supervise_shutdown(d->sv, (unsigned)d->conf->shutdown_grace_ms,
                       on_hosts_gone, d);
}

static int
make_dir(const char *path, mode_t mode)
{
    if (mkdir(path, mode) == 0 || errno == EEXIST)
        return 0;
    log_err("cannot create %s: %s", path, strerror(errno));
    return -1;
}

/* Detaches from the terminal (without --foreground); stderr stays where
 * the caller sent it, since the log goes there. */
static int
daemonize(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0)
        _exit(0);
    if (setsid() < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0)
        _exit(0);
    if (chdir("/") != 0 || !freopen("/dev/null", "r", stdin) ||
        !freopen("/dev/null", "w", stdout))
        return -1;
    return 0;
}

/*
 * Detects what the machine offers for confinement (logged), keeps it in d
 * for /health, and refuses to go on below min_confinement, naming what is
 * missing.  A build --without-sandbox confines nothing: its level is none
 * whatever the machine has.
 */
static int
sandbox_check(struct daemon *d)
{
    enum sandbox_level min;
    char summary[512], missing[512];

#ifdef WM_SANDBOX
    d->sandbox_built = true;
#endif
    static const enum sandbox_cgroup_want cg_want[] = {
        [CONF_CGROUP_AUTO] = SANDBOX_CGWANT_AUTO,
        [CONF_CGROUP_V1] = SANDBOX_CGWANT_V1,
        [CONF_CGROUP_V2] = SANDBOX_CGWANT_V2,
        [CONF_CGROUP_NONE] = SANDBOX_CGWANT_NONE,
    };
    sandbox_detect(&d->sandbox);
    if (d->conf->cgroup_hierarchy != CONF_CGROUP_AUTO)
        sandbox_detect_cgroups(&d->sandbox, cg_want[d->conf->cgroup_hierarchy]);
    log_info("sandbox: machine offers %s%s",
             sandbox_support_summary(&d->sandbox, summary, sizeof summary),
             d->sandbox_built ? ""
                              : " (built --without-sandbox: hosts unconfined)");
    if (!d->sandbox_built)
        d->sandbox.level = SANDBOX_LEVEL_NONE;
    else if (d->sandbox.root_error[0])
        log_warning("sandbox: hosts get no private root and no mount "
                    "namespace (building the root failed at %s): is / a "
                    "mount point? a chroot's directory must be one (mount "
                    "--bind DIR DIR before chroot); confinement is %s",
                    d->sandbox.root_error,
                    sandbox_level_name(d->sandbox.level));
    if (sandbox_level_parse(d->conf->min_confinement, &min) != 0) {
        log_err("min_confinement: '%s' is not a confinement level (none, "
                "seccomp, ns, full)",
                d->conf->min_confinement);
        return -1;
    }
    if (d->sandbox.level >= min)
        return 0;
    if (!d->sandbox_built)
        snprintf(missing, sizeof missing,
                 "this workmanagerd was built --without-sandbox");
    else
        sandbox_missing(&d->sandbox, min, missing, sizeof missing);
    log_err("min_confinement is %s but hosts would run under %s: %s; lower "
            "min_confinement (workmanager.conf(5)) or give the daemon what it "
            "lacks",
            d->conf->min_confinement, sandbox_level_name(d->sandbox.level),
            missing);
    return -1;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "foreground", no_argument, NULL, 'f' },
        { "config", required_argument, NULL, 'c' },
        { "print-config", no_argument, NULL, 'p' },
        { "version", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    char *overrides[MAX_OVERRIDES];
    size_t noverrides = 0;
    const char *config_file = NULL;
    bool foreground = false, print = false;
    char err[1024];
    struct daemon d = { 0 };
    struct conf conf;
    int c, rc = 1, uid_lock = -2;

    while ((c = getopt_long(argc, argv, "fc:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            foreground = true;
            break;
        case 'c':
            config_file = optarg;
            break;
        case 'o':
            if (noverrides == MAX_OVERRIDES) {
                fprintf(stderr, "workmanagerd: too many -o options\n");
                return 2;
            }
            overrides[noverrides++] = optarg;
            break;
        case 'p':
            print = true;
            break;
        case 'V':
            printf("workmanagerd %s\n", PACKAGE_VERSION);
            if (store_nats_available())
                printf("NATS JetStream store: yes (libnats %s)\n",
                       store_nats_version());
            else
                printf("NATS JetStream store: no (built without libnats)\n");
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (conf_load(&conf, config_file, config_file != NULL, overrides,
                  noverrides, err, sizeof err) != 0) {
        fprintf(stderr, "workmanagerd: %s\n", err);
        return 2;
    }
    if (print) {
        conf_dump(&conf, stdout);
        conf_free(&conf);
        return 0;
    }
    log_init(conf.log_level, "workmanagerd");
    if (backends_check(&conf, err, sizeof err) != 0) {
        log_err("%s", err);
        conf_free(&conf);
        return 2; /* a configuration error: no restart fixes it */
    }
    activity_log_limit_set((size_t)conf.worker_log_bytes);
    if (!foreground && daemonize() != 0) {
        log_err("cannot daemonize: %s", strerror(errno));
        conf_free(&conf);
        return 1;
    }

    d.conf = &conf;
    d.started_at_ms = timestamp_now_ms();
    signal(SIGPIPE, SIG_IGN);
    /* A file past RLIMIT_FSIZE (LimitFSIZE=) fails its write with EFBIG,
     * reported as the store's or the journal's failure, instead of killing
     * the daemon: the loop writes journal records itself (journal.c).
     * Hosts get every signal's default back (sandbox/spawn.c). */
    signal(SIGXFSZ, SIG_IGN);
    if (make_dir(conf.state_dir, 0750) || make_dir(conf.runtime_dir, 0755))
        goto out;
    d.base = event_base_new();
    if (d.base == NULL) {
        log_err("cannot create the event loop");
        goto out;
    }
    static struct engines engines;
    if (engines_load(conf.engines_dir, conf.libexec_dir, &engines, err,
                     sizeof err) != 0) {
        log_err("engines: %s", err);
        goto out;
    }
    d.engines = &engines;
    engines_log(d.engines);
    /* Before the launcher is forked, which inherits it: the range's users
     * are ours while either process lives. */
    uid_lock = uidlock_acquire(&conf, err, sizeof err);
    if (uid_lock == -1) {
        log_err("%s", err);
        rc = 2; /* as a configuration error: no restart fixes it */
        goto out;
    }
    /* Before any host exists: detection waits for its own children. */
    if (sandbox_check(&d) != 0)
        goto out;
    if (d.sandbox_built &&
        sandbox_cg_init(&d.sandbox, conf.cgroup_parent, err, sizeof err) != 0)
        log_warning("%s: hosts run without cgroup limits", err);
    /* The launcher, forked now, keeps the rights to start and confine
     * hosts; then the master drops them (privdrop.h), before it opens
     * anything clients reach. */
    d.sv = supervise_new(d.base, &conf, d.engines,
                         d.sandbox_built ? &d.sandbox : NULL, &hooks, &d, err,
                         sizeof err);
    if (d.sv == NULL) {
        log_err("cannot start the launcher: %s", err);
        goto out;
    }
    switch (tokenfile_ensure(&conf, err, sizeof err)) {
    case -1:
        log_err("%s", err);
        rc = 2;
        goto out;
    case 1:
        log_notice("listen is set and token_file %s did not exist: made it "
                   "with a new random token (mode 0640); TCP clients must "
                   "present it (wmctl --token-file %s)",
                   conf.token_file, conf.token_file);
        break;
    }
    /* Its sockets are bound and the token read with the daemon's rights
     * (a port below 1024, a token file only root reads); nothing is read
     * from a client before the loop runs, unprivileged. */
    d.api = api_new(&d, err, sizeof err);
    if (d.api == NULL) {
        log_err("api: %s", err);
        goto out;
    }
    /* So is code_source_credentials_file (fetch.h); a fetch's thread
     * starts only later, for a request. */
    d.fetcher = fetch_new(d.base, &conf, err, sizeof err);
    if (d.fetcher == NULL) {
        log_err("%s", err);
        goto out;
    }
    int dropped;
    if (privdrop_master(&conf, &dropped, err, sizeof err) != 0) {
        log_err("%s", err);
        rc = 2; /* as a configuration error: no restart fixes it */
        goto out;
    }
    if (dropped)
        log_notice("master runs as user %s (uid %d); hosts are started by "
                   "the launcher",
                   conf.user, (int)getuid());
    else if (geteuid() == 0)
        log_warning("user = %s: the master keeps root privileges", conf.user);
    static const char *const fsync_words[] = {
        [CONF_FSYNC_ALWAYS] = "always",
        [CONF_FSYNC_BATCH] = "batch",
        [CONF_FSYNC_OFF] = "off",
    };
    struct nats_link_config store_nl = nats_link_of(&conf, "nats store");
    struct store_config sc = {
        .backend = conf.store == CONF_STORE_NATS ? "nats" : "file",
        .state_dir = conf.state_dir,
        .fsync = fsync_words[conf.store_fsync],
        .nats = &store_nl,
        .nats_replicas = conf.nats_kv_replicas,
        .nats_memory = conf.nats_storage == CONF_NATS_STORAGE_MEMORY,
        .nats_prefix = conf.nats_bucket_prefix,
    };
    d.store = store_open(&sc, d.base, err, sizeof err);
    if (d.store == NULL) {
        log_err("store: %s", err);
        goto out;
    }
    if (conf.store == CONF_STORE_NATS)
        log_notice("store: NATS JetStream at %s, buckets %s_state and "
                   "%s_blobs (libnats %s)",
                   conf.nats_url, conf.nats_bucket_prefix,
                   conf.nats_bucket_prefix, store_nats_version());
    quota_defaults_set(&conf);
    if (api_tokens_load(d.store, err, sizeof err) != 0 ||
        api_tenants_load(d.store, err, sizeof err) != 0) {
        log_err("store: tokens and tenants: %s", err);
        goto out;
    }
    if (audit_open(conf.state_dir, err, sizeof err) != 0) {
        log_err("%s", err);
        goto out;
    }
    if (messages_open(&d, err, sizeof err) != 0) {
        log_err("broker: %s", err);
        goto out;
    }
    d.registry = registry_new();
    if (d.registry == NULL) {
        log_err("out of memory");
        goto out;
    }

    struct event *sigterm = evsignal_new(d.base, SIGTERM, on_signal, &d);
    struct event *sigint = evsignal_new(d.base, SIGINT, on_signal, &d);
    struct event *sighup = evsignal_new(d.base, SIGHUP, on_sighup, &d);
    struct event *watchdog = NULL;
    uint64_t wd_usec = 0;
    event_add(sigterm, NULL);
    event_add(sigint, NULL);
    event_add(sighup, NULL);
    if (sd_watchdog_enabled(0, &wd_usec) > 0 && wd_usec > 0) {
        /* Half the interval, as sd_watchdog_enabled(3) advises. */
        struct timeval tv = { .tv_sec = (time_t)(wd_usec / 2000000),
                              .tv_usec = (suseconds_t)(wd_usec / 2 % 1000000) };
        watchdog = event_new(d.base, -1, EV_PERSIST, on_watchdog, &d);
        event_add(watchdog, &tv);
    }

    log_notice("workmanagerd %s started (pid %d, state %s, socket %s)",
               PACKAGE_VERSION, (int)getpid(), conf.state_dir,
               conf.control_socket);
    if (instances_start(&d, err, sizeof err) != 0) {
        log_err("%s", err);
        goto out;
    }
    if (conf.recovery_on_start)
        recovery_start(&d, on_recovered);
    else
        on_recovered(&d);

    event_base_dispatch(d.base);
    log_notice("stopped");
    rc = d.exit_status;

    event_free(sigterm);
    event_free(sigint);
    event_free(sighup);
    if (watchdog)
        event_free(watchdog);
out:
    /* Before the API and the supervisor: a fetch still running answers
     * its request and undoes its worker through them. */
    fetch_free(d.fetcher);
    instances_stop(&d); /* its heartbeat's key removed: queued below */
    if (d.store)
        recovery_lease_release(&d); /* queued below too */
    /* So do the store's writes still queued (a create's record, say),
     * while their requests exist: freeing the API frees them. */
    store_flush(d.store);
    if (d.api)
        api_free(d.api);
    api_tokens_free();
    api_tenants_free();
    tenant_meter_free_all();
    quota_free();
    gateway_free();
    if (d.sv)
        supervise_free(d.sv); /* the launcher removes the cgroups */
    else
        sandbox_cg_fini();
    if (d.locks)
        grouplocks_free(d.locks);
    flow_free(d.flow);
    d.flow = NULL;
    broker_close(d.broker);
    d.broker = NULL; /* no daemon event after this */
    if (d.store)
        store_close(d.store);
    audit_close();
    registry_free(d.registry);
    if (d.engines)
        engines_free(d.engines);
    if (d.base)
        event_base_free(d.base);
    if (uid_lock >= 0)
        close(uid_lock);
    conf_free(&conf);
    return rc;
}
