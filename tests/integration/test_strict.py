"""Strict input on a real workmanagerd (issue 27, section 2).

Every JSON object the admin API takes refuses a member it does not know
with 400 invalid_argument naming each one by its path, the closest known
name and the object's members, instead of ignoring it; CloudEvents keep
their unknown attributes (extensions).  Messages say what to do: a
structured event sent as application/json, an invalid topic, and in wmctl
a missing FILE, a TCP call without a token, `wmctl help CMD` and the
closest command to a typo.

The worker is the protocol test host (tests/testhost, engine
application/x-wm-test) with the code "echo".
"""

import json
import socket
import subprocess

import pytest

from wm import Daemon, b64, event, metric, publish

pytestmark = pytest.mark.wmd(options={"shutdown_grace_ms": 1000})

MIME = "application/x-wm-test"


def body(**extra):
    b = {"mime_type": MIME, "topic": "t", "code": {"content": b64("echo")}}
    b.update(extra)
    return b


def refused(r, *paths):
    """r is a 400 invalid_argument naming exactly paths as unknown."""
    assert r.status == 400, r
    err = r.json["error"]
    assert err["code"] == "invalid_argument", r
    assert err["unknown_members"] == list(paths), r
    for p in paths:
        assert f'"{p}"' in err["message"], r
    return err["message"]


# ---- workers ------------------------------------------------------------


def test_create_refuses_an_unknown_member(wmd):
    msg = refused(wmd.post("/v1/workers", body(nmae="w1")), "nmae")
    assert "did you mean name?" in msg, msg
    assert "the members of a worker are mime_type, topic, code, name" in msg
    assert wmd.get("/v1/workers").json == {"workers": []}


def test_create_refuses_unknown_nested_members(wmd):
    msg = refused(wmd.post("/v1/workers", body(limits={"timeout": 5})),
                  "limits.timeout")
    assert "did you mean timeout_ms?" in msg, msg
    assert "the members of limits are timeout_ms, memory_mb, concurrency" \
        in msg, msg
    msg = refused(wmd.post("/v1/workers", body(
        code={"contents": b64("echo")})), "code.contents")
    assert "did you mean content?" in msg, msg
    # The old rule of code stays: no credentials in a request.
    msg = refused(wmd.post("/v1/workers", body(
        code={"url": "https://example.org/w.py",
              "credentials": {"bearer": "x"}})), "code.credentials")
    assert "code_source_credentials_file" in msg, msg
    assert wmd.get("/v1/workers").json == {"workers": []}


def test_create_names_every_unknown_member_at_once(wmd):
    b = body(nmae="w1", colour="red", limits={"timeout": 5, "concurrency": 2})
    b["code"]["sha"] = "00"
    msg = refused(wmd.post("/v1/workers", b), "nmae", "colour",
                  "code.sha", "limits.timeout")
    assert msg.startswith('unknown members "nmae" (did you mean name?), '
                          '"colour": '), msg
    assert 'unknown member "code.sha" (did you mean sha256?)' in msg, msg


def test_maps_keep_their_keys(wmd):
    """config and tags are the client's maps, not objects with members."""
    w = wmd.create(config={"anyext": "1"}, tags={"nmae": "x"},
                   limits={"timeout_ms": 2000})
    assert w["config"] == {"anyext": "1"}
    assert w["tags"] == {"nmae": "x"}


def test_reload_rollback_tags_refuse_unknown_members(wmd):
    w = wmd.create(name="w1")
    r = wmd.put("/v1/workers/w1/code", {"code": {"content": b64("echo")},
                                        "version": 2})
    msg = refused(r, "version")
    assert "the members of a reload are code" in msg, msg
    r = wmd.put("/v1/workers/w1/code", {"code": {"content": b64("echo"),
                                                 "url": "x", "sha265": "0"}})
    assert "did you mean sha256?" in refused(r, "code.sha265")
    r = wmd.post("/v1/workers/w1/rollback", {"verison": 1})
    assert "did you mean version?" in refused(r, "verison")
    r = wmd.put("/v1/workers/w1/tags", {"tags": {"a": "b"}, "replace": True})
    assert "the members of a tags change are tags" in refused(r, "replace")
    # Nothing changed.
    got = wmd.get("/v1/workers/w1").json
    assert got["version"] == 1 and got["tags"] == {}
    assert wmd.put("/v1/workers/w1/tags", {"tags": {"a": "b"}}).status == 200
    assert w["id"] == got["id"]


@pytest.mark.parametrize("action", ["stop", "start", "suspend", "resume"])
def test_status_changes_take_no_members(wmd, action):
    wmd.create(name="w1")
    msg = refused(wmd.post(f"/v1/workers/w1/{action}", {"force": True}),
                  "force")
    assert f"{action} takes no members" in msg, msg
    r = wmd.post("/v1/workers/w1/suspend", raw=b"not json")
    assert r.status == 400 and r.code == "invalid_json", r
    assert wmd.get("/v1/workers/w1").json["status"] == "running"
    # No body, or an empty object, is the request as before.
    assert wmd.post("/v1/workers/w1/stop", {}).status == 200
    assert wmd.post("/v1/workers/w1/start").status == 200


