/*
 * fuzz_http_request.c — libFuzzer target: arbitrary bytes from a client
 * into a connection of the admin API's HTTP server (http_server.h), the
 * whole way: reading, libhttp-parser, the head's checks, the limits,
 * bodies (sized and chunked), pipelining, Expect, HEAD, answers and
 * streams, refusals and the lingering close.
 *
 * Each input is written into one end of a socketpair whose other end the
 * server adopts, the write side is then shut, and the loop runs until the
 * server has closed the connection (every state ends on the client's
 * end of input), reading and dropping what it answers.  The limits are
 * small so that each refusal is reachable from a short input.  ASan and
 * UBSan (the fuzzing build's) report any fault; a connection the server
 * never closes aborts the run.
 */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "master/api/http_server.h"

static struct event_base *base;
static struct http_server *srv;

static void
handler(struct http_request *req, void *arg)
{
    (void)arg;
    const char *mode = http_request_header(req, "X-Mode");
    if (mode && strcmp(mode, "stream") == 0) {
        http_request_add_header(req, "Cache-Control", "no-cache");
        http_stream_start(req, 200, "text/plain");
        http_stream_write(req, req->body, req->body_len, 1 << 16);
        http_stream_end(req);
        return;
    }
    if (mode && strcmp(mode, "error") == 0) {
        http_reply_error(req, 404, "not_found", req->path);
        return;
    }
    for (size_t i = 0; i < req->nheaders; i++)
        if (strlen(req->headers[i].name) != req->headers[i].name_len ||
            strlen(req->headers[i].value) != req->headers[i].value_len)
            abort(); /* a header not NUL-terminated where it ends */
    http_reply(req, 200, "application/octet-stream", req->body, req->body_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct http_limits lim = {
        .max_header_bytes = 2048,
        .max_headers = 16,
        .max_url_bytes = 256,
        .max_body_bytes = 4096,
        .header_timeout_ms = 60000,
        .body_timeout_ms = 60000,
        .idle_timeout_ms = 60000,
        .write_timeout_ms = 60000,
    };
    int sv[2];
    char sink[65536];

    if (base == NULL) {
        base = event_base_new();
        srv = http_server_new(base, &lim, handler, NULL);
    }
    if (size > 16384 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 0;
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    if (http_server_adopt(srv, sv[1]) != 0) {
        close(sv[0]);
        return 0;
    }
    size_t off = 0;
    struct http_server_stats st;
    for (int round = 0; round < 100000; round++) {
        if (off < size) {
            ssize_t w = write(sv[0], data + off, size - off);
            if (w > 0)
                off += (size_t)w;
            if (off == size)
                shutdown(sv[0], SHUT_WR);
        } else if (size == 0 && round == 0) {
            shutdown(sv[0], SHUT_WR);
        }
        event_base_loop(base, EVLOOP_NONBLOCK);
        while (read(sv[0], sink, sizeof sink) > 0)
            continue;
        http_server_stats(srv, &st);
        if (st.connections == 0) {
            close(sv[0]);
            return 0;
        }
    }
    abort(); /* the server held a connection whose client had ended */
}
