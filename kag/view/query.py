"""What the pages of `kag view` show, computed from the index: the `kag stats` summary and
the comparisons (through kag's grading functions, never recomputed here), the paired grid
of questions with its filters, and one question's detail (read from its result files).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kag.datasets import Datasets, Question
from kag.errors import UsageError
from kag.grading.compare.records import question_sort_key
from kag.grading.compare.setups import ComparisonRun, compare_setups
from kag.grading.mcq.summary import summarize
from kag.grading.record import GradedFile, Outcome
from kag.grading.rule import rust_trim
from kag.grading.search.match import Matcher, literal_of, match_text
from kag.grading.search.options import DEFAULT_TIMEOUT, compile_pattern
from kag.grading.usage import price_records
from kag.results.codec import parse_result
from kag.results.io import read_result_bytes
from kag.results.model import ErrorResult
from kag.view.index import (
    GRADED,
    UNREADABLE,
    Index,
    ScanStats,
    tree_labels,
    unpack_detail,
)
from kag.view.snapshot import SELECT_ROWS, Builder, Cell, Snapshot, graded_record, setup_name

if TYPE_CHECKING:  # the judge's modules load the model clients: only a named judge needs them
    from kag.pricing import Prices
    from kag.view.verdicts import VerdictReader

PAGE_SIZE = 50
SORTS = ("question", "-question", "correct", "-correct", "vertices", "-vertices")
OUTCOMES = tuple(o.value for o in Outcome)


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
            builder = Builder(index, False)
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

    def _build(self, builder: Builder | None = None) -> Snapshot:
        """The snapshot of the index's rows (those ``builder`` was given while the scan
        made them, when it made them all; else read from the index)."""
        if builder is None:
            builder = Builder(self.index, self.index.tallies is None)
            db = self.index.db
            # The later epochs first: epoch 1's outcome is then kept only where there are some.
            builder.add_later(
                db.execute(SELECT_ROWS + " WHERE epoch != 1 AND kind IN (?, ?)", (GRADED, UNREADABLE))
            )
            builder.add_first(db.execute(SELECT_ROWS + " WHERE epoch = 1"))
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
            graded_record(row, setup_name(label, row[4]))
            for row in self.index.db.execute(SELECT_ROWS + " WHERE epoch = 1 AND kind = ?", (GRADED,))
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
            raise UsageError(f"baseline {baseline!r}: no graded setup has that name")
        if baseline not in self._compared:  # computed once per baseline and scan
            answers = _answers(self.records(), self.datasets)
            found = any(a.setup == baseline for a in answers)
            self._compared[baseline] = compare_setups(answers, baseline) if found else None
        return self._compared[baseline]

    # ------------------------------------------------------------------ the grid

    def questions(self, params: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        """The grid's rows for the query parameters (see docs/view.md), one page of them."""
        snap = self.snapshot
        dataset = _one(params, "dataset")
        setups = [s for s in params.get("setup", []) if s] or list(snap.setups)
        for s in setups:
            if s not in snap.setups:
                raise UsageError(f"setup={s}: no graded setup has that name")
        outcome = _one(params, "outcome")
        if outcome is not None and outcome not in OUTCOMES:
            raise UsageError(f"outcome must be one of {', '.join(OUTCOMES)} (got {outcome!r})")
        flip = _one(params, "flip")
        flip_pair: tuple[str, str] | None = None
        if flip is not None:
            a, sep, b = flip.partition(",")
            if not sep or a not in snap.setups or b not in snap.setups:
                raise UsageError(f"flip=A,B takes two graded setup names (got {flip!r})")
            flip_pair = (a, b)
        disagree = _one(params, "disagree") in {"1", "true", "yes"}
        sort = _one(params, "sort") or "question"
        if sort not in SORTS:
            raise UsageError(f"sort must be one of {', '.join(SORTS)} (got {sort!r})")
        page = _int(_one(params, "page") or "1", "page")
        pattern = _one(params, "q")
        choice = (dataset, tuple(setups), outcome, flip_pair, disagree, pattern, sort)
        keys = snap.selected.get(choice)
        if keys is None:
            keys = self._select(snap, *choice)
            if len(snap.selected) >= 32:
                snap.selected.clear()
            snap.selected[choice] = keys
        total = len(keys)
        pages = max(1, -(-total // PAGE_SIZE))
        page = min(max(page, 1), pages)
        rows = []
        for key in keys[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]:
            q = self.datasets.get(*key)
            cells = snap.grid[key]
            rows.append(
                {
                    "dataset": key[0],
                    "question": key[1],
                    "input": q.input[:300] if q is not None else "",
                    "gold": q.mcq.answer if q is not None and q.mcq is not None else None,
                    "cells": {
                        s: (
                            {"outcome": c.outcome, "answer": c.answer, "extracted": c.extracted}
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


def _one(params: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = params.get(name)
    return values[-1] if values and values[-1] != "" else None


def _int(text: str, name: str) -> int:
    if not text.isdigit() or len(text) > 9:
        raise UsageError(f"{name} must be a positive whole number (got {text!r})")
    return int(text)


def _norm(c: Cell) -> str:
    if c.outcome == "err":
        return "\0err"
    return rust_trim(c.answer or "").casefold()


def _answers(records: Sequence[GradedFile], datasets: Datasets) -> list[GradedFile]:
    """The records with their gold key, graded strictly (as `kag stats compare` pairs by default)."""
    out = []
    for r in records:
        q: Question | None = datasets.get(r.dataset, r.question)
        gold = q.mcq.answer if q is not None and q.mcq is not None else None
        out.append(replace(r, gold=gold))
    return out
