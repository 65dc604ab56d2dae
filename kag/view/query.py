"""What the pages of `kag view` show, computed from the index: the `kag stats` summary and
the comparisons (through kag's grading functions, never recomputed here), the paired grid
of questions with its filters, and one question's detail (read from its result files).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from kag.datasets import DatasetsChanged, Question
from kag.errors import InputError
from kag.grading.record import GradedFile, question_sort_key
from kag.grading.retrieval_quality import is_reached
from kag.grading.rule import rust_trim
from kag.results.codec import parse_result
from kag.results.model import ErrorResult, Result
from kag.view.choices import Choice, UnknownChoice, neighbours, option_key, read_choice, read_page
from kag.view.index import (
    GRADED,
    OPEN,
    UNREADABLE,
    Index,
    ScanStats,
    folder_span,
    tree_labels,
)
from kag.view.snapshot import SELECT_ROWS, Builder, Cell, Snapshot, cell_rel, graded_record, setup_name

# The modules of the comparisons, the summary and the searches are imported when a page first
# needs them (or by View's ``meanwhile``): a first build starts its workers without them.
if TYPE_CHECKING:  # the judge's modules load the model clients: only a named judge needs them
    from kag.grading.compare.analysis import Analysis
    from kag.grading.compare.records import CompactAnswer
    from kag.grading.compare.setups import ComparisonRun
    from kag.grading.judge_labels import Label
    from kag.grading.search.match import Matcher
    from kag.pricing import Prices
    from kag.view.search import Found
    from kag.view.verdicts import VerdictReader

PAGE_SIZE = 50


class Analysing:
    """One analysis of a snapshot, computed once in a thread of its own: :attr:`done` is set
    when it is there (or failed: :meth:`wait` raises its error)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self._result: Analysis | None = None
        self._error: BaseException | None = None

    def run(self, compute: Callable[[], Analysis | None]) -> None:
        try:
            self._result = compute()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
            self._error = exc
        finally:
            self.done.set()

    def wait(self) -> Analysis | None:
        """The analysis, once computed (None: nothing to analyse)."""
        self.done.wait()
        if self._error is not None:
            raise self._error
        return self._result


