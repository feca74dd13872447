"""test_client_dotnet.py — the .NET client library (clients/dotnet:
WorkManagerClient in Virtufin.WorkManager.Client.dll, issue 25) against a
real daemon: tests/clients/dotnet, a console program built here with the
installed SDK (offline) against the build tree's assembly, drives the
original client's async methods and ours over the control socket and
over TCP with the token, and checks the typed exceptions.

Without a .NET SDK it skips by name (tests/expected-skips); with
DOTNET_MUST_WORK=1 a skip is a failure.
"""

import os
import shutil
import subprocess
from pathlib import Path

from clients_lib import TOKEN, daemon  # noqa: F401
from dotnet_lib import need_dotnet, tfm

PROGRAM = Path(__file__).resolve().parents[1] / "clients" / "dotnet"


def test_dotnet_client_against_the_daemon(wm_builddir, daemon,  # noqa: F811
                                          tmp_path):
    dll = need_dotnet(wm_builddir,
                      "Virtufin.WorkManager.Client.dll").resolve()
    src = tmp_path / "src"
    shutil.copytree(PROGRAM, src)
    (tmp_path / "no-feed").mkdir()
    env = dict(os.environ, DOTNET_CLI_TELEMETRY_OPTOUT="1",
               DOTNET_NOLOGO="1", DOTNET_SKIP_FIRST_TIME_EXPERIENCE="1")
    b = subprocess.run(["dotnet", "build", str(src), "-c", "Release",
                        "--nologo", "-v", "q", "--artifacts-path",
                        str(tmp_path / "art"), "--source",
                        str(tmp_path / "no-feed"), f"-p:WmClient={dll}",
                        f"-p:TargetFramework={tfm(wm_builddir)}"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert b.returncode == 0, b.stdout + b.stderr
    exe = next((tmp_path / "art" / "bin").glob("*/release/ClientTest.dll"))
    p = subprocess.run(["dotnet", str(exe), str(daemon.socket), daemon.url,
                        TOKEN], capture_output=True, text=True, env=env,
                       timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "ok", \
        f"status {p.returncode}\n{p.stdout}\n{p.stderr}\n" + \
        daemon.log()[-3000:]
