"""The HTML report of `kag stats --format html` and `kag stats compare --format html`: one
self-contained page from ``templates/page.html.j2`` (jinja2, autoescaped).

Its tables (:class:`~kag.render.table.Table`) are those the text and markdown reports show
(:mod:`kag.render.compare`, :mod:`kag.render.columns`), so every format shows the same
numbers; the comparisons it shows are computed before and handed in (an
:class:`~kag.grading.compare.Analysis`), never here. The charts are drawn
here as inline SVG, their user-given text escaped by ``templates/svg.html.j2``: no script,
no font, no stylesheet and no image is fetched, so the page opens offline and can be
attached to a CI run as is. Returns strings, never prints.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from kag.grading.compare import (
    Analysis,
    AnswerSet,
    ComparisonRun,
    FlipReport,
    RetrievalImpact,
)
from kag.grading.mcq.metrics import Metrics
from kag.grading.mcq.summary import MIN_SAMPLE, SetupSummary, Summary, small_samples
from kag.grading.percent import pct
from kag.render.columns import STATS_COLUMNS, Block, Shown, cells_for, columns_for, headers_for
from kag.render.compare import (
    IMPACT_LEGEND,
    REACHED_LEGEND,
    comparison_legend,
    comparison_table,
    flip_header,
    flip_tables,
    impact_header,
    impact_table,
    reached_table,
)
from kag.render.outcomes_chart import OUTCOMES_LEGEND, outcomes_chart
from kag.render.stats import XACC_LEGEND, small_samples_note
from kag.render.table import Align, Table, interval_pct, signed_pp, table_html
from kag.render.templating import environment, render_template
from kag.render.usage import usage_legend
from kag.textsafe import escape_controls

#: Okabe-Ito palette (distinguishable with the common colour-vision deficiencies).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")


# ---------------------------------------------------------------- the ranked summary


def summary_table(summaries: Sequence[SetupSummary], shown: Shown) -> Table:
    """The ranking of `kag stats` (``Summary.setups``, already ranked) with Wilson
    intervals, in the HTML columns of :data:`~kag.render.columns.STATS_COLUMNS` that the
    run ``shown`` has (mean tokens per question with usage, the cost with prices)."""
    columns = columns_for(STATS_COLUMNS, "html", shown)
    rows: list[tuple[str, ...]] = []
    sub: list[bool] = []
    for rank, s in enumerate(summaries, 1):
        blocks = [(s.setup, None, s.overall), *((f"└ {d}", d, m) for d, m in s.per_dataset.items())]
        for label, dataset, m in blocks:
            cost = shown.costs.of(s.setup, dataset) if shown.costs is not None else None
            cells = cells_for("html", columns, Block(s.setup, dataset, m, cost))
            rows.append(
                ("" if dataset is not None else str(rank), label, *("" if c is None else c for c in cells))
            )
            sub.append(dataset is not None)
    right: Align = "r"
    align: tuple[Align, ...] = ("r", "l", *(right for _ in columns))
    return Table(("#", "SETUP", *headers_for("html", columns)), tuple(rows), align, tuple(sub))


NOTHING_SHOWN = Shown()


def ranking_legend(shown: Shown) -> tuple[str, ...]:
    """The legend lines under the ranking, after that of ACC%, PREC% and COVER%."""
    times, what = ("GEN(s)/RET(s)", "generation/retrieval") if shown.retrieval else ("GEN(s)", "generation")
    lines = [
        f"{times} = mean {what} time per question, in seconds; CTX_LEN = average prompt length, in bytes"
    ]
    if shown.retrieval:
        lines.append(
            "VERTICE/RELATION/PROPERTY = mean vertices/relationships/properties retrieved per question"
        )
    if shown.extract is not None:
        lines.append(XACC_LEGEND.format(spec=shown.extract))
    return tuple(lines)


# ---------------------------------------------------------------- SVG charts


def _svg_text(x: float, y: float, text: str, anchor: str = "start", cls: str = "") -> str:
    return str(_svg().text(f"{x:.1f}", f"{y:.1f}", text, anchor, cls))


def _svg_open(width: float, height: float, label: str) -> str:
    return str(_svg().open(width, height, label))


def _svg() -> Any:
    """The macros of ``svg.html.j2`` (they escape the text they are given)."""
    return environment().get_template("svg.html.j2").module


def _whisker(lo: float, hi: float, mid: float, cy: float, colour: str, filled: bool = True) -> str:
    """An interval [lo, hi] with end caps and a point at ``mid`` (hollow when not ``filled``)."""
    stroke = f'stroke="{colour}" stroke-width="2"'
    caps = "".join(
        f'<line x1="{e:.1f}" y1="{cy - 5:.1f}" x2="{e:.1f}" y2="{cy + 5:.1f}" {stroke}/>' for e in (lo, hi)
    )
    fill = colour if filled else "#ffffff"
    return (
        f'<line x1="{lo:.1f}" y1="{cy:.1f}" x2="{hi:.1f}" y2="{cy:.1f}" {stroke}/>{caps}'
        f'<circle cx="{mid:.1f}" cy="{cy:.1f}" r="4.5" fill="{fill}" {stroke}/>'
    )


def _gridline(x: float, height: float, cls: str = "grid") -> str:
    return f'<line x1="{x:.1f}" y1="22" x2="{x:.1f}" y2="{height - 8}" class="{cls}"/>'


def accuracy_chart(summaries: Sequence[SetupSummary]) -> Markup:
    """Accuracy with Wilson 95% whiskers: one group for all datasets, then (when there are
    several datasets) one group per dataset; one row per setup, colour = setup."""
    colours = {s.setup: PALETTE[i % len(PALETTE)] for i, s in enumerate(summaries)}
    groups: list[tuple[str, list[tuple[str, Metrics]]]] = [
        ("all datasets", [(s.setup, s.overall) for s in summaries])
    ]
    datasets = sorted({d for s in summaries for d in s.per_dataset})
    if len(datasets) > 1:
        for d in datasets:
            groups.append((d, [(s.setup, s.per_dataset[d]) for s in summaries if d in s.per_dataset]))
    left, plot_w, right, row_h, head_h = 330, 480, 150, 20, 24
    width = left + plot_w + right
    height = 30 + sum(head_h + row_h * len(rows) for _, rows in groups) + 10

    def x(v: float) -> float:
        return left + plot_w * v

    out = [_svg_open(width, height, "Accuracy with 95% CI per setup and dataset")]
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(_gridline(x(tick), height))
        out.append(_svg_text(x(tick), 16, f"{int(tick * 100)}%", "middle", "axis"))
    y = 30.0
    for name, rows in groups:
        out.append(_svg_text(8, y + 16, name, "start", "group"))
        y += head_h
        for setup, block in rows:
            cy = y + row_h / 2
            out.append(_svg_text(left - 10, cy + 4, setup, "end", "label"))
            ci, acc = block.accuracy_ci95, block.accuracy
            if ci is not None and acc is not None:
                out.append(_whisker(x(ci[0]), x(ci[1]), x(acc), cy, colours[setup]))
                value = f"{pct(acc, 1)}% {interval_pct(ci)}"
            else:
                value = "no graded file"
            out.append(_svg_text(left + plot_w + 10, cy + 4, value, "start", "value"))
            y += row_h
    out.append("</svg>")
    return Markup("".join(out))


def _nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 × 10^k that is >= ``value`` (an axis end); 1 for value <= 0."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power  # pragma: no cover - the loop always returns


def tokens_chart(summaries: Sequence[SetupSummary]) -> Markup:
    """Accuracy (y, 0-100%) against mean tokens per question (x: prompt + completion, over
    the files with usage), one point per setup with usage; colour = setup as in the
    accuracy chart, named in the key on the right. Empty when no setup has usage."""
    colours = {s.setup: PALETTE[i % len(PALETTE)] for i, s in enumerate(summaries)}
    points = [
        (s.setup, u.avg_tokens, acc)
        for s in summaries
        if (u := s.overall.usage) is not None and (acc := s.overall.accuracy) is not None
    ]
    if not points:
        return Markup("")
    left, plot_w, key_w, top, plot_h, bottom = 60, 420, 380, 20, 240, 44
    width = left + plot_w + key_w
    height = max(top + plot_h + bottom, top + 20 * len(points) + 10)
    x_end = _nice_ceiling(max(tokens for _, tokens, _ in points))

    def x(v: float) -> float:
        return left + plot_w * v / x_end

    def y(v: float) -> float:
        return top + plot_h * (1 - v)

    out = [_svg_open(width, height, "Accuracy against mean tokens per question, one point per setup")]
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(
            f'<line x1="{left}" y1="{y(tick):.1f}" x2="{left + plot_w}" y2="{y(tick):.1f}" class="grid"/>'
        )
        out.append(_svg_text(left - 6, y(tick) + 4, f"{int(tick * 100)}%", "end", "axis"))
    for i in range(5):
        tick = x_end * i / 4
        out.append(
            f'<line x1="{x(tick):.1f}" y1="{top}" x2="{x(tick):.1f}" y2="{top + plot_h}" class="grid"/>'
        )
        out.append(_svg_text(x(tick), top + plot_h + 16, f"{tick:g}", "middle", "axis"))
    out.append(
        _svg_text(
            left + plot_w / 2,
            top + plot_h + 34,
            "mean tokens per question (prompt + completion)",
            "middle",
            "axis",
        )
    )
    for row, (setup, tokens, acc) in enumerate(points):
        colour = colours[setup]
        out.append(
            f'<circle cx="{x(tokens):.1f}" cy="{y(acc):.1f}" r="5" fill="{colour}" stroke="#ffffff" stroke-width="1"/>'
        )
        ky = top + 20 * row + 6
        out.append(f'<circle cx="{left + plot_w + 24}" cy="{ky:.1f}" r="5" fill="{colour}"/>')
        out.append(
            _svg_text(
                left + plot_w + 34, ky + 4, f"{setup}: {pct(acc, 1)}%, {tokens:.1f} tokens", "start", "label"
            )
        )
    out.append("</svg>")
    return Markup("".join(out))


def forest_chart(run: ComparisonRun) -> Markup:
    """Each setup's accuracy difference to the baseline with its bootstrap CI, around zero;
    filled markers are significant after Holm; "n.s." = no significant difference."""
    rows = [(c, c.ci, c.diff) for c in run.comparisons if c.ci is not None and c.diff is not None]
    if not rows:
        return Markup("")
    extent = max(max(abs(ci.low), abs(ci.high), abs(diff)) for _, ci, diff in rows)
    extent = max(0.1, math.ceil(extent * 10) / 10)
    left, plot_w, right, row_h = 330, 480, 170, 22
    width = left + plot_w + right
    height = 30 + row_h * len(rows) + 10

    def x(v: float) -> float:
        return left + plot_w * (v + extent) / (2 * extent)

    out = [_svg_open(width, height, f"Accuracy difference to {run.baseline}")]
    for tick in (-extent, -extent / 2, 0.0, extent / 2, extent):
        out.append(_gridline(x(tick), height, "zero" if tick == 0 else "grid"))
        out.append(_svg_text(x(tick), 16, f"{100 * tick:+.0f} pp" if tick else "0", "middle", "axis"))
    y = 30.0
    for c, ci, diff in rows:
        cy = y + row_h / 2
        colour = {"worse": "#D55E00", "better": "#009E73"}.get(c.verdict, "#555555")
        out.append(_svg_text(left - 10, cy + 4, c.setup, "end", "label"))
        out.append(_whisker(x(ci.low), x(ci.high), x(diff), cy, colour, filled=c.significant))
        verdict = {"no significant difference": "n.s."}.get(c.verdict, c.verdict)
        out.append(
            _svg_text(left + plot_w + 10, cy + 4, f"{signed_pp(diff, 1)} pp ({verdict})", "start", "value")
        )
        y += row_h
    out.append("</svg>")
    return Markup("".join(out))


def impact_chart(impact: RetrievalImpact) -> Markup:
    """Per size bucket: questions retrieval helped (right, green) and hurt (left, orange)."""
    rows = [r for r in impact.buckets if r.helped is not None and r.hurt is not None]
    if not rows:
        return Markup("")
    peak = max(1, max(max(r.helped or 0, r.hurt or 0) for r in rows))
    left, half, right, row_h = 200, 240, 20, 22
    bar = half - 36  # room for the count beyond the longest bar
    width = left + 2 * half + right
    height = 34 + row_h * len(rows) + 10
    mid = left + half
    out = [_svg_open(width, height, "Questions helped and hurt by retrieval per size bucket")]
    out.append(_svg_text(mid - 6, 16, "◀ hurt (native right, KAG not)", "end", "axis"))
    out.append(_svg_text(mid + 6, 16, "helped (KAG right, native not) ▶", "start", "axis"))
    out.append(f'<line x1="{mid}" y1="22" x2="{mid}" y2="{height - 8}" class="zero"/>')
    y = 30.0
    for r in rows:
        cy = y + row_h / 2
        out.append(_svg_text(left - 10, cy + 4, f"{r.label} (n={r.n})", "end", "label"))
        hurt_w = bar * (r.hurt or 0) / peak
        help_w = bar * (r.helped or 0) / peak
        out.append(
            f'<rect x="{mid - hurt_w:.1f}" y="{cy - 7:.1f}" width="{hurt_w:.1f}" height="14" fill="#D55E00"/>'
        )
        out.append(f'<rect x="{mid:.1f}" y="{cy - 7:.1f}" width="{help_w:.1f}" height="14" fill="#009E73"/>')
        out.append(_svg_text(mid - hurt_w - 4, cy + 4, str(r.hurt), "end", "value"))
        out.append(_svg_text(mid + help_w + 4, cy + 4, str(r.helped), "start", "value"))
        y += row_h
    out.append("</svg>")
    return Markup("".join(out))


# ---------------------------------------------------------------- the page


STATS_TITLE = "kag stats report"
COMPARE_TITLE = "kag stats compare: setups compared on the same questions"


@dataclass(frozen=True)
class PageMeta:
    """What the page header states about the run (no timestamps: same input, same page).

    ``trees``: (label, folder) of each tree when several labelled trees were graded as one
    run; ``notes``: lines the page shows under the header, before those it finds itself
    (:func:`page_notes`)."""

    title: str = STATS_TITLE
    datasets: str | None = None
    results: str | None = None
    prefix: str | None = None
    version: str | None = None
    notes: tuple[str, ...] = ()
    trees: tuple[tuple[str, str], ...] = ()
    # The rows of the trees' run records (kag.render.runs.RUN_HEADER, with the tree's
    # label first among several trees); none: no section.
    runs: tuple[tuple[str, ...], ...] = ()


#: Unreadable files named on the page; the others are counted (every one is warned on stderr).
MAX_UNREADABLE_LISTED = 20


def impact_section(impact: RetrievalImpact) -> dict[str, Any]:
    """A KAG setup's retrieval impact as a page draws it: the setup, its header lines (the
    first, the setup's name, left out), the chart, and the tables by subgraph size and by
    dataset."""
    return {
        "setup": impact.setup,
        "header": impact_header(impact)[1:],
        "chart": impact_chart(impact),
        "buckets": table_html(impact_table(impact.buckets, impact.native is not None, "VERTICES"), "impact"),
        "per_dataset": table_html(
            impact_table(impact.per_dataset, impact.native is not None, "DATASET"), "impact"
        ),
    }


def counts_line(summary: Summary) -> str:
    """The counters of the text report's header, every one of them (zeros included)."""
    return (
        f"Datasets: {summary.datasets} | Scorable questions: {summary.scorable_questions} "
        f"| Skipped files: {summary.skipped_files} | Ignored files: {summary.ignored_files} "
        f"| Unreadable files: {summary.unreadable_files}"
    )


