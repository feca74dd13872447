"""Messages on a real workmanagerd (issue 4): publish, delivery, fan-out and
groups, outcomes and dead letters, routing and correlation, the journal
across kill -9, group locks, lifecycle and infra events, gateway services,
event streams and metrics.

Each test starts a fresh daemon (tests/integration/wm.py) with the protocol
test host (tests/testhost) as engine application/x-wm-test; its events say
what the host does through their `do` extension or type (echo, fail,
crash, span:<ms>, gateway, ...).  Outputs are observed through
Server-Sent Events streams (GET /v1/topics/{topic}/events), the log and
/metrics.
"""

import errno
import json
import os
import re
import struct
import subprocess
import time

import pytest

from wm import Daemon, Stream, b64, event, metric, publish

FAST = {
    "handshake_timeout_ms": 1000,
    "restart_base_delay_ms": 20,
    "restart_max_delay_ms": 100,
    "crash_loop_max": 50,
    "shutdown_grace_ms": 1000,
    "redelivery_base_delay_ms": 20,
    "group_lock_retry_base_delay_ms": 20,
}


pytestmark = pytest.mark.wmd(options=FAST)


def spans(events):
    return sorted((e["data"]["start_ns"], e["data"]["end_ns"])
                  for e in events)


# ---- Event-Driven Message Processing ----------------------------------


def test_message_processing_routes_outputs_by_type(wmd):
    """Spec: Message processing — outputs go to the topic of their type."""
    w = wmd.create(topic="orders", name="proc")
    out = Stream(wmd, "order.created.out")
    r = publish(wmd, "orders", event("order.created", id_="o-1",
                                     data={"n": 1}))
    assert r.status == 202, r
    assert r.json == {"ids": ["o-1"]}
    got = out.wait(1)
    assert got[0]["id"] == "o-1"
    assert got[0]["type"] == "order.created.out"
    assert got[0]["data"] == {"n": 1}
    assert got[0]["wmhops"] == "1"
    wmd.wait_for(lambda: metric(wmd, "workmanager_worker_events_processed_total",
                                worker=w["id"]) == 1, what="processed count")
    out.close()


def test_publish_answer_ids_escaped(wmd):
    """A publish's answer names every event's id, in order, as JSON
    strings whatever they hold (the answer is written by hand since
    issue 24): quotes, backslashes and UTF-8 (controls are refused)."""
    wmd.create(topic="ids", name="ids")
    ids = ['plain', 'a"b', 'back\\slash', 'caf\u00e9-\u2603', '/x/']
    r = publish(wmd, "ids", [event("noop", id_=i) for i in ids])
    assert r.status == 202, r
    assert r.json == {"ids": ids}
    assert r.raw.endswith(b"]}\n") and b"\\u" not in r.raw, r.raw
    r = publish(wmd, "ids", [])
    assert r.status == 202 and r.json == {"ids": []}, r


def test_replytopic_wins_over_type(wmd):
    wmd.create(topic="orders")
    replies = Stream(wmd, "replies")
    publish(wmd, "orders", event("x", id_="r-1", replytopic="replies"))
    got = replies.wait(1)
    assert got[0]["id"] == "r-1" and got[0]["type"] == "x.out"
    replies.close()


def test_correlation_and_trace_propagate(wmd):
    """Spec: Correlation ID Propagation — both scenarios."""
    wmd.create(topic="c")
    out = Stream(wmd, "c1.out")
    publish(wmd, "c", event("c1", id_="with", correlationid="corr-42",
                            traceparent="00-0af7651916cd43dd8448eb211c80319c-"
                                        "b7ad6b7169203331-01",
                            tracestate="k=v"))
    publish(wmd, "c", event("c1", id_="without"))
    got = {e["id"]: e for e in out.wait(2)}
    assert got["with"]["correlationid"] == "corr-42"
    assert got["with"]["traceparent"].startswith("00-0af765")
    assert got["with"]["tracestate"] == "k=v"
    assert "correlationid" not in got["without"]
    out.close()


def test_invoke_output_carries_correlation(wmd):
    w = wmd.create(topic="c")
    r = wmd.invoke(w["id"], "echo", correlationid="inv-7")
    assert r.status == 200, r
    assert r.json["correlationid"] == "inv-7"


def test_config_stamped_on_delivered_events(wmd):
    wmd.create(topic="cfg", config={"region": "eu", "tier": "gold"})
    out = Stream(wmd, "k.out")
    publish(wmd, "cfg", event("k", id_="k1", tier="event-wins"))
    got = out.wait(1)[0]
    assert got["region"] == "eu"
    assert got["tier"] == "event-wins"
    out.close()


def test_concurrent_handling(wmd):
    """Spec: Concurrent message handling — one worker, several events at
    once (up to its concurrency)."""
    wmd.create(topic="par", limits={"concurrency": 4})
    out = Stream(wmd, "span.out")
    publish(wmd, "par", [event("span", id_=f"p{i}", do="span:300")
                         for i in range(4)])
    s = spans(out.wait(4, timeout=20))
    # All four overlapped: the last started before the first ended.
    assert s[-1][0] < s[0][1], s
    out.close()


