/*
 * audit.c — the audit trail (see audit.h).
 *
 * One write(2) per line on an O_APPEND descriptor, so lines never
 * interleave; no fsync: the trail is a record of intent and results, and
 * the store's own writes carry durability.  A failed write is logged, never
 * fatal: the API keeps answering.
 *
 * Rotation is logrotate's (rename, then SIGHUP: main.c calls
 * audit_reopen()): the file is opened again by its path, and the new
 * descriptor replaces the old one only once it is open, so that a reopen
 * that fails keeps writing where the trail was.  Publishes are the one
 * mutation clients make at a high rate: audit_publishes says which of them
 * are written (none, errors: status 400 and above, all).
 */
#include "config.h"

#include "master/core/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/timestamp.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/log.h"

static int audit_fd = -1;
static char audit_path[4096];

int
audit_open(const char *state_dir, char *err, size_t errlen)
{
    snprintf(audit_path, sizeof audit_path, "%s/audit.log", state_dir);
    audit_fd =
        open(audit_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (audit_fd < 0) {
        snprintf(err, errlen, "audit log %s: %s", audit_path, strerror(errno));
        return -1;
    }
    return 0;
}

int
audit_reopen(char *err, size_t errlen)
{
    int fd;

    if (audit_fd < 0)
        return 0; /* not open yet: audit_open() will */
    fd = open(audit_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0) {
        snprintf(err, errlen,
                 "audit log %s: cannot reopen: %s; still writing to the "
                 "file open before",
                 audit_path, strerror(errno));
        return -1;
    }
    (void)close(audit_fd);
    audit_fd = fd;
    return 0;
}

/* A publish (POST /v1/topics/T/events) is written only at the level of
 * audit_publishes; every other mutation always is. */
static bool
audited(const struct daemon *d, const char *method, const char *path,
        int status)
{
    static const char topics[] = "/v1/topics/";

    if (strcmp(method, "POST") != 0 ||
        strncmp(path, topics, sizeof topics - 1) != 0)
        return true;
    switch (d->conf->audit_publishes) {
    case CONF_AUDIT_PUBLISHES_NONE:
        return false;
    case CONF_AUDIT_PUBLISHES_ERRORS:
        return status >= 400;
    default:
        return true;
    }
}

void
audit_close(void)
{
    if (audit_fd >= 0)
        close(audit_fd);
    audit_fd = -1;
}

void
audit_write(struct daemon *d, const char *peer, const char *principal,
            const char *method, const char *path, const char *worker,
            int status, const char *code)
{
    char at[TIMESTAMP_SIZE];

    if (!audited(d, method, path, status))
        return;
    timestamp_format(timestamp_now_ms(), at);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i}", "at", at, "peer", peer,
                          "method", method, "path", path, "status", status);
    if (j == NULL)
        return;
    if (principal && *principal)
        json_object_set_new(j, "principal", json_string(principal));
    if (worker && *worker)
        json_object_set_new(j, "worker", json_string(worker));
    if (code)
        json_object_set_new(j, "code", json_string(code));
    char *line = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (line == NULL)
        return;
    size_t n = strlen(line);
    line[n] = '\n'; /* json_dumps leaves room: replace the NUL */
    if (audit_fd >= 0 && write(audit_fd, line, n + 1) != (ssize_t)(n + 1))
        log_warning("audit: write failed: %s", strerror(errno));
    free(line);
}
