"""A loopback server that speaks enough of Neo4j's Bolt protocol (5.0, PackStream) for the
official driver to run one query: handshake, HELLO, BEGIN/RUN/PULL/COMMIT, RESET,
GOODBYE. It does not run Cypher: ``respond(query, parameters)`` returns the rows to send
(``Rows``) or a ``Failure`` (a Neo4j error code and message), and every message the
driver sent is logged, so tests see the exact query text and parameters on the wire.

Values in rows: None, bool, int, float, str, list, dict, and ``BoltNode`` /
``BoltRelationship`` (sent as Bolt 5 structures, which the driver hydrates into its own
``neo4j.graph`` objects).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

MAGIC = b"\x60\x60\xb0\x17"
HELLO, GOODBYE, RESET, RUN, BEGIN, COMMIT, ROLLBACK, DISCARD, PULL = (
    0x01,
    0x02,
    0x0F,
    0x10,
    0x11,
    0x12,
    0x13,
    0x2F,
    0x3F,
)
SUCCESS, RECORD, IGNORED, FAILURE = 0x70, 0x71, 0x7E, 0x7F
NAMES = {
    HELLO: "HELLO",
    GOODBYE: "GOODBYE",
    RESET: "RESET",
    RUN: "RUN",
    BEGIN: "BEGIN",
    COMMIT: "COMMIT",
    ROLLBACK: "ROLLBACK",
    DISCARD: "DISCARD",
    PULL: "PULL",
}


@dataclass(frozen=True)
class BoltNode:
    id: int
    labels: list[str]
    properties: dict[str, Any]
    element_id: str


@dataclass(frozen=True)
class BoltRelationship:
    id: int
    start: BoltNode
    end: BoltNode
    type: str
    properties: dict[str, Any]
    element_id: str


@dataclass(frozen=True)
class Rows:
    fields: list[str]
    records: list[list[Any]]


@dataclass(frozen=True)
class Failure:
    code: str
    message: str


# ---------------------------------------------------------------- PackStream


def _size(marker_tiny: int, markers: tuple[int, int, int], n: int) -> bytes:
    if n < 16 and marker_tiny:
        return bytes([marker_tiny + n])
    if n < 0x100:
        return bytes([markers[0], n])
    if n < 0x10000:
        return bytes([markers[1]]) + struct.pack(">H", n)
    return bytes([markers[2]]) + struct.pack(">I", n)


def pack(value: Any) -> bytes:
    if value is None:
        return b"\xc0"
    if value is True:
        return b"\xc3"
    if value is False:
        return b"\xc2"
    if isinstance(value, int):
        if -16 <= value < 128:
            return struct.pack(">b", value)
        for marker, fmt in ((0xC8, ">b"), (0xC9, ">h"), (0xCA, ">i"), (0xCB, ">q")):
            try:
                return bytes([marker]) + struct.pack(fmt, value)
            except struct.error:
                continue
        raise ValueError(value)
    if isinstance(value, float):
        return b"\xc1" + struct.pack(">d", value)
    if isinstance(value, str):
        data = value.encode()
        return _size(0x80, (0xD0, 0xD1, 0xD2), len(data)) + data
    if isinstance(value, list | tuple):
        return _size(0x90, (0xD4, 0xD5, 0xD6), len(value)) + b"".join(pack(v) for v in value)
    if isinstance(value, dict):
        return _size(0xA0, (0xD8, 0xD9, 0xDA), len(value)) + b"".join(
            pack(k) + pack(v) for k, v in value.items()
        )
    if isinstance(value, BoltNode):
        return b"\xb4\x4e" + b"".join(
            pack(v) for v in (value.id, value.labels, value.properties, value.element_id)
        )
    if isinstance(value, BoltRelationship):
        fields = (
            value.id,
            value.start.id,
            value.end.id,
            value.type,
            value.properties,
            value.element_id,
            value.start.element_id,
            value.end.element_id,
        )
        return b"\xb8\x52" + b"".join(pack(v) for v in fields)
    raise TypeError(type(value))


def message(tag: int, *fields: Any) -> bytes:
    return bytes([0xB0 + len(fields), tag]) + b"".join(pack(f) for f in fields)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def value(self) -> Any:
        marker = self.take(1)[0]
        if marker < 0x80:
            return marker
        if marker >= 0xF0:
            return marker - 0x100
        high = marker & 0xF0
        if high == 0x80:
            return self.take(marker & 0x0F).decode()
        if high == 0x90:
            return [self.value() for _ in range(marker & 0x0F)]
        if high == 0xA0:
            return {self.value(): self.value() for _ in range(marker & 0x0F)}
        if high == 0xB0:
            tag = self.take(1)[0]
            return ("struct", tag, [self.value() for _ in range(marker & 0x0F)])
        simple = {0xC0: None, 0xC2: False, 0xC3: True}
        if marker in simple:
            return simple[marker]
        if marker == 0xC1:
            return struct.unpack(">d", self.take(8))[0]
        ints = {0xC8: ">b", 0xC9: ">h", 0xCA: ">i", 0xCB: ">q"}
        if marker in ints:
            fmt = ints[marker]
            return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        sizes = {
            0xD0: ">B",
            0xD1: ">H",
            0xD2: ">I",
            0xD4: ">B",
            0xD5: ">H",
            0xD6: ">I",
            0xD8: ">B",
            0xD9: ">H",
            0xDA: ">I",
        }
        fmt = sizes[marker]
        n = struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        if marker <= 0xD2:
            return self.take(n).decode()
        if marker <= 0xD6:
            return [self.value() for _ in range(n)]
        return {self.value(): self.value() for _ in range(n)}


# ---------------------------------------------------------------- the server


@dataclass
class FakeBolt:
    """``with FakeBolt(respond) as server: server.uri`` -> ``bolt://127.0.0.1:<port>``."""

    respond: Callable[[str, dict[str, Any]], Rows | Failure]
    password: str = "secret"
    log: list[tuple[str, list[Any]]] = field(default_factory=list)
    connections: int = 0

    def __enter__(self) -> Self:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen()
        self.port = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()

    @property
    def uri(self) -> str:
        return f"bolt://127.0.0.1:{self.port}"

    def sent(self, name: str) -> list[list[Any]]:
        return [fields for kind, fields in self.log if kind == name]

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _recv(conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def _read_message(self, conn: socket.socket) -> bytes:
        data = b""
        while True:
            size = struct.unpack(">H", self._recv(conn, 2))[0]
            if size == 0:
                if data:
                    return data
                continue  # a NOOP chunk between messages
            data += self._recv(conn, size)

    @staticmethod
    def _send(conn: socket.socket, payload: bytes) -> None:
        out = b""
        for start in range(0, len(payload), 0xFFFF):
            chunk = payload[start : start + 0xFFFF]
            out += struct.pack(">H", len(chunk)) + chunk
        conn.sendall(out + b"\x00\x00")

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self._recv(conn, 4) != MAGIC:
                return
            self._recv(conn, 16)
            conn.sendall(b"\x00\x00\x00\x05")  # Bolt 5.0
            failed = False
            pending: Rows | None = None
            while True:
                _, tag, fields = _Reader(self._read_message(conn)).value()
                name = NAMES.get(tag, hex(tag))
                self.log.append((name, fields))
                if tag == GOODBYE:
                    return
                if tag == RESET:
                    failed, pending = False, None
                    self._send(conn, message(SUCCESS, {}))
                elif failed:
                    self._send(conn, message(IGNORED))
                elif tag == HELLO:
                    if fields[0].get("credentials") != self.password:
                        self._send(
                            conn,
                            message(
                                FAILURE,
                                {
                                    "code": "Neo.ClientError.Security.Unauthorized",
                                    "message": "The client is unauthorized due to authentication failure.",
                                },
                            ),
                        )
                        return
                    self._send(conn, message(SUCCESS, {"server": "Neo4j/5.26.0", "connection_id": "bolt-1"}))
                elif tag == RUN:
                    answer = self.respond(fields[0], fields[1])
                    if isinstance(answer, Failure):
                        failed = True
                        self._send(conn, message(FAILURE, {"code": answer.code, "message": answer.message}))
                    else:
                        pending = answer
                        self._send(conn, message(SUCCESS, {"fields": answer.fields, "t_first": 0, "qid": 0}))
                elif tag == PULL:
                    for record in pending.records if pending else []:
                        self._send(conn, message(RECORD, record))
                    pending = None
                    self._send(
                        conn, message(SUCCESS, {"has_more": False, "type": "r", "t_last": 0, "db": "neo4j"})
                    )
                elif tag == COMMIT:
                    self._send(conn, message(SUCCESS, {"bookmark": "FB:kag-test"}))
                else:  # BEGIN, ROLLBACK, DISCARD and anything else: accepted
                    self._send(conn, message(SUCCESS, {}))
        except (ConnectionError, OSError):
            return
        finally:
            conn.close()
