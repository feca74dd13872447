"""Python workers on a real workmanagerd (issue 8; DESIGN §5): the worker
contract of wm-host-python — the event as a dict, each `data` rule, each
return form, the attributes filled in, correlationid and traceparent
propagated, extension names checked; the worker.error of an exception.

Spec: Python worker execution (a dedicated host process per worker, with
the event's deadline).
"""

import base64
import re

import pytest

from pyhost_lib import create, daemon, host_pid
from wm import Stream, event, publish

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                  r"[0-9a-f]{12}$")
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

# Returns the event as the worker saw it: each key's value and type.
MIRROR = """
    def Process(event):
        seen = {}
        for k, v in event.items():
            seen[k] = [type(v).__name__, list(v) if isinstance(v, bytes) else v]
        return {"type": "mirror", "data": seen}
"""


pytestmark = pytest.mark.wmd(make=daemon,
                             options={"message_timeout_ms": 3000})


def test_event_is_a_dict(wmd):
    """Spec: Python worker execution — every attribute a key (None when
    absent), each extension a key of its own, JSON data parsed; the worker
    runs in a host process of its own."""
    w = create(wmd, MIRROR)
    r = wmd.invoke(w["id"], "t.in", data={"n": [1, 2]}, subject="s1",
                   tenantx="t1", correlationid="c-1")
    assert r.status == 200, r
    seen = r.json["data"]
    assert seen["id"] == ["str", "e1"]
    assert seen["type"] == ["str", "t.in"]
    assert seen["source"] == ["str", "test"]
    assert seen["specversion"] == ["str", "1.0"]
    assert seen["subject"] == ["str", "s1"]
    assert seen["datacontenttype"][1] in (None, "application/json")
    assert seen["time"][0] in ("str", "NoneType")
    assert seen["data"] == ["dict", {"n": [1, 2]}]
    assert seen["tenantx"] == ["str", "t1"]
    assert seen["correlationid"] == ["str", "c-1"]
    pid = host_pid(wmd, w["id"])
    assert pid != wmd.proc.pid
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        assert f.read().split(b"\0")[0].endswith(b"wm-host-python")


@pytest.mark.parametrize("ct,body,want", [
    ("application/json", {"data": [1, "x"]}, ["list", [1, "x"]]),
    ("application/cloudevents+json", {"data": {"a": None}},
     ["dict", {"a": None}]),
    (None, {"data": 3.5}, ["float", 3.5]),
    ("text/plain", {"data": "h\u00e9llo"}, ["str", "h\u00e9llo"]),
    ("text/csv; charset=utf-8", {"data": "a,b"}, ["str", "a,b"]),
    ("application/octet-stream",
     {"data_base64": base64.b64encode(b"\x00\x01\xff").decode()},
     ["bytes", [0, 1, 255]]),
    ("image/png", {"data_base64": base64.b64encode(b"PNG").decode()},
     ["bytes", [80, 78, 71]]),
])
def test_data_rules(wmd, ct, body, want):
    """data parsed as JSON when the content type is absent, application/json
    or +json; text/* as str; anything else as bytes."""
    w = create(wmd, MIRROR)
    ev = {"specversion": "1.0", "id": "e1", "source": "test", "type": "t"}
    if ct:
        ev["datacontenttype"] = ct
    ev.update(body)
    r = wmd.post(f"/v1/workers/{w['id']}/invoke", ev)
    assert r.status == 200, r
    assert r.json["data"]["data"] == want, r.json


RETURNS = """
    def Process(event):
        kind = event["type"]
        if kind == "none":
            return None
        if kind == "dict":
            return {"type": "out.dict", "data": {"ok": True}, "shard": 7,
                    "flag": False}
        if kind == "list":
            return [{"type": "out.a", "data": "text"},
                    {"type": "out.b", "data": b"\\x00\\x01"},
                    {"type": "out.c", "id": "mine", "source": "src",
                     "time": "2026-01-01T00:00:00Z", "specversion": "1.0",
                     "datacontenttype": "text/csv", "data": "a,b",
                     "correlationid": "own"}]
        if kind == "empty":
            return []
        if kind == "many":
            return [{"type": "out.n"} for _ in range(300)]
        if kind == "int":
            return 42
        if kind == "badext":
            return {"type": "o", "BadKey": 1}
        if kind == "longext":
            return {"type": "o", "averyveryverylongextname": "x"}
        if kind == "notype":
            return {"data": 1}
        if kind == "badlist":
            return [{"type": "o"}, "x"]
        if kind == "badattr":
            return {"type": "o", "subject": 5}
"""


