"""wm.py — start a real workmanagerd in a temp dir and talk to it.

Each Daemon has private paths (state, runtime, socket, engines.d) under a
temp dir, runs in the foreground with its log captured to a file, and is
stopped (SIGTERM, then SIGKILL) when the test ends.  After a test, the log
must hold no ALERT line (STYLE §5).

Lifecycle events are read from the log's `lifecycle: {json}` lines until
the broker publishes them on workmanager.lifecycle.
"""

import base64
import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
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


def b64(text):
    if isinstance(text, str):
        text = text.encode()
    return base64.b64encode(text).decode()


# The user a daemon started as root runs its master as (workmanager.conf(5)
# `user`): a number, so that no account need exist on the test machine; in
# no range of host users (host_uid_base is 3000000).
MASTER_USER = 2990000


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
        (no alert, no sanitizer report)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("workmanagerd ignored SIGTERM\n" + self.log())
        self.check_clean()
        return rc

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
        try:
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
