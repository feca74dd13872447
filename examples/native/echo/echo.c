/*
 * echo.c — the smallest native worker: it answers each event with the
 * same event, its type suffixed with ".echo" (same id, source, data and
 * extensions, so correlationid stays first).
 *
 * Only the inline helpers of <workmanager/worker_api.h> are used: no
 * FlatBuffers library.  Process keeps no state, so any number of threads
 * may run it at once.
 */
#include <stdlib.h>
#include <string.h>

#include <workmanager/worker_api.h>

#define SUFFIX ".echo"

int32_t Process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
                uint8_t **out_buf, int32_t *out_len);
void FreeResult(uint8_t *buf);

int32_t
Process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
        uint8_t **out_buf, int32_t *out_len)
{
    struct virtufin_event ev;
    char *type;
    int32_t rc;

    (void)host;
    if (virtufin_event_read(in_buf, in_len, &ev) != VIRTUFIN_OK)
        return virtufin_response_error("the input is not a CloudEvent", out_buf,
                                       out_len);
    /* The new type: the old one's bytes and the suffix.  The response
     * copies it, so it is freed right after. */
    type = malloc((size_t)ev.type.len + sizeof SUFFIX);
    if (type == NULL)
        return VIRTUFIN_ERR_NOMEM;
    if (ev.type.len > 0)
        memcpy(type, ev.type.ptr, ev.type.len);
    memcpy(type + ev.type.len, SUFFIX, sizeof SUFFIX);
    ev.type.ptr = type;
    ev.type.len += (uint32_t)strlen(SUFFIX);
    rc = virtufin_response_event(&ev, out_buf, out_len);
    free(type);
    return rc;
}

void
FreeResult(uint8_t *buf)
{
    virtufin_response_free(buf);
}
