"""`kag datasets check`: the questions of a datasets file per dataset, as text or JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import orjson

from kag.datasets_import import DatasetCounts
from kag.render.table import Table, table_text

_HEADERS = ("DATASET", "QUESTIONS", "MCQ", "WITH_ANSWER", "OPEN", "FREE_FORM", "EVIDENCE")


def render_counts(counts: Sequence[DatasetCounts], fmt: str) -> str:
    """``text``: a table with a total row (WITH_ANSWER = graded by ``kag stats``; FREE_FORM =
    never graded); ``json``: ``{"datasets": [...], "total": {...}}``."""
    fields = ("questions", "mcq", "with_answer", "open", "free_form", "evidence")
    total = {f: sum(getattr(c, f) for c in counts) for f in fields}
    if fmt == "json":
        doc = {"datasets": [asdict(c) for c in counts], "total": total}
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
    rows = [(c.dataset, *(str(getattr(c, f)) for f in fields)) for c in counts]
    rows.append(("total", *(str(total[f]) for f in fields)))
    table = Table(_HEADERS, tuple(rows), ("l", "r", "r", "r", "r", "r", "r"))
    return table_text(table) + "\n"
