/*
 * pyhost.c — wm-host-python: embedded CPython serving one Python worker
 * (pyhost.h; DESIGN §5, §10; issue 8): the host's operations on the
 * hosts' skeleton (hosts/common/host.h), its jobs and its loop.  The
 * interpreter and the import guard are interp.c's, the `workmanager`
 * module module.c's.
 *
 * Serve (pyhost_serve): a Load's and a Process's paths run once on a
 * module of its own (prefault(): a forked host's copy-on-write faults
 * paid before any worker waits, which a warm pool host does before it is
 * taken), the role's steps, the channel on fd 3, and one job at a time.
 * Frames arrive in the channel's callback, but the work they ask for (a
 * Load runs the module's top level, a Process the worker) runs outside
 * it, from the loop below, because a worker's workmanager.state.get()
 * waits for its GatewayReply by running the event loop itself
 * (event_base_loop(EVLOOP_ONCE)), which libevent does not allow from
 * inside one of its callbacks.  Frames that arrive meanwhile (a
 * Heartbeat, Shutdown) are answered or noted there; jobs are queued.
 * The host runs one Process at a time (max_inflight = 1) and says in its
 * Hello that it takes PYHOST_PREFETCH more meanwhile, which wait in
 * `jobs` in order; the master starts their deadlines as they start, and
 * sends a Load for a reload only when nothing is in flight
 * (master/supervise/pump.c, load.c).  Between jobs, wait_for_job() polls
 * before it sleeps while events come close together.  Each job's frames
 * go out as it ends (run()), not from the loop's next turn.
 *
 * Hot reload: the new module replaces the old one only once it loaded;
 * the old one is dropped (not in sys.modules, never was) and a
 * collection frees its cycles (functions ↔ globals).
 *
 * The worker's stdout and stderr, and workmanager.log(), become Log
 * frames, within a budget per job (module.h); what is over is counted and
 * said once at the job's end.
 */
#include "config.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hosts/python/pyhost.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "hosts/common/host.h"
#include "hosts/python/convert.h"
#include "hosts/python/interp.h"
#include "hosts/python/module.h"
#include "ipc/channel.h"
#include "ipc/cloudevent.h"
#include "sandbox/sandbox.h"

/* The largest module source a Load may bring. */
#define CODE_MAX (8u << 20)
/* Tracebacks and messages are cut to fit a frame comfortably. */
#define TRACEBACK_MAX (32u << 10)
/* The events the master may send while one runs (the Hello's prefetch):
 * they wait in `jobs`, so the next starts as a Result leaves rather than
 * a round trip later, and results and events cross in fewer wake-ups
 * (bench/README.md, "Python engine").  The master sends them only while
 * the host's events take under 1 ms, so one waits here 32 ms at most. */
#define PYHOST_PREFETCH 32u
/* How long a host polls for the next event before it sleeps, while
 * events come close together (wait_for_job()). */
#define SPIN_NS 50000

static struct event_base *base;
static bool busy; /* a job runs */

/* The loaded worker: its module's dict, Process, and its source. */
static PyObject *worker_globals, *worker_process, *worker_source;

enum job_kind { JOB_LOAD, JOB_PROCESS };

struct job {
    struct job *next;
    enum job_kind kind;
    uint64_t seq;
    uint8_t *buf; /* Load: the source; Process: the event buffer */
    size_t len;
    char worker[128];
    unsigned version;
};

static struct job *jobs, **jobs_tail = &jobs;

/* ---- jobs --------------------------------------------------------------- */

/* The pending exception into e (type, message, traceback as strings kept
 * in *keep), cleared.  MemoryError and its kin may leave the traceback
 * out. */
