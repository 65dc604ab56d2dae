"""Token usage and cost of a report block, as the stats reports show them.

Shared by the JSON and markdown of `kag stats` (:mod:`kag.render.stats`) and its HTML page
(:mod:`kag.render.html`). Shown only when :attr:`Summary.shows_usage
<kag.grading.mcq.summary.Summary.shows_usage>`: a run without usage and without
``--prices`` renders exactly as before.
"""

from __future__ import annotations

from typing import Any

from kag.grading.mcq.metrics import Metrics

#: Markdown/HTML column headers: mean prompt and completion tokens per question, then the cost.
TOKEN_HEADERS = ("PROMPT_TOK", "COMPL_TOK")
COST_HEADER = "COST($)"
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


def usage_headers(priced: bool) -> tuple[str, ...]:
    return (*TOKEN_HEADERS, COST_HEADER) if priced else TOKEN_HEADERS


def usage_cells(m: Metrics, cost: float | None, priced: bool) -> tuple[str, ...]:
    """Mean tokens with 1 decimal and the cost with 4 (``-`` when absent)."""
    u = m.usage
    cells: tuple[str, ...] = (
        ("-", "-") if u is None else (f"{u.avg_prompt_tokens:.1f}", f"{u.avg_completion_tokens:.1f}")
    )
    if priced:
        cells = (*cells, "-" if cost is None else f"{cost:.4f}")
    return cells
