/*
 * events_diff.h — the differential check of the CloudEvent scanner
 * (master/api/events_scan.c) against the jansson path, shared by
 * tests/unit/test_events_scan.c and tests/fuzz/fuzz_events_scan.c.
 *
 * The jansson path is what master/api/events_http.c does when the scanner
 * leaves a body to it: json_loadb() (JSON_REJECT_DUPLICATES for a single
 * event, as api_body_object() loads it; no flags for a batch), the object
 * or array test, the max_batch_events test, events_batch_from_json().
 *
 * The rules: a body the scanner accepts, jansson accepts, with as many
 * events, each byte for byte the same buffer (an id both sides made up
 * is the one difference allowed: it is random); a body the scanner
 * rejects, jansson rejects; a fallback decides nothing.
 */
#ifndef WM_TESTS_EVENTS_DIFF_H
#define WM_TESTS_EVENTS_DIFF_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "ipc/cloudevent.h"
#include "lib/uuid.h"
#include "master/api/events.h"

/* The jansson path's decision on body: 0 and the events in batch, or -1. */
static inline int
events_diff_jansson(const uint8_t *body, size_t len, enum events_scan_kind kind,
                    size_t max_events, struct events_batch *batch)
{
    char err[512];
    size_t flags = kind == EVENTS_SCAN_ONE ? JSON_REJECT_DUPLICATES : 0;
    json_t *j = json_loadb((const char *)body, len, flags, NULL);
    json_t *arr = NULL;
    int rc = -1;

    if (j == NULL)
        return -1;
    if (kind == EVENTS_SCAN_ONE && json_is_object(j))
        arr = json_pack("[O]", j);
    else if (kind == EVENTS_SCAN_BATCH && json_is_array(j) &&
             json_array_size(j) <= max_events)
        arr = json_incref(j);
    if (arr)
        rc = events_batch_from_json(arr, batch, err, sizeof err);
    json_decref(arr);
    json_decref(j);
    return rc;
}

/* Whether buffers a and b are the same event, but for ids both made up. */
static inline bool
events_diff_same(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    struct ipc_cloudevent ca, cb;
    struct ipc_fb_builder fb;
    bool same;

    if (alen == blen && memcmp(a, b, alen) == 0)
        return true;
    ipc_cloudevent_decode_trusted(a, &ca);
    ipc_cloudevent_decode_trusted(b, &cb);
    if (ca.id.len != UUID_SIZE - 1 || cb.id.len != UUID_SIZE - 1)
        return false;
    /* Both made up an id: the same buffer with b's id is a's. */
    ca.id = cb.id;
    ipc_fb_builder_init(&fb);
    same = ipc_cloudevent_encode(&fb, &ca) == 0 && fb.len == blen &&
           memcmp(fb.buf, b, blen) == 0;
    ipc_fb_builder_free(&fb);
    return same;
}

/* Runs body through both readers.  Returns NULL when they agree (the
 * scanner's verdict in *verdict), else what differs. */
static inline const char *
events_diff_check(const uint8_t *body, size_t len, enum events_scan_kind kind,
                  size_t max_events, enum events_scan_result *verdict)
{
    struct events_batch sb, jb;
    const char *why = NULL;

    events_batch_init(&sb);
    events_batch_init(&jb);
    *verdict = events_scan_body(body, len, kind, max_events, &sb);
    int jrc = events_diff_jansson(body, len, kind, max_events, &jb);
    if (*verdict == EVENTS_SCAN_OK && jrc != 0) {
        why = "the scanner accepts a body jansson rejects";
    } else if (*verdict == EVENTS_SCAN_REJECT && jrc == 0) {
        why = "the scanner rejects a body jansson accepts";
    } else if (*verdict != EVENTS_SCAN_OK && (sb.n != 0 || sb.fb.len != 0)) {
        why = "the scanner left events in a batch it did not accept";
    } else if (*verdict == EVENTS_SCAN_OK && sb.n != jb.n) {
        why = "the scanner read another number of events";
    } else if (*verdict == EVENTS_SCAN_OK) {
        for (size_t i = 0; i < sb.n && why == NULL; i++) {
            size_t sl, jl;
            const uint8_t *s = events_batch_get(&sb, i, &sl);
            const uint8_t *j = events_batch_get(&jb, i, &jl);
            if (!events_diff_same(s, sl, j, jl))
                why = "the scanner wrote another event than jansson";
        }
    }
    events_batch_free(&sb);
    events_batch_free(&jb);
    return why;
}

#endif /* WM_TESTS_EVENTS_DIFF_H */
