"""Persistence and recovery of workers across restarts (issue 3)."""

import os
from pathlib import Path

import pytest

from wm import Daemon, b64


def _daemon(wm_builddir, tmp_path, **opts):
    return Daemon(wm_builddir, tmp_path, options=opts)


def test_kill9_and_restart_restores_every_worker(wm_builddir, tmp_path):
    d = _daemon(wm_builddir, tmp_path).start()
    running = d.create(name="r1")
    stopped = d.create(name="s1", start=False)
    suspended = d.create(name="p1")
    assert d.post("/v1/workers/p1/suspend").status == 200
    reloaded = d.create(name="v2")
    assert d.put("/v1/workers/v2/code",
                 {"code": {"content": b64("echo\n# v2")}}).status == 200
    assert d.invoke("r1").status == 200
    d.kill9()

    d.start()
    try:
        h = d.get("/health")
        assert h.status == 200 and h.json["status"] == "Healthy"
        assert h.json["checks"]["recovery"]["recovered"] == 4
        by = {w["name"]: w for w in d.get("/v1/workers").json["workers"]}
        assert set(by) == {"r1", "s1", "p1", "v2"}
        assert by["r1"]["status"] == "running"
        assert by["r1"]["id"] == running["id"]
        assert by["s1"]["status"] == "stopped"
        assert by["p1"]["status"] == "suspended"
        assert by["v2"]["version"] == 2
        # hosts start lazily: none is running yet
        assert all(w["pid"] is None for w in by.values())
        assert d.invoke("r1").status == 200
        assert d.invoke("v2").status == 200
        assert d.invoke("s1").status == 409
    finally:
        assert d.stop() == 0
    d.check_clean()


def test_corrupt_record_fails_that_worker_only(wm_builddir, tmp_path):
    d = _daemon(wm_builddir, tmp_path).start()
    good = d.create(name="good")
    bad = d.create(name="bad")
    assert d.stop() == 0
    records = list((d.state / "records").iterdir())
    target = [p for p in records if bad["id"] in p.name]
    assert len(target) == 1, records
    data = bytearray(target[0].read_bytes())
    data[-3] ^= 0xFF
    target[0].write_bytes(bytes(data))

    d.start()
    try:
        assert d.get("/health").status == 200
        g = d.get(f"/v1/workers/{good['id']}").json
        assert g["status"] == "running"
        b = d.get(f"/v1/workers/{bad['id']}").json
        assert b["state"] == "failed"
        assert b["error"]
        errors = [e for e in d.lifecycle(bad["id"])
                  if e["type"].endswith(".error")]
        assert errors, d.log()
        assert d.delete(f"/v1/workers/{bad['id']}").status == 204
    finally:
        assert d.stop() == 0


def test_blob_hash_mismatch_fails_that_worker(wm_builddir, tmp_path):
    d = _daemon(wm_builddir, tmp_path).start()
    w = d.create(name="w", code="echo\n# unique code for this test")
    sha = d.get("/v1/workers/w/history").json["versions"][0]["sha256"]
    assert d.stop() == 0
    blob = d.state / "blobs" / sha[:2] / sha
    assert blob.exists(), list((d.state / "blobs").rglob("*"))
    blob.write_bytes(b"tampered")

    d.start()
    try:
        g = d.get(f"/v1/workers/{w['id']}").json
        assert g["state"] == "failed"
        assert sha in g["error"] or "hash" in g["error"].lower() \
            or "corrupt" in g["error"].lower()
        assert d.get("/health").status == 200
    finally:
        assert d.stop() == 0


def test_recovery_off_then_recover_route(wm_builddir, tmp_path):
    d = _daemon(wm_builddir, tmp_path).start()
    d.create(name="a")
    d.create(name="b", start=False)
    assert d.stop() == 0
    d.options["recovery_on_start"] = "false"
    d.start()
    try:
        h = d.get("/health")
        assert h.status == 200  # off: healthy, recovery is manual
        assert d.get("/v1/workers").json["workers"] == []
        r = d.post("/v1/recover")
        assert r.status == 200, r
        assert r.json["recovered"] == 2
        names = {w["name"] for w in d.get("/v1/workers").json["workers"]}
        assert names == {"a", "b"}
        # a second run leaves known workers alone
        assert d.post("/v1/recover").json["recovered"] == 0
    finally:
        assert d.stop() == 0


def test_env_name_of_the_original(wm_builddir, tmp_path):
    d = Daemon(wm_builddir, tmp_path,
               env={"WORKER_RECOVERY_ON_START": "false"}).start()
    try:
        assert "recovery_on_start is off" in d.get("/health").raw.decode()
    finally:
        assert d.stop() == 0


def test_unknown_key_stops_startup(wm_builddir, tmp_path):
    d = Daemon(wm_builddir, tmp_path, options={"no_such_key": "1"})
    with pytest.raises(AssertionError) as e:
        d.start()
    assert "no_such_key" in str(e.value)


def test_recovering_answers_503_then_healthy(wm_builddir, tmp_path):
    d = _daemon(wm_builddir, tmp_path, store_fsync="off").start()
    n = 3000  # enough recovery turns for several requests to land
    for i in range(n):
        d.create(code=f"echo\n# {i}", start=False, name=f"w{i}")
    assert d.stop() == 0
    d.start(wait_healthy=False)
    seen = set()
    try:
        while True:
            h = d.get("/health")
            if h.status == 200:
                assert h.json["status"] == "Healthy"
                break
            assert h.status == 503 and h.json["status"] == "Degraded", h
            assert h.json["checks"]["recovery"]["status"] == "Degraded"
            seen.add("degraded")
            r = d.post("/v1/workers/w1/stop")
            if r.status == 503:
                assert r.code == "recovering", r
                assert r.headers.get("Retry-After")
                seen.add("recovering")
        assert seen == {"degraded", "recovering"}, seen
        assert len(d.get("/v1/workers").json["workers"]) == n
    finally:
        assert d.stop() == 0


def test_worker_whose_engine_is_gone_restored_failed(wm_builddir, tmp_path):
    """Issue 27: recovery checks that each worker can run where it is
    restored: one whose engine became unavailable (its host binary gone)
    is restored failed, counted in /health's recovery summary, with the
    engine's reason and what to do."""
    d = _daemon(wm_builddir, tmp_path).start()
    w = d.create(name="orphan")
    assert d.stop() == 0
    broken = (d.engines / "test.engine").read_text().replace(
        f"host = {d.testhost}", f"host = {tmp_path}/no-such-host")
    d = Daemon(wm_builddir, tmp_path, engines={"test.engine": broken})
    d.start()
    try:
        rec = d.get("/health").json["checks"]["recovery"]
        assert rec["failed"] == 1 and rec["recovered"] == 0, rec
        view = d.get(f"/v1/workers/{w['id']}").json
        assert view["state"] == "failed", view
        assert "engine test is unavailable" in view["error"], view
        assert "no-such-host" in view["error"], view
    finally:
        assert d.stop() == 0
