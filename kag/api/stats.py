"""kag from Python: grade a result tree, or read it one graded file at a time.

``kag.grade``, ``kag.records`` and ``kag.records_frame`` are the functions here (see
:mod:`kag.api` and docs/python.md); :func:`check_inputs` checks the arguments every function
of the API shares.

``results`` is one tree (a path) or several labelled trees (a mapping ``label -> path``,
what ``kag stats -r LABEL=DIR -r LABEL=DIR`` grades): their setups are then named
``LABEL/setup``.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from kag.datasets import Datasets, load_datasets
from kag.errors import InputError, UsageError
from kag.grading.mcq.metrics import GradeRun, duration_secs
from kag.grading.mcq.request import RECORDS, GradeRequest
from kag.grading.mcq.rule import DEFAULT_ABSTENTION, AnswerKey, compile_abstention
from kag.grading.mcq.summary import Summary, summarize
from kag.grading.mcq.trees import (
    ResultSource,
    ResultTree,
    describe_source,
    file_place,
    grade_source,
    label_problem,
    labelled,
    one_tree,
)
from kag.grading.record import GradedFile
from kag.results.tree import EPOCHS_FOLDER, epoch_result_path, list_results, matches_any, result_path

if TYPE_CHECKING:
    import pandas

    from kag.grading.extract import ExtractSpec
    from kag.grading.verdicts import JudgeKey

__all__ = ["Record", "Report", "grade", "records", "records_frame"]

#: What ``results`` may be: one tree, or labelled trees (label -> tree).
Results = str | Path | Mapping[str, str | Path]


class Filters(TypedDict, total=False):
    """The keyword arguments :func:`grade`, :func:`records` and :func:`records_frame` share,
    ``kag stats``' options of the same names: ``prefix`` (``--prefix``, default ``""``),
    ``extract`` (``--extract``: ``"letter"`` or ``"regex:PATTERN"``; default None, no
    extraction), ``setups`` and ``datasets_filter`` (the ``--setup`` and ``--dataset`` globs:
    one string or a list; default None, every setup and dataset)."""

    prefix: str
    extract: str | None
    setups: Sequence[str] | str | None
    datasets_filter: Sequence[str] | str | None


@dataclass(frozen=True)
class Report:
    """The graded report of :func:`grade`: ``to_dict()`` is the ``kag stats --format json``
    document of the same inputs, ``to_json()`` its exact text; ``warnings`` the warnings
    ``kag stats`` prints on stderr for the same inputs (unreadable result files, ...)."""

    summary: Summary
    warnings: tuple[str, ...] = ()

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
        file); UsageError naming the report's setups for a setup it does not hold."""
        for s in self.summary.setups:
            if s.setup == setup:
                return s.overall.accuracy
        raise UsageError(f"setup {setup!r}: not in the report (setups: {', '.join(self.setups) or 'none'})")


