"""Grade MCQ result files against the datasets file, then aggregate them per setup.

Two stages, as in ir_measures: every result file first becomes a small per-file record
(:class:`GradedFile`, built by :func:`grade_result` from the result model, or by
:func:`grade_raw` straight from the parsed JSON); records are then folded into
:class:`Tally` accumulators keyed by (setup, dataset), and :func:`summarize` turns those
into ranked :class:`SetupSummary` blocks of :class:`Metrics`.

:func:`grade_tree` walks ``<root>/<dataset>/<question>/<prefix><setup>.json`` (the Rust
tool's layout) and streams: it keeps the tallies and the counters, and keeps the per-file
records only when asked (``keep_records=True``, for features that pair files across
setups). Memory therefore does not grow with the number of files unless records are
kept (then a few hundred bytes per file, the response text included).

The grading rule is the Rust tool's: an ``ok`` file is correct when its ``result``,
trimmed of Unicode White_Space (Rust's ``str::trim``), equals the answer key ignoring
ASCII case only (Rust's ``eq_ignore_ascii_case``); an ``error`` file is an error.

Parallelism: large trees are graded by a pool of worker processes over chunks of
question folders. Every sum is an integer (times in nanoseconds), so the result does not
depend on the number of workers or on the order in which chunks finish.
"""

from __future__ import annotations

import logging
import math
import os
import re
import stat
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import IntEnum, StrEnum
from fnmatch import fnmatchcase
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from kag.datasets import Datasets
from kag.errors import InputError, KagError, UsageError
from kag.results import (
    TMP_SUFFIX,
    ErrorResult,
    Result,
    Timing,
    UnreadableResult,
    check_results_root,
    setup_from_name,
)
from kag.textsafe import escape_controls, is_utf8

log = logging.getLogger(__name__)

# Unicode White_Space, the set Rust's `str::trim` strips. Python's `str.strip()` also strips
# U+001C..U+001F (information separators), which Rust keeps: "\x1fb" is not "b" in Rust.
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

#: Default pattern for abstentions (a WRONG answer that declines to answer).
DEFAULT_ABSTENTION = r"(?i)^\s*i\s+don'?t\s+know\.?\s*$"
#: z for a two-sided 95% interval (the 0.975 quantile of the standard normal).
Z95 = 1.959963984540054
NANOS_PER_SEC = 1_000_000_000

# Chunking of question folders handed to worker processes, and the size from which the
# automatic mode starts a pool (a pool costs ~0.1-1 s to start; small trees grade faster
# in-process).
CHUNK_QUESTIONS = 100
AUTO_PARALLEL_MIN_QUESTIONS = 500

#: Largest result file read (bytes). A bigger one is unreadable, told from its size alone:
#: reading and parsing a 1 GB file costs 2-4 GB of memory, and no answer is that long.
MAX_RESULT_BYTES = 64 * 1024 * 1024


def too_large_message(size: int) -> str:
    """Why a file of ``size`` bytes is not read (the same words in ``stats`` and ``find``)."""
    return f"{size:,} bytes, over the {MAX_RESULT_BYTES // (1024 * 1024)} MiB size cap for a result file"


# ---------------------------------------------------------------- the grading rule


def rust_trim(text: str) -> str:
    """``text`` without leading/trailing Unicode White_Space, like Rust's ``str::trim``."""
    return text.strip(RUST_WHITESPACE)


def ascii_fold(text: str) -> str:
    """``text`` with A-Z lowered and every other character kept (Rust's ``to_ascii_lowercase``)."""
    # On a pure-ASCII string str.lower() only touches A-Z, and it is much faster than translate.
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


def eq_ignore_ascii_case(a: str, b: str) -> bool:
    """Rust's ``eq_ignore_ascii_case``: equal when only A-Z/a-z may differ in case.

    Non-ASCII letters must match exactly: "É" != "é", and the Kelvin sign "K" (U+212A)
    is not "k" (``str.lower``/``casefold`` would say otherwise).
    """
    return ascii_fold(a) == ascii_fold(b)


def is_correct(response: str, answer: str) -> bool:
    """The Rust tool's rule: ``response.trim().eq_ignore_ascii_case(answer)``."""
    return eq_ignore_ascii_case(rust_trim(response), answer)


class Outcome(StrEnum):
    """The grade of one scored result file."""

    OK = "ok"  # an `ok` file whose answer matches the key
    WRONG = "wrong"  # an `ok` file whose answer does not match
    ERR = "err"  # an `error` file


