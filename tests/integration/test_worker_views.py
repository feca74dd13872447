"""Failures visible from wmctl (issue 27 §1, issue 21 item 8): a worker's
view (GET /v1/workers/{id}, wmctl show and list) carries its event counts
(successful attempts, failed attempts, dead letters) and its last error
(type, message, exception type and traceback, or signal); its log lines
(its hosts' stdout and stderr, the daemon's lines about it) are kept in a
bounded ring that GET /v1/workers/{id}/logs and `wmctl logs [-f]` read;
lifecycle error events carry the real message, for invokes as for
deliveries; show prints the limits in force; a crash loop says what ends
it; wmctl --json prints errors as JSON; wmctl invoke prints a worker
error's traceback.

Python workers (the engine's tests' daemon, pyhost_lib) raise on chosen
events; a native worker (tests/workers/native, type "crash") dies of
SIGSEGV.
"""

import json
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pyhost_lib import create, python_engine, require_engine
from wm import Daemon, b64, event, metric, publish

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "workers"
                       / "native"))
from mkpackage import make_package  # noqa: E402
from test_native import native_engine  # noqa: E402

RAISES = """
    import sys

    def Process(event):
        if event["type"] == "bad":
            raise ValueError(f"bad value {event['data']['x']}")
        if event["type"] == "say":
            print("to stdout:", event["data"]["text"])
            sys.stdout.flush()
            print("to stderr:", event["data"]["text"], file=sys.stderr)
            sys.stderr.flush()
        return None
"""


def daemon(builddir, tmp_path, **options):
    require_engine(builddir)
    opts = {"restart_base_delay_ms": 20, "restart_max_delay_ms": 100,
            "shutdown_grace_ms": 1000, "message_timeout_ms": 5000,
            "crash_loop_max": 2,
            # sys.stderr: the import allowlist refuses sys.
            "python_allowlist": "off"}
    opts.update(options)
    return Daemon(builddir, tmp_path, options=opts,
                  engines={**python_engine(builddir),
                           **native_engine(builddir)})


pytestmark = pytest.mark.wmd(make=daemon)


