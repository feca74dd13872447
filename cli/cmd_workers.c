/*
 * cmd_workers.c — wmctl's worker commands: create, list, show, start, stop,
 * suspend, resume, delete, reload, history, rollback and tags, each one
 * route of /v1/workers (DESIGN §8); invoke is in cmd_events.c.
 *
 * Bodies are built here as the routes take them (master/api/worker_body.c
 * is their reference); the daemon validates them, so wmctl checks only
 * what it must to build them (numbers, k=v pairs, JSON arguments).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zip.h>

#include "cli/table.h"
#include "cli/wmctl.h"
#include "lib/base64.h"

/* A history row's source: a URL (up to 4 KiB), maybe the one that
 * answered after redirects, and a rollback note. */
#define HISTORY_SOURCE_MAX 8400

/* What create prints of the new worker, and the other changes of it. */
static const char *const brief_keys[] = {
    "id", "name", "status", "state", "version", NULL,
};

/* The MIME type of a code file by its extension (create --help says so). */
static const struct {
    const char *ext;
    const char *mime_type;
} mime_by_ext[] = {
    { .ext = ".py", .mime_type = "text/x-python" },
    { .ext = ".cs", .mime_type = "text/x-csharp" },
    { .ext = ".nupkg", .mime_type = "application/x-dotnet-dll" },
    { .ext = ".dll", .mime_type = "application/x-dotnet-dll" },
    { .ext = ".zip", .mime_type = "application/x-native-dll" },
};

/* A zip laid out as a nupkg: an entry lib/<tfm>/<name>.dll (a .NET
 * package under another extension).  Only the names of a local file are
 * read: the host validates the package itself. */
static bool
zip_is_nupkg(const char *file)
{
    zip_t *z = zip_open(file, ZIP_RDONLY, NULL);
    bool found = false;

    if (z == NULL)
        return false;
    zip_int64_t n = zip_get_num_entries(z, 0);
    for (zip_int64_t i = 0; i < n && !found; i++) {
        const char *name = zip_get_name(z, (zip_uint64_t)i, 0);
        const char *tfm_end = name && strncmp(name, "lib/", 4) == 0
                                  ? strchr(name + 4, '/')
                                  : NULL;
        size_t len = tfm_end ? strlen(tfm_end) : 0;
        found = tfm_end && tfm_end > name + 4 && len > 5 &&
                !strchr(tfm_end + 1, '/') &&
                strcasecmp(tfm_end + len - 4, ".dll") == 0;
    }
    zip_discard(z);
    return found;
}

static const char *
mime_guess(const char *file)
{
    size_t n = strlen(file);
    for (size_t i = 0; i < sizeof mime_by_ext / sizeof mime_by_ext[0]; i++) {
        size_t k = strlen(mime_by_ext[i].ext);
        if (n > k && strcmp(file + n - k, mime_by_ext[i].ext) == 0) {
            if (strcmp(mime_by_ext[i].ext, ".zip") == 0 && zip_is_nupkg(file))
                return "application/x-dotnet-dll";
            return mime_by_ext[i].mime_type;
        }
    }
    return NULL;
}

/* The "code" member of a create or reload: FILE's bytes, or a URL and,
 * when given, its digest (the daemon fetches it; without a digest it still
 * records the one it finds).  Returns 0, or an exit code (reported). */
static int
code_json(struct wmctl *ctl, const char *file, const char *url,
          const char *sha256, json_t **out)
{
    char *data, *b64;
    size_t len;

    *out = NULL;
    if (url || sha256) {
        if (file)
            return wmctl_usage_error(ctl, "give FILE or --url, not both");
        if (!url)
            return wmctl_usage_error(ctl, "--sha256 goes with --url");
        *out = sha256 ? json_pack("{s:s, s:s}", "url", url, "sha256", sha256)
                      : json_pack("{s:s}", "url", url);
        return 0;
    }
    if (file == NULL)
        return wmctl_usage_error(ctl, "FILE or --url is required");
    if (wmctl_file_read(file, &data, &len) != 0)
        return wmctl_usage_error(ctl, "%s: %s", file, strerror(errno));
    b64 = base64_encode((const uint8_t *)data, len);
    free(data);
    if (b64 == NULL) {
        fprintf(stderr, "wmctl: out of memory\n");
        return WMCTL_EXIT_FAILED;
    }
    *out = json_pack("{s:s}", "content", b64);
    free(b64);
    return 0;
}