@dataclass(frozen=True, slots=True)
class AnswerKey:
    """The answer key of one MCQ and its option keys, folded once for the comparisons."""

    answer: str
    options: tuple[str, ...]
    folded_answer: str = field(init=False)
    folded_options: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded_answer", ascii_fold(self.answer))
        object.__setattr__(self, "folded_options", frozenset(ascii_fold(k) for k in self.options))


@dataclass(frozen=True, slots=True)
class RetrievalSample:
    """Retrieval numbers of one file: the retriever's time and the database counts."""

    time_ns: int
    vertices: int
    relationships: int
    properties: int


@dataclass(frozen=True, slots=True)
class GradedFile:
    """The per-file record: what a result file contributes to the metrics.

    ``response`` is ``ok.result`` verbatim (None for ERR). ``abstained`` and
    ``non_option`` are only ever set on WRONG records and exclude each other.
    ``generation_ns`` is ``ok.stats.time``, ``context_length`` the UTF-8 byte length of
    ``ok.stats.prompt``; absent or mistyped values are None.
    """

    dataset: str
    question: str
    setup: str
    outcome: Outcome
    response: str | None
    abstained: bool = False
    non_option: bool = False
    generation_ns: int | None = None
    context_length: int | None = None
    retrieval: RetrievalSample | None = None


def timing_ns(timing: Timing | None) -> int | None:
    """A ``{secs, nanos}`` duration in nanoseconds; None when absent or negative."""
    if timing is None or timing.secs < 0 or timing.nanos < 0:
        return None
    return timing.secs * NANOS_PER_SEC + timing.nanos


def _utf8_length(text: str) -> int:
    # `isascii` is O(1) on CPython's compact strings: no copy for the common case.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


