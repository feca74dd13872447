/*
 * instances.c — the instances sharing one store (see instances.h).
 *
 * One timer, every instance_heartbeat_ms: write this instance's heartbeat
 * (one write at a time: a slow store does not pile them up) and judge the
 * others.  Their heartbeats come from the store's watch
 * (instances_changed(), called by remote_workers.c), not from a listing:
 * a listing is a synchronous read on the loop, which with a NATS cluster
 * failing over held the loop up to 5 s a turn.  The others are listed
 * once, at start, before the loop runs.  While this instance cannot
 * store its own heartbeat it does not judge the others either: what it
 * does not hear may be its own connection's fault.
 *
 * An entry's `seen` is the monotonic time at which this daemon last saw
 * its heartbeat change (a new revision); the state is a function of the
 * age of that (instance_state_of()).  An entry whose key is gone (another
 * instance removed it as dead, or it stopped cleanly) is dead; dead
 * entries are forgotten instance_dead_ms after.
 *
 * Invariants: self is not in the list of others; an entry's state only
 * changes in judge(), which emits one infra event per change.
 */
#include "config.h"

#include "master/workers/instances.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/timestamp.h"
#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/log.h"
#include "master/store/store.h"
#include "master/workers/lifecycle.h"

#define PREFIX "workmanager/instances/"
#define EVENT_TENANT "default"
#define EVENT_TOPIC "workmanager.infra.instance"

struct other {
    struct other *next;
    char *id;
    json_t *info; /* its heartbeat, as it wrote it */
    uint64_t rev;
    int64_t seen; /* monotonic ms */
    bool present; /* its key is in the store */
    enum instance_state state;
};

struct instances {
    struct daemon *d;
    struct event *tick;
    char key[STORE_KEY_MAX];
    char *beat; /* this instance's heartbeat, as written */
    size_t beatlen;
    bool writing;
    bool stopped; /* instances_stop() came while writing: freed by the
                     write's completion */
    enum instance_state self; /* connected while its heartbeat is stored */
    int64_t self_seen;
    struct other *others;
};

static void
emit(struct instances *in, const struct other *o, enum instance_state was)
{
    json_t *data = json_pack("{s:s, s:O?, s:s, s:s}", "id", o->id, "name",
                             o->info ? json_object_get(o->info, "name") : NULL,
                             "state", instance_state_name(o->state), "previous",
                             instance_state_name(was));
    /* A dead instance's events: JetStream gives them to the others once
     * their ack wait is over (the embedded broker's are its own). */
    if (data && o->state == INSTANCE_DEAD &&
        in->d->conf->broker == CONF_BROKER_NATS) {
        char why[160];
        snprintf(why, sizeof why,
                 "its unacknowledged events go to the other instances "
                 "within nats_ack_wait_ms (%u ms) of their delivery",
                 in->d->conf->nats_ack_wait_ms);
        json_object_set_new(data, "events", json_string(why));
    }
    log_notice("instance %s (%s) is %s (was %s)", o->id,
               o->info ? json_string_value(json_object_get(o->info, "name"))
                       : "?",
               instance_state_name(o->state), instance_state_name(was));
    if (data)
        lifecycle_emit_infra_on(
            in->d, EVENT_TENANT, EVENT_TOPIC,
            o->state == INSTANCE_CONNECTED      ? "instance.connected"
            : o->state == INSTANCE_DISCONNECTED ? "instance.disconnected"
                                                : "instance.dead",
            o->id, data);
}

static struct other *
other_get(struct instances *in, const char *id)
{
    struct other *o;

    for (o = in->others; o; o = o->next)
        if (strcmp(o->id, id) == 0)
            return o;
    o = calloc(1, sizeof *o);
    if (o == NULL || (o->id = strdup(id)) == NULL) {
        free(o);
        return NULL;
    }
    o->state = INSTANCE_CONNECTED;
    o->next = in->others;
    in->others = o;
    return o;
}

static void
other_free(struct other *o)
{
    json_decref(o->info);
    free(o->id);
    free(o);
}

