/*
 * http_private.h — the insides of the admin API's HTTP server
 * (http_server.h), shared by http_conn.c (a connection's input and life),
 * http_reply.c (its output) and http_listen.c (accepting).  Included only
 * by those, http_tls.c and the server's unit tests.
 *
 * A connection's states, in the order a request goes through them:
 * HEAD (waiting for, or reading, a request's head; idle between requests),
 * BODY, HANDLER (the handler owns the request), STREAM (a streamed answer
 * is under way), then HEAD again, or CLOSING (the last answer is being
 * written, then close), LINGER (after a refusal: the write side shut, what
 * the client still sends read and dropped for a moment so that it reads
 * the refusal rather than a reset) and DEAD (the socket is closed; the
 * structure waits for the handler's answer to be freed).
 *
 * The I/O of a connection goes through struct http_io (read, writev,
 * close), so that a TLS connection can take the plain socket's place.
 */
#ifndef WM_MASTER_API_HTTP_PRIVATE_H
#define WM_MASTER_API_HTTP_PRIVATE_H

#include <http_parser.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "master/api/http_server.h"

struct event;
struct ssl_st;

/* The answer's room for headers a handler adds (Retry-After,
 * WWW-Authenticate, Cache-Control). */
#define HTTP_EXTRA_HEADERS 1024
/* A read's size: the buffer grows by this much at a time. */
#define HTTP_READ_CHUNK 16384
/* How long a refused client may go on sending before it is cut off. */
#define HTTP_LINGER_MS 2000

enum http_conn_state {
    HTTP_CONN_HEAD,
    HTTP_CONN_BODY,
    HTTP_CONN_HANDLER,
    HTTP_CONN_STREAM,
    HTTP_CONN_CLOSING,
    HTTP_CONN_LINGER,
    HTTP_CONN_DEAD,
};

/* read and writev behave as the system calls do (-1 with errno EAGAIN
 * when they would block); shutdown ends the write side (0, or -1);
 * pending is the bytes the layer read from the socket and holds already
 * (the socket's read event will not report them); close closes the
 * socket. */
struct http_io {
    ssize_t (*read)(struct http_conn *c, void *buf, size_t len);
    ssize_t (*writev)(struct http_conn *c, const struct iovec *iov, int n);
    int (*shutdown)(struct http_conn *c);
    size_t (*pending)(const struct http_conn *c);
    void (*close)(struct http_conn *c);
};

/* A header while the head is read: offsets from the message's first byte
 * (the read buffer may move). */
struct http_hdr_off {
    uint32_t name;
    uint32_t name_len;
    uint32_t value;
    uint32_t value_len;
};

struct http_server {
    struct event_base *base;
    struct http_limits lim;
    http_handler_fn handler;
    void *arg;
    TAILQ_HEAD(, http_conn) conns;
    LIST_HEAD(, http_listener) listeners;
    unsigned nofile;
    unsigned reserve;
    struct http_server_stats st;
    int64_t accept_log_ms;    /* when the last accept failure was logged */
    uint64_t accept_unlogged; /* failures since */
};

struct http_conn {
    struct http_server *srv;
    struct http_listener *lst; /* NULL when adopted */
    struct http_peer_count *peer_count;
    TAILQ_ENTRY(http_conn) link;
    const struct http_io *io;
    int fd;
    struct ssl_st *ssl; /* TLS (http_tls.c), or NULL */
    struct event *rev;  /* persistent, for the connection's life */
    struct event *wev;  /* armed only while the socket is full */
    struct event *tev;  /* the deadline of the state */
    enum http_conn_state state;
    http_parser parser;
    struct http_peer peer;

    /* Input: [0, in_len) read, [0, in_pos) parsed, the current message
     * from msg_start. */
    char *in;
    size_t in_len;
    size_t in_cap;
    size_t in_pos;
    size_t msg_start;
    bool msg_begun;        /* a byte of the current request arrived */
    int64_t head_deadline; /* ms, monotonic, once msg_begun */
    bool in_field;         /* the parser's last header piece was a name */
    size_t head_end;       /* the head's length, once read */
    uint32_t url_off;
    uint32_t url_len;
    struct http_hdr_off *hoff;
    struct http_header *hdrs;
    unsigned nhdr;
    unsigned hcap;
    unsigned char *body;
    size_t body_len;
    size_t body_cap;

