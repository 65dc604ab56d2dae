"""Secrets kept out of every message: each configured secret (provider keys, database
passwords, credentials written in a URL), in every form a message can carry it.

A server that echoes a key back may quote it in a JSON string (escaped), in a URL
(percent-encoded, ``+`` for spaces), upper-cased, or normalised with ``-`` and ``_``
swapped; each of these becomes ``***``. Redaction must run on the whole text, before any
truncation: a message cut in the middle of a key no longer contains the key, and the
first part of it would survive.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit, urlunsplit

# Shorter secrets are left alone: redacting them would mangle every message while
# protecting nothing.
MIN_SECRET_LENGTH = 3
MASK = "***"


def secret_forms(secret: str) -> frozenset[str]:
    """The spellings of ``secret`` a message can hold: raw, upper-cased, JSON-escaped (ASCII
    and not, ``/`` escaped or not, and escaped twice for JSON quoted inside a JSON string),
    and URL-encoded (``quote`` with and without ``/`` kept, ``quote_plus``). Case and
    ``-``/``_`` are matched loosely by :class:`Redactor`, not listed here."""
    forms: set[str] = set()
    for base in (secret, secret.upper()):
        once = json.dumps(base)[1:-1]
        forms |= {
            base,
            once,
            json.dumps(base, ensure_ascii=False)[1:-1],
            once.replace("/", "\\/"),
            json.dumps(once)[1:-1],
            quote(base, safe=""),
            quote(base),
            quote_plus(base),
        }
    return frozenset(forms)


def _loose(form: str) -> str:
    # '-' and '_' stand for each other: some servers normalise one into the other.
    return "".join("[-_]" if char in "-_" else re.escape(char) for char in form)


@dataclass(frozen=True)
class Redactor:
    """Replaces every form of every secret (see :func:`secret_forms`) with ``***``, ignoring
    case, longest match first."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def of(cls, secrets: Iterable[str]) -> Redactor:
        """A redactor for ``secrets``; those shorter than ``MIN_SECRET_LENGTH`` are dropped."""
        return cls(
            tuple(sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=lambda s: (-len(s), s)))
        )

    @cached_property
    def _pattern(self) -> re.Pattern[str] | None:
        forms = sorted({form for s in self.secrets for form in secret_forms(s)}, key=len, reverse=True)
        if not forms:
            return None
        return re.compile("|".join(_loose(form) for form in forms), re.IGNORECASE)

    def __call__(self, text: str) -> str:
        pattern = self._pattern
        return text if pattern is None else pattern.sub(MASK, text)


def url_credentials(url: str) -> frozenset[str]:
    """The secrets written in ``url``'s user-info (``http://user:pass@host``): the whole
    user-info, the password and, when there is no password, the user name (a token), each
    as written and percent-decoded. Empty for a URL without user-info."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return frozenset()
    userinfo, at, _ = parts.netloc.rpartition("@")
    if not at:
        return frozenset()
    _, colon, password = userinfo.partition(":")
    found = {userinfo, password} if colon else {userinfo}
    found |= {unquote(value) for value in found}
    return frozenset(value for value in found if value)


def display_url(url: str) -> str:
    """``url`` with its user info and every query value replaced by ``***``
    (``https://u:p@h/v1?key=k`` -> ``https://***@h/v1?key=***``); other URLs unchanged, and
    ``***`` alone for text that does not parse as a URL."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query:
        query = "&".join(f"{name}={MASK}" for name, _ in parse_qsl(query, keep_blank_values=True)) or MASK
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _string_end(text: str, start: int) -> int:
    """The end of the TOML string starting at ``text[start]`` (a quote): one past its last
    quote. Multi-line strings may close with up to two quotes of their content before their
    three."""
    quote = text[start]
    if text.startswith(quote * 3, start):
        i = start + 3
        while True:
            if quote == '"' and text[i] == "\\":
                i += 2
                continue
            if text.startswith(quote * 3, i):
                end = i + 3
                while end < len(text) and text[end] == quote and end - i < 5:
                    end += 1
                return end
            i += 1
    i = start + 1
    while text[i] != quote:
        i += 2 if quote == '"' and text[i] == "\\" else 1
    return i + 1


def redact_toml(text: str, redact: Redactor) -> str:
    """``text`` (a TOML document tomllib read) with every string whose *value* holds a
    secret written as that value, redacted, and then ``redact`` over the whole text.

    Redacting the text alone misses a secret the file spells with TOML's own escapes
    (``"sk-\\u0061bc"``) or splits with a line-ending backslash in a multi-line string:
    each string is decoded as TOML decodes it, and when its value holds a secret it is
    written again as a plain basic string of the redacted value. Other strings, comments
    and the layout are kept as they are."""
    try:
        return redact(_redact_strings(text, redact))
    except (IndexError, ValueError):  # a TOMLDecodeError is a ValueError
        # Not a document tomllib read (the caller's promise): nothing of it is kept.
        return "# (not kept: kag could not read this file's strings to redact them)\n"


def _redact_strings(text: str, redact: Redactor) -> str:
    # As the configuration is read (kag.generation.config): tomli reads TOML 1.1, whose
    # escapes (\xHH, \e) Python 3.11's tomllib refuses.
    try:
        import tomli as toml
    except ImportError:  # pragma: no cover - depends on the environment
        import tomllib as toml  # type: ignore[no-redef]

    out: list[str] = []
    i = done = 0
    while i < len(text):
        char = text[i]
        if char == "#":
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline
            continue
        if char not in "\"'":
            i += 1
            continue
        end = _string_end(text, i)
        token = text[i:end]
        value = toml.loads(f"v = {token}")["v"]
        redacted = redact(value)
        if redacted != value:
            out += [text[done:i], json.dumps(redacted, ensure_ascii=False)]
            done = end
        i = end
    out.append(text[done:])
    return "".join(out)
