/*
 * conf.c — the daemon's configuration (see conf.h; DESIGN §8).
 *
 * One const table, one row per key, holds everything about a key: its
 * type, range or words, built-in default, environment names, the one line
 * of documentation and where its value lives in struct conf.  The loader,
 * --print-config, the error messages and workmanager.conf(5) all come from
 * the table, so a key cannot exist in one and not the others; adding a key
 * is adding a field and a row.
 *
 * Sources, each overriding the one before:
 *   1. the defaults below (parsed by the same code as every other source);
 *   2. the configuration file, <sysconfdir>/workmanager/workmanager.conf or
 *      --config FILE: `key = value` lines, `#` comments (a whole line, or
 *      after a blank), blank lines, a value in double quotes taken
 *      literally; a key given twice is an error;
 *   3. the environment: WM_<KEY> and, where the original system had one,
 *      its variable (WM_<KEY> wins when both are set);
 *   4. `-o key=value` arguments, the last one of a key winning.
 * Then the derived defaults (control_socket, instance) and the rules
 * between keys.  An unknown key or a bad value stops start-up, naming the
 * source, the key and what is allowed.
 *
 * Types: durations take a whole number in the unit of the key's name, or a
 * number with a unit (`30s`, `5min`; ms, s, m/min, h, d) that converts to a
 * whole number of it; sizes take bytes or K/KiB, M/MiB, G/GiB (all ×1024);
 * booleans true/false, 1/0, yes/no, on/off (as the original); lists are
 * separated by commas or blanks.  Paths must be absolute.
 *
 * Why max_body_bytes is 32 MiB: a create or reload request carries the
 * code base64-encoded, so 32 MiB admits a 24 MiB package (a .NET nupkg
 * with its dependencies, a native zip with debug symbols) while bounding
 * what one request can make the master hold (the body, the parsed JSON and
 * the decoded code: about 90 MiB at the cap); 64 MiB would double that for
 * every concurrent upload with no worker seen needing it.
 *
 * Rules between keys: message_timeout_ms < lock_max_age_ms (a group lock
 * must outlive the processing it guards, DESIGN §6; hence the default
 * message_timeout_ms of 25000 under the lock's 30000); restart_base_delay_ms
 * <= restart_max_delay_ms; heartbeat_timeout_ms < heartbeat_interval_ms
 * (an echo is awaited before the next heartbeat); control_socket fits a
 * unix socket address (107 bytes).
 *
 * The keys are listed below as a markdown table, one row per key, from
 * which workmanager.conf(5) is written; test_conf checks that every key of
 * the table in the code has its row, with its environment names, default
 * and doc string.  The rows are wider than 80 columns
 * because a markdown row cannot wrap.
 */
/* clang-format off */
/*
 * | key | type | default | environment | meaning |
 * |---|---|---|---|---|
 * | `state_dir` | path | `/var/lib/workmanager` | `WM_STATE_DIR` | Where the file store keeps worker records, code blobs and history. |
 * | `runtime_dir` | path | `/run/workmanager` | `WM_RUNTIME_DIR` | Directory for the control socket and other runtime files. |
 * | `control_socket` | path, may be empty | empty: `<runtime_dir>/control.sock` | `WM_CONTROL_SOCKET` | Unix socket of the admin API; empty means control.sock in runtime_dir. |
 * | `control_socket_mode` | octal mode | `0660` | `WM_CONTROL_SOCKET_MODE` | Permissions of the control socket. |
 * | `control_socket_group` | string, may be empty | empty | `WM_CONTROL_SOCKET_GROUP` | Group owning the control socket (name or gid); empty keeps the daemon's group. |
 * | `listen` | string, may be empty | empty | `WM_LISTEN` | TCP address of the admin API as host:port or [ipv6]:port (bearer token required); empty means no TCP listener. |
 * | `token_file` | path | `<sysconfdir>/workmanager/token` | `WM_TOKEN_FILE` | File holding the bearer token that TCP clients must present. |
 * | `store` | enum: file, nats | `file` | `WM_STORE` | State store backend. |
 * | `broker` | enum: embedded, nats | `embedded` | `WM_BROKER` | Message broker. |
 * | `nats_url` | string | `nats://127.0.0.1:4222` | `WM_NATS_URL` | NATS server URLs (comma-separated) for store = nats or broker = nats. |
 * | `journal_fsync` | enum: always, batch, off | `batch` | `WM_JOURNAL_FSYNC` | Durability of accepted events: always (fdatasync before answering, shared by concurrent publishes), batch (written before answering, fdatasync within 100 ms), off (never fdatasync). |
 * | `journal_max_bytes` | size (bytes), 1048576–1099511627776 | `1GiB` | `WM_JOURNAL_MAX_BYTES` | Disk budget of the broker's journal; when reached, publishes answer 503 until deliveries drain it. |
 * | `journal_segment_bytes` | size (bytes), 65536–4294967296 | `64MiB` | `WM_JOURNAL_SEGMENT_BYTES` | Size at which the journal starts a new segment file; segments whose events are all settled are deleted. |
 * | `store_fsync` | enum: always, batch, off | `always` | `WM_STORE_FSYNC` | When the file store fsyncs: each write, per group commit, or never. |
 * | `recovery_on_start` | bool | `true` | `WM_RECOVERY_ON_START`, `WORKER_RECOVERY_ON_START` | Restore every persisted worker before reporting ready; false leaves recovery to POST /v1/recover. |
 * | `recovery_lease_ttl_s` | duration (s), 10–86400 | `300` | `WM_RECOVERY_LEASE_TTL_S`, `WORKER_RECOVERY_LEASE_TTL_SECONDS` | Time to live of the recovery leader lease when several instances share a store. |
 * | `message_timeout_ms` | duration (ms), 10–3600000 | `25000` | `WM_MESSAGE_TIMEOUT_MS` | Default deadline of one event on a host; past it the host is killed (reason timeout). |
 * | `handshake_timeout_ms` | duration (ms), 10–600000 | `2000` | `WM_HANDSHAKE_TIMEOUT_MS` | Time a new host has to send its Hello. |
 * | `heartbeat_interval_ms` | duration (ms), 100–3600000 | `5000` | `WM_HEARTBEAT_INTERVAL_MS` | Interval of heartbeats to an idle host. |
 * | `heartbeat_timeout_ms` | duration (ms), 10–600000 | `2000` | `WM_HEARTBEAT_TIMEOUT_MS` | Time a host has to echo a heartbeat before it is killed. |
 * | `idle_timeout_s` | duration (s), 0–2592000 | `300` | `WM_IDLE_TIMEOUT_S` | Default time after which an idle host is stopped (started again on the next event); 0 = never. |
 * | `shutdown_grace_ms` | duration (ms), 0–600000 | `10000` | `WM_SHUTDOWN_GRACE_MS` | Time hosts have to drain and exit after Shutdown before SIGKILL. |
 * | `restart_base_delay_ms` | duration (ms), 1–3600000 | `200` | `WM_RESTART_BASE_DELAY_MS` | First delay before restarting a crashed host; doubled after each crash. |
 * | `restart_max_delay_ms` | duration (ms), 1–86400000 | `30000` | `WM_RESTART_MAX_DELAY_MS` | Cap of the restart delay. |
 * | `crash_loop_max` | integer, 1–1000 | `5` | `WM_CRASH_LOOP_MAX` | Restarts within crash_loop_window_s after which a worker is left failed. |
 * | `crash_loop_window_s` | duration (s), 1–86400 | `60` | `WM_CRASH_LOOP_WINDOW_S` | Window in which crash_loop_max restarts mean a crash loop. |
 * | `user` | string | `workmanager` | `WM_USER` | User the master becomes after start-up when started as root (a name, or uid[:gid]); the launcher alone keeps root, to start and confine hosts; root keeps the master privileged (not recommended). |
 * | `min_confinement` | string | `none` | `WM_MIN_CONFINEMENT` | Lowest sandbox confinement level the daemon agrees to run hosts under. |
 * | `cgroup_parent` | string | `workmanager` | `WM_CGROUP_PARENT` | Directory under each cgroup hierarchy that holds this daemon's groups (one per host). |
 * | `host_pids_max` | integer, 0–4194304 | `256` | `WM_HOST_PIDS_MAX` | Processes and threads one host may have (cgroup pids.max); 0 = no limit. |
 * | `host_uid_base` | integer, 0–4000000000 | `3000000` | `WM_HOST_UID_BASE` | First uid (and gid) of the range hosts run as, one each, when the daemon runs as root; 0 = hosts keep the daemon's user. |
 * | `host_uid_count` | integer, 1–1000000 | `65536` | `WM_HOST_UID_COUNT` | Size of that range: the most hosts that can run at once. |
 * | `host_cpu_percent` | integer, 0–102400 | `0` | `WM_HOST_CPU_PERCENT` | CPU time one host may use, in percent of one CPU (cgroup cpu quota); 0 = no limit. |
 * | `lock_max_age_ms` | duration (ms), 100–86400000 | `30000` | `WM_LOCK_MAX_AGE_MS` | Age after which a group lock with no write under its token may be stolen; must exceed message_timeout_ms. |
 * | `group_lock_retry_base_delay_ms` | duration (ms), 10–60000 | `500` | `WM_GROUP_LOCK_RETRY_BASE_DELAY_MS`, `GROUP_LOCK_RETRY_BASE_DELAY_MS` | First delay between group lock attempts; doubled after each. |
 * | `group_lock_max_retries` | integer, 1–20 | `3` | `WM_GROUP_LOCK_MAX_RETRIES`, `GROUP_LOCK_MAX_RETRIES` | Group lock attempts before the event is nacked (lock_contention). |
 * | `redelivery_base_delay_ms` | duration (ms), 1–60000 | `200` | `WM_REDELIVERY_BASE_DELAY_MS` | First redelivery delay after a transient failure; doubled each time, capped at 10 s. |
 * | `max_redeliveries` | integer, 0–100 | `3` | `WM_MAX_REDELIVERIES` | Redeliveries of an event before it is dead-lettered. |
 * | `queue_max_events` | integer, 1–10000000 | `10000` | `WM_QUEUE_MAX_EVENTS` | Bound of each subscription's queue; an event that finds it full is dead-lettered (backlog_overflow). |
 * | `allow_in_process_native` | bool | `false` | `WM_ALLOW_IN_PROCESS_NATIVE` | Let native workers created with "isolation": "in-process" run inside the daemon: faster calls, but a crash of such a worker ends the daemon and a timeout cannot stop its call. |
 * | `retry_on_error` | bool | `false` | `WM_RETRY_ON_ERROR` | Redeliver events whose worker reported an error, like a transient failure, instead of acknowledging them. |
 * | `max_body_bytes` | size (bytes), 1024–1073741824 | `32MiB` | `WM_MAX_BODY_BYTES` | Largest admin API request body (code travels base64 in it). |
 * | `max_frame_bytes` | size (bytes), 4096–1073741824 | `16MiB` | `WM_MAX_FRAME_BYTES` | Largest frame between the master and a host, size prefix included. |
 * | `allowed_code_source_hosts` | list | empty | `WM_ALLOWED_CODE_SOURCE_HOSTS`, `ALLOWED_CODE_SOURCE_HOSTS` | Hosts that code URLs may name; empty allows every host. |
 * | `code_source_allow_http` | bool | `false` | `WM_CODE_SOURCE_ALLOW_HTTP` | Let code URLs use http as well as https (no integrity or secrecy in transit: give code.sha256). |
 * | `code_source_allowed_networks` | list | empty | `WM_CODE_SOURCE_ALLOWED_NETWORKS` | Networks (CIDR, or single addresses) that code URLs may reach although they are private, loopback, link-local, CGNAT, unique-local or otherwise not public. |
 * | `code_source_ca_file` | path, may be empty | empty | `WM_CODE_SOURCE_CA_FILE` | PEM file of the certificate authorities trusted for https code sources; empty means the system's. |
 * | `code_source_credentials_file` | path, may be empty | empty | `WM_CODE_SOURCE_CREDENTIALS_FILE` | File of `host = bearer TOKEN` or `host = basic USER:PASSWORD` lines: the credentials sent to each code source host (over https only); empty means none. |
 * | `code_fetch_max_bytes` | size (bytes), 1024–1073741824 | `32MiB` | `WM_CODE_FETCH_MAX_BYTES` | Largest code body fetched from a URL; a larger one is refused. |
 * | `code_fetch_timeout_ms` | duration (ms), 100–3600000 | `30000` | `WM_CODE_FETCH_TIMEOUT_MS` | Time a code fetch may take, redirects included, from the first connection to the last byte. |
 * | `python_allowed_packages` | list | empty | `WM_PYTHON_ALLOWED_PACKAGES`, `PYTHON_ALLOWED_PACKAGES` | Packages Python workers may import beyond the safe standard library set. |
 * | `python_blocked_modules` | list | empty | `WM_PYTHON_BLOCKED_MODULES`, `PYTHON_BLOCKED_MODULES` | Modules Python workers may never import, even when otherwise allowed. |
 * | `python_allowlist` | bool | `true` | `WM_PYTHON_ALLOWLIST` | Enforce the Python import allowlist; off lets Python workers import whatever the host has loaded (for sandbox tests: the seccomp filter still refuses what it refuses). |
 * | `python_preload` | list | empty | `WM_PYTHON_PRELOAD` | Modules the Python host imports before its sandbox without allowing them (with python_allowlist off, workers can reach them: for sandbox tests). |
 * | `engines_dir` | path | `<sysconfdir>/workmanager/engines.d` | `WM_ENGINES_DIR` | Directory of the engine descriptor files (*.engine). |
 * | `libexec_dir` | path | `<libexecdir>/workmanager` | `WM_LIBEXEC_DIR` | Directory of the host binaries named by engine descriptors. |
 * | `instance` | string, may be empty | empty: the host name | `WM_INSTANCE` | Name of this daemon in the source of lifecycle events (urn:workmanager:INSTANCE); empty means the host name. |
 * | `log_level` | enum: debug, info, notice, warning, error | `info` | `WM_LOG_LEVEL` | Least severe level logged. |
 */
