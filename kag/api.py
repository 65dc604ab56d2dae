"""kag from Python: grade a result tree, or read it one graded file at a time.

The functions here are what ``kag stats`` runs, without the terminal: they print nothing,
never exit, and raise :class:`kag.errors.KagError` subclasses (``InputError`` for a file that
cannot be read, ``UsageError`` for an argument that cannot be used), whose message names the
file, the key or the argument. ``kag.grade``, ``kag.records`` and ``kag.records_frame`` are
these functions (see docs/python.md).

``results`` is one tree (a path) or several labelled trees (a mapping ``label -> path``,
what ``kag stats -r LABEL=DIR -r LABEL=DIR`` grades): their setups are then named
``LABEL/setup``.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kag.datasets import Datasets, load_datasets
from kag.errors import InputError, UsageError
from kag.grading.mcq.metrics import GradeRun, duration_secs
from kag.grading.mcq.request import RECORDS, GradeRequest
from kag.grading.mcq.rule import DEFAULT_ABSTENTION, AnswerKey, compile_abstention
from kag.grading.mcq.summary import Summary, summarize
from kag.grading.mcq.trees import ResultSource, ResultTree, file_place, grade_source, label_problem, one_tree
from kag.grading.record import GradedFile
from kag.results.tree import EPOCHS_FOLDER, epoch_result_path, matches_any, result_path

if TYPE_CHECKING:
    import pandas

    from kag.grading.extract import ExtractSpec
    from kag.grading.verdicts import JudgeKey

__all__ = ["Record", "Report", "grade", "records", "records_frame"]

#: What ``results`` may be: one tree, or labelled trees (label -> tree).
Results = str | Path | Mapping[str, str | Path]


@dataclass(frozen=True)
class Report:
    """The graded report of :func:`grade`: ``to_dict()`` is the ``kag stats --format json``
    document of the same inputs, ``to_json()`` its exact text."""

    summary: Summary

    def to_dict(self) -> dict[str, Any]:
        """The JSON document as plain Python values (dicts, lists, str, int, float, None)."""
        from kag.render.stats import summary_to_json

        return summary_to_json(self.summary)

    def to_json(self) -> str:
        """The text ``kag stats --format json`` prints (2-space indent, newline-terminated)."""
        from kag.render.stats import render_json

        return render_json(self.summary)

    @property
    def setups(self) -> tuple[str, ...]:
        """The graded setups, ranked as the report ranks them (best first)."""
        return tuple(s.setup for s in self.summary.setups)

    def accuracy(self, setup: str) -> float | None:
        """The strict accuracy (0-1) of ``setup`` over every dataset (None when it has no graded
        file); KeyError for an unknown setup."""
        for s in self.summary.setups:
            if s.setup == setup:
                return s.overall.accuracy
        raise KeyError(setup)


@dataclass(frozen=True, slots=True)
class Record:
    """One graded result file.

    - ``setup`` is the name ``kag stats`` reports (``LABEL/setup`` among labelled trees),
      ``label`` the tree's label (None for one tree), ``epoch`` 1 for the usual file and n
      for ``<question>/epochs/<n>/``; ``path`` the result file.
    - ``type`` is ``"MCQ"`` or ``"Open"``; ``outcome`` ``"OK"``, ``"WRONG"`` or ``"ERR"``
      (the strict grade; for an open question OK means an exact match); ``gold`` the answer
      key (an open question's accepted answers joined with `` | ``); ``answer`` the response
      verbatim (None for an error file, whose text is ``error``).
    - ``extracted`` is the key read from the response under ``extract`` (None when nothing
      was extracted or no extraction was asked), ``extracted_outcome`` its grade (``"ERR"``
      = not extracted; None without ``extract``); ``exact_match``/``f1`` an open question's.
    - Times are seconds; retrieval sizes and token counts as the file records them; None
      when absent.
    """

    dataset: str
    question: str
    setup: str
    label: str | None
    epoch: int
    type: str
    path: str
    outcome: str
    gold: str | None
    answer: str | None
    error: str | None
    extracted: str | None
    extracted_outcome: str | None
    exact_match: float | None
    f1: float | None
    model: str | None
    provider: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    generation_secs: float | None
    retrieval_secs: float | None
    context_length: int | None
    vertices: float | None
    relationships: float | None
    properties: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _source(results: Results) -> ResultSource:
    if isinstance(results, (str, Path)):
        return one_tree(results)
    trees: list[ResultTree] = []
    for label, root in results.items():
        why = label_problem(label)
        if why:
            raise UsageError(f"results label {label!r}: {why}")
        trees.append(ResultTree(label, str(root)))
    if not trees:
        raise UsageError("results: no tree given (an empty mapping)")
    return tuple(trees)


def _datasets(datasets: str | Path | Datasets) -> Datasets:
    return datasets if isinstance(datasets, Datasets) else load_datasets(datasets)


def _globs(name: str, globs: Sequence[str] | str | None) -> tuple[str, ...]:
    if globs is None:
        return ()
    if isinstance(globs, str):
        return (globs,)
    out = tuple(globs)
    if not all(isinstance(g, str) for g in out):
        raise UsageError(f"{name}: expected glob strings")
    return out


def _check_dataset_filter(loaded: Datasets, globs: tuple[str, ...]) -> None:
    for glob in globs:
        if not any(matches_any(name, (glob,)) for name in loaded.datasets):
            raise UsageError(f"datasets_filter {glob!r}: no dataset in {loaded.path} matches it")


def _run(
    datasets: str | Path | Datasets,
    results: Results,
    prefix: str,
    extract: str | None,
    setups: Sequence[str] | str | None,
    datasets_filter: Sequence[str] | str | None,
    *,
    records: bool,
    judge: JudgeKey | None = None,
) -> tuple[Datasets, ResultSource, GradeRun]:
    loaded = _datasets(datasets)
    source = _source(results)
    dataset_globs = _globs("datasets_filter", datasets_filter)
    _check_dataset_filter(loaded, dataset_globs)
    # The records for the per-file functions; the report's epochs and evidence blocks for grade().
    if records:
        asked = {RECORDS}
    else:
        asked = {"epochs", "evidence"} if loaded.has_evidence else {"epochs"}
    request = GradeRequest(
        prefix,
        _globs("setups", setups),
        dataset_globs,
        extract=extract,
        measures=frozenset(asked),
        judge=judge,
    )
    return loaded, source, grade_source(loaded, source, request)


def grade(
    datasets: str | Path | Datasets,
    results: Results,
    *,
    prefix: str = "",
    extract: str | None = None,
    setups: Sequence[str] | str | None = None,
    datasets_filter: Sequence[str] | str | None = None,
    judge: JudgeKey | None = None,
) -> Report:
    """Grade ``results`` against the datasets file ``datasets``: what ``kag stats -d DATASETS
    -r RESULTS --format json`` reports (``extract`` is ``--extract``: ``"letter"`` or
    ``"regex:PATTERN"``; ``setups`` and ``datasets_filter`` are the ``--setup`` and
    ``--dataset`` globs; ``judge`` is ``--judge``, the key of the judge whose cached verdicts
    the blocks count, from :func:`kag.grading.judge.judge_key`). A ``datasets_filter`` glob
    that selects no dataset is a UsageError, as on the command line; a ``setups`` glob that
    selects nothing gives a report without setups."""
    _, _, run = _run(datasets, results, prefix, extract, setups, datasets_filter, records=False, judge=judge)
    return Report(summarize(run))


def _secs(ns: int | None) -> float | None:
    return duration_secs(ns) if ns is not None else None


def _record(
    graded: GradedFile,
    loaded: Datasets,
    source: ResultSource,
    prefix: str,
    epoch: int,
    path: str | None,
    extracted: str | None,
) -> Record:
    label, root, name = file_place(source, graded.setup)
    question = loaded.get(graded.dataset, graded.question)
    gold: str | None = None
    if question is not None and question.mcq is not None:
        gold = question.mcq.answer
    elif question is not None and question.open is not None:
        gold = " | ".join(question.open.answers)
    config = graded.config
    r = graded.retrieval
    u = graded.usage
    return Record(
        dataset=graded.dataset,
        question=graded.question,
        setup=graded.setup,
        label=label,
        epoch=epoch,
        type="Open" if graded.is_open else "MCQ",
        path=path or str(result_path(root, graded.dataset, graded.question, prefix, name)),
        outcome=graded.outcome.name,
        gold=gold,
        answer=graded.response,
        error=graded.error,
        extracted=extracted,
        extracted_outcome=graded.extracted.name if graded.extracted is not None else None,
        exact_match=graded.exact_match,
        f1=graded.f1,
        model=config.model if config is not None else None,
        provider=config.provider if config is not None else None,
        prompt_tokens=u.prompt_tokens if u is not None else None,
        completion_tokens=u.completion_tokens if u is not None else None,
        generation_secs=_secs(graded.generation_ns),
        retrieval_secs=_secs(r.time_ns) if r is not None else None,
        context_length=graded.context_length,
        vertices=r.vertices if r is not None else None,
        relationships=r.relationships if r is not None else None,
        properties=r.properties if r is not None else None,
    )


def records(
    datasets: str | Path | Datasets,
    results: Results,
    *,
    prefix: str = "",
    extract: str | None = None,
    setups: Sequence[str] | str | None = None,
    datasets_filter: Sequence[str] | str | None = None,
) -> Iterator[Record]:
    """One :class:`Record` per graded result file, in (dataset, question, setup, epoch)
    order: the files ``kag stats`` grades (epoch 1), each followed by its later epochs
    (``<question>/epochs/2/``, ``3/``... up to the first missing or unreadable one, as the
    ``epochs`` blocks count them). MCQ and open questions alike; files ``kag stats`` ignores,
    skips or cannot read are not records."""
    from kag.grading.mcq.extracted import compile_spec

    loaded, source, run = _run(datasets, results, prefix, extract, setups, datasets_filter, records=True)
    spec = compile_spec(extract) if extract is not None else None
    merged: Iterator[GradedFile] = heapq.merge(
        run.records or (), run.open_records or (), key=lambda r: (r.dataset, r.question, r.setup)
    )
    for graded in merged:
        if graded.is_open:
            yield _record(graded, loaded, source, prefix, 1, None, None)
            continue
        question = loaded.get(graded.dataset, graded.question)
        assert question is not None and question.mcq is not None and question.mcq.answer is not None
        key = AnswerKey(question.mcq.answer, tuple(question.mcq.options))
        yield _record(graded, loaded, source, prefix, 1, None, _extracted_key(spec, graded, key))
        for epoch, path, later in _later_epochs(graded, key, source, prefix, spec):
            yield _record(later, loaded, source, prefix, epoch, path, _extracted_key(spec, later, key))


def _extracted_key(spec: ExtractSpec | None, graded: GradedFile, key: AnswerKey) -> str | None:
    """The key ``spec`` reads from the file's response (None: not asked, error file, nothing read)."""
    if spec is None or graded.response is None:
        return None
    return spec.extract(graded.response, key.options)


def _later_epochs(
    graded: GradedFile, key: AnswerKey, source: ResultSource, prefix: str, spec: ExtractSpec | None
) -> Iterator[tuple[int, str, GradedFile]]:
    """(epoch, path, graded file) of epochs 2, 3, ... of ``graded``'s task, up to the first
    missing or unreadable one: the files the ``epochs`` blocks of ``kag stats`` count
    (:mod:`kag.grading.mcq.epoch_walk`)."""
    from kag.grading.mcq.epoch_walk import epoch_paths, grade_later_epochs

    _label, root, name = file_place(source, graded.setup)
    folder = os.path.join(root, graded.dataset, graded.question, EPOCHS_FOLDER)
    paths = epoch_paths(folder, prefix, lambda setup: setup == name).get(name, {})
    later = grade_later_epochs(
        paths,
        key,
        dataset=graded.dataset,
        question=graded.question,
        setup=graded.setup,
        abstention=compile_abstention(DEFAULT_ABSTENTION),
        spec=spec,
        logs=[],  # the Python API warns of nothing: a bad epoch ends the epochs, as in kag stats
    )
    for epoch, _path, graded_epoch, _answer in later:
        yield (
            epoch,
            str(epoch_result_path(root, graded.dataset, graded.question, prefix, name, epoch)),
            graded_epoch,
        )


def records_frame(
    datasets: str | Path | Datasets,
    results: Results,
    *,
    prefix: str = "",
    extract: str | None = None,
    setups: Sequence[str] | str | None = None,
    datasets_filter: Sequence[str] | str | None = None,
) -> pandas.DataFrame:
    """:func:`records` as a pandas DataFrame, one row per record, one column per field.
    Needs pandas (the ``pandas`` extra): without it, an InputError names the command that
    installs it."""
    try:
        import pandas
    except ImportError:
        from kag.install import missing_extra

        raise InputError(f"kag.records_frame: {missing_extra('pandas', 'pandas')}") from None
    rows = [
        r.to_dict()
        for r in records(
            datasets, results, prefix=prefix, extract=extract, setups=setups, datasets_filter=datasets_filter
        )
    ]
    columns = list(Record.__dataclass_fields__)
    return pandas.DataFrame(rows, columns=columns)
