/*
 * test_audit.c — unit tests of master/core/audit.c's lines: each is the
 * same bytes as the jansson tree it replaced would have dumped (the
 * reference below builds that tree: members in order, principal and
 * worker only when set, the escapes of quotes, backslashes and controls,
 * UTF-8 as it is), a path that is not UTF-8 is written with U+FFFD where
 * jansson refused it (the line was lost), a long path grows the buffer,
 * and publishes follow audit_publishes.
 *
 * The log goes to a file in a temporary directory that each test reads
 * back; the exit status is the verdict.
 */
#include "config.h"

#include "master/core/audit.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "tests/unit/check.h"

static char dir[] = "/tmp/wm-test-audit-XXXXXX";
static char file[512];
static struct conf conf;
static struct daemon d = { .conf = &conf };

/* The audit log's lines so far (static, NUL-terminated); emptied. */
static const char *
take(void)
{
    static char buf[65536];
    FILE *f = fopen(file, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    if (truncate(file, 0) != 0)
        perror("truncate");
    return buf;
}

/* The line as the jansson tree of the former audit_write() dumped it, but
 * for "at" (the caller's); NULL where jansson refused a string. */
static char *
reference(const char *at, const char *peer, const char *principal,
          const char *method, const char *path, const char *worker, int status,
          const char *code)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i}", "at", at, "peer", peer,
                          "method", method, "path", path, "status", status);
    if (j == NULL)
        return NULL;
    if (principal && *principal)
        json_object_set_new(j, "principal", json_string(principal));
    if (worker && *worker)
        json_object_set_new(j, "worker", json_string(worker));
    if (code)
        json_object_set_new(j, "code", json_string(code));
    char *line = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return line;
}

/* Writes one line and checks it against the reference. */
static void
same_as_jansson(const char *peer, const char *principal, const char *method,
                const char *path, const char *worker, int status,
                const char *code)
{
    audit_write(&d, peer, principal, method, path, worker, status, code);
    const char *got = take();
    /* "at" is the writer's clock: take it from the line. */
    char at[64] = "";
    const char *a = strstr(got, "{\"at\":\"");
    if (a) {
        size_t n = strcspn(a + 7, "\"");
        if (n < sizeof at) {
            memcpy(at, a + 7, n);
            at[n] = '\0';
        }
    }
    char *want =
        reference(at, peer, principal, method, path, worker, status, code);
    REQUIRE(want != NULL);
    size_t wl = strlen(want);
    CHECK(strlen(got) == wl + 1 && got[wl] == '\n');
    CHECK(strncmp(got, want, wl) == 0);
    if (strncmp(got, want, wl) != 0)
        fprintf(stderr, "  got  %s  want %s\n", got, want);
    free(want);
}

static void
test_plain_line(void)
{
    same_as_jansson("tcp 127.0.0.1:40000", "admin", "POST",
                    "/v1/workers/0a1b/invoke", "w-1", 200, NULL);
    same_as_jansson("uid=0 gid=0 pid=1", NULL, "DELETE", "/v1/workers/x", NULL,
                    204, NULL);
    same_as_jansson("uid=0 gid=0 pid=1", "", "PUT", "/v1/tenants/t", "", 409,
                    "conflict");
    same_as_jansson("p", "a", "POST", "/", "w", -1, "");
}

static void
test_escapes(void)
{
    same_as_jansson(
        "p \"q\"", "a\\b", "POST",
        "/v1/\"x\"\\y\x01\x1f\b\f\n\r\t\x7f/caf\xc3\xa9/\xf0\x9f\x98\x80",
        "w\tz", 400, "bad \"code\"");
}

static void
test_long_path_grows(void)
{
    static char path[9000];
    memset(path, 1, sizeof path - 1);
    path[0] = '/';
    same_as_jansson("p", "a", "POST", path, "w", 413, "payload_too_large");
    same_as_jansson("p", "a", "POST", "/short", "w", 200, NULL);
}

/* jansson refused these strings, and the line was lost; each bad byte is
 * U+FFFD now, the rest as it is. */
static void
test_not_utf8_kept(void)
{
    CHECK(reference("x", "p", "a", "POST", "/v1/\xff", "w", 404, NULL) == NULL);
    audit_write(&d, "p", "a", "POST", "/v1/\xff(\xc3\xed\xa0\x80\xc3\xa9", "w",
                404, "not_found");
    const char *got = take();
    CHECK(check_has_all(got,
                        ",\"path\":\"/v1/\xef\xbf\xbd(\xef\xbf\xbd\xef\xbf\xbd"
                        "\xef\xbf\xbd\xef\xbf\xbd\xc3\xa9\",\"status\":404,",
                        "\"code\":\"not_found\"}\n", NULL));
}

static void
test_publishes_per_setting(void)
{
    conf.audit_publishes = CONF_AUDIT_PUBLISHES_ERRORS;
    audit_write(&d, "p", "a", "POST", "/v1/topics/t/events", NULL, 202, NULL);
    CHECK_STR(take(), "");
    same_as_jansson("p", "a", "POST", "/v1/topics/t/events", NULL, 503,
                    "subscriber_full");
    conf.audit_publishes = CONF_AUDIT_PUBLISHES_NONE;
    audit_write(&d, "p", "a", "POST", "/v1/topics/t/events", NULL, 503, "x");
    CHECK_STR(take(), "");
    same_as_jansson("p", "a", "POST", "/v1/workers/w/invoke", "w", 200, NULL);
    conf.audit_publishes = CONF_AUDIT_PUBLISHES_ALL;
}

int
main(void)
{
    char err[256];

    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(file, sizeof file, "%s/audit.log", dir);
    conf.audit_publishes = CONF_AUDIT_PUBLISHES_ALL;
    if (audit_open(dir, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    RUN(test_plain_line);
    RUN(test_escapes);
    RUN(test_long_path_grows);
    RUN(test_not_utf8_kept);
    RUN(test_publishes_per_setting);
    audit_close();
    unlink(file);
    rmdir(dir);
    printf("%u checks, %u failed\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}