def test_fanout_and_competing_group(wmd):
    """Every non-grouped worker gets every event; a group gets each event
    once."""
    for name in ("solo-a", "solo-b", "g-1", "g-2"):
        group = "grp" if name.startswith("g-") else None
        wmd.create(topic="fan", name=name, group=group,
                   code="echo\nlog_events")
    out = Stream(wmd, "f.out")
    n = 20
    r = publish(wmd, "fan", [event("f", id_=f"f{i}") for i in range(n)])
    assert r.status == 202, r
    out.wait(3 * n)
    time.sleep(0.3)
    assert len(out.events()) == 3 * n
    ids = [e["id"] for e in out.events()]
    for i in range(n):
        assert ids.count(f"f{i}") == 3, ids
    by_worker = {}
    for line in wmd.log().splitlines():
        # "worker NAME (ID): ..." (the log names a worker by both)
        m = re.search(r"worker \S+ \((\S+)\): event (f\d+) delivery", line)
        if m:
            by_worker.setdefault(m.group(1), []).append(m.group(2))
    workers = {w["name"]: w["id"] for w in wmd.get("/v1/workers").json[
        "workers"]}
    group_ids = (by_worker.get(workers["g-1"], [])
                 + by_worker.get(workers["g-2"], []))
    assert sorted(group_ids) == sorted(f"f{i}" for i in range(n))
    out.close()


# ---- Distributed Coordination -----------------------------------------


def test_group_members_never_overlap(wmd):
    """Spec: Lock acquisition — one member at a time, under the lock."""
    a = wmd.create(topic="g", name="ga", group="lockers")
    b = wmd.create(topic="g", name="gb", group="lockers")
    out = Stream(wmd, "span.out")
    publish(wmd, "g", [event("span", id_=f"s{i}", do="span:40")
                       for i in range(10)])
    got = out.wait(10, timeout=30)
    s = spans(got)
    for (s1, e1), (s2, e2) in zip(s, s[1:]):
        assert e1 <= s2, f"overlap: {s}"
    members = {e["data"]["worker"] for e in got}
    assert len(members) == 2, "both members took events"
    assert (metric(wmd, "workmanager_grouplock_tokens_total")
            + metric(wmd, "workmanager_grouplock_shared_total")) >= 10
    for w in (a, b):
        assert metric(wmd, "workmanager_worker_events_processed_total",
                      worker=w["id"]) >= 1
    out.close()


def test_group_timeout_below_lock_age(wmd):
    r = wmd.post("/v1/workers", {
        "mime_type": "application/x-wm-test", "topic": "g", "group": "x",
        "code": {"content": b64("echo")}, "limits": {"timeout_ms": 30000}})
    assert r.status == 400 and r.code == "invalid_argument", r
    assert "lock_max_age_ms" in r.json["error"]["message"]


def test_grouplock_infra_events(wmd):
    wmd.create(topic="g", group="infra")
    infra = Stream(wmd, "workmanager.infra.worker")
    publish(wmd, "g", event("echo", id_="i1"))
    got = infra.wait(2)
    types = [e["type"] for e in got]
    assert "com.virtufin.workmanager.infra.grouplock.acquired" in types
    assert "com.virtufin.workmanager.infra.grouplock.released" in types
    acq = next(e for e in got if e["type"].endswith("acquired"))
    assert acq["data"]["group"] == "infra" and acq["data"]["token"] >= 1
    infra.close()


def test_group_lease_held_across_events(wmd):
    """The lock is a lease while its group has work: one store acquisition
    serves a burst of events, in turns (each turn under its own token,
    shared by the events pipelined to its member), and it is released
    once the group is idle."""
    wmd.create(topic="lease", name="la", group="leased")
    wmd.create(topic="lease", name="lb", group="leased")
    infra = Stream(wmd, "workmanager.infra.worker")
    out = Stream(wmd, "span.out")
    n = 60
    publish(wmd, "lease", [event("span", id_=f"l{i}", do="span:1")
                           for i in range(n)])
    out.wait(n, timeout=30)
    tokens = metric(wmd, "workmanager_grouplock_tokens_total")
    shared = metric(wmd, "workmanager_grouplock_shared_total")
    # in turns: most events share their turn's holding
    assert tokens >= 2 and tokens + shared >= n, (tokens, shared)
    assert shared >= n // 2, (tokens, shared)
    acquired = metric(wmd, "workmanager_grouplock_acquired_total")
    assert 1 <= acquired <= n // 6, acquired
    wmd.wait_for(lambda: any(e["type"].endswith("grouplock.released")
                             for e in infra.events()),
                 what="the lease released once the group is idle")
    kinds = [e["type"].rsplit(".", 1)[1] for e in infra.events()
             if ".grouplock." in e["type"]]
    assert kinds.count("acquired") == acquired, kinds
    out.close()
    infra.close()


def test_group_turns_fit_the_lock_age(wm_builddir, tmp_path):
    """A turn takes no more events than a quarter of lock_max_age_ms holds
    at the pace of the group's last turns (the first: one event, at the
    deadline's pace), so a turn of slow events does not hold its lock
    unrenewed past its age; members never overlap."""
    d = Daemon(wm_builddir, tmp_path,
               options=dict(lock_max_age_ms=2000,
                            message_timeout_ms=1000)).start()
    try:
        d.create(topic="slow", name="sa", group="pace")
        d.create(topic="slow", name="sb", group="pace")
        out = Stream(d, "span.out")
        n = 12
        publish(d, "slow", [event("span", id_=f"p{i}", do="span:100")
                            for i in range(n)])
        s = spans(out.wait(n, timeout=30))
        for (s1, e1), (s2, e2) in zip(s, s[1:]):
            assert e1 <= s2, f"overlap: {s}"
        tokens = metric(d, "workmanager_grouplock_tokens_total")
        shared = metric(d, "workmanager_grouplock_shared_total")
        # 1 (the first turn), then at most 5 (500 ms at 100 ms each) per
        # turn: 4 turns at least; without the rule 2 would do
        assert tokens >= 4 and shared >= 1, (tokens, shared)
        assert tokens + shared == n
        out.close()
    finally:
        assert d.stop() == 0


# ---- outcomes: redelivery, dead letters, worker errors -----------------


