"""What the daemon says about confinement (issue 7; DESIGN §10).

/health shows the level the machine offers and each mechanism behind it,
checked here against probes of the kernel made by the test itself (not
the daemon's own detection); a worker's view shows what its host said in
its Hello it applied; min_confinement refuses to start a daemon that would
run hosts below it, naming what is missing, and kills a host whose Hello
reports less before it gets any code.
"""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from wm import Daemon, b64

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "workers"
                       / "native"))
from mkpackage import make_package  # noqa: E402
from test_native import MIME, native_engine  # noqa: E402

MUST_WORK = os.environ.get("SANDBOX_MUST_WORK") == "1"


def landlock_abi():
    """landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)."""
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return abi if abi > 0 else 0


def namespaces_unshare_takes():
    """The namespace types unshare(1) can create here, by /proc/self/ns
    name."""
    flags = {"user": "-U", "mnt": "-m", "pid": "-pf", "net": "-n",
             "ipc": "-i", "uts": "-u", "cgroup": "-C", "time": "-T"}
    return {name for name, flag in flags.items()
            if subprocess.run(["unshare", flag, "true"],
                              capture_output=True).returncode == 0}


@pytest.fixture
def lib(wm_builddir):
    path = Path(wm_builddir) / "tests" / "workers" / "native" / "libecho.so"
    assert path.exists(), f"{path} is built by make check"
    return path


def daemon(builddir, tmp, **options):
    opts = {"restart_base_delay_ms": 20, "restart_max_delay_ms": 100}
    opts.update(options)
    d = Daemon(builddir, tmp, options=opts, engines=native_engine(builddir))
    d.start()
    return d


def test_health_reports_what_the_machine_offers(wm_builddir, tmp_path):
    d = daemon(wm_builddir, tmp_path)
    try:
        h = d.get("/health").json
    finally:
        assert d.stop() == 0, d.log()
    sb = h["sandbox"]
    assert h["confinement"] == sb["level"]
    if not sb["built"]:
        # --without-sandbox: hosts confine nothing, whatever the machine.
        assert sb["level"] == "none"
        assert all(v == "built --without-sandbox"
                   for v in sb["missing"].values())
        return
    with open("/proc/sys/kernel/seccomp/actions_avail") as f:
        assert set(sb["seccomp_actions"]) == set(f.read().split())
    assert sb["landlock_abi"] == landlock_abi()
    # The daemon's capabilities at start-up (the launcher's), as libcap
    # writes them: this test's own, which the daemon inherited, as
    # getpcaps(8) writes them ("PID: =ep").
    assert sb["capabilities"], sb
    if shutil.which("getpcaps"):
        out = subprocess.run(["getpcaps", str(os.getpid())], text=True,
                             capture_output=True, check=True)
        mine = (out.stdout or out.stderr).split(":", 1)[1].strip()
        assert sb["capabilities"] == mine, (sb["capabilities"], mine)
    if os.geteuid() == 0 and shutil.which("unshare"):
        assert set(sb["namespaces"]) == namespaces_unshare_takes()
    # The level follows the mechanisms (sandbox.h), and names what the
    # levels above it lack.
    isolate = {"mnt", "pid", "net", "ipc", "uts"}
    want = "none"
    if sb["seccomp"] and sb["no_new_privs"]:
        want = "seccomp"
        if isolate <= set(sb["namespaces"]):
            want = "ns"
            if sb["landlock_abi"] > 0 and \
                    {"memory", "pids"} <= set(sb["cgroup_controllers"]):
                want = "full"
    assert sb["level"] == want
    levels = ["none", "seccomp", "ns", "full"]
    assert list(sb["missing"]) == levels[levels.index(want) + 1:]
    assert all(sb["missing"].values())
    if MUST_WORK:
        assert sb["level"] == "full", sb


