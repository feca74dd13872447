/*
 * pyhost.c — wm-host-python: embedded CPython serving one Python worker
 * (pyhost.h; DESIGN §5, §10; issue 8).
 *
 * Init (pyhost_init, before any confinement): an isolated interpreter,
 * then every module a worker may import, the allowed packages and the
 * preloads imported, since the filter refuses every path afterwards (an
 * import that was not done here finds nothing: ImportError).  Then the
 * guard: the worker's module gets a builtins dict of its own whose
 * __import__ refuses what allow.h does not allow ("ImportError: os is not
 * allowed"); the interpreter's own builtins keep the real one, so that
 * the standard library's lazy imports of modules loaded already work.
 * The guard is a convenience with a clear message: a worker that reaches
 * posix, ctypes or the import machinery through the object graph still
 * meets the filter (sandbox/role_python.c), which refuses opening,
 * forking, executing and sockets.  Last, json is warmed and the heap
 * frozen for a zygote's copy-on-write (gc.freeze()).
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
 * before it sleeps while events come close together.
 *
 * Hot reload: the new module replaces the old one only once it loaded;
 * the old one is dropped (not in sys.modules, never was) and a
 * collection frees its cycles (functions ↔ globals).
 *
 * The worker's stdout and stderr, and workmanager.log(), become Log
 * frames, at most LOG_LINES lines and LOG_BYTES bytes per job (a Load or
 * a Process); what is over is counted and said once at the job's end.
 */
#include "config.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hosts/python/pyhost.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "hosts/python/allow.h"
#include "hosts/python/convert.h"
#include "ipc/channel.h"
#include "ipc/cloudevent.h"
#ifdef WM_SANDBOX
#include "sandbox/sandbox.h"
#endif

#define HOST_FD 3
/* Debian's interpreter: /usr/bin/python3's prefix. */
#define PY_HOME L"/usr"
/* The largest module source a Load may bring. */
#define CODE_MAX (8u << 20)
/* The worker's log per job (see the top). */
#define LOG_LINES 200u
#define LOG_BYTES (64u << 10)
/* Tracebacks and messages are cut to fit a frame comfortably. */
#define TRACEBACK_MAX (32u << 10)
/* How long a Result may wait for the queue ahead of it to drain. */
#define FLUSH_MS 10000u
/* The events the master may send while one runs (the Hello's prefetch):
 * they wait in `jobs`, so the next starts as a Result leaves rather than
 * a round trip later, and results and events cross in fewer wake-ups
 * (bench/README.md, "Python engine").  The master sends them only while
 * the host's events take under 1 ms, so one waits here 32 ms at most. */
#define PYHOST_PREFETCH 32u
/* How long a host polls for the next event before it sleeps, while
 * events come close together (wait_for_job()). */
#define SPIN_NS 50000

static struct pyhost_allow allow;
static PyObject *guard_builtins;   /* the worker module's __builtins__ */
static PyObject *real_import;      /* builtins.__import__ */
static PyObject *format_exception; /* traceback.format_exception */
static PyObject *glue;             /* the namespace of GLUE below */
static PyObject *flush_out;        /* its flush(), after every job */
static char init_warnings[2048];   /* sent as a Log once connected */

static struct event_base *base;
static struct ipc_channel *ch;
static bool shutting_down, busy;
static char worker_id[128] = "";
static char source[192] = "urn:workmanager:worker";

/* The loaded worker: its module's dict, Process, and its source. */
static PyObject *worker_globals, *worker_process, *worker_source;

/* The log budget of the current job. */
static unsigned log_lines, log_bytes, log_dropped;

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

static void die(const char *what) __attribute__((noreturn));

static void
die(const char *what)
{
    fprintf(stderr, "wm-host-python[%d]: %s: %s\n", (int)getpid(), what,
            strerror(errno));
    _exit(1);
}

/* Sends f; a full queue is written out first (the frames ahead of a
 * Result are the job's own Log frames, bounded). */
static int
send_frame(const struct ipc_frame *f)
{
    int rc = ipc_channel_send(ch, f, NULL, 0);

    if (rc < 0 && errno == EAGAIN && ipc_channel_flush(ch, FLUSH_MS) == 0)
        rc = ipc_channel_send(ch, f, NULL, 0);
    return rc;
}

static void
send_log(enum ipc_log_level level, const char *msg, size_t len)
{
    struct ipc_frame f;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_LOG;
    f.u.log.level = level;
    f.u.log.message =
        (struct ipc_str){ msg, (uint32_t)(len > 1023 ? 1023 : len) };
    if (send_frame(&f) < 0 && errno != EAGAIN)
        die("send a Log");
}

/* ---- the workmanager module -------------------------------------------- */

static PyObject *gateway_error; /* workmanager.GatewayError */

