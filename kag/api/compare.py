"""kag from Python: the paired comparisons of ``kag stats compare``, ``flips`` and ``impact``.

``kag.compare``, ``kag.flips`` and ``kag.impact`` grade the trees as :mod:`kag.api` does
(same arguments, same checks, nothing printed) and return the report the command renders:
``to_dict()`` is its ``--format json`` document for the same inputs, ``to_json()`` the
exact text. The statistics are :mod:`kag.grading.compare`'s (see docs/python.md).
"""

from __future__ import annotations

import glob
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from kag.api.stats import Inputs, Results, check_inputs, collect_warnings, setups_in
from kag.errors import UsageError
from kag.grading.mcq.trees import describe_source

if TYPE_CHECKING:
    from kag.datasets import Datasets
    from kag.grading.compare.flips import FlipReport, RetrievalImpact
    from kag.grading.compare.records import AnswerSet
    from kag.grading.compare.setups import ComparisonRun

__all__ = ["ComparisonReport", "FlipsReport", "ImpactReport", "compare", "flips", "impact"]

log = logging.getLogger(__name__)

#: The most bootstrap resamples (``kag stats compare --resamples``' bound): each holds three
#: counts per comparison, so an unbounded count would exhaust memory.
MAX_RESAMPLES = 1_000_000


def _json(document: dict[str, Any]) -> str:
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"


@dataclass(frozen=True)
class ComparisonReport:
    """:func:`compare`'s result: ``run`` holds every setup against the baseline (McNemar,
    bootstrap CI, Holm); ``to_dict()`` is ``kag stats compare --format json``'s document."""

    run: ComparisonRun
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        from kag.render.compare import comparison_run_to_json

        return comparison_run_to_json(self.run)

    def to_json(self) -> str:
        return _json(self.to_dict())

    @property
    def regressions(self) -> tuple[str, ...]:
        """The setups significantly worse than the baseline (what ``--fail-if-worse-than`` fails on)."""
        return tuple(c.setup for c in self.run.regressions)


@dataclass(frozen=True)
class FlipsReport:
    """:func:`flips`' result: ``report.a_only`` the questions A gets right and B does not,
    ``report.b_only`` the reverse; ``to_dict()`` is ``kag stats flips --format json``'s."""

    report: FlipReport
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        from kag.render.compare import flip_report_to_json

        return flip_report_to_json(self.report)

    def to_json(self) -> str:
        return _json(self.to_dict())


@dataclass(frozen=True)
class ImpactReport:
    """:func:`impact`'s result: one :class:`~kag.grading.compare.flips.RetrievalImpact` per
    KAG setup; ``notes`` what ``kag stats impact`` warns about the native setups chosen;
    ``to_dict()`` is ``kag stats impact --format json``'s document."""

    impacts: tuple[RetrievalImpact, ...]
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        from kag.render.compare import impact_to_json

        return {"impacts": [impact_to_json(x) for x in self.impacts]}

    def to_json(self) -> str:
        return _json(self.to_dict())


