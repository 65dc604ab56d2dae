"""A small result tree with open and MCQ answers, shared by the judge tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from kag.results import ErrorResult, OkResult, OkStats, Result, result_path, write_result

DATASETS: dict[str, Any] = {
    "geo": {
        "1": {
            "input": "Capital of France?",
            "output": {"type": "Open", "answers": ["Paris", "City of Paris"]},
        },
        "2": {"input": "What is 2+2?", "output": {"type": "Open", "answers": ["4", "four"]}},
        "3": {"input": "Largest animal?", "output": {"type": "Open", "answers": ["Blue whale"]}},
    },
    "mc": {
        "1": {
            "input": "Is water wet?",
            "output": {"type": "MCQ", "options": {"a": "yes", "b": "no"}, "answer": "a"},
        },
        "2": {"input": "Say hi"},
    },
}

# setup -> (dataset, question) -> result
ANSWERS: dict[str, dict[tuple[str, str], Result]] = {
    "s1": {
        ("geo", "1"): OkResult("paris", OkStats()),  # exact match
        ("geo", "2"): OkResult("five", OkStats()),  # no exact match
        ("geo", "3"): OkResult("the blue whale.", OkStats()),  # exact match
        ("mc", "1"): OkResult("a", OkStats()),  # strict grade: correct
        ("mc", "2"): OkResult("hi", OkStats()),  # free-form: never judged
    },
    "s2": {
        ("geo", "1"): OkResult("Lyon", OkStats()),  # no exact match
        ("geo", "2"): OkResult("four", OkStats()),  # exact match
        ("geo", "3"): ErrorResult("timeout"),  # not an answer: not judged
        ("mc", "1"): OkResult("The answer is a", OkStats()),  # strict grade: wrong
    },
}


def marker(response: str) -> str:
    """The part of the built-in prompt that names one response (each response is unique)."""
    return f"Response to grade:\n{response}\n"


# What the judge says about each response; anything else gets the server's default reply.
REPLIES = {
    marker("paris"): "CORRECT",
    marker("five"): "INCORRECT",
    marker("the blue whale."): "Maybe, hard to say.",  # unusable
    marker("a"): "CORRECT",
    marker("Lyon"): "**INCORRECT**",
    marker("four"): "INCORRECT: it does not say 4",  # disagrees with the exact match
    marker("The answer is a"): "<think>is it INCORRECT?</think> CORRECT",  # disagrees with the strict grade
}


def make_tree(root: Path, prefix: str = "") -> Path:
    """Write ``datasets.json`` beside ``root`` and the answers of ``ANSWERS`` under it."""
    root.mkdir(parents=True, exist_ok=True)
    datasets = root.parent / "datasets.json"
    datasets.write_bytes(orjson.dumps(DATASETS))
    for setup, answers in ANSWERS.items():
        for (dataset, question), result in answers.items():
            write_result(result_path(root, dataset, question, prefix, setup), result)
    return datasets