/* A non-negative integer option. */
static int
number_arg(struct wmctl *ctl, const char *opt, const char *text,
           json_int_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < 0) {
        wmctl_usage_error(ctl, "%s %s: expected a non-negative integer", opt,
                          text);
        return -1;
    }
    *out = (json_int_t)v;
    return 0;
}

/* Prints a worker as a command's answer. */
static void
worker_print(struct wmctl *ctl, const json_t *w, bool whole)
{
    if (ctl->json)
        wmctl_json_print(w);
    else
        wmctl_object_print(w, whole ? NULL : brief_keys);
}

/* The one WORKER argument of a command without options; NULL when it is
 * absent or there are more (reported, *rc set). */
static const char *
one_worker(struct wmctl *ctl, int argc, char **argv, int nargs, int *rc)
{
    static const struct option opts[] = {
        { "json", no_argument, NULL, WMCTL_OPT_JSON },
        { "help", no_argument, NULL, WMCTL_OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    int c;

    while ((c = wmctl_getopt(ctl, argc, argv, opts)) != -1) {
        *rc = c == WMCTL_OPT_HELP ? wmctl_usage_command(ctl)
                                  : wmctl_usage_error(ctl, "bad option");
        return NULL;
    }
    if (argc - optind != nargs) {
        *rc = wmctl_usage_error(ctl, "expected %d argument%s", nargs,
                                nargs > 1 ? "s" : "");
        return NULL;
    }
    return argv[optind];
}

/* Sends method /v1/workers/{worker}{suffix} with body; the answer in
 * *answer. */
static int
worker_call(struct wmctl *ctl, const char *method, const char *worker,
            const char *suffix, json_t *body, json_t **answer)
{
    char *path = wmctl_path("/v1/workers/", worker, suffix);
    if (path == NULL) {
        fprintf(stderr, "wmctl: out of memory\n");
        return WMCTL_EXIT_FAILED;
    }
    int rc = wmctl_call(ctl, method, path, NULL, body, answer);
    free(path);
    return rc;
}

/* ---- create ------------------------------------------------------------ */

enum {
    OPT_MIME_TYPE = 0x200,
    OPT_TOPIC,
    OPT_NAME,
    OPT_GROUP,
    OPT_TENANT,
    OPT_CONFIG,
    OPT_TAG,
    OPT_TIMEOUT_MS,
    OPT_MEMORY_MB,
    OPT_CONCURRENCY,
    OPT_IDLE_TIMEOUT_S, /* the four numbers stay together: see create */
    OPT_ISOLATION,
    OPT_NO_START,
    OPT_URL,
    OPT_SHA256,
};

int
cmd_create(struct wmctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        { "mime-type", required_argument, NULL, OPT_MIME_TYPE },
        { "topic", required_argument, NULL, OPT_TOPIC },
        { "name", required_argument, NULL, OPT_NAME },
        { "group", required_argument, NULL, OPT_GROUP },
        { "tenant", required_argument, NULL, OPT_TENANT },
        { "config", required_argument, NULL, OPT_CONFIG },
        { "tag", required_argument, NULL, OPT_TAG },
        { "timeout-ms", required_argument, NULL, OPT_TIMEOUT_MS },
        { "memory-mb", required_argument, NULL, OPT_MEMORY_MB },
        { "concurrency", required_argument, NULL, OPT_CONCURRENCY },
        { "isolation", required_argument, NULL, OPT_ISOLATION },
        { "idle-timeout-s", required_argument, NULL, OPT_IDLE_TIMEOUT_S },
        { "no-start", no_argument, NULL, OPT_NO_START },
        { "url", required_argument, NULL, OPT_URL },
        { "sha256", required_argument, NULL, OPT_SHA256 },
        { "json", no_argument, NULL, WMCTL_OPT_JSON },
        { "help", no_argument, NULL, WMCTL_OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    json_t *body = json_object(), *config = json_object(),
           *tags = json_object(), *limits = json_object(), *code = NULL,
           *answer = NULL;
    const char *mime = NULL, *url = NULL, *sha256 = NULL, *file = NULL;
    json_int_t n;
    int c, rc = WMCTL_EXIT_USAGE;

    while ((c = wmctl_getopt(ctl, argc, argv, opts)) != -1) {
        switch (c) {
        case OPT_MIME_TYPE:
            mime = optarg;
            break;
        case OPT_TOPIC:
            json_object_set_new(body, "topic", json_string(optarg));
            break;
        case OPT_NAME:
            json_object_set_new(body, "name", json_string(optarg));
            break;
        case OPT_GROUP:
            json_object_set_new(body, "group", json_string(optarg));
            break;
        case OPT_TENANT:
            json_object_set_new(body, "tenant", json_string(optarg));
            break;
        case OPT_CONFIG:
        case OPT_TAG:
            if (wmctl_pair_set(c == OPT_CONFIG ? config : tags, optarg)) {
                rc = wmctl_usage_error(ctl, "--%s %s: expected k=v",
                                       c == OPT_CONFIG ? "config" : "tag",
                                       optarg);
                goto out;
            }
            break;
        case OPT_TIMEOUT_MS:
        case OPT_MEMORY_MB:
        case OPT_CONCURRENCY:
        case OPT_IDLE_TIMEOUT_S: {
            /* The body's member and the option, by option. */
            static const char *const names[][2] = {
                [OPT_TIMEOUT_MS - OPT_TIMEOUT_MS] = { "timeout_ms",
                                                      "--timeout-ms" },
                [OPT_MEMORY_MB -
                    OPT_TIMEOUT_MS] = { "memory_mb", "--memory-mb" },
                [OPT_CONCURRENCY -
                    OPT_TIMEOUT_MS] = { "concurrency", "--concurrency" },
                [OPT_IDLE_TIMEOUT_S -
                    OPT_TIMEOUT_MS] = { "idle_timeout_s", "--idle-timeout-s" },
            };
            const char *const *name = names[c - OPT_TIMEOUT_MS];
            if (number_arg(ctl, name[1], optarg, &n) != 0)
                goto out;
            json_object_set_new(c == OPT_IDLE_TIMEOUT_S ? body : limits,
                                name[0], json_integer(n));
            break;
        }
        case OPT_ISOLATION:
            json_object_set_new(body, "isolation", json_string(optarg));
            break;
        case OPT_NO_START:
            json_object_set_new(body, "start", json_false());
            break;
        case OPT_URL:
            url = optarg;
            break;
        case OPT_SHA256:
            sha256 = optarg;
            break;
        case WMCTL_OPT_HELP:
            rc = wmctl_usage_command(ctl);
            goto out;
        default:
            rc = wmctl_usage_error(ctl, "bad option");
            goto out;
        }
    }
    if (argc - optind > 1) {
        rc = wmctl_usage_error(ctl, "one FILE at most");
        goto out;
    }
    file = optind < argc ? argv[optind] : NULL;
    if (json_object_get(body, "topic") == NULL) {
        rc = wmctl_usage_error(ctl, "--topic is required");
        goto out;
    }
    if (mime == NULL)
        mime = mime_guess(file ? file : url ? url : "");
    if (mime == NULL) {
        rc = wmctl_usage_error(ctl,
                               "cannot tell the MIME type of %s: "
                               "give --mime-type",
                               file  ? file
                               : url ? url
                                     : "the code");
        goto out;
    }
    if ((rc = code_json(ctl, file, url, sha256, &code)) != 0)
        goto out;
    json_object_set_new(body, "mime_type", json_string(mime));
    json_object_set(body, "code", code);
    if (json_object_size(config))
        json_object_set(body, "config", config);
    if (json_object_size(tags))
        json_object_set(body, "tags", tags);
    if (json_object_size(limits))
        json_object_set(body, "limits", limits);
    rc = wmctl_call(ctl, "POST", "/v1/workers", NULL, body, &answer);
    if (rc == WMCTL_EXIT_OK)
        worker_print(ctl, answer, false);
out:
    json_decref(answer);
    json_decref(code);
    json_decref(limits);
    json_decref(tags);
    json_decref(config);
    json_decref(body);
    return rc;
}

/* ---- list, show, the status changes, delete -------------------------- */

int
cmd_list(struct wmctl *ctl, int argc, char **argv)
{
    static const char *const header[] = {
        "NAME",   "ID",    "TENANT",  "TOPIC",    "GROUP",
        "STATUS", "STATE", "VERSION", "RESTARTS",
    };
    static const char *const keys[] = {
        "name",   "id",    "tenant",  "topic",    "group",
        "status", "state", "version", "restarts",
    };
    json_t *answer, *w;
    size_t i;
    int rc = WMCTL_EXIT_OK;

    one_worker(ctl, argc, argv, 0, &rc);
    if (rc != WMCTL_EXIT_OK || optind != argc)
        return rc;
    if ((rc = wmctl_call(ctl, "GET", "/v1/workers", NULL, NULL, &answer)))
        return rc;
    if (ctl->json) {
        wmctl_json_print(answer);
        json_decref(answer);
        return rc;
    }
    struct table *t = table_new(9, header);
    json_array_foreach(json_object_get(answer, "workers"), i, w)
    {
        char *cells[9];
        for (size_t k = 0; k < 9; k++)
            cells[k] = wmctl_value_text(json_object_get(w, keys[k]));
        if (t)
            table_row_add(t, (const char *const *)cells);
        for (size_t k = 0; k < 9; k++)
            free(cells[k]);
    }
    if (t)
        table_print(t, stdout);
    table_free(t);
    json_decref(answer);
    return rc;
}

int
cmd_show(struct wmctl *ctl, int argc, char **argv)
{
    json_t *answer;
    int rc = WMCTL_EXIT_OK;
    const char *worker = one_worker(ctl, argc, argv, 1, &rc);

    if (worker == NULL)
        return rc;
    if ((rc = worker_call(ctl, "GET", worker, "", NULL, &answer)) == 0)
        worker_print(ctl, answer, true);
    json_decref(answer);
    return rc;
}

/* start, stop, suspend and resume: POST /v1/workers/{id}/<command>. */
int
cmd_status(struct wmctl *ctl, int argc, char **argv)
{
    char suffix[32];
    json_t *answer;
    int rc = WMCTL_EXIT_OK;
    const char *worker = one_worker(ctl, argc, argv, 1, &rc);

    if (worker == NULL)
        return rc;
    snprintf(suffix, sizeof suffix, "/%s", ctl->command);
    if ((rc = worker_call(ctl, "POST", worker, suffix, NULL, &answer)) == 0)
        worker_print(ctl, answer, false);
    json_decref(answer);
    return rc;
}

int
cmd_delete(struct wmctl *ctl, int argc, char **argv)
{
    int rc = WMCTL_EXIT_OK;
    const char *worker = one_worker(ctl, argc, argv, 1, &rc);

    if (worker == NULL)
        return rc;
    rc = worker_call(ctl, "DELETE", worker, "", NULL, NULL);
    if (rc == WMCTL_EXIT_OK && !ctl->json)
        printf("deleted %s\n", worker);
    return rc;
}

/* ---- code: reload, history, rollback ---------------------------------- */

int
cmd_reload(struct wmctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        { "url", required_argument, NULL, OPT_URL },
        { "sha256", required_argument, NULL, OPT_SHA256 },
        { "json", no_argument, NULL, WMCTL_OPT_JSON },
        { "help", no_argument, NULL, WMCTL_OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    const char *url = NULL, *sha256 = NULL;
    json_t *code = NULL, *answer = NULL;
    int c, rc;

    while ((c = wmctl_getopt(ctl, argc, argv, opts)) != -1) {
        if (c == OPT_URL)
            url = optarg;
        else if (c == OPT_SHA256)
            sha256 = optarg;
        else if (c == WMCTL_OPT_HELP)
            return wmctl_usage_command(ctl);
        else
            return wmctl_usage_error(ctl, "bad option");
    }
    if (argc - optind < 1 || argc - optind > 2)
        return wmctl_usage_error(ctl, "expected WORKER and FILE");
    rc = code_json(ctl, argc - optind == 2 ? argv[optind + 1] : NULL, url,
                   sha256, &code);
    if (rc != 0)
        return rc;
    json_t *body = json_pack("{s:o}", "code", code);
    rc = worker_call(ctl, "PUT", argv[optind], "/code", body, &answer);
    if (rc == WMCTL_EXIT_OK)
        worker_print(ctl, answer, false);
    json_decref(answer);
    json_decref(body);
    return rc;
}

int
cmd_history(struct wmctl *ctl, int argc, char **argv)
{
    static const char *const header[] = { "VERSION", "CREATED", "SHA256",
                                          "SIZE",    "SOURCE",  "ADDRESS" };
    json_t *answer, *v;
    size_t i;
    int rc = WMCTL_EXIT_OK;
    const char *worker = one_worker(ctl, argc, argv, 1, &rc);

    if (worker == NULL)
        return rc;
    if ((rc = worker_call(ctl, "GET", worker, "/history", NULL, &answer)))
        return rc;
    if (ctl->json) {
        wmctl_json_print(answer);
        json_decref(answer);
        return rc;
    }
    json_int_t current = json_integer_value(json_object_get(answer, "current"));
    struct table *t = table_new(6, header);
    json_array_foreach(json_object_get(answer, "versions"), i, v)
    {
        json_int_t version = json_integer_value(json_object_get(v, "version"));
        json_t *of = json_object_get(v, "rollback_of");
        char vtext[32], size[32], source[HISTORY_SOURCE_MAX];
        const char *address = json_string_value(json_object_get(v, "address"));
        const char *final_url =
            json_string_value(json_object_get(v, "final_url"));
        /* The current version is marked, as in git branch. */
        snprintf(vtext, sizeof vtext, "%s%lld", version == current ? "*" : "",
                 (long long)version);
        snprintf(size, sizeof size, "%lld",
                 (long long)json_integer_value(json_object_get(v, "size")));
        snprintf(source, sizeof source, "%s",
                 json_string_value(json_object_get(v, "source")));
        if (final_url)
            snprintf(source + strlen(source), sizeof source - strlen(source),
                     " -> %s", final_url);
        if (of)
            snprintf(source + strlen(source), sizeof source - strlen(source),
                     " (rollback to %lld)", (long long)json_integer_value(of));
        const char *cells[] = {
            vtext,
            json_string_value(json_object_get(v, "created_at")),
            json_string_value(json_object_get(v, "sha256")),
            size,
            source,
            address ? address : "-",
        };
        if (t)
            table_row_add(t, cells);
    }
    if (t)
        table_print(t, stdout);
    table_free(t);
    json_decref(answer);
    return rc;
}

int
cmd_rollback(struct wmctl *ctl, int argc, char **argv)
{
    json_t *answer = NULL;
    json_int_t version;
    int rc = WMCTL_EXIT_OK;
    const char *worker = one_worker(ctl, argc, argv, 2, &rc);

    if (worker == NULL)
        return rc;
    if (number_arg(ctl, "VERSION", argv[optind + 1], &version) != 0)
        return WMCTL_EXIT_USAGE;
    json_t *body = json_pack("{s:I}", "version", version);
    rc = worker_call(ctl, "POST", worker, "/rollback", body, &answer);
    if (rc == WMCTL_EXIT_OK)
        worker_print(ctl, answer, false);
    json_decref(answer);
    json_decref(body);
    return rc;
}

/* ---- tags -------------------------------------------------------------- */

int
cmd_tags(struct wmctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        { "json", no_argument, NULL, WMCTL_OPT_JSON },
        { "help", no_argument, NULL, WMCTL_OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    json_t *tags = NULL, *body = NULL, *answer = NULL;
    int c, rc;

    while ((c = wmctl_getopt(ctl, argc, argv, opts)) != -1)
        return c == WMCTL_OPT_HELP ? wmctl_usage_command(ctl)
                                   : wmctl_usage_error(ctl, "bad option");
    if (optind == argc)
        return wmctl_usage_error(ctl, "WORKER is required");
    if (argc - optind > 1) {
        tags = json_object();
        for (int i = optind + 1; i < argc; i++)
            if (wmctl_pair_set(tags, argv[i]) != 0) {
                json_decref(tags);
                return wmctl_usage_error(ctl, "%s: expected k=v", argv[i]);
            }
        body = json_pack("{s:o}", "tags", tags);
    }
    rc = worker_call(ctl, body ? "PUT" : "GET", argv[optind], "/tags", body,
                     &answer);
    if (rc == WMCTL_EXIT_OK) {
        if (ctl->json)
            wmctl_json_print(answer);
        else
            wmctl_object_print(json_object_get(answer, "tags"), NULL);
    }
    json_decref(answer);
    json_decref(body);
    return rc;
}
