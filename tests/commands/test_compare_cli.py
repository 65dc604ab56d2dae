"""`kag stats compare`, `flips` and `impact` end to end on result trees written by kag.results.

The tree (``build_tree``), worked out by hand:

- d1: questions 0..29, answer "A"; d2: questions 0..9, answer "b"; plus a free-form
  question and an MCQ without answer (both ignored), and one unreadable file.
- native (model m1): right on d1 0-19 and d2 0-4 -> 25/40.
- kag (model m1 + retrieval): right on d1 0-4, 20-21 and d2 0-9; no file for d1 28;
  d1 29 is an error -> 17/39.
- other (model m2): right on all of d1, wrong on all of d2 -> 30/40 (best: default baseline).

kag vs native, 39 paired: + = 7 (d1 20,21; d2 5-9), - = 15 (d1 5-19), exact McNemar
p = 2 * sum_{i<=7} C(22,i) / 2^22 = 561200/4194304 = 0.13380050659179688.
other vs native, 40 paired: + = 10 (d1 20-29), - = 5 (d2 0-4), p = 2*4944/2^15 = 0.3017578125.
Holm over both: kag 0.1338*2 = 0.2676, other max(0.2676, 0.30176*1) = 0.30176.
On d1 alone: kag + = 2, - = 15, p = 308/131072 = 0.002349853515625; other + = 10, - = 0,
p = 2/1024; Holm: 0.00390625 for both -> kag significantly worse, other better.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest
import typer
from typer.testing import CliRunner

from kag.render.formats import ReportFormat
from kag.results import ErrorResult, OkResult, Timing, result_path, write_result
from tests.result_helpers import neo4j_retrieval, ok_result

PREFIX = "pre-"
P_KAG_NATIVE = 561200 / 4194304
P_OTHER_NATIVE = 0.3017578125

runner = CliRunner()


def _ok(text: str, model: str, vertices: int | None = None, blank: bool = False) -> OkResult:
    retrieval = None
    if vertices is not None:
        subgraph = "" if blank else "(1)-[:R]->(2)"
        retrieval = neo4j_retrieval(
            subgraph,
            vertices,
            vertices,
            vertices,
            db_time=Timing(0, 5),
            time=Timing(0, 10),
            document="q",
            vector=[0.1],
        )
    return ok_result(
        text,
        model=model,
        tokens=100,
        augmented=retrieval is not None,
        prompt="p",
        retrieval=retrieval,
        time=Timing(1, 0),
    )


def _kag_vertices(dataset: str, q: int) -> int:
    if dataset == "d1":
        return 50 if q < 5 else 5 if q < 20 else 500
    return 2000


def build_tree(root: Path, names: Sequence[str] = ("native", "kag", "other")) -> tuple[Path, Path]:
    """The datasets file and result tree of the module docstring; returns (datasets, results)."""
    mcq = {"type": "MCQ", "options": {"A": "yes", "B": "no", "C": "maybe"}, "answer": "A"}
    data = {
        "d1": {str(q): {"input": f"question {q}?", "output": mcq} for q in range(30)},
        "d2": {
            str(q): {
                "input": f"q{q}",
                "output": {"type": "MCQ", "options": {"a": "x", "b": "y", "c": "z"}, "answer": "b"},
            }
            for q in range(10)
        },
    }
    data["d1"]["free"] = {"input": "explain"}
    data["d1"]["noans"] = {"input": "?", "output": {"type": "MCQ", "options": {"A": "1", "B": "2"}}}
    datasets = root / "datasets.json"
    datasets.write_bytes(orjson.dumps(data))
    results = root / "results"

    def put(dataset: str, q: str, setup: str, result: OkResult | ErrorResult) -> None:
        write_result(result_path(results, dataset, q, PREFIX, setup), result)

    for q in range(30):
        if "native" in names:
            put("d1", str(q), "native", _ok("A" if q < 20 else "B", "m1"))
        if "other" in names:
            put("d1", str(q), "other", _ok("A", "m2"))
        if "kag" in names and q != 28:
            if q == 29:
                put("d1", str(q), "kag", ErrorResult("Failed during the knowledge retrieval phase (KAG)"))
            elif q == 5:
                put("d1", str(q), "kag", _ok("I think C because\n the graph | says so", "m1", 5))
            else:
                put(
                    "d1",
                    str(q),
                    "kag",
                    _ok("A" if q < 5 or q in (20, 21) else "C", "m1", _kag_vertices("d1", q)),
                )
    for q in range(10):
        if "native" in names:
            put("d2", str(q), "native", _ok("b" if q < 5 else "a", "m1"))
        if "other" in names:
            put("d2", str(q), "other", _ok("c", "m2"))
        if "kag" in names:
            put("d2", str(q), "kag", _ok(" B\n", "m1", 0 if q == 9 else 2000, blank=q == 9))
    for q in ("free", "noans"):
        put("d1", q, "native", _ok("A", "m1"))
    (results / "d1" / "3" / f"{PREFIX}broken.json").write_text("{not json")
    (results / "d1" / "3" / "unrelated.json").write_text("{}")
    return datasets, results


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The shared tree's options (read-only: no test writes into it)."""
    datasets, results = build_tree(tmp_path_factory.mktemp("tree"))
    return ["-d", str(datasets), "-r", str(results), "--prefix", PREFIX]


