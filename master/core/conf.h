/*
 * conf.h — the daemon's configuration (DESIGN §8): one table of keys, four
 * sources, one struct.
 *
 * Sources, each overriding the one before: the built-in defaults, the
 * configuration file (`key = value` lines), the environment (WM_<KEY> and,
 * for some keys, the original system's variable), and `-o key=value`
 * arguments.  Every key, its type, default, range, environment names and
 * meaning are in the table of conf_keys.c (conf_keys() returns it; the
 * comment at the top of conf_keys.c shows it as a table for
 * workmanager.conf(5)).  conf.c reads the sources, conf_values.c parses and
 * formats the values.
 *
 * An unknown key or a bad value in any source stops start-up: conf_load()
 * fails with a message naming the source (file:line, the environment
 * variable, or -o), the key, and what is wrong or allowed.
 *
 * Hosts of a given struct conf: filled once by conf_load() on the loop
 * thread at start-up, read-only afterwards, so any thread may read it.
 */
#ifndef WM_MASTER_CONF_H
#define WM_MASTER_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum conf_type {
    CONF_STRING,      /* free text, no control characters */
    CONF_PATH,        /* an absolute path */
    CONF_BOOL,        /* true/false/1/0/yes/no/on/off */
    CONF_UINT,        /* a decimal integer within [min, max] */
    CONF_DURATION_MS, /* milliseconds; suffixes ms, s, min, h accepted */
    CONF_DURATION_S,  /* seconds; suffixes s, min, h, d accepted */
    CONF_SIZE,        /* bytes; suffixes K/KiB, M/MiB, G/GiB (×1024) */
    CONF_MODE,        /* an octal file mode, at most 0777 */
    CONF_ENUM,        /* one of the key's words */
    CONF_LIST,        /* strings separated by commas (or blanks) */
};

/* A key may be empty (""), meaning what its doc string says. */
#define CONF_F_EMPTY_OK 0x1u

/* One word of an enum key and the value stored for it. */
struct conf_word {
    const char *name;
    int value;
};

/* A list value: n strings, owned by the struct conf. */
struct conf_list {
    char **v;
    size_t n;
};

/* One row of the table: everything about one key. */
struct conf_key {
    const char *name;
    enum conf_type type;
    unsigned flags;      /* CONF_F_* */
    const char *def;     /* the built-in default, in the file's syntax */
    const char *env;     /* WM_<NAME uppercased> */
    const char *env_alt; /* the original system's variable, or NULL */
    const char *doc;     /* one line for --help and workmanager.conf(5) */
    size_t offset;       /* of the value in struct conf */
    uint64_t min, max;   /* numbers: inclusive range, in the key's unit */
    const struct conf_word *words; /* enums: ends with a NULL name */
    /* Extra syntax check of a non-empty string value; returns 0 or -1 with
     * what is wrong in why. */
    int (*check)(const char *value, char *why, size_t whylen);
};

/* Where a key's value came from. */
enum conf_source {
    CONF_SRC_DEFAULT = 0,
    CONF_SRC_FILE,
    CONF_SRC_ENV,
    CONF_SRC_ARG,     /* -o key=value */
    CONF_SRC_DERIVED, /* computed from another key or the system */
};

struct conf_origin {
    enum conf_source source;
    unsigned line;   /* CONF_SRC_FILE: the line in conf->file */
    const char *env; /* CONF_SRC_ENV: the variable (a table string) */
};

enum conf_store {
    CONF_STORE_FILE,
    CONF_STORE_NATS,
};

enum conf_broker {
    CONF_BROKER_EMBEDDED,
    CONF_BROKER_NATS,
};

enum conf_nats_storage {
    CONF_NATS_STORAGE_FILE,
    CONF_NATS_STORAGE_MEMORY,
};

enum conf_plaintext {
    CONF_PLAINTEXT_NO,       /* `listen` needs TLS */
    CONF_PLAINTEXT_LOOPBACK, /* plain HTTP allowed on a loopback address */
};

enum conf_tls_version {
    CONF_TLS_1_2,
    CONF_TLS_1_3,
};

enum conf_tls_client {
    CONF_TLS_CLIENT_NONE,
    CONF_TLS_CLIENT_OPTIONAL,
    CONF_TLS_CLIENT_REQUIRED,
};

enum conf_fsync {
    CONF_FSYNC_ALWAYS,
    CONF_FSYNC_BATCH,
    CONF_FSYNC_OFF,
};

enum conf_cgroup {
    CONF_CGROUP_AUTO,
    CONF_CGROUP_V1,
    CONF_CGROUP_V2,
    CONF_CGROUP_NONE,
};

