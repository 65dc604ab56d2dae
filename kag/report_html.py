"""Reports of the comparison commands: one self-contained HTML page, and the text, markdown
and JSON renderings of the same tables.

Each table is built once as a :class:`Table` (headers, string cells, alignment) and then
rendered as aligned text, a GitHub markdown table or an HTML table, so the three formats
always show the same numbers. The HTML page (:func:`render_html`) has inline CSS and
charts drawn here as inline SVG: no script, no font, no stylesheet and no image is
fetched, so it opens offline and can be attached to a CI run as is.

Library module: returns strings and JSON-ready dicts, never prints.
"""

from __future__ import annotations

import functools
import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, ParamSpec

from kag.grading.compare import (
    DEFAULT_ALPHA,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Analysis,
    AnswerSet,
    ComparisonRun,
    Flip,
    FlipReport,
    ImpactRow,
    McNemar,
    RetrievalImpact,
    analyse,
)
from kag.grading.mcq import Metrics, SetupSummary
from kag.textsafe import escape_controls, escape_message

Align = Literal["l", "r"]

#: Okabe-Ito palette (distinguishable with the common colour-vision deficiencies).
P = ParamSpec("P")

PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442")


# ---------------------------------------------------------------- number formatting


def pct(value: float | None, digits: int = 2) -> str:
    """A fraction as a percentage without the sign (0.5 -> "50.00"); None -> "-"."""
    return "-" if value is None else f"{100 * value:.{digits}f}"


def signed_pp(value: float | None, digits: int = 2) -> str:
    """A difference of fractions in percentage points with its sign (-0.2 -> "-20.00")."""
    return "-" if value is None else f"{100 * value:+.{digits}f}"


def interval_pct(ci: tuple[float, float] | None, digits: int = 1, signed: bool = False) -> str:
    if ci is None:
        return "-"
    fmt = f"{{:+.{digits}f}}" if signed else f"{{:.{digits}f}}"
    return f"[{fmt.format(100 * ci[0])}, {fmt.format(100 * ci[1])}]"


def pvalue(p: float | None) -> str:
    """4 decimals, or 2 significant digits in scientific notation below 0.0001."""
    if p is None:
        return "-"
    if p == 0:
        return "0"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def one_line(text: str, max_chars: int) -> str:
    """Whitespace runs collapsed to one space; cut to ``max_chars`` with an ellipsis (0 = no cut)."""
    flat = " ".join(text.split())
    if max_chars > 0 and len(flat) > max_chars:
        return flat[: max(1, max_chars - 1)] + "…"
    return flat


# ---------------------------------------------------------------- tables


def _terminal_safe(render: Callable[P, str]) -> Callable[P, str]:
    """A text or markdown document whose header and legend lines name setups: their
    control characters are escaped (the document's own line breaks stay)."""

    @functools.wraps(render)
    def safe(*args: P.args, **kwargs: P.kwargs) -> str:
        return escape_message(render(*args, **kwargs))

    return safe


