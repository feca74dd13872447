/*
 * test_worker_api_c99.c — include/workmanager/worker_api.h as a worker
 * author compiles it: strict C99 (-std=c99 -pedantic -Wall -Wextra
 * -Werror, set by its rule in tests/workers/native/Makefile.inc), nothing
 * of the project but the header.  Every helper is called once, so that
 * each is compiled; the values are checked by test_worker_api.c and
 * test_worker_api_cxx.cc.
 */
#include <stdio.h>

#include "workmanager/worker_api.h"

/* A hand-made CloudEvent: root -> table at 4 (soffset -20: the vtable at
 * 24), its one field (id 0, type "ab") at 8 -> the string at 12. */
static const uint8_t event[] = {
    4,   0,   0,   0,                   /* root uoffset */
    236, 255, 255, 255,                 /* soffset -20 */
    4,   0,   0,   0,                   /* field 0 -> 12 */
    2,   0,   0,   0,   'a', 'b', 0, 0, /* "ab" */
    0,   0,   0,   0,                   /* padding */
    6,   0,   8,   0,   4,   0, /* vtable: 6 bytes, table 8, field 0 at 4 */
    0,   0,
};

int
main(void)
{
    struct virtufin_event ev;
    struct virtufin_extension e;
    uint8_t *out = NULL;
    int32_t len = 0;
    int failed = 0;

    if (virtufin_event_read(event, (int32_t)sizeof event, &ev) != VIRTUFIN_OK ||
        !virtufin_str_eq(ev.id, "ab") || ev.type.ptr != NULL) {
        fprintf(stderr, "the hand-made event does not read\n");
        failed = 1;
    }
    if (virtufin_event_extension_at(&ev, 0, &e) != VIRTUFIN_ERR_RANGE ||
        virtufin_event_extension(&ev, "correlationid").ptr != NULL) {
        fprintf(stderr, "an extension where there is none\n");
        failed = 1;
    }
    ev.type = virtufin_str_c("t");
    if (virtufin_response_event(&ev, &out, &len) != VIRTUFIN_OK ||
        len % 4 != 0) {
        fprintf(stderr, "no response\n");
        failed = 1;
    }
    virtufin_response_free(out);
    if (virtufin_response_error("e", &out, &len) != VIRTUFIN_OK) {
        fprintf(stderr, "no error response\n");
        failed = 1;
    }
    virtufin_response_free(out);
    virtufin_event_init(&ev);
    printf("%s: the header builds and runs as C99\n", failed ? "FAIL" : "ok");
    return failed;
}
