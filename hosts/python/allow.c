/*
 * allow.c — the import allowlist of Python workers (allow.h).
 *
 * The sets are small (tens of names), so they are plain arrays searched
 * in order; a name is checked by each of its dotted prefixes.
 */
#include "config.h"

#include "hosts/python/allow.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Pure computation, text and data formats, no I/O, no processes, no
 * interpreter internals: the names a worker needs to transform events.
 * Submodules a worker imports by name are listed, since nothing can be
 * imported once the filter is in (their packages are allowed with them).
 * hashlib and uuid reach libcrypto and getrandom, both harmless under the
 * filter; `time` sleeps through clock_nanosleep. */
const char *const pyhost_allow_default[] = {
    "abc",         "array",        "base64",
    "binascii",    "bisect",       "calendar",
    "cmath",       "collections",  "collections.abc",
    "contextlib",  "copy",         "csv",
    "dataclasses", "datetime",     "decimal",
    "difflib",     "enum",         "fractions",
    "functools",   "graphlib",     "hashlib",
    "heapq",       "hmac",         "html",
    "html.parser", "ipaddress",    "itertools",
    "json",        "math",         "numbers",
    "operator",    "pprint",       "random",
    "re",          "reprlib",      "secrets",
    "statistics",  "string",       "struct",
    "textwrap",    "time",         "typing",
    "unicodedata", "urllib.parse", "uuid",
    "workmanager", "zlib",         NULL,
};

static void
free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void
pyhost_allow_free(struct pyhost_allow *a)
{
    free_list(a->allowed, a->nallowed);
    free_list(a->blocked, a->nblocked);
    free_list(a->preload, a->npreload);
    memset(a, 0, sizeof *a);
}

/* A dotted Python identifier of ASCII letters, digits and underscores. */
static bool
module_name(const char *s, size_t n)
{
    bool start = true;

    if (n == 0 || n > PYHOST_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.') {
            if (start)
                return false;
            start = true;
        } else if (c == '_' || isalpha(c) || (!start && isdigit(c))) {
            start = false;
        } else {
            return false;
        }
    }
    return !start;
}

static bool
in_list(char *const *v, size_t n, const char *s, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(v[i]) == len && memcmp(v[i], s, len) == 0)
            return true;
    return false;
}

static int
add(char ***v, size_t *n, const char *s, size_t len)
{
    char **nv;

    if (in_list(*v, *n, s, len))
        return 0;
    if ((nv = realloc(*v, (*n + 1) * sizeof *nv)) == NULL)
        return -1;
    *v = nv;
    if ((nv[*n] = strndup(s, len)) == NULL)
        return -1;
    (*n)++;
    return 0;
}

/* Appends the names of list (commas or blanks between them) to *v. */
static int
parse(const char *what, const char *list, char ***v, size_t *n, char *err,
      size_t errlen)
{
    const char *p = list ? list : "";

    for (;;) {
        p += strspn(p, ", \t\n");
        if (*p == '\0')
            return 0;
        size_t len = strcspn(p, ", \t\n");
        if (!module_name(p, len)) {
            snprintf(err, errlen, "%s: '%.*s' is not a module name", what,
                     (int)(len > 64 ? 64 : len), p);
            return -1;
        }
        if (add(v, n, p, len) < 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        p += len;
    }
}

/* Whether s is list entry e or a submodule of it. */
static bool
under(const char *s, const char *e)
{
    size_t n = strlen(e);
    return strncmp(s, e, n) == 0 && (s[n] == '\0' || s[n] == '.');
}

static bool
blocked(const struct pyhost_allow *a, const char *name)
{
    for (size_t i = 0; i < a->nblocked; i++)
        if (under(name, a->blocked[i]))
            return true;
    return false;
}

int
pyhost_allow_init(struct pyhost_allow *a, const char *allowed,
                  const char *blocked_list, const char *allowlist,
                  const char *preload, char *err, size_t errlen)
{
    char **all = NULL;
    size_t nall = 0;

    memset(a, 0, sizeof *a);
    a->guard = !(allowlist && (strcasecmp(allowlist, "off") == 0 ||
                               strcmp(allowlist, "0") == 0 ||
                               strcasecmp(allowlist, "false") == 0 ||
                               strcasecmp(allowlist, "no") == 0));
    for (size_t i = 0; pyhost_allow_default[i]; i++)
        if (add(&all, &nall, pyhost_allow_default[i],
                strlen(pyhost_allow_default[i])) < 0) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
    if (parse("python_allowed_packages", allowed, &all, &nall, err, errlen) <
            0 ||
        parse("python_blocked_modules", blocked_list, &a->blocked, &a->nblocked,
              err, errlen) < 0 ||
        parse("python_preload", preload, &a->preload, &a->npreload, err,
              errlen) < 0)
        goto fail;
    /* The allowed set: every entry no blocked one covers. */
    for (size_t i = 0; i < nall; i++) {
        if (blocked(a, all[i]))
            continue;
        if (add(&a->allowed, &a->nallowed, all[i], strlen(all[i])) < 0) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
    }
    free_list(all, nall);
    return 0;

fail:
    free_list(all, nall);
    return -1;
}

bool
pyhost_allow_check(const struct pyhost_allow *a, const char *name)
{
    if (!a->guard)
        return true;
    if (!module_name(name, strlen(name)) || blocked(a, name))
        return false;
    for (size_t i = 0; i < a->nallowed; i++) {
        const char *e = a->allowed[i];
        /* the entry or beneath it; or a package above it */
        if (under(name, e) || under(e, name))
            return true;
    }
    return false;
}