def test_worker_view_shows_its_hosts_confinement(wm_builddir, tmp_path, lib):
    d = daemon(wm_builddir, tmp_path)
    try:
        built = d.get("/health").json["sandbox"]["built"]
        r = d.post("/v1/workers", {"mime_type": MIME, "topic": "t",
                                   "code": {"content": b64(
                                       make_package(lib))}})
        assert r.status == 201, r
        wid = r.json["id"]
        view = d.get(f"/v1/workers/{wid}").json
        # What wm-host-native applies to itself, on top of what its spawn
        # gave it (wm-host(8), CONFINEMENT): as root, everything the
        # machine offers; else its own filters only.
        offered = d.get("/health").json["sandbox"]["level"]
        want = "none" if not built else \
            offered if os.geteuid() == 0 else "seccomp"
        assert view["confinement"] == want, view
        if MUST_WORK and os.geteuid() == 0:
            assert view["confinement"] == "full", view
        assert d.post(f"/v1/workers/{wid}/stop").status == 200
        assert d.get(f"/v1/workers/{wid}").json["confinement"] is None
    finally:
        assert d.stop() == 0, d.log()


def test_host_below_min_confinement_gets_no_code(wm_builddir, tmp_path, lib):
    """min_confinement above what the host applies: the daemon starts (the
    machine offers it), but the host is killed at its Hello, before any
    code, and the create fails naming both levels.  The host gets less
    here because host_uid_base = 0 keeps it in the daemon's user, without
    namespaces: its own filters only."""
    d = daemon(wm_builddir, tmp_path)
    built = d.get("/health").json["sandbox"]
    assert d.stop() == 0, d.log()
    if built["level"] != "full":
        pytest.skip(f"the machine offers {built['level']}, not full")
    d = daemon(wm_builddir, tmp_path / "full", min_confinement="full",
               host_uid_base=0)
    try:
        r = d.post("/v1/workers", {"mime_type": MIME, "topic": "t",
                                   "code": {"content": b64(
                                       make_package(lib))}})
        assert r.status >= 400, r
        msg = r.json["error"]["message"]
        assert "below min_confinement full" in msg, msg
        assert "'seccomp'" in msg, msg
        assert d.get("/health").status == 200
    finally:
        assert d.stop() == 0, d.log()


def run_refused(wm_builddir, tmp_path, min_confinement, user=None):
    """Runs workmanagerd in the foreground with min_confinement, as user
    when given; returns (exit status, its stderr).  The directories are in
    one that user can reach (pytest's tmp_path is under a root-only one)."""
    if user is not None:
        tmp_path = Path(tempfile.mkdtemp(prefix="wm-conf-"))
        tmp_path.chmod(0o777)
    (tmp_path / "e").mkdir(mode=0o777)
    argv = [str(Path(wm_builddir) / "master" / "workmanagerd"),
            "--foreground", "--config", "/dev/null",
            "-o", f"state_dir={tmp_path}/state",
            "-o", f"runtime_dir={tmp_path}/run",
            "-o", f"control_socket={tmp_path}/run/s.sock",
            "-o", f"engines_dir={tmp_path}/e",
            "-o", f"min_confinement={min_confinement}"]
    if user is not None:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}",
                "--clear-groups"] + argv
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    finally:
        if user is not None:
            shutil.rmtree(tmp_path)
    return r.returncode, r.stderr


