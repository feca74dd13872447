"""The .NET engine on a real workmanagerd (issue 10): wm-host-dotnet
hosting CoreCLR, a nupkg worker built here with the installed SDK in a
collectible load context, the DevKit shared; errors, crashes, deadlines
and reloads.  The worker's behaviour comes from the event's type: see
tests/workers/dotnet/echo/EchoWorker.cs.
"""

import json
import subprocess

import pytest

from dotnet_lib import (MIME, build_worker, dotnet_engine, need_dotnet,
                        nupkg, sandbox_debug)
from wm import Daemon, b64


@pytest.fixture(scope="module")
def echo_pkg(wm_builddir, tmp_path_factory):
    need_dotnet(wm_builddir)
    folder, _ = build_worker(wm_builddir, "echo",
                             tmp_path_factory.mktemp("echo"))
    return nupkg(folder)


@pytest.fixture
def wmd(wm_builddir, tmp_path):
    host = need_dotnet(wm_builddir)
    d = Daemon(wm_builddir, tmp_path, options={
        "restart_base_delay_ms": 20, "restart_max_delay_ms": 100,
        "shutdown_grace_ms": 1000, "message_timeout_ms": 4000},
        engines=dotnet_engine(host), env=sandbox_debug())
    d.start()
    yield d
    assert d.stop() == 0, d.log()


def create(d, package, expect=201, **fields):
    body = {"mime_type": MIME, "topic": "n",
            "code": {"content": b64(package)}}
    body.update(fields)
    r = d.post("/v1/workers", body)
    assert r.status == expect, (r, d.log()[-3000:])
    return r.json


def test_echo_with_correlation_id(wmd, echo_pkg):
    """Spec: DLL worker execution; Response with correlation ID."""
    w = create(wmd, echo_pkg)
    r = wmd.invoke(w["id"], "echo", data={"n": 1}, correlationid="c-1")
    assert r.status == 200, (r, wmd.log()[-3000:])
    out = r.json
    assert out["type"] == "echo.out" and out["source"] == "dotnet/echo"
    assert out["data"] == {"n": 1}
    assert out["correlationid"] == "c-1"
    assert out["version"] == "v1"


def test_no_correlation_id_without_one(wmd, echo_pkg):
    """Spec: Input without correlation ID."""
    w = create(wmd, echo_pkg)
    r = wmd.invoke(w["id"], "echo", data={"n": 2})
    assert r.status == 200, r
    assert "correlationid" not in r.json
    assert wmd.invoke(w["id"], "none").status == 204


def test_per_worker_collectible_context(wmd, echo_pkg):
    """Spec: Per-worker AssemblyLoadContext; DevKit resolution."""
    w = create(wmd, echo_pkg)
    r = wmd.invoke(w["id"], "context")
    assert r.status == 200, r
    assert r.json["data"] == {"context": "worker", "collectible": True,
                              "devkit_shared": True}


def test_exception_is_a_worker_error(wmd, echo_pkg):
    w = create(wmd, echo_pkg)
    r = wmd.invoke(w["id"], "throw")
    assert r.status == 422 and r.code == "worker_error", r
    assert "asked to throw" in r.json["error"]["message"]
    assert wmd.invoke(w["id"], "echo").status == 200
    assert wmd.get(f"/v1/workers/{w['id']}").json["restarts"] == 0
