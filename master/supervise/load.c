/*
 * load.c — the Load: a worker's code to its host process.  The code of
 * the worker's current version (hooks->code) goes into a sealed memfd
 * (DESIGN §3) and is sent with the Load once the host said hello, or to a
 * running host as a hot reload; the Loadeds answer the waiters of
 * supervise_load() once every serving process runs the version.
 *
 * A Load for a new version waits until nothing is in flight on a process,
 * and nothing is sent to it meanwhile (the hot reload, sv_pump()).  A
 * failed first Load fails the worker (load_error, until a reset) and its
 * other processes go with it; after a failed reload the host keeps
 * serving the version it ran (issue 27), as every host keeps what it ran
 * when a Load fails (ipc/PROTOCOL.md).  A validator of
 * the in-process path answers with the library it checked
 * (sv_ip_loaded()).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ipc/channel.h"
#include "lib/hex.h"
#include "master/core/conf.h"
#include "master/core/engines.h"
#include "master/core/log.h"
#include "master/supervise/supervise_internal.h"

/* The 32 bytes of a 64-digit hex SHA-256; -1 if it is not one. */
static int
sha256_bytes(const char *hex, uint8_t out[32])
{
    return hex_decode(hex, 32, out) == 0 && hex[64] == '\0' ? 0 : -1;
}

static void on_loaded(struct ipc_channel *ch, const struct ipc_frame *reply,
                      int *fds, unsigned nfds, const char *error, void *arg);

int
sv_load_send(struct proc *p)
{
    struct host *h = p->h;
    struct worker *w = h->w;
    const struct worker_version *v = worker_version_find(w, p->code_version);
    struct ipc_pair *pairs = NULL;
    struct ipc_frame f;
    uint8_t sha[32];
    int fd = p->memfd, rc;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_LOAD;
    f.u.load.worker_id = ipc_str_c(w->id);
    f.u.load.version = p->code_version;
    f.u.load.mime = ipc_str_c(w->mime_type ? w->mime_type : "");
    f.u.load.code_fd = 0;
    f.u.load.code_len = p->code_len;
    if (v && sha256_bytes(v->sha256, sha) == 0) {
        f.u.load.sha256.ptr = sha;
        f.u.load.sha256.len = sizeof sha;
    }
    f.u.load.identity.id = ipc_str_c(w->id);
    f.u.load.identity.group = ipc_str_c(w->group);
    f.u.load.identity.topic = ipc_str_c(w->topic);
    if (w->nconfig) {
        pairs = calloc(w->nconfig, sizeof *pairs);
        if (pairs == NULL) {
            close(fd);
            p->memfd = -1;
            errno = ENOMEM;
            return -1;
        }
        for (size_t i = 0; i < w->nconfig; i++) {
            pairs[i].name = ipc_str_c(w->config[i].name);
            pairs[i].value = ipc_str_c(w->config[i].value);
        }
        f.u.load.config.n = (uint32_t)w->nconfig;
        f.u.load.config.items = pairs;
    }
    f.u.load.limits.present = true;
    f.u.load.limits.timeout_ms = sv_deadline_ms(p->sv, w);
    f.u.load.limits.memory_mb = w->limits.memory_mb;
    /* Each of several processes runs one event at a time: the worker's
     * concurrency is their number (sv_host_max_procs()), not each one's. */
    f.u.load.limits.concurrency =
        w->engine && w->engine->concurrency == ENGINES_CONCURRENCY_PROCESSES
            ? 1
            : w->limits.concurrency;
    f.u.load.in_process = p->validator;

    p->memfd = -1; /* the channel's from here on, also on failure */
    rc = ipc_channel_call(p->ch, &f, &fd, 1, on_loaded, p);
    free(pairs);
    if (rc < 0)
        return -1;
    p->load_sent = true;
    sv_timer_ms(p->load_timer, sv_deadline_ms(p->sv, w));
    return 0;
}

/* A memfd named `name` holding data[0..len), sealed against every change
 * (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL), offset 0,
 * close-on-exec.  Returns the descriptor, or -1 with errno. */
static int
code_memfd(const char *name, const uint8_t *data, size_t len)
{
    const int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
    size_t off = 0;
    int fd, saved;

    fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            goto fail;
        off += (size_t)n;
    }
    /* F_SEAL_WRITE needs no writable shared mapping: there is none. */
    if (fcntl(fd, F_ADD_SEALS, seals) < 0 || lseek(fd, 0, SEEK_SET) < 0)
        goto fail;
    return fd;

fail:
    saved = errno ? errno : EIO;
    close(fd);
    errno = saved;
    return -1;
}

int
sv_load_take_code(struct proc *p, struct worker *w, char *err, size_t errlen)
{
    struct supervisor *sv = p->sv;
    uint8_t *data = NULL;
    size_t len = 0;
    char name[64];

    if (sv->hooks.code == NULL) {
        snprintf(err, errlen, "no code source");
        return -1;
    }
    if (sv->hooks.code(w, &data, &len, err, errlen, sv->arg) != 0)
        return -1;
    snprintf(name, sizeof name, "wm-code-%s-v%u", w->id, w->version);
    int fd = code_memfd(name, data, len);
    free(data);
    if (fd < 0) {
        snprintf(err, errlen, "memfd for the code: %s", strerror(errno));
        return -1;
    }
    if (p->memfd >= 0)
        close(p->memfd);
    p->memfd = fd;
    p->code_len = len;
    p->code_version = w->version;
    return 0;
}

