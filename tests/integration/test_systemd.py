"""A daemon that fits a modern systemd host, and more than one daemon per
machine (issue 27 §4): public probes over TCP, the audit log reopened on
SIGHUP and publishes audited at audit_publishes' level, a token made on
first start, one range of host uids per daemon (uidlock.h)."""

import http.client
import json
import os
import shutil
import signal
import stat
from pathlib import Path

import pytest

from wm import Daemon, MASTER_USER, free_port


def tcp(port, path, token=None, method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, headers={"Authorization": f"Bearer {token}"}
              if token else {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


ADMIN = "admin-token-0123456789abcdef"
METRICS = "metrics-token-0123456789abcdef"


def test_probes_over_tcp_without_the_admin_token(wm_builddir, tmp_path):
    """/health/live answers anyone; /metrics answers metrics_token_file's
    token, which opens nothing else; the rest still wants the admin's."""
    (tmp_path / "token").write_text(ADMIN + "\n")
    (tmp_path / "metrics-token").write_text(METRICS + "\n")
    port = free_port()
    d = Daemon(wm_builddir, tmp_path, options={
        "listen": f"127.0.0.1:{port}",
        "metrics_token_file": str(tmp_path / "metrics-token")})
    d.start()
    try:
        st, body = tcp(port, "/health/live")
        assert st == 200, body
        assert tcp(port, "/health")[0] == 401
        assert tcp(port, "/metrics")[0] == 401
        st, body = tcp(port, "/metrics", METRICS)
        assert st == 200 and b"workmanager_" in body, body
        assert tcp(port, "/metrics", ADMIN)[0] == 200
        # The metrics token is good for /metrics alone.
        assert tcp(port, "/v1/workers", METRICS)[0] == 401
        assert tcp(port, "/health", METRICS)[0] == 401
        assert tcp(port, "/v1/workers", ADMIN)[0] == 200
        # Nothing but a read goes through without the admin token.
        assert tcp(port, "/health/live", method="POST")[0] == 401
    finally:
        assert d.stop() == 0


def test_missing_metrics_token_file_stops_start_up(wm_builddir, tmp_path):
    (tmp_path / "token").write_text(ADMIN + "\n")
    d = Daemon(wm_builddir, tmp_path, options={
        "listen": f"127.0.0.1:{free_port()}",
        "metrics_token_file": str(tmp_path / "absent")})
    with pytest.raises(AssertionError) as e:
        d.start()
    assert "metrics_token_file" in str(e.value), e.value
    assert "No such file" in str(e.value), e.value


def test_token_made_on_first_start(wm_builddir, tmp_path):
    """listen set and no token_file: the daemon makes one (random, 0640,
    the daemon's group) and logs where, and a TCP client can use it."""
    port = free_port()
    token = tmp_path / "etc" / "token"
    token.parent.mkdir()
    d = Daemon(wm_builddir, tmp_path, options={
        "listen": f"127.0.0.1:{port}", "token_file": str(token)})
    d.start()
    try:
        st = token.stat()
        assert stat.S_IMODE(st.st_mode) == 0o640, oct(st.st_mode)
        if os.geteuid() == 0:
            assert st.st_gid == MASTER_USER, (st.st_gid, MASTER_USER)
        else:
            assert st.st_gid == os.getegid()
        text = token.read_text().strip()
        assert len(text) == 64 and int(text, 16) >= 0, text
        assert f"token_file {token} did not exist: made it" in d.log()
        assert tcp(port, "/v1/workers", text)[0] == 200
    finally:
        assert d.stop() == 0
    # The next start reads it, and makes no other.
    d.start()
    try:
        assert token.read_text().strip() == text
        assert tcp(port, "/v1/workers", text)[0] == 200
    finally:
        assert d.stop() == 0


def audit_lines(d):
    path = d.state / "audit.log"
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines()]


def publish(d, topic="t", **extra):
    ev = {"specversion": "1.0", "id": "e1", "source": "test",
          "type": "echo", **extra}
    return d.post(f"/v1/topics/{topic}/events", raw=json.dumps(ev).encode(),
                  headers={"Content-Type": "application/cloudevents+json"})


@pytest.mark.parametrize("level,expect", [
    ("none", []), ("errors", [400]), ("all", [202, 400])])
def test_audit_publishes_level(wm_builddir, tmp_path, level, expect):
    """Publishes reach the audit log only at audit_publishes' level;
    other mutations always do."""
    d = Daemon(wm_builddir, tmp_path,
               options={"audit_publishes": level}).start()
    try:
        assert publish(d).status == 202
        assert publish(d, specversion="0.3").status == 400
        d.create()
        lines = audit_lines(d)
        pubs = [l["status"] for l in lines if l["path"].startswith(
            "/v1/topics/")]
        assert pubs == expect, lines
        assert [l["path"] for l in lines][-1] == "/v1/workers", lines
    finally:
        assert d.stop() == 0


def test_audit_default_leaves_accepted_publishes_out(wmd):
    assert publish(wmd).status == 202
    wmd.create()
    assert [l["path"] for l in audit_lines(wmd)] == ["/v1/workers"]


def test_sighup_reopens_the_audit_log(wmd):
    """logrotate's way: rename the file, SIGHUP; the daemon lives on and
    writes a new file, the old one keeps what it had."""
    wmd.create()
    log = wmd.state / "audit.log"
    rotated = wmd.state / "audit.log.1"
    os.rename(log, rotated)
    os.kill(wmd.proc.pid, signal.SIGHUP)
    wmd.wait_for(lambda: "audit log reopened" in wmd.log(),
                 what="the reopen")
    assert wmd.proc.poll() is None
    wmd.create()
    assert len(rotated.read_text().splitlines()) == 1
    assert [l["status"] for l in audit_lines(wmd)] == [201]
    assert wmd.get("/health").status == 200


# ---- host uid ranges --------------------------------------------------------

def uid_daemon(builddir, tmp, locks, **options):
    opts = {"host_uid_lock_dir": str(locks)}
    opts.update(options)
    return Daemon(builddir, tmp, options=opts)


def test_overlapping_uid_ranges_refused(wm_builddir, tmp_path):
    """A second daemon whose host uids overlap a running one's stops at
    start-up (exit 2), naming the key and the other daemon; one with a
    range of its own runs beside it; once the first is gone, its range is
    free again."""
    if os.geteuid() != 0:
        pytest.skip("hosts get uids of their own only as root")
    locks = tmp_path / "uids"
    a = uid_daemon(wm_builddir, tmp_path / "a", locks,
                   host_uid_base=3200000, host_uid_count=100).start()
    try:
        for base, count in ((3200000, 100), (3200050, 100),
                            (3199990, 11)):
            b = uid_daemon(wm_builddir, tmp_path / f"b{base}", locks,
                           host_uid_base=base, host_uid_count=count)
            with pytest.raises(AssertionError) as e:
                b.start()
            msg = str(e.value)
            assert "exited 2" in msg, msg
            assert f"host_uid_base {base}" in msg, msg
            assert "3200000-3200099" in msg, msg
            assert f"pid {a.proc.pid}" in msg, msg
            assert str(a.state) in msg, msg
        c = uid_daemon(wm_builddir, tmp_path / "c", locks,
                       host_uid_base=3200100, host_uid_count=100).start()
        try:
            w = c.create()
            assert c.invoke(w["id"]).status == 200
        finally:
            assert c.stop() == 0
    finally:
        assert a.stop() == 0
    b = uid_daemon(wm_builddir, tmp_path / "b2", locks,
                   host_uid_base=3200050, host_uid_count=100).start()
    assert b.stop() == 0


# ---- confinement probed step by step ---------------------------------------

CHROOT = r"""set -e
R=$1; CHROOT=$2; shift 2
for d in usr etc proc sys dev tmp work run var; do
    [ -d /$d ] || continue
    mkdir -p "$R/$d"
    mount --rbind "/$d" "$R/$d"
done
for l in bin lib lib64 sbin; do
    [ -e "$R/$l" ] || ln -s "usr/$l" "$R/$l"
done
exec "$CHROOT" "$R" "$@"
"""


class ChrootDaemon(Daemon):
    """The daemon in a mount namespace of its own (unshare -m), chrooted
    into a directory that is not a mount point but sees the machine's
    /usr, /tmp, /work... through binds: a chroot as an operator makes one,
    where unshare(CLONE_NEWNS) works and making / private does not."""

    def argv(self):
        root = self.tmp / "root"
        root.mkdir(exist_ok=True)
        return [tool("unshare"), "-m", "--propagation", "private", "sh",
                "-c", CHROOT, "sh", str(root), tool("chroot")] + super().argv()


def tool(name):
    return shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


def chroot_daemon(builddir, tmp, **options):
    if os.geteuid() != 0:
        pytest.skip("a chroot and mounts need root")
    if not (tool("unshare") and tool("chroot")):
        pytest.skip("no unshare(1) or chroot(8) (util-linux, coreutils)")
    return ChrootDaemon(builddir, tmp, options=options)


def test_chroot_without_a_mounted_root_confines_less_and_says_why(
        wm_builddir, tmp_path):
    """In such a chroot the private root cannot be built: detection finds
    it at start-up, /health says seccomp (not full) and why, and hosts
    spawn without the root instead of every spawn failing."""
    d = chroot_daemon(wm_builddir, tmp_path).start()
    try:
        sb = d.get("/health").json["sandbox"]
        assert sb["level"] == "seccomp", sb
        assert "mnt" not in sb["namespaces"], sb
        why = sb["missing"]["ns"]
        assert "no private root" in why, why
        assert "making the mounts private: Invalid argument" in why, why
        assert "mount --bind DIR DIR" in why, why
        assert "hosts get no private root" in d.log()
        w = d.create()
        r = d.invoke(w["id"])
        assert r.status == 200, r
    finally:
        assert d.stop() == 0


def test_chroot_below_min_confinement_refuses_to_start(wm_builddir,
                                                        tmp_path):
    d = chroot_daemon(wm_builddir, tmp_path, min_confinement="ns")
    with pytest.raises(AssertionError) as e:
        d.start()
    msg = str(e.value)
    assert "min_confinement is ns but hosts would run under seccomp" in msg
    assert "making the mounts private: Invalid argument" in msg, msg


# ---- cgroup v2: inside the daemon's own (delegated) group ----------------

UNIFIED = "/sys/fs/cgroup/unified"
V2_PARENT = "wmtest"


def v2_mount():
    for path in ("/sys/fs/cgroup", UNIFIED):
        try:
            with open("/proc/self/mounts") as f:
                if any(l.split()[1] == path and l.split()[2] == "cgroup2"
                       for l in f):
                    return path
        except OSError:
            pass
    return None


def own_v2_group(pid):
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].rstrip("\n")
    return None


