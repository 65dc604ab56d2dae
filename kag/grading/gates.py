"""The two CI gates, decided here: each returns its verdict (None = passed, else the
message of the failure) and the command raises GateFailed (exit 1) with it.

- ``--fail-under``: :func:`fail_under_verdict`, every setup's accuracy against a threshold.
- ``--fail-if-worse-than``: :func:`regression_verdict`, no setup significantly worse than
  a baseline (Holm-adjusted McNemar).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kag.errors import UsageError

if TYPE_CHECKING:
    from kag.grading.compare.setups import ComparisonRun
    from kag.grading.mcq.summary import SetupSummary, Summary


def check_threshold(threshold_pct: float) -> float:
    """``threshold_pct`` when it is a percentage in [0, 100]; raises UsageError otherwise (NaN too)."""
    if not (0.0 <= threshold_pct <= 100.0):
        raise UsageError(f"--fail-under must be a percentage between 0 and 100 (got {threshold_pct:g})")
    return threshold_pct


def failing_setups(summary: Summary, threshold_pct: float) -> tuple[SetupSummary, ...]:
    """Setups whose ACC% (unrounded, 100·OK/TOT) is below ``threshold_pct``, in rank order.

    A setup without an accuracy (TOT = 0) fails. Raises UsageError unless 0 <= threshold <= 100.
    """
    check_threshold(threshold_pct)
    failing = []
    for s in summary.setups:
        acc = s.overall.accuracy
        if acc is None or acc * 100.0 < threshold_pct:
            failing.append(s)
    return tuple(failing)


def _pct(value: float | None) -> str:
    return "no scored file" if value is None else f"{value * 100:.2f}%"


def fail_under_verdict(summary: Summary, threshold_pct: float) -> str | None:
    """Why ``--fail-under threshold_pct`` fails (:func:`failing_setups` named with their
    ACC%, or no setup graded at all), or None when it passes."""
    failing = failing_setups(summary, threshold_pct)
    if failing:
        names = ", ".join(f"{s.setup} ({_pct(s.overall.accuracy)})" for s in failing)
        return f"--fail-under {threshold_pct:g}: ACC% below {threshold_pct:g} for {names}"
    if not summary.setups:
        return f"--fail-under {threshold_pct:g}: no setup was graded"
    return None


def regression_verdict(run: ComparisonRun) -> str | None:
    """Why the regression gate fails (each setup significantly worse than the baseline),
    or None when it passes.

    "Significantly worse" = Holm-adjusted McNemar p <= alpha and the baseline wins more of
    the discordant questions. A lower accuracy that is not significant passes the gate.
    """
    worse = run.regressions
    if not worse:
        return None
    details = "; ".join(
        f"{c.setup}: {100 * (c.diff or 0):+.2f} pp on {c.n} questions, Holm p = {c.p_holm:.3g}" for c in worse
    )
    return f"{len(worse)} setup(s) significantly worse than {run.baseline} at alpha {run.alpha:g}: {details}"