/* clang-format on */
#include "config.h"

#include "master/core/conf.h"

#include "lib/errbuf.h"
#include "master/core/netrange.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

/* Build-time paths (Makefile: from sysconfdir and libexecdir). */
#ifndef WM_CONF_FILE
#define WM_CONF_FILE "/etc/workmanager/workmanager.conf"
#endif
#ifndef WM_TOKEN_FILE
#define WM_TOKEN_FILE "/etc/workmanager/token"
#endif
#ifndef WM_ENGINES_DIR
#define WM_ENGINES_DIR "/etc/workmanager/engines.d"
#endif
#ifndef WM_LIBEXEC_DIR
#define WM_LIBEXEC_DIR "/usr/libexec/workmanager"
#endif

#define WHY_MAX 256

/* The offset of `field` in struct conf, which must have type T: a row
 * whose type and field disagree does not compile. */
#define AT(field, T)                                                           \
    _Generic(((struct conf *)0)->field, T : offsetof(struct conf, field))

/* ---- checks of string values ------------------------------------------ */

static bool
is_port(const char *s)
{
    unsigned long n = 0;

    if (*s == '\0' || strlen(s) > 5)
        return false;
    for (; *s != '\0'; s++) {
        if (!isdigit((unsigned char)*s))
            return false;
        n = n * 10 + (unsigned long)(*s - '0');
    }
    return n >= 1 && n <= 65535;
}

/* listen: host:port or [ipv6]:port. */
static int
check_listen(const char *v, char *why, size_t whylen)
{
    const char *port;
    size_t hostlen;

    if (v[0] == '[') {
        const char *close = strchr(v, ']');

        if (close == NULL || close == v + 1 || close[1] != ':')
            goto bad;
        for (const char *p = v + 1; p < close; p++)
            if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
                goto bad;
        port = close + 2;
    } else {
        const char *colon = strrchr(v, ':');

        if (colon == NULL)
            goto bad;
        hostlen = (size_t)(colon - v);
        if (hostlen == 0 || memchr(v, ':', hostlen) != NULL)
            goto bad;
        for (const char *p = v; p < colon; p++)
            if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' &&
                *p != '_')
                goto bad;
        port = colon + 1;
    }
    if (!is_port(port))
        return errbuf_set(why, whylen,
                          "'%s': the port must be a number from 1 to 65535", v);
    return 0;
bad:
    return errbuf_set(why, whylen,
                      "'%s' is not an address: expected host:port or "
                      "[ipv6]:port, e.g. 127.0.0.1:8080",
                      v);
}

/* A group name as useradd(8) accepts it, or a numeric gid. */
static int
check_group(const char *v, char *why, size_t whylen)
{
    size_t n = strlen(v);

    if (n > 32 || v[0] == '-')
        goto bad;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)v[i]) && v[i] != '_' && v[i] != '.' &&
            v[i] != '-')
            goto bad;
    return 0;
bad:
    return errbuf_set(why, whylen,
                      "'%s' is not a group name or gid (letters, digits, "
                      "'_', '.', '-'; at most 32)",
                      v);
}

/* instance: what follows urn:workmanager: in event sources, and the first
 * part of this daemon's name in group lock records ("<instance>/<boot>",
 * which must fit GROUPLOCK_HOLDER_MAX: hence at most 100). */
#define INSTANCE_MAX 100
static int
check_instance(const char *v, char *why, size_t whylen)
{
    size_t n = strlen(v);

    if (n > INSTANCE_MAX)
        goto bad;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)v[i]) && v[i] != '_' && v[i] != '.' &&
            v[i] != '-')
            goto bad;
    return 0;
