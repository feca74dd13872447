/*
 * noop_worker.c — a native worker that does nothing and answers nothing,
 * for bench/native_call: what a call through the loader costs beyond the
 * worker's own work.
 */
#include "workmanager/worker_api.h"

int32_t Process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
                uint8_t **out_buf, int32_t *out_len);
void FreeResult(uint8_t *buf);

int32_t
Process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
        uint8_t **out_buf, int32_t *out_len)
{
    (void)host;
    (void)in_buf;
    (void)in_len;
    *out_buf = 0;
    *out_len = 0;
    return 0;
}

void
FreeResult(uint8_t *buf)
{
    (void)buf;
}
