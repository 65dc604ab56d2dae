"""The walk of one result tree: :func:`grade_tree` reads every result file once and folds
its grade into the tallies of (setup, dataset).

The tree's layout is :mod:`kag.grading.rule`'s contract,
``<root>/<dataset>/<question>/<prefix><setup>.json``. Each question folder is a task of a
kind set by the datasets file (an MCQ with a key, an MCQ without one, an open question,
anything else); what is graded is one :class:`~kag.grading.mcq.request.GradeRequest`. Each
result file is read and graded by :mod:`.question_files`, as kag view's index reads it. The
walk streams: it keeps the tallies and the file counters, and the per-file records only
when the request asks for ``records`` (the features that pair files across setups), so
memory does not grow with the number of files unless records are kept (then a few hundred
bytes per file, the response text included). A question's ``epochs`` folder is read only
when the epochs are asked for (:mod:`.epoch_walk`), its retrieval text only when the
evidence is (:mod:`kag.grading.evidence`).

Parallelism: large trees are graded by a pool of worker processes over chunks of
question folders; the chunks' tallies are merged in chunk order, so the result does not
depend on the number of workers or on the order in which chunks finish
(:mod:`.metrics`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

from kag.datasets import Datasets, Question, count_questions
from kag.errors import UsageError
from kag.gcpause import collector_paused
from kag.grading.epochs import EpochOutcome
from kag.grading.evidence import EvidenceRecord
from kag.grading.mcq.epoch_walk import epoch_outcome, question_epochs
from kag.grading.mcq.extracted import compile_spec
from kag.grading.mcq.metrics import GradeRun, Tally, Unreadable
from kag.grading.mcq.question_files import (
    FileGrader,
    QuestionKind,
    QuestionTask,
    question_task,
    unreadable_reason,
)
from kag.grading.mcq.request import GradeRequest
from kag.grading.mcq.rule import AnswerKey, compile_abstention
from kag.grading.measures import kept_parts
from kag.grading.measures.registry import ByQuestion, Files, slotted_states
from kag.grading.open_grading import empty_gold_warning, usable_open_gold
from kag.grading.record import GradedFile
from kag.grading.retrieval_quality import QualityRecord
from kag.grading.verdicts import VerdictCache
from kag.results.codec import RetrievalSample
from kag.results.model import TMP_SUFFIX
from kag.results.tree import (
    EPOCHS_FOLDER,
    check_results_root,
    glob_filter,
    matches_any,
    result_file_setup,
    sorted_entries,
)
from kag.textsafe import escape_controls
from kag.workers import default_workers, ordered_map, send_as_slots

log = logging.getLogger(__name__)

# Chunking of question folders handed to worker processes, and the size from which the
# automatic mode starts a pool (a pool costs ~0.1-1 s to start; small trees grade faster
# in-process).
CHUNK_QUESTIONS = 100
AUTO_PARALLEL_MIN_QUESTIONS = 500

# What goes to and from the workers by the thousand (tasks, the evidence measures' records,
# the records, the counters of the blocks), sent as their slots' values.
send_as_slots(
    QuestionTask,
    AnswerKey,
    EvidenceRecord,
    QualityRecord,
    GradedFile,
    RetrievalSample,
    EpochOutcome,
    *slotted_states(),
)

# ---------------------------------------------------------------- walking the tree


@dataclass(frozen=True)
class _Config:
    request: GradeRequest
    log_level: int
    root: str = ""


@dataclass
class _ChunkResult:
    tallies: dict[tuple[str, str], Tally] = field(default_factory=dict)
    skipped: int = 0
    ignored: int = 0
    unreadable: list[Unreadable] = field(default_factory=list)
    logs: list[tuple[int, str]] = field(default_factory=list)
    # What the request's measures keep beyond the tallies, by the run field it fills
    # (kag.grading.measures.kept_parts).
    kept: dict[str, Any] = field(default_factory=dict)

    def tally(self, key: tuple[str, str]) -> Tally:
        """The tally of (setup, dataset), created empty on first use."""
        tally = self.tallies.get(key)
        if tally is None:
            tally = self.tallies[key] = Tally()
        return tally

    def ignore(self, entry: os.DirEntry[str], why: str, info: bool) -> None:
        """Count an entry that is not graded for the reason ``why`` (a writer's leftover
        temporary file is not counted); with ``info``, say so in the log."""
        if not entry.name.endswith(TMP_SUFFIX):
            self.ignored += 1
            if info:
                self.logs.append((logging.INFO, f"{entry.path}: ignored ({why})"))

    def add_unreadable(self, path: str, exc: Exception) -> None:
        """Count a file that could not be read or parsed: the OS reason, else the message."""
        self.unreadable.append(Unreadable(path, unreadable_reason(exc)))


# What a chunk makes holds no cycle (an unreadable file's exception aside, freed after the
# chunk): the collector is not run over it, nor over the run's parts the parent gathers.
@collector_paused()
def _grade_chunk(tasks: Sequence[QuestionTask], config: _Config) -> _ChunkResult:
    """Grade the result files of a chunk of question folders (runs in a worker process)."""
    request = config.request
    out = _ChunkResult(kept=kept_parts(request.asked))
    info = config.log_level <= logging.INFO
    debug = config.log_level <= logging.DEBUG
    prefix = request.prefix
    # One predicate for epoch 1's files and the later epochs' (kag.grading.mcq.epoch_walk).
    keep_setup = glob_filter(tuple(request.setups), request.glob_prefix)
    # Each file is read and graded as kag view's index grades it (kag.grading.mcq.question_files).
    grader = FileGrader(request, config.root)
    # The parts asked for, looked up once: the loop below only tests them for None.
    records: Files | None = out.kept.get("records")
    open_records: Files | None = out.kept.get("open_records")
    epochs: ByQuestion | None = out.kept.get("epochs")
    # The grader makes equal evidence records one object: a chunk's result sends each once.
    evidence: ByQuestion | None = out.kept.get("evidence")
    for task in tasks:
        try:
            entries = sorted_entries(task.path)
        except OSError as exc:
            out.logs.append(
                (logging.WARNING, f"{task.path}: cannot list the question folder: {exc.strerror}")
            )
            continue
        # Epoch 1's outcomes by setup, kept only in a question with an epoch folder.
        firsts: dict[str, EpochOutcome] | None = None
        if (
            epochs is not None
            and task.kind is QuestionKind.SCORABLE
            and any(e.name == EPOCHS_FOLDER and e.is_dir(follow_symlinks=False) for e in entries)
        ):
            firsts = {}
        for entry in entries:
            name = entry.name
            if name == EPOCHS_FOLDER and entry.is_dir(follow_symlinks=False):
                continue  # the later epochs: read below, never counted with epoch 1's files
            if name.endswith(TMP_SUFFIX):
                if debug:
                    out.logs.append((logging.DEBUG, f"{entry.path}: in-progress write (.tmp), not graded"))
                continue
            setup = result_file_setup(entry, prefix)
            if setup is None:
                out.ignore(entry, f"not a '{prefix}…json' result file", info)
                continue
            if not keep_setup(setup):
                continue
            if task.kind is QuestionKind.NOT_GRADED:
                out.ignore(entry, "question is free-form or not in the datasets file", info)
                continue
            if task.kind is QuestionKind.NO_ANSWER:
                out.skipped += 1
                if debug:
                    out.logs.append((logging.DEBUG, f"{entry.path}: skipped (MCQ without an answer)"))
                continue
            path = entry.path
            got = grader.grade(task, path, setup)
            graded = got.record
            if graded is None:
                out.add_unreadable(path, got.failure)  # type: ignore[arg-type]
                continue
            key = (setup, task.dataset)
            if task.kind is QuestionKind.OPEN:
                out.tally(key).add_open_record(graded)
                if open_records is not None:
                    open_records.append(graded)
                continue
            out.tally(key).add(graded)
            if got.evidence is not None and evidence is not None:
                kept_evidence = evidence.get(key)
                if kept_evidence is None:
                    kept_evidence = evidence[key] = {}
                kept_evidence[task.question] = got.evidence
            if records is not None:
                records.append(graded)
            if firsts is not None:
                firsts[setup] = epoch_outcome(graded, got.extracted_answer)
            if debug:
                out.logs.append(
                    (
                        logging.DEBUG,
                        f"[{task.dataset}/{task.question}] setup '{setup}' graded as {graded.outcome.name}",
                    )
                )
        if firsts is not None and epochs is not None:
            found, logs = question_epochs(
                os.path.join(task.path, EPOCHS_FOLDER),
                firsts,
                task.key,  # type: ignore[arg-type]
                dataset=task.dataset,
                question=task.question,
                prefix=prefix,
                keep_setup=keep_setup,
                abstention=grader.abstention,
                spec=grader.spec,
            )
            out.logs.extend(logs)
            for setup, outcomes in found:
                epochs.setdefault((setup, task.dataset), {})[task.question] = outcomes
    return out


def _chunked(tasks: Iterable[QuestionTask], size: int) -> Iterator[list[QuestionTask]]:
    chunk: list[QuestionTask] = []
    for task in tasks:
        chunk.append(task)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _graded_chunks(
    chunks: Iterator[list[QuestionTask]], config: _Config, workers: int | None
) -> Iterator[_ChunkResult]:
    """The result of each chunk, in chunk order. ``workers`` None: a pool of
    :func:`kag.workers.default_workers` processes once the tree has
    ``AUTO_PARALLEL_MIN_QUESTIONS`` questions, else this process."""
    if workers is None:
        head: list[list[QuestionTask]] = []
        for chunk in chunks:
            head.append(chunk)
            if len(head) * CHUNK_QUESTIONS >= AUTO_PARALLEL_MIN_QUESTIONS:
                break
        big = len(head) * CHUNK_QUESTIONS >= AUTO_PARALLEL_MIN_QUESTIONS
        workers = default_workers() if big else 1
        chunks = chain(head, chunks)
    work = partial(_grade_chunk, config=config)
    if workers <= 1:
        yield from map(work, chunks)
        return
    graded = ordered_map(
        work,
        chunks,
        workers,
        died="a grading worker process died unexpectedly (out of memory?); nothing was reported",
        failed="a grading worker failed",
    )
    try:  # closed at once on any exit, so that the workers stop with the consumer
        yield from graded
    finally:
        graded.close()


def grade_tree(
    datasets: Datasets, root: str | Path, request: GradeRequest | None = None, *, workers: int | None = None
) -> GradeRun:
    """Grade every ``<root>/<dataset>/<question>/<prefix><setup>.json`` file as ``request``
    asks (:class:`~kag.grading.mcq.request.GradeRequest`: the prefix, the filters, the
    abstention pattern, the extracted grade, the tree's label, what is kept beyond the
    tallies; None: ``GradeRequest()``, every file of the tree with the default rules).

    Per file (the spec's rules, in order):

    1. A name that is not ``<prefix>…json`` with a non-empty setup, a non-regular file
       (symbolic links are never followed), a folder at the file level, or a file at the
       dataset/question level is ignored (``ignored_files``, logged at -v). ``*.tmp``
       files are writes in progress: neither graded nor counted (logged at -vv). Hidden
       folders at the dataset level (``.kag-judge``) are passed over, not counted.
    2. Files of a free-form question or of a question not in the datasets file are
       ignored the same way.
    3. Files of an MCQ without an answer count in ``skipped_files``.
    4. A file that is not exactly ``{"error": str}`` or ``{"ok": {"result": str, ...}}``
       is unreadable: a warning names it and it counts in ``unreadable_files``.
    5. Otherwise :func:`grade_fields` grades it (what :func:`grade_result` gives for the
       result model of the file, without building the model).

    Files filtered out by the request's ``setups`` / ``dataset_globs`` are not counted
    anywhere; ``datasets`` and ``scorable_questions`` of the run count the datasets file
    restricted to ``dataset_globs``. With a ``label`` the ``setups`` globs match
    ``<label>/<setup>``, the name a setup has in a report over several trees
    (:func:`kag.grading.mcq.trees.grade_trees`); the run's setups stay unlabelled.

    ``workers``: None chooses (a process pool for trees of 500 questions or more, else
    in-process), 1 grades in-process, n > 1 uses n worker processes. The result never
    depends on it. Raises InputError when ``root`` is not a directory, UsageError for an
    invalid abstention pattern or ``extract`` spec, or for an ``extract`` spec or a judge
    with ``datasets`` loaded without their texts (``load_datasets(path, texts=False)``).

    With an ``extract`` spec the extracted grade of every MCQ file
    (:mod:`kag.grading.mcq.extracted`) is added to the tallies and records. Files of open
    questions (``"type": "Open"``) are graded by EM and F1 (:mod:`kag.grading.open_grading`)
    into the ``open_*`` counters of the tallies; their records (when ``records`` is asked
    for) are ``open_records``, apart from the MCQ ``records``.

    A folder named ``epochs`` among a question's files holds the later epochs of repeated
    samples (:func:`kag.results.epoch_result_path`): it is never counted, so every field
    above stays epoch 1's. Asking for ``epochs`` also reads it and fills ``GradeRun.epochs``
    (:mod:`kag.grading.mcq.epoch_walk`); asking for ``evidence`` fills ``GradeRun.evidence``
    with the evidence records of the files whose question lists evidence names
    (:mod:`kag.grading.mcq.evidence_blocks`). What is not asked for stays None in the run.
    With the request's ``judge``, the judge's cached verdict of each answer is read into its
    record (:mod:`kag.grading.verdicts`) and counted by the ``judge`` measure. A file is
    read for what the measures of the request need (:func:`kag.grading.measures.needs`).
    """
    root = str(root)
    request = request if request is not None else GradeRequest()
    if not datasets.texts and (request.extract is not None or request.judge is not None):
        # Extraction reads the options' texts, the judge is shown the question's.
        raise UsageError(
            f"{datasets.path} was loaded without its texts, which --extract and --judge read:"
            " load it with them (kag.datasets.load_datasets(path))"
        )
    check_results_root(root)
    compile_abstention(request.abstention)
    if request.extract is not None:
        compile_spec(request.extract)  # a bad pattern is a usage error before any file is read
    ds_globs = request.dataset_globs
    selected = [name for name in datasets.datasets if matches_any(name, ds_globs)]
    scorable = sum(count_questions(datasets.datasets[name], _scorable) for name in selected)
    any_open = any(count_questions(questions, _open) for questions in datasets.datasets.values())
    if any_open:  # accepted answers that are no gold are set aside, with one warning
        datasets, empty = usable_open_gold(datasets)
        if (warning := empty_gold_warning(datasets, empty)) is not None:
            log.warning("%s", warning)
    # Counted when there are some: each question with gold evidence is tested one by one.
    open_questions = sum(count_questions(datasets.datasets[n], _open) for n in selected) if any_open else None
    if request.judge is not None:
        VerdictCache(Path(root), request.judge.judge).check()  # a planted link: before any file is read
    config = _Config(request, log.getEffectiveLevel(), root)
    parent = _ChunkResult()
    questions = _iter_questions(datasets, root, ds_globs, parent, request.judge is not None)
    chunks = _chunked(questions, CHUNK_QUESTIONS)

    tallies: dict[tuple[str, str], Tally] = {}
    skipped = ignored = 0
    unreadable: list[Unreadable] = []
    kept = kept_parts(request.asked)
    # What the run gathers lives until its report: kept from the collector's walks.
    with collector_paused(keep=True):
        for part in _graded_chunks(chunks, config, workers):
            for name, value in part.kept.items():
                kept[name].merge(value)
            for level, message in part.logs:
                log.log(level, "%s", message)
            for key, tally in part.tallies.items():
                mine = tallies.get(key)
                if mine is None:
                    tallies[key] = tally
                else:
                    mine.merge(tally)
            skipped += part.skipped
            ignored += part.ignored
            unreadable.extend(part.unreadable)
        blocks = {key: tallies[key].freeze() for key in sorted(tallies)}
        parts = {name: value.finish() for name, value in kept.items()}
    for level, message in parent.logs:
        log.log(level, "%s", message)
    unreadable.sort(key=lambda u: u.path)
    for bad in unreadable:
        log.warning("%s: unreadable result file: %s", escape_controls(bad.path), bad.reason)
    return GradeRun(
        tallies=blocks,
        datasets=len(selected),
        scorable_questions=scorable,
        skipped_files=skipped,
        ignored_files=ignored + parent.ignored,
        unreadable=tuple(unreadable),
        scorable_open_questions=open_questions,
        extract=request.extract,
        judge=request.judge,
        **parts,
    )


def _scorable(question: Question) -> bool:
    return question.scorable


def _open(question: Question) -> bool:
    return question.open is not None


def _iter_questions(
    datasets: Datasets, root: str, ds_globs: Sequence[str], parent: _ChunkResult, judged: bool = False
) -> Iterator[QuestionTask]:
    """Question folders to grade, in name order; entries at wrong levels are counted in ``parent``."""
    info = log.isEnabledFor(logging.INFO)
    for d in sorted_entries(root):
        if d.name.startswith(".") and d.is_dir(follow_symlinks=False):
            continue  # hidden (the judge's .kag-judge cache): not part of the tree, not counted
        if not d.is_dir(follow_symlinks=False):
            parent.ignore(d, "not a dataset folder", info)
            continue
        if not matches_any(d.name, ds_globs):
            continue
        questions = datasets.datasets.get(d.name, {})
        try:
            names = _question_folders(d.path, parent, info)
        except OSError as exc:
            parent.logs.append((logging.WARNING, f"{d.path}: cannot list the dataset folder: {exc.strerror}"))
            continue
        for name in names:
            yield question_task(questions.get(name), os.path.join(d.path, name), d.name, name, judged)


def _question_folders(path: str, parent: _ChunkResult, info: bool) -> list[str]:
    """The names of the question folders in the dataset folder ``path``, sorted; its other
    entries are counted in ``parent`` (ignored). Names, not the entries: a dataset of
    100,000 questions is held in 6 MB instead of 24."""
    names: list[str] = []
    others: list[os.DirEntry[str]] = []
    with os.scandir(path) as listing:
        for entry in listing:
            if entry.is_dir(follow_symlinks=False):
                names.append(entry.name)
            else:
                others.append(entry)
    for entry in sorted(others, key=lambda e: e.name):
        parent.ignore(entry, "not a question folder", info)
    names.sort()
    return names
