"""Worker code from URLs (issue 9): a real workmanagerd fetching native
worker packages from HTTP(S) servers this module starts on 127.0.0.1, with
a certificate authority made here with the openssl CLI and trusted only by
the test daemons (code_source_ca_file).

Every refusal is followed by the same checks: the daemon still answers,
and no worker (nor a partial one) exists.  Names that resolve to refused
ranges come from /etc/hosts: `localhost` from the machine's, the others
from a file bind-mounted over /etc/hosts in a private mount namespace the
daemon alone runs in (unshare -m; the machine is root).
"""

import hashlib
import http.server
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from wm import Daemon

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "workers"
                       / "native"))
from mkpackage import make_package  # noqa: E402

MIME = "application/x-native-dll"
SLOW_SECONDS = 6


# ---- a certificate authority and HTTP(S) servers ------------------------

def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True,
                   capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """ca.pem (the authority) and server.pem/server.key for localhost,
    code.test and 127.0.0.1."""
    if shutil.which("openssl") is None:
        pytest.fail("the openssl CLI is missing (Debian package openssl)")
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=workmanager test CA", "-keyout", "ca.key",
            "-out", "ca.pem", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=code.test",
            "-keyout", "server.key", "-out", "server.csr", cwd=d)
    (d / "ext.cnf").write_text(
        "subjectAltName=DNS:localhost,DNS:code.test,IP:127.0.0.1\n"
        "basicConstraints=CA:FALSE\n"
        "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey",
            "ca.key", "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf",
            "-out", "server.pem", cwd=d)
    return d


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send_body(self, body, status=200, chunked=False):
        self.send_response(status)
        self.send_header("Content-Type", "application/zip")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 1024):
                part = body[i:i + 1024]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def do_GET(self):
        srv = self.server
        path, _, query = self.path.partition("?")
        srv.hits[path] = srv.hits.get(path, 0) + 1
        srv.auth[path] = self.headers.get("Authorization")
        if path == "/echo.zip":
            self.send_body(srv.package)
        elif path == "/redirect":
            self.send_response(302)
            self.send_header("Location", query)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/big":
            self.send_body(b"x" * 65536)
        elif path == "/big-chunked":
            self.send_body(b"x" * 65536, chunked=True)
        elif path == "/slow":
            # A body that trickles: headers at once, a byte a second.
            self.send_response(200)
            self.send_header("Content-Length", str(SLOW_SECONDS))
            self.end_headers()
            try:
                for _ in range(SLOW_SECONDS):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                pass
        elif path == "/auth":
            if self.headers.get("Authorization") == "Bearer s3cret":
                self.send_body(srv.package)
            else:
                self.send_body(b"who are you?", status=401)
        else:
            self.send_body(b"no such file", status=404)


class Server:
    def __init__(self, package, pki=None):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                     Handler)
        self.httpd.daemon_threads = True
        self.httpd.package = package
        self.httpd.hits = {}
        self.httpd.auth = {}
        self.scheme = "http"
        if pki is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(pki / "server.pem", pki / "server.key")
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket,
                                                server_side=True)
            self.scheme = "https"
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       daemon=True)
        self.thread.start()

    def url(self, path, host="127.0.0.1"):
        return f"{self.scheme}://{host}:{self.port}{path}"

    @property
    def hits(self):
        return self.httpd.hits

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def package(wm_builddir):
    lib = Path(wm_builddir) / "tests" / "workers" / "native" / "libecho.so"
    assert lib.exists(), f"{lib} is built by make check"
    return make_package(lib)


@pytest.fixture
def https(package, pki):
    s = Server(package, pki)
    yield s
    s.close()


@pytest.fixture
def plain_http(package):
    s = Server(package)
    yield s
    s.close()


# ---- daemons --------------------------------------------------------------

def native_engine(builddir):
    host = Path(builddir) / "hosts" / "native" / "wm-host-native"
    return {"native.engine": "name = native\n"
                             f"mime_type = {MIME}\n"
                             "language = C\n"
                             f"host = {host}\n"
                             "spawn = exec\nprotocol = 1\n"}


