#!/usr/bin/python3
"""bench/dotnet.py — the .NET engine's cold starts through the daemon
(issue 10).

Runs a real workmanagerd from a build tree in a temp dir with
wm-host-dotnet as the engine of application/x-dotnet-dll and
text/x-csharp, and measures the cold start of a worker: POST /v1/workers
until its 201, which spans the host's spawn (its confinement steps, as
the daemon's user allows), CoreCLR's start through hostfxr, the bridge's
load, and the worker's load (a nupkg of the .NET test worker, built here
with the installed SDK, offline), or its compilation with the SDK's
Roslyn (a C# source worker).  Each worker is a new host.  Then the
invoke round trip at concurrency 1 through the daemon: bench/http_rtt's
sequential POST /v1/workers/{id}/invoke on one keep-alive connection
(10,000 after 500 of warm-up), and the first second of a new worker
(issue 24: p99.9 <= 5 ms from its first event): a DLL worker created for
it, then FIRST invokes at once, no warm-up (about a second here), three
times, each a new worker and host.

Usage: bench/dotnet.py BUILDDIR [STARTS]   (default 10 of each kind)

Figures only: nothing asserts a time.
"""

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "tests" / "integration"))
from dotnet_lib import build_worker, dotnet_engine, nupkg  # noqa: E402
from wm import Daemon, b64  # noqa: E402

SOURCE = """\
public sealed class Echo : WorkerBase
{
    public Echo() : base("echo.out", "bench") { }
    public override Task<CloudEvent?> ProcessAsync(CloudEvent e) =>
        Task.FromResult<CloudEvent?>(new CloudEvent {
            Type = ResponseType, Source = Source, Data = e.Data,
            DataContentType = e.DataContentType }.WithCorrelationId(e));
}
"""
FIRST = 10000  # about the first second of a new worker
INVOKES = 10000


def cold(d, mime, code, n):
    times = []
    ids = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = d.post("/v1/workers", {"mime_type": mime, "topic": "b",
                                   "code": {"content": b64(code)}})
        times.append((time.perf_counter() - t0) * 1000)
        assert r.status == 201, r
        ids.append(r.json["id"])
    for i in ids[1:]:
        assert d.delete(f"/v1/workers/{i}").status in (200, 204)
    return times, ids[0]


def first_second(builddir, d, pkg, body, i):
    """A new DLL worker's first FIRST invokes, from its first event."""
    r = d.post("/v1/workers", {"mime_type": "application/x-dotnet-dll",
                               "topic": f"first{i}", "name": f"first{i}",
                               "code": {"content": b64(pkg)}})
    assert r.status == 201, r
    wid = r.json["id"]
    t0 = time.monotonic()
    r = subprocess.run([str(builddir / "bench" / "http_rtt"), str(d.socket),
                        "POST", f"/v1/workers/{wid}/invoke", str(body),
                        str(FIRST), "0"],
                       capture_output=True, text=True, check=True)
    took = time.monotonic() - t0
    p50, p99, p999, status = r.stdout.split()
    assert status == "200", r.stdout
    print(f"a new DLL worker's first {FIRST} invokes ({took:.2f} s, no "
          f"warm-up), run {i + 1}: p50 {p50} us, p99 {p99} us, p99.9 "
          f"{p999} us")
    d.delete(f"/v1/workers/{wid}")


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    builddir = Path(argv[1]).resolve()
    n = int(argv[2]) if len(argv) > 2 else 10
    host = builddir / "hosts" / "dotnet" / "wm-host-dotnet"
    with tempfile.TemporaryDirectory() as tmp:
        folder, _ = build_worker(builddir, "echo", Path(tmp) / "echo")
        pkg = nupkg(folder)
        d = Daemon(builddir, Path(tmp) / "d", engines=dotnet_engine(host),
                   options={"log_level": "info"})
        d.start()
        try:
            for what, mime, code in (
                    ("DLL worker (nupkg)", "application/x-dotnet-dll", pkg),
                    ("C# source worker", "text/x-csharp",
                     SOURCE.encode())):
                times, wid = cold(d, mime, code, n)
                print(f"cold start, {what}: {n} creates: p50 "
                      f"{statistics.median(times):.0f} ms, min "
                      f"{min(times):.0f} ms, max {max(times):.0f} ms")
            body = Path(tmp) / "event.json"
            body.write_text(json.dumps({"specversion": "1.0", "id": "i",
                                        "source": "b", "type": "echo",
                                        "data": {"n": 1}}))
            r = subprocess.run([str(builddir / "bench" / "http_rtt"),
                                str(d.socket), "POST",
                                f"/v1/workers/{wid}/invoke", str(body),
                                str(INVOKES)],
                               capture_output=True, text=True, check=True)
            p50, p99, p999, status = r.stdout.split()
            assert status == "200", r.stdout
            print(f"invoke round trip through the daemon (C# source "
                  f"worker), {INVOKES} sequential: p50 {p50} us, p99 "
                  f"{p99} us, p99.9 {p999} us")
            for i in range(3):
                first_second(builddir, d, pkg, body, i)
        finally:
            d.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
