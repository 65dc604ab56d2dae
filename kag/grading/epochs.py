"""Metrics over repeated samples (epochs) of the same questions by one setup.

Input: one sequence of per-epoch outcomes per question, in epoch order (epoch 1 first).
Output: :class:`EpochSummary` with, for N epochs and the Q questions that have all N,
writing x[q][e] ∈ {0, 1} for "epoch e of question q is correct" and
p[q] = (1/N) Σ_e x[q][e] for the question's mean score:

- ``mean_accuracy`` = (1/N) Σ_e acc[e], where acc[e] = (1/Q) Σ_q x[q][e] is the accuracy
  of epoch e; equal to (1/Q) Σ_q p[q], the mean over all Q·N samples.
- ``stderr``: the standard error of ``mean_accuracy`` clustered by question,
  sqrt( Σ_q (p[q] − m)² / (Q (Q − 1)) ), m = ``mean_accuracy``.
  This is the clustered standard error of inspect_ai's ``stderr(cluster=...)``
  (``inspect_ai/scorer/_metrics/std.py``, after Miller 2024, "Adding Error Bars to Evals",
  arXiv:2411.00640, appendix A, with the finite-cluster correction C/(C−1)):
  SE = sqrt( C/(C−1) · Σ_c (Σ_{i∈c} (s_i − m))² ) / n. With C = Q clusters of N samples each
  and n = Q·N, Σ_{i∈q} (s_i − m) = N (p[q] − m), which gives the formula above: the sample
  standard deviation (ddof 1) of the per-question means over sqrt(Q). With N = 1 it is the
  binomial standard error sqrt(m (1 − m) / (Q − 1)). None when Q < 2 (undefined).
- ``pass_at_k``: the share of questions with at least one correct epoch (pass@N).
- ``reduced``: the values of the registered measures' epoch reducers
  (:func:`kag.grading.measures.reducers`), each from the per-question counts
  c[q] = Σ_e x[q][e] and N, under its key. ``reduced["pass_at"]`` is, for every k from 1
  to N, the mean over questions of the unbiased pass@k of Chen et al. (2021),
  1 − C(N − c[q], k) / C(N, k) (:mod:`kag.grading.measures.pass_at`): pass@1 =
  ``mean_accuracy``, pass@N = ``pass_at_k``, and it never decreases with k.
- ``maj_at_k``: the share of questions whose most frequent answer is correct. Answers are
  compared under the grading rule (trimmed of White_Space, ASCII case folded); an epoch
  without an answer (an error file, ``answer=None``) votes for "no answer", which is never
  correct. When two or more answers share the highest count, none wins: the question counts
  as not correct. Epochs that give the same answer are expected to share one grade; the
  group counts as correct when any of its epochs is.
- ``consistent``: the share of questions whose N epochs are all correct or all incorrect.

Questions with fewer than N epochs (a run still going, or ``--epochs`` raised later) are
left out of every field and counted in ``incomplete``, so that pass@k, maj@k and
consistency always compare the same k; epochs past N are ignored. N defaults to the
largest number of epochs any question has.

Invariants: every share is in [0, 1]; maj_at_k ≤ pass_at_k = pass@N; pass_at_k ≥ mean_accuracy ≥
(share all correct) = consistent + pass_at_k − 1; with N = 1, pass_at_k = maj_at_k =
mean_accuracy and consistent = 1.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kag.grading.measures import reducers
from kag.grading.rule import rust_trim
from kag.textsafe import ascii_fold


@dataclass(frozen=True, slots=True)
class EpochOutcome:
    """One epoch of one question: whether it was graded correct, and the answer given.

    ``answer`` is what was graded (the response, or the extracted key); None for an error
    file, which is not correct. ``extracted``: the same epoch under the extracted grade
    (``--extract``: its answer is the extracted key, None when nothing was extracted), None
    when the run had no extraction.
    """

    correct: bool
    answer: str | None
    extracted: EpochOutcome | None = None


@dataclass(frozen=True, slots=True)
class EpochSummary:
    """The ``epochs`` block of a setup (see the module docstring for the formulas)."""

    n: int
    questions: int  # questions with all n epochs: the ones measured
    incomplete: int  # questions with fewer than n epochs, left out
    mean_accuracy: float
    stderr: float | None
    pass_at_k: float
    maj_at_k: float
    consistent: float
    reduced: Mapping[str, Any] = field(default_factory=dict)  # reducer key -> its value


def majority_correct(outcomes: Sequence[EpochOutcome]) -> bool:
    """Whether the strictly most frequent answer among ``outcomes`` is correct (ties: none wins)."""
    votes: Counter[str | None] = Counter()
    correct: set[str | None] = set()
    for outcome in outcomes:
        key = None if outcome.answer is None else ascii_fold(rust_trim(outcome.answer))
        votes[key] += 1
        if outcome.correct and outcome.answer is not None:
            correct.add(key)
    top = votes.most_common(2)
    if not top or (len(top) == 2 and top[0][1] == top[1][1]):
        return False
    return top[0][0] in correct


def summarize_epochs(
    per_question: Iterable[Sequence[EpochOutcome]], n: int | None = None
) -> EpochSummary | None:
    """Fold per-question epoch outcomes into an :class:`EpochSummary`.

    ``n`` is the number of epochs measured (default: the most any question has). Returns
    None when no question has ``n`` epochs (nothing to measure), or when ``n`` is 0.
    Raises ValueError for a negative ``n``.
    """
    questions = [list(outcomes) for outcomes in per_question]
    if n is None:
        n = max((len(outcomes) for outcomes in questions), default=0)
    if n < 0:
        raise ValueError(f"the number of epochs must be >= 0 (got {n})")
    complete = [outcomes[:n] for outcomes in questions if len(outcomes) >= n]
    if n == 0 or not complete:
        return None
    count = len(complete)
    means: list[float] = []
    counts: list[int] = []
    passed = majority = consistent = 0
    for outcomes in complete:
        correct = sum(outcome.correct for outcome in outcomes)
        counts.append(correct)
        means.append(correct / n)
        passed += correct > 0
        consistent += correct in (0, n)
        majority += majority_correct(outcomes)
    mean = math.fsum(means) / count
    stderr = (
        None if count < 2 else math.sqrt(math.fsum((p - mean) ** 2 for p in means) / (count * (count - 1)))
    )
    return EpochSummary(
        n=n,
        questions=count,
        incomplete=len(questions) - count,
        mean_accuracy=mean,
        stderr=stderr,
        pass_at_k=passed / count,
        maj_at_k=majority / count,
        consistent=consistent / count,
        reduced={r.key: r.reduce(counts, n) for r in reducers()},
    )


def extracted_outcomes(outcomes: Sequence[EpochOutcome]) -> tuple[EpochOutcome, ...]:
    """The same epochs under the extracted grade; ValueError when an epoch has none (the
    run was graded without ``--extract``)."""
    found = tuple(outcome.extracted for outcome in outcomes)
    if any(outcome is None for outcome in found):
        raise ValueError("the epochs have no extracted grade (GradeRequest(extract=...))")
    return found  # type: ignore[return-value]
