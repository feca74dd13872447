/*
 * sse.h — wmctl's Server-Sent Events reader: the chunks of a streamed
 * answer (http_client_stream()) in, one call per event's data out.
 */
#ifndef WMCTL_SSE_H
#define WMCTL_SSE_H

#include <signal.h>
#include <stddef.h>

/* A parser: zero it, set event and arg, feed it with sse_feed(), free it
 * with sse_free().  event gets each event's data (its `data:` lines
 * joined with newlines; not NUL-terminated) and returns -1 to stop the
 * stream. */
struct sse {
    int (*event)(const char *data, size_t len, void *arg);
    void *arg;
    int failed; /* out of memory: the stream was stopped */
    char *line;
    size_t len, cap;
    char *data;
    size_t dlen, dcap;
};

/* An http_chunk_fn: feeds len bytes of the stream to the parser (arg). */
int sse_feed(const char *data, size_t len, void *arg);

void sse_free(struct sse *s);

/* From now on SIGINT and SIGTERM end a stream (wmctl then exits 0): the
 * flag to give http_client_stream() as its stop. */
const volatile sig_atomic_t *sse_stop_on_signals(void);

struct wmctl;

/* Streams GET path, calling event (as struct sse's) for each event, until
 * the daemon ends the stream, event returns -1, or SIGINT or SIGTERM;
 * returns wmctl's exit code (an error answer or an unreachable daemon
 * printed). */
int sse_follow(struct wmctl *ctl, const char *path,
               int (*event)(const char *data, size_t len, void *arg),
               void *arg);

#endif
