/*
 * emit.h — the daemon's own events (DESIGN §6, §7): lifecycle and infra
 * events published on the reserved workmanager.* topics.
 *
 * Below both the message flow (flow.c, which reports a worker's error as a
 * lifecycle event) and the lifecycle events (workers/lifecycle.c, which
 * publish them), so that neither includes the other: the emitter needs
 * only the broker and the CloudEvents codec.
 */
#ifndef WM_MASTER_EMIT_H
#define WM_MASTER_EMIT_H

#include <jansson.h>

struct broker;

/* Publishes a daemon event, given as a structured CloudEvent, to (tenant,
 * topic) of b: converted as any event at ingress (events_from_json()),
 * fire and forget, a failure logged (an invalid event, a refused publish).
 * obj is only read.  Only the daemon publishes on workmanager.* topics:
 * callers pass one of them. */
void emit_publish(struct broker *b, const char *tenant, const char *topic,
                  json_t *obj);

#endif /* WM_MASTER_EMIT_H */