@lru_cache(maxsize=16)
def compile_abstention(pattern: str) -> re.Pattern[str]:
    """Compile an abstention pattern; raises UsageError naming the pattern when invalid."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"invalid abstention pattern {pattern!r}: {exc}") from None


def _grade_response(response: str, key: AnswerKey, abstention: re.Pattern[str]) -> tuple[Outcome, bool, bool]:
    """(outcome, abstained, non_option) of an ``ok`` response: the one place the rule lives."""
    folded = ascii_fold(rust_trim(response))
    if folded == key.folded_answer:
        return Outcome.OK, False, False
    if abstention.search(response) is not None:
        return Outcome.WRONG, True, False
    return Outcome.WRONG, False, folded not in key.folded_options


def grade_result(
    result: Result,
    answer: str,
    options: Sequence[str],
    *,
    dataset: str,
    question: str,
    setup: str,
    abstention: re.Pattern[str] | None = None,
) -> GradedFile:
    """Grade one parsed result file against the answer key.

    ``error`` -> ERR. ``ok`` -> OK when ``is_correct(result, answer)``, else WRONG; a WRONG
    answer matching ``abstention`` (default :data:`DEFAULT_ABSTENTION`, searched in the
    verbatim response) is an abstention, any other WRONG answer that is no option key
    (same trim + ASCII-case rule) is a non-option answer.
    A retrieval sample needs the retriever's time and all three database counts (>= 0).
    """
    if isinstance(result, ErrorResult):
        return GradedFile(dataset, question, setup, Outcome.ERR, None)
    pattern = abstention if abstention is not None else compile_abstention(DEFAULT_ABSTENTION)
    outcome, abstained, non_option = _grade_response(
        result.result, AnswerKey(answer, tuple(options)), pattern
    )
    stats = result.stats
    sample = None
    retrieval = stats.retrieval
    if retrieval is not None and retrieval.database is not None:
        db = retrieval.database
        time_ns = timing_ns(retrieval.time)
        counts = (db.vertices, db.relationships, db.properties)
        if time_ns is not None and all(c is not None and c >= 0 for c in counts):
            sample = RetrievalSample(time_ns, db.vertices, db.relationships, db.properties)  # type: ignore[arg-type]
    return GradedFile(
        dataset,
        question,
        setup,
        outcome,
        result.result,
        abstained,
        non_option,
        timing_ns(stats.time),
        _utf8_length(stats.prompt) if stats.prompt is not None else None,
        sample,
    )


# The tree walker grades the parsed JSON directly instead of building the full result model
# first (the model costs as much CPU as the JSON parse itself). `grade_raw` reads exactly
# the fields `kag.results.result_from_json` reads, with its validity rules and messages;
# tests/test_stats_grading.py checks with hypothesis that
# grade_raw(raw) == grade_result(result_from_json(raw)) for any JSON value.

_SHAPE = "expected an object with exactly one key, 'ok' or 'error'"


def _raw_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _raw_timing_ns(value: Any) -> int | None:
    if not isinstance(value, dict):
        return None
    secs, nanos = _raw_int(value.get("secs")), _raw_int(value.get("nanos"))
    if secs is None or nanos is None or secs < 0 or nanos < 0:
        return None
    return secs * NANOS_PER_SEC + nanos


def _raw_retrieval(value: Any) -> RetrievalSample | None:
    if not isinstance(value, dict):
        return None
    stats = value.get("stats")
    if not isinstance(stats, dict) or not stats:
        return None
    inner = next(iter(stats.values()))
    if not isinstance(inner, dict):
        return None
    db = inner.get("database")
    if not isinstance(db, dict) or not db:
        return None
    counts = next(iter(db.values()))
    if not isinstance(counts, dict):
        return None
    time_ns = _raw_timing_ns(inner.get("time"))
    v, r, p = (
        _raw_int(counts.get("vertices")),
        _raw_int(counts.get("relationships")),
        _raw_int(counts.get("properties")),
    )
    if time_ns is None or v is None or r is None or p is None or v < 0 or r < 0 or p < 0:
        return None
    return RetrievalSample(time_ns, v, r, p)


def grade_raw(
    raw: Any,
    key: AnswerKey,
    *,
    dataset: str,
    question: str,
    setup: str,
    abstention: re.Pattern[str],
) -> GradedFile:
    """:func:`grade_result` of ``result_from_json(raw)``, without building the model.

    Raises UnreadableResult (same messages as :func:`kag.results.result_from_json`).
    """
    if not isinstance(raw, dict) or len(raw) != 1:
        raise UnreadableResult(_SHAPE)
    if "error" in raw:
        if not isinstance(raw["error"], str):
            raise UnreadableResult("'error' must be a string")
        return GradedFile(dataset, question, setup, Outcome.ERR, None)
    ok = raw.get("ok")
    if not isinstance(ok, dict):
        raise UnreadableResult(_SHAPE)
    response = ok.get("result")
    if not isinstance(response, str):
        raise UnreadableResult("'ok.result' must be a string")
    outcome, abstained, non_option = _grade_response(response, key, abstention)
    stats = ok.get("stats")
    generation = context = sample = None
    if isinstance(stats, dict):
        generation = _raw_timing_ns(stats.get("time"))
        prompt = stats.get("prompt")
        if isinstance(prompt, str):
            context = _utf8_length(prompt)
        sample = _raw_retrieval(stats.get("retrieval"))
    return GradedFile(
        dataset, question, setup, outcome, response, abstained, non_option, generation, context, sample
    )


def grade_bytes(
    data: bytes,
    key: AnswerKey,
    *,
    dataset: str,
    question: str,
    setup: str,
    abstention: re.Pattern[str],
) -> GradedFile:
    """Grade the bytes of a result file; raises UnreadableResult like :func:`kag.results.parse_result`.

    Every byte is parsed (orjson): a file that is not valid JSON is unreadable, wherever
    the defect is.
    """
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UnreadableResult(f"not valid JSON ({exc})") from None
    return grade_raw(raw, key, dataset=dataset, question=question, setup=setup, abstention=abstention)


# ---------------------------------------------------------------- metrics (one per function)


def accuracy(correct: int, total: int) -> float | None:
    """ACC = OK / TOT, the share of scored files answered correctly; None when TOT = 0."""
    return correct / total if total > 0 else None


def precision(correct: int, parsed: int) -> float | None:
    """PREC = OK / (OK + WRONG), correctness of committed answers; None when nothing committed."""
    return correct / parsed if parsed > 0 else None


def coverage(parsed: int, total: int) -> float | None:
    """COVER = (OK + WRONG) / TOT, the share of scored files that are not errors; None when TOT = 0."""
    return parsed / total if total > 0 else None


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion ``successes / n``.

    With p = k/n: centre = (p + z²/2n) / (1 + z²/n), half = z/(1 + z²/n) · √(p(1-p)/n + z²/4n²);
    the interval is [centre - half, centre + half], clamped to [0, 1] (exactly 0 when k = 0
    and exactly 1 when k = n). None when n = 0.
    """
    if n <= 0:
        return None
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def duration_secs(total_ns: int) -> float:
    """Rust's ``Duration::as_secs_f64``: ``secs as f64 + nanos as f64 / 1e9``."""
    secs, nanos = divmod(total_ns, NANOS_PER_SEC)
    return float(secs) + float(nanos) / 1e9


