"""The `compare --epochs all` console example of docs/stats.md is what kag prints for the tree it describes."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from kag.cli import app
from kag.results import ErrorResult, OkResult, epoch_result_path, write_result

DOC = Path(__file__).resolve().parent.parent / "docs/stats.md"

# The tree the page describes: per question, the answers of each setup's epochs.
ANSWERS = {
    "kag": {"0": ["A", "A", "A"], "1": ["A", "B", "A"], "2": ["B", "B", "B"], "3": ["A", None, "B"]},
    "native": {"0": ["A"], "1": ["B"], "2": ["B"], "3": ["B"]},
}


def build(folder: Path) -> None:
    mcq = {"type": "MCQ", "options": {"A": "yes", "B": "no"}, "answer": "A"}
    doc = {"mcq": {q: {"input": f"question {q}", "output": mcq} for q in "0123"}}
    (folder / "datasets.json").write_text(json.dumps(doc))
    for setup, questions in ANSWERS.items():
        for question, answers in questions.items():
            for epoch, answer in enumerate(answers, start=1):
                result = ErrorResult("Failed to generate a response") if answer is None else OkResult(answer)
                write_result(epoch_result_path(folder / "results", "mcq", question, "", setup, epoch), result)


def test_the_console_example(tmp_path: Path, monkeypatch) -> None:
    build(tmp_path)
    monkeypatch.chdir(tmp_path)
    (block,) = re.findall(
        r"```console\n(\$ kag stats compare[^\n]*--epochs all.*?)```", DOC.read_text(), re.DOTALL
    )
    command, _, expected = block.partition("\n")
    assert command.startswith("$ kag ")
    result = CliRunner().invoke(app, shlex.split(command[len("$ kag ") :]))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected
