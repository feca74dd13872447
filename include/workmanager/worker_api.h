/*
 * workmanager/worker_api.h — the native worker ABI (DESIGN §4), compatible
 * with the original system's: what a native worker library exports and
 * what the engine hands it.
 *
 * A worker exports
 *
 *   int32_t Process(const VirtufinHost *host, const uint8_t *in_buf,
 *                   int32_t in_len, uint8_t **out_buf, int32_t *out_len);
 *   void FreeResult(uint8_t *buf);
 *
 * (names configurable in manifest.json: entry_point, free_result).  in_buf
 * is a FlatBuffers CloudEvent (worker_api.fbs: no file identifier, no size
 * prefix), valid during the call.  On success Process returns 0 and sets
 * *out_buf to a malloc'd FlatBuffers WorkerResponse (or NULL for no reply)
 * and *out_len to its length; non-zero means the worker failed.  The
 * engine calls FreeResult exactly once for every non-NULL *out_buf, error
 * paths included.  Process may be called from several threads at once
 * (the worker's concurrency).
 *
 * Before the library is loaded, VIRTUFIN_WORKER_ID, VIRTUFIN_WORKER_GROUP
 * and VIRTUFIN_WORKER_TOPIC are set in the environment.
 */
#ifndef WORKMANAGER_WORKER_API_H
#define WORKMANAGER_WORKER_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VIRTUFIN_ABI_VERSION 1

/* Log levels of VirtufinHost.log. */
enum {
    VIRTUFIN_LOG_TRACE = 0,
    VIRTUFIN_LOG_DEBUG = 1,
    VIRTUFIN_LOG_INFO = 2,
    VIRTUFIN_LOG_WARN = 3,
    VIRTUFIN_LOG_ERROR = 4,
};

/* 40 bytes on 64-bit targets; 32-bit is unsupported. */
typedef struct VirtufinHost {
    void *engine_ptr;    /* opaque: pass it back, never dereference */
    int32_t abi_version; /* VIRTUFIN_ABI_VERSION */
    /* msg: NUL-terminated UTF-8, read during the call only. */
    void (*log)(void *engine_ptr, int32_t level, const char *msg);
    /* Calls a gateway service (workmanager.publish, workmanager.state)
     * with a JSON request; returns 0 and a response (JSON, *resp_len bytes,
     * freed with free_response), or non-zero with *resp an error message
     * (also freed with free_response) or NULL. */
    int32_t (*gateway_call)(void *engine_ptr, const char *service,
                            const char *method, const uint8_t *req,
                            int32_t req_len, uint8_t **resp, int32_t *resp_len);
    void (*free_response)(void *engine_ptr, uint8_t *resp);
} VirtufinHost;

typedef int32_t (*virtufin_process_fn)(const VirtufinHost *host,
                                       const uint8_t *in_buf, int32_t in_len,
                                       uint8_t **out_buf, int32_t *out_len);
typedef void (*virtufin_free_result_fn)(uint8_t *buf);

#ifdef __cplusplus
}
#endif

#endif /* WORKMANAGER_WORKER_API_H */
