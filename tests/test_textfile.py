"""The one reader of user-named files: whole or streamed, every failure in the same words."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kag import textfile
from kag.errors import ConfigError, InputError
from kag.textfile import open_binary_file, open_text_file, read_bytes_file, read_text_file
from tests.conftest import REPO

BOM = b"\xef\xbb\xbf"


def stream(path: Path, what: str = "notes file", **options: object) -> str:
    with open_text_file(path, what, **options) as handle:  # type: ignore[arg-type]
        return "".join(handle)


def stream_bytes(path: Path) -> bytes:
    with open_binary_file(path, "notes file") as handle:
        return handle.read()


def message(path: Path, rest: str) -> str:
    return f"^{re.escape(str(path))}{re.escape(rest)}$"


# ---------------------------------------------------------------- failures, read whole and streamed

READERS = {
    "text": lambda path: read_text_file(path, "notes file"),
    "bytes": lambda path: read_bytes_file(path, "notes file"),
    "text stream": stream,
    "binary stream": stream_bytes,
}


@pytest.mark.parametrize("read", READERS.values(), ids=READERS.keys())
def test_a_missing_file(tmp_path: Path, read) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "notes.txt"
    with pytest.raises(InputError, match=message(path, ": notes file not found")):
        read(path)


@pytest.mark.parametrize("read", READERS.values(), ids=READERS.keys())
def test_a_directory(tmp_path: Path, read) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=message(tmp_path, ": notes file is a directory")):
        read(tmp_path)


@pytest.mark.parametrize("read", READERS.values(), ids=READERS.keys())
def test_another_os_error_gives_its_reason_once(tmp_path: Path, read) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "plain").write_text("x")
    path = tmp_path / "plain" / "notes.txt"  # a file in the way of a folder: ENOTDIR
    with pytest.raises(
        InputError, match=message(path, ": cannot read the notes file: Not a directory")
    ) as info:
        read(path)
    assert "Errno" not in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
@pytest.mark.parametrize("read", READERS.values(), ids=READERS.keys())
def test_permission_denied(tmp_path: Path, read) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "notes.txt"
    path.write_text("secret")
    path.chmod(0)
    try:
        with pytest.raises(
            InputError, match=message(path, ": cannot read the notes file: Permission denied")
        ):
            read(path)
    finally:
        path.chmod(0o600)


def test_the_callers_error_class_is_raised(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="system prompt not found"):
        read_text_file(tmp_path / "p.md", "system prompt", ConfigError)
    with (
        pytest.raises(ConfigError, match="system prompt is a directory"),
        open_text_file(tmp_path, "system prompt", ConfigError),
    ):
        pass


# ---------------------------------------------------------------- text that is not UTF-8


def test_not_utf8_read_whole_names_the_line_and_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"one\ntwo\ncaf\xe9\n")
    with pytest.raises(InputError, match=message(path, ":3: notes file is not UTF-8 text (byte 11)")):
        read_text_file(path, "notes file")
    assert read_bytes_file(path, "notes file") == b"one\ntwo\ncaf\xe9\n"  # bytes are not decoded


def test_not_utf8_mid_stream_is_placed_in_the_file_not_in_the_decoders_chunk(tmp_path: Path) -> None:
    # The text decoder reads 8 KiB chunks; its own offset would be the one within the last chunk.
    head = b"".join(b"line %05d\n" % n for n in range(1, 10_001))  # 100,000 bytes, 10,000 lines
    path = tmp_path / "notes.txt"
    path.write_bytes(head + b"ok\n\xff\n")
    expected = message(path, f":10002: notes file is not UTF-8 text (byte {len(head) + 3})")
    with pytest.raises(InputError, match=expected):
        stream(path)
    with pytest.raises(InputError, match=expected):
        read_text_file(path, "notes file")  # the same words for the file read whole


def test_a_character_cut_by_the_rescan_chunk_is_not_taken_for_bad_text(tmp_path: Path) -> None:
    # "é" (2 bytes) straddles the end of the first chunk the error's position is searched in;
    # the real fault is the lone continuation byte after it.
    first = b"a" * (textfile._SCAN_BYTES - 1) + "é".encode()
    path = tmp_path / "notes.txt"
    path.write_bytes(first + b"\n\x80\n")
    with pytest.raises(
        InputError, match=message(path, f":2: notes file is not UTF-8 text (byte {len(first) + 1})")
    ):
        stream(path)


def test_a_sequence_cut_by_the_end_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"ab\nc\xe2\x82")
    expected = message(path, ":2: notes file is not UTF-8 text (byte 4)")
    with pytest.raises(InputError, match=expected):
        stream(path)
    with pytest.raises(InputError, match=expected):
        read_text_file(path, "notes file")


_PIPE_READER = """
import sys
from pathlib import Path
from kag.errors import InputError
from kag.textfile import open_text_file
try:
    with open_text_file(Path(sys.argv[1]), "nodes CSV file") as f:
        for _ in f:
            pass
