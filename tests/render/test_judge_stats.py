"""The judge report's sections in every format: the same figures, hostile setup names made
harmless, JUnit valid against the Jenkins schema."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import orjson
import pytest

from kag.grading.judge import Judge, JudgedItem, JudgeItem, JudgeRun, Kind, Verdict, summarize_verdicts
from kag.grading.judge_labels import Label
from kag.grading.judge_stats import judge_statistics
from kag.grading.pairwise import Choice, PairOutcome, PairwiseReport, summarize_pairwise
from kag.render.formats import JudgeFormat
from kag.render.judge import RENDERERS, JudgeReport

XSD = Path(__file__).parents[1] / "data" / "junit" / "junit-10.xsd"
HOSTILE = "<script>window.pwned=1</script>|\x1b[31m"
C, I, U = Verdict.CORRECT, Verdict.INCORRECT, Verdict.UNUSABLE


def report() -> JudgeReport:
    items = [
        JudgeItem("d", str(n), HOSTILE if n % 2 else "plain", Kind.OPEN, "q", "r", f"x{n}", n % 3 == 0)
        for n in range(8)
    ]
    judges = [Judge("p", "m"), Judge("p", "n")]
    verdicts = [[C, I, C, U, C, C, I, C], [C, I, I, C, C, C, I, C]]
    runs = [
        [JudgeRun(tuple(JudgedItem(i, v, True) for i, v in zip(items, vs, strict=True)), 0, 0.0)]
        for vs in verdicts
    ]
    labels = [Label("d", str(n), items[n].setup, n != 1, "r1") for n in range(0, 8, 2)]
    labels += [Label("d", str(n), items[n].setup, n != 1, "r1") for n in range(1, 8, 2)]
    stats = judge_statistics(items, judges, runs, labels)
    return JudgeReport(judges[0], "0" * 64, summarize_verdicts(stats.combined), stats)


@pytest.mark.parametrize("fmt", list(JudgeFormat))
def test_every_format_keeps_hostile_names_harmless(fmt: JudgeFormat) -> None:
    text = RENDERERS[fmt](report())
    if fmt in (JudgeFormat.HTML, JudgeFormat.JUNIT):
        assert "<script>" not in text  # escaped as markup
    if fmt is not JudgeFormat.JSON:
        assert "\x1b" not in text  # a control character is shown, never sent to the terminal


def test_json_holds_the_figures_the_text_shows() -> None:
    r = report()
    doc = orjson.loads(RENDERERS[JudgeFormat.JSON](r))
    overall = doc["overall"]
    assert overall["judges_alpha"] == pytest.approx(r.statistics.overall.judges_alpha)  # type: ignore[union-attr]
    text = RENDERERS[JudgeFormat.TEXT](r)
    assert f"{overall['labels']['kappa']:.3f}" in text
    assert f"Krippendorff's alpha among the judges: {overall['judges_alpha']:.3f}" in text
    markdown = RENDERERS[JudgeFormat.MARKDOWN](r)
    assert "### Against the human labels" in markdown and f"{overall['labels']['kappa']:.3f}" in markdown


def test_junit_is_valid_and_carries_the_figures() -> None:
    xmlschema = pytest.importorskip("xmlschema")
    r = report()
    text = RENDERERS[JudgeFormat.JUNIT](r)
    xmlschema.XMLSchema(str(XSD)).validate(text)
    suites = {s.get("name"): s for s in ET.fromstring(text).iter("testsuite")}
    plain = suites["judge/plain"]
    properties = {p.get("name"): p.get("value") for p in plain.iter("property")}
    assert float(properties["judge.accuracy"]) == pytest.approx(r.statistics.setups[-1].summary.accuracy)  # type: ignore[union-attr]
    assert int(plain.get("tests") or 0) == len(list(plain.iter("testcase"))) == 4

    outcomes = [PairOutcome("d", str(n), "directness", Choice.FIRST, Choice.SECOND) for n in range(3)]
    pairwise = PairwiseReport("a", HOSTILE, 3, summarize_pairwise(outcomes, ["directness"]))
    text = RENDERERS[JudgeFormat.JUNIT](JudgeReport(Judge("p", "m"), "0" * 64, (), pairwise=pairwise))
    xmlschema.XMLSchema(str(XSD)).validate(text)
    (suite,) = ET.fromstring(text).iter("testsuite")
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["directness.wins"] == "3"
