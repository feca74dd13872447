/*
 * name.h — the alphabets of the names that users and workers give, part of
 * lib/ (the leaf library: small rules the master, wmctl and the hosts
 * share; it includes nothing of the project but itself).
 *
 *   extension  [a-z0-9]{1,20}                 CloudEvents 1.0 attribute
 *                                             names (events' extensions, a
 *                                             worker's config keys)
 *   lower      [a-z0-9][a-z0-9_.-]{0,max-1}   worker names, tenants, groups
 *   word       [A-Za-z0-9._-]{1,max}          topics, tenants of a topic
 *                                             query, store key segments,
 *                                             state keys
 *   slug       [a-z0-9_-]{1,max}              engine names and roles,
 *                                             configuration words
 *                                             (min_confinement,
 *                                             cgroup_parent)
 *
 * A caller adds its own rules on top (no "." or ".." segment, not a UUID)
 * and says the rule in its error message.  Only ASCII counts: no locale is
 * consulted (isalnum() would).
 *
 * Header-only (static inline) on purpose: the extension rule is also one
 * of ipc/'s codec checks, and ipc/libwmipc.a is linked alone by the codec's
 * unit tests, its differential fuzzers, the benchmarks and the .NET host;
 * inline predicates let ipc/ share the rule without every one of those
 * programs linking lib/libwm.a.
 */
#ifndef WM_LIB_NAME_H
#define WM_LIB_NAME_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* The longest extension name, and the rule as error messages quote it. */
#define NAME_EXT_MAX 20
#define NAME_EXT_RULE "[a-z0-9]{1,20}"

static inline bool
name_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* Whether s[0..len) (not NUL-terminated: FlatBuffers and Python strings
 * carry a length) is an extension name, [a-z0-9]{1,20}.  s may be NULL
 * when len is 0. */
static inline bool
name_ext_valid(const char *s, size_t len)
{
    if (s == NULL || len == 0 || len > NAME_EXT_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!name_lower_alnum(s[i]))
            return false;
    return true;
}

/* Whether c is one of [A-Za-z0-9._-]. */
static inline bool
name_word_char(char c)
{
    return name_lower_alnum(c) || (c >= 'A' && c <= 'Z') || c == '.' ||
           c == '_' || c == '-';
}

/* Whether the string s is [A-Za-z0-9._-]{1,max}. */
static inline bool
name_word_valid(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_word_char(s[i]))
            return false;
    return true;
}

/* Whether the string s is [a-z0-9][a-z0-9_.-]{0,max-1}. */
static inline bool
name_lower_valid(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n == 0 || n > max || !name_lower_alnum(s[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!name_lower_alnum(s[i]) && s[i] != '_' && s[i] != '.' &&
            s[i] != '-')
            return false;
    return true;
}

/* Whether the string s is [a-z0-9_-]{1,max}. */
static inline bool
name_slug_valid(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!name_lower_alnum(s[i]) && s[i] != '_' && s[i] != '-')
            return false;
    return true;
}

#endif /* WM_LIB_NAME_H */
