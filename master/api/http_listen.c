/*
 * http_listen.c — the listeners of the admin API's HTTP server
 * (http_server.h): accepting, the caps on connections (per listener, and
 * per peer address on TCP), and what happens when descriptors run out.
 *
 * Why this way: at its cap a listener stops accepting (its event is
 * removed) and the kernel's backlog holds further clients until a
 * connection closes: nothing is spent on them, and each listener has its
 * own cap, so a flood of the TCP port leaves the control socket
 * reachable.  A peer over its own cap is accepted, answered 429 and
 * closed, since only an accepted connection says who it is.  When accept
 * fails for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
 * ENOMEM) — or succeeds with a descriptor that eats into the reserve kept
 * for hosts, the store and the journal — the listener pauses
 * (ACCEPT_PAUSE_MS) instead of being woken again at once by the same
 * pending connection, which is what made libevent's evhttp spin; the log
 * says so at most once per ACCEPT_LOG_EVERY_MS, with a count.
 *
 * Invariants: a listener's event is added exactly when it is below its
 * cap and not paused; each connection of a listener holds one count of
 * it, and on TCP one count of its peer's entry, given back when it
 * closes.
 */
#include "config.h"

#include "master/api/http_private.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "master/core/log.h"

/* Accepts per wake-up: a burst of clients is served without starving the
 * rest of the loop. */
#define ACCEPTS_PER_WAKEUP 64
/* How long accepting pauses when descriptors run out: long enough not to
 * spin, short enough that a freed descriptor is soon used. */
#define ACCEPT_PAUSE_MS 500
/* At most one log line about it this often. */
#define ACCEPT_LOG_EVERY_MS 10000
#define PEER_BUCKETS 256

struct http_peer_count {
    struct http_peer_count *next;
    unsigned char addr[16];
    size_t addr_len;
    unsigned n;
    unsigned bucket;
};

struct http_listener {
    LIST_ENTRY(http_listener) link;
    struct http_server *srv;
    int fd;
    struct event *ev;
    struct event *retry;
    char name[64];
    unsigned max_connections;
    unsigned max_per_peer;
    unsigned n;
    bool armed;
    bool paused;
    struct http_tls *tls; /* NULL: plain */
    struct http_peer_count *peers[PEER_BUCKETS];
};

static void
arm(struct http_listener *l)
{
    if (!l->armed && !l->paused && l->n < l->max_connections &&
        event_add(l->ev, NULL) == 0)
        l->armed = true;
}

static void
disarm(struct http_listener *l)
{
    if (l->armed) {
        event_del(l->ev);
        l->armed = false;
    }
}

/* Logs a failure to accept, at most once per ACCEPT_LOG_EVERY_MS. */
static void
note_failure(struct http_listener *l, const char *why)
{
    struct http_server *srv = l->srv;

    if (!http_log_due(&srv->accept_log_ms, &srv->accept_unlogged,
                      ACCEPT_LOG_EVERY_MS))
        return;
    log_warning("api: %s: %s (%llu more since the last such line); "
                "accepting pauses %d ms",
                l->name, why, (unsigned long long)srv->accept_unlogged,
                ACCEPT_PAUSE_MS);
    srv->accept_unlogged = 0;
}

static void
pause_accepting(struct http_listener *l, const char *why)
{
    struct timeval tv = { 0, ACCEPT_PAUSE_MS * 1000 };

    l->srv->st.accept_pauses++;
    note_failure(l, why);
    disarm(l);
    l->paused = true;
    event_add(l->retry, &tv);
}

static void
on_retry(evutil_socket_t fd, short what, void *arg)
{
    struct http_listener *l = arg;
    (void)fd;
    (void)what;
    l->paused = false;
    arm(l);
}

/* ---- peers ----------------------------------------------------------------
 */

static struct http_peer_count *
peer_get(struct http_listener *l, const struct sockaddr_storage *ss)
{
    const unsigned char *a;
    size_t len;

    if (ss->ss_family == AF_INET) {
        a = (const unsigned char *)&(
                (const struct sockaddr_in *)(const void *)ss)
                ->sin_addr;
        len = 4;
    } else if (ss->ss_family == AF_INET6) {
        a = (const unsigned char *)&(
                (const struct sockaddr_in6 *)(const void *)ss)
                ->sin6_addr;
        len = 16;
    } else {
        return NULL;
    }
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ a[i]) * 16777619u;
    unsigned b = h % PEER_BUCKETS;
    for (struct http_peer_count *p = l->peers[b]; p; p = p->next)
        if (p->addr_len == len && memcmp(p->addr, a, len) == 0)
            return p;
    struct http_peer_count *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    memcpy(p->addr, a, len);
    p->addr_len = len;
    p->bucket = b;
    p->next = l->peers[b];
    l->peers[b] = p;
    return p;
}

