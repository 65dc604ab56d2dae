"""The `kag stats judge` report: a text table (:mod:`kag.render.table`) or JSON bytes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import orjson

from kag.grading.judge import Judge, JudgeSummary
from kag.grading.percent import pct
from kag.render.formats import JudgeFormat
from kag.render.table import Table, table_text
from kag.textsafe import escape_controls

HEADERS = ("SETUP", "JUDGED", "CORRECT", "INCORRECT", "UNUSABLE", "ACC%", "AGREE%")


def judge_table(summaries: Sequence[JudgeSummary]) -> Table:
    """One row per setup; ACC% and AGREE% (agreement with the exact match) in percent."""
    rows = tuple(
        (
            s.setup,
            str(s.judged),
            str(s.correct),
            str(s.incorrect),
            str(s.unusable),
            pct(s.accuracy),
            pct(s.agreement_with_exact_match),
        )
        for s in summaries
    )
    return Table(HEADERS, rows, ("l", "r", "r", "r", "r", "r", "r"))


_UNUSABLE_WHY = "a reply that names neither CORRECT nor INCORRECT, or a request that failed"


def no_verdict_note(summaries: Sequence[JudgeSummary]) -> str | None:
    """The warning for setups whose every verdict is unusable (they have no accuracy), naming
    the count; None when every setup has a usable verdict."""
    blind = [s for s in summaries if s.judged and not s.correct + s.incorrect]
    if not blind:
        return None
    count = sum(s.judged for s in blind)
    if len(blind) == len(summaries):
        return (
            f"the judge gave no usable verdict: all {count} verdict(s) are unusable ({_UNUSABLE_WHY}); "
            "so there is no ACC%: check the judge model and the prompt"
        )
    names = ", ".join(escape_controls(s.setup) for s in blind)
    return (
        f"the judge gave no usable verdict for {names}: {count} verdict(s), all unusable ({_UNUSABLE_WHY}); "
        "so they have no ACC%"
    )


@dataclass(frozen=True)
class JudgeReport:
    """What `kag stats judge` reports: who judged, with which prompt, and the verdicts per setup."""

    judge: Judge
    prompt_sha256: str
    summaries: Sequence[JudgeSummary]


def render_judge_text(report: JudgeReport) -> str:
    return table_text(judge_table(report.summaries)) + "\n"


def render_judge_json(report: JudgeReport) -> str:
    """``{"judge": {provider, model, prompt_sha256}, "setups": [...]}``, indented."""
    judge = report.judge
    document = {
        "judge": {"provider": judge.provider, "model": judge.model, "prompt_sha256": report.prompt_sha256},
        "setups": [
            {
                "setup": s.setup,
                "judged": s.judged,
                "correct": s.correct,
                "incorrect": s.incorrect,
                "unusable": s.unusable,
                "accuracy": s.accuracy,
                "agreement_with_exact_match": s.agreement_with_exact_match,
            }
            for s in report.summaries
        ],
    }
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"


RENDERERS: dict[JudgeFormat, Callable[[JudgeReport], str]] = {
    JudgeFormat.TEXT: render_judge_text,
    JudgeFormat.JSON: render_judge_json,
}