def test_crash_redelivered_then_dead_lettered(wmd):
    w = wmd.create(topic="boom", code="echo\nlog_events")
    dead = Stream(wmd, "boom-dead")
    publish(wmd, "boom", event("x", id_="c-1", do="crash"))
    got = dead.wait(1, timeout=30)[0]
    assert got["id"] == "c-1"
    assert got["deadletterreason"] == "crash"
    assert got["deliverycount"] == "4"
    deliveries = re.findall(r"event c-1 delivery (\d+)", wmd.log())
    assert deliveries == ["1", "2", "3", "4"], deliveries
    assert metric(wmd, "workmanager_worker_events_redelivered_total",
                  worker=w["id"]) == 3
    assert metric(wmd, "workmanager_worker_events_dead_lettered_total",
                  worker=w["id"]) == 1
    dead.close()


def test_worker_error_acked_with_error_reply(wmd):
    """Spec: Worker error — worker.error with error_type and error_message;
    an error reply to replytopic; no redelivery."""
    w = wmd.create(topic="err", code="echo\nlog_events")
    life = Stream(wmd, "workmanager.lifecycle")
    replies = Stream(wmd, "err-replies")
    publish(wmd, "err", event("x", id_="f-1", do="fail",
                              replytopic="err-replies",
                              correlationid="cid-1"))
    reply = replies.wait(1)[0]
    assert reply["type"] == "com.virtufin.workmanager.worker.error"
    assert reply["correlationid"] == "cid-1"
    assert reply["data"]["success"] is False
    assert reply["data"]["error_type"] == "exception"
    assert "test failure for event f-1" in reply["data"]["message"]
    errors = [e for e in life.wait(1)
              if e["type"] == "com.virtufin.workmanager.lifecycle.error"]
    assert errors, life.events()
    data = errors[0]["data"]
    assert data["worker_id"] == w["id"]
    assert data["error_type"] == "exception"
    assert "test failure" in data["error_message"]
    assert data["exception_type"] == "TestError"
    time.sleep(0.3)
    assert re.findall(r"event f-1 delivery (\d+)", wmd.log()) == ["1"]
    assert metric(wmd, "workmanager_worker_events_redelivered_total",
                  worker=w["id"]) == 0
    life.close()
    replies.close()


def test_timeout_requeues_innocent_events(wm_builddir, tmp_path):
    """One event of several in flight times out: the host is killed, the
    others go to the next host without counting a delivery."""
    opts = dict(FAST, message_timeout_ms=1500)
    d = Daemon(wm_builddir, tmp_path, options=opts).start()
    try:
        d.create(topic="slow", code="echo\nlog_events",
                 limits={"concurrency": 4})
        out = Stream(d, "ok.out")
        dead = Stream(d, "slow-dead")
        publish(d, "slow", event("x", id_="hang-1", do="hang"))
        time.sleep(0.8)
        publish(d, "slow", [event("ok", id_="ok-1", do="sleep:1000"),
                            event("ok", id_="ok-2", do="sleep:1000")])
        assert sorted(e["id"] for e in out.wait(2, timeout=20)) == [
            "ok-1", "ok-2"]
        for i in ("ok-1", "ok-2"):
            seen = re.findall(rf"event {i} delivery (\d+)", d.log())
            assert seen == ["1", "1"], (i, seen)  # requeued, not counted
        got = dead.wait(1, timeout=30)[0]
        assert got["id"] == "hang-1"
        assert got["deadletterreason"] == "timeout"
        assert got["deliverycount"] == "4"
        out.close()
        dead.close()
    finally:
        assert d.stop() == 0


def test_routing_loop_dead_lettered(wmd):
    wmd.create(topic="loop")
    dead = Stream(wmd, "loop-dead")
    publish(wmd, "loop", event("x", id_="l-1", replytopic="loop"))
    got = dead.wait(1, timeout=20)[0]
    assert got["deadletterreason"] == "loop"
    assert got["wmhops"] == "17"
    assert metric(wmd, "workmanager_events_loops_total") == 1
    dead.close()


def test_reserved_topics(wmd):
    r = publish(wmd, "workmanager.lifecycle", event("x"))
    assert r.status == 400 and r.code == "invalid_argument", r
    assert "reserved" in r.json["error"]["message"]
    wmd.create(topic="res")
    publish(wmd, "res", event("x", id_="res-1",
                              replytopic="workmanager.lifecycle"))
    wmd.wait_for(lambda: metric(wmd, "workmanager_outputs_refused_total") == 1,
                 what="refused output")


def test_backlog_overflow_isolates_tenants(wm_builddir, tmp_path):
    """Under the opt-in drop_oldest_topics a full queue dead-letters
    (backlog_overflow) rather than refusing, and one tenant's full queue
    does not slow another's publishes.  (Refusal at the door, the default,
    is test_backpressure.py's.)"""
    opts = dict(FAST, queue_max_events=5, drop_oldest_topics="busy")
    d = Daemon(wm_builddir, tmp_path, options=opts).start()
    try:
        slow = d.create(topic="busy", tenant="slowco", name="slow")
        d.post(f"/v1/workers/{slow['id']}/suspend")
        d.create(topic="busy", tenant="fastco", name="fast")
        dead = Stream(d, "busy-dead", tenant="slowco")
        r = publish(d, "busy", [event("x", id_=f"b{i}") for i in range(20)],
                    tenant="slowco")
        assert r.status == 202, r
        got = dead.wait(15)
        assert {e["deadletterreason"] for e in got} == {"backlog_overflow"}
        out = Stream(d, "y.out", tenant="fastco")
        t0 = time.monotonic()
        r = publish(d, "busy", event("y", id_="fast-1"), tenant="fastco")
        assert r.status == 202
        assert time.monotonic() - t0 < 2
        assert out.wait(1)[0]["id"] == "fast-1"
        # Resumed, the slow one processes its 5 queued events.
        d.post(f"/v1/workers/{slow['id']}/resume")
        d.wait_for(lambda: metric(
            d, "workmanager_worker_events_processed_total",
            worker=slow["id"]) == 5, what="backlog processed")
        dead.close()
        out.close()
    finally:
        assert d.stop() == 0