@dataclass(frozen=True)
class Table:
    """A table of strings; ``sub`` marks indented sub-rows (per-dataset rows of a setup)."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align: tuple[Align, ...]
    sub: tuple[bool, ...] = ()

    def is_sub(self, index: int) -> bool:
        return bool(self.sub) and self.sub[index]


def table_text(table: Table) -> str:
    """Aligned columns separated by two spaces; text left-aligned, numbers right-aligned.
    Control characters of names and responses are escaped (``\\x1b``), then aligned."""
    rows = [[escape_controls(cell) for cell in row] for row in table.rows]
    widths = [len(h) for h in table.headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(cells, widths, table.align, strict=True)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(table.headers), *(line(r) for r in rows)])


def _md_cell(text: str) -> str:
    text = escape_controls(text.replace("\n", " "))
    return text.replace("\\", "\\\\").replace("|", "\\|")


def table_markdown(table: Table) -> str:
    """A GitHub-flavoured markdown table (pipes escaped, newlines flattened)."""
    head = "| " + " | ".join(_md_cell(h) for h in table.headers) + " |"
    rule = "|" + "|".join("---:" if a == "r" else "---" for a in table.align) + "|"
    body = ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join([head, rule, *body])


def table_html(table: Table, css_class: str = "") -> str:
    cls = f' class="{css_class}"' if css_class else ""
    head = "".join(
        f'<th class="{a}">{html.escape(h)}</th>' for h, a in zip(table.headers, table.align, strict=True)
    )
    body = []
    for i, row in enumerate(table.rows):
        tr = ' class="sub"' if table.is_sub(i) else ""
        cells = "".join(
            f'<td class="{a}">{html.escape(c)}</td>' for c, a in zip(row, table.align, strict=True)
        )
        body.append(f"<tr{tr}>{cells}</tr>")
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# ---------------------------------------------------------------- the ranked summary


def summary_table(summaries: Sequence[SetupSummary]) -> Table:
    """The ranking of `kag stats` (``Summary.setups``, already ranked) with Wilson intervals."""
    headers = ("#", "SETUP", "ACC%", "95% CI", "PREC%", "COVER%", "OK", "WRONG", "ERR", "TOT")
    rows: list[tuple[str, ...]] = []
    sub: list[bool] = []
    for rank, s in enumerate(summaries, 1):
        blocks = [(s.setup, s.overall, False), *((f"└ {d}", m, True) for d, m in s.per_dataset.items())]
        for label, b, is_sub in blocks:
            rows.append(
                (
                    "" if is_sub else str(rank),
                    label,
                    pct(b.accuracy),
                    interval_pct(b.accuracy_ci95),
                    pct(b.precision),
                    pct(b.coverage),
                    str(b.correct),
                    str(b.incorrect),
                    str(b.errors),
                    str(b.total),
                )
            )
            sub.append(is_sub)
    return Table(headers, tuple(rows), ("r", "l", "r", "r", "r", "r", "r", "r", "r", "r"), tuple(sub))


# ---------------------------------------------------------------- comparisons


def comparison_table(run: ComparisonRun) -> Table:
    headers = (
        "SETUP",
        "N",
        "ACC%",
        "BASE%",
        "DIFF pp",
        "95% CI (pp)",
        "+",
        "-",
        "TEST",
        "p",
        "p (Holm)",
        "VERDICT",
    )
    rows = []
    for c in run.comparisons:
        rows.append(
            (
                c.setup,
                str(c.n),
                pct(c.setup_accuracy),
                pct(c.baseline_accuracy),
                signed_pp(c.diff),
                interval_pct((c.ci.low, c.ci.high) if c.ci else None, signed=True),
                str(c.setup_only),
                str(c.baseline_only),
                _test_label(c.test),
                pvalue(c.test.p_value if c.test else None),
                pvalue(c.p_holm),
                c.verdict,
            )
        )
    return Table(headers, tuple(rows), ("l", "r", "r", "r", "r", "r", "r", "r", "l", "r", "r", "l"))


def _test_label(test: McNemar | None) -> str:
    if test is None:
        return "-"
    return "exact" if test.method == "exact" else f"chi2={test.statistic:.2f}"


def comparison_legend(run: ComparisonRun) -> list[str]:
    return [
        (
            f"Baseline: {run.baseline} | paired questions only | alpha {run.alpha:g} after Holm over "
            f"{sum(1 for c in run.comparisons if c.test)} comparison(s)"
        ),
        (
            "Columns +/-: + = setup right, baseline not; - = baseline right, setup not; "
            "DIFF = ACC% - BASE% on the paired questions"
        ),
        (
            f"TEST: McNemar, exact binomial when + and - sum to < {run.exact_below}, "
            "else chi-square with continuity correction"
        ),
        f"95% CI: paired bootstrap percentile interval, {run.resamples} resamples, seed {run.seed}",
    ]


@_terminal_safe
def comparisons_text(run: ComparisonRun) -> str:
    return "\n".join([table_text(comparison_table(run)), "", *comparison_legend(run)]) + "\n"


@_terminal_safe
def comparisons_markdown(run: ComparisonRun) -> str:
    legend = "\n".join(f"- {line}" for line in comparison_legend(run))
    return (
        f"### Comparisons against `{run.baseline}`\n\n{table_markdown(comparison_table(run))}\n\n{legend}\n"
    )


# ---------------------------------------------------------------- flips


def _flip_rows(items: Sequence[Flip], max_chars: int) -> tuple[tuple[str, ...], ...]:
    return tuple(
        (
            f.dataset,
            f.question,
            f.gold or "-",
            f.a.outcome.name,
            one_line(f.a.response, max_chars),
            f.b.outcome.name,
            one_line(f.b.response, max_chars),
        )
        for f in items
    )


def flip_tables(report: FlipReport, max_chars: int = 120) -> tuple[Table, Table]:
    """(A right and B not, B right and A not), one row per question with both responses."""
    headers = ("DATASET", "QUESTION", "GOLD", "A", "A RESPONSE", "B", "B RESPONSE")
    align: tuple[Align, ...] = ("l", "l", "l", "l", "l", "l", "l")
    return (
        Table(headers, _flip_rows(report.a_only, max_chars), align),
        Table(headers, _flip_rows(report.b_only, max_chars), align),
    )


def flip_header(report: FlipReport) -> list[str]:
    return [
        f"A = {report.a}",
        f"B = {report.b}",
        (
            f"Paired questions: {report.paired} | both right: {report.both_correct} "
            f"| both not: {report.both_wrong} | A right, B not: {len(report.a_only)} "
            f"| B right, A not: {len(report.b_only)}"
        ),
    ]


@_terminal_safe
def flips_text(report: FlipReport, max_chars: int = 120) -> str:
    first, second = flip_tables(report, max_chars)
    parts = [*flip_header(report), ""]
    for title, table in (
        (f"A right, B not ({len(report.a_only)}):", first),
        (f"B right, A not ({len(report.b_only)}):", second),
    ):
        parts.append(title)
        parts.append(table_text(table) if table.rows else "(none)")
        parts.append("")
    return "\n".join(parts)


@_terminal_safe
def flips_markdown(report: FlipReport, max_chars: int = 300) -> str:
    first, second = flip_tables(report, max_chars)
    parts = [
        f"### Flips: `{report.a}` (A) vs `{report.b}` (B)",
        "",
        *(f"- {line}" for line in flip_header(report)),
        "",
    ]
    for title, table in (("A right, B not", first), ("B right, A not", second)):
        parts.append(f"#### {title} ({len(table.rows)})")
        parts.append("")
        parts.append(table_markdown(table) if table.rows else "_none_")
        parts.append("")
    return "\n".join(parts)


# ---------------------------------------------------------------- retrieval impact


def impact_table(rows: Sequence[ImpactRow], paired: bool, label: str) -> Table:
    if paired:
        headers: tuple[str, ...] = (
            label,
            "N",
            "ACC%",
            "95% CI",
            "NATIVE%",
            "DIFF pp",
            "HELPED",
            "HURT",
            "SAME",
        )
        body: tuple[tuple[str, ...], ...] = tuple(
            (
                r.label,
                str(r.n),
                pct(r.accuracy),
                interval_pct(r.accuracy_ci95),
                pct(r.native_accuracy),
                signed_pp(
                    None
                    if r.accuracy is None or r.native_accuracy is None
                    else r.accuracy - r.native_accuracy
                ),
                str(r.helped),
                str(r.hurt),
                str(r.same),
            )
            for r in rows
        )
        return Table(headers, body, ("l", "r", "r", "r", "r", "r", "r", "r", "r"))
    headers = (label, "N", "ACC%", "95% CI")
    body = tuple((r.label, str(r.n), pct(r.accuracy), interval_pct(r.accuracy_ci95)) for r in rows)
    return Table(headers, body, ("l", "r", "r", "r"))


def impact_header(impact: RetrievalImpact) -> list[str]:
    o = impact.overall
    lines = [f"KAG setup: {impact.setup}"]
    if impact.native is None:
        lines.append(f"No setup without retrieval to compare with | {o.n} answer(s) | ACC {pct(o.accuracy)}%")
        return lines
    lines.append(f"Native (same model, no retrieval): {impact.native}")
    unpaired = (
        f" ({impact.unpaired} KAG answer(s) without a native answer left out)" if impact.unpaired else ""
    )
    lines.append(
        f"Paired questions: {o.n}{unpaired} | KAG {pct(o.accuracy)}% vs native {pct(o.native_accuracy)}% | "
        f"helped {o.helped} | hurt {o.hurt} | no change {o.same}"
        + (f" | McNemar p = {pvalue(impact.test.p_value)}" if impact.test else "")
    )
    if impact.hurt_responses:
        top = ", ".join(f"{one_line(r, 30)!r} x{n}" for r, n in impact.hurt_responses[:5])
        more = len(impact.hurt_responses) - 5
        lines.append(f"KAG answers on the hurt questions: {top}" + (f" (+{more} other)" if more > 0 else ""))
    return lines


IMPACT_LEGEND = (
    (
        "Buckets by retrieved vertices (the database's count): empty = 0 vertices; "
        "no retrieval stats = error files and files without retrieval stats"
    ),
    "HELPED = KAG right, native not; HURT = native right, KAG not; SAME = both right or both not",
)


@_terminal_safe
def impact_text(impacts: Sequence[RetrievalImpact]) -> str:
    parts: list[str] = []
    for impact in impacts:
        paired = impact.native is not None
        parts.extend(impact_header(impact))
        parts.append("")
        parts.append(table_text(impact_table(impact.buckets, paired, "VERTICES")))
        parts.append("")
        parts.append(table_text(impact_table(impact.per_dataset, paired, "DATASET")))
        parts.append("")
    parts.extend(IMPACT_LEGEND)
    return "\n".join(parts) + "\n"


@_terminal_safe
def impact_markdown(impacts: Sequence[RetrievalImpact]) -> str:
    parts: list[str] = []
    for impact in impacts:
        paired = impact.native is not None
        parts.append(f"### Retrieval impact: `{impact.setup}`")
        parts.append("")
        parts.extend(f"- {line}" for line in impact_header(impact)[1:])
        parts.append("")
        parts.append(table_markdown(impact_table(impact.buckets, paired, "VERTICES")))
        parts.append("")
        parts.append(table_markdown(impact_table(impact.per_dataset, paired, "DATASET")))
        parts.append("")
    parts.extend(f"_{line}_  " for line in IMPACT_LEGEND)
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------- SVG charts


def _svg_text(x: float, y: float, text: str, anchor: str = "start", cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{c}>{html.escape(text)}</text>'


def _svg_open(width: float, height: float, label: str) -> str:
    return (
        f'<svg class="chart" role="img" aria-label="{html.escape(label)}" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
    )


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


def accuracy_chart(summaries: Sequence[SetupSummary]) -> str:
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
    return "".join(out)


def forest_chart(run: ComparisonRun) -> str:
    """Each setup's accuracy difference to the baseline with its bootstrap CI, around zero;
    filled markers are significant after Holm; "n.s." = no significant difference."""
    rows = [(c, c.ci, c.diff) for c in run.comparisons if c.ci is not None and c.diff is not None]
    if not rows:
        return ""
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
    return "".join(out)


def impact_chart(impact: RetrievalImpact) -> str:
    """Per size bucket: questions retrieval helped (right, green) and hurt (left, orange)."""
    rows = [r for r in impact.buckets if r.helped is not None and r.hurt is not None]
    if not rows:
        return ""
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
    return "".join(out)


# ---------------------------------------------------------------- the page

_CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       margin: 24px auto; max-width: 1180px; padding: 0 16px; color: #1b1b1b; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.meta { color: #555; font-size: 12.5px; margin: 0; }
table { border-collapse: collapse; margin: 6px 0 10px; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 9px; border-bottom: 1px solid #e6e6e6; vertical-align: top; }
th { background: #f4f4f4; font-weight: 600; white-space: nowrap; }
td.r, th.r { text-align: right; white-space: nowrap; } td.l, th.l { text-align: left; }
tr.sub td { color: #555; font-size: 13px; }
table.flips td { max-width: 420px; overflow-wrap: anywhere; font-size: 12.5px; }
.legend { color: #555; font-size: 12.5px; margin: 2px 0; }
svg.chart { display: block; margin: 8px 0 14px; font-size: 12px; }
svg .grid { stroke: #e2e2e2; stroke-width: 1; } svg .zero { stroke: #888; stroke-width: 1.2; }
svg .axis { fill: #666; font-size: 11px; } svg .group { font-weight: 600; fill: #222; }
svg .label { fill: #222; } svg .value { fill: #444; font-size: 11.5px; }
details { margin: 4px 0 10px; } summary { cursor: pointer; font-weight: 600; }
.worse { color: #b34700; font-weight: 600; } .better { color: #00734f; font-weight: 600; }
"""


