/*
 * conf_keys.c — the table of the daemon's configuration keys (see conf.h;
 * DESIGN §8).
 *
 * One const table, one row per key, holds everything about a key: its
 * type, range or words, built-in default, environment names, the one line
 * of documentation and where its value lives in struct conf.  The loader
 * (conf.c), --print-config and the error messages (conf_values.c) and
 * workmanager.conf(5) all come from the table, so a key cannot exist in one
 * and not the others; adding a key is adding a field and a row here.
 *
 * Invariants: every row's offset names a field of the row's type (AT()
 * below does not compile otherwise); the rows are in the order of
 * workmanager.conf(5), which is the order of conf->origin; every row has
 * its line in the markdown table below (test_conf).
 *
 * Why max_body_bytes is 32 MiB: a create or reload request carries the
 * code base64-encoded, so 32 MiB admits a 24 MiB package (a .NET nupkg
 * with its dependencies, a native zip with debug symbols) while bounding
 * what one request can make the master hold (the body, the parsed JSON and
 * the decoded code: about 90 MiB at the cap); 64 MiB would double that for
 * every concurrent upload with no worker seen needing it.
 *
 * The keys are listed below as a markdown table, one row per key, from
 * which workmanager.conf(5) is written and contrib/mkconf documents the
 * sample workmanager.conf; test_conf checks that every key of the table in
 * the code has its row, with its environment names, default and doc
 * string.  The rows are wider than 80 columns because a markdown row
 * cannot wrap.
 *
 * Two sections of the array live in files of their own, included at their
 * place in the initializer: conf_keys_backends.inc (the store, the broker,
 * NATS) and conf_keys_limits.inc (bounds and the quotas' defaults).  Their
 * keys are documented in the markdown table here like every other.
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
 * | `metrics_token_file` | path, may be empty | empty | `WM_METRICS_TOKEN_FILE` | File holding a second bearer token that lets TCP clients read GET /metrics and nothing else (for Prometheus); empty means /metrics needs the admin token. |
 * | `local_principals` | string, may be empty | empty | `WM_LOCAL_PRINCIPALS` | Control socket users other than root, the daemon's user and the socket's group, mapped to a tenant and a role: entries uid:<N>=<tenant>/<role> or user:<name>=<tenant>/<role>, separated by commas; unmapped users are refused. |
 * | `listen_plaintext` | enum: no, loopback | `no` | `WM_LISTEN_PLAINTEXT` | Whether `listen` may serve plain HTTP when tls_cert_file is empty: no (start-up refuses), or loopback (allowed when the address is a loopback one; never on other addresses). |
 * | `tls_cert_file` | path, may be empty | empty | `WM_TLS_CERT_FILE` | PEM certificate (chain) of the TCP listener; set, `listen` serves HTTPS only.  Empty means no TLS. |
 * | `tls_key_file` | path, may be empty | empty | `WM_TLS_KEY_FILE` | PEM private key of tls_cert_file; empty means the key is in tls_cert_file. |
 * | `tls_min_version` | enum: 1.2, 1.3 | `1.2` | `WM_TLS_MIN_VERSION` | Oldest TLS version the TCP listener accepts (1.2 or 1.3). |
 * | `tls_client_ca_file` | path, may be empty | empty | `WM_TLS_CLIENT_CA_FILE` | PEM CA certificates that client certificates must chain to; needed by tls_client_cert = optional or required. |
 * | `tls_client_cert` | enum: none, optional, required | `none` | `WM_TLS_CLIENT_CERT` | Client certificates on the TCP listener: none (not asked), optional (verified when sent) or required (the handshake fails without one); a verified certificate's subject CN names the client's tenant. |
 * | `store` | enum: file, nats | `file` | `WM_STORE` | State store backend. |
 * | `broker` | enum: embedded, nats | `embedded` | `WM_BROKER` | Message broker. |
 * | `nats_url` | string | `nats://127.0.0.1:4222` | `WM_NATS_URL` | NATS server URLs (comma-separated) for store = nats or broker = nats. |
 * | `nats_user` | string, may be empty | empty | `WM_NATS_USER` | User name presented to NATS (with nats_password); empty means none. |
 * | `nats_password` | string, may be empty | empty | `WM_NATS_PASSWORD` | Password of nats_user. |
 * | `nats_token` | string, may be empty | empty | `WM_NATS_TOKEN` | Authentication token presented to NATS; empty means none. |
 * | `nats_creds_file` | path, may be empty | empty | `WM_NATS_CREDS_FILE` | NATS credentials file (user JWT and NKey seed); empty means none. |
 * | `nats_ca_file` | path, may be empty | empty | `WM_NATS_CA_FILE` | PEM CA certificates the NATS servers' certificates must chain to; set, the connection uses TLS. |
 * | `nats_cert_file` | path, may be empty | empty | `WM_NATS_CERT_FILE` | PEM client certificate (chain) presented to NATS; set, the connection uses TLS. |
 * | `nats_key_file` | path, may be empty | empty | `WM_NATS_KEY_FILE` | PEM private key of nats_cert_file. |
 * | `nats_kv_replicas` | integer, 1–5 | `1` | `WM_NATS_KV_REPLICAS` | Replicas of the JetStream KV buckets the nats store creates (3 in a 3-node cluster). |
 * | `nats_stream_replicas` | integer, 1–5 | `1` | `WM_NATS_STREAM_REPLICAS` | Replicas of the JetStream stream the nats broker creates (3 in a 3-node cluster). |
 * | `nats_stream_max_age_s` | integer, 60–31536000 | `604800` | `WM_NATS_STREAM_MAX_AGE_S` | How long the nats broker's stream keeps an event, settled or not (an event no instance settled by then is lost). |
 * | `nats_ack_wait_ms` | integer, 1000–3600000 | `30000` | `WM_NATS_ACK_WAIT_MS` | How long an event delivered to an instance by the nats broker may go unacknowledged (its instance gone) before JetStream delivers it again. |
 * | `nats_storage` | enum: file, memory | `file` | `WM_NATS_STORAGE` | Storage of the KV buckets the nats store creates and of the nats broker's stream: file (survives a server restart) or memory. |
 * | `nats_bucket_prefix` | string | `wm` | `WM_NATS_BUCKET_PREFIX` | Prefix of the nats store's KV buckets (PREFIX_state, PREFIX_blobs); one prefix per system sharing a NATS account. |
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
 * | `worker_log_bytes` | size (bytes), 0–16777216 | `64KiB` | `WM_WORKER_LOG_BYTES` | Bytes of each worker's recent log lines kept in memory for wmctl logs (its hosts' output and the daemon's lines about it); 0 keeps none. |
 * | `user` | string | `workmanager` | `WM_USER` | User the master becomes after start-up when started as root (a name, or uid[:gid]); the launcher alone keeps root, to start and confine hosts; root keeps the master privileged (not recommended). |
 * | `min_confinement` | string | `none` | `WM_MIN_CONFINEMENT` | Lowest sandbox confinement level the daemon agrees to run hosts under. |
 * | `cgroup_hierarchy` | enum: auto, v1, v2, none | `auto` | `WM_CGROUP_HIERARCHY` | Which cgroup hierarchy holds the hosts' groups: auto (v2 where /sys/fs/cgroup is cgroup2, else the v1 controllers, else a hybrid's v2 with them), v1, v2 (the unified hierarchy, inside the daemon's own cgroup, even without controllers), or none. |
 * | `cgroup_parent` | string | `workmanager` | `WM_CGROUP_PARENT` | Directory under each cgroup hierarchy that holds this daemon's groups (one per host). |
 * | `host_pids_max` | integer, 0–4194304 | `256` | `WM_HOST_PIDS_MAX` | Processes and threads one host may have (cgroup pids.max); 0 = no limit. |
 * | `host_uid_base` | integer, 0–4000000000 | `3000000` | `WM_HOST_UID_BASE` | First uid (and gid) of the range hosts run as, one each, when the daemon runs as root; 0 = hosts keep the daemon's user. |
 * | `host_uid_count` | integer, 1–1000000 | `65536` | `WM_HOST_UID_COUNT` | Size of that range: the most hosts that can run at once. |
 * | `host_uid_lock_dir` | path | `/run/workmanager/uids` | `WM_HOST_UID_LOCK_DIR` | Directory of the machine-wide locks on host uid ranges: a daemon whose range overlaps one another running daemon holds refuses to start; every daemon on a machine must name the same one. |
 * | `host_cpu_percent` | integer, 0–102400 | `0` | `WM_HOST_CPU_PERCENT` | CPU time one host may use, in percent of one CPU (cgroup cpu quota); 0 = no limit. |
 * | `tenant_cpu_weight` | integer, 1–10000 | `100` | `WM_TENANT_CPU_WEIGHT` | CPU weight of each tenant's cgroup (v2 cpu.weight; v1 cpu.shares = weight x 1024 / 100), which holds all its hosts: under contention tenants get the CPU in proportion to their weights, however many hosts each runs; a tenant's quotas.cpu_weight overrides it. |
 * | `tenant_cpu_max` | integer, 0–102400 | `0` | `WM_TENANT_CPU_MAX` | CPU time all the hosts of one tenant may use together, in percent of one CPU (its cgroup's cpu.max); 0 = no limit; a tenant's quotas.cpu_max overrides it. |
 * | `lock_max_age_ms` | duration (ms), 100–86400000 | `30000` | `WM_LOCK_MAX_AGE_MS` | Age after which a group lock with no write under its token may be stolen; must exceed message_timeout_ms. |
 * | `group_lock_retry_base_delay_ms` | duration (ms), 10–60000 | `500` | `WM_GROUP_LOCK_RETRY_BASE_DELAY_MS`, `GROUP_LOCK_RETRY_BASE_DELAY_MS` | First delay between group lock attempts; doubled after each. |
 * | `group_lock_max_retries` | integer, 1–20 | `3` | `WM_GROUP_LOCK_MAX_RETRIES`, `GROUP_LOCK_MAX_RETRIES` | Group lock attempts before the event is nacked (lock_contention). |
 * | `group_lock_token_block` | integer, 1–1000000 | `1024` | `WM_GROUP_LOCK_TOKEN_BLOCK` | Fencing tokens a group lock reserves with one store write (the block's high-water mark is persisted before its first token is used, so none repeats across a crash); 1 = a store write per event. |
 * | `group_lock_lease_idle_ms` | duration (ms), 0–60000 | `20` | `WM_GROUP_LOCK_LEASE_IDLE_MS` | How long a group lock is kept as a lease after its group's last event, for the next event to take without the store; 0 = release after every event. |
 * | `redelivery_base_delay_ms` | duration (ms), 1–60000 | `200` | `WM_REDELIVERY_BASE_DELAY_MS` | First redelivery delay after a transient failure; doubled each time, capped at 10 s. |
 * | `max_redeliveries` | integer, 0–100 | `3` | `WM_MAX_REDELIVERIES` | Redeliveries of an event before it is dead-lettered. |
 * | `queue_max_events` | integer, 1–10000000 | `10000` | `WM_QUEUE_MAX_EVENTS` | Bound of each subscription's queue; a publish that a full queue cannot hold is refused whole (503 subscriber_full with Retry-After) unless its topic is in drop_oldest_topics. |
 * | `drop_oldest_topics` | list | empty | `WM_DROP_OLDEST_TOPICS` | Topics (names or patterns with * and ?, in every tenant) whose full queues drop their oldest waiting event, dead-lettered with reason backlog_overflow, instead of refusing publishes; empty means none. |
 * | `allow_in_process_native` | bool | `false` | `WM_ALLOW_IN_PROCESS_NATIVE` | Let native workers created with "isolation": "in-process" run inside the daemon: faster calls, but a crash of such a worker ends the daemon and a timeout cannot stop its call. |
 * | `retry_on_error` | bool | `false` | `WM_RETRY_ON_ERROR` | Redeliver events whose worker reported an error, like a transient failure, instead of acknowledging them. |
 * | `max_body_bytes` | size (bytes), 1024–1073741824 | `32MiB` | `WM_MAX_BODY_BYTES` | Largest admin API request body (code travels base64 in it). |
 * | `max_frame_bytes` | size (bytes), 4096–1073741824 | `16MiB` | `WM_MAX_FRAME_BYTES` | Largest frame between the master and a host, size prefix included. |
 * | `http_max_header_bytes` | size (bytes), 1024–1048576 | `64KiB` | `WM_HTTP_MAX_HEADER_BYTES` | Largest request head (request line and headers) of the admin API; a larger one is answered 431 headers_too_large. |
 * | `http_max_headers` | integer, 1–10000 | `100` | `WM_HTTP_MAX_HEADERS` | Most headers one admin API request may have; more are answered 431 headers_too_large. |
 * | `http_max_url_bytes` | size (bytes), 256–1048576 | `8KiB` | `WM_HTTP_MAX_URL_BYTES` | Longest request target (path and query) of the admin API; a longer one is answered 414 uri_too_long. |
 * | `max_ce_header_bytes` | size (bytes), 64–1048576 | `4KiB` | `WM_MAX_CE_HEADER_BYTES` | Largest value of one ce-* header of a binary-mode event; a larger one is answered 431 headers_too_large naming the header (all of them together are bounded by http_max_header_bytes). |
 * | `max_batch_events` | integer, 1–1000000 | `10000` | `WM_MAX_BATCH_EVENTS` | Most events one batched publish may carry; more are answered 413 payload_too_large. |
 * | `http_header_timeout_ms` | duration (ms), 100–600000 | `10000` | `WM_HTTP_HEADER_TIMEOUT_MS` | Time from the first byte of an admin API request to its last header, not restarted by each byte; past it 408 request_timeout and the connection closes. |
 * | `http_body_timeout_ms` | duration (ms), 100–600000 | `30000` | `WM_HTTP_BODY_TIMEOUT_MS` | Time a request body may go without a byte arriving; past it 408 request_timeout and the connection closes. |
 * | `http_idle_timeout_ms` | duration (ms), 100–86400000 | `60000` | `WM_HTTP_IDLE_TIMEOUT_MS` | Time a kept-alive admin API connection may wait for its next request before it is closed (event streams are exempt). |
 * | `http_write_timeout_ms` | duration (ms), 100–600000 | `30000` | `WM_HTTP_WRITE_TIMEOUT_MS` | Time a client may leave its answer (or its event stream) unread, with the socket full, before the connection is dropped. |
 * | `http_max_connections` | integer, 1–1000000 | `1024` | `WM_HTTP_MAX_CONNECTIONS` | Most connections open at once on the TCP listener; further clients wait in the kernel's backlog until one closes (lowered at start-up to what the descriptor limit allows). |
 * | `http_max_connections_per_peer` | integer, 0–1000000 | `256` | `WM_HTTP_MAX_CONNECTIONS_PER_PEER` | Most connections open at once from one address on the TCP listener; the next is answered 429 too_many_connections and closed; 0 = no limit. |
 * | `control_socket_max_connections` | integer, 1–1000000 | `256` | `WM_CONTROL_SOCKET_MAX_CONNECTIONS` | Most connections open at once on the control socket, apart from the TCP listener's so that a flood of TCP clients never locks the operator out. |
 * | `fd_reserve` | integer, 16–1000000 | `256` | `WM_FD_RESERVE` | Descriptors kept for hosts, the store and the journal: connections are refused before fewer than this many are left (the soft nofile limit is raised to the hard one at start-up). |
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
 * | `instance_heartbeat_ms` | duration (ms), 50–60000 | `1000` | `WM_INSTANCE_HEARTBEAT_MS` | With a shared store (store = nats): how often this instance writes its heartbeat and reads the others'. |
 * | `instance_disconnected_ms` | duration (ms), 100–3600000 | `3000` | `WM_INSTANCE_DISCONNECTED_MS` | Another instance whose heartbeat has not changed for this long is disconnected. |
 * | `instance_dead_ms` | duration (ms), 200–86400000 | `10000` | `WM_INSTANCE_DEAD_MS` | Another instance whose heartbeat has not changed for this long is dead: its heartbeat key is removed. |
 * | `log_level` | enum: debug, info, notice, warning, error | `info` | `WM_LOG_LEVEL` | Least severe level logged. |
 * | `audit_publishes` | enum: none, errors, all | `errors` | `WM_AUDIT_PUBLISHES` | Which publishes (POST /v1/topics/T/events) the audit log records: none, errors (refused ones, status 400 and above), or all; every other mutation is always recorded. |
 * | `tenant_max_workers` | integer, 0–1000000 | `0` | `WM_TENANT_MAX_WORKERS` | Workers one tenant may have; a create beyond it is answered 403 quota_exceeded; 0 = unlimited.  PATCH /v1/tenants/NAME overrides every tenant_* key for one tenant. |
 * | `tenant_max_running_hosts` | integer, 0–1000000 | `0` | `WM_TENANT_MAX_RUNNING_HOSTS` | Workers of one tenant that may be running (started, each with its host) at once; a start or create beyond it is refused 403 quota_exceeded, never queued; 0 = unlimited. |
 * | `tenant_max_memory_mb` | integer, 0–1073741824 | `0` | `WM_TENANT_MAX_MEMORY_MB` | Sum of limits.memory_mb over one tenant's workers; when set, each worker must declare limits.memory_mb; 0 = unlimited. |
 * | `tenant_max_code_bytes` | size (bytes), 0–1099511627776 | `0` | `WM_TENANT_MAX_CODE_BYTES` | Sum of the code in use by one tenant's workers (a reload counts the new package instead of the old); 0 = unlimited. |
 * | `tenant_publish_events_per_second` | integer, 0–100000000 | `0` | `WM_TENANT_PUBLISH_EVENTS_PER_SECOND` | Events one tenant may publish per second (API and its workers, a token bucket holding one second); beyond it 429 rate_limited with Retry-After; 0 = unlimited. |
 * | `tenant_publish_bytes_per_second` | size (bytes), 0–1099511627776 | `0` | `WM_TENANT_PUBLISH_BYTES_PER_SECOND` | Bytes of events one tenant may publish per second, as tenant_publish_events_per_second; 0 = unlimited. |
 * | `tenant_max_backlog_events` | integer, 0–1000000000 | `0` | `WM_TENANT_MAX_BACKLOG_EVENTS` | Events the broker may hold for one tenant, not yet settled by its workers (an event held for several subscriptions counts once); a publish (API or a worker's) beyond it is refused whole, 403 quota_exceeded; 0 = unlimited. |
 * | `tenant_max_backlog_bytes` | size (bytes), 0–1099511627776 | `0` | `WM_TENANT_MAX_BACKLOG_BYTES` | Bytes of the events held for one tenant, as tenant_max_backlog_events; 0 = unlimited. |
 * | `tenant_max_state_keys` | integer, 0–1000000000 | `0` | `WM_TENANT_MAX_STATE_KEYS` | State keys (workmanager.state) one tenant's workers may hold together; a put of a new key beyond it is answered 403 quota_exceeded; 0 = unlimited. |
 * | `tenant_max_state_bytes` | size (bytes), 0–1099511627776 | `0` | `WM_TENANT_MAX_STATE_BYTES` | Bytes of the values of a tenant's state keys, as tenant_max_state_keys; 0 = unlimited. |
 */
