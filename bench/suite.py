#!/usr/bin/python3
"""bench/suite.py — every scenario of the benchmark suite (issue 11) in one
invocation, with its report: report.md, report.json and PNG plots.

bench/run builds what it needs and runs this with Debian's python3:

    bench/suite.py [--quick] [--only GROUP,...] BUILDDIR OUTDIR

It starts real daemons from BUILDDIR (a plain ./configure build, -O2)
through tests/integration/wm.py, as the tests do, and measures for each
engine present (in-process native, out-of-process native, Python, .NET):
cold start, invoke latency at concurrency 1, publish -> processed -> acked
throughput at 1, 2, 8 and 64 publishers, single and batched, and with a
grouped pair, the idle host's memory and the time from a host crash to
its redelivered events being processed; for the master alone, its memory
per registered worker and the recovery of 1k and 10k persisted workers;
and the peers a user would pick instead (bench/peers: the original
WorkManager's two Python engine designs, uWSGI and gunicorn), all running
bench/peers/handler.py, the HTTP ones driven by wrk as the daemon's
invoke route is.

Every scenario records its ingress, worker shape, duration (minimum
durations are enforced: a throughput run shorter than its minimum is run
again with more events) and a cross-check of its counts (events sent =
events processed, per /metrics or the peer's own count, no errors).  A
scenario that cannot run says why ("skipped"); one that fails records
its error, and the exit status is then 1.  Figures only: nothing here
judges a time.
"""

import argparse
import base64
import json
import multiprocessing
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import master  # noqa: E402
from common import (TOP, children_cpu_s, cpu_ns, cpu_s,  # noqa: E402
                    http_rtt, pct, publish_body, publisher, rss_kib,
                    smaps_rollup)
from mkpackage import make_package  # noqa: E402
from wm import Daemon, metric  # noqa: E402

PY = "/usr/bin/python3"
PEERS = TOP / "bench" / "peers"
WRK_LUA = TOP / "bench" / "wrk_post.lua"
BATCH = 100
PUBLISHERS = (1, 2, 8, 64)
TOKEN = "bench-token-0123456789abcdef"
# The event of issue 24's targets (233 bytes): the body of the scenarios
# over TCP and TLS, whose master_cpu_us is the daemon's CPU per request.
ISSUE_EVENT = (
    b'{"specversion":"1.0","id":"7f3c2a9e-0001","source":"/bench/producer",'
    b'"type":"com.example.bench.ping","datacontenttype":"application/json",'
    b'"time":"2025-01-01T00:00:00Z","data":{"user":"alice","action":'
    b'"click","item":"sku-42","qty":3}}')
CE_JSON = "application/cloudevents+json"


class Skip(Exception):
    """A scenario that cannot run here; its message says why."""


class Config:
    """What --quick changes: counts and minimum durations, never what is
    measured."""

    def __init__(self, quick):
        self.quick = quick
        self.min_s = 0.3 if quick else 3.0       # throughput runs
        self.cold_n = 50 if quick else 100       # cold starts (>= 50)
        self.rtt_n = 2000 if quick else 10000    # http_rtt invokes
        self.wrk_s = 1 if quick else 5           # each wrk run
        self.wrk_warm_s = 1                      # wrk before a new worker's
        self.registered = (1000, 10000)          # master memory, recovery
        self.crashes = 3 if quick else 10
        self.spawn_n = 30 if quick else 200      # python3 per event
        self.persist_n = 2000 if quick else 20000


# ---- engines ---------------------------------------------------------------

def b64(data):
    return base64.b64encode(data).decode()


class Engine:
    """One engine of the daemon as the suite drives it: its descriptor,
    its worker (an echo) and how to create one."""

    key = label = mime = ""
    has_host = True
    isolation = None
    worker = ""
    # The descriptor's lines after mime_type (host = the build's binary).
    host = ""
    lines = ""

    def __init__(self, builddir):
        self.builddir = Path(builddir)

    def missing(self):
        """Why this engine cannot run here, or None."""
        if not (self.builddir / self.host).exists():
            return f"{self.host} is not built"
        return None

    def descriptor(self):
        return {f"{self.key}.engine":
                f"name = {self.key}\nmime_type = {self.mime}\n"
                f"host = {self.builddir / self.host}\n{self.lines}"}

    def options(self):
        return {}

    def code(self):
        raise NotImplementedError

    def create(self, d, topic, name=None, group=None, concurrency=1):
        body = {"mime_type": self.mime, "topic": topic,
                "limits": {"concurrency": concurrency},
                "code": {"content": self.code()}}
        if name:
            body["name"] = name
        if group:
            body["group"] = group
        if self.isolation:
            body["isolation"] = self.isolation
        r = d.post("/v1/workers", body)
        assert r.status == 201, r
        return r.json["id"]


class NativeEngine(Engine):
    key, label = "native", "native, out of process"
    mime = "application/x-native-dll"
    worker = ("tests/workers/native/libecho.so (echo), concurrency 1, "
              "in wm-host-native")
    host = "hosts/native/wm-host-native"
    lines = "language = C\nspawn = exec\nprotocol = 1\nin_process = no\n"

    def __init__(self, builddir):
        super().__init__(builddir)
        self._code = None

    def missing(self):
        lib = "tests/workers/native/libecho.so"
        if not (self.builddir / lib).exists():
            return f"{lib} is not built"
        return super().missing()

    def code(self):
        if self._code is None:
            self._code = b64(make_package(
                self.builddir / "tests" / "workers" / "native"
                / "libecho.so"))
        return self._code


class InProcessEngine(NativeEngine):
    key, label = "inprocess", "native, in process"
    worker = ("tests/workers/native/libecho.so (echo), concurrency 1, "
              "in the daemon (isolation in-process)")
    lines = NativeEngine.lines.replace("in_process = no", "in_process = yes")
    has_host = False
    isolation = "in-process"

    def options(self):
        return {"allow_in_process_native": "true"}


class PythonEngine(Engine):
    key, label = "python", "Python"
    mime = "text/x-python"
    worker = "bench/peers/handler.py (Process echoes and counts), in " \
             "wm-host-python"

    host = "hosts/python/wm-host-python"

    @property
    def lines(self):
        """The tree's own descriptor (engines.d/python.engine) but for
        what descriptor() sets: its spawn mode is the engine's."""
        f = TOP / "engines.d" / "python.engine"
        if not f.exists():
            return "language = Python\nspawn = exec\nrole = python\n" \
                "protocol = 1\n"
        return "".join(
            line + "\n" for line in f.read_text().splitlines()
            if line.split("=")[0].strip() not in
            ("name", "mime_type", "host", "description"))

    def missing(self):
        if not (self.builddir / self.host).exists():
            return ("the Python engine is not in this tree "
                    "(no hosts/python/wm-host-python: issue 8 has not "
                    "landed)")
        return None

    def code(self):
        return b64((PEERS / "handler.py").read_bytes())


