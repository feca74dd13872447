/*
 * uidlock.h — one machine, several daemons: a lock on each daemon's range
 * of host uids (host_uid_base, host_uid_count), so that two daemons never
 * run hosts as the same users (issue 27 §4).
 */
#ifndef WM_MASTER_UIDLOCK_H
#define WM_MASTER_UIDLOCK_H

#include <stddef.h>

struct conf;

/*
 * Takes this daemon's lock on its range in c->host_uid_lock_dir (made
 * when missing) and checks that no running daemon holds a range that
 * overlaps it.  Returns the lock's descriptor (close-on-exec; the lock
 * lasts while this process or a child it forked holds it), -2 when there
 * is nothing to lock (host_uid_base 0, or not root: hosts then keep the
 * daemon's user), or -1 with a message in err that names host_uid_base,
 * the other daemon and what to do.
 */
int uidlock_acquire(const struct conf *c, char *err, size_t errlen);

#endif /* WM_MASTER_UIDLOCK_H */