/* clang-format on */
#include "config.h"

#include "master/core/conf.h"
#include "master/core/conf_private.h"
#include "master/core/roles.h"

#include <stddef.h>
#include <string.h>
#include <syslog.h>

/* A quota per tenant (quota.h): 0 = unlimited, the default. */
#define QUOTA_KEY(key, ENV, T, conftype, top, text)                            \
    {                                                                          \
        .name = #key, .type = conftype, .def = "0", .env = ENV, .doc = text,   \
        .offset = AT(key, T), .min = 0, .max = top                             \
    }

/* Build-time paths (Makefile: from sysconfdir and libexecdir). */
#ifndef WM_TOKEN_FILE
#define WM_TOKEN_FILE "/etc/workmanager/token"
#endif
#ifndef WM_ENGINES_DIR
#define WM_ENGINES_DIR "/etc/workmanager/engines.d"
#endif
#ifndef WM_LIBEXEC_DIR
#define WM_LIBEXEC_DIR "/usr/libexec/workmanager"
#endif

/* The offset of `field` in struct conf, which must have type T: a row
 * whose type and field disagree does not compile. */
#define AT(field, T)                                                           \
    _Generic(((struct conf *)0)->field, T : offsetof(struct conf, field))

static const struct conf_word store_words[] = {
    { "file", CONF_STORE_FILE },
    { "nats", CONF_STORE_NATS },
    { NULL, 0 },
};