class DotnetEngine(Engine):
    """The .NET test worker (tests/workers/dotnet/echo: its default case
    echoes the data as echo.out), built with the installed SDK, offline,
    into a nupkg, in wm-host-dotnet.  Full runs only: its cold starts
    (CoreCLR's start, about 0.3 s each, times 50) alone would take a
    quick run past its 2 minutes."""
    key, label = "dotnet", ".NET"
    mime = "application/x-dotnet-dll"
    worker = "tests/workers/dotnet/echo (EchoWorker, echo), in wm-host-dotnet"
    host = "hosts/dotnet/wm-host-dotnet"

    def __init__(self, builddir, quick=False):
        super().__init__(builddir)
        self.quick = quick
        self._code = None
        self._tmp = None

    @property
    def lines(self):
        """The tree's own descriptor (engines.d/dotnet.engine) but for what
        descriptor() sets."""
        return "".join(
            line + "\n" for line in
            (TOP / "engines.d" / "dotnet.engine").read_text().splitlines()
            if line.split("=")[0].strip() not in
            ("name", "mime_type", "host", "description"))

    def missing(self):
        if not (self.builddir / "hosts" / "dotnet").is_dir():
            return ("the .NET engine is not in this build (configure found "
                    "no .NET SDK)")
        if self.quick:
            return ("a quick run leaves .NET out: its 50 cold starts "
                    "(CoreCLR's start each) do not fit in 2 minutes; a "
                    "full run measures it")
        return super().missing()

    def code(self):
        if self._code is None:
            sys.path.insert(0, str(TOP / "tests" / "integration"))
            from dotnet_lib import build_worker, nupkg
            self._tmp = tempfile.TemporaryDirectory(prefix="wm-bench-dn-")
            folder, _ = build_worker(self.builddir, "echo",
                                     Path(self._tmp.name) / "echo")
            self._code = b64(nupkg(folder))
        return self._code


ENGINES = (InProcessEngine, NativeEngine, PythonEngine, DotnetEngine)


# ---- the report ------------------------------------------------------------

class Report:
    """The scenarios run so far, each a dict (see run())."""

    def __init__(self):
        self.scenarios = []
        self.failed = 0

    def run(self, sid, title, fn, engine=None, ingress="", worker=""):
        """Runs fn(), which returns {"values": {...}, "check": {"sent",
        "processed", "errors", "ok", "rule"}, "duration_s",
        "min_duration_s", "notes"} (all but values and check optional),
        and records it under sid; a Skip is recorded with its reason, any
        other exception as a failure."""
        rec = {"id": sid, "title": title, "engine": engine,
               "ingress": ingress, "worker": worker}
        t0 = time.monotonic()
        print(f"--- {sid}: {title}", flush=True)
        try:
            rec.update(fn())
            rec["status"] = "ok" if rec["check"]["ok"] else "check failed"
        except Skip as e:
            rec["status"] = "skipped"
            rec["reason"] = str(e)
        except Exception as e:  # noqa: BLE001 — recorded, the run goes on
            rec["status"] = "failed"
            rec["reason"] = f"{type(e).__name__}: {e}"
            traceback.print_exc()
        rec["wall_s"] = round(time.monotonic() - t0, 3)
        rec.setdefault("duration_s", rec["wall_s"])
        if rec["status"] in ("failed", "check failed"):
            self.failed += 1
        print(f"    {rec['status']}: "
              + json.dumps(rec.get("values") or rec.get("reason")),
              flush=True)
        self.scenarios.append(rec)
        return rec

    def get(self, sid):
        for s in self.scenarios:
            if s["id"] == sid and s["status"] == "ok":
                return s["values"]
        return None


def check(sent, processed, errors=0, rule="sent = processed, no errors",
          ok=None):
    return {"sent": sent, "processed": processed, "errors": errors,
            "rule": rule,
            "ok": (sent == processed and errors == 0) if ok is None else ok}


# ---- daemon scenarios -------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_daemon(builddir, tmp, eng, **options):
    port = free_port()
    (Path(tmp) / "token").write_text(TOKEN + "\n")
    opts = {"log_level": "warning", "idle_timeout_s": 0,
            "journal_fsync": "batch", "queue_max_events": 10000000,
            "listen": f"127.0.0.1:{port}", "listen_plaintext": "loopback"}
    opts.update(eng.options())
    opts.update(options)
    d = Daemon(builddir, tmp, options=opts, engines=eng.descriptor())
    d.start()
    d.port = port
    d.scheme = "https" if opts.get("tls_cert_file") else "http"
    return d


def self_signed(tmp):
    """(certificate, key) of a self-signed EC certificate for 127.0.0.1,
    made by openssl(1) in tmp (wrk does not verify it)."""
    cert, key = Path(tmp) / "server.pem", Path(tmp) / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True,
                   timeout=60)
    return cert, key


def master_cpu_us(d, ns0, n):
    """The daemon's CPU µs per request since cpu_ns() read ns0, over n
    requests (every thread of the master; the hosts are other
    processes)."""
    return round((cpu_ns(d.proc.pid) - ns0) / 1000 / max(n, 1), 2)


def metric_sum(d, name):
    """The sum of every sample of one metric of /metrics, any labels."""
    total = 0.0
    for line in d.get("/metrics").raw.decode().splitlines():
        key, _, value = line.rpartition(" ")
        if key == name or key.startswith(name + "{"):
            total += float(value)
    return total


def processed(d, wid, what="processed"):
    return metric(d, f"workmanager_worker_events_{what}_total", worker=wid)


def echo_event(i=0):
    return {"specversion": "1.0", "id": f"e{i}", "source": "bench",
            "type": "echo", "data": {"n": i}}


def cold_start(cfg, d, eng):
    """create -> first event processed for cfg.cold_n workers, each host
    started on create; their ids are kept for the idle memory figure."""
    ids = []

    def create(i):
        ids.append(eng.create(d, f"cold{i}", name=f"cold{i}"))
        return ids[-1]

    def invoke(wid, i):
        return d.post(f"/v1/workers/{wid}/invoke", echo_event(i)).status

    lat, create_ms = master.cold_starts(cfg.cold_n, create, invoke)
    n = sum(processed(d, w) for w in ids)
    cold_start.ids = ids
    return {"values": {"n": len(lat),
                       "median_ms": round(statistics.median(lat), 3),
                       "p99_ms": round(pct(lat, 99), 3),
                       "create_median_ms":
                           round(statistics.median(create_ms), 3)},
            "check": check(len(lat), n),
            "notes": "POST /v1/workers (store_fsync=always) then POST "
                     ".../invoke, one after the other, on the unix socket"}


def idle_memory(d, eng, ids):
    if not eng.has_host:
        raise Skip("no host: the worker runs in the daemon")
    pids = []
    for wid in ids[:20]:
        pid = d.get(f"/v1/workers/{wid}").json.get("pid")
        if pid:
            pids.append(pid)
    if not pids:
        raise RuntimeError("no idle host found")
    m = [smaps_rollup(p) for p in pids]
    vals = {k: statistics.median(x[k] for x in m)
            for k in ("rss", "pss", "uss")}
    return {"values": {"hosts": len(m), "uss_kib": vals["uss"],
                       "pss_kib": vals["pss"], "rss_kib": vals["rss"]},
            "check": check(len(pids), len(m)),
            "notes": "median over idle hosts of /proc/PID/smaps_rollup "
                     f"({len(ids)} hosts running)"}


def delete_all(d, ids):
    for wid in ids:
        d.delete(f"/v1/workers/{wid}")