def make_app() -> typer.Typer:
    """The real kag CLI: `kag stats` registers compare, flips and impact."""
    from kag.cli import app

    return app


APP = make_app()


def run(*args: str):  # -> click Result
    return runner.invoke(APP, ["stats", *args])


def _row(stdout: str, setup: str) -> list[str]:
    for line in stdout.splitlines():
        if line.startswith(setup + " "):
            return line.split()
    raise AssertionError(f"no row for {setup} in:\n{stdout}")


def _no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


# ---------------------------------------------------------------- compare


def test_compare_text_against_native(tree: list[str]) -> None:
    result = run("compare", *tree, "--baseline", "native")
    assert result.exit_code == 0, result.stderr
    kag = _row(result.stdout, "kag")
    # SETUP N ACC% BASE% DIFF CI-low CI-high + - TEST p p(Holm) VERDICT...
    assert kag[1:5] == ["39", "43.59", "64.10", "-20.51"]  # 17/39, 25/39, -8/39
    assert kag[7:10] == ["7", "15", "exact"]
    assert kag[10:12] == ["0.1338", "0.2676"]
    assert " ".join(kag[12:]) == "no significant difference"
    other = _row(result.stdout, "other")
    assert other[1:5] == ["40", "75.00", "62.50", "+12.50"]
    assert other[7:12] == ["10", "5", "exact", "0.3018", "0.3018"]
    assert "seed 0" in result.stdout and "10000 resamples" in result.stdout
    assert "Baseline: native" in result.stdout
    assert "broken" in result.stderr  # the unreadable file is warned about
    assert "0 of 2 comparison(s) against native significant at alpha 0.05 (Holm)." in result.stderr


def test_compare_json_hand_values(tree: list[str]) -> None:
    result = run(
        "compare", *tree, "--baseline", "native", "--format", "json", "--seed", "11", "--resamples", "2000"
    )
    assert result.exit_code == 0, result.stderr
    doc = orjson.loads(result.stdout)
    assert doc["baseline"] == "native" and doc["correction"] == "holm" and doc["exact_below"] == 25
    assert doc["bootstrap"] == {"resamples": 2000, "seed": 11, "confidence": 0.95}
    by = {c["setup"]: c for c in doc["comparisons"]}
    assert list(by) == ["kag", "other"]
    kag = by["kag"]
    assert kag["paired_questions"] == 39
    assert (kag["setup_correct"], kag["baseline_correct"], kag["setup_only"], kag["baseline_only"]) == (
        17,
        25,
        7,
        15,
    )
    assert kag["difference"] == pytest.approx(-8 / 39)
    assert kag["mcnemar"] == {"b": 7, "c": 15, "method": "exact", "statistic": 7.0, "p_value": P_KAG_NATIVE}
    assert kag["p_holm"] == pytest.approx(2 * P_KAG_NATIVE)
    assert by["other"]["p_holm"] == pytest.approx(P_OTHER_NATIVE)
    low, high = kag["difference_ci"]
    assert low <= kag["difference"] <= high and low < 0
    assert kag["significant"] is False and kag["verdict"] == "no significant difference"
    assert doc["regressions"] == []


