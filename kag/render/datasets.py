"""`kag datasets check`: the questions of a datasets file per dataset, as text or JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import orjson

from kag.datasets_import import DatasetCounts
from kag.render.table import Align, Table, table_text

_RIGHT: Align = "r"
_HEADERS = ("DATASET", "QUESTIONS", "MCQ", "WITH_ANSWER", "OPEN", "FREE_FORM", "EVIDENCE")


def render_counts(counts: Sequence[DatasetCounts], fmt: str) -> str:
    """``text``: a table with a total row (WITH_ANSWER = graded by ``kag stats``; FREE_FORM =
    never graded; TRIPLES, shown when a question lists gold triples); ``json``: ``{"datasets": [...], "total": {...}}``."""
    fields: tuple[str, ...] = ("questions", "mcq", "with_answer", "open", "free_form", "evidence")
    headers: tuple[str, ...] = _HEADERS
    # The count of questions with gold triples only when some has them (older files, older output).
    triples = any(c.evidence_triples for c in counts)
    if triples:
        fields, headers = (*fields, "evidence_triples"), (*headers, "TRIPLES")
    total = {f: sum(getattr(c, f) for c in counts) for f in fields}
    if fmt == "json":
        datasets = [
            {k: v for k, v in asdict(c).items() if k != "evidence_triples" or triples} for c in counts
        ]
        doc = {"datasets": datasets, "total": total}
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
    rows = [(c.dataset, *(str(getattr(c, f)) for f in fields)) for c in counts]
    rows.append(("total", *(str(total[f]) for f in fields)))
    table = Table(headers, tuple(rows), ("l", *(_RIGHT for _ in fields)))
    return table_text(table) + "\n"
