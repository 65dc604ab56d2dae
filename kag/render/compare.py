"""Text, markdown and JSON of the comparison commands (`kag stats compare`, `flips`,
`impact`): the comparisons against a baseline, the per-question flips and the retrieval
impact. The HTML page (:mod:`kag.render.html`) shows the same tables
(:class:`~kag.render.table.Table`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import ParamSpec

import orjson

from kag.grading.compare import (
    ComparisonRun,
    Flip,
    FlipReport,
    ImpactRow,
    McNemar,
    RetrievalImpact,
)
from kag.grading.percent import pct
from kag.grading.record import GradedFile
from kag.render.formats import TableFormat
from kag.render.table import (
    Align,
    Table,
    interval_pct,
    one_line,
    pvalue,
    signed_pp,
    table_markdown,
    table_text,
)
from kag.textsafe import escape_markdown, escape_message, markdown_code

P = ParamSpec("P")


# ---------------------------------------------------------------- comparisons


def _terminal_safe(render: Callable[P, str]) -> Callable[P, str]:
    """A text or markdown document whose header and legend lines name setups: their
    control characters are escaped (the document's own line breaks stay)."""

    @functools.wraps(render)
    def safe(*args: P.args, **kwargs: P.kwargs) -> str:
        return escape_message(render(*args, **kwargs))

    return safe


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


def comparison_legend(run: ComparisonRun, baseline: str | None = None) -> list[str]:
    """The lines under a comparison table; ``baseline`` is how the baseline's name is shown
    (default: as it is)."""
    return [
        (
            f"Baseline: {run.baseline if baseline is None else baseline} | paired questions only | alpha {run.alpha:g} after Holm over "
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


def reached_table(run: ComparisonRun) -> Table:
    """Each setup's reached rate against the baseline's, and both accuracies on the
    questions both reached (only drawn when ``run.reached`` is not empty)."""
    headers = (
        "SETUP",
        "N",
        "REACHED%",
        "BASE%",
        "DIFF pp",
        "+",
        "-",
        "p (Holm)",
        "BOTH",
        "ACC%",
        "BASE ACC%",
    )
    rows = tuple(
        (
            r.setup,
            str(r.n),
            pct(r.setup_rate),
            pct(r.baseline_rate),
            signed_pp(r.diff),
            str(r.setup_only),
            str(r.baseline_only),
            pvalue(r.p_holm),
            str(r.both),
            pct(r.setup_accuracy_both),
            pct(r.baseline_accuracy_both),
        )
        for r in run.reached
    )
    return Table(headers, rows, ("l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r"))


REACHED_LEGEND = (
    (
        "Gold evidence reached (every gold triple retrieved; without triples every gold entity), on the "
        "questions both setups retrieved for: + = reached by the setup only, - = by the baseline only; "
        "McNemar, Holm over the setups"
    ),
    "BOTH = questions both reached; ACC% and BASE ACC% = accuracy on them (was the gold used?)",
)


def _reached_parts(run: ComparisonRun, table: Callable[[Table], str]) -> list[str]:
    if not run.reached:
        return []
    return [
        "",
        f"Gold evidence reached, against {run.baseline}:",
        "",
        table(reached_table(run)),
        "",
        *REACHED_LEGEND,
    ]


@_terminal_safe
def comparisons_text(run: ComparisonRun) -> str:
    parts = [table_text(comparison_table(run)), "", *comparison_legend(run), *_reached_parts(run, table_text)]
    return "\n".join(parts) + "\n"


@_terminal_safe
def comparisons_markdown(run: ComparisonRun) -> str:
    legend = "\n".join(f"- {line}" for line in comparison_legend(run, escape_markdown(run.baseline)))
    text = (
        f"### Comparisons against {markdown_code(run.baseline)}\n\n"
        f"{table_markdown(comparison_table(run))}\n\n{legend}\n"
    )
    if run.reached:
        reached = "\n".join(f"- {line}" for line in REACHED_LEGEND)
        text += (
            f"\n### Gold evidence reached, against {markdown_code(run.baseline)}\n\n"
            f"{table_markdown(reached_table(run))}\n\n{reached}\n"
        )
    return text


# ---------------------------------------------------------------- flips


def _flip_rows(items: Sequence[Flip], max_chars: int) -> tuple[tuple[str, ...], ...]:
    return tuple(
        (
            f.dataset,
            f.question,
            f.gold or "-",
            f.a.outcome.name,
            one_line(f.a.response_or_error, max_chars),
            f.b.outcome.name,
            one_line(f.b.response_or_error, max_chars),
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
        f"### Flips: {markdown_code(report.a)} (A) vs {markdown_code(report.b)} (B)",
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


EVIDENCE_LEGEND = (
    "hit = the retrieved text holds at least one evidence name of the question; "
    "questions without evidence names are left out of that table"
)


REACHED_IMPACT_LEGEND = (
    "reached = the retrieved graph holds every gold triple of the question (without triples, every "
    "gold entity); questions without gold evidence are left out of that table"
)


@_terminal_safe
def impact_text(impacts: Sequence[RetrievalImpact]) -> str:
    parts: list[str] = []
    for impact in impacts:
        parts.extend(impact_header(impact))
        parts.append("")
        for table in _impact_tables(impact):
            parts.append(table_text(table))
            parts.append("")
    parts.extend(IMPACT_LEGEND)
    if any(impact.evidence_buckets for impact in impacts):
        parts.append(EVIDENCE_LEGEND)
    if any(impact.reached_buckets for impact in impacts):
        parts.append(REACHED_IMPACT_LEGEND)
    return "\n".join(parts) + "\n"


def _impact_tables(impact: RetrievalImpact) -> list[Table]:
    """The tables of one impact block, in order: by subgraph size, by dataset, then by size
    and evidence hit when the block has evidence."""
    paired = impact.native is not None
    tables = [
        impact_table(impact.buckets, paired, "VERTICES"),
        impact_table(impact.per_dataset, paired, "DATASET"),
    ]
    if impact.evidence_buckets:
        tables.append(impact_table(impact.evidence_buckets, paired, "VERTICES · EVIDENCE"))
    if impact.reached_buckets:
        tables.append(impact_table(impact.reached_buckets, paired, "VERTICES · GOLD"))
    return tables


@_terminal_safe
def impact_markdown(impacts: Sequence[RetrievalImpact]) -> str:
    parts: list[str] = []
    for impact in impacts:
        parts.append(f"### Retrieval impact: {markdown_code(impact.setup)}")
        parts.append("")
        parts.extend(f"- {line}" for line in impact_header(impact)[1:])
        parts.append("")
        for table in _impact_tables(impact):
            parts.append(table_markdown(table))
            parts.append("")
    parts.extend(f"_{line}_  " for line in IMPACT_LEGEND)
    if any(impact.evidence_buckets for impact in impacts):
        parts.append(f"_{EVIDENCE_LEGEND}_  ")
    if any(impact.reached_buckets for impact in impacts):
        parts.append(f"_{REACHED_IMPACT_LEGEND}_  ")
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------- JSON (numbers as Python floats)


def _answer_json(a: GradedFile) -> dict[str, object]:
    return {"outcome": a.outcome.name, "response": a.response_or_error, "path": a.path}


def mcnemar_to_json(test: McNemar | None) -> dict[str, object] | None:
    if test is None:
        return None
    return {
        "b": test.b,
        "c": test.c,
        "method": test.method,
        "statistic": test.statistic,
        "p_value": test.p_value,
    }


def comparison_run_to_json(run: ComparisonRun) -> dict[str, object]:
    """The `kag stats compare --format json` document; fractions, not percentages."""
    document: dict[str, object] = {
        "baseline": run.baseline,
        "alpha": run.alpha,
        "correction": "holm",
        "exact_below": run.exact_below,
        "bootstrap": {"resamples": run.resamples, "seed": run.seed, "confidence": run.confidence},
        "comparisons": [
            {
                "setup": c.setup,
                "baseline": c.baseline,
                "paired_questions": c.n,
                "setup_correct": c.setup_correct,
                "baseline_correct": c.baseline_correct,
                "setup_accuracy": c.setup_accuracy,
                "baseline_accuracy": c.baseline_accuracy,
                "setup_only": c.setup_only,
                "baseline_only": c.baseline_only,
                "difference": c.diff,
                "difference_ci": [c.ci.low, c.ci.high] if c.ci else None,
                "mcnemar": mcnemar_to_json(c.test),
                "p_holm": c.p_holm,
                "significant": c.significant,
                "verdict": c.verdict,
            }
            for c in run.comparisons
        ],
        "regressions": [c.setup for c in run.regressions],
    }
    if run.reached:  # only with evidence: other documents stay as they were
        document["reached"] = [
            {
                "setup": r.setup,
                "baseline": r.baseline,
                "paired_questions": r.n,
                "setup_reached": r.setup_reached,
                "baseline_reached": r.baseline_reached,
                "setup_rate": r.setup_rate,
                "baseline_rate": r.baseline_rate,
                "difference": r.diff,
                "setup_only": r.setup_only,
                "baseline_only": r.baseline_only,
                "mcnemar": mcnemar_to_json(r.test),
                "p_holm": r.p_holm,
                "significant": r.significant,
                "both_reached": r.both,
                "setup_accuracy_both": r.setup_accuracy_both,
                "baseline_accuracy_both": r.baseline_accuracy_both,
            }
            for r in run.reached
        ]
    return document


def _flip_json(f: Flip) -> dict[str, object]:
    return {
        "dataset": f.dataset,
        "question": f.question,
        "gold": f.gold,
        "a": _answer_json(f.a),
        "b": _answer_json(f.b),
    }


def flip_report_to_json(report: FlipReport) -> dict[str, object]:
    """The `kag stats flips --format json` document, full responses included."""
    return {
        "a": report.a,
        "b": report.b,
        "paired_questions": report.paired,
        "both_correct": report.both_correct,
        "both_wrong": report.both_wrong,
        "a_only": [_flip_json(f) for f in report.a_only],
        "b_only": [_flip_json(f) for f in report.b_only],
    }


def _impact_row_json(r: ImpactRow) -> dict[str, object]:
    return {
        "label": r.label,
        "n": r.n,
        "correct": r.correct,
        "accuracy": r.accuracy,
        "accuracy_ci95": list(r.accuracy_ci95) if r.accuracy_ci95 else None,
        "native_correct": r.native_correct,
        "native_accuracy": r.native_accuracy,
        "helped": r.helped,
        "hurt": r.hurt,
        "no_change": r.same,
    }


def impact_to_json(impact: RetrievalImpact) -> dict[str, object]:
    document: dict[str, object] = {
        "setup": impact.setup,
        "native": impact.native,
        "unpaired": impact.unpaired,
        "overall": _impact_row_json(impact.overall),
        "mcnemar": mcnemar_to_json(impact.test),
        "hurt_responses": [{"response": r, "count": n} for r, n in impact.hurt_responses],
        "buckets": [_impact_row_json(r) for r in impact.buckets],
        "per_dataset": [_impact_row_json(r) for r in impact.per_dataset],
    }
    if impact.evidence_buckets:  # only with evidence names: other documents stay as they were
        document["evidence_buckets"] = [_impact_row_json(r) for r in impact.evidence_buckets]
    if impact.reached_buckets:  # only with gold evidence and a retrieval
        document["reached_buckets"] = [_impact_row_json(r) for r in impact.reached_buckets]
    return document


# ---------------------------------------------------------------- one renderer per format


def _json(document: object) -> str:
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"


def _impacts_json(impacts: Sequence[RetrievalImpact]) -> str:
    return _json({"impacts": [impact_to_json(x) for x in impacts]})


#: ``kag stats compare`` (its ``html`` is the page of :mod:`kag.render.html`).
COMPARISON_RENDERERS: dict[TableFormat, Callable[[ComparisonRun], str]] = {
    TableFormat.TEXT: comparisons_text,
    TableFormat.MARKDOWN: comparisons_markdown,
    TableFormat.JSON: lambda run: _json(comparison_run_to_json(run)),
}

#: ``kag stats flips``: (report, max_chars) -> document; JSON always has the whole responses.
FLIP_RENDERERS: dict[TableFormat, Callable[[FlipReport, int], str]] = {
    TableFormat.TEXT: flips_text,
    TableFormat.MARKDOWN: flips_markdown,
    TableFormat.JSON: lambda report, max_chars: _json(flip_report_to_json(report)),
}

#: ``kag stats impact``.
IMPACT_RENDERERS: dict[TableFormat, Callable[[Sequence[RetrievalImpact]], str]] = {
    TableFormat.TEXT: impact_text,
    TableFormat.MARKDOWN: impact_markdown,
    TableFormat.JSON: _impacts_json,
}
