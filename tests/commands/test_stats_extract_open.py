"""`kag stats --extract` (the extracted grade beside the strict one, `--grade extracted` in the
comparisons and gates) and open-answer grading (EM/F1), on small trees written with the
library's writer; expected values computed by hand in the comments."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.results import ErrorResult, OkResult, Result, result_path, write_result

runner = CliRunner()
MCQ = {"a": "one", "b": "two", "c": "three", "d": "four"}


def mcq(answer: str) -> dict:
    return {"input": "q", "output": {"type": "MCQ", "options": MCQ, "answer": answer}}


def open_q(*answers: str) -> dict:
    return {"input": "q", "output": {"type": "Open", "answers": list(answers)}}


def ok(text: str) -> OkResult:
    return OkResult(text)


def build(root: Path, datasets: dict, files: dict[tuple[str, str, str], Result]) -> Path:
    path = root / "datasets.json"
    path.write_text(json.dumps(datasets))
    for (dataset, question, setup), result in files.items():
        write_result(result_path(root / "results", dataset, question, "", setup), result)
    return path


def write_tree(root: Path, with_open_only_setup: bool = True) -> list[str]:
    """mcq: keys 1=b 2=c 3=a 4=d; trivia: open questions 1 (Paris | City of Paris), 2 (George Washington).

    alpha: "The answer is B." (strict WRONG, letter OK), "c" (OK, OK), "A or B" (WRONG, not
    extracted), error (ERR, not extracted) -> ACC 1/4, XACC 2/4.
    beta: "b", "c", "d", "d" -> ACC 3/4; letter 3 correct, 1 incorrect -> XACC 3/4.
    Open: alpha "The city of Paris." (EM 1, F1 1), "Washington" (EM 0, F1 2·1·½/(1+½) = 2/3)
    -> EM 1/2, F1 5/6; beta error (0, 0), "George Washington" (1, 1) -> EM 1/2, F1 1/2;
    gamma (open only) "Lyon" -> EM 0, F1 0.
    """
    datasets = {
        "mcq": {"1": mcq("b"), "2": mcq("c"), "3": mcq("a"), "4": mcq("d")},
        "trivia": {"1": open_q("Paris", "City of Paris"), "2": open_q("George Washington")},
    }
    files: dict[tuple[str, str, str], Result] = {
        ("mcq", "1", "alpha"): ok("The answer is B."),
        ("mcq", "2", "alpha"): ok("c"),
        ("mcq", "3", "alpha"): ok("A or B"),
        ("mcq", "4", "alpha"): ErrorResult("timeout"),
        ("mcq", "1", "beta"): ok("b"),
        ("mcq", "2", "beta"): ok("c"),
        ("mcq", "3", "beta"): ok("d"),
        ("mcq", "4", "beta"): ok("d"),
        ("trivia", "1", "alpha"): ok("The city of Paris."),
        ("trivia", "2", "alpha"): ok("Washington"),
        ("trivia", "1", "beta"): ErrorResult("timeout"),
        ("trivia", "2", "beta"): ok("George Washington"),
    }
    if with_open_only_setup:
        files[("trivia", "1", "gamma")] = ok("Lyon")
    ds = build(root, datasets, files)
    return ["-d", str(ds), "-r", str(root / "results")]


@pytest.fixture
def tree(tmp_path: Path) -> list[str]:
    return write_tree(tmp_path)


def stats(*args: str):
    return runner.invoke(app, ["stats", *args])


def row(stdout: str, label: str) -> list[str]:
    return next(line.split() for line in stdout.splitlines() if line.split()[:1] == [label])


def test_letter_extraction_counts_and_accuracy_in_json(tree: list[str]):
    result = stats(*tree, "--format", "json", "--extract", "letter")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["extract"] == "letter"
    by = {s["setup"]: s for s in doc["setups"]}
    assert by["alpha"]["overall"]["extracted"] == {
        "correct": 2,
        "incorrect": 0,
        "not_extracted": 2,
        "accuracy": 0.5,
    }
    assert by["beta"]["per_dataset"]["mcq"]["extracted"] == {
        "correct": 3,
        "incorrect": 1,
        "not_extracted": 0,
        "accuracy": 0.75,
    }
    # the strict grade is untouched: ACC 1/4 and 3/4, alpha's error still an error
    assert by["alpha"]["overall"]["accuracy"] == 0.25
    assert by["alpha"]["overall"]["errors"] == 1
    assert by["beta"]["overall"]["accuracy"] == 0.75
    # a setup with no MCQ file: nothing extracted, no accuracy
    assert by["gamma"]["overall"]["extracted"] == {
        "correct": 0,
        "incorrect": 0,
        "not_extracted": 0,
        "accuracy": None,
    }


def test_regex_extraction_takes_the_first_group(tree: list[str]):
    # alpha: only "The answer is B." matches -> B, correct; the other three are not extracted
    result = stats(*tree, "--format", "json", "--extract", r"regex:answer is (\w)")
    assert result.exit_code == 0, result.stderr
    by = {s["setup"]: s for s in json.loads(result.stdout)["setups"]}
    assert by["alpha"]["overall"]["extracted"] == {
        "correct": 1,
        "incorrect": 0,
        "not_extracted": 3,
        "accuracy": 0.25,
    }
    assert by["beta"]["overall"]["extracted"]["not_extracted"] == 4


def test_xacc_column_in_text_and_markdown(tree: list[str]):
    plain = stats(*tree)
    result = stats(*tree, "--extract", "letter")
    assert result.exit_code == 0, result.stderr
    header = result.stdout.splitlines()[2].split()
    assert header[-1] == "XACC%" and "XACC%" not in plain.stdout
    # strict cells unchanged, XACC% appended: beta 75.00, alpha 50.00
    assert row(result.stdout, "beta") == [*row(plain.stdout, "beta"), "75.00"]
    assert row(result.stdout, "alpha") == [*row(plain.stdout, "alpha"), "50.00"]
    assert row(result.stdout, "alpha")[1] == "25.00"
    assert "XACC% = correct after answer extraction (letter) / scored" in result.stdout
    md = stats(*tree, "--extract", "letter", "--format", "markdown")
    assert md.exit_code == 0, md.stderr
    head = next(line for line in md.stdout.splitlines() if line.startswith("| Setup"))
    assert head.rstrip(" |").endswith("XACC%")
    alpha = next(line for line in md.stdout.splitlines() if line.startswith("| **alpha**"))
    assert alpha.split("|")[-2].strip() == "50.00"
    assert "XACC%" not in stats(*tree, "--format", "markdown").stdout


def test_open_answers_json_blocks(tree: list[str]):
    result = stats(*tree, "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["scorable_open_questions"] == 2
    assert doc["scorable_questions"] == 4
    assert doc["ignored_files"] == 0  # open files are graded, not ignored
    assert "extract" not in doc
    assert [s["setup"] for s in doc["setups"]] == ["beta", "alpha", "gamma"]
    by = {s["setup"]: s for s in doc["setups"]}
    alpha = by["alpha"]["per_dataset"]["trivia"]["open"]
    assert alpha["total"] == 2 and alpha["errors"] == 0
    assert alpha["exact_match"] == 0.5
    assert alpha["f1"] == pytest.approx(5 / 6)
    assert by["beta"]["overall"]["open"] == {"total": 2, "errors": 1, "exact_match": 0.5, "f1": 0.5}
    assert by["beta"]["per_dataset"]["mcq"]["open"] is None
    assert by["gamma"]["overall"]["open"] == {"total": 1, "errors": 0, "exact_match": 0.0, "f1": 0.0}
    assert by["gamma"]["overall"]["total"] == 0 and by["gamma"]["overall"]["accuracy"] is None
    assert "extracted" not in by["beta"]["overall"]


OPEN_TABLE = """\
Open questions: 2

