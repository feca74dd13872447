"""tests/integration/conftest.py — the daemon fixture of the integration
tests (STYLE §12), written once for every test_*.py here.

  wmd   a workmanagerd of its own for the test (wm.Daemon: state, runtime
        directory, control socket and engines.d under the test's
        tmp_path), started before the test and stopped after it: the stop
        must exit 0 and leave a clean log (wm.Daemon.check_clean: no ALERT
        line, no sanitizer report), even when the test stopped the daemon
        itself, and no process of the daemon's tree may outlive it (no
        orphaned host, zygote or launcher).

After a test that passed, with its daemon still running, the fixture
first brings the daemon back to where it started (wm.Daemon.settle): it
closes the test's event streams and stops every worker, then waits until
the daemon's processes are those of its start (the master, its launcher,
the zygotes; besides them only the warm pools' hosts and their inits) and
the master's and the launcher's descriptors are back to their start's,
kind by kind (a socket for a socket; the launcher's start is read once it
has set itself up).  The tolerance: journal segments (the journal opens
them as it needs them; a deleted one still open is a leak), the memfd of
an in-process library the master still maps (a library dlclose() cannot
unload keeps its descriptor: hosts/native/loader.c), one socket in the
master per pool host (its channel); the launcher's are not compared while
pool hosts run.  So a host, channel, file or connection that a test's
work leaves behind fails the test, which names it (pid and command line;
descriptor and what it points at).  The fixture's stop thus stops a daemon
whose workers are stopped: stopping a daemon with running hosts stays the
business of the tests that stop their own daemons (test_daemon.py,
test_recovery.py and the others' inline daemons).

A test that leaves something on purpose says what and why, and is not
settled (its stop is still checked):

    @pytest.mark.leaves("what the daemon still holds after it, and why")

What daemon a module (or one test) gets is its `wmd` marker's:

    pytestmark = pytest.mark.wmd(make=daemon, **kwargs)

makes it with daemon(builddir, tmp_path, **kwargs).  make defaults to
wm.Daemon, so `pytest.mark.wmd(options={...})` is a daemon with the test
host and those configuration keys; a module's own make adds its engines
(and skips what the machine lacks, as pyhost_lib.daemon does).  make may
return the daemon started or not; the fixture starts it if not.  No marker
is wm.Daemon(builddir, tmp_path).  (make is a keyword: a marker given one
function alone would take it for the function it decorates.)

A test parametrised indirectly on wmd
(`@pytest.mark.parametrize("wmd", [...], indirect=True)`), or every test
under a marker that says `params=[...]` (and optionally `ids=`, as
pytest.mark.parametrize takes them), hands the value to make as its third
argument: daemon(builddir, tmp_path, param, **kwargs).
"""

import pytest

from wm import Daemon

# The marker's own keywords; the others go to make.
_MARKER_KEYS = ("make", "params", "ids")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "wmd(make=wm.Daemon, params=None, ids=None, **kwargs): how the wmd "
        "fixture makes the test's daemon (tests/integration/conftest.py)")
    config.addinivalue_line(
        "markers",
        "leaves(why): the test leaves its daemon holding more than at start "
        "(why); the wmd fixture does not settle it")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # The outcome of the test's phases, for the fixture's teardown.
    report = (yield).get_result()
    setattr(item, f"wm_{report.when}", report)


def _passed(node):
    call = getattr(node, "wm_call", None)
    return call is not None and call.passed


def pytest_generate_tests(metafunc):
    if "wmd" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("wmd")
    if marker is not None and "params" in marker.kwargs:
        metafunc.parametrize("wmd", marker.kwargs["params"], indirect=True,
                             ids=marker.kwargs.get("ids"))


def _recipe(node):
    """make and its keyword arguments, from the node's closest marker."""
    marker = node.get_closest_marker("wmd")
    if marker is None:
        return Daemon, {}
    make = marker.kwargs.get("make", Daemon)
    kwargs = {k: v for k, v in marker.kwargs.items()
              if k not in _MARKER_KEYS}
    return make, kwargs


@pytest.fixture
def wmd(request, wm_builddir, tmp_path):
    make, kwargs = _recipe(request.node)
    args = (request.param,) if hasattr(request, "param") else ()
    d = make(wm_builddir, tmp_path, *args, **kwargs)
    if d.proc is None:
        d.start()
    yield d
    try:
        if (_passed(request.node) and d.proc.poll() is None
                and request.node.get_closest_marker("leaves") is None):
            d.settle()
    finally:
        rc = d.stop()
        d.check_clean()
    assert rc == 0, d.log()