bad:
    return errbuf_set(why, whylen,
                      "'%s' is not an instance name (letters, digits, '_', "
                      "'.', '-'; at most %d)",
                      v, INSTANCE_MAX);
}

/* code_source_allowed_networks: each entry a network netrange_net_parse()
 * takes, so that a typo stops start-up instead of allowing nothing (or
 * more than meant). */
static int
check_networks(const char *v, char *why, size_t whylen)
{
    const char *p = v;

    for (;;) {
        char one[128];
        struct netrange_net net;
        size_t len;

        p += strspn(p, ", \t");
        if (*p == '\0')
            return 0;
        len = strcspn(p, ", \t");
        if (len >= sizeof(one))
            return errbuf_set(why, whylen, "%.40s...: not a network", p);
        memcpy(one, p, len);
        one[len] = '\0';
        if (netrange_net_parse(one, &net, why, whylen) != 0)
            return -1;
        p += len;
    }
}

/* python_*: module names, dotted Python identifiers of ASCII letters,
 * digits and underscores (the Python host refuses any other, and would
 * then not start). */
static int
check_modules(const char *v, char *why, size_t whylen)
{
    const char *p = v;

    for (;;) {
        p += strspn(p, ", \t");
        if (*p == '\0')
            return 0;
        size_t len = strcspn(p, ", \t");
        bool start = true, ok = len <= 128;
        for (size_t i = 0; ok && i < len; i++) {
            unsigned char c = (unsigned char)p[i];
            if (c == '.') {
                ok = !start;
                start = true;
            } else if (c == '_' || isalpha(c) || (!start && isdigit(c))) {
                start = false;
            } else {
                ok = false;
            }
        }
        if (!ok || start)
            return errbuf_set(why, whylen, "'%.*s' is not a module name",
                              (int)(len > 64 ? 64 : len), p);
        p += len;
    }
}

/* nats_url: comma-separated URLs of the schemes the NATS client takes. */
static int
check_nats_url(const char *v, char *why, size_t whylen)
{
    static const char *const schemes[] = { "nats://", "tls://", "ws://",
                                           "wss://" };
    const char *p = v;

    for (;;) {
        size_t len = strcspn(p, ",");
        bool ok = false;

        for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
            size_t sl = strlen(schemes[i]);

            if (len > sl && strncmp(p, schemes[i], sl) == 0)
                ok = true;
        }
        for (size_t i = 0; ok && i < len; i++)
            if (isspace((unsigned char)p[i]))
                ok = false;
        if (!ok)
            return errbuf_set(why, whylen,
                              "'%.*s' is not a NATS URL (nats://host:port; "
                              "also tls://, ws://, wss://; comma-separated)",
                              (int)len, p);
        if (p[len] == '\0')
            return 0;
        p += len + 1;
    }
}

/* min_confinement (a level's word; main.c checks that it is one) and
 * cgroup_parent (a directory name): a word. */
static int
check_word(const char *v, char *why, size_t whylen)
{
    size_t n = strlen(v);

    if (n == 0 || n > 32)
        goto bad;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)v[i]) && !isdigit((unsigned char)v[i]) &&
            v[i] != '_' && v[i] != '-')
            goto bad;
    return 0;
bad:
    return errbuf_set(why, whylen,
                      "'%s' is not a word (1 to 32 lowercase letters, "
                      "digits, '_', '-')",
                      v);
}

/* user: a user name (as useradd takes them) or uid[:gid]; whether it
 * exists is checked at start-up, as root (privdrop.c). */
static int
check_user(const char *v, char *why, size_t whylen)
{
    size_t n = strlen(v);

    if (n == 0 || n > 32)
        goto bad;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)v[i]) && v[i] != '_' && v[i] != '-' &&
            v[i] != '.' && v[i] != ':')
            goto bad;
    return 0;
bad:
    return errbuf_set(why, whylen,
                      "'%s' is not a user (a name of 1 to 32 letters, "
                      "digits, '_', '-', '.', or uid[:gid])",
                      v);
}

/* ---- the table --------------------------------------------------------- */

static const struct conf_word store_words[] = {
    { "file", CONF_STORE_FILE },
    { "nats", CONF_STORE_NATS },
    { NULL, 0 },
};

static const struct conf_word broker_words[] = {
    { "embedded", CONF_BROKER_EMBEDDED },
    { "nats", CONF_BROKER_NATS },
    { NULL, 0 },
};

static const struct conf_word fsync_words[] = {
    { "always", CONF_FSYNC_ALWAYS },
    { "batch", CONF_FSYNC_BATCH },
    { "off", CONF_FSYNC_OFF },
    { NULL, 0 },
};

static const struct conf_word level_words[] = {
    { "debug", LOG_DEBUG },     { "info", LOG_INFO }, { "notice", LOG_NOTICE },
    { "warning", LOG_WARNING }, { "error", LOG_ERR }, { NULL, 0 },
};

/* Ranges of durations in ms, named for what they bound. */
#define ONE_HOUR_MS 3600000u
#define TEN_MIN_MS 600000u
#define ONE_DAY_MS 86400000u
#define ONE_GIB 1073741824u