def test_compare_seed_makes_the_ci_reproducible(tree: list[str]) -> None:
    def ci(seed: str) -> list[float]:
        result = run(
            "compare", *tree, "--baseline", "native", "--format", "json", "--seed", seed, "--resamples", "500"
        )
        return orjson.loads(result.stdout)["comparisons"][0]["difference_ci"]

    assert ci("3") == ci("3")
    assert ci("3") != ci("4")


def test_default_baseline_is_the_best_ranked_setup(tree: list[str]) -> None:
    result = run("compare", *tree, "--format", "json", "--resamples", "200")
    assert result.exit_code == 0, result.stderr
    doc = orjson.loads(result.stdout)
    assert doc["baseline"] == "other"  # 30/40
    assert [c["setup"] for c in doc["comparisons"]] == ["kag", "native"]


def test_options_given_before_the_subcommand(tree: list[str]) -> None:
    result = run(*tree, "compare", "--baseline", "native", "--format", "json", "--resamples", "200")
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["comparisons"][0]["paired_questions"] == 39


def test_fail_if_worse_than_fails_only_on_a_significant_regression(tree: list[str]) -> None:
    # kag is 20 points below native overall but not significantly: the gate passes.
    passed = run("compare", *tree, "--fail-if-worse-than", "native", "--resamples", "200")
    assert passed.exit_code == 0, passed.stderr
    # On d1 alone kag loses 15 to 2: Holm p = 0.00390625 <= 0.05 -> exit 1, naming it.
    failed = run(
        "compare",
        *tree,
        "--dataset",
        "d1",
        "--fail-if-worse-than",
        "native",
        "--format",
        "json",
        "--resamples",
        "200",
    )
    assert failed.exit_code == 1
    doc = orjson.loads(failed.stdout)  # the report is still printed in full
    by = {c["setup"]: c for c in doc["comparisons"]}
    assert by["kag"]["mcnemar"]["p_value"] == 0.002349853515625
    assert by["kag"]["p_holm"] == pytest.approx(0.00390625)
    assert by["other"]["p_holm"] == pytest.approx(0.00390625)
    assert (by["kag"]["verdict"], by["other"]["verdict"]) == ("worse", "better")
    assert doc["regressions"] == ["kag"]
    error = [line for line in failed.stderr.splitlines() if line.startswith("kag: error:")]
    assert len(error) == 1 and "kag:" in error[0] and "significantly worse than native" in error[0]
    assert "other" not in error[0]
    # A stricter alpha turns the same regression into a pass.
    strict = run(
        "compare",
        *tree,
        "--dataset",
        "d1",
        "--fail-if-worse-than",
        "native",
        "--alpha",
        "0.001",
        "--resamples",
        "200",
    )
    assert strict.exit_code == 0, strict.stderr


def test_format_given_before_the_subcommand(tree: list[str]) -> None:
    result = run("--format", "json", *tree, "compare", "--baseline", "native", "--resamples", "100")
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["baseline"] == "native"
    after_wins = run("--format", "json", *tree, "compare", "--baseline", "native", "--format", "markdown")
    assert after_wins.stdout.startswith("### Comparisons against `native`")
    html_flips = run("--format", "html", *tree, "flips", "kag", "native")
    assert html_flips.exit_code == 2
    assert "--format html: not available here (text, json, markdown)" in html_flips.stderr


