/*
 * state.c — a native worker that logs and keeps data in the daemon:
 * a counter per key, stored with the gateway service workmanager.state.
 *
 * Each event names its key in the extension `key` (default "default",
 * [A-Za-z0-9._-]{1,64}).  The counter is the state key "count.<key>":
 *
 *   any type           get it (absent: 0), put it back plus one, and
 *                      answer {"key": K, "count": N}
 *   a type ending in   delete it, and answer {"key": K, "count": 0}
 *   ".reset"
 *
 * Each change is logged through host->log with the worker's id, which the
 * engine puts in VIRTUFIN_WORKER_ID before the library loads.
 *
 * The service's calls (JSON, see master/broker/gateway.c and
 * workmanager-workers(7)):
 *   get    {"key": K}            -> {"key": K, "value": V}; 404 when absent
 *   put    {"key": K, "value": V} -> {"key": K}
 *   delete {"key": K}            -> {"key": K}; 404 when absent
 * gateway_call returns 0 on success, else the status (404...) with an
 * error text; either answer is freed with free_response.
 *
 * Reentrancy: a get then a put is not atomic, and the service has no
 * compare-and-swap, so the read-modify-write is done under one mutex:
 * concurrent calls of this worker never lose an increment.  (Each worker's
 * state is its own: other workers cannot race with it.)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <workmanager/worker_api.h>

#define KEY_MAX 64
/* A gateway answer or error text, as much as this example needs. */
#define ANSWER_MAX 512

int32_t Process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
                uint8_t **out_buf, int32_t *out_len);
void FreeResult(uint8_t *buf);

static pthread_mutex_t counter_lock = PTHREAD_MUTEX_INITIALIZER;

/* Calls workmanager.state's method with a JSON request.  Returns 0 with
 * the response in answer, or the gateway's non-zero status with its error
 * text in answer (both NUL-terminated, cut to fit). */
static int32_t
state_call(const VirtufinHost *host, const char *method, const char *request,
           char *answer, size_t answer_len)
{
    uint8_t *resp = NULL;
    int32_t resp_len = 0;
    int32_t rc = host->gateway_call(host->engine_ptr, "workmanager.state",
                                    method, (const uint8_t *)request,
                                    (int32_t)strlen(request), &resp, &resp_len);

    answer[0] = '\0';
    if (resp != NULL) {
        /* A response has resp_len bytes; an error text may come as a C
         * string only. */
        size_t n = resp_len > 0 ? (size_t)resp_len : strlen((char *)resp);
        if (n >= answer_len)
            n = answer_len - 1;
        memcpy(answer, resp, n);
        answer[n] = '\0';
        host->free_response(host->engine_ptr, resp);
    }
    return rc;
}

/* The integer "value" of a get's response; -1 when there is none. */
static int
value_of(const char *json, long long *out)
{
    const char *p = strstr(json, "\"value\"");
    char *end;

    if (p == NULL)
        return -1;
    p += strlen("\"value\"");
    p += strspn(p, " \t\r\n");
    if (*p++ != ':')
        return -1;
    *out = strtoll(p, &end, 10);
    return end == p ? -1 : 0;
}

static int
key_valid(struct virtufin_str k)
{
    if (k.len == 0 || k.len > KEY_MAX)
        return 0;
    for (uint32_t i = 0; i < k.len; i++) {
        char c = k.ptr[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int
ends_with(struct virtufin_str s, const char *suffix)
{
    size_t n = strlen(suffix);

    return s.ptr != NULL && s.len >= n &&
           memcmp(s.ptr + s.len - n, suffix, n) == 0;
}

/* Applies the event to the counter of key: *count is its new value.
 * Returns 0, or -1 with why set. */
static int
update(const VirtufinHost *host, const char *key, int reset, long long *count,
       char *why, size_t why_len)
{
    char request[KEY_MAX + 64], answer[ANSWER_MAX];
    int32_t rc;

    snprintf(request, sizeof request, "{\"key\": \"count.%s\"}", key);
    if (reset) {
        rc = state_call(host, "delete", request, answer, sizeof answer);
        *count = 0;
    } else {
        *count = 0;
        rc = state_call(host, "get", request, answer, sizeof answer);
        if (rc == 0 && value_of(answer, count) != 0) {
            snprintf(why, why_len, "count.%s holds no number: %.200s", key,
                     answer);
            return -1;
        }
        if (rc == 0 || rc == 404) {
            (*count)++;
            snprintf(request, sizeof request,
                     "{\"key\": \"count.%s\", \"value\": %lld}", key, *count);
            rc = state_call(host, "put", request, answer, sizeof answer);
        }
    }
    /* Deleting what is not there is no error. */
    if (rc != 0 && !(reset && rc == 404)) {
        snprintf(why, why_len, "workmanager.state: %d %.400s", (int)rc, answer);
        return -1;
    }
    return 0;
}

int32_t
Process(const VirtufinHost *host, const uint8_t *in_buf, int32_t in_len,
        uint8_t **out_buf, int32_t *out_len)
{
    struct virtufin_event ev;
    struct virtufin_str k;
    char key[KEY_MAX + 1], why[ANSWER_MAX + 64], line[ANSWER_MAX + 160];
    char data[KEY_MAX + 64];
    const char *worker = getenv("VIRTUFIN_WORKER_ID");
    long long count = 0;
    int reset, rc;

    if (virtufin_event_read(in_buf, in_len, &ev) != VIRTUFIN_OK)
        return virtufin_response_error("the input is not a CloudEvent", out_buf,
                                       out_len);
    k = virtufin_event_extension(&ev, "key");
    if (k.ptr == NULL)
        k = virtufin_str_c("default");
    if (!key_valid(k))
        return virtufin_response_error(
            "the extension key must be [A-Za-z0-9._-]{1,64}", out_buf, out_len);
    memcpy(key, k.ptr, k.len);
    key[k.len] = '\0';
    reset = ends_with(ev.type, ".reset");

    pthread_mutex_lock(&counter_lock);
    rc = update(host, key, reset, &count, why, sizeof why);
    pthread_mutex_unlock(&counter_lock);
    if (rc != 0) {
        snprintf(line, sizeof line, "worker %.64s: %s", worker ? worker : "?",
                 why);
        host->log(host->engine_ptr, VIRTUFIN_LOG_WARN, line);
        return virtufin_response_error(why, out_buf, out_len);
    }
    snprintf(line, sizeof line, "worker %.64s: count.%s = %lld",
             worker ? worker : "?", key, count);
    host->log(host->engine_ptr, VIRTUFIN_LOG_INFO, line);

    snprintf(data, sizeof data, "{\"key\": \"%s\", \"count\": %lld}", key,
             count);
    ev.type = virtufin_str_c("state.count");
    ev.datacontenttype = virtufin_str_c("application/json");
    ev.dataschema = virtufin_str_c(NULL);
    ev.data.ptr = (const uint8_t *)data;
    ev.data.len = (uint32_t)strlen(data);
    return virtufin_response_event(&ev, out_buf, out_len);
}

void
FreeResult(uint8_t *buf)
{
    virtufin_response_free(buf);
}
