"""Per-host cgroups (issue 7; sandbox/cgroup.h): each host runs in a group
of its own with the worker's memory limit and the daemon's pids limit; a
host the memory limit's OOM killer ends is reported with reason "oom";
threads stop at host_pids_max; groups go with their hosts and the
daemon's directory with the daemon.

The worker is the attack worker of test_sandbox_native.py (built there at
test time); its "membomb" touches 1 GiB, its "threadbomb" starts threads
until pthread_create refuses.
"""

import os
from pathlib import Path

import pytest

from wm import Daemon, b64
from test_sandbox_native import MIME, attack_lib, attack_package  # noqa: F401

PARENT = "wmtest"


def daemon(builddir, tmp_path, **options):
    host = Path(builddir) / "hosts" / "native" / "wm-host-native"
    opts = {"restart_base_delay_ms": 20, "restart_max_delay_ms": 100,
            "shutdown_grace_ms": 1000, "message_timeout_ms": 10000,
            "cgroup_parent": PARENT}
    opts.update(options)
    d = Daemon(builddir, tmp_path, options=opts,
               engines={"native.engine": "name = native\n"
                                         f"mime_type = {MIME}\n"
                                         "language = C\n"
                                         f"host = {host}\n"
                                         "spawn = exec\nprotocol = 1\n"})
    d.start()
    return d


def controllers(d):
    """The cgroup flavour and controllers the daemon found; skips (fails
    with SANDBOX_MUST_WORK=1) without memory and pids."""
    sb = d.get("/health").json["sandbox"]
    if not sb["built"]:
        pytest.skip("built --without-sandbox: no cgroups")
    if not {"memory", "pids"} <= set(sb["cgroup_controllers"]):
        if os.environ.get("SANDBOX_MUST_WORK") == "1":
            pytest.fail(f"SANDBOX_MUST_WORK=1 but cgroups offer {sb}")
        pytest.skip("no cgroup memory and pids controllers here")
    return sb["cgroup"]


def group_dir(d, flavour, controller):
    base = "/sys/fs/cgroup" if flavour == "v2" else \
        f"/sys/fs/cgroup/{controller}"
    return Path(base) / PARENT / f"d{d.proc.pid}"


def host_group(pid, controller):
    """The group of process pid in controller's hierarchy (v1), or the
    unified one (v2), from /proc/<pid>/cgroup."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            if controller in ctls.split(",") or ctls == "":
                if ctls or controller == "unified":
                    return path
    return None


def create(d, package, **limits):
    r = d.post("/v1/workers", {"mime_type": MIME, "topic": "n",
                               "limits": limits,
                               "code": {"content": b64(package)}})
    assert r.status == 201, r
    return r.json["id"]


def read(path):
    return Path(path).read_text().strip()


pytestmark = pytest.mark.wmd(make=daemon, host_pids_max=48)


def test_host_runs_in_its_own_group(wmd, attack_package):
    flavour = controllers(wmd)
    wid = create(wmd, attack_package, memory_mb=64)
    pid = wmd.get(f"/v1/workers/{wid}").json["pid"]
    # Under its tenant's group (test_tenant_shares.py checks its share).
    mem = group_dir(wmd, flavour, "memory") / "t-default"
    pids = group_dir(wmd, flavour, "pids") / "t-default"
    if flavour == "v1":
        leaf = host_group(pid, "memory")
        assert leaf.startswith(
            f"/{PARENT}/d{wmd.proc.pid}/t-default/{wid}-"), leaf
        name = leaf.rsplit("/", 1)[1]
        assert int(read(mem / name / "memory.limit_in_bytes")) == 64 << 20
        assert read(pids / name / "pids.max") == "48"
        assert str(pid) in read(mem / name / "cgroup.procs").split()
    else:
        name = host_group(pid, "unified").rsplit("/", 1)[1]
        assert int(read(mem / name / "memory.max")) == 64 << 20
        assert read(mem / name / "pids.max") == "48"
    # Deleting the worker removes its group; stopping the daemon, its own.
    assert wmd.delete(f"/v1/workers/{wid}").status in (200, 204)
    wmd.wait_for(lambda: not (mem / name).exists(), what="group removed")
    assert mem.exists()
    wmd.stop()
    assert not mem.parent.exists() and not pids.parent.exists()


def test_memory_limit_kill_is_reason_oom(wmd, attack_package):
    controllers(wmd)
    wid = create(wmd, attack_package, memory_mb=48)
    r = wmd.invoke(wid, "membomb")
    assert r.status == 422 and r.json["error"]["error_type"] == "oom", r
    assert "past its memory limit (48 MiB" in r.json["error"]["message"], r
    view = wmd.wait_for(
        lambda: (v := wmd.get(f"/v1/workers/{wid}").json)["last_exit"]
        and v["last_exit"]["reason"] == "oom" and v, what="an oom exit")
    assert view["last_exit"]["signal"] == 9, view
    errors = [e for e in wmd.lifecycle(wid)
              if e["type"].endswith(".error")]
    assert any(e["data"]["error_type"] == "oom" and e["data"]["signal"] == 9
               for e in errors), errors
    # Restarted, and answering.
    wmd.wait_for(lambda: wmd.invoke(wid, "echo").status == 200,
                 what="the restarted host to answer")
    assert wmd.get("/health").status == 200


def test_threads_stop_at_host_pids_max(wmd, attack_package):
    controllers(wmd)
    wid = create(wmd, attack_package)
    r = wmd.invoke(wid, "threadbomb")
    assert r.status == 422, r
    msg = r.json["error"]["message"]
    # "threadbomb: returned N, errno 11 (Resource temporarily unavailable)"
    assert "errno 11" in msg, msg
    started = int(msg.split("returned ")[1].split(",")[0])
    assert 0 < started < 48, msg
    # The host lives on, its threads counted against it alone.
    assert wmd.invoke(wid, "echo").status == 200
    assert wmd.get(f"/v1/workers/{wid}").json["restarts"] == 0
