"""CommandWorker<T> and ApiCommandWorker<T> of the .NET DevKit on a real
workmanagerd (issue 10; spec: Generic CommandWorker Base Class, Correlation
ID Propagation): samples in tests/workers/dotnet/command and apicommand,
built here with the installed SDK, offline.  An error response is the
worker's response type with data {"error": <the spec's text>}.
"""

import pytest

from dotnet_lib import MIME, build_worker, daemon, need_dotnet, nupkg
from wm import b64


@pytest.fixture(scope="module")
def command_pkg(wm_builddir, tmp_path_factory):
    need_dotnet(wm_builddir)
    folder, _ = build_worker(wm_builddir, "command",
                             tmp_path_factory.mktemp("command"))
    return nupkg(folder)


pytestmark = pytest.mark.wmd(
    make=daemon, restart_base_delay_ms=20, restart_max_delay_ms=100,
    shutdown_grace_ms=1000)


def create(d, package):
    r = d.post("/v1/workers", {"mime_type": MIME, "topic": "n",
                               "code": {"content": b64(package)}})
    assert r.status == 201, (r, d.log()[-3000:])
    return r.json["id"]


def send(d, w, data, **ext):
    ev = {"specversion": "1.0", "id": "e1", "source": "test",
          "type": "command"}
    ev.update(ext)
    if isinstance(data, bytes):
        ev["data_base64"] = b64(data)
        ev["datacontenttype"] = "application/json"
    else:
        ev["data"] = data
    r = d.post(f"/v1/workers/{w}/invoke", ev)
    assert r.status == 200, r
    return r.json


def test_generic_dispatch_and_wire_names(wmd, command_pkg):
    """Spec: Generic dispatch on valid command; Wire name == identifier
    (lowercase)."""
    w = create(wmd, command_pkg)
    out = send(wmd, w, {"command": "create", "name": "s1"})
    assert out["type"] == "session.result" and out["source"] == \
        "dotnet/session"
    assert out["data"] == {"created": "s1", "command": "create"}
    # Enum.TryParse(ignoreCase: true)
    assert send(wmd, w, {"command": "CLOSE"})["data"] == {"closed": True}


@pytest.mark.parametrize("data,want", [
    ({"command": "destroy"}, "Unknown command: destroy"),
    ({"command": "1"}, "Unknown command: 1"),
    ({"name": "x"}, "Missing 'command' field"),
    (b"{not json", "Failed to parse command JSON"),
    (b"null", "Failed to parse command JSON"),
], ids=["unknown", "number", "missing", "malformed", "null"])
def test_error_texts(wmd, command_pkg, data, want):
    """Spec: Unknown command; Missing command field; Malformed JSON."""
    w = create(wmd, command_pkg)
    out = send(wmd, w, data)
    assert out["data"] == {"error": want}, out


def test_correlation_id_on_responses_and_errors(wmd, command_pkg):
    """Spec: Correlation ID propagation (Response and Error), and none
    without one."""
    w = create(wmd, command_pkg)
    out = send(wmd, w, {"command": "create", "name": "a"},
               correlationid="c-9")
    assert out["correlationid"] == "c-9"
    out = send(wmd, w, {"command": "nope"}, correlationid="c-10")
    assert out["correlationid"] == "c-10"
    assert out["data"] == {"error": "Unknown command: nope"}
    out = send(wmd, w, {"command": "create", "name": "b"})
    assert "correlationid" not in out


def test_api_command_worker_gateway(wm_builddir, wmd, tmp_path):
    """Spec: Generic ApiCommandWorker (api_host/api_port reconfigure the
    client, port 5002 by default); Backend invocation via dynamic
    gateway."""
    folder, _ = build_worker(wm_builddir, "apicommand", tmp_path / "api")
    w = create(wmd, nupkg(folder))
    out = send(wmd, w, {"command": "put", "key": "k1", "value": {"n": 3},
                        "api_host": "gw.example"})
    assert out["data"] == {"stored": True, "host": "gw.example",
                           "port": 5002}, out
    out = send(wmd, w, {"command": "get", "key": "k1"})
    assert out["data"] == {"value": {"n": 3}}, out


def test_unhandled_enum_value_warns_cs8509(wm_builddir, tmp_path):
    """Spec: New enum value triggers compiler warning on the switch."""
    need_dotnet(wm_builddir)
    _, log = build_worker(wm_builddir, "command", tmp_path / "cs8509",
                          replace={"    close,\n": "    close,\n    status,\n"})
    assert "warning CS8509" in log, log
    assert "SessionCommand.status" in log, log
