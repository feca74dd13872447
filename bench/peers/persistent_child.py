"""bench/peers/persistent_child.py — the original WorkManager's second
Python engine design, as a peer of bench/run: one long-lived `python3 -E
-s` child that serves events over a unix socket, each message a 4-byte
big-endian length then that many bytes of JSON, one answer per event.

Usage: python3 -E -s persistent_child.py SOCKET
Listens on SOCKET and serves one connection at a time.  A message
{"count": true} answers {"count": N}, the events handled so far (the
cross-check of bench/run).
"""

import json
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import handler  # noqa: E402


def read_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def serve(conn):
    while True:
        head = read_exact(conn, 4)
        if head is None:
            return
        msg = json.loads(read_exact(conn, struct.unpack(">I", head)[0]))
        if msg.get("count") is True:
            out = {"count": handler.COUNT}
        else:
            out = handler.Process(msg)
        body = json.dumps(out).encode()
        conn.sendall(struct.pack(">I", len(body)) + body)


def main():
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sys.argv[1])
    srv.listen(8)
    while True:
        conn, _ = srv.accept()
        with conn:
            serve(conn)


if __name__ == "__main__":
    main()