def mean_duration_secs(total_ns: int, samples: int) -> float | None:
    """Mean of durations, in seconds, exactly as the Rust tool computes it.

    Rust: ``total.div_f64(n as f64).as_secs_f64()``; ``div_f64`` divides the f64 seconds
    and rounds the quotient to the nearest nanosecond (ties to even, Rust >= 1.63).
    None when there are no samples.
    """
    if samples <= 0:
        return None
    quotient = duration_secs(total_ns) / float(samples)
    return duration_secs(round(Fraction(quotient) * NANOS_PER_SEC))


def mean(total: int, samples: int) -> float | None:
    """total / samples as a float; None when there are no samples."""
    return total / samples if samples > 0 else None


# ---------------------------------------------------------------- aggregation


@dataclass(slots=True)
class Tally:
    """Accumulator of per-file records for one group (setup, or setup × dataset).

    Times are integer nanoseconds so that merging is exact and order-independent.
    """

    correct: int = 0
    incorrect: int = 0
    errors: int = 0
    abstentions: int = 0
    non_option_answers: int = 0
    generation_ns: int = 0
    generation_samples: int = 0
    context_bytes: int = 0
    context_samples: int = 0
    retrieval_ns: int = 0
    vertices: int = 0
    relationships: int = 0
    properties: int = 0
    retrieval_samples: int = 0

    def add(self, graded: GradedFile) -> None:
        outcome = graded.outcome
        if outcome is Outcome.OK:
            self.correct += 1
        elif outcome is Outcome.WRONG:
            self.incorrect += 1
            self.abstentions += graded.abstained
            self.non_option_answers += graded.non_option
        else:
            self.errors += 1
        if graded.generation_ns is not None:
            self.generation_ns += graded.generation_ns
            self.generation_samples += 1
        if graded.context_length is not None:
            self.context_bytes += graded.context_length
            self.context_samples += 1
        r = graded.retrieval
        if r is not None:
            self.retrieval_ns += r.time_ns
            self.vertices += r.vertices
            self.relationships += r.relationships
            self.properties += r.properties
            self.retrieval_samples += 1

    def merge(self, other: Tally | Metrics) -> None:
        """Add another group's sums (a Tally or frozen Metrics: same fields)."""
        for f in _TALLY_FIELDS:
            setattr(self, f, getattr(self, f) + getattr(other, f))

    def freeze(self) -> Metrics:
        return Metrics(*(getattr(self, f) for f in _TALLY_FIELDS))


@dataclass(frozen=True, slots=True)
class RetrievalMetrics:
    """Retrieval sums over the files that have retrieval stats (``samples`` >= 1)."""

    time_ns: int
    vertices: int
    relationships: int
    properties: int
    samples: int

    @property
    def time_secs(self) -> float:
        return duration_secs(self.time_ns)

    @property
    def avg_time_secs(self) -> float:
        return mean_duration_secs(self.time_ns, self.samples)  # type: ignore[return-value]

    @property
    def avg_vertices(self) -> float:
        return self.vertices / self.samples

    @property
    def avg_relationships(self) -> float:
        return self.relationships / self.samples

    @property
    def avg_properties(self) -> float:
        return self.properties / self.samples


