/*
 * conf.c — the sources of the daemon's configuration, read in order, and
 * the rules between keys (see conf.h; DESIGN §8).
 *
 * Sources, each overriding the one before:
 *   1. the defaults of the table (conf_keys.c), parsed by the same code as
 *      every other source (conf_values.c);
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
 * Rules between keys: message_timeout_ms < lock_max_age_ms (a group lock
 * must outlive the processing it guards, DESIGN §6; hence the default
 * message_timeout_ms of 25000 under the lock's 30000); restart_base_delay_ms
 * <= restart_max_delay_ms; heartbeat_timeout_ms < heartbeat_interval_ms
 * (an echo is awaited before the next heartbeat); control_socket fits a
 * unix socket address (107 bytes).
 *
 * The `key = value` line syntax (conf_line_split(), conf_line_read()) is
 * shared with the engines.d descriptors (engines.c).
 */
#include "config.h"

#include "master/core/conf.h"
#include "master/core/conf_private.h"

#include "lib/errbuf.h"
#include "lib/spell.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

/* Build-time path (Makefile: from sysconfdir). */
#ifndef WM_CONF_FILE
#define WM_CONF_FILE "/etc/workmanager/workmanager.conf"
#endif

const char *
conf_default_file(void)
{
    return WM_CONF_FILE;
}

