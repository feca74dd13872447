"""wm-host-python confined (issue 8; DESIGN §10, §11; sandbox/role_python.c):
the running host's /proc/<pid>/status, and escapes tried by a worker, each
twice — with the import allowlist on (the guard answers first where it
can), and off with the modules preloaded (python_allowlist = off,
python_preload), so that the kernel's answer is what the test sees: the
host killed by SIGSYS (the event's error and last_exit reason seccomp,
signal 31), or an errno the worker reports back.  The daemon stays healthy
and the next event is served.

Spec: Python Sandboxing (restricted interpreter, blocked imports backed by
the sandbox).

Skips: a build made --without-sandbox has no filter to test; a kernel
without seccomp skips unless SANDBOX_MUST_WORK=1 (CI), where it fails.
"""

import os
import re
import signal
import sys
from pathlib import Path

import pytest

from pyhost_lib import create, daemon, host_pid, proc_status, restarts

SIGSYS = int(signal.SIGSYS)
UID_BASE = 3000000  # host_uid_base's default (workmanager.conf(5))
MUST_WORK = os.environ.get("SANDBOX_MUST_WORK") == "1"


@pytest.fixture(scope="module")
def sandboxed(wm_builddir):
    config = (Path(wm_builddir) / "config.h").read_text()
    if not re.search(r"^#define WM_SANDBOX 1$", config, re.M):
        pytest.skip("built --without-sandbox: hosts run unconfined")
    with open("/proc/self/status") as f:
        if not any(line.startswith("Seccomp:") for line in f):
            if MUST_WORK:
                pytest.fail("SANDBOX_MUST_WORK=1 but this kernel has no "
                            "seccomp")
            pytest.skip("this kernel has no seccomp")
    return True


PRELOAD = "os,socket,ctypes,subprocess,threading"


@pytest.fixture(params=["on", "off"])
def wmd(request, wm_builddir, tmp_path, sandboxed):
    d = daemon(wm_builddir, tmp_path, options={
        "python_allowlist": request.param, "python_preload": PRELOAD})
    d.start()
    d.allowlist = request.param
    yield d
    assert d.stop() == 0, d.log()


ATTACKS = """
    def attempt(fn):
        try:
            return "returned %r" % (fn(),)
        except BaseException as e:
            return "%s: errno %s" % (type(e).__name__,
                                     getattr(e, "errno", None))

    def Process(event):
        t, d = event["type"], event["data"]
        if t == "echo":
            return {"type": "echo"}
        try:
            if t == "socket":
                import socket
                return {"type": "r", "data": attempt(socket.socket)}
            if t == "code":
                return {"type": "r", "data": attempt(
                    lambda: open(d).read())}
            if t == "fork":
                import os
                return {"type": "r", "data": attempt(os.fork)}
            if t == "subprocess":
                import subprocess
                return {"type": "r", "data": attempt(
                    lambda: subprocess.run(["/bin/true"]))}
            if t == "thread":
                import threading
                th = threading.Thread(target=lambda: None)
                return {"type": "r", "data": attempt(th.start)}
            if t == "kill":
                import os
                return {"type": "r", "data": attempt(lambda: os.kill(d, 0))}
            if t == "ptrace":
                import ctypes
                libc = ctypes.CDLL(None, use_errno=True)
                return {"type": "r", "data": attempt(
                    lambda: libc.ptrace(16, d, 0, 0))}
            if t == "unshare":
                import ctypes
                libc = ctypes.CDLL(None, use_errno=True)
                return {"type": "r", "data": attempt(
                    lambda: libc.unshare(0x10000000))}
            if t == "recursion":
                def f(n):
                    return f(n + 1)
                return {"type": "r", "data": attempt(lambda: f(0))}
        except ImportError as e:
            return {"type": "refused", "data": str(e)}
"""


def kernel_killed(d, wid, r):
    """The event failed with reason seccomp, the host died by SIGSYS and
    was restarted for the next event."""
    assert r.status == 422, r
    assert r.json["error"]["error_type"] == "seccomp", r
    d.wait_for(lambda: restarts(d, wid) >= 1, what="a restart")
    last = d.get(f"/v1/workers/{wid}").json["last_exit"]
    assert last["reason"] == "seccomp" and last["signal"] == SIGSYS, last
    assert d.invoke(wid, "echo").status == 200
    assert d.get("/health").status == 200


