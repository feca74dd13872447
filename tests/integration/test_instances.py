"""Several instances on one store (issue 23): each daemon's heartbeat in
the store, the others' states judged by its own clock (connected,
disconnected, dead, connected again), GET /v1/instances and `wmctl
instances` (master/workers/instances.h).

The NATS tests start their own nats-server (nats_lib.py) and daemons with
short heartbeat timings, so that a state change takes a second or two; what
they assert is the sequence of states, never how long it took."""

import os
import signal

import pytest

from nats_lib import nats, nats_daemon  # noqa: F401 (nats is a fixture)
from test_tenant_quotas import wmctl

FAST = {"instance_heartbeat_ms": "100", "instance_disconnected_ms": "500",
        "instance_dead_ms": "1500"}


def states(d):
    return {i["name"]: i["state"]
            for i in d.get("/v1/instances").json["instances"]}


def test_file_store_is_one_instance(wmd):
    r = wmd.get("/v1/instances")
    assert r.status == 200, r
    (me,) = r.json["instances"]
    assert me["self"] is True and me["state"] == "connected", me
    assert me["pid"] == wmd.proc.pid and len(me["id"]) == 36, me
    out = wmctl(wmd, "instances")
    assert out.returncode == 0 and "(this one)" in out.stdout, out
    assert wmd.post("/v1/instances").status == 405


def test_states_follow_the_heartbeats(wm_builddir, tmp_path, nats):
    ds = [nats_daemon(wm_builddir, tmp_path / f"d{i}", nats,
                      instance=f"node{i}", **FAST).start() for i in range(3)]
    try:
        a, b, c = ds
        every = {"node0": "connected", "node1": "connected",
                 "node2": "connected"}
        a.wait_for(lambda: states(a) == every and states(c) == every,
                   what="three connected instances")
        os.kill(c.proc.pid, signal.SIGSTOP)
        try:
            a.wait_for(lambda: states(a)["node2"] == "disconnected",
                       what="node2 disconnected")
            a.wait_for(lambda: states(a)["node2"] == "dead"
                       and states(b)["node2"] == "dead", what="node2 dead")
        finally:
            os.kill(c.proc.pid, signal.SIGCONT)
        a.wait_for(lambda: states(a) == every and states(b) == every,
                   what="node2 back")
        # each change once, in order, in a's log
        changes = [ln.split("(node2) is ")[1] for ln in a.log().splitlines()
                   if "(node2) is " in ln]
        assert changes == ["disconnected (was connected)",
                           "dead (was disconnected)",
                           "connected (was dead)"], changes
    finally:
        for d in ds:
            d.stop()


def test_a_clean_stop_is_seen_at_once(wm_builddir, tmp_path, nats):
    """A daemon that stops removes its heartbeat: the others see it dead
    without waiting instance_dead_ms (here ten minutes)."""
    slow = {"instance_heartbeat_ms": "100",
            "instance_disconnected_ms": "300000",
            "instance_dead_ms": "600000"}
    a = nats_daemon(wm_builddir, tmp_path / "a", nats, instance="a",
                    **slow).start()
    b = nats_daemon(wm_builddir, tmp_path / "b", nats, instance="b",
                    **slow).start()
    try:
        a.wait_for(lambda: states(a).get("b") == "connected", what="b seen")
        assert b.stop() == 0
        a.wait_for(lambda: states(a).get("b") == "dead", what="b gone")
    finally:
        b.stop()
        a.stop()
