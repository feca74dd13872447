"""wm-host-native confined (issue 7; sandbox/role_native.c): no_new_privs
and two stacked seccomp filters, the second on every thread that runs the
worker's code; under a root daemon also the spawn's steps
(sandbox/spawn.c): its own user without capabilities, its namespaces, its
private root, PID 2 under an init, Landlock, rlimits.

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


def daemon(builddir, tmp_path, spawn="exec", env=None):
    """A daemon whose native hosts are exec'd, or forked from a zygote
    (sandbox/zygote.h) with spawn "zygote"."""
    host = Path(builddir) / "hosts" / "native" / "wm-host-native"
    return Daemon(builddir, tmp_path, env=env, options={
        "restart_base_delay_ms": 20, "restart_max_delay_ms": 100,
        "shutdown_grace_ms": 1000, "message_timeout_ms": 5000},
        engines={"native.engine": "name = native\n"
                                  f"mime_type = {MIME}\n"
                                  "language = C\n"
                                  f"host = {host}\n"
                                  f"spawn = {spawn}\nprotocol = 1\n"})


# wmd: hosts exec'd, or forked from a zygote for the tests parametrised
# indirectly with "zygote"; every test here needs the sandbox.
pytestmark = [pytest.mark.wmd(make=daemon),
              pytest.mark.usefixtures("sandboxed")]


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
    said its level (seccomp, or ns or full under a root daemon)."""
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
                     r"max_inflight \d+, prefetch 0, "
                     r"confinement (seccomp|ns|full)\)", wmd.log())
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


# ---- under the spawn's confinement (a root daemon) ---------------------

MUST_WORK = os.environ.get("SANDBOX_MUST_WORK") == "1"
UID_BASE = 3000000  # host_uid_base's default (workmanager.conf(5))


@pytest.fixture
def rootd(wmd):
    """wmd, when it can confine its hosts beyond their own filters (root);
    else skip (fail with SANDBOX_MUST_WORK=1: CI runs as root)."""
    if os.geteuid() != 0:
        if MUST_WORK:
            pytest.fail("SANDBOX_MUST_WORK=1 but the tests do not run as "
                        "root")
        pytest.skip("not root: hosts get their own filters only")
    return wmd


def ns_levels(st):
    return [int(p) for p in st["NSpid"].split()]


BOTH_SPAWNS = pytest.mark.parametrize("wmd", ["exec", "zygote"],
                                      indirect=True)


@BOTH_SPAWNS
def test_running_host_is_fully_confined(rootd, attack_package):
    """A root daemon's host: its own uid and gid from the range, every
    capability set empty (the bounding set too), no_new_privs and its two
    filters, PID 2 of a pid namespace whose PID 1 is its init (root, no
    filter: ours), its own mount namespace with the private root (a tmpfs,
    read-only), and the Hello says the level (full where the machine
    offers it all).  Forked from a zygote the same, but that the init's
    parent is the zygote (root, no filter, in the network, IPC and UTS
    namespaces its hosts share), the launcher's child."""
    wid = create(rootd, attack_package)
    assert rootd.invoke(wid, "echo").status == 200
    pid = host_pid(rootd, wid)
    st = status(pid)
    uid = int(st["Uid"].split()[0])
    assert UID_BASE <= uid < UID_BASE + 65536, st["Uid"]
    assert st["Uid"].split() == [str(uid)] * 4, st["Uid"]
    assert st["Gid"].split() == [str(uid)] * 4, st["Gid"]
    assert st["Groups"].strip() == "", st
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[cap], 16) == 0, (cap, st[cap])
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st
    # Two levels of pids: the daemon's view, and 2 in its own namespace.
    levels = ns_levels(st)
    assert levels[0] == pid and levels[1:] == [2], st["NSpid"]
    init = int(st["PPid"])
    ist = status(init)
    assert ns_levels(ist)[1:] == [1], ist["NSpid"]
    assert ist["Name"] == "wm-init", ist
    # the init's parent: the launcher, the master's child (privilege
    # separation), or the zygote, the launcher's child
    launcher = int(ist["PPid"])
    if "spawn = zygote" in (rootd.engines / "native.engine").read_text():
        zst = status(launcher)
        assert zst["Name"] == "wm-zygote", zst
        assert zst["Uid"].split()[0] == "0" and zst["Seccomp"] == "0", zst
        for ns in ("net", "ipc", "uts"):
            assert os.readlink(f"/proc/{pid}/ns/{ns}") == \
                os.readlink(f"/proc/{launcher}/ns/{ns}"), ns
        launcher = int(zst["PPid"])
    lst = status(launcher)
    assert lst["Name"] == "wm-launcher", lst
    assert int(lst["PPid"]) == rootd.proc.pid, lst
    assert os.readlink(f"/proc/{pid}/ns/pid") == \
        os.readlink(f"/proc/{init}/ns/pid") != os.readlink("/proc/self/ns/pid")
    for ns in ("mnt", "net", "ipc", "uts", "cgroup"):
        assert os.readlink(f"/proc/{pid}/ns/{ns}") != \
            os.readlink(f"/proc/self/ns/{ns}"), ns
    # Its root: a read-only tmpfs, /usr read-only, its own /tmp, the
    # pid-only procfs; nothing of the machine's state.
    mounts = {}
    with open(f"/proc/{pid}/mountinfo") as f:
        for line in f:
            left, right = line.split(" - ")
            fields = left.split()
            mounts[fields[4]] = (fields[5], right.split())
    assert mounts["/"][1][0] == "tmpfs" and "ro" in mounts["/"][0].split(","),\
        mounts["/"]
    assert "ro" in mounts["/usr"][0].split(","), mounts["/usr"]
    assert mounts["/tmp"][1][0] == "tmpfs" and \
        "noexec" in mounts["/tmp"][0].split(","), mounts["/tmp"]
    assert mounts["/proc"][1][0] == "proc" and \
        "subset=pid" in mounts["/proc"][1][2], mounts["/proc"]
    assert set(mounts) <= {"/", "/usr", "/etc/ld.so.cache", "/dev/null",
                           "/dev/zero", "/dev/urandom", "/tmp", "/proc"}, \
        sorted(mounts)
    view = rootd.get(f"/v1/workers/{wid}").json
    offered = rootd.get("/health").json["sandbox"]["level"]
    assert view["confinement"] == offered, (view, offered)
    assert re.search(rf"host pid {pid} says hello \(engine native, "
                     rf"max_inflight \d+, prefetch 0, confinement {offered}\)",
                     rootd.log())
    if MUST_WORK:
        assert offered == "full", offered


