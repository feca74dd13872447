/*
 * broker.c — broker.h's entry points: broker_open() picks the backend
 * named in the configuration, the rest dispatch through the operations
 * every handle leads to (broker_backend.h).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "lib/errbuf.h"
#include "master/broker/broker_backend.h"

struct broker *
broker_open(const struct broker_config *cfg, struct event_base *base, char *err,
            size_t errlen)
{
    const char *name = cfg->backend ? cfg->backend : "embedded";

    if (strcmp(name, "embedded") == 0)
        return broker_embedded_open(cfg, base, err, errlen);
    if (strcmp(name, "nats") == 0)
        return broker_nats_open(cfg, base, err, errlen);
    errbuf_set(err, errlen, "broker: no backend named %s", name);
    errno = EINVAL;
    return NULL;
}

#ifndef WM_NATS
struct broker *
broker_nats_open(const struct broker_config *cfg, struct event_base *base,
                 char *err, size_t errlen)
{
    (void)cfg;
    (void)base;
    errbuf_set(err, errlen,
               "broker = nats: this workmanagerd was built without NATS "
               "support (configured --without-nats, or libnats was not "
               "found)");
    errno = ENOTSUP;
    return NULL;
}
#endif

void
broker_close(struct broker *b)
{
    if (b != NULL)
        b->ops->close(b);
}

int
broker_publish(struct broker *b, const char *tenant, const char *topic,
               const uint8_t *event, size_t len, broker_publish_cb cb,
               void *arg)
{
    return b->ops->publish(b, tenant, topic, event, len, cb, arg, false);
}

int
broker_publish_batch(struct broker *b, const char *tenant, const char *topic,
                     const struct broker_event *evs, size_t n,
                     broker_publish_cb cb, void *arg, size_t *accepted)
{
    size_t i;

    if (b->ops->publish_batch)
        return b->ops->publish_batch(b, tenant, topic, evs, n, cb, arg,
                                     accepted);
    for (i = 0; i < n; i++) {
        bool last = i + 1 == n;
        if (b->ops->publish(b, tenant, topic, evs[i].event, evs[i].len,
                            last ? cb : NULL, last ? arg : NULL, false) != 0)
            break;
    }
    if (accepted)
        *accepted = i;
    return i == n ? 0 : -1;
}

int
broker_publish_unhurried(struct broker *b, const char *tenant,
                         const char *topic, const uint8_t *event, size_t len)
{
    return b->ops->publish(b, tenant, topic, event, len, NULL, NULL, true);
}

int
broker_admit(struct broker *b, const char *tenant, const char *topic, size_t n,
             struct broker_sub **full)
{
    return b->ops->admit(b, tenant, topic, n, full);
}

struct broker_sub *
broker_subscribe(struct broker *b, const struct broker_sub_spec *spec)
{
    return b->ops->subscribe(b, spec);
}

void
broker_sub_set_mode(struct broker_sub *s, enum broker_sub_mode mode)
{
    s->b->ops->set_mode(s, mode);
}

void
broker_sub_set_max_inflight(struct broker_sub *s, unsigned n)
{
    s->b->ops->set_max_inflight(s, n);
}

void
broker_unsubscribe(struct broker_sub *s, bool keep)
{
    s->b->ops->unsubscribe(s, keep);
}

void
broker_ack(struct broker_delivery *d)
{
    d->broker->ops->ack(d);
}

void
broker_nack(struct broker_delivery *d, uint32_t delay_ms)
{
    d->broker->ops->nack(d, delay_ms);
}

void
broker_release(struct broker_delivery *d, uint32_t delay_ms)
{
    d->broker->ops->release(d, delay_ms);
}

void
broker_recovered(struct broker *b, broker_known_cb known, void *arg)
{
    b->ops->recovered(b, known, arg);
}

size_t
broker_purge(struct broker *b, const char *tenant, const char *topic)
{
    return b->ops->purge(b, tenant, topic);
}

void
broker_stats(const struct broker *b, struct broker_stats *out)
{
    b->ops->stats(b, out);
}

void
broker_tenant_backlog(const struct broker *b, const char *tenant,
                      uint64_t *events, uint64_t *bytes)
{
    b->ops->tenant_backlog(b, tenant, events, bytes);
}

void
broker_health(const struct broker *b, struct broker_health *out)
{
    b->ops->health(b, out);
}

void
broker_set_storage_hook(struct broker *b, broker_storage_cb cb, void *arg)
{
    b->ops->set_storage_hook(b, cb, arg);
}

void
broker_set_exhausted_hook(struct broker *b, broker_exhausted_cb cb, void *arg)
{
    b->ops->set_exhausted_hook(b, cb, arg);
}

size_t
broker_sub_backlog(const struct broker_sub *s)
{
    return s->b->ops->sub_backlog(s);
}

const char *
broker_sub_name(const struct broker_sub *s)
{
    return s->b->ops->sub_name(s);
}
