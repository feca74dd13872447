"""Helpers of the client libraries' tests (test_client_*.py, issue 25):
one daemon for a whole module, on its control socket and on a TCP
listener with a known token, so that each library is driven both ways
without a daemon per test (the tests make workers of their own names and
delete them); and one daemon serving HTTPS only (tlsd), for each library's
https:// test, made with test_tls's CA, certificates and daemon.
"""

from pathlib import Path

import pytest

from test_tls import pki, tls_daemon  # noqa: F401 (pki: a fixture)
from wm import Daemon, free_port

CLIENTS = Path(__file__).resolve().parents[2] / "clients"
MIME = "application/x-wm-test"
TOKEN = "client-test-token-0123456789"


@pytest.fixture(scope="module")
def daemon(wm_builddir, tmp_path_factory):
    """The module's daemon; .url is its TCP listener's, .token_file holds
    TOKEN (the daemon's token_file)."""
    tmp = tmp_path_factory.mktemp("clients")
    token_file = tmp / "token"
    token_file.write_text(TOKEN + "\n")
    port = free_port()
    d = Daemon(wm_builddir, tmp, options={"listen": f"127.0.0.1:{port}"})
    d.url = f"http://127.0.0.1:{port}"
    d.token_file = token_file
    d.start()
    yield d
    rc = d.stop()
    d.check_clean()
    assert rc == 0, d.log()


@pytest.fixture(scope="module")
def tlsd(wm_builddir, tmp_path_factory, pki):  # noqa: F811
    """A daemon on HTTPS only, its certificate signed by pki's ca, asking
    for client certificates of that CA (tls_client_cert = required): .url
    is https://127.0.0.1:PORT; .token is a tenant-admin token of tenant acme,
    the tenant the client certificate (.cert, .key) speaks for; .ca signs
    the daemon's certificate, .other_ca does not."""
    d = tls_daemon(wm_builddir, tmp_path_factory.mktemp("clients-tls"), pki,
                   tls_client_ca_file=pki / "ca.pem",
                   tls_client_cert="required")
    try:
        assert d.post("/v1/tenants", {"name": "acme"}).status == 201
        r = d.post("/v1/tokens", {"tenant": "acme", "role": "tenant-admin"})
        assert r.status == 201, r
        d.token = r.json["token"]
        d.url = f"https://127.0.0.1:{d.port}"
        d.ca, d.other_ca = pki / "ca.pem", pki / "otherca.pem"
        d.cert, d.key = pki / "acme.pem", pki / "acme.key"
        yield d
    finally:
        assert d.stop() == 0, d.log()
