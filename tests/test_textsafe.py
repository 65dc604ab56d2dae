"""kag.textsafe: what is escaped for a terminal, and what is left alone."""

from __future__ import annotations

import os

import pytest

from kag.textsafe import escape_controls, escape_message, is_utf8


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain name", "plain name"),
        ("tab\there", "tab\there"),
        ("é ü 漢字 ⏎", "é ü 漢字 ⏎"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("a\nb\rc", "a\\x0ab\\x0dc"),
        ("nul\x00del\x7f", "nul\\x00del\\x7f"),
        ("c1\x85\x9b\x9f", "c1\\x85\\x9b\\x9f"),
        ("\xa0 kept", "\xa0 kept"),
        (os.fsdecode(b"bad\xff\xfe"), "bad\\xff\\xfe"),
        ("lone \ud800", "lone \\ud800"),
    ],
)
def test_escape_controls(text: str, shown: str) -> None:
    assert escape_controls(text) == shown


def test_plain_text_is_returned_as_is() -> None:
    text = "setup-1 (ok)"
    assert escape_controls(text) is text


def test_messages_keep_their_own_line_breaks() -> None:
    assert escape_message("two\nlines \x1b[2J") == "two\nlines \\x1b[2J"


def test_is_utf8() -> None:
    assert is_utf8("ascii") and is_utf8("漢字")
    assert not is_utf8(os.fsdecode(b"x\xff"))
