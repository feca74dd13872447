/*
 * loader.c — a native worker's library and its pool of threads (loader.h).
 *
 * One mutex guards the queues and the pool's counters; the library's
 * function pointers are read under it when a thread takes a job, so a job
 * runs wholly with the library it was taken under (a reload happens only
 * with nothing in flight anyway).
 *
 * Opening by /proc/self/fd/N: the dynamic linker takes a new dlopen() of a
 * name it already has loaded for that object, without looking at the file.
 * A library whose dlclose() does not unload it (RTLD_NODELETE, C++ unique
 * symbols) therefore keeps its descriptor, so that its /proc name is never
 * given to another library.
 */
#include "config.h"

#include "hosts/native/loader.h"
#include "lib/thread.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static const char *const identity_names[3] = {
    "VIRTUFIN_WORKER_ID",
    "VIRTUFIN_WORKER_GROUP",
    "VIRTUFIN_WORKER_TOPIC",
};

struct native_loader {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* for the pool */
    pthread_cond_t call_cv; /* for threads waiting on a gateway call */
    struct native_job *todo, **todo_tail; /* for the pool, FIFO */
    struct native_job *done;              /* for the owner, LIFO */
    struct native_call *calls;            /* for the owner, LIFO */
    pthread_t threads[NATIVE_LOADER_MAX_THREADS];
    unsigned nthreads;
    unsigned alive;  /* threads not ended (detached mode) */
    unsigned idle;   /* threads waiting for work */
    unsigned busy;   /* jobs submitted, not taken back */
    unsigned queued; /* jobs in todo */
    bool stopping;
    bool detached; /* closed with calls running: the last thread frees */
    int efd;
    /* The library in use. */
    void *lib;
    int lib_fd;
    virtufin_process_fn process;
    virtufin_free_result_fn free_result;
    VirtufinHost api;
    /* Identity variables as they were before the first open. */
    bool saved;
    char *saved_env[3];
    bool had_env[3];
};

static void
wake(struct native_loader *nl)
{
    uint64_t one = 1;

    /* Fails only when the counter would overflow: the owner is awake. */
    (void)!write(nl->efd, &one, sizeof one);
}

/* Queues c for the owner; false if the loader is closed (c is not). */
static bool
queue_call(struct native_loader *nl, struct native_call *c)
{
    pthread_mutex_lock(&nl->mu);
    if (nl->detached) {
        pthread_mutex_unlock(&nl->mu);
        return false;
    }
    bool first = nl->calls == NULL && nl->done == NULL;
    c->next = nl->calls;
    nl->calls = c;
    pthread_mutex_unlock(&nl->mu);
    if (first)
        wake(nl);
    return true;
}

static void
call_free(struct native_call *c)
{
    free(c->text);
    free(c->method);
    free(c->req);
    free(c->resp);
    free(c);
}

/* ---- the worker's callbacks (pool threads) --------------------------- */

static void
api_log(void *engine, int32_t level, const char *msg)
{
    struct native_call *c = calloc(1, sizeof *c);

    if (c == NULL || (c->text = strdup(msg ? msg : "")) == NULL) {
        free(c);
        return;
    }
    c->is_log = true;
    c->level = level < 0 ? 0 : level > 4 ? 4 : level;
    if (!queue_call(engine, c))
        call_free(c);
}