static const struct conf_key keys[] = {
    /* Paths and sockets. */
    {
        .name = "state_dir",
        .type = CONF_PATH,
        .def = "/var/lib/workmanager",
        .env = "WM_STATE_DIR",
        .doc = "Where the file store keeps worker records, code blobs and "
               "history.",
        .offset = AT(state_dir, char *),
    },
    {
        .name = "runtime_dir",
        .type = CONF_PATH,
        .def = "/run/workmanager",
        .env = "WM_RUNTIME_DIR",
        .doc = "Directory for the control socket and other runtime files.",
        .offset = AT(runtime_dir, char *),
    },
    {
        .name = "control_socket",
        .type = CONF_PATH,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_CONTROL_SOCKET",
        .doc = "Unix socket of the admin API; empty means control.sock in "
               "runtime_dir.",
        .offset = AT(control_socket, char *),
    },
    {
        .name = "control_socket_mode",
        .type = CONF_MODE,
        .def = "0660",
        .env = "WM_CONTROL_SOCKET_MODE",
        .doc = "Permissions of the control socket.",
        .offset = AT(control_socket_mode, unsigned),
        .max = 0777,
    },
    {
        .name = "control_socket_group",
        .type = CONF_STRING,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_CONTROL_SOCKET_GROUP",
        .doc = "Group owning the control socket (name or gid); empty keeps "
               "the daemon's group.",
        .offset = AT(control_socket_group, char *),
        .check = check_group,
    },
    {
        .name = "listen",
        .type = CONF_STRING,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_LISTEN",
        .doc = "TCP address of the admin API as host:port or [ipv6]:port "
               "(bearer token required); empty means no TCP listener.",
        .offset = AT(listen, char *),
        .check = check_listen,
    },
    {
        .name = "token_file",
        .type = CONF_PATH,
        .def = WM_TOKEN_FILE,
        .env = "WM_TOKEN_FILE",
        .doc = "File holding the bearer token that TCP clients must "
               "present.",
        .offset = AT(token_file, char *),
    },

    /* Backends. */
    {
        .name = "store",
        .type = CONF_ENUM,
        .def = "file",
        .env = "WM_STORE",
        .doc = "State store backend.",
        .offset = AT(store, int),
        .words = store_words,
    },
    {
        .name = "broker",
        .type = CONF_ENUM,
        .def = "embedded",
        .env = "WM_BROKER",
        .doc = "Message broker.",
        .offset = AT(broker, int),
        .words = broker_words,
    },
    {
        .name = "nats_url",
        .type = CONF_STRING,
        .def = "nats://127.0.0.1:4222",
        .env = "WM_NATS_URL",
        .doc = "NATS server URLs (comma-separated) for store = nats or "
               "broker = nats.",
        .offset = AT(nats_url, char *),
        .check = check_nats_url,
    },
    {
        .name = "journal_fsync",
        .type = CONF_ENUM,
        .def = "batch",
        .env = "WM_JOURNAL_FSYNC",
        .doc = "Durability of accepted events: always (fdatasync before "
               "answering, shared by concurrent publishes), batch (written "
               "before answering, fdatasync within 100 ms), off (never "
               "fdatasync).",
        .offset = AT(journal_fsync, int),
        .words = fsync_words,
    },
    {
        .name = "journal_max_bytes",
        .type = CONF_SIZE,
        .def = "1GiB",
        .env = "WM_JOURNAL_MAX_BYTES",
        .doc = "Disk budget of the broker's journal; when reached, publishes "
               "answer 503 until deliveries drain it.",
        .offset = AT(journal_max_bytes, uint64_t),
        .min = 1024 * 1024,
        .max = 1024ull * ONE_GIB,
    },
    {
        .name = "journal_segment_bytes",
        .type = CONF_SIZE,
        .def = "64MiB",
        .env = "WM_JOURNAL_SEGMENT_BYTES",
        .doc = "Size at which the journal starts a new segment file; "
               "segments whose events are all settled are deleted.",
        .offset = AT(journal_segment_bytes, uint64_t),
        .min = 64 * 1024,
        .max = 4ull * ONE_GIB,
    },
    {
        .name = "store_fsync",
        .type = CONF_ENUM,
        .def = "always",
        .env = "WM_STORE_FSYNC",
        .doc = "When the file store fsyncs: each write, per group commit, "
               "or never.",
        .offset = AT(store_fsync, int),
        .words = fsync_words,
    },

    /* Recovery. */
    {
        .name = "recovery_on_start",
        .type = CONF_BOOL,
        .def = "true",
        .env = "WM_RECOVERY_ON_START",
        .env_alt = "WORKER_RECOVERY_ON_START",
        .doc = "Restore every persisted worker before reporting ready; "
               "false leaves recovery to POST /v1/recover.",
        .offset = AT(recovery_on_start, bool),
    },
    {
        .name = "recovery_lease_ttl_s",
        .type = CONF_DURATION_S,
        .def = "300",
        .env = "WM_RECOVERY_LEASE_TTL_S",
        .env_alt = "WORKER_RECOVERY_LEASE_TTL_SECONDS",
        .doc = "Time to live of the recovery leader lease when several "
               "instances share a store.",
        .offset = AT(recovery_lease_ttl_s, uint64_t),
        .min = 10,
        .max = 86400,
    },

    /* Hosts. */
    {
        .name = "message_timeout_ms",
        .type = CONF_DURATION_MS,
        /* Not 30000: it must stay below lock_max_age_ms (30000, the
         * original's lock age), and 5 s leave the time to kill the host
         * and release the lock before it could be stolen. */
        .def = "25000",
        .env = "WM_MESSAGE_TIMEOUT_MS",
        .doc = "Default deadline of one event on a host; past it the host "
               "is killed (reason timeout).",
        .offset = AT(message_timeout_ms, uint64_t),
        .min = 10,
        .max = ONE_HOUR_MS,
    },
    {
        .name = "handshake_timeout_ms",
        .type = CONF_DURATION_MS,
        .def = "2000",
        .env = "WM_HANDSHAKE_TIMEOUT_MS",
        .doc = "Time a new host has to send its Hello.",
        .offset = AT(handshake_timeout_ms, uint64_t),
        .min = 10,
        .max = TEN_MIN_MS,
    },
    {
        .name = "heartbeat_interval_ms",
        .type = CONF_DURATION_MS,
        .def = "5000",
        .env = "WM_HEARTBEAT_INTERVAL_MS",
        .doc = "Interval of heartbeats to an idle host.",
        .offset = AT(heartbeat_interval_ms, uint64_t),
        .min = 100,
        .max = ONE_HOUR_MS,
    },
    {
        .name = "heartbeat_timeout_ms",
        .type = CONF_DURATION_MS,
        .def = "2000",
        .env = "WM_HEARTBEAT_TIMEOUT_MS",
        .doc = "Time a host has to echo a heartbeat before it is killed.",
        .offset = AT(heartbeat_timeout_ms, uint64_t),
        .min = 10,
        .max = TEN_MIN_MS,
    },
    {
        .name = "idle_timeout_s",
        .type = CONF_DURATION_S,
        .def = "300",
        .env = "WM_IDLE_TIMEOUT_S",
        .doc = "Default time after which an idle host is stopped (started "
               "again on the next event); 0 = never.",
        .offset = AT(idle_timeout_s, uint64_t),
        .min = 0,
        .max = 30 * 86400,
    },
    {
        .name = "shutdown_grace_ms",
        .type = CONF_DURATION_MS,
        .def = "10000",
        .env = "WM_SHUTDOWN_GRACE_MS",
        .doc = "Time hosts have to drain and exit after Shutdown before "
               "SIGKILL.",
        .offset = AT(shutdown_grace_ms, uint64_t),
        .min = 0,
        .max = TEN_MIN_MS,
    },
    {
        .name = "restart_base_delay_ms",
        .type = CONF_DURATION_MS,
        .def = "200",
        .env = "WM_RESTART_BASE_DELAY_MS",
        .doc = "First delay before restarting a crashed host; doubled after "
               "each crash.",
        .offset = AT(restart_base_delay_ms, uint64_t),
        .min = 1,
        .max = ONE_HOUR_MS,
    },
    {
        .name = "restart_max_delay_ms",
        .type = CONF_DURATION_MS,
        .def = "30000",
        .env = "WM_RESTART_MAX_DELAY_MS",
        .doc = "Cap of the restart delay.",
        .offset = AT(restart_max_delay_ms, uint64_t),
        .min = 1,
        .max = ONE_DAY_MS,
    },
    {
        .name = "crash_loop_max",
        .type = CONF_UINT,
        .def = "5",
        .env = "WM_CRASH_LOOP_MAX",
        .doc = "Restarts within crash_loop_window_s after which a worker is "
               "left failed.",
        .offset = AT(crash_loop_max, unsigned),
        .min = 1,
        .max = 1000,
    },
    {
        .name = "crash_loop_window_s",
        .type = CONF_DURATION_S,
        .def = "60",
        .env = "WM_CRASH_LOOP_WINDOW_S",
        .doc = "Window in which crash_loop_max restarts mean a crash loop.",
        .offset = AT(crash_loop_window_s, uint64_t),
        .min = 1,
        .max = 86400,
    },
    {
        .name = "min_confinement",
        .type = CONF_STRING,
        .def = "none",
        .env = "WM_MIN_CONFINEMENT",
        .doc = "Lowest sandbox confinement level the daemon agrees to run "
               "hosts under.",
        .offset = AT(min_confinement, char *),
        .check = check_word,
    },
    {
        .name = "user",
        .type = CONF_STRING,
        .def = "workmanager",
        .env = "WM_USER",
        .doc = "User the master becomes after start-up when started as root "
               "(a name, or uid[:gid]); the launcher alone keeps root, to "
               "start and confine hosts; root keeps the master privileged "
               "(not recommended).",
        .offset = AT(user, char *),
        .check = check_user,
    },
    {
        .name = "cgroup_parent",
        .type = CONF_STRING,
        .def = "workmanager",
        .env = "WM_CGROUP_PARENT",
        .doc = "Directory under each cgroup hierarchy that holds this "
               "daemon's groups (one per host).",
        .offset = AT(cgroup_parent, char *),
        .check = check_word,
    },
    {
        .name = "host_pids_max",
        .type = CONF_UINT,
        .def = "256",
        .env = "WM_HOST_PIDS_MAX",
        .doc = "Processes and threads one host may have (cgroup pids.max); "
               "0 = no limit.",
        .offset = AT(host_pids_max, unsigned),
        .min = 0,
        .max = 4194304,
    },
    {
        .name = "host_uid_base",
        .type = CONF_UINT,
        .def = "3000000",
        .env = "WM_HOST_UID_BASE",
        .doc = "First uid (and gid) of the range hosts run as, one each, when "
               "the daemon runs as root; 0 = hosts keep the daemon's user.",
        .offset = AT(host_uid_base, unsigned),
        .min = 0,
        .max = 4000000000u,
    },
    {
        .name = "host_uid_count",
        .type = CONF_UINT,
        .def = "65536",
        .env = "WM_HOST_UID_COUNT",
        .doc = "Size of that range: the most hosts that can run at once.",
        .offset = AT(host_uid_count, unsigned),
        .min = 1,
        .max = 1000000,
    },
    {
        .name = "host_cpu_percent",
        .type = CONF_UINT,
        .def = "0",
        .env = "WM_HOST_CPU_PERCENT",
        .doc = "CPU time one host may use, in percent of one CPU (cgroup cpu "
               "quota); 0 = no limit.",
        .offset = AT(host_cpu_percent, unsigned),
        .min = 0,
        .max = 102400,
    },

    /* Messages. */
    {
        .name = "lock_max_age_ms",
        .type = CONF_DURATION_MS,
        .def = "30000",
        .env = "WM_LOCK_MAX_AGE_MS",
        .doc = "Age after which a group lock with no write under its token "
               "may be stolen; must exceed message_timeout_ms.",
        .offset = AT(lock_max_age_ms, uint64_t),
        .min = 100,
        .max = ONE_DAY_MS,
    },
    {
        .name = "group_lock_retry_base_delay_ms",
        .type = CONF_DURATION_MS,
        .def = "500",
        .env = "WM_GROUP_LOCK_RETRY_BASE_DELAY_MS",
        .env_alt = "GROUP_LOCK_RETRY_BASE_DELAY_MS",
        .doc = "First delay between group lock attempts; doubled after "
               "each.",
        .offset = AT(group_lock_retry_base_delay_ms, uint64_t),
        .min = 10,
        .max = 60000,
    },
    {
        .name = "group_lock_max_retries",
        .type = CONF_UINT,
        .def = "3",
        .env = "WM_GROUP_LOCK_MAX_RETRIES",
        .env_alt = "GROUP_LOCK_MAX_RETRIES",
        .doc = "Group lock attempts before the event is nacked "
               "(lock_contention).",
        .offset = AT(group_lock_max_retries, unsigned),
        .min = 1,
        .max = 20,
    },
    {
        .name = "redelivery_base_delay_ms",
        .type = CONF_DURATION_MS,
        .def = "200",
        .env = "WM_REDELIVERY_BASE_DELAY_MS",
        .doc = "First redelivery delay after a transient failure; doubled "
               "each time, capped at 10 s.",
        .offset = AT(redelivery_base_delay_ms, uint64_t),
        .min = 1,
        .max = 60000,
    },
    {
        .name = "max_redeliveries",
        .type = CONF_UINT,
        .def = "3",
        .env = "WM_MAX_REDELIVERIES",
        .doc = "Redeliveries of an event before it is dead-lettered.",
        .offset = AT(max_redeliveries, unsigned),
        .min = 0,
        .max = 100,
    },
    {
        .name = "queue_max_events",
        .type = CONF_UINT,
        .def = "10000",
        .env = "WM_QUEUE_MAX_EVENTS",
        .doc = "Bound of each subscription's queue; an event that finds it "
               "full is dead-lettered (backlog_overflow).",
        .offset = AT(queue_max_events, unsigned),
        .min = 1,
        .max = 10000000,
    },
    {
        .name = "allow_in_process_native",
        .type = CONF_BOOL,
        .def = "false",
        .env = "WM_ALLOW_IN_PROCESS_NATIVE",
        .doc = "Let native workers created with \"isolation\": \"in-process\" "
               "run inside the daemon: faster calls, but a crash of such a "
               "worker ends the daemon and a timeout cannot stop its call.",
        .offset = AT(allow_in_process_native, bool),
    },
    {
        .name = "retry_on_error",
        .type = CONF_BOOL,
        .def = "false",
        .env = "WM_RETRY_ON_ERROR",
        .doc = "Redeliver events whose worker reported an error, like a "
               "transient failure, instead of acknowledging them.",
        .offset = AT(retry_on_error, bool),
    },

    /* Limits. */
    {
        .name = "max_body_bytes",
        .type = CONF_SIZE,
        .def = "32MiB",
        .env = "WM_MAX_BODY_BYTES",
        .doc = "Largest admin API request body (code travels base64 in "
               "it).",
        .offset = AT(max_body_bytes, uint64_t),
        .min = 1024,
        .max = ONE_GIB,
    },
    {
        .name = "max_frame_bytes",
        .type = CONF_SIZE,
        .def = "16MiB",
        .env = "WM_MAX_FRAME_BYTES",
        .doc = "Largest frame between the master and a host, size prefix "
               "included.",
        .offset = AT(max_frame_bytes, uint64_t),
        .min = 4096,
        .max = ONE_GIB,
    },

    /* Code and engines' policies. */
    {
        .name = "allowed_code_source_hosts",
        .type = CONF_LIST,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_ALLOWED_CODE_SOURCE_HOSTS",
        .env_alt = "ALLOWED_CODE_SOURCE_HOSTS",
        .doc = "Hosts that code URLs may name; empty allows every host.",
        .offset = AT(allowed_code_source_hosts, struct conf_list),
    },
    {
        .name = "code_source_allow_http",
        .type = CONF_BOOL,
        .def = "false",
        .env = "WM_CODE_SOURCE_ALLOW_HTTP",
        .doc = "Let code URLs use http as well as https (no integrity or "
               "secrecy in transit: give code.sha256).",
        .offset = AT(code_source_allow_http, bool),
    },
    {
        .name = "code_source_allowed_networks",
        .type = CONF_LIST,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_CODE_SOURCE_ALLOWED_NETWORKS",
        .doc = "Networks (CIDR, or single addresses) that code URLs may "
               "reach although they are private, loopback, link-local, "
               "CGNAT, unique-local or otherwise not public.",
        .offset = AT(code_source_allowed_networks, struct conf_list),
        .check = check_networks,
    },
    {
        .name = "code_source_ca_file",
        .type = CONF_PATH,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_CODE_SOURCE_CA_FILE",
        .doc = "PEM file of the certificate authorities trusted for https "
               "code sources; empty means the system's.",
        .offset = AT(code_source_ca_file, char *),
    },
    {
        .name = "code_source_credentials_file",
        .type = CONF_PATH,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_CODE_SOURCE_CREDENTIALS_FILE",
        .doc = "File of `host = bearer TOKEN` or `host = basic "
               "USER:PASSWORD` lines: the credentials sent to each code "
               "source host (over https only); empty means none.",
        .offset = AT(code_source_credentials_file, char *),
    },
    {
        .name = "code_fetch_max_bytes",
        .type = CONF_SIZE,
        /* As max_body_bytes: what one create may make the master hold. */
        .def = "32MiB",
        .env = "WM_CODE_FETCH_MAX_BYTES",
        .doc = "Largest code body fetched from a URL; a larger one is "
               "refused.",
        .offset = AT(code_fetch_max_bytes, uint64_t),
        .min = 1024,
        .max = ONE_GIB,
    },
    {
        .name = "code_fetch_timeout_ms",
        .type = CONF_DURATION_MS,
        /* The create or reload waits for it: long enough for a large
         * package over a slow link, short enough that a client's own
         * timeout (often 60 s) has not given up first. */
        .def = "30000",
        .env = "WM_CODE_FETCH_TIMEOUT_MS",
        .doc = "Time a code fetch may take, redirects included, from the "
               "first connection to the last byte.",
        .offset = AT(code_fetch_timeout_ms, uint64_t),
        .min = 100,
        .max = ONE_HOUR_MS,
    },
    {
        .name = "python_allowed_packages",
        .type = CONF_LIST,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_PYTHON_ALLOWED_PACKAGES",
        .env_alt = "PYTHON_ALLOWED_PACKAGES",
        .doc = "Packages Python workers may import beyond the safe standard "
               "library set.",
        .check = check_modules,
        .offset = AT(python_allowed_packages, struct conf_list),
    },
    {
        .name = "python_blocked_modules",
        .type = CONF_LIST,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_PYTHON_BLOCKED_MODULES",
        .env_alt = "PYTHON_BLOCKED_MODULES",
        .doc = "Modules Python workers may never import, even when "
               "otherwise allowed.",
        .check = check_modules,
        .offset = AT(python_blocked_modules, struct conf_list),
    },
    {
        .name = "python_allowlist",
        .type = CONF_BOOL,
        .def = "true",
        .env = "WM_PYTHON_ALLOWLIST",
        /* Off only to test the sandbox: the kernel's answer is then what
         * a worker's import of anything meets. */
        .doc = "Enforce the Python import allowlist; off lets Python workers "
               "import whatever the host has loaded (for sandbox tests: the "
               "seccomp filter still refuses what it refuses).",
        .offset = AT(python_allowlist, bool),
    },
    {
        .name = "python_preload",
        .type = CONF_LIST,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_PYTHON_PRELOAD",
        .doc = "Modules the Python host imports before its sandbox without "
               "allowing them (with python_allowlist off, workers can reach "
               "them: for sandbox tests).",
        .check = check_modules,
        .offset = AT(python_preload, struct conf_list),
    },
    {
        .name = "engines_dir",
        .type = CONF_PATH,
        .def = WM_ENGINES_DIR,
        .env = "WM_ENGINES_DIR",
        .doc = "Directory of the engine descriptor files (*.engine).",
        .offset = AT(engines_dir, char *),
    },
    {
        .name = "libexec_dir",
        .type = CONF_PATH,
        .def = WM_LIBEXEC_DIR,
        .env = "WM_LIBEXEC_DIR",
        .doc = "Directory of the host binaries named by engine descriptors.",
        .offset = AT(libexec_dir, char *),
    },
    {
        .name = "instance",
        .type = CONF_STRING,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_INSTANCE",
        .doc = "Name of this daemon in the source of lifecycle events "
               "(urn:workmanager:INSTANCE); empty means the host name.",
        .offset = AT(instance, char *),
        .check = check_instance,
    },
    {
        .name = "log_level",
        .type = CONF_ENUM,
        .def = "info",
        .env = "WM_LOG_LEVEL",
        .doc = "Least severe level logged.",
        .offset = AT(log_level, int),
        .words = level_words,
    },
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

const struct conf_key *
conf_keys(size_t *n)
{
    *n = NKEYS;
    return keys;
}

const char *
conf_default_file(void)
{
    return WM_CONF_FILE;
}

static ssize_t
key_index(const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].name, name) == 0)
            return (ssize_t)i;
    return -1;
}

