#!/usr/bin/python3
"""bench/master.py — the master core's figures (issue 3).

Runs a real workmanagerd from a build tree (plain ./configure, -O2) in a
temp dir, with the protocol test host as engine, and measures:

  1. master memory per registered (stopped) worker: VmRSS of workmanagerd
     before and after creating N stopped workers, divided by N;
  2. recovery of those N persisted workers: from exec of a fresh daemon to
     its first /health answer of 200 Healthy;
  3. create → first event processed, for a worker whose host starts on
     demand: POST /v1/workers (the host is spawned, handshakes and loads the
     code) then POST .../invoke answered; median and p99 over M workers.

Usage: bench/master.py BUILDDIR [N [M]]        (defaults 10000 and 50)

Figures only: nothing here asserts a time.  Counts are cross-checked (every
worker listed after recovery, every invoke answered 200).
"""

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"
                       / "integration"))
from wm import Daemon, b64  # noqa: E402


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p / 100))]


def main():
    builddir = Path(sys.argv[1]).resolve()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    m = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    with tempfile.TemporaryDirectory(prefix="wm-bench-") as tmp:
        # The store's fsync policy is not what is measured here: "off"
        # keeps N creates from being N disk flushes on a shared machine.
        d = Daemon(builddir, tmp, options={"log_level": "warning",
                                           "store_fsync": "off"})
        d.start()
        base = rss_kib(d.proc.pid)
        t0 = time.monotonic()
        for i in range(n):
            d.create(code=f"echo\n# {i}", start=False, name=f"w{i}")
        created = time.monotonic() - t0
        after = rss_kib(d.proc.pid)
        per = (after - base) * 1024 / n
        print(f"workers created: {n} stopped, {created:.1f} s "
              f"({n / created:.0f}/s over the unix socket)")
        print(f"master RSS: {base} KiB empty, {after} KiB with {n} workers"
              f" -> {per:.0f} bytes per worker (target <= 4096)")
        d.stop()

        d.options["log_level"] = "notice"
        t0 = time.monotonic()
        d.start()
        ready = time.monotonic() - t0
        # Before the listing below, whose JSON of N workers grows the heap.
        rss_recovered = rss_kib(d.proc.pid)
        listed = len(d.get("/v1/workers").json["workers"])
        h = d.get("/health").json["checks"]["recovery"]
        assert listed == n and h["recovered"] == n, (listed, h)
        print(f"recovery of {n} workers: {ready * 1000:.0f} ms from exec to "
              f"/health Healthy (target <= 2000 ms); {h['recovered']} "
              "restored, {0} failed".format(h["failed"]))
        print(f"master RSS after recovery: {rss_recovered} KiB "
              f"({(rss_recovered - base) * 1024 / n:.0f} bytes per worker "
              "over the empty daemon)")

        # Part 3 on the defaults: every record and blob fsync'ed.
        d.stop()
        d.options.pop("store_fsync")
        d.start()
        lat, create_ms = [], []
        for i in range(m):
            t0 = time.monotonic()
            w = d.create(code="echo", name=f"hot{i}")
            t1 = time.monotonic()
            r = d.invoke(w["id"], data={"i": i})
            t2 = time.monotonic()
            assert r.status == 200, r
            create_ms.append((t1 - t0) * 1000)
            lat.append((t2 - t0) * 1000)
        print(f"create -> first event processed ({m} workers, host spawned "
              f"on create, store_fsync=always): median {statistics.median(lat):.2f} ms, p99 "
              f"{pct(lat, 99):.2f} ms (target median <= 5 ms); of which "
              f"create median {statistics.median(create_ms):.2f} ms")
        d.stop()


if __name__ == "__main__":
    main()