@dataclass(frozen=True, slots=True)
class Metrics:
    """The numbers of one report block (a setup overall, or one dataset of a setup)."""

    correct: int = 0
    incorrect: int = 0
    errors: int = 0
    abstentions: int = 0
    non_option_answers: int = 0
    generation_ns: int = 0
    generation_samples: int = 0
    context_bytes: int = 0
    context_samples: int = 0
    retrieval_ns: int = 0
    vertices: int = 0
    relationships: int = 0
    properties: int = 0
    retrieval_samples: int = 0

    @property
    def total(self) -> int:
        """TOT = OK + WRONG + ERR."""
        return self.correct + self.incorrect + self.errors

    @property
    def parsed(self) -> int:
        """OK + WRONG: files whose model committed to an answer."""
        return self.correct + self.incorrect

    @property
    def accuracy(self) -> float | None:
        return accuracy(self.correct, self.total)

    @property
    def precision(self) -> float | None:
        return precision(self.correct, self.parsed)

    @property
    def coverage(self) -> float | None:
        return coverage(self.parsed, self.total)

    @property
    def accuracy_ci95(self) -> tuple[float, float] | None:
        return wilson_interval(self.correct, self.total)

    @property
    def avg_generation_secs(self) -> float | None:
        """GEN(s): mean ``ok.stats.time`` over the ok files that have one."""
        return mean_duration_secs(self.generation_ns, self.generation_samples)

    @property
    def total_generation_secs(self) -> float:
        return duration_secs(self.generation_ns)

    @property
    def avg_context_length(self) -> float | None:
        """CTX_LEN: mean UTF-8 byte length of ``ok.stats.prompt`` over the ok files that have one."""
        return mean(self.context_bytes, self.context_samples)

    @property
    def retrieval(self) -> RetrievalMetrics | None:
        """RET(s)/VERTICE/RELATION/PROPERTY sums; None when no file had retrieval stats."""
        if self.retrieval_samples == 0:
            return None
        return RetrievalMetrics(
            self.retrieval_ns, self.vertices, self.relationships, self.properties, self.retrieval_samples
        )


_TALLY_FIELDS = tuple(f.name for f in fields(Tally))
assert _TALLY_FIELDS == tuple(f.name for f in fields(Metrics))


