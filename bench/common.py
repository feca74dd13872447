"""bench/common.py — what the benchmark scripts share: reading a
process's memory and CPU from /proc, percentiles, the publishing client
and the wait for the broker's acks.

bench/master.py, messages.py and native.py measure one part each and
bench/suite.py (bench/run) runs them all in one invocation; they import
these rather than each keeping a copy.  The daemon itself is started by
tests/integration/wm.py, as in the tests.
"""

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
for _d in (TOP / "tests" / "integration",
           TOP / "tests" / "workers" / "native"):
    if str(_d) not in sys.path:
        sys.path.insert(0, str(_d))

from wm import UnixHTTPConnection, metric  # noqa: E402


def rss_kib(pid):
    """VmRSS of process pid, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def smaps_rollup(pid):
    """{"rss", "pss", "uss"} of process pid in KiB, from
    /proc/PID/smaps_rollup (USS: its private clean and dirty pages)."""
    v = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
            v[parts[0][:-1]] = int(parts[1])
    return {"rss": v["Rss"], "pss": v["Pss"],
            "uss": v.get("Private_Clean", 0) + v.get("Private_Dirty", 0)}


def pct(values, p):
    """The p-th percentile of values (nearest rank, no interpolation)."""
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p / 100))]


def cpu_s(pid):
    """CPU seconds (user + system, every thread) of process pid so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    # After the command: state is field 3, utime 14 and stime 15.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_ns(pid):
    """CPU nanoseconds (every thread) of process pid so far, from
    /proc/PID/task/*/schedstat: nanosecond resolution where /proc/PID/stat
    counts clock ticks (10 ms), so that a run of a second gives a figure
    per request to a fraction of a microsecond."""
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((t / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total


def children_cpu_s():
    """CPU seconds of this process's reaped children so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def publish_body(ev, batch):
    """(body, Content-Type) of a publish of ev: alone when batch is 1,
    else batch copies of it in one application/cloudevents-batch+json."""
    if batch > 1:
        return (json.dumps([ev] * batch).encode(),
                "application/cloudevents-batch+json")
    return json.dumps(ev).encode(), "application/cloudevents+json"


def client(sock, topic, body, ctype, requests, out):
    """A publishing client (run in a process of its own): POSTs body to
    topic `requests` times on one keep-alive connection to the control
    socket, then puts the count of answers other than 202 on out."""
    conn = UnixHTTPConnection(sock, timeout=120)
    bad = 0
    for _ in range(requests):
        conn.request("POST", f"/v1/topics/{topic}/events", body=body,
                     headers={"Content-Type": ctype})
        r = conn.getresponse()
        r.read()
        if r.status != 202:
            bad += 1
    conn.close()
    out.put(bad)


def publisher(sock, topic, body, ctype, batch, conns, ready, go, deadline,
              sent, cap, out):
    """A publishing client bounded by time and count (bench/suite.py), run
    in a process of its own with `conns` publishers, each a thread with
    its own keep-alive connection (64 processes would cost this 2-core
    machine more than the daemon): connects them, puts None on ready and
    waits for the Event go; then each POSTs body as client() does until
    the time.monotonic() deadline (a shared multiprocessing.Value, set
    before go) has passed or the shared counter sent (events published by
    every publisher) has reached cap.  Puts (requests made, answers not
    202, time.monotonic() of the last answer) on out."""
    conn_list = [UnixHTTPConnection(sock, timeout=120) for _ in range(conns)]
    for c in conn_list:
        c.connect()
    totals = []

    def run(conn):
        bad = made = 0
        while time.monotonic() < until:
            with sent.get_lock():
                if sent.value >= cap:
                    break
                sent.value += batch
            conn.request("POST", f"/v1/topics/{topic}/events", body=body,
                         headers={"Content-Type": ctype})
            r = conn.getresponse()
            r.read()
            made += 1
            if r.status != 202:
                bad += 1
        totals.append((made, bad, time.monotonic()))
        conn.close()

    ready.put(None)
    go.wait()
    until = deadline.value
    threads = [threading.Thread(target=run, args=(c,)) for c in conn_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.put((sum(t[0] for t in totals), sum(t[1] for t in totals),
             max(t[2] for t in totals)))


def http_rtt(builddir, sock, method, path, body_file, n):
    """bench/http_rtt's client-side round trips of n sequential requests
    on one keep-alive connection to the control socket (after 500 of
    warm-up): (p50, p99, p99.9) in microseconds; every answer 2xx."""
    r = subprocess.run([str(Path(builddir) / "bench" / "http_rtt"), str(sock),
                        method, path, str(body_file or "-"), str(n)],
                       capture_output=True, text=True, check=True)
    p50, p99, p999, status = r.stdout.split()
    assert status.startswith("2"), r.stdout
    return float(p50), float(p99), float(p999)


def wait_acked(d, total, t0, timeout=600):
    """Waits until /metrics counts `total` events acked; the seconds since
    t0 (time.monotonic()) then."""
    while metric(d, "workmanager_events_acked_total") < total:
        if time.monotonic() - t0 > timeout:
            raise RuntimeError("events were not all acked")
        time.sleep(0.01)
    return time.monotonic() - t0
