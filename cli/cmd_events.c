/*
 * cmd_events.c — wmctl's event commands: invoke (one CloudEvent to one
 * worker), publish (to a topic) and subscribe (a topic's Server-Sent
 * Events stream, DESIGN §8).
 *
 * invoke and publish build a structured CloudEvent from their options:
 * specversion 1.0, a random UUID as id (publish --id replaces it), source
 * "wmctl", the type wmctl.invoke or wmctl.publish unless --type is given,
 * --ext pairs as string extensions and --data as JSON data.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/sse.h"
#include "cli/wmctl.h"
#include "lib/uuid.h"

enum {
    OPT_TYPE = 0x200,
    OPT_ID,
    OPT_DATA,
    OPT_DATA_FILE,
    OPT_EXT,
    OPT_TENANT,
    OPT_FILE,
    OPT_COUNT,
};

/* The options of invoke, publish and subscribe, as given. */
struct event_opts {
    const char *type;
    const char *id;
    const char *data;
    const char *data_file;
    const char *tenant;
    const char *file;
    const char *count;
    json_t *ext;           /* the --ext pairs */
    bool any_event_option; /* one of --type --id --data* --ext */
    bool help;             /* --help: the synopsis is printed */
};

/* Parses a command's options into *eo; leaves optind at the first
 * argument.  Returns 0, or an exit code (reported). */
static int
event_opts_parse(struct wmctl *ctl, int argc, char **argv,
                 const struct option *opts, struct event_opts *eo)
{
    int c;

    memset(eo, 0, sizeof *eo);
    eo->ext = json_object();
    while ((c = wmctl_getopt(ctl, argc, argv, opts)) != -1) {
        switch (c) {
        case OPT_TYPE:
            eo->type = optarg;
            break;
        case OPT_ID:
            eo->id = optarg;
            break;
        case OPT_DATA:
            eo->data = optarg;
            break;
        case OPT_DATA_FILE:
            eo->data_file = optarg;
            break;
        case OPT_EXT:
            if (wmctl_pair_set(eo->ext, optarg) != 0)
                return wmctl_usage_error(ctl, "--ext %s: expected k=v", optarg);
            break;
        case OPT_TENANT:
            eo->tenant = optarg;
            break;
        case OPT_FILE:
            eo->file = optarg;
            break;
        case OPT_COUNT:
            eo->count = optarg;
            break;
        case WMCTL_OPT_HELP:
            eo->help = true;
            return wmctl_usage_command(ctl);
        default:
            return wmctl_usage_error(ctl, "bad option");
        }
        if (c == OPT_TYPE || c == OPT_ID || c == OPT_DATA ||
            c == OPT_DATA_FILE || c == OPT_EXT)
            eo->any_event_option = true;
    }
    return 0;
}

/* The data of --data or --data-file, parsed as JSON (NULL: none). */
static int
event_data(struct wmctl *ctl, const struct event_opts *eo, json_t **data)
{
    char *buf;
    size_t len;
    int rc;

    *data = NULL;
    if (eo->data && eo->data_file)
        return wmctl_usage_error(ctl,
                                 "--data and --data-file exclude each other");
    if (eo->data)
        return wmctl_json_parse(ctl, "--data", eo->data, data)
                   ? WMCTL_EXIT_USAGE
                   : 0;
    if (eo->data_file == NULL)
        return 0;
    if (wmctl_file_read(eo->data_file, &buf, &len) != 0)
        return wmctl_usage_error(ctl, "--data-file %s: %s", eo->data_file,
                                 strerror(errno));
    rc = wmctl_json_parse(ctl, eo->data_file, buf, data) ? WMCTL_EXIT_USAGE : 0;
    free(buf);
    return rc;
}

