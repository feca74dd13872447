"""Tenants, credentials and scope (issue 22): every route of the admin API
against credentials of another tenant (its tenant-admin, publisher and
reader tokens), an expired token, a revoked token and no token on TCP, and
against local users mapped by local_principals on the control socket.

Each refusal is the expected 401, 403 or 404, and no body names what it
must not: another tenant's worker answers exactly as a worker that does
not exist.  One daemon serves the whole module (the matrix is many cheap
requests, not many daemons)."""

import http.client
import json
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

from wm import Daemon, b64, traversable

OP_TOKEN = "0123456789abcdef-operator"
SECRET_NAME = "acmesecretworker"  # must never show to another tenant
# Local users for the control socket (no account needed: SO_PEERCRED
# reports the uid a process runs as).
LOCAL = {"reader": 47101, "publisher": 47102, "tenant-admin": 47103}
UNMAPPED_UID = 47104


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tcp:
    def __init__(self, port, token=None):
        self.port, self.token = port, token

    def request(self, method, path, body=None):
        ctype = ("application/cloudevents+json" if "/events" in path
                 else "application/json")
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = {}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = ctype
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        out = (r.status, r.read().decode(errors="replace"))
        conn.close()
        return out


@pytest.fixture(scope="module")
def env(wm_builddir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tenants")
    (tmp / "token").write_text(OP_TOKEN + "\n")
    port = free_port()
    local = ",".join(f"uid:{uid}=other/{role}" for role, uid in LOCAL.items())
    d = Daemon(wm_builddir, tmp, options={
        "listen": f"127.0.0.1:{port}",
        "control_socket_mode": "0666",
        "local_principals": local,
    })
    d.start()
    if os.geteuid() == 0:
        traversable(d.run)
    op = Tcp(port, OP_TOKEN)
    for name in ("acme", "other"):
        st, body = op.request("POST", "/v1/tenants", {"name": name})
        assert st == 201, body
    st, body = op.request("POST", "/v1/workers", {
        "name": SECRET_NAME, "tenant": "acme",
        "mime_type": "application/x-wm-test", "topic": "t",
        "code": {"content": b64("echo")}})
    assert st == 201, body
    acme = json.loads(body)["id"]

    def token(tenant, role, **extra):
        st, body = op.request("POST", "/v1/tokens",
                              {"tenant": tenant, "role": role, **extra})
        assert st == 201, body
        return json.loads(body)

    toks = {role: token("other", role)["token"]
            for role in ("tenant-admin", "publisher", "reader")}
    toks["own-reader"] = token("acme", "reader")["token"]
    toks["own-publisher"] = token("acme", "publisher")["token"]
    expired = token("other", "tenant-admin", expires_in_s=1)
    revoked = token("other", "tenant-admin")
    st, body = op.request("DELETE", f"/v1/tokens/{revoked['id']}")
    assert st == 200, body
    toks["revoked"] = revoked["token"]
    toks["expired"] = expired["token"]
    time.sleep(1.1)  # past the expired token's second
    yield {"d": d, "port": port, "op": op, "acme": acme, "tokens": toks}
    d.stop()


def routes(w):
    """Every route of the API, as (method, path, body), on acme's worker
    w where a route takes a worker."""
    ev = {"specversion": "1.0", "id": "e1", "source": "t", "type": "echo"}
    return [
        ("GET", f"/v1/workers/{w}", None),
        ("DELETE", f"/v1/workers/{w}", None),
        ("POST", f"/v1/workers/{w}/start", None),
        ("POST", f"/v1/workers/{w}/stop", None),
        ("POST", f"/v1/workers/{w}/suspend", None),
        ("POST", f"/v1/workers/{w}/resume", None),
        ("POST", f"/v1/workers/{w}/rollback", {"version": 1}),
        ("PUT", f"/v1/workers/{w}/code", {"code": {"content": b64("x")}}),
        ("GET", f"/v1/workers/{w}/history", None),
        ("GET", f"/v1/workers/{w}/tags", None),
        ("PUT", f"/v1/workers/{w}/tags", {"tags": {"a": "b"}}),
        ("GET", f"/v1/workers/{w}/logs", None),
        ("POST", f"/v1/workers/{w}/invoke", ev),
        ("GET", "/v1/workers", None),
        ("POST", "/v1/workers", {"tenant": "acme", "topic": "t",
                                 "mime_type": "application/x-wm-test",
                                 "code": {"content": b64("echo")}}),
        ("POST", "/v1/topics/t/events?tenant=acme", ev),
        ("GET", "/v1/topics/t/events?tenant=acme", None),
        ("GET", "/v1/topics/*/events?tenant=*", None),
        ("GET", "/v1/topics/workmanager.infra.worker/events", None),
        ("GET", "/v1/engines", None),
        ("POST", "/v1/recover", None),
        ("GET", "/v1/instances", None),
        ("GET", "/v1/export", None),
        ("POST", "/v1/import", {}),
        ("GET", "/metrics", None),
        ("GET", "/health", None),
        ("GET", "/v1/tenants", None),
        ("POST", "/v1/tenants", {"name": "mine"}),
        ("GET", "/v1/tenants/acme", None),
        ("POST", "/v1/tenants/acme/suspend", None),
        ("DELETE", "/v1/tenants/acme?confirm=acme", None),
        ("GET", "/v1/tokens", None),
        ("POST", "/v1/tokens", {"tenant": "other", "role": "operator"}),
    ]


def expected(role, method, path):
    """What another tenant's principal of role gets."""
    if "/v1/workers/" in path:
        return 404  # another tenant's worker: as if it did not exist
    if path == "/health":
        return 200  # the verdict only (checked below)
    if path == "/v1/workers" and method == "GET":
        return 403 if role == "publisher" else 200  # (filtered: below)
    if path in ("/v1/engines", "/metrics"):
        return 403 if role == "publisher" else 200  # metrics: its own only
    return 403


def check(role, method, path, status, body, acme):
    want = expected(role, method, path)
    assert status == want, (role, method, path, status, body)
    assert SECRET_NAME not in body, (role, method, path, body)
    if acme not in path:
        assert acme not in body, (role, method, path, body)
    if status == 404:
        # the same answer as for a worker that does not exist
        assert acme in path
        assert json.loads(body)["error"]["code"] == "not_found"
        assert json.loads(body)["error"]["message"] == f"no worker {acme}"
    if path == "/health":
        assert set(json.loads(body)) == {"status"}, body
    if path == "/v1/workers" and status == 200:
        assert json.loads(body)["workers"] == [], body


# ---- TCP tokens ------------------------------------------------------------

ROLES = ("tenant-admin", "publisher", "reader")


@pytest.mark.parametrize("role", ROLES)
def test_other_tenants_tokens(env, role):
    c = Tcp(env["port"], env["tokens"][role])
    for method, path, body in routes(env["acme"]):
        if method == "GET" and "/events" in path and expected(
                role, method, path) == 200:
            continue
        status, text = c.request(method, path, body)
        check(role, method, path, status, text, env["acme"])
    # the worker is untouched
    st, body = env["op"].request("GET", f"/v1/workers/{env['acme']}")
    assert st == 200 and json.loads(body)["status"] == "running", body


@pytest.mark.parametrize("which", ["expired", "revoked", "none", "garbage"])
def test_bad_tokens_are_401(env, which):
    token = {"none": None, "garbage": "wmt_" + "0" * 81}.get(
        which, env["tokens"].get(which))
    c = Tcp(env["port"], token)
    for method, path, body in routes(env["acme"]):
        status, text = c.request(method, path, body)
        assert status == 401, (which, method, path, status, text)
        assert SECRET_NAME not in text, text
        err = json.loads(text)["error"]
        assert err["code"] == "unauthorized"
        if which == "expired":
            assert "expired" in err["message"]
    # a probe stays open
    assert c.request("GET", "/health/live")[0] == 200


def test_own_tenant_is_served(env):
    reader = Tcp(env["port"], env["tokens"]["own-reader"])
    st, body = reader.request("GET", f"/v1/workers/{env['acme']}")
    assert st == 200 and json.loads(body)["name"] == SECRET_NAME
    st, body = reader.request("GET", "/v1/workers")
    assert [w["id"] for w in json.loads(body)["workers"]] == [env["acme"]]
    # a reader reads only: its own worker's invoke is 403, not 404
    ev = {"specversion": "1.0", "id": "e1", "source": "t", "type": "echo"}
    st, body = reader.request("POST", f"/v1/workers/{env['acme']}/invoke", ev)
    assert st == 403 and json.loads(body)["error"]["code"] == "forbidden"
    # its workers' series only, none of the daemon's own
    st, text = reader.request("GET", "/metrics")
    assert st == 200 and f'worker="{env["acme"]}"' in text, text
    assert "workmanager_journal_bytes" not in text, text
    pub = Tcp(env["port"], env["tokens"]["own-publisher"])
    st, body = pub.request("POST", f"/v1/workers/{env['acme']}/invoke", ev)
    assert st == 200, body
    st, body = pub.request("POST", "/v1/topics/t/events", ev)
    assert st == 202, body
    st, body = pub.request("POST", f"/v1/workers/{env['acme']}/stop")
    assert st == 403, body


def test_tokens_are_stored_hashed_and_audited(env):
    d = env["d"]
    listing = env["op"].request("GET", "/v1/tokens")[1]
    for role in ROLES:
        secret = env["tokens"][role]
        assert secret not in listing
        for root, _, files in os.walk(d.state):
            for f in files:
                p = os.path.join(root, f)
                with open(p, "rb") as fh:
                    assert secret.encode() not in fh.read(), p
    audit = (d.state / "audit.log").read_text().splitlines()
    posts = [json.loads(line) for line in audit
             if '"/v1/tokens"' in line and '"POST"' in line]
    assert posts and all(p["principal"] == "operator (token_file)"
                         for p in posts if p["status"] == 201), posts


# ---- the control socket, local users -----------------------------------

CLIENT = r"""
import http.client, json, os, socket, sys
uid, path, cases = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
os.setgroups([]); os.setgid(uid); os.setuid(uid)
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(path)
out = []
for method, target, body in cases:
    c = C("localhost", timeout=10)
    data = json.dumps(body).encode() if body is not None else None
    c.request(method, target, body=data,
              headers={"Content-Type": "application/json"} if data else {})
    r = c.getresponse()
    out.append([r.status, r.read().decode(errors="replace")])
    c.close()
print(json.dumps(out))
"""


def as_local_user(env, uid, cases):
    r = subprocess.run([sys.executable, "-c", CLIENT, str(uid),
                        str(env["d"].socket), json.dumps(cases)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="setuid to a local user needs root")


@needs_root
@pytest.mark.parametrize("role", ROLES)
def test_mapped_local_users(env, role):
    cases = [c for c in routes(env["acme"])
             if not (c[0] == "GET" and "/events" in c[1]
                     and expected(role, c[0], c[1]) == 200)]
    got = as_local_user(env, LOCAL[role], cases)
    for (method, path, _), (status, text) in zip(cases, got):
        check(role, method, path, status, text, env["acme"])


@needs_root
def test_unmapped_local_user_is_refused(env):
    cases = routes(env["acme"])
    for (method, path, _), (status, text) in zip(
            cases, as_local_user(env, UNMAPPED_UID, cases)):
        assert status == 403, (method, path, status, text)
        assert f"uid={UNMAPPED_UID}" in text and "local_principals" in text
        assert SECRET_NAME not in text


# ---- tenants: suspend, resume, delete -------------------------------------

def test_tenant_suspend_resume_delete(env):
    op = env["op"]
    st, body = op.request("POST", "/v1/tenants", {"name": "gone"})
    assert st == 201, body
    st, body = op.request("POST", "/v1/workers", {
        "name": "goner", "tenant": "gone", "mime_type":
        "application/x-wm-test", "topic": "t",
        "code": {"content": b64("echo")}})
    assert st == 201, body
    w = json.loads(body)["id"]
    st, body = op.request("POST", "/v1/tokens",
                          {"tenant": "gone", "role": "publisher"})
    pub = Tcp(env["port"], json.loads(body)["token"])
    ev = {"specversion": "1.0", "id": "e1", "source": "t", "type": "echo"}

    st, body = op.request("POST", "/v1/tenants/gone/suspend")
    assert st == 200 and json.loads(body)["status"] == "suspended", body
    st, body = op.request("GET", f"/v1/workers/{w}")
    assert json.loads(body)["status"] == "stopped", body
    st, body = pub.request("POST", "/v1/topics/t/events", ev)
    assert st == 409 and json.loads(body)["error"]["code"] == \
        "tenant_suspended", body
    assert "wmctl tenant resume gone" in body

    st, body = op.request("POST", "/v1/tenants/gone/resume")
    assert st == 200 and json.loads(body)["status"] == "active", body
    st, body = op.request("GET", f"/v1/workers/{w}")
    assert json.loads(body)["status"] == "running", body
    assert pub.request("POST", "/v1/topics/t/events", ev)[0] == 202

    st, body = op.request("DELETE", "/v1/tenants/gone")
    assert st == 400 and "confirm" in body, body
    st, body = op.request("DELETE", "/v1/tenants/gone?confirm=gone")
    assert st == 200, body
    assert op.request("GET", f"/v1/workers/{w}")[0] == 404
    assert op.request("GET", "/v1/tenants/gone")[0] == 404
    assert pub.request("POST", "/v1/topics/t/events", ev)[0] == 401


# ---- wmctl ---------------------------------------------------------------

def wmctl(env, *args, token_file=None):
    bin_ = str(env["d"].builddir / "cli" / "wmctl")
    run_env = {"PATH": "/usr/bin:/bin", "WM_SOCKET": str(env["d"].socket)}
    argv = [bin_]
    if token_file:
        argv += ["--url", f"http://127.0.0.1:{env['port']}",
                 "--token-file", str(token_file)]
    return subprocess.run(argv + list(args), capture_output=True, text=True,
                          env=run_env, timeout=30)


def test_wmctl_tenant_and_token(env, tmp_path):
    r = wmctl(env, "tenant", "create", "cli")
    assert r.returncode == 0, r.stderr
    r = wmctl(env, "token", "create", "--tenant", "cli", "--role", "reader",
              "--expires", "1h")
    assert r.returncode == 0, r.stderr
    secret = r.stdout.strip()
    assert secret.startswith("wmt_") and "\n" not in secret
    assert "shown this once" in r.stderr
    tid = secret.split("_")[1]
    (tmp_path / "t").write_text(secret + "\n")
    r = wmctl(env, "list", token_file=tmp_path / "t")
    assert r.returncode == 0 and SECRET_NAME not in r.stdout, r
    r = wmctl(env, "token", "list", "--tenant", "cli")
    assert tid in r.stdout and secret not in r.stdout, r
    # a reader may not make tokens
    r = wmctl(env, "token", "list", token_file=tmp_path / "t")
    assert r.returncode == 1 and "forbidden" in r.stderr, r
    assert wmctl(env, "token", "revoke", tid).returncode == 0
    r = wmctl(env, "list", token_file=tmp_path / "t")
    assert r.returncode == 1 and "unauthorized" in r.stderr, r
    assert wmctl(env, "tenant", "suspend", "cli").returncode == 0
    assert "suspended" in wmctl(env, "tenant", "show", "cli").stdout
    assert wmctl(env, "tenant", "resume", "cli").returncode == 0
    r = wmctl(env, "tenant", "delete", "cli")
    assert r.returncode == 2 and "--yes" in r.stderr, r
    assert wmctl(env, "tenant", "delete", "cli", "--yes").returncode == 0
    assert "cli" not in wmctl(env, "tenant", "list").stdout.split()


def test_lifecycle_events_stay_in_their_tenant(env):
    """A tenant-admin of `other` following the lifecycle topic sees its own
    worker's events, never acme's."""
    port = env["port"]
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /v1/topics/workmanager.lifecycle/events HTTP/1.1\r\n"
              b"Host: x\r\nAuthorization: Bearer "
              + env["tokens"]["tenant-admin"].encode() + b"\r\n\r\n")
    buf = b""
    while b": subscribed" not in buf:
        buf += s.recv(4096)
    op = env["op"]
    for tenant, name in (("acme", "acme-life"), ("other", "other-life")):
        st, body = op.request("POST", "/v1/workers", {
            "name": name, "tenant": tenant,
            "mime_type": "application/x-wm-test", "topic": "t",
            "code": {"content": b64("echo")}})
        assert st == 201, body
    deadline = time.monotonic() + 10
    while b"other-life" not in buf and time.monotonic() < deadline:
        buf += s.recv(4096)
    s.close()
    assert b"other-life" in buf or b'"tenant":"other"' in buf, buf
    assert b"acme-life" not in buf and SECRET_NAME.encode() not in buf, buf
