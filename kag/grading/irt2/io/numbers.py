"""The numbers of a JSON array at C speed: simdjson fills a numpy buffer, no Python object per number."""

from __future__ import annotations

from typing import Literal

import numpy as np
import simdjson

_parser: simdjson.Parser | None = None


def json_numbers(text: bytes, kind: Literal["int64", "float64"]) -> np.ndarray | None:
    """Every number of the flat JSON array ``text``, or None when simdjson refuses it.

    ``float64``: integers too, each correctly rounded as ``float()`` rounds (exact up to
    2**53). ``int64``: integers only; a fraction, an exponent or a value outside 64 bits
    refuses. Anything but a number (string, true, false, null, object) refuses; a nested
    array would be flattened, so the caller keeps brackets out of ``text``.
    """
    global _parser
    if _parser is None:
        _parser = simdjson.Parser()
    try:
        doc = _parser.parse(text)
    except (ValueError, RuntimeError):  # UnicodeDecodeError is a ValueError
        return None
    # The document proxy must be gone before the parser's next use: ``finally`` drops it.
    try:
        if not isinstance(doc, simdjson.Array):
            return None
        buffer = doc.as_buffer(of_type="i" if kind == "int64" else "d")
    except (TypeError, ValueError):
        return None
    finally:
        del doc
    return np.frombuffer(buffer, dtype=np.dtype(kind))
