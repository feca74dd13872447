#!/usr/bin/python3
"""bench/nats_broker.py — broker = nats against the embedded broker
(issue 23, "Measured"), side by side in one run.

    bench/nats_broker.py BUILDDIR [EVENTS [IDLE]]   (100000 and 0 by default)

(`make bench-nats` in a build tree runs it on that tree.)  Needs
nats-server (Debian package nats-server) and a build with libnats.

Three set-ups, each on fresh daemons (and a fresh nats-server of its own,
tests/integration/nats_lib.py's NatsServer, on a free loopback port):

  embedded   one daemon, store = file, the embedded broker (journal_fsync
             batch, as bench/messages.py);
  nats x1    one daemon, store = nats, broker = nats;
  nats x2    two daemons, store = nats, broker = nats, on the same
             nats-server: the worker is created on the first, the second
             follows it through the store's watch (the bench waits until
             GET /v1/workers/<name> answers 200 on both); the publishers
             are spread over both daemons.

In each, one worker (the protocol test host in its inflight64 mode, an
echo, concurrency 64, as bench/messages.py) takes topic `bench`, and two
shapes are published over the control sockets by client processes, each
connected before the clock starts (bench/common.py's publisher()):

  batch      EVENTS events in batches of 100 from 2 processes;
  single     EVENTS/10 events, one per request, from 8 processes.

The clock runs from the start of publishing until the worker's processed
counts (GET /v1/workers/<name>, events.processed, summed over the
daemons) reach the events published.  CPU per event, in µs, separately
for each workmanagerd (every thread of the master, from
/proc/PID/task/*/schedstat as bench/suite.py), for the worker's hosts
under each daemon, for nats-server (NatsServer.proc.pid) and for the
publishing processes (getrusage of the reaped children).

With IDLE, each set-up also has that many stopped workers (each on a
topic of its own, created with "start": false after the measured one):
every worker is a subscription of each daemon, and with broker = nats a
durable consumer of the stream, though it takes nothing.

Then the invoke round trip: bench/http_rtt (C), 5,000 sequential POST
/v1/workers/{id}/invoke on one keep-alive connection to the control
socket (after 500 of warm-up), p50 and p99, and the daemon's CPU per
invoke; then the single-event publish's time to 202: 2,000 sequential
POST /v1/topics/{topic}/events (each event its own id) from a Python loop
on one keep-alive connection (after 200 of warm-up; the Python client's
own time is in it, the same in every row); on one daemon with store =
file, store = nats (embedded broker) and store = nats with broker = nats.

Figures only: nothing asserts a time.  Counts are cross-checked: every
publish answered 202, processed == published (still so 0.5 s after the
clock stopped: no duplicate), no event failed.  Exits 1 when a check
fails.
"""

import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (children_cpu_s, cpu_ns, http_rtt, pct,  # noqa: E402
                    publish_body)
from messages import INFLIGHT, fast_engine  # noqa: E402
from nats_lib import NATS_SERVER, NatsServer  # noqa: E402
from wm import Daemon, UnixHTTPConnection  # noqa: E402

NAME = "bench"
SHAPES = (("batch", 100, 2), ("single", 1, 8))  # (label, batch, clients)


def options(kind, nats):
    opts = {"log_level": "warning", "idle_timeout_s": 0,
            "journal_fsync": "batch", "queue_max_events": 10000000}
    if kind != "file":
        opts.update({"store": "nats", "nats_url": nats.url})
    if kind == "nats":
        opts["broker"] = "nats"
    return opts


def host_pids(d):
    """The pids of the worker's hosts under daemon d (none while it runs
    none)."""
    r = d.get(f"/v1/workers/{NAME}").json
    pid = r.get("pid")
    return [pid] if pid and pid != d.proc.pid else []


