"""`kag stats compare` and `kag stats impact` take `--evidence-match` and `--node-name` as
`kag stats` does: the same options, checked the same way, given before or after the
sub-command name, and they change what is reached on examples/retrieval."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from tests.conftest import REPO

runner = CliRunner()
EXAMPLE = REPO / "examples" / "retrieval"
RESULTS = str(EXAMPLE / "results")


@pytest.fixture
def variant(tmp_path: Path) -> str:
    """examples/retrieval's datasets file with scurvy's first gold triple worded otherwise
    ("is caused by", "deficiencies"): exact matching no longer finds it in kag-graph's
    retrieval, fuzzy matching still does."""
    data = json.loads((EXAMPLE / "datasets.json").read_text())
    worded = ["Scurvy", "is caused by", "Vitamin C deficiencies"]
    data["vitamins"]["scurvy"]["evidence"]["triples"][0] = worded
    path = tmp_path / "datasets.json"
    path.write_text(json.dumps(data))
    return str(path)


def _compare(datasets: str, *extra: str, fmt: str = "json", before: tuple[str, ...] = ()) -> str:
    args = ["stats", *before, "compare", "-d", datasets, "-r", RESULTS, "--baseline", "rust-kag"]
    out = runner.invoke(app, [*args, "--format", fmt, "-q", *extra])
    assert out.exit_code == 0, out.stderr
    return out.stdout


def _reached(datasets: str, *extra: str, before: tuple[str, ...] = ()) -> dict[str, tuple[int, int]]:
    report = json.loads(_compare(datasets, *extra, before=before))
    return {r["setup"]: (r["setup_reached"], r["baseline_reached"]) for r in report["reached"]}


def _impact(datasets: str, *extra: str, fmt: str = "json") -> str:
    args = ["stats", "impact", "-d", datasets, "-r", RESULTS, "kag-graph", "rust-kag", "--native", "native"]
    out = runner.invoke(app, [*args, "--format", fmt, "-q", *extra])
    assert out.exit_code == 0, out.stderr
    return out.stdout


def _gold_buckets(datasets: str, *extra: str) -> dict[str, dict[str, int]]:
    impacts = json.loads(_impact(datasets, *extra))["impacts"]
    return {i["setup"]: {b["label"]: b["n"] for b in i["reached_buckets"]} for i in impacts}


def test_compare_fuzzy_reaches_a_question_exact_does_not(variant: str) -> None:
    assert _reached(variant)["kag-graph"] == (0, 1)
    assert _reached(variant, "--evidence-match", "exact")["kag-graph"] == (0, 1)
    assert _reached(variant, "--evidence-match", "fuzzy")["kag-graph"] == (1, 1)
    # The table says so in text too.
    exact = _compare(variant, fmt="text")
    fuzzy = _compare(variant, "--evidence-match", "fuzzy", fmt="text")
    assert "kag-graph  2      0.00  50.00   -50.00  0  1" in exact
    assert "kag-graph  2     50.00  50.00    +0.00  1  1" in fuzzy


def test_compare_takes_the_options_before_the_sub_command_name_too(variant: str) -> None:
    before = _reached(variant, before=("--evidence-match", "fuzzy"))
    assert before["kag-graph"] == (1, 1)
    # After the name wins.
    after = _reached(variant, "--evidence-match", "exact", before=("--evidence-match", "fuzzy"))
    assert after["kag-graph"] == (0, 1)
    assert _reached(str(EXAMPLE / "datasets.json"), before=("--node-name", "ui"))["kag-graph"] == (1, 0)


def test_compare_node_name_reads_other_keys_from_the_rust_tools_text() -> None:
    datasets = str(EXAMPLE / "datasets.json")
    # rust-kag's files name their nodes by `name` only: without it no node has a name and
    # the baseline reaches nothing; kag-graph's recorded graph carries its names.
    assert _reached(datasets)["kag-graph"] == (1, 1)
    assert _reached(datasets, "--node-name", "ui")["kag-graph"] == (1, 0)
    assert _reached(datasets, "--node-name", "ui,name")["kag-graph"] == (1, 1)


def test_impact_fuzzy_moves_a_question_from_missed_to_reached(variant: str) -> None:
    assert _gold_buckets(variant)["kag-graph"] == {"1-10 · missed": 2}
    assert _gold_buckets(variant, "--evidence-match", "fuzzy")["kag-graph"] == {
        "1-10 · reached": 1,
        "1-10 · missed": 1,
    }
    text = _impact(variant, "--evidence-match", "fuzzy", fmt="text")
    gold = text.split("VERTICES · GOLD")[1]
    assert "1-10 · reached   1" in gold.split("KAG setup: rust-kag")[0]
    assert "1-10 · reached" not in _impact(variant, fmt="text").split("KAG setup: rust-kag")[0]


def test_impact_node_name(tmp_path: Path) -> None:
    datasets = str(EXAMPLE / "datasets.json")
    assert _gold_buckets(datasets)["rust-kag"] == {"1-10 · reached": 2, "1-10 · missed": 1}
    assert _gold_buckets(datasets, "--node-name", "ui")["rust-kag"] == {"1-10 · missed": 3}


@pytest.mark.parametrize("command", ["compare", "impact"])
@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--evidence-match", "nope", "--evidence-match must be one of exact, fuzzy, embedding (got 'nope')"),
        ("--node-name", " , ", "--node-name needs at least one property key"),
    ],
)
@pytest.mark.parametrize("where", ["after", "before"])
def test_bad_values_are_refused_as_kag_stats_refuses_them(
    command: str, option: str, value: str, message: str, where: str
) -> None:
    common = ["-d", str(EXAMPLE / "datasets.json"), "-r", RESULTS]
    args = (
        ["stats", command, *common, option, value]
        if where == "after"
        else ["stats", option, value, command, *common]
    )
    out = runner.invoke(app, args)
    stats = runner.invoke(app, ["stats", *common, option, value])
    assert (out.exit_code, stats.exit_code) == (2, 2)
    assert message in out.stderr
    assert out.stderr == stats.stderr
    assert out.stdout == ""


@pytest.mark.parametrize("command", ["compare", "impact"])
def test_help_shows_the_options_as_kag_stats_does(command: str) -> None:
    from kag.commands._options import EvidenceMatchOpt, NodeNameOpt

    help_text = runner.invoke(app, ["stats", command, "--help"], env={"COLUMNS": "200"}).stdout
    for flag, opt in (("--evidence-match", EvidenceMatchOpt), ("--node-name", NodeNameOpt)):
        assert flag in help_text
        assert " ".join(opt.__metadata__[0].help.split()[:6]) in " ".join(help_text.split())
