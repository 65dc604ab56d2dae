"""The datasets file: dataset name -> question id -> entry (see docs/results.md)."""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import orjson

from kag.errors import InputError
from kag.textfile import read_bytes_file
from kag.textsafe import ascii_fold

MAX_PROBLEMS = 20


@dataclass(frozen=True, slots=True)
class MCQ:
    """A multiple-choice question's expected output; `answer` is None when not declared."""

    options: dict[str, str]
    answer: str | None


@dataclass(frozen=True, slots=True)
class OpenAnswer:
    """A free-form question's expected output: the accepted answers (at least one), in file order."""

    answers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Question:
    dataset: str
    id: str
    input: str
    mcq: MCQ | None  # None = not multiple-choice (an open question, or free-form and never graded)
    open: OpenAnswer | None = None  # set for `"type": "Open"` entries (graded against `answers`)
    # The entity names the answer needs (`"evidence"`, optional), sought in the retrieved text.
    evidence: tuple[str, ...] = ()
    # The gold triples (subject, relation, object) of `"evidence": {"triples": [...]}`.
    evidence_triples: tuple[tuple[str, str, str], ...] = ()

    @property
    def scorable(self) -> bool:
        """Whether the strict MCQ grade applies (an MCQ with an answer key); open questions are not."""
        return self.mcq is not None and self.mcq.answer is not None


@dataclass(frozen=True)
class Datasets:
    path: Path
    datasets: dict[str, dict[str, Question]]

    def get(self, dataset: str, question: str) -> Question | None:
        return self.datasets.get(dataset, {}).get(question)

    def iter_questions(self):  # -> Iterator[Question]
        for questions in self.datasets.values():
            yield from questions.values()

    @property
    def scorable_questions(self) -> int:
        return sum(1 for q in self.iter_questions() if q.scorable)

    @property
    def has_evidence(self) -> bool:
        """Whether some entry lists evidence (entity names or triples)."""
        return any(q.evidence or q.evidence_triples for q in self.iter_questions())


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a directory name, or None when it can."""
    if name == "":
        return "is empty"
    if name in (".", ".."):
        return f"is {name!r}"
    for bad, label in (("/", "'/'"), ("\\", "'\\'"), ("\0", "NUL")):
        if bad in name:
            return f"contains {label}"
    return None


def entry_name_problem(name: str) -> str | None:
    """Why `name` cannot name a dataset or a question, or None when it can: a directory
    name (:func:`name_problem`) that does not start with ``.``. The walks of a result tree
    pass over hidden folders (``.kag-judge`` holds the judge's verdicts), so a dataset
    ``.secret-set`` would be run but never graded, and ``.kag-judge`` would write into the
    judge's cache."""
    why = name_problem(name)
    if why is None and name.startswith("."):
        return "starts with '.' (hidden folders of a result tree are never graded)"
    return why


Evidence = tuple[tuple[str, ...], tuple[tuple[str, str, str], ...]]


def _names(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not all(isinstance(n, str) and n.strip() for n in value):
        return None
    return tuple(value)


def _triples(value: object) -> tuple[tuple[str, str, str], ...] | None:
    if not isinstance(value, list):
        return None
    out: list[tuple[str, str, str]] = []
    for item in value:
        parts = _names(item)
        if parts is None or len(parts) != 3:
            return None
        out.append((parts[0], parts[1], parts[2]))
    return tuple(out)


def _parse_evidence(where: str, entry: dict[str, object], problems: list[str]) -> Evidence | None:
    """The gold evidence of an entry, (entity names, triples) (both () when absent); None
    after a problem. ``"evidence"`` is an array of entity names, or an object
    ``{"entities": [...], "triples": [[subject, relation, object], ...]}`` (both optional)."""
    value = entry.get("evidence")
    if value is None:
        return (), ()
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"entities", "triples"})
        if unknown:
            problems.append(f"{where}: 'evidence' has unknown key {unknown[0]!r} (entities, triples)")
            return None
        names = _names(value.get("entities", []))
        if names is None:
            problems.append(f"{where}: 'evidence.entities' must be an array of non-empty strings")
            return None
        triples = _triples(value.get("triples", []))
        if triples is None:
            problems.append(
                f"{where}: 'evidence.triples' must be an array of [subject, relation, object] arrays"
                " of non-empty strings"
            )
            return None
        return names, triples
    names = _names(value)
    if names is None:
        problems.append(
            f"{where}: 'evidence' must be an array of non-empty strings"
            " or an object with 'entities' and 'triples'"
        )
        return None
    return names, ()


def _parse_question(dataset: str, qid: str, entry: object, problems: list[str]) -> Question | None:
    where = f"{dataset}/{qid}"
    if not isinstance(entry, dict):
        problems.append(f"{where}: entry must be an object")
        return None
    evidence = _parse_evidence(where, entry, problems)
    if evidence is None:
        return None
    question = _parse_entry(where, dataset, qid, entry, problems)
    names, triples = evidence
    if question is None or not (names or triples):
        return question
    return replace(question, evidence=names, evidence_triples=triples)