class NamespacedDaemon(Daemon):
    """A daemon in a mount namespace of its own whose /etc/hosts is
    `hosts` (bind-mounted): its names resolve as the test says, the
    machine's do not change."""

    def __init__(self, *args, hosts, **kw):
        super().__init__(*args, **kw)
        self.hosts_file = self.tmp / "hosts"
        self.hosts_file.write_text(hosts)

    def argv(self):
        # unshare execs (no fork): the daemon keeps the pid the test
        # signals.
        return ["unshare", "-m", "--", "sh", "-c",
                'mount --bind "$0" /etc/hosts && exec "$@"',
                str(self.hosts_file), *super().argv()]


def daemon(wm_builddir, tmp_path, pki, hosts=None, **options):
    opts = {"code_source_ca_file": str(pki / "ca.pem"),
            "shutdown_grace_ms": 1000}
    opts.update(options)
    kw = dict(options=opts, engines=native_engine(wm_builddir))
    if hosts is not None:
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            pytest.fail("names resolving to refused ranges need root and "
                        "unshare(1) for a private /etc/hosts")
        d = NamespacedDaemon(wm_builddir, tmp_path, hosts=hosts, **kw)
    else:
        d = Daemon(wm_builddir, tmp_path, **kw)
    return d.start()


@pytest.fixture
def strict(wm_builddir, tmp_path, pki):
    """Built-in rules: every non-public address refused."""
    d = daemon(wm_builddir, tmp_path, pki)
    yield d
    assert d.stop() == 0, d.log()


@pytest.fixture
def local(wm_builddir, tmp_path, pki):
    """127.0.0.1 allowed (the test servers' address), nothing else."""
    d = daemon(wm_builddir, tmp_path, pki,
               code_source_allowed_networks="127.0.0.1/32")
    yield d
    assert d.stop() == 0, d.log()


def create_url(d, url, sha256=None, **fields):
    code = {"url": url}
    if sha256 is not None:
        code["sha256"] = sha256
    body = {"mime_type": MIME, "topic": "n", "code": code}
    body.update(fields)
    return d.post("/v1/workers", body, timeout=60)


def refused(d, r, status, code, *words):
    """r is the refusal expected, naming each of words; the daemon still
    answers and no worker exists."""
    assert r.status == status and r.code == code, r
    message = r.json["error"]["message"]
    assert message.startswith("code.url: "), message
    for w in words:
        assert w in message, (w, message)
    assert d.get("/health").status == 200, d.log()
    assert d.get("/v1/workers").json["workers"] == [], d.log()
    records = d.state / "records"
    assert not records.exists() or not list(records.iterdir()), \
        list(records.iterdir())
    return message


def sha(data):
    return hashlib.sha256(data).hexdigest()


# ---- fetching -------------------------------------------------------------

def test_fetch_creates_a_worker_that_answers(local, https, package):
    """Spec: URL code worker — fetched over https, SHA-256 verified, run;
    the URL, the address and the digest are in the history; a reload from
    a URL appends a version; recovery does not fetch again."""
    url = https.url("/echo.zip")
    r = create_url(local, url, sha(package).upper(), name="fromurl")
    assert r.status == 201, (r, local.log())
    w = r.json
    out = local.invoke(w["id"], "echo", data={"n": 7})
    assert out.status == 200, out
    assert out.json["type"] == "echo.out" and out.json["data"] == {"n": 7}

    h = local.get(f"/v1/workers/{w['id']}/history").json
    v1 = h["versions"][0]
    assert v1["source"] == url
    assert v1["address"] == "127.0.0.1"
    assert v1["sha256"] == sha(package) and v1["size"] == len(package)
    assert "final_url" not in v1

    # A reload from a URL, without a digest: taken, and its digest kept.
    r = local.put(f"/v1/workers/{w['id']}/code", {"code": {"url": url}},
                  timeout=60)
    assert r.status == 200 and r.json["version"] == 2, r
    h = local.get(f"/v1/workers/{w['id']}/history").json
    assert h["versions"][1]["sha256"] == sha(package)
    assert h["versions"][1]["source"] == url
    assert h["versions"][1]["address"] == "127.0.0.1"
    # A rollback keeps where the code came from.
    r = local.post(f"/v1/workers/{w['id']}/rollback", {"version": 1})
    assert r.status == 200, r
    v3 = local.get(f"/v1/workers/{w['id']}/history").json["versions"][2]
    assert v3["source"] == url and v3["address"] == "127.0.0.1"
    assert v3["rollback_of"] == 1
    assert https.hits["/echo.zip"] == 2

    # Recovery: the blob is stored; the server is gone and never asked.
    local.kill9()
    https.close()
    local.start()
    assert local.get("/health").json["checks"]["recovery"]["recovered"] == 1
    out = local.invoke("fromurl", "echo", data={"n": 8})
    assert out.status == 200 and out.json["data"] == {"n": 8}, out
    h = local.get("/v1/workers/fromurl/history").json
    assert [v["address"] for v in h["versions"]] == ["127.0.0.1"] * 3
    assert https.hits["/echo.zip"] == 2


