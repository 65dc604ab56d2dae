"""`kag stats compare`, `kag stats flips`, `kag stats impact`: setups compared on the
questions they both answered.

The statistics are in :mod:`kag.grading.compare`, the renderers in :mod:`kag.render.compare`
and :mod:`kag.render.html`.
The options shared with `kag stats` (``-d``, ``-r``, ``--prefix``, ``--setup``,
``--dataset``, ``--format``, and for compare and impact ``--evidence-match`` and
``--node-name``) are accepted before or after the sub-command name; after wins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kag.commands._before import pick_datasets, pick_format, pick_grade, pick_option
from kag.commands._ci import AnnotationsOpt, SummaryOpt, ci_outputs
from kag.commands._globs import check_globs, check_setup_globs, setups_in, warn_prefix
from kag.commands._help import kag_command
from kag.commands._options import (
    DatasetOpt,
    DatasetsOpt,
    EvidenceMatchOpt,
    ExtractOpt,
    GradeOpt,
    NodeNameOpt,
    OutputOpt,
    PrefixOpt,
    Quiet,
    ReportFormatOpt,
    SetupOpt,
    TableFormatOpt,
    TreesOpt,
    Verbose,
    complete_setups,
    evidence_options,
)
from kag.commands._plans import COMPARE_PLANS, AgainstOutput, CompareOutput, ComparePlanLine
from kag.commands._report import check_page_output, emit_report, html_report, warn_small_samples
from kag.commands._trees import parse_trees
from kag.errors import GateFailed, UsageError
from kag.render.formats import ReportFormat, TableFormat

if TYPE_CHECKING:
    from kag.grading.compare.epoch_means import MeanComparisonRun
    from kag.grading.compare.records import AnswerSet
    from kag.grading.mcq.trees import ResultSource


@dataclass(frozen=True)
class _Loaded:
    answers: AnswerSet
    datasets: str
    results: str
    prefix: str
    source: ResultSource
    extracted: bool = False


def _load(
    ctx: typer.Context,
    datasets: Path | None,
    results: list[str] | None,
    prefix: str | None,
    setup: list[str] | None,
    dataset: list[str] | None,
    named: tuple[str | None, ...] = (),
    extract: str | None = None,
    grade: str | None = None,
    evidence: bool = False,
    epochs: bool = False,
    evidence_match: str | None = None,
    node_name: str | None = None,
) -> _Loaded:
    """Grade the tree; setups in ``named`` (a baseline, A and B) are kept whatever ``--setup`` says
    and must have graded answers. ``evidence_match`` and ``node_name`` are ``--evidence-match``
    and ``--node-name`` as given after the sub-command name (before it otherwise)."""
    import glob

    from kag.datasets import load_datasets
    from kag.grading.compare.trees import load_source_answers
    from kag.grading.mcq.request import GradeRequest
    from kag.grading.mcq.trees import describe_source

    datasets_path = pick_datasets(ctx, datasets)
    source = parse_trees(pick_option(ctx, "--results", results, None))
    root = describe_source(source)
    pfx = pick_option(ctx, "--prefix", prefix, "")
    extract_spec, extracted = pick_grade(ctx, extract, grade)
    match_mode, name_keys = evidence_options(
        pick_option(ctx, "--evidence-match", evidence_match, None),
        pick_option(ctx, "--node-name", node_name, None),
    )
    asked = tuple(pick_option(ctx, "--setup", setup, ()))
    setups = asked + tuple(glob.escape(n) for n in named if n) if asked else ()
    globs = tuple(pick_option(ctx, "--dataset", dataset, ()))
    answer_key = load_datasets(datasets_path, texts=extract_spec is not None)  # --extract reads option texts
    # As in `kag stats`: a filter that selects nothing is a typo, not a smaller comparison.
    check_globs("--dataset", globs, "dataset", f"in {datasets_path}", sorted(answer_key.datasets))
    # Evidence is measured against the names the datasets file lists, when it lists some.
    measures = {"evidence"} if evidence and answer_key.has_evidence else set()
    if epochs:
        measures.add("epochs")
    request = GradeRequest(
        pfx, setups, globs, extract=extract_spec, measures=frozenset(measures)
    ).matching_evidence(match_mode, name_keys)
    loaded = load_source_answers(answer_key, source, request, extracted=extracted)
    for name in named:
        if name and name not in loaded.setups:
            in_tree = setups_in(source, pfx)
            why = "no graded answers after the filters" if name in in_tree else "no such setup"
            raise UsageError(f"setup {name!r}: {why}; setups in {root}: {', '.join(in_tree) or 'none'}")
    check_setup_globs(asked, set(loaded.setups), source, pfx, globs)
    warn_prefix(loaded.setups, pfx, filtered=bool(asked) or any(named), source=source)
    if not loaded.answers:
        raise UsageError(
            f"{root}: no graded result file (prefix {pfx!r}, setups {list(setups) or 'all'}, "
            f"datasets {list(globs) or 'all'})"
        )
    return _Loaded(loaded, str(datasets_path), root, pfx, source, extracted)


def _tell_significant(comparisons: Sequence[Any], baseline: str, alpha: float, method: str) -> None:
    """The info line of both comparisons (answers and mean scores): how many are significant."""
    from kag.console import info

    significant = sum(1 for c in comparisons if c.significant)
    info(
        f"{significant} of {len(comparisons)} comparison(s) against {baseline} significant "
        f"at alpha {alpha:g} ({method})."
    )


# Each resample holds three counts per comparison: 1,000,000 take 24 MB a comparison, while
# an unbounded count (1e9: 24 GB) would exhaust memory before any output.
MAX_RESAMPLES = 1_000_000


COMPARE_EXAMPLES = """Examples:

