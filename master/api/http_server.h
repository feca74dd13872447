/*
 * http_server.h — the admin API's own HTTP/1.1 server on libevent's loop
 * (DESIGN §8; issue 21 items 5–7).  http_conn.c is a connection (reading
 * and parsing with Debian's libhttp-parser, keep-alive, pipelining in
 * order, Expect: 100-continue, chunked bodies, HTTP/1.0, HEAD, replies and
 * chunked streams, hang-ups, the deadlines); http_listen.c the listeners
 * (accept, the connection caps, the pause on EMFILE, the descriptor
 * reserve); http_reply.c the bytes of an answer.
 *
 * Why not evhttp: its own refusals are HTML pages with no hook, it has no
 * connection cap, its timeouts restart on every byte (slowloris) and its
 * accept path spins on EMFILE.  This server answers everything it refuses
 * with the API's JSON error object ({"error": {"code", "message"}}).
 *
 * A connection serves one request at a time: the next request of a
 * pipeline is parsed once the current one is answered, so answers leave in
 * the order of the requests.  A request (struct http_request) lives in its
 * connection; its header names and values point into the connection's
 * read buffer (NUL-terminated there), its body into a buffer the
 * connection reuses.  All stay valid until the request is answered.
 *
 * The handler owns a request from its call until it answers it:
 * http_reply() (once), or http_stream_start() … http_stream_end().  A
 * client that hangs up before that runs the request's gone callback once;
 * the handler still answers, and the answer is dropped.  During a stream,
 * the gone callback is the end: the request is freed when it returns.
 */
#ifndef WM_MASTER_API_HTTP_SERVER_H
#define WM_MASTER_API_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct http_server;
struct http_listener;
struct http_conn;
struct http_tls;

/* What a request may be, and how long its parts may take (0 = no limit
 * for the timeouts).  Each refusal is an answer with the JSON error
 * object, then the connection is closed. */
struct http_limits {
    size_t max_header_bytes; /* request line and headers: 431 */
    unsigned max_headers;    /* 431 */
    size_t max_url_bytes;    /* the request target: 414 */
    uint64_t max_body_bytes; /* 413, before reading a body announced so */
    /* From the first byte of a request to its last header: 408.  Not
     * restarted by each byte (slowloris). */
    unsigned header_timeout_ms;
    /* Between two reads of a body: 408. */
    unsigned body_timeout_ms;
    /* A kept-alive connection with no request: closed. */
    unsigned idle_timeout_ms;
    /* Between two writes of an answer the client does not read: closed
     * (streams too). */
    unsigned write_timeout_ms;
};

/* Who is at the other end, read once at accept. */
struct http_peer {
    bool tcp;  /* else a unix socket */
    bool cred; /* uid, gid, pid known (SO_PEERCRED) */
    uid_t uid;
    gid_t gid;
    pid_t pid;
    /* "uid=0 gid=0 pid=42", "tcp 127.0.0.1:4711", or on TLS with a
     * verified client certificate "tcp 127.0.0.1:4711 tls cn=acme". */
    char text[160];
    /* TLS (set once the handshake is done, before the first request):
     * client_cert when the client sent a certificate that verified against
     * tls_client_ca_file; then subject is its subject (RFC 2253) and
     * tenant its subject's CN, the tenant the client speaks for (empty
     * when the certificate has no CN). */
    bool tls;
    bool client_cert;
    char subject[256];
    char tenant[64];
};

struct http_header {
    const char *name;  /* NUL-terminated, as sent */
    const char *value; /* NUL-terminated, without surrounding blanks */
    size_t name_len;
    size_t value_len;
};

struct http_request {
    const char *method; /* "GET", "HEAD", "POST", "PUT" or "DELETE" */
    bool head;          /* HEAD: the answer goes without its body */
    int minor;          /* HTTP/1.<minor> */
    /* The request target's path and query, raw (not decoded); the path
     * is "/" when the target has none, the query NULL when absent. */
    const char *path;
    size_t path_len;
    const char *query;
    size_t query_len;
    const struct http_header *headers;
    size_t nheaders;
    const unsigned char *body; /* never NULL */
    size_t body_len;
    const struct http_peer *peer;
    struct http_conn *conn; /* the server's */
};

/* Takes each request; owns it until it answers (see above). */
typedef void (*http_handler_fn)(struct http_request *req, void *arg);

/* A server on base with those limits (copied).  NULL on out of memory.
 * The parser's own head limit (a process-wide setting of libhttp-parser)
 * is raised to max_header_bytes if it is lower. */
struct http_server *http_server_new(struct event_base *base,
                                    const struct http_limits *limits,
                                    http_handler_fn handler, void *arg);
/* Closes every listener and connection: requests a handler still owns are
 * marked gone (their gone callback runs) and freed once answered. */
void http_server_free(struct http_server *srv);

/* Serves the connected socket fd (non-blocking or not; the server owns it
 * from now on).  For tests, fuzzing and listeners.  Returns 0, or -1 with
 * fd closed. */
int http_server_adopt(struct http_server *srv, int fd);

