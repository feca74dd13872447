#!/usr/bin/python3
"""bench/native.py — the native engine's figures through the daemon (issue 6).

Runs a real workmanagerd from a build tree (plain ./configure, -O2) in a
temp dir with wm-host-native as the engine of application/x-native-dll
and one echo worker: the test worker libecho.so (tests/workers/native,
built by `make check`) in a package made by mkpackage.py.  Measures:

  1. invoke round trip at concurrency 1: sequential POST
     /v1/workers/{id}/invoke on one keep-alive connection to the control
     socket from the C client bench/http_rtt (10,000 after 500 of
     warm-up); p50, p99 and p99.9, beside GET /health/live, the floor of
     one HTTP exchange on the socket.
  2. publish -> processed -> acked: CLIENTS processes POST batches of 100
     events (one pre-encoded body, reused) on keep-alive connections; the
     clock stops when /metrics counts every event acked.  Once per worker
     concurrency (its host's pool threads; dispatch keeps 16 events per
     unit of concurrency out to the host).

With --in-process the same worker runs inside the daemon
("isolation": "in-process", allow_in_process_native = true, the engine
descriptor's in_process = yes): the same two measures, end to end through
the HTTP API and the broker, with the loader's pool threads in place of
the host process (its CPU is then part of the daemon's).

Usage: bench/native.py [--in-process] BUILDDIR [EVENTS [CLIENTS
       [CONCURRENCY,...]]]   (defaults 200000, 2, 1,2)

Figures only: nothing asserts a time.  Counts are cross-checked from
/metrics: every publish answered 202, events acked == events published ==
events processed by the worker, none failed, and as many outputs
published by the worker.  Each throughput line also says the CPU time per
event of the daemon, of the worker's host (all threads; /proc/PID/stat)
and of the publishing clients, to show where the time goes.
"""

import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (children_cpu_s, client, cpu_s, http_rtt,  # noqa: E402
                    wait_acked)
from mkpackage import make_package  # noqa: E402
from wm import Daemon, b64, metric  # noqa: E402

MIME = "application/x-native-dll"
BATCH = 100
INVOKES = 10000


# Set by main(): the worker runs inside the daemon (--in-process).
IN_PROCESS = False


def native_daemon(builddir, tmp, **options):
    host = Path(builddir) / "hosts" / "native" / "wm-host-native"
    opts = {"log_level": "warning", "idle_timeout_s": 0}
    if IN_PROCESS:
        opts["allow_in_process_native"] = "true"
    opts.update(options)
    d = Daemon(builddir, tmp, options=opts, engines={
        "native.engine": f"name = native\nmime_type = {MIME}\nlanguage = C\n"
                         f"host = {host}\nspawn = exec\nprotocol = 1\n"
                         f"in_process = {'yes' if IN_PROCESS else 'no'}\n"})
    d.start()
    return d


def create_echo(d, builddir, topic, concurrency):
    lib = Path(builddir) / "tests" / "workers" / "native" / "libecho.so"
    body = {"mime_type": MIME, "topic": topic,
            "limits": {"concurrency": concurrency},
            "code": {"content": b64(make_package(lib))}}
    if IN_PROCESS:
        body["isolation"] = "in-process"
    r = d.post("/v1/workers", body)
    assert r.status == 201, r
    if IN_PROCESS:
        assert d.get(f"/v1/workers/{r.json['id']}").json["isolation"] == \
            "in-process"
    return r.json["id"]


def invoke_latency(builddir, tmp):
    """bench/http_rtt's client-side round trips: the invoke route, then
    GET /health/live."""
    d = native_daemon(builddir, tmp)
    try:
        wid = create_echo(d, builddir, "inv", 1)
        body = Path(tmp) / "event.json"
        body.write_text(json.dumps({"specversion": "1.0", "id": "i",
                                    "source": "b", "type": "echo",
                                    "data": {"n": 1}}))
        out = {}
        for what, args in (("invoke", ("POST", f"/v1/workers/{wid}/invoke",
                                       body)),
                           ("health", ("GET", "/health/live", None))):
            out[what] = http_rtt(builddir, d.socket, *args, INVOKES)
        processed = metric(d, "workmanager_worker_events_processed_total",
                           worker=wid)
        assert processed == INVOKES + 500, processed  # and the warm-up
        return out
    finally:
        d.stop()