\b
  kag stats compare -d datasets.json -r results
  kag stats compare -d datasets.json -r results --baseline native --format markdown
  kag stats compare -d datasets.json -r results --fail-if-worse-than native
  kag stats compare -d datasets.json -r results --format html -o compare.html
"""

FLIPS_EXAMPLES = """Examples:

\b
  kag stats flips -d datasets.json -r results native kag
  kag stats flips -d datasets.json -r results native kag --max-chars 0 --format json
"""

IMPACT_EXAMPLES = """Examples:

\b
  kag stats impact -d datasets.json -r results
  kag stats impact -d datasets.json -r results kag-gpt --native native-gpt
"""


def compare(
    ctx: typer.Context,
    datasets: DatasetsOpt = None,
    results: TreesOpt = None,
    prefix: PrefixOpt = None,
    setup: SetupOpt = None,
    dataset: DatasetOpt = None,
    baseline: Annotated[
        str | None,
        typer.Option(metavar="SETUP", help="Compare against SETUP [default: the best-ranked]."),
    ] = None,
    fail_if_worse_than: Annotated[
        str | None,
        typer.Option(metavar="SETUP", help="Baseline; exit 1 when a setup is significantly worse than it."),
    ] = None,
    alpha: Annotated[float, typer.Option(metavar="P", help="Family-wise significance level (Holm).")] = 0.05,
    seed: Annotated[
        int, typer.Option(min=0, metavar="N", help="Bootstrap seed (reported in the output).")
    ] = 0,
    resamples: Annotated[
        int,
        typer.Option(min=1, max=MAX_RESAMPLES, metavar="N", help="Bootstrap resamples (at most 1,000,000)."),
    ] = 10_000,
    native: Annotated[
        str | None,
        typer.Option(metavar="SETUP", help="html: the setup without retrieval for every KAG setup."),
    ] = None,
    max_flips: Annotated[
        int, typer.Option(min=0, metavar="N", help="html: flips listed per direction and pair.")
    ] = 50,
    epochs: Annotated[
        str,
        typer.Option(
            "--epochs",
            metavar="EPOCHS",
            help="1: epoch 1 (McNemar); all: per-question mean scores over every epoch (paired bootstrap).",
        ),
    ] = "1",
    against: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Each setup against its earlier run: FILE holds the rows of a kag stats --format jsonl export.",
            show_default=False,
        ),
    ] = None,
    fail_if_regressed: Annotated[
        bool,
        typer.Option(
            "--fail-if-regressed",
            help="With --against: exit 1 when a setup is significantly worse than it was (Holm).",
        ),
    ] = False,
    output_format: ReportFormatOpt = None,
    output: OutputOpt = None,
    extract: ExtractOpt = None,
    grade: GradeOpt = None,
    evidence_match: EvidenceMatchOpt = None,
    node_name: NodeNameOpt = None,
    summary_file: SummaryOpt = None,
    annotations: AnnotationsOpt = None,
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    """Each setup against a baseline on the questions both answered: McNemar, bootstrap CI, Holm.

    Exit codes: 0 success, 1 a gate failed (a significant regression, or no question
    paired with the earlier run), 2 bad usage or input, 130 interrupted.
    """
    from kag.grading import compare as lib

    fmt = pick_format(ctx, output_format, ReportFormat)
    plan = COMPARE_PLANS[fmt]
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha:g}: must be between 0 and 1")
    if baseline and fail_if_worse_than and baseline != fail_if_worse_than:
        raise UsageError("--baseline and --fail-if-worse-than name different setups; give one")
    base = fail_if_worse_than or baseline
    if epochs not in ("1", "all"):
        raise UsageError(f"--epochs must be 1 or all (got {epochs!r})")
    if epochs == "all" and plan.means is None:
        raise UsageError(f"--epochs all: the formats are text, markdown and json (not {fmt.value})")
    if fail_if_regressed and against is None:
        raise UsageError("--fail-if-regressed needs --against FILE (a kag stats --format jsonl export)")
    if against is not None and (base or epochs == "all" or plan.against is None):
        raise UsageError(
            "--against compares each setup with its earlier run: no --baseline, "
            "--fail-if-worse-than, --epochs all or --format html"
        )
    check_page_output(plan.page, output)
    loaded = _load(
        ctx,
        datasets,
        results,
        prefix,
        setup,
        dataset,
        (base, native),
        extract,
        grade,
        evidence=True,
        epochs=epochs == "all",
        evidence_match=evidence_match,
        node_name=node_name,
    )
    answers = loaded.answers
    if against is not None:
        _against(
            loaded,
            against,
            fail_if_regressed,
            alpha,
            resamples,
            seed,
            plan,
            output,
            summary_file,
            annotations,
        )
        return
    if len(answers.setups) < 2:
        raise UsageError(f"only one setup ({answers.setups[0]}) has graded answers: nothing to compare")
    warn_small_samples(answers.summary)
    if answers.means is not None:
        assert plan.means is not None  # refused above
        _compare_means(answers, base, alpha, resamples, seed, plan.means, output, fail_if_worse_than)
        return
    page = None
    if plan.page:
        page, analysis = html_report(
            answers,
            loaded.datasets,
            loaded.source,
            loaded.prefix,
            compare=True,
            baseline=base,
            alpha=alpha,
            n_resamples=resamples,
            seed=seed,
            native=native,
            max_flips=max_flips,
        )
        assert analysis.comparisons is not None  # two setups or more
        run = analysis.comparisons
    else:
        run = lib.compare_setups(
            answers.answers, base or lib.best_setup(answers.answers), None, alpha, resamples, seed
        )
    gates: list[tuple[str, str | None]] = []
    if fail_if_worse_than:
        from kag.grading.gates import regression_verdict

        gates.append((f"--fail-if-worse-than {fail_if_worse_than}", regression_verdict(run)))
    text = plan.draw(CompareOutput(run, answers, loaded.prefix, loaded.extracted, gates, page))
    emit_report(text, output)
    _tell_significant(run.comparisons, run.baseline, alpha, "Holm")
    _ci(loaded, run, gates, summary_file, annotations)
    verdict = next((v for _, v in gates if v is not None), None)
    if verdict is not None:
        raise GateFailed(verdict)


def _ci(
    loaded: _Loaded,
    run: Any,
    gates: list[tuple[str, str | None]],
    summary_file: Path | None,
    annotations: str | None,
    notes: Sequence[str] = (),
    lost: Sequence[tuple[str, str, str]] = (),
) -> None:
    from kag.render.github import summary_markdown

    against = bool(lost) or run.baseline not in loaded.answers.setups
    ci_outputs(
        summary_file,
        annotations,
        lambda: summary_markdown(
            "kag stats compare",
            loaded.answers.summary,
            run,
            against=against,
            lost=lost,
            gates=gates,
            notes=notes,
        ),
        gates,
        notes,
    )


def _against(
    loaded: _Loaded,
    path: Path,
    gate: bool,
    alpha: float,
    resamples: int,
    seed: int,
    plan: ComparePlanLine,
    output: Path | None,
    summary_file: Path | None,
    annotations: str | None,
) -> None:
    """`compare --against PREVIOUS.jsonl`: each setup now against its earlier run."""
    from kag.console import warn
    from kag.grading.compare.against import compare_against, read_previous, regressed_verdict

    previous = read_previous(path)
    result = compare_against(
        loaded.answers.answers,
        previous,
        extracted=loaded.extracted,
        alpha=alpha,
        n_resamples=resamples,
        seed=seed,
    )
    notes = result.notes()
    for note in notes:
        warn(note)
    gates: list[tuple[str, str | None]] = [("--fail-if-regressed", regressed_verdict(result))] if gate else []
    assert plan.against is not None  # refused before any grading
    text = plan.against(AgainstOutput(result, path, loaded.answers, loaded.prefix, loaded.extracted, gates))
    emit_report(text, output)
    _tell_significant(result.run.comparisons, result.run.baseline, alpha, "Holm")
    _ci(loaded, result.run, gates, summary_file, annotations, notes, result.lost)
    verdict = next((v for _, v in gates if v is not None), None)
    if verdict is not None:
        raise GateFailed(verdict)


def _compare_means(
    answers: AnswerSet,
    base: str | None,
    alpha: float,
    resamples: int,
    seed: int,
    draw: Callable[[MeanComparisonRun], str],
    output: Path | None,
    gate: str | None,
) -> None:
    """`compare --epochs all`: per-question mean scores, paired bootstrap, Holm."""
    from kag.grading.compare.epoch_means import best_mean_setup, compare_means, mean_regression_verdict

    assert answers.means is not None
    try:
        baseline = base or best_mean_setup(answers.means.means)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    run = compare_means(answers.means, baseline, alpha, resamples, seed)
    emit_report(draw(run), output)
    _tell_significant(run.comparisons, run.baseline, alpha, "Holm, paired bootstrap on mean scores")
    if gate:
        verdict = mean_regression_verdict(run)
        if verdict is not None:
            raise GateFailed(verdict)


def flips(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(metavar="A", help="First setup.", autocompletion=complete_setups)],
    b: Annotated[str, typer.Argument(metavar="B", help="Second setup.", autocompletion=complete_setups)],
    datasets: DatasetsOpt = None,
    results: TreesOpt = None,
    prefix: PrefixOpt = None,
    dataset: DatasetOpt = None,
    max_chars: Annotated[
        int,
        typer.Option(min=0, metavar="N", help="Cut responses to N characters, 0 = whole (JSON: never cut)."),
    ] = 120,
    output_format: TableFormatOpt = None,
    output: OutputOpt = None,
    extract: ExtractOpt = None,
    grade: GradeOpt = None,
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    """The questions A gets right and B does not, and the reverse, with both responses."""
    import glob

    from kag.console import info
    from kag.grading import compare as lib
    from kag.render.compare import FLIP_RENDERERS

    fmt = pick_format(ctx, output_format, TableFormat)
    if a == b:
        raise UsageError(f"A and B are the same setup ({a})")
    loaded = _load(
        ctx, datasets, results, prefix, [glob.escape(a), glob.escape(b)], dataset, (a, b), extract, grade
    )
    report = lib.flips(loaded.answers.answers, a, b)
    emit_report(FLIP_RENDERERS[fmt](report, max_chars), output)
    info(
        f"{len(report.a_only)} question(s) only {a} got right, {len(report.b_only)} only {b}, "
        f"out of {report.paired} paired."
    )


def impact(
    ctx: typer.Context,
    kag_setups: Annotated[
        list[str] | None,
        typer.Argument(metavar="SETUP", help="KAG setups [default: every setup that retrieves]."),
    ] = None,
    datasets: DatasetsOpt = None,
    results: TreesOpt = None,
    prefix: PrefixOpt = None,
    dataset: DatasetOpt = None,
    native: Annotated[
        str | None,
        typer.Option(metavar="SETUP", help="Setup without retrieval to compare with [default: same model]."),
    ] = None,
    output_format: TableFormatOpt = None,
    output: OutputOpt = None,
    extract: ExtractOpt = None,
    grade: GradeOpt = None,
    evidence_match: EvidenceMatchOpt = None,
    node_name: NodeNameOpt = None,
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    """Accuracy of KAG setups by retrieved-subgraph size; the questions retrieval helped or hurt."""
    from kag.console import warn
    from kag.grading import compare as lib
    from kag.render.compare import IMPACT_RENDERERS

    fmt = pick_format(ctx, output_format, TableFormat)
    loaded = _load(
        ctx,
        datasets,
        results,
        prefix,
        None,
        dataset,
        (*(kag_setups or ()), native),
        extract,
        grade,
        evidence=True,
        evidence_match=evidence_match,
        node_name=node_name,
    )
    answers = loaded.answers
    lib.check_retrieves(answers.profiles, kag_setups or ())
    plans = lib.plan_impacts(answers.profiles, kag_setups or None, native)
    if not plans:
        raise UsageError(
            "no setup retrieves (no retrieval stats, no config.augmented_generation); "
            f"setups: {', '.join(answers.setups)}"
        )
    for plan in plans:
        if plan.note:
            warn(plan.note)
    impacts = [lib.retrieval_impact(answers.answers, p.setup, p.native) for p in plans]
    emit_report(IMPACT_RENDERERS[fmt](impacts), output)


def register(stats_app: typer.Typer) -> None:
    kag_command(
        stats_app, "compare", "Each setup against a baseline: McNemar, bootstrap CI, Holm.", COMPARE_EXAMPLES
    )(compare)
    kag_command(
        stats_app, "flips", "Questions A gets right and B does not, and the reverse.", FLIPS_EXAMPLES
    )(flips)
    kag_command(stats_app, "impact", "Accuracy of KAG setups by retrieved-subgraph size.", IMPACT_EXAMPLES)(
        impact
    )
