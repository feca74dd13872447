/*
 * sysfile.h — reading one of the kernel's small files (/proc, /sys: a
 * cgroup's members or events, a process's children, a controllers list)
 * whole, into a caller's buffer.  Private to sandbox/ and its tests.
 */
#ifndef WM_SANDBOX_SYSFILE_H
#define WM_SANDBOX_SYSFILE_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Reads the file at path with one read(2) into buf, at most len - 1
 * bytes, and NUL-terminates it (an empty string on failure; len must be
 * at least 1).  Enough for the kernel's attribute files, which hand out
 * their text in one read.  Its length (0: empty), or -1 with errno.
 */
ssize_t sandbox_sysfile_read(const char *path, char *buf, size_t len);

#endif /* WM_SANDBOX_SYSFILE_H */
