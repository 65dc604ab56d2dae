"""The snapshot of the index that the pages of `kag view` read: the `kag stats` run of its
rows (tallies, epochs, evidence), the paired grid of questions, and the caches that hold
until the next scan. Built from index rows (the columns of :data:`SELECT_ROWS`, by position).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from kag.grading.epochs import EpochOutcome
from kag.grading.evidence import EvidenceRecord
from kag.grading.mcq.metrics import GradeRun, Tally, Unreadable
from kag.grading.record import GradedFile, Outcome
from kag.grading.retrieval_quality import is_reached
from kag.view.index import (
    GRADED,
    IGNORED,
    NAMES,
    OPEN,
    SKIPPED,
    UNREADABLE,
    Index,
    open_questions,
    tree_labels,
)
from kag.view.record_rows import detail_field, from_row

if TYPE_CHECKING:
    from kag.grading.mcq.summary import Summary
    from kag.view.search import Found

# An index row as the builder reads it: graded_record and epoch_outcome take its fields by position.
SELECT_ROWS = f"SELECT {', '.join(NAMES)} FROM files"


class Cell(NamedTuple):
    """One setup's file of one question, as the grid shows it (a tuple: one per file), in the
    words of the export's rows: ``outcome`` the strict grade, ``response`` the head of the
    reply, ``extracted`` the key ``--extract`` read (None when it read none, or without
    ``--extract``) and ``extracted_outcome`` its grade."""

    outcome: str
    response: str | None
    extracted: str | None
    extracted_outcome: str | None
    vertices: int | None
    #: The file's name in its question folder, one object per name however many folders
    #: hold it (its path in the tree: :func:`cell_rel`).
    rel: str
    tree: str
    #: Whether the file's retrieval reached the question's gold evidence
    #: (:func:`kag.grading.retrieval_quality.is_reached`); None without gold or retrieval.
    reached: bool | None = None


@dataclass
class Snapshot:
    """Everything the pages read, rebuilt after each scan."""

    run: GradeRun
    summary: Summary
    setups: tuple[str, ...]
    grid: dict[tuple[str, str], dict[str, Cell]]
    order: list[tuple[str, str]]
    epochs: dict[tuple[str, str, str], tuple[int, int]] = field(default_factory=dict)
    datasets: tuple[str, ...] = ()  # of the grid's questions
    #: The grid's question lists by choice of filters (View.questions), kept until the next scan.
    selected: dict[tuple[Any, ...], list[tuple[str, str]]] = field(default_factory=dict)
    #: What a page computes from the snapshot once, kept with it: the per-file records of
    #: the graded files, the searches by (pattern, setups), the rows of the trees' run
    #: records (the records themselves are not kept: up to 16 MiB each).
    records: tuple[GradedFile, ...] | None = None
    searches: dict[tuple[str, tuple[str, ...]], Found] = field(default_factory=dict)
    runs: list[dict[str, Any]] | None = None


_epoch, _kind, _evidence = itemgetter(5), itemgetter(6), itemgetter(15)
# A Cell from a tuple of its fields (tuple.__new__, not the class's own __new__: a call in
# C, once per graded file of a first build).
_cell = partial(tuple.__new__, Cell)


def cell_rel(key: tuple[str, str], cell: Cell) -> str:
    """The path in its tree of a cell's file, that of question ``key``."""
    return f"{key[0]}/{key[1]}/{cell.rel}" if "/" not in cell.rel else cell.rel


def setup_name(label: str, setup: str) -> str:
    return f"{label}/{setup}" if label else setup


