"""wmctl(1) against a real workmanagerd: every command, its readable and
--json output, and its exit codes (0 ok, 1 the daemon's error, 2 usage,
3 unreachable), over the control socket and over TCP with a bearer token.

The worker is the protocol test host (tests/testhost, engine
application/x-wm-test) with the code "echo": an event comes back as
<type>.out, and `do=fail` makes it fail.
"""

import json
import socket
import subprocess

import pytest

from wm import Daemon, metric


@pytest.fixture
def wmctl_bin(wm_built):
    return str(wm_built("cli/wmctl"))


class Wmctl:
    def __init__(self, binary, daemon):
        self.binary = binary
        self.daemon = daemon

    def env(self):
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        if self.daemon is not None:
            env["WM_SOCKET"] = str(self.daemon.socket)
        return env

    def __call__(self, *args, expect=0):
        p = subprocess.run([self.binary, *map(str, args)], env=self.env(),
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == expect, (args, p.returncode, p.stdout,
                                        p.stderr)
        return p

    def json(self, *args):
        return json.loads(self("--json", *args).stdout)

    def popen(self, *args):
        return subprocess.Popen([self.binary, *map(str, args)],
                                env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


@pytest.fixture
def wmctl(wmctl_bin, wmd):
    return Wmctl(wmctl_bin, wmd)


def code_file(tmp_path, text="echo"):
    f = tmp_path / "worker.code"
    f.write_text(text)
    return f


def create(wmctl, tmp_path, *extra, name="w1"):
    return wmctl("create", code_file(tmp_path),
                 "--mime-type", "application/x-wm-test", "--topic", "orders",
                 "--name", name, *extra)


def fields(text):
    """The `key: value` lines of a readable answer."""
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(": ")
        out[k] = v
    return out


def table(text):
    """The rows of a readable table as dicts by header."""
    lines = text.splitlines()
    header = lines[0].split()
    return [dict(zip(header, l.split(None, len(header) - 1)))
            for l in lines[1:]]


# ---- workers ------------------------------------------------------------


def test_create_list_show(wmctl, wmd, tmp_path):
    p = create(wmctl, tmp_path, "--group", "g1", "--config", "region=eu",
               "--tag", "team=a", "--tag", "env=test", "--no-start",
               "--timeout-ms", "2000", "--memory-mb", "64", "--concurrency",
               "2", "--idle-timeout-s", "30", "--isolation", "process")
    w = fields(p.stdout)
    assert w["name"] == "w1" and w["status"] == "stopped", p.stdout
    assert len(w["id"]) == 36

    rows = table(wmctl("list").stdout)
    assert rows == [{"NAME": "w1", "ID": w["id"], "TENANT": "default",
                     "TOPIC": "orders", "GROUP": "g1", "STATUS": "stopped",
                     "STATE": "idle", "VERSION": "1", "RESTARTS": "0",
                     "FAILED": "0", "LAST_ERROR": "-"}]
    listed = wmctl.json("list")["workers"]
    assert [x["id"] for x in listed] == [w["id"]]
    assert listed[0]["config"] == {"region": "eu"}
    assert listed[0]["tags"] == {"team": "a", "env": "test"}
    assert listed[0]["limits"] == {"timeout_ms": 2000, "memory_mb": 64,
                                   "concurrency": 2}
    assert listed[0]["idle_timeout_s"] == 30
    assert listed[0]["isolation"] == "process"

    by_name = wmctl.json("show", "w1")
    by_id = wmctl.json("show", w["id"])
    assert by_name["id"] == by_id["id"] == w["id"]
    assert by_id["group"] == "g1" and by_id["mime_type"] == \
        "application/x-wm-test"
    shown = fields(wmctl("show", "w1").stdout)
    assert shown["topic"] == "orders" and shown["tags"] == \
        "team=a, env=test"


def test_create_needs_topic_and_mime_type(wmctl, tmp_path):
    p = wmctl("create", code_file(tmp_path), "--mime-type",
              "application/x-wm-test", expect=2)
    assert "--topic is required" in p.stderr
    p = wmctl("create", code_file(tmp_path), "--topic", "t", expect=2)
    assert "--mime-type" in p.stderr
    p = wmctl("create", code_file(tmp_path), "--topic", "t", "--mime-type",
              "application/x-wm-test", "--memory-mb", "lots", expect=2)
    assert "--memory-mb lots: expected" in p.stderr
    p = wmctl("create", "--sha256", "00" * 32, "--topic", "t",
              "--mime-type", "application/x-wm-test", expect=2)
    assert "--sha256 goes with --url" in p.stderr
    # code.url goes to the daemon as it is, which refuses http by default
    # (the fetches themselves: test_url_sources.py).
    p = wmctl("create", "--url", "http://example.org/w.zip", "--sha256",
              "00" * 32, "--mime-type", "application/x-wm-test", "--topic",
              "t", expect=1)
    assert p.stderr.startswith("wmctl: security_rejected: code.url"), \
        p.stderr
    # By extension: .py is Python, which this daemon does not know.
    py = tmp_path / "w.py"
    py.write_text("pass\n")
    p = wmctl("create", py, "--topic", "t", expect=1)
    assert "text/x-python" in p.stderr


def test_status_changes(wmctl, tmp_path):
    create(wmctl, tmp_path, "--no-start")
    for cmd, status in (("start", "running"), ("suspend", "suspended"),
                        ("resume", "running"), ("stop", "stopped")):
        p = wmctl(cmd, "w1")
        assert fields(p.stdout)["status"] == status, (cmd, p.stdout)
        assert wmctl.json("show", "w1")["status"] == status
    p = wmctl("resume", "w1", expect=1)
    assert p.stderr.startswith("wmctl: conflict: "), p.stderr


def test_reload_history_rollback(wmctl, tmp_path):
    create(wmctl, tmp_path)
    new = tmp_path / "v2.code"
    new.write_text("echo\n# v2\n")
    p = wmctl("reload", "w1", new)
    assert fields(p.stdout)["version"] == "2"

    rows = table(wmctl("history", "w1").stdout)
    assert [r["VERSION"] for r in rows] == ["1", "*2"]
    assert rows[0]["SIZE"] == "4" and rows[0]["SOURCE"] == "content"
    assert len(rows[1]["SHA256"]) == 64

    p = wmctl("rollback", "w1", 1)
    assert fields(p.stdout)["version"] == "3"
    h = wmctl.json("history", "w1")
    assert h["current"] == 3
    assert [v["version"] for v in h["versions"]] == [1, 2, 3]
    assert h["versions"][2]["rollback_of"] == 1
    assert h["versions"][2]["sha256"] == h["versions"][0]["sha256"]
    assert "rollback to 1" in wmctl("history", "w1").stdout

    p = wmctl("rollback", "w1", 9, expect=1)
    assert p.stderr.startswith("wmctl: invalid_argument: "), p.stderr
    wmctl("rollback", "w1", "x", expect=2)


def test_tags(wmctl, tmp_path):
    create(wmctl, tmp_path, "--tag", "team=a")
    assert wmctl("tags", "w1").stdout == "team: a\n"
    p = wmctl("tags", "w1", "team=b", "env=prod")
    assert fields(p.stdout) == {"team": "b", "env": "prod"}
    assert wmctl.json("tags", "w1") == {"tags": {"team": "b",
                                                 "env": "prod"}}
    assert wmctl.json("show", "w1")["tags"] == {"team": "b", "env": "prod"}
    wmctl("tags", "w1", "novalue", expect=2)


def test_invoke(wmctl, tmp_path):
    create(wmctl, tmp_path)
    out = json.loads(wmctl("invoke", "w1", "--type", "order.created",
                           "--data", '{"n": 1}').stdout)
    assert out["type"] == "order.created.out"
    assert out["data"] == {"n": 1}
    assert out["source"] == "wmctl" and len(out["id"]) == 36
    data = tmp_path / "data.json"
    data.write_text('[1, 2]')
    out = json.loads(wmctl("invoke", "w1", "--data-file", data).stdout)
    assert out["type"] == "wmctl.invoke.out" and out["data"] == [1, 2]

    p = wmctl("invoke", "w1", "--ext", "do=fail", expect=1)
    assert p.stderr.startswith("wmctl: worker_error: test failure for "
                               "event "), p.stderr
    assert p.stdout == ""
    p = wmctl("invoke", "w1", "--data", "{not json", expect=2)
    assert "--data: not JSON" in p.stderr


def test_delete(wmctl, tmp_path):
    create(wmctl, tmp_path)
    assert wmctl("delete", "w1").stdout == "deleted w1\n"
    p = wmctl("show", "w1", expect=1)
    assert p.stderr == "wmctl: not_found: no worker w1\n"
    assert table(wmctl("list").stdout) == []
    assert wmctl.json("list") == {"workers": []}


# ---- topics -------------------------------------------------------------


def subscriber(wmctl, wmd, topic, count):
    """wmctl subscribe, started and connected (its stream is open)."""
    before = metric(wmd, "workmanager_event_streams")
    p = wmctl.popen("subscribe", topic, "--count", count)
    wmd.wait_for(lambda: p.poll() is not None or
                 metric(wmd, "workmanager_event_streams") > before,
                 what="the subscriber")
    assert p.poll() is None, p.communicate()
    return p


def test_publish_and_subscribe(wmctl, wmd, tmp_path):
    sub = subscriber(wmctl, wmd, "news", 3)
    p = wmctl("publish", "news", "--type", "n.one", "--id", "one",
              "--data", '{"k": "v"}', "--ext", "region=eu")
    assert p.stdout == "one\n"
    batch = tmp_path / "events.json"
    batch.write_text(json.dumps([
        {"specversion": "1.0", "id": f"b{i}", "source": "t", "type": "n.b"}
        for i in (1, 2)]))
    p = wmctl("publish", "news", "--file", batch)
    assert p.stdout == "b1\nb2\n"
    out, err = sub.communicate(timeout=30)
    assert sub.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["id"] for e in events] == ["one", "b1", "b2"]
    assert events[0]["data"] == {"k": "v"}
    assert events[0]["region"] == "eu" and events[0]["source"] == "wmctl"

    single = tmp_path / "one.json"
    single.write_text(json.dumps({"specversion": "1.0", "id": "s1",
                                  "source": "t", "type": "n.s"}))
    assert wmctl.json("publish", "news", "--file", single) == \
        {"ids": ["s1"]}
    ids = wmctl("publish", "news").stdout.split()
    assert len(ids) == 1 and len(ids[0]) == 36
    p = wmctl("publish", "workmanager.x", expect=1)
    assert p.stderr.startswith("wmctl: invalid_argument: ")
    wmctl("publish", "news", "--file", batch, "--type", "x", expect=2)


def test_subscribe_ends_on_sigterm(wmctl, wmd):
    sub = subscriber(wmctl, wmd, "quiet", 5)
    sub.terminate()
    out, err = sub.communicate(timeout=10)
    assert sub.returncode == 0, err
    assert out == ""


# ---- the daemon ---------------------------------------------------------


def test_engines_health_recover(wmctl):
    rows = table(wmctl("engines").stdout)
    test = [r for r in rows if r["NAME"] == "test"]
    assert test and test[0]["MIME_TYPES"] == "application/x-wm-test"
    assert test[0]["AVAILABLE"] == "yes"
    assert test[0]["WARM"] == "0/0"
    names = [e["name"] for e in wmctl.json("engines")["engines"]]
    assert "test" in names

    p = wmctl("health")
    assert fields(p.stdout)["status"] == "Healthy"
    assert fields(p.stdout)["checks"].startswith("recovery={status=Healthy")
    assert wmctl.json("health")["status"] == "Healthy"

    p = wmctl("recover")
    assert fields(p.stdout)["status"] == "Healthy"
    assert wmctl.json("recover")["workers"] == 0


# ---- usage, exit codes, TCP ---------------------------------------------


def test_usage_errors(wmctl_bin):
    w = Wmctl(wmctl_bin, None)
    p = w("--help")
    assert "Commands:" in p.stdout
    commands = p.stdout.split("Commands:\n")[1].split("\n\n")[0]
    named = [l.split()[0] for l in commands.splitlines()]
    for c in ("create", "list", "show", "start", "stop", "suspend", "resume",
              "delete", "reload", "history", "rollback", "tags", "invoke",
              "publish", "subscribe", "engines", "health", "recover",
              "pack", "logs"):
        assert c in named, c
    assert w("help").stdout == p.stdout
    assert w("--version").stdout.startswith("wmctl ")
    for args in ([], ["nope"], ["--bogus", "list"], ["show"],
                 ["show", "a", "b"], ["list", "--bogus"],
                 ["--socket", "/x", "--url", "http://h:1", "list"],
                 ["subscribe", "t", "--count", "0"]):
        p = w(*args, expect=2)
        assert "usage" in p.stderr or "Try" in p.stderr, (args, p.stderr)


def test_unreachable(wmctl_bin, tmp_path):
    w = Wmctl(wmctl_bin, None)
    sock = tmp_path / "none.sock"
    p = w("--socket", sock, "list", expect=3)
    assert p.stderr.startswith(f"wmctl: cannot reach {sock}: "), p.stderr
    port = free_port()  # nothing listens there
    p = w("--url", f"http://127.0.0.1:{port}", "health", expect=3)
    assert f"cannot reach http://127.0.0.1:{port}" in p.stderr


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tcp_with_token(wmctl_bin, wm_builddir, tmp_path):
    (tmp_path / "token").write_text("0123456789abcdef-token\n")
    port = free_port()
    d = Daemon(wm_builddir, tmp_path,
               options={"listen": f"127.0.0.1:{port}"})
    d.start()
    try:
        w = Wmctl(wmctl_bin, None)
        url = f"http://127.0.0.1:{port}"
        p = w("--url", url, "--token-file", tmp_path / "token", "health")
        assert fields(p.stdout)["status"] == "Healthy"
        assert w.json("--url", url, "--token-file", tmp_path / "token",
                      "list") == {"workers": []}
        wrong = tmp_path / "wrong"
        wrong.write_text("not-the-right-token\n")
        p = w("--url", url, "--token-file", wrong, "list", expect=1)
        assert p.stderr.startswith("wmctl: unauthorized: "), p.stderr
        p = w("--url", url, "list", expect=1)
        assert "unauthorized" in p.stderr
        # $WM_TOKEN_FILE stands for --token-file.
        p = subprocess.run([wmctl_bin, "--url", url, "engines"],
                           env={"WM_TOKEN_FILE": str(tmp_path / "token")},
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        assert "application/x-wm-test" in p.stdout
    finally:
        assert d.stop() == 0, d.log()
