"""One change, every instance (issue 23): daemons sharing `store = nats`
follow each other's changes to the workers' records through the store's
watch (master/api/remote_workers.c): a create, stop, start, reload, tag
change and delete made on one daemon reach the other's registry, which
serves the worker as its own; the daemon that made a change does not apply
it a second time as a remote one.  Polls; no assertion on how fast."""

import json

from nats_lib import nats, nats_daemon  # noqa: F401 (nats is a fixture)
from wm import Stream, b64, event, metric, publish


def remote_events(d):
    out = []
    for ln in d.log().splitlines():
        i = ln.find("lifecycle: {")
        if i >= 0:
            ev = json.loads(ln[i + len("lifecycle: "):])
            if ev["data"].get("origin") == "remote":
                out.append(ev["type"].rsplit(".", 1)[1])
    return out


def test_changes_on_one_reach_the_other(wm_builddir, tmp_path, nats):
    a = nats_daemon(wm_builddir, tmp_path / "a", nats).start()
    b = nats_daemon(wm_builddir, tmp_path / "b", nats).start()
    try:
        def on_b(pred, what):
            def probe():
                r = b.get("/v1/workers/echo1")
                return pred(r)
            b.wait_for(probe, what=what)

        a.create(name="echo1")
        on_b(lambda r: r.status == 200, "the create on b")
        assert b.invoke("echo1").status == 200
        assert a.post("/v1/workers/echo1/stop").status == 200
        on_b(lambda r: r.json["status"] == "stopped", "the stop on b")
        assert b.invoke("echo1").status == 409  # stopped here too
        assert a.post("/v1/workers/echo1/start").status == 200
        on_b(lambda r: r.json["status"] == "running", "the start on b")
        r = a.post("/v1/workers/echo1/code",
                   {"code": {"content": b64("echo\n")}})
        assert r.status == 200 and r.json["version"] == 2, r
        on_b(lambda r: r.json["version"] == 2, "the reload on b")
        assert b.invoke("echo1").status == 200
        assert a.put("/v1/workers/echo1/tags",
                      {"tags": {"team": "x"}}).status == 200
        on_b(lambda r: r.json["tags"] == {"team": "x"}, "the tags on b")
        assert a.delete("/v1/workers/echo1").status in (200, 204)
        on_b(lambda r: r.status == 404, "the delete on b")
        assert remote_events(b) == ["created", "stopped", "started",
                                    "reloaded", "updated", "deleted"]
        assert remote_events(a) == []  # its own changes came back: ignored
        # and the other way: a change made on b reaches a
        b.create(name="echo2")
        a.wait_for(lambda: a.get("/v1/workers/echo2").status == 200,
                   what="b's create on a")
        assert a.invoke("echo2").status == 200
    finally:
        assert b.stop() == 0
        assert a.stop() == 0


def test_a_group_across_two_daemons_never_overlaps(wm_builddir, tmp_path,
                                                   nats):
    """One group, its members on two daemons (b follows a's creates), each
    daemon publishing to its own broker: the group's lock record in NATS,
    held as a lease (token blocks, the default), lets one member of one
    daemon process at a time, across both (issue 23's group locks
    across instances; the test host's span:<ms> says when each ran)."""
    fast = {"group_lock_retry_base_delay_ms": "20",
            "redelivery_base_delay_ms": "20"}
    a = nats_daemon(wm_builddir, tmp_path / "a", nats, **fast).start()
    b = nats_daemon(wm_builddir, tmp_path / "b", nats, **fast).start()
    try:
        a.create(topic="g", name="ga", group="lockers")
        a.create(topic="g", name="gb", group="lockers")
        b.wait_for(lambda: b.get("/v1/workers/gb").status == 200,
                   what="the members on b")
        outs = [Stream(d, "span.out") for d in (a, b)]
        for d, tag in ((a, "a"), (b, "b")):
            r = publish(d, "g", [event("span", id_=f"{tag}{i}", do="span:15")
                                 for i in range(8)])
            assert r.status == 202, r
        got = outs[0].wait(8, timeout=60) + outs[1].wait(8, timeout=60)
        spans = sorted((e["data"]["start_ns"], e["data"]["end_ns"])
                       for e in got)
        for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
            assert e1 <= s2, f"overlap: {spans}"
        assert len(got) == 16, got
        for o in outs:
            o.close()
    finally:
        assert b.stop() == 0
        assert a.stop() == 0