def counts(daemons):
    out = {"processed": 0, "failed": 0, "dead_lettered": 0}
    per = []
    for d in daemons:
        r = d.get(f"/v1/workers/{NAME}")
        assert r.status == 200, r
        ev = r.json["events"]
        per.append(ev["processed"])
        for k in out:
            out[k] += ev[k]
    return out, per


def start_set(builddir, tmp, label, ndaemons, idle=0):
    """(nats-server or None, [daemons]) of one set-up, the worker created
    and present on every daemon."""
    tmp = Path(tmp)
    nats = None
    if label != "embedded":
        nats = NatsServer(tmp / "nats").start()
    kind = "file" if label == "embedded" else "nats"
    daemons = []
    try:
        for i in range(ndaemons):
            dt = tmp / f"d{i}"
            dt.mkdir()
            daemons.append(Daemon(builddir, dt, options=options(kind, nats),
                                  engines=fast_engine(builddir, dt)).start())
        daemons[0].create(name=NAME, topic="bench",
                          mime_type="application/x-wm-test-fast",
                          limits={"concurrency": INFLIGHT})
        for i in range(idle):
            r = daemons[0].post("/v1/workers", {
                "mime_type": "application/x-wm-test", "topic": f"idle{i}",
                "name": f"idle{i}", "start": False,
                "code": {"content": "ZWNobw=="}})  # "echo"
            assert r.status == 201, r
        last = f"idle{idle - 1}" if idle else NAME
        for d in daemons[1:]:
            for name in (NAME, last):
                d.wait_for(lambda: d.get(f"/v1/workers/{name}").status
                           == 200, timeout=120,
                           what="the workers on the other daemon")
        if kind == "nats":
            time.sleep(0.5)  # every daemon's consumer bound
    except BaseException:
        stop_set(nats, daemons)
        raise
    return nats, daemons


def stop_set(nats, daemons):
    for d in reversed(daemons):
        d.stop()
    if nats:
        nats.stop()


def bodies(tag, batch, requests):
    """The request bodies of one publisher: every event its own id (the
    nats broker drops an event whose source and id it stored in the last
    two minutes: Nats-Msg-Id), `batch` events per body."""
    out = []
    for r in range(requests):
        evs = [{"specversion": "1.0", "id": f"{tag}-{r}-{i}",
                "source": "bench", "type": "echo", "data": {"n": 1}}
               for i in range(batch)]
        out.append(publish_body(evs[0], 1) if batch == 1 else
                   (json.dumps(evs).encode(),
                    "application/cloudevents-batch+json"))
    return out


def publisher(sock, tag, batch, requests, ready, go, out):
    """One publishing process: its bodies made and its keep-alive
    connection open before it puts None on ready; after go, POSTs them
    in turn; puts (requests made, answers not 202, time.monotonic() of
    the last answer) on out."""
    todo = bodies(tag, batch, requests)
    conn = UnixHTTPConnection(sock, timeout=120)
    conn.connect()
    ready.put(None)
    go.wait()
    bad = 0
    for body, ctype in todo:
        conn.request("POST", "/v1/topics/bench/events", body=body,
                     headers={"Content-Type": ctype})
        r = conn.getresponse()
        r.read()
        if r.status != 202:
            bad += 1
    out.put((len(todo), bad, time.monotonic()))
    conn.close()


