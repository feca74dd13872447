"""The warm pool (issue 8's cold start; engines.h `warm = N`,
master/supervise/supervise.h): Python hosts kept started, confined and handshaken
for the next worker to take.

With `warm = 1`: a pool host is ready after start, confined like a
worker's (its /proc status, its slot's uid, a pool-N cgroup); a create
loads its code into that very process and the pool refills; a pool host
killed is replaced and no worker notices; a pool host taken moves into
its worker's tenant's cgroup; a worker with its own
limits.memory_mb starts its own host; a restart and a worker's extra
processes take pool hosts too; a pool host holds a host user; GET
/v1/engines and /metrics count them.  Pool hosts that keep failing are
given up on until a worker's host starts.  With the default (`warm = 0`)
no pool host starts; an exec'd engine (the test host) has a pool too.
"""

import os
import re
import signal
import time

import pytest

from pyhost_lib import (create, daemon, host_pid, proc_status,
                        require_sandbox, restarts)
from wm import Stream, event, metric, publish

UID_BASE = 3000000  # host_uid_base's default (workmanager.conf(5))
MUST_WORK = os.environ.get("SANDBOX_MUST_WORK") == "1"

WORKER = """
    def Process(event):
        return {"type": "echo", "data": event["data"]}
"""


def warm_daemon(builddir, tmp_path, warm, **options):
    """A daemon started with `warm` pool hosts of the Python engine (its
    hosts confined: skips without the sandbox)."""
    require_sandbox(builddir)
    d = daemon(builddir, tmp_path, options=options)
    text = (d.engines / "python.engine").read_text()
    (d.engines / "python.engine").write_text(text + f"warm = {warm}\n")
    return d.start()


pytestmark = pytest.mark.wmd(make=warm_daemon, warm=1)


def engine(d, name="python"):
    """The engine's entry of GET /v1/engines."""
    return next(e for e in d.get("/v1/engines").json["engines"]
                if e["name"] == name)


def ready_pids(d):
    """The pool hosts ready now, from the log: said ready, not taken by a
    worker since, not exited."""
    log = d.log()
    ready = re.findall(r"engine python: pool host pid (\d+) ready", log)
    gone = set(re.findall(r"takes host pid (\d+) from the python pool", log))
    gone |= set(re.findall(r"host pid (\d+) of worker python pool exited",
                           log))
    return [int(p) for p in ready if p not in gone]


def wait_ready(d, n=1, besides=()):
    """The pids of n ready pool hosts, none of `besides`."""
    def ok():
        pids = [p for p in ready_pids(d) if p not in besides]
        return pids if len(pids) >= n and engine(d)["warm_ready"] >= n \
            else None
    d.wait_for(ok, what=f"{n} ready pool host(s)")
    return ok()


def echo(d, wid, n):
    r = d.invoke(wid, "echo", data={"n": n})
    assert r.status == 200 and r.json["data"] == {"n": n}, r


def test_pool_host_is_ready_and_confined(wmd):
    """After start one pool host is ready, confined as a worker's host
    would be, counted by the API, the metrics and /health, and ends with
    the daemon."""
    [pid] = wait_ready(wmd)
    e = engine(wmd)
    assert e["warm"] == 1 and e["warm_ready"] == 1, e
    assert metric(wmd, "workmanager_engine_warm_hosts", engine="python") == 1
    assert metric(wmd, "workmanager_engine_warm_hosts_wanted",
                  engine="python") == 1
    assert metric(wmd, "workmanager_engine_warm_hosts", engine="test") == 0
    assert wmd.get("/health").json["hosts"] == 1
    st = proc_status(pid)
    assert st["Name"] == "wm-host-python", st
    assert st["Seccomp"] == "2", st
    assert st["NoNewPrivs"] == "1", st
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(st[cap], 16) == 0, (cap, st[cap])
    if os.geteuid() == 0:
        uid = int(st["Uid"].split()[0])
        assert UID_BASE <= uid < UID_BASE + 65536, st["Uid"]
        assert st["Uid"].split() == [str(uid)] * 4, st["Uid"]
        assert re.search(rf"pool host \S+wm-host-python started, pid {pid} "
                         rf"\(with its init\), uid {uid}", wmd.log())
        assert proc_status(int(st["PPid"]))["Name"] == "wm-init"
        if wmd.get("/health").json["sandbox"].get("cgroup"):
            with open(f"/proc/{pid}/cgroup") as f:
                assert re.search(r"/pool-\d+$", f.read(), re.M)
    elif MUST_WORK:
        pytest.fail("SANDBOX_MUST_WORK=1 but the tests do not run as root")
    m = re.search(rf"host pid {pid} says hello \(engine python, "
                  r"max_inflight 1, prefetch 32, confinement (\w+)\)", wmd.log())
    assert m, wmd.log()
    if MUST_WORK:
        assert m.group(1) == "full"
    assert wmd.stop() == 0
    assert re.search(rf"host pid {pid} of worker python pool exited: "
                     r".*reason stopped", wmd.log()), wmd.log()


