"""Quotas per tenant (issue 22): each quota refused at its limit with its
status, code and a message naming the quota, its limit and the usage;
released when the usage drops; a tenant's override beats the daemon's
default and survives a restart; one tenant over its publish rate leaves
another tenant's publishes alone; refusals are counted in /metrics.

The operator speaks on the control socket and names the tenant in each
request (a worker's "tenant", ?tenant= on a publish)."""

import json
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from wm import b64


def tenant(wmd, name, **quotas):
    body = {"name": name}
    if quotas:
        body["quotas"] = quotas
    r = wmd.post("/v1/tenants", body)
    assert r.status == 201, r
    return r.json


def patch(wmd, name, **quotas):
    return wmd.request("PATCH", f"/v1/tenants/{name}", {"quotas": quotas})


def refused(r, quota, limit, usage, status=403, code="quota_exceeded"):
    assert r.status == status and r.code == code, r
    err = r.json["error"]
    assert err["quota"] == quota and err["limit"] == limit, r
    msg = err["message"]
    assert quota in msg and f"limit {limit}" in msg, msg
    if usage is not None:
        assert err["usage"] == usage and f"usage {usage}" in msg, msg


def publish(wmd, tenant_, n=1, data="x"):
    ev = [{"specversion": "1.0", "id": f"e{i}", "source": "test",
           "type": "echo", "data": data} for i in range(n)]
    return wmd.post(f"/v1/topics/q/events?tenant={tenant_}",
                    raw=json.dumps(ev if n > 1 else ev[0]).encode(),
                    headers={"Content-Type":
                             "application/cloudevents-batch+json" if n > 1
                             else "application/cloudevents+json"})


@pytest.mark.wmd(options={"tenant_max_workers": "2"})
def test_workers_quota_default_override_and_release(wmd):
    tenant(wmd, "acme")
    tenant(wmd, "big", max_workers=3)
    a = [wmd.create(tenant="acme", start=False) for _ in range(2)]
    r = wmd.post("/v1/workers", {
        "tenant": "acme", "mime_type": "application/x-wm-test",
        "topic": "t", "start": False, "code": {"content": b64("echo")}})
    refused(r, "max_workers", 2, 2)
    # the override beats the default
    for _ in range(3):
        wmd.create(tenant="big", start=False)
    wmd.create(tenant="big", start=False, expect=403)
    t = wmd.get("/v1/tenants/acme").json
    assert t["quotas"]["max_workers"] == 2 and t["usage"]["max_workers"] == 2
    assert wmd.get("/v1/tenants/big").json["quotas_overridden"] == \
        {"max_workers": 3}
    # released when a worker goes
    assert wmd.delete(f"/v1/workers/{a[0]['id']}").status == 204
    wmd.create(tenant="acme", start=False)
    m = wmd.get("/metrics").raw.decode()
    assert re.search(r'workmanager_tenant_quota_refusals_total'
                     r'\{tenant="acme",quota="max_workers"\} 1\b', m), m
    # null gives the quota back to the default; the change is persisted
    assert patch(wmd, "big", max_workers=None).status == 200
    assert patch(wmd, "acme", max_workers=5).status == 200
    wmd.stop()
    wmd.start()
    acme = wmd.get("/v1/tenants/acme").json
    assert acme["quotas"]["max_workers"] == 5, acme
    assert wmd.get("/v1/tenants/big").json["quotas"]["max_workers"] == 2


def test_quotas_are_strict_and_audited(wmd):
    tenant(wmd, "acme")
    r = patch(wmd, "acme", max_worker=1)
    assert r.status == 400 and "max_workers" in r.raw.decode(), r
    r = patch(wmd, "acme", max_workers=-1)
    assert r.status == 400 and "non-negative" in r.raw.decode(), r
    r = wmd.post("/v1/tenants", {"name": "x", "quotas": {"workers": 1}})
    assert r.status == 400, r
    assert patch(wmd, "nobody", max_workers=1).status == 404
    assert patch(wmd, "acme", max_workers=1).status == 200
    audit = (wmd.state / "audit.log").read_text()
    assert '"PATCH"' in audit and "/v1/tenants/acme" in audit, audit


def test_memory_and_running_hosts(wmd):
    tenant(wmd, "acme", max_memory_mb=128, max_running_hosts=1)
    r = wmd.post("/v1/workers", {
        "tenant": "acme", "mime_type": "application/x-wm-test", "topic": "t",
        "code": {"content": b64("echo")}})
    assert r.status == 403 and r.code == "quota_exceeded", r
    assert "limits.memory_mb" in r.json["error"]["message"], r
    first = wmd.create(tenant="acme", limits={"memory_mb": 100})
    r = wmd.post("/v1/workers", {
        "tenant": "acme", "mime_type": "application/x-wm-test", "topic": "t",
        "start": False, "limits": {"memory_mb": 64},
        "code": {"content": b64("echo")}})
    refused(r, "max_memory_mb", 128, 100)
    second = wmd.create(tenant="acme", start=False,
                        limits={"memory_mb": 28})
    r = wmd.post(f"/v1/workers/{second['id']}/start")
    refused(r, "max_running_hosts", 1, 1)
    assert wmd.get(f"/v1/workers/{second['id']}").json["status"] == \
        "stopped"
    assert wmd.post(f"/v1/workers/{first['id']}/stop").status == 200
    assert wmd.post(f"/v1/workers/{second['id']}/start").status == 200


