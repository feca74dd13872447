"""The opt-in in-process path of native workers (issue 6, DESIGN §4): a
worker created with "isolation": "in-process" on a daemon whose operator
set allow_in_process_native = true runs inside workmanagerd, on a pool of
`concurrency` threads; a sandboxed wm-host-native still validates its
package and hands back only the library.

The worker is tests/workers/native/echo_worker.cc (the official FlatBuffers
C++ runtime, a schema transcribed from the original's field list); its
behaviour comes from the event's type.
"""

import io
import json
import os
import subprocess
import sys
import threading
import time
import zipfile
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


def engines(builddir, in_process="yes"):
    host = Path(builddir) / "hosts" / "native" / "wm-host-native"
    return {"native.engine": "name = native\n"
                             f"mime_type = {MIME}\n"
                             f"host = {host}\n"
                             "spawn = exec\nprotocol = 1\n"
                             f"in_process = {in_process}\n"}


def daemon(builddir, tmp, allow=True, in_process="yes", **options):
    opts = {"restart_base_delay_ms": 20, "restart_max_delay_ms": 100,
            "shutdown_grace_ms": 1000, "message_timeout_ms": 2000,
            "allow_in_process_native": "true" if allow else "false"}
    opts.update(options)
    return Daemon(builddir, tmp, options=opts,
                  engines=engines(builddir, in_process))


pytestmark = pytest.mark.wmd(make=daemon)


def create(d, package, expect=201, **fields):
    body = {"mime_type": MIME, "topic": "n", "isolation": "in-process",
            "code": {"content": b64(package)}}
    body.update(fields)
    r = d.post("/v1/workers", body)
    assert r.status == expect, r
    return r.json


def package_with(lib, **manifest_changes):
    """make_package(lib) with manifest.json's fields changed."""
    src = zipfile.ZipFile(io.BytesIO(make_package(lib)))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "manifest.json":
                manifest = json.loads(data)
                manifest.update(manifest_changes)
                data = json.dumps(manifest)
            dst.writestr(info, data)
    return buf.getvalue()


def tagged_package(lib, version):
    """A package whose entry point is ProcessV<version>: its echoes carry
    codeversion = version."""
    return package_with(lib, entry_point=f"ProcessV{version}")