def invoke_rtt(cfg, d, eng, tmp):
    wid = eng.create(d, "rtt")
    body = Path(tmp) / "event.json"
    body.write_text(json.dumps(echo_event()))
    ns0 = cpu_ns(d.proc.pid)
    p50, p99, p999 = http_rtt(d.builddir, d.socket, "POST",
                              f"/v1/workers/{wid}/invoke", body, cfg.rtt_n)
    n = processed(d, wid)
    cpu = master_cpu_us(d, ns0, n)
    return {"values": {"p50_us": p50, "p99_us": p99, "p999_us": p999,
                       "calls": cfg.rtt_n, "master_cpu_us": cpu},
            "check": check(cfg.rtt_n + 500, n),  # and http_rtt's warm-up
            "notes": "bench/http_rtt (C), one keep-alive connection"}


def run_wrk(url, body_file, seconds, conns, auth="", ctype=""):
    env = dict(os.environ, WRK_BODY=str(body_file), WRK_AUTH=auth,
               WRK_CTYPE=ctype)
    r = subprocess.run(["wrk", f"-t{min(conns, 2)}", f"-c{conns}",
                        f"-d{seconds}s", "-s", str(WRK_LUA), url],
                       capture_output=True, text=True, env=env,
                       timeout=seconds + 60)
    if r.returncode != 0:
        raise RuntimeError(f"wrk: {r.stderr.strip() or r.stdout}")
    line = [x for x in r.stdout.splitlines() if x.startswith("{")][-1]
    out = json.loads(line)
    out["rps"] = round(out["requests"] * 1e6 / out["duration_us"], 1)
    return out


def wrk_check(res, before, after, conns):
    """wrk counts the answers it read in its time; up to one request per
    connection may have been served but not read when it stopped."""
    n = after - before
    return check(res["requests"], n, res["errors"] + res["non2xx"],
                 rule="wrk's answers <= processed <= answers + "
                      "connections, no errors",
                 ok=(res["requests"] <= n <= res["requests"] + conns
                     and res["errors"] + res["non2xx"] == 0))


def wrk_values(res):
    return {k: res[k] for k in ("rps", "p50_us", "p99_us", "p999_us",
                                "requests")}


def invoke_wrk(cfg, d, eng, tmp, conns, concurrency=1):
    """wrk's POSTs of the issue's 233-byte event (structured mode) to
    .../invoke over the daemon's TCP listener (plain or TLS, d.scheme),
    one worker per daemon, engine and concurrency (the Python engine's
    concurrency is its number of processes)."""
    # Not id(d): a later daemon object may get the id of one gone.
    key = (str(d.socket), eng.key, concurrency)
    wids = getattr(invoke_wrk, "wid", {})
    wid = wids.get(key)
    body = Path(tmp) / "issue-event.json"
    body.write_bytes(ISSUE_EVENT)
    if wid is None:
        wid = eng.create(d, f"wrk{concurrency}", concurrency=concurrency)
        invoke_wrk.wid = wids
        wids[key] = wid
        # A new worker's first second (its processes' first events, the
        # daemon's first connections) is not what the figures are about.
        run_wrk(f"{d.scheme}://127.0.0.1:{d.port}/v1/workers/{wid}/invoke",
                body, cfg.wrk_warm_s, conns, TOKEN, CE_JSON)
    url = f"{d.scheme}://127.0.0.1:{d.port}/v1/workers/{wid}/invoke"
    before = processed(d, wid)
    hosts = [h for h in d.get(f"/v1/workers/{wid}").json.get("pids") or []
             if h != d.proc.pid]
    ns0 = cpu_ns(d.proc.pid)
    hs0 = sum(cpu_ns(h) for h in hosts)
    res = run_wrk(url, body, cfg.wrk_s, conns, TOKEN, CE_JSON)
    cpu = cpu_ns(d.proc.pid)
    hs1 = sum(cpu_ns(h) for h in hosts)
    after = processed(d, wid)
    vals = wrk_values(res)
    n = max(after - before, 1)
    vals["master_cpu_us"] = round((cpu - ns0) / 1000 / n, 2)
    # The worker's processes (none in process): the engine's own cost.
    if hosts:
        vals["host_cpu_us"] = round((hs1 - hs0) / 1000 / n, 2)
    return {"values": vals,
            "check": wrk_check(res, before, after, conns),
            "duration_s": cfg.wrk_s, "min_duration_s": cfg.wrk_s,
            "notes": "the issue's 233-byte event, "
                     "application/cloudevents+json"}


def publish_wrk(cfg, d, eng, tmp, conns):
    """wrk's single-event publishes of the issue's 233-byte event to a
    topic one worker takes, over the TCP listener (plain or TLS); the
    clock of master_cpu_us stops once every event is acked, so that it
    holds the whole cost of a publish: the request, the journal, the
    delivery, the echo's output and the ack."""
    topic = f"wrkpub{conns}"
    wid = eng.create(d, topic)
    body = Path(tmp) / "issue-event.json"
    body.write_bytes(ISSUE_EVENT)
    url = f"{d.scheme}://127.0.0.1:{d.port}/v1/topics/{topic}/events"

    def settled(pub0, out0, got0):
        """(published, processed) since the counters' values given, once
        every event published is processed and its output counted."""
        t0 = time.monotonic()
        while True:
            # The tenants' events in: the publishes and the workers'
            # outputs, not the daemon's own events (an idle host's
            # heartbeat, published meanwhile, would never be processed by
            # this worker); the echo's outputs taken out.
            published = (metric_sum(d, "workmanager_tenant_events_in_total")
                         - pub0 - (processed(d, wid, "published") - out0))
            got = processed(d, wid) - got0
            # Equal once every event is processed and its output counted
            # (the two counters move at different points of the flow).
            if got == published:
                return published, got
            if time.monotonic() - t0 > 120:
                raise RuntimeError("events were not all processed in 120 s")
            time.sleep(0.005)

    # A new worker's first second is not what the figures are about.
    pub0 = metric_sum(d, "workmanager_tenant_events_in_total")
    run_wrk(url, body, cfg.wrk_warm_s, conns, TOKEN, CE_JSON)
    settled(pub0, 0, 0)
    pub0 = metric_sum(d, "workmanager_tenant_events_in_total")
    out0, got0 = processed(d, wid, "published"), processed(d, wid)
    ns0 = cpu_ns(d.proc.pid)
    res = run_wrk(url, body, cfg.wrk_s, conns, TOKEN, CE_JSON)
    published, got = settled(pub0, out0, got0)
    vals = wrk_values(res)
    vals["master_cpu_us"] = master_cpu_us(d, ns0, published)
    delete_all(d, [wid])
    errors = res["errors"] + res["non2xx"]
    return {"values": vals,
            "check": check(published, got, errors,
                           rule="wrk's answers <= published <= answers + "
                                "connections = processed, no errors",
                           ok=(res["requests"] <= published
                               <= res["requests"] + conns
                               and got == published and errors == 0)),
            "duration_s": cfg.wrk_s, "min_duration_s": cfg.wrk_s,
            "notes": "the issue's 233-byte event, "
                     "application/cloudevents+json; master_cpu_us until "
                     "the last event is processed"}


# (engine, batch, grouped): the events/s last measured (throughput()).
RATES = {}


