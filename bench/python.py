#!/usr/bin/python3
"""bench/python.py — the Python engine's start figures (issue 8).

Runs a real workmanagerd from a build tree (plain ./configure, -O2) as
root, in a temp dir, with the tree's Python engine, hosts fully confined
(their own user, namespaces, cgroup, Landlock, filter), and measures, with
hosts forked from the zygote (`spawn = zygote`) and no pool, forked from
the zygote with a warm pool of 1 and of 2 (`warm = N`, supervise.h:
hosts started, confined and handshaken before a worker takes one;
engines.d/python.engine says 1), and with each host exec'd (`spawn =
exec`):

  1. create -> first event processed, sporadic: POST /v1/workers (the
     host is started, or taken from the pool, to load the code), then
     POST .../invoke answered (sporadic_from_pool: how many took a pool
     host);
     50 ms apart, as hosts start lazily (a warm pool refills within that
     time); median and p99 over N workers.
     store_fsync = off, so that the figure is the engine's and not the
     disk's (with the default, always, the create's record fsync adds its
     own milliseconds: bench/results/ has that figure);
  2. a burst of 8: 8 creates sent at once on 8 connections, then their 8
     invokes; each worker's create -> first event, and the whole burst's;
  3. memory of an idle host and its init: USS (private clean + dirty) and
     PSS from /proc/PID/smaps_rollup, median over the hosts of (1).

Usage: bench/python.py BUILDDIR [N [SPAWN:WARM,...]]     (needs root)

N defaults to 100; the variants to zygote:0,zygote:1,zygote:2,exec:0.

Figures only: nothing asserts a time.  Every create is checked 201 and
every invoke 200 with the echoed data.
"""

import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import TOP, pct, smaps_rollup  # noqa: E402
from wm import Daemon, b64  # noqa: E402

WORKER = b64("def Process(event):\n"
             "    return {'type': 'echo.out', 'data': event['data']}\n")


def engine(builddir, spawn, warm):
    host = Path(builddir) / "hosts" / "python" / "wm-host-python"
    return {"python.engine": "name = python\nmime_type = text/x-python\n"
                             f"host = {host}\nspawn = {spawn}\n"
                             f"warm = {warm}\n"
                             "role = python\nprotocol = 1\n"}


def create_and_invoke(d, topic):
    """ms from the create's request to the first event's answer."""
    t0 = time.perf_counter()
    r = d.post("/v1/workers", {"mime_type": "text/x-python", "topic": topic,
                               "code": {"content": WORKER}})
    assert r.status == 201, r
    wid = r.json["id"]
    r = d.invoke(wid, "x", data={"n": topic})
    assert r.status == 200 and r.json["data"] == {"n": topic}, r
    return (time.perf_counter() - t0) * 1000, wid


def host_memory(d, wids):
    hosts, inits = [], []
    for wid in wids:
        pid = d.get(f"/v1/workers/{wid}").json["pid"]
        hosts.append(smaps_rollup(pid))
        ppid = int(next(line for line in
                        Path(f"/proc/{pid}/status").read_text().splitlines()
                        if line.startswith("PPid:")).split()[1])
        inits.append(smaps_rollup(ppid))
    med = lambda v, k: statistics.median(x[k] for x in v)  # noqa: E731
    return {"host_uss_kib": med(hosts, "uss"), "host_pss_kib": med(hosts, "pss"),
            "init_uss_kib": med(inits, "uss"), "init_pss_kib": med(inits, "pss")}


def run(builddir, spawn, warm, n):
    with tempfile.TemporaryDirectory(prefix="wm-bench-py-") as tmp:
        d = Daemon(builddir, tmp, engines=engine(builddir, spawn, warm),
                   options={"store_fsync": "off", "log_level": "info"})
        d.start()
        try:
            time.sleep(1)  # the zygote's start, once
            for i in range(5):  # warm-up
                create_and_invoke(d, f"w{i}")
            times, wids = [], []
            taken = d.log().count("from the python pool")
            for i in range(n):
                time.sleep(0.05)
                ms, wid = create_and_invoke(d, f"s{i}")
                times.append(ms)
                wids.append(wid)
            taken = d.log().count("from the python pool") - taken
            mem = host_memory(d, wids[:20])
            bursts, wholes = [], []
            for b in range(5):
                time.sleep(0.2)
                out = [None] * 8
                t0 = time.perf_counter()

                def one(k):
                    try:
                        out[k] = create_and_invoke(d, f"b{b}x{k}")[0]
                    except Exception as e:  # said by the assert below
                        out[k] = repr(e)
                ts = [threading.Thread(target=one, args=(k,))
                      for k in range(8)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                wholes.append((time.perf_counter() - t0) * 1000)
                assert all(isinstance(x, float) for x in out), out
                bursts += out
        finally:
            assert d.stop() == 0, d.log()
    return {"spawn": spawn, "warm": warm, "n": n, "sporadic_from_pool": taken,
            "sporadic_median_ms": round(statistics.median(times), 2),
            "sporadic_p99_ms": round(pct(times, 99), 2),
            "burst8_worker_median_ms": round(statistics.median(bursts), 2),
            "burst8_worker_p90_ms": round(pct(bursts, 90), 2),
            "burst8_whole_median_ms": round(statistics.median(wholes), 2),
            **mem}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    builddir = Path(sys.argv[1]).resolve()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    variants = sys.argv[3] if len(sys.argv) > 3 else \
        "zygote:0,zygote:1,zygote:2,exec:0"
    print(f"bench/python.py: {builddir}, tree {TOP}")
    for v in variants.split(","):
        spawn, warm = v.split(":")
        print(json.dumps(run(builddir, spawn, int(warm), n)), flush=True)


if __name__ == "__main__":
    main()
