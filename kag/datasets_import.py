"""``kag datasets import``: questions from a CSV, JSON Lines or Parquet file into a datasets file.

One row of the input is one question. The columns are named by the caller:

- ``question``: the question text (the entry's ``input``);
- ``id``: the question id (default: the row's number, from 0);
- options, one of: ``options`` (several columns, one option each, keyed A, B, C... in the
  order given), ``options_list`` (one column holding a list, keyed A, B, C..., or an object
  ``{"A": text, ...}`` whose keys are kept), ``choices`` (the same options for every row,
  keyed A, B, C...);
- ``answer`` with ``answer_is``: ``letter`` (the value is one of the option keys, ASCII case
  ignored), ``index`` (0-based position among the options) or ``text`` (the text of one
  option, surrounding white space ignored);
- or, for an open question, ``answers``: a column holding one accepted answer or a list of them.

The layouts Hugging Face publishes are covered: MMLU (``question``, ``choices`` list,
``answer`` index), MedQA (``question``, ``options`` object, ``answer_idx`` letter),
PubMedQA (``question``, ``final_decision`` text among yes/no/maybe).

A list or object held in a CSV cell is written as JSON. Every problem names the file, the
row (line of a CSV or JSON Lines file) and the column.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import orjson

from kag.datasets import Datasets, entry_name_problem, parse_datasets
from kag.errors import InputError, UsageError
from kag.rowfile import iter_csv_rows, iter_jsonl_rows
from kag.textfile import MAX_FILE_BYTES, read_bytes_file, read_failure, read_text_file


class AnswerIs(StrEnum):
    LETTER = "letter"
    INDEX = "index"
    TEXT = "text"


class InputKind(StrEnum):
    CSV = "csv"
    JSONL = "jsonl"
    PARQUET = "parquet"


#: File name endings and the reader each selects.
SUFFIXES: Mapping[str, InputKind] = {
    ".csv": InputKind.CSV,
    ".jsonl": InputKind.JSONL,
    ".ndjson": InputKind.JSONL,
    ".json": InputKind.JSONL,
    ".parquet": InputKind.PARQUET,
    ".pq": InputKind.PARQUET,
}

#: More option keys than the 26 letters: AA, AB, ... (an unlikely question, but never a clash).
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def option_key(index: int) -> str:
    """``A`` for 0, ``B`` for 1, ... ``Z``, then ``AA``, ``AB``..."""
    if index < len(_LETTERS):
        return _LETTERS[index]
    return option_key(index // len(_LETTERS) - 1) + _LETTERS[index % len(_LETTERS)]


@dataclass(frozen=True)
class Columns:
    """Which columns hold what (see the module docstring)."""

    question: str
    id: str | None = None
    options: tuple[str, ...] = ()
    options_list: str | None = None
    choices: tuple[str, ...] = ()
    answer: str | None = None
    answer_is: AnswerIs = AnswerIs.LETTER
    answers: str | None = None
    # The column of the gold evidence (entity names and/or triples), or None.
    evidence: str | None = None

    def check(self) -> None:
        """UsageError when the columns do not describe one kind of question."""
        given = sum(1 for x in (self.options, self.options_list, self.choices) if x)
        if self.answers is not None:
            if given or self.answer is not None:
                raise UsageError(
                    "--answers (open questions) cannot go with --options, --options-list, --choices or --answer"
                )
            return
        if given != 1:
            raise UsageError(
                "give the options with exactly one of --options COL,COL,..., --options-list COL or --choices TEXT,TEXT,..."
                " (or --answers COL for open questions)"
            )
        if self.answer is None:
            raise UsageError("--answer COL is required with options (the column of the correct option)")


@dataclass(frozen=True)
class ImportReport:
    """What an import did: ``added`` questions to ``dataset`` (``mcq`` + ``open``), the
    datasets file's new ``document`` (JSON bytes) and its parsed form."""

    dataset: str
    added: int
    mcq: int
    open: int
    document: bytes
    datasets: Datasets
    kept: int = 0  # the questions the dataset already held


def _kind(path: Path, kind: InputKind | None) -> InputKind:
    if kind is not None:
        return kind
    found = SUFFIXES.get(path.suffix.lower())
    if found is None:
        known = ", ".join(sorted(SUFFIXES))
        raise UsageError(
            f"{path}: cannot tell the file's format from its name (known: {known}); give --input-format"
        )
    return found