def test_setup_filter_keeps_the_baseline(tree: list[str]) -> None:
    result = run(
        "compare", *tree, "--setup", "k*", "--baseline", "native", "--format", "json", "--resamples", "200"
    )
    assert result.exit_code == 0, result.stderr
    assert [c["setup"] for c in orjson.loads(result.stdout)["comparisons"]] == ["kag"]


def test_compare_markdown(tree: list[str]) -> None:
    result = run("compare", *tree, "--baseline", "native", "--format", "markdown", "--resamples", "200")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "### Comparisons against `native`"
    assert lines[2].startswith("| SETUP | N | ACC% |")
    assert lines[3].startswith("|---|---:|")
    assert lines[4].startswith("| kag | 39 | 43.59 | 64.10 | -20.51 |")


def test_compare_html_to_a_file(tree: list[str], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = run(
        "compare",
        *tree,
        "--baseline",
        "native",
        "--format",
        "html",
        "--output",
        str(out),
        "--resamples",
        "200",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "Retrieval impact" in page and "Per-question flips" in page
    assert not (tmp_path / "report.html.tmp").exists()


@pytest.mark.parametrize("fmt", [f.value for f in ReportFormat])
def test_every_compare_format_renders(tree: list[str], fmt: str) -> None:
    result = run("compare", *tree, "--baseline", "native", "--format", fmt, "--resamples", "100")
    assert result.exit_code == 0, result.stderr
    assert "kag" in result.stdout and "other" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--baseline", "nope"], "setup 'nope': no such setup; setups in"),
        (["--fail-if-worse-than", "nope"], "setup 'nope': no such setup"),
        (["--baseline", "native", "--fail-if-worse-than", "kag"], "name different setups"),
        (["--alpha", "0"], "--alpha 0: must be between 0 and 1"),
        (["--alpha", "1.5"], "--alpha 1.5"),
        (["--setup", "native"], "only one setup (native)"),
        (["--dataset", "zzz"], "--dataset zzz matches no dataset in "),
        (["--setup", "kag", "--setup", "typo*"], "--setup typo* matches no setup in "),
    ],
)
def test_compare_usage_errors(tree: list[str], args: list[str], message: str) -> None:
    result = run("compare", *tree, *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert message in result.stderr
    assert result.stderr.startswith("kag: error:") or "kag: warning:" in result.stderr
    assert "Traceback" not in result.stderr


def test_compare_input_errors(tree: list[str], tmp_path: Path) -> None:
    datasets, results = tree[1], tree[3]
    missing = run("compare", "-r", str(results), "--prefix", PREFIX)
    assert missing.exit_code == 2 and "missing option '--datasets' / '-d'" in missing.stderr
    _no_traceback(missing.stderr)
    no_file = run("compare", "-d", str(tmp_path / "nope.json"), "-r", str(results))
    assert no_file.exit_code == 2 and "nope.json: datasets file not found" in no_file.stderr
    _no_traceback(no_file.stderr)
    bad = tmp_path / "bad.json"
    bad.write_text('{"d1": {"0": {"input": 3}}}')
    broken = run("compare", "-d", str(bad), "-r", str(results))
    assert broken.exit_code == 2 and "d1/0: 'input' must be a string" in broken.stderr
    no_dir = run("compare", "-d", str(datasets), "-r", str(tmp_path / "nowhere"))
    assert no_dir.exit_code == 2 and "results directory not found" in no_dir.stderr
    _no_traceback(no_dir.stderr)
    out = run(
        "compare",
        "-d",
        str(datasets),
        "-r",
        str(results),
        "--prefix",
        PREFIX,
        "--baseline",
        "native",
        "--output",
        str(tmp_path / "no" / "such" / "dir.txt"),
        "--resamples",
        "50",
    )
    assert out.exit_code == 2 and "cannot write the report" in out.stderr and "dir.txt" in out.stderr


# ---------------------------------------------------------------- flips


def test_flips_text(tree: list[str]) -> None:
    result = run("flips", "kag", "native", *tree)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert (
        "Paired questions: 39 | both right: 10 | both not: 7 | A right, B not: 7 | B right, A not: 15" in out
    )
    a_only, b_only = out.split("B right, A not (15):")
    rows_a = [line.split()[:2] for line in a_only.splitlines() if line.startswith(("d1 ", "d2 "))]
    assert rows_a == [["d1", "20"], ["d1", "21"], *[["d2", str(q)] for q in range(5, 10)]]
    rows_b = [line.split()[:2] for line in b_only.splitlines() if line.startswith("d1 ")]
    assert rows_b == [["d1", str(q)] for q in range(5, 20)]  # numeric order: 5..19, not 10, 11, ..., 5
    assert "I think C because the graph | says so" in out  # whitespace collapsed, both responses shown
    assert "7 question(s) only kag got right, 15 only native, out of 39 paired." in result.stderr


def test_flips_json_keeps_full_responses(tree: list[str]) -> None:
    result = run("flips", "kag", "native", *tree, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = orjson.loads(result.stdout)
    assert (doc["a"], doc["b"], doc["paired_questions"], doc["both_correct"], doc["both_wrong"]) == (
        "kag",
        "native",
        39,
        10,
        7,
    )
    first = doc["b_only"][0]
    assert first["dataset"] == "d1" and first["question"] == "5" and first["gold"] == "A"
    assert (
        first["a"]["outcome"] == "WRONG"
        and first["a"]["response"] == "I think C because\n the graph | says so"
    )
    assert first["b"] == {"outcome": "OK", "response": "A", "path": first["b"]["path"]}
    assert first["b"]["path"].endswith("d1/5/pre-native.json")
    helped = {(f["dataset"], f["question"]) for f in doc["a_only"]}
    assert ("d2", "9") in helped
    assert {f["a"]["response"] for f in doc["a_only"] if f["dataset"] == "d2"} == {" B\n"}


def test_flips_markdown_and_dataset_filter(tree: list[str]) -> None:
    result = run("flips", "kag", "native", *tree, "--format", "markdown", "--dataset", "d2")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.startswith("### Flips: `kag` (A) vs `native` (B)")
    assert "#### A right, B not (5)" in out and "#### B right, A not (0)" in out and "_none_" in out
    assert "| d2 | 5 | b | OK | B | WRONG | a |" in out
    assert "| d1 |" not in out
    piped = run("flips", "kag", "native", *tree, "--format", "markdown", "--dataset", "d1")
    assert "I think C because the graph \\| says so" in piped.stdout  # pipe escaped in the cell


def test_flips_max_chars_cuts_text_output(tree: list[str]) -> None:
    result = run("flips", "kag", "native", *tree, "--max-chars", "10")
    assert "I think C…" in result.stdout
    assert "the graph" not in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["kag", "kag"], "A and B are the same setup (kag)"),
        (["kag", "nope"], "setup 'nope': no such setup; setups in"),
        (["kag", "native", "--dataset", "zzz"], "--dataset zzz matches no dataset in "),
    ],
)
def test_flips_errors(tree: list[str], args: list[str], message: str) -> None:
    result = run("flips", *args, *tree)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_flips_needs_two_setups() -> None:
    result = run("flips", "kag")
    assert result.exit_code == 2 and "missing argument 'B'" in result.stderr


