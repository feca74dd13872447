/*
 * conf_values.c — the values of the configuration: text to struct conf and
 * back (see conf.h; DESIGN §8).
 *
 * conf_value_set() parses one key's text, whichever source it came from
 * (the built-in defaults go through it too), by the row's type, and then
 * the row's own syntax check (conf_check_*() below); the formatters write
 * a value back in the file's syntax, so that --print-config is itself a
 * valid configuration file.
 *
 * Types: durations take a whole number in the unit of the key's name, or a
 * number with a unit (`30s`, `5min`; ms, s, m/min, h, d) that converts to a
 * whole number of it; sizes take bytes or K/KiB, M/MiB, G/GiB (all ×1024);
 * booleans true/false, 1/0, yes/no, on/off (as the original); lists are
 * separated by commas or blanks.  Paths must be absolute.  No value holds
 * a control character.
 *
 * Invariant: a value that fails to parse leaves struct conf as it was, so
 * that a later source never sees half a value.
 */
#include "config.h"

#include "master/core/conf.h"
#include "master/core/conf_private.h"

#include "lib/errbuf.h"
#include "lib/name.h"
#include "master/core/netrange.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
int
conf_check_listen(const char *v, char *why, size_t whylen)
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

/* Whether v is min to max bytes, each of class `is` or one of `punct`:
 * the shape of the names below. */
static bool
is_made_of(const char *v, size_t min, size_t max, int (*is)(int),
           const char *punct)
{
    size_t n = strlen(v);

    if (n < min || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is((unsigned char)v[i]) && strchr(punct, v[i]) == NULL)
            return false;
    return true;
}

/* A group name as useradd(8) accepts it, or a numeric gid. */
int
conf_check_group(const char *v, char *why, size_t whylen)
{
    if (v[0] != '-' && is_made_of(v, 0, 32, isalnum, "_.-"))
        return 0;
    return errbuf_set(why, whylen,
                      "'%s' is not a group name or gid (letters, digits, "
                      "'_', '.', '-'; at most 32)",
                      v);
}

/* instance: what follows urn:workmanager: in event sources, and the first
 * part of this daemon's name in group lock records ("<instance>/<boot>",
 * which must fit GROUPLOCK_HOLDER_MAX: hence at most 100). */
#define INSTANCE_MAX 100
int
conf_check_instance(const char *v, char *why, size_t whylen)
{
    if (is_made_of(v, 0, INSTANCE_MAX, isalnum, "_.-"))
        return 0;
    return errbuf_set(why, whylen,
                      "'%s' is not an instance name (letters, digits, '_', "
                      "'.', '-'; at most %d)",
                      v, INSTANCE_MAX);
}

/* The entries of a list value (separated by commas or blanks), each
 * given to one() with its length: 0 when every one passes, else the
 * first failure's -1 (one() wrote why). */
static int
each_entry(const char *v,
           int (*one)(const char *p, size_t len, char *why, size_t whylen),
           char *why, size_t whylen)
{
    const char *p = v;

    for (;;) {
        p += strspn(p, ", \t");
        if (*p == '\0')
            return 0;
        size_t len = strcspn(p, ", \t");
        if (one(p, len, why, whylen) != 0)
            return -1;
        p += len;
    }
}

static int
network_entry(const char *p, size_t len, char *why, size_t whylen)
{
    char one[128];
    struct netrange_net net;

    if (len >= sizeof(one))
        return errbuf_set(why, whylen, "%.40s...: not a network", p);
    memcpy(one, p, len);
    one[len] = '\0';
    return netrange_net_parse(one, &net, why, whylen);
}

/* code_source_allowed_networks: each entry a network netrange_net_parse()
 * takes, so that a typo stops start-up instead of allowing nothing (or
 * more than meant). */
int
conf_check_networks(const char *v, char *why, size_t whylen)
{
    return each_entry(v, network_entry, why, whylen);
}

static int
module_entry(const char *p, size_t len, char *why, size_t whylen)
{
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
    return 0;
}

/* python_*: module names, dotted Python identifiers of ASCII letters,
 * digits and underscores (the Python host refuses any other, and would
 * then not start). */
int
conf_check_modules(const char *v, char *why, size_t whylen)
{
    return each_entry(v, module_entry, why, whylen);
}

