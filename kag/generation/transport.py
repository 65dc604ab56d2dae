"""A lean HTTP/1.1 transport for ``httpx.AsyncClient`` on plain asyncio streams, used for
``http://`` model servers (llama.cpp, Ollama, vLLM on a LAN), where per-request client cost
is what limits a benchmark.

Why: httpx's default transport (httpcore on anyio) measured ~2.3 ms of CPU per request on
a 2-core machine (readability polls, ``getpeername`` and a pool scan on every request, and a
pool scan that grows with the square of its size), against ~0.15 ms for the same request
on raw asyncio streams; at ``--parallel 32`` and 100 ms model latency that was most of a
core. httpx stays the interface (client, request and response models, errors, content
decoding); this transport only moves bytes. ``https://`` URLs keep httpcore (TLS,
certificates), where a remote API's latency dwarfs the client's cost.

What it does: one request per connection at a time, keep-alive reuse (LIFO), at most
``max_connections`` connections per transport, request head and body in one write,
responses with ``Content-Length``, chunked bodies, or a body delimited by the connection's
close. An idle connection is checked before reuse (a closed one is readable); if the
server closed it anyway in the meantime and the request cannot be written or meets an
immediate clean end of stream, a new connection is used, once, transparently. A reset
after the request went out is a ``ReadError``: the server may have seen the request, so
the caller's retry policy decides (and counts the attempt). Errors are httpx's: ``ConnectError``,
``WriteError``, ``ReadError``, ``RemoteProtocolError``. Deadlines are the caller's
(``asyncio.timeout``); a cancelled exchange closes its connection.
"""

from __future__ import annotations

import asyncio
import select
import time
from typing import Any

import httpx

MAX_HEADER_LINES = 200
IDLE_CHECK = 0.5  # seconds idle before a pooled connection is checked for a close


