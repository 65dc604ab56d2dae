"""The judge's verdicts as a measure (kag.grading.measures.judge): the verdicts `kag stats
judge` cached are read into the records by `kag stats --judge` and counted per block, equal
to the judge's own report, in the JSON blocks, the HTML page, the JUnit properties and
`kag.grade`; without `--judge` no report changes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

import kag
from kag.cli import app
from kag.generation.config import load_config
from kag.grading.judge import Judge, judge_key
from kag.grading.judge_prompt import load_judge_prompt
from kag.grading.measures.judge import JudgeCounts, add_verdict, judge_accuracy, judge_agreement
from kag.grading.verdicts import Verdict
from tests.bench_helpers import FAKE_CONFIG, fresh, server_fixture
from tests.fakeserver import FakeServer
from tests.judge_helpers import REPLIES, make_tree

server = server_fixture("Maybe, hard to say.")
JUDGE = ["--judge", "oa/judge-m", "--config", "config.toml"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: FakeServer) -> Path:
    fresh(server, monkeypatch, key="sk-test")
    server.state.replies = dict(REPLIES)
    make_tree(tmp_path / "results")
    (tmp_path / "config.toml").write_text(FAKE_CONFIG)
    monkeypatch.chdir(tmp_path)
    judged = CliRunner().invoke(
        app,
        ["stats", "judge", "-c", "config.toml", "-p", "oa", "-m", "judge-m", "-d", "datasets.json",
         "-r", "results", "--mcq", "--format", "json"],
    )  # fmt: skip
    assert judged.exit_code == 0, judged.stderr
    (tmp_path / "judge.json").write_text(judged.stdout)
    return tmp_path


def stats(*extra: str) -> str:
    result = CliRunner().invoke(app, ["stats", "-d", "datasets.json", "-r", "results", *extra])
    assert result.exit_code == 0, result.stderr
    return result.stdout


#: The keys of the ``judge`` block: those of a setup entry of `kag stats judge --format json`
#: that count the verdicts (the entry also holds the labels' and the judges' statistics).
BLOCK_KEYS = ("judged", "correct", "incorrect", "unusable", "accuracy", "agreement_with_exact_match")


def judge_rows(project: Path) -> dict[str, dict[str, object]]:
    report = orjson.loads((project / "judge.json").read_bytes())
    return {row["setup"]: {k: row[k] for k in BLOCK_KEYS} for row in report["setups"]}


def test_the_counts_and_the_formulas() -> None:
    counts = JudgeCounts()
    for verdict, strict in [
        (Verdict.CORRECT, True),  # agrees
        (Verdict.CORRECT, False),  # disagrees
        (Verdict.INCORRECT, False),  # agrees
        (Verdict.UNUSABLE, True),  # no verdict: in neither the accuracy nor the agreement
    ]:
        add_verdict(counts, verdict, strict)
    assert (counts.judged, counts.judged_correct, counts.judged_incorrect, counts.judged_unusable) == (
        4,
        2,
        1,
        1,
    )
    assert judge_accuracy(counts) == 2 / 3 and judge_agreement(counts) == 2 / 3
    assert judge_accuracy(JudgeCounts()) is None and judge_agreement(JudgeCounts()) is None


def test_kag_stats_counts_the_judge_s_cached_verdicts_as_the_judge_reports_them(project: Path) -> None:
    expected = judge_rows(project)
    doc = orjson.loads(stats("--format", "json", *JUDGE))
    found = {s["setup"]: s["overall"]["judge"] for s in doc["setups"]}
    assert found == expected
    # Each dataset block counts its own files' verdicts, and they add up to the setup's.
    for s in doc["setups"]:
        assert list(s["overall"])[-1] == "judge"
        assert sum(b["judge"]["judged"] for b in s["per_dataset"].values()) == s["overall"]["judge"]["judged"]
    # The same through the Python API.
    key = judge_key(load_config(project / "config.toml"), Judge("oa", "judge-m"), load_judge_prompt(None))
    report = kag.grade(project / "datasets.json", project / "results", judge=key)
    assert report.to_dict() == doc


def test_the_page_and_the_junit_suites_show_the_judge(project: Path) -> None:
    from kag.grading.percent import pct

    expected = judge_rows(project)
    assert stats("--format", "html", "-o", "page.html", *JUDGE) == ""
    html = (project / "page.html").read_text()
    header = '<th class="r">JUDGE%</th><th class="r">AGREE%</th></tr>'
    assert header in html
    s1 = html.split('<td class="l">s1</td>')[1].split("</tr>")[0]
    judge_cells = f'<td class="r">{pct(expected["s1"]["accuracy"])}</td><td class="r">'  # type: ignore[arg-type]
    assert s1.endswith(judge_cells + f"{pct(expected['s1']['agreement_with_exact_match'])}</td>")  # type: ignore[arg-type]
    assert "JUDGE%" not in stats("--format", "markdown")
    # One suite per (setup, dataset): its own verdicts, as in the JSON blocks.
    doc = orjson.loads(stats("--format", "json", *JUDGE))
    junit = stats("--format", "junit", *JUDGE)
    for setup in doc["setups"]:
        for dataset, block in setup["per_dataset"].items():
            suite = junit.split(f'<testsuite name="{setup["setup"]}/{dataset}"')[1].split("</properties>")[0]
            for name, value in block["judge"].items():
                assert f'<property name="judge.{name}" value="{orjson.dumps(value).decode()}" />' in suite
    assert "judge." not in stats("--format", "junit")


def test_without_judge_nothing_changes_and_a_bad_spec_is_refused(project: Path) -> None:
    assert "judge" not in stats("--format", "json")
    bad = CliRunner().invoke(app, ["stats", "-d", "datasets.json", "-r", "results", "--judge", "oa"])
    assert bad.exit_code == 2 and "--judge oa: expected PROVIDER/MODEL" in bad.stderr
    unknown = CliRunner().invoke(
        app, ["stats", "-d", "datasets.json", "-r", "results", "--judge", "nope/m", "--config", "config.toml"]
    )
    assert unknown.exit_code == 2 and "nope" in unknown.stderr
