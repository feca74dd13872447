"""Workers through the admin API on a real workmanagerd (issue 3).

Every test starts a fresh daemon on private paths (tests/integration/wm.py)
with the protocol test host (tests/testhost) as engine
`application/x-wm-test`.  Assertions are on answers, last_exit and lifecycle
events, never on short-lived states.
"""

import json
import os
import re
import signal
import time

import pytest

from wm import Daemon, b64, free_port

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                  r"[0-9a-f]{12}$")
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


pytestmark = pytest.mark.wmd(options={
    "handshake_timeout_ms": 1000,
    "restart_base_delay_ms": 50,
    "restart_max_delay_ms": 200,
    "shutdown_grace_ms": 1000,
})


def test_create_and_start(wmd):
    w = wmd.create(name="echo-1", tags={"team": "a"}, config={"region": "eu"})
    assert UUID.match(w["id"])
    assert w["name"] == "echo-1"
    assert w["tenant"] == "default"
    assert w["status"] == "running"
    assert w["state"] in ("running", "idle")
    assert w["version"] == 1
    assert w["group"] is None
    assert w["restarts"] == 0
    assert w["last_exit"] is None
    assert RFC3339.match(w["created_at"]) and RFC3339.match(w["updated_at"])
    assert w["tags"] == {"team": "a"} and w["config"] == {"region": "eu"}
    # by id and by name
    assert wmd.get(f"/v1/workers/{w['id']}").json["id"] == w["id"]
    assert wmd.get("/v1/workers/echo-1").json["id"] == w["id"]
    ids = [x["id"] for x in wmd.get("/v1/workers").json["workers"]]
    assert ids == [w["id"]]
    assert wmd.lifecycle_names(w["id"])[:2] == ["created", "started"]
    ev = wmd.lifecycle(w["id"])[0]
    assert ev["source"].startswith("urn:workmanager:")
    assert ev["data"]["worker_id"] == w["id"]
    assert ev["data"]["topic"] == "t"


def test_create_stopped_then_start(wmd):
    w = wmd.create(start=False)
    assert w["status"] == "stopped"
    assert wmd.invoke(w["id"]).status == 409
    r = wmd.post(f"/v1/workers/{w['id']}/start")
    assert r.status == 200 and r.json["status"] == "running"
    r = wmd.invoke(w["id"], data={"x": 1})
    assert r.status == 200, r
    assert r.json["type"] == "echo.out"
    assert r.json["data"] == {"x": 1}
    assert wmd.lifecycle_names(w["id"]) == ["created", "started"]


def test_invoke_starts_host_lazily(wmd):
    w = wmd.create()
    r = wmd.invoke(w["id"], data="hi", correlationid="c-1")
    assert r.status == 200, r
    assert r.json["correlationid"] == "c-1"
    g = wmd.get(f"/v1/workers/{w['id']}").json
    assert g["state"] == "running" and isinstance(g["pid"], int)


def test_stop_suspend_resume(wmd):
    w = wmd.create()
    wid = w["id"]
    assert wmd.invoke(wid).status == 200
    pid = wmd.get(f"/v1/workers/{wid}").json["pid"]
    r = wmd.post(f"/v1/workers/{wid}/suspend")
    assert r.status == 200 and r.json["status"] == "suspended"
    assert wmd.invoke(wid).status == 409
    r = wmd.post(f"/v1/workers/{wid}/resume")
    assert r.status == 200 and r.json["status"] == "running"
    assert wmd.invoke(wid).status == 200
    r = wmd.post(f"/v1/workers/{wid}/stop")
    assert r.status == 200 and r.json["status"] == "stopped"
    assert r.json["pid"] is None
    assert r.json["state"] == "stopped"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    # idempotent
    assert wmd.post(f"/v1/workers/{wid}/stop").status == 200
    assert wmd.post(f"/v1/workers/{wid}/resume").status == 409
    assert wmd.lifecycle_names(wid) == [
        "created", "started", "suspended", "resumed", "stopped"]