def run_shape(nats, daemons, tag, batch, clients, events):
    per_client = events // (batch * clients)
    total = per_client * batch * clients
    c0, per0 = counts(daemons)
    ctx = multiprocessing.get_context("fork")
    ready, go, q = ctx.Queue(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=publisher,
                         args=(str(daemons[i % len(daemons)].socket),
                               f"{tag}{i}", batch, per_client, ready, go, q))
             for i in range(clients)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get()
    hosts0 = [{h: cpu_ns(h) for h in host_pids(d)} for d in daemons]
    wmd0 = [cpu_ns(d.proc.pid) for d in daemons]
    nats0 = cpu_ns(nats.proc.pid) if nats else 0
    cli0 = children_cpu_s()
    t0 = time.monotonic()
    go.set()
    res = [q.get() for _ in procs]
    for p in procs:
        p.join()
    t_pub = max(r[2] for r in res) - t0
    cli = children_cpu_s() - cli0
    last, moved = -1, time.monotonic()
    while True:
        c, per = counts(daemons)
        if c["processed"] - c0["processed"] >= total:
            break
        if c["processed"] != last:
            last, moved = c["processed"], time.monotonic()
        elif time.monotonic() - moved > 20:
            break  # stuck: reported below (processed != published)
        time.sleep(0.005)
    elapsed = time.monotonic() - t0
    wmd = [cpu_ns(d.proc.pid) - n0 for d, n0 in zip(daemons, wmd0)]
    hosts = []
    for d, h0 in zip(daemons, hosts0):
        hosts.append(sum(cpu_ns(h) - h0.get(h, 0) for h in host_pids(d)))
    ncpu = cpu_ns(nats.proc.pid) - nats0 if nats else 0
    time.sleep(0.5)  # anything more would be a duplicate
    c, per = counts(daemons)
    made = sum(r[0] for r in res)
    bad = sum(r[1] for r in res)
    processed = c["processed"] - c0["processed"]
    problems = []
    if bad:
        problems.append(f"{bad} publishes not answered 202")
    if made * batch != total:
        problems.append(f"{made * batch} published, {total} meant")
    if processed != total:
        problems.append(f"processed {processed} != published {total}")
    for k in ("failed", "dead_lettered"):
        if c[k] != c0[k]:
            problems.append(f"{c[k] - c0[k]} {k}")

    def us(ns):
        return round(ns / 1000 / total, 2)
    return {"events": total, "seconds": round(elapsed, 3),
            "events_per_s": round(total / elapsed),
            "publish_s": round(t_pub, 3),
            "wmd_us": [us(n) for n in wmd], "hosts_us": [us(n) for n in hosts],
            "nats_us": us(ncpu) if nats else None,
            "clients_us": us(cli * 1e9),
            "processed_per_daemon": [p - p0 for p, p0 in zip(per, per0)],
            "problems": problems}


def publish_rtt(d, n=2000):
    """(p50, p99) µs of n sequential single-event publishes (each its own
    id) from a Python loop on one keep-alive connection to the control
    socket, after 200 of warm-up: the time to 202, which for broker =
    nats includes JetStream's PubAck."""
    conn = UnixHTTPConnection(str(d.socket), timeout=30)
    times = []
    for i in range(n + 200):
        body = json.dumps({"specversion": "1.0", "id": f"rtt-{i}",
                           "source": "bench", "type": "echo",
                           "data": {"n": 1}}).encode()
        t = time.perf_counter_ns()
        conn.request("POST", "/v1/topics/inv/events", body=body,
                     headers={"Content-Type": "application/cloudevents+json"})
        r = conn.getresponse()
        r.read()
        if i >= 200:
            times.append(time.perf_counter_ns() - t)
        assert r.status == 202, r.status
    conn.close()
    return pct(times, 50) / 1000, pct(times, 99) / 1000