def throughput(cfg, d, eng, publishers, batch, group=None, cap0=None):
    """publish -> processed -> acked: `publishers` processes POST for
    cfg.min_s (or until cap events are out), then the clock stops when
    /metrics counts every event acked.  Run again with more events when
    it took less than cfg.min_s."""
    ev = echo_event()
    body, ctype = publish_body(ev, batch)
    # A first run of cap events; more when it ends under the minimum.
    # Enough for every publisher to make a few requests, unless the
    # caller knows the worker to be slow.
    # (A grouped pair's events go one at a time: its first run may leave
    # a publisher idle.)
    cap = max(cap0, batch if group else publishers * batch) if cap0 else \
        max(2000 if cfg.quick else 20000, publishers * batch * 4)
    # After the first run of this engine and shape, its rate says how
    # many events the minimum needs: fewer runs again.
    known = RATES.get((eng.key, batch, bool(group)))
    if known:
        cap = max(cap, int(known * cfg.min_s * 1.5))
    ctx = multiprocessing.get_context("fork")
    for attempt in range(6):
        topic = f"tp{publishers}b{batch}{'g' if group else ''}a{attempt}"
        wids = [eng.create(d, topic, group=group)
                for _ in range(2 if group else 1)]
        acked0 = metric(d, "workmanager_events_acked_total")
        sent, deadline = ctx.Value("q", 0), ctx.Value("d", 0.0)
        ready, go, q = ctx.Queue(), ctx.Event(), ctx.Queue()
        # At most 8 processes, the publishers spread over them as threads.
        nproc = min(publishers, 8)
        procs = [ctx.Process(target=publisher,
                             args=(str(d.socket), topic, body, ctype, batch,
                                   publishers // nproc
                                   + (i < publishers % nproc),
                                   ready, go, deadline, sent, cap, q))
                 for i in range(nproc)]
        for p in procs:
            p.start()
        for _ in procs:  # every publisher connected before the clock
            ready.get()
        hosts = [h for h in (d.get(f"/v1/workers/{w}").json.get("pid")
                             for w in wids) if h and h != d.proc.pid]
        cpu0 = (cpu_ns(d.proc.pid) / 1e9, sum(cpu_s(h) for h in hosts),
                children_cpu_s())
        t0 = time.monotonic()
        deadline.value = t0 + cfg.min_s
        go.set()
        res = [q.get() for _ in procs]
        t_pub = max(r[2] for r in res) - t0
        requests = sum(r[0] for r in res)
        refused = sum(r[1] for r in res)
        total = requests * batch
        # The clock stops at the last ack, not when the publishers'
        # processes are gone (64 exits take a while here).
        while metric(d, "workmanager_events_acked_total") < acked0 + total:
            if time.monotonic() - t0 > 300:
                raise RuntimeError("events were not all acked in 300 s")
            time.sleep(0.005)
        elapsed = time.monotonic() - t0
        for p in procs:
            p.join()
        cpu1 = (cpu_ns(d.proc.pid) / 1e9, sum(cpu_s(h) for h in hosts),
                children_cpu_s())
        if elapsed >= cfg.min_s:
            break
        # Too few events for the minimum: again, with as many as the rate
        # just measured needs, and some.
        cap = int(cap * cfg.min_s / elapsed * 1.5) + batch
    else:
        raise RuntimeError(f"shorter than {cfg.min_s} s after 6 runs")
    RATES[(eng.key, batch, bool(group))] = total / elapsed
    cpu = {k: round((b - a) * 1e6 / max(total, 1), 1) for k, a, b in
           zip(("daemon", "hosts", "publishers"), cpu0, cpu1)}
    got = sum(processed(d, w) for w in wids)
    failed = sum(processed(d, w, "failed") for w in wids)
    acked = metric(d, "workmanager_events_acked_total") - acked0
    delete_all(d, wids)  # their hosts would be running through the next
    shape = "2 workers in one group" if group else "1 worker"
    return {"values": {"events_per_s": round(total / elapsed, 1),
                       "events": total, "publishers": publishers,
                       "batch": batch, "publishing_s": round(t_pub, 3),
                       "cpu_us_per_event": cpu,
                       "master_cpu_us": cpu["daemon"]},
            "check": check(total, got, refused + failed,
                           rule="events published = processed = acked, "
                                "every publish 202, none failed",
                           ok=(got == total == acked and refused == 0
                               and failed == 0)),
            "duration_s": round(elapsed, 3), "min_duration_s": cfg.min_s,
            "worker": f"{shape}: {eng.worker}",
            "notes": f"attempt {attempt + 1}, cap {cap} events; the "
                     "publishers' CPU includes their processes' start and "
                     "exit"}


def crash_recovery(cfg, d, eng):
    """SIGKILL of a busy host: the ms until the replacement host processed
    its first event, and until every event of the backlog was processed
    (the killed host's in-flight events fail with it and are redelivered
    after redelivery_base_delay_ms, 200 ms by default)."""
    if not eng.has_host:
        raise Skip("no host to kill: the worker runs in the daemon")
    # Enough that the host is still busy when the kill lands: the poll
    # that sees k // 10 processed and the kill take milliseconds, while a
    # Python host (prefetching) now does 300 events in about 6.
    k = 2000
    first, whole = [], []
    sent = ok = failed = redelivered = dead = 0
    for i in range(cfg.crashes):
        wid = eng.create(d, f"crash{i}")
        r = d.request("POST", f"/v1/topics/crash{i}/events",
                      raw=json.dumps([echo_event(j) for j in range(k)])
                      .encode(),
                      headers={"Content-Type":
                               "application/cloudevents-batch+json"})
        assert r.status == 202, r
        deadline = time.monotonic() + 60
        while processed(d, wid) < k // 10:
            if time.monotonic() > deadline:
                raise RuntimeError("the worker processed nothing")
            time.sleep(0.001)
        old = d.get(f"/v1/workers/{wid}").json["pid"]
        t0 = time.monotonic()
        os.kill(old, signal.SIGKILL)
        base = None
        while True:
            if time.monotonic() - t0 > 60:
                raise RuntimeError(
                    f"no replacement host processed in 60 s (crash {i}): "
                    + d.get(f"/v1/workers/{wid}").raw.decode()[:600])
            pid = d.get(f"/v1/workers/{wid}").json.get("pid")
            n = processed(d, wid)
            if base is None:
                if pid and pid != old:
                    base = n
            elif n > base:
                first.append((time.monotonic() - t0) * 1000)
                break
            time.sleep(0.001)
        # processed counts successes only, failed the failed attempts.
        while (processed(d, wid) < k
               and processed(d, wid, "dead_lettered") == 0):
            if time.monotonic() - t0 > 120:
                raise RuntimeError("events were not all processed")
            time.sleep(0.001)
        whole.append((time.monotonic() - t0) * 1000)
        sent += k
        ok += processed(d, wid)
        failed += processed(d, wid, "failed")
        redelivered += processed(d, wid, "redelivered")
        dead += processed(d, wid, "dead_lettered")
        delete_all(d, [wid])
    return {"values": {"first_median_ms": round(statistics.median(first), 2),
                       "all_median_ms": round(statistics.median(whole), 2),
                       "all_max_ms": round(max(whole), 2),
                       "crashes": len(whole), "redelivered": redelivered},
            "check": check(sent, ok, dead + failed - redelivered,
                           rule="events sent = processed without error; "
                                "the failed (in flight at the kill) = the "
                                "redelivered; none dead-lettered",
                           ok=(sent == ok and failed == redelivered > 0
                               and dead == 0)),
            "notes": f"{k} events queued per crash, SIGKILL once "
                     f"{k // 10} were processed; /metrics polled every "
                     "~1 ms; redelivery_base_delay_ms at its default, 200"}


