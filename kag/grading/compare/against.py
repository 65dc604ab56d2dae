"""Every setup of the current tree against its own earlier run (``kag stats compare --against``).

The earlier run is what a previous CI job kept: the per-file rows of ``kag stats --format
jsonl``. Rows and current answers pair by (dataset, question, setup); per setup the paired
tests of :mod:`.paired` (McNemar, the seeded paired bootstrap) compare now with then, and
Holm adjusts the p-values over the setups. Questions on one side only are counted, never
paired.

An export row is versioned by its ``"v"`` key (:data:`EXPORT_VERSION`); rows without it
(written before the key existed) have the same columns and are read as version 1.
"""

from __future__ import annotations

__all__ = [
    "EXPORT_VERSION",
    "AgainstRun",
    "PreviousRun",
    "compare_against",
    "read_previous",
    "regressed_verdict",
    "unpaired_reason",
]

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import orjson

from kag.errors import InputError
from kag.grading.compare.paired import (
    DEFAULT_ALPHA,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    EXACT_BELOW,
)
from kag.grading.compare.records import question_sort_key
from kag.grading.compare.setups import ComparisonRun, compare_pairs
from kag.grading.percent import pct
from kag.grading.record import GradedFile
from kag.textfile import open_binary_file

#: The version of the rows ``kag stats --format jsonl`` writes (their ``"v"`` key).
EXPORT_VERSION = 3

#: A row longer than this is no export row (a response is cut by nothing, but 64 MiB is
#: far beyond any model reply): the reader stops instead of holding it.
MAX_ROW_BYTES = 64 << 20

_OUTCOMES = ("OK", "WRONG", "ERR")

Key = tuple[str, str, str]  # (dataset, question, setup)


@dataclass(frozen=True)
class PreviousRun:
    """The graded files of an export: (dataset, question, setup) -> correct, for the strict
    grade and for the extracted one (rows without ``extracted_outcome`` are absent there)."""

    path: str
    correct: dict[Key, bool]
    extracted: dict[Key, bool]


def _field(row: dict[str, object], key: str, where: str) -> str:
    value = row.get(key)
    if not isinstance(value, str):
        raise InputError(f"{where}: key '{key}' must be a string (is it a kag stats --format jsonl export?)")
    return value


def read_previous(path: Path | str) -> PreviousRun:
    """The MCQ rows of a ``kag stats --format jsonl`` export (open-question rows, which
    carry ``f1``, are not paired). Raises InputError naming the file, line and key of a row
    that is no JSON object, lacks a key, has an unknown outcome, repeats a (dataset,
    question, setup) or is of a newer version."""
    correct: dict[Key, bool] = {}
    extracted: dict[Key, bool] = {}
    first_line: dict[Key, int] = {}
    with open_binary_file(path, "export file") as handle:
        for number, line in enumerate(iter(lambda: handle.readline(MAX_ROW_BYTES + 1), b""), 1):
            where = f"{path}:{number}"
            if len(line) > MAX_ROW_BYTES:
                raise InputError(f"{where}: row longer than {MAX_ROW_BYTES >> 20} MiB")
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"{where}: not JSON: {exc.msg}") from None
            if not isinstance(row, dict):
                raise InputError(f"{where}: a row must be a JSON object")
            version = row.get("v", 1)
            if not isinstance(version, int) or isinstance(version, bool) or version < 1:
                raise InputError(f"{where}: key 'v' must be a positive integer")
            if version > EXPORT_VERSION:
                raise InputError(
                    f"{where}: key 'v': row version {version} is newer than this kag reads ({EXPORT_VERSION})"
                )
            key = (_field(row, "dataset", where), _field(row, "question", where), _field(row, "setup", where))
            outcome = _field(row, "outcome", where)
            if outcome not in _OUTCOMES:
                raise InputError(f"{where}: key 'outcome' must be OK, WRONG or ERR (got {outcome!r})")
            if row.get("f1") is not None:
                continue  # an open question: not graded by the paired MCQ comparisons
            if key in first_line:
                raise InputError(f"{where}: {'/'.join(key)} repeats line {first_line[key]}")
            first_line[key] = number
            correct[key] = outcome == "OK"
            grade = row.get("extracted_outcome")
            if isinstance(grade, str):
                extracted[key] = grade == "OK"
    return PreviousRun(str(path), correct, extracted)