def test_journal_budget_answers_503(wm_builddir, tmp_path):
    opts = dict(FAST, journal_max_bytes="1MiB", journal_segment_bytes="64KiB",
                queue_max_events=100000)
    d = Daemon(wm_builddir, tmp_path, options=opts).start()
    try:
        w = d.create(topic="fill")
        d.post(f"/v1/workers/{w['id']}/suspend")
        big = "x" * 4000
        status = None
        for i in range(400):
            r = publish(d, "fill", [event("x", data=big) for _ in range(10)])
            status = r.status
            if status != 202:
                break
        assert status == 503, status
        assert r.code == "backlog_full"
        assert r.headers.get("Retry-After") == "1"
        assert "journal" in r.json["error"]["message"]
    finally:
        assert d.stop() == 0


def test_output_refused_by_journal_budget_dead_lettered(wm_builddir,
                                                        tmp_path):
    """An output refused because the journal's budget is exhausted leaves
    its input unacknowledged (the acknowledgement itself would be stored):
    it is delivered again, then dead-lettered with reason output_refused."""
    opts = dict(FAST, journal_max_bytes="1MiB", journal_segment_bytes="64KiB",
                queue_max_events=100000, max_redeliveries=1)
    d = Daemon(wm_builddir, tmp_path, options=opts).start()
    try:
        d.create(topic="in", name="maker", code="echo\nlog_events")
        keeper = d.create(topic="x.out", name="keeper")
        d.post(f"/v1/workers/{keeper['id']}/suspend")
        hog = d.create(topic="fill", name="hog")
        d.post(f"/v1/workers/{hog['id']}/suspend")
        dead = Stream(d, "in-dead")
        r = publish(d, "in", event("x", id_="keep", do="sleep:1000"))
        assert r.status == 202, r
        d.wait_for(lambda: "event keep delivery 1" in d.log(),
                   what="event keep started")
        big = "x" * 4000
        for i in range(400):
            r = publish(d, "fill", [event("x", data=big) for _ in range(10)])
            if r.status != 202:
                break
        assert r.status == 503, r
        got = dead.wait(1, timeout=20)[0]
        assert got["id"] == "keep"
        assert got["deadletterreason"] == "output_refused"
        assert got["deliverycount"] == "2"
        assert "event keep delivery 2" in d.log()
        assert metric(d, "workmanager_outputs_refused_total") == 2
        dead.close()
    finally:
        assert d.stop() == 0


def small_tmpfs(path, size):
    """Mounts a tmpfs of `size` at path (a disk that fills up); skips with
    the reason when mounting is not allowed, fails instead under
    SANDBOX_MUST_WORK=1.  Returns the function that unmounts it."""
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                        "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        why = f"cannot mount a tmpfs here: {r.stderr.strip()}"
        if os.environ.get("SANDBOX_MUST_WORK") == "1":
            pytest.fail("SANDBOX_MUST_WORK=1 but " + why)
        pytest.skip(why)
    return lambda: subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path):
    """Writes path until the file system is full."""
    chunk = b"\0" * 65536
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    with open(path, "ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\0")
        except OSError as e:
            assert e.errno == errno.ENOSPC, e


def test_output_refused_by_full_disk_is_not_acked(wm_builddir, tmp_path):
    """An accepted input whose output the broker refuses (the journal's
    disk is full) is not acknowledged, and not delivered again while the
    disk stays full (its settlement could not be stored); once space is
    freed, without a restart, it is delivered again, processed, and its
    output kept."""
    unmount = small_tmpfs(tmp_path / "state", "8m")
    d = Daemon(wm_builddir, tmp_path, options=dict(FAST, max_redeliveries=1))
    try:
        d.start()
        d.create(topic="in", name="maker", code="echo\nlog_events")
        # Durable subscribers of the outputs' and the dead letters' topics:
        # what goes there is journaled.
        keeper = d.create(topic="x.out", name="keeper")
        d.post(f"/v1/workers/{keeper['id']}/suspend")
        grave = d.create(topic="in-dead", name="grave")
        d.post(f"/v1/workers/{grave['id']}/suspend")
        r = publish(d, "in", event("x", id_="keep", do="sleep:1500"))
        assert r.status == 202, r
        d.wait_for(lambda: "event keep delivery 1" in d.log(),
                   what="event keep started")
        # The disk fills up while the worker runs; the next journal write
        # fails and the journal stops writing.
        fill(d.state / "filler")
        r = publish(d, "x.out", event("y", data="z" * 65536))
        assert r.status == 507, r
        assert r.json["error"]["code"] == "insufficient_storage", r
        d.wait_for(lambda: metric(d, "workmanager_outputs_refused_total") >= 1,
                   timeout=20, what="the output refused")
        time.sleep(0.5)
        assert "event keep delivery 2" not in d.log()
        assert "is lost" not in d.log()
        assert "dead-lettered to in-dead" not in d.log()
        os.unlink(d.state / "filler")
        d.wait_for(lambda: "event keep delivery 2" in d.log(), timeout=20,
                   what="the input delivered again once space returned")
        d.post(f"/v1/workers/{keeper['id']}/resume")
        d.wait_for(lambda: metric(d, "workmanager_worker_events_processed_total",
                                  worker=keeper["id"]) >= 1, timeout=20,
                   what="the output kept")
        assert "dead-lettered to in-dead" not in d.log()
    finally:
        d.stop()
        unmount()


