/*
 * route_tokens.c — API tokens scoped to a tenant and a role (issue 22):
 *
 *   POST /v1/tokens {"tenant", "role", "expires_in_s"?}
 *       → 201 with the token itself, shown this once, and its id
 *   GET /v1/tokens            → {"tokens": [...]} (never a secret or hash)
 *   DELETE /v1/tokens/{id}    → 200, revoked at once
 *
 * Operators only.  A token is `wmt_<id>_<secret>` (id: 16 hex digits,
 * secret: 64); the daemon keeps only the SHA-256 of the whole text, with
 * the id, tenant, role, expiry, creation time and the creating principal,
 * as JSON in the store under workmanager/tokens/{id} (never a file of its
 * own), loaded once at start (api_tokens_load()).
 *
 * Why hashes: a copy of the state directory gives no credential.  Why
 * compare every hash: the set is small, and comparing each in constant
 * time leaks nothing about which one nearly matched.  A revoked token
 * leaves the table before its deletion is durable, so that it stops
 * working at once; a created one works once it is durable.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>

#include "lib/hex.h"
#include "lib/timestamp.h"
#include "master/api/api.h"
#include "master/api/members.h"
#include "master/api/principal.h"
#include "master/api/tokens.h"
#include "master/core/daemon.h"
#include "master/core/log.h"
#include "master/store/store.h"

#define KEY_PREFIX API_TOKENS_PREFIX
#define ID_HEX 16
#define SECRET_HEX 64
/* The longest expiry: ten years. */
#define EXPIRES_MAX_S (10u * 366u * 86400u)

struct token {
    LIST_ENTRY(token) link;
    char id[ID_HEX + 1];
    char tenant[ROLES_TENANT_MAX + 1];
    enum role role;
    int64_t expires_ms; /* 0: never */
    int64_t created_ms;
    char created_by[128];
    char sha256[STORE_SHA256_HEX];
};

static LIST_HEAD(, token) tokens = LIST_HEAD_INITIALIZER(tokens);

/* The ids revoked since start (here or on another instance sharing the
 * store): a record of one that the store's watch brings back late (a put
 * queued before the delete) is never taken in again, so a revocation
 * holds at once (api_tokens_remote()). */
struct revoked {
    struct revoked *next;
    char id[ID_HEX + 1];
};
static struct revoked *revoked;

static bool
is_revoked(const char *id)
{
    for (const struct revoked *r = revoked; r; r = r->next)
        if (strcmp(r->id, id) == 0)
            return true;
    return false;
}

static void
note_revoked(const char *id)
{
    struct revoked *r;

    if (is_revoked(id) || (r = calloc(1, sizeof *r)) == NULL)
        return;
    snprintf(r->id, sizeof r->id, "%s", id);
    r->next = revoked;
    revoked = r;
}

/* Takes the token of id out of the table (a no-op when absent). */
static void
drop_id(const char *id)
{
    struct token *t, *next;

    for (t = LIST_FIRST(&tokens); t != NULL; t = next) {
        next = LIST_NEXT(t, link);
        if (strcmp(t->id, id) == 0) {
            LIST_REMOVE(t, link);
            free(t);
        }
    }
}

/* ---- the table ------------------------------------------------------- */

static json_t *
token_json(const struct token *t)
{
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:s}", "id", t->id, "tenant",
                     t->tenant, "role", roles_name(t->role), "expires_at",
                     api_json_time(t->expires_ms), "created_at",
                     api_json_time(t->created_ms), "created_by", t->created_by);
}

/* The stored record: the listing plus the hash and the instants as ms. */
static char *
token_record(const struct token *t, size_t *len)
{
    json_t *j = json_pack(
        "{s:i, s:s, s:s, s:s, s:I, s:I, s:s, s:s}", "format", 1, "id", t->id,
        "tenant", t->tenant, "role", roles_name(t->role), "expires_ms",
        (json_int_t)t->expires_ms, "created_ms", (json_int_t)t->created_ms,
        "created_by", t->created_by, "sha256", t->sha256);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    *len = text ? strlen(text) : 0;
    return text;
}

