"""The .NET engine on a real workmanagerd (issue 10): wm-host-dotnet
hosting CoreCLR, a nupkg worker built here with the installed SDK in a
collectible load context, the DevKit shared; errors, crashes, deadlines
and reloads.  The worker's behaviour comes from the event's type: see
tests/workers/dotnet/echo/EchoWorker.cs.
"""

import json
import subprocess
import uuid

import pytest

from dotnet_lib import (MIME, build_worker, daemon, dotnet_engine,
                        need_dotnet, nupkg)
from wm import Daemon, b64


@pytest.fixture(scope="module")
def echo_pkg(wm_builddir, tmp_path_factory):
    need_dotnet(wm_builddir)
    folder, _ = build_worker(wm_builddir, "echo",
                             tmp_path_factory.mktemp("echo"))
    return nupkg(folder)


pytestmark = pytest.mark.wmd(
    make=daemon, restart_base_delay_ms=20, restart_max_delay_ms=100,
    shutdown_grace_ms=1000, message_timeout_ms=4000)


def create(d, package, expect=201, **fields):
    body = {"mime_type": MIME, "topic": "n",
            "code": {"content": b64(package)}}
    body.update(fields)
    r = d.post("/v1/workers", body)
    assert r.status == expect, (r, d.log()[-3000:])
    return r.json


def test_echo_with_correlation_id(wmd, echo_pkg):
    """Spec: DLL worker execution; Response with correlation ID."""
    w = create(wmd, echo_pkg)
    r = wmd.invoke(w["id"], "echo", data={"n": 1}, correlationid="c-1")
    assert r.status == 200, (r, wmd.log()[-3000:])
    out = r.json
    assert out["type"] == "echo.out" and out["source"] == "dotnet/echo"
    assert out["data"] == {"n": 1}
    assert out["correlationid"] == "c-1"
    assert out["version"] == "v1"
    # The DevKit's own id: a version 4 UUID (CloudEvent.NewId), new each
    # time.
    ids = {out["id"]} | {wmd.invoke(w["id"], "echo").json["id"]
                         for _ in range(3)}
    assert len(ids) == 4, ids
    for i in ids:
        u = uuid.UUID(i)
        assert str(u) == i and u.version == 4 and \
            u.variant == uuid.RFC_4122, i


def test_no_correlation_id_without_one(wmd, echo_pkg):
    """Spec: Input without correlation ID."""
    w = create(wmd, echo_pkg)
    r = wmd.invoke(w["id"], "echo", data={"n": 2})
    assert r.status == 200, r
    assert "correlationid" not in r.json
    assert wmd.invoke(w["id"], "none").status == 204


def test_per_worker_collectible_context(wmd, echo_pkg):
    """Spec: Per-worker AssemblyLoadContext; DevKit resolution."""
    w = create(wmd, echo_pkg)
    r = wmd.invoke(w["id"], "context")
    assert r.status == 200, r
    assert r.json["data"] == {"context": "worker", "collectible": True,
                              "devkit_shared": True}


def test_exception_is_a_worker_error(wmd, echo_pkg):
    w = create(wmd, echo_pkg)
    r = wmd.invoke(w["id"], "throw")
    assert r.status == 422 and r.code == "worker_error", r
    assert "asked to throw" in r.json["error"]["message"]
    assert wmd.invoke(w["id"], "echo").status == 200
    assert wmd.get(f"/v1/workers/{w['id']}").json["restarts"] == 0


def test_gateway_through_api_client(wmd, echo_pkg):
    """ApiClient.InvokeAsync and the dynamic Gateway reach the master's
    workmanager.state service through GatewayCall frames."""
    w = create(wmd, echo_pkg)
    r = wmd.invoke(w["id"], "gateway")
    assert r.status == 200, r
    assert r.json["data"] == {"value": 42}


def test_blocking_gateway_calls_answered(wmd, echo_pkg):
    """A worker of concurrency 1 runs on the host's loop thread, the one
    that reads the GatewayReply (hosts/dotnet/host.c): blocking on a call
    there (.Result), or on one made from the pool meanwhile, is answered,
    not deadlocked until the deadline."""
    w = create(wmd, echo_pkg)
    for _ in range(3):
        r = wmd.invoke(w["id"], "gateway_sync")
        assert r.status == 200, r
        assert r.json["data"] == {"value": 42, "again": 41}
    assert wmd.invoke(w["id"], "gateway").json["data"] == {"value": 42}