def footprint(pid):
    """Descriptors, worker libraries mapped (distinct memfd inodes) and
    threads of pid."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    libs = {line.split()[4] for line in open(f"/proc/{pid}/maps")
            if "/memfd:lib" in line}
    threads = len(os.listdir(f"/proc/{pid}/task"))
    return fds, len(libs), threads


def native_hosts(d):
    """Live wm-host-native children of the daemon (the validators)."""
    out = []
    for task in os.listdir(f"/proc/{d.proc.pid}/task"):
        path = f"/proc/{d.proc.pid}/task/{task}/children"
        for pid in open(path).read().split():
            try:
                if "wm-host-native" in open(f"/proc/{pid}/cmdline").read():
                    out.append(int(pid))
            except OSError:
                pass
    return out


def test_refused_unless_the_operator_allows_it(wm_builddir, tmp_path, lib):
    d = daemon(wm_builddir, tmp_path, allow=False).start()
    try:
        r = d.post("/v1/workers", {
            "mime_type": MIME, "topic": "n", "isolation": "in-process",
            "code": {"content": b64(make_package(lib))}})
        assert r.status == 403 and r.code == "security_rejected", r
        assert "allow_in_process_native = true" in r.json["error"]["message"]
        assert d.get("/v1/workers").json["workers"] == []
        engine = [e for e in d.get("/v1/engines").json["engines"]
                  if e["name"] == "native"][0]
        assert engine["in_process"] is False
    finally:
        assert d.stop() == 0


def test_refused_for_an_engine_without_it(wm_builddir, tmp_path, lib):
    d = daemon(wm_builddir, tmp_path, in_process="no").start()
    try:
        r = d.post("/v1/workers", {
            "mime_type": MIME, "topic": "n", "isolation": "in-process",
            "code": {"content": b64(make_package(lib))}})
        assert r.status == 400 and r.code == "invalid_argument", r
        assert "in_process = yes" in r.json["error"]["message"]
    finally:
        assert d.stop() == 0


def test_runs_inside_the_daemon(wmd, lib):
    """The echo worker answers from the daemon's own pid; the validator
    host is gone once the library is handed back; the API view says so
    with its caveats."""
    engine = [e for e in wmd.get("/v1/engines").json["engines"]
              if e["name"] == "native"][0]
    assert engine["in_process"] is True
    w = create(wmd, make_package(lib), group="g1")
    assert w["isolation"] == "in-process"
    assert w["confinement"] == "none (in-process)"
    assert any("ends the daemon" in c for c in w["caveats"])
    assert any("cannot stop the call" in c for c in w["caveats"])
    r = wmd.invoke(w["id"], "echo", data={"n": 1}, correlationid="c-1")
    assert r.status == 200, r
    out = r.json
    assert out["type"] == "echo.out" and out["data"] == {"n": 1}
    assert out["correlationid"] == "c-1"
    assert out["worker"] == w["id"]
    assert int(out["pid"]) == wmd.proc.pid
    view = wmd.get(f"/v1/workers/{w['id']}").json
    assert view["pid"] == wmd.proc.pid and view["state"] == "running"
    wmd.wait_for(lambda: native_hosts(wmd) == [], what="the validator's exit")
    assert wmd.get("/health").json["hosts"] == 0
    assert "validate the in-process library" in wmd.log()


def test_worker_errors_and_free_result_pairing(wmd, lib):
    w = create(wmd, make_package(lib))
    r = wmd.invoke(w["id"], "error")
    assert r.status == 422 and r.code == "worker_error", r
    assert "asked to fail" in r.json["error"]["message"]
    r = wmd.invoke(w["id"], "fail")
    assert r.status == 422 and "Process returned 7" in \
        r.json["error"]["message"], r
    r = wmd.invoke(w["id"], "garbage")
    assert r.status == 422 and "not a WorkerResponse" in \
        r.json["error"]["message"], r
    assert wmd.invoke(w["id"], "none").status == 204
    counts = wmd.invoke(w["id"], "counts").json["data"]
    assert counts["outputs"] == counts["freed"] >= 2, counts


def test_log_and_gateway(wmd, lib):
    w = create(wmd, make_package(lib))
    assert wmd.invoke(w["id"], "log").status == 200
    wmd.wait_for(lambda: "hello from native" in wmd.log(), what="the log")
    r = wmd.invoke(w["id"], "gateway")
    assert r.status == 200, r
    assert r.json["data"]["value"] == 1, r.json


def test_bad_package_refused_by_the_validator(wmd, lib):
    r = wmd.post("/v1/workers", {
        "mime_type": MIME, "topic": "n", "isolation": "in-process",
        "code": {"content": b64(make_package(lib, abi=2))}})
    assert r.status == 422 and r.code == "load_failed", r
    assert "abi_version 2 is not supported; supported: 1" in \
        r.json["error"]["message"]
    r = wmd.post("/v1/workers", {
        "mime_type": MIME, "topic": "n", "isolation": "in-process",
        "code": {"content": b64(b"not a zip")}})
    assert r.status == 422 and r.code == "load_failed", r
    assert wmd.get("/v1/workers").json["workers"] == []


def test_missing_export_named(wmd, lib):
    pkg = package_with(lib, entry_point="NoSuchProcess")
    r = wmd.post("/v1/workers", {
        "mime_type": MIME, "topic": "n", "isolation": "in-process",
        "code": {"content": b64(pkg)}})
    assert r.status == 422 and r.code == "load_failed", r
    assert "does not export NoSuchProcess" in r.json["error"]["message"]


def test_timeout_reports_and_the_call_goes_on(wmd, lib):
    """A call past its deadline: worker.error timeout, the daemon and the
    worker's other threads carry on; the late result is dropped."""
    w = create(wmd, make_package(lib), limits={"concurrency": 2,
                                               "timeout_ms": 300})
    t0 = time.monotonic()
    r = wmd.invoke(w["id"], "sleep", ms="1500")
    assert r.status == 422 and r.json["error"]["error_type"] == "timeout", r
    assert "cannot be stopped" in r.json["error"]["message"]
    assert time.monotonic() - t0 < 1.4
    err = [e["data"] for e in wmd.lifecycle(w["id"])
           if e["type"].endswith(".error")]
    assert err and err[0]["error_type"] == "timeout", err
    # The other thread answers meanwhile.
    assert wmd.invoke(w["id"], "echo").status == 200
    time.sleep(1.5)  # the stuck call returns; its output is freed unseen
    counts = wmd.invoke(w["id"], "counts").json["data"]
    assert counts["outputs"] == counts["freed"] >= 2, counts
    assert wmd.get("/health").status == 200


def test_concurrency_threads_overlap(wmd, lib):
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


def test_reload_swaps_the_library(wmd, lib):
    w = create(wmd, tagged_package(lib, 1))
    assert wmd.invoke(w["id"], "echo").json["codeversion"] == "1"
    r = wmd.put(f"/v1/workers/{w['id']}/code",
                {"code": {"content": b64(tagged_package(lib, 2))}})
    assert r.status == 200 and r.json["version"] == 2, r
    assert wmd.invoke(w["id"], "echo").json["codeversion"] == "2"
    # A reload the validator refuses keeps the running version.
    r = wmd.put(f"/v1/workers/{w['id']}/code",
                {"code": {"content": b64(make_package(lib, abi=9))}})
    assert r.status == 422 and r.code == "load_failed", r
    out = wmd.invoke(w["id"], "echo")
    assert out.status == 200 and out.json["codeversion"] == "2", out