const struct conf_key *
conf_key_find(const char *name)
{
    ssize_t i = key_index(name);

    return i < 0 ? NULL : &keys[i];
}

/* ---- values ------------------------------------------------------------ */

static void *
field(struct conf *c, const struct conf_key *k)
{
    return (char *)c + k->offset;
}

static const void *
cfield(const struct conf *c, const struct conf_key *k)
{
    return (const char *)c + k->offset;
}

static void
list_free(struct conf_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static const char *
unit_name(const struct conf_key *k)
{
    switch (k->type) {
    case CONF_DURATION_MS:
        return " ms";
    case CONF_DURATION_S:
        return " s";
    case CONF_SIZE:
        return " bytes";
    default:
        return "";
    }
}

/* Reads the decimal digits at *s into *out, advancing *s; false when
 * there are none or the number passes UINT64_MAX. */
static bool
read_u64(const char **s, uint64_t *out)
{
    const char *p = *s;
    uint64_t n = 0;

    if (!isdigit((unsigned char)*p))
        return false;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');

        if (n > (UINT64_MAX - d) / 10)
            return false;
        n = n * 10 + d;
    }
    *s = p;
    *out = n;
    return true;
}

static void
skip_blanks(const char **s)
{
    while (**s == ' ' || **s == '\t')
        (*s)++;
}

