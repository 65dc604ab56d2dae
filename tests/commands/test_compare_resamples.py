"""`kag stats compare --resamples` has an upper bound: past it, exit 2 before any work."""

from __future__ import annotations

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from tests.commands.test_compare_cli import PREFIX, build_tree

runner = CliRunner()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    datasets, results = build_tree(tmp_path_factory.mktemp("tree"))
    return ["-d", str(datasets), "-r", str(results), "--prefix", PREFIX]


def test_resamples_past_the_bound_is_exit_2(tree: list[str]) -> None:
    result = runner.invoke(app, ["stats", "compare", *tree, "--resamples", "1000001"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("kag: error: Invalid value for '--resamples'")
    assert "1000000" in result.stderr and result.stderr.count("\n") == 1


def test_resamples_at_the_bound_runs(tree: list[str]) -> None:
    result = runner.invoke(app, ["stats", "compare", *tree, "--resamples", "1000000", "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["bootstrap"]["resamples"] == 1_000_000