@dataclass(frozen=True)
class Unreadable:
    """A result file that could not be graded, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class GradeRun:
    """Everything a walk of a result tree produced.

    ``tallies`` maps (setup, dataset) to the metrics of that group. ``datasets`` and
    ``scorable_questions`` count the (filtered) datasets file. ``records`` holds one
    :class:`GradedFile` per graded file, sorted by (dataset, question, setup), only when
    ``grade_tree(..., keep_records=True)``.
    """

    tallies: Mapping[tuple[str, str], Metrics]
    datasets: int
    scorable_questions: int
    skipped_files: int
    ignored_files: int
    unreadable: tuple[Unreadable, ...]
    records: tuple[GradedFile, ...] | None = None

    @property
    def unreadable_files(self) -> int:
        return len(self.unreadable)


# ---------------------------------------------------------------- walking the tree


class _Kind(IntEnum):
    SCORABLE = 0  # MCQ with an answer
    NO_ANSWER = 1  # MCQ without an answer: files count as skipped
    NOT_GRADED = 2  # free-form, or not in the datasets file: files are ignored


@dataclass(frozen=True, slots=True)
class _QuestionTask:
    path: str
    dataset: str
    question: str
    kind: _Kind
    key: AnswerKey | None


@dataclass(frozen=True)
class _Config:
    prefix: str
    setup_globs: tuple[str, ...]
    abstention: str
    keep_records: bool
    log_level: int


@dataclass
class _ChunkResult:
    tallies: dict[tuple[str, str], Tally] = field(default_factory=dict)
    skipped: int = 0
    ignored: int = 0
    unreadable: list[Unreadable] = field(default_factory=list)
    records: list[GradedFile] = field(default_factory=list)
    logs: list[tuple[int, str]] = field(default_factory=list)


# O_NONBLOCK: a FIFO swapped in under a result name must not block open(); no effect on files.
_OPEN_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
)


def read_result_bytes(path: str) -> bytes:
    """The bytes of a regular file, without following a symbolic link.

    Raises OSError (ELOOP for a symlink) or InputError when the entry is not a regular file
    or is larger than ``MAX_RESULT_BYTES`` (told by ``fstat``, before anything is read; a
    file growing past it while it is read is cut off there and refused the same way).
    """
    fd = os.open(path, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError("not a regular file")
        if st.st_size > MAX_RESULT_BYTES:
            raise InputError(too_large_message(st.st_size))
        data = os.read(fd, st.st_size + 1)
        if len(data) > st.st_size:  # grew since fstat (a non-atomic writer): read to the end
            parts = [data]
            size = len(data)
            while chunk := os.read(fd, 1 << 16):
                parts.append(chunk)
                size += len(chunk)
                if size > MAX_RESULT_BYTES:
                    raise InputError(too_large_message(os.fstat(fd).st_size))
            data = b"".join(parts)
        return data
    finally:
        os.close(fd)


def _sorted_entries(path: str) -> list[os.DirEntry[str]]:
    with os.scandir(path) as it:
        return sorted(it, key=lambda e: e.name)


def _grade_chunk(tasks: Sequence[_QuestionTask], config: _Config) -> _ChunkResult:
    """Grade the result files of a chunk of question folders (runs in a worker process)."""
    out = _ChunkResult()
    info = config.log_level <= logging.INFO
    debug = config.log_level <= logging.DEBUG
    prefix, globs = config.prefix, config.setup_globs
    abstention = compile_abstention(config.abstention)
    tallies = out.tallies
    for task in tasks:
        try:
            entries = _sorted_entries(task.path)
        except OSError as exc:
            out.logs.append(
                (logging.WARNING, f"{task.path}: cannot list the question folder: {exc.strerror}")
            )
            continue
        for entry in entries:
            name = entry.name
            if name.endswith(TMP_SUFFIX):
                if debug:
                    out.logs.append((logging.DEBUG, f"{entry.path}: in-progress write (.tmp), not graded"))
                continue
            setup = setup_from_name(name, prefix)
            if setup is None or not entry.is_file(follow_symlinks=False) or not is_utf8(name):
                out.ignored += 1
                if info:
                    out.logs.append(
                        (logging.INFO, f"{entry.path}: ignored (not a '{prefix}…json' result file)")
                    )
                continue
            if not matches_any(setup, globs):
                continue
            if task.kind is _Kind.NOT_GRADED:
                out.ignored += 1
                if info:
                    out.logs.append(
                        (
                            logging.INFO,
                            f"{entry.path}: ignored (question is free-form or not in the datasets file)",
                        )
                    )
                continue
            if task.kind is _Kind.NO_ANSWER:
                out.skipped += 1
                if debug:
                    out.logs.append((logging.DEBUG, f"{entry.path}: skipped (MCQ without an answer)"))
                continue
            path = entry.path
            try:
                graded = grade_bytes(
                    read_result_bytes(path),
                    task.key,  # type: ignore[arg-type]
                    dataset=task.dataset,
                    question=task.question,
                    setup=setup,
                    abstention=abstention,
                )
            except OSError as exc:
                out.unreadable.append(Unreadable(path, exc.strerror or str(exc)))
                continue
            except Exception as exc:  # noqa: BLE001 - one bad file must never stop the walk
                out.unreadable.append(Unreadable(path, str(exc)))
                continue
            key = (setup, task.dataset)
            tally = tallies.get(key)
            if tally is None:
                tally = tallies[key] = Tally()
            tally.add(graded)
            if config.keep_records:
                out.records.append(graded)
            if debug:
                out.logs.append(
                    (
                        logging.DEBUG,
                        f"[{task.dataset}/{task.question}] setup '{setup}' graded as {graded.outcome.name}",
                    )
                )
    return out


def _ignore_sigint() -> None:
    import signal

    # The parent handles Ctrl-C and stops the pool; workers must not print tracebacks.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _mp_context():  # -> multiprocessing.context.BaseContext
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    # fork is the cheapest start and is safe while this process has a single thread;
    # with other threads alive (a writer, a UI) fall back to a clean forkserver.
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("spawn")


def default_workers() -> int:
    """Worker processes for large trees: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _chunked(tasks: Iterable[_QuestionTask], size: int) -> Iterator[list[_QuestionTask]]:
    chunk: list[_QuestionTask] = []
    for task in tasks:
        chunk.append(task)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _run_chunks(
    chunks: Iterator[list[_QuestionTask]], config: _Config, workers: int | None
) -> Iterator[_ChunkResult]:
    if workers is None:
        head: list[list[_QuestionTask]] = []
        for chunk in chunks:
            head.append(chunk)
            if len(head) * CHUNK_QUESTIONS >= AUTO_PARALLEL_MIN_QUESTIONS:
                break
        big = len(head) * CHUNK_QUESTIONS >= AUTO_PARALLEL_MIN_QUESTIONS
        workers = default_workers() if big else 1
        chunks = _chain(head, chunks)
    if workers <= 1:
        for chunk in chunks:
            yield _grade_chunk(chunk, config)
        return
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    pool = ProcessPoolExecutor(workers, mp_context=_mp_context(), initializer=_ignore_sigint)
    try:
        pending: set = set()
        for chunk in chunks:
            pending.add(pool.submit(_grade_chunk, chunk, config))
            # A bounded window keeps memory flat however large the tree is.
            if len(pending) >= 2 * workers:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield future.result()
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _graded_chunks(
    chunks: Iterator[list[_QuestionTask]], config: _Config, workers: int | None
) -> Iterator[_ChunkResult]:
    from concurrent.futures.process import BrokenProcessPool

    try:
        yield from _run_chunks(chunks, config, workers)
    except BrokenProcessPool:
        raise KagError(
            "a grading worker process died unexpectedly (out of memory?); nothing was reported"
        ) from None


