/*
 * interp.h — the embedded interpreter of wm-host-python and its import
 * guard (interp.c; DESIGN §5, §10; issue 8): made once before any
 * confinement (in the zygote, or in an exec'd host), then used by the
 * host's jobs (pyhost.c).
 */
#ifndef WM_HOSTS_PYTHON_INTERP_H
#define WM_HOSTS_PYTHON_INTERP_H

#include <Python.h>

#include <stddef.h>

/*
 * Before any confinement (in the zygote once, or in an exec'd host): an
 * isolated CPython (PyPreConfig isolated, utf8_mode=1; an isolated
 * PyConfig with home=/usr, Debian's /usr/bin/python3 prefix, the stdlib
 * and /usr/lib/python3/dist-packages as the only search path, no site, no
 * bytecode writing, no signal handlers, the user's environment ignored),
 * the `workmanager` module built in (module.h), the allowed modules
 * (allow.h), the allowed packages and the preloads imported, the import
 * guard made, stdout and stderr turned into the worker's log, json
 * warmed, gc.freeze().  The configuration comes from the environment
 * (allow.h: PYHOST_ENV_*).  Returns 0, or -1 with err set.
 */
int pyhost_interp_init(char *err, size_t errlen);

/* The __builtins__ of a worker's module (a borrowed reference): the real
 * builtins with the guard's __import__, or the real dict with the guard
 * off. */
PyObject *pyhost_interp_builtins(void);

/* The traceback of exception (t, v, tb) as one str (a new reference), or
 * NULL (no value, or the formatting failed: its error cleared). */
PyObject *pyhost_interp_traceback(PyObject *t, PyObject *v, PyObject *tb);

/* src (a str; NULL: none) as the lines of "worker.py" for tracebacks,
 * since there is no file to read (linecache). */
void pyhost_interp_remember(PyObject *src);

/* The partial last lines of the worker's stdout and stderr, out as log
 * lines (after every job). */
void pyhost_interp_flush(void);

/* What init found worth a warning (a configured package that does not
 * import, ...), "; "-separated, or "": the host logs it once connected. */
const char *pyhost_interp_warnings(void);

#endif /* WM_HOSTS_PYTHON_INTERP_H */
