"""kag.textsafe: what is escaped for a terminal, and what is left alone."""

from __future__ import annotations

import os

import pytest

from kag.textsafe import (
    escape_controls,
    escape_markdown,
    escape_message,
    is_utf8,
    markdown_code,
    neutralize_commands,
)


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


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("::error::x", "\\x3a:error::x"),
        ("  ::add-mask::secret", "  \\x3a:add-mask::secret"),
        ("\t::stop-commands::tok", "\t\\x3a:stop-commands::tok"),
        ("std::vector", "std::vector"),  # not at a line's start: no command
        ("a ##[add-mask]b", "a \\x23#[add-mask]b"),
        ("####[x", "##\\x23#[x"),
        (":: error", "\\x3a: error"),
        ("#[x] and ## [y]", "#[x] and ## [y]"),
    ],
)
def test_workflow_commands_are_neutralized(text: str, shown: str) -> None:
    assert neutralize_commands(text) == shown
    assert escape_controls(text) == shown


def test_each_line_of_a_message_is_neutralized_and_plain_text_is_returned_as_is() -> None:
    assert escape_message("problems:\n ::error::x\nok ##[add-mask]y") == (
        "problems:\n \\x3a:error::x\nok \\x23#[add-mask]y"
    )
    plain = "a::b #[c]"
    assert neutralize_commands(plain) is plain


def test_markdown_escaping_leaves_no_markup() -> None:
    assert escape_markdown('<img src="x"> [l](u) ![i](u) a|b `c` \\') == (
        '\\<img src="x"> [l\\](u) ![i\\](u) a\\|b \\`c\\` \\\\'
    )
    assert escape_markdown("[+0.0, +1.5] >1000 **x**") == "[+0.0, +1.5] >1000 **x**"


@pytest.mark.parametrize(
    ("text", "span"),
    [("plain", "`plain`"), ("a``b", "```a``b```"), ("`x", "`` `x ``"), ("<a>\x1b", "`<a>\\x1b`")],
)
def test_a_code_span_cannot_be_closed_by_its_text(text: str, span: str) -> None:
    assert markdown_code(text) == span