def test_recover_takes_no_members(wmd):
    refused(wmd.post("/v1/recover", {"workers": ["w1"]}), "workers")
    assert wmd.post("/v1/recover").status == 200


def test_cloudevents_keep_their_extensions(wmd):
    """A CloudEvent's unknown attributes are extensions, not typos."""
    wmd.create(name="w1")
    r = wmd.post("/v1/workers/w1/invoke", event("x", myext="kept"))
    assert r.status == 200, r
    assert publish(wmd, "t", event("y", otherext="1")).status == 202


def test_event_bodies_take_the_scanner_then_jansson(wmd):
    """Structured and batched bodies are read by the scanner (issue 24);
    what it leaves goes to the jansson path, which keeps every answer."""
    def bodies(**labels):
        return metric(wmd, "workmanager_event_bodies_total", **labels)

    def post(raw, ct="application/cloudevents+json"):
        return wmd.request("POST", "/v1/topics/t/events", raw=raw,
                           headers={"Content-Type": ct})

    wmd.create(name="w1")
    scanned = bodies(reader="scanner")
    r = wmd.post("/v1/workers/w1/invoke",
                 event("x", data={"p": 19.99, "s": "caf\u00e9"}, ext="1"))
    assert r.status == 200, r
    assert r.json["data"] == {"p": 19.99, "s": "caf\u00e9"}, r
    assert post(b' { "type" : "t", "source" : "s\\/x" } ').status == 202
    assert post(b'[{"type":"t","source":"s"}]',
                "application/cloudevents-batch+json").status == 202
    assert bodies(reader="scanner") == scanned + 3
    # A repeated member: a single event is refused as before, a batch
    # keeps the last value, by the jansson path.
    invalid = bodies(reader="jansson", cause="invalid")
    r = post(b'{"type":"t","source":"s","type":"u"}')
    assert r.status == 400 and r.code == "invalid_json", r
    assert "duplicate object key" in r.json["error"]["message"], r
    assert bodies(reader="jansson", cause="invalid") == invalid + 1
    unusual = bodies(reader="jansson", cause="unusual")
    assert post(b'[{"type":"t","source":"s","type":"u"}]',
                "application/cloudevents-batch+json").status == 202
    assert bodies(reader="jansson", cause="unusual") == unusual + 1



def test_event_answers_take_the_writer_then_jansson(wmd):
    """An invoke's answer is written straight from the outputs' buffers
    (issue 24); data of a shape the writer leaves (a real of 17 significant
    digits) goes to the jansson path, which writes the same bytes."""
    def answers(writer):
        return metric(wmd, "workmanager_event_answers_total", writer=writer)

    wmd.create(name="w1")
    direct, jansson = answers("direct"), answers("jansson")
    r = wmd.post("/v1/workers/w1/invoke",
                 event("x", data={"p": 19.99, "s": "caf\u00e9"}, ext="1"))
    assert r.status == 200, r
    assert r.json["data"] == {"p": 19.99, "s": "caf\u00e9"}, r
    assert r.json["ext"] == "1", r
    assert answers("direct") == direct + 1
    assert answers("jansson") == jansson
    r = wmd.post("/v1/workers/w1/invoke",
                 event("y", data=[0.12345678901234567]))
    assert r.status == 200, r
    assert r.json["data"] == [0.12345678901234567], r
    assert answers("jansson") == jansson + 1


# ---- messages that say what to do ---------------------------------------


def test_invalid_topic_says_invalid(wmd):
    r = wmd.post("/v1/workers", body(topic="no spaces"))
    assert r.status == 400, r
    msg = r.json["error"]["message"]
    assert msg == ('topic "no spaces" is invalid: a topic is 1 to 128 of '
                   '[A-Za-z0-9_.-]'), msg
    b = body()
    del b["topic"]
    msg = wmd.post("/v1/workers", b).json["error"]["message"]
    assert msg.startswith("topic is required"), msg
    r = publish(wmd, "bad%21topic", event("x"))
    assert r.status == 400, r
    assert 'topic "bad!topic" is invalid: a topic is 1 to 128 of' in \
        r.json["error"]["message"], r