@dataclass(frozen=True)
class PageMeta:
    """What the page header states about the run (no timestamps: same input, same page)."""

    title: str = "kag stats report"
    datasets: str | None = None
    results: str | None = None
    prefix: str | None = None
    version: str | None = None
    notes: tuple[str, ...] = ()


#: Flip lists up to this long are shown unfolded; longer ones start folded (click to open).
OPEN_FLIPS = 20


def _flip_section(report: FlipReport, max_flips: int, max_chars: int) -> str:
    parts = [f"<h3>{html.escape(report.a)} vs {html.escape(report.b)}</h3>"]
    parts.extend(f'<p class="legend">{html.escape(line)}</p>' for line in flip_header(report))
    first, second = flip_tables(report, max_chars)
    for title, table in (("A right, B not", first), ("B right, A not", second)):
        shown = Table(table.headers, table.rows[:max_flips], table.align)
        more = len(table.rows) - len(shown.rows)
        opened = " open" if len(table.rows) <= OPEN_FLIPS else ""
        parts.append(
            f"<details{opened}><summary>{html.escape(title)}: {len(table.rows)} question(s)</summary>"
        )
        parts.append(table_html(shown, "flips") if shown.rows else '<p class="legend">none</p>')
        if more:
            command = html.escape(f"kag stats flips {report.a} {report.b}")
            parts.append(
                f'<p class="legend">{more} more not shown; <code>{command}</code> lists them all.</p>'
            )
        parts.append("</details>")
    return "".join(parts)


