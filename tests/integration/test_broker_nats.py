"""broker = nats (issue 23): the topics' events in one JetStream stream,
each worker's events taken through one durable consumer that every daemon
binds, so that an event is processed once per worker across the daemons;
a publish is answered 202 only once JetStream stored it; the events of a
daemon that dies are processed by the others; a daemon whose NATS is away
answers 503 broker_unavailable (never a false 202) and drains its backlog
once NATS is back.  Polls; no assertion on how fast."""

import json
import os
import signal
import threading
import time

from nats_lib import nats, nats_daemon  # noqa: F401 (nats is a fixture)
from wm import Stream, event, publish


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


def test_a_worker_on_two_daemons_processes_each_event_once(wm_builddir,
                                                           tmp_path, nats):
    """10,000 events published through both daemons (5,000 each, batches
    of 100): the worker's two copies process 10,000 together, each event
    once; each daemon takes part."""
    a = broker_daemon(wm_builddir, tmp_path / "a", nats).start()
    b = broker_daemon(wm_builddir, tmp_path / "b", nats).start()
    try:
        a.create(name="once", topic="t")
        b.wait_for(lambda: b.get("/v1/workers/once").status == 200,
                   what="the worker on b")
        time.sleep(0.5)  # b's consumer bound (the same one as a's)

        def pub(d, tag):
            for batch in batches(5000, 100, tag):
                r = publish(d, "t", batch)
                assert r.status == 202, r

        ts = [threading.Thread(target=pub, args=(d, tag))
              for d, tag in ((a, "a"), (b, "b"))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

        def total():
            return processed(a, "once") + processed(b, "once")
        a.wait_for(lambda: total() >= 10000, timeout=120,
                   what="10,000 events processed")
        time.sleep(1)  # anything more would be a duplicate
        pa, pb = processed(a, "once"), processed(b, "once")
        assert pa + pb == 10000, (pa, pb)
        assert pa > 0 and pb > 0, (pa, pb)
    finally:
        assert b.stop() == 0
        assert a.stop() == 0


def test_a_killed_daemons_events_are_processed_by_the_other(wm_builddir,
                                                            tmp_path, nats):
    """kill -9 of one daemon in the middle of a load of slow events: every
    event answered 202 is processed (its output seen, on the survivor's
    stream of the outputs: live subscriptions see every instance's
    events), by the survivor for what the dead one had taken (after
    nats_ack_wait_ms); duplicates are bounded by what the dead one had
    pulled (its subscription's window)."""
    opts = {"nats_ack_wait_ms": "2000"}
    a = broker_daemon(wm_builddir, tmp_path / "a", nats, **opts).start()
    b = broker_daemon(wm_builddir, tmp_path / "b", nats, **opts).start()
    try:
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
    finally:
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
