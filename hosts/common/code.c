/*
 * code.c — a Load's code read from its sealed memfd (host.h,
 * host_code_read()).
 *
 * The code travels as a memfd passed beside the Load frame (DESIGN §3);
 * the master seals it before it sends it (F_SEAL_SHRINK, GROW, WRITE and
 * SEAL: master/supervise/launcher_client.h), so the bytes a host reads
 * are the bytes the master hashed, and nobody holding the descriptor can
 * change them under us.  A memfd without every seal is refused rather
 * than read: it did not come from the master's path.  The read is whole,
 * pread() again after a short count, into a buffer of the host's own with
 * a NUL after it (source code, the test host's directives, read as text).
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "hosts/common/host.h"

uint8_t *
host_code_read(const struct ipc_load *l, const int *fds, unsigned nfds,
               size_t max, const char *what, size_t *len, char *err,
               size_t errlen)
{
    const int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
    uint8_t *code;
    size_t got = 0;
    int fd, seals;

    if (l->code_fd < 0 || (unsigned)l->code_fd >= nfds) {
        snprintf(err, errlen, "the Load carries no code");
        return NULL;
    }
    fd = fds[l->code_fd];
    seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & need) != need) {
        snprintf(err, errlen, "the code memfd is not sealed");
        return NULL;
    }
    if (l->code_len > max) {
        snprintf(err, errlen, "the %s has %llu bytes, over %zu", what,
                 (unsigned long long)l->code_len, max);
        return NULL;
    }
    if ((code = malloc(l->code_len + 1)) == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    while (got < l->code_len) {
        ssize_t n = pread(fd, code + got, l->code_len - got, (off_t)got);
        if (n <= 0) {
            free(code);
            snprintf(err, errlen,
                     "the code memfd is shorter than Load.code_len");
            return NULL;
        }
        got += (size_t)n;
    }
    code[got] = '\0';
    *len = got;
    return code;
}