def test_sha256_mismatch(local, https, package):
    """Spec: URL code worker — a body that does not hash to code.sha256 is
    refused, naming both digests."""
    wrong = sha(b"something else")
    r = create_url(local, https.url("/echo.zip"), wrong)
    refused(local, r, 403, "security_rejected", sha(package), wrong)
    # A malformed digest is refused before any fetch.
    r = create_url(local, https.url("/echo.zip"), "abc")
    assert r.status == 400 and r.code == "invalid_argument", r
    assert "code.sha256" in r.json["error"]["message"]
    assert https.hits.get("/echo.zip") == 1


# Address literals of every refused range.
LITERALS = [
    ("127.0.0.1", "loopback"),
    ("0.0.0.0", "unspecified"),
    ("10.1.2.3", "private"),
    ("172.16.5.4", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "CGNAT"),
    ("224.0.0.1", "multicast"),
    ("255.255.255.255", "reserved"),
    ("[::1]", "loopback"),
    ("[::]", "unspecified"),
    ("[::ffff:127.0.0.1]", "IPv4-mapped"),
    ("[::ffff:8.8.8.8]", "IPv4-mapped"),
    ("[fd00::1]", "unique-local"),
    ("[fc00::1]", "unique-local"),
    ("[fe80::1]", "link-local"),
    ("[ff02::1]", "multicast"),
    ("[64:ff9b::a00:1]", "NAT64"),
]


def test_refused_address_literals(strict):
    """Spec: Blocked URL — every refused range, by address literal."""
    for host, kind in LITERALS:
        r = create_url(strict, f"https://{host}/w.zip")
        refused(strict, r, 403, "security_rejected", kind,
                "code_source_allowed_networks")


# Names resolving into each refused range (the private /etc/hosts), and a
# name with one public and one private address: every address counts.
HOSTS = """\
127.0.0.1 localhost
10.9.8.7 private.test
172.31.0.1 private172.test
192.168.7.7 private192.test
169.254.169.254 metadata.test
100.100.100.100 cgnat.test
239.1.1.1 multicast.test
0.0.0.0 zero.test
::1 loop6.test
::ffff:10.0.0.1 mapped.test
fd12:3456::1 ula.test
fe80::1 ll6.test
93.184.216.34 mixed.test
10.0.0.9 mixed.test
127.0.0.1 code.test
"""

NAMES = [
    ("private.test", "10.9.8.7", "private"),
    ("private172.test", "172.31.0.1", "private"),
    ("private192.test", "192.168.7.7", "private"),
    ("metadata.test", "169.254.169.254", "link-local"),
    ("cgnat.test", "100.100.100.100", "CGNAT"),
    ("multicast.test", "239.1.1.1", "multicast"),
    ("zero.test", "0.0.0.0", "unspecified"),
    ("loop6.test", "::1", "loopback"),
    ("mapped.test", "::ffff:10.0.0.1", "IPv4-mapped"),
    ("ula.test", "fd12:3456::1", "unique-local"),
    ("ll6.test", "fe80::1", "link-local"),
    ("mixed.test", "10.0.0.9", "private"),
]


def test_refused_names_localhost(strict, https):
    """Spec: Blocked URL — `localhost` from the machine's /etc/hosts."""
    r = create_url(strict, https.url("/echo.zip", host="localhost"))
    refused(strict, r, 403, "security_rejected", "host localhost resolves",
            "loopback")
    assert "/echo.zip" not in https.hits


def test_refused_names(wm_builddir, tmp_path, pki):
    """Spec: Blocked URL — names resolving into each refused range; with
    127.0.0.1 allowed, a name for it is fetched, so the namespace works."""
    d = daemon(wm_builddir, tmp_path, pki, hosts=HOSTS)
    try:
        for name, addr, kind in NAMES:
            r = create_url(d, f"https://{name}/w.zip")
            refused(d, r, 403, "security_rejected",
                    f"host {name} resolves to {addr}", kind)
    finally:
        assert d.stop() == 0, d.log()


