/*
 * cmd_tenants.c — wmctl's tenant and token commands (issue 22):
 *
 *   wmctl tenant create|list|show|delete|suspend|resume [NAME] [--yes]
 *   wmctl tenant create|set NAME --quota KEY=N|default ...
 *   wmctl token create --tenant T --role R [--expires DURATION]
 *   wmctl token list [--tenant T] | wmctl token revoke ID
 *
 * Over the public HTTP API only (/v1/tenants, /v1/tokens).  A token is
 * printed once, when it is made: the daemon keeps only its hash.  A
 * tenant's deletion takes --yes, which the route's ?confirm=NAME carries.
 * `show` prints a tenant's usage against each quota; `set` changes its
 * quotas (PATCH /v1/tenants/NAME), `default` giving one back to the
 * daemon's default.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/table.h"
#include "cli/wmctl.h"

enum { OPT_YES = 0x200, OPT_TENANT, OPT_ROLE, OPT_EXPIRES, OPT_QUOTA };

/* A DURATION: N followed by s, m, h or d (seconds without one) into *s;
 * -1 when it is not one. */
static int
duration_parse(const char *text, unsigned long long *s)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull(text, &end, 10);
    unsigned long long unit = 1;
    if (end == text || errno || text[0] == '-')
        return -1;
    if (*end == 'm')
        unit = 60;
    else if (*end == 'h')
        unit = 3600;
    else if (*end == 'd')
        unit = 86400;
    else if (*end != 's' && *end != '\0')
        return -1;
    if (*end && end[1] != '\0')
        return -1;
    if (n == 0 || n > 10ull * 366 * 86400 / unit)
        return -1;
    *s = n * unit;
    return 0;
}

static void
rows_print(json_t *arr, size_t ncols, const char *const *header,
           const char *const *keys)
{
    struct table *t = table_new(ncols, header);
    size_t i;
    json_t *o;

    json_array_foreach(arr, i, o)
    {
        char *cells[8];
        for (size_t k = 0; k < ncols; k++)
            cells[k] = wmctl_value_text(json_object_get(o, keys[k]));
        if (t)
            table_row_add(t, (const char *const *)cells);
        for (size_t k = 0; k < ncols; k++)
            free(cells[k]);
    }
    if (t)
        table_print(t, stdout);
    table_free(t);
}

/* Calls method path with body and prints the answer: as JSON with
 * --json, else its members (or done, when given). */
static int
call_print(struct wmctl *ctl, const char *method, const char *path,
           json_t *body, const char *done)
{
    json_t *answer = NULL;
    int rc = wmctl_call(ctl, method, path, NULL, body, &answer);

    json_decref(body);
    if (rc == WMCTL_EXIT_OK) {
        if (ctl->json)
            wmctl_json_print(answer);
        else if (done)
            printf("%s\n", done);
        else if (answer)
            wmctl_object_print(answer, NULL);
    }
    json_decref(answer);
    return rc;
}

/* Adds "KEY=N" or "KEY=default" (null: the daemon's default) to quotas;
 * -1 when text is neither. */
static int
quota_add(json_t *quotas, const char *text)
{
    const char *eq = strchr(text, '=');
    char *end, key[64];

    if (eq == NULL || eq == text || (size_t)(eq - text) >= sizeof key)
        return -1;
    snprintf(key, sizeof key, "%.*s", (int)(eq - text), text);
    if (strcmp(eq + 1, "default") == 0)
        return json_object_set_new(quotas, key, json_null());
    errno = 0;
    unsigned long long n = strtoull(eq + 1, &end, 10);
    if (eq[1] == '\0' || eq[1] == '-' || *end != '\0' || errno)
        return -1;
    return json_object_set_new(quotas, key, json_integer((json_int_t)n));
}

/* A tenant's members, then its usage against each quota. */
static void
tenant_print(json_t *t)
{
    static const char *const header[] = { "QUOTA", "USAGE", "LIMIT", "" };
    json_t *quotas = json_object_get(t, "quotas");
    json_t *usage = json_object_get(t, "usage");
    json_t *own = json_object_get(t, "quotas_overridden");
    json_t *rest = json_copy(t);
    struct table *tab = table_new(4, header);
    const char *key;
    json_t *limit;
    char used[32], lim[32];

    json_object_del(rest, "quotas");
    json_object_del(rest, "usage");
    json_object_del(rest, "quotas_overridden");
    wmctl_object_print(rest, NULL);
    json_decref(rest);
    json_object_foreach(quotas, key, limit)
    {
        json_int_t n = json_integer_value(limit);
        snprintf(used, sizeof used, "%lld",
                 (long long)json_integer_value(json_object_get(usage, key)));
        snprintf(lim, sizeof lim, "%lld", (long long)n);
        const char *cells[] = { key, used, n ? lim : "unlimited",
                                json_object_get(own, key) ? "(own)"
                                                          : "(default)" };
        if (tab)
            table_row_add(tab, cells);
    }
    if (tab)
        table_print(tab, stdout);
    table_free(tab);
}

