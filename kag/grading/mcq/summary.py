"""The report of `kag stats`: one block per setup, ranked by accuracy."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kag.grading.mcq.epoch_walk import SetupEpochs, extracted_epochs, summarize_setup_epochs
from kag.grading.mcq.evidence_blocks import SetupEvidence, summarize_setup_evidence
from kag.grading.mcq.metrics import GradeRun, Metrics, Tally

if TYPE_CHECKING:
    from kag.grading.usage import Costs
    from kag.grading.verdicts import JudgeKey

# ---------------------------------------------------------------- summary and ranking


@dataclass(frozen=True)
class SetupSummary:
    """One setup: its overall metrics and one block per dataset (sorted by name)."""

    setup: str
    overall: Metrics
    per_dataset: Mapping[str, Metrics]


@dataclass(frozen=True)
class Summary:
    """The report: counters and the setups ranked by descending accuracy.

    ``epochs``: the epoch blocks of the setups that have later epochs in the tree;
    ``extracted_epochs``: the same under the extracted grade (``--extract``), else empty.
    ``evidence``: None when evidence was not measured (no evidence names in the datasets
    file), else the evidence blocks of the setups with evidence records.
    """

    datasets: int
    scorable_questions: int
    skipped_files: int
    unreadable_files: int
    ignored_files: int
    setups: tuple[SetupSummary, ...]
    scorable_open_questions: int | None = None  # None: the datasets file has no open question
    extract: str | None = None  # the --extract spec, when the extracted grade was computed
    #: Per-block costs (``kag stats --prices``), None without prices.
    costs: Costs | None = None
    epochs: Mapping[str, SetupEpochs] = field(default_factory=dict)
    extracted_epochs: Mapping[str, SetupEpochs] = field(default_factory=dict)
    evidence: Mapping[str, SetupEvidence] | None = None
    judge: JudgeKey | None = None  # the judge whose verdicts the blocks count, when one was named

    @property
    def any_retrieval(self) -> bool:
        return any(s.overall.retrieval is not None for s in self.setups)

    @property
    def shows_usage(self) -> bool:
        """Token columns and ``usage`` keys are shown when a file of the run has usage or
        prices were given: without either, a report has no token column."""
        return self.costs is not None or any(s.overall.usage is not None for s in self.setups)


def rank_key(setup: SetupSummary) -> tuple[float, str]:
    """Sort key: descending ACC, setups without an accuracy last, ties by name (code point order)."""
    acc = setup.overall.accuracy
    return (-acc if acc is not None else math.inf, setup.setup)


def summarize(run: GradeRun) -> Summary:
    """Per-setup blocks (overall = sum of the dataset blocks), ranked by :func:`rank_key`."""
    grouped: dict[str, dict[str, Metrics]] = {}
    for (setup, dataset), metrics in run.tallies.items():
        grouped.setdefault(setup, {})[dataset] = metrics
    setups = []
    for setup, per_dataset in grouped.items():
        overall = Tally()
        for metrics in per_dataset.values():
            overall.merge(metrics)
        setups.append(SetupSummary(setup, overall.freeze(), {k: per_dataset[k] for k in sorted(per_dataset)}))
    setups.sort(key=rank_key)
    first_epochs = {k: m.total for k, m in run.tallies.items()}
    return Summary(
        datasets=run.datasets,
        scorable_questions=run.scorable_questions,
        skipped_files=run.skipped_files,
        unreadable_files=run.unreadable_files,
        ignored_files=run.ignored_files,
        setups=tuple(setups),
        scorable_open_questions=run.scorable_open_questions,
        extract=run.extract,
        epochs=summarize_setup_epochs(run.epochs, first_epochs) if run.epochs else {},
        extracted_epochs=summarize_setup_epochs(extracted_epochs(run.epochs), first_epochs)
        if run.epochs and run.extract is not None
        else {},
        evidence=summarize_setup_evidence(run.evidence) if run.evidence is not None else None,
        judge=run.judge,
    )


# A binomial proportion from fewer files than this has a 95% interval wider than ±18 points.
MIN_SAMPLE = 30


@dataclass(frozen=True)
class SmallSample:
    """A setup whose accuracy rests on few files: ``total`` graded files, against ``largest``
    for the setup with the most."""

    setup: str
    total: int
    largest: int
    ci95: tuple[float, float] | None


def small_samples(summary: Summary, minimum: int = MIN_SAMPLE) -> list[SmallSample]:
    """The setups (in rank order) whose total is under ``minimum`` or under half of the
    largest setup's total: their rank says little. Empty when there are no setups. A setup
    without multiple-choice files (only open questions) has no accuracy: it is not listed."""
    if not summary.setups:
        return []
    largest = max(s.overall.total for s in summary.setups)
    return [
        SmallSample(s.setup, s.overall.total, largest, s.overall.accuracy_ci95)
        for s in summary.setups
        if 0 < s.overall.total and (s.overall.total < minimum or 2 * s.overall.total < largest)
    ]