/* The structured CloudEvent of the options (see the file comment). */
static int
event_build(struct wmctl *ctl, const struct event_opts *eo,
            const char *default_type, json_t **event)
{
    char uuid[UUID_SIZE];
    json_t *data;
    int rc = event_data(ctl, eo, &data);

    *event = NULL;
    if (rc != 0)
        return rc;
    if (eo->id == NULL && uuid_new(uuid) != 0) {
        json_decref(data);
        fprintf(stderr, "wmctl: no random bytes for an event id: %s\n",
                strerror(errno));
        return WMCTL_EXIT_FAILED;
    }
    *event = json_pack("{s:s, s:s, s:s, s:s}", "specversion", "1.0", "id",
                       eo->id ? eo->id : uuid, "source", "wmctl", "type",
                       eo->type ? eo->type : default_type);
    if (*event == NULL) {
        json_decref(data);
        fprintf(stderr, "wmctl: out of memory\n");
        return WMCTL_EXIT_FAILED;
    }
    /* Extensions first: they may not replace the attributes above. */
    json_object_update_missing(*event, eo->ext);
    if (data) {
        json_object_set_new(*event, "datacontenttype",
                            json_string("application/json"));
        json_object_set_new(*event, "data", data);
    }
    return 0;
}

/* ---- invoke ------------------------------------------------------------ */

