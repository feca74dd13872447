/*
 * codec_eq.h — field-by-field comparison of decoded codec values, for the
 * round-trip tests (test_cloudevent.c, test_frame.c).
 *
 * Values are compared, never bytes: the FlatBuffers encoding of one value
 * is not unique.  A string or vector compares its presence (ptr NULL or
 * not) and then its bytes, so that "absent" and "empty" stay apart.  Each
 * function prints the first field that differs, which is all a failing
 * round trip needs to be debugged.
 */
#ifndef WM_TESTS_CODEC_EQ_H
#define WM_TESTS_CODEC_EQ_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ipc/cloudevent.h"
#include "ipc/frame.h"

static inline bool
eq_report(bool ok, const char *what)
{
    if (!ok)
        fprintf(stderr, "  value differs: %s\n", what);
    return ok;
}

static inline bool
eq_str(struct ipc_str a, struct ipc_str b, const char *what)
{
    bool ok = (a.ptr == NULL) == (b.ptr == NULL);
    if (ok && a.ptr)
        ok = a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
    return eq_report(ok, what);
}

static inline bool
eq_bytes(struct ipc_bytes a, struct ipc_bytes b, const char *what)
{
    bool ok = (a.ptr == NULL) == (b.ptr == NULL);
    if (ok && a.ptr)
        ok = a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
    return eq_report(ok, what);
}

static inline bool
eq_u64(uint64_t a, uint64_t b, const char *what)
{
    return eq_report(a == b, what);
}

static inline bool
eq_pairs(const struct ipc_pair_list *a, const struct ipc_pair_list *b,
         const char *what)
{
    if (!eq_report(a->n == b->n, what))
        return false;
    for (uint32_t i = 0; i < a->n; i++) {
        struct ipc_pair pa, pb;
        ipc_pair_list_get(a, i, &pa);
        ipc_pair_list_get(b, i, &pb);
        if (!eq_str(pa.name, pb.name, what) ||
            !eq_str(pa.value, pb.value, what))
            return false;
    }
    return true;
}

static inline bool
eq_cloudevent(const struct ipc_cloudevent *a, const struct ipc_cloudevent *b)
{
    return eq_str(a->id, b->id, "CloudEvent.id") &&
           eq_str(a->type, b->type, "CloudEvent.type") &&
           eq_str(a->source, b->source, "CloudEvent.source") &&
           eq_str(a->specversion, b->specversion, "CloudEvent.specversion") &&
           eq_str(a->datacontenttype, b->datacontenttype,
                  "CloudEvent.datacontenttype") &&
           eq_str(a->dataschema, b->dataschema, "CloudEvent.dataschema") &&
           eq_str(a->subject, b->subject, "CloudEvent.subject") &&
           eq_str(a->time, b->time, "CloudEvent.time") &&
           eq_bytes(a->data, b->data, "CloudEvent.data") &&
           eq_pairs(&a->extensions, &b->extensions, "CloudEvent.extensions");
}

static inline bool
eq_error(const struct ipc_error *a, const struct ipc_error *b)
{
    return eq_str(a->type, b->type, "Error.type") &&
           eq_str(a->message, b->message, "Error.message") &&
           eq_str(a->exception_type, b->exception_type,
                  "Error.exception_type") &&
           eq_str(a->traceback, b->traceback, "Error.traceback");
}

static inline bool
eq_limits(const struct ipc_limits *a, const struct ipc_limits *b)
{
    return eq_report(a->present == b->present, "Limits present") &&
           (!a->present ||
            (eq_u64(a->timeout_ms, b->timeout_ms, "Limits.timeout_ms") &&
             eq_u64(a->memory_mb, b->memory_mb, "Limits.memory_mb") &&
             eq_u64(a->concurrency, b->concurrency, "Limits.concurrency")));
}

static inline bool
eq_identity(const struct ipc_identity *a, const struct ipc_identity *b)
{
    return eq_str(a->id, b->id, "Identity.id") &&
           eq_str(a->group, b->group, "Identity.group") &&
           eq_str(a->topic, b->topic, "Identity.topic");
}

