"""nats_lib.py — real nats-server processes for the NATS tests (issue 23):
NatsServer (one JetStream server of the test's own on a free loopback
port, its store under the test's directory), the `nats` fixture,
NatsCluster (three such servers routed into one JetStream cluster) and its
`nats_cluster` fixture, and nats_daemon() (a wm.Daemon pointed at either).

A machine without nats-server skips these tests with that reason
(tests/expected-skips); scripts/install-deps installs it, and with
NATS_MUST_WORK=1 (scripts/test sets it) a missing server fails instead.
A build without libnats (configure --without-nats) skips them too.
Use it from a test file with `from nats_lib import nats, nats_daemon`.
"""

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from wm import Daemon, free_port

NATS_SERVER = shutil.which("nats-server") or (
    "/usr/sbin/nats-server" if os.path.exists("/usr/sbin/nats-server")
    else None)


def require_nats(builddir):
    config = (Path(builddir) / "config.h").read_text()
    if not re.search(r"^#define WM_NATS 1$", config, re.M):
        pytest.skip("built without NATS support (configure found no "
                    "libnats: Debian package libnats-dev)")
    if NATS_SERVER is None:
        if os.environ.get("NATS_MUST_WORK") == "1":
            pytest.fail("NATS_MUST_WORK=1 but nats-server is not installed")
        pytest.skip("nats-server is not installed (Debian package "
                    "nats-server; scripts/install-deps installs it)")


