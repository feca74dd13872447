/*
 * engines.c — engines from engines.d descriptor files (see engines.h).
 *
 * Why files and not a table in the code: an engine is a host binary and a
 * description of it, so packaging an engine (a Debian package adding
 * wm-host-foo and foo.engine) needs no new master.  The master only ever
 * learns, per engine, which MIME types it serves, which binary to start
 * and how (exec'd, or forked from a zygote), and whether it can run here.
 *
 * Loading is strict and probing is lenient: a descriptor the master cannot
 * understand is an operator's mistake and stops start-up at its line; an
 * engine whose host or runtime is missing is a fact about this machine, so
 * the engine is listed as unavailable with a reason that says what is
 * missing and where it was looked for, and start-up continues.
 *
 * Invariants: after engines_load() every entry has a name, at least one
 * MIME type, a spawn mode and a protocol; no two entries share a name or a
 * MIME type; host_path is absolute whenever host is set; reason is NULL
 * exactly when available.
 */
#include "config.h"

#include "master/core/engines.h"

#include "ipc/frame.h"
#include "lib/errbuf.h"
#include "lib/name.h"
#include "master/core/conf.h"
#include "master/core/log.h"
#include "sandbox/sandbox.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define WHY_MAX 256
#define SUFFIX ".engine"

/* ---- a growable string, for reasons ------------------------------------ */

struct sbuf {
    char *s;
    size_t len, cap;
    bool oom;
};

