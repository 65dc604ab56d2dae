"""How a golden is compared: floats with a relative tolerance, everything else byte for byte.

Similarities computed by the bundled embedding model (ONNX Runtime, BLAS) can differ in the
last digit from one CPU to another (``0.8902659302284242`` here, ``0.890265930228424`` there),
and kag prints floats at full precision. So the text is cut into float literals and the rest:
the rest must be identical, and each float pair must agree within ``REL_TOL``. Integers are
part of the rest (counts, exit codes and widths compare exactly). A float that should be 0
may come out as 1e-17 on another CPU: values within ``ABS_TOL`` of each other match too.
"""

from __future__ import annotations

import math
import re

REL_TOL = 1e-9
ABS_TOL = 1e-15

# A float literal: digits with a fraction and/or an exponent, not glued to a word or another dot
# (so ``qwen35-9b``, ``v1.2.3`` and ``1.0.0`` are text, and both sides cut the same way).
FLOAT = re.compile(rb"(?<![\w.])[-+]?(?:\d+\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)(?![\w.])")


def split(data: bytes) -> list[bytes]:
    """``data`` as alternating pieces: text, float, text, ..., text (always an odd count)."""
    pieces: list[bytes] = []
    at = 0
    for match in FLOAT.finditer(data):
        pieces += [data[at : match.start()], match.group()]
        at = match.end()
    pieces.append(data[at:])
    return pieces


def same_output(expected: bytes, actual: bytes) -> bool:
    """``expected`` and ``actual`` are the same output up to float rounding in the last digits."""
    if expected == actual:
        return True
    old, new = split(expected), split(actual)
    if len(old) != len(new):
        return False
    for i, (a, b) in enumerate(zip(old, new, strict=True)):
        if a == b:
            continue
        if i % 2 == 0 or not math.isclose(float(a), float(b), rel_tol=REL_TOL, abs_tol=ABS_TOL):
            return False
    return True
