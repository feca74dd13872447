/*
 * counter.c — a stateful native worker: it counts the events it has
 * processed since its library was loaded and answers each with the count,
 * as JSON: {"count": N}.
 *
 * Reentrant: the engine calls Process from `limits.concurrency` threads at
 * once, so the count is one C11 atomic, incremented once per event; the
 * N of each answer is that event's own increment, so no two answers carry
 * the same N and the last is the number of events.  Everything else lives
 * on the stack of the call.  (The count starts again at 0 when the library
 * is loaded again: a restart, a reload.  workmanager.state keeps values
 * across those: see the state example.)
 *
 * Its manifest names the exports CounterProcess and CounterFree instead of
 * the default Process and FreeResult.
 */
#include <stdatomic.h>
#include <stdio.h>

#include <workmanager/worker_api.h>

int32_t CounterProcess(const VirtufinHost *host, const uint8_t *in_buf,
                       int32_t in_len, uint8_t **out_buf, int32_t *out_len);
void CounterFree(uint8_t *buf);

static atomic_ullong processed;

int32_t
CounterProcess(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
               uint8_t **out_buf, int32_t *out_len)
{
    struct virtufin_event ev;
    char data[64];
    unsigned long long n;
    int len;

    (void)host;
    if (virtufin_event_read(in_buf, in_len, &ev) != VIRTUFIN_OK)
        return virtufin_response_error("the input is not a CloudEvent", out_buf,
                                       out_len);
    n = atomic_fetch_add(&processed, 1) + 1;
    len = snprintf(data, sizeof data, "{\"count\": %llu}", n);
    /* The answer: the input's id, source and extensions, a type of its
     * own and the count as JSON data. */
    ev.type = virtufin_str_c("counter.count");
    ev.datacontenttype = virtufin_str_c("application/json");
    ev.dataschema = virtufin_str_c(NULL);
    ev.data.ptr = (const uint8_t *)data;
    ev.data.len = (uint32_t)len;
    return virtufin_response_event(&ev, out_buf, out_len);
}

void
CounterFree(uint8_t *buf)
{
    virtufin_response_free(buf);
}