def throughput(builddir, tmp, events, clients, concurrency):
    """Batched publishes to one native echo worker; (events, seconds to
    publish, seconds until all were acked, {process: CPU us per event})."""
    d = native_daemon(builddir, tmp, journal_fsync="batch",
                      queue_max_events=10000000)
    try:
        wid = create_echo(d, builddir, "bench", concurrency)
        ev = {"specversion": "1.0", "id": "x", "source": "bench",
              "type": "echo", "data": {"n": 1}}
        body = json.dumps([ev] * BATCH).encode()
        requests = events // BATCH // clients
        total = requests * BATCH * clients
        q = multiprocessing.Queue()
        procs = [multiprocessing.Process(
            target=client, args=(str(d.socket), "bench", body,
                                 "application/cloudevents-batch+json",
                                 requests, q)) for _ in range(clients)]
        # In process, the worker's pid is the daemon's: no host to count.
        host = None if IN_PROCESS else d.get(f"/v1/workers/{wid}").json["pid"]
        sample = (lambda: (cpu_s(d.proc.pid),
                           cpu_s(host) if host else 0.0,
                           children_cpu_s()))
        cpu0 = sample()
        t0 = time.monotonic()
        for p in procs:
            p.start()
        refused = sum(q.get() for _ in procs)
        for p in procs:
            p.join()
        t_pub = time.monotonic() - t0
        elapsed = wait_acked(d, total, t0)
        cpu1 = sample()
        cpu = {k: (b - a) * 1e6 / total for k, a, b in
               zip(("daemon", "host", "clients"), cpu0, cpu1)
               if not (IN_PROCESS and k == "host")}
        counts = {k: metric(d, f"workmanager_worker_events_{k}_total",
                            worker=wid)
                  for k in ("processed", "failed", "published")}
        assert refused == 0, f"{refused} publishes refused"
        assert counts == {"processed": total, "failed": 0,
                          "published": total}, counts
        assert metric(d, "workmanager_events_acked_total") == total
        return total, t_pub, elapsed, cpu
    finally:
        d.stop()


def main():
    global IN_PROCESS
    argv = sys.argv[1:]
    if argv and argv[0] == "--in-process":
        IN_PROCESS = True
        argv = argv[1:]
    builddir = Path(argv[0]).resolve()
    events = int(argv[1]) if len(argv) > 1 else 200000
    clients = int(argv[2]) if len(argv) > 2 else 2
    levels = [int(c) for c in (argv[3] if len(argv) > 3
                               else "1,2").split(",")]
    where = "in-process" if IN_PROCESS else "out of process"
    with tempfile.TemporaryDirectory(prefix="wm-bench-") as tmp:
        rtt = invoke_latency(builddir, tmp)
    for what, (p50, p99, p999) in rtt.items():
        print(f"{what:6} round trip (C client, control socket, native echo "
              f"{where}): "
              f"p50 {p50:.1f} us, p99 {p99:.1f} us, p99.9 {p999:.1f} us")
    print(f"# publish -> processed -> acked, native echo {where}, "
          f"{clients} client "
          f"processes, batches of {BATCH}, journal_fsync=batch")
    for concurrency in levels:
        with tempfile.TemporaryDirectory(prefix="wm-bench-") as tmp:
            total, t_pub, elapsed, cpu = throughput(builddir, tmp, events,
                                                    clients, concurrency)
        print(f"concurrency {concurrency}: {total} events in {elapsed:.2f} s "
              f"= {total / elapsed:,.0f} events/s (publishing took "
              f"{t_pub:.2f} s)")
        print("    CPU per event: " + ", ".join(
            f"{k} {v:.1f} us" for k, v in cpu.items()))


if __name__ == "__main__":
    main()
