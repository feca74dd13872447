/*
 * cmd_logs.c — wmctl logs WORKER [-f] [-n N]: a worker's recent log lines
 * (its hosts' stdout, stderr and workmanager.log(), and the daemon's lines
 * about it), from GET /v1/workers/{id}/logs; -f follows new lines as the
 * route's Server-Sent Events until SIGINT or SIGTERM, or until the worker
 * is deleted.
 *
 * A line prints as "<time> <source> <level>: <text>", or with --json as
 * the route's JSON object, one a line.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/sse.h"
#include "cli/wmctl.h"

static void
line_print(struct wmctl *ctl, const json_t *l)
{
    if (ctl->json) {
        char *text = json_dumps(l, JSON_COMPACT);
        if (text)
            printf("%s\n", text);
        free(text);
        return;
    }
    const char *at = json_string_value(json_object_get(l, "at"));
    const char *source = json_string_value(json_object_get(l, "source"));
    const char *level = json_string_value(json_object_get(l, "level"));
    const char *text = json_string_value(json_object_get(l, "text"));
    printf("%s %s %s: %s\n", at ? at : "-", source ? source : "-",
           level ? level : "-", text ? text : "");
}

static int
on_line(const char *data, size_t len, void *arg)
{
    json_t *l = json_loadb(data, len, 0, NULL);

    if (l)
        line_print(arg, l);
    fflush(stdout);
    json_decref(l);
    return 0;
}

int
cmd_logs(struct wmctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        { "follow", no_argument, NULL, 'f' },
        { "lines", required_argument, NULL, 'n' },
        { "json", no_argument, NULL, WMCTL_OPT_JSON },
        { "help", no_argument, NULL, WMCTL_OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    bool following = false;
    unsigned long n = 100;
    char suffix[64], *end;
    json_t *answer = NULL, *l;
    size_t i;
    int c, rc;

    while ((c = wmctl_getopt_short(ctl, argc, argv, "fn:h", opts)) != -1) {
        switch (c) {
        case 'f':
            following = true;
            break;
        case 'n':
            errno = 0;
            n = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || *optarg == '-')
                return wmctl_usage_error(ctl,
                                         "-n %s: expected a non-negative "
                                         "integer",
                                         optarg);
            break;
        case WMCTL_OPT_HELP:
            return wmctl_usage_command(ctl);
        default:
            return wmctl_usage_error(ctl, "bad option");
        }
    }
    if (argc - optind != 1)
        return wmctl_usage_error(ctl, "expected one WORKER");
    snprintf(suffix, sizeof suffix, "/logs?n=%lu%s", n,
             following ? "&follow=1" : "");
    char *path = wmctl_path("/v1/workers/", argv[optind], suffix);
    if (path == NULL) {
        fprintf(stderr, "wmctl: out of memory\n");
        return WMCTL_EXIT_FAILED;
    }
    if (following) {
        rc = sse_follow(ctl, path, on_line, ctl);
        free(path);
        return rc;
    }
    rc = wmctl_call(ctl, "GET", path, NULL, NULL, &answer);
    free(path);
    if (rc != WMCTL_EXIT_OK)
        return rc;
    json_array_foreach(json_object_get(answer, "lines"), i, l)
        line_print(ctl, l);
    json_decref(answer);
    return rc;
}
