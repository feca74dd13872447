/*
 * audit.c — the audit trail (see audit.h).
 *
 * One write(2) per line on an O_APPEND descriptor, so lines never
 * interleave; no fsync: the trail is a record of intent and results, and
 * the store's own writes carry durability.  A failed write is logged, never
 * fatal: the API keeps answering.
 */
#include "config.h"

#include "master/core/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/timestamp.h"
#include "master/core/log.h"

static int audit_fd = -1;

int
audit_open(const char *state_dir, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/audit.log", state_dir);
    audit_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (audit_fd < 0) {
        snprintf(err, errlen, "audit log %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

void
audit_close(void)
{
    if (audit_fd >= 0)
        close(audit_fd);
    audit_fd = -1;
}

void
audit_write(struct daemon *d, const char *peer, const char *method,
            const char *path, const char *worker, int status, const char *code)
{
    (void)d;
    char at[TIMESTAMP_SIZE];
    timestamp_format(timestamp_now_ms(), at);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i}", "at", at, "peer", peer,
                          "method", method, "path", path, "status", status);
    if (j == NULL)
        return;
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
