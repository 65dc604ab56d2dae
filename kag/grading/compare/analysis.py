"""Everything for one report: the comparisons, the flips and the retrieval impacts a
page shows, chosen from the graded answers."""

from __future__ import annotations

__all__ = ["Analysis", "ImpactPlan", "analyse", "analyse_indexed", "best_setup", "plan_impacts"]

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from kag.grading.compare.flips import FlipReport, RetrievalImpact, flips_indexed, impact_indexed
from kag.grading.compare.paired import DEFAULT_ALPHA, DEFAULT_RESAMPLES, DEFAULT_SEED
from kag.grading.compare.records import (
    Answer,
    AnswerSet,
    Indexed,
    SetupProfile,
    index_answers,
    native_candidates,
)
from kag.grading.compare.setups import ComparisonRun, compare_indexed

# ---------------------------------------------------------------- everything for one report


def best_setup(answers: Iterable[Answer]) -> str:
    """The default baseline: the setup with the highest accuracy (OK / graded files, ties by
    name) among those that answered at least half as many questions as the setup that
    answered the most, so that a setup graded on one lucky file is never the reference."""
    counts: dict[str, list[int]] = {}
    for a in answers:
        c = counts.setdefault(a.setup, [0, 0])
        c[0] += a.correct
        c[1] += 1
    if not counts:
        raise ValueError("no graded answers")
    most = max(total for _, total in counts.values())
    covered = [s for s, (_, total) in counts.items() if 2 * total >= most]
    return min(covered, key=lambda s: (-counts[s][0] / counts[s][1], s))


@dataclass(frozen=True)
class ImpactPlan:
    """Which KAG setup is compared with which native one, and why (``note`` for the user)."""

    setup: str
    native: str | None
    note: str | None = None


def plan_impacts(
    profiles: dict[str, SetupProfile], setups: Sequence[str] | None = None, native: str | None = None
) -> list[ImpactPlan]:
    """Pair each KAG setup (default: every setup that retrieves) with its native setup.

    With ``native`` given it is used for all. Otherwise the native setup is the one setup
    without retrieval that has the same ``config.model`` and ``config.provider``; among
    several the first by name is used (and ``note`` says which others matched); with none,
    the impact is computed without one (``note`` says so).
    """
    chosen = list(setups) if setups is not None else sorted(s for s, p in profiles.items() if p.augmented)
    plans = []
    for setup in chosen:
        if native is not None:
            if native != setup:  # a setup is not its own native baseline
                plans.append(ImpactPlan(setup, native))
            continue
        candidates = native_candidates(profiles, setup)
        if not candidates:
            p = profiles.get(setup)
            model = f"{p.provider}/{p.model}" if p and p.model else "an unknown model"
            plans.append(
                ImpactPlan(
                    setup,
                    None,
                    f"{setup}: no setup without retrieval uses {model}; "
                    "helped/hurt not computed (give one with --native)",
                )
            )
        elif len(candidates) > 1:
            plans.append(
                ImpactPlan(
                    setup,
                    candidates[0],
                    f"{setup}: several setups without retrieval use the same "
                    f"model ({', '.join(candidates)}); using {candidates[0]} (choose with --native)",
                )
            )
        else:
            plans.append(ImpactPlan(setup, candidates[0]))
    return plans


@dataclass(frozen=True)
class Analysis:
    """Everything the HTML page shows beyond the ranking."""

    comparisons: ComparisonRun | None
    flips: tuple[FlipReport, ...]
    impacts: tuple[RetrievalImpact, ...]
    notes: tuple[str, ...]


def analyse(
    answer_set: AnswerSet,
    baseline: str | None = None,
    alpha: float = DEFAULT_ALPHA,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    native: str | None = None,
) -> Analysis:
    """Comparisons of every setup against ``baseline`` (default: :func:`best_setup`), the
    flips of each against the baseline, and the retrieval impact of each KAG setup.
    With a single setup there is nothing to compare: ``comparisons`` is None.
    """
    answers = answer_set.answers
    by_setup = index_answers(answers)
    if not by_setup:
        return Analysis(None, (), (), ())
    base = baseline if baseline is not None else best_setup(answers)
    analysis = analyse_indexed(by_setup, answer_set.profiles, base, alpha, n_resamples, seed, native)
    flip_reports = tuple(flips_indexed(by_setup, s, base) for s in sorted(by_setup) if s != base)
    return replace(analysis, flips=flip_reports)


def analyse_indexed(
    by_setup: Indexed[Answer],
    profiles: dict[str, SetupProfile],
    baseline: str,
    alpha: float = DEFAULT_ALPHA,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    native: str | None = None,
) -> Analysis:
    """:func:`analyse` of answers indexed by :func:`index_answers` against ``baseline``
    (there is at least one setup), without the flips (``flips`` is empty): what a viewer
    shows of a million files, whose flips would keep every record they name."""
    run = compare_indexed(by_setup, baseline, None, alpha, n_resamples, seed) if len(by_setup) > 1 else None
    plans = plan_impacts(profiles, native=native)
    impacts = tuple(impact_indexed(by_setup, p.setup, p.native) for p in plans)
    return Analysis(run, (), impacts, tuple(p.note for p in plans if p.note))
