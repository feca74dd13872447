"""tests/integration/conftest.py — the daemon fixture of the integration
tests (STYLE §12), written once for every test_*.py here.

  wmd   a workmanagerd of its own for the test (wm.Daemon: state, runtime
        directory, control socket and engines.d under the test's
        tmp_path), started before the test and stopped after it: the stop
        must exit 0 and leave a clean log (wm.Daemon.check_clean: no ALERT
        line, no sanitizer report), even when the test stopped the daemon
        itself.

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
    rc = d.stop()
    d.check_clean()
    assert rc == 0, d.log()