def test_hot_reload_and_history(wmd):
    w = wmd.create()
    wid = w["id"]
    assert wmd.invoke(wid).status == 200
    r = wmd.put(f"/v1/workers/{wid}/code", {"code": {"content": b64("echo\n# version 2")}})
    assert r.status == 200, r
    assert r.json["version"] == 2
    assert wmd.invoke(wid).status == 200
    h = wmd.get(f"/v1/workers/{wid}/history").json
    assert h["current"] == 2
    assert [v["version"] for v in h["versions"]] == [1, 2]
    assert all(len(v["sha256"]) == 64 for v in h["versions"])
    assert h["versions"][0]["sha256"] != h["versions"][1]["sha256"]
    # rollback appends a version with version 1's code
    r = wmd.post(f"/v1/workers/{wid}/rollback", {"version": 1})
    assert r.status == 200 and r.json["version"] == 3
    h = wmd.get(f"/v1/workers/{wid}/history").json
    assert h["versions"][2]["sha256"] == h["versions"][0]["sha256"]
    assert h["versions"][2]["rollback_of"] == 1
    assert wmd.post(f"/v1/workers/{wid}/rollback",
                    {"version": 9}).code == "invalid_argument"
    assert wmd.lifecycle_names(wid)[2:] == ["reloaded", "rolledback"]


def test_reload_that_fails_to_load_keeps_the_old_version(wmd):
    """...in the same host, which goes on serving (issue 27)."""
    w = wmd.create()
    wid = w["id"]
    assert wmd.invoke(wid).status == 200
    pid = wmd.get(f"/v1/workers/{wid}").json["pid"]
    r = wmd.put(f"/v1/workers/{wid}/code",
                {"code": {"content": b64("load_fail syntax error line 3")}})
    assert r.status == 422 and r.code == "load_failed", r
    assert "syntax error line 3" in r.json["error"]["message"]
    g = wmd.get(f"/v1/workers/{wid}").json
    assert g["version"] == 1
    assert len(wmd.get(f"/v1/workers/{wid}/history").json["versions"]) == 1
    assert wmd.invoke(wid).status == 200
    g = wmd.get(f"/v1/workers/{wid}").json
    assert g["pid"] == pid and g["state"] == "running", g


def test_create_that_fails_to_load_leaves_nothing(wmd):
    r = wmd.post("/v1/workers", {"mime_type": "application/x-wm-test",
                                 "topic": "t", "name": "bad",
                                 "code": {"content": b64("load_fail boom")}})
    assert r.status == 422 and r.code == "load_failed", r
    assert "boom" in r.json["error"]["message"]
    assert wmd.get("/v1/workers").json["workers"] == []
    assert wmd.get("/v1/workers/bad").status == 404


def test_tags(wmd):
    w = wmd.create()
    wid = w["id"]
    r = wmd.put(f"/v1/workers/{wid}/tags", {"tags": {"a": "1", "b": "2"}})
    assert r.status == 200 and r.json["tags"] == {"a": "1", "b": "2"}
    assert wmd.get(f"/v1/workers/{wid}/tags").json["tags"] == {"a": "1",
                                                                "b": "2"}
    many = {f"k{i}": "v" for i in range(51)}
    assert wmd.put(f"/v1/workers/{wid}/tags",
                   {"tags": many}).code == "invalid_argument"
    assert wmd.put(f"/v1/workers/{wid}/tags",
                   {"tags": {"k" * 129: "v"}}).code == "invalid_argument"
    assert wmd.put(f"/v1/workers/{wid}/tags",
                   {"tags": {"k": "v" * 1025}}).code == "invalid_argument"
    ok = {f"k{i}": "v" * 1024 for i in range(50)}
    ok["k" * 128] = "x"
    del ok["k0"]
    assert wmd.put(f"/v1/workers/{wid}/tags", {"tags": ok}).status == 200


def test_delete(wmd):
    w = wmd.create(name="gone")
    assert wmd.invoke("gone").status == 200
    pid = wmd.get("/v1/workers/gone").json["pid"]
    assert wmd.delete("/v1/workers/gone").status == 204
    assert wmd.get(f"/v1/workers/{w['id']}").code == "not_found"
    assert wmd.delete("/v1/workers/gone").code == "not_found"
    wmd.wait_for(lambda: not os.path.exists(f"/proc/{pid}"), what="host gone")
    assert wmd.lifecycle_names(w["id"])[-1] == "deleted"
    # the name is free again
    wmd.create(name="gone")


