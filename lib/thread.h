/*
 * thread.h — starting a helper thread that leaves asynchronous signals to
 * the threads that handle them, part of lib/ (the leaf library: small
 * rules the master, wmctl and the hosts share; it includes nothing of the
 * project but itself).
 *
 * Why: the master's signals are its event loop's (libevent's signal
 * events, SIGCHLD for reaping), and a host's are its loop's too.  A
 * thread started with them unblocked may be the one the kernel picks for
 * a process-directed signal, and the loop never sees it.  The mask is set
 * around pthread_create() because a new thread inherits its creator's:
 * there is no moment at which the new thread can take a signal.
 */
#ifndef WM_LIB_THREAD_H
#define WM_LIB_THREAD_H

#include <pthread.h>
#include <stdbool.h>

/*
 * Starts fn(arg) on a new thread (*t) with every signal blocked, except,
 * when keep_faults, the synchronous ones a thread raises against itself
 * (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS: a native
 * worker's fault, abort() or seccomp kill must still reach it).  The
 * caller's mask is the same afterwards.  Returns 0, or pthread_create()'s
 * error number.
 */
int thread_start_quiet(pthread_t *t, void *(*fn)(void *), void *arg,
                       bool keep_faults);

#endif
