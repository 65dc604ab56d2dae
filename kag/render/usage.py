"""The legend of the token and cost columns of a report (the columns and the JSON ``usage``
object are the ``usage`` measure's, :mod:`kag.grading.measures.usage`).

Shared by the markdown of `kag stats` (:mod:`kag.render.stats`) and its HTML page
(:mod:`kag.render.html`). Shown only when :attr:`Summary.shows_usage
<kag.grading.mcq.summary.Summary.shows_usage>`, so that a run without usage and without
``--prices`` keeps its shape.
"""

from __future__ import annotations

TOKENS_LEGEND = "PROMPT_TOK/COMPL_TOK = mean prompt/completion tokens per question with token usage"
COST_LEGEND = "COST($) = tokens × the prices file's USD per 1M tokens"


def usage_legend(priced: bool) -> str:
    """The legend line of the token (and cost) columns, without a final period."""
    return f"{TOKENS_LEGEND}; {COST_LEGEND}" if priced else TOKENS_LEGEND
