/*
 * sse.c — wmctl's Server-Sent Events reader (sse.h): lines are gathered
 * across chunks; `data:` lines make the event, a blank line ends it,
 * comments (":") and the other fields (id, event) are skipped, as the
 * daemon's streams (topics, a worker's logs) need nothing of them.
 */
#include "config.h"

#include "cli/sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cli/wmctl.h"

static int
grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 1024;
    while (n < need)
        n *= 2;
    char *p = realloc(*buf, n);
    if (p == NULL)
        return -1;
    *buf = p;
    *cap = n;
    return 0;
}

/* One complete line (without its newline).  Returns -1 to stop. */
static int
sse_line(struct sse *s, char *line, size_t len)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (len == 0) {
        if (s->dlen == 0)
            return 0;
        size_t n = s->dlen;
        s->dlen = 0;
        return s->event(s->data, n, s->arg);
    }
    if (len < 5 || strncmp(line, "data:", 5) != 0)
        return 0;
    line += 5;
    len -= 5;
    if (len > 0 && *line == ' ') {
        line++;
        len--;
    }
    /* Several data lines join with a newline. */
    if (grow(&s->data, &s->dcap, s->dlen + len + 2) != 0) {
        s->failed = 1;
        return -1;
    }
    if (s->dlen)
        s->data[s->dlen++] = '\n';
    memcpy(s->data + s->dlen, line, len);
    s->dlen += len;
    return 0;
}

int
sse_feed(const char *data, size_t len, void *arg)
{
    struct sse *s = arg;

    for (size_t i = 0; i < len; i++) {
        if (data[i] != '\n') {
            if (grow(&s->line, &s->cap, s->len + 1) != 0) {
                s->failed = 1;
                return -1;
            }
            s->line[s->len++] = data[i];
            continue;
        }
        size_t n = s->len;
        s->len = 0;
        if (sse_line(s, s->line, n) != 0)
            return -1;
    }
    return 0;
}

void
sse_free(struct sse *s)
{
    free(s->line);
    free(s->data);
    s->line = s->data = NULL;
}

/* Set by SIGINT and SIGTERM. */
static volatile sig_atomic_t stopping;

static void
on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

const volatile sig_atomic_t *
sse_stop_on_signals(void)
{
    struct sigaction sa = { .sa_handler = on_signal };

    /* No SA_RESTART: a signal wakes curl's wait, which then sees
     * `stopping` in its progress callback. */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return &stopping;
}

int
sse_follow(struct wmctl *ctl, const char *path,
           int (*event)(const char *data, size_t len, void *arg), void *arg)
{
    struct sse s = { .event = event, .arg = arg };
    struct http_reply r;
    char err[CURL_ERROR_SIZE + 64];
    int rc = WMCTL_EXIT_OK;

    if (http_client_stream(ctl->http, path, sse_feed, &s, sse_stop_on_signals(),
                           &r, err, sizeof err) != 0) {
        sse_free(&s);
        return wmctl_unreachable(ctl, err);
    }
    if (r.status != 200) {
        wmctl_error_print(ctl, r.status, r.body);
        rc = WMCTL_EXIT_FAILED;
    } else if (s.failed) {
        fprintf(stderr, "wmctl: out of memory\n");
        rc = WMCTL_EXIT_FAILED;
    }
    http_reply_free(&r);
    sse_free(&s);
    return rc;
}
