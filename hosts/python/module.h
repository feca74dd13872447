/*
 * module.h — the `workmanager` module of Python workers (DESIGN §5; issue
 * 8): workmanager.log(level, msg), workmanager.publish(topic, event), and
 * workmanager.state.get/put/delete, each a GatewayCall to the daemon
 * (module.c); and the worker's log budget per job.
 */
#ifndef WM_HOSTS_PYTHON_MODULE_H
#define WM_HOSTS_PYTHON_MODULE_H

#include <Python.h>

/* The worker's log per job (a Load or a Process): at most this many lines
 * and bytes of workmanager.log(), stdout and stderr together; what is
 * over is counted and said once at the job's end. */
#define PYHOST_LOG_LINES 200u
#define PYHOST_LOG_BYTES (64u << 10)

/* The module, for PyImport_AppendInittab() before the interpreter
 * starts: a new reference, or NULL with a Python exception. */
PyObject *pyhost_module_init(void);

/* A job starts: its log budget is whole again. */
void pyhost_module_job_begin(void);

/* A job ended: what its log budget dropped, if anything, said in one
 * warning. */
void pyhost_module_job_end(void);

/* The worker's id from here on: the source of the events it publishes or
 * returns without one is "urn:workmanager:worker:<id>". */
void pyhost_module_set_worker(const char *worker_id);

/* That source ("urn:workmanager:worker" before a worker loaded). */
const char *pyhost_module_source(void);

#endif /* WM_HOSTS_PYTHON_MODULE_H */
