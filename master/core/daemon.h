/*
 * daemon.h — the master's state, shared by its subsystems.
 *
 * The room master/core/: what the daemon is before any worker exists — its
 * configuration (conf.c: one table of keys, four sources), the engines read
 * from engines.d (engines.c), levelled logging (log.c), address kinds and
 * CIDR networks (netrange.c), the audit trail (audit.c), the drop to an
 * unprivileged user (privdrop.c), each tenant's CPU share
 * (tenant_share.c) and usage counters (tenant_meter.c), and start-up,
 * signals and shutdown
 * (main.c, which alone ties the rooms together).  Apart from main.c,
 * nothing here includes another room; every room may use this one.
 *
 * One struct daemon lives for the whole run of workmanagerd (main.c).  Each
 * subsystem keeps its own state behind its own handle; this struct only
 * ties the handles together so that the API and recovery can reach them.
 */
#ifndef WM_MASTER_DAEMON_H
#define WM_MASTER_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/uuid.h"
#include "sandbox/sandbox.h"

struct event_base;
struct conf;
struct engines;
struct store;
struct registry;
struct supervisor;
struct api;
struct broker;
struct flow;
struct grouplocks;
struct fetcher;
struct instances;

enum daemon_recovery {
    DAEMON_RECOVERY_PENDING = 0, /* not run yet (recovery_on_start=false) */
    DAEMON_RECOVERY_RUNNING,
    DAEMON_RECOVERY_DONE,
    DAEMON_RECOVERY_FAILED, /* the store could not be read */
};

struct daemon {
    struct event_base *base;
    struct conf *conf;
    struct engines *engines;
    struct store *store;
    struct registry *registry;
    struct supervisor *sv;
    struct api *api;
    struct broker *broker;
    struct flow *flow;
    struct grouplocks *locks;
    struct fetcher *fetcher; /* code from URLs (fetch.h) */
    char holder[160];        /* "<instance>/<boot id>": group locks' holder */
    char instance_id[UUID_SIZE]; /* the boot id: this start's (instances.h) */
    struct instances *instances; /* with a shared store; else NULL */
    bool remote_followed;        /* api_remote_workers_start() ran */
    enum daemon_recovery recovery;
    char recovery_error[512];
    unsigned recovered;      /* workers restored by the last recovery */
    unsigned recovery_fails; /* of which failed */
    bool stopping;
    int exit_status; /* workmanagerd's: 1 when the launcher was lost */
    int64_t started_at_ms;
    /* What the machine offers for confinement, detected at start-up; its
     * level is "none" in a build --without-sandbox (hosts confine
     * nothing there, whatever the machine has). */
    struct sandbox_support sandbox;
    bool sandbox_built; /* not --without-sandbox */
};

#endif /* WM_MASTER_DAEMON_H */
