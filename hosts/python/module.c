/*
 * module.c — the `workmanager` module a Python worker imports (module.h;
 * DESIGN §5, §8), and the worker's log.
 *
 * Every function but log is a GatewayCall (DESIGN §3): the request is the
 * dict given, JSON-encoded here; the call waits for its GatewayReply by
 * running the event loop (ipc_channel_gateway_call()), which is why a
 * worker runs outside every libevent callback (pyhost.c).  A status other
 * than 200 is workmanager.GatewayError naming it, but where the API gives
 * 404 a meaning (state.get's default, state.delete's False).
 *
 * The worker's log: workmanager.log(), and its stdout and stderr, which
 * the interpreter's glue (interp.c) turns into lines and hands to log,
 * become Log frames, each line cut at 1023 bytes, within a budget per job
 * (PYHOST_LOG_LINES and PYHOST_LOG_BYTES): what is over is counted, not
 * sent, and said once when the job ends, so that a worker printing in a
 * loop cannot flood the daemon's log.
 */
#include "config.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hosts/python/module.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hosts/common/host.h"
#include "hosts/python/convert.h"
#include "ipc/channel.h"

/* A worker's log line is cut to this (host_log()'s cut). */
#define LINE_MAX_BYTES 1023u

static PyObject *gateway_error; /* workmanager.GatewayError */
static char source[192] = "urn:workmanager:worker";

/* The log budget of the current job. */
static unsigned log_lines, log_bytes, log_dropped;

/* ---- the log ----------------------------------------------------------- */

void
pyhost_module_job_begin(void)
{
    log_lines = log_bytes = log_dropped = 0;
}

void
pyhost_module_job_end(void)
{
    if (log_dropped)
        host_log(IPC_LOG_WARN,
                 "worker output cut: %u lines dropped (at most %u lines and "
                 "%u KiB per event)",
                 log_dropped, PYHOST_LOG_LINES, PYHOST_LOG_BYTES >> 10);
}

/* One worker log line, within the job's budget (before the channel, at
 * init: on stderr). */
static void
worker_log(enum ipc_log_level level, const char *msg, size_t len)
{
    size_t cut = len > LINE_MAX_BYTES ? LINE_MAX_BYTES : len;

    if (host_channel() == NULL) {
        host_log_send(level, msg, cut);
        return;
    }
    if (log_lines >= PYHOST_LOG_LINES || log_bytes + len > PYHOST_LOG_BYTES) {
        log_dropped++;
        return;
    }
    log_lines++;
    log_bytes += (unsigned)len;
    host_log_send(level, msg, cut);
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

/* ---- the functions ----------------------------------------------------- */

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
    if (host_channel() == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no channel to the daemon");
        goto out;
    }
    if (ipc_channel_gateway_call(
            host_channel(), ipc_str_c(service), ipc_str_c(method),
            (struct ipc_bytes){ (const uint8_t *)req, (uint32_t)n }, &w) < 0) {
        if (errno == EIO)
            host_die("event_base_loop");
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

/* ---- the module -------------------------------------------------------- */

PyObject *
pyhost_module_init(void)
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

void
pyhost_module_set_worker(const char *worker_id)
{
    snprintf(source, sizeof source, "urn:workmanager:worker:%s", worker_id);
}

const char *
pyhost_module_source(void)
{
    return source;
}
