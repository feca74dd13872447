"""workmanager.client — the synchronous client, over http.client.

Why this way: http.client is the standard library's HTTP/1.1 (chunked
answers, keep-alive); a subclass connects it to the control socket.  One
connection per call keeps the client safe to share between threads.

Invariants: every operation of Operations returns its value or raises a
WorkManagerError; follow() yields the topic's events until close() or the
daemon ends the stream.
"""

import http.client
import socket as socketlib

from ._core import (DaemonUnavailable, Operations, Request,
                    SSEParser, error_from, follow_path)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        s = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class Client(Operations):
    """A workmanagerd client: Client() (the default socket, or $WM_URL /
    $WM_SOCKET), Client(socket=PATH), Client(url="http://h:p",
    token_file=FILE) or Client(url="https://h:p", token_file=FILE,
    ca_file=CA, cert_file=CERT, key_file=KEY) (workmanager.Address).
    timeout is each call's, in seconds."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Nothing to release: each call has its own connection."""

    def _connect(self, timeout):
        a = self.address
        if a.socket:
            return _UnixConnection(a.socket, timeout)
        if a.ssl:
            return http.client.HTTPSConnection(a.host, a.port,
                                               timeout=timeout, context=a.ssl)
        return http.client.HTTPConnection(a.host, a.port, timeout=timeout)

    def _send(self, method, path, body=None, headers=None, timeout=None):
        conn = self._connect(self.timeout if timeout is None else timeout)
        try:
            conn.request(method, path, body=body,
                         headers=self.address.headers(headers))
            return conn, conn.getresponse()
        except OSError as e:
            conn.close()
            raise DaemonUnavailable(self.address, e) from e

    def _call(self, req):
        value = self._one(req)
        while isinstance(value, Request):
            value = self._one(value)
        return value

    def _one(self, req):
        conn, r = self._send(req.method, req.path, req.body, req.headers)
        try:
            body = r.read()
        finally:
            conn.close()
        headers = {k.lower(): v for k, v in r.getheaders()}
        if r.status >= 400:
            raise error_from(r.status, headers, body)
        return req.convert(r.status, headers, body)

    def follow(self, topic, tenant=None):
        """Follows a topic: a Follow, iterable over the structured events
        published from now on (topic "*" is every topic)."""
        conn, r = self._send("GET", follow_path(topic, tenant),
                             headers={"Accept": "text/event-stream"},
                             timeout=None)
        if r.status >= 400:
            body = r.read()
            conn.close()
            raise error_from(r.status, {k.lower(): v
                                        for k, v in r.getheaders()}, body)
        return Follow(conn, r)


class Follow:
    """The events of a followed topic, as dicts, in order; close() (or
    leaving a with block) ends the stream."""

    def __init__(self, conn, response):
        self._conn = conn
        self._r = response
        self._sse = SSEParser()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            try:
                line = self._r.readline()
            except (OSError, ValueError, AttributeError):
                raise StopIteration from None
            if not line:
                raise StopIteration
            ev = self._sse.feed(line.decode().rstrip("\r\n"))
            if ev is not None:
                return ev

    def close(self):
        try:
            self._conn.sock and self._conn.sock.shutdown(
                socketlib.SHUT_RDWR)
        except OSError:
            pass
        self._r.close()
        self._conn.close()