def engine_scenarios(cfg, rep, builddir, eng, groups):
    sid = eng.key
    why = eng.missing()
    if why:
        for what in ("cold_start", "invoke_c1", "throughput",
                     "idle_memory", "crash"):
            rep.run(f"{sid}.{what}", f"{eng.label}: {what}",
                    lambda: (_ for _ in ()).throw(Skip(why)),
                    engine=eng.key)
        return
    with tempfile.TemporaryDirectory(prefix="wm-bench-") as tmp:
        d = start_daemon(builddir, tmp, eng)
        try:
            run_engine(cfg, rep, d, eng, tmp, groups)
        finally:
            d.stop()
    if "invoke" in groups:
        tls_scenarios(cfg, rep, builddir, eng)


def tls_scenarios(cfg, rep, builddir, eng):
    """Invoke and single-event publish over the TCP listener with TLS (a
    daemon of its own: `listen` serves HTTPS only once tls_cert_file is
    set)."""
    w = eng.worker
    with tempfile.TemporaryDirectory(prefix="wm-bench-tls-") as tmp:
        d = None
        why = ""
        try:
            cert, key = self_signed(tmp)
            d = start_daemon(builddir, tmp, eng, listen_plaintext="no",
                             tls_cert_file=cert, tls_key_file=key)
        except Exception as e:  # noqa: BLE001 — recorded per scenario
            why = f"no TLS daemon: {type(e).__name__}: {e}"
        try:
            for kind, fn, what in (
                    ("invoke", invoke_wrk, "POST /v1/workers/{id}/invoke"),
                    ("pub", publish_wrk, "POST /v1/topics/{t}/events")):
                sid = f"{eng.key}.{kind}_tls_c8"
                title = (f"{eng.label}: {kind} with wrk over TLS, 8 "
                         "connections")
                if d is None:
                    rep.run(sid, title, lambda: (_ for _ in ()).throw(
                        RuntimeError(why)), eng.key)
                    continue
                rep.run(sid, title, lambda fn=fn: fn(cfg, d, eng, tmp, 8),
                        eng.key, f"{what} over TLS (listen, bearer token)",
                        w)
        finally:
            if d is not None:
                d.stop()


def run_engine(cfg, rep, d, eng, tmp, groups):
    sid, w = eng.key, eng.worker
    uds = "POST /v1/workers/{id}/invoke, control socket (unix)"
    tcp = "POST /v1/workers/{id}/invoke over TCP (listen, bearer token)"
    pub = "POST /v1/topics/{t}/events, control socket (unix)"
    if "cold" in groups:
        rep.run(f"{sid}.cold_start",
                f"{eng.label}: create -> first event processed",
                lambda: cold_start(cfg, d, eng), eng.key,
                "POST /v1/workers then POST .../invoke (unix)", w)
        ids = getattr(cold_start, "ids", [])
        rep.run(f"{sid}.idle_memory", f"{eng.label}: memory of an idle host",
                lambda: idle_memory(d, eng, ids), eng.key, "-", w)
        delete_all(d, ids)
    if "invoke" in groups:
        rep.run(f"{sid}.invoke_c1",
                f"{eng.label}: invoke latency, concurrency 1 (C client)",
                lambda: invoke_rtt(cfg, d, eng, tmp), eng.key, uds, w)
        for c in (1, 8):
            rep.run(f"{sid}.wrk_c{c}",
                    f"{eng.label}: invoke with wrk, {c} connection(s)",
                    lambda c=c: invoke_wrk(cfg, d, eng, tmp, c), eng.key,
                    tcp, w)
        # issue 24: two processes against uWSGI --http-socket's two
        for c in (16, 64) if eng.key == "python" else ():
            rep.run(f"{sid}.wrk2_c{c}",
                    f"{eng.label}: invoke with wrk, {c} connections, "
                    "concurrency 2 (two processes)",
                    lambda c=c: invoke_wrk(cfg, d, eng, tmp, c, 2), eng.key,
                    tcp, w + ", concurrency 2")
        rep.run(f"{sid}.pub_tcp_c8",
                f"{eng.label}: single-event publish with wrk, 8 "
                "connections",
                lambda: publish_wrk(cfg, d, eng, tmp, 8), eng.key,
                "POST /v1/topics/{t}/events over TCP (listen, bearer "
                "token)", w)
    if "throughput" in groups:
        # Where the worker is much slower than the publishers, the wait
        # for the acks would be the run: a smaller first run.
        cap = (500 if cfg.quick else 5000) if eng.key == "python" \
            else None
        for batch in (BATCH, 1):
            for p in PUBLISHERS:
                rep.run(f"{sid}.tput_p{p}_b{batch}",
                        f"{eng.label}: publish -> processed -> acked, "
                        f"{p} publisher(s), batches of {batch}",
                        lambda p=p, b=batch: throughput(cfg, d, eng, p, b,
                                                        cap0=cap),
                        eng.key, pub, w)
        rep.run(f"{sid}.tput_group_p2_b{BATCH}",
                f"{eng.label}: publish -> processed -> acked, grouped pair, "
                f"2 publishers, batches of {BATCH}",
                lambda: throughput(cfg, d, eng, 2, BATCH, group="pair",
                                   cap0=100 if cfg.quick else 1000),
                eng.key, pub, w)
    if "crash" in groups:
        rep.run(f"{sid}.crash",
                f"{eng.label}: host SIGKILL -> redelivered event processed",
                lambda: crash_recovery(cfg, d, eng), eng.key, pub, w)


def master_memory(cfg, builddir, n):
    """Master RSS per registered (stopped) worker at n, then the recovery
    of those n persisted workers."""
    with tempfile.TemporaryDirectory(prefix="wm-bench-") as tmp:
        d = Daemon(builddir, tmp, options={"log_level": "warning",
                                           "store_fsync": "off"})
        d.start()
        try:
            base = rss_kib(d.proc.pid)
            secs = master.register(d, n, clients=4)
            after = rss_kib(d.proc.pid)
            listed = len(d.get("/v1/workers").json["workers"])
            ready_ms, rss_rec = master.recover(d, n)
        finally:
            d.stop()
    return ({"values": {"workers": n, "bytes_per_worker":
                        round((after - base) * 1024 / n),
                        "rss_empty_kib": base, "rss_kib": after,
                        "create_s": round(secs, 2)},
             "check": check(n, listed, rule="workers created = listed")},
            {"values": {"workers": n, "ms": round(ready_ms, 1),
                        "rss_kib": rss_rec},
             "check": check(n, n, rule="recovered = persisted, none failed "
                                       "(asserted by master.recover)")})


# ---- peers -----------------------------------------------------------------

def orig_spawn(cfg):
    """The original's first design: python3 spawned per event, the event
    on stdin, the answer on stdout; a Python driver, one at a time."""
    lat, ok = [], 0
    t0 = time.monotonic()
    for i in range(cfg.spawn_n):
        ev = json.dumps(echo_event(i))
        t = time.perf_counter()
        r = subprocess.run([PY, str(PEERS / "spawn_child.py")], input=ev,
                           capture_output=True, text=True)
        lat.append((time.perf_counter() - t) * 1e6)
        if r.returncode == 0 and json.loads(r.stdout)["data"] == {"n": i}:
            ok += 1
    elapsed = time.monotonic() - t0
    return {"values": {"rps": round(cfg.spawn_n / elapsed, 1),
                       "p50_us": round(pct(lat, 50), 1),
                       "p99_us": round(pct(lat, 99), 1),
                       "p999_us": round(pct(lat, 99.9), 1),
                       "requests": cfg.spawn_n},
            "check": check(cfg.spawn_n, ok),
            "duration_s": round(elapsed, 3),
            "notes": "subprocess.run() per event from a Python driver; no "
                     "HTTP in front (the figure is the design's floor)"}


