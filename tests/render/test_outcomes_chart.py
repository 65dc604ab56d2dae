"""The outcomes chart of retrieval quality (kag/render/outcomes_chart.py): one bar per setup
with retrieval quality, its parts in proportion to the counts of `kag stats --format json`,
its text escaped; on the `kag stats --format html` page only with gold evidence."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
from typer.testing import CliRunner

from kag.cli import app
from kag.grading.mcq.metrics import Metrics
from kag.grading.mcq.summary import SetupSummary
from kag.render.outcomes_chart import OUTCOME_PARTS, outcome_rows, outcomes_chart

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RQ = ["-d", str(EXAMPLES / "retrieval" / "datasets.json"), "-r", str(EXAMPLES / "retrieval" / "results")]


def _setup(name: str, rr: int, rw: int, mr: int, mw: int) -> SetupSummary:
    counts = {"rq_reached_right": rr, "rq_reached_wrong": rw, "rq_missed_right": mr, "rq_missed_wrong": mw}
    return SetupSummary(name, Metrics(rq_questions=rr + rw + mr + mw, **counts), {})


def _bars(svg: str) -> dict[str, float]:
    return {
        key: float(width)
        for key, width in re.findall(r'class="outcome (\w+)" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', svg)
    }


def test_the_parts_are_in_proportion_and_a_setup_without_quality_is_not_drawn() -> None:
    summaries = [_setup("kag", 3, 1, 0, 4), _setup("native", 0, 0, 0, 0)]
    assert outcome_rows(summaries) == [
        ("kag", {"reached_right": 3, "reached_wrong": 1, "missed_right": 0, "missed_wrong": 4})
    ]
    svg = str(outcomes_chart(summaries))
    assert _bars(svg) == {"reached_right": 180.0, "reached_wrong": 60.0, "missed_wrong": 240.0}
    assert "n=8" in svg and "native" not in svg
    assert [words for _, words, _ in OUTCOME_PARTS] == [
        "reached, right",
        "reached, wrong (a reasoning miss)",
        "missed, right",
        "missed, wrong (a retrieval miss)",
    ]
    assert str(outcomes_chart([_setup("native", 0, 0, 0, 0)])) == ""


def test_a_setup_name_is_escaped() -> None:
    svg = str(outcomes_chart([_setup('<script>window.pwned=1</script>"', 1, 0, 0, 0)]))
    assert "<script>" not in svg and "&lt;script&gt;window.pwned=1&lt;/script&gt;&quot;" in svg


def test_the_html_page_draws_the_counts_of_the_json_document() -> None:
    done = runner.invoke(app, ["stats", *RQ, "--format", "json"])
    assert done.exit_code == 0, done.output
    blocks = {s["setup"]: s["overall"]["retrieval_quality"] for s in orjson.loads(done.stdout)["setups"]}
    page = runner.invoke(app, ["stats", *RQ, "--format", "html"])
    assert page.exit_code == 0
    chart = page.stdout[page.stdout.index("Gold evidence reached, and the answer</h2>") :]
    chart = chart[: chart.index("</svg>")]
    for setup in ("rust-kag", "kag-graph"):
        outcomes = blocks[setup]["outcomes"]
        row = chart[chart.index(f">{setup}</text>") :]
        row = row[: row.index("n=")]
        total = sum(outcomes.values())
        assert _bars(row) == {k: 480 * v / total for k, v in outcomes.items() if v}
    assert blocks["native"] is None and ">native</text>" not in chart
    plain = runner.invoke(
        app,
        [
            "stats",
            "-d",
            str(EXAMPLES / "dataset" / "datasets.json"),
            "-r",
            str(EXAMPLES / "results"),
            "--format",
            "html",
        ],
    )
    assert plain.exit_code == 0 and "Gold evidence reached" not in plain.stdout
