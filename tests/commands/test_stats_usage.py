"""`kag stats`: token usage and cost per block (--prices), and the per-question export
(--format csv|jsonl), on small trees written with the library's own writer."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.grading.mcq.metrics import Tally
from kag.grading.mcq.rule import GradedFile, Outcome
from kag.results import ErrorResult, OkResult, Timing, Usage, result_path, write_result
from tests.result_helpers import neo4j_retrieval, ok_result

runner = CliRunner()
HOSTILE = 'a, "quoted"\nline two\r\nend'


def warnings_of(stderr: str) -> list[str]:
    """The lines of stderr but the small-sample warning (every tree here is tiny)."""
    return [line for line in stderr.splitlines() if line and "few graded files" not in line]


def mcq(key: str) -> dict:
    return {"input": "?", "output": {"type": "MCQ", "options": {"a": "x", "b": "y"}, "answer": key}}


def _ok(text: str, model: str, usage: Usage | None = None, **stats) -> OkResult:
    return ok_result(text, provider="openai", model=model, usage=usage, **stats)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    return write_tree(tmp_path)


def write_tree(tmp_path: Path) -> tuple[Path, Path]:
    """ds: q1 (key a), q2 (key b), q3 (key a); ds2: q1 (key a).

    big (model gpt-x): ds/q1 "a" 100+10 tokens, 1.5 s, prompt "héllo", retrieval 3/4/5 in 0.25 s;
    ds/q2 HOSTILE (wrong) 200+30; ds/q3 error; ds2/q1 "a" 1000+0.
    small (model local): ds/q1 "a" 50+5; ds/q2 "b" without usage; ds/q3 "a" with only 7
    completion tokens (not a sample).
    """
    datasets = tmp_path / "datasets.json"
    datasets.write_text(
        json.dumps({"ds": {"q1": mcq("a"), "q2": mcq("b"), "q3": mcq("a")}, "ds2": {"q1": mcq("a")}})
    )
    root = tmp_path / "results"
    retrieval = neo4j_retrieval("ctx", 3, 4, 5, time=Timing(0, 250_000_000))
    files = {
        ("ds", "q1", "big"): _ok(
            "a", "gpt-x", Usage(100, 10), time=Timing(1, 500_000_000), prompt="héllo", retrieval=retrieval
        ),
        ("ds", "q2", "big"): _ok(HOSTILE, "gpt-x", Usage(200, 30)),
        ("ds", "q3", "big"): ErrorResult("rate limited"),
        ("ds2", "q1", "big"): _ok("a", "gpt-x", Usage(1000, 0)),
        ("ds", "q1", "small"): _ok("a", "local", Usage(50, 5)),
        ("ds", "q2", "small"): _ok("b", "local"),
        ("ds", "q3", "small"): _ok("a", "local", Usage(None, 7)),
    }
    for (dataset, question, setup), result in files.items():
        write_result(result_path(root, dataset, question, "", setup), result, root)
    return datasets, root


def stats(tree: tuple[Path, Path], *args: str):
    datasets, root = tree
    return runner.invoke(app, ["stats", "-d", str(datasets), "-r", str(root), *args])


def blocks(stdout: str) -> dict[str, dict]:
    return {s["setup"]: s for s in json.loads(stdout)["setups"]}


def test_json_usage_sums_and_means(tree):
    result = stats(tree, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert warnings_of(result.stderr) == []
    setups = blocks(result.stdout)
    assert setups["big"]["overall"]["usage"] == {
        "samples": 3,
        "prompt_tokens": 1300,
        "completion_tokens": 40,
        "avg_prompt_tokens": 1300 / 3,
        "avg_completion_tokens": 40 / 3,
    }
    assert setups["big"]["per_dataset"]["ds"]["usage"] == {
        "samples": 2,
        "prompt_tokens": 300,
        "completion_tokens": 40,
        "avg_prompt_tokens": 150.0,
        "avg_completion_tokens": 20.0,
    }
    # one sample: q2 has no usage, q3 lacks the prompt count
    assert setups["small"]["overall"]["usage"] == {
        "samples": 1,
        "prompt_tokens": 50,
        "completion_tokens": 5,
        "avg_prompt_tokens": 50.0,
        "avg_completion_tokens": 5.0,
    }
    assert "cost_usd" not in setups["small"]["overall"]["usage"]


def test_a_run_without_usage_has_no_usage_key(tmp_path: Path):
    datasets = tmp_path / "d.json"
    datasets.write_text(
        json.dumps(
            {"ds": {"q": {"input": "?", "output": {"type": "MCQ", "options": {"a": "x"}, "answer": "a"}}}}
        )
    )
    write_result(result_path(tmp_path / "r", "ds", "q", "", "s"), OkResult("a"), tmp_path / "r")
    result = runner.invoke(app, ["stats", "-d", str(datasets), "-r", str(tmp_path / "r"), "--format", "json"])
    assert result.exit_code == 0
    block = json.loads(result.stdout)["setups"][0]
    assert "usage" not in block["overall"] and "usage" not in block["per_dataset"]["ds"]
    markdown = runner.invoke(
        app, ["stats", "-d", str(datasets), "-r", str(tmp_path / "r"), "--format", "markdown"]
    )
    assert "PROMPT_TOK" not in markdown.stdout


def test_a_block_without_samples_has_usage_null_when_the_run_has_usage(tmp_path: Path, tree):
    _, root = tree
    write_result(result_path(root, "ds2", "q1", "", "small"), _ok("a", "local"), root)
    result = stats(tree, "--format", "json")
    assert blocks(result.stdout)["small"]["per_dataset"]["ds2"]["usage"] is None


PRICES = """\
[models."gpt-x"]
prompt = 2.0
completion = 10
"""


def test_prices_add_the_cost_and_warn_once_per_unpriced_model(tree, tmp_path: Path):
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    result = stats(tree, "--format", "json", "--prices", str(prices))
    assert result.exit_code == 0, result.stderr
    setups = blocks(result.stdout)
    # (1300 × 2 + 40 × 10) / 1e6; ds: (300 × 2 + 40 × 10) / 1e6; ds2: 1000 × 2 / 1e6
    assert setups["big"]["overall"]["usage"]["cost_usd"] == 0.003
    assert setups["big"]["per_dataset"]["ds"]["usage"]["cost_usd"] == 0.001
    assert setups["big"]["per_dataset"]["ds2"]["usage"]["cost_usd"] == 0.002
    assert setups["small"]["overall"]["usage"]["cost_usd"] is None
    warnings = warnings_of(result.stderr)
    assert len(warnings) == 1 and "'local'" in warnings[0] and str(prices) in warnings[0]
    assert "gpt-x" not in result.stderr


def test_a_bad_prices_file_is_a_usage_error(tree, tmp_path: Path):
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."gpt-x"]\nprompt = 1\n')
    result = stats(tree, "--prices", str(prices))
    assert result.exit_code == 2
    assert result.stderr.startswith("kag: error: ") and "'completion'" in result.stderr
    assert result.stdout == ""


def test_markdown_shows_tokens_and_cost(tree, tmp_path: Path):
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    result = stats(tree, "--format", "markdown", "--prices", str(prices))
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| Setup"))
    assert header.endswith("| PROMPT_TOK | COMPL_TOK | COST($) |")
    big = next(line for line in lines if line.startswith("| **big**"))
    assert big.endswith("| 433.3 | 13.3 | 0.0030 |")
    small = next(line for line in lines if line.startswith("| **small**"))
    assert small.endswith("| 50.0 | 5.0 | - |")
    plain = stats(tree, "--format", "markdown")
    assert "COST($)" not in plain.stdout and "| PROMPT_TOK | COMPL_TOK |" in plain.stdout


def test_the_text_table_is_unchanged_by_usage(tree):
    """The text table stays the Rust tool's, usage or not."""
    result = stats(tree)
    assert "TOK" not in result.stdout and result.exit_code == 0


