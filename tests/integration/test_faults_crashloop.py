"""Crash loops and deaths that are not a worker's fault (issue 21, items 1
and 2; DESIGN §6, §7; workmanager-workers(7), CRASHES).

  - A worker that crash-loops on a few poison events goes `failed`; its
    other events wait (as for a stopped worker) until it is started again,
    uncounted, and are then processed once each; only the poison events
    are dead-lettered (reason crash, deliverycount 4).
  - Deaths with the Python zygote, with the launcher (the master exits 1
    and is started again, as systemd would) and of a pool host that dies
    before it took its worker's code charge nothing: no worker goes
    `failed`, no event is dead-lettered or counted, every event is
    processed.

Each test keeps a ledger of its events: ids published, ids whose output
came back (Server-Sent Events), ids dead-lettered, and, for the test host
(`log_events`), every delivery that reached a host with its count.
"""

import os
import re
import signal
import textwrap
import threading
import time

import pytest

from pyhost_lib import create as py_create
from pyhost_lib import daemon as py_daemon
from pyhost_lib import proc_status, require_sandbox
import wm
from wm import Daemon, Stream, b64, event, metric, processes, publish

FAST = wm.FAST

ONE = "application/x-wm-test-one"


def one_at_a_time(builddir, tmp_path, **options):
    """A daemon with the test host and engine `test-one`: the test host
    taking one event at a time (its mode inflight1), so that a crash
    charges the event that caused it and no other."""
    d = Daemon(builddir, tmp_path, options=dict(FAST, **options))
    link = d.tmp / "wm-host-test.inflight1"
    if not link.exists():
        link.symlink_to(d.testhost)
    (d.engines / "test-one.engine").write_text(
        f"name = test-one\nmime_type = {ONE}\nlanguage = test\n"
        f"host = {link}\nspawn = exec\nprotocol = 1\n")
    return d


def deliveries(d):
    """{event id: [delivery counts, as the host saw them]} (log_events)."""
    out = {}
    for i, n in re.findall(r"event (\S+) delivery (\d+)", d.log()):
        out.setdefault(i, []).append(int(n))
    return out


def view(d, wid):
    r = d.get(f"/v1/workers/{wid}")
    assert r.status == 200, r
    return r.json


def ids(events):
    return [e["id"] for e in events]


@pytest.mark.wmd(make=one_at_a_time, crash_loop_max=2)
def test_poison_backlog_waits_while_failed(wmd):
    """Three poison events among 300 good ones: the crash loop leaves the
    worker failed, and its backlog waits, uncounted, until it is started;
    at the end every good event was processed once, on its first
    delivery, and only the poison ones are dead-lettered."""
    w = wmd.create(mime_type=ONE, topic="p", code="echo\nlog_events")
    out = Stream(wmd, "good.out")
    dead = Stream(wmd, "p-dead")
    poison = {f"bad-{k}" for k in (50, 150, 250)}
    batch = [event("poison", id_=f"bad-{k}", do="crash") if f"bad-{k}" in
             poison else event("good", id_=f"g-{k}") for k in range(303)]
    good = {e["id"] for e in batch} - poison
    r = publish(wmd, "p", batch)
    assert r.status == 202, r

    starts = 0
    while True:
        wmd.wait_for(lambda: view(wmd, w["id"])["state"] == "failed" or
                     len(set(ids(out.events()))) == len(good) and
                     len(dead.events()) == len(poison), timeout=30,
                     what="a crash loop, or every event settled")
        if view(wmd, w["id"])["state"] != "failed":
            break
        # Failed: its events wait, uncounted; none is dead-lettered.
        done = len(out.events())
        time.sleep(0.3)
        assert len(out.events()) == done
        assert set(ids(dead.events())) <= poison, ids(dead.events())
        assert view(wmd, w["id"])["state"] == "failed"
        starts += 1
        assert starts <= 12, "more starts than 3 poison events need"
        r = wmd.post(f"/v1/workers/{w['id']}/start")
        assert r.status == 200, r
    assert starts >= 1, "the worker never went failed: no crash loop"

    # The ledger: every good event once, none lost; poison dead-lettered.
    got = ids(out.events())
    assert sorted(got) == sorted(good), (len(got), len(good))
    assert sorted(ids(dead.events())) == sorted(poison)
    for e in dead.events():
        assert e["deadletterreason"] == "crash", e
        assert e["deliverycount"] == "4", e
    seen = deliveries(wmd)
    for i in good:
        assert seen.get(i) == [1], (i, seen.get(i))
    for i in poison:
        assert seen.get(i) == [1, 2, 3, 4], (i, seen.get(i))
    assert view(wmd, w["id"])["state"] != "failed"