BAD = [
    ("POST", "/v1/workers", b"{not json", 400, "invalid_json"),
    ("POST", "/v1/workers", b"[1,2]", 400, "invalid_json"),
    ("POST", "/v1/workers", b'{"mime_type": 5, "topic": "t"}', 400,
     "invalid_argument"),
    ("POST", "/v1/workers",
     b'{"mime_type": "application/x-wm-test", "topic": "t", '
     b'"code": {"content": "***"}}', 400, "invalid_argument"),
    ("POST", "/v1/workers",
     b'{"mime_type": "application/x-nope", "topic": "t", '
     b'"code": {"content": "ZWNobw=="}}', 400, "unknown_mime_type"),
    ("POST", "/v1/workers",
     b'{"mime_type": "application/x-wm-test", "topic": "t", '
     b'"name": "Bad Name", "code": {"content": "ZWNobw=="}}', 400,
     "invalid_argument"),
    ("POST", "/v1/workers",
     b'{"mime_type": "application/x-wm-test", "topic": "t", '
     b'"code": {"url": "ftp://example.com/w.py"}}', 400, "invalid_argument"),
    ("POST", "/v1/workers",
     b'{"mime_type": "application/x-wm-test", "topic": "t", '
     b'"code": {"url": "http://example.com/w.py"}}', 403,
     "security_rejected"),
    ("POST", "/v1/workers",
     b'{"mime_type": "application/x-wm-test", "topic": "", '
     b'"code": {"content": "ZWNobw=="}}', 400, "invalid_argument"),
    ("POST", "/v1/workers",
     b'{"mime_type": "application/x-wm-test", "topic": "t", "start": "yes",'
     b' "code": {"content": "ZWNobw=="}}', 400, "invalid_argument"),
    ("POST", "/v1/workers",
     b'{"mime_type": "application/x-wm-test", "topic": "t", '
     b'"limits": {"concurrency": 0}, "code": {"content": "ZWNobw=="}}', 400,
     "invalid_argument"),
    ("POST", "/v1/workers",
     b'{"mime_type": "application/x-wm-test", "topic": "t", '
     b'"config": {"correlationid": "x"}, "code": {"content": "ZWNobw=="}}',
     400, "invalid_argument"),
    ("GET", "/v1/workers/0f8fad5b-d9cb-469f-a165-70867728950e", None, 404,
     "not_found"),
    ("POST", "/v1/workers/nobody/start", None, 404, "not_found"),
    ("GET", "/v1/nothing", None, 404, "not_found"),
]


@pytest.mark.parametrize("method,path,raw,status,code", BAD)
def test_bad_inputs(wmd, method, path, raw, status, code):
    r = wmd.request(method, path, raw=raw,
                    headers={"Content-Type": "application/json"})
    assert r.status == status, r
    assert r.code == code, r
    assert r.json["error"]["message"]


def test_oversize_body(wm_builddir, tmp_path):
    d = Daemon(wm_builddir, tmp_path, options={"max_body_bytes": 4096})
    d.start()
    try:
        r = d.post("/v1/workers", {"mime_type": "application/x-wm-test",
                                   "topic": "t",
                                   "code": {"content": b64("x" * 5000)}})
        assert r.status == 413 and r.code == "payload_too_large", r
    finally:
        assert d.stop() == 0


def test_duplicate_name(wmd):
    wmd.create(name="same")
    r = wmd.post("/v1/workers", {"mime_type": "application/x-wm-test",
                                 "topic": "t", "name": "same",
                                 "code": {"content": b64("echo")}})
    assert r.status == 409 and r.code == "conflict"


def test_worker_error_is_422(wmd):
    w = wmd.create()
    r = wmd.invoke(w["id"], "fail")
    assert r.status == 422 and r.code == "worker_error", r
    assert r.json["error"]["error_type"] == "exception"
    assert r.json["error"]["exception_type"] == "TestError"


