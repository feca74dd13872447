/*
 * pyhost.h — the Python engine host, wm-host-python (DESIGN §5; issue 8),
 * in two halves so that a zygote can run the first once and fork hosts
 * that run the second, and an exec'd host can run both (main.c): the
 * interpreter (interp.h, pyhost_interp_init()) and the host (here).
 */
#ifndef WM_HOSTS_PYTHON_PYHOST_H
#define WM_HOSTS_PYTHON_PYHOST_H

/*
 * In the host process (forked from the zygote or exec'd), after
 * pyhost_interp_init(): prefaults its paths, takes the python role's own
 * sandbox steps (sandbox_role_enter: no_new_privs, MDWE, the filter),
 * then serves the channel on fd 3 until Shutdown or EOF, on the hosts'
 * skeleton (hosts/common/host.h, whose exits it takes).  Never returns.
 */
void pyhost_serve(void) __attribute__((noreturn));

#endif /* WM_HOSTS_PYTHON_PYHOST_H */