static void
exception_error(struct ipc_error *e, char *type, size_t typelen, char *msg,
                size_t msglen, PyObject **keep)
{
    PyObject *t, *v, *tb;

    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb && v)
        PyException_SetTraceback(v, tb);
    const PyTypeObject *tp = (const PyTypeObject *)t;
    PyObject *mod = t ? PyObject_GetAttrString(t, "__module__") : NULL;
    const char *m = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
    PyErr_Clear();
    const char *dot = tp ? strrchr(tp->tp_name, '.') : NULL;
    const char *bare = tp ? (dot ? dot + 1 : tp->tp_name) : "Exception";
    if (m && strcmp(m, "builtins") != 0)
        snprintf(type, typelen, "%s.%s", m, bare);
    else
        snprintf(type, typelen, "%s", bare);
    Py_XDECREF(mod);

    PyObject *s = v ? PyObject_Str(v) : NULL;
    const char *text = s ? PyUnicode_AsUTF8(s) : NULL;
    PyErr_Clear();
    if (text && text[0])
        snprintf(msg, msglen, "%s: %s", bare, text);
    else
        snprintf(msg, msglen, "%s", bare);
    Py_XDECREF(s);

    *keep = pyhost_interp_traceback(t, v, tb);
    memset(e, 0, sizeof *e);
    e->type = ipc_str_c("exception");
    e->message = ipc_str_c(msg);
    e->exception_type = ipc_str_c(type);
    Py_ssize_t n = 0;
    const char *tbs = *keep ? PyUnicode_AsUTF8AndSize(*keep, &n) : NULL;
    PyErr_Clear();
    if (tbs) {
        /* the end of a long traceback is where it failed */
        if ((size_t)n > TRACEBACK_MAX) {
            tbs += (size_t)n - TRACEBACK_MAX;
            n = TRACEBACK_MAX;
        }
        e->traceback = (struct ipc_str){ tbs, (uint32_t)n };
    }
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
}

/* Runs the module's source in a fresh module; swaps it in when it
 * defines a callable Process. */
static void
run_load(struct job *j)
{
    char msg[2048], type[256];
    PyObject *keep = NULL;
    PyObject *g = PyDict_New();
    PyObject *code = NULL, *r = NULL, *src = NULL, *proc;
    struct ipc_error e;
    bool replaced = false;

    PyObject *name = PyUnicode_FromString("worker");
    int rc = g && name ? PyDict_SetItemString(g, "__name__", name) : -1;
    Py_XDECREF(name);
    if (rc < 0 ||
        PyDict_SetItemString(g, "__builtins__", pyhost_interp_builtins()) < 0)
        goto exception;
    code = Py_CompileStringExFlags((const char *)j->buf, "worker.py",
                                   Py_file_input, NULL, -1);
    if (code == NULL)
        goto exception;
    src = PyUnicode_DecodeUTF8((const char *)j->buf, (Py_ssize_t)j->len,
                               "replace");
    pyhost_interp_remember(src);
    r = PyEval_EvalCode(code, g, g);
    if (r == NULL)
        goto exception;
    proc = PyDict_GetItemString(g, "Process");
    if (proc == NULL) {
        host_loaded_reply(j->seq, "the module defines no Process(event)");
        goto out;
    }
    if (!PyCallable_Check(proc)) {
        snprintf(msg, sizeof msg,
                 "Process is a %s, not a function: the module must define "
                 "Process(event)",
                 Py_TYPE(proc)->tp_name);
        host_loaded_reply(j->seq, msg);
        goto out;
    }
    replaced = worker_globals != NULL;
    Py_XDECREF(worker_globals);
    Py_XDECREF(worker_process);
    Py_XDECREF(worker_source);
    worker_process = Py_NewRef(proc);
    worker_globals = g;
    worker_source = src;
    g = src = NULL;
    pyhost_module_set_worker(j->worker);
    host_loaded_reply(j->seq, NULL);
    host_log(IPC_LOG_INFO, "loaded worker %s version %u", j->worker,
             j->version);
    goto out;

exception:
    exception_error(&e, type, sizeof type, msg, sizeof msg, &keep);
    e.type = ipc_str_c("load_error");
    host_loaded_error(j->seq, &e);
out:
    if (src) /* it did not load: the running module's lines again */
        pyhost_interp_remember(worker_source);
    Py_XDECREF(src);
    Py_XDECREF(keep);
    Py_XDECREF(r);
    Py_XDECREF(code);
    if (g) {
        PyDict_Clear(g);
        Py_DECREF(g);
        replaced = true; /* the failed module's cycles */
    }
    /* The old module's cycles, or the failed one's, once the answer is
     * on its way (a first load leaves none worth a collection: the
     * interpreter's own objects are frozen, gc.freeze()). */
    if (replaced) {
        (void)ipc_channel_flush(host_channel(), 0);
        PyGC_Collect();
    }
}

static void
worker_error(uint64_t seq, const char *msg)
{
    const struct ipc_result r = {
        .error = { .type = ipc_str_c("worker_error"),
                   .message = ipc_str_c(msg) },
    };

    host_result_send(seq, &r);
}

