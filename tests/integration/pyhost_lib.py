"""tests/integration/pyhost_lib.py — what the Python engine's tests
(test_python_*.py) share: the engine descriptor pointing at the build's
wm-host-python, a daemon with it, workers created from source text.

A build without the Python engine (configure found no Debian
python3-embed: WM_PYTHON_ENGINE is not in config.h) skips these tests with
that reason; a build that has it must have built the host, or they fail.
"""

import os
import re
import textwrap
from pathlib import Path

import pytest

from wm import Daemon, b64

MIME = "text/x-python"


def python_engine(builddir, spawn="zygote"):
    """The engine descriptor of the build's host, with the role, spawn mode
    and concurrency of engines.d/python.engine (hosts forked from the
    zygote; a worker's concurrency is its number of hosts), or each host
    exec'd (spawn "exec")."""
    host = Path(builddir) / "hosts" / "python" / "wm-host-python"
    return {"python.engine": "name = python\n"
                             f"mime_type = {MIME}\n"
                             "language = Python\n"
                             f"host = {host}\n"
                             f"spawn = {spawn}\nrole = python\n"
                             "concurrency = processes\n"
                             "protocol = 1\n"}


def require_engine(builddir):
    config = (Path(builddir) / "config.h").read_text()
    if not re.search(r"^#define WM_PYTHON_ENGINE 1$", config, re.M):
        pytest.skip("built without the Python engine (no python3-embed)")
    host = Path(builddir) / "hosts" / "python" / "wm-host-python"
    assert host.exists(), f"{host} is built when WM_PYTHON_ENGINE is set"


def require_sandbox(builddir):
    """The build confines its hosts and the kernel can: else skip (fail
    with SANDBOX_MUST_WORK=1).  Tests that assert the kernel's answer need
    it: unconfined, their escapes would succeed."""
    config = (Path(builddir) / "config.h").read_text()
    if not re.search(r"^#define WM_SANDBOX 1$", config, re.M):
        pytest.skip("built --without-sandbox: hosts run unconfined")
    with open("/proc/self/status") as f:
        if not any(line.startswith("Seccomp:") for line in f):
            if os.environ.get("SANDBOX_MUST_WORK") == "1":
                pytest.fail("SANDBOX_MUST_WORK=1 but this kernel has no "
                            "seccomp")
            pytest.skip("this kernel has no seccomp")


def daemon(builddir, tmp_path, options=None, env=None, spawn="zygote"):
    require_engine(builddir)
    opts = {"restart_base_delay_ms": 20, "restart_max_delay_ms": 100,
            "shutdown_grace_ms": 1000, "message_timeout_ms": 5000}
    opts.update(options or {})
    return Daemon(builddir, tmp_path, options=opts, env=env,
                  engines=python_engine(builddir, spawn))


def create(d, code, expect=201, **fields):
    """A worker of the module `code` (dedented); its JSON (or the error
    response's when expect is not 201)."""
    body = {"mime_type": MIME, "topic": "py",
            "code": {"content": b64(textwrap.dedent(code))}}
    body.update(fields)
    r = d.post("/v1/workers", body)
    assert r.status == expect, r
    return r.json


def reload(d, wid, code):
    r = d.put(f"/v1/workers/{wid}/code",
              {"code": {"content": b64(textwrap.dedent(code))}})
    assert r.status == 200, r
    return r.json


def host_pid(d, wid):
    pid = d.get(f"/v1/workers/{wid}").json["pid"]
    assert pid, d.get(f"/v1/workers/{wid}").json
    return pid


def host_pids(d, wid):
    """Every host process of the worker, oldest first (the view's pids)."""
    return d.get(f"/v1/workers/{wid}").json["pids"]


def restarts(d, wid):
    return d.get(f"/v1/workers/{wid}").json["restarts"]


def proc_status(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f
                    if ":\t" in line)
