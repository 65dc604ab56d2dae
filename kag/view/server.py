"""The local HTTP server of `kag view` (the standard library's ThreadingHTTPServer).

The server knows nothing of the pages: it hands each GET or POST to an :class:`App` (the
path's segments, already percent-decoded, and the query parameters) and sends back what it
gives, with the headers every answer carries: a Content-Security-Policy that allows only the
server's own scripts and styles (no inline script, no other origin), no sniffing, no framing.

Before that, a request whose ``Host`` is not the server's own address (or ``localhost``) is
refused, so that a web page whose name was made to resolve to this address (DNS rebinding)
reads nothing; and a POST sent by a page of another origin (its ``Origin``, else its
``Referer``) is refused, so that no other site changes the server's state.
"""

from __future__ import annotations

import ipaddress
import select
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from kag.errors import InputError

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
MAX_QUERY = 8192
MAX_BODY = 65536  # a POST's body is not used: read (up to this) and dropped
TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


class App(Protocol):
    def __call__(
        self,
        segments: list[str],
        params: dict[str, list[str]],
        *,
        method: str = "GET",
        gone: Callable[[], bool] | None = None,
    ) -> Reply:
        """The answer to a request; ``gone`` tells whether its client has left."""
        ...


def split_path(raw: str) -> list[str] | None:
    """The decoded segments of a URL path; None for a path that tries to climb (``..``,
    ``.``, an encoded ``/`` or a NUL inside a segment), so that it gets a 404."""
    segments = []
    for part in raw.split("/")[1:]:
        try:
            text = unquote(part, errors="strict") if "%" in part else part
        except UnicodeDecodeError:  # bytes that are not UTF-8 name no page
            return None
        if text in {".", ".."} or "/" in text or "\\" in text or "\0" in text:
            return None
        segments.append(text)
    while segments and segments[-1] == "":
        segments.pop()
    return segments


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> tuple[str, str] | None:
    """(name, port) of a ``Host`` header (``name``, ``name:port``, ``[v6]``, ``[v6]:port``),
    the name lowercased and a v6 address without its brackets; None for anything else."""
    header = header.strip().lower()
    if header.startswith("["):
        name, sep, rest = header[1:].partition("]")
        port = rest.removeprefix(":")
        if not sep or (rest and not rest.startswith(":")):
            return None
    else:
        name, _, port = header.partition(":")
    if not name or (port and not (port.isascii() and port.isdigit())) or ":" in port:
        return None
    return name, port


class HostCheck:
    """Which ``Host`` headers name this server: its own address, ``localhost``, and, for a
    server listening on every address (``0.0.0.0``, ``::``), any address literal (a
    rebinding attack needs a name of its own, which the browser sends as the Host)."""

    def __init__(self, host: str) -> None:
        bound = host.strip("[]").lower()
        self.names = {bound, "localhost"}
        try:
            self.any_address = ipaddress.ip_address(bound).is_unspecified
        except ValueError:
            self.any_address = False

    def allows(self, header: str | None) -> bool:
        parsed = host_name(header) if header else None
        if parsed is None:
            return False
        name = parsed[0]
        if name in self.names:
            return True
        if self.any_address:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                return False
            return True
        return False


def same_origin(origin: str | None, referer: str | None, host: str) -> bool:
    """Whether a POST comes from a page of this server: its ``Origin`` (else its
    ``Referer``) is ``http://`` and the ``Host`` it was sent to. A request with neither (a
    script, ``curl``) is no page's: browsers send ``Origin`` with every POST."""
    if origin is not None:
        return origin.strip().lower() == "http://" + host.strip().lower()
    if referer is not None:
        parts = urlsplit(referer.strip())
        return parts.scheme.lower() == "http" and parts.netloc.lower() == host.strip().lower()
    return True


def client_gone(sock: socket.socket) -> bool:
    """Whether the client of ``sock`` has closed its side (the socket reads as ended)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def _handler(
    app: App, hosts: HostCheck, on_error: Callable[[BaseException], None]
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "kag-view"
        sys_version = ""

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def _serve(self, method: str) -> None:
            try:
                reply = self._answer(method)
            except Exception as exc:  # noqa: BLE001 - one request never stops the server
                on_error(exc)
                reply = Reply(500, TEXT, b"internal error\n")
            try:
                self._send(reply)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client left: no one to answer

        def _send(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Cache-Control", "no-store")
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)

        def _answer(self, method: str) -> Reply:
            host = self.headers.get("Host")
            if not hosts.allows(host):
                return Reply(421, TEXT, b"this server answers to its own address and localhost only\n")
            assert host is not None
            if method == "POST":
                length = self.headers.get("Content-Length", "0").strip()
                if not length.isdigit() or int(length) > MAX_BODY:
                    return Reply(413, TEXT, b"a request body is not expected here\n")
                self.rfile.read(int(length))
                if not same_origin(self.headers.get("Origin"), self.headers.get("Referer"), host):
                    return Reply(403, TEXT, b"a request from another origin is refused\n")
            parts = urlsplit(self.path)
            segments = split_path(parts.path)
            if segments is None or len(parts.query) > MAX_QUERY:
                return Reply(404, TEXT, b"not found\n")
            try:
                params = parse_qs(parts.query, keep_blank_values=True, errors="strict")
            except UnicodeDecodeError:
                return Reply(400, TEXT, b"the query is not valid UTF-8\n")
            return app(segments, params, method=method, gone=lambda: client_gone(self.connection))

        def log_message(self, format: str, *args: object) -> None:
            return  # requests are not logged: the terminal shows the URL only

    return Handler


class Server:
    """A server bound to (host, port) (port 0: a free one), serving ``app`` from threads."""

    def __init__(self, app: App, host: str, port: int, on_error: Callable[[BaseException], None]) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET

        class _Http(ThreadingHTTPServer):
            address_family = family
            daemon_threads = True

        try:
            hosts = HostCheck(host)
            self.httpd = _Http((host, port), _handler(app, hosts, on_error))
        except OSError as exc:
            raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        hosts.names.add(str(self.httpd.server_address[0]).lower())  # the address a name was bound as
        self.host = host
        self.port = self.httpd.server_address[1]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.2)

    def start(self) -> threading.Thread:
        """Serve from a background thread (tests, the benchmark)."""
        thread = threading.Thread(target=self.serve_forever, daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
