"""The local HTTP server of `kag view` (the standard library's ThreadingHTTPServer).

The server knows nothing of the pages: it hands each GET to an :class:`App` (the path's
segments, already percent-decoded, and the query parameters) and sends back what it gives,
with the headers every answer carries: a Content-Security-Policy that allows only the
server's own scripts and styles (no inline script, no other origin), no sniffing, no framing.
"""

from __future__ import annotations

import ipaddress
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


@dataclass(frozen=True)
class Reply:
    status: int
    content_type: str
    body: bytes


class App(Protocol):
    def __call__(self, segments: list[str], params: dict[str, list[str]]) -> Reply: ...


def split_path(raw: str) -> list[str] | None:
    """The decoded segments of a URL path; None for a path that tries to climb (``..``,
    ``.``, an encoded ``/`` or a NUL inside a segment), so that it gets a 404."""
    segments = []
    for part in raw.split("/")[1:]:
        text = unquote(part, errors="strict") if "%" in part else part
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


def _handler(app: App, on_error: Callable[[BaseException], None]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "kag-view"
        sys_version = ""

        def do_GET(self) -> None:
            try:
                parts = urlsplit(self.path)
                segments = split_path(parts.path)
                if segments is None or len(parts.query) > MAX_QUERY:
                    reply = Reply(404, "text/plain; charset=utf-8", b"not found\n")
                else:
                    reply = app(segments, parse_qs(parts.query, keep_blank_values=True))
            except Exception as exc:  # noqa: BLE001 - one request never stops the server
                on_error(exc)
                reply = Reply(500, "text/plain; charset=utf-8", b"internal error\n")
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(reply.body)

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
            self.httpd = _Http((host, port), _handler(app, on_error))
        except OSError as exc:
            raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
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