# ---------------------------------------------------------------- impact


def test_impact_text_hand_values(tree: list[str]) -> None:
    result = run("impact", *tree)
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "KAG setup: kag" in out and "Native (same model, no retrieval): native" in out
    assert (
        "Paired questions: 39 (1 KAG answer(s) without a native answer left out)" not in out
    )  # kag ⊂ native
    assert "Paired questions: 39 | KAG 43.59% vs native 64.10% | helped 7 | hurt 15 | no change 17" in out
    assert "McNemar p = 0.1338" in out
    assert "KAG answers on the hurt questions: 'C' x14, 'I think C because the graph |…' x1" in out
    rows = {
        line.split()[0]: line.split() for line in out.splitlines() if re.match(r"^(empty|\d|>|no )", line)
    }
    # label N ACC% [lo, hi] NATIVE% DIFF HELPED HURT SAME
    assert rows["empty"][1:3] == ["1", "100.00"] and rows["empty"][-3:] == ["1", "0", "0"]
    assert rows["1-10"][1:3] == ["15", "0.00"] and rows["1-10"][5:] == ["100.00", "-100.00", "0", "15", "0"]
    assert rows["11-100"][1:3] == ["5", "100.00"] and rows["11-100"][-3:] == ["0", "0", "5"]
    assert rows["101-1000"][1:3] == ["8", "25.00"] and rows["101-1000"][-3:] == ["2", "0", "6"]
    assert rows[">1000"][1:3] == ["9", "100.00"] and rows[">1000"][-3:] == ["4", "0", "5"]
    assert rows["no"][:5] == ["no", "retrieval", "stats", "1", "0.00"]
    bucket_order = [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0] in rows]
    assert bucket_order[:6] == ["empty", "1-10", "11-100", "101-1000", ">1000", "no"]


