"""`kag stats`: grade a result tree against the datasets file and report per setup.

The callback runs for ``kag stats`` itself and before any sub-command (``kag stats find``);
its options are optional and checked here only when no sub-command runs. A sub-command
finds the values given before its name in ``ctx.parent.params`` (keys ``datasets``,
``results``, ``prefix``, ``format``, ``setup``, ``dataset``, ``fail_under``;
None / empty when not given).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kag.commands._before import pick_datasets, pick_grade
from kag.commands._ci import AnnotationsOpt, SummaryOpt, ci_outputs
from kag.commands._globs import check_globs, check_setup_globs, tree_place, warn_prefix
from kag.commands._options import (
    EvidenceMatchOpt,
    ExtractOpt,
    GradeOpt,
    NodeNameOpt,
    Quiet,
    StatsDatasetOpt,
    StatsDatasetsOpt,
    StatsFormatOpt,
    StatsOutputOpt,
    StatsPrefixOpt,
    StatsResultsOpt,
    StatsSetupOpt,
    StatsVerbose,
    evidence_options,
    parse_percent,
)
from kag.commands._plans import STATS_PLANS, Need, StatsOutput
from kag.commands._report import (
    analyse_answers,
    check_page_output,
    emit_report,
    small_samples_warning,
    warn_small_samples,
)
from kag.commands._trees import parse_trees
from kag.commands._values import KagSubGroup
from kag.console import warn
from kag.errors import GateFailed, UsageError
from kag.render.formats import StatsFormat
from kag.textsafe import escape_controls

if TYPE_CHECKING:
    from kag.datasets import Datasets
    from kag.grading.compare.analysis import Analysis
    from kag.grading.compare.records import AnswerSet
    from kag.grading.compare.setups import ComparisonRun
    from kag.grading.mcq.metrics import GradeRun
    from kag.grading.mcq.request import GradeRequest
    from kag.grading.mcq.summary import Summary
    from kag.grading.mcq.trees import ResultSource
    from kag.grading.verdicts import JudgeKey
    from kag.pricing import Prices

FORMATS = tuple(f.value for f in StatsFormat)


@dataclass(frozen=True)
class StatsPlan:
    """What a `kag stats` run computes, derived once from its parsed options
    (:meth:`of`): the format's line of :data:`~kag.commands._plans.STATS_PLANS` (what its
    renderer reads, and the renderer), plus the needs of the ``--fail-if-worse-than`` gate
    (the comparisons, from the records) and of ``--prices`` (the records' models and tokens)."""

    format: StatsFormat
    needs: frozenset[Need]

    @classmethod
    def of(cls, format: StatsFormat, *, regression_gate: bool, priced: bool) -> StatsPlan:
        needs = set(STATS_PLANS[format].needs)
        if regression_gate:
            needs |= {"analysis", "records"}
        if priced:
            needs.add("records")
        return cls(format, frozenset(needs))

    @property
    def page(self) -> bool:
        return STATS_PLANS[self.format].page

    @property
    def analysed(self) -> bool:
        return "analysis" in self.needs

    def draw(self, out: StatsOutput) -> str:
        """The report, drawn by the format's renderer."""
        return STATS_PLANS[self.format].draw(out)

    def grading(
        self,
        prefix: str,
        setups: tuple[str, ...],
        dataset_globs: tuple[str, ...],
        extract: str | None,
        *,
        has_evidence: bool,
        judge: JudgeKey | None = None,
    ) -> GradeRequest:
        """What the walk grades for this run: the filters and ``--extract`` spec given, the
        judge whose verdicts are read (``--judge``), and the records, epochs and evidence its
        needs name (the evidence only when the datasets file lists evidence names,
        ``has_evidence``: it is measured against them)."""
        from kag.grading.mcq.request import GradeRequest

        asked = {need for need in self.needs if need in ("records", "epochs", "evidence")}
        if not has_evidence:
            asked.discard("evidence")
        return GradeRequest(
            prefix, setups, dataset_globs, extract=extract, measures=frozenset(asked), judge=judge
        )


stats_app = typer.Typer(
    cls=KagSubGroup,
    help="Grade a result tree against the datasets file: accuracy, precision, coverage per setup.",
    short_help="Grade a result tree: accuracy, precision, coverage per setup.",
    no_args_is_help=False,
)

EXAMPLES = """Examples:

\b
  kag stats -d datasets.json -r results
  kag stats -d datasets.json -r results --prefix run1- --setup 'gpt-*' --format json
  kag stats -d datasets.json -r results --format html -o report.html
  kag stats -d datasets.json -r results --fail-under 50
"""


@stats_app.callback(invoke_without_command=True, epilog=EXAMPLES)
def stats(
    ctx: typer.Context,
    datasets: StatsDatasetsOpt = None,
    results: StatsResultsOpt = None,
    prefix: StatsPrefixOpt = None,
    format: StatsFormatOpt = None,
    output: StatsOutputOpt = None,
    setup: StatsSetupOpt = None,
    dataset: StatsDatasetOpt = None,
    fail_under: Annotated[
        float | None,
        typer.Option(
            "--fail-under",
            help="Exit 1 when a setup's ACC% is below PCT (0-100).",
            metavar="PCT",
            show_default=False,
            parser=parse_percent,
        ),
    ] = None,
    fail_if_worse_than: Annotated[
        str | None,
        typer.Option(
            "--fail-if-worse-than",
            help="Exit 1 when a setup is significantly worse than SETUP (McNemar, Holm, alpha 0.05).",
            metavar="SETUP",
            show_default=False,
        ),
    ] = None,
    extract: ExtractOpt = None,
    grade: GradeOpt = None,
    evidence_match: EvidenceMatchOpt = None,
    node_name: NodeNameOpt = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            help="Token prices per model (TOML, USD per 1M tokens): adds cost_usd to json, markdown, html.",
            metavar="FILE",
            show_default=False,
        ),
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="Count the cached verdicts of this judge (kag stats judge -p PROVIDER -m MODEL).",
            metavar="PROVIDER/MODEL",
            show_default=False,
        ),
    ] = None,
    judge_prompt: Annotated[
        Path | None,
        typer.Option(
            "--judge-prompt",
            help="With --judge: the judge's --prompt FILE (its verdicts are keyed by it).",
            metavar="FILE",
            show_default=False,
        ),
    ] = None,
    config: Annotated[
        Path,
        typer.Option("--config", help="With --judge: the configuration naming its provider.", metavar="FILE"),
    ] = Path("config.toml"),
    summary_file: SummaryOpt = None,
    annotations: AnnotationsOpt = None,
    verbose: StatsVerbose = 0,
    quiet: Quiet = 0,
) -> None:
    """Grade every <results>/<dataset>/<question>/<prefix><setup>.json file and report per setup.

    Exit codes: 0 success, 1 --fail-under or --fail-if-worse-than failed, 2 bad usage or
    input, 130 interrupted.
    """
    if ctx.invoked_subcommand is not None:
        return
    fmt_name = (format or "text").lower()
    if fmt_name not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)} (got {format!r})")
    plan = StatsPlan.of(
        StatsFormat(fmt_name), regression_gate=fail_if_worse_than is not None, priced=prices is not None
    )
    datasets = pick_datasets(ctx, datasets)
    extract_spec, extracted = pick_grade(ctx, extract, grade)
    match_mode, name_keys = evidence_options(evidence_match, node_name)
    check_page_output(plan.page, output)

    # Imported here so that `kag --help` stays fast.
    from kag.datasets import load_datasets
    from kag.grading.gates import check_threshold, fail_under_verdict, regression_verdict
    from kag.grading.mcq.summary import summarize
    from kag.grading.mcq.trees import grade_source
    from kag.pricing import load_prices

    if fail_under is not None:
        check_threshold(fail_under)
        if 0 < fail_under <= 1:
            # The JSON report gives accuracy as a fraction (0.52): a threshold copied from
            # it would let every setup pass.
            warn(f"--fail-under {fail_under:g} is a percentage: did you mean {fail_under * 100:g}?")
    root = parse_trees(results)
    price_list = load_prices(prices) if prices is not None else None
    # The questions' texts only for --extract (the options' texts) and --judge (the question).
    loaded = load_datasets(datasets, texts=extract_spec is not None or judge is not None)
    dataset_globs = tuple(dataset or ())
    # A filter that selects nothing is a typo far more often than an intent: exit 2
    # before any report, so that neither a CI gate nor a step summary passes on it.
    check_globs("--dataset", dataset_globs, "dataset", f"in {datasets}", sorted(loaded.datasets))
    request = plan.grading(
        prefix or "",
        tuple(setup or ()),
        dataset_globs,
        extract_spec,
        has_evidence=loaded.has_evidence,
        judge=_judge_key(judge, judge_prompt, config) if judge is not None else None,
    ).matching_evidence(match_mode, name_keys)
    graded = grade_source(loaded, root, request)
    check_setup_globs(tuple(setup or ()), {s for s, _ in graded.tallies}, root, prefix or "", dataset_globs)
    warn_prefix((s for s, _ in graded.tallies), prefix or "", filtered=bool(setup), source=root)
    for tree in root:
        _explain_little(graded, loaded, Path(tree.root), prefix or "", dataset_globs)
    summary = summarize(graded)
    warn_small_samples(summary)
    _warn_unbelievable_usage(graded)
    if price_list is not None:
        summary = _priced(summary, graded, price_list)
    comparisons = answers = analysis = None
    if plan.analysed:
        answers, analysis, comparisons = _analyse(
            graded, loaded, root, prefix or "", plan.page, fail_if_worse_than, summary, extracted
        )
    gates: list[tuple[str, str | None]] = []
    if fail_under is not None:
        gates.append(
            (f"--fail-under {fail_under:g}", fail_under_verdict(summary, fail_under, extracted=extracted))
        )
    if comparisons is not None:
        gates.append((f"--fail-if-worse-than {fail_if_worse_than}", regression_verdict(comparisons)))
    text = plan.draw(
        StatsOutput(
            summary,
            graded,
            loaded,
            datasets,
            root,
            prefix or "",
            tuple(setup or ()),
            dataset_globs,
            extracted,
            gates,
            answers,
            analysis,
        )
    )
    emit_report(text, output)
    _ci_outputs(summary_file, annotations, summary, comparisons, gates, graded)
    verdict = next((v for _, v in gates if v is not None), None)
    if verdict is not None:
        raise GateFailed(verdict)


