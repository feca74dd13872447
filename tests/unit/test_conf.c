/*
 * test_conf.c — unit tests of master/core/conf*.c: defaults and derived
 * values, the precedence file < environment < -o (with WM_ and the
 * original's names), an error naming the source and key for every kind of
 * mistake, the rules between keys, --print-config reading back as itself,
 * and the key table against the documentation table of conf_keys.c.
 *
 * Each test runs in a fresh temporary directory with every variable the
 * table knows unset.  Prints each failed check; the exit status is the
 * verdict.
 */
#include "config.h"

#include "master/core/conf.h"
#include "master/core/roles.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "tests/unit/check.h"

static char tmpdir[256];

static void
clear_env(void)
{
    size_t n;
    const struct conf_key *k = conf_keys(&n);

    for (size_t i = 0; i < n; i++) {
        unsetenv(k[i].env);
        if (k[i].env_alt != NULL)
            unsetenv(k[i].env_alt);
    }
}

/* Writes the len bytes of `text` (which may hold a NUL) to
 * <tmpdir>/<name> and returns the path (static). */
static const char *
write_bytes(const char *name, const char *text, size_t len)
{
    static char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    f = fopen(path, "w");
    if (f == NULL || fwrite(text, 1, len, f) != len) {
        perror(path);
        exit(2);
    }
    fclose(f);
    return path;
}

/* Writes the string `text` to <tmpdir>/<name> and returns the path. */
static const char *
write_file(const char *name, const char *text)
{
    return write_bytes(name, text, strlen(text));
}

/* A path where no file is: the default file is absent. */
static const char *
no_file(void)
{
    static char path[512];

    snprintf(path, sizeof(path), "%s/absent.conf", tmpdir);
    return path;
}

/* Loads with -o arguments; returns conf_load()'s result. */
static int
load(struct conf *c, const char *file, bool explicit_file, char *err,
     size_t errlen, ...)
{
    char *ov[16];
    size_t n = 0;
    va_list ap;
    char *s;

    va_start(ap, errlen);
    while ((s = va_arg(ap, char *)) != NULL && n < 16)
        ov[n++] = s;
    va_end(ap);
    err[0] = '\0';
    return conf_load(c, file, explicit_file, ov, n, err, errlen);
}

static const char *
origin(const struct conf *c, const char *key)
{
    static char buf[512];

    if (conf_origin_format(c, key, buf, sizeof(buf)) < 0)
        return "(no such key)";
    return buf;
}

