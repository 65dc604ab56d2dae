"""The records the comparisons work on: the graded files of a grading run whose request asks
for ``records`` (:class:`~kag.grading.record.GradedFile`, their ``outcome`` the grade the
comparison pairs on), and each setup's profile (model, provider, whether it retrieves)."""

from __future__ import annotations

__all__ = [
    "Answer",
    "AnswerSet",
    "CompactAnswer",
    "SetupProfile",
    "answer_set",
    "answer_set_from_run",
    "answers_from_run",
    "check_retrieves",
    "index_answers",
    "native_candidates",
    "paired_keys",
    "paired_records",
    "question_sort_key",
    "setup_configs",
    "setup_profiles",
]

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kag.errors import UsageError
from kag.grading.compare.epoch_means import SetupMeans, question_means
from kag.grading.mcq.summary import summarize
from kag.grading.record import GradedFile, Outcome, question_sort_key
from kag.results.model import RESULT_SUFFIX, ModelConfig

if TYPE_CHECKING:
    from kag.datasets import Datasets
    from kag.grading.mcq.metrics import GradeRun, Unreadable
    from kag.grading.mcq.summary import Summary
    from kag.grading.retrieval_quality import QualityRecord


class Answer(Protocol):
    """What the comparisons read of a graded file: a :class:`~kag.grading.record.GradedFile`
    is one, and so is the smaller :class:`CompactAnswer`."""

    @property
    def dataset(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def setup(self) -> str: ...
    @property
    def outcome(self) -> Outcome: ...
    @property
    def config(self) -> ModelConfig | None: ...
    @property
    def evidence_hit(self) -> bool | None: ...
    @property
    def retrieval_quality(self) -> QualityRecord | None: ...
    @property
    def vertices(self) -> int | None: ...
    @property
    def correct(self) -> bool: ...
    @property
    def key(self) -> tuple[str, str]: ...
    @property
    def response_or_error(self) -> str: ...


@dataclass(frozen=True, slots=True)
class CompactAnswer:
    """The fields of a graded file the comparisons (but not the flips) read, in half the
    memory of a :class:`~kag.grading.record.GradedFile`: what a million files are compared
    with. ``response`` None is an error file, whose text is not kept (``"(error)"``)."""

    dataset: str
    question: str
    setup: str
    outcome: Outcome
    response: str | None
    vertices: int | None
    config: ModelConfig | None
    evidence_hit: bool | None
    retrieval_quality: QualityRecord | None

    @property
    def correct(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def key(self) -> tuple[str, str]:
        return (self.dataset, self.question)

    @property
    def response_or_error(self) -> str:
        return self.response if self.response is not None else "(error)"

    @classmethod
    def of(
        cls, record: GradedFile, setup: str | None = None, shared: dict[object, Any] | None = None
    ) -> CompactAnswer:
        """What the comparisons read of ``record`` (its error text left out), under the
        name ``setup`` when given (a tree's label prefixed). With ``shared``, each of its
        repeated values (names, config, response) is the first equal one kept there: a
        million records hold each once."""
        keep = shared.setdefault if shared is not None else _same
        name = setup if setup is not None else record.setup
        return cls(
            keep(record.dataset, record.dataset),
            keep(record.question, record.question),
            keep(name, name),
            record.outcome,
            keep(record.response, record.response),
            record.vertices,
            keep(record.config, record.config),
            record.evidence_hit,
            record.retrieval_quality,
        )


def _same(value: Any, _default: Any) -> Any:
    return value


A = TypeVar("A", bound=Answer)
#: setup -> (dataset, question) -> record, as :func:`index_answers` makes it.
Indexed = Mapping[str, Mapping[tuple[str, str], A]]


def index_answers(answers: Iterable[A]) -> dict[str, dict[tuple[str, str], A]]:
    """setup -> (dataset, question) -> record. A later duplicate replaces an earlier one.
    The setups share one key tuple per question."""
    by_setup: dict[str, dict[tuple[str, str], A]] = {}
    keys: dict[tuple[str, str], tuple[str, str]] = {}
    for answer in answers:
        key = answer.key
        by_setup.setdefault(answer.setup, {})[keys.setdefault(key, key)] = answer
    return by_setup


def paired_keys(a: Mapping[tuple[str, str], A], b: Mapping[tuple[str, str], A]) -> list[tuple[str, str]]:
    """The (dataset, question) keys both setups have a graded file for, in question order."""
    return sorted(a.keys() & b.keys(), key=question_sort_key)


@dataclass(frozen=True)
class SetupProfile:
    """What a setup is: its model and provider (``config`` of one of its ``ok`` files) and
    whether it retrieves (``config.augmented_generation`` set, or retrieval stats in any file)."""

    setup: str
    model: str | None
    provider: str | None
    augmented: bool


def setup_profiles(
    answers: Iterable[Answer], configs: dict[str, ModelConfig | None]
) -> dict[str, SetupProfile]:
    """One profile per setup of ``answers``; ``configs`` maps a setup to the config of one of
    its ok files (see :func:`setup_configs`), missing or None when it has none."""
    retrieves: dict[str, bool] = {}
    for a in answers:
        retrieves[a.setup] = retrieves.get(a.setup, False) or a.vertices is not None
    profiles = {}
    for setup, has_stats in retrieves.items():
        config = configs.get(setup)
        profiles[setup] = SetupProfile(
            setup,
            (config.model or None) if config else None,
            (config.provider or None) if config else None,
            has_stats or (config is not None and config.augmented_generation is not None),
        )
    return profiles


def setup_configs(answers: Iterable[Answer]) -> dict[str, ModelConfig | None]:
    """``ok.stats.config`` of the first ok answer (in answer order) of each setup that has one.

    A setup's configuration is the same in all its files (one benchmark setup). The config
    comes with each answer (kept by the grading record): no file is read again. A setup
    with no ok answer holding a config maps to None.
    """
    configs: dict[str, ModelConfig | None] = {}
    for a in answers:
        if configs.get(a.setup) is None and a.outcome is not Outcome.ERR:
            configs[a.setup] = a.config
        else:
            configs.setdefault(a.setup, None)
    return configs


def native_candidates(profiles: dict[str, SetupProfile], setup: str) -> list[str]:
    """Setups without retrieval that share ``setup``'s model and provider, by name."""
    me = profiles[setup]
    if me.model is None:
        return []
    return sorted(
        p.setup
        for p in profiles.values()
        if p.setup != setup and not p.augmented and p.model == me.model and p.provider == me.provider
    )


def check_retrieves(profiles: dict[str, SetupProfile], setups: Sequence[str]) -> None:
    """Raise UsageError (exit 2) naming the setups of ``setups`` that do not retrieve.

    A setup retrieves when its profile says so (retrieval stats in any of its files, or
    ``config.augmented_generation`` in the one whose config was read); for one that does
    not there is no subgraph to bucket and nothing retrieval could have helped or hurt.
    The message lists the setups that do retrieve. Names without a profile are left to
    the caller (an unknown setup is its own error).
    """
    plain = [s for s in setups if s in profiles and not profiles[s].augmented]
    if not plain:
        return
    retrieving = sorted(s for s, p in profiles.items() if p.augmented)
    verb = "does" if len(plain) == 1 else "do"
    raise UsageError(
        f"{', '.join(plain)} {verb} not retrieve (no retrieval stats, no config.augmented_generation): "
        f"no retrieval impact to measure; setups that retrieve: {', '.join(retrieving) or 'none'}"
    )


# ---------------------------------------------------------------- from the grading run to answers


@dataclass(frozen=True)
class AnswerSet:
    """The graded answers of a result tree, the `kag stats` summary of the same run, and
    each setup's profile (model, provider, whether it retrieves)."""

    answers: tuple[GradedFile, ...]
    summary: Summary
    profiles: dict[str, SetupProfile]
    means: SetupMeans | None = None  # per-question mean scores over epochs, when asked
    unreadable: tuple[Unreadable, ...] = ()  # the files of the run that could not be read

    @property
    def setups(self) -> list[str]:
        return sorted({a.setup for a in self.answers})


def answers_from_run(
    run: GradeRun, datasets: Datasets, root: str | Path, prefix: str = "", *, extracted: bool = False
) -> list[GradedFile]:
    """The records of a grading run that kept them (``records`` asked for), as the comparisons pair them.

    With ``extracted`` each record's outcome is its extracted grade (the run must have been
    graded with ``extract``; ERR = not extracted), so the comparisons pair on it.

    The walk gives each record its gold key and path; a record without them (built by
    hand) takes them from ``datasets`` and the tree layout under ``root``. The error text of
    each ERR file and the config of each ok file come with the records (no file is read
    again). Raises ValueError when the run kept no records.
    """
    top = os.fspath(root)
    return paired_records(run, datasets, lambda setup: (top, setup), prefix, extracted=extracted)


def paired_records(
    run: GradeRun,
    datasets: Datasets,
    place: Callable[[str], tuple[str, str]],
    prefix: str = "",
    *,
    extracted: bool = False,
) -> list[GradedFile]:
    """:func:`answers_from_run` over any trees: ``place`` gives the (tree root, setup name in
    its tree) of a setup as the run names it, for the records without a path."""
    if run.records is None:
        raise ValueError("the grading run kept no per-file records (a request asking for 'records')")
    answers = []
    for r in run.records:
        if r.path is None or r.gold is None:
            question = datasets.get(r.dataset, r.question)
            gold = question.mcq.answer if question is not None and question.mcq is not None else None
            root, name = place(r.setup)
            # kag.results.tree.result_path's layout, joined as strings: pathlib costs ~0.1 ms a file.
            path = os.path.join(root, r.dataset, r.question, f"{prefix}{name}{RESULT_SUFFIX}")
            r = replace(r, gold=gold, path=path)
        if extracted:
            if r.extracted is None:
                raise ValueError("the grading run has no extracted grade (a request with an extract spec)")
            r = replace(r, outcome=r.extracted)
        answers.append(r)
    return answers


def answer_set(run: GradeRun, answers: Sequence[GradedFile], *, extracted: bool = False) -> AnswerSet:
    """:class:`AnswerSet` of ``answers`` (the records of ``run``, named as its setups are):
    the run's summary, each setup's profile and, when the run has epochs, the per-question
    mean scores (:func:`~kag.grading.compare.epoch_means.question_means`), under the
    extracted grade with ``extracted`` as the answers are."""
    means = None
    if run.epochs is not None:
        means = question_means(run, extracted=extracted)
    profiles = setup_profiles(answers, setup_configs(answers))
    return AnswerSet(tuple(answers), summarize(run), profiles, means, run.unreadable)


def answer_set_from_run(
    run: GradeRun, datasets: Datasets, root: str | Path, prefix: str = "", *, extracted: bool = False
) -> AnswerSet:
    """:class:`AnswerSet` of a grading run that kept its records (see :func:`answers_from_run`)."""
    answers = answers_from_run(run, datasets, root, prefix, extracted=extracted)
    return answer_set(run, answers, extracted=extracted)