def _iter_csv(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    text = read_text_file(path, "input file", bom=True)
    yield from iter_csv_rows(path, text, invalid="not a CSV row kag can read: {}")


def _iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    data = read_bytes_file(path, "input file")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    stripped = data.lstrip()
    if stripped.startswith(b"["):
        # A JSON array of row objects (also what some exports write with a .json name).
        try:
            rows = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON: {exc}") from None
        for n, row in enumerate(rows, 1):
            if not isinstance(row, dict):
                raise InputError(f"{path}: row {n}: expected an object (column -> value)")
            yield n, row
        return
    yield from iter_jsonl_rows(
        path,
        data,
        invalid="not valid JSON: {}",
        not_object="expected an object (column -> value), one per line",
    )


def _iter_parquet(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        from kag.install import missing_extra

        raise UsageError(
            f"{path}: reading Parquet needs pyarrow: {missing_extra('pyarrow', 'parquet')}"
        ) from None
    import pyarrow as pa

    try:
        source = pq.ParquetFile(path)
        rows = source.metadata.num_rows
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        raise read_failure(path, "input file", exc) from None
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise InputError(f"{path}: cannot read the Parquet file: {exc}") from None
    if rows > MAX_ROWS:
        # Known from the file's footer before a row is read: a few kilobytes of Parquet
        # can declare millions of rows (a repeated value compresses to nothing).
        raise InputError(
            f"{path}: {rows:,} rows, more than the {MAX_ROWS:,} one import takes; split the file"
        )
    n = 0
    with source:
        batches = source.iter_batches(batch_size=_PARQUET_BATCH)
        while True:
            try:
                batch = next(batches, None)
            except (OSError, ValueError, pa.ArrowException) as exc:
                raise InputError(f"{path}: cannot read the Parquet file after row {n}: {exc}") from None
            if batch is None:
                return
            try:
                decoded = batch.to_pylist()
            except (ValueError, OverflowError, pa.ArrowException) as exc:
                # A value Python cannot hold (a timestamp past the year 9999, for one).
                raise _bad_value(path, batch, n, exc) from None
            for row in decoded:
                n += 1
                yield n, row


#: Most rows one import takes: far above a benchmark's datasets (MedMCQA's training split
#: has 183k), low enough that the questions held in memory stay below a gigabyte (1,000,000
#: short MCQ rows took 1.5 GB, and their datasets file passed the 256 MiB every reader takes).
MAX_ROWS = 500_000
_PARQUET_BATCH = 10_000


def _bad_value(path: Path, batch: Any, before: int, exc: Exception) -> InputError:
    """The InputError naming the row and column of the value of ``batch`` (after ``before``
    rows) that cannot be decoded."""
    for i in range(batch.num_rows):
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            try:
                column[i].as_py()
            except Exception as cell:  # noqa: BLE001 (the decoder's own error, shown)
                return InputError(
                    f"{path}: row {before + i + 1}: column {name!r}: cannot read the value: {cell}"
                )
    return InputError(f"{path}: cannot read rows {before + 1}-{before + batch.num_rows}: {exc}")


READERS = {InputKind.CSV: _iter_csv, InputKind.JSONL: _iter_jsonl, InputKind.PARQUET: _iter_parquet}


def _where(path: Path, kind: InputKind, n: int) -> str:
    return f"{path}:{n}" if kind is not InputKind.PARQUET else f"{path}: row {n}"


def _cell(row: Mapping[str, Any], column: str, where: str) -> Any:
    if column not in row:
        known = ", ".join(sorted(map(str, row))[:12])
        raise InputError(f"{where}: no column {column!r} (columns: {known})")
    return row[column]


def _text(value: Any, column: str, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        raise InputError(
            f"{where}: column {column!r}: expected text (got {'nothing' if value is None else value!r})"
        )
    if isinstance(value, (int, float)):
        return str(value)
    raise InputError(f"{where}: column {column!r}: expected text (got {type(value).__name__})")


def _structured(value: Any, column: str, where: str) -> Any:
    """A list or object cell; a CSV cell holds it as JSON text."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            raise InputError(
                f"{where}: column {column!r}: expected a JSON list or object, got {value[:60]!r}"
            ) from None
    return value


def _options(row: Mapping[str, Any], cols: Columns, where: str) -> dict[str, str]:
    if cols.choices:
        return {option_key(i): text for i, text in enumerate(cols.choices)}
    if cols.options:
        return {option_key(i): _text(_cell(row, c, where), c, where) for i, c in enumerate(cols.options)}
    assert cols.options_list is not None
    value = _structured(_cell(row, cols.options_list, where), cols.options_list, where)
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for key, text in value.items():
            if not str(key).strip():
                raise InputError(f"{where}: column {cols.options_list!r}: an option key is empty")
            out[str(key)] = _text(text, cols.options_list, where)
        return out
    if isinstance(value, (list, tuple)):
        return {option_key(i): _text(text, cols.options_list, where) for i, text in enumerate(value)}
    raise InputError(f"{where}: column {cols.options_list!r}: expected a list or an object of options")


_INDEX_DIGITS = 6


def _answer_key(value: Any, options: Mapping[str, str], cols: Columns, where: str) -> str:
    column = cols.answer
    assert column is not None
    if cols.answer_is is AnswerIs.INDEX:
        index: int | None = None
        digits = value.strip() if isinstance(value, str) else ""
        if isinstance(value, int) and not isinstance(value, bool):
            index = value
        elif digits.isascii() and digits.isdigit() and len(digits) <= _INDEX_DIGITS:
            # isascii: "²" is a digit to str.isdigit, not to int(); the length keeps int()
            # of thousands of digits (which Python refuses) from being tried.
            index = int(digits)
        elif isinstance(value, float) and value.is_integer():
            index = int(value)
        keys = list(options)
        if index is None or not 0 <= index < len(keys):
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise InputError(
                f"{where}: column {column!r}: {shown} is not an index of the {len(keys)} option(s) (0-based)"
            )
        return keys[index]
    text = _text(value, column, where).strip()
    if cols.answer_is is AnswerIs.LETTER:
        for key in options:
            if key.upper() == text.upper():
                return key
        hint = " (is it an index? --answer-is index)" if text.isdigit() else ""
        raise InputError(
            f"{where}: column {column!r}: {text!r} is not one of the option keys {list(options)}{hint}"
        )
    matches = [key for key, option in options.items() if option.strip() == text]
    if len(matches) != 1:
        why = "matches no option" if not matches else "matches several options"
        raise InputError(f"{where}: column {column!r}: the answer text {text[:60]!r} {why}")
    return matches[0]


def _answers(value: Any, column: str, where: str) -> list[str]:
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            value = _structured(value, column, where)
        else:
            return [value]
    if isinstance(value, (list, tuple)) and value:
        return [_text(v, column, where) for v in value]
    raise InputError(f"{where}: column {column!r}: expected an answer or a non-empty list of answers")


def _evidence(value: Any, column: str, where: str) -> Any:
    """The ``evidence`` of a cell: a JSON array of names or object (entities, triples),
    as a value or as text, or ``;``-separated names (blank parts dropped); None when empty.
    The datasets file's validation checks the shape."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if text[0] in "[{":
            return _structured(text, column, where)
        return [part.strip() for part in text.split(";") if part.strip()] or None
    if isinstance(value, list | dict):
        return value
    raise InputError(f"{where}: column {column!r}: expected evidence names or a JSON evidence object")


def _entry(row: Mapping[str, Any], cols: Columns, where: str) -> dict[str, Any]:
    entry = _question_entry(row, cols, where)
    if cols.evidence is not None:
        evidence = _evidence(_cell(row, cols.evidence, where), cols.evidence, where)
        if evidence is not None:
            entry["evidence"] = evidence
    return entry


def _question_entry(row: Mapping[str, Any], cols: Columns, where: str) -> dict[str, Any]:
    text = _text(_cell(row, cols.question, where), cols.question, where)
    if cols.answers is not None:
        answers = _answers(_cell(row, cols.answers, where), cols.answers, where)
        return {"input": text, "output": {"type": "Open", "answers": answers}}
    options = _options(row, cols, where)
    if not options:
        raise InputError(f"{where}: the question has no options")
    assert cols.answer is not None
    key = _answer_key(_cell(row, cols.answer, where), options, cols, where)
    return {"input": text, "output": {"type": "MCQ", "options": options, "answer": key}}


def read_target(path: Path) -> bytes | None:
    """The bytes of the datasets file ``path`` an import adds to, None when there is none
    yet. It is read, then written back whole: anything but a regular file (a named pipe
    would keep the import waiting for a writer, a device would be read forever) is an
    InputError naming it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise read_failure(path, "datasets file", exc) from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    if not regular:
        raise InputError(f"{path}: not a regular file; the datasets file is read, then written back whole")
    return read_bytes_file(path, "datasets file")


def import_questions(
    source: Path,
    target: Path,
    columns: Columns,
    *,
    dataset: str | None = None,
    kind: InputKind | None = None,
    existing: bytes | None = None,
) -> ImportReport:
    """Read ``source`` and add its questions to the datasets document ``existing`` (the bytes
    of ``target``, None when it does not exist yet) under ``dataset`` (default: the source's
    file name without its ending). A question id the dataset already has is an InputError
    naming it; nothing is replaced. The new document is validated as every datasets file
    is, and returned with the counts; the caller writes it."""
    columns.check()
    name = dataset if dataset is not None else source.name.split(".")[0]
    why = entry_name_problem(name)
    if why:
        raise UsageError(f"dataset name {name!r} {why}; give --dataset NAME")
    doc: dict[str, Any] = {}
    if existing is not None:
        # Validated as every datasets file is (its shape, each entry), before anything is
        # read from the input: what is merged into is a valid document.
        parse_datasets(existing, target)
        doc = orjson.loads(existing)
    questions: dict[str, Any] = dict(doc.get(name, {}))
    kept = len(questions)
    kind = _kind(source, kind)
    added = mcq = opened = 0
    seen: set[str] = set()
    for n, row in READERS[kind](source):
        where = _where(source, kind, n)
        if added >= MAX_ROWS:
            raise InputError(f"{where}: more than the {MAX_ROWS:,} rows one import takes; split the file")
        qid = (
            _text(_cell(row, columns.id, where), columns.id, where).strip()
            if columns.id is not None
            else str(added)
        )
        problem = entry_name_problem(qid)
        if problem:
            raise InputError(f"{where}: question id {qid!r} {problem}")
        if qid in seen:
            raise InputError(f"{where}: question id {qid!r} appears twice in {source}")
        if qid in questions:
            raise InputError(
                f"{where}: question {name}/{qid} is already in {target}; nothing was written"
                " (import into another --dataset, or give other ids with --id)"
            )
        seen.add(qid)
        entry = _entry(row, columns, where)
        questions[qid] = entry
        added += 1
        if entry["output"]["type"] == "MCQ":
            mcq += 1
        else:
            opened += 1
    if not added:
        raise InputError(f"{source}: no row to import")
    doc[name] = questions
    document = orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"
    if len(document) > MAX_FILE_BYTES:
        raise InputError(
            f"{target}: the datasets file would be larger than the {MAX_FILE_BYTES // (1024 * 1024)} MiB"
            " every command reads; nothing was written (import into another file)"
        )
    parsed = parse_datasets(document, target)
    return ImportReport(name, added, mcq, opened, document, parsed, kept=kept)


@dataclass(frozen=True)
class DatasetCounts:
    """The questions of one dataset, by kind."""

    dataset: str
    questions: int
    mcq: int
    with_answer: int
    open: int
    free_form: int
    evidence: int
    # The questions listing gold triples (shown only when the file has some).
    evidence_triples: int = 0


def count_questions(datasets: Datasets) -> list[DatasetCounts]:
    """Per dataset (file order): every question, the MCQ ones and those with an answer key
    (graded by ``kag stats``), the open ones, the free-form ones (never graded), those
    listing evidence (names or triples) and those listing gold triples."""
    out: list[DatasetCounts] = []
    for name, questions in datasets.datasets.items():
        qs: Sequence[Any] = list(questions.values())
        out.append(
            DatasetCounts(
                name,
                len(qs),
                sum(1 for q in qs if q.mcq is not None),
                sum(1 for q in qs if q.scorable),
                sum(1 for q in qs if q.open is not None),
                sum(1 for q in qs if q.mcq is None and q.open is None),
                sum(1 for q in qs if q.evidence or q.evidence_triples),
                sum(1 for q in qs if q.evidence_triples),
            )
        )
    return out