class FsizeDaemon(Daemon):
    """A daemon under RLIMIT_FSIZE of 1 MiB (systemd's LimitFSIZE=; prlimit
    execs it: the pid is the daemon's)."""

    def argv(self):
        return ["prlimit", f"--fsize={1 << 20}", "--"] + super().argv()


def test_file_size_limit_fails_the_journal_not_the_daemon(wm_builddir,
                                                          tmp_path):
    """A journal segment that reaches the file size limit fails its write
    (EFBIG): the publish is refused naming the error, and the daemon lives
    on.  The loop writes quiet turns' records itself (issue 24), and the
    default action of SIGXFSZ would kill it: the daemon ignores it."""
    d = FsizeDaemon(wm_builddir, tmp_path,
                    options=dict(FAST, journal_fsync="batch",
                                 log_level="info"))
    try:
        d.start()
        d.create(topic="big", name="big")
        big = "z" * 16384
        for i in range(200):
            r = publish(d, "big", event("x", id_=f"f{i}", data=big))
            if r.status != 202:
                break
        assert i > 0 and r.status in (503, 507), r
        assert "File too large" in r.json["error"]["message"], r
        assert d.proc.poll() is None, d.log()
        assert d.get("/health").status in (200, 503)
        assert d.invoke(d.create(name="still")["id"], "echo").status == 200
    finally:
        d.stop()


def deliveries(log):
    """The ledger of a test host run with log_events: id -> deliveries."""
    seen = {}
    for ident in re.findall(r"event (\S+) delivery \d+", log):
        seen[ident] = seen.get(ident, 0) + 1
    return seen


def test_full_disk_journal_recovers_without_restart(wm_builddir, tmp_path):
    """Issue 21 item 4: a full disk stops the journal writing.  Publishes
    answer 507 insufficient_storage naming the state directory and the
    error, /health is Degraded with the file, the error and the time,
    /metrics says so, and no event is handed to a host while its
    settlement could not be stored.  Once space is freed the journal
    recovers by itself: publishes succeed, the backlog goes on, and after a
    restart no event processed around the outage comes again (beyond the
    one in the host when the disk filled) and none that got 202 is
    lost."""
    unmount = small_tmpfs(tmp_path / "state", "8m")
    d = Daemon(wm_builddir, tmp_path, options=dict(FAST))
    try:
        d.start()
        d.create(topic="led", name="ledger", code="echo\nlog_events",
                 limits={"concurrency": 1})
        accepted = []
        r = publish(d, "led", [event("x", id_=f"a{i}") for i in range(20)])
        assert r.status == 202, r
        accepted += r.json["ids"]
        d.wait_for(lambda: set(deliveries(d.log())) >= set(accepted),
                   what="the first events processed")
        # A backlog of slow events, processed one at a time.
        r = publish(d, "led", [event("x", id_=f"b{i}", do="sleep:100")
                               for i in range(30)])
        assert r.status == 202, r
        accepted += r.json["ids"]
        d.wait_for(lambda: "event b2 delivery" in d.log(),
                   what="the backlog started")
        gw = d.create(topic="gw", name="maker")  # before the disk fills
        fill(d.state / "filler")
        big = "z" * 65536
        for i in range(20):
            r = publish(d, "led", event("x", id_=f"c{i}", data=big))
            if r.status != 202:
                break
            accepted.append(f"c{i}")
        assert r.status == 507, r
        err = r.json["error"]
        assert err["code"] == "insufficient_storage", r
        assert "No space left on device" in err["message"], r
        assert str(d.state) in err["message"], r
        # Refused at once now, with the same answer.
        r = publish(d, "led", event("x", id_="refused"))
        assert r.status == 507 and \
            r.json["error"]["code"] == "insufficient_storage", r
        # Invokes go on (they store nothing), and a worker's own publish
        # (the gateway) is told the same as a client.
        r0 = d.invoke(gw["id"], "echo")
        assert r0.status == 200, r0
        r = d.invoke(gw["id"], "gateway", gwservice="workmanager.publish",
                     gwmethod="publish",
                     gwrequest='{"topic": "t2", "event": {"specversion": '
                               '"1.0", "id": "g1", "source": "t", '
                               '"type": "x"}}')
        assert r.status == 200, r
        res = r.json["data"]
        assert res["status"] == 507, res
        assert res["error"].startswith("insufficient_storage:"), res
        h = d.get("/health")
        assert h.status == 503, h
        assert h.json["status"] == "Degraded", h.json
        jc = h.json["checks"]["journal"]
        assert jc["status"] == "Degraded", jc
        assert ".wmj" in jc["error"] and \
            "No space left on device" in jc["error"], jc
        assert jc["since"] is not None, jc
        assert metric(d, "workmanager_journal_writable") == 0
        assert metric(d, "workmanager_journal_write_failures_total") >= 1
        # No event handed to the host while settlements cannot be stored:
        # those already in it (the test host takes 4) finish, no other
        # starts.
        time.sleep(0.5)
        during = deliveries(d.log())
        time.sleep(1.5)
        assert deliveries(d.log()) == during, "delivered while the " \
            "journal could not store settlements"
        assert not set(during) >= set(accepted), "the backlog ended first"
        # Space returns: the journal recovers by itself, no restart.
        os.unlink(d.state / "filler")
        d.wait_for(lambda: d.get("/health").status == 200, timeout=10,
                   what="/health Healthy again")
        assert d.get("/health").json["checks"]["journal"]["status"] == \
            "Healthy"
        r = publish(d, "led", [event("x", id_=f"d{i}") for i in range(5)])
        assert r.status == 202, r
        accepted += r.json["ids"]
        assert metric(d, "workmanager_journal_writable") == 1
        assert metric(d, "workmanager_journal_recoveries_total") == 1
        d.wait_for(lambda: set(deliveries(d.log())) >= set(accepted),
                   timeout=20, what="every accepted event processed")
        before = deliveries(d.log())
        twice = [i for i in accepted if before[i] > 1]
        assert twice == [], twice
        mark = len(d.log())
        assert d.stop() == 0
        d.start()
        # A last event: what comes back from the journal comes before it.
        r = publish(d, "led", event("x", id_="sentinel"))
        assert r.status == 202, r
        d.wait_for(lambda: "sentinel" in deliveries(d.log()[mark:]),
                   timeout=20, what="the event after the restart")
        again = deliveries(d.log()[mark:])
        del again["sentinel"]
        # The settlements refused during the outage were stored once the
        # journal wrote again: at most those in the write that failed come
        # back (events in the host then; it takes 4).
        assert len(again) <= 4, again
    finally:
        d.stop()
        unmount()