static void
test_defaults(void)
{
    struct conf c;
    char err[512], host[256];

    clear_env();
    if (load(&c, no_file(), false, err, sizeof(err), NULL) != 0) {
        FAIL("defaults: %s", err);
        return;
    }
    CHECK(c.file == NULL);
    CHECK(strcmp(c.state_dir, "/var/lib/workmanager") == 0);
    CHECK(strcmp(c.runtime_dir, "/run/workmanager") == 0);
    CHECK(strcmp(c.control_socket, "/run/workmanager/control.sock") == 0);
    CHECK(strcmp(origin(&c, "control_socket"), "derived from runtime_dir") ==
          0);
    CHECK(c.control_socket_mode == 0660);
    CHECK(strcmp(c.control_socket_group, "") == 0);
    CHECK(strcmp(c.listen, "") == 0);
    CHECK(c.store == CONF_STORE_FILE);
    CHECK(c.broker == CONF_BROKER_EMBEDDED);
    CHECK(c.recovery_on_start);
    CHECK(c.recovery_lease_ttl_s == 300);
    CHECK(c.message_timeout_ms == 25000);
    CHECK(c.handshake_timeout_ms == 2000);
    CHECK(c.heartbeat_interval_ms == 5000);
    CHECK(c.heartbeat_timeout_ms == 2000);
    CHECK(c.idle_timeout_s == 300);
    CHECK(c.shutdown_grace_ms == 10000);
    CHECK(c.restart_base_delay_ms == 200);
    CHECK(c.restart_max_delay_ms == 30000);
    CHECK(c.crash_loop_max == 5);
    CHECK(c.crash_loop_window_s == 60);
    CHECK(c.log_level == LOG_INFO);
    CHECK(c.max_body_bytes == 32u << 20);
    CHECK(c.max_frame_bytes == 16u << 20);
    CHECK(c.journal_fsync == CONF_FSYNC_BATCH);
    CHECK(c.store_fsync == CONF_FSYNC_ALWAYS);
    CHECK(c.lock_max_age_ms == 30000);
    CHECK(c.group_lock_retry_base_delay_ms == 500);
    CHECK(c.group_lock_max_retries == 3);
    CHECK(c.redelivery_base_delay_ms == 200);
    CHECK(c.max_redeliveries == 3);
    CHECK(c.allowed_code_source_hosts.n == 0);
    CHECK(c.python_allowed_packages.n == 0);
    CHECK(c.python_blocked_modules.n == 0);
    CHECK(c.python_allowlist);
    CHECK(c.python_preload.n == 0);
    CHECK(strcmp(c.min_confinement, "none") == 0);
    CHECK(strcmp(c.cgroup_parent, "workmanager") == 0);
    CHECK_EQ(c.host_pids_max, 256);
    CHECK_EQ(c.host_cpu_percent, 0);
    CHECK(c.engines_dir != NULL && c.engines_dir[0] == '/');
    CHECK(c.libexec_dir != NULL && c.libexec_dir[0] == '/');
    CHECK(c.token_file != NULL && c.token_file[0] == '/');
    CHECK(strcmp(origin(&c, "state_dir"), "default") == 0);
    CHECK(conf_default_file()[0] == '/' &&
          strstr(conf_default_file(), "/workmanager/workmanager.conf") != NULL);
    if (gethostname(host, sizeof(host)) == 0) {
        host[sizeof(host) - 1] = '\0';
        CHECK(strcmp(c.instance, host) == 0);
        CHECK(strcmp(origin(&c, "instance"), "derived from the host name") ==
              0);
    }
    conf_free(&c);
    conf_free(&c); /* idempotent */
}