def answered(d, wid, r, want):
    assert r.status == 200, r
    assert r.json["data"] == want, r
    assert restarts(d, wid) == 0


def test_running_host_is_confined(wmd):
    """/proc/<pid>/status of a running Python host: seccomp filter mode,
    no_new_privs, one filter, no capability, its own uid from the slot
    range (root daemon), the Hello's level."""
    w = create(wmd, ATTACKS)
    assert wmd.invoke(w["id"], "echo").status == 200
    pid = host_pid(wmd, w["id"])
    st = proc_status(pid)
    assert st["Seccomp"] == "2", st
    assert st["NoNewPrivs"] == "1", st
    assert int(st["Seccomp_filters"]) == 1, st
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[cap], 16) == 0, (cap, st[cap])
    assert len(os.listdir(f"/proc/{pid}/task")) == 1
    if os.geteuid() == 0:
        uid = int(st["Uid"].split()[0])
        assert UID_BASE <= uid < UID_BASE + 65536, st["Uid"]
        assert st["Uid"].split() == [str(uid)] * 4, st["Uid"]
        assert st["Gid"].split() == [str(uid)] * 4, st["Gid"]
        assert re.search(rf"host \S+wm-host-python started, pid {pid} "
                         rf"\(its init \d+\), uid {uid}", wmd.log())
    elif MUST_WORK:
        pytest.fail("SANDBOX_MUST_WORK=1 but the tests do not run as root")
    m = re.search(rf"host pid {pid} says hello \(engine python, "
                  r"max_inflight 1, confinement (\w+)\)", wmd.log())
    assert m, wmd.log()
    assert m.group(1) in ("seccomp", "ns", "full")
    if MUST_WORK:
        assert m.group(1) == "full"


@pytest.mark.parametrize("attack,on,off", [
    # (the allowlist on: what the guard or the kernel says; off: the kernel)
    ("socket", "socket is not allowed", None),
    ("ptrace", "ctypes is not allowed", None),
    ("unshare", "ctypes is not allowed", None),
    ("subprocess", "subprocess is not allowed", None),
    ("fork", "os is not allowed", "PermissionError: errno 1"),
    ("thread", "threading is not allowed", "RuntimeError: errno None"),
])
def test_escapes(wmd, attack, on, off):
    """None: the kernel kills the host (SIGSYS)."""
    w = create(wmd, ATTACKS)
    wid = w["id"]
    r = wmd.invoke(wid, attack, data=os.getpid())
    if wmd.allowlist == "on":
        answered(wmd, wid, r, on)
        assert r.json["type"] == "refused", r
    elif off is None:
        kernel_killed(wmd, wid, r)
    else:
        answered(wmd, wid, r, off)


def test_signal_to_the_daemon(wmd):
    """os.kill aimed at the daemon: os is not allowed; with the allowlist
    off the kernel kills the host (SIGSYS).  The daemon lives."""
    w = create(wmd, ATTACKS)
    r = wmd.invoke(w["id"], "kill", data=wmd.proc.pid)
    if wmd.allowlist == "on":
        answered(wmd, w["id"], r, "os is not allowed")
    else:
        kernel_killed(wmd, w["id"], r)
    assert wmd.proc.poll() is None


def test_paths_are_refused(wmd):
    """/etc/shadow, the daemon's state (other workers' code and state),
    its control socket, the stdlib's sources: every open is refused by the
    filter (EACCES), whatever the mount namespace holds."""
    w = create(wmd, ATTACKS)
    state_files = [str(p) for p in wmd.state.rglob("*") if p.is_file()]
    assert state_files, "the daemon keeps its workers in its state dir"
    stdlib = f"/usr/lib/python3.{sys.version_info.minor}/os.py"
    for path in ["/etc/shadow", str(wmd.socket), stdlib,
                 "/proc/self/status"] + state_files[:3]:
        r = wmd.invoke(w["id"], "code", data=path)
        answered(wmd, w["id"], r, "PermissionError: errno 13")


def test_infinite_recursion(wmd):
    w = create(wmd, ATTACKS)
    r = wmd.invoke(w["id"], "recursion")
    answered(wmd, w["id"], r, "RecursionError: errno None")