def test_create_takes_the_pool_host_and_the_pool_refills(wmd):
    """A create loads its code into the ready pool host: the first event
    runs in that pid; a new pool host is ready right after."""
    [pooled] = wait_ready(wmd)
    w = create(wmd, WORKER)
    echo(wmd, w["id"], 1)
    assert host_pid(wmd, w["id"]) == pooled
    assert re.search(rf"worker {w['id']}: takes host pid {pooled} from the "
                     "python pool", wmd.log())
    [fresh] = wait_ready(wmd, besides=(pooled,))
    assert fresh != pooled
    # The worker's host is the worker's now: it serves, and is counted
    # as its own, not the pool's.
    echo(wmd, w["id"], 2)
    assert host_pid(wmd, w["id"]) == pooled
    assert engine(wmd)["warm_ready"] == 1
    assert wmd.get("/health").json["hosts"] == 2
    # A second worker takes the refilled one.
    w2 = create(wmd, WORKER, topic="py2")
    echo(wmd, w2["id"], 3)
    assert host_pid(wmd, w2["id"]) == fresh
    wait_ready(wmd, besides=(pooled, fresh))


def test_killed_pool_host_is_replaced(wmd):
    """SIGKILL to a pool host: it is dropped and replaced; the workers
    running meanwhile are not affected."""
    [pooled] = wait_ready(wmd)
    w = create(wmd, WORKER)
    echo(wmd, w["id"], 1)
    [victim] = wait_ready(wmd, besides=(pooled,))
    os.kill(victim, signal.SIGKILL)
    wmd.wait_for(lambda: re.search(rf"host pid {victim} of worker python "
                                   "pool exited", wmd.log()),
                 what="the pool host's exit")
    [fresh] = wait_ready(wmd, besides=(pooled, victim))
    assert fresh not in (pooled, victim)
    assert re.search(r"engine python: a pool host failed \(pid "
                     rf"{victim} ended with", wmd.log())
    echo(wmd, w["id"], 2)
    assert host_pid(wmd, w["id"]) == pooled
    assert restarts(wmd, w["id"]) == 0
    assert wmd.get(f"/v1/workers/{w['id']}").json["state"] == "running"


def test_own_memory_limit_starts_its_own_host(wmd):
    """A worker whose limits.memory_mb is not the pool's (none) gets a
    host spawned with its limit; the pool host stays for another."""
    [pooled] = wait_ready(wmd)
    w = create(wmd, WORKER, limits={"memory_mb": 256})
    echo(wmd, w["id"], 1)
    assert host_pid(wmd, w["id"]) != pooled
    assert ready_pids(wmd) == [pooled]
    assert engine(wmd)["warm_ready"] == 1
    assert "takes host pid" not in wmd.log()


