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

import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import pct, rss_kib  # noqa: E402
from wm import Daemon  # noqa: E402


def register(d, n, first=0, clients=1):
    """Creates workers first..first+n-1, stopped, on daemon d, over
    `clients` connections at once; the seconds it took."""
    def create(i):
        d.create(code=f"echo\n# {i}", start=False, name=f"w{i}")

    t0 = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(create, range(first, first + n)))
    return time.monotonic() - t0


def recover(d, n):
    """Restarts daemon d over its store of n workers: (ms from the exec to
    /health Healthy, master RSS KiB then); cross-checks that the n were
    restored and none failed."""
    d.stop()
    d.options["log_level"] = "notice"
    t0 = time.monotonic()
    d.start()
    ready = time.monotonic() - t0
    # Before the listing below, whose JSON of N workers grows the heap.
    rss = rss_kib(d.proc.pid)
    listed = len(d.get("/v1/workers").json["workers"])
    h = d.get("/health").json["checks"]["recovery"]
    assert listed == n and h["recovered"] == n and h["failed"] == 0, \
        (listed, h)
    return ready * 1000, rss


def cold_starts(m, create, invoke):
    """create → first event processed, m times: create() makes a worker
    whose host starts on create and returns its id, invoke(id) answers
    the invoke's status.  ([total ms], [create ms]); every invoke
    cross-checked 200."""
    lat, create_ms = [], []
    for i in range(m):
        t0 = time.monotonic()
        wid = create(i)
        t1 = time.monotonic()
        status = invoke(wid, i)
        t2 = time.monotonic()
        assert status == 200, status
        create_ms.append((t1 - t0) * 1000)
        lat.append((t2 - t0) * 1000)
    return lat, create_ms


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
        created = register(d, n)
        after = rss_kib(d.proc.pid)
        per = (after - base) * 1024 / n
        print(f"workers created: {n} stopped, {created:.1f} s "
              f"({n / created:.0f}/s over the unix socket)")
        print(f"master RSS: {base} KiB empty, {after} KiB with {n} workers"
              f" -> {per:.0f} bytes per worker (target <= 4096)")
        ready_ms, rss_recovered = recover(d, n)
        print(f"recovery of {n} workers: {ready_ms:.0f} ms from exec to "
              "/health Healthy (target <= 2000 ms); all restored, none "
              "failed")
        print(f"master RSS after recovery: {rss_recovered} KiB "
              f"({(rss_recovered - base) * 1024 / n:.0f} bytes per worker "
              "over the empty daemon)")

        # Part 3 on the defaults: every record and blob fsync'ed.
        d.stop()
        d.options.pop("store_fsync")
        d.start()
        lat, create_ms = cold_starts(
            m, lambda i: d.create(code="echo", name=f"hot{i}")["id"],
            lambda wid, i: d.invoke(wid, data={"i": i}).status)
        print(f"create -> first event processed ({m} workers, host spawned "
              f"on create, store_fsync=always): median {statistics.median(lat):.2f} ms, p99 "
              f"{pct(lat, 99):.2f} ms (target median <= 5 ms); of which "
              f"create median {statistics.median(create_ms):.2f} ms")
        d.stop()


if __name__ == "__main__":
    main()