class NatsServer:
    """A JetStream server of the test's own on 127.0.0.1, its store under
    `dir`; stopped (by its pid) at the end of the test."""

    def __init__(self, dir):
        self.dir = Path(dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.log = self.dir / "nats-server.log"
        self.proc = None

    def start(self):
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [NATS_SERVER, "-js", "-a", "127.0.0.1", "-p", str(self.port),
                 "-sd", str(self.dir / "js")],
                stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            if "Server is ready" in self.log.read_text(errors="replace"):
                return self
            time.sleep(0.02)
        raise AssertionError("nats-server did not start:\n"
                             + self.log.read_text())

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class NatsCluster:
    """Three JetStream servers on 127.0.0.1 routed into one cluster (so
    that streams and buckets can have 3 replicas), each with its store
    under `dir`/n<i>, its name n<i> and a monitoring port; `url` is the
    three client URLs, comma-separated (the daemons' nats_url).  start()
    returns once the cluster has a JetStream meta leader; every server is
    stopped (by its pid) at the end of the test."""

    NAME = "wmtest"

    def __init__(self, dir, size=3):
        self.dir = Path(dir)
        self.names = [f"n{i}" for i in range(size)]
        self.ports = [free_port() for _ in range(size)]
        self.route_ports = [free_port() for _ in range(size)]
        self.http_ports = [free_port() for _ in range(size)]
        self.urls = [f"nats://127.0.0.1:{p}" for p in self.ports]
        self.url = ",".join(self.urls)
        self.procs = [None] * size
        self.logs = [self.dir / f"{n}.log" for n in self.names]

    def argv(self, i):
        routes = ",".join(f"nats://127.0.0.1:{p}"
                          for j, p in enumerate(self.route_ports) if j != i)
        return [NATS_SERVER, "-js", "-a", "127.0.0.1", "-p",
                str(self.ports[i]), "-n", self.names[i], "-m",
                str(self.http_ports[i]), "-sd",
                str(self.dir / self.names[i] / "js"), "--cluster_name",
                self.NAME, "--cluster",
                f"nats://127.0.0.1:{self.route_ports[i]}", "--routes", routes]

    def start(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        for i in range(len(self.names)):
            self.start_one(i)
        self.wait_meta_leader()
        assert len(self.alive()) == len(self.names), self.logs_text()
        return self

    def start_one(self, i):
        with open(self.logs[i], "ab") as log:
            self.procs[i] = subprocess.Popen(self.argv(i), stdout=log,
                                             stderr=log)

    def alive(self):
        return [i for i, p in enumerate(self.procs)
                if p is not None and p.poll() is None]

    def jsz(self, i, query="accounts=true&streams=true"):
        """Server i's /jsz (JetStream's state as that server sees it)."""
        url = f"http://127.0.0.1:{self.http_ports[i]}/jsz?{query}"
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.load(r)

    def logs_text(self):
        return "\n".join(f"--- {log.name}\n" + log.read_text(errors="replace")
                         for log in self.logs if log.exists())

    def wait_meta_leader(self, timeout=30):
        """Waits until every live server knows the JetStream meta leader
        (and that leader is live): the cluster can create streams."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                leaders = {self.jsz(i).get("meta_cluster", {}).get("leader")
                           for i in self.alive()}
            except OSError:
                leaders = {None}
            if len(leaders) == 1 and None not in leaders and \
                    leaders <= {self.names[i] for i in self.alive()}:
                return self.names.index(leaders.pop())
            time.sleep(0.1)
        raise AssertionError("no JetStream meta leader in the cluster:\n"
                             + self.logs_text())

    def stream_details(self, stream, query="accounts=true&streams=true"):
        """(server index, the stream's detail as that server sees it), for
        every live server that answers."""
        for i in self.alive():
            try:
                z = self.jsz(i, query)
            except OSError:
                continue
            for acc in z.get("account_details") or []:
                for sd in acc.get("stream_detail") or []:
                    if sd.get("name") == stream:
                        yield i, sd

    def leader_of(self, stream, timeout=15):
        """The index of the live server that leads `stream` (waits until
        one does)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for _, sd in self.stream_details(stream):
                leader = (sd.get("cluster") or {}).get("leader")
                if leader in self.names and \
                        self.names.index(leader) in self.alive():
                    return self.names.index(leader)
            time.sleep(0.1)
        raise AssertionError(f"no live leader of stream {stream}:\n"
                             + self.logs_text())

    def consumers_replicated(self, stream, timeout=30):
        """Waits until `stream` has consumers and each has a live leader
        that sees every other replica current: a consumer created moments
        before a server dies may not have formed its group yet, and then
        lacks a quorum for good (JetStream's limit, not the daemon's)."""
        deadline = time.monotonic() + timeout
        q = "accounts=true&streams=true&consumers=true"
        while time.monotonic() < deadline:
            seen, ok = set(), set()
            for i, sd in self.stream_details(stream, q):
                for cd in sd.get("consumer_detail") or []:
                    seen.add(cd.get("name"))
                    cl = cd.get("cluster") or {}
                    reps = cl.get("replicas") or []
                    if cl.get("leader") == self.names[i] and \
                            len(reps) == len(self.names) - 1 and \
                            all(r.get("current") for r in reps):
                        ok.add(cd.get("name"))
            if seen and seen == ok:
                return sorted(seen)
            time.sleep(0.1)
        raise AssertionError(f"the consumers of {stream} are not replicated:"
                             "\n" + self.logs_text())

    def kill(self, i):
        """SIGKILL of server i (by its pid)."""
        p = self.procs[i]
        p.kill()
        p.wait()

    def stop(self):
        for p in self.procs:
            if p is not None and p.poll() is None:
                p.terminate()
        for p in self.procs:
            if p is None:
                continue
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def nats(wm_builddir, tmp_path):
    require_nats(wm_builddir)
    s = NatsServer(tmp_path / "nats").start()
    yield s
    s.stop()


@pytest.fixture
def nats_cluster(wm_builddir, tmp_path):
    require_nats(wm_builddir)
    c = NatsCluster(tmp_path / "nats-cluster")
    try:
        c.start()
        yield c
    finally:
        c.stop()


def nats_daemon(builddir, tmp, nats, make=Daemon, **opts):
    """A daemon (not started) with `store = nats` on the server (or
    cluster) `nats`; opts are more configuration keys."""
    options = {"store": "nats", "nats_url": nats.url}
    options.update(opts)
    return make(builddir, tmp, options=options)
