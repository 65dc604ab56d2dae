"""Token usage and cost of a report block: the JSON ``usage`` object and the legend of the
token and cost columns (the columns themselves are in :mod:`kag.render.columns`).

Shared by the JSON and markdown of `kag stats` (:mod:`kag.render.stats`) and its HTML page
(:mod:`kag.render.html`). Shown only when :attr:`Summary.shows_usage
<kag.grading.mcq.summary.Summary.shows_usage>`, so that a run without usage and without
``--prices`` keeps its shape.
"""

from __future__ import annotations

from typing import Any

from kag.grading.mcq.metrics import Metrics

TOKENS_LEGEND = "PROMPT_TOK/COMPL_TOK = mean prompt/completion tokens per question with token usage"
COST_LEGEND = "COST($) = tokens × the prices file's USD per 1M tokens"


def usage_legend(priced: bool) -> str:
    """The legend line of the token (and cost) columns, without a final period."""
    return f"{TOKENS_LEGEND}; {COST_LEGEND}" if priced else TOKENS_LEGEND


def usage_to_json(m: Metrics, cost: float | None, priced: bool) -> dict[str, Any] | None:
    """The ``usage`` object of a block, with ``cost_usd`` when ``priced``; None without samples."""
    u = m.usage
    if u is None:
        return None
    out: dict[str, Any] = {
        "samples": u.samples,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "avg_prompt_tokens": u.avg_prompt_tokens,
        "avg_completion_tokens": u.avg_completion_tokens,
    }
    if priced:
        out["cost_usd"] = cost
    return out