static void
peer_put(struct http_listener *l, struct http_peer_count *pc)
{
    if (pc == NULL || --pc->n > 0)
        return;
    struct http_peer_count **pp = &l->peers[pc->bucket];
    while (*pp != pc)
        pp = &(*pp)->next;
    *pp = pc->next;
    free(pc);
}

/* ---- accepting ------------------------------------------------------------
 */

static void
take(struct http_listener *l, int fd, const struct sockaddr_storage *ss)
{
    struct http_server *srv = l->srv;
    struct http_peer_count *pc = NULL;
    bool over = false;

    if (l->max_per_peer) {
        pc = peer_get(l, ss);
        if (pc) {
            over = pc->n >= l->max_per_peer;
            pc->n++;
        }
    }
    l->n++;
    struct http_conn *c = http_conn_new(srv, l, fd);
    if (c == NULL) {
        l->n--;
        peer_put(l, pc);
        return;
    }
    c->peer_count = pc;
    if (l->tls && http_tls_attach(c, l->tls) != 0) {
        http_conn_close(c);
        return;
    }
    if (over) {
        char msg[256];
        snprintf(msg, sizeof msg,
                 "more than %u connections from %s "
                 "(http_max_connections_per_peer)",
                 l->max_per_peer, c->peer.text);
        http_conn_refuse(c, 429, "too_many_connections", msg);
    }
}

static void
on_acceptable(evutil_socket_t lfd, short what, void *arg)
{
    struct http_listener *l = arg;
    struct http_server *srv = l->srv;
    (void)what;

    for (int i = 0; i < ACCEPTS_PER_WAKEUP && l->armed; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sl,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            char why[128];
            snprintf(why, sizeof why, "cannot accept: %s", strerror(errno));
            pause_accepting(l, why);
            return;
        }
        /* The kernel hands out the lowest free descriptor: one this high
         * means fewer than the reserve are left. */
        if (srv->nofile && (unsigned)fd >= srv->nofile - srv->reserve) {
            close(fd);
            char why[160];
            snprintf(why, sizeof why,
                     "refused a connection: %u of %u descriptors are kept "
                     "for hosts, the store and the journal (fd_reserve)",
                     srv->reserve, srv->nofile);
            pause_accepting(l, why);
            return;
        }
        take(l, fd, &ss);
        if (l->n >= l->max_connections)
            disarm(l); /* the rest wait in the backlog */
    }
}

struct http_listener *
http_listener_new(struct http_server *srv, int fd, const char *name,
                  unsigned max_connections, unsigned max_per_peer)
{
    struct http_listener *l = calloc(1, sizeof *l);
    if (l == NULL) {
        close(fd);
        return NULL;
    }
    l->srv = srv;
    l->fd = fd;
    l->max_connections = max_connections ? max_connections : 1;
    l->max_per_peer = max_per_peer;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->ev = event_new(srv->base, fd, EV_READ | EV_PERSIST, on_acceptable, l);
    l->retry = evtimer_new(srv->base, on_retry, l);
    if (l->ev == NULL || l->retry == NULL) {
        if (l->ev)
            event_free(l->ev);
        if (l->retry)
            event_free(l->retry);
        close(fd);
        free(l);
        return NULL;
    }
    LIST_INSERT_HEAD(&srv->listeners, l, link);
    arm(l);
    return l;
}

void
http_listener_set_tls(struct http_listener *l, struct http_tls *tls)
{
    l->tls = tls;
}

void
http_listener_conn_closed(struct http_listener *l, struct http_peer_count *pc)
{
    l->n--;
    peer_put(l, pc);
    arm(l);
}

void
http_listener_free(struct http_listener *l)
{
    struct http_conn *c;

    if (l == NULL)
        return;
    /* Its connections go on, counted by no one. */
    TAILQ_FOREACH (c, &l->srv->conns, link) {
        if (c->lst == l) {
            c->lst = NULL;
            c->peer_count = NULL;
        }
    }
    for (unsigned b = 0; b < PEER_BUCKETS; b++) {
        while (l->peers[b]) {
            struct http_peer_count *p = l->peers[b];
            l->peers[b] = p->next;
            free(p);
        }
    }
    LIST_REMOVE(l, link);
    event_free(l->ev);
    event_free(l->retry);
    close(l->fd);
    free(l);
}
