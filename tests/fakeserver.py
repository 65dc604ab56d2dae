"""A small loopback model server that speaks the OpenAI and Ollama APIs and misbehaves on
purpose, for fault tests and throughput benchmarks (reusable by any test).

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/embeddings`` (OpenAI, base URL
``<url>/v1``), ``POST /api/chat``, ``POST /api/embed`` (Ollama, base URL ``<url>``),
``GET /_requests`` (the request log as JSON) and ``POST /_reset`` (clear the log and the
fault counters). HTTP/1.1 with keep-alive, on raw asyncio streams (fast enough that the
client, not the server, is what a throughput benchmark measures).

Replies: the chat text is ``reply`` (default ``"A"``), with token usage, or, when the prompt
contains a marker of ``state.replies`` (marker -> text; the first such marker wins), that
marker's text; embeddings are deterministic 8-d unit vectors derived from the text's SHA-256.

Faults are scripted per prompt: ``faults`` maps a marker (a substring of the prompt, or of
an embedded text) to a sequence of behaviours; the n-th request whose prompt contains the
marker (counted per distinct prompt and model) gets the n-th behaviour, the last one
repeating. ``default`` is the behaviour of every other request. Behaviours:

``ok``, ``500``, ``503``, ``404``, ``401``, ``400``, ``429`` or ``429:<seconds>`` (with
``Retry-After``), ``hang`` (never answers), ``slow:<seconds>`` (answers late),
``truncate`` (announces a longer body than it sends, then closes), ``badjson`` (200 with
a body that is not JSON), ``reset`` (closes the connection with a TCP reset), ``empty``
(200 with ``{}``), ``garbage`` (a reply that is not HTTP), ``chunked`` (a chunked body),
``gzip`` (a gzip-encoded body), ``eofbody`` (no length, the body ends with the
connection), ``closeafter`` (a normal keep-alive reply, then the server closes the idle
connection), ``dropnext`` (a normal keep-alive reply; the next request on that connection
is read, logged with the behaviour ``dropped``, and the connection closed cleanly without
a reply: a server whose idle timeout fires as the request arrives), ``noreply`` (the
connection is closed cleanly without a reply), ``echo401`` (401 whose message quotes the
``Authorization`` key back, as some servers do), ``endless`` (200 whose body streams for
ever), ``huge:<bytes>`` (200 announcing a body of that many bytes, then silence), ``hold`` (no
reply until ``FakeServer.release()``, then a normal one: a test decides when it comes).

TLS: ``FakeServer(tls=(certfile, keyfile))`` serves HTTPS; ``make_certificate`` writes a
self-signed certificate for 127.0.0.1 (with the ``openssl`` command).

Synchronization for tests (no sleep, no time window): ``server.hold()`` makes every model
request (or each one a predicate of its log entry picks) wait, logged, until
``server.release()``; ``server.wait_requests(n)`` returns once
``n`` model requests are logged (a generous deadline only guards against a hang).

Use in-process (``with FakeServer(...) as server: server.url``; the loop runs in a thread)
or as a process: ``python tests/fakeserver.py --latency 0.1`` prints the port on its first
line of stdout, then serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import math
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def fake_embedding(text: str, dims: int = 8) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    raw = [(b - 127.5) / 127.5 for b in digest[:dims]]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [x / norm for x in raw]


@dataclass
class LoggedRequest:
    path: str
    model: str | None
    prompt: str | None
    texts: list[str] | None
    authorization: str | None
    behaviour: str
    time: float
    body: dict[str, Any] | None = None
    connection: int = 0  # the client's port: one value per TCP connection


@dataclass
class _State:
    latency: float = 0.0
    reply: str = "A"
    default: str = "ok"
    faults: dict[str, list[str]] = field(default_factory=dict)
    # marker -> chat reply: a prompt containing the marker gets that text instead of `reply`
    replies: dict[str, str] = field(default_factory=dict)
    counters: dict[tuple[str, str, str], int] = field(default_factory=dict)
    log: list[LoggedRequest] = field(default_factory=list)
    keep_bodies: bool = True
    closed: int = 0  # connections the server has closed (or seen closed)
    closed_ports: set[int] = field(default_factory=set)  # their client ports (`connection`)
    # Which requests `hold()` holds (None: none); they wait for `gate`, set again by `release()`.
    held: Callable[[LoggedRequest], bool] | None = None
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    # Notified (from the loop thread) each time a request is logged: `wait_requests` waits on it.
    logged: threading.Condition = field(default_factory=threading.Condition)

    # Opened by release(), closed again by reset(): ends the behaviour ``hold``.
    hold_gate: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.gate.set()


class _Handler:
    def __init__(self, state: _State) -> None:
        self.state = state
        self.tasks: set[asyncio.Task[Any]] = set()
        self.drop_next: set[asyncio.StreamWriter] = set()  # connections marked by `dropnext`

    def behaviour_for(self, model: str | None, text: str) -> str:
        for marker, sequence in self.state.faults.items():
            if marker in text:
                key = (marker, model or "", text)
                n = self.state.counters.get(key, 0)
                self.state.counters[key] = n + 1
                return sequence[min(n, len(sequence) - 1)]
        return self.state.default

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        peer = writer.get_extra_info("peername")
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0") or 0)
                body = await reader.readexactly(length) if length else b""
                keep = await self.respond(method, target, headers, body, writer)
                if not keep or headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            pass
        finally:
            self.tasks.discard(task)
            self.drop_next.discard(writer)
            try:
                writer.close()
                await asyncio.wait_for(writer.wait_closed(), 5)
            except (Exception, asyncio.CancelledError):  # noqa: S110, BLE001
                pass
            self.state.closed += 1  # counted once the socket is really closed
            if peer:
                self.state.closed_ports.add(peer[1])

    @staticmethod
    async def send(
        writer: asyncio.StreamWriter,
        status: int,
        payload: bytes,
        extra: Mapping[str, str] | None = None,
        length: int | None = None,
    ) -> None:
        head = [
            f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}",
            "Content-Type: application/json",
            f"Content-Length: {len(payload) if length is None else length}",
        ]
        for name, value in (extra or {}).items():
            head.append(f"{name}: {value}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        await writer.drain()

    async def respond(
        self, method: str, target: str, headers: dict[str, str], body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        state = self.state
        if method == "GET" and target == "/_requests":
            data = [r.__dict__ for r in state.log]
            await self.send(writer, 200, json.dumps(data).encode())
            return True
        if method == "POST" and target == "/_reset":
            state.log.clear()
            state.counters.clear()
            await self.send(writer, 200, b"{}")
            return True
        if method == "GET" and target in ("/v1/models", "/api/tags"):
            await self.send(writer, 200, b'{"data": [], "models": []}')
            return True
        try:
            request = json.loads(body or b"{}")
        except json.JSONDecodeError:
            await self.send(writer, 400, b'{"error": "request body is not JSON"}')
            return True
        kind = {
            "/v1/chat/completions": "openai-chat",
            "/v1/embeddings": "openai-embed",
            "/api/chat": "ollama-chat",
            "/api/embed": "ollama-embed",
        }.get(target)
        if method != "POST" or kind is None:
            await self.send(writer, 404, b'{"error": "not found"}')
            return True
        model = request.get("model")
        prompt = texts = None
        if kind.endswith("chat"):
            messages = request.get("messages") or [{}]
            prompt = str(messages[-1].get("content", ""))
            text = prompt
        else:
            raw = request.get("input", [])
            texts = [raw] if isinstance(raw, str) else list(raw)
            text = "\n".join(texts)
        behaviour = "dropped" if writer in self.drop_next else self.behaviour_for(model, text)
        peer = writer.get_extra_info("peername")
        logged = LoggedRequest(
            target,
            model,
            prompt,
            texts,
            headers.get("authorization"),
            behaviour,
            time.time(),
            request if state.keep_bodies else None,
            peer[1] if peer else 0,
        )
        state.log.append(logged)
        with state.logged:
            state.logged.notify_all()
        if state.held is not None and state.held(logged):
            await state.gate.wait()
        if state.latency:
            await asyncio.sleep(state.latency)
        return await self.misbehave(
            kind, behaviour, request, model, prompt, texts, writer, headers.get("authorization", "")
        )

    async def misbehave(
        self,
        kind: str,
        behaviour: str,
        request: dict[str, Any],
        model: Any,
        prompt: str | None,
        texts: list[str] | None,
        writer: asyncio.StreamWriter,
        authorization: str = "",
    ) -> bool:
        name, _, argument = behaviour.partition(":")
        if name == "echo401":  # like servers that quote the rejected key back
            message = f"Incorrect API key provided: {authorization.removeprefix('Bearer ')}"
            await self.send(writer, 401, json.dumps({"error": {"message": message}}).encode())
            return True
        if name == "hang":
            await asyncio.sleep(3600)
            return False
        if name == "hold":
            await self.state.hold_gate.wait()
        if name in ("noreply", "dropped"):  # the request was read whole: the close is a FIN
            return False
        if name == "slow":
            await asyncio.sleep(float(argument or 1))
        if name == "reset":
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if name.isdigit():
            status = int(name)
            extra = {"Retry-After": argument} if argument else {}
            if kind.startswith("openai"):
                payload = {"error": {"message": f"injected HTTP {status}", "type": "fake"}}
            else:
                payload = {"error": f"injected HTTP {status}"}
            await self.send(writer, status, json.dumps(payload).encode(), extra)
            return True
        if name == "garbage":
            writer.write(b"NOT HTTP AT ALL\r\n\r\n")
            await writer.drain()
            return False
        if name == "endless":  # a 200 whose body never ends (no length, never closed)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
            block = b'{"choices": ' + b" " * (1 << 16)
            try:
                while True:
                    writer.write(block)
                    await writer.drain()
                    block = b" " * (1 << 16)
            except (ConnectionError, OSError):
                return False
        if name == "huge":  # announces a body of <argument> bytes
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                % int(argument)
            )
            await writer.drain()
            await asyncio.sleep(3600)
            return False
        if name == "badjson":
            await self.send(writer, 200, b'{"choices": [ this is not json')
            return True
        if name == "empty":
            await self.send(writer, 200, b"{}")
            return True
        payload = json.dumps(self.success(kind, request, model, prompt, texts)).encode()
        if name == "chunked":
            middle = len(payload) // 2
            chunks = [payload[:middle], payload[middle:]]
            data = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                + data
            )
            await writer.drain()
            return True
        if name == "gzip":
            await self.send(writer, 200, gzip.compress(payload), {"Content-Encoding": "gzip"})
            return True
        if name == "eofbody":  # no length: the body ends when the connection closes
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + payload
            )
            await writer.drain()
            writer.close()
            return False
        if name == "closeafter":  # a keep-alive reply, then the server drops the idle connection
            await self.send(writer, 200, payload)
            return False
        if name == "dropnext":
            await self.send(writer, 200, payload)
            self.drop_next.add(writer)
            return True
        if name == "truncate":
            await self.send(writer, 200, payload[: len(payload) // 2], length=len(payload))
            writer.close()
            return False
        await self.send(writer, 200, payload)
        return True

    def success(
        self, kind: str, request: dict[str, Any], model: Any, prompt: str | None, texts: list[str] | None
    ) -> dict[str, Any]:
        reply = next((text for marker, text in self.state.replies.items() if marker in (prompt or "")), None)
        if reply is None:
            reply = self.state.reply
        prompt_tokens = len((prompt or "").split())
        if kind == "openai-chat":
            return {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": 1,
                    "total_tokens": prompt_tokens + 1,
                },
            }
        if kind == "ollama-chat":
            return {
                "model": model,
                "message": {"role": "assistant", "content": reply},
                "done": True,
                "prompt_eval_count": prompt_tokens,
                "eval_count": 1,
            }
        vectors = [fake_embedding(t) for t in texts or []]
        if kind == "openai-embed":
            return {
                "object": "list",
                "model": model,
                "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
            }
        return {"model": model, "embeddings": vectors}


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate (it is its own CA) for 127.0.0.1 and its key, written in
    ``folder`` by ``openssl``; returns (certfile, keyfile)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-days", "2", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


class FakeServer:
    """The fake server on 127.0.0.1, its event loop in a background thread."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        reply: str = "A",
        default: str = "ok",
        faults: Mapping[str, Sequence[str]] | None = None,
        port: int = 0,
        keep_bodies: bool = True,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.state = _State(
            latency, reply, default, {k: list(v) for k, v in (faults or {}).items()}, keep_bodies=keep_bodies
        )
        self._port = port
        self._tls: ssl.SSLContext | None = None
        if tls is not None:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(*tls)
        self._handler = _Handler(self.state)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[LoggedRequest]:
        return list(self.state.log)

    def chat_requests(self) -> list[LoggedRequest]:
        return [r for r in self.state.log if r.prompt is not None]

    def hold(self, which: Callable[[LoggedRequest], bool] | None = None) -> None:
        """From now on every model request (with ``which``, each one it returns true for,
        given its log entry) is logged, then waits until :meth:`release`."""

        def close() -> None:
            self.state.held = which or (lambda _: True)
            self.state.gate.clear()

        self._call(close)

    def release(self) -> None:
        """Let the held requests be answered, and hold no later one (those of the behaviour
        ``hold`` too, until :meth:`reset`)."""

        def open_() -> None:
            self.state.held = None
            self.state.gate.set()
            self.state.hold_gate.set()

        self._call(open_)

    def wait_requests(self, count: int, timeout: float = 120.0) -> list[LoggedRequest]:
        """The model requests once at least ``count`` are logged (a chat or an embedding);
        ``timeout`` only guards against a hang (an AssertionError says how many came)."""
        logged = self.state.logged

        def model_requests() -> list[LoggedRequest]:
            return [r for r in self.state.log if r.prompt is not None or r.texts is not None]

        with logged:
            if not logged.wait_for(lambda: len(model_requests()) >= count, timeout):
                raise AssertionError(f"{len(model_requests())} of {count} request(s) reached the server")
        return model_requests()

    def _call(self, function: Any) -> None:
        loop = self._loop
        if loop is None:
            function()
        else:

            async def call() -> None:
                function()

            asyncio.run_coroutine_threadsafe(call(), loop).result(10)

    def reset(self) -> None:
        """Clear the log and the fault counters, drop every open connection, so that a
        request a previous client left in flight cannot be logged afterwards, and release
        a :meth:`hold`."""
        self.release()
        loop = self._loop
        if loop is not None:

            async def drop() -> None:
                for task in list(self._handler.tasks):
                    task.cancel()
                await asyncio.sleep(0)

            asyncio.run_coroutine_threadsafe(drop(), loop).result(10)
        self.state.log.clear()
        self.state.counters.clear()
        self.state.closed_ports.clear()
        self.state.hold_gate = asyncio.Event()  # the behaviour ``hold`` holds again

    def set_faults(self, faults: Mapping[str, Sequence[str]], default: str | None = None) -> None:
        self.state.faults = {k: list(v) for k, v in faults.items()}
        if default is not None:
            self.state.default = default

    async def _start(self) -> None:
        self._server = await asyncio.start_server(
            self._handler.serve, "127.0.0.1", self._port, backlog=512, ssl=self._tls
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def start(self) -> FakeServer:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._start())
            except BaseException as exc:  # noqa: BLE001 - pragma: no cover - port in use
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-model-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return

        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for task in list(self._handler.tasks):
                task.cancel()
            await asyncio.sleep(0)

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _serve_forever(args: argparse.Namespace) -> None:
    faults = json.loads(args.faults) if args.faults else {}
    state = _State(args.latency, args.reply, args.default, faults, keep_bodies=False)
    handler = _Handler(state)
    server = await asyncio.start_server(handler.serve, "127.0.0.1", args.port, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    parser.add_argument("--reply", default="A")
    parser.add_argument("--default", default="ok", help="behaviour of unscripted requests")
    parser.add_argument("--faults", default="", help='JSON {"marker": ["500", "ok"]}')
    args = parser.parse_args(argv)
    try:
        import uvloop  # type: ignore[import-not-found]

        uvloop.install()
    except ImportError:
        pass
    try:
        asyncio.run(_serve_forever(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