class DelegatedDaemon(Daemon):
    """The daemon started inside a v2 group the test made, as systemd
    starts a service with Delegate=yes inside the service's group."""

    def __init__(self, builddir, tmp, group, **kw):
        super().__init__(builddir, tmp, **kw)
        self.group = group

    def argv(self):
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"',
                str(self.group)] + super().argv()


def remove_groups(top):
    """rmdir of top's tree, deepest first."""
    for sub in sorted((p for p in top.rglob("*") if p.is_dir()),
                      key=lambda p: len(p.parts), reverse=True):
        sub.rmdir()
    top.rmdir()


@pytest.fixture
def v2_group(tmp_path):
    mount = v2_mount()
    if os.geteuid() != 0 or mount is None:
        pytest.skip("needs root and a cgroup2 mount")
    base = own_v2_group(os.getpid()) or "/"
    top = Path(mount + base.rstrip("/")) / f"wmtest-{os.getpid()}-" \
        f"{tmp_path.name}"
    top.mkdir()
    yield top
    remove_groups(top)


def test_v2_groups_live_in_the_daemons_own_group(wm_builddir, tmp_path,
                                                 v2_group):
    """cgroup_hierarchy = v2: the daemon moves into G/daemon of its own
    group G (never the hierarchy's root), hosts get
    G/PARENT/d<pid>/t-<tenant>/<leaf> beside it, and the daemon's
    directory goes with the daemon."""
    mount = v2_mount()
    rel = "/" + str(v2_group.relative_to(mount))
    d = DelegatedDaemon(wm_builddir, tmp_path, v2_group, options={
        "cgroup_hierarchy": "v2", "cgroup_parent": V2_PARENT}).start()
    try:
        sb = d.get("/health").json["sandbox"]
        assert sb["cgroup"] == "v2", sb
        assert own_v2_group(d.proc.pid) == f"{rel}/daemon"
        w = d.create()
        pid = d.get(f"/v1/workers/{w['id']}").json["pid"]
        host = own_v2_group(pid)
        assert host.startswith(
            f"{rel}/{V2_PARENT}/d{d.proc.pid}/t-default/{w['id']}-"), host
        assert d.invoke(w["id"]).status == 200
        # Nothing of the daemon's at the hierarchy's root.
        assert not (Path(mount) / V2_PARENT / f"d{d.proc.pid}").exists()
        mine = v2_group / V2_PARENT / f"d{d.proc.pid}"
        assert mine.is_dir()
    finally:
        assert d.stop() == 0
    assert not mine.exists()
