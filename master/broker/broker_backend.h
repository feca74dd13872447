/*
 * broker_backend.h — what a broker backend provides (broker.h's
 * interface, dispatched by broker.c); nothing outside master/broker/
 * includes it.
 *
 * A backend's broker starts with struct broker (its operations) and each
 * of its subscriptions with struct broker_sub (the broker it belongs to),
 * so that broker.c finds the operations from any handle the callers hold:
 * a broker, a subscription, or a delivery (its broker field: a delivery
 * may outlive its subscription, never its broker).
 *
 *   embedded  broker_embedded.c (+ broker_storage.c, broker_tenant.c):
 *             in-memory queues behind the write-ahead journal;
 *   nats      broker_nats*.c, built with libnats (WM_NATS): one JetStream
 *             stream, a durable pull consumer per subscription name.
 */
#ifndef WM_MASTER_BROKER_BACKEND_H
#define WM_MASTER_BROKER_BACKEND_H

#include "master/broker/broker.h"

struct broker_ops {
    const char *name;
    void (*close)(struct broker *b);
    /* unhurried: broker_publish_unhurried() (cb is NULL) */
    int (*publish)(struct broker *b, const char *tenant, const char *topic,
                   const uint8_t *event, size_t len, broker_publish_cb cb,
                   void *arg, bool unhurried);
    /* NULL: broker.c publishes them one by one */
    int (*publish_batch)(struct broker *b, const char *tenant,
                         const char *topic, const struct broker_event *evs,
                         size_t n, broker_publish_cb cb, void *arg,
                         size_t *accepted);
    int (*admit)(struct broker *b, const char *tenant, const char *topic,
                 size_t n, struct broker_sub **full);
    struct broker_sub *(*subscribe)(struct broker *b,
                                    const struct broker_sub_spec *spec);
    void (*set_mode)(struct broker_sub *s, enum broker_sub_mode mode);
    void (*set_max_inflight)(struct broker_sub *s, unsigned n);
    void (*unsubscribe)(struct broker_sub *s, bool keep);
    void (*ack)(struct broker_delivery *d);
    void (*nack)(struct broker_delivery *d, uint32_t delay_ms);
    void (*release)(struct broker_delivery *d, uint32_t delay_ms);
    void (*recovered)(struct broker *b, broker_known_cb known, void *arg);
    size_t (*purge)(struct broker *b, const char *tenant, const char *topic);
    void (*stats)(const struct broker *b, struct broker_stats *out);
    void (*tenant_backlog)(const struct broker *b, const char *tenant,
                           uint64_t *events, uint64_t *bytes);
    void (*health)(const struct broker *b, struct broker_health *out);
    void (*set_storage_hook)(struct broker *b, broker_storage_cb cb, void *arg);
    void (*set_exhausted_hook)(struct broker *b, broker_exhausted_cb cb,
                               void *arg);
    size_t (*sub_backlog)(const struct broker_sub *s);
    const char *(*sub_name)(const struct broker_sub *s);
};

/* The head of every backend's broker and subscription. */
struct broker {
    const struct broker_ops *ops;
};

struct broker_sub {
    struct broker *b;
};

/* Each backend's open (broker_open()'s contract). */
struct broker *broker_embedded_open(const struct broker_config *cfg,
                                    struct event_base *base, char *err,
                                    size_t errlen);
struct broker *broker_nats_open(const struct broker_config *cfg,
                                struct event_base *base, char *err,
                                size_t errlen);

#endif /* WM_MASTER_BROKER_BACKEND_H */
