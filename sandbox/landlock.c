/*
 * landlock.c — the host's Landlock domain (landlock.h).
 *
 * Debian 12's <linux/landlock.h> is Linux 6.1's (ABI 2): the attribute
 * layout and the rights of later ABIs are written here, by their kernel
 * values; a kernel answers for the size it is given.
 */
#include "config.h"

#include "sandbox/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* struct landlock_ruleset_attr as of ABI 6. */
struct ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net; /* ABI 4 */
    uint64_t scoped;             /* ABI 6 */
};

#define FS_EXECUTE (1ull << 0)
#define FS_WRITE_FILE (1ull << 1)
#define FS_READ_FILE (1ull << 2)
#define FS_READ_DIR (1ull << 3)
#define FS_TRUNCATE (1ull << 14) /* ABI 3 */
#define NET_BIND_TCP (1ull << 0)
#define NET_CONNECT_TCP (1ull << 1)
#define SCOPE_ABSTRACT_UNIX_SOCKET (1ull << 0)
#define SCOPE_SIGNAL (1ull << 1)

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* Every file-system right an ABI knows: 13 in ABI 1, REFER (2),
 * TRUNCATE (3), IOCTL_DEV (5). */
static uint64_t
fs_rights(int abi)
{
    unsigned n = abi >= 5 ? 16 : abi >= 3 ? 15 : abi >= 2 ? 14 : 13;

    return (1ull << n) - 1;
}

/* One rule: rights (masked to what the ruleset handles) beneath path.
 * 0, or -1 with errno; a path that does not exist is no error. */
static int
allow(int rs, const char *path, uint64_t rights, uint64_t handled)
{
    struct landlock_path_beneath_attr pb = { 0 };
    int rc;

    pb.parent_fd = open(path, O_PATH | O_CLOEXEC);
    if (pb.parent_fd < 0)
        return errno == ENOENT ? 0 : -1;
    pb.allowed_access = rights & handled;
    rc = (int)syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH,
                      &pb, 0);
    int e = errno;
    (void)close(pb.parent_fd);
    errno = e;
    return rc < 0 ? -1 : 0;
}

/* A ruleset for a host: the system's code, host_dir (if not NULL), the
 * binary binfd (if >= 0) and its role's extra read-only paths reads
 * (NULL-terminated, or NULL); its descriptor, or -1 with errno and *what
 * naming the path.  System calls only: async-signal-safe. */
static int
make_ruleset(int abi, const char *host_dir, int binfd, const char *const *reads,
             const char **what)
{
    static const char *const code[] = { "/usr", "/bin", "/lib", "/lib64" };
    static const char *const devices[] = { "/dev/null", "/dev/zero",
                                           "/dev/urandom" };
    const uint64_t rx = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR;
    struct ruleset_attr ra = { .handled_access_fs = fs_rights(abi) };
    size_t size = sizeof ra.handled_access_fs;
    int rs;

    if (abi >= 4) {
        ra.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP;
        size += sizeof ra.handled_access_net;
    }
    if (abi >= 6) {
        ra.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
        size += sizeof ra.scoped;
    }
    *what = "creating the ruleset";
    rs = (int)syscall(SYS_landlock_create_ruleset, &ra, size, 0);
    if (rs < 0)
        return -1;
    for (size_t i = 0; i < sizeof code / sizeof code[0]; i++)
        if (allow(rs, *what = code[i], rx, ra.handled_access_fs) < 0)
            goto bad;
    if ((host_dir &&
         allow(rs, *what = host_dir, rx, ra.handled_access_fs) < 0) ||
        allow(rs, *what = "/etc/ld.so.cache", FS_READ_FILE,
              ra.handled_access_fs) < 0 ||
        allow(rs, *what = "/tmp", ra.handled_access_fs & ~FS_EXECUTE,
              ra.handled_access_fs) < 0)
        goto bad;
    for (size_t i = 0; reads && reads[i]; i++)
        if (allow(rs, *what = reads[i], FS_READ_FILE | FS_READ_DIR,
                  ra.handled_access_fs) < 0)
            goto bad;
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++)
        if (allow(rs, *what = devices[i],
                  FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE,
                  ra.handled_access_fs) < 0)
            goto bad;
    if (binfd >= 0) {
        struct landlock_path_beneath_attr pb = {
            .allowed_access = FS_EXECUTE | FS_READ_FILE,
            .parent_fd = binfd,
        };

        *what = "the host's binary";
        if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb,
                    0) < 0)
            goto bad;
    }
    return rs;
bad:;
    int e = errno;
    (void)close(rs);
    errno = e;
    return -1;
}

int
sandbox_landlock_ruleset(int abi, const char *host_dir,
                         const char *const *reads, char *err, size_t errlen)
{
    const char *what;
    int rs = make_ruleset(abi, host_dir, -1, reads, &what);

    if (rs < 0)
        snprintf(err, errlen, "landlock: %s: %s", what, strerror(errno));
    return rs;
}

int
sandbox_landlock_enter(int abi, int binfd, const char *const *reads)
{
    const char *what;
    int rs = make_ruleset(abi, NULL, binfd, reads, &what);

    if (rs < 0)
        return -1;
    int rc = sandbox_landlock_restrict(rs);
    int e = errno;
    (void)close(rs);
    errno = e;
    return rc;
}

int
sandbox_landlock_restrict(int ruleset_fd)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    return syscall(SYS_landlock_restrict_self, ruleset_fd, 0) < 0 ? -1 : 0;
}