def orig_persistent(cfg, tmp):
    """The original's second design: one `python3 -E -s` child, events as
    length-prefixed JSON over a unix socket; a Python driver, one at a
    time."""
    import struct
    path = str(Path(tmp) / "child.sock")
    child = subprocess.Popen([PY, "-E", "-s",
                              str(PEERS / "persistent_child.py"), path])
    try:
        deadline = time.monotonic() + 10
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        while True:
            try:
                s.connect(path)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

        def call(msg):
            b = json.dumps(msg).encode()
            s.sendall(struct.pack(">I", len(b)) + b)
            head = b""
            while len(head) < 4:
                head += s.recv(4 - len(head))
            n = struct.unpack(">I", head)[0]
            buf = b""
            while len(buf) < n:
                buf += s.recv(n - len(buf))
            return json.loads(buf)

        warm = 200
        for i in range(warm):
            call(echo_event(i))
        lat = []
        t0 = time.monotonic()
        for i in range(cfg.persist_n):
            t = time.perf_counter()
            call(echo_event(i))
            lat.append((time.perf_counter() - t) * 1e6)
        elapsed = time.monotonic() - t0
        count = call({"count": True})["count"]
        s.close()
    finally:
        child.kill()
        child.wait()
    return {"values": {"rps": round(cfg.persist_n / elapsed, 1),
                       "p50_us": round(pct(lat, 50), 1),
                       "p99_us": round(pct(lat, 99), 1),
                       "p999_us": round(pct(lat, 99.9), 1),
                       "requests": cfg.persist_n},
            "check": check(cfg.persist_n + warm, count),
            "duration_s": round(elapsed, 3),
            "notes": "a Python driver on one connection; no HTTP in front"}


def peer_argv(kind, port):
    app = ["--wsgi-file", str(PEERS / "wsgi_app.py")]
    common = ["--master", "--processes", "2", "--disable-logging",
              "--need-app", "--die-on-term", "--plugin", "python3"]
    if kind == "uwsgi_http":
        # The router keeps connections open (HTTP/1.1 keep-alive).
        return ["uwsgi", "--plugin", "http", "--http",
                f"127.0.0.1:{port}", "--http-keepalive"] + common + app
    if kind == "uwsgi_http_socket":
        # It closes the connection after each answer without saying so,
        # which wrk counts as a read error: the header makes wrk reconnect
        # as it does for gunicorn (sync workers close too).
        return ["uwsgi", "--http-socket", f"127.0.0.1:{port}",
                "--add-header", "Connection: close"] + common + app
    return [PY, "-m", "gunicorn", "--workers", "2", "--worker-class", "sync",
            "--bind", f"127.0.0.1:{port}", "--chdir", str(PEERS),
            "wsgi_app:application"]


def peer_count(dirpath):
    import struct
    return sum(struct.unpack("<Q", f.read_bytes()[:8])[0]
               for f in Path(dirpath).iterdir())


def http_peer(cfg, kind, tmp, conns):
    for tool in ("wrk", "uwsgi" if kind.startswith("uwsgi") else "gunicorn"):
        if not any((Path(p) / tool).exists()
                   for p in ("/usr/bin", "/usr/local/bin")):
            raise Skip(f"{tool} is not installed (scripts/bench-packages)")
    port = free_port()
    counts = Path(tmp) / f"counts-{kind}-{conns}"
    counts.mkdir()
    log = open(Path(tmp) / f"{kind}.log", "wb")
    env = dict(os.environ, WM_BENCH_COUNTS=str(counts))
    p = subprocess.Popen(peer_argv(kind, port), stdout=log, stderr=log,
                         env=env, start_new_session=True)
    log.close()
    body = Path(tmp) / "event.json"
    body.write_text(json.dumps(echo_event()))
    try:
        import http.client
        deadline = time.monotonic() + 20
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("POST", "/", body=body.read_bytes(),
                          headers={"Content-Type": "application/json"})
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{kind} did not answer: "
                                   + (Path(tmp) / f"{kind}.log").read_text(
                                       errors="replace")[-500:])
            time.sleep(0.05)
        before = peer_count(counts)
        res = run_wrk(f"http://127.0.0.1:{port}/", body, cfg.wrk_s, conns)
        after = peer_count(counts)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return {"values": wrk_values(res),
            "check": wrk_check(res, before, after, conns),
            "duration_s": cfg.wrk_s, "min_duration_s": cfg.wrk_s}


PEER_LABELS = {
    "orig_spawn": "original design: python3 per event, event on stdin",
    "orig_persistent": "original design: persistent python3 -E -s, "
                       "length-prefixed JSON on a unix socket",
    "uwsgi_http": "uWSGI --http (router + 2 processes)",
    "uwsgi_http_socket": "uWSGI --http-socket (2 processes)",
    "gunicorn": "gunicorn (2 sync workers)",
}


def peer_scenarios(cfg, rep):
    handler = "bench/peers/handler.py"
    with tempfile.TemporaryDirectory(prefix="wm-bench-peers-") as tmp:
        rep.run("peer.orig_spawn.c1", PEER_LABELS["orig_spawn"],
                lambda: orig_spawn(cfg), "peer",
                "python3 spawned per event, JSON on stdin", handler)
        rep.run("peer.orig_persistent.c1", PEER_LABELS["orig_persistent"],
                lambda: orig_persistent(cfg, tmp), "peer",
                "4-byte length + JSON over a unix socket", handler)
        for kind in ("uwsgi_http", "uwsgi_http_socket", "gunicorn"):
            for c in (1, 8) + ((16, 64) if kind == "uwsgi_http_socket"
                               else ()):  # issue 24's comparison
                rep.run(f"peer.{kind}.wrk_c{c}",
                        f"{PEER_LABELS[kind]}, wrk, {c} connection(s)",
                        lambda k=kind, c=c: http_peer(cfg, k, tmp, c),
                        "peer", "POST / over TCP (loopback), wrk",
                        handler + " behind bench/peers/wsgi_app.py")


# ---- output ----------------------------------------------------------------

def machine():
    def first(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True,
                                  timeout=10).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            return "?"

    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = Path("/proc/meminfo").read_text().split("\n")[0].split()[1]
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "kernel": platform.release(), "cpus": os.cpu_count(),
            "cpu": cpu, "mem_gib": round(int(mem) / 1048576, 1),
            "os": first(["sh", "-c", ". /etc/os-release; "
                         "echo $PRETTY_NAME"]),
            "gcc": first(["gcc", "--version"]),
            "python3": first([PY, "--version"]),
            "uwsgi": first(["uwsgi", "--version"]),
            "gunicorn": first(["gunicorn", "--version"]),
            "wrk": first(["sh", "-c", "wrk -v 2>&1"]),
            "commit": first(["git", "-C", str(TOP), "describe", "--always",
                             "--dirty"]),
            "loadavg": Path("/proc/loadavg").read_text().split()[:3]}


