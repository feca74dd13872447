"""TLS on the TCP listener (issue 22, "TLS"): HTTPS with the bearer token,
TLS 1.2 at least, no answer to plain HTTP on the TLS port, client
certificates (required: refused without one or with one of another CA,
accepted with one of tls_client_ca_file, its CN the tenant in the audit
trail), wmctl over HTTPS with --ca-file / WM_CA_FILE, /health's TLS
section, and start-up refusing plain HTTP except on loopback with
listen_plaintext = loopback.

The CA and the certificates are made by openssl(1) once per module, in a
temporary directory: nothing is kept in the tree.
"""
import http.client
import json
import socket
import ssl
import subprocess
import time

import pytest

from wm import Daemon, free_port, metric

TOKEN = "tls-test-token-0123456789"


def openssl(*args, cwd):
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True,
                   capture_output=True, timeout=60)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", f"/CN={name}", "-keyout", f"{name}.key",
            "-out", f"{name}.pem", cwd=d)


def make_cert(d, ca, name, cn, ext):
    (d / f"{name}.ext").write_text(ext + "\n")
    openssl("req", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={cn}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem",
            "-CAkey", f"{ca}.key", "-CAcreateserial", "-days", "2",
            "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    make_ca(d, "ca")
    make_ca(d, "otherca")
    make_cert(d, "ca", "server", "localhost",
              "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
              "extendedKeyUsage=serverAuth")
    make_cert(d, "ca", "acme", "acme", "extendedKeyUsage=clientAuth")
    make_cert(d, "otherca", "stranger", "acme", "extendedKeyUsage=clientAuth")
    return d


def tls_daemon(wm_builddir, tmp_path, pki, **extra):
    port = free_port()
    (tmp_path / "token").write_text(TOKEN + "\n")
    opts = {"listen": f"127.0.0.1:{port}",
            "listen_plaintext": "no",
            "tls_cert_file": pki / "server.pem",
            "tls_key_file": pki / "server.key"}
    opts.update(extra)
    d = Daemon(wm_builddir, tmp_path, options=opts)
    d.port = port
    return d.start()


def client_ctx(pki, cert=None, **versions):
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    for k, v in versions.items():
        setattr(ctx, k, v)
    if cert:
        ctx.load_cert_chain(str(pki / f"{cert}.pem"), str(pki / f"{cert}.key"))
    return ctx


def https(d, ctx, method, path, body=None, token=TOKEN):
    conn = http.client.HTTPSConnection("127.0.0.1", d.port, context=ctx,
                                       timeout=10)
    hdrs = {"Authorization": f"Bearer {token}"} if token else {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def refused(d, ctx):
    """The TLS handshake (or the first read after it, in TLS 1.3) fails:
    no HTTP answer."""
    with pytest.raises((ssl.SSLError, ConnectionError,
                        http.client.RemoteDisconnected)):
        https(d, ctx, "GET", "/v1/workers")


def test_https_with_token_and_health(wm_builddir, tmp_path, pki):
    d = tls_daemon(wm_builddir, tmp_path, pki)
    try:
        ctx = client_ctx(pki)
        status, body = https(d, ctx, "GET", "/v1/workers")
        assert status == 200, body
        status, body = https(d, ctx, "GET", "/v1/workers", token=None)
        assert status == 401, body
        # A large answer crosses several TLS records and partial writes.
        status, body = https(d, ctx, "GET", "/health")
        tls = json.loads(body)["tls"]
        assert tls["enabled"] is True and tls["min_version"] == "1.2"
        assert tls["client_cert"] == "none"
        assert tls["days_left"] in (0, 1, 2), tls
        assert tls["not_after"].endswith("Z"), tls
        # Keep-alive: two requests on one TLS connection.
        conn = http.client.HTTPSConnection("127.0.0.1", d.port, context=ctx,
                                           timeout=10)
        for _ in range(2):
            conn.request("GET", "/health/live")
            r = conn.getresponse()
            assert r.status == 200 and b"Healthy" in r.read()
        conn.close()
        assert "listening on https 127.0.0.1:" in d.log()
    finally:
        assert d.stop() == 0, d.log()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tls11_refused_tls12_served(wm_builddir, tmp_path, pki):
    d = tls_daemon(wm_builddir, tmp_path, pki)
    try:
        old = client_ctx(pki, minimum_version=ssl.TLSVersion.TLSv1_1,
                         maximum_version=ssl.TLSVersion.TLSv1_1)
        old.set_ciphers("DEFAULT:@SECLEVEL=0")
        refused(d, old)
        # The daemon refused it (not the client): its log says why.
        d.wait_for(lambda: "TLS handshake failed" in d.log(),
                   what="the handshake failure in the log")
        line = next(l for l in d.log().splitlines()
                    if "TLS handshake failed" in l)
        assert "tcp 127.0.0.1:" in line and "unsupported protocol" in line, \
            line
        tls12 = client_ctx(pki, maximum_version=ssl.TLSVersion.TLSv1_2)
        status, _ = https(d, tls12, "GET", "/v1/workers")
        assert status == 200
        failures = d.get("/health").json["tls"]
        assert failures["handshake_failures"] >= 1, failures
        assert metric(d, "workmanager_tls_handshake_failures_total") >= 1
        assert metric(d, "workmanager_tls_certificate_expiry_seconds") \
            > time.time()
    finally:
        assert d.stop() == 0, d.log()


def test_plain_http_to_the_tls_port_gets_no_answer(wm_builddir, tmp_path,
                                                   pki):
    d = tls_daemon(wm_builddir, tmp_path, pki)
    try:
        with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
            s.sendall(b"GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    got += chunk
            except ConnectionResetError:
                pass
        assert b"HTTP/" not in got, got
        # The daemon serves on.
        status, _ = https(d, client_ctx(pki), "GET", "/health/live")
        assert status == 200
    finally:
        assert d.stop() == 0, d.log()


def test_client_certificate_required(wm_builddir, tmp_path, pki):
    d = tls_daemon(wm_builddir, tmp_path, pki,
                   tls_client_ca_file=pki / "ca.pem",
                   tls_client_cert="required")
    try:
        refused(d, client_ctx(pki))
        refused(d, client_ctx(pki, cert="stranger"))
        ctx = client_ctx(pki, cert="acme")
        status, body = https(d, ctx, "GET", "/v1/workers")
        assert status == 200, body
        # A mutation: the audit trail names the certificate's tenant.
        status, body = https(d, ctx, "DELETE", "/v1/workers/nosuchworker")
        assert status == 404, body
        audit = [json.loads(l) for l in
                 (d.state / "audit.log").read_text().splitlines()]
        assert any("tls cn=acme" in a["peer"] for a in audit), audit
        tls = d.get("/health").json["tls"]
        assert tls["client_cert"] == "required"
        # The certificate speaks for tenant acme: a token of another
        # tenant is refused over it, one of acme's passes.
        toks = {}
        for tenant in ("acme", "other"):
            assert d.post("/v1/tenants", {"name": tenant}).status == 201
            r = d.post("/v1/tokens", {"tenant": tenant, "role": "reader"})
            assert r.status == 201, r
            toks[tenant] = r.json["token"]
        status, body = https(d, ctx, "GET", "/v1/workers",
                             token=toks["other"])
        assert status == 403 and b"speaks for tenant acme" in body, body
        status, body = https(d, ctx, "GET", "/v1/workers",
                             token=toks["acme"])
        assert status == 200, body
    finally:
        assert d.stop() == 0, d.log()


def wmctl(wm_built, *args, env=None):
    e = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    e.update(env or {})
    return subprocess.run([str(wm_built("cli/wmctl")), *map(str, args)],
                          env=e, capture_output=True, text=True, timeout=60)


def test_wmctl_https_ca_file(wm_built, wm_builddir, tmp_path, pki):
    d = tls_daemon(wm_builddir, tmp_path, pki)
    try:
        url = f"https://127.0.0.1:{d.port}"
        tok = tmp_path / "token"
        p = wmctl(wm_built, "--url", url, "--token-file", tok,
                  "--ca-file", pki / "ca.pem", "list")
        assert p.returncode == 0, p.stderr
        p = wmctl(wm_built, "--url", url, "--token-file", tok, "health",
                  env={"WM_CA_FILE": str(pki / "ca.pem")})
        assert p.returncode == 0, p.stderr
        # Without the CA the daemon's certificate is not trusted.
        p = wmctl(wm_built, "--url", url, "--token-file", tok, "list",
                  env={"SSL_CERT_FILE": str(pki / "otherca.pem")})
        assert p.returncode != 0
        assert "certificate" in p.stderr, p.stderr
        p = wmctl(wm_built, "--url", f"http://127.0.0.1:{d.port}",
                  "--ca-file", pki / "ca.pem", "list")
        assert p.returncode == 2 and "https://" in p.stderr, p.stderr
    finally:
        assert d.stop() == 0, d.log()


def test_wmctl_client_certificate(wm_built, wm_builddir, tmp_path, pki):
    d = tls_daemon(wm_builddir, tmp_path, pki,
                   tls_client_ca_file=pki / "ca.pem",
                   tls_client_cert="required")
    try:
        url = f"https://127.0.0.1:{d.port}"
        p = wmctl(wm_built, "--url", url, "--token-file", tmp_path / "token",
                  "--ca-file", pki / "ca.pem", "--cert", pki / "acme.pem",
                  "--key", pki / "acme.key", "list")
        assert p.returncode == 0, p.stderr
    finally:
        assert d.stop() == 0, d.log()


def start_fails(wm_builddir, tmp_path, options):
    (tmp_path / "token").write_text(TOKEN + "\n")
    d = Daemon(wm_builddir, tmp_path, options=options)
    (tmp_path / "none.conf").write_text("# empty\n")
    p = subprocess.run(d.argv(), capture_output=True, text=True, timeout=30,
                       env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    assert p.returncode != 0, p.stderr
    return p.stderr


@pytest.mark.parametrize("host,plaintext,says", [
    ("0.0.0.0", "loopback", "not a loopback one"),
    ("127.0.0.1", "no", "listen_plaintext = loopback"),
])
def test_plaintext_refused(wm_builddir, tmp_path, host, plaintext, says):
    err = start_fails(wm_builddir, tmp_path, {
        "listen": f"{host}:{free_port()}", "listen_plaintext": plaintext})
    assert "refusing plain HTTP" in err and says in err, err
    assert "tls_cert_file" in err, err


def test_key_not_matching_the_certificate_refused(wm_builddir, tmp_path, pki):
    err = start_fails(wm_builddir, tmp_path, {
        "listen": f"127.0.0.1:{free_port()}",
        "tls_cert_file": pki / "server.pem",
        "tls_key_file": pki / "acme.key"})
    assert "tls_key_file" in err and "does not match" in err, err


def test_plaintext_on_loopback_when_allowed(wm_builddir, tmp_path):
    port = free_port()
    (tmp_path / "token").write_text(TOKEN + "\n")
    d = Daemon(wm_builddir, tmp_path,
               options={"listen": f"127.0.0.1:{port}",
                        "listen_plaintext": "loopback"}).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/v1/workers",
                     headers={"Authorization": f"Bearer {TOKEN}"})
        assert conn.getresponse().status == 200
        conn.close()
        assert d.get("/health").json["tls"] == {"enabled": False}
    finally:
        assert d.stop() == 0, d.log()