/* Another instance's heartbeat key changed (value NULL: deleted). */
static void
seen(struct instances *in, const char *key, const uint8_t *value, size_t len,
     uint64_t revision)
{
    const char *id = key + strlen(PREFIX);
    struct other *o;

    if (strcmp(id, in->d->instance_id) == 0)
        return;
    if (value == NULL) {
        for (o = in->others; o; o = o->next)
            if (strcmp(o->id, id) == 0)
                o->present = false;
        return;
    }
    if ((o = other_get(in, id)) == NULL)
        return;
    o->present = true;
    if (o->rev != revision) {
        bool first = o->rev == 0;
        o->rev = revision;
        o->seen = timestamp_mono_ms();
        json_decref(o->info);
        o->info = json_loadb((const char *)value, len, 0, NULL);
        if (first)
            log_info("instance %s seen", id);
    }
}

static int
on_listed(const char *key, enum store_status status, const uint8_t *value,
          size_t len, uint64_t revision, const char *message, void *arg)
{
    (void)message;
    if (status == STORE_OK)
        seen(arg, key, value, len, revision);
    return 0;
}

void
instances_changed(struct daemon *d, const char *key, const uint8_t *value,
                  size_t len, uint64_t revision)
{
    if (d->instances != NULL && strncmp(key, PREFIX, strlen(PREFIX)) == 0)
        seen(d->instances, key, value, len, revision);
}

/* Each other instance's state from the age of its heartbeat. */
static void
judge(struct instances *in)
{
    const struct conf *c = in->d->conf;
    int64_t now = timestamp_mono_ms();

    for (struct other **p = &in->others, *o; (o = *p) != NULL;) {
        enum instance_state was = o->state;

        if (!o->present) {
            /* its key is gone: removed as dead, or stopped cleanly */
            o->state = INSTANCE_DEAD;
            if (now - o->seen >= (int64_t)c->instance_dead_ms * 2) {
                *p = o->next;
                other_free(o);
                continue;
            }
        } else {
            o->state = instance_state_of(now - o->seen,
                                         (unsigned)c->instance_disconnected_ms,
                                         (unsigned)c->instance_dead_ms);
        }
        if (o->state != was) {
            emit(in, o, was);
            if (o->state == INSTANCE_DEAD && o->present) {
                char key[STORE_KEY_MAX];
                snprintf(key, sizeof key, PREFIX "%s", o->id);
                /* compare-and-set: one that came back keeps its key */
                store_delete(in->d->store, key, o->rev, NULL, NULL);
            }
        }
        p = &o->next;
    }
}

static void
on_beat_written(enum store_status st, uint64_t revision, const char *message,
                void *arg)
{
    struct instances *in = arg;
    enum instance_state was = in->self;

    (void)revision;
    in->writing = false;
    if (in->stopped) {
        free(in->beat);
        free(in);
        return;
    }
    in->self = st == STORE_OK ? INSTANCE_CONNECTED : INSTANCE_DISCONNECTED;
    if (st == STORE_OK)
        in->self_seen = timestamp_mono_ms();
    if (in->self != was)
        log_notice("this instance is %s%s%s", instance_state_name(in->self),
                   st == STORE_OK ? "" : ": its heartbeat cannot be stored: ",
                   st == STORE_OK ? "" : message);
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct instances *in = arg;

    (void)fd;
    (void)what;
    if (!in->writing) {
        in->writing =
            store_put(in->d->store, in->key, (uint8_t *)in->beat, in->beatlen,
                      STORE_ANY_REVISION, on_beat_written, in) == 0;
        if (!in->writing)
            in->self = INSTANCE_DISCONNECTED;
    }
    if (in->self != INSTANCE_CONNECTED)
        return; /* blind: nobody is judged */
    judge(in);
}