def test_impact_json_and_explicit_native(tree: list[str]) -> None:
    result = run("impact", "kag", *tree, "--native", "other", "--format", "json")
    assert result.exit_code == 0, result.stderr
    (impact,) = orjson.loads(result.stdout)["impacts"]
    assert impact["setup"] == "kag" and impact["native"] == "other" and impact["unpaired"] == 0
    overall = impact["overall"]
    # other is right on d1 (29 paired here) and wrong on d2: helped = d2 0-9 = 10,
    # hurt = d1 questions kag misses = 29 - 7 = 22, same = 7
    assert (overall["n"], overall["helped"], overall["hurt"], overall["no_change"]) == (39, 10, 22, 7)
    assert overall["native_accuracy"] == pytest.approx(29 / 39)
    assert impact["mcnemar"]["method"] == "chi2-cc"
    assert impact["mcnemar"]["statistic"] == pytest.approx(11**2 / 32)
    assert [b["label"] for b in impact["buckets"]] == [
        "empty",
        "1-10",
        "11-100",
        "101-1000",
        ">1000",
        "no retrieval stats",
    ]
    assert [d["label"] for d in impact["per_dataset"]] == ["d1", "d2"]
    lo, hi = impact["buckets"][0]["accuracy_ci95"]
    assert 0 < lo < 1 and hi == 1.0


