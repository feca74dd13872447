"""bench/peers/wsgi_app.py — the WSGI front of handler.Process for the
HTTP peers (uWSGI, gunicorn) of bench/run.

POST / with a CloudEvent as JSON answers 200 with the handler's event as
JSON.  Each process counts what it handled in a file of its own,
WM_BENCH_COUNTS/<pid>, through a shared mapping (a store into memory per
request, no system call), so that bench/run can cross-check the events
sent against the events processed once the peer has stopped.
"""

import json
import mmap
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import handler  # noqa: E402

_slot = None


def _count():
    global _slot
    if _slot is None or _slot[0] != os.getpid():
        # A fork of a process that counted starts a file of its own.
        path = os.path.join(os.environ["WM_BENCH_COUNTS"], str(os.getpid()))
        with open(path, "w+b") as f:
            f.write(b"\0" * 8)
            f.flush()
            _slot = (os.getpid(), mmap.mmap(f.fileno(), 8))
    struct.pack_into("<Q", _slot[1], 0, handler.COUNT)


def application(environ, start_response):
    try:
        n = int(environ.get("CONTENT_LENGTH") or 0)
        event = json.loads(environ["wsgi.input"].read(n))
        body = json.dumps(handler.Process(event)).encode()
        _count()
        status = "200 OK"
    except (ValueError, KeyError, TypeError) as e:
        body = json.dumps({"error": str(e)}).encode()
        status = "400 Bad Request"
    start_response(status, [("Content-Type", "application/json"),
                            ("Content-Length", str(len(body)))])
    return [body]
