"""One entry of the datasets file: the question models (:class:`Question`, :class:`MCQ`,
:class:`OpenAnswer`), the rules of a dataset or question name, how an entry's JSON is read
(:func:`entry_decoder`: a key written twice, ``NaN``, integers past 64 bits are refused) and
validated (:func:`parse_question`). :mod:`kag.datasets` reads a whole file with them,
:mod:`kag.datasets_stream` one entry at a time."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from kag.textsafe import ascii_fold


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
    """One entry of the datasets file. A question of a datasets file loaded without its
    texts (``load_datasets(path, texts=False)``) has ``input == ""`` and options whose texts
    are ``""`` (their keys and order kept): :meth:`kag.datasets.Datasets.entry` gives it whole."""

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
_EVIDENCE_KEYS = frozenset({"entities", "triples"})


def _names(value: object) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    for n in value:
        if not (isinstance(n, str) and n.strip()):
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
        out.append(parts)  # three names: a triple
    return tuple(out)


def _parse_evidence(where: str, entry: dict[str, object], problems: list[str]) -> Evidence | None:
    """The gold evidence of an entry, (entity names, triples) (both () when absent); None
    after a problem. ``"evidence"`` is an array of entity names, or an object
    ``{"entities": [...], "triples": [[subject, relation, object], ...]}`` (both optional)."""
    value = entry.get("evidence")
    if value is None:
        return (), ()
    if isinstance(value, dict):
        if not value.keys() <= _EVIDENCE_KEYS:
            unknown = sorted(set(value) - _EVIDENCE_KEYS)
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


#: Gives the MCQ a question without its texts holds: from its answer key and its options
#: (their keys), the one MCQ shared by every question of that form.
Shapes = Callable[[str | None, dict[str, str]], MCQ]


def parse_question(
    dataset: str, qid: str, entry: object, problems: list[str], shapes: Shapes | None = None
) -> Question | None:
    """The question ``dataset/qid`` of the file, from its entry's JSON value; None when it
    cannot be one, after appending why to ``problems`` (one line naming ``dataset/qid``).
    With ``shapes``, the question is made without its texts (``input`` is ``""`` and its
    MCQ the one ``shapes`` gives for its form), as a lean table keeps it."""
    where = f"{dataset}/{qid}"
    if not isinstance(entry, dict):
        problems.append(f"{where}: entry must be an object")
        return None
    evidence = _parse_evidence(where, entry, problems)
    if evidence is None:
        return None
    return _parse_entry(where, dataset, qid, entry, problems, evidence, shapes)


def _parse_entry(
    where: str,
    dataset: str,
    qid: str,
    entry: dict[str, object],
    problems: list[str],
    evidence: Evidence,
    shapes: Shapes | None,
) -> Question | None:
    """The question of an entry with its gold ``evidence`` (made once, with it), without
    its texts when ``shapes`` is given (:func:`parse_question`)."""
    text = entry.get("input")
    if not isinstance(text, str):
        problems.append(f"{where}: 'input' must be a string")
        return None
    if shapes is not None:
        text = ""
    output = entry.get("output")
    if output is None:
        return Question(dataset, qid, text, None, None, *evidence)
    if not isinstance(output, dict):
        problems.append(f"{where}: 'output' must be an object")
        return None
    kind = output.get("type")
    if kind == "Open":
        return _parse_open(where, dataset, qid, text, output, problems, evidence)
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
    mcq = MCQ(dict(options), answer) if shapes is None else shapes(answer, options)
    return Question(dataset, qid, text, mcq, None, *evidence)


def _parse_open(
    where: str,
    dataset: str,
    qid: str,
    text: str,
    output: dict[str, object],
    problems: list[str],
    evidence: Evidence,
) -> Question | None:
    answers = output.get("answers")
    if not isinstance(answers, list) or not answers:
        problems.append(f"{where}: 'output.answers' must be a non-empty array of strings")
        return None
    if not all(isinstance(a, str) for a in answers):
        problems.append(f"{where}: every item of 'output.answers' must be a string")
        return None
    return Question(dataset, qid, text, None, OpenAnswer(tuple(answers)), *evidence)


class Duplicate(Exception):
    """A key written twice in one JSON object."""


def unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise Duplicate
    return obj


def no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def int64(digits: str) -> int:
    # The reader of a datasets file writes it back (kag datasets import) through orjson,
    # which holds 64-bit integers only; int() of 5,000 digits is refused by Python itself.
    if len(digits.lstrip("-")) > 19 or not -(2**63) <= (value := int(digits)) < 2**64:
        raise ValueError(f"the integer {digits[:20]}... is out of the 64-bit range")
    return value


#: The escape of a UTF-16 surrogate, which Python's JSON reader takes alone.
SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def entry_decoder(parse_float: Callable[[str], float] = float) -> json.JSONDecoder:
    """The JSON reader of a datasets file (the whole file, or one entry of it): a key
    written twice raises :class:`Duplicate`, ``NaN``/``Infinity`` and integers past 64 bits
    a ValueError naming them; ``parse_float`` reads a number with a fraction or exponent."""
    return json.JSONDecoder(
        object_pairs_hook=unique_keys, parse_constant=no_constant, parse_int=int64, parse_float=parse_float
    )