class _Stale(Exception):
    """A reused connection closed before the first byte of the reply."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def usable(self) -> bool:
        """False when the server closed this idle connection: the stream saw the end, or,
        after ``IDLE_CHECK`` seconds idle, the socket is readable (an idle HTTP/1.1
        connection has nothing to read unless the peer closed it; one non-blocking select).
        Servers close idle connections after seconds (uvicorn 5 s, Ollama's Go server
        longer), so a connection idle for less is reused without the system call."""
        if self.reader.at_eof() or self.writer.is_closing():
            return False
        if time.monotonic() - self.idle_since < IDLE_CHECK:
            return True
        sock = self.writer.get_extra_info("socket")
        if sock is None:
            return True
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:  # closing a broken transport must not mask the real error
            pass

    async def exchange(self, request: httpx.Request, head: bytes, body: bytes) -> tuple[httpx.Response, bool]:
        try:
            self.writer.write(head + body)
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            raise _Stale() from exc
        try:
            line = await self.reader.readline()
        except (ConnectionError, OSError) as exc:
            # A reset after the request went out: the server may have seen it. Not stale.
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from None
        if not line:
            raise _Stale()  # a clean close before any reply: an idle connection the server dropped
        try:
            return await self._read_response(request, line)
        except asyncio.IncompleteReadError:
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body", request=request
            ) from None
        except (ConnectionError, OSError) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from None
        except (ValueError, IndexError, asyncio.LimitOverrunError) as exc:
            raise httpx.RemoteProtocolError(f"malformed HTTP response: {exc}", request=request) from None

    async def _read_response(self, request: httpx.Request, line: bytes) -> tuple[httpx.Response, bool]:
        while True:
            version, status, reason = _status_line(line)
            headers = await self._read_headers(request)
            if status >= 200 or status == 101:
                break
            line = await self.reader.readline()  # 1xx informational: another status follows
            if not line:
                raise asyncio.IncompleteReadError(b"", None)
        lowered = {name.lower(): value for name, value in headers}
        keep = version == b"HTTP/1.1" and lowered.get(b"connection", b"").lower() != b"close"
        if request.method == "HEAD" or status in (204, 304):
            content = b""
        elif b"chunked" in lowered.get(b"transfer-encoding", b"").lower():
            content = await self._read_chunked()
        elif b"content-length" in lowered:
            length = int(lowered[b"content-length"])
            if length < 0:
                raise ValueError("negative Content-Length")
            content = await self.reader.readexactly(length)
        else:
            content = await self.reader.read()  # delimited by the connection's close
            keep = False
        response = httpx.Response(
            status,
            headers=headers,
            stream=httpx.ByteStream(content),
            extensions={"http_version": version, "reason_phrase": reason},
            request=request,
        )
        return response, keep

    async def _read_headers(self, request: httpx.Request) -> list[tuple[bytes, bytes]]:
        headers: list[tuple[bytes, bytes]] = []
        for _ in range(MAX_HEADER_LINES):
            line = await self.reader.readline()
            if not line:
                raise asyncio.IncompleteReadError(b"", None)
            if line in (b"\r\n", b"\n"):
                return headers
            name, _, value = line.partition(b":")
            headers.append((name.strip(), value.strip()))
        raise ValueError("too many header lines")

    async def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size_line = await self.reader.readline()
            if not size_line:
                raise asyncio.IncompleteReadError(b"", None)
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while (await self.reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)


def _status_line(line: bytes) -> tuple[bytes, int, bytes]:
    parts = line.rstrip(b"\r\n").split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise ValueError(f"bad status line {line[:80]!r}")
    return parts[0], int(parts[1]), parts[2] if len(parts) > 2 else b""


def _head(request: httpx.Request, body: bytes) -> bytes:
    target = request.url.raw_path or b"/"
    lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
    has_length = False
    for name, value in request.headers.raw:
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            continue  # the body is sent whole, with its length
        if lowered == b"content-length":
            has_length = True
            value = str(len(body)).encode()
        lines.append(name + b": " + value)
    if not has_length and (body or request.method in ("POST", "PUT", "PATCH")):
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


class StreamTransport(httpx.AsyncBaseTransport):
    """Plain-HTTP transport with a small keep-alive pool (see the module docstring)."""

    def __init__(self, max_connections: int) -> None:
        self.max_connections = max(1, max_connections)
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._slots: asyncio.Semaphore | None = None
        self._open: set[_Connection] = set()

    async def _connect(self, request: httpx.Request, key: tuple[str, int]) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(key[0], key[1], limit=2**20)
        except (OSError, ValueError) as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from None
        connection = _Connection(reader, writer)
        self._open.add(connection)
        return connection

    def _checkout(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if connection.usable():
                return connection
            self._discard(connection)
        return None

    def _discard(self, connection: _Connection) -> None:
        connection.close()
        self._open.discard(connection)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"StreamTransport serves http:// only, not {request.url}")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_connections)
        body = await request.aread()
        head = _head(request, body)
        key = (request.url.host, request.url.port or 80)
        async with self._slots:
            for fresh_only in (False, True):
                connection = None if fresh_only else self._checkout(key)
                reused = connection is not None
                if connection is None:
                    connection = await self._connect(request, key)
                try:
                    response, keep = await connection.exchange(request, head, body)
                except _Stale:
                    self._discard(connection)
                    if reused:
                        continue  # the server closed the idle connection: once more, fresh
                    raise httpx.RemoteProtocolError(
                        "server disconnected without sending a response", request=request
                    ) from None
                except BaseException:
                    self._discard(connection)
                    raise
                if keep:
                    connection.idle_since = time.monotonic()
                    self._idle.setdefault(key, []).append(connection)
                else:
                    self._discard(connection)
                return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        for connection in list(self._open):
            self._discard(connection)
        self._idle.clear()


def make_transport(base_url: str, max_connections: int) -> Any:
    """The lean transport for ``http://`` base URLs, None (httpx's default) otherwise."""
    return StreamTransport(max_connections) if base_url.startswith("http://") else None
