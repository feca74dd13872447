/*
 * sysfile.c — the kernel's small files read whole (sysfile.h), written
 * once for the detection, the cgroups and the launcher.
 *
 * One read(2), no stdio: the kernel's attribute and procfs files give
 * their text in one read, and a caller may need this where stdio would
 * allocate.  Errno is the failing call's, not close(2)'s.
 */
#include "config.h"

#include "sandbox/sysfile.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

ssize_t
sandbox_sysfile_read(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    int e;

    buf[0] = '\0';
    if (fd < 0)
        return -1;
    n = read(fd, buf, len - 1);
    e = errno;
    (void)close(fd);
    buf[n > 0 ? n : 0] = '\0';
    errno = e;
    return n;
}