def test_crash_restart_takes_a_pool_host(wmd):
    """A worker's host that dies is restarted from the pool too."""
    [pooled] = wait_ready(wmd)
    w = create(wmd, WORKER)
    echo(wmd, w["id"], 1)
    assert host_pid(wmd, w["id"]) == pooled
    [fresh] = wait_ready(wmd, besides=(pooled,))
    os.kill(pooled, signal.SIGKILL)
    wmd.wait_for(lambda: restarts(wmd, w["id"]) == 1, what="a restart")
    wmd.wait_for(lambda: wmd.get(f"/v1/workers/{w['id']}").json["state"]
                 == "running", what="running again")
    assert host_pid(wmd, w["id"]) == fresh
    echo(wmd, w["id"], 2)


def test_no_pool_by_default(wm_builddir, tmp_path):
    """warm = 0 (the default of a descriptor without the key): no pool
    host starts."""
    d = daemon(wm_builddir, tmp_path).start()
    try:
        w = create(d, WORKER)
        echo(d, w["id"], 1)
        e = engine(d)
        assert e["warm"] == 0 and e["warm_ready"] == 0, e
        assert metric(d, "workmanager_engine_warm_hosts",
                      engine="python") == 0
        assert d.get("/health").json["hosts"] == 1
        assert "pool host" not in d.log()
        assert "takes host pid" not in d.log()
    finally:
        assert d.stop() == 0, d.log()


def test_exec_engine_pool(wm_builddir, tmp_path):
    """warm is any engine's: the test host, exec'd, kept warm too (its
    WM_WORKER_ID is `pool`; its Load names the worker)."""
    d = daemon(wm_builddir, tmp_path)
    text = (d.engines / "test.engine").read_text()
    (d.engines / "test.engine").write_text(text + "warm = 2\n")
    d.start()
    try:
        d.wait_for(lambda: engine(d, "test")["warm_ready"] == 2,
                   what="2 ready pool hosts of engine test")
        assert metric(d, "workmanager_engine_warm_hosts", engine="test") == 2
        ready = [int(p) for p in re.findall(
            r"engine test: pool host pid (\d+) ready", d.log())]
        assert len(ready) == 2
        w = d.create()
        assert d.invoke(w["id"], "echo").status == 200
        assert d.get(f"/v1/workers/{w['id']}").json["pid"] in ready
        d.wait_for(lambda: len(re.findall(
            r"engine test: pool host pid (\d+) ready", d.log())) == 3,
            what="the pool refilled")
    finally:
        assert d.stop() == 0, d.log()


SLOW = """
    import time

    def Process(event):
        time.sleep(0.3)
        return {"type": "slow.out"}
"""


def test_extra_processes_take_pool_hosts(wm_builddir, tmp_path):
    """A worker of several host processes (concurrency = processes) takes
    a pool host for each new one while the pool has one ready."""
    d = warm_daemon(wm_builddir, tmp_path, 2)
    try:
        wait_ready(d, 2)
        w = create(d, SLOW, limits={"concurrency": 3})
        wid = w["id"]
        out = Stream(d, "slow.out")
        r = publish(d, "py", [event("slow", id_=f"s{i}") for i in range(6)])
        assert r.status == 202, r
        out.wait(6, timeout=60)
        out.close()
        pids = d.get(f"/v1/workers/{wid}").json["pids"]
        assert len(pids) == 3, pids
        taken = [int(p) for p in re.findall(
            rf"worker {wid}: takes host pid (\d+) from the python pool",
            d.log())]
        assert len(taken) >= 2 and set(taken) <= set(pids), (taken, pids)
        assert pids[0] == taken[0]
        wait_ready(d, 2, besides=taken)
    finally:
        assert d.stop() == 0, d.log()


def test_pool_host_holds_a_host_user(wm_builddir, tmp_path):
    """A pool host holds one of host_uid_count's users: with 2, a pool
    host and one worker's own host take both, and a second worker's own
    host finds none."""
    require_sandbox(wm_builddir)
    if os.geteuid() != 0:
        if MUST_WORK:
            pytest.fail("SANDBOX_MUST_WORK=1 but the tests do not run as root")
        pytest.skip("hosts get users of their own only from a root daemon")
    d = warm_daemon(wm_builddir, tmp_path, 1, host_uid_count=2)
    try:
        [pooled] = wait_ready(d)
        a = create(d, WORKER, limits={"memory_mb": 256})
        echo(d, a["id"], 1)
        r = create(d, WORKER, expect=422, topic="py2",
                   limits={"memory_mb": 256})
        assert "host_uid_count" in str(r), r
        assert ready_pids(d) == [pooled]
    finally:
        assert d.stop() == 0, d.log()


