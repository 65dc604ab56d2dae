"""pass@k (``pass_at``), the unbiased estimator of Chen et al. (2021), "Evaluating Large Language Models
Trained on Code", arXiv:2107.03374, section 2.1.

For one question answered n times (n epochs) with c correct answers, and 1 <= k <= n,

    pass@k = 1 − C(n − c, k) / C(n, k)

the probability that at least one of k answers drawn without replacement from the n is
correct. The score of a setup is the mean of pass@k over its questions.

``k`` is the number of attempts allowed per question, not the number of epochs run: every
k from 1 to n is estimated from the same n answers. pass@1 = c / n (the mean score of the
question), pass@n = 1 when c > 0 and 0 when c = 0, and pass@k never decreases with k.

The binomials are never formed (C(200, 100) has 59 digits): the ratio is the product

    C(n − c, k) / C(n, k) = Π_{j=0}^{k−1} (n − c − j) / (n − j)

whose factors are in [0, 1], so the running product only shrinks and cannot overflow; a
factor of 0 (k > n − c: every draw of k holds a correct answer) makes pass@k exactly 1.
It is the same quantity as Chen et al.'s ``1 − prod(1 − k / arange(n − c + 1, n + 1))``,
taken term by term over k so that one pass gives every k.

Edge cases: n < 1, c outside [0, n] or k outside [1, n] raise ValueError; an empty list of
questions gives an empty mapping (nothing to measure).

A reducer of the epochs (:class:`~.declarations.Reducer`): the ``pass_at`` key of every
``epochs`` block holds every k, the PASS@k% column of the text report the k of
:func:`shown_ks`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping

from kag.grading.measures.declarations import TEXT, Column, Reducer
from kag.grading.measures.registry import Measure, register
from kag.grading.percent import pct


def _check(n: int, c: int) -> None:
    if n < 1:
        raise ValueError(f"pass@k needs n >= 1 samples (got {n})")
    if not 0 <= c <= n:
        raise ValueError(f"the number of correct samples must be in [0, {n}] (got {c})")


def pass_at_curve(n: int, c: int) -> tuple[float, ...]:
    """pass@k of one question with ``c`` correct answers out of ``n``, for k = 1 … n
    (element k − 1 is pass@k)."""
    _check(n, c)
    curve: list[float] = []
    ratio = 1.0  # C(n − c, k) / C(n, k), built factor by factor
    for j in range(n):
        ratio *= (n - c - j) / (n - j) if n - c - j > 0 else 0.0
        curve.append(1.0 - ratio)
    return tuple(curve)


def pass_at_k(n: int, c: int, k: int) -> float:
    """pass@k = 1 − C(n − c, k) / C(n, k) of one question with ``c`` correct answers out of ``n``."""
    _check(n, c)
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}] (got {k})")
    return pass_at_curve(n, c)[k - 1]


def mean_pass_at(correct: Iterable[int], n: int) -> dict[int, float]:
    """The mean of pass@k over questions, for every k from 1 to ``n``: ``{k: mean}``.

    ``correct`` holds, per question, how many of its ``n`` answers are correct. Questions
    with the same count share one curve, so the cost is O(n · distinct counts), at most
    O(n²), whatever the number of questions. Empty ``correct``: ``{}``.
    """
    counts = Counter(correct)
    total = sum(counts.values())
    if not total:
        return {}
    curves = [(pass_at_curve(n, c), weight) for c, weight in sorted(counts.items())]
    return {k: math.fsum(curve[k - 1] * weight for curve, weight in curves) / total for k in range(1, n + 1)}


def shown_ks(n: int) -> list[int]:
    """The k a text column shows of a curve over k = 1 … ``n``: the powers of two below
    ``n``, and ``n`` (so that the column stays short for many epochs)."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return [*ks, n]


def curve_cell(curve: Mapping[int, float]) -> str:
    """``k:percent`` for the k of :func:`shown_ks` of a curve ``{k: value}``, k = 1 … n."""
    return " ".join(f"{k}:{pct(curve[k])}" for k in shown_ks(len(curve)))


def curve_to_json(curve: Mapping[int, float]) -> dict[str, float]:
    """Every k of the curve, keyed by k in decimal (JSON keys are strings)."""
    return {str(k): value for k, value in curve.items()}


MEASURE = register(
    Measure(
        "pass_at",
        reducers=(
            Reducer(
                "pass_at",
                mean_pass_at,
                curve_to_json,
                columns=(
                    Column(
                        "PASS@k%",
                        curve_cell,
                        TEXT,
                        table="epochs",
                        legend=(
                            "PASS@k% = unbiased pass@k (Chen et al. 2021) for k = 1, 2, 4, 8, … and N "
                            "(every k in --format json)"
                        ),
                    ),
                ),
            ),
        ),
    )
)