def test_code_bytes(wmd):
    tenant(wmd, "acme", max_code_bytes=6)
    w = wmd.create(tenant="acme", start=False)  # 4 bytes
    r = wmd.post("/v1/workers", {
        "tenant": "acme", "mime_type": "application/x-wm-test", "topic": "t",
        "start": False, "code": {"content": b64("echo")}})
    refused(r, "max_code_bytes", 6, 4)
    # a reload counts the new package instead of the old
    r = wmd.put(f"/v1/workers/{w['id']}/code",
                {"code": {"content": b64("echo")}})
    assert r.status == 200, r
    r = wmd.put(f"/v1/workers/{w['id']}/code",
                {"code": {"content": b64("echo" * 2)}})
    refused(r, "max_code_bytes", 6, 4)
    assert wmd.get(f"/v1/workers/{w['id']}").json["version"] == 2


@pytest.mark.wmd(options={"tenant_publish_events_per_second": "2"})
def test_publish_rate_per_tenant(wmd):
    tenant(wmd, "noisy")
    tenant(wmd, "quiet", publish_events_per_second=0)
    tenant(wmd, "fat", publish_events_per_second=0,
           publish_bytes_per_second=400)
    r = publish(wmd, "noisy", n=2)
    assert r.status == 202, r
    r = publish(wmd, "noisy")
    refused(r, "publish_events_per_second", 2, None, 429, "rate_limited")
    assert r.headers["Retry-After"] == "1", r.headers
    assert r.json["error"]["retry_after_s"] == 1
    # another tenant is not limited by noisy's flood
    for _ in range(5):
        assert publish(wmd, "quiet").status == 202
    # the bucket refills
    time.sleep(1.1)
    assert publish(wmd, "noisy").status == 202
    # bytes: a publish larger than what is left waits
    assert publish(wmd, "fat", data="y" * 250).status == 202
    r = publish(wmd, "fat", data="y" * 250)
    refused(r, "publish_bytes_per_second", 400, None, 429, "rate_limited")
    m = wmd.get("/metrics").raw.decode()
    for t, q in (("noisy", "publish_events_per_second"),
                 ("fat", "publish_bytes_per_second")):
        assert re.search(rf'workmanager_tenant_quota_refusals_total'
                         rf'\{{tenant="{t}",quota="{q}"\}} 1\b', m), m
    assert 'tenant="quiet"' not in m.split(
        "workmanager_tenant_quota_refusals_total")[-1]


def wmctl(wmd, *args):
    return subprocess.run([str(wmd.builddir / "cli" / "wmctl"), *args],
                          capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin",
                               "WM_SOCKET": str(wmd.socket)})


def test_wmctl_tenant_quotas(wmd):
    r = wmctl(wmd, "tenant", "create", "acme", "--quota", "max_workers=1")
    assert r.returncode == 0, r
    wmd.create(tenant="acme", start=False)
    r = wmctl(wmd, "tenant", "show", "acme")
    assert r.returncode == 0, r
    assert re.search(r"max_workers\s+1\s+1\s+\(own\)", r.stdout), r.stdout
    assert re.search(r"max_memory_mb\s+0\s+unlimited\s+\(default\)",
                     r.stdout), r.stdout
    r = wmctl(wmd, "tenant", "set", "acme", "--quota", "max_workers=default",
              "--quota", "publish_events_per_second=10")
    assert r.returncode == 0, r
    q = wmd.get("/v1/tenants/acme").json["quotas_overridden"]
    assert q == {"publish_events_per_second": 10}, q
    r = wmctl(wmd, "tenant", "set", "acme", "--quota", "max_workers=-1")
    assert r.returncode == 2 and "KEY=N" in r.stderr, r
    r = wmctl(wmd, "tenant", "set", "acme", "--quota", "max_wrkers=1")
    assert r.returncode == 1 and "max_workers" in r.stderr, r


@pytest.mark.wmd(options={"tenant_max_workers": "2"})
def test_concurrent_creates_cannot_pass_together(wmd):
    """A create admitted but not yet stored holds its place: of six
    creates at once, two pass."""
    tenant(wmd, "acme")

    def one(_):
        return wmd.post("/v1/workers", {
            "tenant": "acme", "mime_type": "application/x-wm-test",
            "topic": "t", "start": False,
            "code": {"content": b64("echo")}}).status

    with ThreadPoolExecutor(6) as pool:
        got = sorted(pool.map(one, range(6)))
    assert got == [201, 201, 403, 403, 403, 403], got
    assert wmd.get("/v1/tenants/acme").json["usage"]["max_workers"] == 2
