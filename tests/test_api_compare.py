"""kag.compare, kag.flips and kag.impact (kag.api.compare): each report equals the
``kag stats compare/flips/impact --format json`` document of the same inputs; unusable
arguments are UsageErrors, as the commands exit 2."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

import kag
from kag.cli import app
from kag.errors import UsageError
from tests.conftest import REPO

EXAMPLES = REPO / "examples"
DATASETS = EXAMPLES / "dataset" / "datasets.json"
RESULTS = EXAMPLES / "results"


def command_json(command: str, *args: str | Path, datasets: Path = DATASETS, results: Path = RESULTS) -> dict:
    line = ["stats", command, *map(str, args), "-d", str(datasets), "-r", str(results), "--format", "json"]
    result = CliRunner().invoke(app, line)
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


@pytest.mark.parametrize(
    ("options", "cli"),
    [
        ({}, []),
        (
            {"baseline": "qwen35-9b-native", "seed": 7, "resamples": 300},
            ["--baseline", "qwen35-9b-native", "--seed", "7", "--resamples", "300"],
        ),
        (
            {"extract": "letter", "grade": "extracted", "alpha": 0.1},
            ["--extract", "letter", "--grade", "extracted", "--alpha", "0.1"],
        ),
        ({"setups": ["qwen*"], "datasets_filter": "pubmedqa"}, ["--setup", "qwen*", "--dataset", "pubmedqa"]),
    ],
)
def test_compare_equals_the_json_document(options: dict, cli: list[str]) -> None:
    report = kag.compare(DATASETS, RESULTS, **options)
    assert report.to_dict() == command_json("compare", *cli)
    assert orjson.loads(report.to_json()) == report.to_dict()
    assert report.regressions == tuple(report.to_dict()["regressions"])


@pytest.mark.parametrize(
    ("options", "cli"),
    [
        ({}, []),
        ({"extract": "letter", "grade": "extracted"}, ["--extract", "letter", "--grade", "extracted"]),
    ],
)
def test_flips_equals_the_json_document(options: dict, cli: list[str]) -> None:
    report = kag.flips(DATASETS, RESULTS, "qwen35-9b-kag", "qwen35-9b-native", **options)
    assert report.to_dict() == command_json("flips", "qwen35-9b-kag", "qwen35-9b-native", *cli)
    assert report.report.paired == 4


@pytest.mark.parametrize(
    ("args", "options", "cli"),
    [
        (None, {}, []),
        (
            "qwen35-9b-kag",
            {"native": "smollm2-135m-native"},
            ["qwen35-9b-kag", "--native", "smollm2-135m-native"],
        ),
    ],
)
def test_impact_equals_the_json_document(args: str | None, options: dict, cli: list[str]) -> None:
    report = kag.impact(DATASETS, RESULTS, args, **options)
    assert report.to_dict() == command_json("impact", *cli)
    assert [i.setup for i in report.impacts] == ["qwen35-9b-kag"]


def test_the_reports_equal_the_commands_on_the_real_tree(med_kag: Path) -> None:
    datasets, results = med_kag / "datasets" / "mirage.json", med_kag / "results"
    setups = kag.grade(datasets, results, prefix="wekgr-").setups
    compared = kag.compare(datasets, results, prefix="wekgr-")
    assert compared.to_dict() == command_json(
        "compare", "--prefix", "wekgr-", datasets=datasets, results=results
    )
    flipped = kag.flips(datasets, results, setups[0], setups[1], prefix="wekgr-")
    cli = command_json(
        "flips", setups[0], setups[1], "--prefix", "wekgr-", datasets=datasets, results=results
    )
    assert flipped.to_dict() == cli


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: kag.compare(DATASETS, RESULTS, alpha=2), r"^alpha 2: must be a number between 0 and 1$"),
        (lambda: kag.compare(DATASETS, RESULTS, alpha="0.1"), r"^alpha '0.1': must be a number"),
        (
            lambda: kag.compare(DATASETS, RESULTS, resamples=0),
            r"^resamples 0: must be an integer between 1 and 1,000,000$",
        ),
        (lambda: kag.compare(DATASETS, RESULTS, seed=-1), r"^seed -1: must be an integer at least 0$"),
        (lambda: kag.compare(DATASETS, RESULTS, seed=1.5), r"^seed 1.5: must be an integer"),
        (
            lambda: kag.compare(DATASETS, RESULTS, baseline="x"),
            r"^setup 'x': no such setup; setups in .*examples/results: qwen35-9b-kag, ",
        ),
        (
            lambda: kag.compare(DATASETS, RESULTS, baseline=3),
            r"^baseline: expected a setup name or None, got 3$",
        ),
        (
            lambda: kag.compare(DATASETS, RESULTS, setups="zz"),
            r"^setups 'zz' matches no setup in .*\(setups: qwen35-9b-kag, ",
        ),
        (
            lambda: kag.compare(DATASETS, RESULTS, setups="qwen35-9b-kag"),
            r"^only one setup \(qwen35-9b-kag\) has graded answers",
        ),
        (
            lambda: kag.compare(DATASETS, RESULTS, grade="extracted"),
            r"^grade='extracted' needs extract='letter'",
        ),
        (
            lambda: kag.compare(DATASETS, RESULTS, grade="lenient"),
            r"^grade 'lenient': expected 'strict' or 'extracted'$",
        ),
        (lambda: kag.compare(DATASETS, RESULTS, prefix=None), r"^prefix: expected a string, got None$"),
        (lambda: kag.compare(None, RESULTS), r"^datasets: expected a path"),
        (lambda: kag.flips(DATASETS, RESULTS, "a", "a"), r"^a and b are the same setup \(a\)$"),
        (
            lambda: kag.flips(DATASETS, RESULTS, "qwen35-9b-kag", None),
            r"^b: expected a setup name, got None$",
        ),
        (lambda: kag.flips(DATASETS, RESULTS, "qwen35-9b-kag", "x"), r"^setup 'x': no such setup"),
        (lambda: kag.impact(DATASETS, RESULTS, "qwen35-9b-native"), r"^qwen35-9b-native does not retrieve"),
        (
            lambda: kag.impact(DATASETS, RESULTS, 5),
            r"^kag_setups: expected a setup name or a list of setup names, got 5$",
        ),
        (lambda: kag.impact(DATASETS, RESULTS, native="x"), r"^setup 'x': no such setup"),
    ],
)
def test_unusable_arguments_are_usage_errors(call: object, message: str) -> None:
    assert callable(call)
    with pytest.raises(UsageError, match=message):
        call()