/* "unknown key 'x'", with the nearest key when one is close. */
static void
unknown_key(const char *name, char *why, size_t whylen)
{
    const char *best = NULL;
    size_t best_score = SIZE_MAX;

    for (size_t i = 0; i < conf_key_count; i++) {
        size_t score = spell_score(name, conf_key_table[i].name);

        if (score < best_score) {
            best_score = score;
            best = conf_key_table[i].name;
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

int
conf_line_read(FILE *f, const char *path, char **line, size_t *cap,
               unsigned *lineno, char *err, size_t errlen)
{
    ssize_t n = getline(line, cap, f);

    if (n < 0)
        return 0;
    (*lineno)++;
    if ((size_t)n != strlen(*line))
        return errbuf_set(err, errlen, "%s:%u: NUL byte in the line", path,
                          *lineno);
    while (n > 0 && ((*line)[n - 1] == '\n' || (*line)[n - 1] == '\r'))
        (*line)[--n] = '\0';
    return 1;
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
    char why[CONF_WHY_MAX];
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    int n;
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
    while ((n = conf_line_read(f, path, &line, &cap, &lineno, err, errlen)) >
           0) {
        char *p = line, *key, *value;
        ssize_t i;

        /* A byte order mark some editors write. */
        if (lineno == 1 && strncmp(p, "\xef\xbb\xbf", 3) == 0)
            p += 3;
        if (conf_line_split(p, &key, &value, why, sizeof(why)) < 0) {
            errbuf_set(err, errlen, "%s:%u: %s", path, lineno, why);
            goto out;
        }
        if (key == NULL)
            continue;
        i = conf_key_index(key);
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
        if (conf_value_set(c, &conf_key_table[i], value, why, sizeof(why)) <
            0) {
            errbuf_set(err, errlen, "%s:%u: %s: %s", path, lineno, key, why);
            goto out;
        }
        c->origin[i] = (struct conf_origin){ CONF_SRC_FILE, lineno, NULL };
    }
    if (n < 0)
        goto out;
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
    char why[CONF_WHY_MAX];
    const char *raw = getenv(var);
    char *v;
    int rc;

    if (raw == NULL)
        return 0;
    v = strdup(raw);
    if (v == NULL)
        return errbuf_set(err, errlen, "out of memory");
    rc = conf_value_set(c, &conf_key_table[i], trim(v), why, sizeof(why));
    free(v);
    if (rc < 0)
        return errbuf_set(err, errlen, "environment %s: %s: %s", var,
                          conf_key_table[i].name, why);
    c->origin[i] = (struct conf_origin){ CONF_SRC_ENV, 0, var };
    return 0;
}

static int
load_env(struct conf *c, char *err, size_t errlen)
{
    /* The original's name first, so that WM_<KEY> wins over it. */
    for (size_t i = 0; i < conf_key_count; i++) {
        if (conf_key_table[i].env_alt != NULL &&
            load_env_var(c, i, conf_key_table[i].env_alt, err, errlen) < 0)
            return -1;
        if (load_env_var(c, i, conf_key_table[i].env, err, errlen) < 0)
            return -1;
    }
    return 0;
}

static int
load_overrides(struct conf *c, char *const *ov, size_t nov, char *err,
               size_t errlen)
{
    char why[CONF_WHY_MAX];

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
        i = conf_key_index(key);
        if (i < 0) {
            unknown_key(key, why, sizeof(why));
            free(copy);
            return errbuf_set(err, errlen, "-o %s: %s", ov[j], why);
        }
        rc = conf_value_set(c, &conf_key_table[i], trim(eq + 1), why,
                            sizeof(why));
        free(copy);
        if (rc < 0)
            return errbuf_set(err, errlen, "-o %s: %s: %s", ov[j],
                              conf_key_table[i].name, why);
        c->origin[i] = (struct conf_origin){ CONF_SRC_ARG, 0, NULL };
    }
    return 0;
}

static int
derive(struct conf *c, char *err, size_t errlen)
{
    char why[CONF_WHY_MAX];

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
        c->origin[conf_key_index("control_socket")].source = CONF_SRC_DERIVED;
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
        if (conf_check_instance(host, why, sizeof(why)) < 0 || host[0] == '\0')
            return errbuf_set(err, errlen,
                              "instance: the host name cannot be used: %s; set "
                              "instance",
                              host[0] == '\0' ? "it is empty" : why);
        s = strdup(host);
        if (s == NULL)
            return errbuf_set(err, errlen, "out of memory");
        free(c->instance);
        c->instance = s;
        c->origin[conf_key_index("instance")].source = CONF_SRC_DERIVED;
    }
    return 0;
}

/* "key (value, source)" for messages about rules between keys. */
static void
describe(const struct conf *c, const char *name, char *buf, size_t len)
{
    char value[128], origin[CONF_WHY_MAX];

    conf_value_format(c, name, value, sizeof(value));
    conf_origin_format(c, name, origin, sizeof(origin));
    snprintf(buf, len, "%s (%s, %s)", name, value, origin);
}

static int
check_rules(const struct conf *c, char *err, size_t errlen)
{
    char a[CONF_WHY_MAX + 192], b[CONF_WHY_MAX + 192];
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
    if (c->instance_heartbeat_ms >= c->instance_disconnected_ms ||
        c->instance_disconnected_ms >= c->instance_dead_ms) {
        describe(c, "instance_disconnected_ms", a, sizeof(a));
        describe(c,
                 c->instance_heartbeat_ms >= c->instance_disconnected_ms
                     ? "instance_heartbeat_ms"
                     : "instance_dead_ms",
                 b, sizeof(b));
        return errbuf_set(err, errlen,
                          "%s and %s: instance_heartbeat_ms < "
                          "instance_disconnected_ms < instance_dead_ms, so "
                          "that an instance is judged on several "
                          "heartbeats",
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
    char why[CONF_WHY_MAX];

    memset(c, 0, sizeof(*c));
    c->origin = calloc(conf_key_count, sizeof(*c->origin));
    if (c->origin == NULL) {
        errbuf_set(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < conf_key_count; i++)
        if (conf_value_set(c, &conf_key_table[i], conf_key_table[i].def, why,
                           sizeof(why)) < 0) {
            errbuf_set(err, errlen, "built-in default of %s: %s",
                       conf_key_table[i].name, why);
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
    for (size_t i = 0; i < conf_key_count; i++)
        conf_value_free(c, &conf_key_table[i]);
    free(c->file);
    free(c->origin);
    memset(c, 0, sizeof(*c));
}

/* ---- the table (conf_keys.c) --------------------------------------- */

const struct conf_key *
conf_keys(size_t *n)
{
    *n = conf_key_count;
    return conf_key_table;
}

ssize_t
conf_key_index(const char *name)
{
    for (size_t i = 0; i < conf_key_count; i++)
        if (strcmp(conf_key_table[i].name, name) == 0)
            return (ssize_t)i;
    return -1;
}

const struct conf_key *
conf_key_find(const char *name)
{
    ssize_t i = conf_key_index(name);

    return i < 0 ? NULL : &conf_key_table[i];
}
