"""A result tree, human labels and a judge with known biases, scripted on the loopback fake
server through its reply markers (deterministic by the prompt's content, never by timing):

- verdicts: the judge says what the human label says, except on the answers of DISAGREE
  (it says the opposite) and of GARBAGE (one answer in ten: a reply naming no verdict);
- pairwise: the judge always prefers the answer shown first (so its choice flips with the
  order) on every criterion but ``directness``, where it always prefers setup A's answer;
  one question in ten gets a reply naming no answer.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from kag.results import OkResult, OkStats, result_path, write_result

N = 40  # questions; two setups answer each
SETUPS = ("a", "b")


def response(setup: str, i: int) -> str:
    """Setup a answers "ans<i>" (an exact match) for i not divisible by 3, else a paraphrase
    the exact match rejects; setup b answers "ans<i>." (an exact match too), wrongly every
    fourth question."""
    if setup == "a":
        return f"ans{i}" if i % 3 else f"it is ans{i}, I think"
    return f"nope{i}" if i % 4 == 0 else f"ans{i}."


def label(setup: str, i: int) -> bool:
    """The human label: right unless it is b's wrong answer, or one of a's paraphrases of i % 9 == 0."""
    if setup == "b":
        return i % 4 != 0
    return i % 9 != 0


# The answers the judge disagrees with the label on, and those it answers with garbage.
DISAGREE = {("a", i) for i in (1, 2, 5)} | {("b", i) for i in (4, 7)}
GARBAGE = {(s, i) for s in SETUPS for i in range(N) if i % 10 == 3}


def verdict_marker(text: str) -> str:
    return f"Response to grade:\n{text}\n"


def verdict_replies() -> dict[str, str]:
    replies = {}
    for setup in SETUPS:
        for i in range(N):
            if (setup, i) in GARBAGE:
                replies[verdict_marker(response(setup, i))] = "I would rather not say."
                continue
            said = label(setup, i) != ((setup, i) in DISAGREE)
            replies[verdict_marker(response(setup, i))] = "CORRECT" if said else "INCORRECT"
    return replies


def pairwise_replies() -> dict[str, str]:
    """Markers checked in order: garbage first, then directness with A's answer second (picked:
    ANSWER 2); every other pairwise prompt gets ANSWER 1 (the first shown)."""
    replies = {f"Question {i}?\n\nAnswer 1": "hmm, both are fine" for i in range(N) if i % 10 == 7}
    for i in range(N):
        replies[f"Answer 2:\n{response('a', i)}\n\nCriterion: directness"] = "ANSWER 2"
    replies["Reply with exactly one of: ANSWER 1, ANSWER 2, TIE."] = "ANSWER 1"
    return replies


def sample(share: float, seed: int = 0) -> list[tuple[str, int]]:
    """A random sample (seeded) of ``share`` of every setup's answers: labels drawn at random,
    as the corrected accuracy asks."""
    answers = [(s, i) for s in SETUPS for i in range(N)]
    return sorted(random.Random(seed).sample(answers, round(share * len(answers))))


def make_bias_tree(root: Path) -> Path:
    """datasets.json beside ``root`` and both setups' answers under it; returns the datasets file."""
    root.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {
        "qa": {
            str(i): {"input": f"Question {i}?", "output": {"type": "Open", "answers": [f"ans{i}"]}}
            for i in range(N)
        }
    }
    datasets = root.parent / "datasets.json"
    datasets.write_bytes(orjson.dumps(data))
    for setup in SETUPS:
        for i in range(N):
            write_result(result_path(root, "qa", str(i), "", setup), OkResult(response(setup, i), OkStats()))
    return datasets


def write_labels(path: Path, answers: list[tuple[str, int]], annotators: tuple[str, ...] = ("",)) -> Path:
    """A labels file (CSV or JSON Lines by ``path``'s suffix) labelling ``answers`` as
    :func:`label` says, once per annotator (annotator "r2" disagrees on the first answer)."""
    rows = []
    for setup, i in answers:
        for who in annotators:
            value = label(setup, i) != (who == "r2" and (setup, i) == answers[0])
            rows.append({"dataset": "qa", "question": str(i), "setup": setup,
                         "label": "correct" if value else "incorrect", "annotator": who})  # fmt: skip
    if path.suffix == ".csv":
        lines = ["dataset,question,setup,label,annotator"]
        lines += [f"{r['dataset']},{r['question']},{r['setup']},{r['label']},{r['annotator']}" for r in rows]
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    return path
