"""The grade of one MCQ result file, and the per-file record it gives.

The answer rule is :mod:`kag.grading.rule`'s (trim, then compare ignoring ASCII case);
here it is applied to a file against its answer key, with the abstentions and the answers
that are no option key told apart among the WRONG ones. An ``error`` file is ERR.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from kag.errors import UsageError
from kag.grading.record import GradedFile, Outcome
from kag.grading.retrieval_quality import QualityRecord
from kag.grading.rule import rust_trim
from kag.results.codec import (
    NANOS_PER_SEC,
    GradingFields,
    RetrievalSample,
    utf8_length,
)
from kag.results.model import ErrorResult, Result, Timing
from kag.textsafe import ascii_fold

#: Default pattern for abstentions (a WRONG answer that declines to answer).
DEFAULT_ABSTENTION = r"(?i)^\s*i\s+don'?t\s+know\.?\s*$"


@dataclass(frozen=True, slots=True)
class AnswerKey:
    """The answer key of one MCQ and its option keys, folded once for the comparisons;
    ``texts`` the options' texts in the same order (empty when not known), which
    ``--extract letter`` reads a reply for when it names no key."""

    answer: str
    options: tuple[str, ...]
    texts: tuple[str, ...] = ()
    folded_answer: str = field(init=False)
    folded_options: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded_answer", ascii_fold(self.answer))
        object.__setattr__(self, "folded_options", frozenset(ascii_fold(k) for k in self.options))

    @classmethod
    def of(cls, answer: str, options: Mapping[str, str]) -> AnswerKey:
        """The key of an MCQ whose ``options`` map each key to its text."""
        return cls(answer, tuple(options), tuple(options.values()))

    @property
    def choices(self) -> Mapping[str, str] | tuple[str, ...]:
        """What extraction reads: key -> text when the texts are known, else the keys."""
        return dict(zip(self.options, self.texts, strict=True)) if self.texts else self.options


def timing_ns(timing: Timing | None) -> int | None:
    """A ``{secs, nanos}`` duration in nanoseconds; None when absent or negative."""
    if timing is None or timing.secs < 0 or timing.nanos < 0:
        return None
    return timing.secs * NANOS_PER_SEC + timing.nanos


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
    key = AnswerKey(answer, tuple(options))
    if isinstance(result, ErrorResult):
        return grade_fields(GradingFields(result.error, None), key, dataset, question, setup, _NEVER)
    stats = result.stats
    sample = None
    retrieval = stats.retrieval
    if retrieval is not None and retrieval.database is not None:
        db = retrieval.database
        time_ns = timing_ns(retrieval.time)
        counts = (db.vertices, db.relationships, db.properties)
        if time_ns is not None and all(c is not None and c >= 0 for c in counts):
            sample = RetrievalSample(time_ns, db.vertices, db.relationships, db.properties)  # type: ignore[arg-type]
    fields = GradingFields(
        None,
        result.result,
        timing_ns(stats.time),
        utf8_length(stats.prompt) if stats.prompt is not None else None,
        sample,
        stats.config,
        stats.usage,
    )
    pattern = abstention if abstention is not None else compile_abstention(DEFAULT_ABSTENTION)
    return grade_fields(fields, key, dataset, question, setup, pattern)


# An error file is graded without the abstention pattern.
_NEVER = re.compile(r"(?!)")


# The grade of an error file.
_ERRED = (Outcome.ERR, False, False)


def fields_outcome(
    fields: GradingFields, key: AnswerKey, abstention: re.Pattern[str]
) -> tuple[Outcome, bool, bool]:
    """(outcome, abstained, non_option) of the fields a codec reader took from a result
    file: ERR for an error file, else its response against ``key`` (the grade
    :func:`grade_fields` records)."""
    response = fields.response
    if response is None:
        return _ERRED
    return _grade_response(response, key, abstention)


def grade_fields(
    fields: GradingFields,
    key: AnswerKey,
    dataset: str,
    question: str,
    setup: str,
    abstention: re.Pattern[str],
    path: str | None = None,
    record: Callable[..., GradedFile] = GradedFile,
    *,
    outcome: tuple[Outcome, bool, bool] | None = None,
    retrieval_quality: QualityRecord | None = None,
    evidence_hit: bool | None = None,
) -> GradedFile:
    """Grade the fields a codec reader took from a result file, without building the model:
    :func:`kag.results.codec.grading_fields` (parsed JSON) or
    :func:`~kag.results.codec.parse_grading_fields` (the file's bytes; they raise
    UnreadableResult with the canonical reader's messages). ERR for an error file, else the
    response against ``key``: what :func:`grade_result` gives for the file's result model.
    ``path`` is the file's, kept in the record. ``record``: the type made (one with the
    fields of :class:`GradedFile`, taking the same arguments).

    ``outcome``: the grade :func:`fields_outcome` gave for these fields, when the caller
    needed it first (the evidence measures cross it with the retrieval); the record is then
    made once, with ``retrieval_quality`` and ``evidence_hit``, rather than copied to add them."""
    if outcome is None:
        outcome = fields_outcome(fields, key, abstention)
    response = fields.response
    if response is None:
        return record(
            dataset,
            question,
            setup,
            Outcome.ERR,
            None,
            error=fields.error,
            evidence_hit=evidence_hit,
            gold=key.answer,
            retrieval_quality=retrieval_quality,
            path=path,
        )
    grade, abstained, non_option = outcome
    return record(
        dataset,
        question,
        setup,
        grade,
        response,
        abstained,
        non_option,
        fields.generation_ns,
        fields.context_length,
        fields.retrieval,
        config=fields.config,
        usage=fields.usage,
        evidence_hit=evidence_hit,
        gold=key.answer,
        retrieval_quality=retrieval_quality,
        path=path,
    )
