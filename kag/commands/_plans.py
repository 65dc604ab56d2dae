"""One plan per command: for each ``--format`` of `kag stats` and `kag stats compare`, what
grading computes for it and which renderer draws it, decided once here (as ripgrep's
``hiargs`` and pip-audit's format enum): the commands read the plan and never test the
format themselves. A new format is its renderer module and one line in a table below; a
test checks that each table covers its enum.

The renderers are imported when they draw, so that ``kag --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kag.render.formats import ExportFormat, ReportFormat, StatsFormat, TableFormat

if TYPE_CHECKING:
    from kag.datasets import Datasets
    from kag.grading.compare.against import AgainstRun
    from kag.grading.compare.analysis import Analysis
    from kag.grading.compare.epoch_means import MeanComparisonRun
    from kag.grading.compare.records import AnswerSet
    from kag.grading.compare.setups import ComparisonRun
    from kag.grading.mcq.metrics import GradeRun
    from kag.grading.mcq.summary import Summary
    from kag.grading.mcq.trees import ResultSource

#: What grading computes beyond the summary: each graded file's record, the epoch blocks,
#: the evidence blocks, the paired comparisons of the setups.
Need = Literal["records", "epochs", "evidence", "analysis"]

#: A gate of the run: its name and its verdict (None: passed).
Gates = Sequence[tuple[str, str | None]]


@dataclass(frozen=True)
class StatsOutput:
    """Everything a `kag stats` renderer may draw from: the summary, the grading run, the
    inputs that named it, the gates' verdicts, and (when the plan needs ``analysis``) the
    answers and their analysis."""

    summary: Summary
    graded: GradeRun
    loaded: Datasets
    datasets: Path
    source: ResultSource
    prefix: str
    setups: tuple[str, ...]
    dataset_globs: tuple[str, ...]
    extracted: bool
    gates: Gates
    answers: AnswerSet | None = None
    analysis: Analysis | None = None


@dataclass(frozen=True)
class StatsPlanLine:
    """One format of `kag stats`: what its renderer reads beyond the summary, whether it is
    the page (written to ``--output`` only), and the renderer."""

    needs: frozenset[Need]
    draw: Callable[[StatsOutput], str]
    page: bool = False


def _table(name: Literal["render_text", "render_json", "render_markdown"]) -> Callable[[StatsOutput], str]:
    def draw(out: StatsOutput) -> str:
        from kag.render import stats

        renderer: Callable[[Summary], str] = getattr(stats, name)
        return renderer(out.summary)

    return draw


def _export(fmt: ExportFormat) -> Callable[[StatsOutput], str]:
    def draw(out: StatsOutput) -> str:
        from kag.render.export import RENDERERS

        graded = out.graded
        return RENDERERS[fmt](
            graded.records or (), out.loaded, graded.open_records or (), source=out.source, prefix=out.prefix
        )

    return draw


def _stats_page(out: StatsOutput) -> str:
    from kag.commands._report import html_page

    assert out.answers is not None and out.analysis is not None  # the plan needs the analysis
    return html_page(out.answers, out.analysis, out.datasets, out.source, out.prefix)


def _stats_junit(out: StatsOutput) -> str:
    """The JUnit document of the graded files, the skipped ones and the gates."""
    from kag import __version__
    from kag.grading.mcq.skipped import skipped_files
    from kag.render.junit import Gate, cases_from_records, render_junit

    graded = out.graded
    skipped = skipped_files(out.loaded, out.source, out.prefix, out.setups, out.dataset_globs)
    cases = cases_from_records(
        graded.records or (), out.loaded, graded.open_records or (), skipped, extracted=out.extracted
    )
    return render_junit(
        cases,
        [Gate(n, v) for n, v in out.gates],
        prefix=out.prefix,
        version=__version__,
        grade="extracted" if out.extracted else None,
        suite_properties=asked_measure_properties(out.summary),
    )


def asked_measure_properties(summary: Summary) -> dict[tuple[str, str], dict[str, str]]:
    """Per (setup, dataset) block, the JSON keys of the measures that are suite properties
    (the optional ones a request asked for, such as the judge's verdicts, and retrieval
    quality) that the block has, flattened as ``key.field`` names with
    their JSON values as text: what a JUnit suite adds to its properties."""
    import orjson

    from kag.grading.measures import registered
    from kag.grading.measures.declarations import Block

    keys = [k for m in registered() if (m.optional if m.junit is None else m.junit) for k in m.json]
    found: dict[tuple[str, str], dict[str, str]] = {}
    for s in summary.setups:
        for dataset, metrics in s.per_dataset.items():
            block = Block(s.setup, dataset, metrics, None, summary)
            shown: dict[str, str] = {}
            for key in keys:
                if key.when is not None and not key.when(block):
                    continue
                value = key.value(block)
                fields = value.items() if isinstance(value, dict) else [("", value)]
                for name, v in fields:
                    text = v if isinstance(v, str) else "" if v is None else orjson.dumps(v).decode()
                    shown[f"{key.key}.{name}" if name else key.key] = text
            if shown:
                found[(s.setup, dataset)] = shown
    return found


#: Every format of `kag stats`: what it needs, and its renderer.
STATS_PLANS: Mapping[StatsFormat, StatsPlanLine] = {
    StatsFormat.TEXT: StatsPlanLine(frozenset({"epochs"}), _table("render_text")),  # the epochs section
    StatsFormat.JSON: StatsPlanLine(frozenset({"epochs", "evidence"}), _table("render_json")),
    # Evidence: the retrieval-quality columns show when the datasets file has gold evidence.
    StatsFormat.MARKDOWN: StatsPlanLine(frozenset({"evidence"}), _table("render_markdown")),
    # The comparisons and flips of the page.
    StatsFormat.HTML: StatsPlanLine(frozenset({"records", "analysis", "evidence"}), _stats_page, page=True),
    # One test case per graded file; the retrieval quality among a suite's properties.
    StatsFormat.JUNIT: StatsPlanLine(frozenset({"records", "evidence"}), _stats_junit),
    StatsFormat.CSV: StatsPlanLine(frozenset({"records"}), _export(ExportFormat.CSV)),  # one row per file
    StatsFormat.JSONL: StatsPlanLine(frozenset({"records"}), _export(ExportFormat.JSONL)),
}


# ---------------------------------------------------------------- kag stats compare


@dataclass(frozen=True)
class CompareOutput:
    """What a `kag stats compare` renderer may draw from: the comparisons, the answers they
    pair, the gates, and the page when the plan draws one."""

    run: ComparisonRun
    answers: AnswerSet
    prefix: str
    extracted: bool
    gates: Gates
    page: str | None = None


@dataclass(frozen=True)
class AgainstOutput:
    """What ``compare --against`` draws: each setup against its earlier run, read from ``file``."""

    result: AgainstRun
    file: Path
    answers: AnswerSet
    prefix: str
    extracted: bool
    gates: Gates


@dataclass(frozen=True)
class ComparePlanLine:
    """One format of `kag stats compare`: whether it is the page (its comparisons are the
    page's analysis; written to ``--output`` only), its renderer, and those of
    ``--epochs all`` and ``--against`` (None: that mode does not draw this format)."""

    draw: Callable[[CompareOutput], str]
    means: Callable[[MeanComparisonRun], str] | None
    against: Callable[[AgainstOutput], str] | None
    page: bool = False


def _comparisons(fmt: TableFormat) -> Callable[[CompareOutput], str]:
    def draw(out: CompareOutput) -> str:
        from kag.render.compare import COMPARISON_RENDERERS

        return COMPARISON_RENDERERS[fmt](out.run)

    return draw


def _means(fmt: TableFormat) -> Callable[[MeanComparisonRun], str]:
    def draw(run: MeanComparisonRun) -> str:
        from kag.render.compare_epochs import MEAN_COMPARISON_RENDERERS

        return MEAN_COMPARISON_RENDERERS[fmt](run)

    return draw


def _against(fmt: TableFormat) -> Callable[[AgainstOutput], str]:
    def draw(out: AgainstOutput) -> str:
        from kag.render.compare import COMPARISON_RENDERERS

        return COMPARISON_RENDERERS[fmt](out.result.run)

    return draw


def _against_json(out: AgainstOutput) -> str:
    import orjson

    from kag.render.compare import comparison_run_to_json

    result = out.result
    document = {
        **comparison_run_to_json(result.run),
        "against": {
            "file": str(out.file),
            "previous_only": len(result.previous_only),
            "current_only": len(result.current_only),
            "previous_setups": list(result.previous_setups),
        },
    }
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"


def answers_junit(answers: AnswerSet, prefix: str, extracted: bool, gates: Gates) -> str:
    """The JUnit document of the paired answers and the gates."""
    from kag import __version__
    from kag.render.junit import Gate, cases_from_answers, render_junit

    return render_junit(
        cases_from_answers(answers.answers, extracted=extracted),
        [Gate(n, v) for n, v in gates],
        prefix=prefix,
        version=__version__,
        grade="extracted" if extracted else None,
    )


def _page(out: CompareOutput) -> str:
    assert out.page is not None  # drawn with the analysis, before the gates
    return out.page


def _junit(out: Any) -> str:
    return answers_junit(out.answers, out.prefix, out.extracted, out.gates)


#: Every format of `kag stats compare`: its renderers, and whether it is the page.
COMPARE_PLANS: Mapping[ReportFormat, ComparePlanLine] = {
    ReportFormat.TEXT: ComparePlanLine(
        _comparisons(TableFormat.TEXT), _means(TableFormat.TEXT), _against(TableFormat.TEXT)
    ),
    ReportFormat.JSON: ComparePlanLine(
        _comparisons(TableFormat.JSON), _means(TableFormat.JSON), _against_json
    ),
    ReportFormat.MARKDOWN: ComparePlanLine(
        _comparisons(TableFormat.MARKDOWN), _means(TableFormat.MARKDOWN), _against(TableFormat.MARKDOWN)
    ),
    ReportFormat.HTML: ComparePlanLine(_page, None, None, page=True),
    ReportFormat.JUNIT: ComparePlanLine(_junit, None, _junit),
}