static const struct {
    const char *name;
    uint64_t ms;
} duration_units[] = {
    { "ms", 1 },      { "s", 1000 },    { "m", 60000 },
    { "min", 60000 }, { "h", 3600000 }, { "d", 86400000 },
};

static const struct {
    const char *name;
    uint64_t bytes;
} size_units[] = {
    { "b", 1 },          { "k", 1u << 10 }, { "kb", 1u << 10 },
    { "kib", 1u << 10 }, { "m", 1u << 20 }, { "mb", 1u << 20 },
    { "mib", 1u << 20 }, { "g", 1u << 30 }, { "gb", 1u << 30 },
    { "gib", 1u << 30 },
};

/* Parses a number of key k's type (uint, duration, size) into *out. */
static int
parse_number(const struct conf_key *k, const char *v, uint64_t *out, char *why,
             size_t whylen)
{
    const char *p = v;
    uint64_t n, mult = 1, unit = 1;
    const char *what = "a whole number";
    const char *units = "";

    switch (k->type) {
    case CONF_DURATION_MS:
        what = "a duration";
        units = " (a number of ms, or with a unit: ms, s, min, h, d)";
        break;
    case CONF_DURATION_S:
        what = "a duration";
        units = " (a number of s, or with a unit: ms, s, min, h, d)";
        unit = 1000;
        break;
    case CONF_SIZE:
        what = "a size";
        units = " (a number of bytes, or with a unit: K, M, G = KiB, MiB, "
                "GiB)";
        break;
    default:
        break;
    }
    if (!read_u64(&p, &n)) {
        if (isdigit((unsigned char)*p))
            return errbuf_set(why, whylen, "'%s' is too large", v);
        goto bad;
    }
    skip_blanks(&p);
    if (*p != '\0') {
        bool found = false;

        if (k->type == CONF_DURATION_MS || k->type == CONF_DURATION_S) {
            for (size_t i = 0;
                 i < sizeof(duration_units) / sizeof(duration_units[0]); i++)
                if (strcmp(p, duration_units[i].name) == 0) {
                    mult = duration_units[i].ms;
                    found = true;
                }
        } else if (k->type == CONF_SIZE) {
            for (size_t i = 0; i < sizeof(size_units) / sizeof(size_units[0]);
                 i++)
                if (strcasecmp(p, size_units[i].name) == 0) {
                    mult = size_units[i].bytes;
                    found = true;
                }
        }
        if (!found)
            goto bad;
        if (n > UINT64_MAX / mult)
            return errbuf_set(why, whylen, "'%s' is too large", v);
        n *= mult;
        if (n % unit != 0)
            return errbuf_set(why, whylen,
                              "'%s' is not a whole number of seconds", v);
        n /= unit;
    }
    if (n < k->min)
        return errbuf_set(why, whylen, "%s is below the minimum %llu%s", v,
                          (unsigned long long)k->min, unit_name(k));
    if (n > k->max)
        return errbuf_set(why, whylen, "%s is above the maximum %llu%s", v,
                          (unsigned long long)k->max, unit_name(k));
    *out = n;
    return 0;
bad:
    return errbuf_set(why, whylen, "'%s' is not %s%s, from %llu to %llu%s", v,
                      what, units, (unsigned long long)k->min,
                      (unsigned long long)k->max, unit_name(k));
}

static int
parse_bool(const char *v, bool *out, char *why, size_t whylen)
{
    static const char *const yes[] = { "true", "1", "yes", "on" };
    static const char *const no[] = { "false", "0", "no", "off" };

    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return errbuf_set(why, whylen,
                      "'%s' is not a boolean: use true/false, 1/0, yes/no or "
                      "on/off",
                      v);
}

static int
parse_enum(const struct conf_key *k, const char *v, int *out, char *why,
           size_t whylen)
{
    char allowed[WHY_MAX] = "";
    size_t used = 0;

    for (const struct conf_word *w = k->words; w->name != NULL; w++) {
        int n;

        if (strcasecmp(v, w->name) == 0) {
            *out = w->value;
            return 0;
        }
        n = snprintf(allowed + used, sizeof(allowed) - used, "%s%s",
                     used > 0 ? ", " : "", w->name);
        if (n > 0 && (size_t)n < sizeof(allowed) - used)
            used += (size_t)n;
    }
    return errbuf_set(why, whylen, "'%s' is not one of: %s", v, allowed);
}

static int
parse_mode(const char *v, unsigned *out, char *why, size_t whylen)
{
    unsigned m = 0;

    if (*v == '\0' || strlen(v) > 4)
        goto bad;
    for (const char *p = v; *p != '\0'; p++) {
        if (*p < '0' || *p > '7')
            goto bad;
        m = m * 8 + (unsigned)(*p - '0');
    }
    if (m > 0777)
        goto bad;
    *out = m;
    return 0;
bad:
    return errbuf_set(why, whylen,
                      "'%s' is not a file mode: expected octal digits, at most "
                      "0777, e.g. 0660",
                      v);
}

static int
parse_list(const char *v, struct conf_list *out, char *why, size_t whylen)
{
    struct conf_list l = { NULL, 0 };
    const char *p = v;

    for (;;) {
        size_t len;
        char **nv;

        p += strspn(p, ", \t");
        if (*p == '\0')
            break;
        len = strcspn(p, ", \t");
        nv = realloc(l.v, (l.n + 1) * sizeof(*nv));
        if (nv == NULL)
            goto oom;
        l.v = nv;
        l.v[l.n] = strndup(p, len);
        if (l.v[l.n] == NULL)
            goto oom;
        l.n++;
        p += len;
    }
    *out = l;
    return 0;
oom:
    list_free(&l);
    return errbuf_set(why, whylen, "out of memory");
}

/* Control characters have no place in any value (and would break logs and
 * --print-config). */
static int
check_text(const char *v, char *why, size_t whylen)
{
    for (const unsigned char *p = (const unsigned char *)v; *p != '\0'; p++)
        if (*p < 0x20 || *p == 0x7f)
            return errbuf_set(why, whylen,
                              "the value holds a control character (\\x%02x)",
                              *p);
    return 0;
}

/* Parses text v as key k's value and stores it in c (freeing the value it
 * replaces).  Returns 0, or -1 with what is wrong in why. */
static int
value_set(struct conf *c, const struct conf_key *k, const char *v, char *why,
          size_t whylen)
{
    void *f = field(c, k);
    uint64_t n;

    if (check_text(v, why, whylen) < 0)
        return -1;
    if (*v == '\0' && !(k->flags & CONF_F_EMPTY_OK) && k->type != CONF_BOOL)
        return errbuf_set(why, whylen, "the value is empty");
    switch (k->type) {
    case CONF_PATH:
        if (*v != '\0' && *v != '/')
            return errbuf_set(why, whylen, "'%s' is not an absolute path", v);
        /* fall through */
    case CONF_STRING: {
        char *s;

        if (*v != '\0' && k->check != NULL && k->check(v, why, whylen) < 0)
            return -1;
        s = strdup(v);
        if (s == NULL)
            return errbuf_set(why, whylen, "out of memory");
        free(*(char **)f);
        *(char **)f = s;
        return 0;
    }
    case CONF_BOOL:
        return parse_bool(v, (bool *)f, why, whylen);
    case CONF_UINT:
        if (parse_number(k, v, &n, why, whylen) < 0)
            return -1;
        if (n > UINT_MAX) /* a row whose max does not fit its field */
            return errbuf_set(why, whylen, "%s does not fit", v);
        *(unsigned *)f = (unsigned)n;
        return 0;
    case CONF_DURATION_MS:
    case CONF_DURATION_S:
    case CONF_SIZE:
        return parse_number(k, v, (uint64_t *)f, why, whylen);
    case CONF_MODE:
        return parse_mode(v, (unsigned *)f, why, whylen);
    case CONF_ENUM:
        return parse_enum(k, v, (int *)f, why, whylen);
    case CONF_LIST: {
        struct conf_list l;

        if (*v != '\0' && k->check != NULL && k->check(v, why, whylen) < 0)
            return -1;
        if (parse_list(v, &l, why, whylen) < 0)
            return -1;
        list_free((struct conf_list *)f);
        *(struct conf_list *)f = l;
        return 0;
    }
    }
    return errbuf_set(why, whylen, "unknown type");
}

