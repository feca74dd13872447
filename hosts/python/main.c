/*
 * main.c — wm-host-python (pyhost.h): exec'd by the launcher, it
 * initialises the interpreter and serves its channel.
 */
#include "config.h"

#include <stdio.h>
#include <unistd.h>

#include "hosts/python/pyhost.h"

int
main(int argc, char **argv)
{
    char err[1024];

    /* `--zygote` (the prefork zygote, issue 8) goes here: pyhost_init()
     * once, then fork a host per Fork frame, each calling
     * pyhost_serve(). */
    (void)argc;
    (void)argv;
    if (pyhost_init(err, sizeof err) < 0) {
        fprintf(stderr, "wm-host-python[%d]: %s\n", (int)getpid(), err);
        return 1;
    }
    return pyhost_serve();
}
