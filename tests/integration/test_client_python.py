"""test_client_python.py — the Python client library (clients/python,
package workmanager; issue 25) against a real daemon: the original
clients' operations and ours, sync and asyncio, over the control socket
and over TCP with a token (http:// and https://, with a CA file and a
client certificate), errors as typed exceptions with the API's code.

One daemon for the module (a TCP listener beside its socket): each test
makes workers of its own names and deletes them.
"""

import asyncio
import ssl
import subprocess
import sys

import pytest

from clients_lib import CLIENTS, MIME, TOKEN, daemon, pki, tlsd  # noqa: F401

sys.path.insert(0, str(CLIENTS / "python"))
import workmanager  # noqa: E402
from workmanager import AsyncClient, Client, event  # noqa: E402


@pytest.fixture
def wm(daemon):
    return Client(socket=daemon.socket)


def test_lifecycle_of_the_original_operations(wm, tmp_path):
    code = tmp_path / "w.test"
    code.write_text("echo\n")
    wid = wm.create_worker_from_file(code, MIME, topic="py-life",
                                     name="py-life", tags={"a": "1"})
    try:
        assert [w["id"] for w in wm.list_workers()
                if w["name"] == "py-life"] == [wid]
        assert wm.get_worker("py-life")["status"] == "running"
        wm.stop_worker(wid)
        assert wm.get_worker(wid)["status"] == "stopped"
        wm.stop_worker(wid)  # idempotent, as the original's
        wm.start_worker(wid)
        assert wm.get_worker(wid)["status"] == "running"

        wm.load_code(wid, {"content": b"# v2\necho\n"})
        history = wm.get_worker_history(wid)
        assert [v["version"] for v in history] == [1, 2]
        assert history[0]["source"] == "content"

        assert wm.get_tags(wid) == {"a": "1"}
        wm.set_tag(wid, "b", "2")
        assert wm.get_tags(wid) == {"a": "1", "b": "2"}
        assert wm.get_tag(wid, "b") == "2"
        assert wm.get_tag(wid, "missing") is None
        wm.set_tags(wid, {})
        assert wm.get_tags(wid) == {}
        assert isinstance(wm.recover_workers(), int)
    finally:
        wm.delete_worker(wid)
    with pytest.raises(workmanager.NotFoundError) as e:
        wm.get_worker(wid)
    assert (e.value.status, e.value.code) == (404, "not_found")


def test_create_from_file_takes_the_mime_type_from_the_extension(wm,
                                                                 tmp_path):
    f = tmp_path / "w.unknown"
    f.write_text("echo\n")
    with pytest.raises(ValueError, match="no MIME type for '.unknown'"):
        wm.create_worker_from_file(f)
    py = tmp_path / "w.py"
    py.write_text("def process(e): return e\n")
    # The default daemon has no Python engine: the daemon names the type.
    with pytest.raises(workmanager.InvalidArgumentError) as e:
        wm.create_worker_from_file(py)
    assert e.value.code == "unknown_mime_type"
    assert "text/x-python" in e.value.message


def test_invoke_outcomes_and_errors(wm):
    wid = wm.create_worker({"content": b"echo"}, MIME, "py-inv",
                           name="py-inv")
    try:
        out = wm.invoke(wid, event("echo", {"n": 1}, correlationid="c-1"))
        assert (out["type"], out["data"], out["correlationid"]) == \
            ("echo.out", {"n": 1}, "c-1")
        outs = wm.invoke(wid, event("many:3"))
        assert isinstance(outs, list) and len(outs) == 3
        binary = wm.invoke(wid, event("echo", b"\x00\xff"))
        assert binary["data_base64"] == "AP8="
        with pytest.raises(workmanager.WorkerError) as e:
            wm.invoke(wid, event("fail"))
        assert (e.value.status, e.value.code) == (422, "worker_error")
        assert e.value.exception_type == "TestError"
        wm.stop_worker(wid)
        with pytest.raises(workmanager.ConflictError) as e:
            wm.invoke(wid, event("echo"))
        assert e.value.code == "conflict"
        with pytest.raises(workmanager.InvalidArgumentError) as e:
            wm.create_worker({"content": b"echo"}, MIME, "t", colour="red")
        assert "colour" in e.value.body["unknown_members"]
    finally:
        wm.delete_worker(wid)


def test_publish_and_follow(wm):
    wid = wm.create_worker({"content": b"echo"}, MIME, "py-in",
                           name="py-pub")
    try:
        with wm.follow("py-in") as stream:
            ids = wm.publish("py-in", [event("a", id_="p1"),
                                       event("b", id_="p2", x="y")])
            assert ids == ["p1", "p2"]
            assert wm.publish("py-in", event("c", id_="p3")) == ["p3"]
            got = [next(stream) for _ in range(3)]
        assert [(e["id"], e["type"]) for e in got] == \
            [("p1", "a"), ("p2", "b"), ("p3", "c")]
        assert got[1]["x"] == "y"
        with pytest.raises(workmanager.InvalidArgumentError):
            wm.publish("workmanager.mine", event("a"))
    finally:
        wm.delete_worker(wid)


