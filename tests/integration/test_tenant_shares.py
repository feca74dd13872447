"""Tenants' shares of the machine (issue 22): the cgroup that holds all the
hosts of a tenant, with its CPU weight and quota (sandbox_cg_create_in(),
keys tenant_cpu_weight and tenant_cpu_max, the tenant's quotas.cpu_weight
and quotas.cpu_max); the per-tenant series of /metrics an operator bills
from (tenant_meter.h); and a deleted tenant's backlogs that no
subscription holds, purged with it (broker_purge())."""

import os
from pathlib import Path

import pytest

from wm import Daemon, event, metric, publish

PARENT = "wmfairshare"

pytestmark = pytest.mark.wmd(options={"cgroup_parent": PARENT,
                                      "tenant_cpu_weight": "150"})


def cpu_flavour(d):
    """The cgroup flavour when the daemon has the cpu controller; skips
    (fails with SANDBOX_MUST_WORK=1) without it."""
    sb = d.get("/health").json["sandbox"]
    if not sb["built"]:
        pytest.skip("built --without-sandbox: no cgroups")
    if "cpu" not in sb["cgroup_controllers"]:
        if os.environ.get("SANDBOX_MUST_WORK") == "1":
            pytest.fail(f"SANDBOX_MUST_WORK=1 but cgroups offer {sb}")
        pytest.skip("no cgroup cpu controller here")
    return sb["cgroup"]


def cpu_group(pid):
    """The group of process pid in the cpu hierarchy (v1) or the unified
    one (v2), and that hierarchy's mount."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            if "cpu" in ctls.split(","):
                return Path("/sys/fs/cgroup/cpu"), path
            if ctls == "" and path != "/":
                unified = Path("/sys/fs/cgroup")
    return unified, path


def test_hosts_of_a_tenant_share_its_cpu_group(wmd):
    flavour = cpu_flavour(wmd)
    r = wmd.post("/v1/tenants", {"name": "heavy",
                                 "quotas": {"cpu_weight": 300,
                                            "cpu_max": 50}})
    assert r.status == 201, r
    q = r.json["quotas"]
    assert (q["cpu_weight"], q["cpu_max"]) == (300, 50), r
    assert r.json["quotas_overridden"] == {"cpu_weight": 300,
                                           "cpu_max": 50}, r
    heavy = wmd.create(tenant="heavy", topic="t")["id"]
    light = wmd.create(topic="t")["id"]  # tenant default
    for wid, tenant, weight, cpu_max in ((heavy, "heavy", 300, 50),
                                         (light, "default", 150, 0)):
        assert wmd.invoke(wid).status == 200
        pid = wmd.get(f"/v1/workers/{wid}").json["pid"]
        mount, path = cpu_group(pid)
        # .../PARENT/d<daemon>/t-<tenant>/<worker>-<n>
        group = Path(path).parent
        assert group.name == f"t-{tenant}", path
        assert group.parent.name == f"d{wmd.proc.pid}", path
        files = mount / str(group).lstrip("/")
        if flavour == "v1":
            assert (files / "cpu.shares").read_text().strip() == \
                str(weight * 1024 // 100)
            assert (files / "cpu.cfs_quota_us").read_text().strip() == \
                (str(cpu_max * 1000) if cpu_max else "-1")
        else:
            assert (files / "cpu.weight").read_text().strip() == str(weight)
            assert (files / "cpu.max").read_text().split()[0] == \
                (str(cpu_max * 1000) if cpu_max else "max")
        assert str(pid) in (files / Path(path).name /
                            "cgroup.procs").read_text().split()


def test_bad_cpu_quotas_are_refused(wmd):
    r = wmd.post("/v1/tenants", {"name": "x",
                                 "quotas": {"cpu_weight": 10001}})
    assert r.status == 400 and "quotas.cpu_weight" in r.raw.decode(), r
    r = wmd.post("/v1/tenants", {"name": "x", "quotas": {"cpu_max": -1}})
    assert r.status == 400 and "quotas.cpu_max" in r.raw.decode(), r
    r = wmd.post("/v1/tenants", {"name": "x", "quotas": {"cpu_wieght": 5}})
    assert r.status == 400 and "cpu_weight" in r.raw.decode(), r


def test_metering_per_tenant(wmd):
    assert wmd.post("/v1/tenants", {"name": "bill\"ed"}).status == 400
    assert wmd.post("/v1/tenants", {"name": "billed"}).status == 201
    wid = wmd.create(tenant="billed", topic="meter")["id"]
    other = wmd.create(topic="meter")["id"]
    for i in range(5):
        assert publish(wmd, "meter", event(id_=f"m{i}"),
                       tenant="billed").status == 202
    for _ in range(3):
        assert wmd.invoke(wid).status == 200
    assert wmd.invoke(other).status == 200
    wmd.wait_for(lambda: metric(wmd, "workmanager_tenant_events_out_total",
                                tenant="billed") >= 5, what="deliveries")
    # its publishes, and its worker's outputs (the test host's echo
    # replies when asked, as invokes are)
    outputs = metric(wmd, "workmanager_worker_events_published_total",
                     worker=wid)
    assert metric(wmd, "workmanager_tenant_events_in_total",
                  tenant="billed") == 5 + outputs
    assert metric(wmd, "workmanager_tenant_invocations_total",
                  tenant="billed") == 3
    assert metric(wmd, "workmanager_tenant_invocations_total",
                  tenant="default") == 1
    text = wmd.get("/metrics").raw.decode()
    assert "# TYPE workmanager_tenant_quota_refusals_total counter" in text
    sb = wmd.get("/health").json["sandbox"]
    if sb["built"] and "memory" in sb["cgroup_controllers"]:
        # its hosts' memory, from its group (v1 memory.usage_in_bytes)
        assert metric(wmd, "workmanager_tenant_memory_bytes",
                      tenant="billed") > 0, text


@pytest.mark.wmd(options={"cgroup_parent": PARENT})
def test_tenant_delete_purges_unclaimed_backlog(wmd):
    assert wmd.post("/v1/tenants", {"name": "gone"}).status == 201
    wid = wmd.create(tenant="gone", topic="q")["id"]
    assert wmd.post(f"/v1/workers/{wid}/suspend").status == 200
    for i in range(4):
        assert publish(wmd, "q", event(id_=f"q{i}"), tenant="gone").status \
            == 202
    assert metric(wmd, "workmanager_events_pending") == 4
    assert wmd.stop() == 0
    # Restarted without recovery: the backlog waits for a worker that is
    # not back; deleting its tenant drops it (journaled: not replayed).
    wmd.options["recovery_on_start"] = "false"
    wmd.start()
    assert metric(wmd, "workmanager_events_pending") == 4
    r = wmd.delete("/v1/tenants/gone?confirm=gone")
    assert r.status == 200 and r.json["events_purged"] == 4, r
    assert metric(wmd, "workmanager_events_pending") == 0
    assert metric(wmd, "workmanager_events_dropped_total") == 4
    assert wmd.stop() == 0
    wmd.start()
    assert metric(wmd, "workmanager_events_pending") == 0


def test_a_flood_does_not_hold_back_another_tenants_events(wmd):
    """Fair shares in the master: each subscription is served in turn,
    at most its in-flight deliveries at a time, so B's events go to B's
    worker while A's backlog still waits (by order, not by time)."""
    for t in ("a", "b"):
        assert wmd.post("/v1/tenants", {"name": t}).status == 201
    a = wmd.create(tenant="a", topic="burn")["id"]
    b = wmd.create(tenant="b", topic="calm")["id"]
    flood = [event(type_="sleep:20", id_=f"a{i}") for i in range(100)]
    assert publish(wmd, "burn", flood, tenant="a").status == 202
    assert publish(wmd, "calm", [event(id_=f"b{i}") for i in range(5)],
                   tenant="b").status == 202
    wmd.wait_for(lambda: metric(wmd, "workmanager_worker_events_processed_"
                                "total", worker=b) == 5, what="B's events")
    done_a = metric(wmd, "workmanager_worker_events_processed_total",
                    worker=a)
    assert done_a < 100, done_a  # A's backlog had not drained


