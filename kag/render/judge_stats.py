"""The sections of the `kag stats judge` report beyond the verdict counts: human labels,
several judges, repeats, the corrected accuracy and pairwise verdicts, as tables (for text,
markdown and HTML), JSON values and JUnit properties. It formats; the numbers come from
:mod:`kag.grading.judge_stats` and :mod:`kag.grading.pairwise`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kag.grading.judge import Judge
from kag.grading.judge_stats import Agreement, JudgeStatistics, SetupStats
from kag.grading.pairwise import PairwiseReport
from kag.grading.percent import pct
from kag.grading.ppi import Estimate
from kag.render.table import Table, interval_pct, pvalue
from kag.textsafe import escape_controls

ALL = "all"  # the row of every setup together


def judge_name(judge: Judge) -> str:
    return f"{judge.provider}/{judge.model}"


def coefficient(value: float | None) -> str:
    """A kappa or alpha with 3 decimals, ``-`` when undefined."""
    return "-" if value is None else f"{value:.3f}"


def coefficient_ci(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


# ---------------------------------------------------------------- JSON


def _ci(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [ci[0], ci[1]]


def agreement_json(a: Agreement | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return {
        "n": a.n,
        "agreement": a.agreement,
        "kappa": a.kappa,
        "kappa_ci95": _ci(a.kappa_ci95),
        "confusion": [list(a.confusion[0]), list(a.confusion[1])],
        "sensitivity": a.sensitivity,
        "specificity": a.specificity,
    }


def _estimate(e: Estimate | None) -> dict[str, Any] | None:
    return None if e is None else {"estimate": e.estimate, "ci95": _ci(e.ci95), "n": e.n}


def setup_json(s: SetupStats) -> dict[str, Any]:
    """The keys a setup entry gains (``accuracy`` is the entry's own, from the summary)."""
    corrected = _estimate(s.corrected_accuracy)
    if corrected is not None:
        corrected = {
            "estimate": corrected["estimate"],
            "ci95": corrected["ci95"],
            "n_labelled": corrected["n"],
        }
    return {
        "accuracy_ci95": _ci(s.accuracy_ci95),
        "judges": [
            {
                "provider": j.judge.provider,
                "model": j.judge.model,
                "accuracy": j.accuracy,
                "unusable": j.unusable,
            }
            for j in s.judges
        ],
        "judges_kappa": [
            {"a": judge_name(p.a), "b": judge_name(p.b), "n": p.n, "kappa": p.kappa} for p in s.judges_kappa
        ],
        "judges_alpha": s.judges_alpha,
        "labels": agreement_json(s.labels),
        "exact_match_labels": agreement_json(s.exact_match),
        "annotators_alpha": s.annotators_alpha,
        "labels_alpha_with_judge": s.alpha_with_judge,
        "labelled_accuracy": _estimate(s.labelled_accuracy),
        "corrected_accuracy": corrected,
    }


def statistics_json(stats: JudgeStatistics) -> dict[str, Any]:
    """The top-level keys the report gains: every judge, the repeats and self-consistency,
    the labels not matched, and ``overall`` (every setup together)."""
    overall = stats.overall
    return {
        "judges": [{"provider": j.provider, "model": j.model} for j in stats.judges],
        "repeats": stats.repeats,
        "self_consistency": [
            {"provider": j.provider, "model": j.model, "rate": rate} for j, rate in stats.consistency
        ],
        "unmatched_labels": stats.unmatched_labels if stats.labelled else None,
        "overall": {
            "judged": overall.summary.judged,
            "correct": overall.summary.correct,
            "incorrect": overall.summary.incorrect,
            "unusable": overall.summary.unusable,
            "accuracy": overall.summary.accuracy,
            "agreement_with_exact_match": overall.summary.agreement_with_exact_match,
            **setup_json(overall),
        },
    }


def pairwise_json(report: PairwiseReport) -> dict[str, Any]:
    return {
        "a": report.a,
        "b": report.b,
        "questions": report.questions,
        "criteria": [
            {
                "criterion": c.criterion,
                "wins": c.wins,
                "ties": c.ties,
                "losses": c.losses,
                "unusable": c.unusable,
                "win_rate": c.win_rate,
                "win_rate_ci95": _ci(c.win_rate_ci95),
                "p_value": c.p_value,
                "p_holm": c.p_holm,
                "position_consistency": c.position_consistency,
                "first_position_rate": c.first_position_rate,
            }
            for c in report.criteria
        ],
    }


# ---------------------------------------------------------------- tables


def _rows(stats: JudgeStatistics) -> list[tuple[str, SetupStats]]:
    rows = [(s.setup or "", s) for s in stats.setups]
    if len(rows) > 1:
        rows.append((ALL, stats.overall))
    return rows


def labels_table(stats: JudgeStatistics) -> Table:
    """Per setup: the answers with a label and a usable verdict, the judge's agreement with the
    labels, Cohen's kappa and its bootstrap interval, sensitivity, specificity, and the exact
    match's agreement and kappa on the same answers."""
    rows = []
    for name, s in _rows(stats):
        a, e = s.labels, s.exact_match
        assert a is not None and e is not None
        rows.append(
            (
                name,
                str(a.n),
                pct(a.agreement),
                coefficient(a.kappa),
                coefficient_ci(a.kappa_ci95),
                pct(a.sensitivity),
                pct(a.specificity),
                pct(e.agreement),
                coefficient(e.kappa),
            )
        )
    headers = (
        "SETUP",
        "LABELLED",
        "AGREE%",
        "KAPPA",
        "KAPPA 95% CI",
        "SENS%",
        "SPEC%",
        "EM AGREE%",
        "EM KAPPA",
    )
    return Table(headers, tuple(rows), ("l", "r", "r", "r", "r", "r", "r", "r", "r"))


def accuracy_table(stats: JudgeStatistics) -> Table:
    """Per setup: the judge's accuracy, the labelled answers' accuracy and the corrected
    (prediction-powered) accuracy, each with its 95% interval."""
    rows = []
    for name, s in _rows(stats):
        lab, cor = s.labelled_accuracy, s.corrected_accuracy
        rows.append(
            (
                name,
                pct(s.summary.accuracy),
                interval_pct(s.accuracy_ci95),
                pct(lab.estimate if lab else None),
                interval_pct(lab.ci95 if lab else None),
                pct(cor.estimate if cor else None),
                interval_pct(cor.ci95 if cor else None),
            )
        )
    headers = ("SETUP", "JUDGE ACC%", "95% CI", "LABELLED ACC%", "95% CI", "CORRECTED ACC%", "95% CI")
    return Table(headers, tuple(rows), ("l", "r", "r", "r", "r", "r", "r"))


def judges_table(stats: JudgeStatistics) -> Table:
    """Per judge, every setup together: its own accuracy, its unusable verdicts and (with
    repeats) its self-consistency."""
    consistency = dict(stats.consistency)
    rows = tuple(
        (judge_name(j.judge), pct(j.accuracy), str(j.unusable), pct(consistency.get(j.judge)))
        for j in stats.overall.judges
    )
    return Table(("JUDGE", "ACC%", "UNUSABLE", "SELF-CONSISTENT%"), rows, ("l", "r", "r", "r"))


def judge_pairs_table(stats: JudgeStatistics) -> Table:
    rows = tuple(
        (judge_name(p.a), judge_name(p.b), str(p.n), coefficient(p.kappa)) for p in stats.overall.judges_kappa
    )
    return Table(("JUDGE A", "JUDGE B", "BOTH USABLE", "KAPPA"), rows, ("l", "l", "r", "r"))


def pairwise_table(report: PairwiseReport) -> Table:
    rows = tuple(
        (
            c.criterion,
            str(c.wins),
            str(c.ties),
            str(c.losses),
            str(c.unusable),
            pct(c.win_rate),
            interval_pct(c.win_rate_ci95),
            pvalue(c.p_value),
            pvalue(c.p_holm),
            pct(c.position_consistency),
            pct(c.first_position_rate),
        )
        for c in report.criteria
    )
    headers = (
        "CRITERION",
        "WINS",
        "TIES",
        "LOSSES",
        "UNUSABLE",
        "WIN%",
        "95% CI",
        "P",
        "P HOLM",
        "CONSISTENT%",
        "FIRST%",
    )
    return Table(headers, rows, ("l", *("r",) * 10))


def sections(stats: JudgeStatistics | None) -> list[tuple[str, Table]]:
    """The titled tables shown after the verdict counts, those with something to show."""
    if stats is None:
        return []
    out: list[tuple[str, Table]] = []
    if stats.labelled:
        out.append(("Against the human labels", labels_table(stats)))
        out.append(("Accuracy, raw and corrected by the labels", accuracy_table(stats)))
    if len(stats.judges) > 1 or stats.repeats > 1:
        out.append(("Judges", judges_table(stats)))
    if len(stats.judges) > 1:
        out.append(("Judge pairs", judge_pairs_table(stats)))
    return out


def notes(stats: JudgeStatistics | None) -> list[str]:
    """One-line figures shown under the tables (Krippendorff's alphas)."""
    if stats is None:
        return []
    overall = stats.overall
    lines = []
    if len(stats.judges) > 1:
        lines.append(f"Krippendorff's alpha among the judges: {coefficient(overall.judges_alpha)}")
    if stats.labelled and overall.annotators_alpha is not None:
        lines.append(f"Krippendorff's alpha among the annotators: {coefficient(overall.annotators_alpha)}")
    if stats.labelled and overall.alpha_with_judge is not None:
        lines.append(
            f"Krippendorff's alpha of the annotators and the judge: {coefficient(overall.alpha_with_judge)}"
        )
    return lines


def properties(s: SetupStats) -> dict[str, str | None]:
    """JUnit properties of one setup: every figure of :func:`setup_json` that is a number."""

    def num(value: float | None) -> str | None:
        return None if value is None else repr(value)

    out: dict[str, str | None] = {
        "judge.accuracy": num(s.summary.accuracy),
        "judge.unusable": str(s.summary.unusable),
        "judge.agreement_with_exact_match": num(s.summary.agreement_with_exact_match),
        "judges.alpha": num(s.judges_alpha),
    }
    if s.labels is not None and s.exact_match is not None:
        out |= {
            "labels.n": str(s.labels.n),
            "labels.agreement": num(s.labels.agreement),
            "labels.kappa": num(s.labels.kappa),
            "labels.sensitivity": num(s.labels.sensitivity),
            "labels.specificity": num(s.labels.specificity),
            "labels.exact_match_kappa": num(s.exact_match.kappa),
            "corrected_accuracy": num(s.corrected_accuracy.estimate if s.corrected_accuracy else None),
        }
    return out


def pairwise_properties(report: PairwiseReport) -> list[tuple[str, dict[str, str | None]]]:
    def num(value: float | None) -> str | None:
        return None if value is None else repr(value)

    return [
        (
            c.criterion,
            {
                "wins": str(c.wins),
                "ties": str(c.ties),
                "losses": str(c.losses),
                "unusable": str(c.unusable),
                "win_rate": num(c.win_rate),
                "p_holm": num(c.p_holm),
                "position_consistency": num(c.position_consistency),
                "first_position_rate": num(c.first_position_rate),
            },
        )
        for c in report.criteria
    ]


def shared_model_warning(found: Sequence[tuple[Judge, str, str]]) -> list[str]:
    """One warning per judge whose model also answered as a setup, naming both."""
    return [
        f"judge {escape_controls(judge_name(j))} is also the model of setup {escape_controls(setup)} "
        f"({escape_controls(model)}): a model tends to favour its own answers"
        for j, setup, model in found
    ]
