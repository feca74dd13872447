"""A Python worker's concurrency is its number of host processes (DESIGN
§2; engines.d/python.engine says `concurrency = processes`): a worker of
limits.concurrency 3 gets three hosts, each a full one, its events spread
over them and processed in parallel; a host killed -9 is restarted alone
while the others keep their pids; a reload reaches all three; a stop ends
them all.

Each host identifies itself without a pid (in a pid namespace of its own,
every host is pid 2): its module, loaded once per host, draws a token at
import, and every output carries it with the wall-clock span of its
Process.
"""

import os
import signal
import time

import pytest

from pyhost_lib import create, daemon, host_pids, reload, restarts
from wm import Stream, event, publish

CODE = """
    import secrets
    import time

    HOST = secrets.token_hex(8)   # one per host: the module loads in each
    VERSION = {v}

    def Process(event):
        start = time.time_ns()
        time.sleep(0.3)
        return {{"type": "conc.out",
                 "data": {{"host": HOST, "version": VERSION,
                          "start_ns": start, "end_ns": time.time_ns()}}}}
"""

N = 9


pytestmark = pytest.mark.wmd(make=daemon)


def burst(d, out, tag, n=N):
    """Publishes n events at once and waits for their n outputs."""
    before = len(out.events())
    r = publish(d, "py", [event("conc", id_=f"{tag}{i}") for i in range(n)])
    assert r.status == 202, r
    return out.wait(before + n, timeout=60)[before:]


def overlapping_hosts(outs):
    """Pairs of outputs of different hosts whose Process spans overlap."""
    return [(a["id"], b["id"]) for a in outs for b in outs
            if a["data"]["host"] < b["data"]["host"]
            and a["data"]["start_ns"] < b["data"]["end_ns"]
            and b["data"]["start_ns"] < a["data"]["end_ns"]]


def test_three_hosts_process_in_parallel(wmd):
    w = create(wmd, CODE.format(v=1), limits={"concurrency": 3})
    wid = w["id"]
    out = Stream(wmd, "conc.out")
    outs = burst(wmd, out, "a")
    assert len(outs) == N
    hosts = {e["data"]["host"] for e in outs}
    assert len(hosts) > 1, outs
    # Two hosts ran events at the same time: parallel, not in turn.
    assert overlapping_hosts(outs), outs
    view = wmd.get(f"/v1/workers/{wid}").json
    pids = view["pids"]
    assert len(pids) == 3 and len(set(pids)) == 3, view
    assert view["pid"] == pids[0], view
    for pid in pids:
        assert os.path.exists(f"/proc/{pid}"), pid
    assert view["state"] == "running", view
    assert view["restarts"] == 0, view

    # A reload reaches every host: what each runs next is version 2.
    assert reload(wmd, wid, CODE.format(v=2))["version"] == 2
    outs = burst(wmd, out, "b")
    assert {e["data"]["version"] for e in outs} == {2}, outs
    assert host_pids(wmd, wid) == pids
    out.close()

    # A stop ends them all.
    r = wmd.post(f"/v1/workers/{wid}/stop")
    assert r.status == 200, r
    wmd.wait_for(lambda: wmd.get(f"/v1/workers/{wid}").json["state"]
                 == "stopped", what="the worker stopped")
    assert host_pids(wmd, wid) == []
    for pid in pids:
        wmd.wait_for(lambda: not os.path.exists(f"/proc/{pid}"),
                     what=f"host {pid} gone")


def test_kill_one_host_restarts_it_alone(wmd):
    w = create(wmd, CODE.format(v=1), limits={"concurrency": 3})
    wid = w["id"]
    out = Stream(wmd, "conc.out")
    burst(wmd, out, "a")
    pids = host_pids(wmd, wid)
    assert len(pids) == 3, pids
    os.kill(pids[1], signal.SIGKILL)
    wmd.wait_for(lambda: restarts(wmd, wid) == 1
                 and len(host_pids(wmd, wid)) == 3,
                 what="the killed host restarted")
    after = host_pids(wmd, wid)
    assert after[:2] == [pids[0], pids[2]], (pids, after)
    assert after[2] not in pids, (pids, after)
    view = wmd.get(f"/v1/workers/{wid}").json
    assert view["last_exit"]["signal"] == 9, view
    assert view["state"] == "running", view
    # The death is told as any host's: worker.error, then restarting.
    names = wmd.lifecycle_names(wid)
    assert "error" in names and "restarting" in names, names
    err = [e for e in wmd.lifecycle(wid)
           if e["type"].endswith(".error")][0]["data"]
    assert err["signal"] == signal.SIGKILL, err
    # The worker goes on: every event of a new burst is answered.
    assert len(burst(wmd, out, "b")) == N
    out.close()
