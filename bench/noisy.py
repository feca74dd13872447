#!/usr/bin/env python3
"""bench/noisy.py — the noisy neighbour (issue 22): tenant B's invoke
latency while tenant A floods publishes to CPU-bound workers.

One daemon (tests/integration/wm.py, as the tests start it).  Tenant A has
--a-workers workers of the test host whose events spin on the CPU
(`spin:<ms>`, tests/testhost); flooders (separate processes, so that the
client's own GIL does not skew B's figures) publish batches to A's topic
as fast as the daemon accepts them (a 503 subscriber_full waits 5 ms).
Tenant B has one echo worker; B invokes it --invokes times one after the
other, first on a quiet daemon, then under A's flood.  The report: B's
p50/p99/max per phase, and how many of A's events were processed.

Figures, not assertions.  --builddir picks the daemon; --testhost the
test host binary (to run an older daemon with this tree's spin events).
The daemon's tenant cgroups (t-<tenant>, cpu weight) are the change this
measures: run it against a build before them for the comparison.
"""

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "bench"))
from common import pct  # noqa: E402
from wm import Daemon, metric  # noqa: E402


def flood(socket, stop, spin_ms, batch):
    """Publishes batches of spin events to tenant a's topic until stop."""
    sys.path.insert(0, str(TOP / "tests" / "integration"))
    from wm import UnixHTTPConnection
    n = 0
    body = json.dumps([{"specversion": "1.0", "id": f"f{os.getpid()}-{i}",
                        "source": "noisy", "type": f"spin:{spin_ms}"}
                       for i in range(batch)]).encode()
    while not stop.is_set():
        conn = UnixHTTPConnection(socket, timeout=30)
        conn.request("POST", "/v1/topics/burn/events?tenant=a", body=body,
                     headers={"Content-Type":
                              "application/cloudevents-batch+json"})
        r = conn.getresponse()
        r.read()
        conn.close()
        if r.status == 202:
            n += batch
        else:
            time.sleep(0.005)
    return n


def invokes(d, wid, count):
    lat = []
    for i in range(count):
        t0 = time.perf_counter()
        r = d.post(f"/v1/workers/{wid}/invoke",
                   {"specversion": "1.0", "id": f"b{i}", "source": "noisy",
                    "type": "echo"})
        lat.append((time.perf_counter() - t0) * 1000)
        assert r.status == 200, r
    return {"n": count, "p50_ms": round(pct(lat, 50), 2),
            "p99_ms": round(pct(lat, 99), 2), "max_ms": round(max(lat), 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--builddir", default=str(TOP / "build"))
    ap.add_argument("--testhost")
    ap.add_argument("--out")
    ap.add_argument("--invokes", type=int, default=300)
    ap.add_argument("--a-workers", type=int, default=4)
    ap.add_argument("--flooders", type=int, default=2)
    ap.add_argument("--spin-ms", type=int, default=20)
    args = ap.parse_args()

    class D(Daemon):
        @property
        def testhost(self):
            return Path(args.testhost) if args.testhost else \
                super().testhost

    tmp = Path(tempfile.mkdtemp(prefix="wm-noisy-"))
    d = D(args.builddir, tmp, options={
        "idle_timeout_s": "0", "journal_fsync": "batch",
        "cgroup_parent": "wmnoisy", "message_timeout_ms": "20000"})
    d.start()
    try:
        for t in ("a", "b"):
            assert d.post("/v1/tenants", {"name": t}).status == 201
        for i in range(args.a_workers):
            d.create(name=f"burner{i}", tenant="a", topic="burn")
        wid = d.create(name="victim", tenant="b", topic="quiet")["id"]
        d.post(f"/v1/workers/{wid}/invoke", {"specversion": "1.0",
               "id": "warm", "source": "noisy", "type": "echo"})
        quiet = invokes(d, wid, args.invokes)
        stop = multiprocessing.Event()
        counts = multiprocessing.Queue()
        procs = [multiprocessing.Process(
            target=lambda: counts.put(flood(str(d.socket), stop,
                                            args.spin_ms, 50)))
            for _ in range(args.flooders)]
        for p in procs:
            p.start()
        time.sleep(2)  # A's backlog and its hosts busy
        loud = invokes(d, wid, args.invokes)
        stop.set()
        published = sum(counts.get(timeout=60) for _ in procs)
        for p in procs:
            p.join()
        processed = metric(d, "workmanager_tenant_events_out_total",
                           tenant="a")
        if not processed:  # a daemon before tenant metering
            text = d.get("/metrics").raw.decode()
            processed = sum(
                float(line.rpartition(" ")[2]) for line in text.splitlines()
                if line.startswith("workmanager_worker_events_processed_"
                                   "total{") and 'tenant="a"' in line)
        report = {
            "daemon": str(d.binary),
            "nproc": os.cpu_count(),
            "a_workers": args.a_workers, "spin_ms": args.spin_ms,
            "flooders": args.flooders,
            "b_quiet": quiet, "b_under_flood": loud,
            "a_published": published, "a_delivered": int(processed),
        }
    finally:
        d.stop()
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "report.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