static void
test_precedence(void)
{
    struct conf c;
    char err[512], want[600];
    const char *file = write_file(
        "prec.conf",
        "# a comment\n"
        "\n"
        "runtime_dir = /tmp/wm-run     # inline comment after a blank\n"
        "message_timeout_ms = 1000\n"
        "handshake_timeout_ms = 3000\n"
        "heartbeat_interval_ms = 6000\n"
        "group_lock_max_retries = 5\n"
        "group_lock_retry_base_delay_ms = 100\n"
        "recovery_on_start = yes\n"
        "control_socket_group = \"\"\n"
        "listen = 127.0.0.1:8080\n");

    clear_env();
    setenv("WM_HANDSHAKE_TIMEOUT_MS", "4000", 1);
    setenv("WM_HEARTBEAT_INTERVAL_MS", "6500", 1);
    setenv("GROUP_LOCK_MAX_RETRIES", "7", 1);
    setenv("GROUP_LOCK_RETRY_BASE_DELAY_MS", "150", 1);
    setenv("WM_GROUP_LOCK_RETRY_BASE_DELAY_MS", "250", 1);
    setenv("WORKER_RECOVERY_ON_START", "off", 1);
    setenv("WORKER_RECOVERY_LEASE_TTL_SECONDS", "600", 1);
    setenv("PYTHON_ALLOWED_PACKAGES", "numpy, pandas", 1);
    setenv("PYTHON_BLOCKED_MODULES", "subprocess,os socket", 1);
    setenv("ALLOWED_CODE_SOURCE_HOSTS", "example.com", 1);
    setenv("WM_LISTEN", "", 1);
    if (load(&c, file, true, err, sizeof(err), "heartbeat_interval_ms=9000",
             "heartbeat_interval_ms=7000", "log_level = debug", NULL) != 0) {
        FAIL("precedence: %s", err);
        clear_env();
        return;
    }
    CHECK(c.file != NULL && strcmp(c.file, file) == 0);
    /* file only */
    CHECK(c.message_timeout_ms == 1000);
    snprintf(want, sizeof(want), "file %s:4", file);
    CHECK(strcmp(origin(&c, "message_timeout_ms"), want) == 0);
    /* file < WM_ environment */
    CHECK(c.handshake_timeout_ms == 4000);
    CHECK(strcmp(origin(&c, "handshake_timeout_ms"),
                 "environment WM_HANDSHAKE_TIMEOUT_MS") == 0);
    /* file < environment < -o, the last -o winning */
    CHECK(c.heartbeat_interval_ms == 7000);
    CHECK(strcmp(origin(&c, "heartbeat_interval_ms"), "-o") == 0);
    CHECK(c.log_level == LOG_DEBUG);
    /* the original's names */
    CHECK(c.group_lock_max_retries == 7);
    CHECK(strcmp(origin(&c, "group_lock_max_retries"),
                 "environment GROUP_LOCK_MAX_RETRIES") == 0);
    CHECK(!c.recovery_on_start);
    CHECK(c.recovery_lease_ttl_s == 600);
    CHECK(c.python_allowed_packages.n == 2 &&
          strcmp(c.python_allowed_packages.v[0], "numpy") == 0 &&
          strcmp(c.python_allowed_packages.v[1], "pandas") == 0);
    CHECK(c.python_blocked_modules.n == 3 &&
          strcmp(c.python_blocked_modules.v[2], "socket") == 0);
    CHECK(c.allowed_code_source_hosts.n == 1);
    /* WM_<KEY> wins over the original's name */
    CHECK(c.group_lock_retry_base_delay_ms == 250);
    /* an empty environment value is a value */
    CHECK(strcmp(c.listen, "") == 0);
    CHECK(strcmp(origin(&c, "listen"), "environment WM_LISTEN") == 0);
    /* derived from the file's runtime_dir */
    CHECK(strcmp(c.control_socket, "/tmp/wm-run/control.sock") == 0);
    CHECK(strcmp(c.runtime_dir, "/tmp/wm-run") == 0);
    conf_free(&c);
    clear_env();
}

static void
test_units(void)
{
    struct conf c;
    char err[512];

    clear_env();
    CHECK(load(&c, no_file(), false, err, sizeof(err), "message_timeout_ms=20s",
               "lock_max_age_ms=1min", "idle_timeout_s=2h",
               "crash_loop_window_s=1500ms", NULL) == -1);
    CHECK(check_has_all(err, "-o crash_loop_window_s=1500ms",
                        "crash_loop_window_s", "whole number of seconds",
                        NULL));
    if (load(&c, no_file(), false, err, sizeof(err), "message_timeout_ms=20s",
             "lock_max_age_ms=1min", "idle_timeout_s=2h",
             "crash_loop_window_s=2000ms", "max_body_bytes=1G",
             "max_frame_bytes = 64 KiB", "control_socket_mode=600",
             "shutdown_grace_ms=0", "idle_timeout_s=0", NULL) != 0) {
        FAIL("units: %s", err);
        return;
    }
    CHECK(c.message_timeout_ms == 20000);
    CHECK(c.lock_max_age_ms == 60000);
    CHECK(c.idle_timeout_s == 0);
    CHECK(c.crash_loop_window_s == 2);
    CHECK(c.max_body_bytes == 1u << 30);
    CHECK(c.max_frame_bytes == 64u << 10);
    CHECK(c.control_socket_mode == 0600);
    CHECK(c.shutdown_grace_ms == 0);
    conf_free(&c);
}

