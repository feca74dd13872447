/*
 * stamp.c — extensions stamped on events (see stamp.h).
 *
 * The caller hands the event decoded (a view into a buffer verified where
 * it came in, or built by the daemon: nothing is verified again here); its
 * extensions and the new ones are gathered into one list, and the event is
 * re-encoded into a fresh builder: the views point into the old buffer,
 * which must outlive the encoding.
 */
#include "config.h"

#include "master/broker/stamp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool
str_eq(struct ipc_str a, struct ipc_str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

int
stamp_extensions(const struct ipc_cloudevent *ce, const struct ipc_pair *set,
                 size_t n, enum stamp_mode mode, struct ipc_fb_builder *out,
                 char *err, size_t errlen)
{
    struct ipc_cloudevent copy = *ce;
    struct ipc_fb_error fe;
    size_t k = 0;
    int rc = -1;
    struct ipc_pair *pairs = calloc(ce->extensions.n + n + 1, sizeof *pairs);

    if (pairs == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < ce->extensions.n; i++) {
        struct ipc_pair p;
        ipc_pair_list_get(&ce->extensions, i, &p);
        for (size_t j = 0; j < n; j++) {
            if (!str_eq(p.name, set[j].name))
                continue;
            if (mode == STAMP_REPLACE || set[j].value.ptr == NULL)
                p.value = set[j].value;
            break;
        }
        if (p.value.ptr)
            pairs[k++] = p;
    }
    for (size_t j = 0; j < n; j++) {
        bool present = false;
        for (uint32_t i = 0; i < ce->extensions.n && !present; i++) {
            struct ipc_pair p;
            ipc_pair_list_get(&ce->extensions, i, &p);
            present = str_eq(p.name, set[j].name);
        }
        if (!present && set[j].value.ptr)
            pairs[k++] = set[j];
    }
    copy.extensions.items = pairs;
    copy.extensions.fb = NULL;
    copy.extensions.n = (uint32_t)k;
    ipc_fb_builder_reset(out);
    if (ipc_cloudevent_check(&copy, &fe) != 0) {
        ipc_fb_error_format(&fe, err, errlen);
        goto out;
    }
    if (ipc_cloudevent_encode(out, &copy) != 0) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    rc = 0;
out:
    free(pairs);
    return rc;
}

int
stamp_config(const struct ipc_cloudevent *ce, const struct worker_pair *config,
             size_t n, struct ipc_fb_builder *out, char *err, size_t errlen)
{
    size_t missing = 0;
    int rc;

    for (size_t i = 0; i < n; i++)
        if (!ipc_cloudevent_extension(ce, config[i].name).ptr)
            missing++;
    if (missing == 0)
        return 0;

    struct ipc_pair *set = calloc(n, sizeof *set);
    if (set == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        set[i].name = ipc_str_c(config[i].name);
        set[i].value = ipc_str_c(config[i].value);
    }
    rc = stamp_extensions(ce, set, n, STAMP_IF_MISSING, out, err, errlen) == 0
             ? 1
             : -1;
    free(set);
    return rc;
}