def test_two_workers_hosts_are_apart(rootd, attack_package):
    """Two workers' hosts: two users, two pid namespaces (each is pid 2 in
    its own), neither sees the other; and every namespace apart, the
    network ones too (the launcher makes those ahead: each is one host's),
    a restarted host's included."""
    a, b = create(rootd, attack_package), create(rootd, attack_package)
    for w in (a, b):
        assert rootd.invoke(w, "echo").status == 200
    pa, pb = host_pid(rootd, a), host_pid(rootd, b)
    sa, sb = status(pa), status(pb)
    assert sa["Uid"] != sb["Uid"] and sa["Gid"] != sb["Gid"]
    assert ns_levels(sa)[1:] == ns_levels(sb)[1:] == [2]
    seen = set()
    for ns in ("pid", "net", "ipc", "uts", "mnt", "cgroup"):
        na = os.readlink(f"/proc/{pa}/ns/{ns}")
        nb = os.readlink(f"/proc/{pb}/ns/{ns}")
        assert na != nb, ns
        seen.add((ns, na))
        seen.add((ns, nb))
    # a third host, after a's restart: a network namespace of its own
    # again (made ahead while a's and b's lived, so its number cannot be
    # one of theirs reused)
    os.kill(pa, signal.SIGKILL)
    rootd.wait_for(lambda: rootd.invoke(a, "echo").status == 200,
                   what="a's host restarted")
    pc = host_pid(rootd, a)
    assert pc != pa
    assert ("net", os.readlink(f"/proc/{pc}/ns/net")) not in seen


@BOTH_SPAWNS
def test_seccomp_death_names_the_system_call(rootd, attack_package):
    """A call outside the table: the host dies by SIGSYS, and the kernel's
    audit record names the call: last_exit (syscall 41, syscall_name
    socket), the worker.error lifecycle event and the log say socket."""
    wid = create(rootd, attack_package)
    assert rootd.invoke(wid, "echo").status == 200
    pid = host_pid(rootd, wid)
    r = rootd.invoke(wid, "socket")
    assert r.status == 422 and r.json["error"]["error_type"] == "seccomp", r
    assert "system call socket" in r.json["error"]["message"], r
    last = rootd.wait_for(
        lambda: (v := rootd.get(f"/v1/workers/{wid}").json)["last_exit"]
        and v["last_exit"], what="the exit")
    assert last["reason"] == "seccomp" and last["signal"] == SIGSYS, last
    assert last["syscall"] == 41 and last["syscall_name"] == "socket", last
    errors = [e["data"] for e in rootd.lifecycle(wid)
              if e["type"].endswith(".error")]
    assert any(e["error_type"] == "seccomp" and e["syscall"] == 41 and
               e["syscall_name"] == "socket" for e in errors), errors
    assert re.search(rf"worker {wid}: host pid {pid} exited: signal 31 "
                     r"\(SIGSYS\), system call socket, reason seccomp",
                     rootd.log())