def test_full_disk_store_create_507_then_recovers(wm_builddir, tmp_path):
    """Issue 21 item 4, the store: creating a worker on a full disk
    answers 507 insufficient_storage naming the state directory, leaves no
    worker behind, and once space is freed the same create succeeds and
    the worker runs, without a restart."""
    unmount = small_tmpfs(tmp_path / "state", "8m")
    d = Daemon(wm_builddir, tmp_path, options=dict(FAST))
    try:
        d.start()
        fill(d.state / "filler")
        code = "echo\nlog_events\n# " + "x" * 4096
        r = d.post("/v1/workers", {"name": "late", "topic": "late",
                                   "mime_type": "application/x-wm-test",
                                   "code": {"content": b64(code)}})
        assert r.status == 507, r
        assert r.json["error"]["code"] == "insufficient_storage", r
        assert "No space left on device" in r.json["error"]["message"], r
        assert str(d.state) in r.json["error"]["message"], r
        assert d.get("/v1/workers").json["workers"] == []
        os.unlink(d.state / "filler")
        w = d.create(topic="late", name="late", code=code)
        r = publish(d, "late", event("x", id_="after-full"))
        assert r.status == 202, r
        d.wait_for(lambda: "event after-full delivery 1" in d.log(),
                   what="the worker created after the disk was freed runs")
        assert d.get(f"/v1/workers/{w['id']}").status == 200
    finally:
        d.stop()
        unmount()


# ---- the journal across a crash of the master --------------------------


def test_kill9_loses_no_accepted_event(wm_builddir, tmp_path):
    opts = dict(FAST, journal_fsync="always")
    d = Daemon(wm_builddir, tmp_path, options=opts).start()
    d.create(topic="dur", name="dur", code="echo\nlog_events",
             limits={"concurrency": 2})
    accepted = []
    for b in range(10):
        batch = [event("x", id_=f"d{b}-{i}", do="sleep:20")
                 for i in range(20)]
        r = publish(d, "dur", batch)
        assert r.status == 202, r
        accepted += r.json["ids"]
    d.kill9()
    before = set(re.findall(r"event (d\d+-\d+) delivery", d.log()))
    assert len(before) < len(accepted), "the crash came too late to matter"
    d.start()
    try:
        def all_seen():
            seen = set(re.findall(r"event (d\d+-\d+) delivery", d.log()))
            return seen >= set(accepted)
        d.wait_for(all_seen, timeout=60, what="every accepted event")
    finally:
        assert d.stop() == 0


def test_stale_lock_stolen_only_without_writes(wm_builddir, tmp_path):
    """Spec: Stale lock theft.  A master dies holding a group lock; another
    instance on the same store steals it once it is stale — unless a write
    was made under its token, in which case the steal is aborted and the
    event ends dead-lettered with reason lock_contention."""
    d = Daemon(wm_builddir, tmp_path, options=dict(FAST, instance="alpha"))
    d.start()
    d.create(topic="st", name="m1", group="stale", code="echo\nlog_events")
    d.create(topic="st", name="m2", group="stale", code="echo\nlog_events")
    # Event 1 holds the lock (no write) when the master dies.
    publish(d, "st", event("x", id_="nowrite", do="span:5000"))
    d.wait_for(lambda: "event nowrite delivery 1" in d.log(),
               what="event nowrite started")
    d.kill9()
    opts = dict(FAST, instance="beta", lock_max_age_ms=1000,
                message_timeout_ms=900, group_lock_retry_base_delay_ms=300,
                group_lock_max_retries=3)
    d.options = opts
    d.start()
    try:
        d.wait_for(lambda: metric(d, "workmanager_grouplock_stolen_total") == 1,
                   timeout=20, what="the steal")
        d.wait_for(lambda: "event nowrite delivery" in d.log().split(
            "started (pid")[-1], timeout=20, what="nowrite redelivered")
    finally:
        assert d.stop() == 0


