"""Backpressure at the door (issue 21 item 3): an event is accepted (202)
only if every subscriber's queue can hold it, so that nothing accepted is
dropped afterwards.  A publish that does not fit is refused whole with 503
subscriber_full and Retry-After; invoke shares the worker's queue; the
daemon's gateway publish answers the worker the same way; drop_oldest_topics
keeps the other policy, dead-lettering the oldest waiting event
(backlog_overflow), for the topics that opt in.

Each test starts a daemon with the protocol test host and a small
queue_max_events; a suspended worker is the subscriber that does not keep
up (its events queue, none is delivered).
"""

import time

import pytest

import wm
from wm import Stream, event, metric, publish

FAST = dict(wm.FAST, queue_max_events=5)


def refused(d, reason="subscriber_full"):
    return metric(d, "workmanager_publish_refused_total", reason=reason)


def check_full(r, worker):
    """r is the door's refusal naming worker (its record)."""
    assert r.status == 503, r
    assert r.code == "subscriber_full", r
    assert r.headers.get("Retry-After") == "1", r.headers
    msg = r.json["error"]["message"]
    assert worker["name"] in msg and "queue_max_events" in msg, msg


@pytest.mark.wmd(options=FAST)
def test_full_subscriber_refuses_publish_nothing_dropped(wmd):
    slow = wmd.create(topic="busy", name="slow", code="echo\nlog_events")
    fast = wmd.create(topic="busy", name="fast")
    assert wmd.post(f"/v1/workers/{slow['id']}/suspend").status == 200
    dead = Stream(wmd, "busy-dead")
    out = Stream(wmd, "x.out")
    for i in range(5):
        r = publish(wmd, "busy", event("x", id_=f"a{i}"))
        assert r.status == 202, r
    wmd.wait_for(lambda: metric(
        wmd, "workmanager_worker_events_processed_total",
        worker=fast["id"]) == 5, what="fast's events processed")
    # The sixth does not fit slow's queue: refused, for fast too.
    r = publish(wmd, "busy", event("x", id_="a5"))
    check_full(r, slow)
    assert r.json["error"]["subscriber"] == slow["id"]
    assert r.json["error"]["accepted"] == []
    # A batch is refused whole, however small.
    r = publish(wmd, "busy", [event("x", id_="b0"), event("x", id_="b1")])
    check_full(r, slow)
    assert refused(wmd) == 2
    assert metric(wmd, "workmanager_worker_events_refused_total",
                  worker=slow["id"]) == 3
    assert metric(wmd, "workmanager_worker_events_refused_total",
                  worker=fast["id"]) == 0
    # Started again, slow processes each accepted event once; fast had
    # only those too.
    assert wmd.post(f"/v1/workers/{slow['id']}/resume").status == 200
    got = out.wait(10)
    ids = sorted(e["id"] for e in got)
    assert ids == sorted([f"a{i}" for i in range(5)] * 2), ids
    wmd.wait_for(lambda: metric(
        wmd, "workmanager_worker_events_processed_total",
        worker=slow["id"]) == 5, what="slow's backlog processed")
    time.sleep(0.2)
    assert len(out.events()) == 10
    assert dead.events() == []
    assert metric(wmd, "workmanager_events_dead_lettered_total") == 0
    assert metric(wmd, "workmanager_events_overflowed_total") == 0
    assert "backlog_overflow" not in wmd.log()
    for i in range(5):
        assert f"event a{i} delivery 1" in wmd.log()
    # Drained, the door opens again.
    r = publish(wmd, "busy", event("x", id_="a6"))
    assert r.status == 202, r


@pytest.mark.wmd(options=FAST)
def test_batch_is_all_or_nothing(wmd):
    w = wmd.create(topic="batch", name="held")
    assert wmd.post(f"/v1/workers/{w['id']}/suspend").status == 200
    r = publish(wmd, "batch", [event("x", id_=f"c{i}") for i in range(3)])
    assert r.status == 202, r
    # 3 + 3 > 5: none of the three is accepted.
    r = publish(wmd, "batch", [event("x", id_=f"d{i}") for i in range(3)])
    check_full(r, w)
    assert r.json["error"]["accepted"] == []
    # A batch larger than any queue says so.
    r = publish(wmd, "batch", [event("x") for _ in range(6)])
    check_full(r, w)
    assert "never fits" in r.json["error"]["message"]
    out = Stream(wmd, "x.out")
    assert wmd.post(f"/v1/workers/{w['id']}/resume").status == 200
    got = out.wait(3)
    time.sleep(0.2)
    assert sorted(e["id"] for e in out.events()) == ["c0", "c1", "c2"]
    # Two fit now.
    r = publish(wmd, "batch", [event("x", id_=f"e{i}") for i in range(2)])
    assert r.status == 202, r
    assert len(out.wait(5)) == 5 and got