static const struct conf_word nats_storage_words[] = {
    { "file", CONF_NATS_STORAGE_FILE },
    { "memory", CONF_NATS_STORAGE_MEMORY },
    { NULL, 0 },
};

static const struct conf_word broker_words[] = {
    { "embedded", CONF_BROKER_EMBEDDED },
    { "nats", CONF_BROKER_NATS },
    { NULL, 0 },
};

static const struct conf_word plaintext_words[] = {
    { "no", CONF_PLAINTEXT_NO },
    { "loopback", CONF_PLAINTEXT_LOOPBACK },
    { NULL, 0 },
};

static const struct conf_word tls_version_words[] = {
    { "1.2", CONF_TLS_1_2 },
    { "1.3", CONF_TLS_1_3 },
    { NULL, 0 },
};

static const struct conf_word tls_client_words[] = {
    { "none", CONF_TLS_CLIENT_NONE },
    { "optional", CONF_TLS_CLIENT_OPTIONAL },
    { "required", CONF_TLS_CLIENT_REQUIRED },
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

static const struct conf_word cgroup_words[] = {
    { "auto", CONF_CGROUP_AUTO },
    { "v1", CONF_CGROUP_V1 },
    { "v2", CONF_CGROUP_V2 },
    { "none", CONF_CGROUP_NONE },
    { NULL, 0 },
};

static const struct conf_word audit_publishes_words[] = {
    { "none", CONF_AUDIT_PUBLISHES_NONE },
    { "errors", CONF_AUDIT_PUBLISHES_ERRORS },
    { "all", CONF_AUDIT_PUBLISHES_ALL },
    { NULL, 0 },
};

/* Ranges of durations in ms, named for what they bound. */
#define ONE_HOUR_MS 3600000u
#define TEN_MIN_MS 600000u
#define ONE_DAY_MS 86400000u
#define ONE_GIB 1073741824u

const struct conf_key conf_key_table[] = {
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
        .check = conf_check_group,
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
        .check = conf_check_listen,
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
    {
        .name = "metrics_token_file",
        .type = CONF_PATH,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_METRICS_TOKEN_FILE",
        .doc = "File holding a second bearer token that lets TCP clients "
               "read GET /metrics and nothing else (for Prometheus); empty "
               "means /metrics needs the admin token.",
        .offset = AT(metrics_token_file, char *),
    },
    {
        .name = "local_principals",
        .type = CONF_STRING,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_LOCAL_PRINCIPALS",
        .doc = "Control socket users other than root, the daemon's user and "
               "the socket's group, mapped to a tenant and a role: entries "
               "uid:<N>=<tenant>/<role> or user:<name>=<tenant>/<role>, "
               "separated by commas; unmapped users are refused.",
        .offset = AT(local_principals, char *),
        .check = conf_check_local_principals,
    },
    {
        .name = "listen_plaintext",
        .type = CONF_ENUM,
        .def = "no",
        .env = "WM_LISTEN_PLAINTEXT",
        .doc = "Whether `listen` may serve plain HTTP when tls_cert_file "
               "is empty: no (start-up refuses), or loopback (allowed when "
               "the address is a loopback one; never on other addresses).",
        .offset = AT(listen_plaintext, int),
        .words = plaintext_words,
    },
    {
        .name = "tls_cert_file",
        .type = CONF_PATH,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_TLS_CERT_FILE",
        .doc = "PEM certificate (chain) of the TCP listener; set, `listen` "
               "serves HTTPS only.  Empty means no TLS.",
        .offset = AT(tls_cert_file, char *),
    },
    {
        .name = "tls_key_file",
        .type = CONF_PATH,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_TLS_KEY_FILE",
        .doc = "PEM private key of tls_cert_file; empty means the key is "
               "in tls_cert_file.",
        .offset = AT(tls_key_file, char *),
    },
    {
        .name = "tls_min_version",
        .type = CONF_ENUM,
        .def = "1.2",
        .env = "WM_TLS_MIN_VERSION",
        .doc = "Oldest TLS version the TCP listener accepts (1.2 or 1.3).",
        .offset = AT(tls_min_version, int),
        .words = tls_version_words,
    },
    {
        .name = "tls_client_ca_file",
        .type = CONF_PATH,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_TLS_CLIENT_CA_FILE",
        .doc = "PEM CA certificates that client certificates must chain "
               "to; needed by tls_client_cert = optional or required.",
        .offset = AT(tls_client_ca_file, char *),
    },
    {
        .name = "tls_client_cert",
        .type = CONF_ENUM,
        .def = "none",
        .env = "WM_TLS_CLIENT_CERT",
        .doc = "Client certificates on the TCP listener: none (not asked), "
               "optional (verified when sent) or required (the handshake "
               "fails without one); a verified certificate's subject CN "
               "names the client's tenant.",
        .offset = AT(tls_client_cert, int),
        .words = tls_client_words,
    },

#include "conf_keys_backends.inc"

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
        .name = "worker_log_bytes",
        .type = CONF_SIZE,
        /* 64 KiB: the last few hundred lines, enough for a traceback and
         * what led to it; 10,000 workers that all log stay within 640
         * MiB only at the worst, and a quiet worker costs nothing. */
        .def = "64KiB",
        .env = "WM_WORKER_LOG_BYTES",
        .doc = "Bytes of each worker's recent log lines kept in memory for "
               "wmctl logs (its hosts' output and the daemon's lines about "
               "it); 0 keeps none.",
        .offset = AT(worker_log_bytes, uint64_t),
        .min = 0,
        .max = 16u << 20,
    },
    {
        .name = "min_confinement",
        .type = CONF_STRING,
        .def = "none",
        .env = "WM_MIN_CONFINEMENT",
        .doc = "Lowest sandbox confinement level the daemon agrees to run "
               "hosts under.",
        .offset = AT(min_confinement, char *),
        .check = conf_check_word,
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
        .check = conf_check_user,
    },
    {
        .name = "cgroup_hierarchy",
        .type = CONF_ENUM,
        .def = "auto",
        .env = "WM_CGROUP_HIERARCHY",
        .doc = "Which cgroup hierarchy holds the hosts' groups: auto (v2 "
               "where /sys/fs/cgroup is cgroup2, else the v1 controllers, "
               "else a hybrid's v2 with them), v1, v2 (the unified "
               "hierarchy, inside the daemon's own cgroup, even without "
               "controllers), or none.",
        .offset = AT(cgroup_hierarchy, int),
        .words = cgroup_words,
    },
    {
        .name = "cgroup_parent",
        .type = CONF_STRING,
        .def = "workmanager",
        .env = "WM_CGROUP_PARENT",
        .doc = "Directory under each cgroup hierarchy that holds this "
               "daemon's groups (one per host).",
        .offset = AT(cgroup_parent, char *),
        .check = conf_check_word,
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
        .name = "host_uid_lock_dir",
        .type = CONF_PATH,
        .def = "/run/workmanager/uids",
        .env = "WM_HOST_UID_LOCK_DIR",
        .doc = "Directory of the machine-wide locks on host uid ranges: a "
               "daemon whose range overlaps one another running daemon "
               "holds refuses to start; every daemon on a machine must name "
               "the same one.",
        .offset = AT(host_uid_lock_dir, char *),
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
    {
        .name = "tenant_cpu_weight",
        .type = CONF_UINT,
        .def = "100",
        .env = "WM_TENANT_CPU_WEIGHT",
        .doc = "CPU weight of each tenant's cgroup (v2 cpu.weight; v1 "
               "cpu.shares = weight x 1024 / 100), which holds all its "
               "hosts: under contention tenants get the CPU in proportion "
               "to their weights, however many hosts each runs; a "
               "tenant's quotas.cpu_weight overrides it.",
        .offset = AT(tenant_cpu_weight, unsigned),
        .min = 1,
        .max = 10000,
    },
    {
        .name = "tenant_cpu_max",
        .type = CONF_UINT,
        .def = "0",
        .env = "WM_TENANT_CPU_MAX",
        .doc = "CPU time all the hosts of one tenant may use together, in "
               "percent of one CPU (its cgroup's cpu.max); 0 = no limit; a "
               "tenant's quotas.cpu_max overrides it.",
        .offset = AT(tenant_cpu_max, unsigned),
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
        .name = "group_lock_token_block",
        .type = CONF_UINT,
        .def = "1024",
        .env = "WM_GROUP_LOCK_TOKEN_BLOCK",
        .doc = "Fencing tokens a group lock reserves with one store write "
               "(the block's high-water mark is persisted before its first "
               "token is used, so none repeats across a crash); 1 = a store "
               "write per event.",
        .offset = AT(group_lock_token_block, unsigned),
        .min = 1,
        .max = 1000000,
    },
    {
        .name = "group_lock_lease_idle_ms",
        .type = CONF_DURATION_MS,
        .def = "20",
        .env = "WM_GROUP_LOCK_LEASE_IDLE_MS",
        .doc = "How long a group lock is kept as a lease after its group's "
               "last event, for the next event to take without the store; "
               "0 = release after every event.",
        .offset = AT(group_lock_lease_idle_ms, uint64_t),
        .min = 0,
        .max = 60000,
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
        .doc = "Bound of each subscription's queue; a publish that a full "
               "queue cannot hold is refused whole (503 subscriber_full with "
               "Retry-After) unless its topic is in drop_oldest_topics.",
        .offset = AT(queue_max_events, unsigned),
        .min = 1,
        .max = 10000000,
    },
    {
        .name = "drop_oldest_topics",
        .type = CONF_LIST,
        .flags = CONF_F_EMPTY_OK,
        .def = "",
        .env = "WM_DROP_OLDEST_TOPICS",
        .doc = "Topics (names or patterns with * and ?, in every tenant) "
               "whose full queues drop their oldest waiting event, "
               "dead-lettered with reason backlog_overflow, instead of "
               "refusing publishes; empty means none.",
        .offset = AT(drop_oldest_topics, struct conf_list),
        .check = conf_check_topic_patterns,
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

#include "conf_keys_limits.inc"

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
        .check = conf_check_networks,
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
        .check = conf_check_modules,
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
        .check = conf_check_modules,
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
        .check = conf_check_modules,
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
        .check = conf_check_instance,
    },
    {
        .name = "instance_heartbeat_ms",
        .type = CONF_DURATION_MS,
        .def = "1000",
        .env = "WM_INSTANCE_HEARTBEAT_MS",
        .doc = "With a shared store (store = nats): how often this instance "
               "writes its heartbeat and reads the others'.",
        .offset = AT(instance_heartbeat_ms, uint64_t),
        .min = 50,
        .max = 60000,
    },
    {
        .name = "instance_disconnected_ms",
        .type = CONF_DURATION_MS,
        .def = "3000",
        .env = "WM_INSTANCE_DISCONNECTED_MS",
        .doc = "Another instance whose heartbeat has not changed for this "
               "long is disconnected.",
        .offset = AT(instance_disconnected_ms, uint64_t),
        .min = 100,
        .max = 3600000,
    },
    {
        .name = "instance_dead_ms",
        .type = CONF_DURATION_MS,
        .def = "10000",
        .env = "WM_INSTANCE_DEAD_MS",
        .doc = "Another instance whose heartbeat has not changed for this "
               "long is dead: its heartbeat key is removed.",
        .offset = AT(instance_dead_ms, uint64_t),
        .min = 200,
        .max = 86400000,
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
    {
        .name = "audit_publishes",
        .type = CONF_ENUM,
        .def = "errors",
        .env = "WM_AUDIT_PUBLISHES",
        .doc = "Which publishes (POST /v1/topics/T/events) the audit log "
               "records: none, errors (refused ones, status 400 and above), "
               "or all; every other mutation is always recorded.",
        .offset = AT(audit_publishes, int),
        .words = audit_publishes_words,
    },
    QUOTA_KEY(tenant_max_workers, "WM_TENANT_MAX_WORKERS", unsigned, CONF_UINT,
              1000000,
              "Workers one tenant may have; a create beyond it is answered "
              "403 quota_exceeded; 0 = unlimited.  PATCH /v1/tenants/NAME "
              "overrides every tenant_* key for one tenant."),
    QUOTA_KEY(tenant_max_running_hosts, "WM_TENANT_MAX_RUNNING_HOSTS", unsigned,
              CONF_UINT, 1000000,
              "Workers of one tenant that may be running (started, each with "
              "its host) at once; a start or create beyond it is refused 403 "
              "quota_exceeded, never queued; 0 = unlimited."),
    QUOTA_KEY(tenant_max_memory_mb, "WM_TENANT_MAX_MEMORY_MB", unsigned,
              CONF_UINT, 1073741824,
              "Sum of limits.memory_mb over one tenant's workers; when set, "
              "each worker must declare limits.memory_mb; 0 = unlimited."),
    QUOTA_KEY(tenant_max_code_bytes, "WM_TENANT_MAX_CODE_BYTES", uint64_t,
              CONF_SIZE, 1ull << 40,
              "Sum of the code in use by one tenant's workers (a reload "
              "counts the new package instead of the old); 0 = unlimited."),
    QUOTA_KEY(tenant_publish_events_per_second,
              "WM_TENANT_PUBLISH_EVENTS_PER_SECOND", unsigned, CONF_UINT,
              100000000,
              "Events one tenant may publish per second (API and its "
              "workers, a token bucket holding one second); beyond it 429 "
              "rate_limited with Retry-After; 0 = unlimited."),
    QUOTA_KEY(tenant_publish_bytes_per_second,
              "WM_TENANT_PUBLISH_BYTES_PER_SECOND", uint64_t, CONF_SIZE,
              1ull << 40,
              "Bytes of events one tenant may publish per second, as "
              "tenant_publish_events_per_second; 0 = unlimited."),
    QUOTA_KEY(tenant_max_backlog_events, "WM_TENANT_MAX_BACKLOG_EVENTS",
              unsigned, CONF_UINT, 1000000000,
              "Events the broker may hold for one tenant, not yet settled "
              "by its workers (an event held for several subscriptions "
              "counts once); a publish (API or a worker's) beyond it is "
              "refused whole, 403 quota_exceeded; 0 = unlimited."),
    QUOTA_KEY(tenant_max_backlog_bytes, "WM_TENANT_MAX_BACKLOG_BYTES", uint64_t,
              CONF_SIZE, 1ull << 40,
              "Bytes of the events held for one tenant, as "
              "tenant_max_backlog_events; 0 = unlimited."),
    QUOTA_KEY(tenant_max_state_keys, "WM_TENANT_MAX_STATE_KEYS", unsigned,
              CONF_UINT, 1000000000,
              "State keys (workmanager.state) one tenant's workers may hold "
              "together; a put of a new key beyond it is answered 403 "
              "quota_exceeded; 0 = unlimited."),
    QUOTA_KEY(tenant_max_state_bytes, "WM_TENANT_MAX_STATE_BYTES", uint64_t,
              CONF_SIZE, 1ull << 40,
              "Bytes of the values of a tenant's state keys, as "
              "tenant_max_state_keys; 0 = unlimited."),
};

const size_t conf_key_count =
    sizeof(conf_key_table) / sizeof(conf_key_table[0]);
