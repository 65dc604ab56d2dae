"""Text that is safe to show on a terminal.

A setup, dataset or question name comes from a file name, and a response from a model:
either can hold ESC and start a terminal escape sequence (move the cursor, rewrite the
window title, hide text), or hold bytes that are not UTF-8. Everything kag renders for a
person (text and markdown tables, warnings, listings) passes such text through
:func:`escape_controls`; output for machines (JSON, ``find -l``/``-0`` paths) keeps the
exact text.

A CI log is read by a machine too: GitHub Actions runs a log line that starts with ``::``
(blanks aside) or holds ``##[`` as a workflow command (``::error::``, ``::add-mask::``,
``::stop-commands::``, ``##[add-mask]``). :func:`neutralize_commands`, which
:func:`escape_controls` and :func:`escape_message` apply, writes the first character of
such a marker as ``\\xNN``, so a name can never emit one; kag's own annotations are
written apart (:mod:`kag.render.github`). :func:`escape_markdown` keeps a name from
adding markup (raw HTML, links, images) to a markdown report or job summary.

Also :func:`ascii_fold`, the case folding of option keys (A-Z only, so that "É" and "é"
stay distinct), shared by the datasets reader and the grading rule.
"""

from __future__ import annotations

import re

# C0 except tab, DEL, C1, and the lone surrogates that stand for bytes that are not
# UTF-8 in a file name (Python's surrogateescape: byte 0xff is U+DCFF).
_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff]")
_UNSAFE_KEEP_NEWLINE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# "::" at the start of a line (after blanks) and "##[" anywhere: GitHub's workflow commands.
_COMMAND = re.compile(r"^([^\S\n]*):(?=:)|#(?=#\[)", re.MULTILINE)
# What GitHub-flavoured markdown reads as markup in a line of text or a table cell.
_MARKDOWN = re.compile(r"[\\`<|]|\](?=\()")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file name: show the byte
        return f"\\x{code - 0xDC00:02x}"
    if code > 0xFF:
        return f"\\u{code:04x}"
    return f"\\x{code:02x}"


def _command(found: re.Match[str]) -> str:
    blanks = found.group(1)
    return "\\x23" if blanks is None else f"{blanks}\\x3a"


def neutralize_commands(text: str) -> str:
    """``text`` with each GitHub workflow command marker broken: a ``:`` that starts a
    line's ``::`` (blanks before it allowed) written ``\\x3a``, the first ``#`` of every
    ``##[`` written ``\\x23``. Text without any comes back as it is (the same object)."""
    if "::" not in text and "##[" not in text:
        return text
    return _COMMAND.sub(_command, text)


def escape_controls(text: str) -> str:
    """``text`` with every control character (C0 but tab, DEL, C1) written ``\\xNN``, and
    every byte of a file name that is not UTF-8 written ``\\xNN`` as the byte; then
    :func:`neutralize_commands`. Text without any comes back as it is (the same object)."""
    if _UNSAFE.search(text) is not None:
        text = _UNSAFE.sub(_escape, text)
    return neutralize_commands(text)


def escape_message(text: str) -> str:
    """:func:`escape_controls` for a message kag composed: its own line breaks stay (a
    message may list problems one per line), every line's workflow command marker is
    broken; every other control character is escaped."""
    if _UNSAFE_KEEP_NEWLINE.search(text) is not None:
        text = _UNSAFE_KEEP_NEWLINE.sub(_escape, text)
    return neutralize_commands(text)


def escape_markdown(text: str) -> str:
    """``text`` as literal GitHub-flavoured markdown, in a line or a table cell: each
    backslash, backtick, ``<`` and ``|`` is backslash-escaped, and the ``]`` of a ``](``,
    so that a name shows as written and adds no raw HTML, no link or image, no table cell
    and no code span. Line breaks are the caller's (:func:`escape_controls` writes them
    ``\\x0a``)."""
    return _MARKDOWN.sub(lambda found: "\\" + found.group(), text)


def markdown_code(text: str) -> str:
    """``text`` (through :func:`escape_controls`) as a markdown code span: fenced by one
    backtick more than its longest run of backticks (padded with a space when it starts or
    ends with one), so no name can close the span early; inside it nothing is markup."""
    text = escape_controls(text)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def is_utf8(text: str) -> bool:
    """Whether a name read from the file system is valid UTF-8 (an undecodable byte comes
    back from the OS as a lone surrogate, which cannot be encoded)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def ascii_fold(text: str) -> str:
    """``text`` with A-Z lowered and every other character kept (the answer rule's folding)."""
    # On a pure-ASCII string str.lower() only touches A-Z, and it is much faster than translate.
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)