def _judge_key(spec: str, prompt: Path | None, config: Path) -> JudgeKey:
    """The key of the verdicts ``--judge PROVIDER/MODEL`` cached (``kag stats judge``)."""
    from kag.generation.config import load_config
    from kag.grading.judge import Judge, judge_key
    from kag.grading.judge_prompt import load_judge_prompt

    provider, _, model = spec.partition("/")
    if not provider or not model:
        raise UsageError(f"--judge {spec}: expected PROVIDER/MODEL, as kag stats judge -p PROVIDER -m MODEL")
    return judge_key(load_config(config), Judge(provider, model), load_judge_prompt(prompt))


def _warn_unbelievable_usage(graded: GradeRun) -> None:
    from kag.results.codec import MAX_COUNT

    count = sum(m.unbelievable_usage for m in graded.tallies.values())
    if count:
        warn(f"{count} result file(s) record a token count above {MAX_COUNT}: their usage is left out")


def quality_notes(graded: GradeRun) -> list[str]:
    """The data-quality notes of a grading run (the summary's and the annotations')."""
    notes = []
    if graded.unreadable:
        names = ", ".join(u.path for u in graded.unreadable[:5])
        notes.append(f"{len(graded.unreadable)} unreadable result file(s): {names}")
    if graded.skipped_files:
        notes.append(f"{graded.skipped_files} result file(s) of questions without an answer key skipped")
    if graded.ignored_files:
        notes.append(f"{graded.ignored_files} file(s) ignored (not result files; kag -v stats lists them)")
    return notes


