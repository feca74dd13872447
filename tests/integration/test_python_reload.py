"""Hot reload of a Python worker (issue 8; DESIGN §7): a new version's
module replaces the old one in the running host, the old one is dropped
(200 reloads leave the host's memory bounded), and a version that does not
load leaves the running one serving."""

import pytest

from pyhost_lib import create, daemon, host_pid, proc_status, reload

VERSION = """
    import json
    TABLE = [{{"v": {v}, "i": i, "pad": "x" * 200}} for i in range(2000)]

    def Process(event):
        return {{"type": "v", "data": {{"version": {v}, "n": len(TABLE)}}}}
"""


pytestmark = pytest.mark.wmd(make=daemon)


def rss_kib(pid):
    return int(proc_status(pid)["VmRSS"].split()[0])


def test_reload_swaps_the_module_in_the_same_host(wmd):
    w = create(wmd, VERSION.format(v=1))
    pid = host_pid(wmd, w["id"])
    assert wmd.invoke(w["id"], "go").json["data"]["version"] == 1
    assert reload(wmd, w["id"], VERSION.format(v=2))["version"] == 2
    assert wmd.invoke(w["id"], "go").json["data"]["version"] == 2
    assert host_pid(wmd, w["id"]) == pid


def test_failed_reload_keeps_the_running_version(wmd):
    w = create(wmd, VERSION.format(v=1))
    r = wmd.put(f"/v1/workers/{w['id']}/code",
                {"code": {"content": __import__("wm").b64(
                    "def Process(event) nope\n")}})
    assert r.status == 422, r
    assert "SyntaxError" in r.json["error"]["message"], r
    assert wmd.invoke(w["id"], "go").json["data"]["version"] == 1


def test_failed_reload_does_no_harm(wmd):
    """Issue 27: a reload that fails leaves the running version's host
    alive (the same process), the worker `running` at its old version, and
    emits no `failed` state: only the failed reload is reported."""
    w = create(wmd, VERSION.format(v=1))
    pid = host_pid(wmd, w["id"])
    assert wmd.invoke(w["id"], "go").json["data"]["version"] == 1
    r = wmd.put(f"/v1/workers/{w['id']}/code",
                {"code": {"content": __import__("wm").b64(
                    "def Process(event) nope\n")}})
    assert r.status == 422, r
    assert wmd.invoke(w["id"], "go").json["data"]["version"] == 1
    view = wmd.get(f"/v1/workers/{w['id']}").json
    assert view["state"] == "running" and view["version"] == 1, view
    assert view["pid"] == pid and view["restarts"] == 0, view
    states = [e["data"].get("state") for e in wmd.lifecycle(w["id"])]
    assert "failed" not in states, wmd.lifecycle(w["id"])


def test_tracebacks_show_the_running_versions_lines(wmd):
    """Tracebacks quote the module's source (there is no file): after a
    reload that failed at its top level, the running version's lines."""
    w = create(wmd, "def Process(event):\n    raise KeyError('v1 line')\n")
    r = wmd.put(f"/v1/workers/{w['id']}/code",
                {"code": {"content": __import__("wm").b64(
                    "x = 1\nraise ValueError('v2 top level')\n")}})
    assert r.status == 422 and "v2 top level" in r.json["error"]["message"]
    r = wmd.invoke(w["id"], "go")
    tb = r.json["error"]["traceback"]
    assert "raise KeyError('v1 line')" in tb, tb
    assert "v2" not in tb, tb


def test_200_reloads_leave_the_host_bounded(wmd):
    """Each version holds about 1 MiB of data; 200 reloads in one host keep
    its resident memory within a few MiB of where it started (the old
    modules are freed, not accumulated)."""
    w = create(wmd, VERSION.format(v=0))
    wid = w["id"]
    pid = host_pid(wmd, wid)
    for v in range(1, 6):
        reload(wmd, wid, VERSION.format(v=v))
    assert wmd.invoke(wid, "go").status == 200
    before = rss_kib(pid)
    for v in range(6, 206):
        reload(wmd, wid, VERSION.format(v=v))
    r = wmd.invoke(wid, "go")
    assert r.json["data"] == {"version": 205, "n": 2000}, r
    assert host_pid(wmd, wid) == pid
    after = rss_kib(pid)
    assert after - before < 8 * 1024, (before, after)
