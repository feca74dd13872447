/*
 * recovery_lease.c — the recovery lease (recovery_lease.h).
 */
#include "config.h"

#include "master/workers/recovery_lease.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "master/core/conf.h"
#include "master/core/daemon.h"
#include "master/core/log.h"
#include "master/store/store.h"

static struct {
    struct daemon *d;
    recovery_lease_cb cb;
    void *arg;
    uint64_t rev; /* of the record this instance wrote; 0: none */
    char holder[200];
    bool leader;
} lease;

static int64_t
wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool
recovery_lease_free(const uint8_t *value, size_t len, int64_t now_ms,
                    char *holder, size_t size)
{
    char buf[256];
    long long expires;
    const char *sp;

    holder[0] = '\0';
    if (len == 0 || len >= sizeof buf)
        return true;
    memcpy(buf, value, len);
    buf[len] = '\0';
    sp = strrchr(buf, ' ');
    if (sp == NULL || sp == buf || sscanf(sp + 1, "%lld", &expires) != 1)
        return true; /* unreadable: nobody's */
    snprintf(holder, size, "%.*s", (int)(sp - buf), buf);
    return expires <= now_ms;
}

/* Runs the callback on a later loop turn. */
static void
on_decided(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    lease.cb(lease.leader, lease.holder, lease.arg);
}

static void
decide(bool leader, const char *holder)
{
    lease.leader = leader;
    snprintf(lease.holder, sizeof lease.holder, "%s", holder);
    if (event_base_once(lease.d->base, -1, EV_TIMEOUT, on_decided, NULL,
                        NULL) != 0)
        on_decided(-1, 0, NULL);
}

static void
on_written(enum store_status status, uint64_t revision, const char *message,
           void *arg)
{
    (void)arg;
    if (status == STORE_OK) {
        lease.rev = revision;
        decide(true, lease.d->holder);
        return;
    }
    /* Another instance wrote first (a conflict), or the store failed:
     * either way this one does not lead. */
    log_info("recovery: the lease %s went elsewhere: %s", RECOVERY_LEASE_KEY,
             message ? message : store_status_name(status));
    decide(false,
           status == STORE_CONFLICT ? "another instance" : "the store failed");
}

void
recovery_lease_take(struct daemon *d, recovery_lease_cb cb, void *arg)
{
    char err[256], holder[200], value[256];
    uint8_t *cur = NULL;
    size_t len = 0;
    uint64_t rev = 0;
    enum store_status st;

    lease.d = d;
    lease.cb = cb;
    lease.arg = arg;
    if (d->conf->store != CONF_STORE_NATS) {
        decide(true, d->holder); /* one daemon per state directory */
        return;
    }
    st = store_get(d->store, RECOVERY_LEASE_KEY, &cur, &len, &rev, err,
                   sizeof err);
    if (st != STORE_OK && st != STORE_NOT_FOUND) {
        decide(false, err);
        return;
    }
    int64_t now = wall_ms();
    bool free_ = st == STORE_NOT_FOUND ||
                 recovery_lease_free(cur, len, now, holder, sizeof holder);
    free(cur);
    if (!free_) {
        decide(false, holder);
        return;
    }
    int n = snprintf(value, sizeof value, "%s %" PRId64, d->holder,
                     now + RECOVERY_LEASE_MS);
    if (store_put(d->store, RECOVERY_LEASE_KEY, (const uint8_t *)value,
                  (size_t)n, st == STORE_NOT_FOUND ? 0 : rev, on_written,
                  NULL) != 0)
        decide(false, "the lease key is refused by the store");
}

void
recovery_lease_release(struct daemon *d)
{
    if (lease.rev == 0)
        return;
    store_delete(d->store, RECOVERY_LEASE_KEY, lease.rev, NULL, NULL);
    lease.rev = 0;
}
