"""wmctl export / import (issue 23): a whole store in one JSON-lines
archive (GET /v1/export) and back into another daemon's store (POST
/v1/import), to move a single machine's file store into NATS and back
(master/api/route_export.c).  An archive is checked whole before anything
is written."""

import base64
import json

from nats_lib import nats, nats_daemon  # noqa: F401 (nats is a fixture)
from test_tenant_quotas import wmctl
from wm import Daemon, b64


def fill(d):
    """A tenant, a token, a worker with two versions and tags, another
    stopped; returns the token's id."""
    assert d.post("/v1/tenants", {"name": "acme"}).status == 201
    tok = d.post("/v1/tokens", {"tenant": "acme", "role": "reader"})
    assert tok.status == 201, tok
    d.create(name="echo1", tenant="acme")
    r = d.post("/v1/workers/echo1/code", {"code": {"content": b64("echo\n")}})
    assert r.status == 200 and r.json["version"] == 2, r
    assert d.put("/v1/workers/echo1/tags", {"tags": {"t": "1"}}).status == 200
    d.create(name="quiet", start=False)
    return tok.json["id"]


def same(a, b):
    """b holds a's workers (versions, history, tags, status), tenant and
    token, and runs them."""
    for name in ("echo1", "quiet"):
        wa = a.get(f"/v1/workers/{name}").json
        b.wait_for(lambda: b.get(f"/v1/workers/{name}").status == 200,
                   what=f"{name} restored")
        wb = b.get(f"/v1/workers/{name}").json
        for k in ("id", "version", "status", "tags", "tenant", "topic"):
            assert wa[k] == wb[k], (k, wa[k], wb[k])
        assert (b.get(f"/v1/workers/{name}/history").json ==
                a.get(f"/v1/workers/{name}/history").json)
    assert b.invoke("echo1").status == 200
    assert b.get("/v1/tenants/acme").status == 200
    assert ({t["id"] for t in a.get("/v1/tokens").json["tokens"]} ==
            {t["id"] for t in b.get("/v1/tokens").json["tokens"]})


def test_file_to_nats_and_back(wm_builddir, tmp_path, nats):
    a = Daemon(wm_builddir, tmp_path / "a").start()
    b = nats_daemon(wm_builddir, tmp_path / "b", nats).start()
    c = Daemon(wm_builddir, tmp_path / "c").start()
    try:
        fill(a)
        r = wmctl(a, "export", str(tmp_path / "a.ndjson"))
        assert r.returncode == 0, r
        r = wmctl(b, "import", str(tmp_path / "a.ndjson"))
        assert r.returncode == 0, r
        assert "workers: 2" in r.stdout, r
        same(a, b)
        # an archive is never imported over what exists, unless asked
        r = wmctl(b, "import", str(tmp_path / "a.ndjson"))
        assert r.returncode == 1 and "exists here already" in r.stderr, r
        r = wmctl(b, "import", "--replace", str(tmp_path / "a.ndjson"))
        assert r.returncode == 0, r
        # and back from NATS into a file store
        r = wmctl(b, "export", str(tmp_path / "b.ndjson"))
        assert r.returncode == 0, r
        r = wmctl(c, "import", str(tmp_path / "b.ndjson"))
        assert r.returncode == 0, r
        same(a, c)
        r = wmctl(a, "export", str(tmp_path / "a.ndjson"))  # no overwrite
        assert r.returncode == 1 and "never overwrites" in r.stderr, r
    finally:
        for d in (a, b, c):
            assert d.stop() == 0


def bad(wmd, lines, why):
    body = ("\n".join(json.dumps(x) if not isinstance(x, str) else x
                      for x in lines) + "\n").encode()
    r = wmd.post("/v1/import", raw=body,
                 headers={"Content-Type": "application/x-ndjson"})
    assert r.status == 400, r
    assert why in r.json["error"]["message"], r.json
    assert "nothing was imported" in r.json["error"]["message"], r.json
    assert wmd.get("/v1/workers").json["workers"] == []
    assert wmd.get("/v1/tenants").json["tenants"] == [] or all(
        t["name"] != "acme" for t in wmd.get("/v1/tenants").json["tenants"])


def test_a_bad_archive_imports_nothing(wmd, tmp_path):
    fill(wmd)
    r = wmctl(wmd, "export", str(tmp_path / "x.ndjson"))
    assert r.returncode == 0, r
    lines = [json.loads(x)
             for x in (tmp_path / "x.ndjson").read_text().splitlines()]
    for name in ("echo1", "quiet"):
        assert wmd.delete(f"/v1/workers/{name}").status in (200, 204)
    assert wmd.delete("/v1/tenants/acme?confirm=acme").status == 200
    blob = next(i for i, x in enumerate(lines) if x["kind"] == "blob")
    changed = [dict(x) for x in lines]
    code = bytearray(base64.b64decode(changed[blob]["content"]))
    code[0] ^= 1
    changed[blob]["content"] = base64.b64encode(bytes(code)).decode()
    bad(wmd, changed, "its content's SHA-256 is")
    bad(wmd, [json.dumps(x) for x in lines[:-1]] +
        [json.dumps(lines[-1])[:-5]], "not JSON")
    bad(wmd, [x for i, x in enumerate(lines) if i != blob],
        "is not in the archive")
    bad(wmd, lines[1:], "not the header")
    bad(wmd, lines + [{"kind": "key", "key": "workmanager/instances/x",
                       "value": ""}], "is not one an export holds")
    bad(wmd, lines + [{"kind": "script", "key": "x"}], 'unknown kind "script"')
    # the archive as it was: imported
    r = wmctl(wmd, "import", str(tmp_path / "x.ndjson"))
    assert r.returncode == 0, r
    wmd.wait_for(lambda: wmd.get("/v1/workers/echo1").status == 200,
                 what="echo1 restored")
    assert wmd.invoke("echo1").status == 200