static inline bool
eq_body(const struct ipc_frame *a, const struct ipc_frame *b)
{
    switch (a->type) {
    case IPC_BODY_HELLO: {
        const struct ipc_hello *x = &a->u.hello, *y = &b->u.hello;
        return eq_u64(x->protocol, y->protocol, "Hello.protocol") &&
               eq_str(x->engine, y->engine, "Hello.engine") &&
               eq_u64((uint32_t)x->pid, (uint32_t)y->pid, "Hello.pid") &&
               eq_u64(x->max_inflight, y->max_inflight, "Hello.max_inflight") &&
               eq_str(x->confinement, y->confinement, "Hello.confinement") &&
               eq_u64(x->accepted, y->accepted, "Hello.accepted") &&
               eq_str(x->reason, y->reason, "Hello.reason") &&
               eq_u64(x->prefetch, y->prefetch, "Hello.prefetch");
    }
    case IPC_BODY_LOAD: {
        const struct ipc_load *x = &a->u.load, *y = &b->u.load;
        return eq_str(x->worker_id, y->worker_id, "Load.worker_id") &&
               eq_u64(x->version, y->version, "Load.version") &&
               eq_str(x->mime, y->mime, "Load.mime") &&
               eq_u64((uint32_t)x->code_fd, (uint32_t)y->code_fd,
                      "Load.code_fd") &&
               eq_u64(x->code_len, y->code_len, "Load.code_len") &&
               eq_bytes(x->sha256, y->sha256, "Load.sha256") &&
               eq_identity(&x->identity, &y->identity) &&
               eq_pairs(&x->config, &y->config, "Load.config") &&
               eq_limits(&x->limits, &y->limits);
    }
    case IPC_BODY_LOADED:
        return eq_u64(a->u.loaded.ok, b->u.loaded.ok, "Loaded.ok") &&
               eq_error(&a->u.loaded.error, &b->u.loaded.error);
    case IPC_BODY_PROCESS: {
        const struct ipc_process *x = &a->u.process, *y = &b->u.process;
        return eq_bytes(x->event, y->event, "Process.event") &&
               eq_u64(x->deadline_ms, y->deadline_ms, "Process.deadline_ms") &&
               eq_u64(x->delivery, y->delivery, "Process.delivery");
    }
    case IPC_BODY_RESULT: {
        const struct ipc_result *x = &a->u.result, *y = &b->u.result;
        if (!eq_u64(x->outputs.n, y->outputs.n, "Result.outputs count"))
            return false;
        for (uint32_t i = 0; i < x->outputs.n; i++) {
            struct ipc_cloudevent ca, cb;
            ipc_cloudevent_list_get(&x->outputs, i, &ca);
            ipc_cloudevent_list_get(&y->outputs, i, &cb);
            if (!eq_cloudevent(&ca, &cb))
                return false;
        }
        return eq_error(&x->error, &y->error);
    }
    case IPC_BODY_GATEWAY_CALL: {
        const struct ipc_gateway_call *x = &a->u.gateway_call;
        const struct ipc_gateway_call *y = &b->u.gateway_call;
        return eq_str(x->service, y->service, "GatewayCall.service") &&
               eq_str(x->method, y->method, "GatewayCall.method") &&
               eq_bytes(x->request, y->request, "GatewayCall.request");
    }
    case IPC_BODY_GATEWAY_REPLY: {
        const struct ipc_gateway_reply *x = &a->u.gateway_reply;
        const struct ipc_gateway_reply *y = &b->u.gateway_reply;
        return eq_u64((uint32_t)x->status, (uint32_t)y->status,
                      "GatewayReply.status") &&
               eq_bytes(x->response, y->response, "GatewayReply.response") &&
               eq_str(x->error, y->error, "GatewayReply.error");
    }
    case IPC_BODY_LOG:
        return eq_u64(a->u.log.level, b->u.log.level, "Log.level") &&
               eq_str(a->u.log.message, b->u.log.message, "Log.message");
    case IPC_BODY_HEARTBEAT:
        return true;
    case IPC_BODY_SHUTDOWN:
        return eq_u64(a->u.shutdown.grace_ms, b->u.shutdown.grace_ms,
                      "Shutdown.grace_ms");
    case IPC_BODY_FORK: {
        const struct ipc_fork *x = &a->u.fork, *y = &b->u.fork;
        return eq_str(x->worker_id, y->worker_id, "Fork.worker_id") &&
               eq_u64(x->uid, y->uid, "Fork.uid") &&
               eq_u64(x->gid, y->gid, "Fork.gid") &&
               eq_limits(&x->limits, &y->limits);
    }
    case IPC_BODY_FORKED:
        return eq_u64((uint32_t)a->u.forked.pid, (uint32_t)b->u.forked.pid,
                      "Forked.pid");
    default:
        return eq_report(false, "unknown body type");
    }
}

static inline bool
eq_frame(const struct ipc_frame *a, const struct ipc_frame *b)
{
    return eq_u64(a->seq, b->seq, "Frame.seq") &&
           eq_u64(a->reply_to, b->reply_to, "Frame.reply_to") &&
           eq_u64(a->type, b->type, "Frame.body_type") && eq_body(a, b);
}

#endif /* WM_TESTS_CODEC_EQ_H */