/* The edges the syntax checks of names accept. */
static void
test_good_names(void)
{
    struct conf c;
    char err[512];

    clear_env();
    if (load(&c, no_file(), false, err, sizeof(err), "user=3000:3000",
             "control_socket_group=wm.admins_2-x", "cgroup_parent=wm-2_x",
             "instance=Host-1.example_a",
             "min_confinement=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
             "local_principals=uid:1001=acme/reader, uid:1002=b.c-d/operator "
             "user:root=x_1/tenant-admin",
             NULL) != 0) {
        FAIL("names: %s", err);
        return;
    }
    struct roles_local e;
    CHECK(roles_local_find(c.local_principals, 1002, &e, err, sizeof err) == 1);
    CHECK(e.role == ROLE_OPERATOR && strcmp(e.tenant, "b.c-d") == 0);
    CHECK(roles_local_find(c.local_principals, 0, &e, err, sizeof err) == 1);
    CHECK(e.role == ROLE_TENANT_ADMIN && strcmp(e.tenant, "x_1") == 0);
    CHECK(roles_local_find(c.local_principals, 1003, &e, err, sizeof err) == 0);
    CHECK(strcmp(c.user, "3000:3000") == 0);
    CHECK(strcmp(c.control_socket_group, "wm.admins_2-x") == 0);
    CHECK(strcmp(c.instance, "Host-1.example_a") == 0);
    conf_free(&c);
}

/* One bad value: loading fails naming the key, the source and `what`. */
static void
bad_o(const char *arg, const char *key, const char *what)
{
    struct conf c;
    char err[512], src[256];

    snprintf(src, sizeof(src), "-o %s", arg);
    if (load(&c, no_file(), false, err, sizeof(err), arg, NULL) != -1) {
        FAIL("-o %s was accepted", arg);
        conf_free(&c);
        return;
    }
    if (!check_has_all(err, src, key, what, NULL))
        FAIL("the message for -o %s lacks what is listed above", arg);
}