class Builder:
    """The parts of a snapshot, made from index rows (the columns of :data:`SELECT_ROWS`): the
    later epochs' rows of a question before its epoch 1's. ``meanwhile`` is called once,
    after the first part a scan gives (:meth:`add_part`): what the process can do while
    the scan's workers read the rest."""

    def __init__(self, index: Index, counting: bool, meanwhile: Callable[[], None] | None = None) -> None:
        self.index = index
        self.meanwhile = meanwhile
        self.counting = counting  # the tallies made here, not by the scan's workers
        self.labels = tree_labels(index.trees)
        # The setup names of a (tree, setup): one per label the tree is given under.
        self._names: dict[tuple[str, str], tuple[str, ...]] = {}
        self.with_extract = index.extract is not None
        self.with_evidence = index.datasets.has_evidence
        self.tallies: dict[tuple[str, str], Tally] = {}
        self.grid: dict[tuple[str, str], dict[str, Cell]] = {}
        self.epochs: dict[tuple[str, str, str], tuple[int, int]] = {}
        self.skipped = self.ignored = 0
        self.unreadable: list[Unreadable] = []
        self.evidence: dict[tuple[str, str], dict[str, EvidenceRecord]] = {}
        self.later: dict[tuple[str, str, str, str], dict[int, EpochOutcome | None]] = {}
        self.firsts: dict[tuple[str, str, str, str], EpochOutcome] = {}
        self._shared: dict[str, str] = {}  # one object per file name, question id, tree, outcome
        self._names_of_tree: dict[str, dict[str, tuple[str, ...]]] = {}  # names(tree, setup), by tree
        # Whether a graded row's cell is all it gives (_add_graded), evidence bits and later epochs aside.
        self._plain = not (counting or self.with_extract or self.with_evidence) and all(
            len(names) == 1 for names in self.labels.values()
        )

    def add_part(self, rows: list[tuple[Any, ...]]) -> None:
        """Rows as a scan stores them, each question's all in one part."""
        if list(map(_epoch, rows)).count(1) != len(rows):  # a tree with later epochs
            self.add_later(row for row in rows if row[5] != 1 and row[6] in (GRADED, UNREADABLE))
            rows = [row for row in rows if row[5] == 1]
        self.add_first(rows)
        if self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()

    def names(self, tree: str, setup: str) -> tuple[str, ...]:
        names = self._names.get((tree, setup))
        if names is None:
            labels = self.labels.get(tree, ("",))
            names = self._names[(tree, setup)] = tuple(setup_name(label, setup) for label in labels)
        return names

    def add_later(self, rows: Iterable[tuple[Any, ...]]) -> None:
        later, with_extract = self.later, self.with_extract
        for row in rows:
            tree, _, dataset, question, setup, epoch, kind = row[:7]
            outcome = epoch_outcome(row, with_extract) if kind == GRADED else None
            for name in self.names(tree, setup):
                later.setdefault((tree, dataset, question, name), {})[epoch] = outcome

    def add_first(self, rows: Iterable[tuple[Any, ...]]) -> None:
        if (
            self._plain
            and not self.later
            and isinstance(rows, list)
            and list(map(_kind, rows)).count(GRADED) == len(rows)
            and list(map(_evidence, rows)).count(None) == len(rows)
        ):
            self._add_graded(rows)
            return
        labels, later, grid, tallies = self.labels, self.later, self.grid, self.tallies
        counting, shared, names_of_tree = self.counting, self._shared, self._names_of_tree
        with_extract, with_evidence = self.with_extract, self.with_evidence
        # The rows of a question folder come one after the other (the index's order, a
        # scan's part): what they share is looked up once per folder, not once per row.
        at: tuple[Any, Any, Any] | None = None  # the (tree, dataset, question) of the folder
        prefix, cut = "", 0
        cells: dict[str, Cell] | None = None
        names_in: dict[str, tuple[str, ...]] = {}  # the folder's tree's setup names, by setup
        for row in rows:
            kind = row[6]
            graded = kind == GRADED
            if not graded and kind != OPEN:
                tree = row[0]
                if kind == IGNORED:  # counted once per label, as `kag stats` walks each tree given
                    self.ignored += len(labels.get(tree, ("",)))
                elif kind == SKIPPED:
                    self.skipped += len(labels.get(tree, ("",)))
                elif kind == UNREADABLE:
                    bad = Unreadable(os.path.join(tree, row[1]), row[13] or "")
                    self.unreadable.extend(bad for _ in labels.get(tree, ("",)))
                continue
            tree, rel, dataset, question, setup = row[:5]
            if at is None or question != at[2] or dataset != at[1] or tree != at[0]:
                # A row's strings are new objects: the tree, dataset, question, file name and
                # outcome repeat in every cell.
                tree, dataset = shared.setdefault(tree, tree), shared.setdefault(dataset, dataset)
                at = (tree, dataset, shared.setdefault(question, question))
                prefix, cells = f"{dataset}/{at[2]}/", None
                cut = len(prefix)
                names_in = names_of_tree.get(tree) or names_of_tree.setdefault(tree, {})
            tree, dataset, question = at
            outcome = row[9]
            outcome = shared.setdefault(outcome, outcome)
            # The extracted key and the retrieval quality live in the detail, read only when
            # there is one to read.
            key = detail_field(row, "extracted_key") if with_extract and graded else None
            reached = None
            if with_evidence and graded:
                quality = detail_field(row, "retrieval_quality")
                reached = is_reached(quality) if quality is not None else None
            record = from_row(row, setup) if counting else None
            name_in = rel[cut:]
            if "/" in name_in or not rel.startswith(prefix):
                name_in = rel  # not a file of the question's folder: kept whole (cell_rel)
            name_in = shared.setdefault(name_in, name_in)
            names = names_in.get(setup)
            if names is None:
                names = names_in[setup] = self.names(tree, setup)
            for name in names:
                if record is not None:
                    tally = tallies.get((name, dataset))
                    if tally is None:
                        tally = tallies[(name, dataset)] = Tally()
                    named = replace(record, setup=name) if name != setup else record
                    if graded:
                        tally.add(named)
                    else:
                        tally.add_open_record(named)
                if not graded:
                    continue
                if later and (tree, dataset, question, name) in later:
                    self.firsts[(tree, dataset, question, name)] = epoch_outcome(row, with_extract)
                if row[15] is not None:
                    found = EvidenceRecord(tuple(c == "1" for c in row[15]), outcome == Outcome.OK.value)
                    self.evidence.setdefault((name, dataset), {})[question] = found
                if cells is None:
                    cells = grid.setdefault((dataset, question), {})
                cells[name] = _cell((outcome, row[11], key, row[10], row[14], name_in, tree, reached))

    def _add_graded(self, rows: list[tuple[Any, ...]]) -> None:
        """:meth:`add_first` of graded rows with no evidence bits, in a builder that
        counts nothing, reads no detail and has no later epochs, each tree under one
        label (a first build's rows, mostly): a cell each, and nothing else."""
        grid, shared, names_of_tree = self.grid, self._shared, self._names_of_tree
        tree: Any = None  # the question folder's tree, dataset and question
        dataset: Any = None
        question: Any = None
        prefix, cut = "", 0
        cells: dict[str, Cell] = {}
        names_in: dict[str, tuple[str, ...]] = {}
        for row in rows:
            if row[3] != question or row[2] != dataset or row[0] != tree:
                tree, dataset, question = row[0], row[2], row[3]
                tree, dataset = shared.setdefault(tree, tree), shared.setdefault(dataset, dataset)
                question = shared.setdefault(question, question)
                prefix = f"{dataset}/{question}/"
                cut = len(prefix)
                cells = grid.setdefault((dataset, question), {})
                names_in = names_of_tree.get(tree) or names_of_tree.setdefault(tree, {})
            rel, setup, outcome = row[1], row[4], row[9]
            name_in = rel[cut:]
            if "/" in name_in or not rel.startswith(prefix):
                name_in = rel  # not a file of the question's folder: kept whole (cell_rel)
            name_in = shared.setdefault(name_in, name_in)
            names = names_in.get(setup)
            if names is None:
                names = names_in[setup] = self.names(tree, setup)
            outcome = shared.setdefault(outcome, outcome)
            cells[names[0]] = _cell((outcome, row[11], None, row[10], row[14], name_in, tree, None))

    def run(self) -> GradeRun:
        """The `kag stats` run of the rows added."""
        tallies = self.tallies
        # The tallies the workers made while the scan read every file, else made here.
        counted = self.index.tallies
        if not self.counting and counted is not None:
            for (tree, setup, dataset), part in counted.items():  # the trees in order
                for name in self.names(tree, setup):
                    if (name, dataset) not in tallies:
                        tallies[(name, dataset)] = Tally()
                    tallies[(name, dataset)].merge(part)
        epoch_outcomes: dict[tuple[str, str], dict[str, tuple[EpochOutcome, ...]]] = {}
        ds = self.index.graded
        for (tree, dataset, question, name), files in self.later.items():
            q = ds.get(dataset, question)
            if q is None or q.mcq is None or q.mcq.answer is None:
                continue  # an open question's epochs are not measured
            first = self.firsts.get((tree, dataset, question, name))
            chain = [first] if first is not None else []
            # Up to the first missing or unreadable epoch, as `kag stats` counts them.
            while chain and (outcome := files.get(len(chain) + 1)) is not None:
                chain.append(outcome)
            epoch_outcomes.setdefault((name, dataset), {})[question] = tuple(chain)
            if len(chain) > 1:
                self.epochs[(dataset, question, name)] = (sum(o.correct for o in chain), len(chain))
        self.unreadable.sort(key=lambda u: u.path)
        evidence = self.evidence
        opened = open_questions(ds)
        return GradeRun(
            tallies={key: tallies[key].freeze() for key in sorted(tallies)},
            datasets=len(ds.datasets),
            scorable_questions=ds.scorable_questions,
            skipped_files=self.skipped,
            ignored_files=self.ignored,
            unreadable=tuple(self.unreadable),
            records=None,  # made when a page needs them (View.records)
            scorable_open_questions=opened or None,
            extract=self.index.extract,
            evidence={k: {q: evidence[k][q] for q in sorted(evidence[k])} for k in sorted(evidence)}
            if ds.has_evidence
            else None,
            epochs={
                key: {q: epoch_outcomes[key][q] for q in sorted(epoch_outcomes[key])}
                for key in sorted(epoch_outcomes)
            },
            judge=self.index.judge,
        )


def graded_record(row: tuple[Any, ...], name: str) -> GradedFile:
    """The per-file record of an index row (the columns of :data:`SELECT_ROWS`), named
    ``name``: what `kag stats` builds for the same file (:func:`kag.view.record_rows.from_row`)."""
    return from_row(row, name)


def epoch_outcome(row: tuple[Any, ...], with_extract: bool) -> EpochOutcome:
    """What one graded file of an index row gives the epoch measures: its grade, its answer
    (the response the row keeps, or for a longer one :func:`kag.view.record_rows.answer_vote`),
    and with ``--extract`` the extracted grade and key."""
    extracted = None
    if with_extract:
        extracted = EpochOutcome(row[10] == Outcome.OK.value, detail_field(row, "extracted_key"))
    vote = row[17]
    return EpochOutcome(row[9] == Outcome.OK.value, vote if vote is not None else row[11], extracted)
