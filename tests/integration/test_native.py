"""Native workers on a real workmanagerd (issue 6): wm-host-native loading
packages built here from tests/workers/native (a worker built with the
official FlatBuffers C++ runtime from a schema transcribed from the
original's field list), processing events through the ABI, and refusing
bad packages with the host's message.

The worker's behaviour comes from the event's type (echo, error, fail,
garbage, none, crash, abort, overflow, loop, log, gateway, sleep, counts):
see tests/workers/native/echo_worker.cc.
"""

import io
import json
import re
import signal
import sys
import threading
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from wm import Daemon, Stream, b64, event, metric, publish

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


def native_daemon(builddir, tmp_path, **options):
    """A daemon with the build's native engine and those options."""
    return Daemon(builddir, tmp_path, options=options,
                  engines=native_engine(builddir))


pytestmark = pytest.mark.wmd(
    make=native_daemon, restart_base_delay_ms=20,
    restart_max_delay_ms=100, shutdown_grace_ms=1000,
    message_timeout_ms=2000)


def tagged_package(lib, version):
    """make_package(lib) whose manifest names ProcessV<version> as the
    entry point: the worker's echoes then carry codeversion = version."""
    src = zipfile.ZipFile(io.BytesIO(make_package(lib)))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "manifest.json":
                manifest = json.loads(data)
                manifest["entry_point"] = f"ProcessV{version}"
                data = json.dumps(manifest)
            dst.writestr(info, data)
    return buf.getvalue()


def create(d, package, expect=201, **fields):
    body = {"mime_type": MIME, "topic": "n",
            "code": {"content": b64(package)}}
    body.update(fields)
    r = d.post("/v1/workers", body)
    assert r.status == expect, r
    return r.json


