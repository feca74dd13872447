"""The documented admin API against a running workmanagerd (issue 27,
section 6): every route workmanagerd(8) lists under Routes is one the
daemon answers (never 404 "no route" nor 405), every action the workers'
route dispatches on is listed there, and what wmctl(1) says `delete`
prints is what it prints.  The pages' keys, defaults, commands and
statements about engines are checked without a daemon by
tests/unit/test_man.sh.
"""

import re
import subprocess
from pathlib import Path

import pytest

from wm import UnixHTTPConnection

SRC = Path(__file__).resolve().parents[2]
PAGE = SRC / "man" / "workmanagerd.8"


def documented_routes():
    """(method, path) of each `.It Li METHOD /path ...` under .Ss Routes,
    `Ar id` made the worker w1, `Ar topic` the topic t, `Ar tenant` a
    tenant that does not exist and `Ar token` a token id that does not."""
    text = PAGE.read_text()
    section = text.split(".Ss Routes\n", 1)[1].split("\n.Ss ", 1)[0]
    routes = []
    for line in section.splitlines():
        if not line.startswith(".It Li "):
            continue
        spec = line[len(".It Li "):]
        spec = re.sub(r" Ns Op Li \?.*$", "", spec)  # an optional query
        spec = spec.replace(" Ns Ar id", "w1").replace(" Ns Ar topic", "t")
        spec = spec.replace(" Ns Ar tenant", "doc-t").replace(
            " Ns Ar token", "0" * 16)
        spec = spec.replace(" Ns Li ", "")
        for part in spec.split(" , "):
            m = re.match(r"^((?:[A-Z]+ \| )*[A-Z]+) (/\S*)(?: \| (.*))?$",
                         part)
            assert m, f"workmanagerd.8: cannot read the route {line!r}"
            methods = m.group(1).split(" | ")
            paths = [m.group(2)]
            if m.group(3):  # /start | stop | suspend
                base = m.group(2).rsplit("/", 1)[0]
                paths += [f"{base}/{a}" for a in m.group(3).split(" | ")]
            routes += [(meth, p) for meth in methods for p in paths]
    return routes


def call(wmd, method, path):
    """One request with a harmless body: the route's answer, whatever it
    is, without following an event stream."""
    conn = UnixHTTPConnection(str(wmd.socket), timeout=10)
    body = None
    headers = {}
    if method in ("POST", "PUT") and not path.endswith(("/start", "/stop",
                                                        "/suspend",
                                                        "/resume",
                                                        "/recover")):
        body = b"{}"
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    text = b"" if r.getheader("Content-Type", "").startswith(
        "text/event-stream") else r.read()
    status = r.status
    conn.close()
    return status, text.decode(errors="replace")


def test_every_documented_route_is_answered(wmd):
    routes = documented_routes()
    assert len(routes) >= 20, routes
    wmd.create(name="w1")
    # The delete last: the other routes need the worker.
    routes.sort(key=lambda r: r[0] == "DELETE")
    for method, path in routes:
        status, text = call(wmd, method, path)
        assert status != 405, (method, path, text)
        assert not (status == 404 and "no route" in text), \
            f"workmanagerd.8 documents {method} {path}; the daemon: {text}"


def test_every_worker_action_is_documented():
    code = (SRC / "master" / "api" / "route_workers.c").read_text()
    actions = set(re.findall(
        r'is\(rq, "([A-Z]+)"\) && strcmp\(action, "([a-z]+)"\)', code))
    assert actions, "route_workers.c: no action found; update this test"
    routes = set(documented_routes())
    for method, action in sorted(actions):
        assert (method, f"/v1/workers/w1/{action}") in routes, \
            f"{method} /v1/workers/{{id}}/{action} is not in workmanagerd.8"


def test_delete_prints_what_wmctl1_says(wmd, wm_built):
    page = (SRC / "man" / "wmctl.1").read_text()
    entry = page.split(".It Ic delete Ar worker\n", 1)[1].split("\n.It ")[0]
    m = re.search(r"^Prints\n\.Li (\S+) Ar worker", entry, re.M)
    assert m, f"wmctl.1 does not say what delete prints: {entry!r}"
    wmd.create(name="w1")
    p = subprocess.run([str(wm_built("cli/wmctl")), "--socket", wmd.socket,
                        "delete", "w1"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"{m.group(1)} w1\n", p.stdout