def _parse_entry(
    where: str, dataset: str, qid: str, entry: dict[str, object], problems: list[str]
) -> Question | None:
    text = entry.get("input")
    if not isinstance(text, str):
        problems.append(f"{where}: 'input' must be a string")
        return None
    output = entry.get("output")
    if output is None:
        return Question(dataset, qid, text, None)
    if not isinstance(output, dict):
        problems.append(f"{where}: 'output' must be an object")
        return None
    kind = output.get("type")
    if kind == "Open":
        return _parse_open(where, dataset, qid, text, output, problems)
    if kind != "MCQ":
        problems.append(f'{where}: \'output.type\' must be "MCQ" or "Open" (got {kind!r})')
        return None
    options = output.get("options")
    if not isinstance(options, dict) or not options:
        problems.append(f"{where}: 'output.options' must be a non-empty object")
        return None
    if not all(isinstance(v, str) for v in options.values()):
        problems.append(f"{where}: every value of 'output.options' must be a string")
        return None
    folded: dict[str, str] = {}
    for key in options:
        if not key.strip():
            # An empty key would be "extracted" from an empty reply and graded correct.
            problems.append(f"{where}: option key {key!r} is empty (an empty reply would match it)")
            return None
        # A-Z -> a-z only: the grading rule compares option keys ignoring ASCII case only
        # (kag/grading/rule.py), so "É" and "é" stay distinct.
        first = folded.setdefault(ascii_fold(key), key)
        if first != key:
            problems.append(
                f"{where}: option keys {first!r} and {key!r} differ only by case"
                " (answers are matched ignoring ASCII case, so they cannot both be options)"
            )
            return None
    answer = output.get("answer")
    if answer is not None and (not isinstance(answer, str) or answer not in options):
        problems.append(f"{where}: 'output.answer' {answer!r} is not one of the option keys {list(options)}")
        return None
    return Question(dataset, qid, text, MCQ(dict(options), answer))


def _parse_open(
    where: str, dataset: str, qid: str, text: str, output: dict[str, object], problems: list[str]
) -> Question | None:
    answers = output.get("answers")
    if not isinstance(answers, list) or not answers:
        problems.append(f"{where}: 'output.answers' must be a non-empty array of strings")
        return None
    if not all(isinstance(a, str) for a in answers):
        problems.append(f"{where}: every item of 'output.answers' must be a string")
        return None
    return Question(dataset, qid, text, None, OpenAnswer(tuple(answers)))


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


class _Duplicate(Exception):
    """A key written twice in one JSON object."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Duplicate
    return obj


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _int64(digits: str) -> int:
    # The reader of a datasets file writes it back (kag datasets import) through orjson,
    # which holds 64-bit integers only; int() of 5,000 digits is refused by Python itself.
    if len(digits.lstrip("-")) > 19 or not -(2**63) <= (value := int(digits)) < 2**64:
        raise ValueError(f"the integer {digits[:20]}... is out of the 64-bit range")
    return value


#: The escape of a UTF-16 surrogate, which Python's JSON reader takes alone.
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
#: A JSON string, or one of the characters that open, close or separate an object or array.
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
        if _SURROGATE.search(text):
            orjson.loads(data)  # which refuses a lone surrogate, as a file name cannot hold one
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_int=_int64)
    except _Duplicate:
        raise InputError(
            f"{path}:{_duplicate_message(text)}; a JSON reader keeps only the last, so remove or rename one"
        ) from None
    except (json.JSONDecodeError, orjson.JSONDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON: {exc}{_json_lines_hint(data)}") from None
    except (ValueError, RecursionError) as exc:
        why = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
        raise InputError(f"{path}: not valid JSON: {why}") from None


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a datasets file becomes objects: none of them
    is garbage, and each collection would walk every object made so far (with 100,000
    questions, three quarters of the load's time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse_datasets(data: bytes, path: Path) -> Datasets:
    """Parse and validate a datasets file; all problems are reported at once (capped)."""
    with _collector_paused():
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
            question = _parse_question(name, qid, entry, problems)
            if question is not None:
                parsed[qid] = question
        datasets[name] = parsed
    if problems:
        shown = problems[:MAX_PROBLEMS]
        more = len(problems) - len(shown)
        lines = "\n  ".join(shown) + (f"\n  ... and {more} more" if more else "")
        raise InputError(f"{path}: {len(problems)} problem(s) in the datasets file:\n  {lines}")
    return Datasets(path, datasets)


def load_datasets(path: str | Path) -> Datasets:
    """Read and validate a datasets file; raises InputError naming the file and each problem."""
    path = Path(path)
    return parse_datasets(read_bytes_file(path, "datasets file"), path)
