"""pass^k (``pass_hat``, "pass-hat-k"), the reliability measure of Yao et al. (2024),
"τ-bench: A Benchmark for Tool-Agent-User Interaction in Real-World Domains",
arXiv:2406.12045, section 3.

For one question answered n times (n epochs) with c correct answers, and 1 <= k <= n,

    pass^k = C(c, k) / C(n, k)

the probability that all k answers drawn without replacement from the n are correct
(unbiased for the chance that k fresh answers are all correct). The score of a setup is
the mean of pass^k over its questions. Where pass@k (:mod:`.pass_at`) asks for one
correct answer among k, pass^k asks for k out of k: pass^1 = pass@1 = c / n (the mean
score), pass^n = 1 when c = n and 0 otherwise (the share of questions always answered
right), pass^k never increases with k and never exceeds pass@k.

The binomials are never formed: the ratio is the product

    C(c, k) / C(n, k) = Π_{j=0}^{k−1} (c − j) / (n − j)

whose factors are in [0, 1]; a factor of 0 (k > c: some draw of k holds a wrong answer)
makes pass^k, and every later one, exactly 0.

Edge cases: n < 1, c outside [0, n] or k outside [1, n] raise ValueError; an empty list of
questions gives an empty mapping. A reducer of the epochs: the ``pass_hat`` key of every
``epochs`` block holds every k, the PASS^k% column of the text report the k of
:func:`~.pass_at.shown_ks`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from kag.grading.measures.declarations import TEXT, Column, Reducer
from kag.grading.measures.pass_at import curve_cell, curve_to_json
from kag.grading.measures.registry import Measure, register


def _check(n: int, c: int) -> None:
    if n < 1:
        raise ValueError(f"pass^k needs n >= 1 samples (got {n})")
    if not 0 <= c <= n:
        raise ValueError(f"the number of correct samples must be in [0, {n}] (got {c})")


def pass_hat_curve(n: int, c: int) -> tuple[float, ...]:
    """pass^k of one question with ``c`` correct answers out of ``n``, for k = 1 … n
    (element k − 1 is pass^k)."""
    _check(n, c)
    curve: list[float] = []
    ratio = 1.0  # C(c, k) / C(n, k), built factor by factor
    for j in range(n):
        ratio *= (c - j) / (n - j) if c - j > 0 else 0.0
        curve.append(ratio)
    return tuple(curve)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k = C(c, k) / C(n, k) of one question with ``c`` correct answers out of ``n``."""
    _check(n, c)
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, {n}] (got {k})")
    return pass_hat_curve(n, c)[k - 1]


def mean_pass_hat(correct: Iterable[int], n: int) -> dict[int, float]:
    """The mean of pass^k over questions, for every k from 1 to ``n``: ``{k: mean}``.

    ``correct`` holds, per question, how many of its ``n`` answers are correct; questions
    with the same count share one curve (O(n · distinct counts)). Empty ``correct``: ``{}``.
    """
    counts = Counter(correct)
    total = sum(counts.values())
    if not total:
        return {}
    curves = [(pass_hat_curve(n, c), weight) for c, weight in sorted(counts.items())]
    return {k: math.fsum(curve[k - 1] * weight for curve, weight in curves) / total for k in range(1, n + 1)}


MEASURE = register(
    Measure(
        "pass_hat",
        reducers=(
            Reducer(
                "pass_hat",
                mean_pass_hat,
                curve_to_json,
                columns=(
                    Column(
                        "PASS^k%",
                        curve_cell,
                        TEXT,
                        table="epochs",
                        legend=(
                            "PASS^k% = pass^k (Yao et al. 2024), the chance that k answers drawn from "
                            "the N are all right, same k"
                        ),
                    ),
                ),
            ),
        ),
    )
)