def _chain(
    head: list[list[_QuestionTask]], rest: Iterator[list[_QuestionTask]]
) -> Iterator[list[_QuestionTask]]:
    yield from head
    yield from rest


def matches_any(name: str, globs: Sequence[str]) -> bool:
    """The filters' rule (``--setup``, ``--dataset``): ``name`` matches one of the shell
    globs (``fnmatchcase``, case-sensitive), or there are none."""
    return not globs or any(fnmatchcase(name, g) for g in globs)


def grade_tree(
    datasets: Datasets,
    root: str | Path,
    prefix: str = "",
    *,
    setups: Sequence[str] = (),
    dataset_globs: Sequence[str] = (),
    abstention: str = DEFAULT_ABSTENTION,
    keep_records: bool = False,
    workers: int | None = None,
) -> GradeRun:
    """Grade every ``<root>/<dataset>/<question>/<prefix><setup>.json`` file.

    Per file (the spec's rules, in order):

    1. A name that is not ``<prefix>…json`` with a non-empty setup, a non-regular file
       (symbolic links are never followed), a folder at the file level, or a file at the
       dataset/question level is ignored (``ignored_files``, logged at -v). ``*.tmp``
       files are writes in progress: neither graded nor counted (logged at -vv).
    2. Files of a free-form question or of a question not in the datasets file are
       ignored the same way.
    3. Files of an MCQ without an answer count in ``skipped_files``.
    4. A file that is not exactly ``{"error": str}`` or ``{"ok": {"result": str, ...}}``
       is unreadable: a warning names it and it counts in ``unreadable_files``.
    5. Otherwise :func:`grade_raw` grades it (what :func:`grade_result` gives for the
       result model of the file, without building the model).

    ``setups`` / ``dataset_globs`` are shell globs (case-sensitive); a file must match one
    of each given list, files filtered out are not counted anywhere. ``datasets`` and
    ``scorable_questions`` of the run count the datasets file restricted to
    ``dataset_globs``.

    ``workers``: None chooses (a process pool for trees of 500 questions or more, else
    in-process), 1 grades in-process, n > 1 uses n worker processes. The result never
    depends on it. Raises InputError when ``root`` is not a directory, UsageError for an
    invalid abstention pattern.
    """
    root = str(root)
    check_results_root(root)
    compile_abstention(abstention)
    setup_globs, ds_globs = tuple(setups), tuple(dataset_globs)
    selected = [name for name in datasets.datasets if matches_any(name, ds_globs)]
    scorable = sum(1 for name in selected for q in datasets.datasets[name].values() if q.scorable)
    config = _Config(prefix, setup_globs, abstention, keep_records, log.getEffectiveLevel())
    parent = _ChunkResult()
    chunks = _chunked(_iter_questions(datasets, root, ds_globs, parent), CHUNK_QUESTIONS)

    tallies: dict[tuple[str, str], Tally] = {}
    skipped = ignored = 0
    unreadable: list[Unreadable] = []
    records: list[GradedFile] = []
    for part in _graded_chunks(chunks, config, workers):
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
        if keep_records:
            records.extend(part.records)
    for level, message in parent.logs:
        log.log(level, "%s", message)
    unreadable.sort(key=lambda u: u.path)
    for bad in unreadable:
        log.warning("%s: unreadable result file: %s", escape_controls(bad.path), bad.reason)
    if keep_records:
        records.sort(key=lambda r: (r.dataset, r.question, r.setup))
    return GradeRun(
        tallies={key: tallies[key].freeze() for key in sorted(tallies)},
        datasets=len(selected),
        scorable_questions=scorable,
        skipped_files=skipped,
        ignored_files=ignored + parent.ignored,
        unreadable=tuple(unreadable),
        records=tuple(records) if keep_records else None,
    )


