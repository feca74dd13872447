/*
 * wmctl.c — the command-line client of workmanagerd: global options, the
 * command table, the calls to the daemon and the readable output shared by
 * the commands (cmd_workers.c, cmd_events.c, cmd_pack.c), and the small
 * commands (engines, health, recover).
 *
 * wmctl speaks only the public admin API (DESIGN §8) over the control
 * socket or TCP, through http.c; the one local command, pack, makes a
 * native package and talks to no daemon.  Its exit codes are fixed (wmctl.h):
 * scripts tell "the daemon said no" (1) from "wrong use" (2) and "no
 * daemon" (3).
 */
#include "config.h"

#include "cli/wmctl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cli/table.h"
#include "lib/spell.h"

#define DEFAULT_SOCKET "/run/workmanager/control.sock"
/* The daemon reads at most this much of its token file
 * (master/api/router.c). */
#define TOKEN_MAX 512

/* How this run authenticates over TCP, for the hint after a 401 (only a
 * TCP listener answers one): no token given, or the token of this file. */
static bool tcp_no_token;
static const char *tcp_token_file;

static int cmd_engines(struct wmctl *ctl, int argc, char **argv);
static int cmd_instances(struct wmctl *ctl, int argc, char **argv);
static int cmd_health(struct wmctl *ctl, int argc, char **argv);
static int cmd_recover(struct wmctl *ctl, int argc, char **argv);
static int cmd_help(struct wmctl *ctl, int argc, char **argv);

static const struct wmctl_command commands[] = {
    {
        .name = "create",
        .synopsis =
            "(FILE | --url URL [--sha256 HEX]) --topic T [--mime-type T] "
            "[--name N] [--group G] [--tenant T] [--config k=v]... "
            "[--tag k=v]... [--timeout-ms N] [--memory-mb N] "
            "[--concurrency N] [--isolation process|in-process] "
            "[--idle-timeout-s N] [--no-start]",
        .run = cmd_create,
    },
    { .name = "list", .synopsis = "", .run = cmd_list },
    { .name = "show", .synopsis = "WORKER", .run = cmd_show },
    { .name = "logs", .synopsis = "WORKER [-f] [-n N]", .run = cmd_logs },
    { .name = "start", .synopsis = "WORKER", .run = cmd_status },
    { .name = "stop", .synopsis = "WORKER", .run = cmd_status },
    { .name = "suspend", .synopsis = "WORKER", .run = cmd_status },
    { .name = "resume", .synopsis = "WORKER", .run = cmd_status },
    { .name = "delete", .synopsis = "WORKER", .run = cmd_delete },
    {
        .name = "reload",
        .synopsis = "WORKER FILE | WORKER --url URL [--sha256 HEX]",
        .run = cmd_reload,
    },
    { .name = "history", .synopsis = "WORKER", .run = cmd_history },
    { .name = "rollback", .synopsis = "WORKER VERSION", .run = cmd_rollback },
    { .name = "tags", .synopsis = "WORKER [k=v ...]", .run = cmd_tags },
    {
        .name = "invoke",
        .synopsis = "WORKER [--type T] [--data JSON | --data-file F] "
                    "[--ext k=v]...",
        .run = cmd_invoke,
    },
    {
        .name = "publish",
        .synopsis = "TOPIC [--tenant T] [--type T] [--id ID] [--data JSON | "
                    "--data-file F] [--ext k=v]... | TOPIC [--tenant T] "
                    "--file EVENTS.json",
        .run = cmd_publish,
    },
    {
        .name = "subscribe",
        .synopsis = "TOPIC [--tenant T] [--count N]",
        .run = cmd_subscribe,
    },
    { .name = "engines", .synopsis = "", .run = cmd_engines },
    { .name = "instances", .synopsis = "", .run = cmd_instances },
    { .name = "export", .synopsis = "FILE", .run = cmd_export },
    { .name = "import", .synopsis = "FILE [--replace]", .run = cmd_import },
    { .name = "health", .synopsis = "", .run = cmd_health },
    { .name = "recover", .synopsis = "", .run = cmd_recover },
    {
        .name = "tenant",
        .synopsis = "create|set NAME [--quota KEY=N|default]... | "
                    "show|suspend|resume NAME | delete NAME --yes | list",
        .run = cmd_tenant,
    },
    {
        .name = "token",
        .synopsis = "create --tenant T --role operator|tenant-admin|"
                    "publisher|reader [--expires DURATION] | list "
                    "[--tenant T] | revoke ID",
        .run = cmd_token,
    },
    {
        .name = "pack",
        .synopsis = "[--manifest FILE | --library NAME [--entry-point SYM] "
                    "[--free-result SYM]] [--rid RID]... -o OUT.zip LIB.so",
        .run = cmd_pack,
        .local = true,
    },
    { .name = "help", .synopsis = "[COMMAND]", .run = cmd_help },
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: wmctl [--socket PATH | --url URL [--token-file FILE] "
            "[--ca-file FILE] [--cert FILE [--key FILE]]] [--json] COMMAND "
            "[ARGS]\n"
            "\n"
            "Options:\n"
            "  --socket PATH      the control socket (default: $WM_SOCKET, "
            "else " DEFAULT_SOCKET ")\n"
            "  --url URL          the daemon over TCP, as https://host:port "
            "(or http:// on loopback)\n"
            "  --token-file FILE  the bearer token for --url (default: "
            "$WM_TOKEN_FILE)\n"
            "  --ca-file FILE     the CA certificates the daemon's certificate "
            "must chain to\n"
            "                     (default: $WM_CA_FILE, else the system's)\n"
            "  --cert FILE        a client certificate (PEM; default: "
            "$WM_CERT_FILE)\n"
            "  --key FILE         its private key (default: $WM_KEY_FILE, "
            "else in --cert)\n"
            "  --json             print the daemon's JSON answers as they "
            "are\n"
            "  --help, --version\n"
            "\n"
            "Commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %s%s%s\n", commands[i].name,
                *commands[i].synopsis ? " " : "", commands[i].synopsis);
    fprintf(out, "\n"
                 "WORKER is a worker's name or id.  create takes the MIME type "
                 "from FILE's\n"
                 "extension unless --mime-type is given: .py "
                 "text/x-python,\n"
                 ".cs text/x-csharp, .nupkg and .dll application/x-dotnet-dll, "
                 ".zip\n"
                 "application/x-native-dll (application/x-dotnet-dll when it "
                 "holds lib/<tfm>/*.dll).\n"
                 "invoke and publish send a "
                 "CloudEvent with\n"
                 "source \"wmctl\", a random id and the type wmctl.invoke or "
                 "wmctl.publish\n"
                 "unless --type is given.\n"
                 "\n"
                 "pack makes a native worker package (manifest.json and\n"
                 "runtimes/<rid>/native/lib<library>.so) without a daemon.\n"
                 "\n"
                 "Exit status: 0 ok, 1 the daemon answered an error (pack: "
                 "the package\n"
                 "was not made), 2 usage error, 3 the daemon cannot be "
                 "reached.\n");
}