/* Descriptors: accepted sockets are refused (closed at once, accepting
 * paused as for EMFILE) when the kernel hands out a descriptor at or past
 * nofile - reserve; the kernel gives the lowest free one, so fewer than
 * `reserve` would be left for hosts, the store and the journal.  0 for
 * nofile: no check. */
void http_server_set_fd_reserve(struct http_server *srv, unsigned nofile,
                                unsigned reserve);

/* Counters, for tests and /metrics. */
struct http_server_stats {
    uint64_t connections;   /* open now */
    uint64_t accepted;      /* since start */
    uint64_t refused;       /* refusals answered by the server itself */
    uint64_t accept_pauses; /* EMFILE, ENFILE or the reserve reached */
    uint64_t timeouts;      /* connections ended by a deadline */
};
void http_server_stats(const struct http_server *srv,
                       struct http_server_stats *out);

/* Serves the listening socket fd (the server owns it): at most
 * max_connections at once (further clients wait in the kernel's backlog
 * until one closes), and on TCP at most max_per_peer from one address
 * (0 = no limit; the next one is answered 429 `too_many_connections` and
 * closed).  name is for the log.  NULL on out of memory (fd closed). */
struct http_listener *http_listener_new(struct http_server *srv, int fd,
                                        const char *name,
                                        unsigned max_connections,
                                        unsigned max_per_peer);
/* Stops accepting and closes the listening socket; its connections go
 * on.  NULL is a no-op. */
void http_listener_free(struct http_listener *l);

/* ---- TLS (http_tls.c) ----------------------------------------------------
 *
 * OpenSSL directly on the connection's I/O seam (read, writev, shutdown,
 * close of http_private.h), driven by the connection's own read and write
 * events: not libevent's OpenSSL bufferevents, since this server does not
 * use bufferevents (plain connections keep their zero-copy writev path).
 */

enum http_tls_client {
    HTTP_TLS_CLIENT_NONE,     /* no certificate asked */
    HTTP_TLS_CLIENT_OPTIONAL, /* verified when the client sends one */
    HTTP_TLS_CLIENT_REQUIRED, /* the handshake fails without one */
};

struct http_tls_conf {
    const char *cert_file;      /* PEM chain */
    const char *key_file;       /* PEM key; NULL or "": in cert_file */
    bool min_tls13;             /* else TLS 1.2 is the oldest */
    const char *client_ca_file; /* NULL or "": none (then client NONE) */
    enum http_tls_client client;
};

/* A server-side TLS setting: the certificate and key loaded and checked
 * against each other, the CA file loaded.  NULL with the reason in err
 * (naming the file and the configuration key). */
struct http_tls *http_tls_new(const struct http_tls_conf *conf, char *err,
                              size_t errlen);
void http_tls_free(struct http_tls *tls);
/* The certificate's notAfter (seconds since the epoch). */
int64_t http_tls_not_after(const struct http_tls *tls);
/* Handshakes that failed since start (each logged, at most one line per
 * 10 s with a count of the others). */
uint64_t http_tls_failures(const struct http_tls *tls);
/* Connections l accepts from now on speak TLS with tls (which must
 * outlive l). */
void http_listener_set_tls(struct http_listener *l, struct http_tls *tls);

/* ---- a request, for its handler ---------------------------------------- */

/* The first header called name (case-insensitive), or NULL. */
const char *http_request_header(const struct http_request *req,
                                const char *name);
/* Adds a header to the answer (before it starts).  Returns 0, or -1 when
 * the answer's room for extra headers (1 KiB) is full or a value holds a
 * line break. */
int http_request_add_header(struct http_request *req, const char *name,
                            const char *value);
/* fn(arg) runs once if the client hangs up before the answer ends. */
void http_request_on_gone(struct http_request *req, void (*fn)(void *arg),
                          void *arg);
/* Whether the client hung up. */
bool http_request_gone(const struct http_request *req);

/* Answers with status and a body of content_type (NULL with len 0: no
 * body) and ends the request. */
void http_reply(struct http_request *req, int status, const char *content_type,
                const void *body, size_t len);
/* As http_reply() with more header lines: fields[0..fields_len) is whole
 * `Name: value\r\n` lines the caller has made safe (no CR or LF inside a
 * value); they may be longer than http_request_add_header() takes. */
void http_reply_fields(struct http_request *req, int status,
                       const char *content_type, const char *fields,
                       size_t fields_len, const void *body, size_t len);
/* Answers {"error": {"code", "message"}} (message escaped as JSON). */
void http_reply_error(struct http_request *req, int status, const char *code,
                      const char *message);

/* A streamed answer: status and headers now, then chunks (Transfer-Encoding
 * chunked; to an HTTP/1.0 client the bytes as they are, ended by closing).
 * http_stream_write() returns -1, sending nothing, when the client's unsent
 * output passes max_pending bytes (or it hung up).  http_stream_end() ends
 * the answer and the request. */
void http_stream_start(struct http_request *req, int status,
                       const char *content_type);
int http_stream_write(struct http_request *req, const void *data, size_t len,
                      size_t max_pending);
void http_stream_end(struct http_request *req);

#endif /* WM_MASTER_API_HTTP_SERVER_H */