/* One worker log line, within the job's budget. */
static void
worker_log(enum ipc_log_level level, const char *msg, size_t len)
{
    if (ch == NULL) {
        fprintf(stderr, "wm-host-python[%d]: %.*s\n", (int)getpid(),
                (int)(len > 1023 ? 1023 : len), msg);
        return;
    }
    if (log_lines >= LOG_LINES || log_bytes + len > LOG_BYTES) {
        log_dropped++;
        return;
    }
    log_lines++;
    log_bytes += (unsigned)len;
    send_log(level, msg, len);
}

static int
level_of(PyObject *v, enum ipc_log_level *out)
{
    static const char *const names[] = { "trace", "debug", "info", "warning",
                                         "error" };
    if (PyLong_Check(v)) {
        long n = PyLong_AsLong(v);
        if (n >= 0 && n <= IPC_LOG_ERROR) {
            *out = (enum ipc_log_level)n;
            return 0;
        }
    } else if (PyUnicode_Check(v)) {
        const char *s = PyUnicode_AsUTF8(v);
        for (int i = 0; s && i <= IPC_LOG_ERROR; i++)
            if (strcasecmp(s, names[i]) == 0 ||
                (i == IPC_LOG_WARN && strcasecmp(s, "warn") == 0)) {
                *out = (enum ipc_log_level)i;
                return 0;
            }
    }
    PyErr_Clear();
    PyErr_SetString(PyExc_ValueError,
                    "log level is one of trace, debug, info, warning, "
                    "error (or 0-4)");
    return -1;
}

/* workmanager.log(level, msg) */
static PyObject *
wm_log(PyObject *self, PyObject *args)
{
    PyObject *lv, *msg;
    enum ipc_log_level level;
    Py_ssize_t n;

    (void)self;
    if (!PyArg_ParseTuple(args, "OO:log", &lv, &msg) || level_of(lv, &level))
        return NULL;
    PyObject *s = PyObject_Str(msg);
    const char *p = s ? PyUnicode_AsUTF8AndSize(s, &n) : NULL;
    if (p)
        worker_log(level, p, (size_t)n);
    Py_XDECREF(s);
    if (p == NULL)
        return NULL;
    Py_RETURN_NONE;
}

/*
 * Calls service.method with request (a dict, JSON-encoded here) and waits
 * for the reply by running the event loop (see the top).  The decoded
 * response (a new reference), or NULL with a Python exception:
 * GatewayError naming the status and the message.  *status gets the
 * status when not NULL (a 404 is then the caller's to read: None
 * returned, no exception).
 */
static PyObject *
gateway(const char *service, const char *method, PyObject *request, int *status)
{
    struct ipc_gateway_answer w = { 0 };
    Py_ssize_t n;
    PyObject *json = PyImport_ImportModule("json");
    PyObject *text =
        json ? PyObject_CallMethod(json, "dumps", "O", request) : NULL;
    const char *req = text ? PyUnicode_AsUTF8AndSize(text, &n) : NULL;
    PyObject *out = NULL;

    if (req == NULL)
        goto out;
    if (ch == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no channel to the daemon");
        goto out;
    }
    if (ipc_channel_gateway_call(
            ch, ipc_str_c(service), ipc_str_c(method),
            (struct ipc_bytes){ (const uint8_t *)req, (uint32_t)n }, &w) < 0) {
        if (errno == EIO)
            die("event_base_loop");
        if (errno == ENOMEM)
            PyErr_NoMemory();
        else
            PyErr_Format(gateway_error, "%s %s: cannot send the call: %s",
                         service, method, strerror(errno));
        goto out;
    }
    if (status)
        *status = w.status;
    if (w.status == 200)
        out =
            PyObject_CallMethod(json, "loads", "s#", w.body, (Py_ssize_t)w.len);
    else if (status && w.status == 404)
        out = Py_NewRef(Py_None);
    else
        PyErr_Format(gateway_error, "%s %s: %d %s", service, method, w.status,
                     w.body);
out:
    free(w.body);
    Py_XDECREF(text);
    Py_XDECREF(json);
    return out;
}

/* workmanager.publish(topic, event) → the published event's id */
static PyObject *
wm_publish(PyObject *self, PyObject *args)
{
    const char *topic;
    PyObject *ev, *out = NULL, *req = NULL, *structured = NULL, *res = NULL;
    struct pyhost_outputs o;
    char err[1024];

    (void)self;
    if (!PyArg_ParseTuple(args, "sO!:publish", &topic, &PyDict_Type, &ev))
        return NULL;
    if (pyhost_outputs_make(ev, NULL, source, &o, err, sizeof err) < 0) {
        pyhost_outputs_free(&o);
        PyErr_Format(PyExc_ValueError, "publish: %s", err);
        return NULL;
    }
    structured = pyhost_event_structured(&o.v[0]);
    if (structured)
        req = Py_BuildValue("{s:s,s:O}", "topic", topic, "event", structured);
    if (req)
        res = gateway("workmanager.publish", "publish", req, NULL);
    if (res) {
        out = PyDict_Check(res) ? PyDict_GetItemString(res, "id") : NULL;
        out = Py_NewRef(out ? out : Py_None);
    }
    Py_XDECREF(res);
    Py_XDECREF(req);
    Py_XDECREF(structured);
    pyhost_outputs_free(&o);
    return out;
}

