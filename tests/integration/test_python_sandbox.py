"""wm-host-python confined (issue 8; DESIGN §10, §11; sandbox/role_python.c):
the running host's /proc/<pid>/status, with the import allowlist on and
off (test_python_attacks.py tries the escapes).

Skips: a build made --without-sandbox has no filter to test; a kernel
without seccomp skips unless SANDBOX_MUST_WORK=1 (CI), where it fails.
"""

import os
import re

import pytest

from pyhost_lib import create, daemon, host_pid, proc_status, require_sandbox

UID_BASE = 3000000  # host_uid_base's default (workmanager.conf(5))
MUST_WORK = os.environ.get("SANDBOX_MUST_WORK") == "1"


def confined(builddir, tmp_path, param):
    """A daemon whose Python hosts have the allowlist on or off and are
    forked from the zygote or exec'd: param is (allowlist, spawn)."""
    require_sandbox(builddir)
    allowlist, spawn = param
    d = daemon(builddir, tmp_path, spawn=spawn,
               options={"python_allowlist": allowlist})
    d.spawn = spawn
    return d


pytestmark = pytest.mark.wmd(
    make=confined,
    params=[("on", "zygote"), ("off", "zygote"), ("on", "exec")],
    ids=lambda p: "-".join(p))


WORKER = """
    def Process(event):
        return {"type": "echo"}
"""


def test_running_host_is_confined(wmd):
    """/proc/<pid>/status of a running Python host: seccomp filter mode,
    no_new_privs, one filter, no capability, its own uid from the slot
    range (root daemon), the Hello's level."""
    w = create(wmd, WORKER)
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
        # PID 2 under its init, whose parent is the zygote (root, no
        # filter, the network, IPC and UTS namespaces its hosts share;
        # wm-zygote in ps(1)), the launcher's child; or exec'd, the
        # launcher's grandchild through the init.
        assert [int(p) for p in st["NSpid"].split()][1:] == [2], st
        init = int(st["PPid"])
        ist = proc_status(init)
        assert ist["Name"] == "wm-init", ist
        parent = int(ist["PPid"])
        if wmd.spawn == "zygote":
            zst = proc_status(parent)
            assert zst["Name"] == "wm-zygote", zst
            assert zst["Uid"].split()[0] == "0" and zst["Seccomp"] == "0", zst
            for ns in ("net", "ipc", "uts"):
                assert os.readlink(f"/proc/{pid}/ns/{ns}") == \
                    os.readlink(f"/proc/{parent}/ns/{ns}") != \
                    os.readlink(f"/proc/self/ns/{ns}"), ns
            for ns in ("mnt", "pid", "cgroup"):
                assert os.readlink(f"/proc/{pid}/ns/{ns}") != \
                    os.readlink(f"/proc/{parent}/ns/{ns}"), ns
            parent = int(zst["PPid"])
        assert proc_status(parent)["Name"] == "wm-launcher"
        # the worker's name in ps(1), not the zygote's
        assert st["Name"] == "wm-host-python", st
    elif MUST_WORK:
        pytest.fail("SANDBOX_MUST_WORK=1 but the tests do not run as root")
    m = re.search(rf"host pid {pid} says hello \(engine python, "
                  r"max_inflight 1, prefetch 32, confinement (\w+)\)",
                  wmd.log())
    assert m, wmd.log()
    assert m.group(1) in ("seccomp", "ns", "full")
    if MUST_WORK:
        assert m.group(1) == "full"
