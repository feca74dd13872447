#!/usr/bin/python3
"""bench/soak.py — the soak run of issue 21: minutes of mixed publish,
invoke, create and delete against one daemon while hosts, the Python
zygote, the launcher and the master are killed at random; at the end a
ledger of every event and the master's RSS, descriptors and threads.

    /usr/bin/python3 bench/soak.py [--seconds N] [--builddir DIR]
                                   [--seed N] [--out FILE]

Run as root (the sandbox, the launcher) against a build with the Python
engine (default builddir: build/).  Nothing here is timed: the figures are
counts, and the exit status is 1 when the ledger finds an accepted event
lost, an unexpected dead letter, or a daemon that did not come back.

The ledger.  Two Python workers, `ledger-a` and `ledger-b`, subscribe to
the topic `soak`; each prints `SOAK <name> <id>` for every event it
processes, and the host's stdout reaches the daemon's log file, which
outlives every kill (the master is restarted on the same state directory
and appends to it).  One event in POISON_EVERY carries `poison`: both
workers loop on it until their limits.timeout_ms kills the host (the
sandbox leaves pure Python no quicker way to die), so it must end in
`soak-dead` with reason `timeout`; a
third worker, `dlq`, subscribes to `soak-dead` and prints `DEAD <id>
<reason>`.  An operator thread starts a worker that its poison events put
into `failed`, as an operator would (`wmctl start`).

Each event accepted with 202 must be processed by both ledger workers
(more than once only if a master or host kill caught it in flight:
counted as duplicates, at-least-once); a publish whose answer was lost to
a master kill is "uncertain" (its events may or may not exist) and is
published again under new ids.  Refusals (503 with Retry-After) are
retried after the delay the daemon asked for.

Alongside: an invoker calls an echo worker in a loop; a churner creates
and deletes a worker every CHURN_S seconds; the chaos thread kills, every
3 to 8 seconds, one of: a ledger worker's host, the zygote, the launcher,
or (one time in five) the master, which it then starts again.  A daemon
that exits by itself (a launcher's death ends it, by design) is started
again as the unit's Restart=on-failure would, and counted.
"""

import argparse
import json
import os
import random
import re
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOP / "tests" / "integration"))

import pyhost_lib  # noqa: E402
import wm  # noqa: E402

POISON_EVERY = 701
POISON_TIMEOUT_MS = 300
BATCH = 20
CHURN_S = 2.0

LEDGER = """
def Process(event):
    print("SOAK {name} " + event["id"], flush=True)
    data = event.get("data") or {{}}
    if isinstance(data, dict) and data.get("poison"):
        while True:  # past limits.timeout_ms: the host is killed
            pass
    return None
"""

DLQ = """
def Process(event):
    print("DEAD " + event["id"] + " "
          + str(event.get("deadletterreason")) + " "
          + str(event.get("deliverycount")), flush=True)
    return None
"""

ECHO = """
def Process(event):
    return {"specversion": "1.0", "id": event["id"], "source": "soak",
            "type": "echo.out", "data": event.get("data")}
"""


