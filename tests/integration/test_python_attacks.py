"""Escapes tried by a Python worker (issue 8; DESIGN §11;
sandbox/role_python.c), each twice — with the import allowlist on (the
guard answers first where it can), and off with the modules preloaded
(python_allowlist = off, python_preload), so that the kernel's answer is
what the test sees: the host killed by SIGSYS (the event's error and
last_exit reason seccomp, signal 31), killed by its memory limit (oom), or
an errno the worker reports back.  The daemon stays healthy and the next
event is served.

Spec: Python Sandboxing (restricted interpreter, blocked imports backed by
the sandbox).

Skips: a build made --without-sandbox has no filter to test; a kernel
without seccomp skips unless SANDBOX_MUST_WORK=1 (CI), where it fails.
"""

import os
import signal
import sys

import pytest

from pyhost_lib import create, daemon, host_pid, require_sandbox, restarts

SIGSYS = int(signal.SIGSYS)
MUST_WORK = os.environ.get("SANDBOX_MUST_WORK") == "1"


PRELOAD = "os,socket,ctypes,subprocess,threading"


def attacked(builddir, tmp_path, allowlist):
    """A daemon whose Python hosts have the import allowlist on or off
    (allowlist), with the modules the attacks need preloaded."""
    require_sandbox(builddir)
    d = daemon(builddir, tmp_path, options={
        "python_allowlist": allowlist, "python_preload": PRELOAD})
    d.allowlist = allowlist
    return d


pytestmark = pytest.mark.wmd(make=attacked, params=["on", "off"])


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
            if t == "exec":
                import os
                return {"type": "r", "data": attempt(
                    lambda: os.execv("/bin/true", ["true"]))}
            if t == "forkbomb":
                import os
                def bomb():
                    while True:
                        os.fork()
                return {"type": "r", "data": attempt(bomb)}
            if t == "write":
                return {"type": "r", "data": attempt(
                    lambda: open(d, "w").write("x"))}
            if t == "membomb":
                hoard = []
                while True:
                    hoard.append(bytearray(1 << 20))
            if t == "flood":
                try:
                    import sys
                    err = sys.stderr
                except ImportError:
                    err = None  # the allowlist: stdout only
                for i in range(50000):
                    print("out", i)
                    print("err", i, file=err)
                return None
            if t == "huge":
                return {"type": "big", "data": "x" * (20 << 20)}
            if t == "loop":
                while True:
                    pass
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


@pytest.mark.parametrize("attack,on,off", [
    # (the allowlist on: what the guard or the kernel says; off: the kernel)
    ("socket", "socket is not allowed", None),
    ("ptrace", "ctypes is not allowed", None),
    ("unshare", "ctypes is not allowed", None),
    ("subprocess", "subprocess is not allowed", None),
    ("fork", "os is not allowed", "PermissionError: errno 1"),
    ("forkbomb", "os is not allowed", "PermissionError: errno 1"),
    ("exec", "os is not allowed", "PermissionError: errno 1"),
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


@pytest.mark.parametrize("target", ["daemon", "host"])
def test_signals_to_others(wmd, target):
    """os.kill aimed at the daemon or at another worker's host: os is not
    allowed; with the allowlist off the kernel kills the sender (SIGSYS).
    The daemon and the other host live on."""
    other = create(wmd, ATTACKS)
    assert wmd.invoke(other["id"], "echo").status == 200
    other_pid = host_pid(wmd, other["id"])
    w = create(wmd, ATTACKS)
    pid = wmd.proc.pid if target == "daemon" else other_pid
    r = wmd.invoke(w["id"], "kill", data=pid)
    if wmd.allowlist == "on":
        answered(wmd, w["id"], r, "os is not allowed")
    else:
        kernel_killed(wmd, w["id"], r)
    assert wmd.proc.poll() is None
    assert host_pid(wmd, other["id"]) == other_pid
    assert wmd.invoke(other["id"], "echo").status == 200


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


def test_writing_is_refused(wmd):
    """Writing outside /tmp and inside it: refused by the filter (EACCES),
    nothing appears."""
    w = create(wmd, ATTACKS)
    for path in ["/tmp/wm-python-attack", str(wmd.state / "planted"),
                 "/usr/lib/planted"]:
        r = wmd.invoke(w["id"], "write", data=path)
        answered(wmd, w["id"], r, "PermissionError: errno 13")
        assert not os.path.exists(path)


def test_infinite_recursion(wmd):
    w = create(wmd, ATTACKS)
    r = wmd.invoke(w["id"], "recursion")
    answered(wmd, w["id"], r, "RecursionError: errno None")


def test_infinite_loop_is_stopped(wmd):
    """Stopped at the event's deadline (message_timeout_ms 5000 here):
    reason timeout, a new host for the next event."""
    w = create(wmd, ATTACKS)
    r = wmd.invoke(w["id"], "loop")
    assert r.status == 422 and r.json["error"]["error_type"] == "timeout", r
    assert wmd.invoke(w["id"], "echo").status == 200


def test_memory_bomb_is_stopped_by_the_memory_limit(wmd):
    """Growing past memory_mb (48 MiB: the cgroup's limit, far below
    RLIMIT_AS's 2 × 48 MiB + 1 GiB): killed by the OOM killer, reason oom
    (as root, with cgroup memory); else MemoryError at RLIMIT_AS."""
    w = create(wmd, ATTACKS, limits={"memory_mb": 48})
    r = wmd.invoke(w["id"], "membomb")
    assert r.status == 422, r
    sb = wmd.get("/health").json["sandbox"]
    if "memory" in sb.get("cgroup_controllers", []):
        assert r.json["error"]["error_type"] == "oom", r
        wmd.wait_for(lambda: (wmd.get(f"/v1/workers/{w['id']}").json[
            "last_exit"] or {}).get("reason") == "oom", what="an oom exit")
    else:
        assert MUST_WORK is False, sb
        assert r.json["error"]["exception_type"] == "MemoryError", r
    wmd.wait_for(lambda: wmd.invoke(w["id"], "echo").status == 200,
                 what="a host answering again")


def test_output_floods_are_bounded(wmd):
    """100,000 lines on stdout and stderr (stdout only with the allowlist,
    which refuses sys): at most 200 reach the log, the rest is counted; a
    20 MiB output is output_too_large; the host lives."""
    w = create(wmd, ATTACKS)
    pid = host_pid(wmd, w["id"])
    assert wmd.invoke(w["id"], "flood").status == 204
    wmd.wait_for(lambda: "99800 lines dropped" in wmd.log(), what="the cut")
    assert "out 99\n" in wmd.log() and "out 100\n" not in wmd.log()
    assert "err 99\n" in wmd.log()
    r = wmd.invoke(w["id"], "huge")
    assert r.status == 422, r
    assert r.json["error"]["error_type"] == "output_too_large", r
    assert wmd.invoke(w["id"], "echo").status == 200
    assert host_pid(wmd, w["id"]) == pid