def test_names_pinned_to_the_checked_address(wm_builddir, tmp_path, pki,
                                             https, package):
    """A name (code.test, only in the daemon's /etc/hosts) is resolved
    once, checked, and connected to at that address: libcurl resolves
    nothing itself (it could not: no DNS knows code.test)."""
    d = daemon(wm_builddir, tmp_path, pki, hosts=HOSTS,
               code_source_allowed_networks="127.0.0.1/32")
    try:
        r = create_url(d, https.url("/echo.zip", host="code.test"),
                       sha(package))
        assert r.status == 201, (r, d.log())
        v = d.get(f"/v1/workers/{r.json['id']}/history").json["versions"][0]
        assert v["address"] == "127.0.0.1"
        assert d.invoke(r.json["id"], "echo").status == 200
    finally:
        assert d.stop() == 0, d.log()


def test_redirects(local, https, package):
    """A redirect is followed only after its target passes the same rules:
    one to a refused address is refused; one to an allowed URL is taken
    and the URL that answered is recorded."""
    target = "https://10.1.2.3/w.zip"
    r = create_url(local, https.url("/redirect?" + target))
    refused(local, r, 403, "security_rejected", f"redirected to {target}",
            "10.1.2.3", "private")
    r = create_url(local, https.url("/redirect?https://[::1]:1/x"))
    refused(local, r, 403, "security_rejected", "loopback")
    # https to http is a redirect to a refused scheme.
    r = create_url(local, https.url("/redirect?http://127.0.0.1:1/x"))
    refused(local, r, 403, "security_rejected", "http is refused")
    # A loop ends after a bounded number of hops.
    loop = https.url("/redirect?" + https.url("/redirect?" +
                     https.url("/redirect?" + https.url("/redirect?" +
                     https.url("/redirect?" + https.url("/redirect?" +
                     https.url("/echo.zip")))))))
    r = create_url(local, loop)
    refused(local, r, 403, "security_rejected", "more than 5 redirects")

    final = https.url("/echo.zip")
    r = create_url(local, https.url("/redirect?" + final), sha(package))
    assert r.status == 201, r
    v = local.get(f"/v1/workers/{r.json['id']}/history").json["versions"][0]
    assert v["source"] == https.url("/redirect?" + final)
    assert v["final_url"] == final and v["address"] == "127.0.0.1"


def test_oversize_body(wm_builddir, tmp_path, pki, https):
    """A body over code_fetch_max_bytes is refused, announced
    (Content-Length) or not (chunked)."""
    d = daemon(wm_builddir, tmp_path, pki,
               code_source_allowed_networks="127.0.0.1/32",
               code_fetch_max_bytes="4KiB")
    try:
        for path in ("/big", "/big-chunked"):
            r = create_url(d, https.url(path))
            refused(d, r, 403, "security_rejected",
                    "code_fetch_max_bytes (4096 bytes)")
    finally:
        assert d.stop() == 0, d.log()


def test_slow_body(wm_builddir, tmp_path, pki, https):
    """A body that trickles past code_fetch_timeout_ms is refused when the
    time is up, and the daemon answers others meanwhile."""
    d = daemon(wm_builddir, tmp_path, pki,
               code_source_allowed_networks="127.0.0.1/32",
               code_fetch_timeout_ms=1500)
    try:
        result = {}

        def slow():
            result["r"] = create_url(d, https.url("/slow"))

        t0 = time.monotonic()
        t = threading.Thread(target=slow)
        t.start()
        # The loop is not blocked by the fetch.
        time.sleep(0.3)
        h0 = time.monotonic()
        assert d.get("/health").status == 200
        assert time.monotonic() - h0 < 0.5
        t.join(30)
        elapsed = time.monotonic() - t0
        assert 1.4 < elapsed < SLOW_SECONDS - 1, elapsed
        refused(d, result["r"], 403, "security_rejected",
                "code_fetch_timeout_ms (1500 ms)")
    finally:
        assert d.stop() == 0, d.log()