def test_stale_lock_with_write_is_not_stolen(wm_builddir, tmp_path):
    d = Daemon(wm_builddir, tmp_path, options=dict(FAST, instance="alpha"))
    d.start()
    d.create(topic="st", name="w1", group="fenced", code="echo\nlog_events")
    # A state write under the lock's token, then a long sleep.
    publish(d, "st", event("x", id_="wrote", do="gateway",
                           gwmethod="put",
                           gwrequest='{"key":"k","value":1}',
                           gwsleep="10000"))
    d.wait_for(lambda: "event wrote delivery 1" in d.log(),
               what="event wrote started")
    time.sleep(0.5)  # the put is durable
    d.kill9()
    d.options = dict(FAST, instance="beta", lock_max_age_ms=1000,
                     message_timeout_ms=900,
                     group_lock_retry_base_delay_ms=300,
                     group_lock_max_retries=1, max_redeliveries=1)
    d.start()
    dead = Stream(d, "st-dead")
    try:
        got = dead.wait(1, timeout=30)[0]
        assert got["id"] == "wrote"
        assert got["deadletterreason"] == "lock_contention"
        assert metric(d, "workmanager_grouplock_stolen_total") == 0
        assert metric(d, "workmanager_grouplock_contention_total") >= 1
        dead.close()
    finally:
        assert d.stop() == 0


def test_group_tokens_grow_across_crash(wm_builddir, tmp_path):
    """Tokens come in blocks whose high-water mark is durable before the
    first is used: after a kill -9 in the middle of a block, the next
    run's tokens are above every token the dead one could have used."""
    d = Daemon(wm_builddir, tmp_path, options=dict(FAST, instance="alpha"))
    d.start()
    d.create(topic="tk", name="t1", group="blocks", code="echo\nlog_events")
    out = Stream(d, "span.out")
    publish(d, "tk", [event("span", id_=f"k{i}", do="span:1")
                      for i in range(5)])
    out.wait(5, timeout=30)
    out.close()
    publish(d, "tk", event("x", id_="held", do="span:2000"))
    d.wait_for(lambda: "event held delivery 1" in d.log(),
               what="event held started")
    rec = d.state / "records" / "workmanager%groups%default%blocks%lock"
    raw = rec.read_bytes()
    held = _lock_fields(raw[52:52 + struct.unpack("<QQ", raw[4:20])[1]])
    assert held[2].startswith("alpha/"), held
    high = held[3]
    # One block reserved for the six events, not a token each.
    assert high > 6, held
    # A lease for the batch of five, and at most one more for the held
    # event (the 20 ms idle can end the first in the gap on a slow run):
    # never a lock per event.
    assert metric(d, "workmanager_grouplock_acquired_total") <= 2
    d.kill9()
    d.start()
    infra = Stream(d, "workmanager.infra.worker")
    try:
        publish(d, "tk", event("x", id_="after"))

        def locks():
            # The new run's (the freeing of the dead run's lock names
            # the dead holder and its last token).
            return [e for e in infra.events() if ".grouplock." in e["type"]
                    and e["data"]["holder"] != held[2]]
        d.wait_for(lambda: locks(), timeout=30,
                   what="a group lock event of the new run")
        assert all(e["data"]["token"] > high for e in locks()), \
            (high, locks())
    finally:
        infra.close()
        assert d.stop() == 0


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _lock_fields(value):
    """The fields of a GroupLock record (records.proto) by number."""
    fields, i = {}, 0
    while i < len(value):
        key, i = value[i], i + 1
        num, wire = key >> 3, key & 7
        if wire == 0:
            n = shift = 0
            while True:
                b, i = value[i], i + 1
                n |= (b & 0x7F) << shift
                shift += 7
                if not b & 0x80:
                    break
            fields[num] = n
        else:  # 2: length-delimited
            ln, i = value[i], i + 1
            fields[num] = value[i:i + ln].decode()
            i += ln
    return fields


def test_output_under_stale_token_refused(wm_builddir, tmp_path):
    """Another master (here: the test, writing the shared store's record as
    it would) steals the group lock while an event runs: the outputs made
    under the old token are refused and the event is not acknowledged."""
    import hashlib
    d = Daemon(wm_builddir, tmp_path, options=dict(
        FAST, group_lock_max_retries=1, max_redeliveries=1,
        group_lock_retry_base_delay_ms=100)).start()
    try:
        d.create(topic="st", group="fenced", code="echo\nlog_events")
        out = Stream(d, "span.out")
        dead = Stream(d, "st-dead")
        publish(d, "st", event("span", id_="late", do="span:1500"))
        d.wait_for(lambda: "event late delivery 1" in d.log(),
                   what="event late started")
        rec = d.state / "records" / "workmanager%groups%default%fenced%lock"
        raw = rec.read_bytes()
        assert raw[:4] == b"WMR1"
        revision, length = struct.unpack("<QQ", raw[4:20])
        held = _lock_fields(raw[52:52 + length])
        assert held[2].startswith("vm/") or "/" in held[2], held
        holder = b"intruder/0001"
        value = (b"\x08\x01" + b"\x12" + bytes([len(holder)]) + holder
                 + b"\x18" + _varint(held[3] + 1)
                 + b"\x20" + _varint(int(time.time() * 1000)))
        tmp = rec.with_suffix(".new")
        tmp.write_bytes(b"WMR1" + struct.pack("<QQ", revision + 1, len(value))
                        + hashlib.sha256(value).digest() + value)
        os.rename(tmp, rec)
        got = dead.wait(1, timeout=30)[0]
        assert got["id"] == "late"
        assert got["deadletterreason"] == "lock_contention"
        assert out.events() == [], "an output under a stale token went out"
        assert metric(d, "workmanager_outputs_refused_total") == 1
        assert metric(d, "workmanager_grouplock_stale_writes_total") == 1
        assert "outputs of an event of default/st refused" in d.log()
        out.close()
        dead.close()
    finally:
        assert d.stop() == 0


# ---- Worker Lifecycle Events on workmanager.lifecycle ------------------