# ---- deaths that are not the worker's fault ---------------------------

PY_WORKER = """
    import time

    def Process(event):
        time.sleep(0.01)
        return {"type": "done", "data": event["data"]}
"""


def zygote_pid(d):
    """The Python zygote's pid: a `--zygote` process of this daemon's tree
    (never another daemon's: tests may run beside each other) whose parent
    is the launcher (its forks are the hosts), or None while there is
    none."""
    procs = processes()
    for p in wm.tree(d.proc.pid, procs).values():
        parent = procs.get(p.ppid)
        if "--zygote" in p.cmdline.split() and parent is not None and \
                "--zygote" not in parent.cmdline.split() and \
                p.state != "Z" and "wm-host-python" in p.cmdline:
            return p.pid
    return None


@pytest.mark.wmd(make=py_daemon, options={"crash_loop_max": 3,
                                         "redelivery_base_delay_ms": 20})
def test_zygote_kills_charge_nothing(wmd):
    """Six kills of the Python zygote while two workers take events: their
    hosts die with it each time and come back; no worker goes failed, no
    event is dead-lettered, every event is processed (at least once: an
    event whose host died before its Result is processed again)."""
    workers = [py_create(wmd, PY_WORKER, topic=f"z{k}", name=f"z{k}")
               for k in range(2)]
    out = Stream(wmd, "done")
    dead = [Stream(wmd, f"z{k}-dead") for k in range(2)]
    published = set()
    for round_ in range(6):
        for k in range(2):
            batch = [event("x", id_=f"z{k}-{round_}-{n}",
                           data={"id": f"z{k}-{round_}-{n}"})
                     for n in range(40)]
            assert publish(wmd, f"z{k}", batch).status == 202
            published |= set(ids(batch))
        # Both workers' hosts run (events in flight), then the zygote goes.
        pids = wmd.wait_for(lambda: all(view(wmd, w["id"])["state"] ==
                                        "running" for w in workers) and
                            [view(wmd, w["id"])["pid"] for w in workers],
                            what="both workers' hosts running")
        zyg = wmd.wait_for(lambda: zygote_pid(wmd), what="the zygote")
        os.kill(zyg, signal.SIGKILL)
        # Their hosts die with it: each worker gets another, or, if the
        # deaths were charged, goes pending or failed.
        wmd.wait_for(lambda: all(view(wmd, w["id"])["pid"] not in (0, pid)
                                 or view(wmd, w["id"])["state"] != "running"
                                 for w, pid in zip(workers, pids)),
                     what="the hosts' deaths with the zygote")
    # (A Python worker's output has an id of its own: the input's is in
    # its data.)
    done = lambda: {e["data"]["id"] for e in out.events()}  # noqa: E731
    wmd.wait_for(lambda: done() >= published, timeout=30,
                 what="every event's output")
    assert done() == published
    time.sleep(0.2)
    assert [ids(s.events()) for s in dead] == [[], []]
    for w in workers:
        v = view(wmd, w["id"])
        assert v["state"] != "failed", v
        assert v["restarts"] == 0, v
    assert "crash loop" not in wmd.log()
    assert len(re.findall(r"not the worker's fault \(its zygote died\)",
                          wmd.log())) >= 6, "a kill that hit no host"