static void
run_process(struct job *j)
{
    struct ipc_cloudevent in;
    struct ipc_fb_error fe;
    struct pyhost_outputs o;
    char err[2048], type[256];
    PyObject *d = NULL, *ret = NULL, *keep = NULL;
    struct ipc_result r;

    memset(&o, 0, sizeof o);
    if (ipc_cloudevent_read(j->buf, j->len, &in, &fe) < 0) {
        worker_error(j->seq, "the event is not a CloudEvent");
        return;
    }
    if (worker_process == NULL) {
        worker_error(j->seq, "no worker code is loaded");
        return;
    }
    d = pyhost_event_dict(&in);
    if (d)
        ret = PyObject_CallOneArg(worker_process, d);
    memset(&r, 0, sizeof r);
    if (ret == NULL) {
        exception_error(&r.error, type, sizeof type, err, sizeof err, &keep);
        host_result_send(j->seq, &r);
    } else if (pyhost_outputs_make(ret, &in, pyhost_module_source(), &o, err,
                                   sizeof err) < 0) {
        worker_error(j->seq, err);
    } else {
        r.outputs = (struct ipc_cloudevent_list){ .n = o.n, .items = o.v };
        host_result_send(j->seq, &r);
    }
    pyhost_outputs_free(&o);
    Py_XDECREF(keep);
    Py_XDECREF(ret);
    Py_XDECREF(d);
}

/*
 * A Load's and a Process's paths once, on a module and an event of its
 * own, before the filter and the Hello, nothing sent: a forked host's
 * first writes to the interpreter's shared pages (copy-on-write faults:
 * most of its first event's time) happen here, before a worker waits for
 * them when the host waits in a warm pool (master/supervise/supervise.h;
 * measured in research: the first event 0.97 -> 0.25 ms).  What fails is
 * ignored.
 */
static void
prefault(void)
{
    static const char module[] = "def Process(event):\n"
                                 "    return {'type': 'x', 'data': "
                                 "event['data']}\n";
    static const char data[] = "{\"n\": [1, \"x\", true, null]}";
    const struct ipc_cloudevent in = {
        .id = ipc_str_c("prefault"),
        .type = ipc_str_c("x"),
        .source = ipc_str_c("urn:x"),
        .specversion = ipc_str_c("1.0"),
        .datacontenttype = ipc_str_c("application/json"),
        .data = { .ptr = (const uint8_t *)data,
                  .len = (uint32_t)(sizeof data - 1) },
    };
    struct pyhost_outputs o;
    char err[256];
    PyObject *g = PyDict_New(), *code = NULL, *r = NULL, *d = NULL;
    PyObject *ret = NULL, *proc;

    memset(&o, 0, sizeof o);
    if (g == NULL ||
        PyDict_SetItemString(g, "__builtins__", pyhost_interp_builtins()) < 0)
        goto out;
    code =
        Py_CompileStringExFlags(module, "worker.py", Py_file_input, NULL, -1);
    if (code == NULL || (r = PyEval_EvalCode(code, g, g)) == NULL)
        goto out;
    proc = PyDict_GetItemString(g, "Process");
    if (proc == NULL || (d = pyhost_event_dict(&in)) == NULL)
        goto out;
    if ((ret = PyObject_CallOneArg(proc, d)) != NULL)
        (void)pyhost_outputs_make(ret, &in, pyhost_module_source(), &o, err,
                                  sizeof err);
out:
    pyhost_outputs_free(&o);
    Py_XDECREF(ret);
    Py_XDECREF(d);
    Py_XDECREF(r);
    Py_XDECREF(code);
    if (g) {
        PyDict_Clear(g);
        Py_DECREF(g);
    }
    PyErr_Clear();
    PyGC_Collect();
}

/* One job, its output flushed and its log budget said and reset. */
static void
run(struct job *j)
{
    busy = true;
    pyhost_module_job_begin();
    if (j->kind == JOB_LOAD)
        run_load(j);
    else
        run_process(j);
    /* the partial lines of stdout and stderr */
    pyhost_interp_flush();
    pyhost_module_job_end();
    /* The job's frames (its Result or Loaded, its log lines) go out now,
     * in one sendmsg, rather than from the loop's next turn: a turn is an
     * epoll_wait more per event, about 2 us of the round trip here.  What
     * the socket does not take at once is left to the loop. */
    (void)ipc_channel_flush(host_channel(), 0);
    busy = false;
    free(j->buf);
    free(j);
}

