"""The workmanager module of Python workers (issue 8; DESIGN §5, §6):
log(level, msg), publish(topic, event) and state.get/put/delete, each a
synchronous call from Python that travels as a Log or GatewayCall frame
to the master's gateway services (master/broker/gateway.h)."""

import pytest

from pyhost_lib import create, daemon
from wm import Stream

GATEWAY = """
    import workmanager

    def Process(event):
        t, d = event["type"], event["data"]
        if t == "log":
            workmanager.log("warning", "careful: " + d)
            workmanager.log(1, "debugging")
            return None
        if t == "badlevel":
            workmanager.log("loud", "x")
        if t == "publish":
            eid = workmanager.publish(d["topic"], {"type": "pub.t",
                                                   "data": d["data"]})
            return {"type": "published", "data": eid}
        if t == "put":
            workmanager.state.put(d["key"], d["value"])
            return None
        if t == "get":
            return {"type": "got",
                    "data": {"v": workmanager.state.get(d["key"], "absent")}}
        if t == "delete":
            return {"type": "deleted",
                    "data": workmanager.state.delete(d["key"])}
        if t == "counter":
            n = workmanager.state.get("n", 0) + 1
            workmanager.state.put("n", n)
            return {"type": "count", "data": n}
"""


pytestmark = pytest.mark.wmd(make=daemon)


def test_log(wmd):
    w = create(wmd, GATEWAY)
    assert wmd.invoke(w["id"], "log", data="disk at 91%").status == 204
    wmd.wait_for(lambda: "careful: disk at 91%" in wmd.log(), what="the log")
    r = wmd.invoke(w["id"], "badlevel", data=0)
    assert r.status == 422 and r.json["error"]["exception_type"] == \
        "ValueError", r
    assert "log level is one of" in r.json["error"]["message"]


def test_state_round_trip(wmd):
    """put, get, delete through workmanager.state; a missing key gives the
    default; a bad key is the service's 400, raised as GatewayError naming
    it."""
    w = create(wmd, GATEWAY)
    wid = w["id"]
    assert wmd.invoke(wid, "get", data={"key": "k"}).json["data"] == \
        {"v": "absent"}
    assert wmd.invoke(wid, "put", data={"key": "k",
                                        "value": {"a": [1, 2]}}).status == 204
    assert wmd.invoke(wid, "get", data={"key": "k"}).json["data"] == \
        {"v": {"a": [1, 2]}}
    assert wmd.invoke(wid, "delete", data={"key": "k"}).json["data"] is True
    assert wmd.invoke(wid, "delete", data={"key": "k"}).json["data"] is False
    assert wmd.invoke(wid, "get", data={"key": "k"}).json["data"] == \
        {"v": "absent"}
    for i in range(1, 4):
        assert wmd.invoke(wid, "counter").json["data"] == i
    r = wmd.invoke(wid, "put", data={"key": "bad/key", "value": 1})
    assert r.status == 422, r
    err = r.json["error"]
    assert err["exception_type"] == "workmanager.GatewayError", err
    assert "workmanager.state put: 400" in err["message"], err


def test_publish(wmd):
    """publish() reaches subscribers of the topic, filled in as outputs are;
    a reserved topic is the service's 403."""
    w = create(wmd, GATEWAY)
    s = Stream(wmd, "pubtopic")
    try:
        r = wmd.invoke(w["id"], "publish",
                       data={"topic": "pubtopic", "data": {"x": 1}})
        assert r.status == 200, r
        got = s.wait(1)[0]
    finally:
        s.close()
    assert got["type"] == "pub.t" and got["data"] == {"x": 1}
    assert got["id"] == r.json["data"]
    assert got["source"] == f"urn:workmanager:worker:{w['id']}"
    r = wmd.invoke(w["id"], "publish",
                   data={"topic": "workmanager.lifecycle", "data": 1})
    assert r.status == 422, r
    assert "403" in r.json["error"]["message"], r
