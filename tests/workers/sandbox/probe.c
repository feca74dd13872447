/*
 * probe.c — a native worker whose constructor opens PROBE_PATH for
 * reading, as the worker's library is loaded (under the host's first
 * seccomp stage, its user and its Landlock domain), and whose Process
 * reports what that open answered: "probe PATH: fd F, errno E (text)".
 * Built by tests/integration/test_confinement.py with cc -shared -fPIC
 * -DPROBE_PATH='"..."'.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <workmanager/worker_api.h>

int32_t Process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
                uint8_t **out_buf, int32_t *out_len);
void FreeResult(uint8_t *buf);

static int probe_fd = -2;
static int probe_errno;

__attribute__((constructor)) static void
probe(void)
{
    errno = 0;
    probe_fd = open(PROBE_PATH, O_RDONLY | O_CLOEXEC);
    probe_errno = errno;
    if (probe_fd >= 0)
        close(probe_fd);
}

int32_t
Process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
        uint8_t **out_buf, int32_t *out_len)
{
    char msg[512];

    (void)host;
    (void)in_buf;
    (void)in_len;
    snprintf(msg, sizeof msg, "probe %s: fd %d, errno %d (%s)", PROBE_PATH,
             probe_fd, probe_errno, strerror(probe_errno));
    return virtufin_response_error(msg, out_buf, out_len);
}

void
FreeResult(uint8_t *buf)
{
    virtufin_response_free(buf);
}