def test_blocking_on_its_own_yield_answered(wmd, echo_pkg):
    """A worker blocking the loop thread on a continuation it posted there
    (Task.Yield() in a method, then .Result) is answered within a
    watchdog's tick or two (bridge/Entry.cs, LoopContext), not killed at
    its deadline (4 s here)."""
    import time
    w = create(wmd, echo_pkg)
    for _ in range(3):
        t0 = time.monotonic()
        r = wmd.invoke(w["id"], "yield_block")
        assert r.status == 200, r
        assert r.json["data"] == {"got": 7}
        assert time.monotonic() - t0 < 2, time.monotonic() - t0
    assert wmd.invoke(w["id"], "echo").status == 200


def test_many_big_outputs_at_once(wmd, echo_pkg):
    """Concurrency 1 runs the events queued in the host back to back on its
    loop thread, with no turn of the event loop to write their Results
    between them: 48 outputs of 400 KiB at once (19 MiB, over the
    channel's 8 MiB queue) are all answered, the host kept
    (HOST_FLUSH_AT in hosts/dotnet/host.c)."""
    import threading
    w = create(wmd, echo_pkg)
    big = "x" * (400 << 10)
    results = []

    def one():
        results.append(wmd.invoke(w["id"], "sync", data={"s": big}))
    threads = [threading.Thread(target=one) for _ in range(48)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = [r for r in results if r.status != 200]
    assert not bad, (bad[:2], wmd.log()[-3000:])
    assert all(r.json["data"] == {"s": big} for r in results)
    assert wmd.get(f"/v1/workers/{w['id']}").json["restarts"] == 0


@pytest.mark.parametrize("concurrency", [1, 3])
def test_where_events_run(wmd, echo_pkg, concurrency):
    """Concurrency 1: every event on the host's loop thread, under the
    bridge's LoopContext, a Task.Yield() included (no hop to the pool and
    back); above 1, on the pool, no context."""
    w = create(wmd, echo_pkg, limits={"concurrency": concurrency})
    # A first event JIT-compiles the paths: on a loaded machine its run on
    # the loop thread can outlast the LoopContext watchdog's ticks, which
    # then hand its continuation to the pool by design (Entry.cs, Watch).
    assert wmd.invoke(w["id"], "thread").status == 200
    seen = set()
    for _ in range(5):
        r = wmd.invoke(w["id"], "thread")
        assert r.status == 200, r
        d = r.json["data"]
        seen |= {d["before"], d["after"]}
        want = "LoopContext" if concurrency == 1 else None
        assert d["context"] == want, d
    if concurrency == 1:
        assert len(seen) == 1, seen


def test_failfast_restarts_the_host(wmd, echo_pkg):
    """Environment.FailFast ends the host, not the master; the host is
    restarted and serves again."""
    w = create(wmd, echo_pkg)
    r = wmd.invoke(w["id"], "failfast")
    assert r.status == 422 and r.json["error"]["error_type"] == "crash", r
    wmd.wait_for(lambda: wmd.get(f"/v1/workers/{w['id']}").json[
        "restarts"] >= 1, what="a restart")
    assert wmd.invoke(w["id"], "echo").status == 200
    assert wmd.get("/health").status == 200


def test_stack_overflow_restarts_the_host(wmd, echo_pkg):
    w = create(wmd, echo_pkg)
    r = wmd.invoke(w["id"], "overflow")
    assert r.status == 422 and r.json["error"]["error_type"] == "crash", r
    wmd.wait_for(lambda: wmd.get(f"/v1/workers/{w['id']}").json[
        "restarts"] >= 1, what="a restart")
    assert wmd.invoke(w["id"], "echo").status == 200


def test_infinite_loop_killed_at_the_deadline(wmd, echo_pkg):
    """message_timeout_ms 4000 here: the loop is killed, reason timeout."""
    w = create(wmd, echo_pkg)
    r = wmd.invoke(w["id"], "loop")
    assert r.status == 422 and r.json["error"]["error_type"] == "timeout", r
    assert wmd.invoke(w["id"], "echo").status == 200


@pytest.mark.parametrize("concurrency", [1, 3])
def test_concurrency_limit(wmd, echo_pkg, concurrency):
    """limits.concurrency: at most that many events inside the worker at
    once (the rest wait without a thread)."""
    import threading
    w = create(wmd, echo_pkg, limits={"concurrency": concurrency})
    results = []

    def one():
        results.append(wmd.invoke(w["id"], "busy"))
    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.status == 200 for r in results), results
    most = max(r.json["data"]["most"] for r in results)
    if concurrency == 1:
        assert most == 1, most
    else:
        assert 2 <= most <= concurrency, most