def test_crash_restarts_with_backoff(wmd):
    w = wmd.create()
    wid = w["id"]
    assert wmd.invoke(wid).status == 200
    r = wmd.invoke(wid, "crash")
    assert r.status == 422 and r.json["error"]["error_type"] == "crash", r
    g = wmd.wait_for(
        lambda: (lambda j: j if j["restarts"] >= 1 else None)(
            wmd.get(f"/v1/workers/{wid}").json), what="a restart")
    assert g["last_exit"]["reason"] == "crash"
    assert g["last_exit"]["signal"] == signal.SIGSEGV
    names = wmd.lifecycle_names(wid)
    assert "error" in names and "restarting" in names
    err = [e for e in wmd.lifecycle(wid)
           if e["type"].endswith(".error")][0]["data"]
    assert err["error_type"] == "crash" and err["signal"] == signal.SIGSEGV
    # and it serves again
    wmd.wait_for(lambda: wmd.invoke(wid).status == 200, what="echo again")
    assert wmd.get("/health").status == 200


def test_hang_is_killed_at_the_deadline(wmd):
    w = wmd.create(limits={"timeout_ms": 300})
    wid = w["id"]
    t0 = time.monotonic()
    r = wmd.invoke(wid, "hang")
    assert r.status == 422 and r.json["error"]["error_type"] == "timeout", r
    assert time.monotonic() - t0 < 5
    g = wmd.wait_for(lambda: (lambda j: j if j["last_exit"] else None)(
        wmd.get(f"/v1/workers/{wid}").json), what="last_exit")
    assert g["last_exit"]["reason"] == "timeout"


def test_malformed_frame_kills_the_host_only(wmd):
    w = wmd.create()
    wid = w["id"]
    r = wmd.invoke(wid, "malformed")
    assert r.status == 422 and r.json["error"]["error_type"] == "protocol", r
    g = wmd.wait_for(lambda: (lambda j: j if j["last_exit"] else None)(
        wmd.get(f"/v1/workers/{wid}").json), what="last_exit")
    assert g["last_exit"]["reason"] == "protocol"
    assert wmd.get("/health").status == 200
    wmd.wait_for(lambda: wmd.invoke(wid).status == 200, what="echo again")


def test_exit0_unasked_is_a_protocol_failure(wmd):
    w = wmd.create()
    wid = w["id"]
    r = wmd.invoke(wid, "exit0")
    assert r.status == 422, r
    g = wmd.wait_for(lambda: (lambda j: j if j["last_exit"] else None)(
        wmd.get(f"/v1/workers/{wid}").json), what="last_exit")
    assert g["last_exit"]["reason"] == "protocol"
    assert g["last_exit"]["code"] == 0


def test_handshake_timeout(wmd):
    r = wmd.post("/v1/workers", {"mime_type": "application/x-wm-test-no-hello",
                                 "topic": "t",
                                 "code": {"content": b64("echo")}})
    assert r.status == 422 and r.code == "load_failed", r
    assert "handshake" in r.json["error"]["message"]


def test_protocol_version_mismatch(wmd):
    r = wmd.post("/v1/workers",
                 {"mime_type": "application/x-wm-test-bad-protocol",
                  "topic": "t", "code": {"content": b64("echo")}})
    assert r.status == 422 and r.code == "load_failed", r
    assert "99" in r.json["error"]["message"]


def test_engines(wmd, wm_repo):
    for f in (wm_repo / "engines.d").glob("*.engine"):
        (wmd.engines / f.name).write_text(f.read_text())
    # engines are read at start: restart to see the repo's descriptors
    assert wmd.stop() == 0
    wmd.start()
    engines = {e["name"]: e for e in wmd.get("/v1/engines").json["engines"]}
    assert engines["test"]["available"] is True
    assert "application/x-wm-test" in engines["test"]["mime_types"]
    for e in engines.values():
        assert e["available"] or e["reason"]
    # A worker's concurrency: threads of one host (the default), or host
    # processes for the engines whose hosts run one event at a time.
    assert engines["test"]["concurrency"] == "threads"
    assert engines["native"]["concurrency"] == "threads"
    assert engines["python"]["concurrency"] == "processes"
    assert engines["dotnet"]["concurrency"] == "processes"
    # A warm pool (supervise.h) is the Python engine's only.
    assert engines["python"]["warm"] == 1
    assert engines["test"]["warm"] == engines["native"]["warm"] == 0
    assert "warm_ready" in engines["python"]


