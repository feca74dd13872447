"""Helpers of the client libraries' tests (test_client_*.py, issue 25):
one daemon for a whole module, on its control socket and on a TCP
listener with a known token, so that each library is driven both ways
without a daemon per test (the tests make workers of their own names and
delete them).
"""

from pathlib import Path

import pytest

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
