"""Backlog quotas per tenant (issue 22): max_backlog_events and
max_backlog_bytes bound what the broker holds for a tenant, not yet
settled.  A publish (the route, a batch as a whole, a worker's gateway
publish) that would go over is refused 403 quota_exceeded naming the
quota, its limit and the usage, before anything of it is accepted; the
usage drops as the workers settle; a restart restores it from the journal.

A suspended worker is the subscriber that holds events (they queue, none
is delivered); resuming it drains them.
"""

import pytest

from test_tenant_quotas import patch, publish, refused, tenant
from wm import FAST, metric


def usage(wmd, name):
    return wmd.get(f"/v1/tenants/{name}").json["usage"]


def held(wmd, name):
    """A suspended worker of tenant name on topic q, which holds what is
    published there."""
    w = wmd.create(tenant=name, topic="q", name="held")
    assert wmd.post(f"/v1/workers/{w['id']}/suspend").status == 200
    return w


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
    r = wmd.invoke(maker["id"], "gateway", gwservice="workmanager.publish",
                   gwmethod="publish",
                   gwrequest='{"topic": "q", "event": {"specversion": '
                             '"1.0", "id": "g1", "source": "t", "type": "x"}}')
    assert r.status == 200, r
    res = r.json["data"]
    assert res["status"] == 403, res
    assert "quota_exceeded" in res["error"], res
    assert "max_backlog_events: limit 1" in res["error"], res