def _ci_outputs(
    summary_file: Path | None,
    annotations: str | None,
    summary: Summary,
    comparisons: ComparisonRun | None,
    gates: list[tuple[str, str | None]],
    graded: GradeRun,
) -> None:
    from kag.render.github import summary_markdown

    notes = quality_notes(graded)
    small = small_samples_warning(summary)
    if small:
        notes.append(small)
    ci_outputs(
        summary_file,
        annotations,
        lambda: summary_markdown("kag stats", summary, comparisons, gates=gates, notes=notes),
        gates,
        notes,
    )


def _explain_little(
    graded: GradeRun, loaded: Datasets, root: Path, prefix: str, globs: tuple[str, ...]
) -> None:
    """Warnings naming why nothing, or little, was graded (only then is the tree looked at again)."""
    import os

    from kag.grading.mcq.diagnose import diagnose_tree, graded_files, needs_diagnosis

    if not needs_diagnosis(graded):
        return
    passed = ""
    if graded.ignored_files or graded.unreadable_files:
        passed = f" ({graded.ignored_files} ignored, {graded.unreadable_files} unreadable; kag -v stats lists them)"
    count = graded_files(graded)
    if count:
        warn(f"only {count} result file(s) graded in {root}{passed}")
    else:
        warn(f"no result file was graded in {root}{passed}")
    found = diagnose_tree(loaded, root, prefix, globs)
    if not found.question_folders and found.depth is None:
        warn(f"no <dataset>/<question>/ folder {tree_place(root, globs)}")
    if found.prefixes:
        seen = ", ".join(f"'{p}' ({n} file(s))" for p, n in found.prefixes[:5])
        more = f", … ({len(found.prefixes) - 5} more)" if len(found.prefixes) > 5 else ""
        warn(f"no result file starts with '{prefix}' (--prefix); prefixes seen: {seen}{more}")
    if found.depth == 2:
        up = os.path.normpath(os.path.join(root, os.pardir))
        warn(f"the result files are one level up: {root} looks like a dataset folder; try --results {up}")
    elif found.depth == 1:
        up = os.path.normpath(os.path.join(root, os.pardir, os.pardir))
        warn(f"the result files are directly in {root}, a question folder; try --results {up}")
    elif found.depth == 4:
        tries = " or ".join(f"--results {os.path.join(root, x)}" for x in found.deeper[:3])
        warn(f"the result files are one level deeper (<folder>/<dataset>/<question>/); try {tries}")
    elif found.unknown_questions:
        names = ", ".join(found.unknown_datasets[:5])
        why = f" (datasets it does not name: {names})" if names else ""
        warn(
            f"{found.unknown_questions} of {found.question_folders} question folder(s) are not in "
            f"{loaded.path}{why}"
        )


