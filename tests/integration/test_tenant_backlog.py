"""Backlog quotas per tenant (issue 22): max_backlog_events and
max_backlog_bytes bound what the broker holds for a tenant, not yet
settled.  A publish (the route, a batch as a whole, a worker's gateway
publish) that would go over is refused 403 quota_exceeded naming the
quota, its limit and the usage, before anything of it is accepted; the
usage drops as the workers settle; a restart restores it from the journal.

A suspended worker is the subscriber that holds events (they queue, none
is delivered); resuming it drains them.
"""

import json
import re

import pytest

from test_tenant_quotas import patch, publish, refused, tenant, wmctl
from wm import FAST, metric


def usage(wmd, name):
    return wmd.get(f"/v1/tenants/{name}").json["usage"]


def held(wmd, name):
    """A suspended worker of tenant name on topic q, which holds what is
    published there."""
    w = wmd.create(tenant=name, topic="q", name="held")
    assert wmd.post(f"/v1/workers/{w['id']}/suspend").status == 200
    return w


def gateway(wmd, worker, service, method, request):
    """The answer of a gateway call the test host makes for worker."""
    r = wmd.invoke(worker, "gateway", gwservice=service, gwmethod=method,
                   gwrequest=json.dumps(request))
    assert r.status == 200, r
    return r.json["data"]


def drain(wmd, name, w):
    assert wmd.post(f"/v1/workers/{w['id']}/resume").status == 200
    wmd.wait_for(lambda: usage(wmd, name)["max_backlog_events"] == 0,
                 what="the backlog drained")
    assert usage(wmd, name)["max_backlog_bytes"] == 0


@pytest.mark.wmd(options=dict(FAST, tenant_max_backlog_events="3"))
def test_backlog_events_refused_whole_and_released(wmd):
    tenant(wmd, "acme")
    tenant(wmd, "other", max_backlog_events=0)
    w = held(wmd, "acme")
    wmd.create(tenant="other", topic="q", name="held-too")
    assert publish(wmd, "acme", n=2).status == 202
    # 2 + 2 > 3: the batch is refused whole, nothing of it accepted.
    r = publish(wmd, "acme", n=2)
    refused(r, "max_backlog_events", 3, 2)
    assert "retry once the backlog drains" in r.json["error"]["message"]
    assert usage(wmd, "acme")["max_backlog_events"] == 2
    assert publish(wmd, "acme").status == 202
    refused(publish(wmd, "acme"), "max_backlog_events", 3, 3)
    t = wmd.get("/v1/tenants/acme").json
    assert t["quotas"]["max_backlog_events"] == 3, t
    assert t["usage"]["max_backlog_events"] == 3, t
    assert t["usage"]["max_backlog_bytes"] > 0, t
    out = wmctl(wmd, "tenant", "show", "acme")
    assert out.returncode == 0, out
    assert re.search(r"max_backlog_events\s+3\s+3\s+\(default\)",
                     out.stdout), out.stdout
    # Another tenant's backlog is its own.
    assert publish(wmd, "other", n=5).status == 202
    assert metric(wmd, "workmanager_tenant_quota_refusals_total",
                  tenant="acme", quota="max_backlog_events") == 2
    drain(wmd, "acme", w)
    # Exactly the accepted three were processed.
    assert metric(wmd, "workmanager_worker_events_processed_total",
                  worker=w["id"]) == 3
    assert publish(wmd, "acme", n=3).status == 202


@pytest.mark.wmd(options=FAST)
def test_backlog_bytes_survive_a_restart(wmd):
    tenant(wmd, "acme")
    w = held(wmd, "acme")
    assert publish(wmd, "acme").status == 202
    one = usage(wmd, "acme")["max_backlog_bytes"]
    assert one > 0
    assert patch(wmd, "acme", max_backlog_bytes=2 * one).status == 200
    assert publish(wmd, "acme").status == 202
    refused(publish(wmd, "acme"), "max_backlog_bytes", 2 * one, 2 * one)
    # The journal's replay restores the counts.
    wmd.stop()
    wmd.start()
    u = usage(wmd, "acme")
    assert u["max_backlog_events"] == 2 and u["max_backlog_bytes"] == 2 * one
    refused(publish(wmd, "acme"), "max_backlog_bytes", 2 * one, 2 * one)
    drain(wmd, "acme", w)
    assert publish(wmd, "acme").status == 202


@pytest.mark.wmd(options=FAST)
def test_gateway_publish_over_backlog_refused(wmd):
    """A worker's own publish (workmanager.publish) gets 403 and the quota
    named; the worker decides what to do."""
    tenant(wmd, "acme", max_backlog_events=1)
    held(wmd, "acme")
    assert publish(wmd, "acme").status == 202
    maker = wmd.create(tenant="acme", topic="gw", name="maker")
    res = gateway(wmd, maker["id"], "workmanager.publish", "publish",
                  {"topic": "q", "event": {"specversion": "1.0", "id": "g1",
                                           "source": "t", "type": "x"}})
    assert res["status"] == 403, res
    assert "quota_exceeded" in res["error"], res
    assert "max_backlog_events: limit 1" in res["error"], res


