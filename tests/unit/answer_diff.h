/*
 * answer_diff.h — the differential check of the answer writer
 * (master/api/events_answer.c) against the jansson path, shared by
 * tests/unit/test_events_answer.c and tests/fuzz/fuzz_events_answer.c.
 *
 * The jansson path is what master/api/events_http.c does when the writer
 * leaves an answer to it (and did for every answer before): events_to_json()
 * of each event, in a JSON array for a batch, dumped by
 * events_json_dumps().
 *
 * The rule: an answer the writer writes is byte for byte the jansson
 * path's; a fallback decides nothing.  Events are given to both as the
 * daemon has them, decoded from their ABI buffers.
 */
#ifndef WM_TESTS_ANSWER_DIFF_H
#define WM_TESTS_ANSWER_DIFF_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ipc/cloudevent.h"
#include "master/api/events.h"

/* The jansson path's text of evs[0..n); NULL when it fails. */
static inline char *
answer_diff_jansson(const struct ipc_cloudevent *evs, size_t n, bool array,
                    size_t *len)
{
    json_t *j = array ? json_array() : events_to_json(&evs[0]);
    char *text;

    for (size_t i = 0; array && j && i < n; i++)
        if (json_array_append_new(j, events_to_json(&evs[i]))) {
            json_decref(j);
            j = NULL;
        }
    text = j ? events_json_dumps(j, len) : NULL;
    json_decref(j);
    return text;
}

/* Runs evs[0..n) through both writers.  Returns NULL when they agree
 * (whether the writer wrote the answer in *direct), else what differs. */
static inline const char *
answer_diff_check(const struct ipc_cloudevent *evs, size_t n, bool array,
                  bool *direct)
{
    size_t dl = 0, jl = 0;
    const char *d = events_answer_json(evs, n, array, &dl);
    char *j;
    const char *why = NULL;

    *direct = d != NULL;
    if (d == NULL)
        return NULL;
    /* d is static memory of the writer; the jansson path does not touch
     * it. */
    j = answer_diff_jansson(evs, n, array, &jl);
    if (j == NULL)
        why = "the writer wrote an answer the jansson path cannot";
    else if (dl != jl || memcmp(d, j, dl) != 0)
        why = "the writer wrote other bytes than the jansson path";
    free(j);
    return why;
}

/* Encodes ce into fb and decodes it back into *out, as the daemon holds a
 * host's output (views into fb's buffer).  Returns 0, or -1. */
static inline int
answer_diff_event(const struct ipc_cloudevent *ce, struct ipc_fb_builder *fb,
                  struct ipc_cloudevent *out)
{
    ipc_fb_builder_reset(fb);
    if (ipc_cloudevent_encode(fb, ce) != 0)
        return -1;
    ipc_cloudevent_decode_trusted(fb->buf, out);
    return 0;
}

#endif /* WM_TESTS_ANSWER_DIFF_H */