def page_notes(answer_set: AnswerSet, analysis: Analysis, meta: PageMeta) -> tuple[str, ...]:
    """What the text report and the warnings of the command tell beside the numbers: the
    labelled trees, the unreadable files (named, up to :data:`MAX_UNREADABLE_LISTED`), the
    ignored and skipped files, the setups graded on too few files, the notes of the analysis."""
    summary = answer_set.summary
    notes = list(meta.notes)
    if meta.trees:
        trees = "; ".join(f"{label} = {escape_controls(root)}" for label, root in meta.trees)
        notes.append(f"{len(meta.trees)} result trees, their setups named LABEL/setup: {trees}")
    bad = answer_set.unreadable
    if summary.unreadable_files:
        listed = "; ".join(f"{escape_controls(u.path)} ({u.reason})" for u in bad[:MAX_UNREADABLE_LISTED])
        more = len(bad) - MAX_UNREADABLE_LISTED
        rest = f"; and {more} more (the warnings of the command name them all)" if more > 0 else ""
        notes.append(
            f"{summary.unreadable_files} unreadable result file(s), not graded: {listed}{rest}"
            if listed
            else f"{summary.unreadable_files} unreadable result file(s), not graded"
        )
    if summary.ignored_files:
        notes.append(
            f"{summary.ignored_files} entry(ies) ignored: not result files, or files of questions that are "
            "free-form or not in the datasets file (kag -v stats lists them)"
        )
    if summary.skipped_files:
        notes.append(f"{summary.skipped_files} file(s) skipped: their question has no answer key")
    smalls = small_samples(summary)
    if smalls:
        notes.append(small_samples_note(smalls, MIN_SAMPLE))
    notes += analysis.notes
    return tuple(notes)