def launcher_pid(d):
    found = [p.pid for p in processes().values()
             if p.ppid == d.proc.pid and p.state != "Z" and
             proc_status(p.pid)["Name"] == "wm-launcher"]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.wmd(options=dict(FAST, crash_loop_max=2))
def test_launcher_kills_charge_nothing(wmd):
    """Four kills of the launcher while events flow: each time the master
    exits 1 (no host can start without it) and is started again, as
    systemd would; the events that were in its hosts come back on their
    first delivery, none is dead-lettered, every one is processed (at
    least once: those in a host as the launcher died run again)."""
    w = wmd.create(topic="l", code="echo\nlog_events")
    published = []
    for round_ in range(4):
        batch = [event("x", id_=f"l-{round_}-{n}", do="sleep:20")
                 for n in range(40)]
        assert publish(wmd, "l", batch).status == 202
        published += ids(batch)
        wmd.wait_for(lambda: re.search(rf"event l-{round_}-\d+ delivery",
                                       wmd.log()),
                     what="events in the host")
        os.kill(launcher_pid(wmd), signal.SIGKILL)
        assert wmd.proc.wait(20) == 1, wmd.log()
        wmd.start()
    out = Stream(wmd, "x.out")
    dead = Stream(wmd, "l-dead")
    # Outputs published before the last start were not seen by this
    # stream: the host's log says which events reached a host and
    # completed; the journal's backlog drains now.
    wmd.wait_for(lambda: metric(wmd, "workmanager_events_pending") == 0 and
                 set(deliveries(wmd)) >= set(published), timeout=30,
                 what="the backlog drained")
    seen = deliveries(wmd)
    assert sorted(seen) == sorted(published), \
        set(published) - set(seen)
    for i, counts in seen.items():
        assert set(counts) == {1}, (i, counts)
    assert dead.events() == []
    v = view(wmd, w["id"])
    assert v["state"] != "failed" and v["restarts"] == 0, v
    out.close()
    dead.close()


def warm_daemon(builddir, tmp_path):
    require_sandbox(builddir)
    d = py_daemon(builddir, tmp_path)
    text = (d.engines / "python.engine").read_text()
    (d.engines / "python.engine").write_text(text + "warm = 1\n")
    return d


@pytest.mark.wmd(make=warm_daemon)
def test_pool_host_dead_before_its_load_charges_nothing(wmd):
    """A pool host that dies before it read its worker's code (stopped,
    taken by a create, then killed) is not the worker's crash: the create
    loads its code into another host and succeeds, with no restart and no
    last exit."""
    pool = wmd.wait_for(lambda: re.findall(
        r"engine python: pool host pid (\d+) ready", wmd.log()),
        what="a ready pool host")
    victim = int(pool[0])
    os.kill(victim, signal.SIGSTOP)
    made = {}
    body = {"mime_type": "text/x-python", "topic": "pool",
            "code": {"content": b64(textwrap.dedent(PY_WORKER))}}
    t = threading.Thread(
        target=lambda: made.update(r=wmd.post("/v1/workers", body)))
    try:
        t.start()
        wmd.wait_for(lambda: f"takes host pid {victim} from the python pool"
                     in wmd.log(), what="the create taking the pool host")
    finally:
        os.kill(victim, signal.SIGKILL)
    t.join(30)
    r = made["r"]
    assert r.status == 201, r
    v = view(wmd, r.json["id"])
    assert v["restarts"] == 0 and v["last_exit"] is None, v
    assert v["pid"] != victim
    assert re.search(rf"worker .*: host pid {victim} exited: .*not the "
                     r"worker's fault \(a pool host", wmd.log())
    assert proc_status(v["pid"])["Name"] == "wm-host-python"