def test_min_confinement_refuses_to_start_below_it(wm_builddir, tmp_path):
    """A daemon that is not root cannot create the namespaces: it offers at
    most seccomp, and with min_confinement = ns it refuses to start, naming
    each namespace it could not create."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv(1) to run the daemon as nobody")
    rc, err = run_refused(wm_builddir, tmp_path, "ns", user=65534)
    assert rc != 0, err
    assert "min_confinement is ns but hosts would run under" in err, err
    if "built --without-sandbox" not in err:
        assert "no mnt pid net ipc uts namespaces" in err, err


def test_min_confinement_must_be_a_level(wm_builddir, tmp_path):
    rc, err = run_refused(wm_builddir, tmp_path, "most")
    assert rc != 0, err
    assert "min_confinement: 'most' is not a confinement level (none, " \
        "seccomp, ns, full)" in err, err


def proc_status(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f
                    if ":\t" in line)


def test_hosts_run_as_users_of_their_own(wm_builddir, tmp_path, lib):
    """As root, each running host takes a user of the daemon's range
    (host_uid_base), no supplementary group and no capability in any set;
    two hosts never share one, and a freed one is taken again."""
    if os.geteuid() != 0:
        pytest.skip("the daemon is not root: hosts keep its user")
    d = daemon(wm_builddir, tmp_path, host_uid_base=3100000,
               host_uid_count=2)
    try:
        if not d.get("/health").json["sandbox"]["built"]:
            pytest.skip("built --without-sandbox: hosts keep the daemon's "
                        "user")
        body = {"mime_type": MIME, "topic": "t",
                "code": {"content": b64(make_package(lib))}}
        ids = [d.post("/v1/workers", body).json["id"] for _ in range(2)]
        uids = []
        for wid in ids:
            st = proc_status(d.get(f"/v1/workers/{wid}").json["pid"])
            uid = st["Uid"].split()
            assert len(set(uid)) == 1, st["Uid"]
            assert st["Gid"].split() == uid, st["Gid"]
            assert st["Groups"].strip() == "", st["Groups"]
            for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
                assert int(st[cap], 16) == 0, (cap, st[cap])
            assert st["NoNewPrivs"] == "1"
            uids.append(int(uid[0]))
            # No network, IPC, host name or cgroup root of the daemon's.
            pid = d.get(f"/v1/workers/{wid}").json["pid"]
            for ns in ("net", "ipc", "uts", "cgroup"):
                assert os.readlink(f"/proc/{pid}/ns/{ns}") != \
                    os.readlink(f"/proc/{d.proc.pid}/ns/{ns}"), ns
        assert sorted(uids) == [3100000, 3100001], uids
        # The range is full: a third host cannot start, and says why.
        r = d.post("/v1/workers", body)
        assert r.status >= 400, r
        assert "no free host user" in r.json["error"]["message"], r
        # A stopped host's user is free again.
        assert d.post(f"/v1/workers/{ids[0]}/stop").status == 200
        r = d.post("/v1/workers", body)
        assert r.status == 201, r
        pid = d.get(f"/v1/workers/{r.json['id']}").json["pid"]
        assert int(proc_status(pid)["Uid"].split()[0]) == uids[0]
    finally:
        assert d.stop() == 0, d.log()


PROBE_SRC = Path(__file__).resolve().parent.parent / "workers" / "sandbox" \
    / "probe.c"
REPO = Path(__file__).resolve().parent.parent.parent


def probe_package(tmp_path, path):
    """The probe worker (tests/workers/sandbox/probe.c), whose constructor
    opens path as the host loads it."""
    cc = shutil.which("cc") or shutil.which("gcc")
    out = tmp_path / "libprobe.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror",
                    f"-DPROBE_PATH=\"{path}\"", "-I", str(REPO / "include"),
                    "-o", str(out), str(PROBE_SRC)], check=True)
    return make_package(out, library="probe")


def probe(d, tmp_path, path):
    r = d.post("/v1/workers", {"mime_type": MIME, "topic": "t",
                               "code": {"content": b64(
                                   probe_package(tmp_path, path))}})
    assert r.status == 201, r
    r = d.invoke(r.json["id"], "probe")
    assert r.status == 422, r
    return r.json["error"]["message"]


def test_landlock_limits_what_a_library_can_open(wm_builddir, tmp_path):
    """The worker's constructors run in the host's private root and
    Landlock domain: the machine's files are not there at all
    (/etc/passwd: ENOENT; without a private root, a world-readable file
    outside the domain gets EACCES), a file of the root outside the domain
    (its /proc) is refused with EACCES, and the system's code stays
    readable."""
    if landlock_abi() == 0:
        if MUST_WORK:
            pytest.fail("SANDBOX_MUST_WORK=1 but the kernel has no Landlock")
        pytest.skip("the kernel has no Landlock")
    d = daemon(wm_builddir, tmp_path)
    try:
        sb = d.get("/health").json["sandbox"]
        if not sb["built"]:
            pytest.skip("built --without-sandbox: no Landlock domain")
        private_root = os.geteuid() == 0 and "mnt" in sb["namespaces"]
        assert os.stat("/etc/passwd").st_mode & 0o004  # world-readable
        msg = probe(d, tmp_path, "/etc/passwd")
        assert f"fd -1, errno {2 if private_root else 13}" in msg, msg
        if private_root:
            msg = probe(d, tmp_path, "/proc/self/status")
            assert "fd -1, errno 13" in msg, msg
        msg = probe(d, tmp_path, "/usr/lib/os-release")
        assert "errno 0" in msg and "fd -1" not in msg, msg
    finally:
        assert d.stop() == 0, d.log()


@pytest.fixture
def rooted(wm_builddir, tmp_path):
    """A daemon whose hosts get a private root (run as root, built with the
    sandbox, a mount namespace), else a skip (a failure with
    SANDBOX_MUST_WORK=1 when only the machine lacks it)."""
    if os.geteuid() != 0:
        pytest.skip("the daemon is not root: no mount namespace")
    d = daemon(wm_builddir, tmp_path)
    sb = d.get("/health").json["sandbox"]
    if not sb["built"] or "mnt" not in sb["namespaces"]:
        d.stop()
        if sb["built"] and MUST_WORK:
            pytest.fail("SANDBOX_MUST_WORK=1 but no mount namespace")
        pytest.skip("no sandbox or no mount namespace here")
    yield d
    assert d.stop() == 0, d.log()


def test_private_root_hides_the_machine(rooted, lib):
    """A root daemon's host sees a root of its own: a small read-only
    tmpfs with /usr, its /tmp and a /proc, not the daemon's state, socket
    or the machine's /tmp (its mountinfo, read from outside)."""
    d = rooted
    r = d.post("/v1/workers", {"mime_type": MIME, "topic": "t",
                               "code": {"content": b64(make_package(lib))}})
    assert r.status == 201, r
    pid = d.get(f"/v1/workers/{r.json['id']}").json["pid"]
    assert os.readlink(f"/proc/{pid}/ns/mnt") != \
        os.readlink(f"/proc/{d.proc.pid}/ns/mnt")
    mounts = {}
    with open(f"/proc/{pid}/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            mounts[fields[4]] = (fields[5], fields[sep + 1])
    assert set(mounts) == {"/", "/usr", "/etc/ld.so.cache", "/dev/null",
                           "/dev/zero", "/dev/urandom", "/tmp",
                           "/proc"}, mounts
    assert mounts["/"][1] == "tmpfs" and "ro" in mounts["/"][0].split(",")
    assert mounts["/usr"][0].split(",")[0] == "ro"
    assert mounts["/tmp"][1] == "tmpfs" and \
        "noexec" in mounts["/tmp"][0].split(",")
    assert mounts["/proc"][1] == "proc"
    # Still answering: the library loaded through /proc/self/fd.
    assert d.invoke(r.json["id"], "echo").status == 200


def test_daemon_files_are_not_in_a_hosts_root(rooted, tmp_path):
    """What a worker's library must not reach — the daemon's state
    directory (every worker's code is stored there), its control socket,
    the machine's files — does not exist in its host's private root."""
    d = rooted
    state_file = next(p for p in d.state.rglob("*") if p.is_file())
    for path in (d.state, state_file, d.socket, "/etc/shadow", "/var/log"):
        assert Path(path).exists(), path
        msg = probe(d, tmp_path, path)
        assert "fd -1, errno 2 (" in msg, msg
