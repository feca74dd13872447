/*
 * main.c — wm-host-python (pyhost.h, interp.h), started by the launcher in one
 * of two ways (engines.d/python.engine's `spawn`):
 *
 *   wm-host-python --zygote   the zygote (sandbox/zygote.h): the
 *                             interpreter initialised once, then one host
 *                             forked per request of the launcher, each
 *                             confined by the spawner's steps and then
 *                             serving its channel;
 *   wm-host-python            one host, exec'd for one worker: the same
 *                             init, then its channel.
 *
 * The fork keeps CPython's state sound with PyOS_BeforeFork() and the
 * AfterFork calls around it (the zygote is single-threaded: no thread's
 * lock is left held).
 */
#include "config.h"

#include <Python.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hosts/python/interp.h"
#include "hosts/python/pyhost.h"
#include "sandbox/sandbox.h"
#include "sandbox/zygote.h"

int
main(int argc, char **argv)
{
    bool zygote = argc == 2 && strcmp(argv[1], SANDBOX_ZYGOTE_ARG) == 0;
    char err[1024];

    if (pyhost_interp_init(err, sizeof err) < 0) {
        if (zygote)
            sandbox_zygote_fail(err);
        fprintf(stderr, "wm-host-python[%d]: %s\n", (int)getpid(), err);
        return 1;
    }
    if (zygote) {
        const struct sandbox_zygote_ops ops = {
            .role = &sandbox_role_python,
            .before_fork = PyOS_BeforeFork,
            .after_fork_parent = PyOS_AfterFork_Parent,
            .after_fork_child = PyOS_AfterFork_Child,
        };
        if (sandbox_zygote_serve(&ops) != 0)
            return 1;
    }
    pyhost_serve();
}