static void
format_size(uint64_t n, char *buf, size_t len)
{
    if (n != 0 && n % (1u << 30) == 0)
        snprintf(buf, len, "%lluGiB", (unsigned long long)(n >> 30));
    else if (n != 0 && n % (1u << 20) == 0)
        snprintf(buf, len, "%lluMiB", (unsigned long long)(n >> 20));
    else if (n != 0 && n % (1u << 10) == 0)
        snprintf(buf, len, "%lluKiB", (unsigned long long)(n >> 10));
    else
        snprintf(buf, len, "%llu", (unsigned long long)n);
}

static void
format_value(const struct conf *c, const struct conf_key *k, char *buf,
             size_t len)
{
    const void *f = cfield(c, k);

    if (len == 0)
        return;
    buf[0] = '\0';
    switch (k->type) {
    case CONF_PATH:
    case CONF_STRING: {
        const char *s = *(char *const *)f;

        snprintf(buf, len, "%s", s != NULL ? s : "");
        break;
    }
    case CONF_BOOL:
        snprintf(buf, len, "%s", *(const bool *)f ? "true" : "false");
        break;
    case CONF_UINT:
        snprintf(buf, len, "%u", *(const unsigned *)f);
        break;
    case CONF_DURATION_MS:
    case CONF_DURATION_S:
        snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)f);
        break;
    case CONF_SIZE:
        format_size(*(const uint64_t *)f, buf, len);
        break;
    case CONF_MODE:
        snprintf(buf, len, "%04o", *(const unsigned *)f);
        break;
    case CONF_ENUM:
        for (const struct conf_word *w = k->words; w->name != NULL; w++)
            if (w->value == *(const int *)f) {
                snprintf(buf, len, "%s", w->name);
                break;
            }
        break;
    case CONF_LIST: {
        const struct conf_list *l = f;
        size_t used = 0;

        for (size_t i = 0; i < l->n && used < len; i++) {
            int n = snprintf(buf + used, len - used, "%s%s", i > 0 ? "," : "",
                             l->v[i]);

            if (n < 0)
                break;
            used += (size_t)n;
        }
        break;
    }
    }
}

int
conf_value_format(const struct conf *c, const char *name, char *buf, size_t len)
{
    ssize_t i = key_index(name);

    if (i < 0)
        return -1;
    format_value(c, &keys[i], buf, len);
    return 0;
}

static void
format_origin(const struct conf *c, size_t i, char *buf, size_t len)
{
    const struct conf_origin *o =
        c->origin != NULL ? &c->origin[i] : &(struct conf_origin){ 0 };

    switch (o->source) {
    case CONF_SRC_DEFAULT:
        snprintf(buf, len, "default");
        break;
    case CONF_SRC_FILE:
        snprintf(buf, len, "file %s:%u", c->file != NULL ? c->file : "?",
                 o->line);
        break;
    case CONF_SRC_ENV:
        snprintf(buf, len, "environment %s", o->env);
        break;
    case CONF_SRC_ARG:
        snprintf(buf, len, "-o");
        break;
    case CONF_SRC_DERIVED:
        if (strcmp(keys[i].name, "control_socket") == 0)
            snprintf(buf, len, "derived from runtime_dir");
        else if (strcmp(keys[i].name, "instance") == 0)
            snprintf(buf, len, "derived from the host name");
        else
            snprintf(buf, len, "derived");
        break;
    }
}

int
conf_origin_format(const struct conf *c, const char *name, char *buf,
                   size_t len)
{
    ssize_t i = key_index(name);

    if (i < 0)
        return -1;
    format_origin(c, (size_t)i, buf, len);
    return 0;
}

/* ---- sources ----------------------------------------------------------- */

/* The edit distance of a and b, to suggest a key for a misspelt one;
 * capped: names longer than 63 bytes are not compared. */
static size_t
distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t row[64];

    if (la >= 64 || lb >= 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];

        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (tolower((unsigned char)a[i - 1]) !=
                                  tolower((unsigned char)b[j - 1]));

            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* "unknown key 'x'", with the nearest key when one is close. */
static void
unknown_key(const char *name, char *why, size_t whylen)
{
    const char *best = NULL;
    size_t bestd = 3;

    for (size_t i = 0; i < NKEYS; i++) {
        size_t d = distance(name, keys[i].name);

        if (d < bestd) {
            bestd = d;
            best = keys[i].name;
        }
    }
    if (best != NULL)
        snprintf(why, whylen, "unknown key '%s' (did you mean %s?)", name,
                 best);
    else
        snprintf(why, whylen, "unknown key '%s'", name);
}

int
conf_line_split(char *line, char **key, char **value, char *why, size_t whylen)
{
    char *p = line, *eq, *end, *v;

    *key = NULL;
    *value = NULL;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '\0' || *p == '#')
        return 0;
    for (const unsigned char *u = (const unsigned char *)p; *u != '\0'; u++)
        if ((*u < 0x20 && *u != '\t') || *u == 0x7f)
            return errbuf_set(why, whylen, "control character (\\x%02x)", *u);
    eq = strchr(p, '=');
    if (eq == NULL)
        return errbuf_set(why, whylen, "expected key = value");
    for (end = eq; end > p && (end[-1] == ' ' || end[-1] == '\t'); end--)
        ;
    if (end == p)
        return errbuf_set(why, whylen, "no key before '='");
    *end = '\0';
    v = eq + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    if (*v == '"') {
        char *close = strchr(v + 1, '"');
        char *rest;

        if (close == NULL)
            return errbuf_set(why, whylen, "unterminated quote");
        rest = close + 1;
        while (*rest == ' ' || *rest == '\t')
            rest++;
        if (*rest != '\0' && *rest != '#')
            return errbuf_set(why, whylen, "text after the closing quote");
        *close = '\0';
        v++;
    } else {
        for (char *q = v; *q != '\0'; q++)
            if (*q == '#' && q > v && (q[-1] == ' ' || q[-1] == '\t')) {
                *q = '\0';
                break;
            }
        if (*v == '#')
            *v = '\0';
        for (end = v + strlen(v);
             end > v && (end[-1] == ' ' || end[-1] == '\t'); end--)
            ;
        *end = '\0';
    }
    *key = p;
    *value = v;
    return 0;
}

/* Trims blanks around s in place. */
static char *
trim(char *s)
{
    char *end;

    while (*s == ' ' || *s == '\t')
        s++;
    end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *end = '\0';
    return s;
}