def own_pid(pid):
    """The pid host pid sees for itself (getpid()): the last of its NSpid,
    2 in the pid namespace of its own a root daemon gives it."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return pid


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
    assert int(out["pid"]) == own_pid(
        wmd.get(f"/v1/workers/{w['id']}").json["pid"])


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


def dead_lettered_after_crashes(wmd, topic, type_, id_):
    """Publishes one event of type_ (which kills the host) to topic and
    checks that it reaches <topic>-dead with reason crash after 4
    deliveries."""
    dead = Stream(wmd, f"{topic}-dead")
    try:
        assert publish(wmd, topic, event(type_, id_=id_)).status == 202
        got = dead.wait(1, timeout=30)[0]
    finally:
        dead.close()
    assert got["id"] == id_
    assert got["deadletterreason"] == "crash"
    assert got["deliverycount"] == "4"


def test_crash_on_a_published_event_is_dead_lettered(wmd, lib):
    """A native crash on a published event: redelivered, then
    dead-lettered with reason crash after 4 deliveries."""
    create(wmd, make_package(lib), topic="nt")
    dead_lettered_after_crashes(wmd, "nt", "crash", "boom")


def test_stack_overflow_leaves_the_master_unaffected(wmd, lib):
    """A stack overflow in Process (unbounded recursion on a pool thread)
    is a crash like SIGSEGV: the master and its other workers go on, the
    invoke fails with worker_error naming the signal, the host restarts
    with backoff, and a published event is redelivered, then dead-lettered
    with reason crash after 4 deliveries."""
    other = create(wmd, make_package(lib), topic="other")
    w = create(wmd, make_package(lib), topic="so", limits={"concurrency": 2})
    r = wmd.invoke(w["id"], "overflow")
    assert r.status == 422 and r.code == "worker_error", r
    assert r.json["error"]["error_type"] == "crash", r
    assert "SIGSEGV" in r.json["error"]["message"], r
    wmd.wait_for(lambda: wmd.get(f"/v1/workers/{w['id']}").json[
        "restarts"] >= 1, what="a restart")
    last = wmd.get(f"/v1/workers/{w['id']}").json["last_exit"]
    assert last["reason"] == "crash" and last["signal"] == signal.SIGSEGV
    err = [e["data"] for e in wmd.lifecycle(w["id"])
           if e["type"].endswith(".error")]
    assert err and err[0]["error_type"] == "crash", err
    assert err[0]["signal"] == signal.SIGSEGV, err
    # The master is unaffected: healthy, its other worker answers, and
    # the crashed one serves again after its restart.
    assert wmd.proc.poll() is None
    assert wmd.get("/health").status == 200
    assert wmd.invoke(other["id"], "echo").status == 200
    assert wmd.invoke(w["id"], "echo").status == 200

    # Published: each delivery kills the host; the restarts' delays double
    # from restart_base_delay_ms (20) up to restart_max_delay_ms (100).
    dead_lettered_after_crashes(wmd, "so", "overflow", "deep")
    wmd.wait_for(lambda: wmd.get(f"/v1/workers/{w['id']}").json[
        "restarts"] >= 5, what="the fifth restart")
    delays = [int(m) for m in re.findall(
        rf"worker {w['id']}: host restart in (\d+) ms", wmd.log())]
    assert delays == [20, 40, 80, 100, 100], delays
    assert metric(wmd, "workmanager_worker_events_dead_lettered_total",
                  worker=w["id"]) == 1
    assert wmd.invoke(other["id"], "echo").status == 200
    assert wmd.invoke(w["id"], "echo").status == 200
    assert wmd.get("/health").status == 200


RELOADS = 5


def reload_under_load(wmd, lib, n=2000, reloads=RELOADS, batch=10):
    """Publishes about n events to a worker of concurrency 4 while its
    code is reloaded `reloads` times; version v's package runs ProcessV<v>,
    whose outputs say codeversion v.  Segment s of the events is published
    while reload s runs (s = 1 .. reloads), segment s + 1 only after reload
    s answered, so that every reload has events published after its
    answer.  Returns the worker's id, its host's pid before the reloads,
    floor (event id -> the last version answered before its publish began)
    and the outputs (the SSE stream of rl.out, in arrival order) once all
    are in and acked."""
    segments = reloads + 2
    per_segment = n // segments // batch * batch
    n = per_segment * segments
    w = create(wmd, tagged_package(lib, 1), topic="rl",
               limits={"concurrency": 4})
    wid = w["id"]
    pid = wmd.get(f"/v1/workers/{wid}").json["pid"]
    out = Stream(wmd, "rl.out")
    state = threading.Condition()
    answered = [1]   # the version of the last answered reload
    triggered = [0]  # reloads the publisher asked for
    floor = {}
    failures = []

    def publisher():
        try:
            for s in range(segments):
                with state:
                    if 1 <= s <= reloads:
                        triggered[0] = s
                        state.notify_all()
                    while s >= 2 and answered[0] < s and not failures:
                        state.wait(60)
                    if s >= 2 and answered[0] < s:
                        return
                for b in range(0, per_segment, batch):
                    ids = [f"rl-{s}-{b + i}" for i in range(batch)]
                    with state:
                        v = answered[0]
                    r = publish(wmd, "rl", [event("rl", id_=i) for i in ids])
                    if r.status != 202:
                        failures.append(f"publish: {r}")
                        return
                    for i in ids:
                        floor[i] = v
        except Exception as e:  # reported by the test's thread
            failures.append(repr(e))
        finally:
            with state:
                triggered[0] = reloads + 1
                state.notify_all()

    t = threading.Thread(target=publisher)
    t.start()
    try:
        for k in range(1, reloads + 1):
            with state:
                while triggered[0] < k:
                    state.wait(60)
            assert not failures, failures
            r = wmd.put(f"/v1/workers/{wid}/code",
                        {"code": {"content": b64(tagged_package(lib, k + 1))}})
            assert r.status == 200 and r.json["version"] == k + 1, r
            with state:
                answered[0] = k + 1
                state.notify_all()
    except BaseException:
        with state:
            failures.append("the reloads failed")
            state.notify_all()
        raise
    finally:
        t.join(120)
    assert not t.is_alive() and not failures, failures
    assert len(floor) == n
    out.wait(n, timeout=60, what="the outputs")
    wmd.wait_for(lambda: metric(wmd, "workmanager_events_pending") == 0 and
                 metric(wmd, "workmanager_worker_events_processed_total",
                        worker=wid) >= n, timeout=60, what="everything acked")
    got = list(out.events())
    out.close()
    return wid, pid, floor, got


def test_reload_under_load_loses_and_duplicates_nothing(wmd, lib):
    """Hot reload under load (DESIGN §7): every event is processed exactly
    once; an event published after a reload's answer is processed by that
    version or a later one; outputs never go back to an older version;
    /metrics agrees."""
    wid, pid, floor, got = reload_under_load(wmd, lib)
    n = len(floor)
    # Exactly once: no loss, no duplicate.
    ids = Counter(e["id"] for e in got)
    assert set(ids) == set(floor), set(floor) ^ set(ids)
    dups = {i: c for i, c in ids.items() if c != 1}
    assert not dups, dups
    assert len(got) == n
    # Which code processed what.
    versions = [int(e["codeversion"]) for e in got]
    assert set(versions) <= set(range(1, RELOADS + 2)), Counter(versions)
    late = [(e["id"], e["codeversion"], floor[e["id"]]) for e in got
            if int(e["codeversion"]) < floor[e["id"]]]
    assert not late, f"processed by an older version than answered: {late}"
    backwards = [(a, b) for a, b in zip(versions, versions[1:]) if b < a]
    assert not backwards, f"an output of old code after new code: {backwards}"
    assert versions[-1] == RELOADS + 1
    assert all(e["worker"] == wid for e in got)
    # /metrics agrees: each event succeeded once and its output was
    # published once; a delivery that failed was redelivered (none should
    # fail: test_reload_under_load_stays_in_the_host); nothing was
    # dead-lettered and no stream dropped an output.
    processed = metric(wmd, "workmanager_worker_events_processed_total",
                       worker=wid)
    failed = metric(wmd, "workmanager_worker_events_failed_total", worker=wid)
    assert processed - failed == n, (processed, failed)
    assert metric(wmd, "workmanager_worker_events_redelivered_total",
                  worker=wid) == failed
    assert metric(wmd, "workmanager_worker_events_published_total",
                  worker=wid) == n
    assert metric(wmd, "workmanager_worker_events_dead_lettered_total",
                  worker=wid) == 0
    assert metric(wmd, "workmanager_events_acked_total") == n
    assert metric(wmd, "workmanager_event_streams_dropped_total") == 0
    assert wmd.get(f"/v1/workers/{wid}").json["version"] == RELOADS + 1
    assert wmd.lifecycle_names(wid).count("reloaded") == RELOADS


def test_reload_under_load_stays_in_the_host(wmd, lib):
    """A reload under load swaps the library in the running host, as an
    idle one does (test_reload_swaps_the_library): one pid throughout, no
    failed load, no failed delivery."""
    wid, pid, floor, got = reload_under_load(wmd, lib)
    assert "reload of version" not in wmd.log()
    assert {int(e["pid"]) for e in got} == {own_pid(pid)}
    assert wmd.get(f"/v1/workers/{wid}").json["pid"] == pid
    assert metric(wmd, "workmanager_worker_events_failed_total",
                  worker=wid) == 0
    assert metric(wmd, "workmanager_worker_events_processed_total",
                  worker=wid) == len(floor)
