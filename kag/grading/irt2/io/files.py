"""Reading text files in blocks of whole lines, plain or gzip-compressed."""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from kag.errors import InputError
from kag.textfile import open_binary_file

GZIP_MAGIC = b"\x1f\x8b"
BLOCK_BYTES = 1 << 19  # 256 KiB to 2 MiB parse equally fast; smaller blocks, smaller parser buffers
# A prediction row holds a query and its scored candidates: even every vertex of the largest
# IRT2 graph with its score is a few MiB. Longer lines are refused rather than held in memory.
MAX_LINE_BYTES = 64 << 20


@contextmanager
def open_binary(path: Path, what: str) -> Iterator[io.BufferedIOBase]:
    """``path`` open for reading bytes; gzip is recognised by its magic bytes, not the suffix."""
    with open_binary_file(path, what) as raw:
        if raw.peek(2)[:2] != GZIP_MAGIC:
            yield raw
            return
        with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
            yield unzipped


def iter_line_blocks(
    path: Path, what: str, block_bytes: int = BLOCK_BYTES, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(first_line_number, block)`` of ``path`` (``what`` it is, for messages); every
    block holds whole lines.

    Line numbers start at 1. Each block ends with ``\\n`` except possibly the last one
    (a file without a final newline). An empty file yields nothing. A line longer than
    ``max_line_bytes`` (newline not counted; ``block_bytes`` must not be larger) raises
    `InputError` naming it, before it is read whole. A long line is gathered piece by
    piece and joined once: time stays linear.
    """
    line = 1
    pending: list[bytes] = []  # the start of a line that no block read so far has ended
    pending_bytes = 0
    with open_binary(path, what) as fd:
        while True:
            try:
                data = fd.read(block_bytes)
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                raise InputError(f"{path}: cannot decompress the {what}: {exc}") from None
            if not data:
                break
            end = data.find(b"\n")
            if pending_bytes + (len(data) if end < 0 else end) > max_line_bytes:
                raise InputError(f"{path}:{line}: the line is longer than {_size(max_line_bytes)}")
            if end < 0:
                pending.append(data)
                pending_bytes += len(data)
                continue
            cut = data.rfind(b"\n") + 1
            block = b"".join((*pending, data[:cut])) if pending else data[:cut]
            pending = [data[cut:]] if cut < len(data) else []
            pending_bytes = len(data) - cut
            yield line, block
            line += _newlines(block)
    if pending:
        yield line, b"".join(pending)


def _newlines(block: bytes) -> int:
    # Three times faster than bytes.count, which counts a byte at a time.
    return int(np.count_nonzero(np.frombuffer(block, dtype=np.uint8) == 0x0A))


def _size(count: int) -> str:
    return f"{count >> 20} MiB" if count >= 1 << 20 and count % (1 << 20) == 0 else f"{count:,} bytes"
