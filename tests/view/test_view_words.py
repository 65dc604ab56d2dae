"""`kag view` speaks the words of `kag stats --format jsonl`: a grid cell of ``/api/questions``
and a setup of ``/api/question/...`` have the export row's ``outcome``, ``response`` (its
head), ``extracted`` (the key ``--extract`` read, or null) and ``extracted_outcome``, with
the same values, and the row's ``gold``; on a tree graded with ``--extract letter``."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from kag.cli import app
from kag.datasets import load_datasets
from kag.results import result_path, write_result
from kag.view.index import Index, Tree
from kag.view.query import View
from kag.view.record_rows import ANSWER_CHARS
from tests.result_helpers import ok_result
from tests.view.helpers import make_tree, serving

runner = CliRunner()

# Replies --extract letter reads a key from (or none), beside make_tree's bare letters.
WORDY = {
    "q2": "The answer is A.",  # strict wrong, extracted right
    "q3": "I would say (C) " + "because " * 40,  # longer than the grid's head, extracted wrong
    "q4": "I cannot tell.",  # nothing extracted
}


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    datasets, tree = make_tree(tmp_path)
    for question, reply in WORDY.items():
        write_result(result_path(tree, "med", question, "", "native"), ok_result(reply, model="m"))
    return datasets, tree


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def test_the_view_api_and_the_export_rows_say_the_same_words(tmp_path: Path) -> None:
    datasets, tree = _tree(tmp_path)
    result = runner.invoke(
        app, ["stats", "-d", str(datasets), "-r", str(tree), "--extract", "letter", "--format", "jsonl"]
    )
    assert result.exit_code == 0, result.output
    rows = {(r["question"], r["setup"]): r for r in map(orjson.loads, result.stdout.splitlines())}
    view = View(
        Index(tmp_path / "i.sqlite", load_datasets(datasets), [Tree("", str(tree.resolve()))], "", "letter"),
        scan=True,
    )
    with serving(view) as url:
        grid = _get(url + "api/questions")
        pages = {q: _get(url + f"api/question/med/{q}") for q in {q for q, _ in rows}}
        with urllib.request.urlopen(url + "q/med/q2", timeout=30) as r:
            q2_page = r.read().decode()
        with urllib.request.urlopen(url + "questions?setup=native&dataset=med", timeout=30) as r:
            grid_page = r.read().decode()

    seen = 0
    for row in grid["rows"]:
        for setup, cell in row["cells"].items():
            if cell is None:
                continue
            want = rows[(row["question"], setup)]
            seen += 1
            assert row["gold"] == want["gold"]
            # ``reached``: the view's own (whether retrieval reached the gold evidence).
            assert set(cell) == {"outcome", "response", "extracted", "extracted_outcome", "option", "reached"}
            response = want["response"][:ANSWER_CHARS] if want["response"] is not None else None
            assert cell["response"] == response
            assert cell["extracted"] == want["extracted"]
            # The export writes a grade's name (OK), the view its value (ok), as its filters take it.
            assert cell["outcome"].upper() == want["outcome"]
            assert cell["extracted_outcome"].upper() == want["extracted_outcome"]
            page = next(s for s in pages[row["question"]]["setups"] if s["setup"] == setup)
            assert pages[row["question"]]["gold"] == want["gold"]
            assert page["response"] == want["response"]
            assert (page["extracted"], page["extracted_outcome"]) == (
                cell["extracted"],
                cell["extracted_outcome"],
            )
    assert seen == len(rows) == 16
    # Each kind of extraction is there: a key beside a strict wrong, a wrong key, none at all.
    native = {r["question"]: r["cells"]["native"] for r in grid["rows"]}
    assert native["q2"] | {"option": None} == {
        "outcome": "wrong",
        "response": "The answer is A.",
        "extracted": "A",
        "extracted_outcome": "ok",
        "option": None,
        "reached": None,
    }
    assert (native["q3"]["extracted"], native["q3"]["extracted_outcome"]) == ("C", "wrong")
    assert len(native["q3"]["response"]) == ANSWER_CHARS
    assert (native["q4"]["extracted"], native["q4"]["extracted_outcome"]) == (None, "err")
    # The pages read the grades under their new names: the badges and marks are still drawn.
    assert 'class="badge ext ok"' in q2_page and "extracted: right</span>" in q2_page
    assert '<span class="ext ok"' in grid_page and "ext: right</span>" in grid_page
    assert "ext: wrong</span>" in grid_page and "ext: none</span>" in grid_page