    /* The refusal the parser's callbacks decided on (0: none). */
    int refuse_status;
    const char *refuse_code;
    char refuse_msg[160];

    /* Output not yet written: [out_pos, out_len). */
    char *out;
    size_t out_len;
    size_t out_cap;
    size_t out_pos;
    char extra[HTTP_EXTRA_HEADERS];
    size_t extra_len;

    bool keep_alive;  /* of the current request */
    bool chunked_out; /* the stream is chunked */
    bool in_process;  /* inside conn_process(): free later */
    bool free_later;
    bool reading; /* rev is added */
    bool writing; /* wev is added */
    bool broken;  /* a write failed: lost at the next read event */
    bool gone;    /* the client hung up during the request */
    void (*gone_fn)(void *arg);
    void *gone_arg;
    struct http_request req;
};

/* An iovec's base from a const buffer (writev does not write to it). */
static inline void *
http_iov_base(const void *p)
{
    union {
        const void *c;
        void *m;
    } u = { p };
    return u.m;
}

/* ---- http_conn.c --------------------------------------------------------- */

/* A connection on fd (accepted: the listener counts it). */
struct http_conn *http_conn_new(struct http_server *srv,
                                struct http_listener *lst, int fd);
/* Ends the connection now: the socket closed, a handler's request marked
 * gone, the structure freed unless a handler still owns its request. */
void http_conn_close(struct http_conn *c);
/* The current request's answer has been queued in full: the next request
 * (keep-alive), or the close. */
void http_conn_answered(struct http_conn *c);
/* Sets the deadline of the connection's state. */
void http_conn_timer_update(struct http_conn *c);
/* The last answer is written: the write side shut, then what the client
 * still sends is dropped until it closes or HTTP_LINGER_MS pass. */
void http_conn_linger(struct http_conn *c);
/* The client hung up or the socket failed: see http_server.h. */
void http_conn_lost(struct http_conn *c);
/* Answers a refusal of the server itself (JSON error, Connection: close),
 * then lingers or closes. */
void http_conn_refuse(struct http_conn *c, int status, const char *code,
                      const char *msg);

/* ---- http_reply.c -------------------------------------------------------- */

/* Writes iov (directly when nothing is queued; what the socket does not
 * take is queued and the write event armed).  Returns 0, or -1 when the
 * connection is lost (http_conn_lost() has run). */
int http_conn_send(struct http_conn *c, const struct iovec *iov, int n);
/* Unsent output bytes. */
size_t http_conn_pending(const struct http_conn *c);
/* The write event's callback. */
void http_conn_on_writable(int fd, short what, void *arg);
/* Formats the answer's head into buf (status line, Date, Content-Type,
 * Content-Length or chunked, Connection, the extra headers); returns its
 * length, 0 when it does not fit. */
size_t http_reply_head(struct http_conn *c, int status,
                       const char *content_type, bool has_length,
                       uint64_t length, char *buf, size_t cap);
/* The JSON error object, {"error":{"code":…,"message":…}}\n, into buf;
 * returns its length (the message cut to fit). */
size_t http_reply_error_body(const char *code, const char *message, char *buf,
                             size_t cap);

/* ---- http_tls.c ---------------------------------------------------------- */

/* Puts c (just accepted, nothing read yet) on TLS with tls's setting: its
 * I/O becomes TLS, the handshake runs within its first reads.  Returns
 * 0, or -1 (out of memory; c is unchanged). */
int http_tls_attach(struct http_conn *c, struct http_tls *tls);

/* ---- http_listen.c ------------------------------------------------------- */

/* A connection of l closed. */
void http_listener_conn_closed(struct http_listener *l,
                               struct http_peer_count *pc);
/* Monotonic milliseconds. */
int64_t http_now_ms(void);
/* A log line rate-limited to one per every_ms: true when this one is due
 * (*last_ms set to now; the caller prints *unlogged, the lines left out
 * since, then zeroes it), false when it is left out (*unlogged counts
 * it). */
bool http_log_due(int64_t *last_ms, uint64_t *unlogged, int64_t every_ms);

#endif /* WM_MASTER_API_HTTP_PRIVATE_H */
