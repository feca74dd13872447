/*
 * nats_link.h — one connection to NATS as the configuration describes it
 * (nats_url, credentials, TLS files), for the backends that speak to
 * NATS: the nats store (master/store/store_nats*.c) and the nats broker
 * (master/broker/broker_nats*.c), each with a connection of its own.
 * The functions are built with libnats only (WM_NATS); the settings are
 * there in every build.
 *
 * The connection reconnects by itself, without limit, every half second,
 * with SendAsap (libnats otherwise holds writes for about a millisecond)
 * unless the caller asks for a buffered one.
 * libnats starts threads of its own from the connect on; they are created
 * with every signal blocked, so the loop's signal events keep seeing the
 * daemon's signals.
 */
#ifndef WM_MASTER_CORE_NATS_LINK_H
#define WM_MASTER_CORE_NATS_LINK_H

#include <stdbool.h>
#include <stddef.h>

struct nats_link_config {
    const char *url; /* comma-separated servers of one cluster */
    const char *user, *password, *token, *creds_file;
    const char *ca_file, *cert_file, *key_file; /* "" or NULL: none */
    const char *who; /* the caller, in messages: "nats store" */
    /* Writes gathered by libnats's flusher thread (up to about a
     * millisecond later, fewer system calls) rather than each at once
     * (SendAsap, the default). */
    bool buffered;
};

#ifdef WM_NATS
#include <nats/nats.h>

/* Connects; on failure returns -1 with a message in err naming the URL
 * and what to check, and *opts / *nc NULL. */
int nats_link_connect(const struct nats_link_config *cfg, natsOptions **opts,
                      natsConnection **nc, char *err, size_t errlen);

/* Sets err to "what: libnats's status text (its last error)"; returns
 * -1. */
int nats_link_fail(char *err, size_t errlen, natsStatus s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* WM_NATS */

#endif /* WM_MASTER_CORE_NATS_LINK_H */
