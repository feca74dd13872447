"""A Python host runs one event at a time (max_inflight 1) and takes a
few more while it runs one (its Hello's prefetch, hosts/python/pyhost.c),
as long as its last event ran under 1 ms (master/supervise/pump.c): they wait
in the host, in order, so that the next starts as a Result leaves.  Those
events are the master's until they run: a deadline or a death of the
host sends them to the next host, once each, in order; and each one's
deadline starts when the host starts it, not when it was sent.  Each
test first sends one fast event, so that the master knows the host is
fast.
"""

import pytest

from pyhost_lib import create, daemon, restarts
from wm import Stream, event, publish

CODE = """
    import time

    def Process(event):
        d = event["data"]
        if d.get("hang"):
            while True:
                pass
        time.sleep(d.get("sleep", 0))
        return {"type": "pf.out", "data": {"n": d["n"]}}
"""


pytestmark = pytest.mark.wmd(make=daemon, options={
    "message_timeout_ms": 1000, "max_redeliveries": 0, "log_level": "debug"})


def test_the_host_says_its_prefetch(wmd):
    w = create(wmd, CODE)
    assert wmd.invoke(w["id"], "x", data={"n": 0}).status == 200
    assert "max_inflight 1, prefetch 32," in wmd.log()


def test_waiting_events_get_their_own_deadline(wmd):
    """Five events of 0.4 s each, published at once after a fast one,
    with a deadline of 1 s: the fifth ends 2 s after it was sent, yet none
    times out."""
    w = create(wmd, CODE)
    assert wmd.invoke(w["id"], "x", data={"n": -1}).status == 200
    out = Stream(wmd, "pf.out")
    r = publish(wmd, "py", [event("pf", id_=f"s{i}",
                                  data={"n": i, "sleep": 0.4})
                            for i in range(5)])
    assert r.status == 202, r
    outs = out.wait(5, timeout=30)
    assert [e["data"]["n"] for e in outs] == list(range(5)), outs


def test_a_deadline_sends_the_waiting_events_to_the_next_host(wmd):
    """The first event spins past its deadline while four more wait in
    its host: the host is killed (timeout) and the four run on the next
    host, once each and in order."""
    w = create(wmd, CODE)
    assert wmd.invoke(w["id"], "x", data={"n": 0}).status == 200
    out = Stream(wmd, "pf.out")
    r = publish(wmd, "py", [event("pf", id_="h", data={"n": -1, "hang": 1})]
                + [event("pf", id_=f"q{i}", data={"n": i})
                   for i in range(1, 5)])
    assert r.status == 202, r
    outs = out.wait(4, timeout=30)
    assert [e["data"]["n"] for e in outs] == [1, 2, 3, 4], outs
    assert restarts(wmd, w["id"]) >= 1
    view = wmd.get(f"/v1/workers/{w['id']}").json
    assert view["last_exit"]["reason"] == "timeout", view
