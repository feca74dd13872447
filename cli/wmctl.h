/*
 * wmctl.h — what wmctl's command files share: the run's settings, the exit
 * codes, the calls to the daemon and the readable output (wmctl.c).
 */
#ifndef WMCTL_H
#define WMCTL_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "cli/http.h"

/* wmctl(1)'s exit codes. */
enum wmctl_exit {
    WMCTL_EXIT_OK = 0,
    WMCTL_EXIT_FAILED = 1,      /* the daemon answered an error */
    WMCTL_EXIT_USAGE = 2,       /* a bad command, option or argument */
    WMCTL_EXIT_UNREACHABLE = 3, /* the daemon could not be reached */
};

struct wmctl {
    struct http_client *http;
    bool json; /* --json: the daemon's answers as they are */
    const char *command;
};

/* One row of the command table (wmctl.c): run gets the command's own
 * argv (argv[0] is its name) and returns an exit code. */
struct wmctl_command {
    const char *name;
    const char *synopsis;
    int (*run)(struct wmctl *ctl, int argc, char **argv);
    bool local; /* needs no daemon: run without a connection (pack) */
};

/* Every command's option table ends with these two and the zero row. */
#define WMCTL_OPT_JSON 0x100
#define WMCTL_OPT_HELP 'h'

/* getopt_long over a command's argv, handling --json itself.  Returns the
 * next option, -1 at the end, '?' after a bad option (reported), 'h' for
 * --help. */
int wmctl_getopt(struct wmctl *ctl, int argc, char **argv,
                 const struct option *opts);
/* As wmctl_getopt, with the short options of shortopts (getopt's form,
 * "h" among them). */
int wmctl_getopt_short(struct wmctl *ctl, int argc, char **argv,
                       const char *shortopts, const struct option *opts);

/* Prints "wmctl: <message>" and the command's synopsis on stderr (with
 * --json, an error object of code "usage"); returns WMCTL_EXIT_USAGE. */
int wmctl_usage_error(struct wmctl *ctl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints the command's synopsis on stdout; returns WMCTL_EXIT_OK. */
int wmctl_usage_command(struct wmctl *ctl);

/* Sends method path with body (sent as JSON with content_type, or
 * application/json when NULL; NULL: no body).  On a 2xx answer, *answer
 * (when answer is not NULL) is the parsed JSON answer (NULL for an empty
 * one) and WMCTL_EXIT_OK is returned; otherwise the error is printed and
 * its exit code returned. */
int wmctl_call(struct wmctl *ctl, const char *method, const char *path,
               const char *content_type, json_t *body, json_t **answer);

/* As wmctl_call, with a body already serialized (len bytes). */
int wmctl_call_raw(struct wmctl *ctl, const char *method, const char *path,
                   const char *content_type, const char *body, size_t len,
                   long *status, json_t **answer);

/* Prints the error of a non-2xx answer on stderr: "wmctl: <code>:
 * <message>" and a worker error's traceback when it has one; with --json
 * the answer's error object as JSON, {"error": {...}, "status": N}. */
void wmctl_error_print(struct wmctl *ctl, long status, const char *body);

/* Prints "wmctl: cannot reach <target>: <reason>" (with --json, an error
 * object of code "unreachable"); returns WMCTL_EXIT_UNREACHABLE. */
int wmctl_unreachable(struct wmctl *ctl, const char *reason);

/* "<prefix><escaped seg><suffix>" (free() it); NULL when out of memory. */
char *wmctl_path(const char *prefix, const char *seg, const char *suffix);

/* Prints j as JSON, two spaces an indent, and a newline. */
void wmctl_json_print(const json_t *j);

/* Prints obj's members as "key: value" lines; only those named in keys
 * (a NULL-terminated list) when keys is not NULL. */
void wmctl_object_print(const json_t *obj, const char *const *keys);

/* The readable text of a JSON value (free() it): strings as they are,
 * null as "-", objects as "k=v, k=v", arrays as "a, b". */
char *wmctl_value_text(const json_t *v);

/* Sets "k=v" (text) as the string member k of obj; -1 when text has no
 * '=' or an empty key. */
int wmctl_pair_set(json_t *obj, const char *text);

/* Reads a whole file (NUL-terminated; len excludes the NUL).  -1 with
 * errno set on failure. */
int wmctl_file_read(const char *path, char **data, size_t *len);

/* Parses the value of option opt as JSON (any type); prints a usage error
 * and returns -1 when it is not JSON. */
int wmctl_json_parse(struct wmctl *ctl, const char *opt, const char *text,
                     json_t **out);

/* The commands (cmd_workers.c, cmd_events.c). */
int cmd_create(struct wmctl *ctl, int argc, char **argv);
int cmd_list(struct wmctl *ctl, int argc, char **argv);
int cmd_show(struct wmctl *ctl, int argc, char **argv);
/* cmd_logs.c */
int cmd_logs(struct wmctl *ctl, int argc, char **argv);
int cmd_status(struct wmctl *ctl, int argc, char **argv);
int cmd_delete(struct wmctl *ctl, int argc, char **argv);
int cmd_reload(struct wmctl *ctl, int argc, char **argv);
int cmd_history(struct wmctl *ctl, int argc, char **argv);
int cmd_rollback(struct wmctl *ctl, int argc, char **argv);
int cmd_tags(struct wmctl *ctl, int argc, char **argv);
int cmd_invoke(struct wmctl *ctl, int argc, char **argv);
int cmd_publish(struct wmctl *ctl, int argc, char **argv);
int cmd_subscribe(struct wmctl *ctl, int argc, char **argv);
/* cmd_tenants.c */
int cmd_tenant(struct wmctl *ctl, int argc, char **argv);
int cmd_token(struct wmctl *ctl, int argc, char **argv);
/* cmd_pack.c: a local command. */
int cmd_pack(struct wmctl *ctl, int argc, char **argv);
/* cmd_export.c */
int cmd_export(struct wmctl *ctl, int argc, char **argv);
int cmd_import(struct wmctl *ctl, int argc, char **argv);

#endif
