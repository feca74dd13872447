/*
 * host.h — the skeleton every engine host shares (libwmhost.a): wm-host-
 * native, wm-host-python, wm-host-dotnet and the test host, wm-host-test.
 *
 * A host is a process with its channel to the master on fd 3 (DESIGN §3,
 * ipc/PROTOCOL.md).  What is the same in each lives here once: the start
 * (the channel's descriptor checked, SIGPIPE ignored, the event base, the
 * role's own confinement, the Hello), the frames every host answers alike
 * (Heartbeat, Shutdown, a frame the master may not send), the sends and
 * their failures, the sealed code memfd of a Load read whole, the log, and
 * the exits.  A host describes itself by one const struct host_ops (STYLE
 * §3: roles are tables) and supplies only its Load and Process.
 *
 * Logging: a host logs through the master, in Log frames (host_log(); the
 * master writes them to its log with the worker's name).  stderr, which is
 * the daemon's, carries only what cannot go there: a death before the
 * channel exists or of the channel itself (host_die()).
 *
 * Exits (all _exit(): a host's threads may still run worker or runtime
 * code, whose atexit handlers and destructors must not run after its last
 * Result, and a confined process may not be allowed what they would call):
 *
 *   0   the master closed the channel (EOF), or Shutdown came and every
 *       event taken was answered, its frames written (up to
 *       HOST_EXIT_FLUSH_MS)
 *   1   a failed system call (host_die()), a confinement step that
 *       failed, or the channel closed for another reason than EOF (each
 *       named on stderr)
 *   4   the master sent a frame a host may not receive (named on stderr)
 *
 * Not thread-safe, as the channel is not: one thread at a time calls
 * these, the loop thread or one that holds the host's own lock (the .NET
 * host's io_mu); the others hand their work to it.
 */
#ifndef WM_HOSTS_COMMON_HOST_H
#define WM_HOSTS_COMMON_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/channel.h"

struct event_base;
struct sandbox_role;

/* The channel's descriptor, by the protocol (ipc/PROTOCOL.md). */
#define HOST_CHANNEL_FD 3
/* How long a frame refused by a full send queue (EAGAIN, past the
 * channel's 8 MiB) waits for the socket to take the queue before it is
 * sent again: the master reads as fast as it can, so a queue that does
 * not drain in this time means it is stuck, and the host gives up. */
#define HOST_SEND_WAIT_MS 10000u
/* How long the exit after Shutdown waits for its last frames to leave. */
#define HOST_EXIT_FLUSH_MS 2000u

/*
 * A host: what its Hello says, how it confines itself, and its operations.
 * Each hook runs on the loop thread; those marked optional may be NULL.
 */
struct host_ops {
    const char *name;   /* the program's, for stderr: "wm-host-native" */
    const char *engine; /* the Hello's */
    uint32_t max_inflight;
    uint32_t prefetch; /* the Hello's: Process frames beyond max_inflight */
    uint16_t protocol; /* 0: IPC_PROTOCOL_VERSION; only the test host
                          announces another */
    /* The role's own sandbox steps, host_confine() for every engine host
     * (role names the role); NULL: none, the Hello says "none".  A
     * function rather than a flag so that a host without a role links no
     * sandbox code. */
    const char *(*confine)(const struct host_ops *ops, char *warn, size_t len);
    const struct sandbox_role *role;
    /* Optional: called by host_confine() once the role's steps (its first
     * filter, on every thread) are taken and before its strict filter
     * goes on this thread: a thread started here keeps the first only. */
    void (*confined)(void);
    /* Optional: after the event base is made, before the confinement
     * (whose filter may refuse what this needs: epoll_create, eventfd,
     * threads, a runtime's probing).  Nothing may be sent yet. */
    void (*prepare)(struct event_base *base);
    /* A Load: answered with host_loaded_reply() or host_loaded_error(),
     * now or later.  fds as in ipc_channel_callbacks.on_frame. */
    void (*load)(const struct ipc_frame *f, int *fds, unsigned nfds);
    /* A Process: answered exactly once with host_result_send(), now or
     * later.  The frame's views die with the return. */
    void (*process)(const struct ipc_frame *f);
    /* Whether every event taken is answered (after Shutdown, the host
     * exits once it is: host_exit_if_done()). */
    bool (*idle)(void);
    /* Optional: whether to answer this Heartbeat (NULL: always). */
    bool (*heartbeat)(void);
    /* Optional: Shutdown came, before host_exit_if_done(). */
    void (*shutdown)(void);
    /* Optional: the loop, once the Hello is queued; it never returns.
     * NULL: event_base_dispatch(). */
    void (*serve)(struct event_base *base);
};

