/*
 * members.c — strict input for the admin API's JSON objects (members.h).
 *
 * The check collects every unknown member of a body, nested ones included,
 * before it answers, so that a client fixes them all at once instead of
 * one per round trip.  The message groups them by object: for each
 * object with unknown members, their paths (each with the closest known
 * name, by lib/spell.h's rule, the one wmctl and the configuration use),
 * then the members that object has.  The message names at most
 * API_MEMBERS_LISTED paths per object (the rest are counted; api_error()
 * bounds the whole); the error's "unknown_members" array lists every
 * path.
 *
 * Invariant: a known member whose table names an object is walked into
 * only when its value is an object; another type is left to the route's
 * own check, which names the expected type.
 */
#include "config.h"

#include "master/api/members.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/spell.h"
#include "master/api/api.h"

/* Paths named in the message per object; the rest are counted. */
#define API_MEMBERS_LISTED 5
/* The longest path named ("limits.timeout"); longer ones are cut. */
#define API_MEMBERS_PATH 128

struct report {
    json_t *paths; /* every unknown member's path */
    FILE *msg;     /* the message (open_memstream) */
};

static const struct api_member *
member_find(const struct api_object *spec, const char *key)
{
    for (const struct api_member *m = spec->members; m && m->name; m++)
        if (strcmp(m->name, key) == 0)
            return m;
    for (const struct api_member *m = spec->aliases; m && m->name; m++)
        if (strcmp(m->name, key) == 0)
            return m;
    return NULL;
}

static const char *
closest(const struct api_object *spec, const char *key)
{
    const char *names[64];
    size_t n = 0;

    for (const struct api_member *m = spec->members;
         m && m->name && n < sizeof names / sizeof names[0]; m++)
        names[n++] = m->name;
    return spell_closest(key, names, n);
}

/* The sentence about spec's unknown members in obj, and its nested
 * objects' after it. */
static void
walk(struct report *r, json_t *obj, const struct api_object *spec,
     const char *prefix)
{
    const char *key;
    json_t *v;
    size_t unknown = 0;

    json_object_foreach(obj, key, v)
    {
        if (member_find(spec, key) == NULL)
            unknown++;
    }
    if (unknown)
        fprintf(r->msg, "%sunknown member%s ", ftell(r->msg) ? "; " : "",
                unknown > 1 ? "s" : "");
    size_t i = 0;
    json_object_foreach(obj, key, v)
    {
        if (member_find(spec, key))
            continue;
        char path[API_MEMBERS_PATH];
        snprintf(path, sizeof path, "%s%s", prefix, key);
        json_array_append_new(r->paths, json_string(path));
        if (i < API_MEMBERS_LISTED) {
            const char *near = closest(spec, key);
            fprintf(r->msg, "%s\"%s\"", i ? ", " : "", path);
            if (near)
                fprintf(r->msg, " (did you mean %s?)", near);
        }
        i++;
    }
    if (unknown > API_MEMBERS_LISTED)
        fprintf(r->msg, " and %zu more", unknown - API_MEMBERS_LISTED);
    if (unknown) {
        if (spec->members == NULL || spec->members[0].name == NULL) {
            fprintf(r->msg, ": %s takes no members", spec->what);
        } else {
            fprintf(r->msg, ": the members of %s are ", spec->what);
            for (const struct api_member *m = spec->members; m->name; m++)
                fprintf(r->msg, "%s%s", m == spec->members ? "" : ", ",
                        m->name);
        }
        if (spec->hint)
            fprintf(r->msg, " (%s)", spec->hint);
    }
    const struct api_member *lists[] = { spec->members, spec->aliases };
    for (size_t l = 0; l < 2; l++)
        for (const struct api_member *m = lists[l]; m && m->name; m++) {
            json_t *sub = json_object_get(obj, m->name);
            if (m->object && json_is_object(sub)) {
                char path[API_MEMBERS_PATH];
                snprintf(path, sizeof path, "%s%s.", prefix, m->name);
                walk(r, sub, m->object, path);
            }
        }
}

int
api_members_check(struct api_req *rq, json_t *obj,
                  const struct api_object *spec)
{
    char *msg = NULL;
    size_t len = 0;
    struct report r = { .paths = json_array(),
                        .msg = open_memstream(&msg, &len) };

    if (r.paths == NULL || r.msg == NULL) {
        json_decref(r.paths);
        if (r.msg)
            fclose(r.msg);
        free(msg);
        api_error(rq, 500, "internal", "out of memory");
        return -1;
    }
    walk(&r, obj, spec, "");
    fclose(r.msg);
    if (json_array_size(r.paths) == 0) {
        json_decref(r.paths);
        free(msg);
        return 0;
    }
    api_error_extra(rq, 400, "invalid_argument",
                    json_pack("{s:o}", "unknown_members", r.paths), "%s",
                    msg ? msg : "unknown members");
    free(msg);
    return -1;
}

int
api_members_none(struct api_req *rq, const char *what)
{
    const struct api_object none = { .what = what };
    size_t len;
    int rc;

    (void)api_body_raw(rq, &len);
    if (len == 0)
        return 0;
    json_t *body = api_body_object(rq);
    if (body == NULL)
        return -1;
    rc = api_members_check(rq, body, &none);
    json_decref(body);
    return rc;
}
