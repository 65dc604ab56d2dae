"""How far a judge can be trusted: the verdicts of several judges and repeats combined, and
compared with human labels, with each other and with the exact match, per setup and overall.

Per-answer records first (each judge's verdict per answer, each answer's human label),
aggregation after (:func:`judge_statistics`), through the statistics of
:mod:`kag.grading.agreement` and :mod:`kag.grading.ppi`.

Combining: a judge asked several times (``--repeats``) gives the majority of its usable
verdicts; several judges give the majority of theirs; a tie (or no usable verdict) is
UNUSABLE. Several annotators of one answer give its label the same way (a tie: no label).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations

from kag.errors import UsageError
from kag.grading.agreement import (
    Confusion,
    cohen_kappa,
    confusion_matrix,
    consistency_rate,
    kappa_bootstrap_ci,
    krippendorff_alpha_nominal,
    percent_agreement,
    sensitivity,
    specificity,
)
from kag.grading.judge import (
    Judge,
    JudgedItem,
    JudgeItem,
    JudgeRun,
    JudgeSummary,
    Verdict,
    summarize_verdicts,
)
from kag.grading.judge_labels import Label
from kag.grading.ppi import Estimate, mean_ci, ppi_mean
from kag.results import OkResult, UnreadableResult, read_result_nofollow

Answer = tuple[str, str, str]  # dataset, question, setup


def majority(verdicts: Iterable[Verdict]) -> Verdict:
    """The verdict most of the usable ``verdicts`` give; UNUSABLE on a tie or when none is usable."""
    counts = Counter(v for v in verdicts if v is not Verdict.UNUSABLE)
    correct, incorrect = counts[Verdict.CORRECT], counts[Verdict.INCORRECT]
    if correct == incorrect:
        return Verdict.UNUSABLE
    return Verdict.CORRECT if correct > incorrect else Verdict.INCORRECT


def majority_label(labels: Iterable[bool]) -> bool | None:
    """The label most annotators give; None on a tie."""
    values = list(labels)
    yes = sum(values)
    no = len(values) - yes
    return None if yes == no else yes > no


def _usable(verdict: Verdict) -> bool | None:
    return None if verdict is Verdict.UNUSABLE else verdict is Verdict.CORRECT


@dataclass(frozen=True)
class Agreement:
    """One rater (the judge, or the exact match) against the human labels on n answers."""

    n: int
    agreement: float | None
    kappa: float | None
    kappa_ci95: tuple[float, float] | None
    confusion: Confusion
    sensitivity: float | None
    specificity: float | None


def agreement_with(labels: Sequence[bool], rated: Sequence[bool]) -> Agreement:
    """Percent agreement, Cohen's kappa with its bootstrap interval, the confusion matrix
    (rows: the label; columns: the rater), sensitivity and specificity of ``rated`` against
    ``labels``."""
    confusion = confusion_matrix(labels, rated)
    return Agreement(
        len(labels),
        percent_agreement(labels, rated),
        cohen_kappa(labels, rated),
        kappa_bootstrap_ci(labels, rated),
        confusion,
        sensitivity(confusion),
        specificity(confusion),
    )


@dataclass(frozen=True)
class PairKappa:
    a: Judge
    b: Judge
    n: int  # answers both judges gave a usable verdict
    kappa: float | None


@dataclass(frozen=True)
class JudgeAccuracy:
    judge: Judge
    accuracy: float | None
    unusable: int


@dataclass(frozen=True)
class SetupStats:
    """The statistics of one setup (``setup`` None: every setup together)."""

    setup: str | None
    summary: JudgeSummary
    accuracy_ci95: tuple[float, float] | None
    judges: tuple[JudgeAccuracy, ...]
    judges_kappa: tuple[PairKappa, ...]
    judges_alpha: float | None
    labels: Agreement | None  # None when no labels file was given
    exact_match: Agreement | None
    annotators_alpha: float | None
    alpha_with_judge: float | None
    labelled_accuracy: Estimate | None
    corrected_accuracy: Estimate | None


@dataclass(frozen=True)
class JudgeStatistics:
    judges: tuple[Judge, ...]
    repeats: int
    consistency: tuple[tuple[Judge, float | None], ...]  # self-consistency per judge (repeats > 1)
    setups: tuple[SetupStats, ...]
    overall: SetupStats
    labelled: bool
    unmatched_labels: int  # labels of no judged answer
    combined: tuple[JudgedItem, ...]  # the verdict of every answer, all judges combined


def _answer(item: JudgeItem) -> Answer:
    return (item.dataset, item.question, item.setup)


def _setup_stats(
    setup: str | None,
    items: Sequence[JudgeItem],
    judges: Sequence[Judge],
    per_judge: Sequence[Sequence[Verdict]],
    combined: Sequence[Verdict],
    annotations: Mapping[Answer, Mapping[str, bool]] | None,
) -> SetupStats:
    judged = [JudgedItem(item, v, cached=False) for item, v in zip(items, combined, strict=True)]
    if setup is None:  # every setup counted as one
        judged = [JudgedItem(replace(j.item, setup=""), j.verdict, j.cached) for j in judged]
    (summary,) = summarize_verdicts(judged)
    usable = [v is Verdict.CORRECT for v in combined if v is not Verdict.UNUSABLE]
    raw = mean_ci([float(u) for u in usable])
    judge_acc = tuple(
        JudgeAccuracy(
            judge,
            _accuracy(verdicts),
            sum(v is Verdict.UNUSABLE for v in verdicts),
        )
        for judge, verdicts in zip(judges, per_judge, strict=True)
    )
    pairs = []
    for (ja, va), (jb, vb) in combinations(zip(judges, per_judge, strict=True), 2):
        both = [
            (x is Verdict.CORRECT, y is Verdict.CORRECT)
            for x, y in zip(va, vb, strict=True)
            if Verdict.UNUSABLE not in (x, y)
        ]
        pairs.append(PairKappa(ja, jb, len(both), cohen_kappa([x for x, _ in both], [y for _, y in both])))
    judges_alpha = (
        krippendorff_alpha_nominal([[_usable(v[i]) for v in per_judge] for i in range(len(items))])
        if len(judges) > 1
        else None
    )
    labels = exact = labelled_acc = corrected = None
    annotators_alpha = alpha_with_judge = None
    if annotations is not None:
        truth: list[bool] = []
        rated: list[bool] = []
        exact_rated: list[bool] = []
        human: list[float] = []
        unlabelled: list[float] = []
        for item, verdict in zip(items, combined, strict=True):
            marks = annotations.get(_answer(item))
            label = majority_label(marks.values()) if marks else None
            said = _usable(verdict)
            if label is not None:
                human.append(float(label))
            if said is None:
                continue
            if label is None:
                if not marks:
                    unlabelled.append(float(said))
                continue
            truth.append(label)
            rated.append(said)
            exact_rated.append(item.exact)
        labels = agreement_with(truth, rated)
        exact = agreement_with(truth, exact_rated)
        labelled_acc = mean_ci(human)
        corrected = ppi_mean(truth, [float(r) for r in rated], unlabelled)
        names = sorted({name for item in items for name in annotations.get(_answer(item), {})})
        if len(names) > 1:
            annotators_alpha = krippendorff_alpha_nominal(
                [[annotations.get(_answer(item), {}).get(name) for name in names] for item in items]
            )
        if names:
            alpha_with_judge = krippendorff_alpha_nominal(
                [
                    [*(annotations.get(_answer(item), {}).get(name) for name in names), _usable(v)]
                    for item, v in zip(items, combined, strict=True)
                ]
            )
    return SetupStats(
        setup,
        summary,
        raw.ci95 if raw is not None else None,
        judge_acc,
        tuple(pairs),
        judges_alpha,
        labels,
        exact,
        annotators_alpha,
        alpha_with_judge,
        labelled_acc,
        corrected,
    )


def _accuracy(verdicts: Sequence[Verdict]) -> float | None:
    usable = [v for v in verdicts if v is not Verdict.UNUSABLE]
    return sum(v is Verdict.CORRECT for v in usable) / len(usable) if usable else None


def judge_statistics(
    items: Sequence[JudgeItem],
    judges: Sequence[Judge],
    runs: Sequence[Sequence[JudgeRun]],
    labels: Sequence[Label] | None = None,
) -> JudgeStatistics:
    """The statistics of ``items`` judged by ``judges`` (``runs[j][r]``: judge j's r-th repeat,
    its verdicts in the items' order), against ``labels`` when given (None: no labels file).
    Per setup (sorted by name) and overall."""
    if not items:
        raise ValueError("no item to judge")
    per_judge = [
        [majority(run.judged[i].verdict for run in repeats) for i in range(len(items))] for repeats in runs
    ]
    combined = [majority(v[i] for v in per_judge) for i in range(len(items))]
    repeats = min(len(r) for r in runs)
    consistency = tuple(
        (
            judge,
            consistency_rate([[run.judged[i].verdict for run in rs] for i in range(len(items))])
            if len(rs) > 1
            else None,
        )
        for judge, rs in zip(judges, runs, strict=True)
    )
    annotations: dict[Answer, dict[str, bool]] | None = None
    unmatched = 0
    if labels is not None:
        known = {_answer(item) for item in items}
        annotations = {}
        for label in labels:
            if label.answer in known:
                annotations.setdefault(label.answer, {})[label.annotator] = label.correct
            else:
                unmatched += 1
    by_setup: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        by_setup.setdefault(item.setup, []).append(index)

    def stats_of(setup: str | None, indices: Sequence[int]) -> SetupStats:
        return _setup_stats(
            setup,
            [items[i] for i in indices],
            judges,
            [[v[i] for i in indices] for v in per_judge],
            [combined[i] for i in indices],
            annotations,
        )

    return JudgeStatistics(
        tuple(judges),
        repeats,
        consistency,
        tuple(stats_of(name, by_setup[name]) for name in sorted(by_setup)),
        stats_of(None, range(len(items))),
        labels is not None,
        unmatched,
        tuple(JudgedItem(item, v, cached=False) for item, v in zip(items, combined, strict=True)),
    )


def shared_models(items: Sequence[JudgeItem], judges: Sequence[Judge]) -> tuple[tuple[Judge, str, str], ...]:
    """(judge, setup, the setup's provider/model) for every judge whose model also answered in a
    setup (read from the ``stats.config`` of the setup's result files; a file that cannot be
    read again is passed over). A model judging its own answers tends to favour them."""
    models = {j.model for j in judges}
    seen: dict[tuple[str, str], set[tuple[str, str]]] = {}
    done: set[str] = set()
    for item in items:
        if not item.path or item.path in done:
            continue
        done.add(item.path)
        try:
            result = read_result_nofollow(item.path)
        except (UnreadableResult, OSError):
            continue
        config = result.stats.config if isinstance(result, OkResult) else None
        if config is not None and config.model in models:
            seen.setdefault((item.setup, config.model), set()).add((config.provider, config.model))
    found: list[tuple[Judge, str, str]] = []
    for judge in judges:
        for (setup, model), pairs in sorted(seen.items()):
            if model == judge.model:
                found.extend((judge, setup, f"{p}/{m}") for p, m in sorted(pairs))
    return tuple(found)


def pair_judges(providers: Sequence[str], models: Sequence[str]) -> tuple[Judge, ...]:
    """The judges of ``-p`` and ``-m`` given as often as each other (the i-th provider with the
    i-th model), or one provider for every model, or one model at every provider; a judge named
    twice counts once. UsageError for any other count."""
    if not providers or not models:
        raise UsageError("give the judge with -p PROVIDER and -m MODEL")
    if len(providers) == 1:
        providers = list(providers) * len(models)
    elif len(models) == 1:
        models = list(models) * len(providers)
    if len(providers) != len(models):
        raise UsageError(
            f"{len(providers)} -p and {len(models)} -m: give one -p for every -m, or a single -p or -m"
        )
    return tuple(dict.fromkeys(Judge(p, m) for p, m in zip(providers, models, strict=True)))
