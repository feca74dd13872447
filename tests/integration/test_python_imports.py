"""Python imports (issue 8; DESIGN §5): the safe standard library set ∪
python_allowed_packages − python_blocked_modules; anything else fails with
`ImportError: <module> is not allowed`.  The guard is backed by the host's
seccomp filter: the usual tricks (the real __import__ through the object
graph, sys.modules, posix, open() on a .py file) reach modules that are
loaded, but every call that would escape is refused by the kernel, and
nothing that was not imported before the filter can be imported at all.

Spec: Python Sandboxing — Allowed import, Blocked import.

Skips: the tricks assert the kernel's answer, so a build made
--without-sandbox (or a kernel without seccomp) skips them as
test_python_sandbox.py does.
"""

import pytest

from pyhost_lib import create, daemon, host_pid, require_sandbox, restarts

# Imports what the event's data names; answers with what happened.
IMPORTER = """
    def Process(event):
        d = event["data"]
        try:
            if "from" in d:
                exec(f"from {d['from']} import {d['name']}", {})
            else:
                __import__(d["name"])
        except ImportError as e:
            return {"type": "refused", "data": {"error": type(e).__name__,
                                                "message": str(e)}}
        return {"type": "imported", "data": d}
"""

USES = """
    import json, math, re, hashlib, uuid, random, datetime, decimal, time
    import collections.abc, statistics, base64, zlib, struct
    from urllib.parse import quote
    import workmanager

    def Process(event):
        t0 = time.monotonic()
        time.sleep(0.01)
        return {"type": "used", "data": {
            "sha": hashlib.sha256(b"abc").hexdigest(),
            "uuid": str(uuid.uuid4())[14],
            "rand": 0 <= random.random() < 1,
            "date": datetime.date(2026, 11, 25).isoformat(),
            "dec": str(decimal.Decimal("1.10") + decimal.Decimal("2.2")),
            "re": re.sub(r"b+", "-", "abbbc"),
            "mean": statistics.mean([1, 2, 3]),
            "z": len(zlib.compress(b"x" * 1000)) < 100,
            "quote": quote("a b"),
            "slept": time.monotonic() - t0 >= 0.009,
        }}
"""


pytestmark = pytest.mark.wmd(make=daemon)


def test_safe_standard_library_works_under_the_filter(wmd):
    """The default set imports and works after the filter is in (hashlib,
    uuid, random, time.sleep, decimal, ...)."""
    w = create(wmd, USES)
    r = wmd.invoke(w["id"], "go")
    assert r.status == 200, r
    assert r.json["data"] == {
        "sha": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        "uuid": "4", "rand": True, "date": "2026-11-25", "dec": "3.30",
        "re": "a-c", "mean": 2, "z": True, "quote": "a%20b", "slept": True}


@pytest.mark.parametrize("req,message", [
    ({"name": "os"}, "os is not allowed"),
    ({"name": "sys"}, "sys is not allowed"),
    ({"name": "socket"}, "socket is not allowed"),
    ({"name": "subprocess"}, "subprocess is not allowed"),
    ({"name": "ctypes"}, "ctypes is not allowed"),
    ({"name": "importlib"}, "importlib is not allowed"),
    ({"name": "builtins"}, "builtins is not allowed"),
    ({"name": "posix"}, "posix is not allowed"),
    ({"name": "urllib.request"}, "urllib.request is not allowed"),
    ({"from": "urllib", "name": "request"}, "urllib.request is not allowed"),
    ({"name": "xml.etree.ElementTree"},
     "xml.etree.ElementTree is not allowed"),
])
def test_blocked_import(wmd, req, message):
    """Spec: Blocked import — ImportError: <module> is not allowed."""
    w = create(wmd, IMPORTER)
    r = wmd.invoke(w["id"], "imp", data=req)
    assert r.status == 200, r
    assert r.json["data"] == {"error": "ImportError", "message": message}, r


def test_allowed_packages_and_blocked_modules(wm_builddir, tmp_path):
    """Spec: Allowed import — a package listed in python_allowed_packages
    (PYTHON_ALLOWED_PACKAGES) imports; python_blocked_modules takes a
    module out, even one of the safe set."""
    d = daemon(wm_builddir, tmp_path, options={
        "python_allowed_packages": "xml.etree.ElementTree, email, nosuchpkg",
        "python_blocked_modules": "random"})
    d.start()
    try:
        w = create(d, IMPORTER)
        for name in ("xml.etree.ElementTree", "email", "json"):
            r = d.invoke(w["id"], "imp", data={"name": name})
            assert r.json["type"] == "imported", (name, r)
        r = d.invoke(w["id"], "imp", data={"from": "xml.etree",
                                           "name": "ElementTree"})
        assert r.json["type"] == "imported", r
        r = d.invoke(w["id"], "imp", data={"name": "random"})
        assert r.json["data"]["message"] == "random is not allowed", r
        r = d.invoke(w["id"], "imp", data={"name": "xml.dom"})
        assert r.json["data"]["message"] == "xml.dom is not allowed", r
        # allowed but absent: said in the log, and not importable
        assert "python_allowed_packages: nosuchpkg cannot be imported " \
            "(ModuleNotFoundError: No module named 'nosuchpkg')" in d.log()
        r = d.invoke(w["id"], "imp", data={"name": "nosuchpkg"})
        assert r.json["data"]["error"] == "ModuleNotFoundError", r
    finally:
        assert d.stop() == 0, d.log()


