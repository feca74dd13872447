"""store = nats (issue 23, first step): worker records and code blobs in
NATS JetStream KV buckets.  Each test starts its own `nats-server -js` on a
free loopback port with its store in the test's directory (NatsServer), and
daemons with `store = nats` pointing at it (nats_lib.py).

What proves the records live in NATS and not on the local disk: a daemon
given a *new, empty* state_dir recovers the workers another daemon made.

Without nats-server or libnats these tests skip (nats_lib.py says when).
"""

import re
import subprocess
from pathlib import Path

import pytest

from wm import Daemon, Stream, b64, event, free_port, metric, publish
import pyhost_lib
from nats_lib import nats, nats_daemon, require_nats  # noqa: F401 (fixture)

def _by_name(d):
    return {w["name"]: w for w in d.get("/v1/workers").json["workers"]}


def test_workers_come_back_from_nats(wm_builddir, tmp_path, nats):
    """Create, stop, reload and delete with store = nats; a daemon with an
    empty state_dir then recovers exactly what NATS holds."""
    a = nats_daemon(wm_builddir, tmp_path / "a", nats).start()
    try:
        assert "store: NATS JetStream at " + nats.url in a.log()
        run = a.create(name="run")
        a.create(name="off", start=False)
        a.create(name="v2")
        r = a.put("/v1/workers/v2/code",
                  {"code": {"content": b64("echo\n# v2")}})
        assert r.status == 200, r
        a.create(name="gone")
        assert a.delete("/v1/workers/gone").status == 204
        assert a.invoke("run").status == 200
    finally:
        assert a.stop() == 0
    assert not (tmp_path / "a" / "state" / "records").exists() or not any(
        (tmp_path / "a" / "state" / "records").iterdir())

    b = nats_daemon(wm_builddir, tmp_path / "b", nats).start()
    try:
        h = b.get("/health").json
        assert h["checks"]["recovery"]["recovered"] == 3, h
        by = _by_name(b)
        assert set(by) == {"run", "off", "v2"}
        assert by["run"]["id"] == run["id"]
        assert by["run"]["status"] == "running"
        assert by["off"]["status"] == "stopped"
        assert by["v2"]["version"] == 2
        assert b.invoke("run").status == 200
        assert b.invoke("v2").status == 200
        assert b.invoke("off").status == 409
        # Writes go on working after a recovery from NATS.
        assert b.post("/v1/workers/off/start").status == 200
        assert b.invoke("off").status == 200
    finally:
        assert b.stop() == 0


def test_python_package_round_trips_in_chunks(wm_builddir, tmp_path, nats):
    """A Python worker whose code (1.3 MB) spans several blob chunks is
    stored in NATS, read back whole by another daemon, and runs there."""
    pad = "x" * 1_300_000
    code = f"""
        PAD = "{pad}"

        def Process(event):
            return {{"type": "done", "data": {{"n": len(PAD)}}}}
    """
    a = nats_daemon(wm_builddir, tmp_path / "a", nats, make=pyhost_lib.daemon)
    a.start()
    try:
        w = pyhost_lib.create(a, code, name="big")
        sha = a.get("/v1/workers/big/history").json["versions"][0]["sha256"]
    finally:
        assert a.stop() == 0

    b = nats_daemon(wm_builddir, tmp_path / "b", nats, make=pyhost_lib.daemon)
    b.start()
    try:
        assert b.get("/v1/workers/big").json["id"] == w["id"]
        got = b.get("/v1/workers/big/history").json["versions"][0]
        assert got["sha256"] == sha
        r = b.invoke("big", "go")
        assert r.status == 200, r
        assert r.json["data"]["n"] == len(pad)
    finally:
        assert b.stop() == 0


def test_second_writer_writes_on_top(wm_builddir, tmp_path, nats):
    """Two daemons on one NATS: the second follows the first's change
    (remote_workers.c), so its own write goes on top of it under the new
    revision, and a third daemon reads the last one.  (A write under a
    stale revision is a conflict: the store's compare-and-set, in the unit
    test test_store_nats.c.)"""
    a = nats_daemon(wm_builddir, tmp_path / "a", nats).start()
    b = None
    try:
        a.create(name="w")
        b = nats_daemon(wm_builddir, tmp_path / "b", nats).start()
        assert _by_name(b)["w"]["status"] == "running"
        r = a.put("/v1/workers/w/tags", {"tags": {"by": "a"}})
        assert r.status == 200, r
        b.wait_for(lambda: _by_name(b)["w"]["tags"] == {"by": "a"},
                   what="a's change on b")
        r = b.put("/v1/workers/w/tags", {"tags": {"by": "b"}})
        assert r.status == 200, r
    finally:
        if b is not None:
            assert b.stop() == 0
        assert a.stop() == 0
    c = nats_daemon(wm_builddir, tmp_path / "c", nats).start()
    try:
        assert c.get("/v1/workers/w").json["tags"] == {"by": "b"}
    finally:
        assert c.stop() == 0