enum conf_audit_publishes {
    CONF_AUDIT_PUBLISHES_NONE,
    CONF_AUDIT_PUBLISHES_ERRORS,
    CONF_AUDIT_PUBLISHES_ALL,
};

/*
 * The configuration.  Strings are never NULL after conf_load() ("" when
 * empty); enum keys hold the enum named in their comment, log_level a
 * syslog priority.  Durations are in the unit their name ends with.
 */
struct conf {
    /* Paths and sockets. */
    char *state_dir;
    char *runtime_dir;
    char *control_socket; /* <runtime_dir>/control.sock when not set */
    unsigned control_socket_mode;
    char *control_socket_group;
    char *listen;
    char *token_file;
    char *metrics_token_file; /* "": /metrics needs token_file's */
    char *local_principals;   /* roles.h: uid:N=tenant/role, ... */
    int listen_plaintext;     /* enum conf_plaintext */
    char *tls_cert_file;      /* "": no TLS */
    char *tls_key_file;       /* "": the key is in tls_cert_file */
    int tls_min_version;      /* enum conf_tls_version */
    char *tls_client_ca_file; /* "": no client certificates */
    int tls_client_cert;      /* enum conf_tls_client */
    char *engines_dir;
    char *libexec_dir;
    char *instance; /* the host name when not set */
    /* Several instances on one store (instances.h). */
    uint64_t instance_heartbeat_ms;
    uint64_t instance_disconnected_ms;
    uint64_t instance_dead_ms;

    /* Backends. */
    int store;  /* enum conf_store */
    int broker; /* enum conf_broker */
    char *nats_url;
    char *nats_user; /* "": no user/password */
    char *nats_password;
    char *nats_token;      /* "": no token */
    char *nats_creds_file; /* "": no credentials file */
    char *nats_ca_file;    /* "": the system's CAs (tls:// URLs) */
    char *nats_cert_file;  /* "": no client certificate */
    char *nats_key_file;   /* "": the key is in nats_cert_file */
    unsigned nats_kv_replicas;
    unsigned nats_stream_replicas;
    unsigned nats_stream_max_age_s;
    unsigned nats_ack_wait_ms;
    int nats_storage; /* enum conf_nats_storage */
    char *nats_bucket_prefix;
    int journal_fsync; /* enum conf_fsync */
    uint64_t journal_max_bytes;
    uint64_t journal_segment_bytes;
    int store_fsync; /* enum conf_fsync */

    /* Recovery. */
    bool recovery_on_start;
    uint64_t recovery_lease_ttl_s;

    /* Hosts. */
    uint64_t message_timeout_ms;
    uint64_t handshake_timeout_ms;
    uint64_t heartbeat_interval_ms;
    uint64_t heartbeat_timeout_ms;
    uint64_t idle_timeout_s;
    uint64_t shutdown_grace_ms;
    uint64_t restart_base_delay_ms;
    uint64_t restart_max_delay_ms;
    unsigned crash_loop_max;
    uint64_t crash_loop_window_s;
    uint64_t worker_log_bytes; /* each worker's log ring (activity.h) */
    char *min_confinement;
    char *user; /* the master's after start-up, as root (privdrop.h) */
    int cgroup_hierarchy; /* enum conf_cgroup */
    char *cgroup_parent;
    unsigned host_pids_max;
    unsigned host_uid_base;
    unsigned host_uid_count;
    char *host_uid_lock_dir;
    unsigned host_cpu_percent;
    unsigned tenant_cpu_weight; /* each tenant's cgroup cpu weight */
    unsigned tenant_cpu_max;    /* its cpu.max in % of a CPU; 0: none */

    /* Messages. */
    uint64_t lock_max_age_ms;
    uint64_t group_lock_retry_base_delay_ms;
    unsigned group_lock_max_retries;
    unsigned group_lock_token_block;
    uint64_t group_lock_lease_idle_ms;
    uint64_t redelivery_base_delay_ms;
    unsigned max_redeliveries;
    unsigned queue_max_events;
    struct conf_list drop_oldest_topics;
    bool retry_on_error;
    bool allow_in_process_native;

    /* Limits. */
    uint64_t max_body_bytes;
    uint64_t max_frame_bytes;
    uint64_t http_max_header_bytes;
    unsigned http_max_headers;
    uint64_t http_max_url_bytes;
    uint64_t max_ce_header_bytes;
    unsigned max_batch_events;
    uint64_t http_header_timeout_ms;
    uint64_t http_body_timeout_ms;
    uint64_t http_idle_timeout_ms;
    uint64_t http_write_timeout_ms;
    unsigned http_max_connections;
    unsigned http_max_connections_per_peer;
    unsigned control_socket_max_connections;
    unsigned fd_reserve;