def test_original_variable_names_configure_it(wm_builddir, tmp_path):
    """PYTHON_ALLOWED_PACKAGES, the original system's variable, works as
    the key does."""
    d = daemon(wm_builddir, tmp_path,
               env={"PYTHON_ALLOWED_PACKAGES": "email"})
    d.start()
    try:
        w = create(d, IMPORTER)
        r = d.invoke(w["id"], "imp", data={"name": "email"})
        assert r.json["type"] == "imported", r
    finally:
        assert d.stop() == 0, d.log()


# Each trick reaches something the guard would refuse; what it can do
# with it is what the filter allows.  Each returns what happened.
TRICKS = """
    def find(name):
        for c in ().__class__.__base__.__subclasses__():
            if c.__name__ == name:
                return c
        raise LookupError(name)

    def posix():
        # os._wrap_close's __init__ globals are the os module's
        return find("_wrap_close").__init__.__globals__

    def attempt(fn):
        try:
            return "returned %r" % (fn(),)
        except BaseException as e:
            return "%s: errno %s" % (type(e).__name__,
                                     getattr(e, "errno", None))

    def Process(event):
        t = event["type"]
        g = posix()
        if t == "real-import":
            imp = g["sys"].modules["builtins"].__import__
            return {"type": "r", "data": attempt(
                lambda: imp("tty").__name__)}
        if t == "open-py":
            return {"type": "r", "data": attempt(
                lambda: open("/usr/lib/python3.11/os.py").read(10))}
        if t == "open-etc":
            return {"type": "r", "data": attempt(
                lambda: g["open"]("/etc/passwd", 0))}
        if t == "write-tmp":
            return {"type": "r", "data": attempt(
                lambda: open("/tmp/x", "w"))}
        if t == "fork":
            return {"type": "r", "data": attempt(g["fork"])}
        if t == "system":
            return {"type": "r", "data": attempt(
                lambda: g["system"]("touch /tmp/pwned"))}
        if t == "exec":
            return {"type": "r", "data": attempt(
                lambda: g["execv"]("/bin/true", ["true"]))}
        if t == "unlink":
            return {"type": "r", "data": attempt(
                lambda: g["unlink"]("/tmp/anything"))}
        if t == "listdir":
            return {"type": "r", "data": attempt(lambda: g["listdir"]("/"))}
        if t == "loader":
            # the import machinery through a loaded module's spec
            import json
            ext = type(json.__spec__.loader).__init__.__globals__
            return {"type": "r", "data": attempt(
                lambda: ext["_os"].open("/etc/hostname", 0))}
        if t == "sysmodules":
            return {"type": "r", "data": attempt(
                lambda: g["sys"].modules["posix"].open("/etc/hostname", 0))}
"""


@pytest.mark.parametrize("trick,want", [
    # a module not imported before the filter cannot be found
    ("real-import", "ModuleNotFoundError: errno None"),
    ("open-py", "PermissionError: errno 13"),
    ("open-etc", "PermissionError: errno 13"),
    ("write-tmp", "PermissionError: errno 13"),
    ("fork", "PermissionError: errno 1"),
    ("exec", "PermissionError: errno 1"),
    ("unlink", "PermissionError: errno 1"),
    ("listdir", "PermissionError: errno 13"),
    ("loader", "PermissionError: errno 13"),
    ("sysmodules", "PermissionError: errno 13"),
])
def test_import_tricks_gain_nothing(wm_builddir, wmd, trick, want):
    """The object graph reaches os, sys and the import machinery; the
    filter refuses what they would do (EACCES for paths, EPERM for
    processes and file changes), and the host lives on."""
    require_sandbox(wm_builddir)
    w = create(wmd, TRICKS)
    pid = host_pid(wmd, w["id"])
    r = wmd.invoke(w["id"], trick)
    assert r.status == 200, r
    assert r.json["data"] == want, r
    assert host_pid(wmd, w["id"]) == pid and restarts(wmd, w["id"]) == 0


def test_system_cannot_start_a_process(wm_builddir, wmd):
    """os.system through the object graph: the fork is refused, nothing
    runs (its status is an error, no file appears)."""
    require_sandbox(wm_builddir)
    import os
    w = create(wmd, TRICKS)
    r = wmd.invoke(w["id"], "system")
    assert r.status == 200, r
    assert r.json["data"] != "returned 0", r
    assert not os.path.exists("/tmp/pwned")