SETUP           EM%      F1%   ERR   TOT
beta          50.00    50.00     1     2
  └ trivia    50.00    50.00     1     2
alpha         50.00    83.33     0     2
  └ trivia    50.00    83.33     0     2
gamma          0.00     0.00     0     1
  └ trivia     0.00     0.00     0     1

EM% = mean exact match, F1% = mean token F1 (best over the accepted answers, after lower-casing \
and removing punctuation and articles); error files score 0
"""


def test_open_answers_second_text_table(tree: list[str]):
    result = stats(*tree)
    assert result.exit_code == 0, result.stderr
    mcq_part, _, open_part = result.stdout.partition("CTX_LEN = average context length\n\n")
    assert open_part == OPEN_TABLE
    # the MCQ table has no row for an open-only setup nor for the open dataset
    assert "gamma" not in mcq_part and "trivia" not in mcq_part
    assert row(mcq_part, "beta")[1:8] == ["75.00", "75.00", "100.00", "3", "1", "0", "4"]
    md = stats(*tree, "--format", "markdown").stdout
    assert "**Open questions:** 2" in md
    assert "| **alpha** | 50.00 | 83.33 | 0 | 2 |" in md


def test_fail_under_on_the_extracted_grade(tree: list[str]):
    # strict: alpha 25% < 40 -> exit 1; extracted: alpha 50%, beta 75% -> passes
    strict = stats(*tree, "--fail-under", "40", "--extract", "letter")
    assert strict.exit_code == 1
    assert "ACC% below 40 for alpha (25.00%)" in strict.stderr
    extracted = stats(*tree, "--fail-under", "40", "--extract", "letter", "--grade", "extracted")
    assert extracted.exit_code == 0, extracted.stderr
    failing = stats(*tree, "--fail-under", "60", "--extract", "letter", "--grade", "extracted")
    assert failing.exit_code == 1
    assert "XACC% below 60 for alpha (50.00%)" in failing.stderr
    assert "gamma" not in failing.stderr.splitlines()[-1]  # open-only setups are not gated


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--grade", "extracted"], "--grade extracted needs --extract"),
        (["--grade", "loose", "--extract", "letter"], "--grade loose: expected strict or extracted"),
        (["--extract", "word"], "--extract: expected 'letter' or 'regex:PATTERN'"),
        (["--extract", "regex:("], "--extract regex:(: invalid pattern"),
        (["--extract", "regex:(?:a{1000000}){1000000}"], "at most 100,000 repetitions"),
        (["--extract", "regex:((?R)|a)"], "recursive patterns"),
    ],
)
def test_bad_extract_and_grade_are_usage_errors(tree: list[str], args: list[str], message: str):
    result = stats(*tree, *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("kag: error: ") and message in result.stderr
    sub = runner.invoke(app, ["stats", "flips", "alpha", "beta", *tree, *args])
    assert sub.exit_code == 2 and message in sub.stderr


@pytest.fixture
def wordy(tmp_path: Path) -> list[str]:
    """12 questions, key "b": plain answers "b" right everywhere; wordy answers "Answer: (B)".

    strict: plain 12/12, wordy 0/12 -> McNemar exact p = 2·½¹² ≈ 0.0005: wordy significantly
    worse. extracted (letter): both 12/12 -> no discordant question, nothing significant.
    """
    datasets = {"ds": {str(i): mcq("b") for i in range(12)}}
    files: dict[tuple[str, str, str], Result] = {}
    for i in range(12):
        files[("ds", str(i), "plain")] = ok("b")
        files[("ds", str(i), "wordy")] = ok("Answer: (B)")
    ds = build(tmp_path, datasets, files)
    return ["-d", str(ds), "-r", str(tmp_path / "results")]


def test_grade_extracted_changes_the_compare_verdict(wordy: list[str]):
    gate = ["--fail-if-worse-than", "plain", "--format", "json"]
    strict = runner.invoke(app, ["stats", "compare", *wordy, *gate])
    assert strict.exit_code == 1
    assert "1 setup(s) significantly worse than plain" in strict.stderr
    comparison = json.loads(strict.stdout)["comparisons"][0]
    assert (comparison["setup"], comparison["baseline_only"], comparison["setup_only"]) == ("wordy", 12, 0)
    assert comparison["significant"] is True
    # the options may also come before the sub-command name
    extracted = runner.invoke(
        app, ["stats", "--extract", "letter", "compare", *wordy, *gate, "--grade", "extracted"]
    )
    assert extracted.exit_code == 0, extracted.stderr
    comparison = json.loads(extracted.stdout)["comparisons"][0]
    assert (comparison["setup_correct"], comparison["baseline_only"], comparison["difference"]) == (
        12,
        0,
        0.0,
    )
    assert comparison["significant"] is False
    # kag stats' own regression gate follows --grade too
    top = stats(*wordy, "--fail-if-worse-than", "plain")
    assert top.exit_code == 1
    top = stats(*wordy, "--fail-if-worse-than", "plain", "--extract", "letter", "--grade", "extracted")
    assert top.exit_code == 0, top.stderr


def test_grade_extracted_in_flips_and_impact(wordy: list[str]):
    strict = runner.invoke(app, ["stats", "flips", "plain", "wordy", *wordy, "--format", "json"])
    assert strict.exit_code == 0, strict.stderr
    assert len(json.loads(strict.stdout)["a_only"]) == 12
    extracted = runner.invoke(
        app,
        [
            "stats",
            "flips",
            "plain",
            "wordy",
            *wordy,
            "--format",
            "json",
            "--extract",
            "letter",
            "--grade",
            "extracted",
        ],
    )
    assert extracted.exit_code == 0, extracted.stderr
    report = json.loads(extracted.stdout)
    assert report["a_only"] == [] and report["b_only"] == []
    # impact reads the same flag: no setup retrieves here, the same usage error either way
    impact = runner.invoke(app, ["stats", "impact", *wordy, "--extract", "letter", "--grade", "extracted"])
    assert impact.exit_code == 2 and "no setup retrieves" in impact.stderr


def test_the_docs_example_is_what_kag_prints(tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch):
    doc = (repo / "docs/stats.md").read_text()
    block = doc.split("```console\n$ kag stats -d datasets.json -r results --extract", 1)[1].split("```", 1)[
        0
    ]
    block = "$ kag stats -d datasets.json -r results --extract" + block
    command, _, expected = block.partition("\n")
    assert command == "$ kag stats -d datasets.json -r results --extract letter"
    write_tree(tmp_path, with_open_only_setup=False)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, command.split()[2:])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected


def test_real_tree_strict_numbers_unchanged_by_extract(med_kag: Path):
    args = ["-d", str(med_kag / "datasets/mirage.json"), "-r", str(med_kag / "results"), "--prefix", "wekgr-"]
    plain = stats(*args, "--format", "json")
    extracted = stats(*args, "--format", "json", "--extract", "letter")
    assert plain.exit_code == 0 and extracted.exit_code == 0, extracted.stderr
    doc = json.loads(extracted.stdout)
    assert doc.pop("extract") == "letter"
    for s in doc["setups"]:
        for block in [s["overall"], *s["per_dataset"].values()]:
            x = block.pop("extracted")
            assert x["correct"] + x["incorrect"] + x["not_extracted"] == block["total"]
    assert doc == json.loads(plain.stdout)
    assert "open" not in plain.stdout and "scorable_open_questions" not in plain.stdout


def test_worker_processes_grade_extraction_and_open_answers_alike(tmp_path: Path):
    """The spec crosses to the worker processes as text; the pool gives the in-process result."""
    from kag.datasets import load_datasets
    from kag.grading.mcq import GradeRequest, grade_tree

    args = write_tree(tmp_path)
    datasets = load_datasets(Path(args[1]))
    runs = [
        grade_tree(
            datasets, args[3], GradeRequest(extract=r"regex:answer is (\w)", measures={"records"}), workers=n
        )
        for n in (1, 2)
    ]
    assert runs[0] == runs[1]
    run = runs[1]
    assert run.tallies[("alpha", "mcq")].extracted_correct == 1
    assert run.tallies[("alpha", "mcq")].not_extracted == 3
    assert run.tallies[("alpha", "trivia")].open_exact == 1
    assert run.scorable_open_questions == 2
    records = {(r.setup, r.question): r.extracted for r in run.records or () if r.dataset == "mcq"}
    assert records[("alpha", "1")] == "ok" and records[("alpha", "4")] == "err"


def test_extracted_outcome_and_open_grade_by_hand():
    from kag.grading.extract import parse_extract_spec
    from kag.grading.mcq.extracted import extracted_outcome
    from kag.grading.mcq.rule import AnswerKey, Outcome
    from kag.grading.open_grading import grade_open_response

    key = AnswerKey("b", ("a", "b", "c"))
    letter = parse_extract_spec("letter")
    assert extracted_outcome(letter, "<think>maybe A</think> **B**", key) is Outcome.OK
    assert extracted_outcome(letter, "Answer: (c)", key) is Outcome.WRONG
    assert extracted_outcome(letter, "A or B", key) is Outcome.ERR
    assert extracted_outcome(letter, None, key) is Outcome.ERR
    assert grade_open_response(None, ["Paris"]) == (0.0, 0.0)
    # "the big apple" vs "New York" / "Big Apple": tokens [big, apple] -> EM 1 with the second
    assert grade_open_response("the Big Apple!", ["New York", "Big Apple"]) == (1.0, 1.0)
    # "new york city" vs "new york": same 2, P 2/3, R 1 -> F1 = 2·(2/3)/(5/3) = 0.8
    em, f1 = grade_open_response("New York City", ["New York"])
    assert em == 0.0 and f1 == pytest.approx(0.8)


# ---------------------------------------------------------------- the per-question export

# (dataset, question, setup, outcome, answer, extracted_outcome under --extract letter, EM, F1),
# from write_tree's docstring: beta "d" on mcq/3 (key a) extracts d -> WRONG; an open row is
# OK when EM is 1, ERR for an error file, and its answer is the accepted answers joined by " | ".
EXPORT_ROWS = [
    ("mcq", "1", "alpha", "WRONG", "b", "OK", None, None),
    ("mcq", "1", "beta", "OK", "b", "OK", None, None),
    ("mcq", "2", "alpha", "OK", "c", "OK", None, None),
    ("mcq", "2", "beta", "OK", "c", "OK", None, None),
    ("mcq", "3", "alpha", "WRONG", "a", "ERR", None, None),
    ("mcq", "3", "beta", "WRONG", "a", "WRONG", None, None),
    ("mcq", "4", "alpha", "ERR", "d", "ERR", None, None),
    ("mcq", "4", "beta", "OK", "d", "OK", None, None),
    ("trivia", "1", "alpha", "OK", "Paris | City of Paris", None, 1.0, 1.0),
    ("trivia", "1", "beta", "ERR", "Paris | City of Paris", None, 0.0, 0.0),
    ("trivia", "1", "gamma", "WRONG", "Paris | City of Paris", None, 0.0, 0.0),
    ("trivia", "2", "alpha", "WRONG", "George Washington", None, 0.0, 2 / 3),
    ("trivia", "2", "beta", "OK", "George Washington", None, 1.0, 1.0),
]
GRADE_KEYS = ("dataset", "question", "setup", "outcome", "answer", "extracted_outcome", "exact_match", "f1")


def test_jsonl_export_has_extracted_outcome_and_open_rows(tree: list[str]):
    result = stats(*tree, "--format", "jsonl", "--extract", "letter")
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [tuple(r[k] for k in GRADE_KEYS) for r in rows] == [
        (*row[:7], pytest.approx(row[7]) if row[7] is not None else None) for row in EXPORT_ROWS
    ]
    by = {(r["dataset"], r["question"], r["setup"]): r for r in rows}
    assert by[("trivia", "1", "alpha")]["response"] == "The city of Paris."
    assert by[("trivia", "1", "beta")]["response"] is None
    plain = [json.loads(line) for line in stats(*tree, "--format", "jsonl").stdout.splitlines()]
    assert [r["extracted_outcome"] for r in plain] == [None] * len(EXPORT_ROWS)
    assert [r["f1"] for r in plain] == [r["f1"] for r in rows]  # open rows need no --extract


def test_csv_export_has_extracted_outcome_and_open_rows(tree: list[str]):
    result = stats(*tree, "--format", "csv", "--extract", "letter", "--setup", "alpha")
    assert result.exit_code == 0, result.stderr
    lines = list(csv.DictReader(io.StringIO(result.stdout)))
    # CSV has no row version: the answer key's column is "gold" (no "answer" column kept)
    assert "answer" not in lines[0]
    keys = tuple("gold" if k == "answer" else k for k in GRADE_KEYS)
    got = [tuple(line[k] for k in keys) for line in lines]
    assert got == [
        ("mcq", "1", "alpha", "WRONG", "b", "OK", "", ""),
        ("mcq", "2", "alpha", "OK", "c", "OK", "", ""),
        ("mcq", "3", "alpha", "WRONG", "a", "ERR", "", ""),
        ("mcq", "4", "alpha", "ERR", "d", "ERR", "", ""),
        ("trivia", "1", "alpha", "OK", "Paris | City of Paris", "", "1.0", "1.0"),
        ("trivia", "2", "alpha", "WRONG", "George Washington", "", "0.0", str(2 / 3)),
    ]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_rows_name_the_gold_the_response_and_the_extracted_key(tree: list[str], fmt: str):
    result = stats(*tree, "--format", fmt, "--extract", "letter", "--setup", "alpha")
    assert result.exit_code == 0, result.stderr
    if fmt == "jsonl":
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        assert all(r["answer"] == r["gold"] and r["v"] == 3 for r in rows)
    else:
        rows = [
            {k: v or None for k, v in line.items()} for line in csv.DictReader(io.StringIO(result.stdout))
        ]
    keys = ("question", "gold", "response", "extracted", "extracted_outcome")
    assert [tuple(r[k] for k in keys) for r in rows] == [
        ("1", "b", "The answer is B.", "b", "OK"),  # the key as the dataset spells it
        ("2", "c", "c", "c", "OK"),
        ("3", "a", "A or B", None, "ERR"),  # nothing extracted
        ("4", "d", None, None, "ERR"),  # an error file
        ("1", "Paris | City of Paris", "The city of Paris.", None, None),  # open rows: no extraction
        ("2", "George Washington", "Washington", None, None),
    ]


def test_open_rows_interleave_with_mcq_rows_and_stay_out_of_the_pairings(tmp_path: Path):
    """One dataset mixing both kinds: rows in question order, whatever their kind; the MCQ
    records the comparisons pair hold no open file."""
    from kag.datasets import load_datasets
    from kag.grading.mcq import GradeRequest, grade_tree

    datasets = {"mix": {"1": open_q("yes"), "2": mcq("a"), "3": open_q("no")}}
    files: dict[tuple[str, str, str], Result] = {
        ("mix", "1", "s"): ok("Yes!"),
        ("mix", "2", "s"): ok("a"),
        ("mix", "3", "s"): ok("maybe no"),
    }
    path = build(tmp_path, datasets, files)
    result = stats("-d", str(path), "-r", f"run={tmp_path / 'results'}", "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    # "maybe no" vs "no": EM 0; 1 common token, P 1/2, R 1 -> F1 = 2·½/(3/2) = 2/3
    assert [(r["question"], r["setup"], r["outcome"], r["exact_match"], r["f1"]) for r in rows] == [
        ("1", "run/s", "OK", 1.0, 1.0),
        ("2", "run/s", "OK", None, None),
        ("3", "run/s", "WRONG", 0.0, pytest.approx(2 / 3)),
    ]
    run = grade_tree(load_datasets(path), tmp_path / "results", GradeRequest(measures={"records"}))
    assert [r.question for r in run.records or ()] == ["2"]
    assert [(r.question, r.outcome) for r in run.open_records or ()] == [("1", "ok"), ("3", "wrong")]
    assert grade_tree(load_datasets(path), tmp_path / "results").open_records is None


def test_a_tree_of_open_answers_only_is_not_called_ungraded(tmp_path: Path):
    datasets = {"trivia": {"1": open_q("Paris"), "2": open_q("Rome")}}
    files: dict[tuple[str, str, str], Result] = {
        ("trivia", "1", "s"): ok("Paris"),
        ("trivia", "2", "s"): ok("Lyon"),
    }
    ds = build(tmp_path, datasets, files)
    for fmt in ("text", "json"):
        result = stats("-d", str(ds), "-r", str(tmp_path / "results"), "--format", fmt)
        assert result.exit_code == 0, result.stderr
        # two files graded (EM and F1): no "no result file was graded", no accuracy from 0 files
        assert result.stderr == ""
    assert json.loads(result.stdout)["setups"][0]["overall"]["open"]["total"] == 2


def test_setups_without_multiple_choice_files_are_not_small_samples(tree: list[str]):
    result = stats(*tree)
    assert result.exit_code == 0
    note = next(line for line in result.stderr.splitlines() if "few graded files" in line)
    assert "alpha 4" in note and "beta 4" in note and "gamma" not in note


@pytest.mark.parametrize("alias", ["", "The", "!!!", "\t", "..."])
def test_an_alias_that_normalizes_to_nothing_is_ignored_and_the_rest_graded(tmp_path: Path, alias: str):
    # trivia/2 keeps "Rome"; trivia/3 has no alias left: not scored. The empty replies match nothing.
    datasets = {"trivia": {"1": open_q("Paris"), "2": open_q("Rome", alias), "3": open_q(alias, "the")}}
    files = {("trivia", "1", "s"): ok("Paris"), ("trivia", "2", "s"): ok(""), ("trivia", "3", "s"): ok("")}
    ds = build(tmp_path, datasets, files)
    result = stats("-d", str(ds), "-r", str(tmp_path / "results"), "--format", "json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["scorable_open_questions"] == 2
    assert doc["setups"][0]["overall"]["open"] == {"total": 2, "errors": 0, "exact_match": 0.5, "f1": 0.5}
    assert result.stderr == (
        f"kag: warning: {ds}: ignored 3 accepted answer(s) that normalize to nothing (case, punctuation and"
        " articles are ignored: only an empty reply would match them): trivia/2: 'output.answers' item 2,"
        f" {alias!r} (and 2 more); 1 question(s) left with none are not scored; kag datasets check lists them\n"
    )


def test_datasets_check_lists_the_aliases_that_normalize_to_nothing(tmp_path: Path):
    ds = build(
        tmp_path, {"trivia": {"1": open_q("Paris"), "2": open_q("Rome", "\t"), "3": open_q("the")}}, {}
    )
    result = runner.invoke(app, ["datasets", "check", str(ds), "--format", "json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["total"]["open"] == 3
    assert result.stderr.splitlines() == [
        f"kag: warning: {ds}: trivia/2: 'output.answers' item 2, '\\t' normalizes to nothing: it is ignored when graded",
        (
            f"kag: warning: {ds}: trivia/3: 'output.answers' item 1, 'the' normalizes to nothing: it is ignored"
            " when graded; the question has no other accepted answer and is not scored"
        ),
    ]
