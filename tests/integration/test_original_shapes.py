"""tests/integration/test_original_shapes.py — the original system's REST
shapes as aliases (issue 25): its member names (mimeType, codeSource,
code_source, contentSha256), POST /v1/workers/{id}/code, the older
unversioned /workers paths with a raw application/octet-stream package,
its create without code followed by the code's load,
each against the same worker behaviours as our own shapes."""

import hashlib

from wm import b64

MIME = "application/x-wm-test"


def test_camel_case_create_and_code_source(wmd):
    r = wmd.post("/v1/workers", {"mimeType": MIME, "topic": "t",
                                 "codeSource": {"content": b64("echo")}})
    assert r.status == 201, r
    w = r.json
    assert w["mime_type"] == MIME and w["version"] == 1
    out = wmd.invoke(w["id"], data={"k": 1})
    assert out.status == 200 and out.json["type"] == "echo.out", out
    assert out.json["data"] == {"k": 1}
    # POST .../code with code_source: a reload, as PUT .../code is.
    r = wmd.post(f"/v1/workers/{w['id']}/code",
                 {"code_source": {"content": b64("echo\n# v2")}})
    assert r.status == 200 and r.json["version"] == 2, r
    assert wmd.invoke(w["id"]).status == 200


def test_content_sha256_is_checked_as_sha256(wmd):
    code = b"echo\n# pinned"
    good = hashlib.sha256(code).hexdigest()
    r = wmd.post("/v1/workers", {
        "mimeType": MIME, "topic": "t",
        "codeSource": {"content": b64(code), "contentSha256": "0" * 64}})
    assert r.status == 403 and r.code == "security_rejected", r
    assert "code.sha256" in r.json["error"]["message"], r
    r = wmd.post("/v1/workers", {
        "mimeType": MIME, "topic": "t",
        "codeSource": {"content": b64(code), "contentSha256": good}})
    assert r.status == 201, r


def test_alias_and_own_name_together_are_refused(wmd):
    r = wmd.post("/v1/workers", {"mimeType": MIME, "mime_type": MIME,
                                 "topic": "t",
                                 "code": {"content": b64("echo")}})
    assert r.status == 400 and r.code == "invalid_argument", r
    msg = r.json["error"]["message"]
    assert "mimeType and mime_type are the same member" in msg, msg
    r = wmd.post("/v1/workers", {"mime_type": MIME, "topic": "t",
                                 "code": {"content": b64("echo")},
                                 "codeSource": {"content": b64("echo")}})
    assert r.status == 400 and "codeSource and code" in \
        r.json["error"]["message"], r