def test_confined(wmd, echo_pkg):
    """The dotnet role (sandbox/role_dotnet.c) under the daemon's
    confinement: the host reports the level the machine offers; a worker
    cannot start a process, write outside its /tmp, read /etc/passwd or
    reach the network, and each attempt is an exception, not a dead
    host."""
    import os
    w = create(wmd, echo_pkg)
    view = wmd.get(f"/v1/workers/{w['id']}").json
    offered = wmd.get("/health").json["sandbox"]["level"]
    if "WM_SANDBOX_DEBUG" not in os.environ:
        assert view["confinement"] == offered, (view, offered)
    r = wmd.invoke(w["id"], "escape")
    assert r.status == 200, r
    got = r.json["data"]
    assert all(v != "ok" for v in got.values()), got
    assert wmd.get(f"/v1/workers/{w['id']}").json["restarts"] == 0
    if os.geteuid() == 0 and os.environ.get("SANDBOX_MUST_WORK") == "1":
        assert offered == "full", offered


def test_heap_limit_from_memory_mb(wmd, echo_pkg):
    """GCHeapHardLimit: three quarters of memory_mb."""
    w = create(wmd, echo_pkg, limits={"memory_mb": 256})
    r = wmd.invoke(w["id"], "heap")
    assert r.status == 200, r
    assert r.json["data"]["limit"] == 192 << 20


@pytest.mark.parametrize("entries,want", [
    ({"lib/netstandard1.0/A.dll": b"x"},
     "no lib/ folder of the package suits .NET"),
    ({"readme.txt": b"x"}, "the package has no lib/<tfm>/ folder"),
    ({"lib/net8.0/Bad.dll": b"not an assembly"}, "is not a .NET assembly"),
], ids=["no-suitable-tfm", "no-lib", "not-an-assembly"])
def test_bad_packages_refused(wmd, entries, want):
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    r = wmd.post("/v1/workers", {"mime_type": MIME, "topic": "n",
                                 "code": {"content": b64(buf.getvalue())}})
    assert r.code == "load_failed", r
    assert want in r.json["error"]["message"], r


def test_not_a_zip_refused(wmd):
    r = wmd.post("/v1/workers", {"mime_type": MIME, "topic": "n",
                                 "code": {"content": b64(b"garbage")}})
    assert r.code == "load_failed", r
    assert "not a nupkg (zip)" in r.json["error"]["message"], r


def test_two_workers_in_one_package_listed(wm_builddir, wmd, echo_pkg,
                                           tmp_path):
    """Exactly one public non-abstract IWorker, else a load error listing
    the candidates."""
    folder, _ = build_worker(wm_builddir, "echo", tmp_path / "two", replace={
        "namespace Samples;": "namespace Samples;\n\npublic sealed class "
        "Second : EchoWorker { }\n",
        "public sealed class EchoWorker": "public class EchoWorker"})
    r = wmd.post("/v1/workers", {"mime_type": MIME, "topic": "n",
                                 "code": {"content": b64(nupkg(folder))}})
    assert r.code == "load_failed", r
    assert ("more than one public class implements Virtufin.Worker.IWorker: "
            "Samples.EchoWorker, Samples.Second") in \
        r.json["error"]["message"], r


def test_tfm_rule(wmd, echo_pkg, tmp_path):
    """The highest netN.M not above the runtime wins over netstandard and
    over a later framework."""
    import io
    import zipfile
    src = zipfile.ZipFile(io.BytesIO(echo_pkg))
    dll = src.read("lib/net8.0/EchoWorker.dll")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("lib/net8.0/EchoWorker.dll", dll)
        z.writestr("lib/net5.0/EchoWorker.dll", b"lower: not taken")
        z.writestr("lib/net99.0/EchoWorker.dll", b"not for this runtime")
        z.writestr("lib/netstandard2.0/EchoWorker.dll", b"nor this")
    w = create(wmd, buf.getvalue())
    assert wmd.invoke(w["id"], "echo").status == 200


