"""Reading text files in blocks of whole lines, plain or gzip-compressed."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from kag.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
BLOCK_BYTES = 1 << 20  # small blocks stay in cache; 1 MiB measured fastest


def os_error(path: Path, exc: OSError, action: str = "read", expected: str = "a file") -> InputError:
    """One clean line for an OSError on ``path``: the path once and the reason once.

    ``str(exc)`` would repeat both (``[Errno 21] Is a directory: 'x'``), so only
    ``strerror`` is kept. A file missing for reading is ``no such file``; a directory
    where a file belongs is ``is a directory, expected <expected>``.
    """
    if isinstance(exc, FileNotFoundError) and action == "read":
        return InputError(f"{path}: no such file")
    if isinstance(exc, IsADirectoryError):
        return InputError(f"{path}: is a directory, expected {expected}")
    return InputError(f"{path}: cannot {action}: {exc.strerror or type(exc).__name__}")


def open_binary(path: Path) -> BinaryIO:
    """Open ``path`` for reading bytes; gzip is recognised by its magic bytes, not the suffix."""
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise os_error(path, exc) from None
    if raw.peek(2)[:2] == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def iter_line_blocks(path: Path, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[int, bytes]]:
    """Yield ``(first_line_number, block)``; every block holds whole lines.

    Line numbers start at 1. Each block ends with ``\\n`` except possibly the last one
    (a file without a final newline). An empty file yields nothing.
    """
    line = 1
    rest = b""
    with open_binary(path) as fd:
        while True:
            try:
                data = fd.read(block_bytes)
            except (OSError, EOFError, zlib.error) as exc:
                raise InputError(f"{path}: cannot decompress: {exc}") from None
            if not data:
                break
            data = rest + data if rest else data
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            block, rest = data[:cut], data[cut:]
            yield line, block
            line += block.count(b"\n")
    if rest:
        yield line, rest