def _iter_questions(
    datasets: Datasets, root: str, ds_globs: tuple[str, ...], parent: _ChunkResult
) -> Iterator[_QuestionTask]:
    """Question folders to grade, in name order; entries at wrong levels are counted in ``parent``."""
    info = log.isEnabledFor(logging.INFO)
    for d in _sorted_entries(root):
        if not d.is_dir(follow_symlinks=False):
            if not d.name.endswith(TMP_SUFFIX):
                parent.ignored += 1
                if info:
                    parent.logs.append((logging.INFO, f"{d.path}: ignored (not a dataset folder)"))
            continue
        if not matches_any(d.name, ds_globs):
            continue
        questions = datasets.datasets.get(d.name, {})
        try:
            entries = _sorted_entries(d.path)
        except OSError as exc:
            parent.logs.append((logging.WARNING, f"{d.path}: cannot list the dataset folder: {exc.strerror}"))
            continue
        for q in entries:
            if not q.is_dir(follow_symlinks=False):
                if not q.name.endswith(TMP_SUFFIX):
                    parent.ignored += 1
                    if info:
                        parent.logs.append((logging.INFO, f"{q.path}: ignored (not a question folder)"))
                continue
            question = questions.get(q.name)
            if question is None or question.mcq is None:
                yield _QuestionTask(q.path, d.name, q.name, _Kind.NOT_GRADED, None)
            elif question.mcq.answer is None:
                yield _QuestionTask(q.path, d.name, q.name, _Kind.NO_ANSWER, None)
            else:
                key = AnswerKey(question.mcq.answer, tuple(question.mcq.options))
                yield _QuestionTask(q.path, d.name, q.name, _Kind.SCORABLE, key)


# ---------------------------------------------------------------- summary and ranking


@dataclass(frozen=True)
class SetupSummary:
    """One setup: its overall metrics and one block per dataset (sorted by name)."""

    setup: str
    overall: Metrics
    per_dataset: Mapping[str, Metrics]


@dataclass(frozen=True)
class Summary:
    """The report: counters and the setups ranked by descending accuracy."""

    datasets: int
    scorable_questions: int
    skipped_files: int
    unreadable_files: int
    ignored_files: int
    setups: tuple[SetupSummary, ...]

    @property
    def any_retrieval(self) -> bool:
        return any(s.overall.retrieval is not None for s in self.setups)


def rank_key(setup: SetupSummary) -> tuple[float, str]:
    """Sort key: descending ACC, setups without an accuracy last, ties by name (code point order)."""
    acc = setup.overall.accuracy
    return (-acc if acc is not None else math.inf, setup.setup)


def summarize(run: GradeRun) -> Summary:
    """Per-setup blocks (overall = sum of the dataset blocks), ranked by :func:`rank_key`."""
    grouped: dict[str, dict[str, Metrics]] = {}
    for (setup, dataset), metrics in run.tallies.items():
        grouped.setdefault(setup, {})[dataset] = metrics
    setups = []
    for setup, per_dataset in grouped.items():
        overall = Tally()
        for metrics in per_dataset.values():
            overall.merge(metrics)
        setups.append(SetupSummary(setup, overall.freeze(), {k: per_dataset[k] for k in sorted(per_dataset)}))
    setups.sort(key=rank_key)
    return Summary(
        datasets=run.datasets,
        scorable_questions=run.scorable_questions,
        skipped_files=run.skipped_files,
        unreadable_files=run.unreadable_files,
        ignored_files=run.ignored_files,
        setups=tuple(setups),
    )


def check_threshold(threshold_pct: float) -> float:
    """``threshold_pct`` when it is a percentage in [0, 100]; raises UsageError otherwise (NaN too)."""
    if not (0.0 <= threshold_pct <= 100.0):
        raise UsageError(f"--fail-under must be a percentage between 0 and 100 (got {threshold_pct:g})")
    return threshold_pct


def failing_setups(summary: Summary, threshold_pct: float) -> tuple[SetupSummary, ...]:
    """Setups whose ACC% (unrounded, 100·OK/TOT) is below ``threshold_pct``, in rank order.

    A setup without an accuracy (TOT = 0) fails. Raises UsageError unless 0 <= threshold <= 100.
    """
    check_threshold(threshold_pct)
    failing = []
    for s in summary.setups:
        acc = s.overall.accuracy
        if acc is None or acc * 100.0 < threshold_pct:
            failing.append(s)
    return tuple(failing)