def fmt(v, unit=""):
    if v is None:
        return "—"
    if isinstance(v, float) and v >= 100:
        v = round(v)
    return f"{v:,}{unit}" if isinstance(v, int) else f"{v:,.1f}{unit}"


def ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "—"


def contenders(rep):
    """(label, short label, c=1 values, c=8 values) of every invoke-like
    contender."""
    rows = []
    for cls in ENGINES:
        rows.append((f"workmanager, {cls.label} (invoke, wrk over TCP)",
                     f"wm {cls.key}", rep.get(f"{cls.key}.wrk_c1"),
                     rep.get(f"{cls.key}.wrk_c8")))
    rows.append((PEER_LABELS["orig_spawn"] + " (no HTTP)", "orig. spawn",
                 rep.get("peer.orig_spawn.c1"), None))
    rows.append((PEER_LABELS["orig_persistent"] + " (no HTTP)",
                 "orig. persistent", rep.get("peer.orig_persistent.c1"),
                 None))
    for kind, short in (("uwsgi_http", "uWSGI --http"),
                        ("uwsgi_http_socket", "uWSGI --http-socket"),
                        ("gunicorn", "gunicorn")):
        rows.append((PEER_LABELS[kind], short,
                     rep.get(f"peer.{kind}.wrk_c1"),
                     rep.get(f"peer.{kind}.wrk_c8")))
    return rows


# The rows of the report's master CPU table: (ingress, scenario).
MASTER_CPU_ROWS = (
    ("invoke, unix socket, C client, c=1", "invoke_c1"),
    ("invoke, TCP, wrk c=1", "wrk_c1"),
    ("invoke, TCP, wrk c=8", "wrk_c8"),
    ("invoke, TLS, wrk c=8", "invoke_tls_c8"),
    ("single-event publish, unix socket, 8 publishers", "tput_p8_b1"),
    ("single-event publish, TCP, wrk c=8", "pub_tcp_c8"),
    ("single-event publish, TLS, wrk c=8", "pub_tls_c8"),
    (f"batch of {BATCH}, unix socket, 8 publishers (per event)",
     f"tput_p8_b{BATCH}"),
)


def write_markdown(out, rep, meta, cfg, plots):
    L = []
    a = L.append
    a(f"# workmanager benchmark report ({'quick' if cfg.quick else 'full'}"
      " run)\n")
    a(f"{meta['date']}, commit {meta['commit']}; {meta['cpus']} CPUs "
      f"({meta['cpu']}), {meta['mem_gib']} GiB, {meta['os']}, Linux "
      f"{meta['kernel']}; {meta['gcc']}; {meta['python3']}; uWSGI "
      f"{meta['uwsgi']}; {meta['gunicorn']}; {meta['wrk'].split(' [')[0]}."
      f" Load average at the start {' '.join(meta['loadavg_start'])}, at "
      f"the end {' '.join(meta['loadavg'])}. Figures, not assertions: on a "
      "shared 2-CPU machine they are noisy.\n")
    base = rep.get("native.wrk_c1")
    base8 = rep.get("native.wrk_c8")
    py = rep.get("python.wrk_c1")
    py8 = rep.get("python.wrk_c8")
    a("## Against the peers\n")
    a("Every contender runs the same trivial handler (or, for the native "
      "engine, the same echo in C). Ratios are the contender's figure over "
      "workmanager's: for latency above 1× means the contender is slower, "
      "for requests/s below 1× means it does less.\n")
    a("| contender | p50 µs, c=1 | p99 µs, c=1 | p99.9 µs, c=1 | req/s, c=1 "
      "| req/s, c=8 | p50 vs native | req/s c=8 vs native | p50 vs Python "
      "| req/s c=8 vs Python |")
    a("|---|---|---|---|---|---|---|---|---|---|")
    for label, _, v1, v8 in contenders(rep):
        v1 = v1 or {}
        v8 = v8 or {}
        a(f"| {label} | {fmt(v1.get('p50_us'))} | {fmt(v1.get('p99_us'))} "
          f"| {fmt(v1.get('p999_us'))} | {fmt(v1.get('rps'))} "
          f"| {fmt(v8.get('rps'))} "
          f"| {ratio(v1.get('p50_us'), (base or {}).get('p50_us'))} "
          f"| {ratio(v8.get('rps'), (base8 or {}).get('rps'))} "
          f"| {ratio(v1.get('p50_us'), (py or {}).get('p50_us'))} "
          f"| {ratio(v8.get('rps'), (py8 or {}).get('rps'))} |")
    a("")
    a("## Python invoke against uWSGI --http-socket (issue 24: >= 2.5x)\n")
    a("Both with two processes (the worker at concurrency 2), the same "
      "handler, wrk over TCP in this run; the ratio is workmanager's "
      "requests/s over uWSGI's; CPU µs per request of the master and of "
      "the two Python hosts together (issue 24: host <= 20).\n")
    a("| connections | workmanager, Python req/s | uWSGI --http-socket "
      "req/s | ratio | master / hosts CPU µs |")
    a("|---|---|---|---|---|")
    for c in (16, 64):
        v = rep.get(f"python.wrk2_c{c}") or {}
        w = v.get("rps")
        u = (rep.get(f"peer.uwsgi_http_socket.wrk_c{c}") or {}).get("rps")
        a(f"| {c} | {fmt(w)} | {fmt(u)} | {ratio(w, u)} | "
          f"{fmt(v.get('master_cpu_us'))} / {fmt(v.get('host_cpu_us'))} |")
    a("")
    a("## Engines\n")
    a("| figure | " + " | ".join(cls.label for cls in ENGINES) + " |")
    a("|---|" + "---|" * len(ENGINES))
    rows = [("cold start median / p99 ms", "cold_start",
             lambda v: f"{fmt(v['median_ms'])} / {fmt(v['p99_ms'])}"),
            ("invoke c=1 p50 / p99 / p99.9 µs (C client, unix)",
             "invoke_c1", lambda v: f"{fmt(v['p50_us'])} / "
             f"{fmt(v['p99_us'])} / {fmt(v['p999_us'])}")]
    for b in (BATCH, 1):
        for p in PUBLISHERS:
            rows.append((f"events/s, {p} publisher(s), batch {b}",
                         f"tput_p{p}_b{b}", lambda v: fmt(v["events_per_s"])))
    rows += [(f"events/s, grouped pair, 2 publishers, batch {BATCH}",
              f"tput_group_p2_b{BATCH}", lambda v: fmt(v["events_per_s"])),
             ("idle host USS / PSS KiB", "idle_memory",
              lambda v: f"{fmt(v['uss_kib'])} / {fmt(v['pss_kib'])}"),
             ("host SIGKILL -> replacement's first event / every event "
              "(the in-flight redelivered), median ms",
              "crash", lambda v: f"{fmt(v['first_median_ms'])} / "
              f"{fmt(v['all_median_ms'])}")]
    for label, key, f in rows:
        cells = []
        for cls in ENGINES:
            s = next((x for x in rep.scenarios
                      if x["id"] == f"{cls.key}.{key}"), None)
            if s is None:
                cells.append("—")
            elif s["status"] == "ok":
                cells.append(f(s["values"]))
            else:
                cells.append(s["status"])
        a(f"| {label} | " + " | ".join(cells) + " |")
    a("")
    a("## Master CPU per request (issue 24: invoke <= 25 µs, publish <= "
      "20 µs)\n")
    a("The daemon's CPU (every thread, /proc/PID/task/*/schedstat) over the "
      "run divided by the requests it served; for a publish over TCP or "
      "TLS until the last event is processed, over the unix socket until "
      "the last ack (the journal, the delivery and the ack included); for "
      "a batch per event. The in-process engine runs its worker in the "
      "daemon. At low concurrency each request pays the loop's wake-ups "
      "alone.\n")
    a("| ingress | " + " | ".join(cls.label for cls in ENGINES) + " |")
    a("|---|" + "---|" * len(ENGINES))
    for label, key in MASTER_CPU_ROWS:
        cells = []
        for cls in ENGINES:
            v = rep.get(f"{cls.key}.{key}")
            cells.append(fmt((v or {}).get("master_cpu_us")))
        a(f"| {label} | " + " | ".join(cells) + " |")
    a("")
    a("## Master\n")
    a("| figure | value |")
    a("|---|---|")
    for n in cfg.registered:
        v = rep.get(f"master.rss_{n}")
        if v:
            a(f"| master RSS per registered worker at {n:,} | "
              f"{v['bytes_per_worker']:,} bytes ({v['rss_empty_kib']:,} → "
              f"{v['rss_kib']:,} KiB) |")
        v = rep.get(f"master.recovery_{n}")
        if v:
            a(f"| recovery of {n:,} persisted workers (exec → /health "
              f"Healthy) | {fmt(v['ms'])} ms |")
    a("")
    if plots:
        a("## Plots\n")
        for p in plots:
            a(f"![{p}]({p})")
        a("")
    a("## Every scenario\n")
    a("| id | status | ingress | worker | duration s (min) | sent / "
      "processed / errors | rule | figures or reason |")
    a("|---|---|---|---|---|---|---|---|")
    for s in rep.scenarios:
        c = s.get("check") or {}
        cnt = (f"{c['sent']} / {c['processed']} / {c['errors']}"
               if c else "—")
        dur = f"{s.get('duration_s', '—')}"
        if s.get("min_duration_s"):
            dur += f" ({s['min_duration_s']})"
        what = (json.dumps(s.get("values")) if s["status"] == "ok"
                else s.get("reason", ""))
        if s.get("notes"):
            what += f"; {s['notes']}"
        a(f"| {s['id']} | {s['status']} | {s.get('ingress', '')} | "
          f"{s.get('worker', '')} | {dur} | {cnt} | {c.get('rule', '')} | "
          f"{what} |")
    (out / "report.md").write_text("\n".join(L) + "\n")


