#!/usr/bin/python3
"""bench/messages.py — the message path's figures (issue 4).

Runs a real workmanagerd from a build tree (plain ./configure, -O2) in a
temp dir with the protocol test host as engine (an echo worker), and
measures:

  1. publish -> processed -> acked throughput: P client processes publish
     batches of B events (one pre-encoded body, reused) over the control
     socket, each request a keep-alive POST /v1/topics/{topic}/events;
     the clock stops when /metrics counts every event acked.  The worker
     is the test host announcing max_inflight 64 (its inflight64 mode), so
     that the pipeline to the host is as deep as the worker's concurrency.  Once per
     journal_fsync mode (batch, always) and with single-event requests.
  2. invoke round trip: sequential POST /v1/workers/{id}/invoke on one
     keep-alive connection from a C client (bench/http_rtt); p50, p99 and
     p99.9, beside GET /health/live as the floor of HTTP on the socket.

Usage: bench/messages.py BUILDDIR [EVENTS [CLIENTS]]   (defaults 200000, 2)

Figures only: nothing asserts a time.  Counts are cross-checked: events
acked in /metrics == events published == events processed by the worker,
and no worker errors.
"""

import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import client, http_rtt, publish_body, wait_acked  # noqa: E402
from wm import Daemon, metric  # noqa: E402


INFLIGHT = 64


def fast_engine(builddir, tmp):
    """The test host announcing max_inflight INFLIGHT (its inflight<N>
    mode), as engine application/x-wm-test-fast."""
    link = Path(tmp) / f"wm-host-test.inflight{INFLIGHT}"
    link.symlink_to(Path(builddir) / "tests" / "testhost" / "wm-host-test")
    return {"fast.engine": "name = fast\nmime_type = application/x-wm-test-"
                           "fast\nlanguage = test\nhost = " + str(link)
                           + "\nspawn = exec\nprotocol = 1\n"}


def throughput(builddir, tmp, fsync, events, clients, batch):
    d = Daemon(builddir, tmp, options={"log_level": "warning",
                                       "journal_fsync": fsync,
                                       "queue_max_events": 10000000,
                                       "idle_timeout_s": 0},
               engines=fast_engine(builddir, tmp))
    d.start()
    try:
        w = d.create(topic="bench", mime_type="application/x-wm-test-fast",
                     limits={"concurrency": INFLIGHT})
        ev = {"specversion": "1.0", "id": "x", "source": "bench",
              "type": "echo", "data": {"n": 1}}
        body, ctype = publish_body(ev, batch)
        per_client = events // batch // clients
        total = per_client * batch * clients
        q = multiprocessing.Queue()
        procs = [multiprocessing.Process(
            target=client, args=(str(d.socket), "bench", body, ctype,
                                 per_client, q)) for _ in range(clients)]
        t0 = time.monotonic()
        for p in procs:
            p.start()
        bad = sum(q.get() for _ in procs)
        for p in procs:
            p.join()
        t_pub = time.monotonic() - t0
        elapsed = wait_acked(d, total, t0)
        processed = metric(d, "workmanager_worker_events_processed_total",
                           worker=w["id"])
        failed = metric(d, "workmanager_worker_events_failed_total",
                        worker=w["id"])
        assert bad == 0, f"{bad} publishes refused"
        assert processed == total and failed == 0, (processed, failed)
        return total, t_pub, elapsed
    finally:
        d.stop()


def invoke_latency(builddir, tmp, n=10000):
    """Client-side round trips measured by bench/http_rtt (C): the invoke
    route with the echo test host, and GET /health/live as the floor of
    HTTP over the control socket."""
    d = Daemon(builddir, tmp, options={"log_level": "warning",
                                       "idle_timeout_s": 0})
    d.start()
    try:
        w = d.create(topic="inv")
        body = Path(tmp) / "event.json"
        body.write_text(json.dumps({"specversion": "1.0", "id": "i",
                                    "source": "b", "type": "echo",
                                    "data": {"n": 1}}))
        out = {}
        for what, args in (("invoke", ("POST", f"/v1/workers/{w['id']}/invoke",
                                       body)),
                           ("health", ("GET", "/health/live", None))):
            out[what] = http_rtt(builddir, d.socket, *args, n)
        assert metric(d, "workmanager_worker_events_processed_total",
                      worker=w["id"]) == n + 500  # and the warm-up
        return out
    finally:
        d.stop()


def main():
    builddir = Path(sys.argv[1]).resolve()
    events = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
    clients = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    runs = [("batch", 100, events), ("always", 100, events),
            ("batch", 1, events // 10)]
    print(f"# publish -> processed -> acked, echo test host, {clients} "
          "client processes")
    for fsync, batch, n in runs:
        with tempfile.TemporaryDirectory(prefix="wm-bench-") as tmp:
            total, t_pub, elapsed = throughput(builddir, tmp, fsync, n,
                                               clients, batch)
        print(f"journal_fsync={fsync:6} batch={batch:3}: {total} events in "
              f"{elapsed:.2f} s = {total / elapsed:,.0f} events/s "
              f"(publishing took {t_pub:.2f} s)")
    with tempfile.TemporaryDirectory(prefix="wm-bench-") as tmp:
        rtt = invoke_latency(builddir, tmp)
    for what, (p50, p99, p999) in rtt.items():
        print(f"{what:6} round trip (C client, control socket): p50 "
              f"{p50:.1f} us, p99 {p99:.1f} us, p99.9 {p999:.1f} us")


if __name__ == "__main__":
    main()
