"""The datasets file: dataset name -> question id -> entry (see docs/results.md).

The entries' models and validation are :mod:`kag.datasets_entries`'s (re-exported here);
the lean reading of a file without its texts is :mod:`kag.datasets_stream`'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from kag.datasets_entries import (
    MCQ,
    SURROGATE,
    Duplicate,
    OpenAnswer,
    Question,
    entry_name_problem,
    int64,
    name_problem,
    no_constant,
    parse_question,
    unique_keys,
)
from kag.datasets_stream import DatasetsChanged, LeanQuestions, read_lean
from kag.errors import InputError
from kag.gcpause import collector_paused
from kag.textfile import read_bytes_file

__all__ = [
    "EXPECTED_SHAPE",
    "MAX_PROBLEMS",
    "MCQ",
    "Datasets",
    "DatasetsChanged",
    "OpenAnswer",
    "Question",
    "count_questions",
    "entry_name_problem",
    "load_datasets",
    "load_json",
    "name_problem",
    "parse_datasets",
]

MAX_PROBLEMS = 20


@dataclass(frozen=True)
class Datasets:
    """A datasets file read: dataset name -> question id -> :class:`Question`, in file order.

    ``texts`` is False for a file read without its texts (``load_datasets(path,
    texts=False)``): its questions carry no ``input`` and no option texts, and
    :meth:`entry` reads one whole from the file (``lean`` holds where each entry is)."""

    path: Path
    datasets: Mapping[str, Mapping[str, Question]]
    texts: bool = True
    lean: Mapping[str, LeanQuestions] | None = field(default=None, repr=False, compare=False)

    def get(self, dataset: str, question: str) -> Question | None:
        return self.datasets.get(dataset, {}).get(question)

    def entry(self, dataset: str, question: str) -> Question | None:
        """The question ``dataset/question`` with its texts (None when the file has no such
        question). Read without its texts, it is read again from the file: DatasetsChanged
        (an InputError) when the file changed since it was loaded, InputError when it can no
        longer be read."""
        if self.lean is None:
            return self.get(dataset, question)
        questions = self.lean.get(dataset)
        return None if questions is None else questions.full_question(question)

    def iter_questions(self) -> Iterator[Question]:
        for questions in self.datasets.values():
            yield from questions.values()

    @property
    def scorable_questions(self) -> int:
        return sum(count_questions(qs, _scorable) for qs in self.datasets.values())

    @property
    def has_evidence(self) -> bool:
        """Whether some entry lists evidence (entity names or triples)."""
        return any(count_questions(qs, _with_evidence) for qs in self.datasets.values())


def count_questions(questions: Mapping[str, Question], test: Callable[[Question], bool]) -> int:
    """How many of ``questions`` (one dataset's) pass ``test``, which reads what a question
    asks for (its ``mcq``, ``open`` and evidence), never its id or texts: the questions of
    a lean load are counted per MCQ form, without being made one by one."""
    if isinstance(questions, LeanQuestions):
        return questions.count(test)
    return sum(1 for q in questions.values() if test(q))


def _scorable(question: Question) -> bool:
    return question.scorable


def _with_evidence(question: Question) -> bool:
    return bool(question.evidence or question.evidence_triples)


#: The shape of a datasets file, as the messages about a wrongly shaped one show it.
EXPECTED_SHAPE = '{"DATASET": {"QUESTION_ID": {"input": ..., "output": ...}}}'
_IMPORT_HINT = "; kag datasets import converts rows (CSV, JSON Lines, Parquet) into a datasets file"


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a number" if isinstance(value, (int, float)) and not isinstance(value, bool) else "a boolean"


def _json_lines_hint(data: bytes) -> str:
    """A hint when ``data`` is JSON Lines (a valid JSON value on its first line, more after)."""
    first, _, rest = data.lstrip().partition(b"\n")
    if not rest.strip():
        return ""
    try:
        orjson.loads(first)
    except orjson.JSONDecodeError:
        return ""
    return f" (this looks like JSON Lines, one object per line; the datasets file is one JSON object{_IMPORT_HINT})"


def _without_dataset_level(raw: dict[str, object]) -> str | None:
    """The first key whose value is a question entry (has ``input``), when every value is
    one: a file of questions without its dataset level."""
    if not raw:
        return None
    for value in raw.values():
        if not (isinstance(value, dict) and isinstance(value.get("input"), str)):
            return None
    return next(iter(raw))


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:]')


def _duplicate_message(text: str) -> str:
    """Where the first key written twice in one object of ``text`` (valid JSON) is:
    ``LINE: WHAT 'KEY' is written twice (first at line N)``."""
    # One frame per open object ([keys seen -> offset, the key being read]) or array (None).
    frames: list[tuple[dict[str, int], list[str]] | None] = []
    last = ""
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token == "{":
            frames.append(({}, [""]))
        elif token == "[":
            frames.append(None)
        elif token in "}]":
            frames.pop()
        elif token == ":":
            frame = frames[-1]
            assert frame is not None
            seen, current = frame
            key = json.loads(last)
            if key in seen:
                line = text.count("\n", 0, match.start()) + 1
                first = text.count("\n", 0, seen[key]) + 1
                path = [f[1][0] for f in frames[:-1] if f is not None]
                what = _duplicate_what(path, key)
                return f"{line}: {what} is written twice (first at line {first})"
            seen[key] = match.start()
            current[0] = key
        else:
            last = token
    raise AssertionError("no key is written twice")  # the caller found one


def _duplicate_what(path: list[str], key: str) -> str:
    if not path:
        return f"dataset {key!r}"
    if len(path) == 1:
        return f"question id {key!r} of dataset {path[0]!r}"
    return f"key {key!r} of {'/'.join(path)}"


def load_json(data: bytes, path: Path) -> object:
    """The JSON value of ``data`` (the bytes of the datasets file ``path``). InputError for
    text that is not JSON, and for a key written twice in one object, naming its line: a
    JSON reader keeps the last of the two, so the questions of the other would be lost
    without a word (and ``kag datasets import`` would write the file back without them)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{path}:{line}: not valid JSON: not UTF-8 text (byte {exc.start})") from None
    try:
        if SURROGATE.search(text):
            orjson.loads(data)  # which refuses a lone surrogate, as a file name cannot hold one
        return json.loads(text, object_pairs_hook=unique_keys, parse_constant=no_constant, parse_int=int64)
    except Duplicate:
        raise InputError(
            f"{path}:{_duplicate_message(text)}; a JSON reader keeps only the last, so remove or rename one"
        ) from None
    except (json.JSONDecodeError, orjson.JSONDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON: {exc}{_json_lines_hint(data)}") from None
    except (ValueError, RecursionError) as exc:
        why = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
        raise InputError(f"{path}: not valid JSON: {why}") from None


def parse_datasets(data: bytes, path: Path) -> Datasets:
    """Parse and validate a datasets file; all problems are reported at once (capped)."""
    # The table lives as long as its run: the collector resumed would walk each of its
    # questions (9 ms for 10,000 with gold evidence, before any result file is read).
    with collector_paused(keep=True):
        return _parse_datasets(data, path)


def _parse_datasets(data: bytes, path: Path) -> Datasets:
    raw = load_json(data, path)
    if not isinstance(raw, dict):
        raise InputError(
            f"{path}: the datasets file must be a JSON object {EXPECTED_SHAPE}, got {_json_type(raw)}"
            + (f"{_IMPORT_HINT}" if isinstance(raw, list) else "")
        )
    flat = _without_dataset_level(raw)
    if flat is not None:
        raise InputError(
            f"{path}: {flat!r} looks like a question, not a dataset: the datasets file maps dataset"
            f" names to questions {EXPECTED_SHAPE}; wrap the questions in a dataset,"
            ' e.g. {"my-dataset": {...}}'
        )
    problems: list[str] = []
    datasets: dict[str, dict[str, Question]] = {}
    # Each entry's JSON is let go once parsed: the whole file is never held twice.
    for name in list(raw):
        questions = raw.pop(name)
        why = entry_name_problem(name)
        if why:
            problems.append(f"dataset name {name!r} {why}")
            continue
        if not isinstance(questions, dict):
            problems.append(f"{name}: must be an object (question id -> entry)")
            continue
        parsed: dict[str, Question] = {}
        for qid in list(questions):
            entry = questions.pop(qid)
            why = entry_name_problem(qid)
            if why:
                problems.append(f"{name}: question id {qid!r} {why}")
                continue
            question = parse_question(name, qid, entry, problems)
            if question is not None:
                parsed[qid] = question
        datasets[name] = parsed
    if problems:
        shown = problems[:MAX_PROBLEMS]
        more = len(problems) - len(shown)
        lines = "\n  ".join(shown) + (f"\n  ... and {more} more" if more else "")
        raise InputError(f"{path}: {len(problems)} problem(s) in the datasets file:\n  {lines}")
    return Datasets(path, datasets)


def load_datasets(path: str | Path, *, texts: bool = True) -> Datasets:
    """Read and validate a datasets file; raises InputError naming the file and each problem.

    ``texts=False`` reads it without the texts grading does not read, in memory that does not
    grow with them (:mod:`kag.datasets_stream`: about 35 bytes a question instead of the
    file's size several times over, and the file 256 KiB at a time): each question's
    ``input`` is ``""`` and its options map their keys to ``""``; the answer key, the
    accepted answers and the evidence are there. :meth:`Datasets.entry` gives a question
    whole. The same files are refused with the same messages either way. A file only the
    whole-file reader reads (a pipe, escaped surrogates, deeply nested entries) is read
    whole, texts and all (``texts`` is then True in the result)."""
    path = Path(path)
    if not texts:
        with collector_paused(keep=True):  # see parse_datasets
            lean = read_lean(path)
        if lean is not None:
            return Datasets(path, lean.datasets, texts=False, lean=lean.datasets)
    return parse_datasets(read_bytes_file(path, "datasets file"), path)