/* workmanager.state.get(key, default=None) */
static PyObject *
wm_state_get(PyObject *self, PyObject *args)
{
    const char *key;
    PyObject *def = Py_None, *req, *res, *out = NULL;
    int status = 0;

    (void)self;
    if (!PyArg_ParseTuple(args, "s|O:get", &key, &def))
        return NULL;
    if ((req = Py_BuildValue("{s:s}", "key", key)) == NULL)
        return NULL;
    res = gateway("workmanager.state", "get", req, &status);
    Py_DECREF(req);
    if (res == NULL)
        return NULL;
    if (status == 404) {
        out = Py_NewRef(def);
    } else if (status != 200) {
        PyErr_Format(gateway_error, "workmanager.state get: %d", status);
    } else {
        out = PyDict_Check(res) ? PyDict_GetItemString(res, "value") : NULL;
        out = Py_NewRef(out ? out : Py_None);
    }
    Py_DECREF(res);
    return out;
}

/* workmanager.state.put(key, value) */
static PyObject *
wm_state_put(PyObject *self, PyObject *args)
{
    const char *key;
    PyObject *value, *req, *res;

    (void)self;
    if (!PyArg_ParseTuple(args, "sO:put", &key, &value))
        return NULL;
    if ((req = Py_BuildValue("{s:s,s:O}", "key", key, "value", value)) == NULL)
        return NULL;
    res = gateway("workmanager.state", "put", req, NULL);
    Py_DECREF(req);
    if (res == NULL)
        return NULL;
    Py_DECREF(res);
    Py_RETURN_NONE;
}

/* workmanager.state.delete(key) → whether it was there */
static PyObject *
wm_state_delete(PyObject *self, PyObject *args)
{
    const char *key;
    PyObject *req, *res;
    int status = 0;

    (void)self;
    if (!PyArg_ParseTuple(args, "s:delete", &key))
        return NULL;
    if ((req = Py_BuildValue("{s:s}", "key", key)) == NULL)
        return NULL;
    res = gateway("workmanager.state", "delete", req, &status);
    Py_DECREF(req);
    if (res == NULL)
        return NULL;
    Py_DECREF(res);
    if (status != 200 && status != 404) {
        PyErr_Format(gateway_error, "workmanager.state delete: %d", status);
        return NULL;
    }
    return PyBool_FromLong(status == 200);
}

static PyMethodDef wm_methods[] = {
    { "log", wm_log, METH_VARARGS,
      "log(level, msg): a line in the daemon's log (trace, debug, info, "
      "warning, error)" },
    { "publish", wm_publish, METH_VARARGS,
      "publish(topic, event): publishes a CloudEvent dict; returns its id" },
    { NULL, NULL, 0, NULL },
};

static PyMethodDef state_methods[] = {
    { "get", wm_state_get, METH_VARARGS,
      "get(key, default=None): the worker's value of key" },
    { "put", wm_state_put, METH_VARARGS,
      "put(key, value): stores a JSON value under key" },
    { "delete", wm_state_delete, METH_VARARGS,
      "delete(key): removes key; whether it was there" },
    { NULL, NULL, 0, NULL },
};

static struct PyModuleDef wm_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "workmanager",
    .m_doc = "The daemon's services for Python workers: log, publish, state.",
    .m_size = -1,
    .m_methods = wm_methods,
};

static PyObject *
wm_module_init(void)
{
    PyObject *m = PyModule_Create(&wm_module);
    PyObject *state = PyModule_New("workmanager.state");

    if (m == NULL || state == NULL ||
        PyModule_AddFunctions(state, state_methods) < 0 ||
        PyModule_AddObject(m, "state", state) < 0)
        goto fail;
    gateway_error = PyErr_NewException("workmanager.GatewayError",
                                       PyExc_RuntimeError, NULL);
    if (gateway_error == NULL ||
        PyModule_AddObject(m, "GatewayError", Py_NewRef(gateway_error)) < 0)
        goto fail;
    return m;

fail:
    Py_XDECREF(state);
    Py_XDECREF(m);
    return NULL;
}

/* ---- the import guard --------------------------------------------------- */

static PyObject *
refuse(PyObject *name)
{
    PyObject *msg = PyUnicode_FromFormat("%U is not allowed", name);
    if (msg) {
        PyErr_SetImportError(msg, name, NULL);
        Py_DECREF(msg);
    }
    return NULL;
}