def plot(out, rep):
    """PNG plots with gnuplot (pngcairo); the names of those made."""
    if not any((Path(p) / "gnuplot").exists() for p in ("/usr/bin",
                                                        "/usr/local/bin")):
        print("gnuplot is not installed: no plots", file=sys.stderr)
        return []
    made = []
    engines = [c for c in ENGINES if rep.get(f"{c.key}.tput_p1_b{BATCH}")]
    if engines:
        for b in (BATCH, 1):
            dat = out / f"throughput_b{b}.dat"
            lines = ["# publishers " + " ".join(c.key for c in engines)]
            for p in PUBLISHERS:
                lines.append(f"{p} " + " ".join(
                    str((rep.get(f"{c.key}.tput_p{p}_b{b}") or {})
                        .get("events_per_s", "NaN")) for c in engines))
            dat.write_text("\n".join(lines) + "\n")
        script = ["set terminal pngcairo size 900,500",
                  "set output 'throughput.png'", "set logscale x 2",
                  "set logscale y", "set xlabel 'publishers'",
                  "set ylabel 'events/s (log)'", "set key below",
                  "set grid",
                  "set title 'publish -> processed -> acked'",
                  "plot " + ", ".join(
                      f"'throughput_b{b}.dat' using 1:{i + 2} with "
                      f"linespoints title '{c.label}, batch {b}'"
                      for b in (BATCH, 1) for i, c in enumerate(engines))]
        made += gnuplot(out, script, "throughput.png")
    rows = [(short, v1) for _, short, v1, _ in contenders(rep) if v1]
    if rows:
        dat = out / "latency.dat"
        dat.write_text("\n".join(
            f'"{label}" {v["p50_us"]} {v["p99_us"]} {v["p999_us"]}'
            for label, v in rows) + "\n")
        script = ["set terminal pngcairo size 900,500",
                  "set output 'latency.png'", "set style data histogram",
                  "set style histogram cluster gap 1",
                  "set style fill solid border -1", "set logscale y",
                  "set ylabel 'µs (log)'", "set xtics rotate by -30",
                  "set bmargin 6", "set grid ytics",
                  "set title 'one request at a time: latency'",
                  "plot 'latency.dat' using 2:xtic(1) title 'p50', "
                  "'' using 3 title 'p99', '' using 4 title 'p99.9'"]
        made += gnuplot(out, script, "latency.png")
    return made


def gnuplot(out, script, name):
    r = subprocess.run(["gnuplot"], input="\n".join(script) + "\n",
                       cwd=out, capture_output=True, text=True)
    if r.returncode != 0 or not (out / name).exists():
        print(f"gnuplot {name}: {r.stderr}", file=sys.stderr)
        return []
    return [name]


GROUPS = ("master", "cold", "invoke", "throughput", "crash", "peers")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=",".join(GROUPS),
                    help="groups to run: " + ",".join(GROUPS))
    ap.add_argument("--engines", default=",".join(c.key for c in ENGINES))
    ap.add_argument("builddir")
    ap.add_argument("outdir")
    a = ap.parse_args()
    cfg = Config(a.quick)
    groups = set(a.only.split(","))
    builddir = Path(a.builddir).resolve()
    out = Path(a.outdir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rep = Report()
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    t0 = time.monotonic()
    if "master" in groups:
        for n in cfg.registered:
            res = {}

            def mem(n=n):
                res["mem"], res["rec"] = master_memory(cfg, builddir, n)
                return res["mem"]

            rep.run(f"master.rss_{n}",
                    f"master RSS per registered worker at {n}", mem,
                    "master", "POST /v1/workers (start false), unix",
                    "stopped workers of the test engine")
            rep.run(f"master.recovery_{n}",
                    f"recovery of {n} persisted workers",
                    lambda: res["rec"] if "rec" in res else
                    (_ for _ in ()).throw(RuntimeError("not measured")),
                    "master", "exec of the daemon -> GET /health 200",
                    "stopped workers of the test engine")
    for cls in ENGINES:
        if cls.key in a.engines.split(","):
            eng = (cls(builddir, cfg.quick) if cls is DotnetEngine
                   else cls(builddir))
            engine_scenarios(cfg, rep, builddir, eng, groups)
    if "peers" in groups:
        peer_scenarios(cfg, rep)
    meta = machine()
    meta["loadavg_start"] = load0
    meta["wall_s"] = round(time.monotonic() - t0, 1)
    meta["mode"] = "quick" if cfg.quick else "full"
    plots = plot(out, rep)
    (out / "report.json").write_text(json.dumps(
        {"meta": meta, "scenarios": rep.scenarios, "plots": plots},
        indent=1) + "\n")
    write_markdown(out, rep, meta, cfg, plots)
    print(f"bench: {len(rep.scenarios)} scenarios in {meta['wall_s']} s, "
          f"{rep.failed} failed; report in {out}/report.md")
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main())