static struct token *
token_from_record(const uint8_t *value, size_t len)
{
    json_t *j = json_loadb((const char *)value, len, 0, NULL);
    const char *id, *tenant, *role, *by, *sha;
    json_int_t exp, created;
    struct token *t = NULL;

    if (j &&
        json_unpack(j, "{s:s, s:s, s:s, s:I, s:I, s:s, s:s}", "id", &id,
                    "tenant", &tenant, "role", &role, "expires_ms", &exp,
                    "created_ms", &created, "created_by", &by, "sha256",
                    &sha) == 0 &&
        strlen(id) == ID_HEX && strlen(sha) == STORE_SHA256_HEX - 1 &&
        strlen(tenant) <= ROLES_TENANT_MAX &&
        (t = calloc(1, sizeof *t)) != NULL) {
        if (roles_parse(role, &t->role) != 0) {
            free(t);
            t = NULL;
        } else {
            snprintf(t->id, sizeof t->id, "%s", id);
            snprintf(t->tenant, sizeof t->tenant, "%s", tenant);
            snprintf(t->created_by, sizeof t->created_by, "%s", by);
            snprintf(t->sha256, sizeof t->sha256, "%s", sha);
            t->expires_ms = exp;
            t->created_ms = created;
        }
    }
    json_decref(j);
    return t;
}

static int
on_listed(const char *key, enum store_status status, const uint8_t *value,
          size_t len, uint64_t revision, const char *message, void *arg)
{
    unsigned *n = arg;
    struct token *t = status == STORE_OK ? token_from_record(value, len) : NULL;

    (void)revision;
    if (t == NULL) {
        log_err("tokens: %s is unreadable (%s): that token does not work; "
                "revoke it and create another",
                key, message ? message : "not a token record");
        return 0;
    }
    LIST_INSERT_HEAD(&tokens, t, link);
    (*n)++;
    return 0;
}

int
api_tokens_load(struct store *st, char *err, size_t errlen)
{
    unsigned n = 0;
    if (store_list(st, KEY_PREFIX, on_listed, &n, err, errlen) != STORE_OK)
        return -1;
    if (n)
        log_info("tokens: %u API tokens", n);
    return 0;
}

void
api_tokens_remote(const char *key, const uint8_t *value, size_t len)
{
    const char *id = key + strlen(KEY_PREFIX);
    struct token *t;

    if (value == NULL) {
        note_revoked(id);
        drop_id(id);
        return;
    }
    if (is_revoked(id) || (t = token_from_record(value, len)) == NULL)
        return;
    drop_id(t->id); /* replaced: one entry per id */
    LIST_INSERT_HEAD(&tokens, t, link);
}

void
api_tokens_free(void)
{
    struct token *t;
    while ((t = LIST_FIRST(&tokens)) != NULL) {
        LIST_REMOVE(t, link);
        free(t);
    }
    while (revoked) {
        struct revoked *r = revoked;
        revoked = r->next;
        free(r);
    }
}

enum api_token_match
api_tokens_match(const char *secret, int64_t now_ms, struct api_principal *p)
{
    char sha[STORE_SHA256_HEX];
    const struct token *found = NULL;

    store_sha256_hex((const uint8_t *)secret, strlen(secret), sha);
    struct token *t;
    LIST_FOREACH (t, &tokens, link) {
        unsigned char diff = 0;
        for (size_t i = 0; i < STORE_SHA256_HEX - 1; i++)
            diff |= (unsigned char)(t->sha256[i] ^ sha[i]);
        if (diff == 0)
            found = t;
    }
    if (found == NULL)
        return API_TOKEN_UNKNOWN;
    if (found->expires_ms && found->expires_ms <= now_ms)
        return API_TOKEN_EXPIRED;
    p->role = found->role;
    snprintf(p->tenant, sizeof p->tenant, "%s",
             found->role == ROLE_OPERATOR ? "" : found->tenant);
    snprintf(p->name, sizeof p->name, "token %s (%s/%s)", found->id,
             found->tenant, roles_name(found->role));
    return API_TOKEN_OK;
}

/* ---- the routes ------------------------------------------------------ */