/* __import__(name, globals=None, locals=None, fromlist=(), level=0) of the
 * worker's module: the allowlist's, then the real one. */
static PyObject *
guarded_import(PyObject *self, PyObject *args, PyObject *kw)
{
    static char name_[] = "name", globals_[] = "globals", locals_[] = "locals",
                fromlist_[] = "fromlist", level_[] = "level";
    static char *kws[] = { name_, globals_, locals_, fromlist_, level_, NULL };
    PyObject *name, *globals = NULL, *locals = NULL, *fromlist = NULL;
    int level = 0;

    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "U|OOOi:__import__", kws, &name,
                                     &globals, &locals, &fromlist, &level))
        return NULL;
    if (level != 0) {
        PyErr_SetString(PyExc_ImportError, "relative imports are not allowed");
        return NULL;
    }
    const char *s = PyUnicode_AsUTF8(name);
    if (s == NULL)
        return NULL;
    if (!pyhost_allow_check(&allow, s))
        return refuse(name);
    if (fromlist && fromlist != Py_None && PyObject_IsTrue(fromlist) == 1) {
        PyObject *it = PyObject_GetIter(fromlist), *item;
        if (it == NULL)
            return NULL;
        while ((item = PyIter_Next(it)) != NULL) {
            const char *i =
                PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
            PyObject *full = i && strcmp(i, "*") != 0
                                 ? PyUnicode_FromFormat("%s.%s", s, i)
                                 : NULL;
            bool ok = full == NULL ||
                      pyhost_allow_check(&allow, PyUnicode_AsUTF8(full));
            Py_DECREF(item);
            if (!ok) {
                Py_DECREF(it);
                refuse(full);
                Py_DECREF(full);
                return NULL;
            }
            Py_XDECREF(full);
        }
        Py_DECREF(it);
        if (PyErr_Occurred())
            return NULL;
    }
    return PyObject_Call(real_import, args, kw);
}

static PyMethodDef guard_def = { "__import__",
                                 (PyCFunction)(void (*)(void))guarded_import,
                                 METH_VARARGS | METH_KEYWORDS,
                                 "__import__ within the worker's allowlist" };

/* ---- init --------------------------------------------------------------- */

/* The Python side: the module's source for tracebacks (linecache), and
 * the worker's stdout and stderr as Log lines, a line
 * at a time, the partial line bounded. */
static const char GLUE[] =
    "import workmanager as _wm\n"
    "class _Out:\n"
    "    encoding = 'utf-8'\n"
    "    errors = 'replace'\n"
    "    def __init__(self, level):\n"
    "        self.level, self.buf = level, ''\n"
    "    def write(self, s):\n"
    "        s = str(s)\n"
    "        self.buf += s\n"
    "        while '\\n' in self.buf or len(self.buf) > 1000:\n"
    "            i = self.buf.find('\\n')\n"
    "            if i < 0 or i > 1000:\n"
    "                i = 1000\n"
    "            line, self.buf = self.buf[:i], self.buf[i + 1:]\n"
    "            _wm.log(self.level, line)\n"
    "        return len(s)\n"
    "    def flush(self):\n"
    "        if self.buf:\n"
    "            line, self.buf = self.buf, ''\n"
    "            _wm.log(self.level, line)\n"
    "    def isatty(self):\n"
    "        return False\n"
    "    def writable(self):\n"
    "        return True\n"
    "import linecache as _lc\n"
    "def remember(src):\n"
    "    _lc.cache['worker.py'] = (len(src), None, src.splitlines(True),\n"
    "                              'worker.py')\n"
    "_outs = (_Out(2), _Out(3))\n"
    "def flush():\n"
    "    for f in _outs:\n"
    "        if f.buf:\n"
    "            f.flush()\n";

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A warning for the log once the channel is up. */
static void
note(const char *fmt, ...)
{
    size_t used = strlen(init_warnings);
    va_list ap;

    if (used + 3 >= sizeof init_warnings)
        return;
    if (used)
        used += (size_t)snprintf(init_warnings + used,
                                 sizeof init_warnings - used, "; ");
    va_start(ap, fmt);
    vsnprintf(init_warnings + used, sizeof init_warnings - used, fmt, ap);
    va_end(ap);
}

static int
config_status(PyStatus st, const char *what, char *err, size_t errlen)
{
    if (!PyStatus_Exception(st))
        return 0;
    snprintf(err, errlen, "%s: %s%s%s", what, st.func ? st.func : "",
             st.func ? ": " : "", st.err_msg ? st.err_msg : "failed");
    return -1;
}

