"""Per-question export of `kag stats`: ``--format csv`` and ``--format jsonl``.

One row per graded file, from the per-file records of a ``grade_tree(..., keep_records=True)``
run, in their (dataset, question, setup) order. Both formats load as they are into pandas
(``read_csv`` / ``read_json(lines=True)``) or DuckDB (``read_csv`` / ``read_json``). Names
and responses keep their exact text: these are machine formats, nothing is escaped for a
terminal (CSV quotes what needs quoting, JSON escapes what JSON must).

``extracted_outcome``, ``exact_match`` and ``f1`` are always present and empty (CSV) or
null (JSON) until answer extraction or open-answer grading fills them.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from kag.grading.mcq.metrics import duration_secs
from kag.grading.mcq.rule import GradedFile
from kag.render.formats import ExportFormat

if TYPE_CHECKING:
    from kag.datasets import Datasets

#: The columns, in order (also the keys of every JSON Lines object).
COLUMNS = (
    "dataset",
    "question",
    "setup",
    "outcome",
    "answer",
    "response",
    "extracted_outcome",
    "exact_match",
    "f1",
    "generation_secs",
    "context_length",
    "retrieval_secs",
    "vertices",
    "relationships",
    "properties",
    "prompt_tokens",
    "completion_tokens",
)


def export_row(record: GradedFile, answer: str | None) -> dict[str, Any]:
    """One row: ``outcome`` is OK, WRONG or ERR; ``answer`` the answer key; ``response`` the
    response verbatim (None for ERR); times in seconds; ``vertices``/``relationships``/
    ``properties``/``retrieval_secs`` only for files with a complete retrieval sample;
    token counts as the result file records them. Absent values are None."""
    r = record.retrieval
    u = record.usage
    return {
        "dataset": record.dataset,
        "question": record.question,
        "setup": record.setup,
        "outcome": record.outcome.name,
        "answer": answer,
        "response": record.response,
        "extracted_outcome": None,
        "exact_match": None,
        "f1": None,
        "generation_secs": duration_secs(record.generation_ns) if record.generation_ns is not None else None,
        "context_length": record.context_length,
        "retrieval_secs": duration_secs(r.time_ns) if r is not None else None,
        "vertices": r.vertices if r is not None else None,
        "relationships": r.relationships if r is not None else None,
        "properties": r.properties if r is not None else None,
        "prompt_tokens": u.prompt_tokens if u is not None else None,
        "completion_tokens": u.completion_tokens if u is not None else None,
    }


def iter_rows(records: Iterable[GradedFile], datasets: Datasets) -> Iterator[dict[str, Any]]:
    """:func:`export_row` of each record, in the records' order, with its answer key."""
    for record in records:
        question = datasets.get(record.dataset, record.question)
        answer = question.mcq.answer if question is not None and question.mcq is not None else None
        yield export_row(record, answer)


def render_csv(records: Iterable[GradedFile], datasets: Datasets) -> str:
    """RFC 4180 CSV with a header row (fields quoted when they hold a comma, a quote or a
    line break; ``\\n`` ends a row); absent values are empty fields."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in iter_rows(records, datasets):
        writer.writerow(row.values())
    return buffer.getvalue()


def render_jsonl(records: Iterable[GradedFile], datasets: Datasets) -> str:
    """JSON Lines: one object per graded file (keys :data:`COLUMNS`), absent values null."""
    return "".join(orjson.dumps(row).decode() + "\n" for row in iter_rows(records, datasets))


RENDERERS: Mapping[ExportFormat, Callable[[Iterable[GradedFile], Datasets], str]] = {
    ExportFormat.CSV: render_csv,
    ExportFormat.JSONL: render_jsonl,
}
