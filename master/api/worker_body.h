/*
 * worker_body.h — a worker as the admin API's JSON, both ways (DESIGN §8):
 * the object the /v1/workers routes answer with, and the checked parts of
 * a request's body (a create's fields and settings, the code of a create
 * or a reload, a map of tags or config).
 *
 * Each *_take() answers the request itself on a bad body (400
 * invalid_argument naming the member and its rule; 403 for code whose
 * digest is not the announced one; 409 for a taken name) and returns -1;
 * on 0 the request is still the caller's to answer.
 */
#ifndef WM_MASTER_WORKER_BODY_H
#define WM_MASTER_WORKER_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct api_req;
struct conf;
struct worker;
struct worker_pair;

/* The worker's object as GET /v1/workers/{id} answers it (new
 * reference): with its limits in force under the daemon's configuration
 * c, its event counts and its last error. */
json_t *worker_body_json(const struct worker *w, const struct conf *c);
/* The original system's worker object, for ?format=original:
 * {id, codeSource: {url (code from a URL), contentSha256}, mimeType,
 * language, topic, group, createdAt, status ("Running", "Stopped", ...)}.
 * A new reference. */
json_t *worker_body_original_json(const struct worker *w);
/* n pairs as a JSON object of strings (new reference). */
json_t *worker_body_pairs_json(const struct worker_pair *p, size_t n);

/* Copies obj, a JSON object of strings, into a new array of pairs (*out,
 * *nout; the caller frees them with worker_pairs_free(), also after a
 * failure).  is_config: the keys are config entries, which become
 * CloudEvent extensions (lib/name.h's extension names, none a context
 * attribute's); else tags (1 to 128 characters, values up to 1024).  what
 * names obj in messages. */
int worker_body_pairs_take(struct api_req *rq, json_t *obj, const char *what,
                           bool is_config, struct worker_pair **out,
                           size_t *nout);

/* The code of a create or reload, as the request gave it: the bytes of
 * {"content": base64}, or the URL of {"url", "sha256"?} (borrowed from the
 * body) to fetch. */
struct worker_body_code {
    uint8_t *code; /* malloc'd; the caller frees it */
    size_t len;
    const char *url;
    char sha256[65]; /* the expected digest, "" when not given */
};

/* Reads body's "code" into *cr (zeroed first).  Content whose SHA-256 is
 * not the given sha256 is refused (403 security_rejected). */
int worker_body_code_take(struct api_req *rq, json_t *body,
                          struct worker_body_code *cr);

/* A reload's body: {"code": ...} and nothing else (members.h), then its
 * code as worker_body_code_take() reads it. */
int worker_body_reload_take(struct api_req *rq, json_t *body,
                            struct worker_body_code *cr);

/* A create's fields, checked: strings and JSON values borrowed from the
 * body (NULL when absent). */
struct worker_body_create {
    const char *mime;      /* required */
    const char *topic;     /* required, a topic name */
    const char *tenant;    /* [a-z0-9][a-z0-9_.-]{0,63} */
    const char *group;     /* the same */
    const char *name;      /* the same and not a UUID; not yet taken */
    const char *isolation; /* "process" or "in-process" */
    json_t *start;         /* a boolean */
    json_t *config;        /* objects */
    json_t *tags;
    json_t *limits;
};

/* Checks a create's fields into *b, in this order: that every member of
 * the body and of its code and limits is known (members.h), the string
 * members,
 * mime_type, topic, tenant, group, name (and that no worker has it),
 * isolation, start, and that config, tags and limits are objects. */
int worker_body_create_take(struct api_req *rq, json_t *body,
                            struct worker_body_create *b);

/* Fills the new worker w from b and body: config, tags, limits (timeout_ms
 * 1..3600000, memory_mb 0..1048576, concurrency 1..64, by default 1) and
 * idle_timeout_s (up to a year). */
int worker_body_settings_take(struct api_req *rq, json_t *body,
                              const struct worker_body_create *b,
                              struct worker *w);

#endif /* WM_MASTER_WORKER_BODY_H */