/* ---- frames ------------------------------------------------------------- */

static void
queue(struct job *j)
{
    *jobs_tail = j;
    jobs_tail = &j->next;
}

/* Every job is done (python_ops.idle): none runs, none waits. */
static bool
idle(void)
{
    return !busy && jobs == NULL;
}

/* A Load: its source read now (the memfd is the frame's), run as a job. */
static void
on_load(const struct ipc_frame *f, int *fds, unsigned nfds)
{
    const struct ipc_load *l = &f->u.load;
    struct job *j = calloc(1, sizeof *j);
    char err[512];

    if (j == NULL)
        host_die("calloc");
    j->kind = JOB_LOAD;
    j->seq = f->seq;
    j->version = l->version;
    snprintf(j->worker, sizeof j->worker, "%.*s", (int)l->worker_id.len,
             l->worker_id.ptr ? l->worker_id.ptr : "");
    j->buf = host_code_read(l, fds, nfds, CODE_MAX, "module", &j->len, err,
                            sizeof err);
    if (j->buf == NULL || memchr(j->buf, '\0', j->len) != NULL) {
        host_loaded_reply(f->seq, j->buf ? "the module's source contains a "
                                           "NUL byte"
                                         : err);
        free(j->buf);
        free(j);
        return;
    }
    queue(j);
}

/* A Process: the event's bytes copied (the frame's views die with the
 * callback), run as a job. */
static void
on_process(const struct ipc_frame *f)
{
    struct job *j = calloc(1, sizeof *j);

    if (j == NULL)
        host_die("calloc");
    j->kind = JOB_PROCESS;
    j->seq = f->seq;
    j->len = f->u.process.event.len;
    if ((j->buf = malloc(j->len ? j->len : 1)) == NULL)
        host_die("malloc");
    memcpy(j->buf, f->u.process.event.ptr, j->len);
    queue(j);
}

/* ---- the loop ---------------------------------------------------------- */

static int64_t
mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Runs the loop until a job is queued.  While events come close together
 * (the last wait was under SPIN_NS) it first polls the channel for up to
 * SPIN_NS without sleeping: the next event then costs no wake-up of this
 * process, the largest part of a round trip on a VM (bench/README.md,
 * "Python engine").  A host that waited longer sleeps at once, so an idle
 * or sporadic one spends nothing on it. */
static void
wait_for_job(void)
{
    static int64_t last_wait_ns = INT64_MAX;
    static int64_t since = -1; /* the current wait's start */
    int64_t t0 = mono_ns();

    if (since < 0) {
        since = t0;
        if (last_wait_ns <= SPIN_NS)
            while (jobs == NULL && mono_ns() - t0 <= SPIN_NS)
                if (event_base_loop(base, EVLOOP_NONBLOCK) < 0)
                    host_die("event_base_loop");
    }
    if (jobs == NULL && event_base_loop(base, EVLOOP_ONCE) < 0)
        host_die("event_base_loop");
    if (jobs != NULL) {
        last_wait_ns = mono_ns() - since;
        since = -1;
    }
}

/* The host's loop (python_ops.serve): one job at a time, outside every
 * libevent callback (see the top). */
static void
serve(struct event_base *b)
{
    base = b;
    if (pyhost_interp_warnings()[0])
        host_log(IPC_LOG_WARN, "%s", pyhost_interp_warnings());
    for (;;) {
        host_exit_if_done();
        if (jobs == NULL) {
            wait_for_job();
            continue;
        }
        struct job *j = jobs;
        jobs = j->next;
        if (jobs == NULL)
            jobs_tail = &jobs;
        run(j);
    }
}

/* Before the filter: a forked host's own ids, its paths pre-faulted. */
static void
prepare(struct event_base *b)
{
    (void)b;
    pyhost_convert_reseed(); /* a forked host's ids are its own */
    prefault();
}

static const struct host_ops python_ops = {
    .name = "wm-host-python",
    .engine = "python",
    .max_inflight = 1,
    .prefetch = PYHOST_PREFETCH,
    .confine = host_confine,
    .role = &sandbox_role_python,
    .prepare = prepare,
    .load = on_load,
    .process = on_process,
    .idle = idle,
    .serve = serve,
};

void
pyhost_serve(void)
{
    host_run(&python_ops);
}
