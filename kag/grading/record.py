"""The record of one graded result file: what every measure, comparison and export reads.

One type for every grade (:class:`GradedFile`): an MCQ file graded by the strict rule
(:mod:`kag.grading.mcq.rule`), with its extracted grade under ``--extract``; an open
question's file graded by EM and F1 (:mod:`kag.grading.open_grading`); the same record
again in a comparison, where ``outcome`` is the grade the comparison pairs on. The fields
every grade shares come first, then the scores a grade adds (None when it was not
computed).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kag.grading.retrieval_quality import QualityRecord
from kag.grading.verdicts import Verdict
from kag.results.codec import RetrievalSample
from kag.results.model import ModelConfig, Usage


class Outcome(StrEnum):
    """The grade of one scored result file."""

    OK = "ok"  # an `ok` file whose answer matches the key
    WRONG = "wrong"  # an `ok` file whose answer does not match
    ERR = "err"  # an `error` file (or, under the extracted grade, nothing extracted)


@dataclass(frozen=True, slots=True)
class GradedFile:
    """One graded result file.

    - ``outcome``: the strict grade (for an open question OK means an exact match, EM = 1);
      in the records of a comparison paired on the extracted grade, that grade.
    - ``response`` is ``ok.result`` verbatim, None for an error file, whose text is
      ``error``. ``abstained`` and ``non_option`` are only ever set on WRONG MCQ records
      and exclude each other.
    - ``generation_ns`` is ``ok.stats.time``, ``context_length`` the UTF-8 byte length of
      ``ok.stats.prompt``, ``retrieval`` the complete retrieval sample; ``config`` and
      ``usage`` are ``ok.stats.config`` and ``ok.stats.usage``, kept so that later stages
      (comparisons, costs) never read the file again. Absent or mistyped values are None.
    - Scores: ``extracted`` the grade under ``--extract`` (ERR = not extracted) and
      ``extracted_key`` what was extracted (None when nothing was, or not asked);
      ``exact_match`` and ``f1`` an open question's (0 and 0 for an error file);
      ``evidence_hit`` whether the retrieval text holds one of the question's evidence
      names (None when the question lists none, the file has no retrieval text, or
      evidence was not measured); ``verdict`` the judge's cached verdict of the answer
      (:mod:`kag.grading.verdicts`; None when no judge was asked for or it has none);
      ``retrieval_quality`` the retrieved graph against the question's gold evidence (None
      likewise; :mod:`kag.grading.retrieval_quality`).
    - ``gold`` the answer key (an open question's accepted answers joined with `` | ``),
      ``path`` the result file (None for a record not read from a tree walk).
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
    error: str | None = None
    config: ModelConfig | None = None
    usage: Usage | None = None
    extracted: Outcome | None = None
    exact_match: float | None = None
    f1: float | None = None
    evidence_hit: bool | None = None
    gold: str | None = None
    retrieval_quality: QualityRecord | None = None
    path: str | None = None
    extracted_key: str | None = None
    verdict: Verdict | None = None

    @property
    def is_open(self) -> bool:
        """Whether the file answers an open question (graded by EM and F1)."""
        return self.exact_match is not None

    @property
    def correct(self) -> bool:
        return self.outcome is Outcome.OK

    @property
    def key(self) -> tuple[str, str]:
        """(dataset, question): what pairs the records of two setups."""
        return (self.dataset, self.question)

    @property
    def vertices(self) -> int | None:
        """The retrieved vertex count of a file with a retrieval sample, else None."""
        return self.retrieval.vertices if self.retrieval is not None else None

    @property
    def response_or_error(self) -> str:
        """The response, or for an error file its error text (``"(error)"`` when it has none)."""
        if self.response is not None:
            return self.response
        return self.error if self.error is not None else "(error)"


def open_outcome(response: str | None, exact_match: float) -> Outcome:
    """The strict grade of an open question's file: ERR for an error file, OK for an exact
    match of an accepted answer (EM = 1), WRONG otherwise."""
    if response is None:
        return Outcome.ERR
    return Outcome.OK if exact_match == 1 else Outcome.WRONG


def question_sort_key(key: tuple[str, str]) -> tuple[str, int, int, str]:
    """Datasets by name, then numeric question ids by value (2 before 10), then the others
    by name; the id itself breaks ties ("012" vs "12")."""
    dataset, question = key
    if question.isascii() and question.isdigit():
        return (dataset, 0, int(question), question)
    return (dataset, 1, 0, question)
