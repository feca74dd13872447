"""wm-host-native confined (issue 7, first slice; sandbox/role_native.c):
no_new_privs and two stacked seccomp filters, the second on every thread
that runs the worker's code.

The running host's /proc/<pid>/status shows it; a native attack worker
(tests/workers/sandbox/attack.c, compiled here with `cc -shared -fPIC` and
packaged with mkpackage.py) tries one escape per event type, and each must
fail the way the filter says: the host killed by SIGSYS (the worker's
last_exit reason "seccomp", signal 31, and the event failed with that
reason), or an errno the worker reports back.  The daemon stays healthy
and the next event is served by a restarted host.

Skips: a build made --without-sandbox (the ASan one) has nothing to test;
a kernel without seccomp skips unless SANDBOX_MUST_WORK=1 (CI), where it
fails.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from wm import Daemon, b64

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "workers"
                       / "native"))
from mkpackage import make_package  # noqa: E402

MIME = "application/x-native-dll"
REPO = Path(__file__).resolve().parent.parent.parent
ATTACK_SRC = REPO / "tests" / "workers" / "sandbox" / "attack.c"
SIGSYS = int(signal.SIGSYS)
EACCES = 13


def _kernel_has_seccomp():
    with open("/proc/self/status") as f:
        return any(line.startswith("Seccomp:") for line in f)


@pytest.fixture(scope="module")
def sandboxed(wm_builddir):
    """The build confines its hosts and the kernel can: else skip (or
    fail with SANDBOX_MUST_WORK=1, for what the machine lacks)."""
    config = (Path(wm_builddir) / "config.h").read_text()
    if not re.search(r"^#define WM_SANDBOX 1$", config, re.M):
        pytest.skip("built --without-sandbox: hosts run unconfined")
    if not _kernel_has_seccomp():
        if os.environ.get("SANDBOX_MUST_WORK") == "1":
            pytest.fail("SANDBOX_MUST_WORK=1 but this kernel has no seccomp")
        pytest.skip("this kernel has no seccomp")
    return True


@pytest.fixture(scope="module")
def attack_lib(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler (build-essential) builds the attack worker"
    out = tmp_path_factory.mktemp("attack") / "libattack.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror",
                    "-I", str(REPO / "include"), "-o", str(out),
                    str(ATTACK_SRC), "-lpthread"], check=True)
    return out


@pytest.fixture(scope="module")
def attack_package(attack_lib):
    return make_package(attack_lib, library="attack")


def daemon(builddir, tmp_path, env=None):
    host = Path(builddir) / "hosts" / "native" / "wm-host-native"
    return Daemon(builddir, tmp_path, env=env, options={
        "restart_base_delay_ms": 20, "restart_max_delay_ms": 100,
        "shutdown_grace_ms": 1000, "message_timeout_ms": 5000},
        engines={"native.engine": "name = native\n"
                                  f"mime_type = {MIME}\n"
                                  "language = C\n"
                                  f"host = {host}\n"
                                  "spawn = exec\nprotocol = 1\n"})


@pytest.fixture
def wmd(wm_builddir, tmp_path, sandboxed):
    d = daemon(wm_builddir, tmp_path)
    d.start()
    yield d
    assert d.stop() == 0, d.log()


def create(d, package):
    r = d.post("/v1/workers", {"mime_type": MIME, "topic": "n",
                               "code": {"content": b64(package)}})
    assert r.status == 201, r
    return r.json["id"]


def status(pid, task=None):
    path = f"/proc/{pid}/status" if task is None else \
        f"/proc/{pid}/task/{task}/status"
    with open(path) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f
                    if ":\t" in line)


def host_pid(d, wid):
    pid = d.get(f"/v1/workers/{wid}").json["pid"]
    assert pid, d.get(f"/v1/workers/{wid}").json
    return pid


def test_running_host_is_confined(wmd, attack_package):
    """/proc/<pid>/status of a running host: Seccomp 2 (filter mode),
    NoNewPrivs 1, on every thread; the pool threads and the loop thread
    under both filters, the opener thread under the first only; the Hello
    said "seccomp"."""
    wid = create(wmd, attack_package)
    assert wmd.invoke(wid, "echo").status == 200
    pid = host_pid(wmd, wid)
    st = status(pid)
    assert st["Seccomp"] == "2", st
    assert st["NoNewPrivs"] == "1", st
    assert int(st["Seccomp_filters"]) == 2, st
    filters = []
    for task in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        t = status(pid, task)
        assert t["Seccomp"] == "2" and t["NoNewPrivs"] == "1", (task, t)
        filters.append(int(t["Seccomp_filters"]))
    # loop thread, opener (stage 1 only), one pool thread (concurrency 1)
    assert filters == [2, 1, 2], filters
    assert re.search(rf"host pid {pid} says hello \(engine native, "
                     r"max_inflight \d+, confinement (seccomp|ns|full)\)", wmd.log())
    # The daemon logged what the machine offers at start-up (the CI
    # machine kind: everything but cgroup v2 controllers).
    m = re.search(r"sandbox: machine offers confinement (\w+): ", wmd.log())
    assert m, wmd.log()
    if os.environ.get("SANDBOX_MUST_WORK") == "1":
        assert m.group(1) == "full", m.group(0)


KILLED = ["socket", "execve", "fork", "ptrace", "mount", "unshare", "kill",
          "x32_socket"]


@pytest.mark.parametrize("attack", KILLED)
def test_attack_kills_the_host(wmd, attack_package, attack):
    """Each escape is refused by killing the host (SIGSYS): the event fails
    with reason seccomp, last_exit says seccomp and signal 31, the host is
    restarted and serves the next event; the daemon is healthy."""
    wid = create(wmd, attack_package)
    assert wmd.invoke(wid, "echo").status == 200
    pid = host_pid(wmd, wid)
    r = wmd.invoke(wid, attack)
    assert r.status == 422, r
    assert r.json["error"]["error_type"] == "seccomp", r
    wmd.wait_for(lambda: wmd.get(f"/v1/workers/{wid}").json["restarts"] >= 1,
                 what="a restart")
    last = wmd.get(f"/v1/workers/{wid}").json["last_exit"]
    assert last["reason"] == "seccomp" and last["signal"] == SIGSYS, last
    assert wmd.invoke(wid, "echo").status == 200
    assert host_pid(wmd, wid) != pid
    assert wmd.get("/health").status == 200


I386_PROBE = r"""
int main(void)
{
    long rc;
    __asm__ volatile("int $0x80" : "=a"(rc) : "a"(20L) : "memory");
    return rc > 0 ? 0 : 1; /* getpid */
}
"""


def _int80_works(tmp_path):
    """Whether this kernel runs i386 calls (int 0x80) at all: some VMs
    refuse them with SIGSEGV before any filter is asked."""
    src, exe = tmp_path / "int80.c", tmp_path / "int80"
    src.write_text(I386_PROBE)
    subprocess.run([shutil.which("cc") or "gcc", "-o", str(exe), str(src)],
                   check=True)
    return subprocess.run([str(exe)]).returncode == 0


@pytest.mark.skipif(os.uname().machine != "x86_64",
                    reason="the i386 ABI exists on x86-64 only")
def test_i386_entry_point_is_refused(wmd, attack_package, tmp_path):
    """socket through int 0x80 (i386 numbers, another audit arch): the
    filter's bad-arch action kills the host (SIGSYS, seccomp) — or, where
    the kernel itself refuses int 0x80 (checked unconfined first), the
    host dies by that SIGSEGV; either way no socket."""
    wid = create(wmd, attack_package)
    assert wmd.invoke(wid, "echo").status == 200
    r = wmd.invoke(wid, "i386_socket")
    assert r.status == 422, r
    want = ("seccomp", SIGSYS) if _int80_works(tmp_path) else \
        ("crash", int(signal.SIGSEGV))
    assert r.json["error"]["error_type"] == want[0], r
    wmd.wait_for(lambda: wmd.get(f"/v1/workers/{wid}").json["restarts"] >= 1,
                 what="a restart")
    last = wmd.get(f"/v1/workers/{wid}").json["last_exit"]
    assert (last["reason"], last["signal"]) == want, last


@pytest.mark.parametrize("attack,errno_", [
    # the second filter answers path opens EACCES (a probe fails softly)
    ("shadow", EACCES),
    # MDWE and the second filter: no writable and executable memory
    ("mmap_exec", EACCES),
])
def test_attack_answered_with_errno(wmd, attack_package, attack, errno_):
    """Escapes the role answers with an errno: the worker lives on and
    reports the error it got; the same host serves the next event."""
    wid = create(wmd, attack_package)
    assert wmd.invoke(wid, "echo").status == 200
    pid = host_pid(wmd, wid)
    r = wmd.invoke(wid, attack)
    assert r.status == 422 and r.code == "worker_error", r
    assert f"{attack}: returned -1, errno {errno_} " in \
        r.json["error"]["message"], r
    assert wmd.invoke(wid, "echo").status == 200
    w = wmd.get(f"/v1/workers/{wid}").json
    assert w["pid"] == pid and w["restarts"] == 0, w


def test_worker_threads_are_allowed(wmd, attack_package):
    """Positive control: a worker's own thread (clone with CLONE_THREAD)
    starts and joins under both filters."""
    wid = create(wmd, attack_package)
    r = wmd.invoke(wid, "thread")
    assert r.status == 200, r
    assert wmd.get(f"/v1/workers/{wid}").json["restarts"] == 0


def test_reload_opens_the_new_library_confined(wmd, attack_lib,
                                               attack_package):
    """A reload in the same host goes through the opener thread (stage 1
    only): the new library serves, the pid is unchanged, and the second
    filter still answers the worker's opens."""
    wid = create(wmd, attack_package)
    assert wmd.invoke(wid, "echo").status == 200
    pid = host_pid(wmd, wid)
    r = wmd.put(f"/v1/workers/{wid}/code", {"code": {"content": b64(
        make_package(attack_lib, library="attack2"))}})
    assert r.status == 200 and r.json["version"] == 2, r
    assert wmd.invoke(wid, "echo").status == 200
    assert host_pid(wmd, wid) == pid
    assert re.search(r"loaded runtimes/linux-\w+/native/libattack2\.so",
                     wmd.log())
    assert status(pid)["Seccomp"] == "2"
    r = wmd.invoke(wid, "shadow")
    assert f"errno {EACCES} " in r.json["error"]["message"], r


