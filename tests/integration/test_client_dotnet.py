"""test_client_dotnet.py — the .NET client library (clients/dotnet:
WorkManagerClient in Virtufin.WorkManager.Client.dll, issue 25) against a
real daemon: tests/clients/dotnet, a console program built here with the
installed SDK (offline) against the build tree's assembly, drives the
original client's async methods and ours over the control socket and
over TCP with the token, and checks the typed exceptions; and over https
with a CA file and a client certificate, refusing a daemon another CA
signed.

Without a .NET SDK it skips by name (tests/expected-skips); with
DOTNET_MUST_WORK=1 a skip is a failure.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from clients_lib import TOKEN, daemon, pki, tlsd  # noqa: F401
from dotnet_lib import need_dotnet, tfm

PROGRAM = Path(__file__).resolve().parents[1] / "clients" / "dotnet"


@pytest.fixture(scope="module")
def program(wm_builddir, tmp_path_factory):
    """tests/clients/dotnet built once for the module: the command that
    runs it, and its environment."""
    dll = need_dotnet(wm_builddir,
                      "Virtufin.WorkManager.Client.dll").resolve()
    tmp = tmp_path_factory.mktemp("client-dotnet")
    src = tmp / "src"
    shutil.copytree(PROGRAM, src)
    (tmp / "no-feed").mkdir()
    env = dict(os.environ, DOTNET_CLI_TELEMETRY_OPTOUT="1",
               DOTNET_NOLOGO="1", DOTNET_SKIP_FIRST_TIME_EXPERIENCE="1")
    b = subprocess.run(["dotnet", "build", str(src), "-c", "Release",
                        "--nologo", "-v", "q", "--artifacts-path",
                        str(tmp / "art"), "--source",
                        str(tmp / "no-feed"), f"-p:WmClient={dll}",
                        f"-p:TargetFramework={tfm(wm_builddir)}"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert b.returncode == 0, b.stdout + b.stderr
    exe = next((tmp / "art" / "bin").glob("*/release/ClientTest.dll"))
    return ["dotnet", str(exe)], env


def run(program, d, *args):
    cmd, env = program
    p = subprocess.run([*cmd, *map(str, args)], capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "ok", \
        f"status {p.returncode}\n{p.stdout}\n{p.stderr}\n" + \
        d.log()[-3000:]


def test_dotnet_client_against_the_daemon(program, daemon):  # noqa: F811
    run(program, daemon, daemon.socket, daemon.url, TOKEN)


def test_dotnet_client_over_https(program, tlsd):  # noqa: F811
    run(program, tlsd, "tls", tlsd.url, tlsd.token, tlsd.ca, tlsd.cert,
        tlsd.key, tlsd.other_ca)