/* The interpreter, isolated (pyhost.h). */
static int
interpreter(char *err, size_t errlen)
{
    PyPreConfig pre;
    PyConfig c;
    PyStatus st;
    wchar_t path[64];

    PyPreConfig_InitIsolatedConfig(&pre);
    pre.utf8_mode = 1;
    if (config_status(Py_PreInitialize(&pre), "preinitializing Python", err,
                      errlen))
        return -1;
    if (PyImport_AppendInittab("workmanager", wm_module_init) < 0) {
        snprintf(err, errlen, "cannot add the workmanager module");
        return -1;
    }
    PyConfig_InitIsolatedConfig(&c);
    c.site_import = 0;
    c.write_bytecode = 0;
    c.install_signal_handlers = 0;
    c.buffered_stdio = 0;
    c.user_site_directory = 0;
    c.parse_argv = 0;
    st = PyConfig_SetString(&c, &c.home, PY_HOME);
    if (!PyStatus_Exception(st))
        st = PyConfig_SetString(&c, &c.program_name, L"/usr/bin/python3");
    /* The search path pinned: the stdlib, its extensions, and Debian's
     * packages (site would add those; it is off). */
    c.module_search_paths_set = 1;
    static const wchar_t *const dirs[] = {
        L"/usr/lib/python%d.%d",
        L"/usr/lib/python%d.%d/lib-dynload",
        L"/usr/lib/python3/dist-packages",
    };
    for (size_t i = 0; !PyStatus_Exception(st) && i < 3; i++) {
        swprintf(path, sizeof path / sizeof path[0], dirs[i], PY_MAJOR_VERSION,
                 PY_MINOR_VERSION);
        st = PyWideStringList_Append(&c.module_search_paths, path);
    }
    if (!PyStatus_Exception(st))
        st = Py_InitializeFromConfig(&c);
    PyConfig_Clear(&c);
    return config_status(st, "initializing Python", err, errlen);
}

/* Imports name; a failure is an error (required) or a warning. */
static int
preimport(const char *name, const char *what, bool required, char *err,
          size_t errlen)
{
    PyObject *m = PyImport_ImportModule(name);
    char why[512];

    if (m) {
        Py_DECREF(m);
        return 0;
    }
    pyhost_exception_text(why, sizeof why);
    if (required) {
        snprintf(err, errlen, "importing %s: %s", name, why);
        return -1;
    }
    note("%s: %s cannot be imported (%s)", what, name, why);
    return 0;
}

/* The worker modules' builtins: the real ones with the guard's
 * __import__ (or the real builtins dict, with the guard off). */
static int
make_guard(void)
{
    PyObject *b = PyImport_ImportModule("builtins");
    PyObject *d = b ? PyModule_GetDict(b) : NULL;

    if (d == NULL)
        goto fail;
    real_import = PyDict_GetItemString(d, "__import__");
    if (real_import == NULL)
        goto fail;
    Py_INCREF(real_import);
    if (!allow.guard) {
        guard_builtins = Py_NewRef(d);
    } else {
        PyObject *fn = PyCFunction_New(&guard_def, NULL);
        guard_builtins = PyDict_Copy(d);
        if (fn == NULL || guard_builtins == NULL ||
            PyDict_SetItemString(guard_builtins, "__import__", fn) < 0) {
            Py_XDECREF(fn);
            goto fail;
        }
        Py_DECREF(fn);
    }
    Py_DECREF(b);
    return 0;
fail:
    Py_XDECREF(b);
    return -1;
}

int
pyhost_init(char *err, size_t errlen)
{
    PyObject *r;

    if (pyhost_allow_init(&allow, getenv(PYHOST_ENV_ALLOWED),
                          getenv(PYHOST_ENV_BLOCKED),
                          getenv(PYHOST_ENV_ALLOWLIST),
                          getenv(PYHOST_ENV_PRELOAD), err, errlen) < 0)
        return -1;
    if (interpreter(err, errlen) < 0)
        return -1;
    /* What the host itself uses, then the allowed set: the default
     * entries must import, a configured package may be missing here (the
     * log says so); then the preloads. */
    static const char *const own[] = { "json", "traceback", "gc", "base64",
                                       "workmanager" };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        if (preimport(own[i], "host", true, err, errlen) < 0)
            return -1;
    for (size_t i = 0; i < allow.nallowed; i++) {
        bool dflt = false;
        for (size_t j = 0; pyhost_allow_default[j]; j++)
            dflt =
                dflt || strcmp(pyhost_allow_default[j], allow.allowed[i]) == 0;
        if (preimport(allow.allowed[i], "python_allowed_packages", dflt, err,
                      errlen) < 0)
            return -1;
    }
    for (size_t i = 0; i < allow.npreload; i++)
        (void)preimport(allow.preload[i], "python_preload", false, err, errlen);
    PyObject *tb = PyImport_ImportModule("traceback");
    format_exception =
        tb ? PyObject_GetAttrString(tb, "format_exception") : NULL;
    Py_XDECREF(tb);
    if (format_exception == NULL || pyhost_convert_init() < 0 ||
        make_guard() < 0)
        goto py_fail;
    /* The glue, with the real builtins: it is the host's. */
    glue = PyDict_New();
    if (glue == NULL ||
        PyDict_SetItemString(glue, "__builtins__", PyEval_GetBuiltins()) < 0)
        goto py_fail;
    r = PyRun_String(GLUE, Py_file_input, glue, glue);
    if (r == NULL)
        goto py_fail;
    Py_DECREF(r);
    if ((flush_out = PyDict_GetItemString(glue, "flush")) == NULL)
        goto py_fail;
    Py_INCREF(flush_out);
    r = PyRun_String("import sys\n"
                     "sys.stdout, sys.stderr = _outs\n"
                     "sys.stdin = None\n"
                     "import json\n"
                     "json.loads(json.dumps({'a': [1, 2.5, 'x', None, True],"
                     " 'b': {'c': 'd'}}))\n"
                     "import gc\n"
                     "gc.collect()\n"
                     "gc.freeze()\n",
                     Py_file_input, glue, glue);
    if (r == NULL)
        goto py_fail;
    Py_DECREF(r);
    return 0;

py_fail:
    pyhost_exception_text(err, errlen);
    return -1;
}

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

    *keep = NULL;
    if (v && format_exception) {
        PyObject *lines = PyObject_CallFunctionObjArgs(format_exception, t, v,
                                                       tb ? tb : Py_None, NULL);
        PyObject *empty = lines ? PyUnicode_FromString("") : NULL;
        *keep = empty ? PyUnicode_Join(empty, lines) : NULL;
        Py_XDECREF(empty);
        Py_XDECREF(lines);
        PyErr_Clear();
    }
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