def _analyse(
    graded: GradeRun,
    loaded: Datasets,
    root: ResultSource,
    prefix: str,
    page: bool,
    fail_if_worse_than: str | None,
    summary: Summary,
    extracted: bool = False,
) -> tuple[AnswerSet, Analysis | None, ComparisonRun | None]:
    """The answers, the analysis the page is drawn from (with ``page``) and the comparisons
    the --fail-if-worse-than gate reads."""
    from dataclasses import replace

    from kag.grading.compare.setups import compare_setups
    from kag.grading.compare.trees import answer_set_from_source

    # The summary of the answers, with the costs when --prices priced it.
    answers = replace(
        answer_set_from_source(graded, loaded, root, prefix, extracted=extracted), summary=summary
    )
    if fail_if_worse_than is not None and fail_if_worse_than not in answers.setups:
        raise UsageError(f"--fail-if-worse-than {fail_if_worse_than}: no graded setup has that name")
    if not page:
        assert fail_if_worse_than is not None  # the only other reason to analyse
        return answers, None, compare_setups(answers.answers, fail_if_worse_than, None)
    analysis = analyse_answers(answers, baseline=fail_if_worse_than)
    return answers, analysis, analysis.comparisons if fail_if_worse_than is not None else None


def _priced(summary: Summary, graded: GradeRun, prices: Prices) -> Summary:
    """``summary`` with the costs of its blocks; one warning per model without a price."""
    from dataclasses import replace

    from kag.grading.usage import price_records

    costs = price_records(graded.records or (), prices)
    for model in costs.missing_models:
        name = f"model '{escape_controls(model)}'" if model else "files that record no model"
        warn(f"{prices.path}: no price for {name}: its setups' cost_usd is null")
    return replace(summary, costs=costs)


def register(app: typer.Typer) -> typer.Typer:
    """Adds `kag stats` to ``app``; the sub-commands register on the returned app."""
    app.add_typer(stats_app, name="stats")
    return stats_app