class View:
    """The data behind the pages: the index, the snapshot of it, the question lookups."""

    def __init__(
        self,
        index: Index,
        verdicts: VerdictReader | None = None,
        prices: Prices | None = None,
        *,
        scan: bool = False,
        labels: Sequence[Label] | None = None,
        meanwhile: Callable[[], None] | None = None,
    ) -> None:
        """The view of ``index``; with ``scan``, the index is brought up to date first
        (:attr:`stats`), and when that read every file the snapshot is made from the rows
        as they came, not read back. ``meanwhile`` is called once the scan's first rows are
        in, while its workers read the rest: what this process can do in the meantime
        (import the pages' modules), rather than before the workers start or after the
        last row."""
        self.index = index
        self.verdicts = verdicts
        self.prices = prices
        #: The human labels of answers (``--labels``): (dataset, question, setup) -> annotator -> correct.
        self.labels: dict[tuple[str, str, str], dict[str, bool]] | None = None
        if labels is not None:
            self.labels = {}
            for label in labels:
                self.labels.setdefault(label.answer, {})[label.annotator] = label.correct
        self.datasets = index.datasets
        #: How long a search of the grid's responses may run (seconds; None: the default,
        #: :data:`kag.view.search.SEARCH_SECONDS`).
        self.search_seconds: float | None = None
        self._reloading = threading.Lock()
        # Held while a page reads the index and while a reload commits its scan and puts its
        # snapshot in place: a page sees the rows of the snapshot it shows, never a scan's half.
        self._swap = threading.Lock()
        self._reader: sqlite3.Connection | None = None
        # The analyses of the snapshot shown, by baseline (None: the default one).
        self._analysing = threading.Lock()
        self._analyses: tuple[Snapshot | None, dict[str | None, Analysing]] = (None, {})
        builder = None
        self.stats: ScanStats | None = None
        if scan:
            builder = Builder(index, False, meanwhile)
            self.stats = index.scan(builder.add_part)
            if index.tallies is None:  # only the changed rows went by
                builder = None
        self.snapshot = self._build(builder)

    def reload(self) -> ScanStats:
        """Scan the trees again; when that changed the index (here or in another process
        sharing it), the pages show the new snapshot from then on."""
        with self._reloading:
            stats = self.index.scan(commit=False)
            try:
                snap = self._build() if stats.changed else None  # else the pages stay as they are
            except BaseException:
                self.index.rollback()
                raise
            with self._swap:
                self.index.commit()
                if snap is not None:
                    self.snapshot = snap
            return stats

    def _build(self, builder: Builder | None = None) -> Snapshot:
        """The snapshot of the index's rows (those ``builder`` was given while the scan
        made them, when it made them all; else read from the index)."""
        db = self.index.db
        if builder is None:
            builder = Builder(self.index, self.index.tallies is None)
            # The later epochs first: epoch 1's outcome is then kept only where there are some.
            builder.add_later(
                db.execute(SELECT_ROWS + " WHERE epoch != 1 AND kind IN (?, ?)", (GRADED, UNREADABLE))
            )
            builder.add_first(db.execute(SELECT_ROWS + " WHERE epoch = 1"))
        from kag.grading.mcq.summary import summarize
        from kag.grading.usage import price_records

        run = builder.run()
        summary = summarize(run)
        records = None
        if self.prices is not None:
            records = self._read_records(db)
            summary = replace(summary, costs=price_records(records, self.prices))
        return Snapshot(
            run,
            summary,
            tuple(sorted({name for name, _ in run.tallies})),
            builder.grid,
            sorted(builder.grid, key=question_sort_key),
            builder.epochs,
            tuple(sorted({dataset for dataset, _ in builder.grid})),
            records=records,
        )

    def _read(self, query: str, args: tuple[object, ...]) -> tuple[Snapshot, list[Any]]:
        """The snapshot the pages show and the rows of ``query`` as committed with it."""
        with self._swap:
            if self._reader is None:
                self._reader = self.index.reader()
            return self.snapshot, self._reader.execute(query, args).fetchall()

    def _stream(self, query: str, args: tuple[object, ...]) -> Iterator[tuple[Any, ...]]:
        """The rows of ``query`` as committed with the snapshot shown when it starts, one at
        a time (a connection of its own, whose read begins before a reload can commit)."""
        conn = self.index.reader()
        try:
            with self._swap:
                conn.execute("BEGIN")
                cursor = conn.execute(query, args)
                first = cursor.fetchmany(1)  # the read holds from here on
            yield from first
            yield from cursor
        finally:
            conn.close()

    def records(self, snap: Snapshot | None = None) -> tuple[GradedFile, ...]:
        """The per-file records of the graded MCQ files (epoch 1), what `kag stats compare`
        pairs: read from the index once per scan (kept with ``snap``, by default the
        snapshot shown), when a page first needs them."""
        snap = snap or self.snapshot
        if snap.records is None:
            taken, rows = self._read(SELECT_ROWS + " WHERE epoch = 1 AND kind = ?", (GRADED,))
            records = self._records_of(rows)
            if taken is not snap:  # a reload put another snapshot in place meanwhile
                return records
            snap.records = records
        return snap.records

    def _read_records(self, db: sqlite3.Connection) -> tuple[GradedFile, ...]:
        return self._records_of(db.execute(SELECT_ROWS + " WHERE epoch = 1 AND kind = ?", (GRADED,)))

    def _records_of(self, rows: Iterable[tuple[Any, ...]]) -> tuple[GradedFile, ...]:
        labels = tree_labels(self.index.trees)
        records = [
            graded_record(row, setup_name(label, row[4]))
            for row in rows
            for label in labels.get(row[0], ("",))
        ]
        records.sort(key=lambda r: (r.dataset, r.question, r.setup))
        return tuple(records)

    # ------------------------------------------------------------------ the overview

    def analysis(self, baseline: str | None = None) -> Analysing:
        """The analysis `kag stats compare --format html` draws (comparisons against
        ``baseline``, by default `kag stats compare`'s; flips; retrieval impact) of the
        snapshot shown: started in a thread of its own on the first call per baseline and
        scan, so that a page can show the tables before it is done (wait on
        :attr:`Analysing.done`)."""
        snap = self.snapshot
        if baseline is not None and baseline not in snap.setups:
            raise UnknownChoice("baseline", baseline, "setup", snap.setups)
        with self._analysing:
            if self._analyses[0] is not snap:
                self._analyses = (snap, {})
            jobs = self._analyses[1]
            job = jobs.get(baseline)
            if job is None:
                job = jobs[baseline] = Analysing()
                thread = threading.Thread(
                    target=job.run, args=(lambda: self._analyse(snap, baseline),), daemon=True
                )
                thread.start()
        return job

    def comparisons(self, baseline: str | None) -> ComparisonRun | None:
        """Every setup against ``baseline`` (default: `kag stats compare`'s), as `kag stats compare`."""
        analysis = self.analysis(baseline).wait()
        return analysis.comparisons if analysis is not None else None

    def _analyse(self, snap: Snapshot, baseline: str | None) -> Analysis | None:
        """:func:`kag.grading.compare.analyse` of the graded records of ``snap`` (without its
        flips, which no page shows); None when it has none (or none of ``baseline``)."""
        from kag.grading.compare.analysis import analyse_indexed, best_setup
        from kag.grading.compare.records import index_answers, setup_configs, setup_profiles

        answers = self._answers()
        if not answers or (baseline is not None and not any(a.setup == baseline for a in answers)):
            return None
        profiles = setup_profiles(answers, setup_configs(answers))
        base = baseline if baseline is not None else best_setup(answers)
        return analyse_indexed(index_answers(answers), profiles, base)

    def _answers(self) -> list[CompactAnswer]:
        """The graded MCQ records of epoch 1 as the comparisons read them (compact, their
        repeated values shared: a million files in bounded memory), in `kag stats compare`'s
        order: read from the index for each analysis, not kept."""
        from kag.grading.compare.records import CompactAnswer

        rows = self._stream(SELECT_ROWS + " WHERE epoch = 1 AND kind = ?", (GRADED,))
        labels = tree_labels(self.index.trees)
        shared: dict[object, Any] = {}
        answers = []
        for row in rows:
            full = graded_record(row, row[4])
            for label in labels.get(row[0], ("",)):
                answers.append(CompactAnswer.of(full, setup_name(label, row[4]), shared))
        # By (dataset, question, setup): one stable sort per field, whose keys are the
        # records' own strings (a key tuple per record would double the peak).
        for field in ("setup", "question", "dataset"):
            answers.sort(key=attrgetter(field))
        return answers

    # ------------------------------------------------------------------ the grid

    def questions(
        self, params: Mapping[str, Sequence[str]], gone: Callable[[], bool] | None = None
    ) -> dict[str, Any]:
        """The grid's rows for the query parameters (see docs/view.md), one page of them;
        ``cut`` says why a search stopped before its last file (``gone``: whether the
        client has left, which stops it too)."""
        snap = self.snapshot
        choice, keys, cut = self._selected(snap, params, gone)
        setups = list(choice.setups)
        page = read_page(params)
        total = len(keys)
        pages = max(1, -(-total // PAGE_SIZE))
        page = min(max(page, 1), pages)
        rows = []
        for key in keys[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]:
            q = self._entry(*key)
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
                            {
                                "outcome": c.outcome,
                                "response": c.response,
                                "extracted": c.extracted,
                                "extracted_outcome": c.extracted_outcome,
                                "option": option_key(c.response, options),
                                "reached": c.reached,
                            }
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
            "cut": cut,
        }

    def _selected(
        self,
        snap: Snapshot,
        params: Mapping[str, Sequence[str]],
        gone: Callable[[], bool] | None = None,
    ) -> tuple[Choice, list[tuple[str, str]], str | None]:
        """The choice of ``params``, its questions in order, and why a search of it stopped
        before its last file (None when it did not)."""
        choice = read_choice(params, snap.setups, snap.datasets)
        keys = snap.selected.get(choice)
        cut = None
        if keys is None:
            matched = None
            if choice.pattern is not None:
                from kag.view.search import compile_search

                found = self._search(snap, compile_search(choice.pattern), choice.setups, gone)
                matched, cut = found.keys, found.cut
            keys = self._select(snap, *choice[:5], matched, choice.sort, choice.retrieval)
            if cut is None:  # a search cut short is not kept: the next asks again
                if len(snap.selected) >= 32:
                    snap.selected.clear()
                snap.selected[choice] = keys
        return choice, keys, cut

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
        matched: frozenset[tuple[str, str]] | None,
        sort: str,
        retrieval: str | None = None,
    ) -> list[tuple[str, str]]:
        """The grid's questions for one choice of filters (``matched``: those a search
        found), in order (kept per choice with the snapshot: paging through them, or coming
        back, costs a slice). ``outcome`` and ``retrieval`` hold of one column together."""
        keys = []
        reached = retrieval == "reached" if retrieval is not None else None
        for key in snap.order:
            if dataset is not None and key[0] != dataset:
                continue
            cells = snap.grid[key]
            present = [cells[s] for s in setups if s in cells]
            if not present:
                continue
            if (outcome is not None or reached is not None) and not any(
                (outcome is None or c.outcome == outcome) and (reached is None or c.reached is reached)
                for c in present
            ):
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

    def _search(
        self, snap: Snapshot, m: Matcher, setups: tuple[str, ...], gone: Callable[[], bool] | None
    ) -> Found:
        """The questions where one of ``setups``' responses matches (`kag stats find`'s
        rules: the trimmed response, the ``regex`` module, a CPU budget per file), within
        :attr:`search_seconds` and while the client is there; kept with the snapshot."""
        from kag.view.search import SEARCH_SECONDS, search_files

        key = (m.pattern.pattern, setups)
        cached = snap.searches.get(key)
        if cached is not None:
            return cached
        files = [
            (k, c.tree, cell_rel(k, c))
            for k, cells in snap.grid.items()
            for s in setups
            if (c := cells.get(s)) is not None and c.outcome != "err"
        ]
        seconds = self.search_seconds if self.search_seconds is not None else SEARCH_SECONDS
        found = search_files(files, len(files), m, seconds=seconds, gone=gone)
        if found.cut is None:
            if len(snap.searches) > 32:
                snap.searches.clear()
            snap.searches[key] = found
        return found

    # ------------------------------------------------------------------ one question

    def question(self, dataset: str, question: str) -> dict[str, Any] | None:
        """A question and every setup's file, read now; None when the index has no such question."""
        from kag.view.search import read_below

        roots = list(tree_labels(self.index.trees))
        snap, rows = self._read(
            SELECT_ROWS
            + f" WHERE tree IN ({', '.join('?' * len(roots))}) AND rel>=? AND rel<? AND epoch=1 AND kind IN (?, ?)",
            (*roots, *folder_span(dataset, question), GRADED, OPEN),
        )
        cells = snap.grid.get((dataset, question))
        if cells is None:
            return None
        q = self._entry(dataset, question)
        by_rel = {(r[0], r[1]): r for r in rows}
        out = []
        for name in sorted(cells):
            c = cells[name]
            rel = cell_rel((dataset, question), c)
            r = by_rel.get((c.tree, rel))
            path = os.path.join(c.tree, rel)
            entry: dict[str, Any] = {
                "setup": name,
                "outcome": c.outcome,
                "extracted": c.extracted,
                "extracted_outcome": c.extracted_outcome,
                "path": path,
                "epochs": list(snap.epochs[(dataset, question, name)])
                if (dataset, question, name) in snap.epochs
                else None,
                **dict.fromkeys(_DETAIL),  # a row another process removed since: no figures
                **self._label(dataset, question, name),
            }
            if r is not None:
                g = graded_record(r, name)
                ret, config, usage = g.retrieval, g.config, g.usage
                entry.update(
                    generation_secs=g.generation_ns / 1e9 if g.generation_ns is not None else None,
                    context_length=g.context_length,
                    retrieval_secs=ret.time_ns / 1e9 if ret is not None else None,
                    vertices=g.vertices,
                    relationships=ret.relationships if ret is not None else None,
                    properties=ret.properties if ret is not None else None,
                    prompt_tokens=usage.prompt_tokens if usage is not None else None,
                    completion_tokens=usage.completion_tokens if usage is not None else None,
                    model=config.model if config is not None else None,
                    provider=config.provider if config is not None else None,
                    reached=is_reached(g.retrieval_quality) if g.retrieval_quality is not None else None,
                )
            try:
                result: Result = parse_result(read_below(c.tree, rel))
            except Exception as exc:  # noqa: BLE001 - changed or gone since the scan
                reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
                result = ErrorResult(f"cannot read the file now: {reason}")
            if isinstance(result, ErrorResult):
                entry.update(
                    response=None,
                    error=result.error,
                    retrieval=None,
                    graph=None,
                    prompt=None,
                    **self._verdicts(c.tree, q, None),
                )
            else:
                retrieval = result.stats.retrieval
                entry.update(
                    response=result.result,
                    error=None,
                    prompt=result.stats.prompt,
                    retrieval=retrieval.result if retrieval is not None else None,
                    graph=retrieval.graph if retrieval is not None else None,
                    **self._verdicts(c.tree, q, result.result),
                )
            out.append(entry)
        return {
            "dataset": dataset,
            "question": question,
            "input": q.input if q is not None else None,
            "options": dict(q.mcq.options) if q is not None and q.mcq is not None else None,
            "gold": q.mcq.answer if q is not None and q.mcq is not None else None,
            "evidence": list(q.evidence) if q is not None else [],
            "evidence_triples": [list(t) for t in q.evidence_triples] if q is not None else [],
            "setups": out,
        }

    def _entry(self, dataset: str, question: str) -> Question | None:
        """The question with its texts, read from the datasets file when it was read without
        them: DatasetsChanged when the file changed or went since."""
        try:
            return self.datasets.entry(dataset, question)
        except InputError as exc:  # cannot be read now: a file gone is a file changed
            raise exc if isinstance(exc, DatasetsChanged) else DatasetsChanged(str(exc)) from None

    def _label(self, dataset: str, question: str, setup: str) -> dict[str, Any]:
        """The human labels of an answer: ``label`` (the annotators' majority, ``correct``,
        ``incorrect`` or ``tie``; None without a label) and ``annotators`` (each one's)."""
        given = self.labels.get((dataset, question, setup), {}) if self.labels is not None else {}
        if not given:
            return {"label": None, "annotators": []}
        from kag.grading.judge_stats import majority_label  # loads the judge: only with labels

        words = {True: "correct", False: "incorrect", None: "tie"}
        return {
            "label": words[majority_label(given.values())],
            "annotators": [{"annotator": who, "label": words[value]} for who, value in given.items()],
        }

    def _verdicts(self, tree: str, q: Question | None, response: str | None) -> dict[str, Any]:
        """The judges' cached verdicts of ``response``: ``judge`` (the first judge's, or None),
        ``judges`` (every named judge's, a missing one with verdict None) and ``majority``
        (with several judges; None when none has a verdict)."""
        if self.verdicts is None:
            return {"judge": None, "judges": [], "majority": None}
        if q is None or response is None:  # an error file is not judged
            return {"judge": None, "judges": [], "majority": None}
        every = self.verdicts.read_all(tree, q, response)
        judges: list[dict[str, Any]] = []
        for name, found, repeats in every.found:
            entry: dict[str, Any] = {
                "judge": name,
                "verdict": found.verdict if found is not None else None,
                "reason": found.reason if found is not None else None,
            }
            if self.verdicts.repeats > 1:
                entry["repeats"] = list(repeats)
            judges.append(entry)
        first = every.found[0][1]
        return {
            "judge": {"judge": first.judge, "verdict": first.verdict, "reason": first.reason}
            if first
            else None,
            "judges": judges,
            "majority": every.majority if len(judges) > 1 else None,
        }


_DETAIL = (
    "generation_secs",
    "context_length",
    "retrieval_secs",
    "vertices",
    "relationships",
    "properties",
    "prompt_tokens",
    "completion_tokens",
    "model",
    "provider",
    "reached",
)


def _norm(c: Cell) -> str:
    if c.outcome == "err":
        return "\0err"
    return rust_trim(c.response or "").casefold()
