"""workmanager.aio — the asyncio client, over asyncio streams.

Why this way: the standard library has no asyncio HTTP client, and the
daemon's answers are simple: one HTTP/1.1 request per connection
(Connection: close), an answer framed by Content-Length, chunks or the
connection's end.  So a small reader here, and no thread.

Invariants: the same operations and errors as workmanager.Client (they
are Operations'), each awaited; follow() is an async iterator.
"""

import asyncio

from ._core import (DaemonUnavailable, Operations, Request,
                    SSEParser, error_from, follow_path)


class _Answer:
    """An answer's status and headers, and its body as a stream."""

    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer
        self.status = 0
        self.headers = {}
        self._chunked = False
        self._left = None  # bytes left of the body (Content-Length)
        self._buf = b""

    async def head(self):
        line = await self.reader.readline()
        parts = line.decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise ConnectionError(f"not an HTTP answer: {line[:80]!r}")
        self.status = int(parts[1])
        while True:
            line = (await self.reader.readline()).decode("latin-1")
            if line in ("\r\n", "\n", ""):
                break
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self._chunked = "chunked" in self.headers.get("transfer-encoding",
                                                     "").lower()
        if not self._chunked and "content-length" in self.headers:
            self._left = int(self.headers["content-length"])

    async def read_some(self):
        """The next piece of the body; b"" at its end."""
        if self._chunked:
            size = (await self.reader.readline()).split(b";")[0].strip()
            n = int(size or b"0", 16)
            if n == 0:
                return b""
            data = await self.reader.readexactly(n)
            await self.reader.readline()
            return data
        if self._left is not None:
            if self._left == 0:
                return b""
            data = await self.reader.read(min(self._left, 65536))
            self._left -= len(data)
            return data
        return await self.reader.read(65536)

    async def body(self):
        out = []
        while True:
            piece = await self.read_some()
            if not piece:
                return b"".join(out)
            out.append(piece)

    async def lines(self):
        while True:
            while b"\n" not in self._buf:
                piece = await self.read_some()
                if not piece:
                    return
                self._buf += piece
            line, _, self._buf = self._buf.partition(b"\n")
            yield line.decode().rstrip("\r")

    def close(self):
        self.writer.close()


class AsyncClient(Operations):
    """The asyncio twin of workmanager.Client, with the same arguments;
    usable as `async with AsyncClient(...) as wm:`."""

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def connect(self):
        """The original's call; each operation connects by itself."""
        return self

    async def close(self):
        """Nothing to release: each call has its own connection."""

    async def _open(self, method, path, body=None, headers=None):
        a = self.address
        try:
            if a.socket:
                r, w = await asyncio.open_unix_connection(a.socket)
            else:
                r, w = await asyncio.open_connection(a.host, a.port,
                                                     ssl=a.ssl)
        except OSError as e:
            raise DaemonUnavailable(a, e) from e
        hdrs = a.headers(headers)
        hdrs["Connection"] = "close"
        hdrs["Content-Length"] = str(len(body or b""))
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
        ans = _Answer(r, w)
        try:
            w.write(head.encode("latin-1") + (body or b""))
            await w.drain()
            await ans.head()
        except (OSError, asyncio.IncompleteReadError) as e:
            ans.close()
            raise DaemonUnavailable(a, e) from e
        return ans

    async def _exchange(self, req):
        ans = await self._open(req.method, req.path, req.body, req.headers)
        try:
            body = await ans.body()
        finally:
            ans.close()
        if ans.status >= 400:
            raise error_from(ans.status, ans.headers, body)
        value = req.convert(ans.status, ans.headers, body)
        return await self._exchange(value) if isinstance(value, Request) \
            else value

    def _call(self, req):
        return asyncio.wait_for(self._exchange(req), self.timeout)

    async def follow(self, topic, tenant=None):
        """Follows a topic: an async iterator over the structured events
        published from now on.  Break out of the loop (or cancel the task)
        to end the stream."""
        ans = await self._open("GET", follow_path(topic, tenant),
                               headers={"Accept": "text/event-stream"})
        if ans.status >= 400:
            body = await ans.body()
            ans.close()
            raise error_from(ans.status, ans.headers, body)
        return _AsyncFollow(ans)


class _AsyncFollow:
    def __init__(self, ans):
        self._ans = ans
        self._lines = ans.lines()
        self._sse = SSEParser()

    def __aiter__(self):
        return self

    async def __anext__(self):
        # The stream ends as the sync Follow's does: at its end, or when
        # the connection breaks (the daemon stopped, the follow closed).
        try:
            async for line in self._lines:
                ev = self._sse.feed(line)
                if ev is not None:
                    return ev
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass
        raise StopAsyncIteration

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()

    def close(self):
        self._ans.close()