def test_health(wmd):
    r = wmd.get("/health")
    assert r.status == 200 and r.json["status"] == "Healthy", r
    assert wmd.get("/health/live").status == 200


def test_audit_log(wmd):
    w = wmd.create()
    wmd.post(f"/v1/workers/{w['id']}/stop")
    wmd.post("/v1/workers", {"mime_type": 1})
    lines = [json.loads(l) for l in
             (wmd.state / "audit.log").read_text().splitlines()]
    assert [l["status"] for l in lines] == [201, 200, 400]
    assert lines[0]["worker"] == w["id"]
    assert lines[0]["peer"].startswith(f"uid={os.getuid()} ")
    assert lines[2]["code"] == "invalid_argument"


def test_sigterm_stops_hosts_and_exits_0(wmd):
    w = wmd.create()
    assert wmd.invoke(w["id"]).status == 200
    pid = wmd.get(f"/v1/workers/{w['id']}").json["pid"]
    assert wmd.stop() == 0
    assert not os.path.exists(f"/proc/{pid}")
    assert not wmd.socket.exists()
    wmd.start()  # the fixture stops it again


def test_tcp_needs_the_token(wm_builddir, tmp_path):
    import http.client
    token = "s3cret-token-0123456789"
    (tmp_path / "token").write_text(token + "\n")
    port = free_port()
    d = Daemon(wm_builddir, tmp_path, options={"listen": f"127.0.0.1:{port}"})
    d.start()
    try:
        def get(headers):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/v1/workers", headers=headers)
            r = c.getresponse()
            body = json.loads(r.read() or b"null")
            c.close()
            return r.status, body
        st, body = get({})
        assert st == 401 and body["error"]["code"] == "unauthorized"
        st, body = get({"Authorization": "Bearer wrong-token-0123456789"})
        assert st == 401
        st, body = get({"Authorization": f"Bearer {token}"})
        assert st == 200 and body == {"workers": []}
    finally:
        assert d.stop() == 0


def test_one_change_at_a_time(wmd):
    import threading
    w = wmd.create(limits={"timeout_ms": 1500})
    wid = w["id"]
    slow = {}

    def reload():
        slow["r"] = wmd.put(f"/v1/workers/{wid}/code",
                            {"code": {"content": b64("hang_load")}})
    t = threading.Thread(target=reload)
    t.start()
    time.sleep(0.3)  # the reload now waits for the host's Loaded
    r = wmd.put(f"/v1/workers/{wid}/tags", {"tags": {"a": "b"}})
    assert r.status == 409 and r.code == "conflict", r
    assert "in progress" in r.json["error"]["message"]
    assert wmd.delete(f"/v1/workers/{wid}").status == 409
    t.join(10)
    assert slow["r"].status == 422 and slow["r"].code == "load_failed"
    # the first change ended: the worker is as before and free again
    assert wmd.get(f"/v1/workers/{wid}").json["version"] == 1
    assert wmd.put(f"/v1/workers/{wid}/tags",
                   {"tags": {"a": "b"}}).status == 200
    assert wmd.invoke(wid).status == 200


def test_reload_serves_later_events_with_the_new_code(wmd):
    """Hot reload: events after the reload run the new version's code in
    the same host (the test host's log_events directive makes the new code
    observable)."""
    w = wmd.create(code="echo")
    assert wmd.invoke(w["id"], "echo", id="before").status == 200
    pid = wmd.get(f"/v1/workers/{w['id']}").json["pid"]
    r = wmd.put(f"/v1/workers/{w['id']}/code",
                {"code": {"content": b64("echo\nlog_events")}})
    assert r.status == 200 and r.json["version"] == 2, r
    ev = {"specversion": "1.0", "id": "after", "source": "test",
          "type": "echo"}
    assert wmd.post(f"/v1/workers/{w['id']}/invoke", ev).status == 200
    log = wmd.log()
    assert "event after delivery 1" in log
    assert "event before delivery" not in log
    assert wmd.get(f"/v1/workers/{w['id']}").json["pid"] == pid