/* Blocks until the owner answers (native_call_reply). */
static int32_t
api_gateway_call(void *engine, const char *service, const char *method,
                 const uint8_t *req, int32_t req_len, uint8_t **resp,
                 int32_t *resp_len)
{
    struct native_loader *nl = engine;
    struct native_call *c;
    int32_t status;

    if (resp == NULL || resp_len == NULL)
        return -1;
    *resp = NULL;
    *resp_len = 0;
    if (service == NULL || method == NULL || req_len < 0 ||
        (req_len > 0 && req == NULL) || (c = calloc(1, sizeof *c)) == NULL)
        return -1;
    c->text = strdup(service);
    c->method = strdup(method);
    c->req = malloc(req_len ? (size_t)req_len : 1);
    if (c->text == NULL || c->method == NULL || c->req == NULL) {
        call_free(c);
        return -1;
    }
    if (req_len)
        memcpy(c->req, req, (size_t)req_len);
    c->req_len = req_len;
    c->loader = nl;
    if (!queue_call(nl, c)) {
        call_free(c);
        return 503;
    }
    pthread_mutex_lock(&nl->mu);
    while (!c->done)
        pthread_cond_wait(&nl->call_cv, &nl->mu);
    pthread_mutex_unlock(&nl->mu);
    status = c->status;
    *resp = c->resp;
    *resp_len = c->resp_len;
    c->resp = NULL;
    call_free(c);
    return status == 200 ? 0 : status ? status : -1;
}

static void
api_free_response(void *engine, uint8_t *resp)
{
    (void)engine;
    free(resp);
}

void
native_call_reply(struct native_call *c, int32_t status, const uint8_t *resp,
                  size_t len)
{
    struct native_loader *nl = c->loader;

    if (c->is_log) {
        call_free(c);
        return;
    }
    /* c->resp is NUL-terminated for workers that print it. */
    uint8_t *copy = malloc(len + 1);
    if (copy) {
        if (len)
            memcpy(copy, resp, len);
        copy[len] = '\0';
    } else {
        len = 0;
        status = status == 200 ? 500 : status;
    }
    /* From here on c is its waiting thread's, which frees it. */
    pthread_mutex_lock(&nl->mu);
    c->status = status;
    c->resp = copy;
    c->resp_len = (int32_t)len;
    c->done = true;
    /* Every waiter rechecks its own flag. */
    pthread_cond_broadcast(&nl->call_cv);
    pthread_mutex_unlock(&nl->mu);
}

/* ---- the pool --------------------------------------------------------- */

static void loader_destroy(struct native_loader *nl);

/* A thread takes its share of what is queued at once (up to CHUNK_MAX
 * jobs), so that a busy pool locks, and wakes its owner, once per chunk
 * rather than once per call, and the other threads still get theirs. */
#define CHUNK_MAX 32

static void *
pool_main(void *arg)
{
    struct native_loader *nl = arg;

    for (;;) {
        pthread_mutex_lock(&nl->mu);
        nl->idle++;
        while (nl->todo == NULL && !nl->stopping)
            pthread_cond_wait(&nl->work_cv, &nl->mu);
        nl->idle--;
        struct native_job *chunk = nl->todo, *last = chunk;
        if (chunk == NULL) { /* stopping */
            bool end = --nl->alive == 0 && nl->detached;
            pthread_mutex_unlock(&nl->mu);
            if (end)
                loader_destroy(nl);
            return NULL;
        }
        unsigned n = nl->queued / nl->nthreads;
        n = n < 1 ? 1 : n > CHUNK_MAX ? CHUNK_MAX : n;
        for (unsigned i = 1; i < n && last->next; i++)
            last = last->next;
        nl->todo = last->next;
        last->next = NULL;
        if (nl->todo == NULL)
            nl->todo_tail = &nl->todo;
        for (struct native_job *j = chunk; j; j = j->next) {
            nl->queued--;
            j->free_result = nl->free_result;
        }
        virtufin_process_fn p = nl->process;
        pthread_mutex_unlock(&nl->mu);

        for (struct native_job *j = chunk; j; j = j->next) {
            j->out = NULL;
            j->out_len = 0;
            j->rc = p(&nl->api, j->in, j->in_len, &j->out, &j->out_len);
        }

        pthread_mutex_lock(&nl->mu);
        if (nl->detached) { /* nobody takes them: the outputs go now */
            pthread_mutex_unlock(&nl->mu);
            while (chunk) {
                struct native_job *next = chunk->next;
                native_job_free(chunk);
                chunk = next;
            }
            continue;
        }
        /* One wake-up per batch: the owner takes every result at once
         * (done is newest first). */
        bool first = nl->done == NULL && nl->calls == NULL;
        while (chunk) {
            struct native_job *next = chunk->next;
            chunk->next = nl->done;
            nl->done = chunk;
            chunk = next;
        }
        pthread_mutex_unlock(&nl->mu);
        if (first)
            wake(nl);
    }
    return NULL;
}

