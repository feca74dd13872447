"""Python workers that fail (issue 8; DESIGN §5): an exception is the
event's error with its type, message and traceback (invoke 422, the
worker.error lifecycle event); a module that does not load is refused with
a clear message; MemoryError under RLIMIT_AS and an output over the frame
cap are errors the host lives through; print() floods are cut; a loop is
stopped at the event's deadline.

Spec: Worker error; Python worker execution (a configurable timeout).
"""

import pytest

from pyhost_lib import create, daemon, host_pid, restarts
from wm import event, publish

FAILING = """
    import json

    class Custom(Exception):
        pass

    def helper(x):
        raise ValueError(f"bad value {x}")

    def Process(event):
        kind = event["type"]
        if kind == "value":
            helper(event["data"]["x"])
        if kind == "custom":
            raise Custom("custom failure")
        if kind == "memory":
            b = bytearray(3 << 30)
            return {"type": "never", "data": len(b)}
        if kind == "huge":
            return {"type": "big", "data": "x" * (20 << 20)}
        if kind == "flood":
            for i in range(100000):
                print("line", i)
            return None
        if kind == "loop":
            while True:
                pass
        if kind == "exit":
            raise SystemExit(3)
        return {"type": "ok", "data": event["data"]}
"""


pytestmark = pytest.mark.wmd(make=daemon,
                             options={"message_timeout_ms": 3000})


def test_exception_is_reported_with_type_and_traceback(wmd):
    """Spec: Worker error — an exception is error_type exception, with
    exception_type, the message and the traceback; invoke answers 422."""
    w = create(wmd, FAILING)
    r = wmd.invoke(w["id"], "value", data={"x": 7})
    assert r.status == 422 and r.code == "worker_error", r
    err = r.json["error"]
    assert err["error_type"] == "exception", err
    assert err["exception_type"] == "ValueError", err
    assert err["message"] == "ValueError: bad value 7", err
    tb = err["traceback"]
    assert tb.startswith("Traceback (most recent call last):"), tb
    # line 1 of the module is the empty one after the opening quotes
    assert 'File "worker.py", line 13, in Process' in tb, tb
    assert 'helper(event["data"]["x"])' in tb, tb
    assert 'File "worker.py", line 8, in helper' in tb, tb
    assert tb.rstrip().endswith("ValueError: bad value 7"), tb

    r = wmd.invoke(w["id"], "custom")
    assert r.json["error"]["exception_type"] == "worker.Custom", r
    # SystemExit is the worker's exception too, not the host's exit
    r = wmd.invoke(w["id"], "exit")
    assert r.json["error"]["exception_type"] == "SystemExit", r
    assert wmd.invoke(w["id"], "ok", data=1).status == 200
    assert restarts(wmd, w["id"]) == 0


def test_exception_on_a_published_event_is_a_worker_error_event(wmd):
    """Spec: Worker error — a worker.error lifecycle event with error_type,
    error_message and exception_type."""
    w = create(wmd, FAILING, topic="fail")
    assert publish(wmd, "fail", event("value", id_="f1",
                                      data={"x": 1})).status == 202
    ev = wmd.wait_for(lambda: [e for e in wmd.lifecycle(w["id"])
                               if e["type"].endswith(".error")],
                      what="worker.error")[0]
    assert ev["data"]["error_type"] == "exception", ev
    assert ev["data"]["exception_type"] == "ValueError", ev
    assert "bad value 1" in ev["data"]["error_message"], ev


@pytest.mark.parametrize("code,words", [
    ("def Process(event):\n    return {'type': 'x'\n\nx = 1\n",
     ["SyntaxError", "'{' was never closed", "line 2"]),
    ("x = 1\n\n\ndef Process(event) return None\n",
     ["SyntaxError", "line 4"]),
    ("def process(event):\n    return None\n",
     ["the module defines no Process(event)"]),
    ("Process = 42\n", ["Process is a int, not a function"]),
    ("import os\n\ndef Process(event):\n    return None\n",
     ["ImportError: os is not allowed"]),
    ("raise RuntimeError('at import')\n", ["RuntimeError: at import"]),
])
def test_load_errors_refuse_the_worker(wmd, code, words):
    """A module that does not compile, defines no Process, defines a
    Process that is not callable, or fails at its top level: the create is
    refused (load_failed) with the host's message, and no worker remains."""
    r = create(wmd, code, expect=422)
    assert r["error"]["code"] == "load_failed", r
    for word in words:
        assert word in r["error"]["message"], r
    assert wmd.get("/v1/workers").json["workers"] == []


def test_memory_error_leaves_the_host_alive(wmd):
    """RLIMIT_AS (2 × memory_mb + 1 GiB) turns an allocation of 3 GiB into
    MemoryError, an error of the event; the same host serves the next."""
    w = create(wmd, FAILING, limits={"memory_mb": 64})
    pid = host_pid(wmd, w["id"])
    r = wmd.invoke(w["id"], "memory")
    assert r.status == 422, r
    assert r.json["error"]["exception_type"] == "MemoryError", r
    assert wmd.invoke(w["id"], "ok", data=2).status == 200
    assert host_pid(wmd, w["id"]) == pid
    assert restarts(wmd, w["id"]) == 0


def test_huge_output_is_output_too_large(wmd):
    """An output over the 16 MiB frame cap: error output_too_large, the
    host alive."""
    w = create(wmd, FAILING)
    pid = host_pid(wmd, w["id"])
    r = wmd.invoke(w["id"], "huge")
    assert r.status == 422, r
    assert r.json["error"]["error_type"] == "output_too_large", r
    assert wmd.invoke(w["id"], "ok", data=3).status == 200
    assert host_pid(wmd, w["id"]) == pid


def test_print_flood_is_bounded(wmd):
    """print() goes to the daemon's log as the worker's lines, at most 200
    per event; the rest is counted, once."""
    w = create(wmd, FAILING)
    assert wmd.invoke(w["id"], "flood").status == 204
    wmd.wait_for(lambda: "lines dropped" in wmd.log(), what="the cut")
    log = wmd.log()
    assert "line 0" in log and "line 199" in log
    assert "line 200\n" not in log and "line 99999" not in log
    assert "worker output cut: 99800 lines dropped" in log, log[-2000:]
    assert wmd.invoke(w["id"], "ok", data=4).status == 200


def test_infinite_loop_is_stopped_at_the_deadline(wmd):
    """Spec: Python worker execution, with a configurable timeout — the
    event's deadline (message_timeout_ms 3000 here) kills the host (reason
    timeout); a new host serves the next event."""
    w = create(wmd, FAILING)
    r = wmd.invoke(w["id"], "loop")
    assert r.status == 422 and r.json["error"]["error_type"] == "timeout", r
    assert wmd.invoke(w["id"], "ok", data=5).status == 200
