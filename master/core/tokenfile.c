/*
 * tokenfile.c — a token file made on first start (tokenfile.h).
 *
 * O_CREAT | O_EXCL: an administrator's file is never overwritten, even one
 * written between the check and the creation.  The token is written and
 * fsynced before the daemon goes on, so that the token clients are given
 * is the one a restart reads.  A file that could not be completed is
 * removed: a short token would refuse every start after.
 */
#include "config.h"

#include "master/core/tokenfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/errbuf.h"
#include "lib/hex.h"
#include "master/core/conf.h"
#include "master/core/privdrop.h"

#define TOKEN_BYTES 32

/* The group the file gets: c->user's as root, else ours. */
static int
token_group(const struct conf *c, gid_t *gid, char *err, size_t errlen)
{
    struct privdrop_user u;

    *gid = getegid();
    if (geteuid() != 0)
        return 0;
    if (privdrop_resolve(c->user, &u, err, errlen) != 0)
        return -1;
    *gid = u.gid;
    return 0;
}

int
tokenfile_ensure(const struct conf *c, char *err, size_t errlen)
{
    uint8_t raw[TOKEN_BYTES];
    char text[2 * TOKEN_BYTES + 2];
    size_t got = 0;
    struct stat st;
    gid_t gid;
    int fd;

    if (c->listen[0] == '\0' || stat(c->token_file, &st) == 0 ||
        errno != ENOENT)
        return 0; /* nothing to do; an unreadable file is read_token's */
    if (token_group(c, &gid, err, errlen) != 0)
        return -1;
    while (got < sizeof raw) {
        ssize_t r = getrandom(raw + got, sizeof raw - got, 0);

        if (r < 0 && errno != EINTR)
            return errbuf_set(err, errlen, "token_file %s: getrandom: %s",
                              c->token_file, strerror(errno));
        got += r > 0 ? (size_t)r : 0;
    }
    hex_encode(raw, sizeof raw, text);
    text[2 * TOKEN_BYTES] = '\n';
    text[2 * TOKEN_BYTES + 1] = '\0';
    fd = open(c->token_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0)
        return errbuf_set(err, errlen,
                          "token_file %s does not exist and cannot be "
                          "made: %s (create it: a token of at least 16 "
                          "characters, readable by the daemon)",
                          c->token_file, strerror(errno));
    if (fchown(fd, (uid_t)-1, gid) < 0 || fchmod(fd, 0640) < 0 ||
        write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
        fsync(fd) < 0) {
        int e = errno;

        (void)close(fd);
        (void)unlink(c->token_file);
        return errbuf_set(err, errlen, "token_file %s: cannot write it: %s",
                          c->token_file, strerror(e));
    }
    (void)close(fd);
    return 1;
}
