"""tests/conftest.py — pytest's root conftest (rootdir: tests/).

Fixtures every Python test may use:

  wm_repo      the repository's top directory (a Path).
  wm_builddir  the build tree under test: $WM_BUILDDIR, else build/ of the
               repository (scripts/run's); scripts/test points it at its gcc
               --enable-debug build.
  wm_built     wm_built("tests/hostdriver/wm-hostdriver") is the path of a
               file the build must have made; a missing one fails the test
               (tests never pass vacuously, nor skip for want of a build).
  wm_python    Debian's interpreter, for the subprocesses a test starts.

The integration tests' daemon, the wmd fixture (and its marker), is
tests/integration/conftest.py's.

The suite runs under Debian's /usr/bin/python3 only: python3-pytest and
python3-flatbuffers are Debian packages, invisible to a pyenv python3 that may
come first on PATH.  WM_ANY_PYTHON=1 lifts the check.

For scripts/test (DESIGN §11, tests/check-skips): when WM_SKIPS_FILE is set,
every skipped test is appended to it as `tests/<node id><TAB><reason>`; when
WM_COUNTS_FILE is set, the run's counts are written there as `passed=N`,
`failed=N`, `skipped=N` lines (xfailed and non-strict xpassed count as
passed, errors as failed).  Both hold under pytest-xdist (`-n 2`): the
controller writes them from every worker's reports.
"""

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DEBIAN_PYTHON = "/usr/bin/python3"

# Build trees are not test suites, whatever copies of tests they hold.
collect_ignore_glob = ["build", "build-*"]

_id_prefix = "tests/"


def builddir():
    """The build tree under test (see the module's comment)."""
    return Path(os.environ.get("WM_BUILDDIR") or REPO / "build").resolve()


def pytest_configure(config):
    global _id_prefix
    if sys.base_prefix != "/usr" and os.environ.get("WM_ANY_PYTHON") != "1":
        raise pytest.UsageError(
            f"run the tests with Debian's Python: {DEBIAN_PYTHON} -m pytest "
            f"(this is {sys.executable}; WM_ANY_PYTHON=1 to insist)")
    # Node ids are relative to the rootdir; skips are named from the
    # repository's top, as tests/expected-skips lists them.
    rel = os.path.relpath(config.rootpath, REPO)
    _id_prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"


def pytest_report_header(config):
    return [f"workmanager build tree: {builddir()} (WM_BUILDDIR)"]


def _skip_reason(report):
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
    else:
        reason = str(longrepr)
    if reason.startswith("Skipped: "):
        reason = reason[len("Skipped: "):]
    return " ".join(reason.split()) or "no reason given"


def _record_skip(report):
    path = os.environ.get("WM_SKIPS_FILE")
    # Under pytest-xdist (scripts/test runs the pytest stage with -n 2) a
    # worker's reports reach the controller, whose hooks record them: a
    # worker records nothing itself, or each skip would be listed twice.
    if not path or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{_id_prefix}{report.nodeid}\t{_skip_reason(report)}\n")


def pytest_runtest_logreport(report):
    # An xfail is reported as skipped with `wasxfail`: it ran, it is no skip.
    if report.skipped and not hasattr(report, "wasxfail"):
        _record_skip(report)


def pytest_collectreport(report):
    # A module-level skip (pytest.importorskip, allow_module_level=True).
    if report.skipped:
        _record_skip(report)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    path = os.environ.get("WM_COUNTS_FILE")
    if not path:
        return
    stats = terminalreporter.stats

    def count(*keys):
        return sum(len(stats.get(k, [])) for k in keys)

    with open(path, "w", encoding="utf-8") as f:
        f.write(f"passed={count('passed', 'xfailed', 'xpassed')}\n")
        f.write(f"failed={count('failed', 'error')}\n")
        f.write(f"skipped={count('skipped')}\n")


@pytest.fixture(scope="session")
def wm_repo():
    return REPO


@pytest.fixture(scope="session")
def wm_builddir():
    return builddir()


@pytest.fixture(scope="session")
def wm_python():
    return DEBIAN_PYTHON


@pytest.fixture(scope="session")
def wm_built():
    tree = builddir()

    def built(relpath):
        path = tree / relpath
        if not path.exists():
            pytest.fail(f"{relpath} is not built in {tree} "
                        f"(make -C {tree} check builds it)", pytrace=False)
        return path

    return built