@dataclass(frozen=True, slots=True)
class Record:
    """One graded result file.

    - ``setup`` is the name ``kag stats`` reports (``LABEL/setup`` among labelled trees),
      ``label`` the tree's label (None for one tree), ``epoch`` 1 for the usual file and n
      for ``<question>/epochs/<n>/``; ``path`` the result file.
    - ``type`` is ``"MCQ"`` or ``"Open"``; ``outcome`` ``"OK"``, ``"WRONG"`` or ``"ERR"``
      (the strict grade; for an open question OK means an exact match); ``gold`` the answer
      key (an open question's accepted answers joined with `` | ``); ``response`` the
      model's reply verbatim (None for an error file, whose text is ``error``); ``answer``
      is the same value under its former name (not a field: kept for older scripts).
    - ``extracted`` is the key read from the response under ``extract`` (None when nothing
      was extracted or no extraction was asked), ``extracted_outcome`` its grade (``"ERR"``
      = not extracted; None without ``extract``); ``exact_match``/``f1`` an open question's.
      The words are those of the ``--format jsonl`` and ``csv`` rows.
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
    response: str | None
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

    @property
    def answer(self) -> str | None:
        """The response (the former name of ``response``, kept for older scripts)."""
        return self.response


def _path(name: str, value: object) -> str:
    """``value`` as a path string; UsageError naming the argument when it is no path."""
    if isinstance(value, str | os.PathLike):
        text = os.fspath(value)
        if isinstance(text, str):
            if "\0" in text:
                raise UsageError(f"{name} {text!r}: a path cannot contain a NUL character")
            return text
    raise UsageError(f"{name}: expected a path (str or pathlib.Path), got {_kind(value)}")


def _kind(value: object) -> str:
    """How a message names the type of an unusable argument: ``int``, ``None``, ``bytes``."""
    return "None" if value is None else type(value).__name__


def _described(value: object) -> str:
    """``int (1)``, ``None``: an unusable value in a message, its repr cut to 40 characters."""
    if value is None:
        return "None"
    shown = repr(value)
    return f"{type(value).__name__} ({shown if len(shown) <= 40 else shown[:40] + '...'})"


def _source(results: object) -> ResultSource:
    if isinstance(results, str | os.PathLike):
        return one_tree(_path("results", results))
    if not isinstance(results, Mapping):
        raise UsageError(
            f"results: expected a path or a mapping from label to path (str or pathlib.Path), got {_kind(results)}"
        )
    trees: list[ResultTree] = []
    for label, root in results.items():
        if not isinstance(label, str):
            raise UsageError(f"results: a label must be a string, got {_described(label)}")
        why = label_problem(label)
        if why:
            raise UsageError(f"results label {label!r}: {why}")
        trees.append(ResultTree(label, _path(f"results[{label!r}]", root)))
    if not trees:
        raise UsageError("results: no tree given (an empty mapping)")
    return tuple(trees)


def _datasets(datasets: object, texts: bool) -> Datasets:
    if isinstance(datasets, Datasets):
        return datasets
    return load_datasets(_path("datasets", datasets), texts=texts)


def _globs(name: str, globs: object) -> tuple[str, ...]:
    if globs is None:
        return ()
    if isinstance(globs, str):
        return (globs,)
    if isinstance(globs, bytes | Mapping) or not isinstance(globs, Iterable):
        raise UsageError(f"{name}: expected a glob string or a list of glob strings, got {_kind(globs)}")
    out = tuple(globs)
    bad = [g for g in out if not isinstance(g, str)]
    if bad:
        raise UsageError(f"{name}: expected glob strings, got {_described(bad[0])}")
    return out


def _text(name: str, value: object, *, optional: bool = False) -> None:
    """UsageError naming ``name`` unless ``value`` is a string (or None when ``optional``)."""
    if isinstance(value, str) or (optional and value is None):
        return
    expected = "a string or None" if optional else "a string"
    raise UsageError(f"{name}: expected {expected}, got {_described(value)}")


def _check_dataset_filter(loaded: Datasets, globs: tuple[str, ...]) -> None:
    for glob in globs:
        if not any(matches_any(name, (glob,)) for name in loaded.datasets):
            raise UsageError(f"datasets_filter {glob!r}: no dataset in {loaded.path} matches it")


def _check_setup_filter(
    globs: tuple[str, ...],
    graded: Iterable[str],
    source: ResultSource,
    prefix: str,
    dataset_globs: tuple[str, ...],
) -> None:
    """UsageError naming each ``setups`` glob that selects no graded setup, with the setups of
    the trees (within ``datasets_filter``), as ``kag stats --setup`` exits 2 naming them. The
    trees are listed again (names only) only when a glob selected nothing."""
    names = set(graded)
    missing = [g for g in globs if not any(fnmatchcase(name, g) for name in names)]
    if not missing:
        return
    in_trees = setups_in(source, prefix, dataset_globs)
    shown = ", ".join(in_trees[:_NAMES_SHOWN]) or "none"
    if len(in_trees) > _NAMES_SHOWN:
        shown += f", … ({len(in_trees) - _NAMES_SHOWN} more)"
    where = describe_source(source) + (
        f" with datasets_filter {list(dataset_globs)}" if dataset_globs else ""
    )
    verb = "matches" if len(missing) == 1 else "match"
    raise UsageError(f"setups {', '.join(map(repr, missing))} {verb} no setup in {where} (setups: {shown})")


def setups_in(source: ResultSource, prefix: str, dataset_globs: tuple[str, ...] = ()) -> list[str]:
    """The setups of the result files of ``source`` (``LABEL/setup`` over labelled trees) in
    the ``datasets_filter`` folders, by name; names only, no file is read."""
    return sorted(
        {
            f.setup if tree.label is None else labelled(tree.label, f.setup)
            for tree in source
            for f in list_results(tree.root, prefix).files
            if matches_any(f.dataset, dataset_globs)
        }
    )


#: How many setup names an unmatched ``setups`` message lists (as the command line's).
_NAMES_SHOWN = 20


@dataclass(frozen=True)
class Inputs:
    """The arguments shared by the API's functions, checked: the loaded datasets file, the
    trees, and the ``--prefix``, ``--extract``, ``--setup`` and ``--dataset`` values."""

    datasets: Datasets
    source: ResultSource
    prefix: str
    extract: str | None
    setup_globs: tuple[str, ...]
    dataset_globs: tuple[str, ...]

    def request(
        self, measures: Iterable[str], extra_setups: tuple[str, ...] = (), judge: JudgeKey | None = None
    ) -> GradeRequest:
        """The grading request of these inputs, asking for ``measures`` (and the cached
        verdicts of ``judge``); ``extra_setups`` are kept whatever ``setups`` selects (when it
        selects)."""
        globs = self.setup_globs + extra_setups if self.setup_globs else ()
        return GradeRequest(
            self.prefix,
            globs,
            self.dataset_globs,
            extract=self.extract,
            measures=frozenset(measures),
            judge=judge,
        )

    def check_setups(self, graded: Iterable[str]) -> None:
        """UsageError for a ``setups`` glob that selected none of the ``graded`` setups."""
        _check_setup_filter(self.setup_globs, graded, self.source, self.prefix, self.dataset_globs)


def check_inputs(
    datasets: object,
    results: object,
    prefix: object,
    extract: object,
    setups: object,
    datasets_filter: object,
    *,
    texts: bool = False,
) -> Inputs:
    """The API's arguments checked at its edge: a UsageError names the argument that cannot
    be used (its type, a NUL in a path, a label, an ``extract`` spec, a ``datasets_filter``
    glob that selects no dataset), an InputError the file that cannot be read. A datasets
    file named by its path is read without the questions' texts unless ``texts`` (a judge
    is shown them) or ``extract`` (which reads the options' texts) asks for them."""
    from kag.grading.mcq.extracted import compile_spec

    _text("prefix", prefix)
    _text("extract", extract, optional=True)
    setup_globs = _globs("setups", setups)
    dataset_globs = _globs("datasets_filter", datasets_filter)
    if isinstance(extract, str):
        try:
            compile_spec(extract)
        except UsageError as exc:  # named as the argument, not as the command line's option
            raise UsageError(str(exc).replace("--extract", "extract", 1)) from None
    source = _source(results)
    loaded = _datasets(datasets, texts or extract is not None)
    _check_dataset_filter(loaded, dataset_globs)
    assert isinstance(prefix, str) and (extract is None or isinstance(extract, str))
    return Inputs(loaded, source, prefix, extract, setup_globs, dataset_globs)


def _check_filters(function: str, filters: Filters) -> None:
    """The TypeError Python raises when ``function`` is given a keyword it does not take
    (no :class:`Filters` key)."""
    for name in filters:
        if name not in Filters.__annotations__:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")


def _filtered_inputs(
    function: str, datasets: object, results: object, filters: Filters, *, texts: bool = False
) -> Inputs:
    """:func:`check_inputs` of ``function``'s arguments, :class:`Filters` defaulted."""
    _check_filters(function, filters)
    return check_inputs(
        datasets,
        results,
        filters.get("prefix", ""),
        filters.get("extract"),
        filters.get("setups"),
        filters.get("datasets_filter"),
        texts=texts,
    )


@contextmanager
def collect_warnings() -> Iterator[list[str]]:
    """The warnings the ``kag`` loggers give in this thread while the block runs (unreadable
    result files, epochs that end early), as their text: the API returns them instead of
    printing them."""
    found: list[str] = []
    thread = threading.get_ident()

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.thread == thread:
                found.append(record.getMessage())

    handler = _Collect(logging.WARNING)
    logger = logging.getLogger("kag")
    logger.addHandler(handler)
    try:
        yield found
    finally:
        logger.removeHandler(handler)


def _run(inputs: Inputs, *, records: bool, judge: JudgeKey | None = None) -> GradeRun:
    # The records for the per-file functions; the report's epochs and evidence blocks for grade().
    if records:
        asked = {RECORDS}
    else:
        asked = {"epochs", "evidence"} if inputs.datasets.has_evidence else {"epochs"}
    run = grade_source(inputs.datasets, inputs.source, inputs.request(asked, judge=judge))
    inputs.check_setups({s for s, _ in run.tallies})
    return run


def grade(
    datasets: str | Path | Datasets,
    results: Results,
    *,
    judge: JudgeKey | None = None,
    **filters: Unpack[Filters],
) -> Report:
    """Grade ``results`` against the datasets file ``datasets``: what ``kag stats -d DATASETS
    -r RESULTS --format json`` reports (``prefix``, ``extract``, ``setups`` and
    ``datasets_filter`` are the :class:`Filters`; ``judge`` is ``--judge``, the key of the
    judge whose cached verdicts the blocks count, from :func:`kag.grading.judge.judge_key`).
    A ``setups`` or ``datasets_filter`` glob that selects nothing is a UsageError naming the
    names there are, as on the command line. The warnings ``kag stats`` prints are the
    report's ``warnings``."""
    from kag.grading.verdicts import JudgeKey

    inputs = _filtered_inputs("grade", datasets, results, filters, texts=judge is not None)
    if judge is not None and not isinstance(judge, JudgeKey):
        raise UsageError(
            f"judge must be a JudgeKey from kag.grading.judge.judge_key (got {type(judge).__name__})"
        )
    with collect_warnings() as warnings:
        run = _run(inputs, records=False, judge=judge)
    return Report(summarize(run), tuple(warnings))


def _secs(ns: int | None) -> float | None:
    return duration_secs(ns) if ns is not None else None


def _record(
    graded: GradedFile,
    loaded: Datasets,
    source: ResultSource,
    prefix: str,
    epoch: int,
    path: str | None,
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
        response=graded.response,
        error=graded.error,
        extracted=graded.extracted_key,
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
    datasets: str | Path | Datasets, results: Results, **filters: Unpack[Filters]
) -> Iterator[Record]:
    """One :class:`Record` per graded result file (of the :class:`Filters`' selection), in
    (dataset, question, setup, epoch) order: the files ``kag stats`` grades (epoch 1), each followed by its later epochs
    (``<question>/epochs/2/``, ``3/``... up to the first missing or unreadable one, as the
    ``epochs`` blocks count them). MCQ and open questions alike; files ``kag stats`` ignores,
    skips or cannot read are not records. The arguments are checked and the tree graded
    when it is called (a UsageError or InputError then), the records read as they are
    iterated."""
    from kag.grading.mcq.extracted import compile_spec

    inputs = _filtered_inputs("records", datasets, results, filters)
    run = _run(inputs, records=True)
    spec = compile_spec(inputs.extract) if inputs.extract is not None else None
    return _iter_records(inputs, run, spec)


def _iter_records(inputs: Inputs, run: GradeRun, spec: ExtractSpec | None) -> Iterator[Record]:
    loaded, source, prefix = inputs.datasets, inputs.source, inputs.prefix
    merged: Iterator[GradedFile] = heapq.merge(
        run.records or (), run.open_records or (), key=lambda r: (r.dataset, r.question, r.setup)
    )
    for graded in merged:
        if graded.is_open:
            yield _record(graded, loaded, source, prefix, 1, None)
            continue
        question = loaded.get(graded.dataset, graded.question)
        assert question is not None and question.mcq is not None and question.mcq.answer is not None
        key = AnswerKey.of(question.mcq.answer, question.mcq.options)
        yield _record(graded, loaded, source, prefix, 1, None)
        for epoch, path, later in _later_epochs(graded, key, source, prefix, spec):
            yield _record(later, loaded, source, prefix, epoch, path)


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
    datasets: str | Path | Datasets, results: Results, **filters: Unpack[Filters]
) -> pandas.DataFrame:
    """:func:`records` as a pandas DataFrame, one row per record, one column per field.
    Needs pandas (the ``pandas`` extra): without it, an InputError names the command that
    installs it."""
    _check_filters("records_frame", filters)
    try:
        import pandas
    except ImportError:
        from kag.install import missing_extra

        raise InputError(f"kag.records_frame: {missing_extra('pandas', 'pandas')}") from None
    rows = [r.to_dict() for r in records(datasets, results, **filters)]
    columns = list(Record.__dataclass_fields__)
    return pandas.DataFrame(rows, columns=columns)
