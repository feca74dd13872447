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
 *
 * The line is formatted by hand into a buffer kept between calls: every
 * invoke is audited, and building it as a jansson tree, dumping and
 * freeing it cost about a tenth of the master's CPU per invoke (issue 24).
 * The bytes are the ones json_dumps(JSON_COMPACT) wrote (members in the
 * same order, the same escapes: quote, backslash, \b \f \n \r \t,
 * other C0 controls as \u00XX), except that a string that is not UTF-8
 * (a path percent-decoded to bytes that are not) now has each bad byte
 * written as U+FFFD where jansson refused it and the line was lost.
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

#include "lib/timestamp.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/log.h"

static int audit_fd = -1;
static char audit_path[4096];
/* The line being formatted, kept between lines (no allocation per line). */
static char *line_buf;
static size_t line_cap;

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
    free(line_buf);
    line_buf = NULL;
    line_cap = 0;
}

/* The length of the well-formed UTF-8 sequence at s[0, n) (RFC 3629: no
 * overlong form, no surrogate, nothing past U+10FFFF), 0 when there is
 * none. */
static size_t
utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t len;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3;
        lo = s[0] == 0xe0 ? 0xa0 : 0x80;
        hi = s[0] == 0xed ? 0x9f : 0xbf;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        lo = s[0] == 0xf0 ? 0x90 : 0x80;
        hi = s[0] == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

/* "name":"value" (a comma first unless first) at o, escaped as jansson
 * does; o has room for 6 bytes per byte of value plus the name and 8. */
static char *
put_member(char *o, const char *name, const char *value, bool first)
{
    static const char hex[] = "0123456789ABCDEF";
    static const char short_escape[0x20] = {
        ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't',
    };
    const unsigned char *v = (const unsigned char *)value;
    size_t n = strlen(value);

    if (!first)
        *o++ = ',';
    *o++ = '"';
    o = stpcpy(o, name);
    *o++ = '"';
    *o++ = ':';
    *o++ = '"';
    for (size_t i = 0; i < n;) {
        unsigned char c = v[i];
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
            i++;
        } else if (c < 0x20) {
            /* \b \f \n \r \t by their letters, the other controls as
             * \u00XX (jansson's upper-case hex). */
            *o++ = '\\';
            if (short_escape[c]) {
                *o++ = short_escape[c];
            } else {
                o = stpcpy(o, "u00");
                *o++ = hex[c >> 4];
                *o++ = hex[c & 15];
            }
            i++;
        } else {
            size_t k = utf8_seq(v + i, n - i);
            if (k == 0) {
                o = stpcpy(o, "\xef\xbf\xbd"); /* U+FFFD */
                i++;
            } else {
                memcpy(o, v + i, k);
                o += k;
                i += k;
            }
        }
    }
    *o++ = '"';
    return o;
}

void
audit_write(struct daemon *d, const char *peer, const char *principal,
            const char *method, const char *path, const char *worker,
            int status, const char *code)
{
    char at[TIMESTAMP_SIZE];
    const char *names[] = { "peer",      "method", "path",
                            "principal", "worker", "code" };
    const char *values[] = { peer, method, path, principal, worker, code };
    size_t need = 64 + TIMESTAMP_SIZE;

    if (!audited(d, method, path, status))
        return;
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        if (values[i])
            need += strlen(names[i]) + 8 + 6 * strlen(values[i]);
    if (need > line_cap) {
        char *b = realloc(line_buf, need);
        if (b == NULL) {
            log_warning("audit: out of memory: a line is lost");
            return;
        }
        line_buf = b;
        line_cap = need;
    }
    timestamp_format(timestamp_now_ms(), at);
    char *o = line_buf;
    *o++ = '{';
    o = put_member(o, "at", at, true);
    for (size_t i = 0; i < 3; i++)
        o = put_member(o, names[i], values[i] ? values[i] : "", false);
    /* "status": a number, then the members present only when set. */
    o = stpcpy(o, ",\"status\":");
    char num[16], *q = num + sizeof num;
    unsigned u = status < 0 ? 0u - (unsigned)status : (unsigned)status;
    do {
        *--q = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (status < 0)
        *--q = '-';
    memcpy(o, q, (size_t)(num + sizeof num - q));
    o += num + sizeof num - q;
    for (size_t i = 3; i < 5; i++)
        if (values[i] && *values[i])
            o = put_member(o, names[i], values[i], false);
    if (code)
        o = put_member(o, "code", code, false);
    *o++ = '}';
    *o++ = '\n';
    size_t n = (size_t)(o - line_buf);
    if (audit_fd >= 0 && write(audit_fd, line_buf, n) != (ssize_t)n)
        log_warning("audit: write failed: %s", strerror(errno));
}
