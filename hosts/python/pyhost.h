/*
 * pyhost.h — the Python engine host, wm-host-python (DESIGN §5; issue 8),
 * in two halves so that a zygote can run the first once and fork hosts
 * that run the second, and an exec'd host can run both (main.c).
 */
#ifndef WM_HOSTS_PYTHON_PYHOST_H
#define WM_HOSTS_PYTHON_PYHOST_H

#include <stddef.h>

/*
 * Before any confinement (in the zygote once, or in an exec'd host): an
 * isolated CPython (PyPreConfig isolated, utf8_mode=1; an isolated
 * PyConfig with home=/usr, Debian's /usr/bin/python3 prefix, the stdlib
 * and /usr/lib/python3/dist-packages as the only search path, no site, no
 * bytecode writing, no signal handlers, the user's environment ignored),
 * the allowed modules (allow.h), the allowed packages and the preloads
 * imported, the import guard made, json warmed, gc.freeze().  The
 * configuration comes from the environment (allow.h: PYHOST_ENV_*).
 * Returns 0, or -1 with err set.
 */
int pyhost_init(char *err, size_t errlen);

/*
 * In the host process (forked from the zygote or exec'd), after
 * pyhost_init(): takes the python role's own sandbox steps
 * (sandbox_role_enter: no_new_privs, MDWE, the filter), then serves the
 * channel on fd 3 until Shutdown or EOF.  Returns the process's exit
 * status (it normally exits from inside).
 */
int pyhost_serve(void);

#endif /* WM_HOSTS_PYTHON_PYHOST_H */
