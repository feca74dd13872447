"""Helpers of the .NET engine's tests (test_dotnet_*.py, issue 10): the
engine descriptor of the build tree's wm-host-dotnet and a daemon with it,
the sample workers of tests/workers/dotnet built with the installed SDK
(offline: the only package source is an empty folder), and nupkgs made of
their output.

Without a .NET SDK (or a build without the host) the tests skip, named in
tests/expected-skips; with DOTNET_MUST_WORK=1 (set where dotnet is
installed: scripts/test) a skip is a failure instead.
"""

import io
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from wm import Daemon

MIME = "application/x-dotnet-dll"
WORKERS = Path(__file__).resolve().parent.parent / "workers" / "dotnet"


def need_dotnet(builddir, built="wm-host-dotnet"):
    """The path of built (a file of the build tree's hosts/dotnet/: by
    default the host); skips (or fails, DOTNET_MUST_WORK=1) without the
    SDK or that file."""
    host = Path(builddir) / "hosts" / "dotnet" / built
    why = None
    if shutil.which("dotnet") is None:
        why = "no dotnet on PATH: the .NET engine is not built"
    elif not host.exists():
        why = f"{host} is not built (configure found no .NET SDK)"
    if why:
        if os.environ.get("DOTNET_MUST_WORK") == "1":
            pytest.fail(f"DOTNET_MUST_WORK=1 but {why}")
        pytest.skip(why)
    return host


def dotnet_engine(host):
    return {"dotnet.engine": "name = dotnet\n"
                             f"mime_type = {MIME}, text/x-csharp\n"
                             "language = C#\n"
                             f"host = {host}\n"
                             "spawn = exec\nrole = dotnet\nprotocol = 1\n"}


def daemon(builddir, tmp_path, **options):
    """A daemon with the build's .NET engine and those options, and
    WM_SANDBOX_DEBUG passed on (skips as need_dotnet() does)."""
    return Daemon(builddir, tmp_path, options=options,
                  engines=dotnet_engine(need_dotnet(builddir)),
                  env=sandbox_debug())


def tfm(builddir):
    """net<major>.0 of the build's SDK (configure's DOTNET_MAJOR), which
    the workers target as the host's bridge does."""
    for line in (Path(builddir) / "Makefile").read_text().splitlines():
        if line.startswith("DOTNET_MAJOR = "):
            return f"net{line.split('=', 1)[1].strip()}.0"
    return "net10.0"


def build_worker(builddir, project, out, replace=None):
    """Builds tests/workers/dotnet/<project> into out (a fresh folder) and
    returns the folder holding its dll.  replace: {old: new} applied to
    the sources first (for versions of one worker)."""
    src = out / "src"
    shutil.copytree(WORKERS / project, src)
    for f in src.glob("*.cs"):
        text = f.read_text()
        for old, new in (replace or {}).items():
            text = text.replace(old, new)
        f.write_text(text)
    feed = out / "no-feed"
    feed.mkdir()
    devkit = (Path(builddir) / "hosts" / "dotnet" /
              "Virtufin.Worker.DevKit.dll").resolve()
    assert devkit.exists(), f"{devkit} is built by make check"
    env = dict(os.environ, DOTNET_CLI_TELEMETRY_OPTOUT="1", DOTNET_NOLOGO="1",
               DOTNET_SKIP_FIRST_TIME_EXPERIENCE="1")
    r = subprocess.run(["dotnet", "build", str(src), "-c", "Release",
                        "--nologo", "-v", "q", "--artifacts-path",
                        str(out / "art"), "--source", str(feed),
                        f"-p:DevKit={devkit}",
                        f"-p:TargetFramework={tfm(builddir)}"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    bins = list((out / "art" / "bin").glob("*/release"))
    assert len(bins) == 1, bins
    return bins[0], r.stdout + r.stderr


def nupkg(folder, tfm="net8.0", extra=None):
    """A nupkg (zip) with folder's dlls under lib/<tfm>/ (net8.0: not
    above any runtime the host runs on); extra: more {name: bytes}
    entries."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("Sample.nuspec", "<package/>")
        for dll in sorted(Path(folder).glob("*.dll")):
            if dll.name != "Virtufin.Worker.DevKit.dll":
                z.write(dll, f"lib/{tfm}/{dll.name}")
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return buf.getvalue()


def sandbox_debug():
    """WM_SANDBOX_DEBUG passed on to the daemon (and so to its hosts):
    how sandbox/role_dotnet.c's table was derived (log mode)."""
    v = os.environ.get("WM_SANDBOX_DEBUG")
    return {"WM_SANDBOX_DEBUG": v} if v else {}
