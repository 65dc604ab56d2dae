"""Per-question export of `kag stats`: ``--format csv`` and ``--format jsonl``.

One row per graded file, from the per-file records of a grading run that kept them
(``records`` asked for): the MCQ records and the open-question records merged in (dataset, question, setup)
order. Both formats load as they are into pandas (``read_csv`` /
``read_json(lines=True)``) or DuckDB (``read_csv`` / ``read_json``). Names
and responses keep their exact text: these are machine formats, nothing is escaped for a
terminal (CSV quotes what needs quoting, JSON escapes what JSON must). One exception, in CSV
only: a text cell that a spreadsheet would read as a formula (it starts with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return) gets a ``'`` in front, as OWASP advises against CSV
injection; JSON Lines keeps every text exact.

Every row has every column; a value that does not apply is empty (CSV) or null (JSON).
The words are those of every kag surface: ``gold`` the answer key, ``response`` the model's
reply, ``extracted`` the key read from the reply under ``--extract`` (empty when nothing
was, or without ``--extract``), ``outcome`` and ``extracted_outcome`` their grades (OK,
WRONG or ERR; ERR = not extracted). An open-question row (``"type": "Open"``) has
``exact_match`` and ``f1`` (0 and 0 for an error file), ``outcome`` OK when the exact match
is 1, WRONG otherwise, ERR for an error file, and ``gold`` the accepted answers joined
with `` | ``; its ``extracted`` and ``extracted_outcome`` are empty, as ``exact_match`` and
``f1`` are for an MCQ row. JSON Lines rows (version 3) also keep the key ``answer`` of
versions 1 and 2, the same value as ``gold``.
"""

from __future__ import annotations

import csv
import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from kag.grading.mcq.metrics import duration_secs
from kag.grading.mcq.trees import ResultSource, file_place
from kag.grading.record import GradedFile
from kag.render.formats import ExportFormat
from kag.results.tree import result_path

if TYPE_CHECKING:
    from kag.datasets import Datasets

#: The separator of an open question's accepted answers in the ``gold`` column.
ANSWERS_SEPARATOR = " | "

#: The version of the JSON Lines rows (their last key, ``"v"``): `kag stats compare --against`
#: reads rows of this version and older ones (rows without ``"v"`` are version 1). Version 3
#: added ``gold`` and ``extracted`` (``answer`` kept, after the columns).
JSONL_VERSION = 3

#: The key of versions 1 and 2 that JSON Lines rows keep (the answer key, as ``gold``).
LEGACY_ANSWER = "answer"

#: The columns, in order (also the first keys of every JSON Lines object).
COLUMNS = (
    "dataset",
    "question",
    "setup",
    "outcome",
    "gold",
    "response",
    "extracted",
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
    "model",
    "provider",
    "label",
    "epoch",
    "path",
)


def export_row(
    record: GradedFile,
    gold: str | None,
    place: tuple[str | None, str | None] = (None, None),
) -> dict[str, Any]:
    """One row: ``outcome`` is OK, WRONG or ERR; ``gold`` the answer key; ``response`` the
    response verbatim (None for ERR); ``extracted`` the key ``--extract`` read and
    ``extracted_outcome`` its grade, of an MCQ record; ``exact_match`` and ``f1`` those of
    an open record; times in seconds;
    ``vertices``/``relationships``/``properties``/``retrieval_secs`` only for files with a
    complete retrieval sample; token counts as the result file records them; ``model`` and
    ``provider`` those the file records; ``place`` the (label, path) of the file (its tree's
    label, None for one tree), ``epoch`` 1 (the file ``kag stats`` grades). Absent values
    are None."""
    extracted = record.extracted.name if record.extracted is not None else None
    r = record.retrieval
    u = record.usage
    config = record.config
    return {
        "dataset": record.dataset,
        "question": record.question,
        "setup": record.setup,
        "outcome": record.outcome.name,
        "gold": gold,
        "response": record.response,
        "extracted": record.extracted_key,
        "extracted_outcome": extracted,
        "exact_match": record.exact_match,
        "f1": record.f1,
        "generation_secs": duration_secs(record.generation_ns) if record.generation_ns is not None else None,
        "context_length": record.context_length,
        "retrieval_secs": duration_secs(r.time_ns) if r is not None else None,
        "vertices": r.vertices if r is not None else None,
        "relationships": r.relationships if r is not None else None,
        "properties": r.properties if r is not None else None,
        "prompt_tokens": u.prompt_tokens if u is not None else None,
        "completion_tokens": u.completion_tokens if u is not None else None,
        "model": config.model if config is not None else None,
        "provider": config.provider if config is not None else None,
        "label": place[0],
        "epoch": 1,
        "path": place[1],
    }