except InputError as exc:
    print(exc)
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_bad_text_in_a_pipe_is_reported_without_reading_the_pipe_again(tmp_path: Path) -> None:
    # A named pipe cannot be read a second time to place the fault: opening it again would
    # wait for a writer that never comes. The message then has no line and byte.
    fifo = tmp_path / "nodes.csv"
    os.mkfifo(fifo)
    reader = subprocess.Popen(
        [sys.executable, "-c", _PIPE_READER, str(fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    with open(fifo, "wb") as writer:
        writer.write(b"a,b\n" * 10 + b"\xff\n")
    try:
        out, err = reader.communicate(timeout=60)
    finally:
        reader.kill()
    assert err == b""
    assert out.decode() == f"{fifo}: nodes CSV file is not UTF-8 text\n"


def test_a_regular_file_is_read_again_through_the_open_handle_not_its_name(tmp_path: Path) -> None:
    # The place is found in the file that was read, even when its name now leads elsewhere.
    path = tmp_path / "notes.txt"
    path.write_bytes(b"ok\nok\n\xff\n")
    expected = message(path, ":3: notes file is not UTF-8 text (byte 6)")
    with pytest.raises(InputError, match=expected), open_text_file(path, "notes file") as f:
        path.unlink()
        path.write_bytes(b"all good now\n")
        f.read()


def test_a_byte_order_mark_counts_as_bytes_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(BOM + b"ab\xff")
    expected = message(path, ":1: notes file is not UTF-8 text (byte 5)")
    with pytest.raises(InputError, match=expected):
        read_text_file(path, "notes file", bom=True)
    with pytest.raises(InputError, match=expected):
        stream(path, bom=True)


# ---------------------------------------------------------------- what is read


def test_a_byte_order_mark_is_dropped_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(BOM + b"id\n\xef\xbb\xbf")  # a later U+FEFF is text and stays
    assert read_text_file(path, "notes file", bom=True) == "id\n\ufeff"
    assert read_text_file(path, "notes file") == "\ufeffid\n\ufeff"
    assert stream(path, bom=True) == "id\n\ufeff"
    assert stream(path) == "\ufeffid\n\ufeff"
    assert read_bytes_file(path, "notes file") == BOM + b"id\n\xef\xbb\xbf"


def test_newlines_are_kept_unless_universal(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"a\r\nb\rc\n")
    assert read_text_file(path, "notes file") == "a\r\nb\rc\n"
    assert read_text_file(path, "notes file", universal_newlines=True) == "a\nb\nc\n"
    assert read_text_file(path, "notes file", universal_newlines=True) == path.read_text(encoding="utf-8")


def test_a_stream_for_csv_keeps_its_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_bytes(BOM + b'id,text\r\n1,"two\r\nlines"\r\n')
    with open_text_file(path, "nodes CSV file", bom=True, newline="") as handle:
        reader = csv.reader(handle, strict=True)
        assert [(reader.line_num, row) for row in reader] == [(1, ["id", "text"]), (3, ["1", "two\r\nlines"])]


def test_an_os_error_without_errno_is_named_by_its_type(tmp_path: Path) -> None:
    # What a permission problem reads as, also where the suite runs as root.
    denied = textfile.read_failure(tmp_path, "notes file", PermissionError(13, "Permission denied"))
    assert str(denied) == f"{tmp_path}: cannot read the notes file: Permission denied"
    assert str(textfile.read_failure(tmp_path, "notes file", OSError())) == (
        f"{tmp_path}: cannot read the notes file: OSError"
    )


@pytest.mark.parametrize("path", ["/dev/zero", "big"])
def test_a_file_past_the_size_cap_is_refused_without_reading_it_all(
    tmp_path: Path, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(textfile, "MAX_FILE_BYTES", 4 << 20)
    target = Path(path) if path.startswith("/") else tmp_path / path
    if not path.startswith("/"):
        with open(target, "wb") as handle:
            handle.truncate(8 << 20)  # sparse: announced by its size, refused before any read
    with pytest.raises(
        InputError, match=rf"^{re.escape(str(target))}: prices file is larger than the 4 MiB size cap$"
    ):
        read_text_file(target, "prices file")