def test_html_shows_tokens_and_plots_accuracy_against_tokens(tree, tmp_path: Path):
    _, root = tree
    # a setup name that must be escaped in the table and the chart
    write_result(result_path(root, "ds", "q1", "", "x<&>"), _ok("a", "gpt-x", Usage(1, 1)), root)
    page = tmp_path / "page.html"
    result = stats(tree, "--format", "html", "-o", str(page))
    assert result.exit_code == 0, result.stderr
    html = page.read_text()
    assert '<th class="r">PROMPT_TOK</th><th class="r">COMPL_TOK</th>' in html
    assert 'aria-label="Accuracy against mean tokens per question, one point per setup"' in html
    # small: 3/3 right, 55 tokens; big: 2/4, (1300 + 40) / 3 tokens; x<&>: 1/1, 2 tokens
    assert "small: 100.0%, 55.0 tokens" in html and "big: 50.0%, 446.7 tokens" in html
    assert "x&lt;&amp;&gt;: 100.0%, 2.0 tokens" in html and "x<&>" not in html
    chart = html.split("Accuracy against tokens</h2>")[1].split("</svg>")[0]
    assert chart.count('r="5" fill=') == 2 * 3  # a point and a key marker per setup


def test_tally_sums_only_complete_usage_samples():
    tally = Tally()
    for usage in (Usage(3, 4), Usage(None, 9), Usage(-1, 2), Usage(5, 0), None):
        tally.add(GradedFile("d", "q", "s", Outcome.WRONG, "x", usage=usage))
    u = tally.freeze().usage
    assert u is not None and (u.samples, u.prompt_tokens, u.completion_tokens) == (2, 8, 4)
    assert (u.avg_prompt_tokens, u.avg_completion_tokens, u.avg_tokens) == (4.0, 2.0, 6.0)
    assert Tally().freeze().usage is None