def test_identity_variables_restored_on_unload(wmd, lib):
    """The identity variables are process-wide: a second in-process worker
    overrides them, and deleting it restores the first one's."""
    a = create(wmd, make_package(lib))
    assert wmd.invoke(a["id"], "echo").json["worker"] == a["id"]
    b = create(wmd, make_package(lib, library="echo2"), topic="m")
    assert wmd.invoke(b["id"], "echo").json["worker"] == b["id"]
    assert wmd.invoke(a["id"], "echo").json["worker"] == b["id"]
    assert wmd.delete(f"/v1/workers/{b['id']}").status in (200, 204)
    assert wmd.invoke(a["id"], "echo").json["worker"] == a["id"]


# A worker in plain C that answers nothing: unlike the C++ echo worker,
# whose GNU unique symbols pin the first copy loaded in a process for good,
# dlclose() really unloads it.
SILENT_WORKER = r"""
#include <stdint.h>
int32_t Process(const void *host, const uint8_t *in, int32_t len,
                uint8_t **out, int32_t *out_len)
{
    (void)host; (void)in; (void)len;
    *out = 0;
    *out_len = 0;
    return 0;
}
void FreeResult(uint8_t *buf) { (void)buf; }
"""


@pytest.fixture
def silent_lib(tmp_path):
    src = tmp_path / "silent.c"
    src.write_text(SILENT_WORKER)
    out = tmp_path / "libsilent.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(src)],
                   check=True)
    return out


def test_stop_and_delete_close_the_library(wmd, silent_lib):
    w = create(wmd, make_package(silent_lib, library="silentstop"))

    def mapped():
        return "libsilentstop.so" in open(f"/proc/{wmd.proc.pid}/maps").read()
    assert wmd.invoke(w["id"], "echo").status == 204
    assert mapped()
    r = wmd.post(f"/v1/workers/{w['id']}/stop")
    assert r.status == 200, r
    wmd.wait_for(lambda: wmd.get(f"/v1/workers/{w['id']}").json["state"]
                 == "stopped", what="stopped")
    assert wmd.get(f"/v1/workers/{w['id']}").json["pid"] is None
    assert not mapped()
    assert wmd.post(f"/v1/workers/{w['id']}/start").status == 200
    assert wmd.invoke(w["id"], "echo").status == 204
    assert mapped()
    assert wmd.delete(f"/v1/workers/{w['id']}").status in (200, 204)
    wmd.wait_for(lambda: not mapped(), what="the library unmapped")


def test_reload_cycles_leave_the_daemon_bounded(wmd, lib):
    """200 reloads in process: the daemon's descriptors, libraries and
    threads do not grow: each old library and its threads go (but the
    first copy of this C++ worker, which its GNU unique symbols pin)."""
    w = create(wmd, make_package(lib), limits={"concurrency": 2})
    pkgs = [make_package(lib, library=f"echo{i}") for i in range(2)]
    assert wmd.invoke(w["id"], "echo").status == 200
    before = footprint(wmd.proc.pid)
    for i in range(200):
        r = wmd.put(f"/v1/workers/{w['id']}/code",
                    {"code": {"content": b64(pkgs[i % 2])}})
        assert r.status == 200, r
    assert wmd.invoke(w["id"], "echo").status == 200
    wmd.wait_for(lambda: native_hosts(wmd) == [], what="validators gone")
    after = footprint(wmd.proc.pid)
    assert after[0] <= before[0] + 2, (before, after)
    assert before[1] == 1 and after[1] <= 2, (before, after)
    assert after[2] <= before[2], (before, after)


def test_recovery_and_the_operator_switch(wm_builddir, tmp_path, lib):
    """A persisted in-process worker comes back in process after a restart;
    with allow_in_process_native turned off it fails naming the key."""
    d = daemon(wm_builddir, tmp_path).start()
    w = create(d, make_package(lib))
    assert d.stop() == 0
    d = daemon(wm_builddir, tmp_path).start()
    try:
        out = d.invoke(w["id"], "echo")
        assert out.status == 200 and int(out.json["pid"]) == d.proc.pid, out
    finally:
        assert d.stop() == 0
    d = daemon(wm_builddir, tmp_path, allow=False).start()
    try:
        # Issue 27: recovery itself finds that the worker cannot run here,
        # and says so and what to do.
        rec = d.get("/health").json["checks"]["recovery"]
        assert rec["failed"] == 1 and rec["recovered"] == 0, rec
        view = d.get(f"/v1/workers/{w['id']}").json
        assert view["state"] == "failed", view
        assert "allow_in_process_native = true" in view["error"], view
        assert "recovery: 0 workers restored, 1 failed" in d.log()
        r = d.invoke(w["id"], "echo")
        assert r.status == 422, r
        assert "allow_in_process_native" in r.json["error"]["message"]
    finally:
        assert d.stop() == 0


def test_a_crash_ends_the_daemon(wm_builddir, tmp_path, lib):
    """The documented caveat, as it is: a worker that faults in process
    takes the daemon with it (the reason it is opt-in)."""
    d = daemon(wm_builddir, tmp_path).start()
    w = create(d, make_package(lib))
    try:
        d.invoke(w["id"], "crash")
    except OSError:
        pass  # the connection died with the daemon
    assert d.proc.wait(timeout=20) != 0
    assert d.get  # the daemon is gone: nothing more to stop