static int
topic_pattern_entry(const char *p, size_t len, char *why, size_t whylen)
{
    static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-*?";

    if (len > 128 || strspn(p, ok) < len)
        return errbuf_set(why, whylen,
                          "'%.*s' is not a topic pattern (letters, digits, "
                          "'_', '.', '-', and '*' or '?'; at most 128)",
                          (int)(len > 64 ? 64 : len), p);
    return 0;
}

/* drop_oldest_topics: topic names ([A-Za-z0-9_.-], at most 128) in which
 * `*` and `?` may stand for characters (fnmatch(3) without brackets), so
 * that a typo stops start-up instead of matching no topic. */
int
conf_check_topic_patterns(const char *v, char *why, size_t whylen)
{
    return each_entry(v, topic_pattern_entry, why, whylen);
}

/* A JetStream bucket name is [A-Za-z0-9_-]; the store appends "_state"
 * and "_blobs". */
int
conf_check_nats_bucket_prefix(const char *v, char *why, size_t whylen)
{
    if (is_made_of(v, 1, 32, isalnum, "_-"))
        return 0;
    return errbuf_set(why, whylen,
                      "'%s' is not a bucket prefix (letters, digits, '_', "
                      "'-'; 1 to 32)",
                      v);
}

/* nats_url: comma-separated URLs of the schemes the NATS client takes. */
int
conf_check_nats_url(const char *v, char *why, size_t whylen)
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
int
conf_check_word(const char *v, char *why, size_t whylen)
{
    if (name_slug_valid(v, 32))
        return 0;
    return errbuf_set(why, whylen,
                      "'%s' is not a word (1 to 32 lowercase letters, "
                      "digits, '_', '-')",
                      v);
}

/* user: a user name (as useradd takes them) or uid[:gid]; whether it
 * exists is checked at start-up, as root (privdrop.c). */
int
conf_check_user(const char *v, char *why, size_t whylen)
{
    if (is_made_of(v, 1, 32, isalnum, "_-.:"))
        return 0;
    return errbuf_set(why, whylen,
                      "'%s' is not a user (a name of 1 to 32 letters, "
                      "digits, '_', '-', '.', or uid[:gid])",
                      v);
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
    char allowed[CONF_WHY_MAX] = "";
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
int
conf_value_set(struct conf *c, const struct conf_key *k, const char *v,
               char *why, size_t whylen)
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

void
conf_value_free(struct conf *c, const struct conf_key *k)
{
    void *f = field(c, k);

    if (k->type == CONF_STRING || k->type == CONF_PATH) {
        free(*(char **)f);
        *(char **)f = NULL;
    } else if (k->type == CONF_LIST) {
        list_free(f);
    }
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
    ssize_t i = conf_key_index(name);

    if (i < 0)
        return -1;
    format_value(c, &conf_key_table[i], buf, len);
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
        if (strcmp(conf_key_table[i].name, "control_socket") == 0)
            snprintf(buf, len, "derived from runtime_dir");
        else if (strcmp(conf_key_table[i].name, "instance") == 0)
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
    ssize_t i = conf_key_index(name);

    if (i < 0)
        return -1;
    format_origin(c, (size_t)i, buf, len);
    return 0;
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
    char value[4096], origin[CONF_WHY_MAX + 64];

    for (size_t i = 0; i < conf_key_count; i++) {
        const struct conf_key *k = &conf_key_table[i];
        int n;

        format_origin(c, i, origin, sizeof(origin));
        if (k->type == CONF_LIST &&
            ((const struct conf_list *)cfield(c, k))->n > 0) {
            /* Lists have no length limit: written item by item. */
            const struct conf_list *l = cfield(c, k);

            n = fprintf(out, "%s = ", k->name);
            for (size_t j = 0; j < l->n; j++)
                n += fprintf(out, "%s%s", j > 0 ? "," : "", l->v[j]);
            fprintf(out, "%*s# %s\n", n < 46 ? 48 - n : 2, "", origin);
            continue;
        }
        format_value(c, k, value, sizeof(value));
        if (needs_quotes(value))
            n = fprintf(out, "%s = \"%s\"", k->name, value);
        else
            n = fprintf(out, "%s = %s", k->name, value);
        fprintf(out, "%*s# %s\n", n < 46 ? 48 - n : 2, "", origin);
    }
}
