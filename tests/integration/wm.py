"""wm.py — start a real workmanagerd in a temp dir and talk to it.

Each Daemon has private paths (state, runtime, socket, engines.d) under a
temp dir, runs in the foreground with its log captured to a file, and is
stopped (SIGTERM, then SIGKILL) when the test ends.  After a test, the log
must hold no ALERT line (STYLE §5).

What the daemon holds is watched from /proc (STYLE §12): start() notes its
process tree (the master, its launcher, the zygotes; by parent pid) and
the descriptors of the master and the launcher; settle() stops what a test
left running and waits until they are back to that (leftovers() says what
is not); stop() fails when a process of the tree outlives the master.

Lifecycle events are read from the log's `lifecycle: {json}` lines until
the broker publishes them on workmanager.lifecycle.
"""

import base64
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections import Counter, namedtuple
from pathlib import Path


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.raw = body
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    @property
    def code(self):
        """The error code of an error answer, else None."""
        if isinstance(self.json, dict) and "error" in self.json:
            return self.json["error"].get("code")
        return None

    def __repr__(self):
        return f"<{self.status} {self.raw[:300]!r}>"


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on (for `listen`)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def b64(text):
    if isinstance(text, str):
        text = text.encode()
    return base64.b64encode(text).decode()


# The user a daemon started as root runs its master as (workmanager.conf(5)
# `user`): a number, so that no account need exist on the test machine; in
# no range of host users (host_uid_base is 3000000).
MASTER_USER = 2990000

# Restarts, redeliveries, handshakes and shutdowns in milliseconds rather
# than seconds: for tests of crashes, refusals and redeliveries.
FAST = {
    "handshake_timeout_ms": 1000,
    "restart_base_delay_ms": 20,
    "restart_max_delay_ms": 100,
    "shutdown_grace_ms": 1000,
    "redelivery_base_delay_ms": 20,
}


def traversable(path):
    """Lets every user search (not list) the directories from the temp
    directory down to path, as a master that dropped to MASTER_USER must
    reach its state under a test's temp dir (pytest makes them 0700)."""
    top = Path(tempfile.gettempdir()).resolve()
    path = Path(path).resolve()
    for d in [path, *path.parents]:
        if d == top or top not in d.parents:
            break
        mode = d.stat().st_mode
        # g+x too: a master in group root (control_socket_group) is judged
        # by the group's bits of root's directories
        if mode & 0o011 != 0o011:
            os.chmod(d, (mode & 0o7777) | 0o011)


# ---- processes and descriptors, from /proc --------------------------------

# starttime (in clock ticks since boot) tells a process from a later one
# that was given its pid; state "Z" is a zombie, as good as gone.
Process = namedtuple("Process", "pid ppid starttime state cmdline")


def processes():
    """Every process now, {pid: Process}."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().rstrip(b"\0").split(b"\0")
        except OSError:
            continue  # gone meanwhile
        # comm, in parentheses, may hold anything: split after its end.
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(name)] = Process(
            int(name), int(fields[1]), int(fields[19]), fields[0],
            " ".join(a.decode(errors="replace") for a in argv))
    return out


def tree(root, table=None):
    """root and its descendants (by parent pid), {pid: Process}."""
    table = processes() if table is None else table
    children = {}
    for p in table.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in table and pid not in out:
            out[pid] = table[pid]
            todo += children.get(pid, [])
    return out


def alive(p, table):
    """Whether process p (a Process) still runs: its pid, not reused."""
    now = table.get(p.pid)
    return now is not None and now.starttime == p.starttime and \
        now.state != "Z"


def descriptors(pid):
    """{fd: what it is} of pid's open descriptors (readlink of
    /proc/PID/fd/N); None when they cannot be read (gone, not ours)."""
    out = {}
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for name in names:
        try:
            out[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            pass  # closed meanwhile
    return out


def polling(pid):
    """Whether pid sleeps in poll(2), by its wchan (the kernel function it
    waits in); None when the kernel does not say (`0`) or pid is gone."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read().strip()
    except OSError:
        return None
    return "poll" in wchan if wchan not in ("", "0") else None


def kind(target):
    """What a descriptor is, without its instance: `socket:[123]` is a
    socket, `pipe:[9]` a pipe; a path is itself."""
    return re.sub(r":\[\d+\]$", "", target)


def grown(before, now, ignore=lambda target: False, spare=None):
    """The descriptors of now (as descriptors() gives them) beyond those
    of before, kind by kind; spare: {kind: how many more are fine}."""
    extra = Counter(kind(t) for t in now.values() if not ignore(t))
    extra.subtract(kind(t) for t in before.values() if not ignore(t))
    extra.subtract(spare or {})
    out = []
    for k, n in sorted(extra.items()):
        if n <= 0:
            continue
        new = [f"fd {fd} -> {t}" for fd, t in sorted(now.items())
               if kind(t) == k and before.get(fd) != t]
        out.append(f"{n} more {k} than at start: " + ", ".join(new))
    return out