def iter_rows(
    records: Iterable[GradedFile],
    datasets: Datasets,
    open_records: Iterable[GradedFile] = (),
    *,
    source: ResultSource | None = None,
    prefix: str = "",
) -> Iterator[dict[str, Any]]:
    """:func:`export_row` of each record with its answer key (an open question's accepted
    answers joined with :data:`ANSWERS_SEPARATOR`); both inputs sorted by (dataset,
    question, setup), merged in that order. With ``source`` (the trees graded) and
    ``prefix``, each row names its tree's label and its file's path."""
    merged: Iterable[GradedFile] = heapq.merge(
        records, open_records, key=lambda r: (r.dataset, r.question, r.setup)
    )
    for record in merged:
        question = datasets.get(record.dataset, record.question)
        gold = None
        if question is not None and question.mcq is not None:
            gold = question.mcq.answer
        elif question is not None and question.open is not None:
            gold = ANSWERS_SEPARATOR.join(question.open.answers)
        place: tuple[str | None, str | None] = (None, None)
        if source is not None:
            label, root, name = file_place(source, record.setup)
            place = (label, str(result_path(root, record.dataset, record.question, prefix, name)))
        yield export_row(record, gold, place)


#: The first characters that make a spreadsheet read a cell as a formula (OWASP, "CSV
#: Injection"): such a text cell is written with :data:`FORMULA_GUARD` in front.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
FORMULA_GUARD = "'"


def neutralise_cell(value: object) -> object:
    """``value`` with :data:`FORMULA_GUARD` in front when it is a text starting with one of
    :data:`FORMULA_STARTS`; any other value (numbers included) unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return FORMULA_GUARD + value
    return value


class _Echo:
    """A file whose ``write`` returns what it is given: ``csv.writer(...).writerow`` then
    returns the row's text."""

    def write(self, text: str) -> str:
        return text


def render_csv(
    records: Iterable[GradedFile],
    datasets: Datasets,
    open_records: Iterable[GradedFile] = (),
    *,
    source: ResultSource | None = None,
    prefix: str = "",
) -> str:
    """RFC 4180 CSV with a header row (fields quoted when they hold a comma, a quote, a
    line feed or a carriage return; ``\\n`` ends a row); absent values are empty fields;
    text cells go through :func:`neutralise_cell`."""
    # The csv module quotes a field holding a character of the line terminator, and a lone
    # "\r" is not one of "\n": rows are written ending in "\r\n" (so every field with "\r" or
    # "\n" is quoted) and that ending, the only one outside quotes, becomes "\n".
    writer = csv.writer(_Echo(), lineterminator="\r\n")
    lines = [writer.writerow(COLUMNS)[:-2] + "\n"]
    for row in iter_rows(records, datasets, open_records, source=source, prefix=prefix):
        lines.append(writer.writerow([neutralise_cell(v) for v in row.values()])[:-2] + "\n")
    return "".join(lines)


def render_jsonl(
    records: Iterable[GradedFile],
    datasets: Datasets,
    open_records: Iterable[GradedFile] = (),
    *,
    source: ResultSource | None = None,
    prefix: str = "",
) -> str:
    """JSON Lines: one object per graded file (keys :data:`COLUMNS`, then ``"answer"``, the
    key of versions 1 and 2 (:data:`LEGACY_ANSWER`, the same value as ``gold``), then
    ``"v"``, the row version :data:`JSONL_VERSION`), absent values null."""
    return "".join(
        orjson.dumps({**row, LEGACY_ANSWER: row["gold"], "v": JSONL_VERSION}).decode() + "\n"
        for row in iter_rows(records, datasets, open_records, source=source, prefix=prefix)
    )


RENDERERS: Mapping[ExportFormat, Callable[..., str]] = {
    ExportFormat.CSV: render_csv,
    ExportFormat.JSONL: render_jsonl,
}