def test_allowed_code_source_hosts(wm_builddir, tmp_path, pki, https,
                                   package):
    """A host outside allowed_code_source_hosts is refused before any
    connection; one in it is fetched (by name: localhost)."""
    d = daemon(wm_builddir, tmp_path, pki,
               code_source_allowed_networks="127.0.0.1/32,::1/128",
               allowed_code_source_hosts="code.example.com,localhost")
    try:
        r = create_url(d, https.url("/echo.zip"))
        refused(d, r, 403, "security_rejected", "host 127.0.0.1",
                "allowed_code_source_hosts")
        assert "/echo.zip" not in https.hits
        r = create_url(d, https.url("/echo.zip", host="localhost"),
                       sha(package))
        assert r.status == 201, (r, d.log())
    finally:
        assert d.stop() == 0, d.log()


def test_http_refused_by_default(local, plain_http, wm_builddir, tmp_path,
                                 pki, package):
    """http is refused unless code_source_allow_http; then it works."""
    r = create_url(local, plain_http.url("/echo.zip"), sha(package))
    refused(local, r, 403, "security_rejected", "http is refused",
            "code_source_allow_http")
    assert "/echo.zip" not in plain_http.hits
    d = daemon(wm_builddir, tmp_path / "http", pki,
               code_source_allowed_networks="127.0.0.1/32",
               code_source_allow_http="true")
    try:
        r = create_url(d, plain_http.url("/echo.zip"), sha(package))
        assert r.status == 201, r
    finally:
        assert d.stop() == 0, d.log()


def test_tls_needs_the_trusted_authority(wm_builddir, tmp_path, pki, https):
    """Without code_source_ca_file the test CA is not trusted: the fetch
    fails (load_failed, naming the certificate problem)."""
    d = Daemon(wm_builddir, tmp_path, engines=native_engine(wm_builddir),
               options={"code_source_allowed_networks": "127.0.0.1/32"})
    d.start()
    try:
        r = create_url(d, https.url("/echo.zip"))
        refused(d, r, 422, "load_failed", "certificate")
    finally:
        assert d.stop() == 0, d.log()


def test_credentials(wm_builddir, tmp_path, pki, https, package):
    """Credentials come from code_source_credentials_file only: the request
    may not carry any, the operator's are sent to their host."""
    creds = tmp_path / "creds"
    creds.write_text("# code sources\n127.0.0.1 = bearer s3cret\n")
    creds.chmod(0o600)
    d = daemon(wm_builddir, tmp_path / "d", pki,
               code_source_allowed_networks="127.0.0.1/32",
               code_source_credentials_file=str(creds))
    try:
        body = {"mime_type": MIME, "topic": "n",
                "code": {"url": https.url("/auth"),
                         "credentials": {"bearer": "x"}}}
        r = d.post("/v1/workers", body)
        assert r.status == 400 and r.code == "invalid_argument", r
        assert "code_source_credentials_file" in r.json["error"]["message"]
        r = create_url(d, https.url("/auth").replace("://", "://u:p@"))
        refused(d, r, 400, "invalid_argument", "user:password")
        assert "/auth" not in https.hits
        r = create_url(d, https.url("/auth"), sha(package))
        assert r.status == 201, (r, d.log())
        assert https.httpd.auth["/auth"] == "Bearer s3cret"
    finally:
        assert d.stop() == 0, d.log()
    # Without them the source answers 401: the fetch fails, nothing is made.
    local = daemon(wm_builddir, tmp_path / "e", pki,
                   code_source_allowed_networks="127.0.0.1/32")
    try:
        r = create_url(local, https.url("/auth"))
        refused(local, r, 422, "load_failed", "HTTP 401")
    finally:
        assert local.stop() == 0, local.log()


def test_reload_refused_keeps_the_version(local, https, package):
    """A reload whose fetch is refused changes nothing."""
    r = create_url(local, https.url("/echo.zip"), sha(package), name="r")
    assert r.status == 201, r
    r = local.put("/v1/workers/r/code",
                  {"code": {"url": "https://10.0.0.1/w.zip"}})
    assert r.status == 403 and r.code == "security_rejected", r
    w = local.get("/v1/workers/r").json
    assert w["version"] == 1
    assert len(local.get("/v1/workers/r/history").json["versions"]) == 1
    assert local.invoke("r", "echo").status == 200