class Daemon:
    def __init__(self, builddir, tmp, options=None, env=None, engines=None):
        self.builddir = Path(builddir)
        self.tmp = Path(tmp)
        self.tmp.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            traversable(self.tmp)
        self.state = self.tmp / "state"
        self.run = self.tmp / "run"
        self.socket = self.run / "control.sock"
        self.engines = self.tmp / "engines.d"
        self.logfile = self.tmp / "workmanagerd.log"
        self.options = dict(options or {})
        self.env = dict(env or {})
        self.proc = None
        self.streams = []  # the Streams opened on it, closed by settle()
        self.at_start = None  # (tree, {pid: descriptors}) once started
        self.engines.mkdir(parents=True, exist_ok=True)
        self.write_test_engine()
        for name, text in (engines or {}).items():
            (self.engines / name).write_text(text)

    @property
    def binary(self):
        return self.builddir / "master" / "workmanagerd"

    @property
    def testhost(self):
        return self.builddir / "tests" / "testhost" / "wm-host-test"

    def write_test_engine(self):
        """Engine `test` (application/x-wm-test) runs the test host; the
        test host's handshake modes come from its name, so each gets a
        symlink and an engine of its own (application/x-wm-test-<mode>)."""
        hosts = {"test": ("application/x-wm-test", self.testhost)}
        for mode in ("no_hello", "bad_protocol"):
            link = self.tmp / f"wm-host-test.{mode}"
            if not link.exists():
                link.symlink_to(self.testhost)
            hosts[f"test-{mode.replace('_', '-')}"] = (
                f"application/x-wm-test-{mode.replace('_', '-')}", link)
        for name, (mime, host) in hosts.items():
            (self.engines / f"{name}.engine").write_text(
                "# the protocol test host (tests/testhost)\n"
                f"name = {name}\n"
                f"mime_type = {mime}\n"
                "language = test\n"
                f"host = {host}\n"
                "spawn = exec\n"
                "protocol = 1\n"
                "description = test host\n")

    def argv(self):
        opts = {
            "state_dir": str(self.state),
            "runtime_dir": str(self.run),
            "control_socket": str(self.socket),
            "engines_dir": str(self.engines),
            "log_level": "debug",
            "token_file": str(self.tmp / "token"),
            # Each test's own: the machine-wide default would make every
            # daemon of concurrent test runs refuse the others' ranges.
            "host_uid_lock_dir": str(self.tmp / "uids"),
            # Tests that set `listen` use 127.0.0.1 with plain HTTP;
            # test_tls.py sets the TLS keys (and "no" to see refusals).
            "listen_plaintext": "loopback",
        }
        if os.geteuid() == 0:
            opts["user"] = str(MASTER_USER)
        opts.update(self.options)
        argv = [str(self.binary), "--foreground",
                "--config", str(self.tmp / "none.conf")]
        for k, v in opts.items():
            argv += ["-o", f"{k}={v}"]
        return argv

    def start(self, wait_healthy=True):
        (self.tmp / "none.conf").write_text("# empty\n")
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        env.update(self.env)
        log = open(self.logfile, "ab")
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=log,
                                     env=env)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"workmanagerd exited {self.proc.returncode}:\n"
                    + self.log())
            if self.socket.exists():
                try:
                    r = self.get("/health")
                    if not wait_healthy or r.status == 200:
                        self.at_start = self.holdings(deadline)
                        return self
                except OSError:
                    pass
            time.sleep(0.02)
        raise AssertionError("workmanagerd did not become healthy:\n"
                             + self.log())

    def request(self, method, path, body=None, headers=None, raw=None,
                timeout=30):
        conn = UnixHTTPConnection(str(self.socket), timeout=timeout)
        hdrs = dict(headers or {})
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        out = Response(r.status, dict(r.getheaders()), r.read())
        conn.close()
        return out

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body=body, **kw)

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, body=body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def create(self, code="echo", expect=201, **fields):
        body = {"mime_type": "application/x-wm-test", "topic": "t",
                "code": {"content": b64(code)}}
        body.update(fields)
        r = self.post("/v1/workers", body)
        assert r.status == expect, r
        return r.json

    def invoke(self, worker, type_="echo", data=None, **ext):
        ev = {"specversion": "1.0", "id": "e1", "source": "test",
              "type": type_}
        if data is not None:
            ev["data"] = data
        ev.update(ext)
        return self.post(f"/v1/workers/{worker}/invoke", ev)

    def log(self):
        try:
            return self.logfile.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def lifecycle(self, worker_id=None):
        """The lifecycle events logged so far, oldest first."""
        out = []
        for line in self.log().splitlines():
            i = line.find("lifecycle: {")
            if i < 0:
                continue
            ev = json.loads(line[i + len("lifecycle: "):])
            if worker_id is None or ev["subject"] == worker_id:
                out.append(ev)
        return out

    def lifecycle_names(self, worker_id=None):
        prefix = "com.virtufin.workmanager.lifecycle."
        return [e["type"][len(prefix):] for e in self.lifecycle(worker_id)]

    def wait_for(self, pred, timeout=15, what="condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}\n" + self.log())

    def stop(self, timeout=20):
        """SIGTERM; returns the exit status once the log is checked clean
        (no alert, no sanitizer report) and every process of the daemon's
        tree is gone (no orphaned host, launcher or zygote)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        before = tree(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("workmanagerd ignored SIGTERM\n" + self.log())
        self.check_clean()
        self.check_gone(before)
        return rc

    def check_gone(self, before, timeout=5):
        """Waits until no process of before (a tree() of the daemon) runs
        any more: the master has exited, its launcher and the hosts follow
        it within timeout, else AssertionError names the survivors."""
        deadline = time.monotonic() + timeout
        while True:
            table = processes()
            left = [p for p in before.values() if alive(p, table)]
            if not left:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    "processes of the daemon's tree outlive it:\n" +
                    "\n".join(f"pid {p.pid} (parent {p.ppid}): {p.cmdline}"
                              for p in left))
            time.sleep(0.05)

    # ---- back to where it started (STYLE §12) ----------------------------

    def holdings(self, deadline=None):
        """(tree, {pid: descriptors}): the daemon's processes and the
        descriptors of the master and of its launcher (a child with the
        master's command line: forked, not exec'd).  With a deadline,
        first waits (until then) for the launcher to be ready: the master
        answers before the launcher has set itself up (its signalfd,
        filters, network namespaces, zygotes), and then it sleeps in its
        poll loop.  A launcher read before that (a kernel that does not
        say where a process sleeps) has None for its descriptors."""
        while True:
            procs = tree(self.proc.pid)
            me = procs[self.proc.pid].cmdline
            launchers = [p.pid for p in procs.values()
                         if p.ppid == self.proc.pid and p.cmdline == me]
            ready = [polling(pid) for pid in launchers]
            if (deadline is None or all(ready) or None in ready
                    or time.monotonic() > deadline):
                break
            time.sleep(0.01)
        fds = {self.proc.pid: descriptors(self.proc.pid)}
        for pid, ok in zip(launchers, ready):
            fds[pid] = descriptors(pid) if deadline is None or ok else None
        return procs, fds

    def pool_hosts(self):
        """The pids of the warm pools' hosts (engines.h `warm`) started
        and not taken by a worker, from the log."""
        log = self.log()
        started = re.findall(r"engine \S+: pool host \S+ started, pid (\d+)",
                             log)
        taken = re.findall(r"takes host pid (\d+) from the \S+ pool", log)
        return {int(p) for p in set(started) - set(taken)}

    def journal_segment(self, target):
        """Whether target (a descriptor's) is a journal segment: the
        journal opens them as it needs them.  (A deleted one reads
        `... (deleted)` and is none.)"""
        return (target.startswith(str(self.state / "journal") + "/")
                and target.endswith(".wmj"))

    def resident_libraries(self):
        """The memfds the master has mapped (/proc/PID/maps): an in-process
        library that dlclose() cannot unload (C++ unique symbols) keeps
        its descriptor for good (hosts/native/loader.c)."""
        out = set()
        with open(f"/proc/{self.proc.pid}/maps") as f:
            for line in f:
                fields = line.rstrip("\n").split(None, 5)
                if len(fields) == 6 and fields[5].startswith("/memfd:"):
                    out.add(fields[5])
        return out

    def leftovers(self):
        """What the daemon holds now beyond what it held at start, as
        lines (none when nothing).  Allowed beyond it: the engines'
        zygotes (a `--zygote` process whose parent is none: the forks of
        a zygote are its hosts), the warm pools' hosts with their inits,
        one socket in the master per pool host (its channel), journal
        segments, resident in-process libraries.  The launcher's
        descriptors are compared while no pool host runs (it holds a pool
        host's cgroup files and exit pipe)."""
        start_procs, start_fds = self.at_start
        procs, fds = self.holdings()

        def zygote(p):
            parent = procs.get(p.ppid)
            return ("--zygote" in p.cmdline.split() and parent is not None
                    and "--zygote" not in parent.cmdline.split())

        kept = {pid for pid, p in procs.items()
                if (pid in start_procs and alive(start_procs[pid], procs))
                or zygote(p)}
        pool = self.pool_hosts() & set(procs)
        for pid in pool:
            while pid in procs and pid not in kept:
                kept.add(pid)
                pid = procs[pid].ppid
        out = [f"process {p.pid} (parent {p.ppid}): {p.cmdline[:160]}"
               for pid, p in sorted(procs.items()) if pid not in kept]
        for pid, before in start_fds.items():
            now = fds.get(pid)
            if before is None or now is None:
                continue  # unreadable, or gone (reported above)
            if pid == self.proc.pid:
                resident = self.resident_libraries()
                name = "the master"
                what = grown(before, now,
                             lambda t: self.journal_segment(t)
                             or t in resident,
                             {"socket": len(pool)})
            elif not pool:
                name = f"the launcher (pid {pid})"
                # Its network namespaces made ahead (sandbox/netpool.c,
                # SANDBOX_NETPOOL_MAX = 2) are refilled after each spawn:
                # how many it holds at a snapshot is a matter of timing.
                what = grown(before, now, spare={"net": 2})
            else:
                continue
            out += [f"{name}: {line}" for line in what]
        return out

    def settle(self):
        """Ends what a test left running — its event streams, every
        worker's hosts (POST /v1/workers/{id}/stop) — and waits until the
        daemon holds what it held at start (leftovers()), past the hosts'
        shutdown grace; else AssertionError lists what it still holds."""
        for s in self.streams:
            s.close()
        r = self.get("/v1/workers")
        assert r.status == 200, r
        for w in r.json["workers"]:
            r = self.post(f"/v1/workers/{w['id']}/stop")
            assert r.status == 200, r
        grace = int(self.options.get("shutdown_grace_ms", 10000)) / 1000
        deadline = time.monotonic() + grace + 10
        while True:
            left = self.leftovers()
            if not left:
                return
            if time.monotonic() > deadline:
                raise AssertionError(
                    "the daemon holds more than at start once its workers "
                    "are stopped:\n" + "\n".join(left))
            time.sleep(0.05)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def check_clean(self):
        alerts = [l for l in self.log().splitlines() if "ALERT" in l]
        assert not alerts, "\n".join(alerts)
        for marker in ("AddressSanitizer", "runtime error:",
                       "LeakSanitizer"):
            assert marker not in self.log(), self.log()


class Stream:
    """A Server-Sent Events subscription (GET /v1/topics/{topic}/events),
    read on a thread; events() returns the events received so far as
    parsed JSON."""

    def __init__(self, daemon, topic, tenant=None):
        import queue
        import threading
        self.events_q = queue.Queue()
        self.received = []
        path = f"/v1/topics/{topic}/events"
        if tenant:
            path += f"?tenant={tenant}"
        self.conn = UnixHTTPConnection(str(daemon.socket), timeout=120)
        self.conn.request("GET", path)
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.read()
        first = self.resp.readline()  # ": subscribed": the stream is live
        assert first.startswith(b":"), first
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        daemon.streams.append(self)

    def _read(self):
        data = []
        try:
            for raw in iter(self.resp.readline, b""):
                line = raw.decode().rstrip("\n")
                if line.startswith("data: "):
                    data.append(line[6:])
                elif line == "" and data:
                    self.events_q.put(json.loads("\n".join(data)))
                    data = []
        except (OSError, ValueError, AttributeError):
            pass  # closed under the reader (close())

    def events(self):
        while not self.events_q.empty():
            self.received.append(self.events_q.get())
        return self.received

    def wait(self, n, timeout=15, what="events"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.events()) >= n:
                return self.received
            time.sleep(0.02)
        raise AssertionError(
            f"{what}: {len(self.events())} of {n} events arrived: "
            f"{self.received}")

    def close(self):
        """Ends the subscription (again: a no-op)."""
        try:
            if self.conn.sock is not None:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()


def event(type_="echo", id_=None, data=None, **ext):
    ev = {"specversion": "1.0", "id": id_ or f"ev-{time.monotonic_ns()}",
          "source": "test", "type": type_}
    if data is not None:
        ev["data"] = data
    ev.update(ext)
    return ev


def publish(daemon, topic, events, tenant=None):
    """Publishes one event (a dict) or a batch (a list)."""
    path = f"/v1/topics/{topic}/events"
    if tenant:
        path += f"?tenant={tenant}"
    if isinstance(events, list):
        ct = "application/cloudevents-batch+json"
    else:
        ct = "application/cloudevents+json"
    return daemon.request("POST", path, raw=json.dumps(events).encode(),
                          headers={"Content-Type": ct})


def metric(daemon, name, **labels):
    """The value of one sample of /metrics (0 when absent)."""
    text = daemon.get("/metrics").raw.decode()
    want = name
    if labels:
        want += "{" + ",".join(f'{k}="{v}"' for k, v in labels.items())
    total = 0.0
    found = False
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        if key == want or (labels and key.startswith(want)
                           and key[len(want)] in ",}"):
            total += float(value)
            found = True
    return total if found else 0.0