@dataclass(frozen=True)
class AgainstRun:
    """Each current setup against its earlier run (``run.baseline`` names the export).

    In each :class:`Comparison`, ``setup_*`` counts are now and ``baseline_*`` then.
    ``previous_only`` and ``current_only`` are the (dataset, question, setup) keys graded on
    one side only (of the setups graded now), sorted; ``previous_setups`` the setups of the
    export that are not graded now (a filter, or a setup dropped).
    """

    run: ComparisonRun
    previous_only: tuple[Key, ...]
    current_only: tuple[Key, ...]
    previous_setups: tuple[str, ...] = ()
    #: (setup, dataset, question) of each question right before and not now, setup by setup.
    lost: tuple[tuple[str, str, str], ...] = ()

    def notes(self, limit: int = 5) -> list[str]:
        """The data-quality notes: the questions on one side only, named (``limit`` each)."""
        out = []
        for keys, side in ((self.previous_only, "only in the earlier run"), (self.current_only, "only now")):
            if keys:
                names = ", ".join("/".join(k) for k in keys[:limit])
                more = f", … ({len(keys) - limit} more)" if len(keys) > limit else ""
                out.append(f"{len(keys)} graded file(s) {side}, not paired: {names}{more}")
        if self.previous_setups:
            out.append(
                f"{len(self.previous_setups)} setup(s) of {self.run.baseline} not graded now: "
                + ", ".join(self.previous_setups[:limit])
                + (", …" if len(self.previous_setups) > limit else "")
            )
        return out


def compare_against(
    answers: Iterable[GradedFile],
    previous: PreviousRun,
    *,
    extracted: bool = False,
    alpha: float = DEFAULT_ALPHA,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    exact_below: int = EXACT_BELOW,
) -> AgainstRun:
    """Per setup of ``answers``: McNemar and the paired bootstrap between ``previous``
    (the extracted grade with ``extracted``, when the export has it) and now, on the
    questions both graded; Holm over the setups with a paired question. A setup is
    ``significant`` as in :func:`~kag.grading.compare.setups.compare_setups`."""
    then = previous.extracted if extracted and previous.extracted else previous.correct
    now: dict[str, dict[tuple[str, str], bool]] = {}
    for answer in answers:
        now.setdefault(answer.setup, {})[answer.key] = answer.correct
    current_only: list[Key] = []
    lost: list[tuple[str, str, str]] = []
    pairs = []
    for setup in sorted(now):
        mine = now[setup]
        keys = sorted((k for k in mine if (k[0], k[1], setup) in then), key=question_sort_key)
        current_only.extend((d, q, setup) for d, q in mine if (d, q, setup) not in then)
        a = [mine[k] for k in keys]
        b = [then[(k[0], k[1], setup)] for k in keys]
        pairs.append((setup, a, b))
        lost.extend((setup, d, q) for (d, q), x, y in zip(keys, a, b, strict=True) if y and not x)
    comparisons = compare_pairs(pairs, previous.path, alpha, n_resamples, seed, confidence, exact_below)
    previous_only = sorted(k for k in then if k[2] in now and (k[0], k[1]) not in now[k[2]])
    gone = sorted({k[2] for k in then if k[2] not in now})
    run = ComparisonRun(previous.path, tuple(comparisons), alpha, seed, n_resamples, confidence, exact_below)
    return AgainstRun(run, tuple(previous_only), tuple(sorted(current_only)), tuple(gone), tuple(lost))


def _names(names: Iterable[str], limit: int = 5) -> str:
    shown = list(names)
    return ", ".join(shown[:limit]) + (f", … ({len(shown) - limit} more)" if len(shown) > limit else "")


def unpaired_reason(against: AgainstRun) -> str | None:
    """Why no question at all was paired with the export (so nothing was compared), or None
    when at least one was: the export holds no MCQ row of any setup (an empty file, only
    open-question rows), or none of the setups graded now (renamed, another ``--prefix``),
    or none of their questions (other datasets)."""
    run = against.run
    if any(c.n for c in run.comparisons):
        return None
    now = [c.setup for c in run.comparisons]
    if not now:
        return "no setup is graded now"
    if against.previous_setups and not against.previous_only:
        return (
            f"none of the setups graded now ({_names(now)}) is in {run.baseline}, whose rows are of "
            f"{_names(against.previous_setups)}: a renamed setup, or another --prefix or --setup?"
        )
    if against.previous_only:
        return (
            f"no question graded now is in {run.baseline} for the same setup (other datasets or questions?)"
        )
    return f"{run.baseline} holds no MCQ row (an empty file, or open-question rows only)"


def regressed_verdict(against: AgainstRun) -> str | None:
    """Why ``--fail-if-regressed`` fails: no question paired with the export, so the gate
    compared nothing (:func:`unpaired_reason`); or each setup significantly worse than in
    the export, with both accuracies on the paired questions and the Holm p. None: passed."""
    unpaired = unpaired_reason(against)
    if unpaired is not None:
        return (
            f"--fail-if-regressed compared nothing: no question was paired with the earlier run: {unpaired}"
        )
    worse = against.run.regressions
    if not worse:
        return None
    details = "; ".join(
        f"{c.setup}: {pct(c.baseline_accuracy, unit='%')} before, {pct(c.setup_accuracy, unit='%')} now "
        f"on {c.n} paired questions, Holm p = {c.p_holm:.3g}"
        for c in worse
    )
    return (
        f"--fail-if-regressed: {len(worse)} setup(s) significantly worse than in {against.run.baseline} "
        f"at alpha {against.run.alpha:g}: {details}"
    )