static int
load_file(struct conf *c, const char *path, bool explicit_file, char *err,
          size_t errlen)
{
    char why[WHY_MAX];
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    ssize_t n;
    FILE *f;
    int rc = -1;

    f = fopen(path, "re");
    if (f == NULL) {
        if (errno == ENOENT && !explicit_file)
            return 0;
        return errbuf_set(err, errlen, "cannot read configuration file %s: %s",
                          path, strerror(errno));
    }
    c->file = strdup(path);
    if (c->file == NULL) {
        errbuf_set(err, errlen, "out of memory");
        goto out;
    }
    while ((n = getline(&line, &cap, f)) >= 0) {
        char *p = line, *key, *value;
        ssize_t i;

        lineno++;
        if ((size_t)n != strlen(line)) {
            errbuf_set(err, errlen, "%s:%u: NUL byte in the line", path,
                       lineno);
            goto out;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        /* A byte order mark some editors write. */
        if (lineno == 1 && strncmp(p, "\xef\xbb\xbf", 3) == 0)
            p += 3;
        if (conf_line_split(p, &key, &value, why, sizeof(why)) < 0) {
            errbuf_set(err, errlen, "%s:%u: %s", path, lineno, why);
            goto out;
        }
        if (key == NULL)
            continue;
        i = key_index(key);
        if (i < 0) {
            unknown_key(key, why, sizeof(why));
            errbuf_set(err, errlen, "%s:%u: %s", path, lineno, why);
            goto out;
        }
        if (c->origin[i].source == CONF_SRC_FILE) {
            errbuf_set(err, errlen, "%s:%u: %s is already set at line %u", path,
                       lineno, key, c->origin[i].line);
            goto out;
        }
        if (value_set(c, &keys[i], value, why, sizeof(why)) < 0) {
            errbuf_set(err, errlen, "%s:%u: %s: %s", path, lineno, key, why);
            goto out;
        }
        c->origin[i] = (struct conf_origin){ CONF_SRC_FILE, lineno, NULL };
    }
    if (ferror(f)) {
        errbuf_set(err, errlen, "cannot read configuration file %s: %s", path,
                   strerror(errno));
        goto out;
    }
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

static int
load_env_var(struct conf *c, size_t i, const char *var, char *err,
             size_t errlen)
{
    char why[WHY_MAX];
    const char *raw = getenv(var);
    char *v;
    int rc;

    if (raw == NULL)
        return 0;
    v = strdup(raw);
    if (v == NULL)
        return errbuf_set(err, errlen, "out of memory");
    rc = value_set(c, &keys[i], trim(v), why, sizeof(why));
    free(v);
    if (rc < 0)
        return errbuf_set(err, errlen, "environment %s: %s: %s", var,
                          keys[i].name, why);
    c->origin[i] = (struct conf_origin){ CONF_SRC_ENV, 0, var };
    return 0;
}

static int
load_env(struct conf *c, char *err, size_t errlen)
{
    /* The original's name first, so that WM_<KEY> wins over it. */
    for (size_t i = 0; i < NKEYS; i++) {
        if (keys[i].env_alt != NULL &&
            load_env_var(c, i, keys[i].env_alt, err, errlen) < 0)
            return -1;
        if (load_env_var(c, i, keys[i].env, err, errlen) < 0)
            return -1;
    }
    return 0;
}

static int
load_overrides(struct conf *c, char *const *ov, size_t nov, char *err,
               size_t errlen)
{
    char why[WHY_MAX];

    for (size_t j = 0; j < nov; j++) {
        char *copy = strdup(ov[j]), *eq, *key;
        ssize_t i;
        int rc;

        if (copy == NULL)
            return errbuf_set(err, errlen, "out of memory");
        eq = strchr(copy, '=');
        if (eq == NULL) {
            free(copy);
            return errbuf_set(err, errlen, "-o %s: expected key=value", ov[j]);
        }
        *eq = '\0';
        key = trim(copy);
        i = key_index(key);
        if (i < 0) {
            unknown_key(key, why, sizeof(why));
            free(copy);
            return errbuf_set(err, errlen, "-o %s: %s", ov[j], why);
        }
        rc = value_set(c, &keys[i], trim(eq + 1), why, sizeof(why));
        free(copy);
        if (rc < 0)
            return errbuf_set(err, errlen, "-o %s: %s: %s", ov[j], keys[i].name,
                              why);
        c->origin[i] = (struct conf_origin){ CONF_SRC_ARG, 0, NULL };
    }
    return 0;
}

static int
derive(struct conf *c, char *err, size_t errlen)
{
    char why[WHY_MAX];

    if (c->control_socket[0] == '\0') {
        size_t n = strlen(c->runtime_dir) + sizeof("/control.sock");
        char *s = malloc(n);

        if (s == NULL)
            return errbuf_set(err, errlen, "out of memory");
        snprintf(s, n, "%s%s", c->runtime_dir,
                 strcmp(c->runtime_dir, "/") == 0 ? "control.sock"
                                                  : "/control.sock");
        free(c->control_socket);
        c->control_socket = s;
        c->origin[key_index("control_socket")].source = CONF_SRC_DERIVED;
    }
    if (c->instance[0] == '\0') {
        char host[256];
        char *s;

        if (gethostname(host, sizeof(host)) < 0)
            return errbuf_set(err, errlen,
                              "instance: cannot read the host name (%s): set "
                              "instance",
                              strerror(errno));
        host[sizeof(host) - 1] = '\0';
        if (check_instance(host, why, sizeof(why)) < 0 || host[0] == '\0')
            return errbuf_set(err, errlen,
                              "instance: the host name cannot be used: %s; set "
                              "instance",
                              host[0] == '\0' ? "it is empty" : why);
        s = strdup(host);
        if (s == NULL)
            return errbuf_set(err, errlen, "out of memory");
        free(c->instance);
        c->instance = s;
        c->origin[key_index("instance")].source = CONF_SRC_DERIVED;
    }
    return 0;
}

/* "key (value, source)" for messages about rules between keys. */
static void
describe(const struct conf *c, const char *name, char *buf, size_t len)
{
    char value[128], origin[WHY_MAX];

    conf_value_format(c, name, value, sizeof(value));
    conf_origin_format(c, name, origin, sizeof(origin));
    snprintf(buf, len, "%s (%s, %s)", name, value, origin);
}

static int
check_rules(const struct conf *c, char *err, size_t errlen)
{
    char a[WHY_MAX + 192], b[WHY_MAX + 192];
    struct sockaddr_un sun;

    if (c->message_timeout_ms >= c->lock_max_age_ms) {
        describe(c, "message_timeout_ms", a, sizeof(a));
        describe(c, "lock_max_age_ms", b, sizeof(b));
        return errbuf_set(err, errlen,
                          "%s must be less than %s: a group lock must outlive "
                          "the processing it guards",
                          a, b);
    }
    if (c->restart_base_delay_ms > c->restart_max_delay_ms) {
        describe(c, "restart_base_delay_ms", a, sizeof(a));
        describe(c, "restart_max_delay_ms", b, sizeof(b));
        return errbuf_set(err, errlen, "%s must not exceed %s", a, b);
    }
    if (c->heartbeat_timeout_ms >= c->heartbeat_interval_ms) {
        describe(c, "heartbeat_timeout_ms", a, sizeof(a));
        describe(c, "heartbeat_interval_ms", b, sizeof(b));
        return errbuf_set(err, errlen,
                          "%s must be less than %s: the echo of a heartbeat is "
                          "awaited before the next one",
                          a, b);
    }
    if (strlen(c->control_socket) >= sizeof(sun.sun_path)) {
        describe(c, "control_socket", a, sizeof(a));
        return errbuf_set(
            err, errlen,
            "%s: the path is %zu bytes, a unix socket's is at most "
            "%zu",
            a, strlen(c->control_socket), sizeof(sun.sun_path) - 1);
    }
    return 0;
}

int
conf_load(struct conf *c, const char *file, bool file_explicit,
          char *const *overrides, size_t noverrides, char *err, size_t errlen)
{
    char why[WHY_MAX];

    memset(c, 0, sizeof(*c));
    c->origin = calloc(NKEYS, sizeof(*c->origin));
    if (c->origin == NULL) {
        errbuf_set(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < NKEYS; i++)
        if (value_set(c, &keys[i], keys[i].def, why, sizeof(why)) < 0) {
            errbuf_set(err, errlen, "built-in default of %s: %s", keys[i].name,
                       why);
            goto fail;
        }
    if (load_file(c, file != NULL ? file : WM_CONF_FILE, file_explicit, err,
                  errlen) < 0 ||
        load_env(c, err, errlen) < 0 ||
        load_overrides(c, overrides, noverrides, err, errlen) < 0 ||
        derive(c, err, errlen) < 0 || check_rules(c, err, errlen) < 0)
        goto fail;
    return 0;
fail:
    conf_free(c);
    return -1;
}

void
conf_free(struct conf *c)
{
    for (size_t i = 0; i < NKEYS; i++) {
        void *f = field(c, &keys[i]);

        if (keys[i].type == CONF_STRING || keys[i].type == CONF_PATH)
            free(*(char **)f);
        else if (keys[i].type == CONF_LIST)
            list_free(f);
    }
    free(c->file);
    free(c->origin);
    memset(c, 0, sizeof(*c));
}

/* Whether v must be quoted to read back as itself. */
static bool
needs_quotes(const char *v)
{
    size_t n = strlen(v);

    return n == 0 || v[0] == ' ' || v[0] == '\t' || v[0] == '"' ||
           v[0] == '#' || v[n - 1] == ' ' || v[n - 1] == '\t' ||
           strstr(v, " #") != NULL || strstr(v, "\t#") != NULL;
}

void
conf_dump(const struct conf *c, FILE *out)
{
    char value[4096], origin[WHY_MAX + 64];

    for (size_t i = 0; i < NKEYS; i++) {
        int n;

        format_origin(c, i, origin, sizeof(origin));
        if (keys[i].type == CONF_LIST &&
            ((const struct conf_list *)cfield(c, &keys[i]))->n > 0) {
            /* Lists have no length limit: written item by item. */
            const struct conf_list *l = cfield(c, &keys[i]);

            n = fprintf(out, "%s = ", keys[i].name);
            for (size_t j = 0; j < l->n; j++)
                n += fprintf(out, "%s%s", j > 0 ? "," : "", l->v[j]);
            fprintf(out, "%*s# %s\n", n < 46 ? 48 - n : 2, "", origin);
            continue;
        }
        format_value(c, &keys[i], value, sizeof(value));
        if (needs_quotes(value))
            n = fprintf(out, "%s = \"%s\"", keys[i].name, value);
        else
            n = fprintf(out, "%s = %s", keys[i].name, value);
        fprintf(out, "%*s# %s\n", n < 46 ? 48 - n : 2, "", origin);
    }
}
