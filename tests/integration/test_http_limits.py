"""test_http_limits.py — no client may starve the daemon (issue 21 items
5–7): the admin API's HTTP server refuses oversized heads (431), holds no
slowloris or idle connection past its deadline, caps connections per
listener and per peer, does not spin when descriptors run out, and
answers every refusal with the JSON error object, never an HTML page.

Throughout each attack `/health` on the control socket must answer within
a second; the worst latency seen is printed (the issue's target is
100 ms; not asserted, the CPU is shared).
"""

import json
import socket
import subprocess
import time

import pytest

import wm
from wm import Daemon

TOKEN = "0123456789abcdef-token"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Health:
    """GET /health on the control socket with a 1 s timeout; keeps the
    worst latency."""

    def __init__(self, d):
        self.d = d
        self.worst = 0.0

    def check(self):
        t0 = time.monotonic()
        r = self.d.get("/health", timeout=1)
        self.worst = max(self.worst, time.monotonic() - t0)
        assert r.status == 200, r

    def report(self, what):
        print(f"\n{what}: worst /health latency {self.worst * 1000:.1f} ms")


def unix_sock(d, timeout=5):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(str(d.socket))
    return s


def tcp_sock(port, source="127.0.0.1", timeout=5):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def read_answer(s):
    """The whole of what the server sends until it closes: (status,
    headers (lowercased names), body as JSON)."""
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in
               (line.partition(":") for line in lines[1:])}
    return status, headers, json.loads(body)


def send_all(s, data):
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused before the whole of it: the answer is read next


def refused(d, raw, status, code):
    s = unix_sock(d)
    send_all(s, raw)
    st, headers, body = read_answer(s)
    s.close()
    assert st == status, (st, body)
    assert headers["content-type"] == "application/json"
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    return body["error"]["message"]


def test_huge_and_numerous_headers_are_431(wmd):
    msg = refused(wmd, b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 1_000_000
                  + b"\r\n\r\n", 431, "headers_too_large")
    assert "http_max_header_bytes" in msg
    many = b"".join(b"X-%d: v\r\n" % i for i in range(10_000))
    msg = refused(wmd, b"GET /health HTTP/1.1\r\n" + many + b"\r\n", 431,
                  "headers_too_large")
    assert "http_max_headers" in msg
    refused(wmd, b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n\r\n", 414,
            "uri_too_long")
    assert wmd.get("/health").status == 200