static void sbuf_printf(struct sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->oom)
        return;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return;
    }
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->len + (size_t)n + 1) * 2;
        char *s = realloc(b->s, cap);

        if (s == NULL) {
            b->oom = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* The built string (the caller frees it), or NULL when empty or out of
 * memory. */
static char *
sbuf_take(struct sbuf *b)
{
    char *s = b->s;

    if (b->oom || b->len == 0) {
        free(s);
        s = NULL;
    }
    b->s = NULL;
    b->len = b->cap = 0;
    b->oom = false;
    return s;
}

/* ---- descriptors ------------------------------------------------------- */

enum dkey {
    K_NAME,
    K_MIME_TYPE,
    K_LANGUAGE,
    K_DESCRIPTION,
    K_HOST,
    K_SPAWN,
    K_CONCURRENCY,
    K_IN_PROCESS,
    K_PROTOCOL,
    K_PROBE,
    K_PROBE_WHAT,
    K_PROBE_PATH,
    K_ROLE,
    K_WARM,
    K_COUNT,
};

static const struct {
    const char *name;
    bool repeatable;
} dkeys[K_COUNT] = {
    [K_NAME] = { "name", false },
    [K_MIME_TYPE] = { "mime_type", true },
    [K_LANGUAGE] = { "language", false },
    [K_DESCRIPTION] = { "description", false },
    [K_HOST] = { "host", false },
    [K_SPAWN] = { "spawn", false },
    [K_CONCURRENCY] = { "concurrency", false },
    [K_IN_PROCESS] = { "in_process", false },
    [K_PROTOCOL] = { "protocol", false },
    [K_PROBE] = { "probe", false },
    [K_PROBE_WHAT] = { "probe_what", false },
    [K_PROBE_PATH] = { "probe_path", true },
    [K_ROLE] = { "role", false },
    [K_WARM] = { "warm", false },
};

static const char *const spawn_names[] = {
    [ENGINES_SPAWN_ZYGOTE] = "zygote",
    [ENGINES_SPAWN_EXEC] = "exec",
};

const char *
engines_spawn_name(enum engines_spawn spawn)
{
    if ((size_t)spawn >= sizeof(spawn_names) / sizeof(spawn_names[0]))
        return "?";
    return spawn_names[spawn];
}

static const char *const concurrency_names[] = {
    [ENGINES_CONCURRENCY_THREADS] = "threads",
    [ENGINES_CONCURRENCY_PROCESSES] = "processes",
};

const char *
engines_concurrency_name(enum engines_concurrency c)
{
    if ((size_t)c >= sizeof(concurrency_names) / sizeof(concurrency_names[0]))
        return "?";
    return concurrency_names[c];
}

static void
strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int
strv_push(char ***v, size_t *n, const char *s, size_t len)
{
    char **nv = realloc(*v, (*n + 1) * sizeof(**v));

    if (nv == NULL)
        return -1;
    *v = nv;
    nv[*n] = strndup(s, len);
    if (nv[*n] == NULL)
        return -1;
    (*n)++;
    return 0;
}

static void
entry_free(struct engines_entry *e)
{
    free(e->name);
    strv_free(e->mime_types, e->nmime_types);
    free(e->language);
    free(e->description);
    free(e->host);
    free(e->host_path);
    free(e->role);
    free(e->probe);
    free(e->probe_what);
    strv_free(e->probe_paths, e->nprobe_paths);
    free(e->file);
    free(e->reason);
    free(e->probe_found);
    memset(e, 0, sizeof(*e));
}

/* An engine's name and role: 1 to 32 of [a-z0-9_-] (name_slug_valid()). */
#define WORD_MAX 32

/* A restricted-name of RFC 6838 §4.2. */
static bool
valid_mime_part(const char *s, size_t n)
{
    if (n == 0 || n > 127 || !isalnum((unsigned char)s[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && strchr("!#$&^_.+-", s[i]) == NULL)
            return false;
    return true;
}

static bool
valid_mime(const char *s, size_t n)
{
    const char *slash = memchr(s, '/', n);

    return slash != NULL && valid_mime_part(s, (size_t)(slash - s)) &&
           valid_mime_part(slash + 1, n - (size_t)(slash - s) - 1);
}

/* Length of a MIME type without its parameters and trailing blanks. */
static size_t
mime_len(const char *s)
{
    size_t n = strcspn(s, ";");

    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    return n;
}

static const struct engines_entry *
find_mime_n(const struct engines *list, const char *mime, size_t n)
{
    for (size_t i = 0; i < list->n; i++)
        for (size_t j = 0; j < list->v[i].nmime_types; j++) {
            const char *m = list->v[i].mime_types[j];

            if (strlen(m) == n && strncasecmp(m, mime, n) == 0)
                return &list->v[i];
        }
    return NULL;
}

const struct engines_entry *
engines_find_mime(const struct engines *list, const char *mime)
{
    while (*mime == ' ' || *mime == '\t')
        mime++;
    return find_mime_n(list, mime, mime_len(mime));
}

const struct engines_entry *
engines_find_name(const struct engines *list, const char *name)
{
    for (size_t i = 0; i < list->n; i++)
        if (strcmp(list->v[i].name, name) == 0)
            return &list->v[i];
    return NULL;
}

/* Adds the comma-separated MIME types of v to e, checking each against
 * the engines loaded before (`list`) and e's own. */
static int
add_mime_types(const struct engines *list, struct engines_entry *e,
               const char *v, char *why, size_t whylen)
{
    for (const char *p = v;;) {
        size_t n;

        p += strspn(p, ", \t");
        if (*p == '\0')
            return 0;
        n = strcspn(p, ", \t");
        if (!valid_mime(p, n))
            return errbuf_set(why, whylen,
                              "'%.*s' is not a MIME type (type/subtype)",
                              (int)n, p);
        for (size_t j = 0; j < e->nmime_types; j++)
            if (strlen(e->mime_types[j]) == n &&
                strncasecmp(e->mime_types[j], p, n) == 0)
                return errbuf_set(why, whylen, "mime_type %.*s given twice",
                                  (int)n, p);
        {
            const struct engines_entry *other = find_mime_n(list, p, n);

            if (other != NULL)
                return errbuf_set(why, whylen,
                                  "mime_type %.*s is already served by engine "
                                  "%s (%s)",
                                  (int)n, p, other->name, other->file);
        }
        if (strv_push(&e->mime_types, &e->nmime_types, p, n) < 0)
            return errbuf_set(why, whylen, "out of memory");
        for (char *c = e->mime_types[e->nmime_types - 1]; *c != '\0'; c++)
            *c = (char)tolower((unsigned char)*c);
        p += n;
    }
}

static int
add_probe_paths(struct engines_entry *e, const char *v, char *why,
                size_t whylen)
{
    for (const char *p = v;;) {
        size_t n;

        p += strspn(p, ", \t");
        if (*p == '\0')
            return 0;
        n = strcspn(p, ",");
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (p[0] != '/' && p[0] != '$' && p[0] != '@')
            return errbuf_set(why, whylen,
                              "probe_path '%.*s' must start with '/', '$' or "
                              "'@'",
                              (int)n, p);
        if (strv_push(&e->probe_paths, &e->nprobe_paths, p, n) < 0)
            return errbuf_set(why, whylen, "out of memory");
        p += n;
    }
}

static int
set_string(char **dst, const char *v, char *why, size_t whylen)
{
    char *s = strdup(v);

    if (s == NULL)
        return errbuf_set(why, whylen, "out of memory");
    free(*dst);
    *dst = s;
    return 0;
}

/* Applies one `key = value` of a descriptor to e. */
static int
apply_key(const struct engines *list, struct engines_entry *e, enum dkey k,
          const char *v, char *why, size_t whylen)
{
    const struct engines_entry *other;

    switch (k) {
    case K_NAME:
        if (!name_slug_valid(v, WORD_MAX))
            return errbuf_set(
                why, whylen, "name '%s': use 1 to 32 of a-z, 0-9, '_', '-'", v);
        other = engines_find_name(list, v);
        if (other != NULL)
            return errbuf_set(why, whylen,
                              "engine name %s is already used by %s", v,
                              other->file);
        return set_string(&e->name, v, why, whylen);
    case K_MIME_TYPE:
        return add_mime_types(list, e, v, why, whylen);
    case K_LANGUAGE:
        return set_string(&e->language, v, why, whylen);
    case K_DESCRIPTION:
        return set_string(&e->description, v, why, whylen);
    case K_HOST:
        if (*v == '\0' || (strchr(v, '/') != NULL && v[0] != '/'))
            return errbuf_set(why, whylen,
                              "host '%s': a file name (looked up in "
                              "libexec_dir) or an absolute path",
                              v);
        return set_string(&e->host, v, why, whylen);
    case K_SPAWN:
        for (size_t i = 0; i < sizeof(spawn_names) / sizeof(spawn_names[0]);
             i++)
            if (strcmp(v, spawn_names[i]) == 0) {
                e->spawn = (enum engines_spawn)i;
                return 0;
            }
        return errbuf_set(why, whylen, "spawn '%s' is not one of: zygote, exec",
                          v);
    case K_CONCURRENCY:
        for (size_t i = 0;
             i < sizeof(concurrency_names) / sizeof(concurrency_names[0]); i++)
            if (strcmp(v, concurrency_names[i]) == 0) {
                e->concurrency = (enum engines_concurrency)i;
                return 0;
            }
        return errbuf_set(why, whylen,
                          "concurrency '%s' is not one of: threads, processes",
                          v);
    case K_ROLE:
        if (!name_slug_valid(v, WORD_MAX))
            return errbuf_set(
                why, whylen, "role '%s': use 1 to 32 of a-z, 0-9, '_', '-'", v);
        return set_string(&e->role, v, why, whylen);
    case K_IN_PROCESS:
        if (strcmp(v, "yes") == 0 || strcmp(v, "no") == 0) {
            e->in_process = v[0] == 'y';
            return 0;
        }
        return errbuf_set(why, whylen, "in_process '%s' is not yes or no", v);
    case K_PROTOCOL: {
        unsigned long n = 0;

        if (*v == '\0' || strlen(v) > 5)
            goto bad_protocol;
        for (const char *p = v; *p != '\0'; p++) {
            if (!isdigit((unsigned char)*p))
                goto bad_protocol;
            n = n * 10 + (unsigned long)(*p - '0');
        }
        if (n == 0 || n > 65535)
            goto bad_protocol;
        e->protocol = (unsigned)n;
        return 0;
bad_protocol:
        return errbuf_set(why, whylen,
                          "protocol '%s' is not a version number (1 to 65535)",
                          v);
    }
    case K_WARM: {
        unsigned n = 0;

        if (*v == '\0' || strlen(v) > 2)
            goto bad_warm;
        for (const char *p = v; *p != '\0'; p++) {
            if (!isdigit((unsigned char)*p))
                goto bad_warm;
            n = n * 10 + (unsigned)(*p - '0');
        }
        if (n > ENGINES_WARM_MAX)
            goto bad_warm;
        e->warm = n;
        return 0;
bad_warm:
        return errbuf_set(why, whylen,
                          "warm '%s' is not a number of hosts (0 to %d)", v,
                          ENGINES_WARM_MAX);
    }
    case K_PROBE:
        if (*v == '\0')
            return errbuf_set(why, whylen, "probe is empty");
        return set_string(&e->probe, v, why, whylen);
    case K_PROBE_WHAT:
        return set_string(&e->probe_what, v, why, whylen);
    case K_PROBE_PATH:
        return add_probe_paths(e, v, why, whylen);
    case K_COUNT:
        break;
    }
    return errbuf_set(why, whylen, "unknown key");
}

/* Checks what a whole descriptor needs once its lines are read; *line is
 * the line at fault, 0 when it is a missing one. */
static int
check_entry(struct engines_entry *e, const unsigned *seen, unsigned *line,
            char *why, size_t whylen)
{
    static const enum dkey required[] = { K_NAME, K_MIME_TYPE, K_SPAWN,
                                          K_PROTOCOL };

    *line = 0;
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
        if (seen[required[i]] == 0)
            return errbuf_set(why, whylen, "missing key %s",
                              dkeys[required[i]].name);
    if (e->nmime_types == 0) {
        *line = seen[K_MIME_TYPE];
        return errbuf_set(why, whylen, "mime_type names no MIME type");
    }
    if (e->host == NULL)
        return errbuf_set(why, whylen, "missing key host");
    if (e->probe == NULL && (seen[K_PROBE_WHAT] || seen[K_PROBE_PATH])) {
        bool what = seen[K_PROBE_WHAT] != 0;

        *line = what ? seen[K_PROBE_WHAT] : seen[K_PROBE_PATH];
        return errbuf_set(why, whylen, "%s without probe",
                          what ? "probe_what" : "probe_path");
    }
    if (e->probe != NULL && e->nprobe_paths == 0 && strchr(e->probe, '/') &&
        e->probe[0] != '/') {
        *line = seen[K_PROBE];
        return errbuf_set(why, whylen,
                          "probe without probe_path must be a command name or "
                          "an absolute path");
    }
    if (e->language == NULL &&
        set_string(&e->language, e->name, why, whylen) < 0)
        return -1;
    if (e->role == NULL && set_string(&e->role, "native", why, whylen) < 0)
        return -1;
    return 0;
}

/* Reads descriptor `path` into e, which the caller frees on failure. */
static int
parse_file(const struct engines *list, const char *path,
           struct engines_entry *e, char *err, size_t errlen)
{
    unsigned seen[K_COUNT] = { 0 };
    char why[WHY_MAX];
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    struct stat st;
    int n;
    FILE *f;
    int rc = -1;

    e->file = strdup(path);
    if (e->file == NULL)
        return errbuf_set(err, errlen, "out of memory");
    f = fopen(path, "re");
    if (f == NULL)
        return errbuf_set(err, errlen, "%s: %s", path, strerror(errno));
    if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
        errbuf_set(err, errlen, "%s: not a regular file", path);
        goto out;
    }
    while ((n = conf_line_read(f, path, &line, &cap, &lineno, err, errlen)) >
           0) {
        char *key, *value;
        size_t k;

        if (conf_line_split(line, &key, &value, why, sizeof(why)) < 0) {
            errbuf_set(err, errlen, "%s:%u: %s", path, lineno, why);
            goto out;
        }
        if (key == NULL)
            continue;
        for (k = 0; k < K_COUNT; k++)
            if (strcmp(key, dkeys[k].name) == 0)
                break;
        if (k == K_COUNT) {
            errbuf_set(
                err, errlen,
                "%s:%u: unknown key '%s' (name, mime_type, language, "
                "description, host, spawn, concurrency, role, in_process, "
                "protocol, "
                "probe, probe_what, probe_path, warm)",
                path, lineno, key);
            goto out;
        }
        if (seen[k] != 0 && !dkeys[k].repeatable) {
            errbuf_set(err, errlen, "%s:%u: %s is already set at line %u", path,
                       lineno, key, seen[k]);
            goto out;
        }
        if (apply_key(list, e, (enum dkey)k, value, why, sizeof(why)) < 0) {
            errbuf_set(err, errlen, "%s:%u: %s", path, lineno, why);
            goto out;
        }
        if (seen[k] == 0)
            seen[k] = lineno;
    }
    if (n < 0)
        goto out;
    if (ferror(f)) {
        errbuf_set(err, errlen, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (check_entry(e, seen, &lineno, why, sizeof(why)) < 0) {
        if (lineno > 0)
            errbuf_set(err, errlen, "%s:%u: %s", path, lineno, why);
        else
            errbuf_set(err, errlen, "%s: %s", path, why);
        goto out;
    }
    rc = 0;
out:
    free(line);
    fclose(f);
    return rc;
}

static int
cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool
is_descriptor_name(const char *name)
{
    size_t n = strlen(name), s = strlen(SUFFIX);

    return name[0] != '.' && n > s && strcmp(name + n - s, SUFFIX) == 0;
}

/* The sorted names of the descriptors in dir. */
static int
list_dir(const char *dir, char ***names, size_t *n, char *err, size_t errlen)
{
    struct dirent *de;
    DIR *d;

    *names = NULL;
    *n = 0;
    d = opendir(dir);
    if (d == NULL)
        return errbuf_set(err, errlen, "engines_dir %s: %s", dir,
                          strerror(errno));
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        if (!is_descriptor_name(de->d_name))
            continue;
        if (strv_push(names, n, de->d_name, strlen(de->d_name)) < 0) {
            closedir(d);
            return errbuf_set(err, errlen, "out of memory");
        }
        errno = 0;
    }
    if (errno != 0) {
        int e = errno;

        closedir(d);
        return errbuf_set(err, errlen, "engines_dir %s: %s", dir, strerror(e));
    }
    closedir(d);
    if (*n > 1)
        qsort(*names, *n, sizeof(**names), cmp_names);
    return 0;
}

static char *
path_join(const char *dir, const char *name)
{
    size_t dl = strlen(dir);
    size_t n = dl + strlen(name) + 2;
    char *p = malloc(n);

    if (p == NULL)
        return NULL;
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    snprintf(p, n, "%.*s%s%s", (int)dl, dir,
             dl > 0 && dir[dl - 1] == '/' ? "" : "/", name);
    return p;
}

int
engines_load(const char *dir, const char *libexec_dir, struct engines *list,
             char *err, size_t errlen)
{
    char **names = NULL;
    size_t nnames = 0;
    int rc = -1;

    memset(list, 0, sizeof(*list));
    list->libexec_dir = strdup(libexec_dir);
    if (list->libexec_dir == NULL) {
        errbuf_set(err, errlen, "out of memory");
        goto out;
    }
    if (list_dir(dir, &names, &nnames, err, errlen) < 0)
        goto out;
    if (nnames > 0) {
        list->v = calloc(nnames, sizeof(*list->v));
        if (list->v == NULL) {
            errbuf_set(err, errlen, "out of memory");
            goto out;
        }
    }
    for (size_t i = 0; i < nnames; i++) {
        char *path = path_join(dir, names[i]);
        struct engines_entry *e = &list->v[list->n];
        int prc;

        if (path == NULL) {
            errbuf_set(err, errlen, "out of memory");
            goto out;
        }
        prc = parse_file(list, path, e, err, errlen);
        free(path);
        if (prc == 0 && e->host != NULL) {
            /* Fixed for the list's life: callers may keep the pointer. */
            e->host_path = e->host[0] == '/'
                               ? strdup(e->host)
                               : path_join(list->libexec_dir, e->host);
            if (e->host_path == NULL)
                prc = errbuf_set(err, errlen, "out of memory");
        }
        if (prc < 0) {
            entry_free(e);
            goto out;
        }
        list->n++;
    }
    engines_probe(list);
    rc = 0;
out:
    strv_free(names, nnames);
    if (rc < 0)
        engines_free(list);
    return rc;
}

void
engines_free(struct engines *list)
{
    for (size_t i = 0; i < list->n; i++)
        entry_free(&list->v[i]);
    free(list->v);
    free(list->libexec_dir);
    memset(list, 0, sizeof(*list));
}

/* ---- availability ------------------------------------------------------ */

static bool
is_executable_file(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
           access(path, X_OK) == 0;
}

/* The daemon's PATH, or what execvp(3) would use without one. */
static const char *
search_path(void)
{
    const char *path = getenv("PATH");

    return path != NULL && *path != '\0' ? path : "/bin:/usr/bin";
}

/* The path of executable `name` on PATH, or NULL. */
static char *
find_on_path(const char *name, size_t namelen)
{
    const char *path = search_path();

    for (const char *p = path;;) {
        size_t n = strcspn(p, ":");

        /* An empty element would mean the daemon's working directory:
         * never a place to run things from. */
        if (n > 0 && p[0] == '/') {
            size_t len = n + namelen + 2;
            char *cand = malloc(len);

            if (cand == NULL)
                return NULL;
            snprintf(cand, len, "%.*s/%.*s", (int)n, p, (int)namelen, name);
            if (is_executable_file(cand))
                return cand;
            free(cand);
        }
        if (p[n] == '\0')
            return NULL;
        p += n + 1;
    }
}

/*
 * Expands `$VAR`, `${VAR}` and a leading `@cmd` of probe path entry `in`.
 * Returns the expansion (the caller frees it), or NULL with why the entry
 * was skipped in *note (a variable unset, a command not on PATH).
 */
static char *
expand(const char *in, struct sbuf *note)
{
    struct sbuf out = { 0 };
    const char *p = in;

    if (*p == '@') {
        size_t n = strcspn(p + 1, "/");
        char *cmd = find_on_path(p + 1, n);
        char *real, *slash;

        if (cmd == NULL) {
            sbuf_printf(note, "%.*s is not on PATH", (int)n, p + 1);
            return NULL;
        }
        real = realpath(cmd, NULL);
        free(cmd);
        if (real == NULL) {
            sbuf_printf(note, "%.*s: %s", (int)n, p + 1, strerror(errno));
            return NULL;
        }
        slash = strrchr(real, '/');
        *slash = '\0';
        sbuf_printf(&out, "%s", real[0] != '\0' ? real : "/");
        free(real);
        p += 1 + n;
    }
    while (*p != '\0') {
        const char *start;
        size_t n;
        bool braces;
        char var[128];
        const char *val;

        if (*p != '$') {
            n = strcspn(p, "$");
            sbuf_printf(&out, "%.*s", (int)n, p);
            p += n;
            continue;
        }
        braces = p[1] == '{';
        start = p + (braces ? 2 : 1);
        for (n = 0; isalnum((unsigned char)start[n]) || start[n] == '_'; n++)
            ;
        if (n == 0 || n >= sizeof(var) || (braces && start[n] != '}')) {
            sbuf_printf(&out, "$");
            p++;
            continue;
        }
        memcpy(var, start, n);
        var[n] = '\0';
        val = getenv(var);
        if (val == NULL || *val == '\0') {
            sbuf_printf(note, "%s is not set", var);
            free(sbuf_take(&out));
            return NULL;
        }
        sbuf_printf(&out, "%s", val);
        p = start + n + (braces ? 1 : 0);
    }
    return sbuf_take(&out);
}

/* The highest version (strverscmp) of the existing paths matching
 * `pattern`, or NULL. */
static char *
best_match(const char *pattern)
{
    const char *best = NULL;
    char *found = NULL;
    glob_t g;

    if (glob(pattern, 0, NULL, &g) != 0)
        return NULL;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct stat st;

        if (stat(g.gl_pathv[i], &st) < 0)
            continue;
        if (best == NULL || strverscmp(g.gl_pathv[i], best) > 0)
            best = g.gl_pathv[i];
    }
    if (best != NULL)
        found = strdup(best);
    globfree(&g);
    return found;
}

/* Runs e's probe: the path found, or NULL with the places searched in
 * *searched. */
static char *
run_probe(const struct engines_entry *e, struct sbuf *searched)
{
    char *found = NULL;

    if (e->nprobe_paths == 0 && e->probe[0] == '/') {
        sbuf_printf(searched, "%s", e->probe);
        return best_match(e->probe);
    }
    if (e->nprobe_paths == 0) {
        sbuf_printf(searched, "PATH=%s", search_path());
        return find_on_path(e->probe, strlen(e->probe));
    }
    for (size_t i = 0; i < e->nprobe_paths && found == NULL; i++) {
        struct sbuf note = { 0 };
        char *dir = expand(e->probe_paths[i], &note);
        char *why = sbuf_take(&note);

        sbuf_printf(searched, "%s%s", i > 0 ? ", " : "", e->probe_paths[i]);
        if (dir == NULL) {
            sbuf_printf(searched, " (%s)", why != NULL ? why : "skipped");
        } else {
            char *pattern = path_join(dir, e->probe);

            if (strcmp(dir, e->probe_paths[i]) != 0)
                sbuf_printf(searched, " = %s", dir);
            if (pattern != NULL)
                found = best_match(pattern);
            free(pattern);
        }
        free(why);
        free(dir);
    }
    return found;
}

static void
host_missing(const struct engines_entry *e, const char *libexec_dir, int err,
             struct sbuf *reason)
{
    if (err != ENOENT && err != ENOTDIR)
        sbuf_printf(reason, "host binary %s: %s", e->host_path, strerror(err));
    else if (e->host[0] == '/')
        sbuf_printf(reason, "host binary %s not found", e->host);
    else
        sbuf_printf(reason, "host binary %s not found in %s", e->host,
                    libexec_dir);
}

static void
probe_entry(const struct engines *list, struct engines_entry *e)
{
    struct sbuf reason = { 0 };
    bool oom;

    free(e->reason);
    free(e->probe_found);
    e->reason = NULL;
    e->probe_found = NULL;

    if (e->host != NULL) {
        struct stat st;

        if (stat(e->host_path, &st) < 0)
            host_missing(e, list->libexec_dir, errno, &reason);
        else if (!S_ISREG(st.st_mode))
            sbuf_printf(&reason, "host binary %s is not a regular file",
                        e->host_path);
        else if (access(e->host_path, X_OK) < 0)
            sbuf_printf(&reason, "host binary %s is not executable (%s)",
                        e->host_path, strerror(errno));
    }
    if (sandbox_role_find(e->role) == NULL)
        sbuf_printf(&reason,
                    "%sthis build of workmanagerd has no sandbox role '%s' "
                    "(it has: %s)",
                    reason.len > 0 ? "; " : "", e->role, sandbox_role_names());
    if (e->protocol != IPC_PROTOCOL_VERSION)
        sbuf_printf(&reason,
                    "%sthe engine speaks frame protocol %u, this master "
                    "speaks %u",
                    reason.len > 0 ? "; " : "", e->protocol,
                    (unsigned)IPC_PROTOCOL_VERSION);
    if (e->probe != NULL) {
        struct sbuf searched = { 0 };
        char *where;

        e->probe_found = run_probe(e, &searched);
        where = sbuf_take(&searched);
        if (e->probe_found == NULL)
            sbuf_printf(&reason, "%s%s (%s) not found; searched %s",
                        reason.len > 0 ? "; " : "",
                        e->probe_what != NULL ? e->probe_what
                                              : "the engine's runtime",
                        e->probe, where != NULL ? where : "nothing");
        free(where);
    }
    oom = reason.oom;
    e->reason = sbuf_take(&reason);
    /* Out of memory: unavailable, with a reason when one fits. */
    if (oom && e->reason == NULL)
        e->reason = strdup("out of memory while probing");
    e->available = !oom && e->reason == NULL;
}

void
engines_probe(struct engines *list)
{
    for (size_t i = 0; i < list->n; i++)
        probe_entry(list, &list->v[i]);
}

void
engines_log(const struct engines *list)
{
    if (list->n == 0)
        log_warning("no engine: engines_dir holds no *.engine file");
    for (size_t i = 0; i < list->n; i++) {
        const struct engines_entry *e = &list->v[i];
        char mimes[512] = "";
        size_t used = 0;

        for (size_t j = 0; j < e->nmime_types && used < sizeof(mimes); j++) {
            int n = snprintf(mimes + used, sizeof(mimes) - used, "%s%s",
                             j > 0 ? ", " : "", e->mime_types[j]);

            if (n < 0)
                break;
            used += (size_t)n;
        }
        if (e->available)
            log_info("engine %s (%s): available, %s %s%s%s, %u kept warm",
                     e->name, mimes, engines_spawn_name(e->spawn),
                     e->host_path != NULL ? e->host_path : "in the master",
                     e->probe_found != NULL ? ", runtime " : "",
                     e->probe_found != NULL ? e->probe_found : "", e->warm);
        else
            log_warning("engine %s (%s): unavailable: %s", e->name, mimes,
                        e->reason != NULL ? e->reason : "out of memory");
    }
}