U64_MAX = 2**64 - 1


def test_token_counts_of_2_64_are_left_out_with_a_warning_not_a_traceback(tree):
    _, root = tree
    # a hostile server's counts, in two files of one block: their sum leaves 64 bits
    for question in ("q1", "q2"):
        write_result(
            result_path(root, "ds", question, "", "huge"), _ok("a", "gpt-x", Usage(U64_MAX, 1)), root
        )
    write_result(
        result_path(root, "ds2", "q1", "", "huge"), _ok("a", "gpt-x", Usage(2**32 - 1, 2**32 - 1)), root
    )
    result = stats(tree, "--format", "json")
    assert result.exit_code == 0, result.stderr
    huge = blocks(result.stdout)["huge"]
    assert huge["per_dataset"]["ds"]["usage"] is None
    assert huge["overall"]["usage"]["samples"] == 1
    assert huge["overall"]["usage"]["prompt_tokens"] == 2**32 - 1  # the bound itself is believed
    assert warnings_of(result.stderr) == [
        "kag: warning: 2 result file(s) record a token count above 4294967295: their usage is left out"
    ]
    assert blocks(result.stdout)["big"]["overall"]["usage"]["prompt_tokens"] == 1300


def test_retrieval_counts_of_2_64_give_no_retrieval_sample(tree):
    _, root = tree
    retrieval = neo4j_retrieval("ctx", U64_MAX, 1, 1, time=Timing(0, 1))
    for question in ("q1", "q2"):
        write_result(
            result_path(root, "ds", question, "", "huge"), _ok("a", "gpt-x", retrieval=retrieval), root
        )
    result = stats(tree, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert blocks(result.stdout)["huge"]["overall"]["retrieval"] is None


def test_a_cost_past_the_largest_float_is_an_error_not_no_price(tree, tmp_path: Path):
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."gpt-x"]\nprompt = 1e308\ncompletion = 0\n')
    for fmt in ("json", "markdown"):
        result = stats(tree, "--format", fmt, "--prices", str(prices))
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr.splitlines()[-1].startswith(
            f'kag: error: {prices}: models."gpt-x": the cost of '
        )
        assert "too large to compute" in result.stderr and "Traceback" not in result.stderr
    # the same price on no prompt tokens costs nothing, and 1e300 on a few is finite
    prices.write_text('[models."gpt-x"]\nprompt = 1e300\ncompletion = 0\n')
    result = stats(tree, "--format", "json", "--prices", str(prices))
    assert result.exit_code == 0, result.stderr
    assert blocks(result.stdout)["big"]["overall"]["usage"]["cost_usd"] == 1300 * 1e300 / 1e6


# ---------------------------------------------------------------- per-question export

EXPECTED_ROWS = [
    # dataset, question, setup, outcome, gold, response, gen s, ctx, ret s, v, r, p, tokens
    ["ds", "q1", "big", "OK", "a", "a", 1.5, 6, 0.25, 3, 4, 5, 100, 10],
    ["ds", "q1", "small", "OK", "a", "a", None, None, None, None, None, None, 50, 5],
    ["ds", "q2", "big", "WRONG", "b", HOSTILE, None, None, None, None, None, None, 200, 30],
    ["ds", "q2", "small", "OK", "b", "b", None, None, None, None, None, None, None, None],
    ["ds", "q3", "big", "ERR", "a", None, None, None, None, None, None, None, None, None],
    ["ds", "q3", "small", "OK", "a", "a", None, None, None, None, None, None, None, 7],
    ["ds2", "q1", "big", "OK", "a", "a", None, None, None, None, None, None, 1000, 0],
]
HEAD = ["dataset", "question", "setup", "outcome", "gold", "response"]
TAIL = [
    "generation_secs", "context_length", "retrieval_secs", "vertices", "relationships", "properties",
    "prompt_tokens", "completion_tokens",
]  # fmt: skip
EMPTY_GRADES = {"extracted": None, "extracted_outcome": None, "exact_match": None, "f1": None}


PLACE = ["model", "provider", "label", "epoch", "path"]
MODELS = {"big": "gpt-x", "small": "local"}