def _name(argument: str, value: object, *, optional: bool = False) -> str | None:
    """A setup name argument; UsageError unless a non-empty string (or None when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        expected = "a setup name or None" if optional else "a setup name"
        raise UsageError(f"{argument}: expected {expected}, got {value!r}")
    return value


def _extracted(grade: object, extract: str | None) -> bool:
    """Whether ``grade`` (``"strict"`` or ``"extracted"``, ``--grade``) pairs on the extracted grade."""
    from kag.grading.mcq.extracted import Grade, check_grade

    known = {g.value: g for g in Grade}
    chosen = known.get(grade.lower()) if isinstance(grade, str) else None
    if chosen is None:
        raise UsageError(f"grade {grade!r}: expected 'strict' or 'extracted'")
    try:
        check_grade(chosen, extract)
    except UsageError:
        raise UsageError("grade='extracted' needs extract='letter' or extract='regex:PATTERN'") from None
    return chosen is Grade.EXTRACTED


def _answers(
    inputs: Inputs,
    named: Sequence[str | None],
    grade: object,
    measures: frozenset[str] = frozenset(),
) -> tuple[AnswerSet, tuple[str, ...]]:
    """The paired answers of ``inputs`` as ``kag stats compare`` loads them: the setups in
    ``named`` kept whatever ``setups`` selects, and each of them graded (else a UsageError
    naming the setups of the trees); a ``setups`` glob that selects nothing and a tree with
    no graded file are UsageErrors too. With the warnings logged while grading."""
    from kag.grading.compare.trees import load_source_answers

    extracted = _extracted(grade, inputs.extract)
    request = inputs.request(measures, tuple(glob.escape(n) for n in named if n))
    with collect_warnings() as warnings:
        loaded = load_source_answers(inputs.datasets, inputs.source, request, extracted=extracted)
    root = describe_source(inputs.source)
    for name in named:
        if name and name not in loaded.setups:
            in_tree = setups_in(inputs.source, inputs.prefix)
            why = "no graded answers after the filters" if name in in_tree else "no such setup"
            raise UsageError(f"setup {name!r}: {why}; setups in {root}: {', '.join(in_tree) or 'none'}")
    inputs.check_setups(loaded.setups)
    if not loaded.answers:
        raise UsageError(
            f"{root}: no graded result file (prefix {inputs.prefix!r}, setups "
            f"{list(inputs.setup_globs) or 'all'}, datasets {list(inputs.dataset_globs) or 'all'})"
        )
    return loaded, tuple(warnings)


def compare(
    datasets: str | Path | Datasets,
    results: Results,
    *,
    baseline: str | None = None,
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int = 0,
    prefix: str = "",
    extract: str | None = None,
    grade: str = "strict",
    setups: Sequence[str] | str | None = None,
    datasets_filter: Sequence[str] | str | None = None,
) -> ComparisonReport:
    """Each setup against ``baseline`` (default: the best-ranked) on the questions both
    answered: what ``kag stats compare --format json`` reports for the same options
    (``--baseline``, ``--alpha``, ``--resamples``, ``--seed``, ``--grade``). McNemar on the
    discordant questions, a seeded paired-bootstrap CI of the difference, Holm over the
    comparisons. UsageError for an unusable argument, an unknown baseline, or fewer than
    two graded setups."""
    from kag.grading import compare as lib

    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < 1:
        raise UsageError(f"alpha {alpha!r}: must be a number between 0 and 1")
    for argument, value, low, high in (("resamples", resamples, 1, MAX_RESAMPLES), ("seed", seed, 0, None)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
            bound = f"between {low} and {high:,}" if high else f"at least {low}"
            raise UsageError(f"{argument} {value!r}: must be an integer {bound}")
    base = _name("baseline", baseline, optional=True)
    inputs = check_inputs(datasets, results, prefix, extract, setups, datasets_filter)
    answers, warnings = _answers(inputs, (base,), grade)
    if len(answers.setups) < 2:
        raise UsageError(f"only one setup ({answers.setups[0]}) has graded answers: nothing to compare")
    run = lib.compare_setups(
        answers.answers, base or lib.best_setup(answers.answers), None, float(alpha), resamples, seed
    )
    return ComparisonReport(run, warnings)


def flips(
    datasets: str | Path | Datasets,
    results: Results,
    a: str,
    b: str,
    *,
    prefix: str = "",
    extract: str | None = None,
    grade: str = "strict",
    datasets_filter: Sequence[str] | str | None = None,
) -> FlipsReport:
    """The questions setup ``a`` gets right and ``b`` does not, and the reverse, with both
    responses: ``kag stats flips A B --format json``. UsageError when ``a`` and ``b`` are
    the same setup or one has no graded answers."""
    from kag.grading import compare as lib

    first, second = _name("a", a), _name("b", b)
    assert first is not None and second is not None
    if first == second:
        raise UsageError(f"a and b are the same setup ({first})")
    selected = [glob.escape(first), glob.escape(second)]
    inputs = check_inputs(datasets, results, prefix, extract, selected, datasets_filter)
    answers, warnings = _answers(inputs, (first, second), grade)
    return FlipsReport(lib.flips(answers.answers, first, second), warnings)


def impact(
    datasets: str | Path | Datasets,
    results: Results,
    kag_setups: Sequence[str] | str | None = None,
    *,
    native: str | None = None,
    prefix: str = "",
    extract: str | None = None,
    grade: str = "strict",
    datasets_filter: Sequence[str] | str | None = None,
) -> ImpactReport:
    """Accuracy of each KAG setup (default: every setup that retrieves) by retrieved-subgraph
    size, and the questions retrieval helped or hurt against ``native`` (default: the setup
    without retrieval of the same model): ``kag stats impact SETUP... --format json``.
    UsageError when a named setup does not retrieve or none does."""
    from kag.grading import compare as lib

    chosen = [kag_setups] if isinstance(kag_setups, str) else kag_setups
    if chosen is not None and (
        isinstance(chosen, bytes | dict)
        or not isinstance(chosen, Sequence)
        or not all(isinstance(s, str) and s for s in chosen)
    ):
        raise UsageError(f"kag_setups: expected a setup name or a list of setup names, got {kag_setups!r}")
    other = _name("native", native, optional=True)
    inputs = check_inputs(datasets, results, prefix, extract, None, datasets_filter)
    evidence = frozenset({"evidence"}) if inputs.datasets.has_evidence else frozenset()
    answers, warnings = _answers(inputs, (*(chosen or ()), other), grade, evidence)
    lib.check_retrieves(answers.profiles, chosen or ())
    plans = lib.plan_impacts(answers.profiles, list(chosen) if chosen else None, other)
    if not plans:
        raise UsageError(
            "no setup retrieves (no retrieval stats, no config.augmented_generation); "
            f"setups: {', '.join(answers.setups)}"
        )
    notes = tuple(plan.note for plan in plans if plan.note)
    for note in notes:
        log.warning("%s", note)
    impacts = tuple(lib.retrieval_impact(answers.answers, p.setup, p.native) for p in plans)
    return ImpactReport(impacts, notes, warnings)