int
instances_start(struct daemon *d, char *err, size_t errlen)
{
    const struct conf *c = d->conf;
    char host[256] = "", at[TIMESTAMP_SIZE];
    struct timeval tv = { (time_t)(c->instance_heartbeat_ms / 1000),
                          (suseconds_t)(c->instance_heartbeat_ms % 1000) *
                              1000 };

    if (c->store != CONF_STORE_NATS)
        return 0; /* one instance: nothing to share */
    struct instances *in = calloc(1, sizeof *in);
    if (in == NULL) {
        snprintf(err, errlen, "instances: out of memory");
        return -1;
    }
    in->d = d;
    in->self = INSTANCE_CONNECTED;
    in->self_seen = timestamp_mono_ms();
    snprintf(in->key, sizeof in->key, PREFIX "%s", d->instance_id);
    (void)gethostname(host, sizeof host - 1);
    timestamp_format(d->started_at_ms, at);
    json_t *beat = json_pack(
        "{s:s, s:s, s:s, s:I, s:s, s:s, s:s}", "id", d->instance_id, "name",
        c->instance, "host", host, "pid", (json_int_t)getpid(), "started", at,
        "listen", c->listen ? c->listen : "", "version", PACKAGE_VERSION);
    in->beat = beat ? json_dumps(beat, JSON_COMPACT) : NULL;
    json_decref(beat);
    in->tick = event_new(d->base, -1, EV_PERSIST, on_tick, in);
    if (in->beat == NULL || in->tick == NULL || evtimer_add(in->tick, &tv)) {
        if (in->tick)
            event_free(in->tick);
        free(in->beat);
        free(in);
        snprintf(err, errlen, "instances: out of memory");
        return -1;
    }
    in->beatlen = strlen(in->beat);
    d->instances = in;
    if (store_list(d->store, PREFIX, on_listed, in, err, errlen) != STORE_OK)
        log_warning("instances: the others are not known until they beat "
                    "again: %s",
                    err);
    on_tick(-1, 0, in); /* the first heartbeat now, not in a second */
    return 0;
}

void
instances_stop(struct daemon *d)
{
    struct instances *in = d->instances;

    if (in == NULL)
        return;
    event_free(in->tick);
    /* A clean stop: the others see the key gone (dead) at once rather
     * than after instance_dead_ms. */
    store_delete(d->store, in->key, STORE_ANY_REVISION, NULL, NULL);
    while (in->others) {
        struct other *o = in->others;
        in->others = o->next;
        other_free(o);
    }
    d->instances = NULL;
    if (in->writing) {
        in->stopped = true; /* its completion runs later (store_close) */
        return;
    }
    free(in->beat);
    free(in);
}

/* One instance's object, at last_seen (monotonic ms). */
static json_t *
entry(const char *id, json_t *info, enum instance_state state, int64_t seen,
      bool self)
{
    char at[TIMESTAMP_SIZE];
    int64_t wall = timestamp_now_ms() - (timestamp_mono_ms() - seen);
    json_t *o = json_object();

    timestamp_format(wall, at);
    json_object_set_new(o, "id", json_string(id));
    if (info) {
        const char *keys[] = { "name",    "host",   "pid",
                               "started", "listen", "version" };
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            json_t *v = json_object_get(info, keys[i]);
            json_object_set(o, keys[i], v ? v : json_null());
        }
    }
    json_object_set_new(o, "state", json_string(instance_state_name(state)));
    json_object_set_new(o, "last_seen", json_string(at));
    json_object_set_new(o, "self", json_boolean(self));
    return o;
}

json_t *
instances_json(struct daemon *d)
{
    struct instances *in = d->instances;
    json_t *arr = json_array();
    char host[256] = "", at[TIMESTAMP_SIZE];

    if (in != NULL) {
        json_t *me = json_loads(in->beat, 0, NULL);
        json_array_append_new(
            arr, entry(d->instance_id, me, in->self, in->self_seen, true));
        json_decref(me);
        for (const struct other *o = in->others; o; o = o->next)
            json_array_append_new(
                arr, entry(o->id, o->info, o->state, o->seen, false));
        return arr;
    }
    /* The file store: this daemon alone. */
    (void)gethostname(host, sizeof host - 1);
    timestamp_format(d->started_at_ms, at);
    json_t *me = json_pack(
        "{s:s, s:s, s:I, s:s, s:s, s:s}", "name", d->conf->instance, "host",
        host, "pid", (json_int_t)getpid(), "started", at, "listen",
        d->conf->listen ? d->conf->listen : "", "version", PACKAGE_VERSION);
    json_array_append_new(arr, entry(d->instance_id, me, INSTANCE_CONNECTED,
                                     timestamp_mono_ms(), true));
    json_decref(me);
    return arr;
}