def invoke_rtt(builddir, tmp, kind, n=5000):
    """The invoke round trip (bench/http_rtt), the daemon's CPU per
    invoke, then publish_rtt(): (p50, p99, cpu, pub_p50, pub_p99, ok)."""
    tmp = Path(tmp)
    nats = NatsServer(tmp / "nats").start() if kind != "file" else None
    d = Daemon(builddir, tmp / "d", options=options(kind, nats))
    try:
        d.start()
        w = d.create(name="inv", topic="inv")
        body = tmp / "event.json"
        body.write_text(json.dumps({"specversion": "1.0", "id": "i",
                                    "source": "b", "type": "echo",
                                    "data": {"n": 1}}))
        ns0 = cpu_ns(d.proc.pid)
        p50, p99, _ = http_rtt(builddir, d.socket, "POST",
                               f"/v1/workers/{w['id']}/invoke", body, n)
        cpu = (cpu_ns(d.proc.pid) - ns0) / 1000 / (n + 500)
        pub50, pub99 = publish_rtt(d)
        want = n + 500 + 2200  # http_rtt's warm-up, publish_rtt's 2,200

        def got():
            return d.get("/v1/workers/inv").json["events"]["processed"]
        deadline = time.monotonic() + 30
        while got() < want and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # anything more would be a duplicate
        ok = got() == want
        return p50, p99, cpu, pub50, pub99, ok
    finally:
        d.stop()
        if nats:
            nats.stop()


def loadavg():
    return Path("/proc/loadavg").read_text().split()[0]


def fmt(xs):
    return " + ".join(f"{x:.1f}" for x in xs)


def fmt_n(xs):
    return " + ".join(str(x) for x in xs)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    builddir = Path(sys.argv[1]).resolve()
    events = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    idle = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    if events < 2000:
        sys.exit("nats_broker.py: EVENTS: at least 2000 (batches of 100 "
                 "from 2 publishers, a tenth of it one by one from 8)")
    if NATS_SERVER is None:
        sys.exit("nats_broker.py: nats-server is not installed (Debian "
                 "package nats-server)")
    config = (builddir / "config.h").read_text()
    if "#define WM_NATS 1" not in config:
        sys.exit(f"nats_broker.py: {builddir} was built without libnats")
    failed = False
    now = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    print(f"# nats_broker.py {builddir} {events} {idle}: load average "
          f"{loadavg()} at the start, {now}")
    print("| set-up | shape | events | events/s | workmanagerd µs/event | "
          "hosts µs/event | nats-server µs/event | publishers µs/event | "
          "processed per daemon | check |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, nd in (("embedded", 1), ("nats x1", 1), ("nats x2", 2)):
        with tempfile.TemporaryDirectory(prefix="wm-bench-nats-") as tmp:
            nats, daemons = start_set(builddir, tmp, label, nd, idle)
            try:
                for shape, batch, clients in SHAPES:
                    n = events if batch > 1 else events // 10
                    r = run_shape(nats, daemons, shape, batch, clients, n)
                    failed |= bool(r["problems"])
                    nu = ("–" if r["nats_us"] is None
                          else f"{r['nats_us']:.1f}")
                    print(f"| {label} | {shape} ({batch}, {clients} proc) | "
                          f"{r['events']} | {r['events_per_s']:,} | "
                          f"{fmt(r['wmd_us'])} | {fmt(r['hosts_us'])} | "
                          f"{nu} | {r['clients_us']:.1f} | "
                          f"{fmt_n(r['processed_per_daemon'])}"
                          f" | {'; '.join(r['problems']) or 'ok'} |",
                          flush=True)
            finally:
                stop_set(nats, daemons)
    print()
    print("| one request at a time | invoke p50 µs | invoke p99 µs | "
          "workmanagerd µs/invoke | publish p50 µs | publish p99 µs | "
          "check |")
    print("|---|---|---|---|---|---|---|")
    for kind, label in (("file", "store = file, embedded broker"),
                        ("nats-store", "store = nats, embedded broker"),
                        ("nats", "store = nats, broker = nats")):
        with tempfile.TemporaryDirectory(prefix="wm-bench-nats-") as tmp:
            p50, p99, cpu, pub50, pub99, ok = invoke_rtt(builddir, tmp,
                                                         kind)
        failed |= not ok
        print(f"| {label} | {p50:.1f} | {p99:.1f} | {cpu:.1f} | "
              f"{pub50:.1f} | {pub99:.1f} | "
              f"{'ok' if ok else 'processed != calls'} |", flush=True)
    print(f"\n# load average {loadavg()} at the end")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