def test_impact_without_a_native_setup_warns(tmp_path: Path) -> None:
    datasets, results = build_tree(tmp_path, names=("kag", "other"))
    result = run("impact", "-d", str(datasets), "-r", str(results), "--prefix", PREFIX, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert "kag: no setup without retrieval uses prov/m1" in result.stderr
    (impact,) = orjson.loads(result.stdout)["impacts"]
    assert impact["native"] is None and impact["overall"]["helped"] is None
    assert impact["overall"]["n"] == 39 and impact["overall"]["correct"] == 17


def test_impact_errors(tmp_path: Path) -> None:
    datasets, results = build_tree(tmp_path, names=("native", "other"))
    args = ["-d", str(datasets), "-r", str(results), "--prefix", PREFIX]
    none = run("impact", *args)
    assert none.exit_code == 2 and "no setup retrieves" in none.stderr and "native, other" in none.stderr
    unknown = run("impact", "nope", *args)
    assert unknown.exit_code == 2 and "setup 'nope': no such setup" in unknown.stderr


def _errors(stderr: str) -> list[str]:
    """The ``kag: error:`` lines (the shared tree's broken file adds a warning before them)."""
    assert "Traceback" not in stderr
    return [line for line in stderr.splitlines() if line.startswith("kag: error:")]


def test_impact_on_a_setup_that_does_not_retrieve_says_so(tree: list[str]) -> None:
    result = run("impact", "native", *tree)
    assert result.exit_code == 2  # bad usage, like an unknown setup: there is no retrieval to measure
    assert result.stdout == ""
    assert _errors(result.stderr) == [
        (
            "kag: error: native does not retrieve (no retrieval stats, no config.augmented_generation): "
            "no retrieval impact to measure; setups that retrieve: kag"
        )
    ]
    assert result.stderr.endswith("setups that retrieve: kag\n")  # the error is the last line
    mixed = run("impact", "kag", "native", "other", *tree, "--format", "json")
    assert mixed.exit_code == 2 and mixed.stdout == ""
    (line,) = _errors(mixed.stderr)
    assert line.startswith("kag: error: native, other do not retrieve (")
    assert run("impact", "kag", *tree, "--format", "json").exit_code == 0  # the KAG setup alone is fine


def test_impact_on_a_tree_without_retrieval_names_none(tmp_path: Path) -> None:
    datasets, results = build_tree(tmp_path, names=("native", "other"))
    result = run("impact", "other", "-d", str(datasets), "-r", str(results), "--prefix", PREFIX)
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = _errors(result.stderr)
    assert line.startswith("kag: error: other does not retrieve (")
    assert line.endswith("no retrieval impact to measure; setups that retrieve: none")


# ---------------------------------------------------------------- the real tree


def test_med_kag_tree_shows_where_retrieval_hurts(med_kag: Path) -> None:
    args = [
        "-d",
        str(med_kag / "datasets" / "mirage.json"),
        "-r",
        str(med_kag / "results"),
        "--prefix",
        "wekgr-",
    ]
    result = run("compare", *args, "--fail-if-worse-than", "qwen35-9b-ollama-native", "--format", "json")
    assert result.exit_code == 1  # the KAG setup is significantly worse
    (c,) = orjson.loads(result.stdout)["comparisons"]
    assert (c["paired_questions"], c["setup_correct"], c["baseline_correct"]) == (99, 31, 51)
    assert (c["setup_only"], c["baseline_only"]) == (15, 35)
    assert c["mcnemar"]["statistic"] == pytest.approx(19**2 / 50)  # (|15-35|-1)^2/50 = 7.22
    impact = run("impact", *args, "--format", "json")
    (i,) = orjson.loads(impact.stdout)["impacts"]
    assert i["native"] == "qwen35-9b-ollama-native"
    buckets = {b["label"]: b for b in i["buckets"]}
    assert buckets["11-100"]["hurt"] == 23 and buckets["11-100"]["helped"] == 3
    assert i["hurt_responses"][0] == {"response": "C", "count": 28}


def test_wired_into_kag_cli() -> None:
    from kag.cli import app

    result = runner.invoke(app, ["stats", "compare", "--help"])
    assert result.exit_code == 0 and "--fail-if-worse-than" in result.stdout
    for command in ("flips", "impact"):
        assert runner.invoke(app, ["stats", command, "--help"]).exit_code == 0


def test_stats_itself_gates_on_a_significant_regression(tree: list[str]) -> None:
    # `kag stats --fail-if-worse-than`: the stats table is printed, then the same gate as compare.
    passed = run(*tree, "--fail-if-worse-than", "native")
    assert passed.exit_code == 0, passed.stderr
    assert passed.stdout.startswith("Datasets:")
    failed = run(*tree, "--dataset", "d1", "--fail-if-worse-than", "native", "--format", "json")
    assert failed.exit_code == 1
    doc = orjson.loads(failed.stdout)
    assert {s["setup"] for s in doc["setups"]} == {"native", "kag", "other"}
    assert "significantly worse than native" in failed.stderr and "kag:" in failed.stderr
    unknown = run(*tree, "--fail-if-worse-than", "nope")
    assert unknown.exit_code == 2 and "--fail-if-worse-than nope" in unknown.stderr


def test_stats_format_html_writes_one_page(tree: list[str], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = run(*tree, "--format", "html", "--output", str(out))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") or page.lower().startswith("<!doctype html>")
    for setup in ("native", "kag", "other"):
        assert f">{setup}<" in page
    assert "http://" not in page and "https://" not in page