def test_trap_mode_names_the_syscall(wm_builddir, tmp_path, sandboxed,
                                     attack_package):
    """WM_SANDBOX_DEBUG=trap (passed by the daemon to its hosts): a refused
    call is named on the host's stderr (the daemon's log) before the host
    dies by SIGSYS, classified seccomp as in enforce mode; the host says
    which mode it runs in."""
    d = daemon(wm_builddir, tmp_path, env={"WM_SANDBOX_DEBUG": "trap"})
    d.start()
    try:
        wid = create(d, attack_package)
        r = d.invoke(wid, "socket")
        assert r.status == 422 and r.json["error"]["error_type"] == \
            "seccomp", r
        d.wait_for(lambda: "seccomp refused socket (syscall 41, arch "
                   "0xc000003e)" in d.log(), what="the trap's line")
        assert "seccomp in trap mode (WM_SANDBOX_DEBUG=trap)" in d.log()
        last = d.get(f"/v1/workers/{wid}").json["last_exit"]
        assert last["reason"] == "seccomp" and last["signal"] == SIGSYS
    finally:
        assert d.stop() == 0, d.log()


def test_log_mode_kills_nothing_and_says_so(wm_builddir, tmp_path,
                                            sandboxed, attack_package):
    """WM_SANDBOX_DEBUG=log, for deriving tables: a call outside the table
    runs (the kernel's audit log names it), so the host reports
    confinement none and warns."""
    d = daemon(wm_builddir, tmp_path, env={"WM_SANDBOX_DEBUG": "log"})
    d.start()
    try:
        wid = create(d, attack_package)
        r = d.invoke(wid, "socket")
        assert r.status == 422, r
        assert re.search(r"socket: returned \d+, errno 0 ",
                         r.json["error"]["message"]), r
        pid = host_pid(d, wid)
        assert status(pid)["Seccomp"] == "2"
        assert "confinement none)" in d.log()
        assert "seccomp in log mode (WM_SANDBOX_DEBUG=log): nothing is " \
            "killed" in d.log()
    finally:
        assert d.stop() == 0, d.log()
