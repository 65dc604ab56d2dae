"""What the pages of `kag view` show, computed from the index: the `kag stats` summary and
the comparisons (through kag's grading functions, never recomputed here), the paired grid
of questions with its filters, and one question's detail (read from its result files).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from kag.datasets import Datasets, Question
from kag.grading.compare.records import question_sort_key
from kag.grading.compare.setups import ComparisonRun, compare_setups
from kag.grading.epochs import EpochOutcome
from kag.grading.evidence import EvidenceRecord
from kag.grading.mcq.metrics import GradeRun, Tally, Unreadable
from kag.grading.mcq.summary import Summary, summarize
from kag.grading.record import GradedFile, Outcome
from kag.grading.rule import rust_trim
from kag.grading.search.match import Matcher, literal_of, match_text
from kag.grading.search.options import DEFAULT_TIMEOUT, compile_pattern
from kag.grading.usage import price_records
from kag.results.codec import RetrievalSample, parse_result
from kag.results.io import read_result_bytes
from kag.results.model import AugmentedGeneration, ErrorResult, ModelConfig, Usage
from kag.view.choices import Choice, UnknownChoice, neighbours, option_key, read_choice, read_page
from kag.view.index import (
    GRADED,
    IGNORED,
    NAMES,
    OPEN,
    SKIPPED,
    UNREADABLE,
    Index,
    ScanStats,
    tree_labels,
    unpack_detail,
)

if TYPE_CHECKING:  # the judge's modules load the model clients: only a named judge needs them
    from kag.pricing import Prices
    from kag.view.verdicts import VerdictReader

PAGE_SIZE = 50
# An index row as View reads it: _graded and _epoch_outcome take its fields by position.
_COLUMNS = f"SELECT {', '.join(NAMES)} FROM files"
_OUTCOME = {o.value: o for o in Outcome}  # a lookup costs a tenth of Outcome(value), 100,000 times


class Cell(NamedTuple):
    """One setup's file of one question, as the grid shows it (a tuple: one per file)."""

    outcome: str
    answer: str | None
    extracted: str | None
    vertices: int | None
    rel: str
    tree: str


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


def setup_name(label: str, setup: str) -> str:
    return f"{label}/{setup}" if label else setup