def expected_objects(root: Path) -> list[dict]:
    """The rows, each with the model and provider its file records (none for an error file),
    no label (one tree), epoch 1 and the file's path."""

    def place(row: list) -> dict:
        dataset, question, setup, outcome = row[:4]
        err = outcome == "ERR"
        path = str(result_path(root, dataset, question, "", setup))
        model, provider = (None, None) if err else (MODELS[setup], "openai")
        return {"model": model, "provider": provider, "label": None, "epoch": 1, "path": path}

    return [
        dict(zip(HEAD, row[:6]), **EMPTY_GRADES, **dict(zip(TAIL, row[6:])), **place(row))
        for row in EXPECTED_ROWS
    ]


def test_jsonl_one_object_per_graded_file_in_order(tree):
    result = stats(tree, "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    assert warnings_of(result.stderr) == []
    lines = result.stdout.split("\n")
    assert lines[-1] == "" and len(lines) == len(EXPECTED_ROWS) + 1
    rows = [json.loads(line) for line in lines[:-1]]
    # version 3 keeps the key "answer" of versions 1 and 2 (the gold key), before "v"
    assert rows == [{**row, "answer": row["gold"], "v": 3} for row in expected_objects(tree[1])]
    assert [list(r) for r in rows] == [[*HEAD, *EMPTY_GRADES, *TAIL, *PLACE, "answer", "v"]] * len(rows)


def test_csv_round_trips_through_the_csv_module(tree):
    result = stats(tree, "--format", "csv")
    assert result.exit_code == 0, result.stderr
    # stdout_bytes: click's `stdout` turns \r\n into \n
    rows = list(csv.reader(io.StringIO(result.stdout_bytes.decode(), newline="")))
    assert rows[0] == [*HEAD, *EMPTY_GRADES, *TAIL, *PLACE]
    as_text = [["" if v is None else str(v) for v in obj.values()] for obj in expected_objects(tree[1])]
    assert rows[1:] == as_text
    assert rows[3][5] == HOSTILE  # commas, quotes, \n and \r\n come back byte for byte


def test_export_keeps_exact_names_and_filters(tree):
    _, root = tree
    name = "é\x1b[31m"
    write_result(result_path(root, "ds", "q1", "", name), _ok("b", "m"), root)
    result = stats(tree, "--format", "jsonl", "--setup", "é*")
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["setup"], r["outcome"]) for r in rows] == [(name, "WRONG")]


def test_export_loads_into_pandas_and_duckdb_when_installed(tree, tmp_path: Path):
    out = tmp_path / "rows.csv"
    assert stats(tree, "--format", "csv", "-o", str(out)).exit_code == 0
    jsonl = tmp_path / "rows.jsonl"
    assert stats(tree, "--format", "jsonl", "-o", str(jsonl)).exit_code == 0
    tested = 0
    try:
        import pandas as pd
    except ImportError:
        pass
    else:
        frame = pd.read_csv(out, keep_default_na=False)
        assert list(frame["response"]) == [r[5] or "" for r in EXPECTED_ROWS]
        assert len(pd.read_json(jsonl, lines=True)) == len(EXPECTED_ROWS)
        tested += 1
    try:
        import duckdb
    except ImportError:
        pass
    else:
        got = duckdb.sql(f"SELECT response FROM read_csv('{out}', header=true)").fetchall()
        assert [g[0] for g in got] == [r[5] for r in EXPECTED_ROWS]
        tested += 1
    if not tested:
        pytest.skip("neither pandas nor duckdb is installed")


def test_the_documented_example_is_what_kag_prints(tmp_path: Path, repo: Path, monkeypatch):
    write_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    text = (repo / "docs/stats.md").read_text()
    block = text.split("```console\n$ kag stats -d datasets.json -r results --setup small")[1].split("```")[0]
    block = "$ kag stats -d datasets.json -r results --setup small" + block
    command, _, expected = block.partition("\n")
    args = command.removeprefix("$ kag ").split()
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected


def test_prices_from_dev_zero_end_with_one_clear_line(tree, monkeypatch: pytest.MonkeyPatch):
    from kag import textfile

    monkeypatch.setattr(textfile, "MAX_FILE_BYTES", 4 << 20)
    result = stats(tree, "--format", "json", "--prices", "/dev/zero")
    assert result.exit_code == 2
    assert result.stderr.strip() == "kag: error: /dev/zero: prices file is larger than the 4 MiB size cap"


def test_export_rows_name_the_label_and_path_of_each_tree(tree):
    datasets, root = tree
    args = ["stats", "-d", str(datasets), "-r", f"a={root}", "-r", f"b={root}", "--format", "jsonl"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 2 * len(EXPECTED_ROWS)
    assert {r["label"] for r in rows} == {"a", "b"}
    for r in rows:
        label, setup = r["setup"].split("/")
        assert r["label"] == label
        assert r["path"] == str(result_path(root, r["dataset"], r["question"], "", setup))
        assert r["epoch"] == 1 and r["v"] == 3
