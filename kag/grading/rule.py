"""The answer rule every grade shares, and the contract kag keeps with the Rust tool.

kag reads the result trees of the Rust tool that came before it and must grade them as
it did, number for number. The contract, written here once:

- **Layout**: ``<root>/<dataset>/<question>/<prefix><setup>.json``, one file per setup and
  question (:mod:`kag.results.tree`).
- **Rule**: an ``ok`` file is correct when its ``result``, trimmed of Unicode White_Space
  (Rust's ``str::trim``, :func:`rust_trim`), equals the answer key ignoring ASCII case only
  (Rust's ``eq_ignore_ascii_case``, :func:`eq_ignore_ascii_case`); an ``error`` file is an
  error (:func:`is_correct`, applied by :mod:`kag.grading.mcq.rule`).
- **Durations**: summed as integer nanoseconds; a mean is Rust's ``Duration::div_f64``
  then ``as_secs_f64`` (:func:`kag.grading.mcq.metrics.mean_duration_secs`).

Every other module names the piece of the contract it keeps by these functions.
"""

from __future__ import annotations

from kag.textsafe import ascii_fold

# Unicode White_Space, the set Rust's `str::trim` strips. Python's `str.strip()` also strips
# U+001C..U+001F (information separators), which Rust keeps: "\x1fb" is not "b" in Rust.
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def rust_trim(text: str) -> str:
    """``text`` without leading/trailing Unicode White_Space, like Rust's ``str::trim``."""
    return text.strip(RUST_WHITESPACE)


def eq_ignore_ascii_case(a: str, b: str) -> bool:
    """Rust's ``eq_ignore_ascii_case``: equal when only A-Z/a-z may differ in case.

    Non-ASCII letters must match exactly: "É" != "é", and the Kelvin sign "K" (U+212A)
    is not "k" (``str.lower``/``casefold`` would say otherwise).
    """
    return ascii_fold(a) == ascii_fold(b)


def is_correct(response: str, answer: str) -> bool:
    """The rule: ``response.trim().eq_ignore_ascii_case(answer)``."""
    return eq_ignore_ascii_case(rust_trim(response), answer)