class View:
    """The data behind the pages: the index, the snapshot of it, the question lookups."""

    def __init__(
        self,
        index: Index,
        verdicts: VerdictReader | None = None,
        prices: Prices | None = None,
        *,
        scan: bool = False,
    ) -> None:
        """The view of ``index``; with ``scan``, the index is brought up to date first
        (:attr:`stats`), and when that read every file the snapshot is made from the rows
        as they came, not read back."""
        self.index = index
        self.verdicts = verdicts
        self.prices = prices
        self.datasets = index.datasets
        self._lock = threading.Lock()
        self._search_cache: dict[tuple[str, tuple[str, ...]], frozenset[tuple[str, str]]] = {}
        self._compared: dict[str, ComparisonRun | None] = {}
        self._records: tuple[GradedFile, ...] | None = None
        builder = None
        self.stats: ScanStats | None = None
        if scan:
            builder = _Builder(index, False)
            self.stats = index.scan(builder.add_part)
            if index.tallies is None:  # only the changed rows went by
                builder = None
        self.snapshot = self._build(builder)

    def reload(self) -> Any:
        with self._lock:
            stats = self.index.scan()
            if stats.changed:  # else the pages stay as they are
                self.snapshot = self._build()
                self._search_cache.clear()
                self._compared.clear()
                self._records = None
            return stats

    def _build(self, builder: _Builder | None = None) -> Snapshot:
        """The snapshot of the index's rows (those ``builder`` was given while the scan
        made them, when it made them all; else read from the index)."""
        if builder is None:
            builder = _Builder(self.index, self.index.tallies is None)
            db = self.index.db
            # The later epochs first: epoch 1's outcome is then kept only where there are some.
            builder.add_later(
                db.execute(_COLUMNS + " WHERE epoch != 1 AND kind IN (?, ?)", (GRADED, UNREADABLE))
            )
            builder.add_first(db.execute(_COLUMNS + " WHERE epoch = 1"))
        run = builder.run()
        summary = summarize(run)
        if self.prices is not None:
            summary = replace(summary, costs=price_records(self._read_records(), self.prices))
        return Snapshot(
            run,
            summary,
            tuple(sorted({name for name, _ in run.tallies})),
            builder.grid,
            sorted(builder.grid, key=question_sort_key),
            builder.epochs,
            tuple(sorted({dataset for dataset, _ in builder.grid})),
        )

    def records(self) -> tuple[GradedFile, ...]:
        """The per-file records of the graded MCQ files (epoch 1), what `kag stats compare`
        pairs: read from the index once per scan, when a page first needs them."""
        if self._records is None:
            self._records = self._read_records()
        return self._records

    def _read_records(self) -> tuple[GradedFile, ...]:
        labels = tree_labels(self.index.trees)
        records = [
            _graded(row, setup_name(label, row[4]))
            for row in self.index.db.execute(_COLUMNS + " WHERE epoch = 1 AND kind = ?", (GRADED,))
            for label in labels.get(row[0], ("",))
        ]
        records.sort(key=lambda r: (r.dataset, r.question, r.setup))
        return tuple(records)

    # ------------------------------------------------------------------ the overview

    def comparisons(self, baseline: str | None) -> ComparisonRun | None:
        """Every setup against ``baseline`` (default: the best-ranked setup), as `kag stats compare`."""
        snap = self.snapshot
        if not snap.summary.setups:
            return None
        if baseline is None:
            baseline = snap.summary.setups[0].setup
        if baseline not in snap.setups:
            raise UnknownChoice("baseline", baseline, "setup", snap.setups)
        if baseline not in self._compared:  # computed once per baseline and scan
            answers = _answers(self.records(), self.datasets)
            found = any(a.setup == baseline for a in answers)
            self._compared[baseline] = compare_setups(answers, baseline) if found else None
        return self._compared[baseline]

    # ------------------------------------------------------------------ the grid

    def questions(self, params: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        """The grid's rows for the query parameters (see docs/view.md), one page of them."""
        snap = self.snapshot
        choice, keys = self._selected(snap, params)
        setups = list(choice.setups)
        page = read_page(params)
        total = len(keys)
        pages = max(1, -(-total // PAGE_SIZE))
        page = min(max(page, 1), pages)
        rows = []
        for key in keys[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]:
            q = self.datasets.get(*key)
            cells = snap.grid[key]
            options = dict(q.mcq.options) if q is not None and q.mcq is not None else None
            rows.append(
                {
                    "dataset": key[0],
                    "question": key[1],
                    "input": q.input[:300] if q is not None else "",
                    "gold": q.mcq.answer if q is not None and q.mcq is not None else None,
                    "options": options,
                    "cells": {
                        s: (
                            {"outcome": c.outcome, "answer": c.answer, "extracted": c.extracted}
                            | {"option": option_key(c.answer, options)}
                            if (c := cells.get(s)) is not None
                            else None
                        )
                        for s in setups
                    },
                }
            )
        return {
            "total": total,
            "page": page,
            "pages": pages,
            "page_size": PAGE_SIZE,
            "setups": setups,
            "rows": rows,
        }

    def _selected(
        self, snap: Snapshot, params: Mapping[str, Sequence[str]]
    ) -> tuple[Choice, list[tuple[str, str]]]:
        """The choice of ``params`` and its questions, in order."""
        choice = read_choice(params, snap.setups, snap.datasets)
        keys = snap.selected.get(choice)
        if keys is None:
            keys = self._select(snap, *choice)
            if len(snap.selected) >= 32:
                snap.selected.clear()
            snap.selected[choice] = keys
        return choice, keys

    def neighbours(self, params: Mapping[str, Sequence[str]], key: tuple[str, str]) -> dict[str, Any]:
        """Where the question ``key`` stands in the grid of ``params`` (:func:`neighbours`)."""
        return neighbours(self._selected(self.snapshot, params)[1], key, PAGE_SIZE)

    def _select(
        self,
        snap: Snapshot,
        dataset: str | None,
        setups: tuple[str, ...],
        outcome: str | None,
        flip_pair: tuple[str, str] | None,
        disagree: bool,
        pattern: str | None,
        sort: str,
    ) -> list[tuple[str, str]]:
        """The grid's questions for one choice of filters, in order (kept per choice with the
        snapshot: paging through them, or coming back, costs a slice)."""
        matched = self._search(pattern, setups) if pattern else None
        keys = []
        for key in snap.order:
            if dataset is not None and key[0] != dataset:
                continue
            cells = snap.grid[key]
            present = [cells[s] for s in setups if s in cells]
            if not present:
                continue
            if outcome is not None and not any(c.outcome == outcome for c in present):
                continue
            if flip_pair is not None:
                ca, cb = cells.get(flip_pair[0]), cells.get(flip_pair[1])
                if ca is None or cb is None or ca.outcome != "ok" or cb.outcome == "ok":
                    continue
            if disagree and len({_norm(c) for c in present}) < 2:
                continue
            if matched is not None and key not in matched:
                continue
            keys.append(key)
        if sort.lstrip("-") == "correct":
            keys.sort(
                key=lambda k: sum(1 for s in setups if (c := snap.grid[k].get(s)) and c.outcome == "ok")
            )
        elif sort.lstrip("-") == "vertices":
            keys.sort(key=lambda k: max((c.vertices or 0) for c in snap.grid[k].values()))
        if sort.startswith("-"):
            keys.reverse()
        return keys

    def _search(self, pattern: str, setups: tuple[str, ...]) -> frozenset[tuple[str, str]]:
        """The questions where one of ``setups``' responses matches ``pattern`` (`kag stats find`'s
        rules: the trimmed response, the ``regex`` module, a CPU budget per file)."""
        cached = self._search_cache.get((pattern, setups))
        if cached is not None:
            return cached
        m = Matcher(compile_pattern(pattern), False, 0, 1, DEFAULT_TIMEOUT, literal_of(pattern))
        found = set()
        for key, cells in self.snapshot.grid.items():
            for s in setups:
                c = cells.get(s)
                if c is None or c.outcome == "err":
                    continue
                try:
                    result = parse_result(read_result_bytes(os.path.join(c.tree, c.rel)))
                except Exception:  # noqa: BLE001, S112 - a file that changed since the scan
                    continue
                if isinstance(result, ErrorResult):
                    continue
                hits, _ = match_text(rust_trim(result.result), m)
                if hits:
                    found.add(key)
                    break
        out = frozenset(found)
        if len(self._search_cache) > 32:
            self._search_cache.clear()
        self._search_cache[(pattern, setups)] = out
        return out

    # ------------------------------------------------------------------ one question

    def question(self, dataset: str, question: str) -> dict[str, Any] | None:
        """A question and every setup's file, read now; None when the index has no such question."""
        snap = self.snapshot
        cells = snap.grid.get((dataset, question))
        if cells is None:
            return None
        q = self.datasets.get(dataset, question)
        rows = self.index.db.execute(
            "SELECT tree, rel, vertices, detail FROM files WHERE dataset=? AND question=? AND epoch=1",
            (dataset, question),
        ).fetchall()
        by_rel = {(r[0], r[1]): r for r in rows}
        out = []
        for name in sorted(cells):
            c = cells[name]
            r = by_rel.get((c.tree, c.rel))
            path = os.path.join(c.tree, c.rel)
            entry: dict[str, Any] = {
                "setup": name,
                "outcome": c.outcome,
                "extracted": c.extracted,
                "path": path,
                "epochs": list(snap.epochs[(dataset, question, name)])
                if (dataset, question, name) in snap.epochs
                else None,
            }
            if r is not None and r[3] is not None:
                d = unpack_detail(r[3])
                entry.update(
                    generation_secs=d.generation_ns / 1e9 if d.generation_ns is not None else None,
                    context_length=d.context_length,
                    retrieval_secs=d.retrieval_ns / 1e9 if d.retrieval_ns is not None else None,
                    vertices=r[2],
                    relationships=d.relationships,
                    properties=d.properties,
                    prompt_tokens=d.prompt_tokens,
                    completion_tokens=d.completion_tokens,
                    model=d.model,
                    provider=d.provider,
                )
            try:
                result = parse_result(read_result_bytes(path))
            except Exception as exc:  # noqa: BLE001 - changed or gone since the scan
                entry.update(
                    response=None,
                    error=f"cannot read the file now: {exc}",
                    retrieval=None,
                    prompt=None,
                    judge=None,
                )
                out.append(entry)
                continue
            if isinstance(result, ErrorResult):
                entry.update(response=None, error=result.error, retrieval=None, prompt=None, judge=None)
            else:
                retrieval = result.stats.retrieval
                entry.update(
                    response=result.result,
                    error=None,
                    prompt=result.stats.prompt,
                    retrieval=retrieval.result if retrieval is not None else None,
                    judge=self._verdict(c.tree, q, result.result),
                )
            out.append(entry)
        return {
            "dataset": dataset,
            "question": question,
            "input": q.input if q is not None else None,
            "options": dict(q.mcq.options) if q is not None and q.mcq is not None else None,
            "gold": q.mcq.answer if q is not None and q.mcq is not None else None,
            "evidence": list(q.evidence) if q is not None else [],
            "setups": out,
        }

    def _verdict(self, tree: str, q: Question | None, response: str) -> dict[str, str] | None:
        """The judge's cached verdict of ``response``, when a judge is named and has one."""
        if self.verdicts is None or q is None:
            return None
        found = self.verdicts.read(tree, q, response)
        if found is None:
            return None
        return {"judge": found.judge, "verdict": found.verdict, "reason": found.reason}


class _Builder:
    """The parts of a snapshot, made from index rows (the columns of :data:`_COLUMNS`): the
    later epochs' rows of a question before its epoch 1's."""

    def __init__(self, index: Index, counting: bool) -> None:
        self.index = index
        self.counting = counting  # the tallies made here, not by the scan's workers
        self.labels = tree_labels(index.trees)
        # The setup names of a (tree, setup): one per label the tree is given under.
        self._names: dict[tuple[str, str], tuple[str, ...]] = {}
        self.with_extract = index.extract is not None
        self.tallies: dict[tuple[str, str], Tally] = {}
        self.grid: dict[tuple[str, str], dict[str, Cell]] = {}
        self.epochs: dict[tuple[str, str, str], tuple[int, int]] = {}
        self.skipped = self.ignored = 0
        self.unreadable: list[Unreadable] = []
        self.evidence: dict[tuple[str, str], dict[str, EvidenceRecord]] = {}
        self.later: dict[tuple[str, str, str, str], dict[int, EpochOutcome | None]] = {}
        self.firsts: dict[tuple[str, str, str, str], EpochOutcome] = {}

    def add_part(self, rows: list[tuple[Any, ...]]) -> None:
        """Rows as a scan stores them, each question's all in one part."""
        self.add_later(row for row in rows if row[5] != 1 and row[6] in (GRADED, UNREADABLE))
        self.add_first(row for row in rows if row[5] == 1)

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
            outcome = _epoch_outcome(row, with_extract) if kind == GRADED else None
            for name in self.names(tree, setup):
                later.setdefault((tree, dataset, question, name), {})[epoch] = outcome

    def add_first(self, rows: Iterable[tuple[Any, ...]]) -> None:
        labels, later, grid, tallies = self.labels, self.later, self.grid, self.tallies
        counting = self.counting
        for row in rows:
            tree, rel, dataset, question, setup, _, kind = row[:7]
            if kind == IGNORED:  # counted once per label, as `kag stats` walks each tree given
                self.ignored += len(labels.get(tree, ("",)))
                continue
            if kind == SKIPPED:
                self.skipped += len(labels.get(tree, ("",)))
                continue
            if kind == UNREADABLE:
                bad = Unreadable(os.path.join(tree, rel), row[13] or "")
                self.unreadable.extend(bad for _ in labels.get(tree, ("",)))
                continue
            outcome = row[9]
            for name in self.names(tree, setup):
                if counting:
                    tally = tallies.get((name, dataset))
                    if tally is None:
                        tally = tallies[(name, dataset)] = Tally()
                    if kind == OPEN:
                        d = unpack_detail(row[16])
                        tally.add_open(d.open_exact or 0.0, d.open_f1 or 0.0, outcome == Outcome.ERR.value)
                    else:
                        tally.add(_graded(row, name))
                if kind == OPEN:
                    continue
                if later and (tree, dataset, question, name) in later:
                    self.firsts[(tree, dataset, question, name)] = _epoch_outcome(row, self.with_extract)
                if row[15] is not None:
                    found = EvidenceRecord(tuple(c == "1" for c in row[15]), outcome == Outcome.OK.value)
                    self.evidence.setdefault((name, dataset), {})[question] = found
                grid.setdefault((dataset, question), {})[name] = Cell(
                    outcome, row[11], row[10], row[14], rel, tree
                )

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
        ds = self.index.datasets
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
        any_open = any(q.open is not None for q in ds.iter_questions())
        return GradeRun(
            tallies={key: tallies[key].freeze() for key in sorted(tallies)},
            datasets=len(ds.datasets),
            scorable_questions=ds.scorable_questions,
            skipped_files=self.skipped,
            ignored_files=self.ignored,
            unreadable=tuple(self.unreadable),
            records=None,  # made when a page needs them (View.records)
            scorable_open_questions=sum(1 for q in ds.iter_questions() if q.open is not None)
            if any_open
            else None,
            extract=self.index.extract,
            evidence={k: {q: evidence[k][q] for q in sorted(evidence[k])} for k in sorted(evidence)}
            if ds.has_evidence
            else None,
            epochs={
                key: {q: epoch_outcomes[key][q] for q in sorted(epoch_outcomes[key])}
                for key in sorted(epoch_outcomes)
            },
        )


def _norm(c: Cell) -> str:
    if c.outcome == "err":
        return "\0err"
    return rust_trim(c.answer or "").casefold()


def _graded(row: tuple[Any, ...], name: str) -> GradedFile:
    """The per-file record of an index row (the columns of :data:`_COLUMNS`, by position):
    what `kag stats` builds for the same file."""
    d = unpack_detail(row[16])
    config = None
    if d.provider is not None:
        ag = AugmentedGeneration(d.retriever, d.database) if d.retriever is not None else None  # type: ignore[arg-type]
        config = ModelConfig(d.provider, d.model, d.temperature, d.max_tokens, ag)  # type: ignore[arg-type]
    extracted = row[10]
    ret_ns = d.retrieval_ns
    return GradedFile(
        row[2],
        row[3],
        name,
        _OUTCOME[row[9]],
        row[11],
        bool(d.abstained),
        bool(d.non_option),
        d.generation_ns,
        d.context_length,
        RetrievalSample(ret_ns, row[14], d.relationships, d.properties)  # type: ignore[arg-type]
        if ret_ns is not None
        else None,
        row[12],
        config,
        Usage(d.prompt_tokens, d.completion_tokens)
        if d.prompt_tokens is not None or d.completion_tokens is not None
        else None,
        _OUTCOME[extracted] if extracted is not None else None,
    )


def _epoch_outcome(row: tuple[Any, ...], with_extract: bool) -> EpochOutcome:
    """What one graded file of an index row gives the epoch measures: its grade, its answer
    (the head kept for the grid, or for a longer one :func:`kag.view.fields.answer_vote`),
    and with ``--extract`` the extracted grade and key."""
    d = unpack_detail(row[16])
    extracted = EpochOutcome(row[10] == Outcome.OK.value, d.extracted_key) if with_extract else None
    return EpochOutcome(row[9] == Outcome.OK.value, d.vote if d.vote is not None else row[11], extracted)


def _answers(records: Sequence[GradedFile], datasets: Datasets) -> list[GradedFile]:
    """The records with their gold key, graded strictly (as `kag stats compare` pairs by default)."""
    out = []
    for r in records:
        q: Question | None = datasets.get(r.dataset, r.question)
        gold = q.mcq.answer if q is not None and q.mcq is not None else None
        out.append(replace(r, gold=gold))
    return out
