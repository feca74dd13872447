/*
 * thread.c — helper threads that take no asynchronous signal (thread.h).
 */
#include "config.h"

#include "lib/thread.h"

#include <signal.h>

int
thread_start_quiet(pthread_t *t, void *(*fn)(void *), void *arg,
                   bool keep_faults)
{
    static const int faults[] = { SIGSEGV, SIGBUS,  SIGFPE, SIGILL,
                                  SIGABRT, SIGTRAP, SIGSYS };
    sigset_t block, old;
    int rc;

    /* sigfillset() and sigdelset() fail only on an invalid signal number,
     * and these are constants. */
    (void)sigfillset(&block);
    for (size_t i = 0; keep_faults && i < sizeof faults / sizeof faults[0]; i++)
        (void)sigdelset(&block, faults[i]);
    rc = pthread_sigmask(SIG_BLOCK, &block, &old);
    if (rc != 0)
        return rc;
    rc = pthread_create(t, NULL, fn, arg);
    /* Restoring a mask read a moment ago cannot fail. */
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