@BOTH_SPAWNS
def test_write_outside_tmp_is_refused(rootd, attack_package):
    """Creating a file under /usr: the table kills an open for writing
    (named openat), and nothing is left on the machine's /usr."""
    wid = create(rootd, attack_package)
    r = rootd.invoke(wid, "write_usr")
    assert r.status == 422 and r.json["error"]["error_type"] == "seccomp", r
    last = rootd.wait_for(
        lambda: (v := rootd.get(f"/v1/workers/{wid}").json)["last_exit"]
        and v["last_exit"], what="the exit")
    assert last["syscall_name"] == "openat", last
    assert not os.path.exists("/usr/wm-sandbox-test")


@BOTH_SPAWNS
@pytest.mark.parametrize("target", ["master", "other host"])
def test_signal_outside_the_namespace_is_refused(rootd, attack_package,
                                                 target):
    """kill(2) of the master or of another worker's host, by the pid the
    daemon knows it by: the host that tried dies (seccomp, kill), the
    target lives on."""
    other = create(rootd, attack_package)
    assert rootd.invoke(other, "echo").status == 200
    other_pid = host_pid(rootd, other)
    victim = rootd.proc.pid if target == "master" else other_pid
    wid = create(rootd, attack_package)
    r = rootd.invoke(wid, "signal", data=victim)
    assert r.status == 422 and r.json["error"]["error_type"] == "seccomp", r
    last = rootd.wait_for(
        lambda: (v := rootd.get(f"/v1/workers/{wid}").json)["last_exit"]
        and v["last_exit"], what="the exit")
    assert last["syscall_name"] == "kill", last
    assert rootd.get("/health").status == 200
    assert rootd.invoke(other, "echo").status == 200
    assert host_pid(rootd, other) == other_pid


@BOTH_SPAWNS
def test_infinite_loop_is_reason_timeout(rootd, attack_package):
    """A Process that never returns (no system call to refuse): killed at
    the worker's deadline, reason timeout, and restarted."""
    r = rootd.post("/v1/workers", {
        "mime_type": MIME, "topic": "n", "limits": {"timeout_ms": 300},
        "code": {"content": b64(attack_package)}})
    assert r.status == 201, r
    wid = r.json["id"]
    r = rootd.invoke(wid, "spin")
    assert r.status >= 400 and r.json["error"]["error_type"] == "timeout", r
    last = rootd.wait_for(
        lambda: (v := rootd.get(f"/v1/workers/{wid}").json)["last_exit"]
        and v["last_exit"], what="the exit")
    assert last["reason"] == "timeout", last
    rootd.wait_for(lambda: rootd.invoke(wid, "echo").status == 200,
                   what="the restarted host to answer")


@BOTH_SPAWNS
def test_init_forwards_sigterm_and_reports_the_host(rootd, attack_package):
    """SIGTERM to a host's init reaches the host (PID 2, default
    disposition), which dies of it; the init's exit record is the truth
    the daemon reports (signal 15), not the init's own exit code."""
    wid = create(rootd, attack_package)
    assert rootd.invoke(wid, "echo").status == 200
    pid = host_pid(rootd, wid)
    init = int(status(pid)["PPid"])
    os.kill(init, signal.SIGTERM)
    last = rootd.wait_for(
        lambda: (v := rootd.get(f"/v1/workers/{wid}").json)["last_exit"]
        and v["last_exit"], what="the exit")
    assert last["signal"] == int(signal.SIGTERM) and last["code"] is None, \
        last
    assert last["reason"] == "crash", last
    assert re.search(rf"worker {wid}: host pid {pid} exited: signal 15 "
                     r"\(SIGTERM\)", rootd.log())


def test_another_hosts_memory_is_not_in_reach(rootd, attack_package,
                                              tmp_path):
    """A library constructor (the worker's code, before any filter's
    second stage) opening another worker's host's /proc/<pid>/maps and
    mem, by the pid the daemon knows it by: not in its procfs (ENOENT:
    another pid namespace, and another user hidden by hidepid besides);
    the other host serves on."""
    from test_confinement import probe
    other = create(rootd, attack_package)
    assert rootd.invoke(other, "echo").status == 200
    pid = host_pid(rootd, other)
    for what in ("maps", "mem"):
        path = f"/proc/{pid}/{what}"
        assert os.path.exists(path), path
        (tmp_path / what).mkdir()
        msg = probe(rootd, tmp_path / what, path)
        assert "fd -1, errno 2 (" in msg, msg
    assert rootd.invoke(other, "echo").status == 200
    assert host_pid(rootd, other) == pid