static const struct wmctl_command *
command_find(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* "unknown command X", with the closest command (lib/spell.h's rule, the
 * daemon's for keys and members) when one is close. */
static int
unknown_command(const char *name)
{
    const char *names[NCOMMANDS];

    for (size_t i = 0; i < NCOMMANDS; i++)
        names[i] = commands[i].name;
    const char *near = spell_closest(name, names, NCOMMANDS);
    if (near)
        fprintf(stderr, "wmctl: unknown command %s (did you mean %s?)\n", name,
                near);
    else
        fprintf(stderr, "wmctl: unknown command %s\n", name);
    fputs("Try 'wmctl help'.\n", stderr);
    return WMCTL_EXIT_USAGE;
}

static void
command_usage(FILE *out, const struct wmctl_command *c)
{
    fprintf(out, "usage: wmctl %s%s%s\n", c->name, *c->synopsis ? " " : "",
            c->synopsis);
}

/* ---- shared by the commands ------------------------------------------ */

static void error_json_print(json_t *error, long status);

int
wmctl_usage_command(struct wmctl *ctl)
{
    command_usage(stdout, command_find(ctl->command));
    return WMCTL_EXIT_OK;
}

int
wmctl_usage_error(struct wmctl *ctl, const char *fmt, ...)
{
    const struct wmctl_command *c =
        ctl->command ? command_find(ctl->command) : NULL;
    va_list ap;

    if (ctl->json) {
        char msg[1024], use[1024] = "wmctl --help";
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        if (c)
            snprintf(use, sizeof use, "wmctl %s%s%s", c->name,
                     *c->synopsis ? " " : "", c->synopsis);
        json_t *e = json_pack("{s:s, s:s, s:s}", "code", "usage", "message",
                              msg, "usage", use);
        error_json_print(e, 0);
        json_decref(e);
        return WMCTL_EXIT_USAGE;
    }
    fputs("wmctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (c)
        command_usage(stderr, c);
    else
        fputs("Try 'wmctl --help'.\n", stderr);
    return WMCTL_EXIT_USAGE;
}

int
wmctl_getopt(struct wmctl *ctl, int argc, char **argv,
             const struct option *opts)
{
    return wmctl_getopt_short(ctl, argc, argv, "h", opts);
}

int
wmctl_getopt_short(struct wmctl *ctl, int argc, char **argv,
                   const char *shortopts, const struct option *opts)
{
    char *name = argv[0];
    int c;

    /* getopt's own messages name argv[0]: say "wmctl". */
    argv[0] = (char *)(uintptr_t) "wmctl";
    for (;;) {
        c = getopt_long(argc, argv, shortopts, opts, NULL);
        if (c != WMCTL_OPT_JSON)
            break;
        ctl->json = true;
    }
    argv[0] = name;
    return c;
}

/* An error as JSON on stderr: {"error": {"code", "message", ...}} with
 * the HTTP status when there was one (0: none). */
static void
error_json_print(json_t *error, long status)
{
    json_t *j = json_pack("{s:O}", "error", error);
    if (status)
        json_object_set_new(j, "status", json_integer(status));
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (text)
        fprintf(stderr, "%s\n", text);
    free(text);
    json_decref(j);
}

void
wmctl_error_print(struct wmctl *ctl, long status, const char *body)
{
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    json_t *e = json_object_get(j, "error");
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *message = json_string_value(json_object_get(e, "message"));
    const char *tb = json_string_value(json_object_get(e, "traceback"));

    if (ctl->json) {
        json_t *made = NULL;
        if (!json_is_object(e) || code == NULL) /* not the API's shape */
            e = made = json_pack("{s:s, s:s%}", "code", "http_error", "message",
                                 body ? body : "",
                                 body ? strcspn(body, "\r\n") : (size_t)0);
        error_json_print(e, status);
        json_decref(made);
    } else if (code) {
        fprintf(stderr, "wmctl: %s: %s\n", code, message ? message : "");
        /* A worker's error (invoke): where it failed. */
        if (tb && *tb)
            fprintf(stderr, "%s%s", tb, tb[strlen(tb) - 1] == '\n' ? "" : "\n");
    } else {
        fprintf(stderr, "wmctl: http_%ld: %.*s\n", status,
                body ? (int)strcspn(body, "\r\n") : 0, body ? body : "");
    }
    json_decref(j);
    if (status == 401 && tcp_no_token)
        fputs("wmctl: hint: over TCP the daemon takes a bearer token: give "
              "--token-file FILE (the daemon's token_file) or set "
              "WM_TOKEN_FILE\n",
              stderr);
    else if (status == 401 && tcp_token_file)
        fprintf(stderr,
                "wmctl: hint: the daemon refused the token of %s: it must "
                "hold the token of the daemon's token_file\n",
                tcp_token_file);
}

int
wmctl_unreachable(struct wmctl *ctl, const char *reason)
{
    if (ctl->json) {
        json_t *e =
            json_pack("{s:s, s:s, s:s}", "code", "unreachable", "message",
                      reason, "target", http_client_target(ctl->http));
        error_json_print(e, 0);
        json_decref(e);
    } else {
        fprintf(stderr, "wmctl: cannot reach %s: %s\n",
                http_client_target(ctl->http), reason);
    }
    return WMCTL_EXIT_UNREACHABLE;
}

int
wmctl_call_raw(struct wmctl *ctl, const char *method, const char *path,
               const char *content_type, const char *body, size_t len,
               long *status, json_t **answer)
{
    struct http_reply r;
    char err[CURL_ERROR_SIZE + 64];
    int rc = WMCTL_EXIT_OK;

    if (answer)
        *answer = NULL;
    if (http_client_request(ctl->http, method, path, body ? content_type : NULL,
                            body, len, &r, err, sizeof err) != 0)
        return wmctl_unreachable(ctl, err);
    if (status)
        *status = r.status;
    if (r.status < 200 || r.status > 299) {
        wmctl_error_print(ctl, r.status, r.body);
        rc = WMCTL_EXIT_FAILED;
    } else if (answer && r.len > 0) {
        json_error_t je;
        *answer = json_loadb(r.body, r.len, 0, &je);
        if (*answer == NULL) {
            fprintf(stderr, "wmctl: the daemon's answer is not JSON: %s\n",
                    je.text);
            rc = WMCTL_EXIT_FAILED;
        }
    }
    http_reply_free(&r);
    return rc;
}

int
wmctl_call(struct wmctl *ctl, const char *method, const char *path,
           const char *content_type, json_t *body, json_t **answer)
{
    char *text = NULL;
    int rc;

    if (body) {
        text = json_dumps(body, JSON_COMPACT);
        if (text == NULL) {
            fprintf(stderr, "wmctl: out of memory\n");
            return WMCTL_EXIT_FAILED;
        }
    }
    rc = wmctl_call_raw(ctl, method, path,
                        content_type ? content_type : "application/json", text,
                        text ? strlen(text) : 0, NULL, answer);
    free(text);
    return rc;
}

char *
wmctl_path(const char *prefix, const char *seg, const char *suffix)
{
    char *e = http_escape(seg);
    size_t cap;
    char *out;

    if (e == NULL)
        return NULL;
    cap = strlen(prefix) + strlen(e) + strlen(suffix) + 1;
    out = malloc(cap);
    if (out)
        snprintf(out, cap, "%s%s%s", prefix, e, suffix);
    free(e);
    return out;
}

void
wmctl_json_print(const json_t *j)
{
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_ENCODE_ANY);
    if (text)
        printf("%s\n", text);
    free(text);
}

/* Nested objects and arrays are bracketed in a readable value. */
static const char *
open_of(const json_t *v)
{
    return json_is_object(v) ? "{" : json_is_array(v) ? "[" : "";
}

static const char *
close_of(const json_t *v)
{
    return json_is_object(v) ? "}" : json_is_array(v) ? "]" : "";
}

char *
wmctl_value_text(const json_t *v)
{
    const char *key;
    json_t *m;
    size_t i;
    char *out = NULL;
    size_t len = 0;
    FILE *f;

    switch (json_typeof(v)) {
    case JSON_STRING:
        return strdup(json_string_value(v));
    case JSON_NULL:
        return strdup("-");
    case JSON_OBJECT:
    case JSON_ARRAY:
        f = open_memstream(&out, &len);
        if (f == NULL)
            return NULL;
        if (json_is_object(v)) {
            bool first = true;
            json_object_foreach((json_t *)(uintptr_t)v, key, m)
            {
                char *t = wmctl_value_text(m);
                fprintf(f, "%s%s=%s%s%s", first ? "" : ", ", key, open_of(m),
                        t ? t : "?", close_of(m));
                first = false;
                free(t);
            }
        } else {
            json_array_foreach(v, i, m)
            {
                char *t = wmctl_value_text(m);
                fprintf(f, "%s%s%s%s", i ? ", " : "", open_of(m), t ? t : "?",
                        close_of(m));
                free(t);
            }
        }
        fclose(f);
        return out;
    default:
        return json_dumps(v, JSON_ENCODE_ANY);
    }
}

void
wmctl_object_print(const json_t *obj, const char *const *keys)
{
    const char *key;
    json_t *v;

    if (keys) {
        for (; *keys; keys++) {
            v = json_object_get(obj, *keys);
            if (v == NULL)
                continue;
            char *t = wmctl_value_text(v);
            printf("%s: %s\n", *keys, t ? t : "?");
            free(t);
        }
        return;
    }
    json_object_foreach((json_t *)(uintptr_t)obj, key, v)
    {
        char *t = wmctl_value_text(v);
        printf("%s: %s\n", key, t ? t : "?");
        free(t);
    }
}

int
wmctl_pair_set(json_t *obj, const char *text)
{
    const char *eq = strchr(text, '=');
    if (eq == NULL || eq == text)
        return -1;
    char *key = strndup(text, (size_t)(eq - text));
    int rc = key ? json_object_set_new(obj, key, json_string(eq + 1)) : -1;
    free(key);
    return rc;
}

int
wmctl_file_read(const char *path, char **data, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rbe");
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int saved;

    if (f == NULL)
        return -1;
    for (;;) {
        if (cap - n < 4096) {
            cap = cap ? cap * 2 : 65536;
            char *p = realloc(buf, cap + 1);
            if (p == NULL) {
                saved = ENOMEM;
                goto fail;
            }
            buf = p;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        saved = EIO;
        goto fail;
    }
    if (f != stdin)
        fclose(f);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
fail:
    if (f != stdin)
        fclose(f);
    free(buf);
    errno = saved;
    return -1;
}

int
wmctl_json_parse(struct wmctl *ctl, const char *opt, const char *text,
                 json_t **out)
{
    json_error_t je;
    *out = json_loads(text, JSON_DECODE_ANY, &je);
    if (*out == NULL) {
        wmctl_usage_error(ctl, "%s: not JSON: %s", opt, je.text);
        return -1;
    }
    return 0;
}

/* ---- the small commands ---------------------------------------------- */

static const struct option no_options[] = {
    { "json", no_argument, NULL, WMCTL_OPT_JSON },
    { "help", no_argument, NULL, WMCTL_OPT_HELP },
    { NULL, 0, NULL, 0 },
};

/* For commands without options or arguments: 0 to go on, else the exit
 * code. */
static int
no_arguments(struct wmctl *ctl, int argc, char **argv, bool *done)
{
    int c;
    *done = true;
    while ((c = wmctl_getopt(ctl, argc, argv, no_options)) != -1) {
        if (c == WMCTL_OPT_HELP)
            return wmctl_usage_command(ctl);
        return wmctl_usage_error(ctl, "bad option");
    }
    if (optind != argc)
        return wmctl_usage_error(ctl, "unexpected argument %s", argv[optind]);
    *done = false;
    return 0;
}

static int
cmd_engines(struct wmctl *ctl, int argc, char **argv)
{
    static const char *const header[] = { "NAME", "MIME_TYPES", "AVAILABLE",
                                          "WARM", "REASON" };
    json_t *answer, *e;
    bool done;
    size_t i;
    int rc = no_arguments(ctl, argc, argv, &done);

    if (done)
        return rc;
    rc = wmctl_call(ctl, "GET", "/v1/engines", NULL, NULL, &answer);
    if (rc != WMCTL_EXIT_OK)
        return rc;
    if (ctl->json) {
        wmctl_json_print(answer);
    } else {
        struct table *t = table_new(5, header);
        json_array_foreach(json_object_get(answer, "engines"), i, e)
        {
            char *mimes = wmctl_value_text(json_object_get(e, "mime_types"));
            char warm[48];
            /* The warm pool: ready now / kept. */
            snprintf(
                warm, sizeof warm, "%lld/%lld",
                (long long)json_integer_value(json_object_get(e, "warm_ready")),
                (long long)json_integer_value(json_object_get(e, "warm")));
            const char *cells[] = {
                json_string_value(json_object_get(e, "name")),
                mimes,
                json_is_true(json_object_get(e, "available")) ? "yes" : "no",
                warm,
                json_string_value(json_object_get(e, "reason")),
            };
            if (t)
                table_row_add(t, cells);
            free(mimes);
        }
        if (t)
            table_print(t, stdout);
        table_free(t);
    }
    json_decref(answer);
    return rc;
}

/* The daemons sharing the store, and their states (GET /v1/instances). */
static int
cmd_instances(struct wmctl *ctl, int argc, char **argv)
{
    static const char *const header[] = { "ID",    "NAME",      "HOST", "PID",
                                          "STATE", "LAST_SEEN", "" };
    json_t *answer, *e;
    bool done;
    size_t i;
    int rc = no_arguments(ctl, argc, argv, &done);

    if (done)
        return rc;
    rc = wmctl_call(ctl, "GET", "/v1/instances", NULL, NULL, &answer);
    if (rc != WMCTL_EXIT_OK)
        return rc;
    if (ctl->json) {
        wmctl_json_print(answer);
    } else {
        struct table *t = table_new(7, header);
        json_array_foreach(json_object_get(answer, "instances"), i, e)
        {
            char *name = wmctl_value_text(json_object_get(e, "name"));
            char *host = wmctl_value_text(json_object_get(e, "host"));
            char *pid = wmctl_value_text(json_object_get(e, "pid"));
            const char *cells[] = {
                json_string_value(json_object_get(e, "id")),
                name,
                host,
                pid,
                json_string_value(json_object_get(e, "state")),
                json_string_value(json_object_get(e, "last_seen")),
                json_is_true(json_object_get(e, "self")) ? "(this one)" : "",
            };
            if (t)
                table_row_add(t, cells);
            free(name);
            free(host);
            free(pid);
        }
        if (t)
            table_print(t, stdout);
        table_free(t);
    }
    json_decref(answer);
    return rc;
}

/* /health answers 503 with its usual body while not healthy: that body is
 * printed as well, and the exit code says which. */
static int
cmd_health(struct wmctl *ctl, int argc, char **argv)
{
    struct http_reply r;
    char err[CURL_ERROR_SIZE + 64];
    bool done;
    int rc = no_arguments(ctl, argc, argv, &done);

    if (done)
        return rc;
    if (http_client_request(ctl->http, "GET", "/health", NULL, NULL, 0, &r, err,
                            sizeof err) != 0)
        return wmctl_unreachable(ctl, err);
    json_t *j = r.body ? json_loads(r.body, 0, NULL) : NULL;
    if (json_object_get(j, "error") || !json_is_object(j)) {
        wmctl_error_print(ctl, r.status, r.body);
    } else if (ctl->json) {
        wmctl_json_print(j);
    } else {
        wmctl_object_print(j, NULL);
    }
    rc = r.status == 200 ? WMCTL_EXIT_OK : WMCTL_EXIT_FAILED;
    json_decref(j);
    http_reply_free(&r);
    return rc;
}

static int
cmd_recover(struct wmctl *ctl, int argc, char **argv)
{
    json_t *answer;
    bool done;
    int rc = no_arguments(ctl, argc, argv, &done);

    if (done)
        return rc;
    rc = wmctl_call(ctl, "POST", "/v1/recover", NULL, NULL, &answer);
    if (rc == WMCTL_EXIT_OK) {
        if (ctl->json)
            wmctl_json_print(answer);
        else
            wmctl_object_print(answer, NULL);
    }
    json_decref(answer);
    return rc;
}

/* help: every command, or one command's usage. */
static int
cmd_help(struct wmctl *ctl, int argc, char **argv)
{
    const struct wmctl_command *c;

    if (argc < 2) {
        usage(stdout);
        return WMCTL_EXIT_OK;
    }
    if (argc > 2)
        return wmctl_usage_error(ctl, "help takes one COMMAND");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return wmctl_usage_command(ctl);
    if ((c = command_find(argv[1])) == NULL)
        return unknown_command(argv[1]);
    command_usage(stdout, c);
    printf("See COMMANDS in wmctl(1) for what %s does.\n", c->name);
    return WMCTL_EXIT_OK;
}

/* ---- main ------------------------------------------------------------ */

/* Reads the bearer token: the file's text without its trailing newline,
 * as the daemon reads its own copy. */
static int
token_read(const char *file, char *token, size_t len)
{
    FILE *f = fopen(file, "re");
    if (f == NULL) {
        fprintf(stderr, "wmctl: token file %s: %s\n", file, strerror(errno));
        return -1;
    }
    size_t n = fread(token, 1, len - 1, f);
    fclose(f);
    while (n && (token[n - 1] == '\n' || token[n - 1] == '\r' ||
                 token[n - 1] == ' '))
        n--;
    token[n] = '\0';
    return 0;
}

/* Runs cmd over its own argv (argv[0] being its name) and flushes its
 * output; returns its exit code. */
static int
command_run(struct wmctl *ctl, const struct wmctl_command *cmd, int argc,
            char **argv)
{
    int rc;

    ctl->command = cmd->name;
    optind = 0;
    rc = cmd->run(ctl, argc, argv);
    if (fflush(stdout) != 0 && rc == WMCTL_EXIT_OK) {
        fprintf(stderr, "wmctl: writing the output: %s\n", strerror(errno));
        rc = WMCTL_EXIT_FAILED;
    }
    return rc;
}

enum {
    OPT_SOCKET = 0x200,
    OPT_URL,
    OPT_TOKEN_FILE,
    OPT_CA_FILE,
    OPT_CERT,
    OPT_KEY,
    OPT_VERSION,
};

/* An option's value, else the environment's (NULL when neither or
 * empty). */
static const char *
opt_or_env(const char *opt, const char *var)
{
    const char *v = opt ? opt : getenv(var);
    return v && *v ? v : NULL;
}

int
main(int argc, char **argv)
{
    static const struct option options[] = {
        { "socket", required_argument, NULL, OPT_SOCKET },
        { "url", required_argument, NULL, OPT_URL },
        { "token-file", required_argument, NULL, OPT_TOKEN_FILE },
        { "ca-file", required_argument, NULL, OPT_CA_FILE },
        { "cert", required_argument, NULL, OPT_CERT },
        { "key", required_argument, NULL, OPT_KEY },
        { "json", no_argument, NULL, WMCTL_OPT_JSON },
        { "help", no_argument, NULL, WMCTL_OPT_HELP },
        { "version", no_argument, NULL, OPT_VERSION },
        { NULL, 0, NULL, 0 },
    };
    struct wmctl ctl = { 0 };
    const char *socket_path = NULL, *url = NULL, *token_file = NULL;
    const char *ca_file = NULL, *cert = NULL, *key = NULL;
    char token[TOKEN_MAX];
    int c, rc;

    while ((c = getopt_long(argc, argv, "+h", options, NULL)) != -1) {
        switch (c) {
        case OPT_SOCKET:
            socket_path = optarg;
            break;
        case OPT_URL:
            url = optarg;
            break;
        case OPT_TOKEN_FILE:
            token_file = optarg;
            break;
        case OPT_CA_FILE:
            ca_file = optarg;
            break;
        case OPT_CERT:
            cert = optarg;
            break;
        case OPT_KEY:
            key = optarg;
            break;
        case WMCTL_OPT_JSON:
            ctl.json = true;
            break;
        case WMCTL_OPT_HELP:
            usage(stdout);
            return WMCTL_EXIT_OK;
        case OPT_VERSION:
            printf("wmctl %s\n", PACKAGE_VERSION);
            return WMCTL_EXIT_OK;
        default:
            usage(stderr);
            return WMCTL_EXIT_USAGE;
        }
    }
    if (optind == argc) {
        usage(stderr);
        return WMCTL_EXIT_USAGE;
    }
    const struct wmctl_command *cmd = command_find(argv[optind]);
    if (cmd == NULL)
        return unknown_command(argv[optind]);
    /* A local command has no daemon: the connection is not set up. */
    if (cmd->local)
        return command_run(&ctl, cmd, argc - optind, argv + optind);
    if (socket_path && url)
        return wmctl_usage_error(&ctl, "--socket and --url exclude each "
                                       "other");
    if (token_file && !url)
        return wmctl_usage_error(&ctl, "--token-file goes with --url");
    bool https = url && strncmp(url, "https://", 8) == 0;
    if (url && !https && strncmp(url, "http://", 7) != 0)
        return wmctl_usage_error(&ctl,
                                 "--url %s: expected https://host:port (or "
                                 "http://host:port)",
                                 url);
    if ((ca_file || cert || key) && !https)
        return wmctl_usage_error(&ctl, "--ca-file, --cert and --key go with "
                                       "--url https://...");
    if (key && !cert)
        return wmctl_usage_error(&ctl, "--key goes with --cert");
    if (socket_path == NULL && url == NULL)
        socket_path = getenv("WM_SOCKET");
    if (socket_path == NULL || *socket_path == '\0')
        socket_path = DEFAULT_SOCKET;
    if (url && token_file == NULL)
        token_file = getenv("WM_TOKEN_FILE");
    if (url && token_file && *token_file &&
        token_read(token_file, token, sizeof token) != 0)
        return WMCTL_EXIT_USAGE;
    tcp_no_token = url && !(token_file && *token_file);
    tcp_token_file = url && token_file && *token_file ? token_file : NULL;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        fprintf(stderr, "wmctl: cannot initialise libcurl\n");
        return WMCTL_EXIT_FAILED;
    }
    ctl.http = http_client_new(socket_path, url,
                               url && token_file && *token_file ? token : NULL);
    if (ctl.http && https &&
        http_client_set_tls(ctl.http, opt_or_env(ca_file, "WM_CA_FILE"),
                            opt_or_env(cert, "WM_CERT_FILE"),
                            opt_or_env(key, "WM_KEY_FILE")) != 0) {
        http_client_free(ctl.http);
        ctl.http = NULL;
    }
    if (ctl.http == NULL) {
        fprintf(stderr, "wmctl: out of memory\n");
        curl_global_cleanup();
        return WMCTL_EXIT_FAILED;
    }
    rc = command_run(&ctl, cmd, argc - optind, argv + optind);
    http_client_free(ctl.http);
    curl_global_cleanup();
    return rc;
}