int
native_loader_threads(struct native_loader *nl, unsigned n)
{
    int rc = 0;

    if (n == 0)
        n = 1;
    if (n > NATIVE_LOADER_MAX_THREADS)
        n = NATIVE_LOADER_MAX_THREADS;
    /* Asynchronous signals stay with the owner's threads; a worker's own
     * faults (and abort(), raise()) must still reach it. */
    while (nl->nthreads < n) {
        pthread_mutex_lock(&nl->mu);
        nl->alive++;
        pthread_mutex_unlock(&nl->mu);
        rc =
            thread_start_quiet(&nl->threads[nl->nthreads], pool_main, nl, true);
        if (rc != 0) {
            pthread_mutex_lock(&nl->mu);
            nl->alive--;
            pthread_mutex_unlock(&nl->mu);
            break;
        }
        nl->nthreads++;
    }
    if (rc != 0 && nl->nthreads == 0) {
        errno = rc;
        return -1;
    }
    return 0;
}

/* ---- the loader ------------------------------------------------------- */

struct native_loader *
native_loader_new(void)
{
    struct native_loader *nl = calloc(1, sizeof *nl);

    if (nl == NULL)
        return NULL;
    nl->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (nl->efd < 0) {
        free(nl);
        return NULL;
    }
    pthread_mutex_init(&nl->mu, NULL);
    pthread_cond_init(&nl->work_cv, NULL);
    pthread_cond_init(&nl->call_cv, NULL);
    nl->todo_tail = &nl->todo;
    nl->lib_fd = -1;
    nl->api.engine_ptr = nl;
    nl->api.abi_version = VIRTUFIN_ABI_VERSION;
    nl->api.log = api_log;
    nl->api.gateway_call = api_gateway_call;
    nl->api.free_response = api_free_response;
    return nl;
}

int
native_loader_fd(const struct native_loader *nl)
{
    return nl->efd;
}

bool
native_loader_ready(const struct native_loader *nl)
{
    return nl->lib != NULL;
}

unsigned
native_loader_busy(const struct native_loader *nl)
{
    return nl->busy;
}

static void
set_identity(struct native_loader *nl, const struct native_identity *id)
{
    const char *v[3] = { id ? id->id : NULL, id ? id->group : NULL,
                         id ? id->topic : NULL };

    for (int i = 0; i < 3; i++) {
        if (!nl->saved) {
            const char *old = getenv(identity_names[i]);
            nl->had_env[i] = old != NULL;
            nl->saved_env[i] = old ? strdup(old) : NULL;
        }
        setenv(identity_names[i], v[i] ? v[i] : "", 1);
    }
    nl->saved = true;
}

static void
restore_identity(struct native_loader *nl)
{
    if (!nl->saved)
        return;
    for (int i = 0; i < 3; i++) {
        if (nl->had_env[i] && nl->saved_env[i])
            setenv(identity_names[i], nl->saved_env[i], 1);
        else
            unsetenv(identity_names[i]);
        free(nl->saved_env[i]);
        nl->saved_env[i] = NULL;
    }
    nl->saved = false;
}

/* Closes a library (if any) and, if it really went, its descriptor (see
 * the top). */
static void
library_close(void *lib, int fd)
{
    char path[64];

    if (lib == NULL) {
        if (fd >= 0)
            close(fd);
        return;
    }
    dlclose(lib);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    void *still = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (still) {
        dlclose(still);
        return; /* resident for good: its name stays taken */
    }
    close(fd);
}