def render_html(
    summaries: Sequence[SetupSummary],
    comparisons: ComparisonRun | None = None,
    flip_reports: Sequence[FlipReport] = (),
    impacts: Sequence[RetrievalImpact] = (),
    meta: PageMeta = PageMeta(),
    max_flips: int = 50,
    max_chars: int = 300,
) -> str:
    """One self-contained HTML page: ranked table, accuracy chart with Wilson CI whiskers per
    setup and dataset, comparisons against the baseline (table and difference chart), the
    retrieval impact of each KAG setup, and the flip lists (``max_flips`` rows per
    direction, responses cut to ``max_chars``). Sections without data are left out.
    Inline CSS and SVG only: nothing is loaded from anywhere.
    """
    e = html.escape
    facts = [
        f"{k}: {v}"
        for k, v in (("datasets", meta.datasets), ("results", meta.results), ("prefix", meta.prefix))
        if v
    ]
    if meta.version:
        facts.append(f"kag {meta.version}")
    body = [f"<h1>{e(meta.title)}</h1>"]
    if facts:
        body.append(f'<p class="meta">{e(" | ".join(facts))}</p>')
    body.extend(f'<p class="meta">{e(n)}</p>' for n in meta.notes)
    body.append("<h2>Ranking</h2>")
    if summaries:
        body.append(table_html(summary_table(summaries), "ranking"))
        body.append(
            '<p class="legend">ACC% = OK / TOT, 95% CI = Wilson score interval; PREC% = OK / (OK + WRONG); '
            "COVER% = (OK + WRONG) / TOT</p>"
        )
        body.append("<h2>Accuracy with 95% CI</h2>")
        body.append(accuracy_chart(summaries))
    else:
        body.append('<p class="legend">No graded result file.</p>')
    if comparisons is not None and comparisons.comparisons:
        body.append(f"<h2>Comparisons against {e(comparisons.baseline)}</h2>")
        table = comparison_table(comparisons)
        body.append(table_html(table, "comparisons"))
        body.extend(f'<p class="legend">{e(line)}</p>' for line in comparison_legend(comparisons))
        body.append(forest_chart(comparisons))
        regress = comparisons.regressions
        if regress:
            names = ", ".join(c.setup for c in regress)
            body.append(
                f'<p class="worse">Significantly worse than {e(comparisons.baseline)}: {e(names)}</p>'
            )
    if impacts:
        body.append("<h2>Retrieval impact</h2>")
        for impact in impacts:
            paired = impact.native is not None
            body.append(f"<h3>{e(impact.setup)}</h3>")
            body.extend(f'<p class="legend">{e(line)}</p>' for line in impact_header(impact)[1:])
            body.append(impact_chart(impact))
            body.append(table_html(impact_table(impact.buckets, paired, "VERTICES"), "impact"))
            body.append(table_html(impact_table(impact.per_dataset, paired, "DATASET"), "impact"))
        body.extend(f'<p class="legend">{e(line)}</p>' for line in IMPACT_LEGEND)
    if flip_reports:
        body.append("<h2>Per-question flips</h2>")
        body.extend(_flip_section(r, max_flips, max_chars) for r in flip_reports)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(meta.title)}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )


def write_report(path: str, text: str) -> None:
    """Write a report file atomically through :func:`kag.results.write_atomic` (an exclusive
    temporary, no link followed, rename); InputError naming the path."""
    from kag.errors import InputError
    from kag.results import NoSpace, write_atomic

    try:
        write_atomic(path, (text.encode("utf-8"),))
    except (OSError, NoSpace) as exc:
        raise InputError(f"{path}: cannot write the report: {exc.strerror}") from None


def render_html_report(
    answer_set: AnswerSet,
    meta: PageMeta = PageMeta(),
    *,
    baseline: str | None = None,
    alpha: float = DEFAULT_ALPHA,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    native: str | None = None,
    max_flips: int = 50,
) -> tuple[str, Analysis]:
    """The whole page for a graded tree: :func:`kag.grading.compare.analyse` (baseline
    default: the best-ranked setup), then :func:`render_html`.

    Returns the page and the analysis: its ``notes`` are for the user (warn them), its
    ``comparisons`` can feed :func:`kag.grading.compare.gate_regressions`.
    """
    analysis = analyse(answer_set, baseline, alpha, n_resamples, seed, native)
    page = render_html(
        answer_set.summary.setups,
        analysis.comparisons,
        analysis.flips,
        analysis.impacts,
        meta,
        max_flips=max_flips,
    )
    return page, analysis
