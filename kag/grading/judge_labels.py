"""Human labels of judged answers (``kag stats judge --labels FILE``): read a CSV or JSON Lines
file of ``dataset, question, setup, label[, annotator]`` rows into :class:`Label` records.

The format is told by the name (``.csv``; ``.jsonl``, ``.ndjson`` or ``.json`` for JSON
Lines). ``label`` is ``correct`` or ``incorrect`` (any case); ``annotator`` is optional (an
empty or absent one is the anonymous annotator ``""``). Every defect is an InputError naming
the file, the line and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kag.errors import InputError
from kag.rowfile import iter_csv_rows, iter_jsonl_rows
from kag.textfile import read_text_file

FIELDS = ("dataset", "question", "setup", "label")
_LABELS = {"correct": True, "incorrect": False}
_JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")


@dataclass(frozen=True)
class Label:
    """One annotator's label of one answer: ``correct`` True when the answer is right."""

    dataset: str
    question: str
    setup: str
    correct: bool
    annotator: str = ""

    @property
    def answer(self) -> tuple[str, str, str]:
        return (self.dataset, self.question, self.setup)


def _field(path: Path, line: int, row: dict[str, Any], key: str, required: bool = True) -> str:
    value = row.get(key)
    if value is None or value == "":
        if required:
            raise InputError(f"{path}:{line}: key {key!r} is missing or empty")
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(f"{path}:{line}: key {key!r} must be text, not {type(value).__name__}")
    return str(value)


def read_labels(path: str | Path) -> tuple[Label, ...]:
    """The labels of ``path`` in file order. InputError naming the file, line and key for an
    unknown suffix, text that is not UTF-8, a malformed row, a missing key, a label other than
    correct/incorrect, or the same answer labelled twice by the same annotator."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix != ".csv" and suffix not in _JSON_SUFFIXES:
        raise InputError(
            f"{path}: a labels file is .csv or .jsonl (JSON Lines), not {suffix or 'no suffix'!r}"
        )
    text = read_text_file(path, "labels file", InputError, bom=True, universal_newlines=True)
    rows = (
        iter_csv_rows(path, text, invalid="not valid CSV ({})")
        if suffix == ".csv"
        else iter_jsonl_rows(
            path,
            text,
            invalid="not valid JSON ({})",
            not_object=f"expected an object with the keys {', '.join(FIELDS)}",
        )
    )
    labels: list[Label] = []
    seen: dict[tuple[str, str, str, str], int] = {}
    for line, row in rows:
        dataset, question, setup = (_field(path, line, row, key) for key in FIELDS[:3])
        raw = _field(path, line, row, "label").strip().lower()
        if raw not in _LABELS:
            raise InputError(f"{path}:{line}: key 'label' is {raw!r}; expected correct or incorrect")
        annotator = _field(path, line, row, "annotator", required=False)
        key = (dataset, question, setup, annotator)
        if key in seen:
            who = f" by annotator {annotator!r}" if annotator else ""
            raise InputError(
                f"{path}:{line}: {dataset}/{question}/{setup} labelled again{who} (first at line {seen[key]})"
            )
        seen[key] = line
        labels.append(Label(dataset, question, setup, _LABELS[raw], annotator))
    return tuple(labels)