@pytest.mark.wmd(options=FAST)
def test_full_tenant_does_not_block_another(wmd):
    """One tenant's full subscriber refuses that tenant's publishes only."""
    slow = wmd.create(topic="busy", tenant="slowco", name="slow")
    wmd.post(f"/v1/workers/{slow['id']}/suspend")
    wmd.create(topic="busy", tenant="fastco", name="fast")
    r = publish(wmd, "busy", [event("x") for _ in range(5)], tenant="slowco")
    assert r.status == 202, r
    r = publish(wmd, "busy", event("x"), tenant="slowco")
    check_full(r, slow)
    out = Stream(wmd, "y.out", tenant="fastco")
    r = publish(wmd, "busy", event("y", id_="fast-1"), tenant="fastco")
    assert r.status == 202, r
    assert out.wait(1)[0]["id"] == "fast-1"


@pytest.mark.wmd(options=dict(FAST, queue_max_events=2))
def test_invoke_refused_when_queue_full(wmd):
    w = wmd.create(topic="inv", name="busyw")
    for i in range(2):
        r = publish(wmd, "inv", event("x", id_=f"s{i}", do="sleep:1500"))
        assert r.status == 202, r
    r = wmd.invoke(w["id"], "echo")
    check_full(r, w)
    assert r.json["error"]["subscriber"] == w["id"]
    assert refused(wmd) == 1
    wmd.wait_for(lambda: metric(
        wmd, "workmanager_worker_events_processed_total",
        worker=w["id"]) == 2, what="the queue drained")
    r = wmd.invoke(w["id"], "echo")
    assert r.status == 200, r


@pytest.mark.wmd(options=dict(FAST, queue_max_events=2))
def test_gateway_publish_refused_when_subscriber_full(wmd):
    """A worker's own publish (workmanager.publish) gets the same answer:
    503, the full worker named; the worker decides what to do."""
    held = wmd.create(topic="full", name="held")
    wmd.post(f"/v1/workers/{held['id']}/suspend")
    r = publish(wmd, "full", [event("x"), event("x")])
    assert r.status == 202, r
    w = wmd.create(topic="gw", name="maker")
    r = wmd.invoke(w["id"], "gateway", gwservice="workmanager.publish",
                   gwmethod="publish",
                   gwrequest='{"topic": "full", "event": {"specversion": '
                             '"1.0", "id": "g1", "source": "t", "type": "x"}}')
    assert r.status == 200, r
    res = r.json["data"]
    assert res["status"] == 503, res
    assert "subscriber_full" in res["error"] and "held" in res["error"], res
    assert refused(wmd) == 1


@pytest.mark.wmd(options=dict(FAST, queue_max_events=2, max_redeliveries=1))
def test_output_to_full_subscriber_is_retried_not_dropped(wmd):
    """A worker's output that a full queue cannot hold is refused: its
    input is not acknowledged but retried (output_refused), never dropped
    as backlog_overflow."""
    wmd.create(topic="in", name="maker")
    keeper = wmd.create(topic="x.out", name="keeper")
    wmd.post(f"/v1/workers/{keeper['id']}/suspend")
    r = publish(wmd, "x.out", [event("x.out"), event("x.out")])
    assert r.status == 202, r
    dead = Stream(wmd, "in-dead")
    assert publish(wmd, "in", event("x", id_="o1")).status == 202
    got = dead.wait(1)
    assert got[0]["id"] == "o1" and got[0]["deadletterreason"] == \
        "output_refused", got
    assert got[0]["deliverycount"] == "2"
    assert metric(wmd, "workmanager_outputs_refused_total") == 2
    assert "backlog_overflow" not in wmd.log()


@pytest.mark.wmd(options=dict(FAST, drop_oldest_topics="other, bus*"))
def test_drop_oldest_topics_dead_letter_the_oldest(wmd):
    """The opt-in policy: a full queue takes every event and dead-letters
    its oldest waiting one (backlog_overflow); the newest are processed."""
    w = wmd.create(topic="busy", name="lossy")
    wmd.post(f"/v1/workers/{w['id']}/suspend")
    dead = Stream(wmd, "busy-dead")
    r = publish(wmd, "busy", [event("x", id_=f"b{i:02}") for i in range(20)])
    assert r.status == 202, r
    got = dead.wait(15)
    assert {e["deadletterreason"] for e in got} == {"backlog_overflow"}
    assert sorted(e["id"] for e in got) == [f"b{i:02}" for i in range(15)]
    assert metric(wmd, "workmanager_events_overflowed_total") == 15
    assert refused(wmd) == 0
    out = Stream(wmd, "x.out")
    wmd.post(f"/v1/workers/{w['id']}/resume")
    done = out.wait(5)
    assert sorted(e["id"] for e in done) == [f"b{i:02}" for i in range(15, 20)]

