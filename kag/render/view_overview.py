"""The overview of `kag view`: its document (the `kag stats --format json`, `kag stats compare
--format json` and `kag stats impact --format json` documents of the index's snapshot) and
what its page draws, by the renderers of the `kag stats --format html` page.

The setups, per-dataset and epochs tables come from the columns the measures declare
(:mod:`kag.render.columns`, through :func:`kag.render.html.summary_table`); the accuracy,
paired-difference and retrieval-impact charts are those of :mod:`kag.render.html`. The
comparisons are computed once per scan and baseline in a thread of their own
(:meth:`kag.view.query.View.analysis`): the page shows the tables at once and says the
comparisons are being computed until they are there; the JSON waits for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from kag.grading.compare.analysis import Analysis
from kag.grading.epochs import EpochSummary
from kag.grading.mcq.epoch_walk import SetupEpochs
from kag.grading.mcq.summary import Summary, small_samples
from kag.render.columns import EPOCH_COLUMNS, Shown, cells_for, columns_for, headers_for
from kag.render.compare import (
    IMPACT_LEGEND,
    comparison_legend,
    comparison_run_to_json,
    impact_to_json,
)
from kag.render.html import (
    accuracy_chart,
    forest_chart,
    impact_section,
    ranking_legend,
    summary_table,
    tokens_chart,
)
from kag.render.outcomes_chart import OUTCOMES_LEGEND, outcomes_chart
from kag.render.stats import summary_to_json
from kag.render.table import Align, Table, table_html
from kag.render.usage import usage_legend
from kag.view.query import View

#: The line under the tables that explains ACC%, its interval, PREC% and COVER%.
RANKING_LEGEND = (
    "ACC% = OK / TOT, 95% CI = Wilson score interval; PREC% = OK / (OK + WRONG); COVER% = (OK + WRONG) / TOT"
)


def overview(view: View, baseline: str | None) -> dict[str, Any]:
    """``stats`` (the `kag stats --format json` document), ``compare`` (`kag stats compare`'s
    against ``baseline``, by default its own), ``impacts`` (`kag stats impact`'s), notes;
    waits for the comparisons."""
    analysis = view.analysis(baseline).wait()
    return {**_facts(view), **_analysis_json(analysis)}


def _facts(view: View) -> dict[str, Any]:
    summary = view.snapshot.summary
    return {
        "stats": summary_to_json(summary),
        "small_samples": [{"setup": s.setup, "files": s.total} for s in small_samples(summary)],
        "unreadable": [{"path": u.path, "reason": u.reason} for u in view.snapshot.run.unreadable[:100]],
        "runs": run_records(view),
    }


def _analysis_json(analysis: Analysis | None) -> dict[str, Any]:
    run = analysis.comparisons if analysis is not None else None
    return {
        "compare": comparison_run_to_json(run) if run is not None else None,
        "impacts": [impact_to_json(i) for i in analysis.impacts] if analysis is not None else [],
    }


def run_records(view: View) -> list[dict[str, Any]]:
    """The run records of each tree (``kag stats runs``): the tree's label, the record's file,
    and the row ``kag stats runs`` prints, by its column names; read once per scan (the rows
    kept with the snapshot, not the records)."""
    from kag.render.runs import HEADER, run_row
    from kag.results.runs import read_run_records

    snap = view.snapshot
    if snap.runs is None:
        snap.runs = [
            {
                "tree": tree.label or None,
                "file": record.name,
                **dict(zip(HEADER, run_row(record), strict=True)),
            }
            for tree in view.index.trees
            for record in read_run_records(tree.root)
        ]
    return snap.runs


def overview_context(view: View, baseline: str | None, *, wait: bool) -> dict[str, Any]:
    """What the overview page is given: the document's facts, the tables and charts, and
    the analysis when it is there (``wait``: wait for it; else ``computing`` says it is
    not there yet)."""
    job = view.analysis(baseline)
    analysis = job.wait() if wait or job.done.is_set() else None
    summary = view.snapshot.summary
    return {
        **_facts(view),
        **_analysis_json(analysis),
        "computing": analysis is None and not job.done.is_set(),
        **tables(summary),
        **charts(summary, analysis),
    }


def tables(summary: Summary) -> dict[str, Any]:
    """The setups and per-dataset tables (the HTML ranking's columns that the run has, split
    into its setup rows and its dataset rows), their legend, and the epochs tables."""
    shown = Shown.of(summary)
    ranking = summary_table(summary.setups, shown)
    setup_rows: list[tuple[str, ...]] = []
    dataset_rows: list[tuple[str, ...]] = []
    setup = ""
    for i, row in enumerate(ranking.rows):
        if ranking.is_sub(i):
            dataset_rows.append((f"{setup} / {row[1].removeprefix('└ ')}", *row[2:]))
        else:
            setup = row[1]
            setup_rows.append(row)
    per_dataset = Table(ranking.headers[1:], tuple(dataset_rows), ranking.align[1:])
    legend = (RANKING_LEGEND, *ranking_legend(shown))
    if shown.usage:
        legend += (usage_legend(shown.priced),)
    epochs = []
    if any(s.setup in summary.epochs for s in summary.setups):
        epochs.append(("epochs", "Strict grade", _epochs_table(summary, summary.epochs)))
        if summary.extracted_epochs:
            title = f"Extracted grade ({summary.extract})"
            epochs.append(("extracted-epochs", title, _epochs_table(summary, summary.extracted_epochs)))
    return {
        "setups_table": table_html(Table(ranking.headers, tuple(setup_rows), ranking.align), "ranking")
        if setup_rows
        else None,
        "dataset_table": table_html(per_dataset, "ranking") if dataset_rows else None,
        "legend": legend,
        "epochs": epochs,
        "epochs_legend": tuple(c.legend for c in _EPOCH_COLUMNS if c.legend),
    }


_EPOCH_COLUMNS = columns_for(EPOCH_COLUMNS, "text", Shown())


def _epochs_table(summary: Summary, epochs: Mapping[str, SetupEpochs]) -> Markup:
    """The epochs table of the text report (its declared columns), one row per setup with
    later epochs and one per dataset of it."""
    rows: list[tuple[str, ...]] = []
    sub: list[bool] = []

    def cells(block: EpochSummary | None) -> tuple[str, ...]:
        if block is None:
            return tuple("-" for _ in _EPOCH_COLUMNS)
        return tuple(c or "" for c in cells_for("text", _EPOCH_COLUMNS, block))

    for s in summary.setups:
        found = epochs.get(s.setup)
        if found is None:
            continue
        rows.append((s.setup, *cells(found.overall)))
        sub.append(False)
        for dataset, block in found.per_dataset.items():
            rows.append((f"{s.setup} / {dataset}", *cells(block)))
            sub.append(True)
    align: tuple[Align, ...] = ("l", *("r" if c.width else "l" for c in _EPOCH_COLUMNS))
    return table_html(Table(("SETUP", *headers_for("text", _EPOCH_COLUMNS)), tuple(rows), align, tuple(sub)))


def charts(summary: Summary, analysis: Analysis | None) -> dict[str, Any]:
    """The charts of the HTML page: accuracy with 95% CI (and against tokens, with usage);
    with retrieval quality, the outcomes split (:mod:`kag.render.outcomes_chart`);
    with the analysis, the paired differences and each KAG setup's retrieval impact (its
    header lines name the KAG answers on the hurt questions)."""
    shown = Shown.of(summary)
    setups: Sequence[Any] = summary.setups
    run = analysis.comparisons if analysis is not None else None
    return {
        "accuracy_chart": accuracy_chart(setups) if setups else None,
        "tokens_chart": tokens_chart(setups) if setups and shown.usage else None,
        "outcomes_chart": outcomes_chart(setups) if setups else None,
        "outcomes_legend": OUTCOMES_LEGEND,
        "forest_chart": forest_chart(run) if run is not None and run.comparisons else None,
        "compare_legend": comparison_legend(run) if run is not None else [],
        "impacts": [impact_section(impact) for impact in (analysis.impacts if analysis is not None else ())],
        "impact_legend": IMPACT_LEGEND,
    }