static void
reply_loaded(uint64_t seq, const struct ipc_error *e)
{
    struct ipc_frame f;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_LOADED;
    f.reply_to = seq;
    f.u.loaded.ok = e == NULL;
    f.u.loaded.library_fd = -1;
    if (e)
        f.u.loaded.error = *e;
    if (send_frame(&f) < 0)
        die("send a Loaded");
}

static void
load_failed(uint64_t seq, const char *msg)
{
    struct ipc_error e = { .type = ipc_str_c("load_error"),
                           .message = ipc_str_c(msg) };
    reply_loaded(seq, &e);
}

/* The module's source lines for tracebacks, since there is no file to
 * read (linecache, through the glue); src NULL: none. */
static void
remember(PyObject *src)
{
    PyObject *fn = PyDict_GetItemString(glue, "remember");
    PyObject *r = fn && src ? PyObject_CallOneArg(fn, src) : NULL;

    Py_XDECREF(r);
    PyErr_Clear();
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
    if (rc < 0 || PyDict_SetItemString(g, "__builtins__", guard_builtins) < 0)
        goto exception;
    code = Py_CompileStringExFlags((const char *)j->buf, "worker.py",
                                   Py_file_input, NULL, -1);
    if (code == NULL)
        goto exception;
    src = PyUnicode_DecodeUTF8((const char *)j->buf, (Py_ssize_t)j->len,
                               "replace");
    remember(src);
    r = PyEval_EvalCode(code, g, g);
    if (r == NULL)
        goto exception;
    proc = PyDict_GetItemString(g, "Process");
    if (proc == NULL) {
        load_failed(j->seq, "the module defines no Process(event)");
        goto out;
    }
    if (!PyCallable_Check(proc)) {
        snprintf(msg, sizeof msg,
                 "Process is a %s, not a function: the module must define "
                 "Process(event)",
                 Py_TYPE(proc)->tp_name);
        load_failed(j->seq, msg);
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
    snprintf(worker_id, sizeof worker_id, "%s", j->worker);
    snprintf(source, sizeof source, "urn:workmanager:worker:%s", worker_id);
    reply_loaded(j->seq, NULL);
    {
        char line[256];
        int n = snprintf(line, sizeof line, "loaded worker %s version %u",
                         j->worker, j->version);
        send_log(IPC_LOG_INFO, line, (size_t)n);
    }
    goto out;

exception:
    exception_error(&e, type, sizeof type, msg, sizeof msg, &keep);
    e.type = ipc_str_c("load_error");
    reply_loaded(j->seq, &e);
out:
    if (src) /* it did not load: the running module's lines again */
        remember(worker_source);
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
        (void)ipc_channel_flush(ch, 0);
        PyGC_Collect();
    }
}

static void
send_result(uint64_t seq, const struct ipc_cloudevent_list *outputs,
            const struct ipc_error *e)
{
    struct ipc_frame f;

    memset(&f, 0, sizeof f);
    f.type = IPC_BODY_RESULT;
    f.reply_to = seq;
    if (outputs)
        f.u.result.outputs = *outputs;
    if (e)
        f.u.result.error = *e;
    if (send_frame(&f) == 0)
        return;
    if (errno != EMSGSIZE)
        die("send a Result");
    memset(&f.u.result, 0, sizeof f.u.result);
    f.u.result.error.type = ipc_str_c("output_too_large");
    f.u.result.error.message =
        ipc_str_c("the worker's output does not fit in a frame (16 MiB)");
    if (send_frame(&f) < 0)
        die("send a Result");
}