# ---- state quotas (the same issue item, workmanager.state) --------------


def state(wmd, worker, method, request):
    return gateway(wmd, worker, "workmanager.state", method, request)


@pytest.mark.wmd(options=FAST)
def test_state_keys_and_bytes(wmd):
    tenant(wmd, "acme", max_state_keys=2, max_state_bytes=100)
    tenant(wmd, "other", max_state_keys=1)
    w = wmd.create(tenant="acme", topic="s", name="keeper")
    v = wmd.create(tenant="acme", topic="s", name="keeper-too")
    assert state(wmd, w["id"], "put", {"key": "a", "value": "x" * 8})[
        "status"] == 200
    assert state(wmd, v["id"], "put", {"key": "a", "value": 1})[
        "status"] == 200
    u = usage(wmd, "acme")
    assert u["max_state_keys"] == 2 and u["max_state_bytes"] == 11, u
    # A new key over the keys quota: refused, named, nothing written.
    res = state(wmd, w["id"], "put", {"key": "b", "value": 2})
    assert res["status"] == 403, res
    assert "quota_exceeded" in res["error"], res
    assert "max_state_keys: limit 2, usage 2" in res["error"], res
    assert state(wmd, w["id"], "get", {"key": "b"})["status"] == 404
    # Rewriting a key counts its new value instead of the old.
    assert state(wmd, w["id"], "put", {"key": "a", "value": "y" * 97})[
        "status"] == 200
    res = state(wmd, w["id"], "put", {"key": "a", "value": "y" * 98})
    assert res["status"] == 403, res
    assert "max_state_bytes: limit 100, usage 100" in res["error"], res
    assert usage(wmd, "acme")["max_state_bytes"] == 100
    # Another tenant counts its own.
    o = wmd.create(tenant="other", topic="s", name="o")
    assert state(wmd, o["id"], "put", {"key": "a", "value": 1})[
        "status"] == 200
    # Deleting a key gives it back; so does deleting a worker with state.
    assert state(wmd, v["id"], "delete", {"key": "a"})["status"] == 200
    assert usage(wmd, "acme")["max_state_keys"] == 1
    assert state(wmd, w["id"], "put", {"key": "b", "value": 2})[
        "status"] == 200
    assert metric(wmd, "workmanager_tenant_quota_refusals_total",
                  tenant="acme", quota="max_state_keys") == 1
    # Counted from the store again at start-up.
    wmd.stop()
    wmd.start()
    u = usage(wmd, "acme")
    assert u["max_state_keys"] == 2 and u["max_state_bytes"] == 100, u
    assert wmd.delete(f"/v1/workers/{w['id']}").status in (200, 204)
    u = usage(wmd, "acme")
    assert u["max_state_keys"] == 0 and u["max_state_bytes"] == 0, u
    assert usage(wmd, "other")["max_state_keys"] == 1


def test_state_writes_read_nothing_from_the_store(wmd):
    """A state write's admission takes the key's old size from memory
    (state_sizes.h), not from the store: with store = nats a store read is
    a round trip on the daemon's loop.  Puts, replacements and deletes,
    with and without a state quota, read nothing; the usage stays right,
    and is counted from the store again at a restart."""
    tenant(wmd, "acme", max_state_keys=5, max_state_bytes=1000)
    w = wmd.create(tenant="acme", topic="s", name="keeper")
    v = wmd.create(topic="s", name="free")  # default tenant: no quota
    assert state(wmd, w["id"], "put", {"key": "warm", "value": 0})[
        "status"] == 200
    before = metric(wmd, "workmanager_store_reads_total")
    for who in (w, v):
        for i in range(5):
            assert state(wmd, who["id"], "put",
                         {"key": "k", "value": "x" * i})["status"] == 200
        assert state(wmd, who["id"], "put", {"key": "j", "value": 1})[
            "status"] == 200
        assert state(wmd, who["id"], "delete", {"key": "j"})[
            "status"] == 200
    # /metrics and /v1/tenants read nothing either
    assert metric(wmd, "workmanager_store_reads_total") == before
    u = usage(wmd, "acme")
    # "warm" = 0 and "k" = "xxxx": two keys, 1 + 6 bytes of JSON text
    assert u["max_state_keys"] == 2 and u["max_state_bytes"] == 7, u
    wmd.stop()
    wmd.start()
    u = usage(wmd, "acme")
    assert u["max_state_keys"] == 2 and u["max_state_bytes"] == 7, u
    res = state(wmd, w["id"], "put", {"key": "k", "value": "y" * 992})
    assert res["status"] == 200, res  # 1 + 994 bytes: fits 1000
    res = state(wmd, w["id"], "put", {"key": "k", "value": "y" * 998})
    assert res["status"] == 403 and "max_state_bytes" in res["error"], res