int
cmd_invoke(struct wmctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        { "type", required_argument, NULL, OPT_TYPE },
        { "data", required_argument, NULL, OPT_DATA },
        { "data-file", required_argument, NULL, OPT_DATA_FILE },
        { "ext", required_argument, NULL, OPT_EXT },
        { "json", no_argument, NULL, WMCTL_OPT_JSON },
        { "help", no_argument, NULL, WMCTL_OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    struct event_opts eo;
    json_t *event = NULL, *answer = NULL;
    char *path = NULL;
    int rc = event_opts_parse(ctl, argc, argv, opts, &eo);

    if (rc != 0 || eo.help)
        goto out;
    if (argc - optind != 1) {
        rc = wmctl_usage_error(ctl, "expected one WORKER");
        goto out;
    }
    if ((rc = event_build(ctl, &eo, "wmctl.invoke", &event)) != 0)
        goto out;
    path = wmctl_path("/v1/workers/", argv[optind], "/invoke");
    if (path == NULL) {
        rc = WMCTL_EXIT_FAILED;
        goto out;
    }
    rc = wmctl_call(ctl, "POST", path, "application/cloudevents+json", event,
                    &answer);
    /* The output events are JSON whatever --json says; 204 has none. */
    if (rc == WMCTL_EXIT_OK && answer)
        wmctl_json_print(answer);
out:
    free(path);
    json_decref(answer);
    json_decref(event);
    json_decref(eo.ext);
    return rc;
}

/* ---- publish ----------------------------------------------------------- */

/* /v1/topics/{topic}/events[?tenant=T] (free() it). */
static char *
topic_path(const char *topic, const char *tenant)
{
    char *base = wmctl_path("/v1/topics/", topic, "/events");
    if (base == NULL || tenant == NULL)
        return base;
    char *t = http_escape(tenant);
    size_t cap = strlen(base) + (t ? strlen(t) : 0) + 16;
    char *path = t ? malloc(cap) : NULL;
    if (path)
        snprintf(path, cap, "%s?tenant=%s", base, t);
    free(t);
    free(base);
    return path;
}

int
cmd_publish(struct wmctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        { "tenant", required_argument, NULL, OPT_TENANT },
        { "type", required_argument, NULL, OPT_TYPE },
        { "id", required_argument, NULL, OPT_ID },
        { "data", required_argument, NULL, OPT_DATA },
        { "data-file", required_argument, NULL, OPT_DATA_FILE },
        { "ext", required_argument, NULL, OPT_EXT },
        { "file", required_argument, NULL, OPT_FILE },
        { "json", no_argument, NULL, WMCTL_OPT_JSON },
        { "help", no_argument, NULL, WMCTL_OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    struct event_opts eo;
    json_t *event = NULL, *answer = NULL, *id;
    char *path = NULL, *text = NULL;
    const char *content_type = "application/cloudevents+json";
    size_t len = 0, i;
    int rc = event_opts_parse(ctl, argc, argv, opts, &eo);

    if (rc != 0 || eo.help)
        goto out;
    if (argc - optind != 1) {
        rc = wmctl_usage_error(ctl, "expected one TOPIC");
        goto out;
    }
    if (eo.file && eo.any_event_option) {
        rc = wmctl_usage_error(ctl, "--file takes the events whole: no "
                                    "--type, --id, --data or --ext");
        goto out;
    }
    if (eo.file) {
        /* Sent as written; parsed only to choose the mode. */
        if (wmctl_file_read(eo.file, &text, &len) != 0) {
            rc = wmctl_usage_error(ctl, "--file %s: %s", eo.file,
                                   strerror(errno));
            goto out;
        }
        if ((rc = wmctl_json_parse(ctl, eo.file, text, &event)) != 0) {
            rc = WMCTL_EXIT_USAGE;
            goto out;
        }
        if (json_is_array(event)) {
            content_type = "application/cloudevents-batch+json";
        } else if (!json_is_object(event)) {
            rc = wmctl_usage_error(ctl,
                                   "--file %s: expected a JSON object "
                                   "or array",
                                   eo.file);
            goto out;
        }
    } else {
        if ((rc = event_build(ctl, &eo, "wmctl.publish", &event)) != 0)
            goto out;
        text = json_dumps(event, JSON_COMPACT);
        len = text ? strlen(text) : 0;
    }
    path = topic_path(argv[optind], eo.tenant);
    if (path == NULL || text == NULL) {
        fprintf(stderr, "wmctl: out of memory\n");
        rc = WMCTL_EXIT_FAILED;
        goto out;
    }
    rc = wmctl_call_raw(ctl, "POST", path, content_type, text, len, NULL,
                        &answer);
    if (rc == WMCTL_EXIT_OK && ctl->json) {
        wmctl_json_print(answer);
    } else if (rc == WMCTL_EXIT_OK) {
        json_array_foreach(json_object_get(answer, "ids"), i, id)
            printf("%s\n", json_string_value(id));
    }
out:
    free(text);
    free(path);
    json_decref(answer);
    json_decref(event);
    json_decref(eo.ext);
    return rc;
}

/* ---- subscribe --------------------------------------------------------- */

/* What subscribe counts of the stream. */
struct counted {
    unsigned long seen, max; /* events printed; 0: no limit */
};

/* Prints one event's data as one JSON line.  Returns -1 once enough events
 * are printed. */
static int
on_event(const char *data, size_t len, void *arg)
{
    struct counted *c = arg;
    json_t *j = json_loadb(data, len, JSON_DECODE_ANY, NULL);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

    if (text)
        printf("%s\n", text);
    else
        printf("%.*s\n", (int)len, data);
    fflush(stdout);
    free(text);
    json_decref(j);
    c->seen++;
    return c->max && c->seen >= c->max ? -1 : 0;
}

int
cmd_subscribe(struct wmctl *ctl, int argc, char **argv)
{
    static const struct option opts[] = {
        { "tenant", required_argument, NULL, OPT_TENANT },
        { "count", required_argument, NULL, OPT_COUNT },
        { "json", no_argument, NULL, WMCTL_OPT_JSON },
        { "help", no_argument, NULL, WMCTL_OPT_HELP },
        { NULL, 0, NULL, 0 },
    };
    struct event_opts eo;
    struct counted counted = { 0 };
    char *path = NULL;
    int rc = event_opts_parse(ctl, argc, argv, opts, &eo);

    if (rc != 0 || eo.help)
        goto out;
    if (argc - optind != 1) {
        rc = wmctl_usage_error(ctl, "expected one TOPIC");
        goto out;
    }
    if (eo.count) {
        char *end;
        errno = 0;
        counted.max = strtoul(eo.count, &end, 10);
        if (errno || end == eo.count || *end || counted.max == 0 ||
            *eo.count == '-') {
            rc = wmctl_usage_error(ctl,
                                   "--count %s: expected a positive "
                                   "integer",
                                   eo.count);
            goto out;
        }
    }
    if ((path = topic_path(argv[optind], eo.tenant)) == NULL) {
        rc = WMCTL_EXIT_FAILED;
        goto out;
    }
    rc = sse_follow(ctl, path, on_event, &counted);
out:
    free(path);
    json_decref(eo.ext);
    return rc;
}
