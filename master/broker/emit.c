/*
 * emit.c — the daemon's own events (see emit.h).
 *
 * Why a file of its own: the flow and the lifecycle events both emit, and
 * the flow reports through lifecycle events; an emitter beneath both keeps
 * their includes one way.  Invariant: it publishes and logs, and calls
 * nothing above the broker.
 */
#include "config.h"

#include "master/broker/emit.h"

#include <errno.h>
#include <string.h>

#include "ipc/fb.h"
#include "master/api/events.h"
#include "master/broker/broker.h"
#include "master/core/log.h"

void
emit_publish(struct broker *b, const char *tenant, const char *topic,
             json_t *obj)
{
    struct ipc_fb_builder fb;
    char err[256];

    ipc_fb_builder_init(&fb);
    if (events_from_json(obj, &fb, err, sizeof err) != 0)
        log_err("emit: a daemon event for %s is invalid: %s", topic, err);
    else if (broker_publish_unhurried(b, tenant, topic, fb.buf, fb.len) < 0)
        log_err("emit: a daemon event for %s/%s is lost: %s", tenant, topic,
                strerror(errno));
    ipc_fb_builder_free(&fb);
}
