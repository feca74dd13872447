"""test_client_js.py — the JavaScript client library (clients/js, issue
25) against a real daemon: tests/clients/js/client_test.mjs, run with
Node, drives the original clients' operations and ours over the control
socket (node:http) and over TCP with the token (fetch), and checks the
typed errors; client_tls_test.mjs does a create and an invoke over https
(node:https with a CA file and a client certificate) and refuses a daemon
whose certificate another CA signed.  Node 18 or later is a test dependency
(scripts/debian-packages: nodejs).
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from clients_lib import CLIENTS, daemon, pki, tlsd  # noqa: F401

SCRIPTS = Path(__file__).resolve().parents[1] / "clients" / "js"
SCRIPT = SCRIPTS / "client_test.mjs"


def need_node():
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (Debian package nodejs, listed "
                    "in scripts/debian-packages)")
    version = subprocess.run([node, "--version"], capture_output=True,
                             text=True).stdout.strip()
    assert int(version.lstrip("v").split(".")[0]) >= 18, \
        f"the client needs Node 18 or later, not {version}"
    return node


def test_js_client_against_the_daemon(daemon):  # noqa: F811
    node = need_node()
    p = subprocess.run([node, str(SCRIPT), str(CLIENTS / "js"),
                        str(daemon.socket), daemon.url,
                        str(daemon.token_file)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "ok", \
        f"status {p.returncode}\n{p.stdout}\n{p.stderr}\n" + daemon.log()[-3000:]


def test_js_client_over_https(tlsd):  # noqa: F811
    p = subprocess.run([need_node(), str(SCRIPTS / "client_tls_test.mjs"),
                        str(CLIENTS / "js"), tlsd.url, tlsd.token,
                        str(tlsd.ca), str(tlsd.cert), str(tlsd.key),
                        str(tlsd.other_ca)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "ok", \
        f"status {p.returncode}\n{p.stdout}\n{p.stderr}\n" + \
        tlsd.log()[-3000:]
