/*
 * interp.c — wm-host-python's interpreter and its import guard
 * (interp.h; DESIGN §5, §10; issue 8).
 *
 * Init (pyhost_interp_init, before any confinement): an isolated
 * interpreter, then every module a worker may import, the allowed
 * packages and the preloads imported, since the filter refuses every path
 * afterwards (an import that was not done here finds nothing:
 * ImportError).  Then the guard: the worker's module gets a builtins dict
 * of its own whose __import__ refuses what allow.h does not allow
 * ("ImportError: os is not allowed"); the interpreter's own builtins keep
 * the real one, so that the standard library's lazy imports of modules
 * loaded already work.  The guard is a convenience with a clear message:
 * a worker that reaches posix, ctypes or the import machinery through the
 * object graph still meets the filter (sandbox/role_python.c), which
 * refuses opening, forking, executing and sockets.  Last, json is warmed
 * and the heap frozen for a zygote's copy-on-write (gc.freeze()).
 *
 * The glue (GLUE below, the host's own Python, with the real builtins)
 * holds the worker's stdout and stderr, whose lines go to
 * workmanager.log (module.c), and the worker's source for tracebacks.
 *
 * Invariant: everything here is made before the host forks or confines
 * itself and never changes afterwards, so a zygote's hosts share it
 * copy-on-write.
 */
#include "config.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hosts/python/interp.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "hosts/python/allow.h"
#include "hosts/python/convert.h"
#include "hosts/python/module.h"

/* Debian's interpreter: /usr/bin/python3's prefix. */
#define PY_HOME L"/usr"

static struct pyhost_allow allow;
static PyObject *guard_builtins;   /* the worker module's __builtins__ */
static PyObject *real_import;      /* builtins.__import__ */
static PyObject *format_exception; /* traceback.format_exception */
static PyObject *glue;             /* the namespace of GLUE below */
static PyObject *flush_out;        /* its flush(), after every job */
static char init_warnings[2048];   /* sent as a Log once connected */

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

/* The interpreter, isolated (interp.h). */
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
    if (PyImport_AppendInittab("workmanager", pyhost_module_init) < 0) {
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
pyhost_interp_init(char *err, size_t errlen)
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

PyObject *
pyhost_interp_builtins(void)
{
    return guard_builtins;
}

PyObject *
pyhost_interp_traceback(PyObject *t, PyObject *v, PyObject *tb)
{
    PyObject *lines, *empty, *text;

    if (v == NULL || format_exception == NULL)
        return NULL;
    lines = PyObject_CallFunctionObjArgs(format_exception, t, v,
                                         tb ? tb : Py_None, NULL);
    empty = lines ? PyUnicode_FromString("") : NULL;
    text = empty ? PyUnicode_Join(empty, lines) : NULL;
    Py_XDECREF(empty);
    Py_XDECREF(lines);
    PyErr_Clear();
    return text;
}

void
pyhost_interp_remember(PyObject *src)
{
    PyObject *fn = PyDict_GetItemString(glue, "remember");
    PyObject *r = fn && src ? PyObject_CallOneArg(fn, src) : NULL;

    Py_XDECREF(r);
    PyErr_Clear();
}

void
pyhost_interp_flush(void)
{
    /* the glue's flush(), kept at init: nothing to compile or look up
     * per event */
    PyObject *r = PyObject_CallNoArgs(flush_out);

    if (r == NULL)
        PyErr_Clear();
    Py_XDECREF(r);
}

const char *
pyhost_interp_warnings(void)
{
    return init_warnings;
}