def comm(pid):
    """A process's name (/proc/PID/comm), or "" once it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def proc_figures(pid):
    """RSS (KiB), open descriptors and threads of a process."""
    out = {"pid": pid}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    out["rss_kib"] = int(line.split()[1])
                elif line.startswith("Threads:"):
                    out["threads"] = int(line.split()[1])
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        pass
    return out


class Soak:
    def __init__(self, args, tmp):
        self.args = args
        self.rng = random.Random(args.seed)
        self.d = pyhost_lib.daemon(args.builddir, tmp, options={
            "journal_fsync": "batch", "idle_timeout_s": 0,
            "restart_base_delay_ms": 50, "restart_max_delay_ms": 500})
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.down = threading.Event()  # the master is being restarted
        self.accepted = {}  # id -> poison?
        self.uncertain = set()
        self.counts = {k: 0 for k in (
            "publish_202", "publish_refused", "publish_lost_answer",
            "publish_other", "invoke_200", "invoke_refused", "invoke_other",
            "created", "deleted", "churn_errors", "operator_starts")}
        self.kills = {k: 0 for k in ("host", "zygote", "launcher", "master")}
        # Exits of the daemon the chaos did not ask for (a launcher's
        # death ends it, by design): started again, as systemd's
        # Restart=on-failure does.
        self.exits = []
        self.figures = []
        self.chaos_error = None
        self.workers = {}
        self.seq = 0

    # ---- setup ------------------------------------------------------------

    def create(self, name, code, topic, **fields):
        r = self.d.post("/v1/workers", dict({
            "name": name, "mime_type": pyhost_lib.MIME, "topic": topic,
            "code": {"content": wm.b64(textwrap.dedent(code))}}, **fields))
        if r.status != 201:
            raise SystemExit(f"soak: create {name}: {r}")
        self.workers[name] = r.json["id"]

    def setup(self):
        self.d.start()
        for name in ("ledger-a", "ledger-b"):
            self.create(name, LEDGER.format(name=name), "soak",
                        limits={"timeout_ms": POISON_TIMEOUT_MS})
        self.create("dlq", DLQ, "soak-dead")
        self.create("echo", ECHO, "echo")
        self.sample("start")

    def sample(self, when):
        f = proc_figures(self.d.proc.pid)
        f["when"] = when
        self.figures.append(f)

    # ---- the load ---------------------------------------------------------

    def request(self, fn):
        """fn() unless the master is down; None on a connection error."""
        if self.down.is_set():
            time.sleep(0.05)
            return None
        try:
            return fn()
        except OSError:
            return None

    def publisher(self):
        while not self.stop.is_set():
            with self.lock:
                first = self.seq
                self.seq += BATCH
            evs, poison = [], {}
            for n in range(first, first + BATCH):
                p = n % POISON_EVERY == POISON_EVERY - 1
                ev = wm.event("soak", id_=f"s-{n}",
                              data={"n": n, "poison": p})
                evs.append(ev)
                poison[ev["id"]] = p
            while not self.stop.is_set():
                r = self.request(lambda: wm.publish(self.d, "soak", evs))
                if r is None:
                    with self.lock:
                        self.counts["publish_lost_answer"] += 1
                        self.uncertain.update(poison)
                    break  # published again under new ids
                if r.status == 202:
                    with self.lock:
                        self.counts["publish_202"] += 1
                        self.accepted.update(poison)
                    break
                if r.status in (503, 507, 429):
                    with self.lock:
                        self.counts["publish_refused"] += 1
                    delay = float(r.headers.get("Retry-After", "1"))
                    self.stop.wait(min(delay, 2.0))
                    continue
                with self.lock:
                    self.counts["publish_other"] += 1
                    self.uncertain.update(poison)
                break
            self.stop.wait(self.args.pause)

    def invoker(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            wid = self.workers["echo"]
            r = self.request(lambda: self.d.post(
                f"/v1/workers/{wid}/invoke",
                wm.event("echo", id_=f"i-{n}", data={"n": n}),
                headers={"Content-Type": "application/cloudevents+json"},
                timeout=10))
            key = ("invoke_200" if r is not None and r.status == 200
                   else "invoke_refused" if r is None or r.status == 503
                   else "invoke_other")
            with self.lock:
                self.counts[key] += 1
            time.sleep(0.02)

    def churner(self):
        n = 0
        while not self.stop.wait(CHURN_S):
            n += 1
            r = self.request(lambda: self.d.post("/v1/workers", {
                "name": f"churn-{n}", "mime_type": pyhost_lib.MIME,
                "topic": "churn",
                "code": {"content": wm.b64(textwrap.dedent(ECHO))}}))
            if r is None or r.status != 201:
                with self.lock:
                    self.counts["churn_errors"] += 1
                continue
            self.counts["created"] += 1
            wid = r.json["id"]
            r = self.request(lambda: self.d.delete(f"/v1/workers/{wid}"))
            key = "deleted" if r is not None and r.status in (200, 204) \
                else "churn_errors"
            with self.lock:
                self.counts[key] += 1

    def operator(self):
        """Starts a worker its poison events put into `failed`."""
        while not self.stop.wait(1.0):
            self.start_failed()

    def start_failed(self):
        r = self.request(lambda: self.d.get("/v1/workers"))
        if r is None or r.status != 200:
            return
        for w in r.json["workers"]:
            if w.get("state") == "failed":
                self.request(lambda: self.d.post(
                    f"/v1/workers/{w['id']}/start"))
                with self.lock:
                    self.counts["operator_starts"] += 1

    # ---- chaos ------------------------------------------------------------

    def victims(self, kind):
        procs = wm.processes()
        mine = wm.tree(self.d.proc.pid, procs)
        if kind == "zygote":
            def zygote(p):
                parent = procs.get(p.ppid)
                return ("--zygote" in p.cmdline.split() and parent
                        and "--zygote" not in parent.cmdline.split())
            return [p.pid for p in mine.values() if zygote(p)]
        if kind == "launcher":
            return [p.pid for p in mine.values()
                    if p.ppid == self.d.proc.pid
                    and comm(p.pid) == "wm-launcher"]
        if kind == "host":
            out = []
            for name in ("ledger-a", "ledger-b"):
                r = self.request(lambda: self.d.get(
                    f"/v1/workers/{self.workers[name]}"))
                if r is not None and r.status == 200:
                    out += [p for p in r.json.get("pids") or [] if p]
            return out
        return [self.d.proc.pid]

    def chaos(self):
        try:
            self.chaos_loop()
        except Exception as e:  # a soak without its kills proves nothing
            self.chaos_error = repr(e)
            raise

    def restart_if_exited(self):
        """Starts the daemon again if it exited on its own (the unit's
        Restart=on-failure); under self.down so the load pauses."""
        if self.d.proc.poll() is None:
            return
        self.exits.append(self.d.proc.returncode)
        self.down.set()
        time.sleep(0.3)
        self.d.start()
        self.down.clear()

    def chaos_loop(self):
        while not self.stop.wait(self.rng.uniform(3, 8)):
            self.restart_if_exited()
            kind = self.rng.choice(["host", "host", "zygote", "launcher",
                                    "master"])
            pids = self.victims(kind)
            if not pids:
                continue
            if kind == "master":
                self.sample(f"before master kill {self.kills['master'] + 1}")
                self.down.set()
                self.d.kill9()
                time.sleep(0.3)
                self.d.start()
                self.down.clear()
            else:
                try:
                    os.kill(self.rng.choice(pids), signal.SIGKILL)
                except ProcessLookupError:
                    continue
            self.kills[kind] += 1

    # ---- the run and the ledger ------------------------------------------

    def run(self):
        threads = [threading.Thread(target=t, daemon=True) for t in (
            self.publisher, self.invoker, self.churner, self.operator,
            self.chaos)]
        for t in threads:
            t.start()
        self.stop.wait(self.args.seconds)
        self.stop.set()
        for t in threads:
            t.join(60)
        self.drain()
        self.sample("end")

    def seen(self):
        log = self.d.log()
        done = {"ledger-a": {}, "ledger-b": {}}
        for m in re.finditer(r"SOAK (ledger-[ab]) (s-\d+)", log):
            d = done[m.group(1)]
            d[m.group(2)] = d.get(m.group(2), 0) + 1
        dead = {}
        for m in re.finditer(r"DEAD (s-\d+) (\S+) (\S+)", log):
            dead.setdefault(m.group(1), []).append(m.group(2))
        return done, dead

    def missing(self):
        done, dead = self.seen()
        out = []
        for i, poison in self.accepted.items():
            if poison:
                if len(dead.get(i, [])) < 2:
                    out.append(i)
            elif any(i not in d for d in done.values()):
                out.append(i)
        return out

    def drain(self, timeout=180):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.restart_if_exited()
            self.start_failed()
            if not self.missing():
                return
            time.sleep(1)

    def ledger(self):
        done, dead = self.seen()
        good = [i for i, p in self.accepted.items() if not p]
        poison = [i for i, p in self.accepted.items() if p]
        out = {"accepted": len(self.accepted), "poison": len(poison),
               "uncertain": len(self.uncertain)}
        lost, dups, wrong_dead = [], 0, []
        for i in good:
            if i in dead:
                wrong_dead.append(f"{i} dead-lettered {dead[i]}")
            for name, d in done.items():
                if i in d:
                    dups += d[i] - 1
                elif i not in dead:
                    lost.append(f"{i} never processed by {name}")
        for i in poison:
            reasons = dead.get(i, [])
            # timeout, or crash when a chaos kill caught it in the host
            if len(reasons) < 2 or not set(reasons) <= {"timeout", "crash"}:
                wrong_dead.append(f"poison {i}: dead letters {reasons}")
        extra = [i for i in dead
                 if i not in self.accepted and i not in self.uncertain]
        out.update({
            "processed_once_by_both": sum(
                1 for i in good if all(d.get(i) == 1 for d in done.values())),
            "duplicates": dups, "lost": len(lost),
            "wrong_dead_letters": len(wrong_dead), "unknown_dead": len(extra),
            "examples": lost[:10] + wrong_dead[:10]})
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--builddir", default=str(TOP / "build"))
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--pause", type=float, default=0.1,
                    help="seconds between a publisher's batches")
    ap.add_argument("--out", help="write the report as JSON here too")
    ap.add_argument("--tmp", default=None,
                    help="the daemon's directory (default: a new one)")
    args = ap.parse_args()
    import tempfile
    tmp = args.tmp or tempfile.mkdtemp(prefix="wm-soak-")
    soak = Soak(args, tmp)
    soak.setup()
    began = time.monotonic()
    try:
        soak.run()
        report = {"seed": args.seed, "seconds": round(
            time.monotonic() - began, 1), "dir": tmp,
            "counts": soak.counts, "kills": soak.kills,
            "chaos_error": soak.chaos_error,
            "daemon_exits": soak.exits,
            "ledger": soak.ledger(), "master": soak.figures}
    finally:
        soak.d.stop()
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    led = report["ledger"]
    return 1 if (led["lost"] or led["wrong_dead_letters"]
                 or report["chaos_error"]) else 0


if __name__ == "__main__":
    sys.exit(main())