int
native_loader_open(struct native_loader *nl, int lib_fd, const char *label,
                   const char *entry, const char *free_result,
                   const struct native_identity *id, char *err, size_t errlen)
{
    char path[64];
    void *h, *p, *fr;

    set_identity(nl, id);
    snprintf(path, sizeof path, "/proc/self/fd/%d", lib_fd);
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(err, errlen, "%s cannot be loaded: %s", label, dlerror());
        close(lib_fd);
        return -1;
    }
    p = dlsym(h, entry);
    fr = dlsym(h, free_result);
    if (p == NULL || fr == NULL) {
        snprintf(err, errlen, "%s does not export %s", label,
                 p == NULL ? entry : free_result);
        library_close(h, lib_fd);
        return -1;
    }
    pthread_mutex_lock(&nl->mu);
    void *old = nl->lib;
    int old_fd = nl->lib_fd;
    nl->lib = h;
    nl->lib_fd = lib_fd;
    memcpy(&nl->process, &p, sizeof p);
    memcpy(&nl->free_result, &fr, sizeof fr);
    pthread_mutex_unlock(&nl->mu);
    library_close(old, old_fd);
    return 0;
}

struct native_job *
native_job_new(const uint8_t *in, size_t len)
{
    struct native_job *j;

    if (len > INT32_MAX) {
        errno = EMSGSIZE;
        return NULL;
    }
    /* One allocation; the input right after the job, 16-aligned as
     * malloc's own (a FlatBuffer needs 8). */
    size_t head = (sizeof *j + 15) & ~(size_t)15;
    j = malloc(head + (len ? len : 1));
    if (j == NULL)
        return NULL;
    memset(j, 0, sizeof *j);
    j->in = (uint8_t *)j + head;
    if (len)
        memcpy(j->in, in, len);
    j->in_len = (int32_t)len;
    return j;
}

void
native_job_free(struct native_job *j)
{
    if (j == NULL)
        return;
    /* Exactly once per non-NULL output, after its outcome was used. */
    if (j->out != NULL && j->free_result != NULL)
        j->free_result(j->out);
    free(j);
}

void
native_loader_submit(struct native_loader *nl, struct native_job *jobs)
{
    struct native_job *last = jobs;
    unsigned n = 1;

    if (jobs == NULL)
        return;
    while (last->next) {
        last = last->next;
        n++;
    }
    pthread_mutex_lock(&nl->mu);
    nl->busy += n;
    nl->queued += n;
    *nl->todo_tail = jobs;
    nl->todo_tail = &last->next;
    /* A busy pool takes the jobs when it looks again. */
    if (nl->idle > 1 && n > 1)
        pthread_cond_broadcast(&nl->work_cv);
    else if (nl->idle > 0)
        pthread_cond_signal(&nl->work_cv);
    pthread_mutex_unlock(&nl->mu);
}

void
native_loader_take(struct native_loader *nl, struct native_job **jobs,
                   struct native_call **calls)
{
    uint64_t n;
    struct native_job *js = NULL, *jrev = NULL;
    struct native_call *cs = NULL, *crev = NULL;

    (void)!read(nl->efd, &n, sizeof n);
    pthread_mutex_lock(&nl->mu);
    if (jobs) {
        js = nl->done;
        nl->done = NULL;
    }
    if (calls) {
        cs = nl->calls;
        nl->calls = NULL;
    }
    if (nl->done || nl->calls) /* what the caller left is still there */
        wake(nl);
    pthread_mutex_unlock(&nl->mu);
    while (js) { /* oldest first */
        struct native_job *next = js->next;
        js->next = jrev;
        jrev = js;
        js = next;
        nl->busy--;
    }
    while (cs) {
        struct native_call *next = cs->next;
        cs->next = crev;
        crev = cs;
        cs = next;
    }
    if (jobs)
        *jobs = jrev;
    if (calls)
        *calls = crev;
}