def test_tenant_suspend_keeps_revisions_right(wm_builddir, tmp_path, nats):
    """Suspending and resuming a tenant writes its workers' records under
    whatever revision; the worker then holds the revision NATS gave (not
    one counted locally), so the next change of the worker is no conflict."""
    d = nats_daemon(wm_builddir, tmp_path, nats).start()
    try:
        assert d.post("/v1/tenants", {"name": "t1"}).status == 201
        d.create(name="w", tenant="t1")
        assert d.post("/v1/tenants/t1/suspend").status == 200
        assert d.post("/v1/tenants/t1/resume").status == 200
        d.wait_for(lambda: d.get("/v1/workers/w").json["status"] ==
                   "running", what="the worker running again")
        r = d.put("/v1/workers/w/tags", {"tags": {"k": "v"}})
        assert r.status == 200, r
    finally:
        assert d.stop() == 0


def test_group_locks_in_nats(wm_builddir, tmp_path, nats):
    """A group's lock record lives in NATS (compare-and-set on its
    revision): two members take turns, never overlapping."""
    d = nats_daemon(wm_builddir, tmp_path, nats,
                group_lock_retry_base_delay_ms=20,
                redelivery_base_delay_ms=20,
                # a lock taken in NATS per event, not a lease per turn:
                # every event a compare-and-set on the record
                group_lock_lease_idle_ms=0,
                group_lock_token_block=1).start()
    try:
        a = d.create(topic="g", name="ga", group="lockers")
        b = d.create(topic="g", name="gb", group="lockers")
        out = Stream(d, "span.out")
        r = publish(d, "g", [event("span", id_=f"s{i}", do="span:20")
                             for i in range(10)])
        assert r.status == 202, r
        got = out.wait(10, timeout=30)
        spans = sorted((e["data"]["start_ns"], e["data"]["end_ns"])
                       for e in got)
        for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
            assert e1 <= s2, f"overlap: {spans}"
        assert len(got) == 10, got
        assert metric(d, "workmanager_grouplock_acquired_total") >= 10
        assert {e["data"]["worker"] for e in got} <= {a["id"], b["id"]}
        out.close()
    finally:
        assert d.stop() == 0


def _run_to_exit(d):
    """Runs the daemon's command line to its exit (a start-up refusal)."""
    (d.tmp / "none.conf").write_text("# empty\n")
    return subprocess.run(d.argv(), capture_output=True, text=True,
                          timeout=30, env={"PATH": "/usr/bin:/bin"})


def test_unreachable_nats_stops_start_up_naming_the_url(wm_builddir,
                                                        tmp_path):
    """Nothing listens at nats_url: exit 1 (a restart may find it up),
    naming the URL and what to check."""
    require_nats(wm_builddir)
    url = f"nats://127.0.0.1:{free_port()}"
    p = _run_to_exit(Daemon(wm_builddir, tmp_path,
                            options={"store": "nats", "nats_url": url}))
    assert p.returncode == 1, p
    assert f"cannot connect to NATS at {url}" in p.stderr, p.stderr
    assert "nats-server" in p.stderr, p.stderr


def test_broker_nats_is_refused_saying_what_is_supported(wm_builddir,
                                                          tmp_path):
    """broker = nats with the file store: exit 2 (no restart helps),
    saying which combinations run."""
    p = _run_to_exit(Daemon(wm_builddir, tmp_path,
                            options={"broker": "nats"}))
    assert p.returncode == 2, p
    assert "broker = nats (-o) needs store = nats" in p.stderr, p.stderr
    assert "broker = nats with store = nats)" in p.stderr, p.stderr


def test_version_says_whether_nats_is_built(wm_builddir):
    out = subprocess.run([str(Path(wm_builddir) / "master" / "workmanagerd"),
                          "--version"], capture_output=True, text=True,
                         check=True).stdout
    config = (Path(wm_builddir) / "config.h").read_text()
    if re.search(r"^#define WM_NATS 1$", config, re.M):
        assert re.search(r"^NATS JetStream store: yes \(libnats \d", out,
                         re.M), out
    else:
        assert "NATS JetStream store: no" in out, out
