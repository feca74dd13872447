"""tests/integration/test_cloudevents_sdk.py — the CloudEvents HTTP binding
(issue 25), driven by the official CloudEvents JavaScript SDK as an
independent client (cloudevents-js/: the SDK pinned in its package.json
and package-lock.json, and client.mjs, which makes each request with the
SDK and parses each reply with it, so a reply the SDK cannot read fails).

The SDK is installed once per build tree with `npm ci` under
$WM_BUILDDIR/tests/cloudevents-js; a machine without node, or whose npm
cannot reach the registry, skips (tests/expected-skips lists why).
Binary mode's required attributes are checked with plain requests.
"""

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from wm import Stream

HERE = Path(__file__).resolve().parent / "cloudevents-js"


@pytest.fixture(scope="module")
def sdk(wm_builddir):
    """The directory of client.mjs with the SDK installed beside it."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("npm registry unreachable: node and npm are not "
                    "installed")
    dest = Path(wm_builddir) / "tests" / "cloudevents-js"
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json", "client.mjs"):
        shutil.copyfile(HERE / name, dest / name)
    if not (dest / "node_modules" / "cloudevents").is_dir():
        p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"],
                           cwd=dest, capture_output=True, text=True,
                           timeout=300)
        if p.returncode != 0:
            if any(w in p.stderr for w in ("ENOTFOUND", "EAI_AGAIN",
                                           "ECONNREFUSED", "ETIMEDOUT",
                                           "ENETUNREACH")):
                pytest.skip("npm registry unreachable: " +
                            p.stderr.strip().splitlines()[-1])
            pytest.fail(f"npm ci failed: {p.stderr}")
    return dest


def sdk_send(sdk, wmd, path, mode, *events):
    spec = {"socket": str(wmd.socket), "path": path, "mode": mode,
            "events": list(events)}
    p = subprocess.run(["node", str(sdk / "client.mjs")],
                       input=json.dumps(spec), capture_output=True,
                       text=True, timeout=60,
                       env={"PATH": os.environ["PATH"]})
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["error"] is None, out
    return out


def ev(type_="echo", **attrs):
    e = {"specversion": "1.0", "id": f"sdk-{type_}", "source": "/sdk",
         "type": type_}
    e.update(attrs)
    return e


def test_invoke_structured_reply_is_a_cloudevent(wmd, sdk):
    w = wmd.create(topic="sdk")
    out = sdk_send(sdk, wmd, f"/v1/workers/{w['id']}/invoke", "structured",
                   ev(data={"n": 1}, correlationid="corr-1", myext="v 1"))
    assert out["status"] == 200, out
    assert out["headers"]["content-type"] == "application/cloudevents+json"
    (got,) = out["events"]
    assert got["type"] == "echo.out" and got["data"] == {"n": 1}
    assert got["correlationid"] == "corr-1" and got["myext"] == "v 1"


def test_invoke_binary_json_and_extensions(wmd, sdk):
    w = wmd.create(topic="sdk")
    out = sdk_send(sdk, wmd, f"/v1/workers/{w['id']}/invoke", "binary",
                   ev(data={"a": [1, 2]}, correlationid="corr-2", n1="42",
                      headers={"ce-accent": "caf%C3%A9 %22q%22"}))
    assert out["status"] == 200, out
    h = out["headers"]
    assert h["ce-type"] == "echo.out" and h["ce-id"]
    assert h["content-type"].startswith("application/json")
    # The binding's header encoding: non-ASCII, space and '"' as %XX.
    assert h["ce-accent"] == "caf%C3%A9%20%22q%22", h
    (got,) = out["events"]
    assert got["data"] == {"a": [1, 2]}
    assert got["correlationid"] == "corr-2" and got["n1"] == "42"


def test_invoke_binary_bytes_round_trip(wmd, sdk):
    w = wmd.create(topic="sdk")
    raw = bytes(range(256))
    out = sdk_send(sdk, wmd, f"/v1/workers/{w['id']}/invoke", "binary",
                   ev(datacontenttype="application/octet-stream",
                      data_bytes=base64.b64encode(raw).decode()))
    assert out["status"] == 200, out
    assert out["headers"]["content-type"] == "application/octet-stream"
    assert "ce-datacontenttype" not in out["headers"]
    (got,) = out["events"]
    assert base64.b64decode(got["data_bytes"]) == raw
    assert got["datacontenttype"] == "application/octet-stream"
    # A text body that is not JSON.
    out = sdk_send(sdk, wmd, f"/v1/workers/{w['id']}/invoke", "binary",
                   ev(datacontenttype="text/plain", data="hello, wörld"))
    assert out["headers"]["content-type"] == "text/plain"
    assert out["events"][0]["data"] == "hello, wörld"


def test_invoke_structured_binary_data_is_data_base64(wmd, sdk):
    w = wmd.create(topic="sdk")
    raw = b"\x00\x01\xfe\xff"
    out = sdk_send(sdk, wmd, f"/v1/workers/{w['id']}/invoke", "structured",
                   ev(datacontenttype="application/octet-stream",
                      data_bytes=base64.b64encode(raw).decode()))
    assert out["status"] == 200, out
    assert json.loads(out["body"])["data_base64"] == \
        base64.b64encode(raw).decode()
    assert base64.b64decode(out["events"][0]["data_bytes"]) == raw


def test_invoke_batch_and_several_outputs(wmd, sdk):
    w = wmd.create(topic="sdk")
    path = f"/v1/workers/{w['id']}/invoke"
    out = sdk_send(sdk, wmd, path, "batch", ev(id="b1", data=1),
                   ev(id="b2", data=2, correlationid="c2"))
    assert out["status"] == 200, out
    assert out["headers"]["content-type"] == \
        "application/cloudevents-batch+json"
    assert [e["data"] for e in out["events"]] == [1, 2]
    assert out["events"][1]["correlationid"] == "c2"
    # Several outputs of one structured event: a batch too.
    out = sdk_send(sdk, wmd, path, "structured", ev(do="many:3"))
    assert out["headers"]["content-type"] == \
        "application/cloudevents-batch+json"
    assert len(out["events"]) == 3
    # No output: 204.
    out = sdk_send(sdk, wmd, path, "binary", ev(do="many:0"))
    assert out["status"] == 204 and out["body"] == "", out


def test_invoke_worker_error_stays_422(wmd, sdk):
    w = wmd.create(topic="sdk")
    path = f"/v1/workers/{w['id']}/invoke"
    for mode in ("binary", "structured"):
        out = sdk_send(sdk, wmd, path, mode, ev("fail"))
        assert out["status"] == 422, out
        err = json.loads(out["body"])["error"]
        assert err["code"] == "worker_error"
        assert err["exception_type"] == "TestError"
    out = sdk_send(sdk, wmd, path, "batch", ev(id="ok"), ev("fail", id="x"))
    err = json.loads(out["body"])["error"]
    assert out["status"] == 422 and err["index"] == 1, out


def test_publish_every_mode(wmd, sdk):
    wmd.create(topic="pub")
    stream = Stream(wmd, "echo.out")  # an output's topic is its type
    path = "/v1/topics/pub/events"
    for mode, ids in (("binary", ["p-bin"]), ("structured", ["p-str"]),
                      ("batch", ["p-b1", "p-b2"])):
        out = sdk_send(sdk, wmd, path, mode,
                       *[ev(id=i, data={"i": i}, correlationid="k-" + i,
                            myext="x") for i in ids])
        assert out["status"] == 202 and json.loads(out["body"])["ids"] == \
            ids, out
    got = {e["data"]["i"]: e for e in stream.wait(4)}
    assert sorted(got) == ["p-b1", "p-b2", "p-bin", "p-str"]
    for i, e in got.items():
        assert e["correlationid"] == "k-" + i and e["myext"] == "x", e
    stream.close()


@pytest.mark.parametrize("missing", ["ce-specversion", "ce-id"])
def test_binary_mode_requires_every_attribute(wmd, missing):
    w = wmd.create(topic="req")
    headers = {"Content-Type": "application/json", "ce-specversion": "1.0",
               "ce-id": "r1", "ce-source": "s", "ce-type": "echo"}
    del headers[missing]
    for path in ("/v1/topics/req/events", f"/v1/workers/{w['id']}/invoke"):
        r = wmd.request("POST", path, raw=b"{}", headers=headers)
        assert r.status == 400 and r.code == "invalid_argument", r
        assert f'"{missing[3:]}" is required' in \
            r.json["error"]["message"], r
        assert missing in r.json["error"]["message"], r
