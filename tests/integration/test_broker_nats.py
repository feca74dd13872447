"""broker = nats (issue 23): the topics' events in one JetStream stream,
each worker's events taken through one durable consumer that every daemon
binds, so that an event is processed once per worker across the daemons;
a publish is answered 202 only once JetStream stored it; the events of a
daemon that dies are processed by the others; a daemon whose NATS is away
answers 503 broker_unavailable (never a false 202) and drains its backlog
once NATS is back.  Polls; no assertion on how fast."""

import re
import signal
import threading
import time

import pytest
from nats_lib import nats, nats_daemon  # noqa: F401 (nats is a fixture)
from wm import Stream, event, metric, publish


def broker_daemon(builddir, tmp, nats, **opts):
    options = {"broker": "nats"}
    options.update(opts)
    return nats_daemon(builddir, tmp, nats, **options)


def processed(d, worker):
    r = d.get(f"/v1/workers/{worker}")
    assert r.status == 200, r
    return r.json["events"]["processed"]


def batches(n, size, tag):
    for i in range(0, n, size):
        yield [event("echo", id_=f"{tag}-{j}") for j in range(i,
                                                               min(n, i + size))]


@pytest.mark.parametrize("n", [2, 3])
def test_a_worker_on_several_daemons_processes_each_event_once(
        wm_builddir, tmp_path, nats, n):
    """10,000 events published through two or three daemons (batches of
    100, one publisher per daemon): the worker's copies process 10,000
    together, each event once; every daemon takes part."""
    ds = [broker_daemon(wm_builddir, tmp_path / f"d{i}", nats).start()
          for i in range(n)]
    try:
        ds[0].create(name="once", topic="t")
        for d in ds[1:]:
            d.wait_for(lambda: d.get("/v1/workers/once").status == 200,
                       what="the worker there too")
        time.sleep(0.5)  # their consumer bound (the same one)
        share = 10000 // n + 1

        def pub(d, tag, count):
            for batch in batches(count, 100, tag):
                r = publish(d, "t", batch)
                assert r.status == 202, r

        counts = [share] * (n - 1) + [10000 - share * (n - 1)]
        ts = [threading.Thread(target=pub, args=(d, f"p{i}", c))
              for i, (d, c) in enumerate(zip(ds, counts))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

        def total():
            return sum(processed(d, "once") for d in ds)
        ds[0].wait_for(lambda: total() >= 10000, timeout=120,
                       what="10,000 events processed")
        time.sleep(1)  # anything more would be a duplicate
        each = [processed(d, "once") for d in ds]
        assert sum(each) == 10000, each
        assert all(p > 0 for p in each), each
    finally:
        for d in reversed(ds):
            assert d.stop() == 0


def test_a_killed_daemons_events_are_processed_by_the_other(wm_builddir,
                                                            tmp_path, nats):
    """kill -9 of one daemon in the middle of a load of slow events: every
    event answered 202 is processed (its output seen, on the survivor's
    stream of the outputs: live subscriptions see every instance's
    events), by the survivor for what the dead one had taken (after
    nats_ack_wait_ms); duplicates are bounded by what the dead one had
    pulled (its subscription's window).  The survivor's event saying the
    dead one is dead says where its events go."""
    opts = {"nats_ack_wait_ms": "2000", "instance_heartbeat_ms": "100",
            "instance_disconnected_ms": "500", "instance_dead_ms": "1500"}
    a = broker_daemon(wm_builddir, tmp_path / "a", nats, instance="a",
                      **opts).start()
    b = broker_daemon(wm_builddir, tmp_path / "b", nats, instance="b",
                      **opts).start()
    try:
        infra = Stream(b, "workmanager.infra.instance")
        a.create(name="slow", topic="t")
        b.wait_for(lambda: b.get("/v1/workers/slow").status == 200,
                   what="the worker on b")
        time.sleep(0.5)
        out = Stream(b, "slow.out")
        ids = []
        for batch in batches(400, 50, "k"):
            for e in batch:
                e["type"] = "slow"
                e["do"] = "sleep:5"
            r = publish(b, "t", batch)
            assert r.status == 202, r
            ids += [e["id"] for e in batch]
        a.wait_for(lambda: processed(a, "slow") >= 20, what="a at work")
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait()

        def seen():
            return {e["id"] for e in out.events()}
        b.wait_for(lambda: seen() >= set(ids), timeout=120,
                   what="every accepted event processed")
        assert processed(b, "slow") > 0
        dups = len(out.events()) - len(seen())
        assert 0 <= dups <= 1024, dups  # the worker's pull window at most
        out.close()

        def dead():
            return [e for e in infra.events()
                    if e["type"].endswith(".instance.dead")
                    and e["data"]["name"] == "a"]
        b.wait_for(dead, what="a seen dead")
        assert "nats_ack_wait_ms (2000 ms)" in dead()[0]["data"]["events"]
        infra.close()
    finally:
        assert b.stop() == 0


def test_nats_down_means_503_then_the_backlog_drains(wm_builddir, tmp_path,
                                                     nats):
    """NATS stopped for 5 s while publishers go on: every answer is 202 or
    503 broker_unavailable, never another; no crash; each event answered
    202 is processed once NATS is back (a file-backed stream keeps
    them; what NATS had sent as it stopped, and never arrived, is delivered
    again after nats_ack_wait_ms)."""
    a = broker_daemon(wm_builddir, tmp_path / "a", nats,
                      nats_ack_wait_ms="2000").start()
    try:
        a.create(name="w", topic="t")
        time.sleep(0.3)
        accepted, refused, stop = [], [], threading.Event()

        def load():
            i = 0
            while not stop.is_set():
                e = event("echo", id_=f"d-{i}")
                i += 1
                r = publish(a, "t", e)
                if r.status == 202:
                    accepted.append(e["id"])
                else:
                    assert r.status == 503, r
                    assert r.json["error"]["code"] == "broker_unavailable", r
                    refused.append(e["id"])
                time.sleep(0.005)

        t = threading.Thread(target=load)
        t.start()
        time.sleep(1)
        nats.stop()
        time.sleep(5)
        nats.start()
        time.sleep(2)
        stop.set()
        t.join()
        assert refused, "no publish was refused while NATS was down"
        assert a.proc.poll() is None
        a.wait_for(lambda: processed(a, "w") >= len(accepted), timeout=30,
                   what=f"the {len(accepted)} accepted events processed "
                   f"({processed(a, 'w')})")
        h = a.get("/health")
        assert h.status == 200, h
        # The log says each connection was lost and where it is again.
        log = a.log()
        assert "broker: not connected to NATS at" in log
        assert re.search(r"broker: the connection for acknowledgements and "
                         r"outputs to NATS at \S+ is lost", log)
        assert re.search(r"broker: the connection for acknowledgements and "
                         r"outputs is up again, at nats://", log)
        # Once: the tick saw this outage, so it is not a quick reconnect
        # too (it once was said twice).
        again = re.findall(r"broker: connected to NATS at \S+ again "
                           r"\(server nats://[^)]*\)(.*)", log)
        assert again == [""], again
    finally:
        assert a.stop() == 0


def test_a_group_on_two_daemons_processes_each_event_once(wm_builddir,
                                                          tmp_path, nats):
    """One group, its member running on both daemons, events published
    through both: the group's consumer gives each event to one daemon, the
    group's lock (a record in NATS) lets one process at a time across
    both: every event once, no two spans overlapping."""
    fast = {"group_lock_retry_base_delay_ms": "20",
            "redelivery_base_delay_ms": "20"}
    a = broker_daemon(wm_builddir, tmp_path / "a", nats, **fast).start()
    b = broker_daemon(wm_builddir, tmp_path / "b", nats, **fast).start()
    try:
        a.create(topic="g", name="ga", group="lockers")
        b.wait_for(lambda: b.get("/v1/workers/ga").status == 200,
                   what="the member on b")
        time.sleep(0.5)
        out = Stream(a, "span.out")
        for d, tag in ((a, "a"), (b, "b")):
            r = publish(d, "g", [event("span", id_=f"{tag}{i}", do="span:10")
                                 for i in range(10)])
            assert r.status == 202, r
        got = out.wait(20, timeout=60)
        time.sleep(1)  # a duplicate would show now
        got = out.events()
        assert sorted(e["id"] for e in got) == sorted(
            [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
        spans = sorted((e["data"]["start_ns"], e["data"]["end_ns"])
                       for e in got)
        for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
            assert e1 <= s2, f"overlap: {spans}"
        assert processed(a, "ga") + processed(b, "ga") == 20
        out.close()
    finally:
        assert b.stop() == 0
        assert a.stop() == 0


def test_a_frozen_holders_output_is_fenced(wm_builddir, tmp_path, nats):
    """The daemon holding a group's lock is frozen (SIGSTOP) in the middle
    of an event: the other takes the stale lock over and the event once
    its ack wait is over, and publishes its output; the frozen one, resumed,
    finishes the event under its old token: its output is refused (stale),
    so the output goes out once.  On resuming, the frozen daemon may see
    its event's deadline (message_timeout_ms, which must be below
    lock_max_age_ms) pass before it reads the host's result: then it
    publishes nothing either, and the scenario is run again (three times
    at most) until the stale write is seen refused; a machine so slow
    that it never is skips, each attempt having checked the output went
    out once (an ASan build did, three times in three)."""
    quick = {"lock_max_age_ms": "4000", "message_timeout_ms": "3000",
             "nats_ack_wait_ms": "2000",
             "group_lock_retry_base_delay_ms": "100",
             "group_lock_max_retries": "10",
             "redelivery_base_delay_ms": "20"}
    a = broker_daemon(wm_builddir, tmp_path / "a", nats, **quick).start()
    b = broker_daemon(wm_builddir, tmp_path / "b", nats, **quick).start()
    frozen = None
    fenced = 0
    try:
        a.create(topic="g", name="ga", group="lockers")
        b.wait_for(lambda: b.get("/v1/workers/ga").status == 200,
                   what="the member on b")
        time.sleep(0.5)
        out = {d: Stream(d, "slow.out") for d in (a, b)}
        for attempt in range(3):
            x = f"x{attempt}"
            acquired = {d: metric(d, "workmanager_grouplock_acquired_total")
                        for d in (a, b)}
            stolen = {d: metric(d, "workmanager_grouplock_stolen_total")
                      for d in (a, b)}
            stale = {d: metric(d, "workmanager_grouplock_stale_writes_total")
                     for d in (a, b)}
            late = {d: d.log().count("had no Result within") for d in (a, b)}
            r = publish(a, "g", event("slow", id_=x, do="sleep:2500"))
            assert r.status == 202, r

            def holder():
                for d, o in ((a, b), (b, a)):
                    if metric(d, "workmanager_grouplock_acquired_total") > \
                            acquired[d]:
                        return d, o
                return None
            frozen, other = a.wait_for(holder, what="a holder")
            frozen.proc.send_signal(signal.SIGSTOP)
            other.wait_for(lambda: metric(
                other, "workmanager_grouplock_stolen_total") > stolen[other],
                timeout=30, what="the stale lock taken over")
            live = out[other]
            other.wait_for(lambda: x in [e["id"] for e in live.events()],
                           timeout=30, what="the output of the survivor")
            frozen.proc.send_signal(signal.SIGCONT)
            f = frozen

            def refused():
                return metric(f, "workmanager_grouplock_stale_writes"
                              "_total") > stale[f]
            f.wait_for(lambda: refused() or
                       f.log().count("had no Result within") > late[f],
                       timeout=30, what="the frozen holder's event over")
            frozen = None
            time.sleep(1)
            ids = [e["id"] for e in live.events()]
            assert ids.count(x) == 1, ids  # never twice
            if refused():
                fenced += 1
                break
        if not fenced:
            # each attempt still proved the output went out once
            pytest.skip("in 3 attempts the frozen holder's deadline always "
                        "passed before it read its host's result (a slow "
                        "machine orders them so): no stale write to refuse")
        for s_ in out.values():
            s_.close()
    finally:
        if frozen is not None:
            frozen.proc.send_signal(signal.SIGCONT)
        assert b.stop() == 0
        assert a.stop() == 0


def test_a_held_up_daemon_keeps_the_pubacks_it_received(wm_builddir,
                                                        tmp_path, nats):
    """The daemon stopped (SIGSTOP) for longer than a publish waits for
    its PubAck (5 s) while six publishers keep batches in flight: once it
    runs again, the PubAcks that came meanwhile are read before any
    publish is given up, so every answer is 202 (a loop held up by a
    blocking call, as during a NATS cluster's failover, is the same
    case)."""
    a = broker_daemon(wm_builddir, tmp_path / "a", nats).start()
    answers, halt = [], threading.Event()

    def load(tag):
        i = 0
        while not halt.is_set():
            r = publish(a, "t", [event("echo", id_=f"{tag}-{i}-{j}")
                                 for j in range(100)])
            answers.append(r.status)
            i += 1

    ts = [threading.Thread(target=load, args=(f"h{k}",)) for k in range(6)]
    try:
        for t in ts:
            t.start()
        a.wait_for(lambda: len(answers) >= 40, what="publishers under way")
        a.proc.send_signal(signal.SIGSTOP)
        time.sleep(6)
        a.proc.send_signal(signal.SIGCONT)
        n = len(answers)
        a.wait_for(lambda: len(answers) >= n + 40, what="publishes again")
        halt.set()
        for t in ts:
            t.join()
        assert answers.count(202) == len(answers), \
            {s: answers.count(s) for s in set(answers)}
    finally:
        halt.set()
        a.proc.send_signal(signal.SIGCONT)
        for t in ts:
            if t.ident is not None:
                t.join()
        assert a.stop() == 0
