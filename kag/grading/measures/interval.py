"""The 95% interval of the accuracy (``interval``): the Wilson score interval of OK / TOT.

It adds no counter: it reads :mod:`.accuracy`'s.
"""

from __future__ import annotations

import math

from kag.grading.measures.declarations import MD_HTML, Block, Column, JsonKey
from kag.grading.measures.registry import Measure, register
from kag.grading.percent import pct

#: z for a two-sided 95% interval (the 0.975 quantile of the standard normal).
Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion ``successes / n``.

    With p = k/n: centre = (p + z²/2n) / (1 + z²/n), half = z/(1 + z²/n) · √(p(1-p)/n + z²/4n²);
    the interval is [centre - half, centre + half], clamped to [0, 1] (exactly 0 when k = 0
    and exactly 1 when k = n). None when n = 0.
    """
    if n <= 0:
        return None
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def _ci(b: Block) -> list[float] | None:
    ci = b.metrics.accuracy_ci95
    return None if ci is None else list(ci)


def _ci_dash(b: Block) -> str:
    ci = b.metrics.accuracy_ci95
    return "-" if ci is None else f"{pct(ci[0])}–{pct(ci[1])}"


def _ci_brackets(b: Block) -> str:
    ci = b.metrics.accuracy_ci95
    return "-" if ci is None else f"[{pct(ci[0], 1)}, {pct(ci[1], 1)}]"


MEASURE = register(
    Measure(
        "interval",
        # No state: the interval is read from the accuracy's counters of the block.
        block_values={"accuracy_ci95": lambda m: wilson_interval(m.correct, m.total)},
        json=(JsonKey("accuracy_ci95", _ci),),
        columns=(
            Column("ACC 95% CI", _ci_dash, MD_HTML, headers={"html": "95% CI"}, cells={"html": _ci_brackets}),
        ),
    )
)
