/*
 * frame.h — the frames of ipc/frame.fbs between the master and its hosts
 * (DESIGN §3; who sends what is in ipc/PROTOCOL.md).
 *
 * struct ipc_frame is the typed form of one frame: decoded frames are views
 * into the verified receive buffer, valid while it is; the same struct,
 * filled by the caller, is what ipc_frame_encode() writes.  File
 * descriptors travel beside frames (SCM_RIGHTS, see channel.h); fields such
 * as Load.code_fd index them.
 */
#ifndef WM_IPC_FRAME_H
#define WM_IPC_FRAME_H

#include "ipc/cloudevent.h"

#define IPC_PROTOCOL_VERSION 1
/* The file identifier of every frame. */
#define IPC_FRAME_IDENT "WMF1"
/* Default cap of one frame, prefix included. */
#define IPC_FRAME_MAX_DEFAULT (16u * 1024 * 1024)

/* Union codes, pinned by the order of `union Body` in frame.fbs. */
enum ipc_body_type {
    IPC_BODY_NONE = 0,
    IPC_BODY_HELLO,
    IPC_BODY_LOAD,
    IPC_BODY_LOADED,
    IPC_BODY_PROCESS,
    IPC_BODY_RESULT,
    IPC_BODY_GATEWAY_CALL,
    IPC_BODY_GATEWAY_REPLY,
    IPC_BODY_LOG,
    IPC_BODY_HEARTBEAT,
    IPC_BODY_SHUTDOWN,
    IPC_BODY_FORK,
    IPC_BODY_FORKED,
    IPC_BODY_MAX = IPC_BODY_FORKED,
};

enum ipc_log_level {
    IPC_LOG_TRACE = 0,
    IPC_LOG_DEBUG,
    IPC_LOG_INFO,
    IPC_LOG_WARN,
    IPC_LOG_ERROR,
};

struct ipc_hello {
    uint16_t protocol;
    struct ipc_str engine;
    int32_t pid;
    uint32_t max_inflight;
    struct ipc_str confinement;
    bool accepted;
    struct ipc_str reason;
    /* Host: Process frames it takes beyond max_inflight, queued and run in
     * the order received as the running ones end (PROTOCOL.md). */
    uint32_t prefetch;
};

struct ipc_identity {
    struct ipc_str id; /* ptr NULL: the whole table is absent */
    struct ipc_str group;
    struct ipc_str topic;
};

struct ipc_limits {
    bool present;
    uint32_t timeout_ms;
    uint32_t memory_mb;
    uint32_t concurrency;
};

/* type.ptr NULL: no error. */
struct ipc_error {
    struct ipc_str type;
    struct ipc_str message;
    struct ipc_str exception_type;
    struct ipc_str traceback;
};

struct ipc_load {
    struct ipc_str worker_id;
    uint32_t version;
    struct ipc_str mime;
    int32_t code_fd; /* index into the frame's fds, -1 for none */
    uint64_t code_len;
    struct ipc_bytes sha256;
    struct ipc_identity identity;
    struct ipc_pair_list config;
    struct ipc_limits limits;
    bool in_process; /* validate, and answer with the library (§4) */
};

struct ipc_loaded {
    bool ok;
    struct ipc_error error;
    /* The answer to an in_process Load: the manifest's names and the
     * library's sealed memfd (an index into the frame's fds; sent only
     * with library, -1 when absent). */
    int32_t library_fd;
    struct ipc_str library;
    struct ipc_str entry_point;
    struct ipc_str free_result;
};

struct ipc_process {
    struct ipc_bytes event; /* an ABI CloudEvent buffer, verified */
    uint32_t deadline_ms;
    uint32_t delivery;
};

struct ipc_result {
    struct ipc_cloudevent_list outputs;
    struct ipc_error error;
};

struct ipc_gateway_call {
    struct ipc_str service;
    struct ipc_str method;
    struct ipc_bytes request;
};

struct ipc_gateway_reply {
    int32_t status;
    struct ipc_bytes response;
    struct ipc_str error;
};

struct ipc_log {
    enum ipc_log_level level;
    struct ipc_str message;
};

struct ipc_shutdown {
    uint32_t grace_ms;
};

struct ipc_fork {
    struct ipc_str worker_id;
    uint32_t uid;
    uint32_t gid;
    struct ipc_limits limits;
};

struct ipc_forked {
    int32_t pid;
};

struct ipc_frame {
    uint64_t seq;
    uint64_t reply_to;
    enum ipc_body_type type;
    union {
        struct ipc_hello hello;
        struct ipc_load load;
        struct ipc_loaded loaded;
        struct ipc_process process;
        struct ipc_result result;
        struct ipc_gateway_call gateway_call;
        struct ipc_gateway_reply gateway_reply;
        struct ipc_log log;
        struct ipc_shutdown shutdown;
        struct ipc_fork fork;
        struct ipc_forked forked;
    } u;
};

extern const struct ipc_fb_schema ipc_frame_schema;

/* Verifies a whole size-prefixed frame (prefix included, buf 8-aligned) and
 * decodes it into *f: the FlatBuffers rules, then the protocol's own
 * (Process.event a valid CloudEvent, Result outputs valid CloudEvents, Log
 * level known).  Returns 0, or -1 with *err naming what was wrong. */
int ipc_frame_read(const uint8_t *buf, size_t len, struct ipc_frame *f,
                   struct ipc_fb_error *err);

/* Appends the size-prefixed frame to b (which should be empty, so that the
 * frame starts 8-aligned).  The Frame table's seq field is always written;
 * its position is stored in *seq_pos when not NULL so that a channel can
 * stamp the sequence number at send time.  Returns 0, or -1 when out of
 * memory. */
int ipc_frame_encode(struct ipc_fb_builder *b, const struct ipc_frame *f,
                     size_t *seq_pos);

const char *ipc_body_name(enum ipc_body_type type);

#endif /* WM_IPC_FRAME_H */
