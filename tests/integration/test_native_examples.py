"""The native worker examples (examples/native/) on a real workmanagerd:
each one built as its author would build it — its own Makefile, the header
found through `pkg-config --cflags workmanager-worker`, the package made by
`wmctl pack` — then deployed out of process and put to work.

The examples are copied out of the source tree before they are built (a
distcheck's source tree is read-only), and a workmanager-worker.pc written
here points pkg-config at the source tree's include/; the wmctl is the
build's.  Nothing is skipped: a missing make, cc or pkg-config fails the
build step with its output.
"""

import io
import shutil
import subprocess
import threading
import zipfile
from pathlib import Path

import pytest

from test_native import MIME, native_daemon
from wm import b64

EXAMPLES = ("echo", "counter", "state")
# The examples must build without a warning: they are what authors copy.
EXAMPLE_CFLAGS = "-std=c11 -O2 -g -Wall -Wextra -Werror"


@pytest.fixture(scope="module")
def packages(tmp_path_factory, wm_repo, wm_built):
    """{example: the bytes of its package}, built by its Makefile."""
    wmctl = wm_built("cli/wmctl")
    root = tmp_path_factory.mktemp("examples")
    pcdir = root / "pkgconfig"
    pcdir.mkdir()
    (pcdir / "workmanager-worker.pc").write_text(
        f"includedir={wm_repo / 'include'}\n"
        "Name: workmanager-worker\n"
        "Description: the native worker ABI (the source tree's header)\n"
        "Version: 0\n"
        "Cflags: -I${includedir}\n")
    out = {}
    for name in EXAMPLES:
        src = wm_repo / "examples" / "native" / name
        work = root / name
        shutil.copytree(src, work)
        p = subprocess.run(
            ["make", "-C", str(work), f"PKG_CONFIG_PATH={pcdir}",
             f"WMCTL={wmctl}", f"CFLAGS={EXAMPLE_CFLAGS}"],
            capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, \
            f"make in examples/native/{name}:\n{p.stdout}\n{p.stderr}"
        pkg = work / f"{name}.zip"
        with zipfile.ZipFile(pkg) as z:
            names = z.namelist()
        assert "manifest.json" in names, names
        assert any(n.startswith("runtimes/linux-") and
                   n.endswith(f"/native/lib{name}.so") for n in names), names
        out[name] = pkg.read_bytes()
    return out


pytestmark = pytest.mark.wmd(make=native_daemon, shutdown_grace_ms=1000,
                             message_timeout_ms=5000)


def create(d, package, **fields):
    body = {"mime_type": MIME, "topic": "examples",
            "code": {"content": b64(package)}}
    body.update(fields)
    r = d.post("/v1/workers", body)
    assert r.status == 201, r
    return r.json["id"]


def test_echo_example(wmd, packages):
    """echo answers with the event, its type suffixed with .echo."""
    w = create(wmd, packages["echo"])
    r = wmd.invoke(w, "greeting", data={"text": "hello", "n": [1, 2]},
                   correlationid="c-7", note="kept")
    assert r.status == 200, r
    out = r.json
    assert out["type"] == "greeting.echo"
    assert out["id"] == "e1" and out["source"] == "test"
    assert out["data"] == {"text": "hello", "n": [1, 2]}
    assert out["correlationid"] == "c-7" and out["note"] == "kept"


def test_counter_example_counts_under_concurrency(wmd, packages):
    """counter, four threads calling Process at once: every event gets its
    own count, and the last is the number of events."""
    w = create(wmd, packages["counter"], limits={"concurrency": 4})
    n_threads, per_thread = 8, 10
    counts, failures = [], []
    lock = threading.Lock()

    def client(k):
        for i in range(per_thread):
            r = wmd.invoke(w, "count", id=f"c{k}-{i}")
            with lock:
                if r.status != 200 or r.json["type"] != "counter.count":
                    failures.append(r)
                else:
                    counts.append(r.json["data"]["count"])

    threads = [threading.Thread(target=client, args=(k,))
               for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    total = n_threads * per_thread
    assert sorted(counts) == list(range(1, total + 1)), sorted(counts)
    r = wmd.invoke(w, "count")
    assert r.status == 200 and r.json["data"] == {"count": total + 1}, r


def test_state_example_keeps_counts_in_the_daemon(wmd, packages):
    """state: a counter per key in workmanager.state (get, put, delete),
    logged through host->log, kept across a reload of the library."""
    w = create(wmd, packages["state"], limits={"concurrency": 2})

    def count(key, type_="bump"):
        r = wmd.invoke(w, type_, key=key)
        assert r.status == 200, r
        assert r.json["type"] == "state.count"
        assert r.json["data"]["key"] == key
        return r.json["data"]["count"]

    assert [count("apples") for _ in range(3)] == [1, 2, 3]
    assert count("pears") == 1
    wmd.wait_for(lambda: f"worker {w}: count.apples = 3" in wmd.log(),
                 what="the worker's log line")
    # The value lives in the daemon, not in the library: a reload (the
    # library closed and opened again) continues from it.
    r = wmd.put(f"/v1/workers/{w}/code",
                {"code": {"content": b64(packages["state"])}})
    assert r.status == 200, r
    assert count("apples") == 4
    # .reset deletes the key; the next count starts again.
    assert count("apples", "bump.reset") == 0
    assert count("apples") == 1
    assert count("pears") == 2
    # A key the example refuses comes back as the worker's error.
    r = wmd.invoke(w, "bump", key="no/slash")
    assert r.status == 422 and r.code == "worker_error", r
    assert "[A-Za-z0-9._-]{1,64}" in r.json["error"]["message"]


@pytest.mark.parametrize("args,lib,want", [
    (["--library", "bad/name"], "libecho.so",
     'library "bad/name" is not a library name'),
    (["--entry-point", "9lives"], "libecho.so",
     'entry_point "9lives" is not a C symbol'),
    (["--manifest", "abi2.json"], "libecho.so",
     "abi_version 2 is not supported; supported: 1"),
    (["--rid", "linux-s390x"], "libecho.so",
     "not a supported RID (linux-x64, linux-arm64)"),
    ([], "notelf.so", "is not an ELF file"),
])
def test_wmctl_pack_refuses_what_the_daemon_would(tmp_path, wm_built,
                                                  packages, args, lib, want):
    """wmctl pack checks with the daemon's package reader: each refusal
    names its cause, and no package is left behind.  (Files are named
    relative to tmp_path, where wmctl runs.)"""
    wmctl = wm_built("cli/wmctl")
    with zipfile.ZipFile(io.BytesIO(packages["echo"])) as z:
        entry = next(n for n in z.namelist() if n.endswith("/libecho.so"))
        (tmp_path / "libecho.so").write_bytes(z.read(entry))
    (tmp_path / "abi2.json").write_text('{"abi_version": 2, "library": "x"}')
    (tmp_path / "notelf.so").write_text("not a library\n")
    p = subprocess.run([str(wmctl), "pack", *args, "-o", "out.zip", lib],
                       cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode in (1, 2), p
    assert want in p.stderr, p.stderr
    assert not (tmp_path / "out.zip").exists()
