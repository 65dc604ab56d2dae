"""The extracted grade of MCQ result files (``kag stats --extract``), beside the strict one.

The strict grade (:mod:`kag.grading.rule`) compares the whole trimmed response with the key.
The extracted grade first takes the answer a reader would take from the response
(:mod:`kag.grading.extract`: ``letter`` or ``regex:PATTERN``), then applies the same rule
to it:

- OK (``correct``): an answer was extracted and equals the key (trim, ASCII case);
- WRONG (``incorrect``): an answer was extracted and it is not the key;
- ERR (``not_extracted``): nothing was extracted (no key, two different keys, no match),
  and every ``error`` file, which has no response to read.

So ``correct + incorrect + not_extracted`` = TOT of the strict grade, and
XACC = correct / TOT, with TOT the same denominator as ACC, so the two compare directly.

The spec travels to the grading worker processes as its text (``letter`` or
``regex:PATTERN``) and is compiled there (:func:`compile_spec`, cached per process).
"""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache

from kag.errors import UsageError
from kag.grading.extract import ExtractSpec, parse_extract_spec
from kag.grading.mcq.rule import AnswerKey
from kag.grading.record import Outcome
from kag.grading.rule import is_correct


class Grade(StrEnum):
    """Which grade the comparisons and gates read (``--grade``)."""

    STRICT = "strict"
    EXTRACTED = "extracted"


@lru_cache(maxsize=16)
def compile_spec(text: str) -> ExtractSpec:
    """:func:`parse_extract_spec` of ``text``, once per process (the spec crosses to workers as text)."""
    return parse_extract_spec(text)


def check_grade(grade: Grade, extract: str | None) -> None:
    """Raise UsageError (exit 2) when ``--grade extracted`` is given without ``--extract``."""
    if grade is Grade.EXTRACTED and extract is None:
        raise UsageError("--grade extracted needs --extract letter or --extract regex:PATTERN")


def extracted_grade(spec: ExtractSpec, response: str | None, key: AnswerKey) -> tuple[Outcome, str | None]:
    """The extracted grade of one file (see the module docstring) and the answer extracted
    (None: nothing was); ``response`` None = an error file."""
    if response is None:
        return Outcome.ERR, None
    answer = spec.extract(response, key.choices)
    if answer is None:
        return Outcome.ERR, None
    return (Outcome.OK if is_correct(answer, key.answer) else Outcome.WRONG), answer


def extracted_outcome(spec: ExtractSpec, response: str | None, key: AnswerKey) -> Outcome:
    """The extracted grade of one file (see the module docstring); ``response`` None = an error file."""
    return extracted_grade(spec, response, key)[0]