    /* Code and engines' policies. */
    struct conf_list allowed_code_source_hosts;
    bool code_source_allow_http;
    struct conf_list code_source_allowed_networks;
    char *code_source_ca_file;
    char *code_source_credentials_file;
    uint64_t code_fetch_max_bytes;
    uint64_t code_fetch_timeout_ms;
    struct conf_list python_allowed_packages;
    struct conf_list python_blocked_modules;
    bool python_allowlist;
    struct conf_list python_preload;

    int log_level;       /* LOG_DEBUG … LOG_ERR */
    int audit_publishes; /* enum conf_audit_publishes */

    /* Quotas per tenant (master/workers/quota.h); 0 = unlimited. */
    unsigned tenant_max_workers;
    unsigned tenant_max_running_hosts;
    unsigned tenant_max_memory_mb;
    uint64_t tenant_max_code_bytes;
    unsigned tenant_publish_events_per_second;
    uint64_t tenant_publish_bytes_per_second;
    unsigned tenant_max_backlog_events;
    uint64_t tenant_max_backlog_bytes;
    unsigned tenant_max_state_keys;
    uint64_t tenant_max_state_bytes;

    /* The file read, or NULL when none was (the default file is absent). */
    char *file;
    /* One per row of conf_keys(), in its order. */
    struct conf_origin *origin;
};

/*
 * Fills *c (whatever it held is overwritten, not freed) from the defaults,
 * then the file, the environment and the `noverrides` strings of
 * `overrides` ("key=value", from -o), then the derived defaults, then
 * checks the rules between keys.
 *
 * `file` NULL means conf_default_file().  When `file_explicit` (--config FILE)
 * a missing file is an error; otherwise a missing file is skipped.  Any other
 * failure to read the file is an error.
 *
 * Returns 0, or -1 with a one-line message in err (which names the source,
 * the key and what is wrong) and *c left empty (conf_free() on it is
 * harmless).
 */
int conf_load(struct conf *c, const char *file, bool file_explicit,
              char *const *overrides, size_t noverrides, char *err,
              size_t errlen);

/* The configuration file read when --config is not given
 * (<sysconfdir>/workmanager/workmanager.conf, fixed at build time). */
const char *conf_default_file(void);

/* Frees what conf_load() allocated and empties *c; idempotent. */
void conf_free(struct conf *c);

/*
 * Writes every key as `key = value  # source` in table order (the output is
 * itself a valid configuration file), for workmanagerd --print-config.
 */
void conf_dump(const struct conf *c, FILE *out);

/* The table of keys, in the order of workmanager.conf(5); *n its length. */
const struct conf_key *conf_keys(size_t *n);

/* The row of key `name`, or NULL. */
const struct conf_key *conf_key_find(const char *name);

/*
 * Writes the value of key `name` as conf_dump() shows it into buf.
 * Returns 0, or -1 when there is no such key.
 */
int conf_value_format(const struct conf *c, const char *name, char *buf,
                      size_t len);

/*
 * Writes where key `name` got its value ("default", "file PATH:LINE",
 * "environment VAR", "-o", "derived from runtime_dir") into buf, for
 * messages of other modules that reject a value ("store = nats (file
 * /etc/workmanager/workmanager.conf:3): not built").  Returns 0, or -1
 * when there is no such key.
 */
int conf_origin_format(const struct conf *c, const char *name, char *buf,
                       size_t len);

/*
 * Splits one line of the `key = value` syntax, shared by the configuration
 * file and engines.d descriptors, in place.  Blank lines and lines whose
 * first non-blank is '#' give *key = NULL.  Otherwise *key is the trimmed
 * text before the first '=', *value the trimmed text after it: a value in
 * double quotes is taken literally (quotes removed, '#' kept), else a '#'
 * preceded by a blank starts a comment.  Returns 0, or -1 with the reason
 * in why (no '=', an empty key, an unterminated quote, text after the
 * closing quote, a control character).
 */
int conf_line_split(char *line, char **key, char **value, char *why,
                    size_t whylen);

/*
 * Reads the next line of f, a file of that syntax which messages call
 * `path`, into *line (getline()'s buffer of *cap bytes, which the caller
 * frees) without its line end ("\n", "\r\n"), and counts it in *lineno.
 * Returns 1; 0 at the end of the file or on a read error (ferror(f) tells
 * which, errno why); or -1 with "PATH:LINE: NUL byte in the line" in err,
 * since a NUL would cut the line short unseen.
 */
int conf_line_read(FILE *f, const char *path, char **line, size_t *cap,
                   unsigned *lineno, char *err, size_t errlen);

#endif /* WM_MASTER_CONF_H */
