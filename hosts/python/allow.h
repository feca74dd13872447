/*
 * allow.h — which modules a Python worker may import (DESIGN §5; issue 8):
 * the safe standard library set below ∪ python_allowed_packages −
 * python_blocked_modules, and what the host imports before its seccomp
 * filter so that the allowed names are there when the worker asks.
 *
 * Entries are module names ("json", "urllib.parse", "numpy").  A name is
 * allowed when it is an allowed entry, a submodule of one, or a package
 * that holds one ("urllib" for "urllib.parse": importing it gives only
 * what is loaded already), and neither it nor a package above it is
 * blocked.  Pure C, no Python: the host's import guard and the unit test
 * (tests/unit/test_pyhost_allow.c) share it.
 *
 * The lists come from the host's environment (the daemon's configuration,
 * passed by the launcher: PYHOST_ENV_*), comma- or blank-separated.
 */
#ifndef WM_HOSTS_PYTHON_ALLOW_H
#define WM_HOSTS_PYTHON_ALLOW_H

#include <stdbool.h>
#include <stddef.h>

/* The environment variables that carry the configuration keys of the same
 * names (workmanager.conf(5)). */
#define PYHOST_ENV_ALLOWED "WM_PYTHON_ALLOWED_PACKAGES"
#define PYHOST_ENV_BLOCKED "WM_PYTHON_BLOCKED_MODULES"
#define PYHOST_ENV_ALLOWLIST "WM_PYTHON_ALLOWLIST"
#define PYHOST_ENV_PRELOAD "WM_PYTHON_PRELOAD"

/* The longest module name taken from a list (longer ones are refused). */
#define PYHOST_NAME_MAX 128

struct pyhost_allow {
    char **allowed; /* the safe set and the packages, minus blocked */
    size_t nallowed;
    char **blocked;
    size_t nblocked;
    char **preload; /* imported, not allowed */
    size_t npreload;
    bool guard; /* python_allowlist: false lets every import through */
};

/* The safe standard library set, NULL-terminated: what a worker may
 * import with no configuration (documented in workmanager-workers(7)). */
extern const char *const pyhost_allow_default[];

/*
 * Fills *a from the lists (NULL or "" for none) and the allowlist switch
 * (NULL: on; "off", "0", "false", "no": off).  Returns 0, or -1 with err
 * naming a bad entry (not a dotted Python identifier, or too long) or
 * ENOMEM.  pyhost_allow_free() is safe on *a either way.
 */
int pyhost_allow_init(struct pyhost_allow *a, const char *allowed,
                      const char *blocked, const char *allowlist,
                      const char *preload, char *err, size_t errlen);

void pyhost_allow_free(struct pyhost_allow *a);

/* Whether a worker may import `name` (a dotted module name, not
 * relative); always true when the guard is off. */
bool pyhost_allow_check(const struct pyhost_allow *a, const char *name);

#endif /* WM_HOSTS_PYTHON_ALLOW_H */
