"""The one formatting of a fraction as a percentage, and of a mean as a fixed-point number,
for report cells and messages alike."""

from __future__ import annotations


def pct(
    value: float | None, digits: int = 2, *, signed: bool = False, unit: str = "", missing: str = "-"
) -> str:
    """``value`` (a fraction) times 100 with ``digits`` decimals, then ``unit``
    (0.5 -> "50.00", with ``unit="%"`` "50.00%"); with ``signed`` the sign is always written
    (-0.2 -> "-20.00", 0.2 -> "+20.00"). None -> ``missing``."""
    if value is None:
        return missing
    return f"{100 * value:{'+' if signed else ''}.{digits}f}{unit}"


def fixed(value: float | None, digits: int = 3, *, missing: str = "-") -> str:
    """``value`` with ``digits`` decimals (GEN(s), RET(s), CTX_LEN); None -> ``missing``."""
    return missing if value is None else f"{value:.{digits}f}"
