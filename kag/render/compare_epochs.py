"""Text, markdown and JSON of `kag stats compare --epochs all`: setups against a baseline on
per-question mean scores over their epochs (:mod:`kag.grading.compare.epoch_means`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import orjson

from kag.grading.compare.epoch_means import MeanComparisonRun
from kag.grading.percent import pct
from kag.render.formats import TableFormat
from kag.render.table import Table, interval_pct, pvalue, signed_pp, table_markdown, table_text
from kag.textsafe import escape_message, markdown_code

TEST_NAME = "paired bootstrap over questions"


def mean_comparison_table(run: MeanComparisonRun) -> Table:
    headers = ("SETUP", "EPOCHS", "N", "MEAN%", "BASE%", "DIFF pp", "95% CI (pp)", "p", "p (Holm)", "VERDICT")
    rows = tuple(
        (
            c.setup,
            str(run.epochs.get(c.setup, 1)),
            str(c.n),
            pct(c.setup_mean),
            pct(c.baseline_mean),
            signed_pp(c.diff),
            interval_pct((c.ci.low, c.ci.high) if c.ci else None, signed=True),
            pvalue(c.p_value),
            pvalue(c.p_holm),
            c.verdict,
        )
        for c in run.comparisons
    )
    return Table(headers, rows, ("l", "r", "r", "r", "r", "r", "r", "r", "r", "l"))


def mean_comparison_legend(run: MeanComparisonRun) -> list[str]:
    return [
        (
            f"Baseline: {run.baseline} ({run.epochs.get(run.baseline, 1)} epoch(s)) | paired questions only "
            f"| alpha {run.alpha:g} after Holm over {sum(1 for c in run.comparisons if c.p_value is not None)}"
            " comparison(s)"
        ),
        (
            "MEAN% = mean over the paired questions of the share of a setup's EPOCHS answered right "
            "(questions with fewer epochs left out); DIFF = MEAN% - BASE%"
        ),
        (
            f"TEST: {TEST_NAME} (McNemar does not apply to mean scores), {run.resamples} resamples, "
            f"seed {run.seed}; 95% CI: percentile interval; p: two-sided, from the null-centred replicates"
        ),
    ]


def mean_comparisons_text(run: MeanComparisonRun) -> str:
    document = "\n".join([table_text(mean_comparison_table(run)), "", *mean_comparison_legend(run)]) + "\n"
    return escape_message(document)


def mean_comparisons_markdown(run: MeanComparisonRun) -> str:
    legend = "\n".join(f"- {line}" for line in mean_comparison_legend(run))
    document = (
        f"### Comparisons against {markdown_code(run.baseline)} on mean scores over epochs\n\n"
        f"{table_markdown(mean_comparison_table(run))}\n\n{legend}\n"
    )
    return escape_message(document)


def mean_comparison_run_to_json(run: MeanComparisonRun) -> dict[str, object]:
    """The `kag stats compare --epochs all --format json` document; fractions, not percentages."""
    return {
        "baseline": run.baseline,
        "epochs": dict(run.epochs),
        "alpha": run.alpha,
        "correction": "holm",
        "test": TEST_NAME,
        "bootstrap": {"resamples": run.resamples, "seed": run.seed, "confidence": run.confidence},
        "comparisons": [
            {
                "setup": c.setup,
                "baseline": c.baseline,
                "paired_questions": c.n,
                "setup_mean": c.setup_mean,
                "baseline_mean": c.baseline_mean,
                "difference": c.diff,
                "difference_ci": [c.ci.low, c.ci.high] if c.ci else None,
                "p_value": c.p_value,
                "p_holm": c.p_holm,
                "significant": c.significant,
                "verdict": c.verdict,
            }
            for c in run.comparisons
        ],
    }


MEAN_COMPARISON_RENDERERS: Mapping[TableFormat, Callable[[MeanComparisonRun], str]] = {
    TableFormat.TEXT: mean_comparisons_text,
    TableFormat.MARKDOWN: mean_comparisons_markdown,
    TableFormat.JSON: lambda run: (
        orjson.dumps(mean_comparison_run_to_json(run), option=orjson.OPT_INDENT_2).decode() + "\n"
    ),
}
