"""Facts the docs state that the code can check: the --format lists, the library signature
(the walk's and its request's), and the test files .ci/run names."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

from kag.commands.stats import FORMATS
from kag.grading.mcq.request import GradeRequest
from kag.grading.mcq.walk import grade_tree

REPO = Path(__file__).resolve().parent.parent
STATS = (REPO / "docs" / "stats.md").read_text()


def test_the_stats_format_lists_name_every_format() -> None:
    row = next(line for line in STATS.splitlines() if line.startswith("| `--format "))
    listed = row.split("`")[1].removeprefix("--format ").replace("\\|", "|").split("|")
    assert listed == list(FORMATS)
    synopsis = next(line for line in STATS.splitlines() if line.startswith("kag stats --datasets FILE"))
    assert f"[--format {'|'.join(FORMATS)}]" in synopsis
    readme = (REPO / "README.md").read_text()
    assert f"`--format {'|'.join(f for f in FORMATS if f != 'text')}`" in readme


def _documented_parameters(start: str) -> list[str]:
    """The parameter names of the docs/stats.md line that starts with ``start``."""
    line = next(line for line in STATS.splitlines() if line.startswith(start))
    return re.findall(r"(\w+)(?:=[^,)]*)?[,)]", line.split("(", 1)[1].split(" -> ")[0].split("`")[0])


def test_the_documented_grade_tree_signature_is_current() -> None:
    assert _documented_parameters("- `grade_tree(") == list(inspect.signature(grade_tree).parameters)


def test_the_documented_request_fields_are_current() -> None:
    documented = _documented_parameters("- `GradeRequest(")
    assert documented == [f.name for f in dataclasses.fields(GradeRequest)]


def test_the_ctx_len_column_is_explained_as_prompt_bytes() -> None:
    row = next(line for line in STATS.splitlines() if line.startswith("| CTX_LEN"))
    assert "byte length of `ok.stats.prompt`" in row and "average context length" in row


def test_ci_names_test_files_that_exist() -> None:
    named = re.findall(r"tests/[\w/]+\.py", (REPO / ".ci" / "run").read_text())
    assert named and all((REPO / path).is_file() for path in named), named