#: Flip lists up to this long are shown unfolded; longer ones start folded (click to open).
OPEN_FLIPS = 20


def _flip_section(report: FlipReport, max_flips: int, max_chars: int) -> dict[str, object]:
    first, second = flip_tables(report, max_chars)
    parts = []
    for title, table in (("A right, B not", first), ("B right, A not", second)):
        shown = Table(table.headers, table.rows[:max_flips], table.align)
        parts.append(
            {
                "title": title,
                "count": len(table.rows),
                "opened": len(table.rows) <= OPEN_FLIPS,
                "table": table_html(shown, "flips") if shown.rows else None,
                "more": len(table.rows) - len(shown.rows),
            }
        )
    return {"a": report.a, "b": report.b, "header": flip_header(report), "parts": parts}


def render_html(
    summaries: Sequence[SetupSummary],
    comparisons: ComparisonRun | None = None,
    flip_reports: Sequence[FlipReport] = (),
    impacts: Sequence[RetrievalImpact] = (),
    meta: PageMeta = PageMeta(),
    max_flips: int = 50,
    max_chars: int = 300,
    shown: Shown = NOTHING_SHOWN,
    counts: str | None = None,
    notes: Sequence[str] = (),
) -> str:
    """One self-contained HTML page: the header (``meta``, the ``counts`` line and the
    ``notes``), ranked table, accuracy chart with Wilson CI whiskers per
    setup and dataset, comparisons against the baseline (table and difference chart), the
    retrieval impact of each KAG setup, and the flip lists (``max_flips`` rows per
    direction, responses cut to ``max_chars``). The ranking has the HTML columns of
    :data:`~kag.render.columns.STATS_COLUMNS` that the run ``shown`` has; with usage (some
    file has token usage, or costs were computed) a chart plots accuracy against mean
    tokens per question; with retrieval quality (gold evidence in the datasets file) a
    chart splits each setup's questions into reached or missed and right or wrong
    (:mod:`kag.render.outcomes_chart`). Sections without data are left out.
    Inline CSS and SVG only: nothing is loaded from anywhere.
    """
    facts = [
        f"{k}: {v}"
        for k, v in (("datasets", meta.datasets), ("results", meta.results), ("prefix", meta.prefix))
        if v
    ]
    if meta.version:
        facts.append(f"kag {meta.version}")
    compared = None
    if comparisons is not None and comparisons.comparisons:
        compared = {
            "baseline": comparisons.baseline,
            "table": table_html(comparison_table(comparisons), "comparisons"),
            "legend": comparison_legend(comparisons),
            "chart": forest_chart(comparisons),
            "regressions": ", ".join(c.setup for c in comparisons.regressions),
            "reached": table_html(reached_table(comparisons), "comparisons") if comparisons.reached else None,
            "reached_legend": REACHED_LEGEND,
        }
    impact_sections = [
        {
            **impact_section(impact),
            "reached": table_html(
                impact_table(impact.reached_buckets, impact.native is not None, "VERTICES · GOLD"), "impact"
            )
            if impact.reached_buckets
            else None,
        }
        for impact in impacts
    ]
    return str(
        render_template(
            "page.html.j2",
            meta=meta,
            facts=" | ".join(facts),
            counts=counts,
            notes=notes,
            ranking=table_html(summary_table(summaries, shown), "ranking") if summaries else None,
            ranking_legend=ranking_legend(shown),
            accuracy_chart=accuracy_chart(summaries) if summaries else None,
            tokens_chart=tokens_chart(summaries) if summaries and shown.usage else None,
            outcomes_chart=outcomes_chart(summaries) if summaries else None,
            outcomes_legend=OUTCOMES_LEGEND,
            usage_legend=usage_legend(shown.priced) if summaries and shown.usage else None,
            comparisons=compared,
            impacts=impact_sections,
            impact_legend=IMPACT_LEGEND,
            flips=[_flip_section(r, max_flips, max_chars) for r in flip_reports],
            runs=_runs_table(meta),
        )
    )


def _runs_table(meta: PageMeta) -> Markup | None:
    """The table of the run records of the graded trees (``kag stats runs``), or None."""
    from kag.render.runs import HEADER

    if not meta.runs:
        return None
    labelled = bool(meta.trees)
    headers = ("tree", *HEADER) if labelled else HEADER
    align: tuple[Align, ...] = tuple("r" if h in ("ok", "error", "kept", "not run") else "l" for h in headers)
    return table_html(Table(headers, meta.runs, align), "runs")


def render_html_report(
    answer_set: AnswerSet, analysis: Analysis, meta: PageMeta = PageMeta(), *, max_flips: int = 50
) -> str:
    """The whole page for a graded tree and its :class:`~kag.grading.compare.Analysis`
    (computed before, by :func:`kag.grading.compare.analyse`): :func:`render_html` with the
    notes of :func:`page_notes` (the analysis's included)."""
    return render_html(
        answer_set.summary.setups,
        analysis.comparisons,
        analysis.flips,
        analysis.impacts,
        meta,
        max_flips=max_flips,
        shown=Shown.of(answer_set.summary),
        counts=counts_line(answer_set.summary),
        notes=page_notes(answer_set, analysis, meta),
    )
