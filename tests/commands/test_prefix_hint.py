"""A ``--prefix`` that is off by its dash, or missing on a prefixed tree, is hinted at."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.grading.mcq.diagnose import prefix_hint

REPO = Path(__file__).resolve().parent.parent.parent
DATASETS = str(REPO / "examples" / "dataset" / "datasets.json")


@pytest.fixture
def prefixed(tmp_path: Path) -> Path:
    """The example tree with every result file renamed ``wekgr-<setup>.json``."""
    root = tmp_path / "results"
    shutil.copytree(REPO / "examples" / "results", root)
    for path in sorted(root.rglob("*.json")):
        path.rename(path.with_name(f"wekgr-{path.name}"))
    return root


def kag(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


DASH = (
    "kag: warning: every setup name starts with '-' ('-qwen35-9b-kag'…): the files are named"
    " 'wekgr-<setup>.json'; did you mean --prefix 'wekgr-'?\n"
)
NONE = (
    "kag: warning: every setup name starts with 'wekgr-': if the results were written with"
    " --prefix 'wekgr-', give it here too (the setups are then 'qwen35-9b-kag', 'qwen35-9b-native'…)\n"
)


@pytest.mark.parametrize("command", [["stats"], ["stats", "compare"], ["stats", "impact"]])
def test_a_prefix_without_its_dash_is_hinted_at(prefixed: Path, command: list[str]) -> None:
    code, out, err = kag(*command, "-d", DATASETS, "-r", str(prefixed), "--prefix", "wekgr")
    assert code == 0, err
    assert DASH in err and "-qwen35-9b-kag" in out  # the report itself is what the Rust tool prints


@pytest.mark.parametrize("command", [["stats"], ["stats", "compare"]])
def test_no_prefix_on_a_prefixed_tree_is_hinted_at(prefixed: Path, command: list[str]) -> None:
    code, _, err = kag(*command, "-d", DATASETS, "-r", str(prefixed))
    assert code == 0, err
    assert NONE in err


def test_the_right_prefix_gives_no_hint(prefixed: Path) -> None:
    code, _, err = kag("stats", "-d", DATASETS, "-r", str(prefixed), "--prefix", "wekgr-")
    assert code == 0, err
    assert "every setup name" not in err
    code, _, err = kag("stats", "-d", DATASETS, "-r", str(REPO / "examples" / "results"))
    assert code == 0 and "every setup name" not in err


@pytest.mark.parametrize(
    ("setups", "prefix", "filtered", "hint"),
    [
        (["-a", "-b"], "run", False, "did you mean --prefix 'run-'?"),
        (["_a"], "run", False, "did you mean --prefix 'run_'?"),
        (["-a", "b"], "run", False, None),  # not every setup: a name of its own
        (["-a", "-b"], "run-", False, None),  # the prefix ends in a dash already
        (["x-a", "x-b"], "", False, "every setup name starts with 'x-'"),
        (["x/x-a", "y/x-b"], "", False, "every setup name starts with 'x-'"),  # labelled trees
        (["x-a", "x-b"], "", True, None),  # --setup 'x-*' chose them
        (["x-a"], "", False, None),  # one setup: nothing to compare
        (["x-a", "y-b"], "", False, None),
        (["x-a", "x"], "", False, None),
        ([], "run", False, None),
    ],
)
def test_prefix_hint(setups: list[str], prefix: str, filtered: bool, hint: str | None) -> None:
    got = prefix_hint(setups, prefix, filtered)
    assert (got is None) if hint is None else (got is not None and hint in got)
