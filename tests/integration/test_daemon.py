"""workmanagerd as a process: systemd notification, daemonising, the
configuration's precedence and errors (issue 3)."""

import os
import signal
import socket
import subprocess
import time

from wm import Daemon


def test_sd_notify_ready_after_recovery_and_stopping(wm_builddir, tmp_path):
    # A store with workers to recover, so that READY=1 has something to wait
    # for.
    d = Daemon(wm_builddir, tmp_path / "d")
    d.start()
    for i in range(50):
        d.create(name=f"w{i}", start=False)
    assert d.stop() == 0

    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    # as systemd's own: any user may send to it (the master drops to
    # MASTER_USER)
    os.chmod(path, 0o777)
    sock.settimeout(20)
    d.env["NOTIFY_SOCKET"] = path
    d.env["WATCHDOG_USEC"] = "200000"  # systemd's WatchdogSec=0.2
    d.start(wait_healthy=False)
    try:
        msg = b""
        while b"READY=1" not in msg:
            msg = sock.recv(4096)
        # Ready means recovered: healthy at once, every worker back.
        assert d.get("/health").status == 200
        assert len(d.get("/v1/workers").json["workers"]) == 50
        log = d.log()
        assert log.index("recovery: 50 workers restored") >= 0
        # fed at half the interval while it runs
        pings = 0
        t0 = time.monotonic()
        while pings < 3:
            if sock.recv(4096) == b"WATCHDOG=1":
                pings += 1
        assert time.monotonic() - t0 < 2
    finally:
        assert d.stop() == 0
    msgs = []
    sock.settimeout(2)
    try:
        while True:
            msgs.append(sock.recv(4096))
    except socket.timeout:
        pass
    assert any(b"STOPPING=1" in m for m in msgs), msgs
    sock.close()


def test_daemonizes_without_foreground(wm_builddir, tmp_path):
    d = Daemon(wm_builddir, tmp_path)
    argv = [a for a in d.argv() if a != "--foreground"]
    (tmp_path / "none.conf").write_text("")
    log = open(d.logfile, "ab")
    rc = subprocess.run(argv, stdout=log, stderr=log, timeout=20).returncode
    log.close()
    assert rc == 0  # the parent returns once detached
    d.wait_for(d.socket.exists, what="the control socket")
    d.wait_for(lambda: d.get("/health").status == 200, what="healthy")
    pid = None
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
            comm = open(f"/proc/{p}/comm").read().strip()
        except OSError:
            continue
        # the master, not its launcher (a fork of it, named wm-launcher)
        if cmd and cmd[0].endswith(b"workmanagerd") and \
                comm == "workmanagerd" and \
                str(d.state).encode() in b" ".join(cmd):
            pid = int(p)
    assert pid
    try:
        # detached: a session of its own (not its leader: the double fork
        # keeps it from ever taking a controlling terminal)
        assert os.getsid(pid) != os.getsid(0)
        assert os.getppid() != pid
    finally:
        os.kill(pid, signal.SIGTERM)
    d.wait_for(lambda: not d.socket.exists(), what="the socket removed")
    d.wait_for(lambda: not os.path.exists(f"/proc/{pid}"), what="exit")
    d.check_clean()


def _run(wm_builddir, tmp_path, *args, env=None):
    e = {"PATH": "/usr/bin:/bin"}
    e.update(env or {})
    return subprocess.run([str(wm_builddir / "master" / "workmanagerd"),
                           *args], capture_output=True, text=True, env=e,
                          timeout=20)


def test_print_config_precedence(wm_builddir, tmp_path):
    conf = tmp_path / "wm.conf"
    conf.write_text("idle_timeout_s = 10\nmessage_timeout_ms = 1000\n"
                    "handshake_timeout_ms = 700\n")
    r = _run(wm_builddir, tmp_path, "--print-config", "--config", str(conf),
             "-o", "message_timeout_ms=3000",
             env={"WM_IDLE_TIMEOUT_S": "20", "GROUP_LOCK_MAX_RETRIES": "7"})
    assert r.returncode == 0, r.stderr
    lines = {l.split("=")[0].strip(): l for l in r.stdout.splitlines()
             if "=" in l and not l.startswith("#")}
    assert "= 3000" in lines["message_timeout_ms"]  # -o beats the file
    assert "= 20" in lines["idle_timeout_s"]        # env beats the file
    assert "= 700" in lines["handshake_timeout_ms"]  # the file
    assert "= 7" in lines["group_lock_max_retries"]  # the original's name


def test_config_errors_name_the_key(wm_builddir, tmp_path):
    conf = tmp_path / "wm.conf"
    conf.write_text("# ok\nbogus_key = 1\n")
    r = _run(wm_builddir, tmp_path, "--print-config", "--config", str(conf))
    assert r.returncode == 2 and "bogus_key" in r.stderr and ":2" in r.stderr
    r = _run(wm_builddir, tmp_path, "--print-config", "-o",
             "message_timeout_ms=abc")
    assert r.returncode == 2 and "message_timeout_ms" in r.stderr
    r = _run(wm_builddir, tmp_path, "--print-config", "-o",
             "message_timeout_ms=40000")
    assert r.returncode == 2 and "lock_max_age_ms" in r.stderr
    r = _run(wm_builddir, tmp_path, "--print-config", "--config",
             str(tmp_path / "missing.conf"))
    assert r.returncode == 2 and "missing.conf" in r.stderr
    r = _run(wm_builddir, tmp_path, "--no-such-flag")
    assert r.returncode == 2 and "usage" in r.stderr


def test_second_daemon_on_the_same_socket_refuses(wm_builddir, tmp_path):
    d = Daemon(wm_builddir, tmp_path / "a").start()
    try:
        other = Daemon(wm_builddir, tmp_path / "b",
                       options={"control_socket": str(d.socket)})
        try:
            other.start()
            raise AssertionError("a second daemon took the socket")
        except AssertionError as e:
            assert "another workmanagerd" in str(e), e
        assert d.get("/health").status == 200
    finally:
        assert d.stop() == 0


def test_control_socket_mode_and_group(wm_builddir, tmp_path):
    """The control socket's permissions and group come from the
    configuration; the group by name or by numeric gid; an unknown group
    stops start-up naming it."""
    import grp
    gid = os.getgid() if os.getgid() != 0 else 0
    name = grp.getgrgid(gid).gr_name
    for group, want in ((name, gid), ("12345", 12345)):
        d = Daemon(wm_builddir, tmp_path / f"g{want}", options={
            "control_socket_mode": "0600", "control_socket_group": group})
        d.start()
        try:
            st = os.stat(d.socket)
            assert st.st_mode & 0o777 == 0o600
            assert st.st_gid == want
        finally:
            assert d.stop() == 0
    d = Daemon(wm_builddir, tmp_path / "bad", options={
        "control_socket_group": "nosuchgroup-wm"})
    try:
        d.start()
        raise AssertionError("started with an unknown group")
    except AssertionError as e:
        assert "control_socket_group nosuchgroup-wm: no such group" in str(e)
