/*
 * netpool.h — network namespaces made ahead of the hosts that enter them
 * (issue 7: a host's start).  Making a network namespace costs about
 * 0.5 ms, most of what the namespaces add to a cold start (bench/README.md,
 * "The namespaces"); entering one made before costs 0.05 ms.  The launcher
 * keeps a few ready, each new and empty (only a loopback device, down),
 * gives each to exactly one host (spawn.h: net_fd) and makes the next one
 * after the host's start, off its path.  A namespace lives as long as a
 * descriptor or a process holds it: the host's, once the launcher closes
 * its descriptor.
 */
#ifndef WM_SANDBOX_NETPOOL_H
#define WM_SANDBOX_NETPOOL_H

#include <stdbool.h>

/* Up to this many namespaces wait in the pool. */
#define SANDBOX_NETPOOL_MAX 2

/* A new network namespace, the caller's own unchanged: its descriptor
 * (close-on-exec), or -1 with errno (not root, no network namespaces). */
int sandbox_netns_make(void);

/* Makes namespaces until the pool holds SANDBOX_NETPOOL_MAX; false when
 * one cannot be made (then the pool stays as it is, and spawns unshare
 * their own). */
bool sandbox_netpool_fill(void);

/* A namespace of the pool, taken (the caller closes it once the host
 * entered it), or -1 when the pool is empty. */
int sandbox_netpool_take(void);

/* Closes every namespace of the pool. */
void sandbox_netpool_clear(void);

#endif /* WM_SANDBOX_NETPOOL_H */