def test_return_forms_and_filling(wmd):
    """None → no output (204); a dict → one event; a list → each; missing
    id, time, specversion, source filled; correlationid and traceparent
    propagate, other input extensions do not; other keys are extensions;
    data serialised per its type."""
    w = create(wmd, RETURNS)
    wid = w["id"]
    assert wmd.invoke(wid, "none").status == 204
    assert wmd.invoke(wid, "empty").status == 204

    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    r = wmd.invoke(wid, "dict", correlationid="c-9", traceparent=tp,
                   other="no")
    assert r.status == 200, r
    o = r.json
    assert o["type"] == "out.dict" and o["data"] == {"ok": True}
    assert UUID.match(o["id"]), o
    assert RFC3339.match(o["time"]), o
    assert o["specversion"] == "1.0"
    assert o["source"] == f"urn:workmanager:worker:{wid}"
    assert o["datacontenttype"] == "application/json"
    assert o["correlationid"] == "c-9" and o["traceparent"] == tp
    assert "other" not in o
    assert o["shard"] == "7" and o["flag"] == "false"

    # Filled ids are version-4 UUIDs, all distinct: 300 in one event
    # cross the host's 256-id batches of random bytes; a second host
    # (forked from the same zygote) draws its own.
    many = wmd.invoke(wid, "many").json
    other = create(wmd, RETURNS)["id"]
    many += wmd.invoke(other, "many").json
    assert len(many) == 600 and all(UUID.match(o["id"]) for o in many)
    assert len({o["id"] for o in many}) == 600

    r = wmd.invoke(wid, "list", correlationid="c-1")
    assert r.status == 200, r
    a, b, c = r.json
    assert a["type"] == "out.a" and a["data"] == "text"
    assert a["datacontenttype"] == "text/plain; charset=utf-8"
    assert b["datacontenttype"] == "application/octet-stream"
    assert base64.b64decode(b["data_base64"]) == b"\x00\x01"
    assert a["id"] != b["id"] and UUID.match(b["id"])
    assert c["id"] == "mine" and c["source"] == "src"
    assert c["time"] == "2026-01-01T00:00:00Z"
    assert c["datacontenttype"] == "text/csv" and c["data"] == "a,b"
    assert c["correlationid"] == "own"
    assert a["correlationid"] == "c-1"


@pytest.mark.parametrize("kind,words", [
    ("int", ["Process returned a int", "None, a dict or a list of dicts"]),
    ("badext", ["extension name 'BadKey'", "[a-z0-9]{1,20}"]),
    ("longext", ["'averyveryverylongextname'"]),
    ("notype", ["no type"]),
    ("badlist", ["item 1 is a str"]),
    ("badattr", ["attribute subject is a int"]),
])
def test_bad_returns_are_worker_errors(wmd, kind, words):
    """A return value the contract does not take is the event's error
    (worker_error, naming the key or the type); the host lives on."""
    w = create(wmd, RETURNS)
    pid = host_pid(wmd, w["id"])
    r = wmd.invoke(w["id"], kind)
    assert r.status == 422, r
    assert r.json["error"]["error_type"] == "worker_error", r
    for word in words:
        assert word in r.json["error"]["message"], r
    assert wmd.invoke(w["id"], "dict").status == 200
    assert host_pid(wmd, w["id"]) == pid


def test_outputs_are_published_to_their_type(wmd):
    """A published event's outputs go to the topic of their type, with the
    input's correlation id."""
    create(wmd, RETURNS, topic="pin")
    s = Stream(wmd, "out.dict")
    try:
        assert publish(wmd, "pin", event("dict", id_="p1",
                                         correlationid="cc")).status == 202
        got = s.wait(1)[0]
    finally:
        s.close()
    assert got["type"] == "out.dict" and got["correlationid"] == "cc"
    assert got["data"] == {"ok": True}


def test_idle_heartbeats_and_a_clean_stop(wm_builddir, tmp_path):
    """An idle host echoes the master's heartbeats (every 300 ms here: no
    restart, the same pid); Shutdown ends it with exit code 0 (reason
    stopped)."""
    import time
    d = daemon(wm_builddir, tmp_path, options={
        "heartbeat_interval_ms": 300, "heartbeat_timeout_ms": 200})
    d.start()
    try:
        w = create(d, RETURNS)
        pid = host_pid(d, w["id"])
        time.sleep(1.5)
        assert d.invoke(w["id"], "dict").status == 200
        v = d.get(f"/v1/workers/{w['id']}").json
        assert v["pid"] == pid and v["restarts"] == 0, v
        assert d.post(f"/v1/workers/{w['id']}/stop").status in (200, 202)
        d.wait_for(lambda: re.search(
            rf"worker {w['id']}: host pid {pid} exited: exit code 0, "
            r"reason stopped", d.log()), what="a clean exit")
    finally:
        assert d.stop() == 0, d.log()
