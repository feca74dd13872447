/*
 * members.h — strict input: the members each JSON object of the admin API
 * takes (DESIGN §8), and the one check every route runs on its body.
 *
 * A member a route does not know is refused, never ignored: a typo such as
 * "nmae" or {"limits": {"timeout": 5}} would otherwise be accepted and do
 * nothing.  An object is described once, as a const table of its members;
 * a member whose value is an object with members of its own points to that
 * object's table, and the check walks into it.  Maps whose keys are the
 * client's (config, tags) and CloudEvents (whose unknown attributes are
 * extensions) have no table and are not checked here.
 */
#ifndef WM_MASTER_API_MEMBERS_H
#define WM_MASTER_API_MEMBERS_H

#include <jansson.h>

struct api_req;
struct api_object;

/* One known member; the table ends with a NULL name. */
struct api_member {
    const char *name;
    /* Its value's own members when it is an object, else NULL (any value:
     * the route checks its type). */
    const struct api_object *object;
};

/* One JSON object a route takes. */
struct api_object {
    const char *what;                 /* as messages name it: "a worker" */
    const struct api_member *members; /* NULL: it takes no member */
    const char *hint;                 /* NULL, or a sentence for messages */
    /* Other names of members (the original system's shapes:
     * worker_body.c), NULL-terminated or NULL: accepted as members are,
     * but left out of the list a refusal names. */
    const struct api_member *aliases;
};

/* Checks every member of obj (and of its nested objects) against spec.
 * Returns 0 when all are known; else answers 400 invalid_argument naming
 * each unknown member by its path ("limits.timeout"), the closest known
 * name (lib/spell.h) and the object's members, with the paths in the
 * error's "unknown_members" array, and returns -1. */
int api_members_check(struct api_req *rq, json_t *obj,
                      const struct api_object *spec);

/* For a route that takes no body: 0 when the request has none (or an
 * empty JSON object); else answers 400 (invalid_json when the body is not
 * a JSON object, invalid_argument naming its members) and returns -1.
 * what names the route in the message ("start"). */
int api_members_none(struct api_req *rq, const char *what);

#endif /* WM_MASTER_API_MEMBERS_H */