void
sv_load_reload(struct proc *p)
{
    struct host *h = p->h;
    char err[256];

    log_info("worker %s: loading version %u into host pid %d", h->w->id,
             h->w->version, sv_proc_pid(p));
    if (sv_load_take_code(p, h->w, err, sizeof err) != 0) {
        /* The waiters learn why; the host goes, so that the next one
         * starts from the worker's version (or fails with the reason). */
        log_err("worker %s: reload of version %u: %s", h->w->id, h->w->version,
                err);
        sv_host_hold(h);
        sv_host_finish_loads(h, "load_error", err);
        if (!h->forgotten && p->h == h)
            sv_proc_shutdown(p, STOP_IDLE, p->sv->conf->shutdown_grace_ms);
        sv_host_release(h);
        return;
    }
    /* EAGAIN: the host does not read what it is sent. */
    if (sv_load_send(p) < 0)
        sv_proc_kill(p, errno == EAGAIN ? "timeout" : "crash",
                     "cannot send the Load: %s", strerror(errno));
}

void
sv_load_on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct proc *p = arg;

    (void)fd;
    (void)what;
    sv_proc_kill(p, "timeout", "no answer to Load within %" PRIu32 " ms",
                 p->h ? sv_deadline_ms(p->sv, p->h->w) : 0);
}

static void
on_loaded(struct ipc_channel *ch, const struct ipc_frame *reply, int *fds,
          unsigned nfds, const char *error, void *arg)
{
    struct proc *p = arg;
    struct host *h = p->h;
    struct worker *w;

    (void)ch;
    (void)fds;
    (void)nfds;
    if (error || h == NULL)
        return; /* the channel closed: see Re-entrancy, supervise_internal.h */
    w = h->w;
    sv_host_hold(h);
    sv_timer_del(p->load_timer);
    p->load_sent = false;
    if (reply->type != IPC_BODY_LOADED) {
        sv_proc_kill(p, "protocol", "answered a Load with %s",
                     ipc_body_name(reply->type));
        goto out;
    }
    if (reply->u.loaded.ok && p->validator) {
        sv_ip_loaded(p, &reply->u.loaded, fds, nfds);
        goto out;
    }
    if (reply->u.loaded.ok) {
        p->loaded = true;
        p->loaded_version = p->code_version;
        log_info("worker %s: version %u loaded in host pid %d", w->id,
                 p->loaded_version, sv_proc_pid(p));
        sv_pool_worker_started(p->sv, w->engine);
        /* (Another process may be on its way out meanwhile.) */
        if (w->state == WORKER_STATE_STARTING ||
            (h->nprocs > 1 && (w->state == WORKER_STATE_STOPPING ||
                               w->state == WORKER_STATE_PENDING)))
            sv_state_set(p->sv, w,
                         w->status == WORKER_SUSPENDED ? WORKER_STATE_SUSPENDED
                                                       : WORKER_STATE_RUNNING);
        if (p->loaded_version == w->version && sv_host_all_current(h))
            sv_host_finish_loads(h, NULL, NULL);
        if (!h->forgotten && w->status == WORKER_STOPPED && h->loads == NULL &&
            p->stop == STOP_NONE)
            sv_proc_shutdown(p, STOP_USER, p->sv->conf->shutdown_grace_ms);
        sv_host_kick(h);
        goto out;
    }

    const struct ipc_error *e = &reply->u.loaded.error;
    char msg[512];
    bool was_running = p->loaded || h->ip;
    if (e->message.ptr)
        snprintf(msg, sizeof msg, "%.*s", (int)e->message.len, e->message.ptr);
    else
        snprintf(msg, sizeof msg, "the host could not load version %u",
                 p->code_version);
    log_info("worker %s: version %u failed to load: %s", w->id, p->code_version,
             msg);
    sv_host_finish_loads(h, "load_error", msg);
    if (h->forgotten || p->stop != STOP_NONE)
        goto out;
    if (was_running && p->validator) {
        /* The in-process library keeps running the version it has; the
         * validator's host goes as after any validation. */
        sv_proc_shutdown(p, STOP_VALIDATED, p->sv->conf->shutdown_grace_ms);
    } else if (was_running) {
        /* A failed hot reload: a host keeps running the version it had
         * (ipc/PROTOCOL.md, Loaded), which the undone change made the
         * worker's again; the events that waited for the Load go on.
         * The refused version is not sent to it again. */
        p->refused_version = p->code_version;
        sv_host_kick(h);
    } else {
        sv_host_set_failed(h, "load_error", msg);
        /* The code does not load: the worker's other processes, starting
         * with the same code, go too. */
        sv_host_shutdown_procs(h, STOP_FAILED, p->sv->conf->shutdown_grace_ms);
        sv_host_kick(h); /* fail the queue */
    }
out:
    sv_host_release(h);
}