static void
worker_error(uint64_t seq, const char *msg)
{
    struct ipc_error e = { .type = ipc_str_c("worker_error"),
                           .message = ipc_str_c(msg) };
    send_result(seq, NULL, &e);
}

static void
run_process(struct job *j)
{
    struct ipc_cloudevent in;
    struct ipc_fb_error fe;
    struct pyhost_outputs o;
    char err[2048], type[256];
    PyObject *d = NULL, *ret = NULL, *keep = NULL;
    struct ipc_error e;

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
    if (ret == NULL) {
        exception_error(&e, type, sizeof type, err, sizeof err, &keep);
        send_result(j->seq, NULL, &e);
    } else if (pyhost_outputs_make(ret, &in, source, &o, err, sizeof err) < 0) {
        worker_error(j->seq, err);
    } else {
        const struct ipc_cloudevent_list l = { .n = o.n, .items = o.v };
        send_result(j->seq, &l, NULL);
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
        PyDict_SetItemString(g, "__builtins__", guard_builtins) < 0)
        goto out;
    code =
        Py_CompileStringExFlags(module, "worker.py", Py_file_input, NULL, -1);
    if (code == NULL || (r = PyEval_EvalCode(code, g, g)) == NULL)
        goto out;
    proc = PyDict_GetItemString(g, "Process");
    if (proc == NULL || (d = pyhost_event_dict(&in)) == NULL)
        goto out;
    if ((ret = PyObject_CallOneArg(proc, d)) != NULL)
        (void)pyhost_outputs_make(ret, &in, source, &o, err, sizeof err);
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
    log_lines = log_bytes = log_dropped = 0;
    if (j->kind == JOB_LOAD)
        run_load(j);
    else
        run_process(j);
    /* the partial lines of stdout and stderr (the glue's flush(), kept
     * at init: nothing to compile or look up per event) */
    PyObject *r = PyObject_CallNoArgs(flush_out);
    if (r == NULL)
        PyErr_Clear();
    Py_XDECREF(r);
    if (log_dropped) {
        char line[200];
        int n = snprintf(line, sizeof line,
                         "worker output cut: %u lines dropped (at most %u "
                         "lines and %u KiB per event)",
                         log_dropped, LOG_LINES, LOG_BYTES >> 10);
        send_log(IPC_LOG_WARN, line, (size_t)n);
    }
    /* The job's frames (its Result or Loaded, its log lines) go out now,
     * in one sendmsg, rather than from the loop's next turn: a turn is an
     * epoll_wait more per event, about 2 us of the round trip here.  What
     * the socket does not take at once is left to the loop. */
    (void)ipc_channel_flush(ch, 0);
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

/* A NUL-terminated copy of the Load's source, or the reason. */
static const char *
read_code(const struct ipc_load *l, const int *fds, unsigned nfds,
          struct job *j, char *err, size_t errlen)
{
    int fd, seals, need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;

    if (l->code_fd < 0 || (unsigned)l->code_fd >= nfds)
        return "the Load carries no code";
    fd = fds[l->code_fd];
    seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & need) != need)
        return "the code memfd is not sealed";
    if (l->code_len > CODE_MAX) {
        snprintf(err, errlen, "the module has %llu bytes, over %u",
                 (unsigned long long)l->code_len, CODE_MAX);
        return err;
    }
    if ((j->buf = malloc(l->code_len + 1)) == NULL)
        return "out of memory";
    size_t got = 0;
    while (got < l->code_len) {
        ssize_t n = pread(fd, j->buf + got, l->code_len - got, (off_t)got);
        if (n <= 0)
            return "the code memfd is shorter than Load.code_len";
        got += (size_t)n;
    }
    j->buf[got] = '\0';
    j->len = got;
    if (memchr(j->buf, '\0', got) != NULL)
        return "the module's source contains a NUL byte";
    return NULL;
}

static void
maybe_exit(void)
{
    if (shutting_down && !busy && jobs == NULL) {
        (void)ipc_channel_flush(ch, 2000);
        _exit(0);
    }
}

