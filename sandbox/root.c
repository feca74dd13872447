/*
 * root.c — the host's private root (root.h).
 *
 * The tmpfs is mounted over /tmp of the new mount namespace (any
 * directory would do; the machine's /tmp is hidden by it, which is the
 * point), filled, then made the root with pivot_root(".", "."), the old
 * root lazily unmounted from under it.
 */
#include "config.h"

#include "sandbox/root.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NEW "/tmp"

/* Mounts of the new root, relative to it once entered. */
static int
bind_ro(const char *src, const char *dst, int is_dir)
{
    if (is_dir) {
        if (mkdir(dst, 0755) < 0 && errno != EEXIST)
            return -1;
    } else {
        int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
        if (fd < 0)
            return -1;
        (void)close(fd);
    }
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
        return -1;
    return mount(NULL, dst, NULL,
                 MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

/* A device file bound read-write (its own node is not creatable here). */
static int
bind_dev(const char *src, const char *dst)
{
    int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);

    if (fd < 0)
        return -1;
    (void)close(fd);
    return mount(src, dst, NULL, MS_BIND, NULL);
}

/* "/proc/self/fd/<fd>" into buf (at least 32 bytes). */
static void
fd_path(int fd, char *buf)
{
    static const char pre[] = "/proc/self/fd/";
    char digits[12];
    size_t n = 0, at = sizeof pre - 1;

    memcpy(buf, pre, sizeof pre - 1);
    do {
        digits[n++] = (char)('0' + fd % 10);
        fd /= 10;
    } while (fd > 0);
    while (n > 0)
        buf[at++] = digits[--n];
    buf[at] = '\0';
}

/*
 * The binary execfd (an O_PATH descriptor, of the spawner's mount
 * namespace) found again by its path in this one, before the tmpfs hides
 * the machine's /tmp: into path, and its descriptor, or -1.
 */
static int
exe_open(int execfd, char *path, size_t len)
{
    char fdp[32];
    ssize_t n;

    fd_path(execfd, fdp);
    n = readlink(fdp, path, len - 1);
    if (n <= 1 || path[0] != '/') {
        errno = ENAMETOOLONG;
        return -1;
    }
    path[n] = '\0';
    return open(path, O_PATH | O_CLOEXEC);
}

/*
 * That binary (fd, of this namespace, from exe_open()) bound read-only at
 * its own path in the new root, its directories made in the root's tmpfs
 * (or in its /tmp, for a binary under /tmp: mounted before).  A runtime
 * that resolves /proc/self/exe, as CoreCLR does at start, then finds it.
 */
static int
bind_exe(int fd, const char *path)
{
    char src[32], dst[4200];
    size_t len = strlen(path);

    if (len + sizeof NEW > sizeof dst) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(dst, NEW, sizeof NEW - 1);
    memcpy(dst + sizeof NEW - 1, path, len + 1);
    for (char *p = dst + sizeof NEW; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int rc = mkdir(dst, 0755);
        *p = '/';
        if (rc < 0 && errno != EEXIST)
            return -1;
    }
    fd_path(fd, src);
    return bind_ro(src, dst, 0);
}

int
sandbox_root_enter(int execfd, const char **step)
{
    struct stat st;
    char exe[4096];
    int exefd = -1;

    *step = "making the mounts private";
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -1;
    *step = "finding the host's binary";
    if (execfd >= 0 && (exefd = exe_open(execfd, exe, sizeof exe)) < 0)
        return -1;
    *step = "mounting the tmpfs root";
    if (mount("tmpfs", NEW, "tmpfs", MS_NOSUID | MS_NODEV,
              "size=1m,nr_inodes=256,mode=0755") < 0)
        return -1;
    *step = "binding /usr into the root";
    if (bind_ro("/usr", NEW "/usr", 1) < 0)
        return -1;
    *step = "linking /bin, /lib, /lib64 in the root";
    static const char *const links[][2] = {
        { "usr/bin", NEW "/bin" },
        { "usr/lib", NEW "/lib" },
        { "usr/lib64", NEW "/lib64" },
    };
    for (unsigned i = 0; i < sizeof links / sizeof links[0]; i++)
        if (stat(links[i][1] + sizeof NEW - 1, &st) == 0 &&
            symlink(links[i][0], links[i][1]) < 0)
            return -1;
    *step = "binding /etc/ld.so.cache into the root";
    if (mkdir(NEW "/etc", 0755) < 0 ||
        (stat("/etc/ld.so.cache", &st) == 0 &&
         bind_ro("/etc/ld.so.cache", NEW "/etc/ld.so.cache", 0) < 0))
        return -1;
    *step = "binding the devices into the root";
    if (mkdir(NEW "/dev", 0755) < 0 ||
        bind_dev("/dev/null", NEW "/dev/null") < 0 ||
        bind_dev("/dev/zero", NEW "/dev/zero") < 0 ||
        bind_dev("/dev/urandom", NEW "/dev/urandom") < 0)
        return -1;
    *step = "mounting the root's /tmp";
    if (mkdir(NEW "/tmp", 01777) < 0 ||
        mount("tmpfs", NEW "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "size=16m,nr_inodes=1024,mode=1777") < 0)
        return -1;
    /* A binary under /usr, as an installed host is
     * (/usr/libexec/workmanager/), is in the root already through /usr,
     * where nothing more can be mounted: the bind is for hosts elsewhere
     * (a build tree). */
    if (exefd >= 0 && strncmp(exe, "/usr/", 5) == 0) {
        (void)close(exefd);
        exefd = -1;
    }
    *step = "binding the host's binary into the root";
    if (exefd >= 0) {
        int rc = bind_exe(exefd, exe);
        (void)close(exefd);
        if (rc < 0)
            return -1;
    }
    *step = "mounting the root's /proc";
    if (mkdir(NEW "/proc", 0555) < 0 ||
        mount("proc", NEW "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              "hidepid=invisible,subset=pid") < 0)
        return -1;
    *step = "entering the root (pivot_root)";
    if (chdir(NEW) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
        umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
        return -1;
    *step = "making the root read-only";
    if (mount(NULL, "/", NULL,
              MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
              NULL) < 0)
        return -1;
    return 0;
}
