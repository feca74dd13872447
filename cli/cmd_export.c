/*
 * cmd_export.c — wmctl export FILE and wmctl import FILE [--replace]
 * (issue 23): a whole store into one archive (GET /v1/export) and back
 * into another daemon's store (POST /v1/import), to move a single
 * machine's file store into NATS or back.  The archive is JSON lines;
 * workmanagerd(8) describes it.  FILE "-" is standard output / input.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cli/http.h"
#include "cli/wmctl.h"

static const struct option export_options[] = {
    { "json", no_argument, NULL, WMCTL_OPT_JSON },
    { "help", no_argument, NULL, WMCTL_OPT_HELP },
    { "replace", no_argument, NULL, 'r' },
    { NULL, 0, NULL, 0 },
};

/* The command's one argument, FILE; with *replace for import. */
static int
file_argument(struct wmctl *ctl, int argc, char **argv, bool *replace,
              const char **file, bool *done)
{
    int c;

    *done = true;
    while ((c = wmctl_getopt(ctl, argc, argv, export_options)) != -1) {
        if (c == WMCTL_OPT_HELP)
            return wmctl_usage_command(ctl);
        if (c == 'r' && replace)
            *replace = true;
        else
            return wmctl_usage_error(ctl, "bad option");
    }
    if (optind + 1 != argc)
        return wmctl_usage_error(ctl, "one FILE is needed (- for %s)",
                                 replace ? "standard input"
                                         : "standard output");
    *file = argv[optind];
    *done = false;
    return 0;
}

int
cmd_export(struct wmctl *ctl, int argc, char **argv)
{
    struct http_reply r;
    char err[CURL_ERROR_SIZE + 64];
    const char *file;
    bool done;
    int rc = file_argument(ctl, argc, argv, NULL, &file, &done);

    if (done)
        return rc;
    if (http_client_request(ctl->http, "GET", "/v1/export", NULL, NULL, 0, &r,
                            err, sizeof err) != 0)
        return wmctl_unreachable(ctl, err);
    if (r.status != 200) {
        wmctl_error_print(ctl, r.status, r.body);
        http_reply_free(&r);
        return WMCTL_EXIT_FAILED;
    }
    bool out = strcmp(file, "-") == 0;
    FILE *f = out ? stdout : fopen(file, "wx");
    if (f == NULL) {
        fprintf(stderr, "wmctl: %s: %s%s\n", file, strerror(errno),
                errno == EEXIST ? " (an export never overwrites a file)" : "");
        http_reply_free(&r);
        return WMCTL_EXIT_FAILED;
    }
    bool ok = fwrite(r.body, 1, r.len, f) == r.len;
    if ((out ? fflush(f) : fclose(f)) != 0)
        ok = false;
    if (!ok) {
        fprintf(stderr, "wmctl: %s: %s\n", file, strerror(errno));
        rc = WMCTL_EXIT_FAILED;
    } else if (!out) {
        fprintf(stderr, "wmctl: exported %zu bytes to %s\n", r.len, file);
    }
    http_reply_free(&r);
    return rc;
}

int
cmd_import(struct wmctl *ctl, int argc, char **argv)
{
    const char *file;
    char *data = NULL;
    size_t len = 0;
    bool done, replace = false;
    json_t *answer = NULL;
    int rc = file_argument(ctl, argc, argv, &replace, &file, &done);

    if (done)
        return rc;
    if (wmctl_file_read(strcmp(file, "-") == 0 ? "/dev/stdin" : file, &data,
                        &len) != 0) {
        fprintf(stderr, "wmctl: %s: %s\n", file, strerror(errno));
        return WMCTL_EXIT_FAILED;
    }
    rc = wmctl_call_raw(ctl, "POST",
                        replace ? "/v1/import?replace=true" : "/v1/import",
                        "application/x-ndjson", data, len, NULL, &answer);
    if (rc == WMCTL_EXIT_OK) {
        if (ctl->json)
            wmctl_json_print(answer);
        else
            wmctl_object_print(json_object_get(answer, "imported"), NULL);
    }
    json_decref(answer);
    free(data);
    return rc;
}