def test_wmctl_create_and_history(local, https, package, wm_built):
    """wmctl create --url [--sha256] and wmctl history show the source and
    its address."""
    wmctl = str(wm_built("cli/wmctl"))
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
           "WM_SOCKET": str(local.socket)}

    def run(*args, expect=0):
        p = subprocess.run([wmctl, *args], env=env, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == expect, (args, p.stdout, p.stderr)
        return p

    url = https.url("/echo.zip")
    run("create", "--url", url, "--sha256", sha(package), "--mime-type",
        MIME, "--topic", "n", "--name", "w1")
    run("reload", "w1", "--url", url)
    out = run("history", "w1").stdout
    assert url in out and "127.0.0.1" in out, out
    assert json.loads(run("--json", "history", "w1").stdout)["versions"][1][
        "address"] == "127.0.0.1"
    p = run("create", "--url", "https://10.0.0.1/w.zip", "--mime-type",
            MIME, "--topic", "n", expect=1)
    assert p.stderr.startswith("wmctl: security_rejected: code.url"), \
        p.stderr


# ---- DNS rebinding ---------------------------------------------------------

class RebindingDNS:
    """A DNS server on 127.0.0.1:53 (glibc's resolver takes no other
    port) that answers the first A query for a name with 127.0.0.1 and
    every later one with 10.0.0.1, as a rebinding attacker's would; AAAA
    queries get no answer.  Counts the A queries per name."""

    def __init__(self):
        import socket
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.bind(("127.0.0.1", 53))
        except OSError as e:
            self.sock.close()
            pytest.fail(f"the rebinding test needs 127.0.0.1:53: {e}")
        self.queries = {}
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                data, peer = self.sock.recvfrom(512)
            except OSError:
                return
            try:
                self.sock.sendto(self.answer(data), peer)
            except (OSError, IndexError, ValueError):
                pass

    def answer(self, q):
        i, labels = 12, []
        while q[i]:
            labels.append(q[i + 1:i + 1 + q[i]].decode())
            i += 1 + q[i]
        qtype = int.from_bytes(q[i + 1:i + 3], "big")
        question = q[12:i + 5]
        name = ".".join(labels).lower()
        records = b""
        if qtype == 1:
            n = self.queries[name] = self.queries.get(name, 0) + 1
            addr = bytes([127, 0, 0, 1]) if n == 1 else bytes([10, 0, 0, 1])
            records = (b"\xc0\x0c" + (1).to_bytes(2, "big")
                       + (1).to_bytes(2, "big") + (0).to_bytes(4, "big")
                       + (4).to_bytes(2, "big") + addr)
        header = (q[:2] + b"\x81\x80" + (1).to_bytes(2, "big")
                  + (1 if records else 0).to_bytes(2, "big") + b"\0\0\0\0")
        return header + question + records

    def close(self):
        self.sock.close()


class RebindingDaemon(NamespacedDaemon):
    """NamespacedDaemon whose /etc/resolv.conf names the rebinding
    server."""

    def argv(self):
        resolv = self.tmp / "resolv.conf"
        resolv.write_text("nameserver 127.0.0.1\noptions attempts:1\n")
        argv = super().argv()
        i = argv.index('mount --bind "$0" /etc/hosts && exec "$@"')
        argv[i] = ('mount --bind "$0" /etc/hosts && '
                   f'mount --bind {resolv} /etc/resolv.conf && exec "$@"')
        return argv


def test_no_dns_rebinding(wm_builddir, tmp_path, pki, plain_http, package):
    """The name is resolved once: libcurl connects to the address that was
    checked and never asks the resolver again, so a name that answers
    127.0.0.1 (allowed here) and then 10.0.0.1 fetches from 127.0.0.1."""
    dns = RebindingDNS()
    d = RebindingDaemon(wm_builddir, tmp_path, hosts="127.0.0.1 localhost\n",
                        engines=native_engine(wm_builddir),
                        options={"code_source_allowed_networks":
                                 "127.0.0.1/32",
                                 "code_source_allow_http": "true"})
    d.start()
    try:
        r = create_url(d, plain_http.url("/echo.zip", host="rebind.test"),
                       sha(package))
        assert r.status == 201, (r, d.log())
        v = d.get(f"/v1/workers/{r.json['id']}/history").json["versions"][0]
        assert v["address"] == "127.0.0.1"
        assert dns.queries.get("rebind.test") == 1, dns.queries
        # The next fetch resolves anew: the rebound address is refused.
        r = create_url(d, plain_http.url("/echo.zip", host="rebind.test"))
        assert r.status == 403 and "10.0.0.1" in r.json["error"]["message"]
    finally:
        assert d.stop() == 0, d.log()
        dns.close()
