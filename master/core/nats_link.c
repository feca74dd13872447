/*
 * nats_link.c — a NATS connection as the configuration describes it
 * (nats_link.h).
 */
#include "config.h"

#include "master/core/nats_link.h"

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "lib/errbuf.h"

/* How long connecting to one server may take (ms), and how often a lost
 * connection is retried. */
#define NL_CONNECT_MS 2000
#define NL_RECONNECT_MS 500
#define NL_MAX_URLS 16

int
nats_link_fail(char *err, size_t errlen, natsStatus s, const char *fmt, ...)
{
    char what[1024];
    const char *last = nats_GetLastError(NULL);
    const char *text = natsStatus_GetText(s);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    /* libnats's last error often repeats the status text after its
     * source position: then the status text says it all. */
    if (last != NULL && last[0] != '\0' && strstr(last, text) == NULL)
        errbuf_set(err, errlen, "%s: %s (%s)", what, text, last);
    else
        errbuf_set(err, errlen, "%s: %s", what, text);
    return -1;
}

static bool
set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

/* The options: servers, credentials, TLS, timeouts. */
static int
options(const struct nats_link_config *cfg, natsOptions **out, char *err,
        size_t errlen)
{
    const char *urls[NL_MAX_URLS];
    char *list = strdup(cfg->url), *save = NULL;
    bool tls = set(cfg->ca_file) || set(cfg->cert_file);
    const char *what, *file = "";
    natsOptions *o = NULL;
    natsStatus s;
    int n = 0;

    if (list == NULL)
        return errbuf_set(err, errlen, "%s: out of memory", cfg->who);
    for (char *u = strtok_r(list, ", \t", &save); u != NULL;
         u = strtok_r(NULL, ", \t", &save)) {
        if (n == NL_MAX_URLS) {
            free(list);
            return errbuf_set(err, errlen,
                              "nats_url: more than %d servers; list the "
                              "cluster's seeds only",
                              NL_MAX_URLS);
        }
        if (strncmp(u, "tls://", 6) == 0)
            tls = true;
        urls[n++] = u;
    }
    s = natsOptions_Create(&o);
    if (s == NATS_OK)
        s = natsOptions_SetServers(o, urls, n);
    free(list);
    if (s == NATS_OK)
        s = natsOptions_SetName(o, "workmanagerd");
    if (s == NATS_OK)
        s = natsOptions_SetTimeout(o, NL_CONNECT_MS);
    if (s == NATS_OK)
        s = natsOptions_SetSendAsap(o, !cfg->buffered);
    if (s == NATS_OK)
        s = natsOptions_SetMaxReconnect(o, -1);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectWait(o, NL_RECONNECT_MS);
    what = "NATS options";
    if (s == NATS_OK && set(cfg->user)) {
        what = "nats_user";
        s = natsOptions_SetUserInfo(o, cfg->user, cfg->password);
    }
    if (s == NATS_OK && set(cfg->token)) {
        what = "nats_token";
        s = natsOptions_SetToken(o, cfg->token);
    }
    if (s == NATS_OK && set(cfg->creds_file)) {
        what = "nats_creds_file";
        file = cfg->creds_file;
        s = natsOptions_SetUserCredentialsFromFiles(o, file, NULL);
    }
    if (s == NATS_OK && tls) {
        what = "NATS TLS";
        file = "";
        s = natsOptions_SetSecure(o, true);
    }
    if (s == NATS_OK && set(cfg->ca_file)) {
        what = "nats_ca_file";
        file = cfg->ca_file;
        s = natsOptions_LoadCATrustedCertificates(o, file);
    }
    if (s == NATS_OK && set(cfg->cert_file)) {
        what = "nats_cert_file";
        file = cfg->cert_file;
        s = natsOptions_LoadCertificatesChain(
            o, file, set(cfg->key_file) ? cfg->key_file : file);
    }
    if (s != NATS_OK) {
        natsOptions_Destroy(o);
        return nats_link_fail(err, errlen, s, "%s%s%s", what,
                              file[0] != '\0' ? " " : "", file);
    }
    *out = o;
    return 0;
}

int
nats_link_connect(const struct nats_link_config *cfg, natsOptions **opts,
                  natsConnection **nc, char *err, size_t errlen)
{
    sigset_t all, old;
    natsStatus s;

    *opts = NULL;
    *nc = NULL;
    /* libnats's threads inherit this mask (nats_link.h). */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    if (options(cfg, opts, err, errlen) != 0) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return -1;
    }
    s = natsConnection_Connect(nc, *opts);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (s != NATS_OK) {
        char why[512];

        nats_link_fail(why, sizeof why, s, "no answer");
        errbuf_set(err, errlen,
                   "cannot connect to NATS at %s: %s; is nats-server "
                   "running there (with JetStream, -js), and are nats_url, "
                   "the credentials and the TLS files right?",
                   cfg->url, why + strlen("no answer: "));
        natsOptions_Destroy(*opts);
        *opts = NULL;
        *nc = NULL;
        return -1;
    }
    return 0;
}
