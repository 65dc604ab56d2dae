"""kag's Python API (kag.api): the report equals `kag stats --format json`, records equal the
per-file grade, errors are KagError (never SystemExit)."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

import kag
from kag.cli import app
from kag.errors import InputError, KagError, UsageError
from tests.conftest import REPO, write_ok

EXAMPLES = REPO / "examples"
DATASETS = EXAMPLES / "dataset" / "datasets.json"
RESULTS = EXAMPLES / "results"


def stats_json(*args: str | Path) -> dict:
    result = CliRunner().invoke(app, ["stats", *map(str, args), "--format", "json"])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


@pytest.mark.parametrize(
    "options, cli",
    [
        ({}, []),
        ({"extract": "letter"}, ["--extract", "letter"]),
        ({"setups": ["qwen*"], "datasets_filter": "pubmedqa"}, ["--setup", "qwen*", "--dataset", "pubmedqa"]),
    ],
)
def test_grade_equals_the_json_report(options: dict, cli: list[str]) -> None:
    report = kag.grade(DATASETS, RESULTS, **options)
    assert report.to_dict() == stats_json("-d", DATASETS, "-r", RESULTS, *cli)
    assert orjson.loads(report.to_json()) == report.to_dict()


def test_grade_equals_the_json_report_on_the_real_tree(med_kag: Path) -> None:
    datasets, results = med_kag / "datasets" / "mirage.json", med_kag / "results"
    report = kag.grade(datasets, results, prefix="wekgr-", extract="letter")
    cli = stats_json("-d", datasets, "-r", results, "--prefix", "wekgr-", "--extract", "letter")
    assert report.to_dict() == cli
    assert len(report.setups) == 2


def test_labelled_trees_are_a_mapping(tmp_path: Path) -> None:
    report = kag.grade(DATASETS, {"a": RESULTS, "b": RESULTS})
    cli = stats_json("-d", DATASETS, "-r", f"a={RESULTS}", "-r", f"b={RESULTS}")
    assert report.to_dict() == cli
    assert {r.label for r in kag.records(DATASETS, {"a": RESULTS, "b": RESULTS})} == {"a", "b"}


def test_records_match_the_report_counts() -> None:
    rows = list(kag.records(DATASETS, RESULTS, extract="letter"))
    doc = kag.grade(DATASETS, RESULTS, extract="letter").to_dict()
    for block in doc["setups"]:
        mine = [r for r in rows if r.setup == block["setup"] and r.type == "MCQ"]
        assert len(mine) == block["overall"]["total"]
        assert sum(r.outcome == "OK" for r in mine) == block["overall"]["correct"]
        assert sum(r.outcome == "ERR" for r in mine) == block["overall"]["errors"]
        assert sum(r.extracted_outcome == "OK" for r in mine) == block["overall"]["extracted"]["correct"]
    first = next(r for r in rows if (r.dataset, r.question, r.setup) == ("mcq-form", "0", "qwen35-9b-kag"))
    assert first.path == str(RESULTS / "mcq-form" / "0" / "qwen35-9b-kag.json")
    assert (first.model, first.provider, first.gold, first.epoch, first.label) == (
        "qwen3.5:9b",
        "ollama",
        "b",
        1,
        None,
    )
    assert first.generation_secs == pytest.approx(7.0)
    assert (first.vertices, first.relationships, first.properties) == (12, 18, 41)
    assert set(first.to_dict()) == set(kag.Record.__dataclass_fields__)


def test_records_carry_the_later_epochs(tmp_path: Path) -> None:
    datasets = tmp_path / "d.json"
    options = {"A": "x", "B": "y"}
    datasets.write_bytes(
        orjson.dumps(
            {"ds": {"q1": {"input": "?", "output": {"type": "MCQ", "options": options, "answer": "A"}}}}
        )
    )
    root = tmp_path / "r"
    write_ok(root / "ds" / "q1" / "s.json", "A")
    write_ok(root / "ds" / "q1" / "epochs" / "2" / "s.json", "B")
    write_ok(root / "ds" / "q1" / "epochs" / "3" / "s.json", "A")
    write_ok(root / "ds" / "q1" / "epochs" / "5" / "s.json", "A")  # after a gap: not counted
    rows = list(kag.records(datasets, root))
    assert [(r.epoch, r.outcome) for r in rows] == [(1, "OK"), (2, "WRONG"), (3, "OK")]
    assert rows[1].path == str(root / "ds" / "q1" / "epochs" / "2" / "s.json")


def test_errors_are_kag_errors_not_exits(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="results directory not found"):
        kag.grade(DATASETS, tmp_path / "nowhere")
    with pytest.raises(InputError, match="not found"):
        kag.grade(tmp_path / "missing.json", RESULTS)
    with pytest.raises(UsageError, match="datasets_filter 'nope'"):
        kag.grade(DATASETS, RESULTS, datasets_filter="nope")
    with pytest.raises(UsageError, match="extract"):
        kag.grade(DATASETS, RESULTS, extract="bogus")
    with pytest.raises(UsageError, match="label"):
        kag.grade(DATASETS, {"a/b": RESULTS})
    try:
        list(kag.records(DATASETS, tmp_path / "nowhere"))
    except SystemExit:  # pragma: no cover - the failure this test is about
        pytest.fail("a library call exited")
    except KagError:
        pass


def test_records_frame_without_pandas_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(InputError, match=r"'pandas' package is not installed \(install it with: .*pandas"):
        kag.records_frame(DATASETS, RESULTS)


def test_records_frame_has_one_row_per_record() -> None:
    pytest.importorskip("pandas")
    frame = kag.records_frame(DATASETS, RESULTS, extract="letter")
    rows = list(kag.records(DATASETS, RESULTS, extract="letter"))
    assert len(frame) == len(rows) == 12
    assert list(frame.columns) == list(kag.Record.__dataclass_fields__)
    assert frame["outcome"].tolist() == [r.outcome for r in rows]


def test_import_kag_stays_light() -> None:
    import subprocess

    code = "import sys, kag; print('kag.api' in sys.modules, 'orjson' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
    assert "grade" in dir(kag)
    with pytest.raises(AttributeError):
        kag.nothing_here  # noqa: B018


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: kag.grade(None, RESULTS), r"^datasets: expected a path \(str or pathlib.Path\), got None$"),
        (lambda: kag.grade(123, RESULTS), r"^datasets: expected a path .*got int$"),
        (lambda: kag.grade(b"d.json", RESULTS), r"^datasets: expected a path .*got bytes$"),
        (lambda: kag.grade("d\0.json", RESULTS), r"^datasets 'd\\x00.json': a path cannot contain a NUL"),
        (lambda: kag.grade(DATASETS, None), r"^results: expected a path or a mapping .*got None$"),
        (lambda: kag.grade(DATASETS, [RESULTS]), r"^results: expected a path or a mapping .*got list$"),
        (lambda: kag.grade(DATASETS, {1: RESULTS}), r"^results: a label must be a string, got int \(1\)$"),
        (lambda: kag.grade(DATASETS, {"a": None}), r"^results\['a'\]: expected a path .*got None$"),
        (lambda: kag.grade(DATASETS, RESULTS, prefix=None), r"^prefix: expected a string, got None$"),
        (lambda: kag.grade(DATASETS, RESULTS, prefix=1), r"^prefix: expected a string, got int \(1\)$"),
        (lambda: kag.grade(DATASETS, RESULTS, extract=1), r"^extract: expected a string or None, got int"),
        (
            lambda: kag.grade(DATASETS, RESULTS, extract="bogus"),
            r"^extract: expected 'letter' or 'regex:PATTERN'",
        ),
        (lambda: kag.records(DATASETS, RESULTS, extract="regex:("), r"^extract regex:\(: invalid pattern"),
        (lambda: kag.grade(DATASETS, RESULTS, setups=1), r"^setups: expected a glob string or a list"),
        (lambda: kag.grade(DATASETS, RESULTS, setups=[b"x"]), r"^setups: expected glob strings, got bytes"),
        (
            lambda: kag.grade(DATASETS, RESULTS, datasets_filter=1),
            r"^datasets_filter: expected a glob string",
        ),
        (
            lambda: kag.grade(DATASETS, RESULTS, datasets_filter={"a": 1}),
            r"^datasets_filter: expected a glob",
        ),
        (
            lambda: kag.grade(DATASETS, RESULTS).accuracy("nope"),
            r"^setup 'nope': not in the report \(setups: ",
        ),
        (
            lambda: kag.records(None, RESULTS),
            r"^datasets: expected a path",
        ),  # at the call, not the first next()
        (lambda: kag.records(DATASETS, RESULTS, prefix=None), r"^prefix: expected a string"),
        (lambda: kag.records_frame(DATASETS, 7), r"^results: expected a path or a mapping"),
    ],
)
def test_unusable_arguments_are_usage_errors(call: object, message: str) -> None:
    assert callable(call)
    with pytest.raises(UsageError, match=message):
        call()


@pytest.mark.parametrize("function", [kag.grade, kag.records, kag.records_frame])
def test_a_setup_glob_that_selects_nothing_is_a_usage_error_naming_the_setups(function: object) -> None:
    assert callable(function)
    if function is kag.records_frame:
        pytest.importorskip("pandas")
    expected = (
        r"^setups 'nomatch\*' matches no setup in .*examples/results "
        r"\(setups: qwen35-9b-kag, qwen35-9b-native, smollm2-135m-native\)$"
    )
    with pytest.raises(UsageError, match=expected):
        function(DATASETS, RESULTS, setups=["qwen*", "nomatch*"])
    with pytest.raises(UsageError, match=r"^setups 'a/zz' matches no setup in a=.*, b=.* \(setups: a/qwen35"):
        function(DATASETS, {"a": RESULTS, "b": RESULTS}, setups="a/zz")


@pytest.mark.parametrize("function", [kag.grade, kag.records, kag.records_frame])
def test_a_keyword_the_api_does_not_take_is_a_type_error(function: object) -> None:
    assert callable(function)
    expected = rf"^{function.__name__}\(\) got an unexpected keyword argument 'setup'$"
    with pytest.raises(TypeError, match=expected):
        function(DATASETS, RESULTS, setup="qwen*")


def test_the_api_prints_no_warning_and_returns_them(tmp_path: Path) -> None:
    import shutil
    import subprocess

    root = tmp_path / "r"
    shutil.copytree(RESULTS, root)
    (root / "pubmedqa" / "12377809" / "qwen35-9b-kag.json").write_text("{bad", encoding="utf-8")
    code = (
        "import kag, sys\n"
        f"r = kag.grade({str(DATASETS)!r}, {str(root)!r})\n"
        "print(len(r.warnings)); print(r.warnings[0])\n"
        f"print(len(list(kag.records({str(DATASETS)!r}, {str(root)!r}))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr == ""  # Python's last-resort handler printed the warning here
    count, warning, rows = done.stdout.splitlines()
    assert count == "1"
    assert warning.startswith(
        f"{root}/pubmedqa/12377809/qwen35-9b-kag.json: unreadable result file: not valid JSON"
    )
    assert int(rows) == 11


def test_records_speak_the_words_of_the_export_rows() -> None:
    # gold, response, extracted, outcome, extracted_outcome: the same names and values as --format jsonl
    rows = [
        orjson.loads(line)
        for line in CliRunner()
        .invoke(
            app,
            ["stats", "-d", str(DATASETS), "-r", str(RESULTS), "--extract", "letter", "--format", "jsonl"],
        )
        .stdout.splitlines()
    ]
    records = [r for r in kag.records(DATASETS, RESULTS, extract="letter") if r.epoch == 1]
    keys = ("dataset", "question", "setup", "outcome", "gold", "response", "extracted", "extracted_outcome")
    assert [tuple(r.to_dict()[k] for k in keys) for r in records] == [
        tuple(row[k] for k in keys) for row in rows
    ]
    assert "answer" not in records[0].to_dict()
    assert all(r.answer == r.response for r in records)  # the former name still reads the response
    assert any(r.extracted is not None and r.extracted != r.response for r in records)


def test_records_read_a_reply_that_names_an_option_by_its_text(tmp_path: Path) -> None:
    datasets = tmp_path / "d.json"
    options = {"A": "Hypokalemia", "B": "Hyperkalemia", "C": "Vitamin C deficiency"}
    question = {"input": "?", "output": {"type": "MCQ", "options": options, "answer": "B"}}
    datasets.write_bytes(orjson.dumps({"ds": {"q1": question, "q2": {**question}}}))
    root = tmp_path / "r"
    write_ok(root / "ds" / "q1" / "s.json", "The answer is Hyperkalemia.")
    write_ok(root / "ds" / "q2" / "s.json", "Hyperkalemia or hypokalemia?")
    rows = list(kag.records(datasets, root, extract="letter"))
    assert [(r.outcome, r.extracted, r.extracted_outcome) for r in rows] == [
        ("WRONG", "B", "OK"),
        ("WRONG", None, "ERR"),
    ]
    assert (
        kag.grade(datasets, root, extract="letter").to_dict()["setups"][0]["overall"]["extracted"]["correct"]
        == 1
    )