static void
test_bad_values(void)
{
    clear_env();
    /* uint */
    bad_o("crash_loop_max=abc", "crash_loop_max", "not a whole number");
    bad_o("crash_loop_max=-1", "crash_loop_max", "not a whole number");
    bad_o("group_lock_max_retries=21", "group_lock_max_retries",
          "above the maximum 20");
    bad_o("group_lock_max_retries=0", "group_lock_max_retries",
          "below the minimum 1");
    bad_o("max_redeliveries=99999999999999999999999", "max_redeliveries",
          "too large");
    bad_o("crash_loop_max=", "crash_loop_max", "empty");
    /* durations */
    bad_o("message_timeout_ms=soon", "message_timeout_ms", "not a duration");
    bad_o("message_timeout_ms=10 weeks", "message_timeout_ms",
          "not a duration");
    bad_o("message_timeout_ms=5", "message_timeout_ms",
          "below the minimum 10 ms");
    bad_o("recovery_lease_ttl_s=2d", "recovery_lease_ttl_s",
          "above the maximum 86400 s");
    bad_o("handshake_timeout_ms=1.5s", "handshake_timeout_ms",
          "not a duration");
    /* sizes */
    bad_o("max_body_bytes=12X", "max_body_bytes", "not a size");
    bad_o("max_body_bytes=2G", "max_body_bytes",
          "above the maximum 1073741824 bytes");
    bad_o("max_frame_bytes=100", "max_frame_bytes", "below the minimum");
    /* enums */
    bad_o("store=raid", "store", "not one of: file, nats");
    bad_o("broker=kafka", "broker", "not one of: embedded, nats");
    bad_o("journal_fsync=sometimes", "journal_fsync",
          "not one of: always, batch, off");
    bad_o("log_level=loud", "log_level",
          "not one of: debug, info, notice, warning, error");
    /* bools */
    bad_o("recovery_on_start=maybe", "recovery_on_start",
          "true/false, 1/0, yes/no or on/off");
    bad_o("recovery_on_start=", "recovery_on_start", "not a boolean");
    /* modes */
    bad_o("control_socket_mode=0999", "control_socket_mode", "not a file mode");
    bad_o("control_socket_mode=07777", "control_socket_mode",
          "not a file mode");
    /* paths */
    bad_o("state_dir=var/lib", "state_dir", "not an absolute path");
    bad_o("state_dir=", "state_dir", "empty");
    /* strings with a syntax */
    bad_o("listen=8080", "listen", "not an address");
    bad_o("listen=localhost:99999", "listen", "port");
    bad_o("listen=[::1:80", "listen", "not an address");
    bad_o("control_socket_group=a b", "control_socket_group",
          "not a group name");
    bad_o("instance=a/b", "instance", "not an instance name");
    bad_o("instance=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
          "instance", "at most 100");
    bad_o("nats_url=http://x", "nats_url", "not a NATS URL");
    bad_o("nats_bucket_prefix=wm.x", "nats_bucket_prefix",
          "not a bucket prefix");
    bad_o("nats_storage=disk", "nats_storage", "not one of: file, memory");
    bad_o("min_confinement=Full!", "min_confinement", "is not a word");
    bad_o("cgroup_parent=../x", "cgroup_parent", "is not a word");
    bad_o("cgroup_parent=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "cgroup_parent",
          "is not a word");
    bad_o("control_socket_group=-wheel", "control_socket_group",
          "not a group name");
    bad_o("user=a/b", "user", "is not a user");
    /* local_principals (master/core/roles.h) */
    bad_o("local_principals=1001=acme/reader", "local_principals",
          "must begin with uid: or user:");
    bad_o("local_principals=uid:x=acme/reader", "local_principals", "bad uid");
    bad_o("local_principals=uid:1001=Acme/reader", "local_principals",
          "the tenant must match");
    bad_o("local_principals=uid:1001=acme/root", "local_principals",
          "the role must be");
    bad_o("local_principals=uid:1001=acme", "local_principals",
          "is not uid:<N>=<tenant>/<role>");
    bad_o("local_principals=user:no-such-user-wm=acme/reader",
          "local_principals", "no such user");
    bad_o("user=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "user", "is not a user");
    bad_o("host_pids_max=-1", "host_pids_max", "");
    bad_o("instance=a\tb", "instance", "control character");
    bad_o("python_allowed_packages=numpy,../x", "python_allowed_packages",
          "'../x' is not a module name");
    bad_o("python_blocked_modules=os.", "python_blocked_modules",
          "'os.' is not a module name");
    bad_o("python_preload=1socket", "python_preload",
          "'1socket' is not a module name");
    /* list entries are checked one by one */
    bad_o("code_source_allowed_networks=10.0.0.0/8,nonsense",
          "code_source_allowed_networks", "nonsense");
    bad_o("drop_oldest_topics=metrics.*,a/b", "drop_oldest_topics",
          "'a/b' is not a topic pattern");
    bad_o("drop_oldest_topics=[ab]", "drop_oldest_topics",
          "'[ab]' is not a topic pattern");
    bad_o("python_allowlist=sometimes", "python_allowlist",
          "true/false, 1/0, yes/no or on/off");
}

static void
test_bad_sources(void)
{
    struct conf c;
    char err[512], want[600];
    const char *file;

    clear_env();
    /* an unknown key in the file names file:line */
    file = write_file("unknown.conf", "state_dir = /x\n\nbogus = 1\n");
    CHECK(load(&c, file, true, err, sizeof(err), NULL) == -1);
    snprintf(want, sizeof(want), "%s:3:", file);
    CHECK(check_has_all(err, want, "unknown key 'bogus'", NULL));
    /* ... with a suggestion when close to a key */
    file = write_file("typo.conf", "mesage_timeout_ms = 1\n");
    CHECK(load(&c, file, true, err, sizeof(err), NULL) == -1);
    CHECK(check_has_all(err, ":1:", "unknown key 'mesage_timeout_ms'",
                        "did you mean message_timeout_ms?", NULL));
    /* a bad value in the file names file:line and the key */
    file = write_file("badval.conf", "# x\nstore = raid\n");
    CHECK(load(&c, file, true, err, sizeof(err), NULL) == -1);
    snprintf(want, sizeof(want), "%s:2: store: 'raid' is not one of", file);
    CHECK(check_has_all(err, want, NULL));
    /* a line that is not key = value */
    file = write_file("noeq.conf", "state_dir /x\n");
    CHECK(load(&c, file, true, err, sizeof(err), NULL) == -1);
    CHECK(check_has_all(err, ":1:", "expected key = value", NULL));
    file = write_file("quote.conf", "listen = \"127.0.0.1:80\n");
    CHECK(load(&c, file, true, err, sizeof(err), NULL) == -1);
    CHECK(check_has_all(err, ":1:", "unterminated quote", NULL));
    /* a key given twice in the file */
    file = write_file("twice.conf", "listen = a:1\n\nlisten = b:2\n");
    CHECK(load(&c, file, true, err, sizeof(err), NULL) == -1);
    CHECK(check_has_all(err, ":3:", "listen is already set at line 1", NULL));
    /* an unknown -o key, and an -o without '=' */
    CHECK(load(&c, no_file(), false, err, sizeof(err), "nope=1", NULL) == -1);
    CHECK(check_has_all(err, "-o nope=1", "unknown key 'nope'", NULL));
    CHECK(load(&c, no_file(), false, err, sizeof(err), "listen", NULL) == -1);
    CHECK(check_has_all(err, "-o listen", "expected key=value", NULL));
    /* a bad value in the environment names the variable */
    setenv("WM_CRASH_LOOP_MAX", "lots", 1);
    CHECK(load(&c, no_file(), false, err, sizeof(err), NULL) == -1);
    CHECK(check_has_all(err, "environment WM_CRASH_LOOP_MAX", "crash_loop_max",
                        "'lots'", NULL));
    clear_env();
    setenv("WORKER_RECOVERY_ON_START", "perhaps", 1);
    CHECK(load(&c, no_file(), false, err, sizeof(err), NULL) == -1);
    CHECK(check_has_all(err, "environment WORKER_RECOVERY_ON_START",
                        "recovery_on_start", "not a boolean", NULL));
    clear_env();
    /* a missing explicit file is an error, a missing default file not */
    CHECK(load(&c, no_file(), true, err, sizeof(err), NULL) == -1);
    CHECK(check_has_all(err, no_file(), "No such file or directory", NULL));
    CHECK(load(&c, no_file(), false, err, sizeof(err), NULL) == 0);
    conf_free(&c);
    /* a directory is not a file */
    CHECK(load(&c, tmpdir, true, err, sizeof(err), NULL) == -1);
    CHECK(check_has_all(err, tmpdir, NULL));
    /* \r\n line ends are taken; a NUL byte fails, naming its line */
    file = write_file("crlf.conf", "listen = a:1\r\nstate_dir = /x\r\n");
    CHECK(load(&c, file, true, err, sizeof(err), NULL) == 0);
    CHECK(strcmp(c.listen, "a:1") == 0 && strcmp(c.state_dir, "/x") == 0);
    conf_free(&c);
    file = write_bytes("nul.conf", "listen = a:1\nstate_dir = /x\0y\n", 30);
    CHECK(load(&c, file, true, err, sizeof(err), NULL) == -1);
    CHECK(check_has_all(err, ":2:", "NUL byte in the line", NULL));
}

static void
test_rules(void)
{
    struct conf c;
    char err[512];

    clear_env();
    CHECK(load(&c, no_file(), false, err, sizeof(err), "message_timeout_ms=30s",
               NULL) == -1);
    CHECK(check_has_all(err, "message_timeout_ms (30000, -o)",
                        "less than lock_max_age_ms (30000, default)", NULL));
    setenv("WM_LOCK_MAX_AGE_MS", "1000", 1);
    CHECK(load(&c, no_file(), false, err, sizeof(err), NULL) == -1);
    CHECK(check_has_all(
        err, "message_timeout_ms (25000, default)",
        "lock_max_age_ms (1000, environment WM_LOCK_MAX_AGE_MS)", NULL));
    CHECK(load(&c, no_file(), false, err, sizeof(err), "message_timeout_ms=999",
               NULL) == 0);
    conf_free(&c);
    clear_env();
    CHECK(load(&c, no_file(), false, err, sizeof(err),
               "restart_base_delay_ms=60000", NULL) == -1);
    CHECK(check_has_all(err, "restart_base_delay_ms", "restart_max_delay_ms",
                        NULL));
    CHECK(load(&c, no_file(), false, err, sizeof(err),
               "heartbeat_timeout_ms=5000", NULL) == -1);
    CHECK(check_has_all(err, "heartbeat_timeout_ms", "heartbeat_interval_ms",
                        NULL));
    CHECK(load(&c, no_file(), false, err, sizeof(err), "instance_dead_ms=3000",
               NULL) == -1);
    CHECK(check_has_all(err, "instance_disconnected_ms (3000, default)",
                        "instance_dead_ms (3000, -o)", NULL));
    CHECK(load(&c, no_file(), false, err, sizeof(err),
               "instance_heartbeat_ms=5000", NULL) == -1);
    CHECK(check_has_all(err, "instance_heartbeat_ms (5000, -o)", NULL));
    CHECK(load(&c, no_file(), false, err, sizeof(err),
               "runtime_dir=/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
               NULL) == -1);
    CHECK(check_has_all(err, "control_socket", "derived from runtime_dir",
                        "unix socket", NULL));
}

static void
test_line_split(void)
{
    char why[128], *k, *v;
    char l1[] = "  key =  value with spaces  ";
    char l2[] = "key = \"  quoted # kept \"  # comment";
    char l3[] = "key = a#b # comment";
    char l4[] = "   # only a comment";
    char l5[] = "key =";
    char l6[] = "= value";
    char l7[] = "key = \"x\" y";

    CHECK(conf_line_split(l1, &k, &v, why, sizeof(why)) == 0);
    CHECK(k != NULL && strcmp(k, "key") == 0 &&
          strcmp(v, "value with spaces") == 0);
    CHECK(conf_line_split(l2, &k, &v, why, sizeof(why)) == 0);
    CHECK(v != NULL && strcmp(v, "  quoted # kept ") == 0);
    CHECK(conf_line_split(l3, &k, &v, why, sizeof(why)) == 0);
    CHECK(v != NULL && strcmp(v, "a#b") == 0);
    CHECK(conf_line_split(l4, &k, &v, why, sizeof(why)) == 0 && k == NULL);
    CHECK(conf_line_split(l5, &k, &v, why, sizeof(why)) == 0);
    CHECK(k != NULL && strcmp(v, "") == 0);
    CHECK(conf_line_split(l6, &k, &v, why, sizeof(why)) == -1);
    CHECK(conf_line_split(l7, &k, &v, why, sizeof(why)) == -1);
}

/* --print-config's output, read back as a file, gives the same values. */
static void
test_dump_roundtrip(void)
{
    struct conf a, b;
    char err[512], path[512];
    size_t n;
    const struct conf_key *k = conf_keys(&n);
    FILE *f;

    clear_env();
    setenv("PYTHON_ALLOWED_PACKAGES", "numpy,pandas", 1);
    if (load(&a, no_file(), false, err, sizeof(err), "listen=[::1]:8443",
             "max_frame_bytes=1000000", "control_socket_group=wm", NULL) != 0) {
        FAIL("dump: %s", err);
        clear_env();
        return;
    }
    clear_env();
    snprintf(path, sizeof(path), "%s/dump.conf", tmpdir);
    f = fopen(path, "w");
    REQUIRE(f != NULL);
    conf_dump(&a, f);
    fclose(f);
    if (load(&b, path, true, err, sizeof(err), NULL) != 0) {
        FAIL("reading the dump back: %s", err);
        conf_free(&a);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char va[4096], vb[4096];

        conf_value_format(&a, k[i].name, va, sizeof(va));
        conf_value_format(&b, k[i].name, vb, sizeof(vb));
        if (strcmp(va, vb) != 0)
            FAIL("%s: %s before, %s after", k[i].name, va, vb);
    }
    CHECK(strncmp(origin(&b, "listen"), "file ", 5) == 0);
    conf_free(&a);
    conf_free(&b);
}

/* Every row is complete, and documented in the table of conf_keys.c. */
static void
test_table(void)
{
    const char *srcdir;
    size_t n, rows = 0;
    const struct conf_key *k = conf_keys(&n);
    char path[1024], *text = NULL;
    size_t len = 0;
    FILE *f;

    CHECK(n >= 38);
    for (size_t i = 0; i < n; i++) {
        char env[128] = "WM_";

        for (size_t j = 0; k[i].name[j] != '\0' && j + 4 < sizeof(env); j++)
            env[3 + j] = (char)toupper((unsigned char)k[i].name[j]);
        if (strcmp(env, k[i].env) != 0)
            FAIL("%s: environment name %s, not %s", k[i].name, k[i].env, env);
        CHECK(k[i].doc != NULL && k[i].doc[0] != '\0');
        CHECK(conf_key_find(k[i].name) == &k[i]);
        if (k[i].type == CONF_ENUM)
            CHECK(k[i].words != NULL);
    }
    srcdir = check_srcdir();
    if (srcdir == NULL) {
        FAIL("neither WM_TOP_SRCDIR nor srcdir: cannot check "
             "the table of conf_keys.c");
        return;
    }
    snprintf(path, sizeof(path), "%s/master/core/conf_keys.c", srcdir);
    f = fopen(path, "r");
    if (f == NULL) {
        FAIL("%s: %s", path, strerror(errno));
        return;
    }
    if (getdelim(&text, &len, '\0', f) < 0)
        FAIL("%s: %s", path, strerror(errno));
    fclose(f);
    if (text == NULL)
        return;
    for (const char *p = text; (p = strstr(p, "\n * | `")) != NULL; p++)
        rows++;
    CHECK(rows == n);
    for (size_t i = 0; i < n; i++) {
        char row[256], cell[512], *line, *end;

        snprintf(row, sizeof(row), "\n * | `%s` |", k[i].name);
        line = strstr(text, row);
        if (line == NULL) {
            FAIL("%s has no row in the table of conf_keys.c", k[i].name);
            continue;
        }
        line++;
        end = strchr(line, '\n');
        if (end != NULL)
            *end = '\0';
        /* the row says what the code does: environment, default, doc */
        if (k[i].env_alt != NULL)
            snprintf(cell, sizeof(cell), "| `%s`, `%s` |", k[i].env,
                     k[i].env_alt);
        else
            snprintf(cell, sizeof(cell), "| `%s` |", k[i].env);
        CHECK(strstr(line, cell) != NULL);
        snprintf(cell, sizeof(cell), "| %s |", k[i].doc);
        CHECK(strstr(line, cell) != NULL);
        if (strcmp(k[i].name, "token_file") == 0 ||
            strcmp(k[i].name, "engines_dir") == 0 ||
            strcmp(k[i].name, "libexec_dir") == 0)
            /* set at build time: the table shows where from */
            snprintf(cell, sizeof(cell), "| `<");
        else if (k[i].def[0] == '\0')
            snprintf(cell, sizeof(cell), "| empty");
        else
            snprintf(cell, sizeof(cell), "| `%s` |", k[i].def);
        if (strstr(line, cell) == NULL)
            FAIL("row of %s lacks \"%s\"", k[i].name, cell);
        if (end != NULL)
            *end = '\n';
    }
    free(text);
}

int
main(void)
{
    const char *base = getenv("TMPDIR");
    char cmd[600];

    snprintf(tmpdir, sizeof(tmpdir), "%s/test_conf.XXXXXX",
             base != NULL && base[0] != '\0' ? base : "/tmp");
    if (mkdtemp(tmpdir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    RUN(test_defaults);
    RUN(test_precedence);
    RUN(test_units);
    RUN(test_good_names);
    RUN(test_bad_values);
    RUN(test_bad_sources);
    RUN(test_rules);
    RUN(test_line_split);
    RUN(test_dump_roundtrip);
    RUN(test_table);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", tmpdir);
    return check_result();
}
