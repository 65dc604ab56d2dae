"""Text that is safe to show on a terminal.

A setup, dataset or question name comes from a file name, and a response from a model:
either can hold ESC and start a terminal escape sequence (move the cursor, rewrite the
window title, hide text), or hold bytes that are not UTF-8. Everything kag renders for a
person (text and markdown tables, warnings, listings) passes such text through
:func:`escape_controls`; output for machines (JSON, ``find -l``/``-0`` paths) keeps the
exact text.

Also :func:`ascii_fold`, the case folding of option keys (A-Z only, so that "É" and "é"
stay distinct), shared by the datasets reader and the grading rule.
"""

from __future__ import annotations

import re

# C0 except tab, DEL, C1, and the lone surrogates that stand for bytes that are not
# UTF-8 in a file name (Python's surrogateescape: byte 0xff is U+DCFF).
_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff]")
_UNSAFE_KEEP_NEWLINE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file name: show the byte
        return f"\\x{code - 0xDC00:02x}"
    if code > 0xFF:
        return f"\\u{code:04x}"
    return f"\\x{code:02x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character (C0 but tab, DEL, C1) written ``\\xNN``, and
    every byte of a file name that is not UTF-8 written ``\\xNN`` as the byte. Text
    without any comes back as it is (the same object)."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape, text)


def escape_message(text: str) -> str:
    """:func:`escape_controls` for a message kag composed: its own line breaks stay (a
    message may list problems one per line); every other control character is escaped."""
    if _UNSAFE_KEEP_NEWLINE.search(text) is None:
        return text
    return _UNSAFE_KEEP_NEWLINE.sub(_escape, text)


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
