/*
 * bridge.h — the C side of the managed bridge's ABI (bridge/Native.cs
 * mirrors these field for field; issue 10): events as pointer/length
 * views, the host's callbacks, and the bridge's UnmanagedCallersOnly
 * entry points as function pointers.  Strings are UTF-8 and a length of
 * -1 means absent.
 */
#ifndef WM_HOSTS_DOTNET_BRIDGE_H
#define WM_HOSTS_DOTNET_BRIDGE_H

#include <stdint.h>

struct dn_str {
    const uint8_t *ptr;
    int64_t len;
};

/* The CloudEvent attributes in the order of worker_api.fbs. */
enum {
    DN_ID,
    DN_TYPE,
    DN_SOURCE,
    DN_SPECVERSION,
    DN_DATACONTENTTYPE,
    DN_DATASCHEMA,
    DN_SUBJECT,
    DN_TIME,
    DN_DATA,
    DN_FIELDS,
};

struct dn_event {
    struct dn_str f[DN_FIELDS];
    int64_t next;
    const struct dn_str *ext; /* name, value, name, value, ... */
};

/* err[4]: type, message, exception type, traceback; err[0].len -1 when
 * the worker succeeded (out NULL: no output). */
typedef void (*dn_complete_fn)(uint64_t seq, const struct dn_event *out,
                               const struct dn_str *err);
typedef void (*dn_log_fn)(int32_t level, const struct dn_str *msg);
typedef void (*dn_gateway_fn)(uint64_t token, const struct dn_str *service,
                              const struct dn_str *method,
                              const struct dn_str *request);
/* The bridge posted continuations for the loop thread: it is to call
 * run_posted() (from any thread). */
typedef void (*dn_wake_fn)(void);

struct dn_callbacks {
    dn_complete_fn complete;
    dn_log_fn log;
    dn_gateway_fn gateway;
    dn_wake_fn wake;
    /* The DevKit's image (blobs.h), for compiling C# source workers. */
    const uint8_t *devkit;
    int64_t devkit_len;
};

/* The bridge's entry points (Workmanager.Bridge.Entry). */
struct dn_bridge {
    int (*init)(const struct dn_callbacks *cb);
    int (*load)(const struct dn_str *mime, const uint8_t *code, int64_t len,
                int32_t concurrency, char *err, int32_t errcap);
    void (*process)(uint64_t seq, const struct dn_event *ev);
    void (*gateway_reply)(uint64_t token, int32_t status, const uint8_t *body,
                          int64_t len);
    /* Runs what was posted to the loop thread's LoopContext (dn_wake_fn);
     * on the loop thread only. */
    void (*run_posted)(void);
};

#endif /* WM_HOSTS_DOTNET_BRIDGE_H */