def cpu_metered(d):
    """Skips (fails with SANDBOX_MUST_WORK=1) where the daemon cannot read
    a tenant's CPU time: v2 needs its cpu controller, v1 the cpuacct
    hierarchy (mounted alone, as here, or with cpu)."""
    sb = d.get("/health").json["sandbox"]
    if not sb["built"]:
        pytest.skip("built --without-sandbox: no cgroups")
    ctls = sb["cgroup_controllers"]
    if not ("cpuacct" in ctls or (sb["cgroup"] == "v2" and "cpu" in ctls)):
        if os.environ.get("SANDBOX_MUST_WORK") == "1":
            pytest.fail(f"SANDBOX_MUST_WORK=1 but cgroups offer {sb}")
        pytest.skip("no cgroup that counts CPU time here")


def processed(d, wid):
    return metric(d, "workmanager_worker_events_processed_total", worker=wid)


def test_cpu_seconds_per_tenant(wmd):
    """The CPU time of a tenant's hosts, from its group: 0.3 s of CPU
    burnt by tenant T's worker shows in T's series, not in another's."""
    cpu_metered(wmd)
    assert wmd.post("/v1/tenants", {"name": "burner"}).status == 201
    wid = wmd.create(tenant="burner", topic="b")["id"]
    idle = wmd.create(topic="b")["id"]  # tenant default
    assert wmd.invoke(idle).status == 200
    assert wmd.invoke(wid, type_="burn:300").status == 200
    burnt = metric(wmd, "workmanager_tenant_cpu_seconds_total",
                   tenant="burner")
    assert burnt >= 0.25, wmd.get("/metrics").raw.decode()
    assert metric(wmd, "workmanager_tenant_cpu_seconds_total",
                  tenant="default") < 0.25


def test_many_hosts_of_one_tenant_do_not_starve_another(wmd):
    """Fair shares of the CPU: tenant A runs six CPU-bound workers, B one;
    the tenants' groups have equal weights, so B's one host gets about as
    much CPU as A's six together.  By the time B has done its events, A
    has done about as many (with every host in one flat group A would
    have had six times B's CPU, and done about six times as many).  The
    judgement is on counts at one moment, not on time."""
    cpu_flavour(wmd)
    for t in ("a", "b"):
        assert wmd.post("/v1/tenants", {"name": t}).status == 201
    a = [wmd.create(tenant="a", topic="burn")["id"] for _ in range(6)]
    b = wmd.create(tenant="b", topic="burn")["id"]
    for w in a + [b]:  # every host up before the race starts
        assert wmd.invoke(w).status == 200
    base_a = sum(processed(wmd, w) for w in a)
    base_b = processed(wmd, b)
    n = 20
    burn = [event(type_="burn:40", id_=f"x{i}") for i in range(40)]
    assert publish(wmd, "burn", burn, tenant="a").status == 202
    assert publish(wmd, "burn", burn[:n], tenant="b").status == 202
    wmd.wait_for(lambda: processed(wmd, b) >= base_b + n, timeout=60,
                 what="B's events")
    done_a = sum(processed(wmd, w) for w in a) - base_a
    # fair: about n; flat: about 6 n
    assert done_a < 3 * n, (done_a, n)