static int tenant_verb(struct wmctl *ctl, int argc, char **argv, bool yes,
                       json_t *quotas);

int
cmd_tenant(struct wmctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        { "yes", no_argument, NULL, OPT_YES },
        { "quota", required_argument, NULL, OPT_QUOTA },
        { "json", no_argument, NULL, WMCTL_OPT_JSON },
        { "help", no_argument, NULL, WMCTL_OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    bool yes = false;
    int c, rc;
    json_t *quotas = json_object();

    while ((c = wmctl_getopt(ctl, argc, argv, opts)) != -1) {
        if (c == WMCTL_OPT_HELP) {
            json_decref(quotas);
            return wmctl_usage_command(ctl);
        }
        if (c == OPT_YES) {
            yes = true;
        } else if (c == OPT_QUOTA && quota_add(quotas, optarg) != 0) {
            json_decref(quotas);
            return wmctl_usage_error(ctl,
                                     "--quota %s: KEY=N (0 = unlimited) "
                                     "or KEY=default",
                                     optarg);
        } else if (c != OPT_QUOTA) {
            json_decref(quotas);
            return WMCTL_EXIT_USAGE;
        }
    }
    rc = tenant_verb(ctl, argc, argv, yes, quotas);
    json_decref(quotas);
    return rc;
}

/* The verb of `wmctl tenant`, its options parsed. */
static int
tenant_verb(struct wmctl *ctl, int argc, char **argv, bool yes, json_t *quotas)
{
    const char *verb = optind < argc ? argv[optind] : NULL;
    const char *name = optind + 1 < argc ? argv[optind + 1] : NULL;
    if (verb && strcmp(verb, "list") == 0 && optind + 1 == argc) {
        static const char *const header[] = { "NAME", "STATUS", "WORKERS",
                                              "CREATED_BY" };
        static const char *const keys[] = { "name", "status", "workers",
                                            "created_by" };
        json_t *answer;
        int rc = wmctl_call(ctl, "GET", "/v1/tenants", NULL, NULL, &answer);
        if (rc == WMCTL_EXIT_OK && ctl->json)
            wmctl_json_print(answer);
        else if (rc == WMCTL_EXIT_OK)
            rows_print(json_object_get(answer, "tenants"), 4, header, keys);
        json_decref(answer);
        return rc;
    }
    if (verb == NULL || name == NULL || optind + 2 != argc)
        return wmctl_usage_error(ctl, "tenant needs a verb and a NAME");
    char done[200];
    char *path = NULL;
    int rc;
    json_t *answer = NULL;
    if (json_object_size(quotas) && strcmp(verb, "create") != 0 &&
        strcmp(verb, "set") != 0)
        return wmctl_usage_error(ctl, "--quota goes with create or set");
    if (strcmp(verb, "create") == 0) {
        json_t *body = json_pack("{s:s}", "name", name);
        if (json_object_size(quotas))
            json_object_set(body, "quotas", quotas);
        return call_print(ctl, "POST", "/v1/tenants", body, NULL);
    } else if (strcmp(verb, "set") == 0) {
        if (json_object_size(quotas) == 0)
            return wmctl_usage_error(ctl,
                                     "tenant set %s: say what changes "
                                     "(--quota KEY=N|default)",
                                     name);
        path = wmctl_path("/v1/tenants/", name, "");
        snprintf(done, sizeof done, "tenant %s changed", name);
        rc = call_print(ctl, "PATCH", path,
                        json_pack("{s:O}", "quotas", quotas), done);
    } else if (strcmp(verb, "show") == 0) {
        path = wmctl_path("/v1/tenants/", name, "");
        rc = wmctl_call(ctl, "GET", path, NULL, NULL, &answer);
        if (rc == WMCTL_EXIT_OK && ctl->json)
            wmctl_json_print(answer);
        else if (rc == WMCTL_EXIT_OK)
            tenant_print(answer);
        json_decref(answer);
    } else if (strcmp(verb, "suspend") == 0 || strcmp(verb, "resume") == 0) {
        char suffix[16];
        snprintf(suffix, sizeof suffix, "/%s", verb);
        snprintf(done, sizeof done, "%s %sd", name, verb);
        path = wmctl_path("/v1/tenants/", name, suffix);
        rc = call_print(ctl, "POST", path, NULL, done);
    } else if (strcmp(verb, "delete") == 0) {
        if (!yes)
            return wmctl_usage_error(ctl,
                                     "deleting tenant %s deletes its "
                                     "workers, their state and its tokens: "
                                     "confirm with --yes",
                                     name);
        char *q = wmctl_path("?confirm=", name, "");
        path = q ? wmctl_path("/v1/tenants/", name, q) : NULL;
        free(q);
        snprintf(done, sizeof done, "deleted tenant %s", name);
        rc = path ? call_print(ctl, "DELETE", path, NULL, done)
                  : WMCTL_EXIT_FAILED;
    } else {
        return wmctl_usage_error(ctl, "tenant: unknown verb %s", verb);
    }
    free(path);
    return rc;
}

int
cmd_token(struct wmctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        { "tenant", required_argument, NULL, OPT_TENANT },
        { "role", required_argument, NULL, OPT_ROLE },
        { "expires", required_argument, NULL, OPT_EXPIRES },
        { "json", no_argument, NULL, WMCTL_OPT_JSON },
        { "help", no_argument, NULL, WMCTL_OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    const char *tenant = NULL, *role = NULL, *expires = NULL;
    int c;

    while ((c = wmctl_getopt(ctl, argc, argv, opts)) != -1) {
        if (c == WMCTL_OPT_HELP)
            return wmctl_usage_command(ctl);
        if (c == OPT_TENANT)
            tenant = optarg;
        else if (c == OPT_ROLE)
            role = optarg;
        else if (c == OPT_EXPIRES)
            expires = optarg;
        else
            return WMCTL_EXIT_USAGE;
    }
    const char *verb = optind < argc ? argv[optind] : "";
    if (strcmp(verb, "create") == 0 && optind + 1 == argc) {
        unsigned long long s = 0;
        if (role == NULL)
            return wmctl_usage_error(ctl, "token create needs --role");
        if (expires && duration_parse(expires, &s) != 0)
            return wmctl_usage_error(ctl,
                                     "--expires %s: a duration is N with s, "
                                     "m, h or d, at most ten years",
                                     expires);
        json_t *body = json_pack("{s:s}", "role", role);
        if (tenant)
            json_object_set_new(body, "tenant", json_string(tenant));
        if (s)
            json_object_set_new(body, "expires_in_s", json_integer((int)s));
        json_t *answer = NULL;
        int rc = wmctl_call(ctl, "POST", "/v1/tokens", NULL, body, &answer);
        json_decref(body);
        if (rc == WMCTL_EXIT_OK && ctl->json) {
            wmctl_json_print(answer);
        } else if (rc == WMCTL_EXIT_OK) {
            /* The token alone on stdout (for a file); the rest aside. */
            printf("%s\n", json_string_value(json_object_get(answer, "token")));
            fprintf(stderr,
                    "wmctl: token %s for %s/%s: shown this once, keep it\n",
                    json_string_value(json_object_get(answer, "id")),
                    json_string_value(json_object_get(answer, "tenant")),
                    json_string_value(json_object_get(answer, "role")));
        }
        json_decref(answer);
        return rc;
    }
    if (strcmp(verb, "list") == 0 && optind + 1 == argc) {
        static const char *const header[] = { "ID",         "TENANT",
                                              "ROLE",       "EXPIRES_AT",
                                              "CREATED_AT", "CREATED_BY" };
        static const char *const keys[] = { "id",         "tenant",
                                            "role",       "expires_at",
                                            "created_at", "created_by" };
        char *path = tenant ? wmctl_path("/v1/tokens?tenant=", tenant, "")
                            : strdup("/v1/tokens");
        json_t *answer = NULL;
        int rc = path ? wmctl_call(ctl, "GET", path, NULL, NULL, &answer)
                      : WMCTL_EXIT_FAILED;
        free(path);
        if (rc == WMCTL_EXIT_OK && ctl->json)
            wmctl_json_print(answer);
        else if (rc == WMCTL_EXIT_OK)
            rows_print(json_object_get(answer, "tokens"), 6, header, keys);
        json_decref(answer);
        return rc;
    }
    if (strcmp(verb, "revoke") == 0 && optind + 2 == argc) {
        char done[200];
        char *path = wmctl_path("/v1/tokens/", argv[optind + 1], "");
        snprintf(done, sizeof done, "revoked token %s", argv[optind + 1]);
        int rc = path ? call_print(ctl, "DELETE", path, NULL, done)
                      : WMCTL_EXIT_FAILED;
        free(path);
        return rc;
    }
    return wmctl_usage_error(ctl, "token: create, list or revoke ID");
}
