"""The `kag stats judge` report: a text table (:mod:`kag.render.table`) or JSON bytes."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from kag.grading.judge import Judge, JudgeSummary
from kag.render.table import Table, pct, table_text

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


def render_judge_text(summaries: Sequence[JudgeSummary]) -> str:
    return table_text(judge_table(summaries)) + "\n"


def render_judge_json(judge: Judge, prompt_sha256: str, summaries: Sequence[JudgeSummary]) -> str:
    """``{"judge": {provider, model, prompt_sha256}, "setups": [...]}``, indented."""
    document = {
        "judge": {"provider": judge.provider, "model": judge.model, "prompt_sha256": prompt_sha256},
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
            for s in summaries
        ],
    }
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"