const char *
native_job_outcome(const struct native_job *j, struct ipc_worker_response *wr,
                   char *msg, size_t msglen)
{
    struct ipc_fb_error fe;

    memset(wr, 0, sizeof *wr);
    msg[0] = '\0';
    if (j->rc != 0) {
        snprintf(msg, msglen, "Process returned %d", (int)j->rc);
        return "worker_error";
    }
    if (j->out == NULL)
        return NULL; /* no reply */
    if (j->out_len <= 0 ||
        ipc_worker_response_read(j->out, (size_t)j->out_len, wr, &fe) != 0) {
        char why[256];
        if (j->out_len <= 0)
            snprintf(why, sizeof why, "length %d", (int)j->out_len);
        else
            ipc_fb_error_format(&fe, why, sizeof why);
        memset(wr, 0, sizeof *wr);
        snprintf(msg, msglen, "the worker's output is not a WorkerResponse: %s",
                 why);
        return "worker_error";
    }
    if (wr->error_message.ptr) {
        snprintf(msg, msglen, "%.*s", (int)wr->error_message.len,
                 wr->error_message.ptr);
        return "worker_error";
    }
    return NULL;
}

const char *
native_job_result(const struct native_job *j, struct ipc_result *r,
                  struct ipc_worker_response *wr, char *msg, size_t msglen)
{
    const char *type = native_job_outcome(j, wr, msg, msglen);

    memset(r, 0, sizeof *r);
    if (wr->has_result) {
        r->outputs.n = 1;
        r->outputs.items = &wr->result_event;
    }
    if (type) {
        r->error.type = ipc_str_c(type);
        r->error.message = ipc_str_c(msg);
    }
    return type;
}

/* Frees what the loader holds; no thread is left to use it. */
static void
loader_destroy(struct native_loader *nl)
{
    struct native_job *j;

    while ((j = nl->done) != NULL) {
        nl->done = j->next;
        native_job_free(j);
    }
    while ((j = nl->todo) != NULL) {
        nl->todo = j->next;
        native_job_free(j);
    }
    library_close(nl->lib, nl->lib_fd);
    close(nl->efd);
    pthread_cond_destroy(&nl->work_cv);
    pthread_cond_destroy(&nl->call_cv);
    pthread_mutex_destroy(&nl->mu);
    free(nl);
}

void
native_loader_close(struct native_loader *nl)
{
    struct native_job *j;
    struct native_call *c;

    if (nl == NULL)
        return;
    restore_identity(nl);
    pthread_mutex_lock(&nl->mu);
    /* Queued jobs never ran: they go. */
    while ((j = nl->todo) != NULL) {
        nl->todo = j->next;
        native_job_free(j);
    }
    nl->todo_tail = &nl->todo;
    nl->queued = 0;
    nl->stopping = true;
    bool running = nl->nthreads - nl->idle > 0;
    if (running)
        nl->detached = true;
    /* Log lines are dropped; gateway calls answered 503 (their threads
     * free them). */
    while ((c = nl->calls) != NULL) {
        nl->calls = c->next;
        if (c->is_log) {
            call_free(c);
            continue;
        }
        c->status = 503;
        c->done = true;
    }
    /* Detached under the lock, which a thread needs to end: the last to
     * end frees the loader, so nl is not touched after the unlock. */
    if (running)
        for (unsigned i = 0; i < nl->nthreads; i++)
            pthread_detach(nl->threads[i]);
    pthread_cond_broadcast(&nl->work_cv);
    pthread_cond_broadcast(&nl->call_cv);
    pthread_mutex_unlock(&nl->mu);
    if (running)
        return;
    for (unsigned i = 0; i < nl->nthreads; i++)
        pthread_join(nl->threads[i], NULL);
    loader_destroy(nl);
}
