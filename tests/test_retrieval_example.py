"""docs/retrieval.md works out the ``retrieval_quality`` blocks of examples/retrieval by hand:
they are what ``kag stats`` prints (the golden case ``ex-stats-retrieval-json`` pins the whole
report)."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from kag.cli import app
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "retrieval"


def _doc_blocks() -> list[dict]:
    text = (REPO / "docs" / "retrieval.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, flags=re.DOTALL)
    return [
        json.loads("{" + b + "}")["retrieval_quality"]
        for b in blocks
        if b.lstrip().startswith('"retrieval_quality"')
    ]


def test_the_hand_worked_blocks_are_what_kag_prints():
    result = CliRunner().invoke(
        app,
        ["stats", "-d", str(EXAMPLE / "datasets.json"), "-r", str(EXAMPLE / "results"), "--format", "json"],
    )
    assert result.exit_code == 0, result.stderr
    setups = {s["setup"]: s for s in json.loads(result.stdout)["setups"]}
    printed = {name: s["overall"]["retrieval_quality"] for name, s in setups.items()}
    assert printed["native"] is None
    # One dataset: its block is the setup's.
    assert all(s["per_dataset"]["vitamins"]["retrieval_quality"] == printed[n] for n, s in setups.items())
    assert _doc_blocks() == [printed["rust-kag"], printed["rust-kag"], printed["kag-graph"]]


def test_the_example_tree_is_what_its_script_writes(tmp_path):
    import shutil
    import subprocess
    import sys

    copy = tmp_path / "retrieval"
    shutil.copytree(EXAMPLE, copy)
    shutil.rmtree(copy / "results")
    subprocess.run([sys.executable, str(copy / "make_results.py")], check=True, cwd=REPO)
    for path in sorted((EXAMPLE / "results").rglob("*.json")):
        assert (copy / path.relative_to(EXAMPLE)).read_bytes() == path.read_bytes(), path
