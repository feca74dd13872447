/*
 * http.h — the HTTP client of wmctl: one request at a time to workmanagerd,
 * over its control socket or over TCP with a bearer token (libcurl).
 */
#ifndef WMCTL_HTTP_H
#define WMCTL_HTTP_H

#include <signal.h>
#include <stddef.h>

/* An opaque connection setting: where the daemon is and how to talk to it. */
struct http_client;

/* One complete answer. body is NUL-terminated (len excludes the NUL). */
struct http_reply {
    long status;
    char *body;
    size_t len;
};

/* Receives the bytes of a streamed answer as they arrive; returns 0 to go
 * on, -1 to end the stream (not an error). */
typedef int (*http_chunk_fn)(const char *data, size_t len, void *arg);

/* A client for the unix socket socket_path, or for the base URL url
 * ("http://host:port") when url is not NULL, sending token (NULL: none) as
 * a bearer token.  NULL when out of memory. */
struct http_client *http_client_new(const char *socket_path, const char *url,
                                    const char *token);
void http_client_free(struct http_client *c);

/* HTTPS: the server's certificate is checked against ca_file (NULL: the
 * system's CA certificates) and its name against the URL's host; cert
 * and key (NULL: none; key NULL: in cert) are a client certificate.  TLS
 * 1.2 at least.  Returns 0, or -1 when out of memory. */
int http_client_set_tls(struct http_client *c, const char *ca_file,
                        const char *cert, const char *key);

/* Where the client connects: the socket path or the URL, for messages. */
const char *http_client_target(const struct http_client *c);

/* Sends method path (the path already escaped, with its query) with body
 * (len bytes of content_type; NULL: none) and reads the whole answer into
 * *out.  Returns 0 when the daemon answered (whatever the status), -1 when
 * it could not be reached or the exchange broke, with the reason in err. */
int http_client_request(struct http_client *c, const char *method,
                        const char *path, const char *content_type,
                        const char *body, size_t len, struct http_reply *out,
                        char *err, size_t errlen);

/* GETs path and hands the body of a 200 answer to chunk as it arrives,
 * until the daemon ends it, chunk returns -1, or *stop becomes non-zero
 * (checked at least once a second; a signal handler may set it).  Any
 * other status is read whole into *out, as http_client_request does; on a
 * 200 out->status is 200 and out->body NULL.  Returns as
 * http_client_request does. */
int http_client_stream(struct http_client *c, const char *path,
                       http_chunk_fn chunk, void *arg,
                       const volatile sig_atomic_t *stop,
                       struct http_reply *out, char *err, size_t errlen);

void http_reply_free(struct http_reply *r);

/* The URL-escaped form of one path segment or query value (free() it);
 * NULL when out of memory. */
char *http_escape(const char *s);

#endif