/*
 * Runs the host ops describes, in this order: fd 3 must be open (else
 * host_die()), SIGPIPE ignored (a master gone is EPIPE, not a signal), the
 * event base made, ops->prepare, ops->confine, the channel opened with the
 * Hello, a warning logged when the confinement is less than the role's (or
 * a debug mode is on), then ops->serve or the event loop.  ops must live
 * as long as the process.  Never returns.
 */
void host_run(const struct host_ops *ops) __attribute__((noreturn));

/* The channel, or NULL before host_run() opened it. */
struct ipc_channel *host_channel(void);

/* Whether Shutdown came. */
bool host_shutting_down(void);

/* After Shutdown, once ops->idle() says every event taken is answered:
 * writes the queue (up to HOST_EXIT_FLUSH_MS) and exits 0.  Else returns.
 * A host calls it wherever it answers an event out of turn. */
void host_exit_if_done(void);

/* Writes "<name>[pid]: <what>: <strerror(errno)>" to stderr and exits 1:
 * for what the host cannot go on after. */
void host_die(const char *what) __attribute__((noreturn));

/* A Log frame of the host's own, formatted as printf() does (cut at 1023
 * bytes), sent as host_log_send() sends it. */
void host_log(enum ipc_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A Log frame with msg's first len bytes (a worker's line, as long as it
 * is: the master cuts what does not fit its log line).  A full queue is
 * written first (up to HOST_SEND_WAIT_MS) and the frame sent again; still
 * full, the line is dropped; any other failure is host_die().  Before the
 * channel exists the line goes to stderr. */
void host_log_send(enum ipc_log_level level, const char *msg, size_t len);

/* Sends f with the descriptors fds[0..nfds) (the channel's from here on).
 * A full queue is written (up to HOST_SEND_WAIT_MS) and the frame sent
 * again; with descriptors, which a refused send closes, whatever is
 * queued is written first.  Returns 0, or -1 with errno EMSGSIZE (f is
 * over the frame cap: the caller's to replace); any other failure is
 * host_die(). */
int host_frame_send(const struct ipc_frame *f, const int *fds, unsigned nfds);

/* The Result of the Process seq: r's outputs and error; an r over the
 * frame cap is sent as the error output_too_large instead. */
void host_result_send(uint64_t seq, const struct ipc_result *r);

/* The Loaded of the Load seq: ok when why is NULL, else the error
 * load_error with message why. */
void host_loaded_reply(uint64_t seq, const char *why);

/* The Loaded of the Load seq with the error e (its type given: a Python
 * exception's type, message and traceback); ok when e is NULL. */
void host_loaded_error(uint64_t seq, const struct ipc_error *e);

/*
 * The code of Load l: its memfd (fds[l->code_fd]), which must carry every
 * seal the master sets (F_SEAL_SHRINK, GROW, WRITE and SEAL: nobody can
 * change it under us), read whole into a malloc'd buffer of l->code_len
 * bytes and a NUL after them (*len: the bytes without the NUL).  NULL with
 * the reason in err when the Load has no code, the memfd is not sealed,
 * is shorter than code_len, or code_len is over max ("the <what> has N
 * bytes, over MAX"), or out of memory.
 */
uint8_t *host_code_read(const struct ipc_load *l, const int *fds, unsigned nfds,
                        size_t max, const char *what, size_t *len, char *err,
                        size_t errlen);

/*
 * The confinement of an engine host (ops->confine): ops->role's own steps
 * (sandbox_role_enter(): no_new_privs, MDWE, its filter on every thread),
 * then ops->confined, then the role's strict filter on this thread when it
 * has one, in the mode WM_SANDBOX_DEBUG names.  Returns the confinement
 * for the Hello (its level raised to the spawner's, sandbox_spawned_level;
 * "none" unconfined or in log mode); *warn says why it is less than the
 * role's, or that a debug mode is on, or is empty.  A step that fails ends
 * the host (exit 1).  Built --without-sandbox: ops->confined, then "none".
 */
const char *host_confine(const struct host_ops *ops, char *warn, size_t len);

#endif /* WM_HOSTS_COMMON_HOST_H */