def test_reloads_collect_the_old_contexts(wm_builddir, wmd, tmp_path):
    """200 reloads in one host: each swaps the collectible context; the
    host's memory stays bounded and the old contexts are collected."""
    pkgs = []
    for v in ("v2", "v3"):
        folder, _ = build_worker(wm_builddir, "echo", tmp_path / v,
                                 replace={'Version = "v1"':
                                          f'Version = "{v}"'})
        pkgs.append((v, nupkg(folder)))
    w = create(wmd, pkgs[0][1])
    pid = wmd.get(f"/v1/workers/{w['id']}").json["pid"]

    def rss():
        with open(f"/proc/{host_pid(pid)}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])

    first = None
    for i in range(200):
        v, pkg = pkgs[i % 2]
        r = wmd.put(f"/v1/workers/{w['id']}/code",
                    {"code": {"content": b64(pkg)}})
        assert r.status == 200, r
        out = wmd.invoke(w["id"], "echo")
        assert out.status == 200 and out.json["version"] == v, out
        if i == 19:
            # After a full collection, as at the end.
            assert wmd.invoke(w["id"], "contexts").status == 200
            first = rss()
    assert wmd.get(f"/v1/workers/{w['id']}").json["pid"] == pid
    r = wmd.invoke(w["id"], "contexts")
    assert r.status == 200, r
    # Unloaded contexts still alive after a full collection: a few at
    # most (the last ones), not 200.
    last = rss()
    assert r.json["data"]["unloading"] <= 8, (r.json, first, last)
    # RSS in KiB: 180 reloads may not grow the host by 64 MiB.
    assert last < first + 64 * 1024, (r.json, first, last)


def host_pid(pid):
    """The host under the pid the API reports (its init, with a pid
    namespace): the child whose comm is wm-host-dotnet, else pid."""
    import os
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
    except FileNotFoundError:
        return pid
    for k in kids:
        try:
            with open(f"/proc/{k}/comm") as f:
                if f.read().strip().startswith("wm-host-dotnet"):
                    return int(k)
        except FileNotFoundError:
            pass
    return pid


def test_runtimeconfig_rolls_forward(wm_builddir):
    """Spec: Roll-forward to a newer runtime: the host's runtimeconfig
    declares "rollForward": "Major"."""
    host = need_dotnet(wm_builddir)
    out = subprocess.run([str(host), "--runtimeconfig"], capture_output=True,
                         text=True, check=True).stdout
    cfg = json.loads(out)["runtimeOptions"]
    assert cfg["rollForward"] == "Major"
    assert cfg["framework"]["name"] == "Microsoft.NETCore.App"


def test_missing_runtime_makes_the_engine_unavailable(wm_builddir,
                                                      tmp_path):
    """Spec: Runtime discovery on target: where the probe finds no
    libhostfxr, GET /v1/engines lists the engine unavailable and a create
    fails naming the runtime and the places searched."""
    host = need_dotnet(wm_builddir)
    text = dotnet_engine(host)["dotnet.engine"] + (
        "probe = libhostfxr.so\nprobe_what = the .NET runtime\n"
        f"probe_path = {tmp_path}/none/host/fxr/[0-9]*\n"
        f"probe_path = {tmp_path}/also-none/host/fxr/[0-9]*\n")
    d = Daemon(wm_builddir, tmp_path / "d", engines={"dotnet.engine": text})
    d.start()
    try:
        engines = {e["name"]: e for e in d.get("/v1/engines").json["engines"]}
        assert engines["dotnet"]["available"] is False, engines
        r = d.post("/v1/workers", {"mime_type": MIME, "topic": "n",
                                   "code": {"content": b64(b"x")}})
        assert r.status >= 400, r
        msg = json.dumps(r.json)
        assert "the .NET runtime" in msg and "also-none" in msg, msg
    finally:
        assert d.stop() == 0, d.log()


def test_bare_assembly_is_a_worker(wm_builddir, wmd, tmp_path):
    """Issue 27: the .dll `dotnet build` leaves, sent as it is, loads and
    runs; a native library sent as one is refused saying what it is."""
    folder, _ = build_worker(wm_builddir, "echo", tmp_path / "bare")
    [dll] = [p for p in folder.glob("*.dll")
             if p.name != "Virtufin.Worker.DevKit.dll"]
    w = create(wmd, dll.read_bytes())
    r = wmd.invoke(w["id"], "echo", data={"n": 7})
    assert r.status == 200, (r, wmd.log()[-3000:])
    assert r.json["data"] == {"n": 7} and r.json["type"] == "echo.out"
    so = (wm_builddir / "tests" / "workers" / "native" /
          "libecho.so").read_bytes()
    r = wmd.post("/v1/workers", {"mime_type": MIME, "topic": "n",
                                 "code": {"content": b64(b"MZ" + so[2:])}})
    assert r.code == "load_failed", r
    assert "not a .NET assembly" in r.json["error"]["message"], r


def test_wmctl_sends_a_nupkg_shaped_zip_to_dotnet(wm_builddir, wmd, echo_pkg,
                                                   tmp_path):
    """Issue 27: `wmctl create X.zip` of a zip laid out as a nupkg
    (lib/<tfm>/*.dll) creates a .NET worker, not a native one."""
    pkg = tmp_path / "Echo.zip"
    pkg.write_bytes(echo_pkg)
    r = subprocess.run([str(wm_builddir / "cli" / "wmctl"), "--socket",
                        str(wmd.socket), "--json", "create", str(pkg),
                        "--topic", "z"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    w = json.loads(r.stdout)
    assert wmd.get(f"/v1/workers/{w['id']}").json["mime_type"] == MIME
    assert wmd.invoke(w["id"], "echo", data=1).status == 200