def test_refusals_are_json_not_html(wm_builddir, tmp_path):
    """What libevent's evhttp answered with its own HTML pages."""
    d = Daemon(wm_builddir, tmp_path, options={"max_body_bytes": 4096})
    d.start()
    try:
        refused(d, b"TRACE /v1/workers HTTP/1.1\r\n\r\n", 501,
                "not_implemented")
        refused(d, b"NONSENSE\r\n\r\n", 400, "bad_request")
        refused(d, b"GET /health HTTP/3.0\r\n\r\n", 505,
                "http_version_not_supported")
        # Announced over max_body_bytes: answered before the body is sent.
        msg = refused(d, b"POST /v1/workers HTTP/1.1\r\n"
                      b"Content-Type: application/json\r\n"
                      b"Content-Length: 1000000\r\n\r\n", 413,
                      "payload_too_large")
        assert "max_body_bytes" in msg
        # Over the limit while chunked.
        chunk = b"1000\r\n" + b"a" * 4096 + b"\r\n"
        refused(d, b"POST /v1/workers HTTP/1.1\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n" + chunk * 3, 413,
                "payload_too_large")
        # Expect: 100-continue is answered (curl sends it for large
        # bodies).
        s = unix_sock(d)
        s.sendall(b"POST /v1/workers HTTP/1.1\r\nContent-Length: 2\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(b"{}")
        assert s.recv(100).startswith(b"HTTP/1.1 400 ")
        s.close()
    finally:
        assert d.stop() == 0, d.log()


@pytest.mark.wmd(options={"max_batch_events": 5,
                          "max_ce_header_bytes": 64})
def test_batch_and_ce_header_limits(wmd):
    batch = [wm.event() for _ in range(6)]
    r = wm.publish(wmd, "t", batch)
    assert r.status == 413 and r.code == "payload_too_large", r
    assert "max_batch_events" in r.json["error"]["message"]
    assert wm.publish(wmd, "t", batch[:5]).status == 202
    headers = {"ce-specversion": "1.0", "ce-id": "b1", "ce-source": "test",
               "ce-type": "echo", "ce-subject": "s" * 100,
               "Content-Type": "text/plain"}
    r = wmd.request("POST", "/v1/topics/t/events", raw=b"hi",
                    headers=headers)
    assert r.status == 431 and r.code == "headers_too_large", r
    assert "ce-subject" in r.json["error"]["message"]
    headers["ce-subject"] = "s" * 10
    assert wmd.request("POST", "/v1/topics/t/events", raw=b"hi",
                       headers=headers).status == 202


@pytest.mark.wmd(options={"http_header_timeout_ms": 1000})
def test_slowloris_closed_at_the_head_deadline(wmd):
    health = Health(wmd)
    socks = [unix_sock(wmd) for _ in range(50)]
    for s in socks:
        s.sendall(b"GET /health HTTP/1.1\r\n")
    start = time.monotonic()
    closed = set()
    # A byte a connection every 200 ms: a per-byte timeout would never
    # fire.
    while len(closed) < len(socks) and time.monotonic() - start < 5:
        for i, s in enumerate(socks):
            if i in closed:
                continue
            try:
                s.sendall(b"X")
            except OSError:
                closed.add(i)
        health.check()
        time.sleep(0.2)
    assert time.monotonic() - start < 4, "slowloris connections held"
    for s in socks:
        s.settimeout(2)
        st, _, body = read_answer(s)
        assert st == 408 and body["error"]["code"] == "request_timeout"
        s.close()
    health.report("slowloris")


@pytest.mark.wmd(options={"http_idle_timeout_ms": 500})
def test_idle_connections_closed(wmd):
    health = Health(wmd)
    socks = []
    for _ in range(100):
        s = unix_sock(wmd)
        s.sendall(b"GET /health HTTP/1.1\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200 ")
        socks.append(s)
    for _ in range(5):
        health.check()
        time.sleep(0.1)
    deadline = time.monotonic() + 5
    for s in socks:
        s.settimeout(max(0.1, deadline - time.monotonic()))
        assert s.recv(10) == b"", "an idle connection was kept"
        s.close()
    health.report("idle")


def tcp_daemon(wm_builddir, tmp_path, **options):
    (tmp_path / "token").write_text(TOKEN + "\n")
    port = free_port()
    opts = {"listen": f"127.0.0.1:{port}"}
    opts.update(options)
    return Daemon(wm_builddir, tmp_path, options=opts), port


def test_connection_caps(wm_builddir, tmp_path):
    d, port = tcp_daemon(wm_builddir, tmp_path, http_max_connections=4,
                         http_max_connections_per_peer=2)
    d.start()
    health = Health(d)
    try:
        a1, a2 = tcp_sock(port), tcp_sock(port)
        # A third from the same address: 429, and closed.
        a3 = tcp_sock(port)
        a3.sendall(b"GET /health HTTP/1.1\r\n\r\n")
        st, headers, body = read_answer(a3)
        assert st == 429 and body["error"]["code"] == "too_many_connections"
        assert headers["retry-after"] == "1"
        assert "http_max_connections_per_peer" in body["error"]["message"]
        a3.close()
        health.check()
        # Two more from another address fill the listener (4) ...
        b1, b2 = tcp_sock(port, "127.0.0.2"), tcp_sock(port, "127.0.0.2")
        time.sleep(0.2)
        # ... so a fifth waits in the backlog, unanswered ...
        c = tcp_sock(port, "127.0.0.3", timeout=0.5)
        c.sendall(b"GET /health HTTP/1.1\r\nAuthorization: Bearer "
                  + TOKEN.encode() + b"\r\nConnection: close\r\n\r\n")
        with pytest.raises(socket.timeout):
            c.recv(100)
        health.check()  # the control socket has a cap of its own
        # ... until one closes.
        a1.close()
        c.settimeout(5)
        st, _, body = read_answer(c)
        assert st == 200 and body["status"] == "Healthy"
        for s in (a2, b1, b2, c):
            s.close()
        health.report("caps")
    finally:
        assert d.stop() == 0, d.log()


class LowFdDaemon(Daemon):
    """A daemon whose hard nofile limit is 256 (prlimit execs it: the pid
    is the daemon's)."""

    def argv(self):
        return ["prlimit", "--nofile=256:256", "--"] + super().argv()


def test_fd_limit_does_not_spin(wm_builddir, tmp_path):
    (tmp_path / "token").write_text(TOKEN + "\n")
    port = free_port()
    d = LowFdDaemon(wm_builddir, tmp_path,
                    options={"listen": f"127.0.0.1:{port}",
                             "fd_reserve": 64,
                             "http_max_connections": 100000})
    d.start()
    health = Health(d)
    socks = []
    try:
        for _ in range(400):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            socks.append(s)
        for _ in range(10):
            health.check()
            time.sleep(0.2)
        log = d.log()
        accept_lines = [line for line in log.splitlines()
                        if "accept" in line]
        assert len(accept_lines) < 10, "\n".join(accept_lines[:20])
        assert "leave room for" in log  # the caps were fitted to nofile
        # Hosts still get their descriptors.
        w = d.create()
        r = d.invoke(w["id"], "echo", data={"x": 1})
        assert r.status == 200, r
        health.check()
        health.report("fd limit")
    finally:
        for s in socks:
            s.close()
        assert d.stop() == 0, d.log()
