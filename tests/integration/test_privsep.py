"""Privilege separation (DESIGN §2; issue 7): a daemon started as root
forks a launcher that keeps root to start and confine hosts, and its
master drops to the configured user before it reads anything from a
client; the launcher and the master end together, hosts with them."""

import os
import signal
import time
from pathlib import Path

import pytest

from wm import MASTER_USER, Daemon

MUST_WORK = os.environ.get("SANDBOX_MUST_WORK") == "1"
CAPS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


@pytest.fixture(autouse=True)
def root():
    if os.geteuid() != 0:
        if MUST_WORK:
            pytest.fail("SANDBOX_MUST_WORK=1 but the tests do not run as "
                        "root")
        pytest.skip("not root: the daemon has no privileges to separate")


def status(pid, task=None):
    path = f"/proc/{pid}/status" if task is None else \
        f"/proc/{pid}/task/{task}/status"
    with open(path) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f
                    if ":\t" in line)


def children(pid):
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            out += [int(p) for p in f.read().split()]
    return out


def launcher_of(d):
    found = [p for p in children(d.proc.pid)
             if status(p)["Name"] == "wm-launcher"]
    assert len(found) == 1, (found, d.log())
    return found[0]


def gone(pid):
    try:
        st = status(pid)
    except OSError:  # ENOENT, or ESRCH while the process is being reaped
        return True
    return st["State"].startswith("Z")


def running_host(d):
    wid = d.create()["id"]
    assert d.invoke(wid).status == 200
    pid = d.get(f"/v1/workers/{wid}").json["pid"]
    assert pid and not gone(pid)
    return wid, pid


def test_master_unprivileged_launcher_root(wm_builddir, tmp_path):
    """/proc/<master>/status: the configured user's uid and gid in every
    slot, on every thread, no capability in any set (the bounding set
    too), no_new_privs; its launcher child root; the host the launcher's
    grandchild (under its init); the state the user's."""
    d = Daemon(wm_builddir, tmp_path).start()
    try:
        _, host = running_host(d)
        for task in os.listdir(f"/proc/{d.proc.pid}/task"):
            st = status(d.proc.pid, task)
            assert st["Uid"].split() == [str(MASTER_USER)] * 4, st
            assert st["Gid"].split() == [str(MASTER_USER)] * 4, st
            assert st["Groups"].strip() == "", st
            for cap in CAPS:
                assert int(st[cap], 16) == 0, (cap, st)
            assert st["NoNewPrivs"] == "1", st
        launcher = launcher_of(d)
        lst = status(launcher)
        assert lst["Uid"].split() == ["0"] * 4, lst
        assert int(lst["CapEff"], 16) != 0, lst
        init = int(status(host)["PPid"])
        assert int(status(init)["PPid"]) == launcher
        # the user the launcher gave it, in the master's log
        uid = int(status(host)["Uid"].split()[0])
        assert f"pid {host} (its init {init}), uid {uid}" in d.log()
        assert f"master runs as user {MASTER_USER} (uid {MASTER_USER})" \
            in d.log()
        for path in [d.state, *Path(d.state).rglob("*")]:
            assert path.lstat().st_uid == MASTER_USER, path
    finally:
        assert d.stop() == 0, d.log()


def test_root_owned_state_given_to_the_user(wm_builddir, tmp_path):
    """A state written by a daemon whose master stayed root (user = root,
    warned) is given to the user at the next start, and recovered."""
    d = Daemon(wm_builddir, tmp_path, options={"user": "root"}).start()
    wid = d.create()["id"]
    assert status(d.proc.pid)["Uid"].split() == ["0"] * 4
    assert "user = root: the master keeps root privileges" in d.log()
    assert d.stop() == 0
    owners = {p.lstat().st_uid for p in Path(d.state).rglob("*")}
    assert owners == {0}, owners

    d = Daemon(wm_builddir, tmp_path).start()
    try:
        assert d.invoke(wid).status == 200
        owners = {p.lstat().st_uid for p in Path(d.state).rglob("*")}
        assert owners == {MASTER_USER}, owners
        assert f"to user {MASTER_USER}" in d.log()
    finally:
        assert d.stop() == 0, d.log()


def test_unknown_user_refused(wm_builddir, tmp_path):
    d = Daemon(wm_builddir, tmp_path, options={"user": "nosuchuser-wm"})
    with pytest.raises(AssertionError) as e:
        d.start()
    assert d.proc.returncode == 2
    assert "user nosuchuser-wm" in str(e.value)
    assert "does not exist: create it (useradd --system" in str(e.value)
    # nothing left behind: the launcher went with it
    assert not [p for p in os.listdir("/proc") if p.isdigit() and
                status_or_none(p, "wm-launcher", d)]


def status_or_none(pid, name, d):
    try:
        st = status(pid)
        cmd = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return False
    return st["Name"] == name and str(d.state).encode() in cmd


def test_unreachable_state_dir_refused(wm_builddir, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    os.chmod(locked, 0o700)
    d = Daemon(wm_builddir, tmp_path / "d",
               options={"state_dir": str(locked / "state")})
    with pytest.raises(AssertionError) as e:
        d.start()
    assert d.proc.returncode == 2
    assert f"state_dir {locked}/state is not reachable by user " \
        f"{MASTER_USER}" in str(e.value)
    assert "every directory above it must be searchable" in str(e.value)


def test_launcher_death_ends_the_daemon(wm_builddir, tmp_path):
    """Without its launcher no host can start: the master says so and
    exits 1 (systemd restarts it); the hosts died with the launcher."""
    d = Daemon(wm_builddir, tmp_path).start()
    _, host = running_host(d)
    os.kill(launcher_of(d), signal.SIGKILL)
    assert d.proc.wait(20) == 1, d.log()
    log = d.log()
    assert "the launcher (pid" in log and \
        "ended with signal 9 (SIGKILL)" in log, log
    assert "shutting down to be restarted" in log
    d.wait_for(lambda: gone(host), what="the host gone")


def test_master_death_ends_launcher_and_hosts(wm_builddir, tmp_path):
    """A master killed outright: its launcher sees its socket close, kills
    every host, removes the daemon's cgroups and exits."""
    d = Daemon(wm_builddir, tmp_path).start()
    _, host = running_host(d)
    launcher = launcher_of(d)
    init = int(status(host)["PPid"])
    groups = [Path(f"/sys/fs/cgroup/{c}/workmanager/d{d.proc.pid}")
              for c in ("memory", "pids", "unified")]
    groups = [g for g in groups if g.exists()]
    d.proc.kill()
    d.proc.wait(20)
    for pid, what in ((host, "host"), (init, "init"),
                      (launcher, "launcher")):
        d.wait_for(lambda: gone(pid), what=f"the {what} gone")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(g.exists() for g in groups):
        time.sleep(0.05)
    assert not [g for g in groups if g.exists()], groups