struct pending {
    struct api_req *rq;
    struct token *t;
    char secret[4 + ID_HEX + 1 + SECRET_HEX + 1];
};

static void
on_created(enum store_status st, uint64_t revision, const char *message,
           void *arg)
{
    struct pending *pd = arg;

    (void)revision;
    if (st != STORE_OK) {
        api_error(pd->rq, 500, "internal", "the store failed: %s", message);
        free(pd->t);
    } else {
        drop_id(pd->t->id); /* the store's watch may have brought it */
        LIST_INSERT_HEAD(&tokens, pd->t, link);
        log_notice("tokens: %s created token %s for %s/%s",
                   pd->rq->principal.name, pd->t->id, pd->t->tenant,
                   roles_name(pd->t->role));
        json_t *j = token_json(pd->t);
        json_object_set_new(j, "token", json_string(pd->secret));
        api_reply(pd->rq, 201, j);
    }
    explicit_bzero(pd->secret, sizeof pd->secret);
    free(pd);
}

static const struct api_member token_members[] = {
    { "tenant", NULL },
    { "role", NULL },
    { "expires_in_s", NULL },
    { NULL, NULL },
};
static const struct api_object token_object = {
    .what = "a token",
    .members = token_members,
    .hint = "{\"tenant\": T, \"role\": \"operator|tenant-admin|publisher|"
            "reader\", \"expires_in_s\": N}",
};

static int
random_hex(char *out, size_t nhex)
{
    unsigned char b[SECRET_HEX / 2];
    size_t got = 0;
    while (got < nhex / 2) {
        ssize_t r = getrandom(b + got, nhex / 2 - got, 0);
        if (r < 0 && errno != EINTR)
            return -1;
        if (r > 0)
            got += (size_t)r;
    }
    hex_encode(b, nhex / 2, out);
    explicit_bzero(b, sizeof b);
    return 0;
}

static void
create(struct api_req *rq)
{
    json_t *body = api_body_object(rq);
    const char *tenant = NULL, *role = NULL;
    uint32_t expires_s = 0;
    enum role r;

    if (body == NULL)
        return;
    if (api_members_check(rq, body, &token_object) ||
        api_member_str(rq, body, "tenant", &tenant) ||
        api_member_str(rq, body, "role", &role) ||
        api_member_uint(rq, body, "expires_in_s", "", 1, EXPIRES_MAX_S,
                        &expires_s))
        goto out;
    if (role == NULL || roles_parse(role, &r) != 0) {
        api_error(rq, 400, "invalid_argument",
                  "role must be operator, tenant-admin, publisher or reader");
        goto out;
    }
    if (tenant == NULL && r == ROLE_OPERATOR)
        tenant = "*";
    if (tenant == NULL ||
        (strcmp(tenant, "*") != 0 && !roles_tenant_valid(tenant)) ||
        (strcmp(tenant, "*") == 0 && r != ROLE_OPERATOR)) {
        api_error(rq, 400, "invalid_argument",
                  "tenant must match [a-z0-9][a-z0-9_.-]{0,63} (* only for "
                  "an operator token)");
        goto out;
    }
    if (strcmp(tenant, "*") != 0 && !api_tenants_exists(rq->d, tenant)) {
        api_error(rq, 404, "not_found",
                  "no tenant %s: create it first (wmctl tenant create %s)",
                  tenant, tenant);
        goto out;
    }
    struct pending *pd = calloc(1, sizeof *pd);
    struct token *t = calloc(1, sizeof *t);
    if (pd == NULL || t == NULL || random_hex(t->id, ID_HEX) != 0 ||
        random_hex(pd->secret + 4 + ID_HEX + 1, SECRET_HEX) != 0) {
        free(pd);
        free(t);
        api_error(rq, 500, "internal", "cannot make a token");
        goto out;
    }
    memcpy(pd->secret, "wmt_", 4);
    memcpy(pd->secret + 4, t->id, ID_HEX);
    pd->secret[4 + ID_HEX] = '_';
    pd->rq = rq;
    pd->t = t;
    snprintf(t->tenant, sizeof t->tenant, "%s", tenant);
    t->role = r;
    t->created_ms = timestamp_now_ms();
    t->expires_ms = expires_s ? t->created_ms + (int64_t)expires_s * 1000 : 0;
    snprintf(t->created_by, sizeof t->created_by, "%s", rq->principal.name);
    store_sha256_hex((const uint8_t *)pd->secret, strlen(pd->secret),
                     t->sha256);
    char key[STORE_KEY_MAX];
    size_t len;
    char *rec = token_record(t, &len);
    snprintf(key, sizeof key, KEY_PREFIX "%s", t->id);
    if (rec == NULL || store_put(rq->d->store, key, (const uint8_t *)rec, len,
                                 0, on_created, pd) != 0) {
        api_error(rq, 500, "internal", "cannot store the token");
        free(t);
        free(pd);
    }
    free(rec);
out:
    json_decref(body);
}