def test_tcp_with_a_token(daemon, tmp_path):
    url = daemon.url
    wm = Client(url=url, token_file=daemon.token_file)
    assert isinstance(wm.list_workers(), list)
    with pytest.raises(workmanager.UnauthorizedError) as e:
        Client(url=url, token="not-the-token-at-all").list_workers()
    assert (e.value.status, e.value.code) == (401, "unauthorized")
    with pytest.raises(workmanager.DaemonUnavailable) as e:
        Client(socket=tmp_path / "nothing.sock").list_workers()
    assert "nothing.sock" in str(e.value)


def test_https_with_ca_file_and_client_certificate(tlsd):  # noqa: F811
    tls = dict(url=tlsd.url, token=tlsd.token, ca_file=tlsd.ca,
               cert_file=tlsd.cert, key_file=tlsd.key)
    wm = Client(**tls)
    wid = wm.create_worker({"content": b"echo"}, MIME, "py-tls",
                           name="py-tls")
    try:
        assert wm.invoke(wid, event("echo", {"n": 1}))["data"] == {"n": 1}

        async def run():
            async with AsyncClient(**tls) as aw:
                out = await aw.invoke(wid, event("echo", [2]))
                assert out["data"] == [2]
        asyncio.run(run())
    finally:
        wm.delete_worker(wid)
    # A daemon whose certificate another CA signed is refused, both ways.
    other = dict(tls, ca_file=tlsd.other_ca)
    with pytest.raises(workmanager.DaemonUnavailable) as e:
        Client(**other).list_workers()
    assert isinstance(e.value.__cause__, ssl.SSLCertVerificationError), \
        e.value
    assert "certificate verify failed" in str(e.value)

    async def refused():
        with pytest.raises(workmanager.DaemonUnavailable) as e:
            await AsyncClient(**other).list_workers()
        assert isinstance(e.value.__cause__, ssl.SSLCertVerificationError)
    asyncio.run(refused())
    with pytest.raises(ValueError, match="for an https:// url"):
        Client(url="http://127.0.0.1:1", ca_file=tlsd.ca)


def test_asyncio_client(daemon):
    async def run():
        async with AsyncClient(socket=daemon.socket) as wm:
            wid = await wm.create_worker({"content": b"echo"}, MIME,
                                         "py-async", name="py-async")
            try:
                out = await wm.invoke(wid, event("echo", [1, 2]))
                assert out["data"] == [1, 2]
                assert await wm.invoke(wid, event("many:0")) is None
                await wm.set_tag(wid, "k", "v")
                assert await wm.get_tags(wid) == {"k": "v"}
                stream = await wm.follow("py-async-in")
                await wm.publish("py-async-in", event("e", id_="a1"))
                got = await asyncio.wait_for(stream.__anext__(), 10)
                stream.close()
                assert got["id"] == "a1"
                with pytest.raises(workmanager.WorkerError):
                    await wm.invoke(wid, event("fail"))
            finally:
                await wm.delete_worker(wid)
            with pytest.raises(workmanager.NotFoundError):
                await wm.get_worker_history(wid)
        tcp = AsyncClient(url=daemon.url,
                          token=TOKEN)
        assert isinstance(await tcp.recover_workers(), int)
        with pytest.raises(workmanager.UnauthorizedError):
            await AsyncClient(url=daemon.url,
                              token="wrong-token-wrong-token").list_workers()

    asyncio.run(run())


def test_make_install_puts_it_where_debian_python_finds_it(
        daemon, wm_builddir, wm_python, tmp_path):
    dest = tmp_path / "dest"
    p = subprocess.run(["make", "-s", "-C", str(wm_builddir),
                        "install-dist_clientpythonDATA", "prefix=/usr",
                        f"DESTDIR={dest}"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    site = dest / "usr" / "lib" / "python3" / "dist-packages"
    assert (site / "workmanager" / "aio.py").is_file()
    # Debian's python3 has /usr/lib/python3/dist-packages on its path:
    # the installed copy, alone, drives the daemon.
    code = ("import sys, workmanager as w; "
            "assert '/usr/lib/python3/dist-packages' in sys.path; "
            f"print(w.__file__, w.Client(socket={str(daemon.socket)!r})"
            ".list_workers())")
    r = subprocess.run([wm_python, "-s", "-c", code],
                       env={"PYTHONPATH": str(site)}, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(str(site / "workmanager")), r.stdout