class Wmctl:
    def __init__(self, builddir, d):
        self.binary = str(Path(builddir) / "cli" / "wmctl")
        self.env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                    "WM_SOCKET": str(d.socket)}

    def __call__(self, *args, expect=0):
        p = subprocess.run([self.binary, *map(str, args)], env=self.env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == expect, (args, p.returncode, p.stdout,
                                        p.stderr)
        return p


@pytest.fixture
def wmctl(wm_builddir, wmd):
    return Wmctl(wm_builddir, wmd)


def view(wmd, wid):
    r = wmd.get(f"/v1/workers/{wid}")
    assert r.status == 200, r
    return r.json


def errors_of(wmd, wid):
    return [e["data"] for e in wmd.lifecycle(wid)
            if e["type"].endswith(".error")]


def test_a_failing_worker_shows_its_counts_and_last_error(wmd, wmctl):
    """Issue 27 §1: a worker that raises on published events shows it in
    the API, show and list; issue 21 item 8: processed counts successes
    only, failures and dead letters apart."""
    w = create(wmd, RAISES, name="raiser", topic="views")
    assert view(wmd, w["id"])["last_error"] is None
    for ev in (event("ok"), event("bad", data={"x": 7}), event("ok")):
        assert publish(wmd, "views", ev).status == 202
    wmd.wait_for(lambda: sum(view(wmd, w["id"])["events"][k]
                             for k in ("processed", "failed")) == 3,
                 what="three attempts")
    v = view(wmd, w["id"])
    assert v["events"]["processed"] == 2 and v["events"]["failed"] == 1, v
    assert v["events"]["dead_lettered"] == 0, v
    e = v["last_error"]
    assert e["type"] == "exception" and e["exception_type"] == "ValueError"
    assert e["message"] == "ValueError: bad value 7", e
    assert "Traceback" in e["traceback"] and "bad value" in e["traceback"]
    assert e["at"].endswith("Z") and e["signal"] is None, e
    assert metric(wmd, "workmanager_worker_events_processed_total",
                  worker=w["id"]) == 2
    assert metric(wmd, "workmanager_worker_events_failed_total",
                  worker=w["id"]) == 1

    shown = wmctl("show", "raiser").stdout
    assert "last_error:\n" in shown, shown
    assert "  type: exception\n" in shown, shown
    assert "  message: ValueError: bad value 7\n" in shown, shown
    assert "  traceback:\nTraceback (most recent call last)" in shown, shown
    assert re.search(r"^events: processed=2, failed=1, dead_lettered=0",
                     shown, re.M), shown
    lines = wmctl("list").stdout.splitlines()
    assert lines[0].split()[-2:] == ["FAILED", "LAST_ERROR"], lines
    assert lines[1].split()[-3:] == ["1", "exception", "ValueError"], lines


def test_a_native_crash_is_the_last_error_with_its_signal(wmd, wmctl,
                                                           wm_builddir):
    """A host killed by SIGSEGV: last_error crash with the signal; the
    lifecycle error event's message says how the host ended."""
    lib = Path(wm_builddir) / "tests" / "workers" / "native" / "libecho.so"
    w = wmd.post("/v1/workers", {
        "mime_type": "application/x-native-dll", "topic": "n",
        "name": "segv", "code": {"content": b64(make_package(lib))}}).json
    r = wmd.invoke(w["id"], "crash")
    assert r.status == 422, r
    e = wmd.wait_for(lambda: view(wmd, w["id"])["last_error"],
                     what="the last error")
    assert e["type"] == "crash" and e["signal"] == 11, e
    assert e["signal_name"] == "SIGSEGV" and "SIGSEGV" in e["message"], e
    assert e["exception_type"] is None and e["traceback"] is None, e
    errors = wmd.wait_for(lambda: errors_of(wmd, w["id"]), what="an error")
    assert errors[0]["error_type"] == "crash", errors
    assert "signal 11 (SIGSEGV)" in errors[0]["error_message"], errors
    row = wmctl("list").stdout.splitlines()[1]
    assert row.endswith("crash SIGSEGV"), row
    # The daemon's line about it names it by name and id.
    assert re.search(rf"worker segv \({w['id']}\): host pid \d+ exited: "
                     r"signal 11 \(SIGSEGV\)", wmd.log())


def test_a_crash_loop_says_what_ends_it(wmd, wmctl, wm_builddir):
    """crash_loop_max (2 here) restarts within the window leave the worker
    failed: show, the last error and the lifecycle event say that `wmctl
    start NAME` clears it."""
    lib = Path(wm_builddir) / "tests" / "workers" / "native" / "libecho.so"
    w = wmd.post("/v1/workers", {
        "mime_type": "application/x-native-dll", "topic": "n",
        "name": "looper", "code": {"content": b64(make_package(lib))}}).json
    for _ in range(3):
        wmd.wait_for(lambda: view(wmd, w["id"])["state"] in
                     ("idle", "running", "failed"), what="a host to take")
        if view(wmd, w["id"])["state"] == "failed":
            break
        wmd.invoke(w["id"], "crash")
    wmd.wait_for(lambda: view(wmd, w["id"])["state"] == "failed",
                 what="the crash loop")
    e = view(wmd, w["id"])["last_error"]
    assert "crash loop" in e["message"], e
    assert "`wmctl start looper`" in e["message"], e
    assert e["signal"] == 11, e
    shown = wmctl("show", "looper").stdout
    assert "state: failed (no more restarts: `wmctl start looper` clears " \
        "it)" in shown, shown
    assert any("`wmctl start looper`" in x["error_message"]
               for x in errors_of(wmd, w["id"])), errors_of(wmd, w["id"])
    wmctl("start", "looper")
    assert wmd.invoke(w["id"], "echo").status == 200


def test_logs_shows_and_follows_what_the_worker_printed(wmd, wmctl):
    """wmctl logs: the worker's stdout and stderr and the daemon's lines
    about it; -f follows a new line as it comes."""
    w = create(wmd, RAISES, name="talker")
    assert wmd.invoke(w["id"], "say", data={"text": "first"}).status == 204
    wmd.wait_for(lambda: "to stderr: first" in wmctl("logs", "talker").stdout,
                 what="the worker's lines")
    out = wmctl("logs", "talker").stdout
    assert re.search(r"^\S+Z host \w+: to stdout: first$", out, re.M), out
    assert re.search(r"^\S+Z daemon info: version 1 loaded in host pid",
                     out, re.M), out
    got = wmd.get(f"/v1/workers/{w['id']}/logs?n=1").json["lines"]
    assert len(got) == 1 and got[0]["text"] == "to stderr: first", got
    assert got[0]["source"] == "host" and got[0]["seq"] > 1, got
    assert wmd.get(f"/v1/workers/{w['id']}/logs?n=x").status == 400

    p = subprocess.Popen([wmctl.binary, "logs", "-f", "-n", "1", "talker"],
                         env=wmctl.env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    reader = threading.Thread(
        target=lambda: [lines.put(l) for l in p.stdout], daemon=True)
    reader.start()
    try:
        # The last line first: the stream is open once it arrives.
        assert "to stderr: first" in lines.get(timeout=10)
        assert wmd.invoke(w["id"], "say",
                          data={"text": "second"}).status == 204
        seen = []
        while not any("to stderr: second" in l for l in seen):
            seen.append(lines.get(timeout=10))
        assert any("host info: to stdout: second" in l for l in seen), seen
        assert not any("first" in l for l in seen), seen
    finally:
        p.terminate()
        p.wait(timeout=10)
        reader.join(timeout=5)
    assert p.returncode == 0, p.stderr.read()


def test_an_invoke_that_raises_emits_the_lifecycle_error(wmd, wmctl):
    """workmanager-workers(7): an invoke that raises emits the same
    lifecycle error event as a delivery that raises; wmctl invoke prints
    the traceback."""
    w = create(wmd, RAISES, name="inv")
    p = wmctl("invoke", "inv", "--type", "bad", "--data", '{"x": 3}',
              expect=1)
    assert "wmctl: worker_error: ValueError: bad value 3" in p.stderr, p
    assert "Traceback (most recent call last)" in p.stderr, p.stderr
    errors = wmd.wait_for(lambda: errors_of(wmd, w["id"]),
                          what="the lifecycle error")
    assert errors[0]["error_type"] == "exception", errors
    assert errors[0]["error_message"] == "ValueError: bad value 3", errors
    assert errors[0]["exception_type"] == "ValueError", errors
    assert errors[0]["invoke"] is True, errors
    assert view(wmd, w["id"])["events"]["failed"] == 1


def test_show_prints_the_limits_in_force(wmd, wmctl):
    """A worker created without limits runs under the daemon's defaults:
    show prints them, not zeros."""
    create(wmd, RAISES, name="plain", start=False)
    v = wmd.get("/v1/workers/plain").json
    assert v["limits"]["timeout_ms"] == 0, v  # as asked: the default
    assert v["limits_in_force"] == {"timeout_ms": 5000, "memory_mb": None,
                                    "concurrency": 1,
                                    "idle_timeout_s": 300}, v
    shown = wmctl("show", "plain").stdout
    assert "limits: timeout_ms=5000, memory_mb=unlimited, concurrency=1, " \
        "idle_timeout_s=300\n" in shown, shown


def test_json_errors_are_json(wmd, wmctl, tmp_path):
    """wmctl --json prints the daemon's errors, usage errors and an
    unreachable daemon as JSON on stderr."""
    p = wmctl("--json", "show", "nope", expect=1)
    e = json.loads(p.stderr)
    assert e["status"] == 404 and e["error"]["code"] == "not_found", e
    assert "nope" in e["error"]["message"], e
    p = wmctl("--json", "show", expect=2)
    assert json.loads(p.stderr)["error"]["code"] == "usage", p.stderr
    wmctl.env["WM_SOCKET"] = str(tmp_path / "none.sock")
    p = wmctl("--json", "list", expect=3)
    assert json.loads(p.stderr)["error"]["code"] == "unreachable", p.stderr
