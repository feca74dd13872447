/*
 * stamp.c — config stamping (see stamp.h).
 *
 * The event is decoded in place, its extensions and the missing config
 * entries gathered into one list, and the event re-encoded into a fresh
 * builder that then replaces the old one: the views point into the old
 * buffer, which must outlive the encoding.
 */
#include "config.h"

#include "master/stamp.h"

#include <stdio.h>
#include <stdlib.h>

#include "ipc/cloudevent.h"

int
stamp_config(struct ipc_fb_builder *event, const struct worker_pair *config,
             size_t n, char *err, size_t errlen)
{
    struct ipc_cloudevent ce;
    struct ipc_fb_error fe;
    size_t missing = 0;
    int rc = -1;

    if (n == 0)
        return 0;
    if (ipc_cloudevent_read(event->buf, event->len, &ce, &fe) != 0) {
        ipc_fb_error_format(&fe, err, errlen);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (!ipc_cloudevent_extension(&ce, config[i].name).ptr)
            missing++;
    if (missing == 0)
        return 0;

    size_t total = ce.extensions.n + missing;
    struct ipc_pair *pairs = calloc(total, sizeof *pairs);
    struct ipc_fb_builder out;
    ipc_fb_builder_init(&out);
    if (pairs == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < ce.extensions.n; i++)
        ipc_pair_list_get(&ce.extensions, i, &pairs[i]);
    size_t k = ce.extensions.n;
    for (size_t i = 0; i < n; i++) {
        if (ipc_cloudevent_extension(&ce, config[i].name).ptr)
            continue;
        pairs[k].name = ipc_str_c(config[i].name);
        pairs[k].value = ipc_str_c(config[i].value);
        k++;
    }
    ce.extensions.items = pairs;
    ce.extensions.fb = NULL;
    ce.extensions.n = (uint32_t)total;
    if (ipc_cloudevent_check(&ce, &fe) != 0) {
        ipc_fb_error_format(&fe, err, errlen);
        goto out;
    }
    if (ipc_cloudevent_encode(&out, &ce) != 0) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    ipc_fb_builder_free(event);
    *event = out;
    ipc_fb_builder_init(&out);
    rc = 0;
out:
    ipc_fb_builder_free(&out);
    free(pairs);
    return rc;
}