static void
list(struct api_req *rq)
{
    json_t *arr = json_array();
    const char *tenant = api_query(rq, "tenant");
    struct token *t;
    LIST_FOREACH (t, &tokens, link)
        if (tenant == NULL || strcmp(tenant, t->tenant) == 0)
            json_array_append_new(arr, token_json(t));
    api_reply(rq, 200, json_pack("{s:o}", "tokens", arr));
}

static void
on_deleted(enum store_status st, uint64_t revision, const char *message,
           void *arg)
{
    struct api_req *rq = arg;

    (void)revision;
    if (rq == NULL) {
        if (st != STORE_OK && st != STORE_NOT_FOUND)
            log_err("tokens: a revoked token's record stays: %s", message);
        return;
    }
    if (st != STORE_OK && st != STORE_NOT_FOUND)
        api_error(rq, 500, "internal",
                  "the token no longer works, but the store failed to "
                  "forget it (%s): it comes back at restart; revoke it again",
                  message);
    else
        api_reply(rq, 200, json_pack("{s:s}", "revoked", rq->seg[2]));
}

/* Forgets t now and deletes its record, answering rq (or nobody). */
static void
revoke(struct daemon *d, struct token *t, struct api_req *rq)
{
    char key[STORE_KEY_MAX];

    snprintf(key, sizeof key, KEY_PREFIX "%s", t->id);
    LIST_REMOVE(t, link);
    note_revoked(t->id);
    log_notice("tokens: token %s of %s/%s revoked by %s", t->id, t->tenant,
               roles_name(t->role),
               rq ? rq->principal.name
                  : "its tenant's "
                    "deletion");
    free(t);
    if (store_delete(d->store, key, STORE_ANY_REVISION, on_deleted, rq) != 0 &&
        rq)
        api_error(rq, 500, "internal", "cannot delete %s", key);
}

unsigned
api_tokens_revoke_tenant(struct daemon *d, const char *tenant)
{
    unsigned n = 0;
    struct token *t, *next;
    for (t = LIST_FIRST(&tokens); t; t = next) {
        next = LIST_NEXT(t, link);
        if (strcmp(t->tenant, tenant) == 0) {
            revoke(d, t, NULL);
            n++;
        }
    }
    return n;
}

void
api_tokens_route(struct api_req *rq)
{
    /* /v1/tokens[/{id}] */
    if (api_scope_refuse(rq, API_OPERATE, NULL, "token"))
        return;
    bool get = strcmp(rq->method, "GET") == 0;
    if (rq->nseg == 2 && get) {
        list(rq);
    } else if (rq->nseg == 2 && strcmp(rq->method, "POST") == 0) {
        create(rq);
    } else if (rq->nseg == 3 && strcmp(rq->method, "DELETE") == 0) {
        if (api_members_none(rq, "revoke") != 0)
            return;
        struct token *t;
        LIST_FOREACH (t, &tokens, link)
            if (strcmp(t->id, rq->seg[2]) == 0)
                break;
        if (t == NULL)
            api_error(rq, 404, "not_found", "no token %s", rq->seg[2]);
        else
            revoke(rq->d, t, rq);
    } else {
        api_error(rq, 405, "invalid_argument", "%s is not allowed on %s",
                  rq->method, rq->path);
    }
}
