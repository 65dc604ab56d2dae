"""The one reader of the files a user names (configurations, prompts, datasets, gold and
prediction files, CSV graphs): read whole or streamed, with one set of messages.

Every failure is raised as the caller's `KagError` subclass, naming the file and ``what``
it is (``"gold file"``, ``"nodes CSV file"``)::

    PATH: WHAT not found
    PATH: WHAT is a directory
    PATH:LINE: WHAT is not UTF-8 text (byte N)
    PATH: cannot read the WHAT: REASON

``N`` counts bytes from the start of the file (a byte order mark included) and ``LINE``
counts ``\\n`` from 1, for a file read whole as for one streamed, where the decoder only
knows the offset in its current chunk. A stream that is not a regular file (a pipe,
``/dev/stdin``) cannot be read again to find the place: its message has no line and byte.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kag.errors import InputError, KagError

_SCAN_BYTES = 1 << 20
_BOM = "\ufeff"


def read_failure(path: Path | str, what: str, exc: OSError, error: type[KagError] = InputError) -> KagError:
    """``exc`` (raised opening or reading ``path``) as one line naming the file once and the
    reason once: ``str(exc)`` would repeat both (``[Errno 21] Is a directory: 'x'``)."""
    if isinstance(exc, FileNotFoundError):
        return error(f"{path}: {what} not found")
    if isinstance(exc, IsADirectoryError):
        return error(f"{path}: {what} is a directory")
    return error(f"{path}: cannot read the {what}: {exc.strerror or type(exc).__name__}")


def _not_utf8(
    path: Path | str, what: str, error: type[KagError], offset: int | None = None, line: int = 0
) -> KagError:
    if offset is None:
        return error(f"{path}: {what} is not UTF-8 text")
    return error(f"{path}:{line}: {what} is not UTF-8 text (byte {offset})")


#: Largest file read whole (bytes): far above any configuration, prompt, prices or
#: datasets file, low enough that ``/dev/zero`` or a runaway file is refused at once.
MAX_FILE_BYTES = 256 * 1024 * 1024
_CHUNK = 1 << 20


def too_large(path: Path | str, what: str, error: type[KagError] = InputError) -> KagError:
    return error(f"{path}: {what} is larger than the {MAX_FILE_BYTES // (1024 * 1024)} MiB size cap")


def read_bytes_file(path: Path, what: str, error: type[KagError] = InputError) -> bytes:
    """The bytes of ``path``, at most :data:`MAX_FILE_BYTES` of them (a device such as
    ``/dev/zero`` or a pipe is read up to the cap, then refused); `read_failure` as
    ``error`` when it cannot be read, or ``too_large``."""
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size > MAX_FILE_BYTES:
                raise too_large(path, what, error)
            parts: list[bytes] = []
            size = 0
            while chunk := handle.read(_CHUNK):
                size += len(chunk)
                if size > MAX_FILE_BYTES:
                    raise too_large(path, what, error)
                parts.append(chunk)
            return b"".join(parts)
    except OSError as exc:
        raise read_failure(path, what, exc, error) from None


def read_text_file(
    path: Path,
    what: str,
    error: type[KagError] = InputError,
    *,
    bom: bool = False,
    universal_newlines: bool = False,
) -> str:
    """The UTF-8 text of ``path``, or ``error`` naming the file and ``what`` it is (not found,
    a directory, not UTF-8 text at line L byte N, or the OS reason).

    ``bom`` drops a leading byte order mark (``utf-8-sig``). ``universal_newlines`` turns
    CRLF and CR into LF, as :meth:`Path.read_text` does; otherwise the text is as stored.
    """
    data = read_bytes_file(path, what, error)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, what, error, exc.start, data.count(b"\n", 0, exc.start) + 1) from None
    if bom:
        text = text.removeprefix(_BOM)
    if universal_newlines and "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


@contextmanager
def open_binary_file(
    path: Path | str, what: str, error: type[KagError] = InputError
) -> Iterator[io.BufferedReader]:
    """``path`` open for streaming bytes. An OSError opening it, or raised inside the
    ``with`` block (reading it), becomes `read_failure` as ``error``: keep other I/O out of
    the block."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as exc:
        raise read_failure(path, what, exc, error) from None
    with handle:
        try:
            yield handle
        except OSError as exc:
            raise read_failure(path, what, exc, error) from None


@contextmanager
def open_text_file(
    path: Path | str,
    what: str,
    error: type[KagError] = InputError,
    *,
    bom: bool = False,
    newline: str | None = None,
) -> Iterator[io.TextIOWrapper]:
    """``path`` open for streaming UTF-8 text (``newline`` as for :func:`open`; ``bom``
    drops a leading byte order mark). Errors as for `open_binary_file`; text that is not
    UTF-8, met anywhere in the stream, is reported with its line and byte in the file.
    A ``UnicodeDecodeError`` raised inside the block is taken for this file's: keep other
    decoding out of the block."""
    with open_binary_file(path, what, error) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8-sig" if bom else "utf-8", newline=newline)
        try:
            yield text
        except UnicodeDecodeError:
            raise _locate_not_utf8(raw, path, what, error) from None
        finally:
            text.detach()  # the raw file is closed by open_binary_file


def _locate_not_utf8(raw: io.BufferedReader, path: Path | str, what: str, error: type[KagError]) -> KagError:
    """The first byte of the file open as ``raw`` that is not UTF-8, found by reading the
    same handle again from the start in chunks (a stream decoder's error gives the offset in
    its chunk only); a sequence cut by a chunk end is carried over to the next chunk. Only a
    regular file is read again (never a pipe, which would wait for a writer or give other
    bytes), and never by its name (which may now lead elsewhere); without a place found, the
    message has none."""
    try:
        if not stat.S_ISREG(os.fstat(raw.fileno()).st_mode):
            return _not_utf8(path, what, error)
        raw.seek(0)
    except (OSError, ValueError):
        return _not_utf8(path, what, error)
    offset, line, carry = 0, 1, b""
    while chunk := raw.read(_SCAN_BYTES):
        data = carry + chunk
        try:
            data.decode("utf-8")
            carry = b""
        except UnicodeDecodeError as exc:
            if exc.reason != "unexpected end of data" or exc.end != len(data):
                return _not_utf8(
                    path, what, error, offset + exc.start, line + data.count(b"\n", 0, exc.start)
                )
            carry, data = data[exc.start :], data[: exc.start]
        offset += len(data)
        line += data.count(b"\n")
    if carry:  # a sequence cut off by the end of the file
        return _not_utf8(path, what, error, offset, line)
    return _not_utf8(path, what, error)  # the file changed since the decoder read it
