"""The `kag stats judge` report: text, markdown or HTML tables (:mod:`kag.render.table`), JSON
or JUnit XML; the sections beyond the verdict counts come from :mod:`kag.render.judge_stats`."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from kag.grading.judge import Judge, JudgeSummary, Verdict
from kag.grading.judge_stats import JudgeStatistics
from kag.grading.pairwise import PairwiseReport
from kag.grading.percent import pct
from kag.render import judge_stats as extra
from kag.render.formats import JudgeFormat
from kag.render.junit import xml_text
from kag.render.table import Table, table_html, table_markdown, table_text
from kag.textsafe import escape_controls

HEADERS = ("SETUP", "JUDGED", "CORRECT", "INCORRECT", "UNUSABLE", "ACC%", "AGREE%")


def judge_table(summaries: Sequence[JudgeSummary]) -> Table:
    """One row per setup; ACC% and AGREE% (agreement with the exact match) in percent."""
    rows = tuple(
        (
            s.setup,
            str(s.judged),
            str(s.correct),
            str(s.incorrect),
            str(s.unusable),
            pct(s.accuracy),
            pct(s.agreement_with_exact_match),
        )
        for s in summaries
    )
    return Table(HEADERS, rows, ("l", "r", "r", "r", "r", "r", "r"))


_UNUSABLE_WHY = "a reply that names neither CORRECT nor INCORRECT, or a request that failed"


def no_verdict_note(summaries: Sequence[JudgeSummary]) -> str | None:
    """The warning for setups whose every verdict is unusable (they have no accuracy), naming
    the count; None when every setup has a usable verdict."""
    blind = [s for s in summaries if s.judged and not s.correct + s.incorrect]
    if not blind:
        return None
    count = sum(s.judged for s in blind)
    if len(blind) == len(summaries):
        return (
            f"the judge gave no usable verdict: all {count} verdict(s) are unusable ({_UNUSABLE_WHY}); "
            "so there is no ACC%: check the judge model and the prompt"
        )
    names = ", ".join(escape_controls(s.setup) for s in blind)
    return (
        f"the judge gave no usable verdict for {names}: {count} verdict(s), all unusable ({_UNUSABLE_WHY}); "
        "so they have no ACC%"
    )


@dataclass(frozen=True)
class JudgeReport:
    """What `kag stats judge` reports: who judged, with which prompt, and the verdicts per
    setup; ``statistics`` (several judges, repeats, labels) when computed, ``pairwise`` in
    place of the verdicts under ``--pairwise``."""

    judge: Judge
    prompt_sha256: str
    summaries: Sequence[JudgeSummary]
    statistics: JudgeStatistics | None = None
    pairwise: PairwiseReport | None = None


def _sections(report: JudgeReport) -> list[tuple[str, Table]]:
    if report.pairwise is not None:
        p = report.pairwise
        title = (
            f"{escape_controls(p.a)} against {escape_controls(p.b)}, {p.questions} question(s), both orders"
        )
        return [(title, extra.pairwise_table(p))]
    return [("Verdicts", judge_table(report.summaries)), *extra.sections(report.statistics)]


def render_judge_text(report: JudgeReport) -> str:
    """The tables one after another, each but the verdict counts under its title, then the notes."""
    parts = [
        table_text(table) if i == 0 and report.pairwise is None else f"{title}\n{table_text(table)}"
        for i, (title, table) in enumerate(_sections(report))
    ]
    notes = extra.notes(report.statistics)
    if notes:
        parts.append("\n".join(notes))
    return "\n\n".join(parts) + "\n"


def render_judge_markdown(report: JudgeReport) -> str:
    parts = [f"### {title}\n\n{table_markdown(table)}" for title, table in _sections(report)]
    notes = extra.notes(report.statistics)
    return "\n\n".join(parts + ([("\n".join(f"- {line}" for line in notes))] if notes else [])) + "\n"


def _shown(table: Table) -> Table:
    """The table with every control character of its cells written out (``\\x1b``)."""
    return replace(table, rows=tuple(tuple(escape_controls(c) for c in row) for row in table.rows))


def render_judge_html(report: JudgeReport) -> str:
    from kag.render.templating import render_template

    judge = report.judge
    return (
        str(
            render_template(
                "judge_page.html.j2",
                title="kag stats judge",
                facts=f"judge {extra.judge_name(judge)} | prompt sha256 {report.prompt_sha256[:12]}",
                sections=[(title, table_html(_shown(table))) for title, table in _sections(report)],
                notes=extra.notes(report.statistics),
            )
        )
        + "\n"
    )


def render_judge_json(report: JudgeReport) -> str:
    """``{"judge": {provider, model, prompt_sha256}, "setups": [...]}``, indented; with the
    statistics, each setup entry gains the keys of :func:`kag.render.judge_stats.setup_json`
    and the document those of :func:`~kag.render.judge_stats.statistics_json`; under
    ``--pairwise``, ``"pairwise"`` holds the comparison."""
    judge = report.judge
    by_setup = {s.setup: s for s in report.statistics.setups} if report.statistics else {}
    document: dict[str, Any] = {
        "judge": {"provider": judge.provider, "model": judge.model, "prompt_sha256": report.prompt_sha256},
        "setups": [
            {
                "setup": s.setup,
                "judged": s.judged,
                "correct": s.correct,
                "incorrect": s.incorrect,
                "unusable": s.unusable,
                "accuracy": s.accuracy,
                "agreement_with_exact_match": s.agreement_with_exact_match,
                **(extra.setup_json(by_setup[s.setup]) if s.setup in by_setup else {}),
            }
            for s in report.summaries
        ],
    }
    if report.statistics is not None:
        document |= extra.statistics_json(report.statistics)
    if report.pairwise is not None:
        document["pairwise"] = extra.pairwise_json(report.pairwise)
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"


def _properties(parent: ET.Element, values: dict[str, str | None]) -> None:
    element = ET.SubElement(parent, "properties")
    for name, value in values.items():
        ET.SubElement(element, "property", name=name, value=xml_text(value or ""))


def render_judge_junit(report: JudgeReport) -> str:
    """One ``<testsuite>`` per setup (its figures as properties), one ``<testcase>`` per judged
    answer: ``<failure>`` for an INCORRECT verdict, ``<skipped>`` for an unusable one. Under
    ``--pairwise``, one suite whose testcases are the criteria, their figures its properties
    (``<criterion>.<figure>``)."""
    root = ET.Element("testsuites", name="kag.judge")
    if report.pairwise is not None:
        p = report.pairwise
        suite = ET.SubElement(
            root,
            "testsuite",
            name=xml_text(f"pairwise/{p.a} vs {p.b}"),
            tests=str(len(p.criteria)),
            failures="0",
            errors="0",
        )
        _properties(
            suite,
            {f"{c}.{k}": v for c, values in extra.pairwise_properties(p) for k, v in values.items()},
        )
        for criterion, _ in extra.pairwise_properties(p):
            ET.SubElement(suite, "testcase", classname="pairwise", name=xml_text(criterion))
    stats = report.statistics
    for s in stats.setups if stats is not None else ():
        summary = s.summary
        suite = ET.SubElement(
            root,
            "testsuite",
            name=xml_text(f"judge/{summary.setup}"),
            tests=str(summary.judged),
            failures=str(summary.incorrect),
            errors="0",
            skipped=str(summary.unusable),
        )
        _properties(suite, extra.properties(s))
        for judged in stats.combined if stats is not None else ():
            if judged.item.setup != summary.setup:
                continue
            item = judged.item
            case = ET.SubElement(
                suite, "testcase", classname=xml_text(item.dataset), name=xml_text(item.question)
            )
            if judged.verdict is Verdict.INCORRECT:
                ET.SubElement(case, "failure", type="judged incorrect", message="the judge says INCORRECT")
            elif judged.verdict is Verdict.UNUSABLE:
                ET.SubElement(case, "skipped", message="no usable verdict")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


RENDERERS: dict[JudgeFormat, Callable[[JudgeReport], str]] = {
    JudgeFormat.TEXT: render_judge_text,
    JudgeFormat.JSON: render_judge_json,
    JudgeFormat.MARKDOWN: render_judge_markdown,
    JudgeFormat.HTML: render_judge_html,
    JudgeFormat.JUNIT: render_judge_junit,
}
