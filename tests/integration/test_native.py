"""Native workers on a real workmanagerd (issue 6): wm-host-native loading
packages built here from tests/workers/native (a worker built with the
official FlatBuffers C++ runtime from a schema transcribed from the
original's field list), processing events through the ABI, and refusing
bad packages with the host's message.

The worker's behaviour comes from the event's type (echo, error, fail,
garbage, none, crash, log, gateway, sleep, counts): see
tests/workers/native/echo_worker.cc.
"""

import re
import sys
from pathlib import Path

import pytest

from wm import Daemon, b64

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "workers"
                       / "native"))
from mkpackage import make_package  # noqa: E402

MIME = "application/x-native-dll"


@pytest.fixture
def lib(wm_builddir):
    path = Path(wm_builddir) / "tests" / "workers" / "native" / "libecho.so"
    assert path.exists(), f"{path} is built by make check"
    return path


def native_engine(builddir):
    host = Path(builddir) / "hosts" / "native" / "wm-host-native"
    return {"native.engine": "name = native\n"
                             f"mime_type = {MIME}\n"
                             "language = C\n"
                             f"host = {host}\n"
                             "spawn = exec\nprotocol = 1\n"}


@pytest.fixture
def wmd(wm_builddir, tmp_path):
    d = Daemon(wm_builddir, tmp_path, options={
        "restart_base_delay_ms": 20, "restart_max_delay_ms": 100,
        "shutdown_grace_ms": 1000, "message_timeout_ms": 2000},
        engines=native_engine(wm_builddir))
    d.start()
    yield d
    assert d.stop() == 0, d.log()


def create(d, package, expect=201, **fields):
    body = {"mime_type": MIME, "topic": "n",
            "code": {"content": b64(package)}}
    body.update(fields)
    r = d.post("/v1/workers", body)
    assert r.status == expect, r
    return r.json


def test_echo_through_the_abi(wmd, lib):
    """Spec: Native worker execution; identity variables set before the
    library loads; the correlation id kept first."""
    w = create(wmd, make_package(lib), group="g1")
    r = wmd.invoke(w["id"], "echo", data={"n": 1}, correlationid="c-1")
    assert r.status == 200, r
    out = r.json
    assert out["type"] == "echo.out" and out["id"] == "e1"
    assert out["data"] == {"n": 1}
    assert out["correlationid"] == "c-1"
    assert out["worker"] == w["id"]
    assert int(out["pid"]) == wmd.get(f"/v1/workers/{w['id']}").json["pid"]


def test_worker_errors(wmd, lib):
    w = create(wmd, make_package(lib))
    r = wmd.invoke(w["id"], "error")
    assert r.status == 422 and r.code == "worker_error", r
    assert "asked to fail" in r.json["error"]["message"]
    r = wmd.invoke(w["id"], "fail")
    assert r.status == 422 and "Process returned 7" in \
        r.json["error"]["message"], r
    r = wmd.invoke(w["id"], "garbage")
    assert r.status == 422, r
    assert "not a WorkerResponse" in r.json["error"]["message"]
    assert wmd.invoke(w["id"], "none").status == 204
    # FreeResult exactly once for every non-NULL output, error paths
    # included (the garbage one too).
    counts = wmd.invoke(w["id"], "counts").json["data"]
    assert counts["outputs"] == counts["freed"] >= 2, counts
    # The host lived through all of it.
    assert wmd.get(f"/v1/workers/{w['id']}").json["restarts"] == 0


def test_log_and_gateway(wmd, lib):
    w = create(wmd, make_package(lib))
    assert wmd.invoke(w["id"], "log").status == 200
    wmd.wait_for(lambda: "hello from native" in wmd.log(), what="the log")
    r = wmd.invoke(w["id"], "gateway")
    assert r.status == 200, r
    assert r.json["data"]["value"] == 1, r.json


def test_crash_leaves_the_master_unaffected(wmd, lib):
    w = create(wmd, make_package(lib))
    r = wmd.invoke(w["id"], "crash")
    assert r.status == 422 and r.json["error"]["error_type"] == "crash", r
    wmd.wait_for(lambda: wmd.get(f"/v1/workers/{w['id']}").json[
        "restarts"] >= 1, what="a restart")
    last = wmd.get(f"/v1/workers/{w['id']}").json["last_exit"]
    assert last["reason"] == "crash" and last["signal"] == 11
    assert wmd.invoke(w["id"], "echo").status == 200
    assert wmd.get("/health").status == 200