def test_lifecycle_events_published(wmd):
    """Spec: Worker created, started, stopped — on the topic."""
    life = Stream(wmd, "workmanager.lifecycle")
    w = wmd.create(topic="life", group="lg", name="lw")
    wmd.post(f"/v1/workers/{w['id']}/stop")
    got = life.wait(3)
    types = [e["type"].rsplit(".", 1)[1] for e in got]
    assert types[:3] == ["created", "started", "stopped"], types
    for e in got[:3]:
        assert e["subject"] == w["id"]
        assert e["source"].startswith("urn:workmanager:")
        assert e["data"]["worker_id"] == w["id"]
        assert e["data"]["group"] == "lg"
        assert e["data"]["topic"] == "life"
    life.close()


def test_lifecycle_scoped_by_tenant(wmd):
    mine = Stream(wmd, "workmanager.lifecycle", tenant="acme")
    everyone = Stream(wmd, "workmanager.lifecycle", tenant="*")
    wmd.create(topic="x", tenant="other")
    a = wmd.create(topic="x", tenant="acme")
    got = mine.wait(2)
    assert {e["subject"] for e in got} == {a["id"]}
    assert len(everyone.wait(4)) >= 4
    mine.close()
    everyone.close()


# ---- gateway services ---------------------------------------------------


def gw(d, worker, method, request, service="workmanager.state", **ext):
    r = d.invoke(worker, "gateway", gwservice=service, gwmethod=method,
                 gwrequest=json.dumps(request), **ext)
    assert r.status == 200, r
    return r.json["data"]


def test_gateway_state(wmd):
    w = wmd.create(topic="gw")
    assert gw(wmd, w["id"], "get", {"key": "n"})["status"] == 404
    put = gw(wmd, w["id"], "put", {"key": "n", "value": {"a": [1, 2]}})
    assert put["status"] == 200, put
    got = gw(wmd, w["id"], "get", {"key": "n"})
    assert got["status"] == 200 and got["response"]["value"] == {"a": [1, 2]}
    # Scoped to the worker.
    other = wmd.create(topic="gw")
    assert gw(wmd, other["id"], "get", {"key": "n"})["status"] == 404
    assert gw(wmd, w["id"], "delete", {"key": "n"})["status"] == 200
    assert gw(wmd, w["id"], "get", {"key": "n"})["status"] == 404
    bad = gw(wmd, w["id"], "put", {"key": "../x", "value": 1})
    assert bad["status"] == 400 and "key" in bad["error"]


def test_gateway_publish_and_unknown_service(wmd):
    w = wmd.create(topic="gw")
    out = Stream(wmd, "from-worker")
    ok = gw(wmd, w["id"], "publish",
            {"topic": "from-worker",
             "event": event("made", id_="gw-1", data={"v": 1})},
            service="workmanager.publish")
    assert ok["status"] == 200 and ok["response"]["id"] == "gw-1", ok
    assert out.wait(1)[0]["data"] == {"v": 1}
    res = gw(wmd, w["id"], "publish",
             {"topic": "workmanager.lifecycle", "event": event("x")},
             service="workmanager.publish")
    assert res["status"] == 403 and "reserved" in res["error"]
    unk = gw(wmd, w["id"], "frobnicate", {}, service="workmanager.nope")
    assert unk["status"] == 404
    assert "unknown gateway service" in unk["error"]
    assert "workmanager.publish" in unk["error"]
    out.close()


# ---- the publish route --------------------------------------------------


def test_publish_modes_and_errors(wmd):
    wmd.create(topic="modes")
    out = Stream(wmd, "m.out")
    r = publish(wmd, "modes", [event("m", id_="b1"), event("m", id_="b2")])
    assert r.status == 202 and r.json["ids"] == ["b1", "b2"]
    r = wmd.request("POST", "/v1/topics/modes/events", raw=b'{"x": 1}',
                    headers={"Content-Type": "application/json",
                             "ce-specversion": "1.0", "ce-id": "bin-1",
                             "ce-source": "curl", "ce-type": "m",
                             "ce-correlationid": "c%20d"})
    assert r.status == 202 and r.json["ids"] == ["bin-1"], r
    got = {e["id"]: e for e in out.wait(3)}
    assert got["bin-1"]["data"] == {"x": 1}
    assert got["bin-1"]["correlationid"] == "c d"
    r = publish(wmd, "modes", {"specversion": "1.0", "id": "x",
                               "source": "s"})
    assert r.status == 400 and '"type"' in r.json["error"]["message"]
    r = publish(wmd, "modes", [event("m"), {"id": "x"}])
    assert r.status == 400 and "event 1" in r.json["error"]["message"]
    r = wmd.request("POST", "/v1/topics/modes/events", raw=b"x",
                    headers={"Content-Type": "text/plain"})
    assert r.status == 400 and r.code == "invalid_argument"
    r = publish(wmd, "bad%20topic!", event("m"))
    assert r.status == 400 and "topic" in r.json["error"]["message"], r
    out.close()


def test_metrics_text(wmd):
    w = wmd.create(topic="met")
    publish(wmd, "met", [event("x") for _ in range(5)])
    wmd.wait_for(lambda: metric(wmd, "workmanager_worker_events_processed_total",
                                worker=w["id"]) == 5, what="5 processed")
    r = wmd.get("/metrics")
    assert r.status == 200
    assert r.headers["Content-Type"].startswith("text/plain")
    text = r.raw.decode()
    for name in ("workmanager_workers{status=\"running\"} 1",
                 "workmanager_event_processing_seconds_bucket{le=\"+Inf\"}",
                 "workmanager_events_published_total ",
                 "workmanager_journal_bytes",
                 "workmanager_worker_restarts_total{worker=",
                 "workmanager_grouplock_wait_seconds_count"):
        assert name in text, name
    # Lifecycle events count too: at least the 5 and their outputs.
    assert metric(wmd, "workmanager_events_published_total") >= 10
    assert metric(wmd, "workmanager_events_acked_total") == 5
