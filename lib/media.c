/*
 * media.c — JSON and text content types (media.h).
 *
 * The rule is written once because two sides must agree on it: the master
 * stores a structured event's `data` as JSON text exactly when the Python
 * host will hand it to the worker as a JSON value, and back.
 */
#include "config.h"

#include "lib/media.h"

#include <string.h>
#include <strings.h>

/* The type/subtype of ct[0..len): without blanks around it and without
 * parameters; its start in *t and its length returned. */
static size_t
bare_type(const char *ct, size_t len, const char **t)
{
    size_t i = 0, end;

    while (i < len && (ct[i] == ' ' || ct[i] == '\t'))
        i++;
    for (end = i; end < len && ct[end] != ';'; end++)
        ;
    while (end > i && (ct[end - 1] == ' ' || ct[end - 1] == '\t'))
        end--;
    *t = ct + i;
    return end - i;
}

bool
media_is_json(const char *ct, size_t len)
{
    const char *t;
    size_t n;

    if (ct == NULL)
        return true;
    n = bare_type(ct, len, &t);
    return (n == 16 && strncasecmp(t, "application/json", 16) == 0) ||
           (n > 5 && memchr(t, '/', n) != NULL &&
            strncasecmp(t + n - 5, "+json", 5) == 0);
}

bool
media_is_text(const char *ct, size_t len)
{
    const char *t;
    size_t n;

    if (ct == NULL)
        return false;
    n = bare_type(ct, len, &t);
    return n >= 5 && strncasecmp(t, "text/", 5) == 0;
}