def test_structured_event_as_application_json(wmd):
    raw = json.dumps(event("x")).encode()
    r = wmd.request("POST", "/v1/topics/t/events", raw=raw,
                    headers={"Content-Type": "application/json"})
    assert r.status == 400 and r.code == "invalid_argument", r
    msg = r.json["error"]["message"]
    assert "structured CloudEvent sent as Content-Type application/json" \
        in msg, msg
    assert "send it as application/cloudevents+json" in msg, msg
    assert "ce-specversion, ce-id, ce-source and ce-type headers" in msg, msg
    raw = json.dumps([event("x"), event("y")]).encode()
    r = wmd.request("POST", "/v1/topics/t/events", raw=raw,
                    headers={"Content-Type": "application/json"})
    assert "send it as application/cloudevents-batch+json" in \
        r.json["error"]["message"], r
    # Binary mode with no ce-* header at all says what it needs.
    r = wmd.request("POST", "/v1/topics/t/events", raw=b"hello",
                    headers={"Content-Type": "text/plain"})
    msg = r.json["error"]["message"]
    assert msg.startswith("binary mode (Content-Type text/plain) needs the "
                          "event's attributes in ce-* headers"), msg
    # With ce-* headers, the missing attribute is named as before.
    r = wmd.request("POST", "/v1/topics/t/events", raw=b"hello",
                    headers={"Content-Type": "text/plain",
                             "ce-specversion": "1.0", "ce-source": "s"})
    msg = r.json["error"]["message"]
    assert r.status == 400 and "type" in msg and "none was sent" not in msg, r


# ---- wmctl ---------------------------------------------------------------


@pytest.fixture
def wmctl_bin(wm_built):
    return str(wm_built("cli/wmctl"))


def run(wmctl_bin, *args, expect=0, socket=None):
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    if socket:
        env["WM_SOCKET"] = str(socket)
    p = subprocess.run([wmctl_bin, *map(str, args)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == expect, (args, p.returncode, p.stdout, p.stderr)
    return p


def test_wmctl_help_command(wmctl_bin):
    p = run(wmctl_bin, "help", "rollback")
    assert p.stdout.splitlines()[0] == "usage: wmctl rollback WORKER VERSION"
    assert "Commands:" not in p.stdout
    assert run(wmctl_bin, "help", "create").stdout.startswith(
        "usage: wmctl create (FILE | --url URL")
    # The whole usage without a command, as before.
    assert "Commands:" in run(wmctl_bin, "help").stdout
    p = run(wmctl_bin, "help", "rolback", expect=2)
    assert p.stderr.startswith(
        "wmctl: unknown command rolback (did you mean rollback?)\n"), p.stderr


@pytest.mark.parametrize("typo,meant", [("lsit", "list"), ("creat", "create"),
                                        ("histroy", "history"),
                                        ("subcribe", "subscribe")])
def test_wmctl_unknown_command_suggests_the_closest(wmctl_bin, typo, meant):
    p = run(wmctl_bin, typo, expect=2)
    assert p.stderr == (f"wmctl: unknown command {typo} (did you mean "
                        f"{meant}?)\nTry 'wmctl help'.\n"), p.stderr
    p = run(wmctl_bin, "frobnicate", expect=2)
    assert p.stderr == ("wmctl: unknown command frobnicate\n"
                        "Try 'wmctl help'.\n"), p.stderr


def test_wmctl_names_the_missing_file(wmctl_bin, tmp_path):
    p = run(wmctl_bin, "create", "--topic", "t", expect=2)
    assert p.stderr.startswith("wmctl: the code is missing: give FILE"), \
        p.stderr
    p = run(wmctl_bin, "create", tmp_path / "nope.py", "--topic", "t",
            expect=2)
    assert p.stderr.startswith(f"wmctl: FILE {tmp_path}/nope.py: No such "
                               "file"), p.stderr
    p = run(wmctl_bin, "reload", "w1", expect=2)
    assert p.stderr.startswith("wmctl: the code is missing: give FILE"), \
        p.stderr


def test_wmctl_tcp_without_token_hints_at_token_file(wmctl_bin, wm_builddir,
                                                     tmp_path):
    (tmp_path / "token").write_text("0123456789abcdef-token\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = Daemon(wm_builddir, tmp_path, options={"listen": f"127.0.0.1:{port}"})
    d.start()
    try:
        url = f"http://127.0.0.1:{port}"
        p = run(wmctl_bin, "--url", url, "list", expect=1)
        assert p.stderr.startswith("wmctl: unauthorized: "), p.stderr
        assert ("wmctl: hint: over TCP the daemon takes a bearer token: give "
                "--token-file FILE (the daemon's token_file) or set "
                "WM_TOKEN_FILE\n") in p.stderr, p.stderr
        wrong = tmp_path / "wrong"
        wrong.write_text("not-the-right-token\n")
        p = run(wmctl_bin, "--url", url, "--token-file", wrong, "health",
                expect=1)
        assert f"the daemon refused the token of {wrong}" in p.stderr, \
            p.stderr
        # Over the control socket no token is asked for: no hint.
        p = run(wmctl_bin, "show", "nope", expect=1, socket=d.socket)
        assert "hint" not in p.stderr, p.stderr
    finally:
        assert d.stop() == 0, d.log()