@pytest.mark.parametrize("kw,want", [
    ({"manifest": False}, "manifest.json is missing at the root"),
    ({"abi": 2}, "abi_version 2 is not supported; supported: 1"),
    ({"library": "bad/name"}, "is not a library name"),
    ({"rid": "linux-s390x"}, "not supported on this architecture"),
])
def test_bad_packages_refused_with_the_hosts_message(wmd, lib, kw, want):
    """Spec: Missing manifest, ABI version mismatch, Library name
    validation, Unsupported architecture."""
    r = wmd.post("/v1/workers", {"mime_type": MIME, "topic": "n",
                                 "code": {"content": b64(
                                     make_package(lib, **kw))}})
    assert r.code == "load_failed", r
    assert want in r.json["error"]["message"], r
    if "architecture" in want:
        assert "linux-x64, linux-arm64" in r.json["error"]["message"]
    assert wmd.get("/v1/workers").json["workers"] == []


def test_reload_swaps_the_library(wmd, lib):
    w = create(wmd, make_package(lib))
    pid = wmd.get(f"/v1/workers/{w['id']}").json["pid"]
    r = wmd.put(f"/v1/workers/{w['id']}/code",
                {"code": {"content": b64(make_package(lib, library="echo2"))}})
    assert r.status == 200 and r.json["version"] == 2, r
    assert wmd.invoke(w["id"], "echo").status == 200
    assert wmd.get(f"/v1/workers/{w['id']}").json["pid"] == pid
    assert re.search(r"loaded runtimes/linux-\w+/native/libecho2\.so",
                     wmd.log())


def test_abort_and_infinite_loop(wmd, lib):
    """abort() is a crash; an infinite loop in Process is killed at the
    event's deadline (message_timeout_ms 2000 here), reason timeout."""
    w = create(wmd, make_package(lib))
    r = wmd.invoke(w["id"], "abort")
    assert r.status == 422 and r.json["error"]["error_type"] == "crash", r
    wmd.wait_for(lambda: wmd.get(f"/v1/workers/{w['id']}").json[
        "last_exit"]["signal"] == 6, what="SIGABRT classified")
    r = wmd.invoke(w["id"], "loop")
    assert r.status == 422 and r.json["error"]["error_type"] == "timeout", r
    assert wmd.invoke(w["id"], "echo").status == 200


def test_concurrency_threads(wmd, lib):
    """`concurrency` threads call Process at once."""
    import threading
    import time
    w = create(wmd, make_package(lib), limits={"concurrency": 4})
    results = []

    def one():
        results.append(wmd.invoke(w["id"], "sleep", ms="500").status)
    t0 = time.monotonic()
    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [200] * 4
    assert time.monotonic() - t0 < 1.5, "the four calls did not overlap"


def test_reload_cycles_leave_the_host_bounded(wmd, lib):
    """200 reloads: the old library is closed each time — the host's
    descriptors, mappings and threads do not grow."""
    import os
    w = create(wmd, make_package(lib), limits={"concurrency": 2})

    def footprint(pid):
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        maps = sum(1 for _ in open(f"/proc/{pid}/maps"))
        threads = len(os.listdir(f"/proc/{pid}/task"))
        return fds, maps, threads

    pkgs = [make_package(lib, library=f"echo{i}") for i in range(2)]
    assert wmd.invoke(w["id"], "echo").status == 200
    pid = wmd.get(f"/v1/workers/{w['id']}").json["pid"]
    before = footprint(pid)
    for i in range(200):
        r = wmd.put(f"/v1/workers/{w['id']}/code",
                    {"code": {"content": b64(pkgs[i % 2])}})
        assert r.status == 200, r
    assert wmd.invoke(w["id"], "echo").status == 200
    assert wmd.get(f"/v1/workers/{w['id']}").json["pid"] == pid
    after = footprint(pid)
    assert after[0] <= before[0] + 1, (before, after)
    assert after[1] <= before[1] + 8, (before, after)
    assert after[2] == before[2], (before, after)


def test_crash_on_a_published_event_is_dead_lettered(wmd, lib):
    """A native crash on a published event: redelivered, then
    dead-lettered with reason crash after 4 deliveries."""
    from wm import Stream, event, publish
    create(wmd, make_package(lib), topic="nt")
    dead = Stream(wmd, "nt-dead")
    assert publish(wmd, "nt", event("crash", id_="boom")).status == 202
    got = dead.wait(1, timeout=30)[0]
    assert got["id"] == "boom"
    assert got["deadletterreason"] == "crash"
    assert got["deliverycount"] == "4"
    dead.close()