def test_failing_pool_hosts_are_given_up_on(wm_builddir, tmp_path):
    """Pool hosts that fail their handshake are replaced after a backoff,
    and after 3 in a row no more are started (a warning names the engine
    and the reason); the engine's workers still start their own."""
    d = daemon(wm_builddir, tmp_path, options={"handshake_timeout_ms": 200})
    f = d.engines / "test-no-hello.engine"
    f.write_text(f.read_text() + "warm = 1\n")
    d.start()
    try:
        d.wait_for(lambda: "3 pool hosts failed in a row" in d.log(),
                   what="the pool given up on")
        log = d.log()
        assert re.search(r"engine test-no-hello: 3 pool hosts failed in a "
                         r"row, the last pid \d+ ended with .*handshake.*: "
                         "its pool is not refilled", log), log
        assert len(re.findall(r"engine test-no-hello: a pool host failed",
                              log)) == 2
        started = len(re.findall(r"engine test-no-hello: pool host \S+ "
                                 "started", log))
        assert started == 3
        time.sleep(0.5)
        assert len(re.findall(r"engine test-no-hello: pool host \S+ "
                              "started", d.log())) == started
        assert engine(d, "test-no-hello")["warm_ready"] == 0
        # The other engines are not concerned.
        assert "engine python: a pool host failed" not in d.log()
    finally:
        assert d.stop() == 0, d.log()



def test_given_up_pool_refills_after_a_worker_starts(wmd):
    """Three pool hosts killed in a row: the pool is given up on; the
    next worker's host that loads (its own, spawned) refills it."""
    killed = []
    for _ in range(3):
        [victim] = wait_ready(wmd, besides=killed)
        os.kill(victim, signal.SIGKILL)
        killed.append(victim)
        wmd.wait_for(lambda: re.search(rf"host pid {victim} of worker "
                                       "python pool exited", wmd.log()),
                     what="the pool host's exit")
    wmd.wait_for(lambda: "engine python: 3 pool hosts failed in a row"
                 in wmd.log(), what="the pool given up on")
    assert engine(wmd)["warm_ready"] == 0
    w = create(wmd, WORKER)
    echo(wmd, w["id"], 1)
    assert host_pid(wmd, w["id"]) not in killed
    assert "engine python: a worker's host started: refilling its pool" \
        in wmd.log()
    wait_ready(wmd, besides=killed)


def test_taken_pool_host_joins_its_tenant_cgroup(wmd):
    """A pool host taken by a worker of tenant T moves into T's cgroup
    (t-T, with T's cpu share), as a host spawned for it would be."""
    if not wmd.get("/health").json["sandbox"].get("cgroup"):
        pytest.skip("no cgroups here")
    [pid] = wait_ready(wmd)
    assert wmd.post("/v1/tenants", {"name": "warmt", "quotas":
                                    {"cpu_weight": 250}}).status == 201
    w = create(wmd, WORKER, tenant="warmt")
    assert host_pid(wmd, w["id"]) == pid  # the pool's
    echo(wmd, w["id"], 1)

    def moved():
        with open(f"/proc/{pid}/cgroup") as f:
            return f"/t-warmt/{w['id']}-" in f.read()
    wmd.wait_for(moved, what="the host in its tenant's cgroup")
    with open(f"/proc/{pid}/cgroup") as f:
        cpu = [ln.split(":", 2)[2] for ln in f.read().splitlines()
               if "cpu" in ln.split(":", 2)[1].split(",")]
    if cpu:  # v1: the tenant group's cpu.shares (250 x 1024 / 100)
        group = os.path.dirname(cpu[0].strip())
        with open(f"/sys/fs/cgroup/cpu{group}/cpu.shares") as f:
            assert f.read().strip() == "2560"
