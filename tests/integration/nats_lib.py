"""nats_lib.py — real nats-server processes for the NATS tests (issue 23):
NatsServer (one JetStream server of the test's own on a free loopback
port, its store under the test's directory), the `nats` fixture, and
nats_daemon() (a wm.Daemon pointed at it).

A machine without nats-server skips these tests with that reason
(tests/expected-skips); scripts/install-deps installs it, and with
NATS_MUST_WORK=1 (scripts/test sets it) a missing server fails instead.
A build without libnats (configure --without-nats) skips them too.
Use it from a test file with `from nats_lib import nats, nats_daemon`.
"""

import os
import re
import shutil
import subprocess
import time
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


@pytest.fixture
def nats(wm_builddir, tmp_path):
    require_nats(wm_builddir)
    s = NatsServer(tmp_path / "nats").start()
    yield s
    s.stop()


def nats_daemon(builddir, tmp, nats, make=Daemon, **opts):
    """A daemon (not started) with `store = nats` on the server `nats`;
    opts are more configuration keys."""
    options = {"store": "nats", "nats_url": nats.url}
    options.update(opts)
    return make(builddir, tmp, options=options)
