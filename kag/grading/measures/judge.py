"""The judge's verdicts (``judge``, when a judge is named): of the answers a model as judge
has a cached verdict for (``kag stats judge``), how many it judged correct, incorrect or
unusable, its accuracy and its agreement with the strict grade.

- judge accuracy = CORRECT / judged (an unusable verdict counts against; None when nothing
  was judged);
- agreement = the share of usable verdicts (CORRECT + INCORRECT) that equal the strict
  grade (CORRECT where the answer is right by the strict rule, an exact match for an open
  question; INCORRECT where it is not); None when no verdict is usable.

Error files are not answers and have no verdict. The verdicts are an input of the record
(``GradedFile.verdict``), read from the judge's cache under the judge's own key, so a block
counts the verdicts of its own files, MCQ and open alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kag.grading.measures.declarations import MD_HTML, Block, Column, JsonKey, Shown
from kag.grading.measures.registry import Counters, Measure, merge_first, register
from kag.grading.percent import pct
from kag.grading.record import GradedFile, Outcome
from kag.grading.verdicts import Verdict


@dataclass(slots=True)
class JudgeCounts(Counters):
    """The verdicts of a block: judged, by verdict, and those that agree with the strict grade."""

    judged: int = 0
    judged_correct: int = 0
    judged_incorrect: int = 0
    judged_unusable: int = 0
    judge_agreements: int = 0


def add_verdict(counts: JudgeCounts, verdict: Verdict, strict: bool) -> None:
    """Count one verdict of an answer whose strict grade is ``strict`` (right or not)."""
    counts.judged += 1
    if verdict is Verdict.CORRECT:
        counts.judged_correct += 1
    elif verdict is Verdict.INCORRECT:
        counts.judged_incorrect += 1
    else:
        counts.judged_unusable += 1
        return
    counts.judge_agreements += (verdict is Verdict.CORRECT) == strict


def add(counts: JudgeCounts, graded: GradedFile) -> None:
    """Count the file's verdict, when the judge has one."""
    if graded.verdict is not None:
        add_verdict(counts, graded.verdict, graded.outcome is Outcome.OK)


def judge_accuracy(c: JudgeCounts) -> float | None:
    """CORRECT / (CORRECT + INCORRECT): an unusable verdict is no verdict, left out; None
    when no verdict is usable."""
    usable = c.judged_correct + c.judged_incorrect
    return c.judged_correct / usable if usable else None


def judge_agreement(c: JudgeCounts) -> float | None:
    """Usable verdicts equal to the strict grade / usable verdicts; None when none is usable."""
    usable = c.judged_correct + c.judged_incorrect
    return c.judge_agreements / usable if usable else None


def judge_to_json(b: Block) -> dict[str, Any]:
    """The ``judge`` block: the counts, the accuracy and the agreement with the strict grade."""
    m = b.metrics
    return {
        "judged": m.judged,
        "correct": m.judged_correct,
        "incorrect": m.judged_incorrect,
        "unusable": m.judged_unusable,
        "accuracy": m.judge_accuracy,
        "agreement_with_exact_match": m.judge_agreement,
    }


def _judged(b: Block) -> bool:
    return getattr(b.report, "judge", None) is not None


def _shown(s: Shown) -> bool:
    return s.judge is not None


# The run keeps which judge's verdicts were read (``GradeRun.judge``), every tree's the same.
MEASURE = register(
    Measure(
        "judge",
        JudgeCounts,
        add,
        add_open=add,
        needs=frozenset({"verdict"}),
        values={"judge_accuracy": judge_accuracy, "judge_agreement": judge_agreement},
        json=(JsonKey("judge", judge_to_json, when=_judged),),
        columns=(
            Column("JUDGE%", lambda b: pct(b.metrics.judge_accuracy), MD_HTML, when=_shown),
            Column("AGREE%", lambda b: pct(b.metrics.judge_agreement), MD_HTML, when=_shown),
        ),
        run_field="judge",
        merge_trees=merge_first,
        optional=True,
    )
)