static void
on_frame(struct ipc_channel *c, const struct ipc_frame *f, int *fds,
         unsigned nfds, void *arg)
{
    struct ipc_frame h;
    struct job *j;
    char err[512];
    const char *why;

    (void)c;
    (void)arg;
    switch (f->type) {
    case IPC_BODY_LOAD:
    case IPC_BODY_PROCESS:
        if ((j = calloc(1, sizeof *j)) == NULL)
            die("calloc");
        j->seq = f->seq;
        if (f->type == IPC_BODY_PROCESS) {
            j->kind = JOB_PROCESS;
            j->len = f->u.process.event.len;
            if ((j->buf = malloc(j->len ? j->len : 1)) == NULL)
                die("malloc");
            memcpy(j->buf, f->u.process.event.ptr, j->len);
            queue(j);
            break;
        }
        j->kind = JOB_LOAD;
        j->version = f->u.load.version;
        snprintf(j->worker, sizeof j->worker, "%.*s",
                 (int)f->u.load.worker_id.len,
                 f->u.load.worker_id.ptr ? f->u.load.worker_id.ptr : "");
        why = read_code(&f->u.load, fds, nfds, j, err, sizeof err);
        if (why) {
            load_failed(f->seq, why);
            free(j->buf);
            free(j);
            break;
        }
        queue(j);
        break;
    case IPC_BODY_HEARTBEAT:
        memset(&h, 0, sizeof h);
        h.type = IPC_BODY_HEARTBEAT;
        h.reply_to = f->seq;
        if (send_frame(&h) < 0)
            die("send a Heartbeat");
        break;
    case IPC_BODY_SHUTDOWN:
        shutting_down = true;
        break;
    default:
        fprintf(stderr, "wm-host-python[%d]: unexpected %s frame\n",
                (int)getpid(), ipc_body_name(f->type));
        _exit(4);
    }
}

static void
on_close(struct ipc_channel *c, enum ipc_channel_status status,
         const char *reason, void *arg)
{
    (void)c;
    (void)arg;
    if (status == IPC_CHANNEL_EOF)
        _exit(0); /* the master is gone or done with us */
    fprintf(stderr, "wm-host-python[%d]: channel closed (%s): %s\n",
            (int)getpid(), ipc_channel_status_name(status), reason);
    _exit(1);
}

/* ---- confinement and the loop ------------------------------------------- */

/* The python role's own steps (sandbox/role_python.c).  The confinement
 * for the Hello; *warn says why it is less (or that a debug mode is on),
 * or is empty. */
static const char *
confine(char *warn, size_t len)
{
    warn[0] = '\0';
#ifdef WM_SANDBOX
    const char *debug = getenv(SANDBOX_DEBUG_ENV);
    enum sandbox_mode mode = sandbox_mode_parse(debug);
    char err[256] = "";
    int level = sandbox_role_enter(&sandbox_role_python, mode, err, sizeof err);

    if (level < 0) {
        fprintf(stderr, "wm-host-python[%d]: confinement: %s\n", (int)getpid(),
                err);
        _exit(1);
    }
    if (level == SANDBOX_LEVEL_NONE) {
        snprintf(warn, len, "running unconfined: %s", err);
        return "none";
    }
    if (mode != SANDBOX_MODE_ENFORCE) {
        snprintf(warn, len, "seccomp in %s mode (%s=%s): %s",
                 sandbox_mode_name(mode), SANDBOX_DEBUG_ENV, debug,
                 mode == SANDBOX_MODE_LOG
                     ? "nothing is killed, the kernel's audit log names "
                       "what would be"
                     : "a refused call is named on stderr");
        if (mode == SANDBOX_MODE_LOG)
            return "none";
    }
    return sandbox_level_name(sandbox_spawned_level((enum sandbox_level)level));
#else
    (void)len;
    return "none";
#endif
}

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
                    die("event_base_loop");
    }
    if (jobs == NULL && event_base_loop(base, EVLOOP_ONCE) < 0)
        die("event_base_loop");
    if (jobs != NULL) {
        last_wait_ns = mono_ns() - since;
        since = -1;
    }
}

int
pyhost_serve(void)
{
    struct ipc_channel_config cfg = {
        .role = IPC_CHANNEL_HOST,
        .engine = "python",
        .max_inflight = 1,
        .prefetch = PYHOST_PREFETCH,
    };
    const struct ipc_channel_callbacks cb = {
        .on_frame = on_frame,
        .on_close = on_close,
    };
    char warn[512];

    if (fcntl(HOST_FD, F_GETFD) < 0)
        die("no channel on fd 3");
    signal(SIGPIPE, SIG_IGN);
    pyhost_convert_reseed(); /* a forked host's ids are its own */
    prefault();
    /* The event base (its epoll instance) before the filter, which has no
     * epoll_create. */
    if ((base = event_base_new()) == NULL)
        die("event_base_new");
    cfg.confinement = confine(warn, sizeof warn);
    if ((ch = ipc_channel_new(base, HOST_FD, &cfg, &cb, NULL)) == NULL)
        die("ipc_channel_new");
    if (warn[0])
        send_log(IPC_LOG_WARN, warn, strlen(warn));
    if (init_warnings[0])
        send_log(IPC_LOG_WARN, init_warnings, strlen(init_warnings));
    for (;;) {
        maybe_exit();
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
    return 0;
}
