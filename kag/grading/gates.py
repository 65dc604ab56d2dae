"""The two CI gates, decided here: each returns its verdict (None = passed, else the
message of the failure) and the command raises GateFailed (exit 1) with it.

- ``--fail-under``: :func:`fail_under_verdict`, every setup's accuracy against a threshold.
- ``--fail-if-worse-than``: :func:`regression_verdict`, no setup significantly worse than
  a baseline (Holm-adjusted McNemar).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kag.errors import UsageError
from kag.grading.percent import pct

if TYPE_CHECKING:
    from kag.grading.compare.setups import ComparisonRun
    from kag.grading.mcq.summary import SetupSummary, Summary


def check_threshold(threshold_pct: float) -> float:
    """``threshold_pct`` when it is a percentage in [0, 100]; raises UsageError otherwise (NaN too)."""
    if not (0.0 <= threshold_pct <= 100.0):
        raise UsageError(f"--fail-under must be a percentage between 0 and 100 (got {threshold_pct:g})")
    return threshold_pct


def _accuracy(s: SetupSummary, extracted: bool) -> float | None:
    return s.overall.extracted_accuracy if extracted else s.overall.accuracy


def _mcq_setups(summary: Summary) -> list[SetupSummary]:
    # A setup that graded only open questions has no MCQ accuracy to gate.
    return [s for s in summary.setups if s.overall.total or not s.overall.open_total]


def failing_setups(
    summary: Summary, threshold_pct: float, *, extracted: bool = False
) -> tuple[SetupSummary, ...]:
    """Setups whose ACC% (unrounded, 100·OK/TOT) is below ``threshold_pct``, in rank order;
    with ``extracted`` their XACC% (100·extracted correct/TOT) instead.

    A setup without an accuracy (TOT = 0) fails, unless it graded only open questions (it
    is then not gated). Raises UsageError unless 0 <= threshold <= 100.
    """
    check_threshold(threshold_pct)
    failing = []
    for s in _mcq_setups(summary):
        acc = _accuracy(s, extracted)
        if acc is None or acc * 100.0 < threshold_pct:
            failing.append(s)
    return tuple(failing)


def fail_under_verdict(summary: Summary, threshold_pct: float, *, extracted: bool = False) -> str | None:
    """Why ``--fail-under threshold_pct`` fails (:func:`failing_setups` named with their
    ACC%, or XACC% with ``extracted``, or no setup graded at all), or None when it passes."""
    failing = failing_setups(summary, threshold_pct, extracted=extracted)
    metric = "XACC%" if extracted else "ACC%"
    if failing:
        names = ", ".join(
            f"{s.setup} ({pct(_accuracy(s, extracted), unit='%', missing='no scored file')})" for s in failing
        )
        return f"--fail-under {threshold_pct:g}: {metric} below {threshold_pct:g} for {names}"
    if not _mcq_setups(summary):
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
        f"{c.setup}: {pct(c.diff or 0, signed=True)} pp on {c.n} questions, Holm p = {c.p_holm:.3g}"
        for c in worse
    )
    return f"{len(worse)} setup(s) significantly worse than {run.baseline} at alpha {run.alpha:g}: {details}"