def test_older_flow_create_without_code_then_load(wmd):
    # The original's older flow: POST /workers without code, PUT the raw
    # package, start.  Until its code arrives the worker exists, stopped,
    # at version 0, in state no_code, and cannot start or take an event.
    r = wmd.post("/workers", {"mimeType": MIME, "topic": "t",
                              "group": "g0"})
    assert r.status == 201, r
    w = r.json
    wid = w["id"]
    assert (w["status"], w["state"], w["version"]) == \
        ("stopped", "no_code", 0), w
    assert wmd.get(f"/workers/{wid}").json["state"] == "no_code"
    assert [x["id"] for x in wmd.get("/v1/workers").json["workers"]] == [wid]
    orig = wmd.get(f"/workers/{wid}?format=original").json
    assert orig["status"] == "Stopped" and orig["codeSource"] == {}, orig
    assert wmd.get(f"/workers/{wid}/history").json == \
        {"worker_id": wid, "current": 0, "versions": []}
    for path, body in ((f"/workers/{wid}/start", None),
                       (f"/workers/{wid}/rollback", {"version": 1}),
                       (f"/v1/workers/{wid}/invoke",
                        {"specversion": "1.0", "id": "x", "source": "s",
                         "type": "echo"})):
        r = wmd.post(path, body)
        assert r.status == 409 and r.code == "conflict", r
        msg = r.json["error"]["message"]
        assert "has no code yet" in msg and \
            f"PUT /v1/workers/{wid}/code" in msg, msg
    # start: true cannot hold without code.
    r = wmd.post("/v1/workers", {"mimeType": MIME, "topic": "t",
                                 "start": True})
    assert r.status == 400 and "start: true needs code" in \
        r.json["error"]["message"], r

    # It survives a restart as it is.
    assert wmd.stop() == 0
    wmd.start()
    got = wmd.get(f"/workers/{wid}").json
    assert (got["status"], got["state"], got["version"]) == \
        ("stopped", "no_code", 0), got
    rec = wmd.get("/health").json["checks"]["recovery"]
    assert (rec["recovered"], rec["failed"]) == (1, 0), rec

    # Its first code is version 1; then it is a worker like any other.
    r = wmd.request("PUT", f"/workers/{wid}/code", raw=b"echo",
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status == 200, r
    assert (r.json["version"], r.json["state"]) == (1, "stopped"), r
    assert wmd.post(f"/workers/{wid}/start").status == 200
    out = wmd.invoke(wid, data={"k": 1})
    assert out.status == 200 and out.json["type"] == "echo.out", out
    r = wmd.post(f"/v1/workers/{wid}/code",
                 {"code_source": {"content": b64("echo\n# v2")}})
    assert r.status == 200 and r.json["version"] == 2, r
    assert [v["version"] for v in
            wmd.get(f"/workers/{wid}/history").json["versions"]] == [1, 2]
    assert wmd.lifecycle_names(wid) == ["created", "reloaded", "started",
                                        "reloaded"]
    # A second one, left without code, is deleted as any worker is.
    r = wmd.post("/workers", {"mimeType": MIME, "topic": "t"})
    assert r.status == 201, r
    assert wmd.request("DELETE", f"/workers/{r.json['id']}").status == 204
    assert wmd.get(f"/workers/{r.json['id']}").status == 404


def test_unversioned_paths_and_raw_package(wmd):
    r = wmd.post("/workers", {"mimeType": MIME, "topic": "t",
                              "group": "g1",
                              "codeSource": {"content": b64("echo")},
                              "start": False})
    assert r.status == 201 and r.json["id"], r
    wid = r.json["id"]
    r = wmd.request("PUT", f"/workers/{wid}/code", raw=b"echo\n# raw v2",
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status == 200 and r.json["version"] == 2, r
    r = wmd.request("PUT", f"/workers/{wid}/code", raw=b"",
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status == 400 and "body is empty" in \
        r.json["error"]["message"], r
    assert wmd.post(f"/workers/{wid}/start").status == 200
    got = wmd.get(f"/workers/{wid}").json
    assert got["status"] == "running" and got["group"] == "g1", got
    out = wmd.post(f"/workers/{wid}/invoke",
                   {"specversion": "1.0", "id": "o1", "source": "s",
                    "type": "echo"})
    assert out.status == 200 and out.json["type"] == "echo.out", out
    assert [v["version"] for v in
            wmd.get(f"/workers/{wid}/history").json["versions"]] == [1, 2]


def test_format_original_worker_objects(wmd):
    w = wmd.create(group="g2")
    one = wmd.get(f"/v1/workers/{w['id']}?format=original")
    assert one.status == 200, one
    assert set(one.json) == {"id", "codeSource", "mimeType", "language",
                             "topic", "group", "createdAt", "status"}
    assert one.json["id"] == w["id"] and one.json["mimeType"] == MIME
    assert one.json["status"] == "Running" and one.json["group"] == "g2"
    assert one.json["createdAt"] == w["created_at"]
    assert len(one.json["codeSource"]["contentSha256"]) == 64
    every = wmd.get("/workers?format=original").json["workers"]
    assert every == [one.json]
    r = wmd.get("/v1/workers?format=camel")
    assert r.status == 400 and '"original"' in r.json["error"]["message"], r