def test_a_dead_daemons_group_lock_is_taken_over(wm_builddir, tmp_path,
                                                 nats):
    """The daemon holding a group's lock dies (kill -9) in the middle of an
    event: the other waits while the record is fresh, then takes the lock
    over once it is older than lock_max_age_ms (the stale-lock rule), and
    its own events of the group are processed."""
    # b's attempts back off from 100 ms, doubling, 10 times at most: they
    # outlast the stale period (fewer would nack its events with
    # lock_contention while a's record is still fresh, as designed)
    quick = {"lock_max_age_ms": "1500", "message_timeout_ms": "1000",
             "group_lock_retry_base_delay_ms": "100",
             "group_lock_max_retries": "10",
             "redelivery_base_delay_ms": "20"}
    a = nats_daemon(wm_builddir, tmp_path / "a", nats, **quick).start()
    b = nats_daemon(wm_builddir, tmp_path / "b", nats, **quick).start()
    try:
        a.create(topic="g", name="ga", group="lockers")
        b.wait_for(lambda: b.get("/v1/workers/ga").status == 200,
                   what="the member on b")
        assert publish(a, "g", [event("span", id_="long",
                                      do="span:900")]).status == 202
        a.wait_for(lambda: metric(a, "workmanager_grouplock_acquired_total")
                   >= 1, what="a's lease")
        a.proc.kill()
        a.proc.wait()
        out = Stream(b, "span.out")
        assert publish(b, "g", [event("span", id_=f"b{i}", do="span:5")
                                for i in range(3)]).status == 202
        assert len(out.wait(3, timeout=30)) == 3
        assert metric(b, "workmanager_grouplock_stolen_total") >= 1
        out.close()
    finally:
        assert b.stop() == 0


def test_tokens_and_tenants_follow(wm_builddir, tmp_path, nats):
    """A tenant and a token made on a work on b at once; the token revoked
    on a is refused on b (401), and never comes back there."""
    from test_tenants_scope import Tcp
    from wm import free_port

    ports = {}
    ds = []
    for name in ("a", "b"):
        ports[name] = free_port()
        (tmp_path / name).mkdir()
        (tmp_path / name / "token").write_text("x" * 40 + "\n")
        ds.append(nats_daemon(wm_builddir, tmp_path / name, nats,
                              listen=f"127.0.0.1:{ports[name]}").start())
    a, b = ds
    try:
        assert a.post("/v1/tenants", {"name": "acme"}).status == 201
        a.create(name="w1", tenant="acme")
        r = a.post("/v1/tokens", {"tenant": "acme", "role": "reader"})
        assert r.status == 201, r
        reader = Tcp(ports["b"], r.json["token"])
        b.wait_for(lambda: reader.request("GET", "/v1/workers/w1")[0] == 200,
                   what="a's token working on b")
        assert b.get("/v1/tenants/acme").status == 200
        assert a.delete(f"/v1/tokens/{r.json['id']}").status == 200
        b.wait_for(lambda: reader.request("GET", "/v1/workers/w1")[0] == 401,
                   what="the revocation on b")
        assert r.json["id"] not in {
            t["id"] for t in b.get("/v1/tokens").json["tokens"]}
        # one entry per token, on the daemon that made it too
        r2 = a.post("/v1/tokens", {"tenant": "acme", "role": "reader"})
        assert r2.status == 201, r2
        a.wait_for(lambda: r2.json["id"] in {
            t["id"] for t in b.get("/v1/tokens").json["tokens"]},
            what="the second token on b")
        ids = [t["id"] for t in a.get("/v1/tokens").json["tokens"]]
        assert ids.count(r2.json["id"]) == 1, ids
    finally:
        assert b.stop() == 0
        assert a.stop() == 0
