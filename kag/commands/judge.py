"""`kag stats judge`: wiring only; the work is in :mod:`kag.grading.judge`, the report in
:mod:`kag.render.judge`. ``-d``, ``-r``, ``--prefix``, ``--setup`` and ``--format`` are
accepted before or after the sub-command name; after wins."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kag.commands._before import pick_datasets, pick_format, pick_option
from kag.commands._globs import check_globs, tree_place
from kag.commands._help import kag_command
from kag.commands._options import (
    BackoffOpt,
    ConfigOpt,
    DatasetsOpt,
    JudgeFormatOpt,
    PrefixOpt,
    Quiet,
    ResultsOpt,
    RetriesOpt,
    SetupOpt,
    TimeoutOpt,
    Verbose,
)
from kag.commands._trees import one_tree
from kag.console import info, warn
from kag.errors import InputError, UsageError
from kag.render.formats import JudgeFormat

if TYPE_CHECKING:
    from kag.datasets import Datasets
    from kag.generation.config import Config
    from kag.grading.judge import Judge, JudgeOptions
    from kag.render.judge import JudgeReport

EXAMPLES = """Examples:

\b
  kag stats judge -d datasets.json -r results -p openai -m gpt-4o-mini
  kag stats judge -d datasets.json -r results -p ollama -m llama3 --mcq --format json
  kag stats judge -p openai -m gpt-4o-mini -m gpt-4.1-mini --labels labels.csv --repeats 3
  kag stats judge -p openai -m gpt-4o-mini --pairwise graphrag lightrag
"""


def judge(
    ctx: typer.Context,
    provider: Annotated[
        list[str],
        typer.Option("--provider", "-p", metavar="NAME", help="Provider of the judging model (repeatable)."),
    ],
    model: Annotated[
        list[str], typer.Option("--model", "-m", metavar="MODEL", help="The judging model (repeatable).")
    ],
    config: ConfigOpt = Path("config.toml"),
    datasets: DatasetsOpt = None,
    results: ResultsOpt = None,
    prefix: PrefixOpt = None,
    setup: SetupOpt = None,
    prompt: Annotated[
        Path | None,
        typer.Option(
            "--prompt",
            metavar="FILE",
            help="Judge prompt template (uses {{QUESTION}}, {{REFERENCE}}, {{RESPONSE}}; with"
            " --pairwise {{QUESTION}}, {{ANSWER_1}}, {{ANSWER_2}}, {{CRITERION}}, {{DEFINITION}}).",
        ),
    ] = None,
    mcq: Annotated[bool, typer.Option("--mcq", help="Judge MCQ answers too, not only open ones.")] = False,
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels", metavar="FILE", help="Human labels (CSV or JSON Lines) to measure the judge by."
        ),
    ] = None,
    repeats: Annotated[
        int, typer.Option("--repeats", min=1, metavar="N", help="Ask each judge N times (self-consistency).")
    ] = 1,
    temperature: Annotated[
        float, typer.Option("--temperature", min=0.0, metavar="T", help="The judge's temperature.")
    ] = 0.0,
    pairwise: Annotated[
        tuple[str, str] | None,
        typer.Option("--pairwise", metavar="A B", help="Which of two setups answers better, per criterion."),
    ] = None,
    criteria: Annotated[
        str | None,
        typer.Option("--criteria", metavar="LIST", help="Criteria of --pairwise, comma-separated."),
    ] = None,
    format: JudgeFormatOpt = None,
    parallel: Annotated[
        int, typer.Option("--parallel", "-j", min=1, metavar="N", help="Requests in flight.")
    ] = 1,
    retries: RetriesOpt = 3,
    timeout: TimeoutOpt = 300.0,
    backoff: BackoffOpt = 1.0,
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    """Ask a model whether each graded answer matches the reference; verdicts per setup.

    Verdicts are cached in .kag-judge/ at the root of the result tree, so a second run
    asks nothing again.
    """
    from kag.datasets import load_datasets
    from kag.generation.config import load_config
    from kag.generation.retry import RetryPolicy
    from kag.grading.judge import JudgeOptions, VerdictCache, collect_items, run_judge, summarize_verdicts
    from kag.grading.judge_labels import read_labels
    from kag.grading.judge_prompt import load_judge_prompt
    from kag.grading.judge_stats import judge_statistics, pair_judges, shared_models
    from kag.render.judge import RENDERERS, JudgeReport, no_verdict_note
    from kag.render.judge_stats import shared_model_warning
    from kag.render.progress import run_progress

    fmt = pick_format(ctx, format, JudgeFormat)
    datasets_path = pick_datasets(ctx, datasets)
    root = one_tree(pick_option(ctx, "--results", results, None), "kag stats judge")
    pfx = pick_option(ctx, "--prefix", prefix, "")
    globs = tuple(pick_option(ctx, "--setup", setup, ()))
    judges = pair_judges(provider, model)
    cfg = load_config(config)
    options = JudgeOptions(
        parallel=parallel,
        timeout=timeout,
        retry=RetryPolicy(retries=retries, backoff=backoff),
        temperature=temperature,
    )
    if pairwise is not None:
        if labels is not None or len(judges) > 1 or repeats > 1:
            raise UsageError("--pairwise takes one judge, without --labels or --repeats")
        report = _pairwise(
            cfg, judges[0], load_datasets(datasets_path), root, pfx, pairwise, criteria, prompt, options
        )
        sys.stdout.write(RENDERERS[fmt](report))
        sys.stdout.flush()
        return
    if criteria is not None:
        raise UsageError("--criteria goes with --pairwise A B")
    template = load_judge_prompt(prompt)
    human = read_labels(labels) if labels is not None else None
    answer_key = load_datasets(datasets_path)
    collected = collect_items(answer_key, root, pfx, globs, with_mcq=mcq)
    check_globs("--setup", globs, "setup", tree_place(root, ()), list(collected.setups_in_tree))
    for message in collected.unreadable:
        warn(f"{message}: not judged")
    if not collected.items:
        kinds = "open or MCQ answer" if mcq else "open answer (--mcq judges MCQ answers too)"
        raise UsageError(f"{root}: no {kinds} to judge (prefix {pfx!r}, setups {list(globs) or 'all'})")
    for line in shared_model_warning(shared_models(collected.items, judges)):
        warn(line)
    total = len(collected.items)
    several = len(judges) > 1 or repeats > 1
    runs = []
    for who in judges:
        mine = []
        for repeat in range(repeats):
            with run_progress("judge", total) as reporter:
                run = run_judge(
                    cfg, who, template, collected.items, VerdictCache(root, who), options, reporter, repeat
                )
            mine.append(run)
            named = (
                f" {who.provider}/{who.model}" + (f" (repeat {repeat + 1})" if repeat else "")
                if several
                else ""
            )
            info(
                f"kag: judge{named}: {total} answer(s): {run.cached} verdict(s) from the cache, "
                f"{run.requests} request(s) sent, {run.failures} failed; {run.seconds:.1f}s"
            )
            if run.requests and run.failures == run.requests:
                raise InputError(
                    f"no judge request got an answer ({run.failures} failed); see the warnings above"
                )
        runs.append(mine)
    statistics = judge_statistics(collected.items, judges, runs, human)
    if statistics.unmatched_labels:
        warn(f"{labels}: {statistics.unmatched_labels} label(s) of no judged answer: left out")
    summaries = summarize_verdicts(statistics.combined)
    note = no_verdict_note(summaries)
    if note is not None:
        warn(note)
    sys.stdout.write(RENDERERS[fmt](JudgeReport(judges[0], template.sha256, summaries, statistics)))
    sys.stdout.flush()


def _pairwise(
    cfg: Config,
    who: Judge,
    answer_key: Datasets,
    root: Path,
    prefix: str,
    setups: tuple[str, str],
    criteria: str | None,
    prompt: Path | None,
    options: JudgeOptions,
) -> JudgeReport:
    from kag.grading.judge import VerdictCache
    from kag.grading.judge_prompt import load_judge_prompt
    from kag.grading.pairwise import (
        DEFAULT_CRITERIA,
        DEFAULT_PAIRWISE_PROMPT,
        PairwiseReport,
        check_criteria,
        compile_pairwise_prompt,
        summarize_pairwise,
    )
    from kag.grading.pairwise_run import collect_pairs, run_pairwise
    from kag.render.judge import JudgeReport
    from kag.render.progress import run_progress

    names = (
        check_criteria(criteria.split(","), prompt is not None) if criteria is not None else DEFAULT_CRITERIA
    )
    template = load_judge_prompt(prompt, DEFAULT_PAIRWISE_PROMPT, compile_pairwise_prompt)
    a, b = setups
    pairs = collect_pairs(answer_key, root, a, b, prefix)
    if not pairs:
        raise UsageError(f"{root}: no question answered by both {a!r} and {b!r} (prefix {prefix!r})")
    with run_progress("judge", len(pairs) * len(names) * 2) as reporter:
        run = run_pairwise(cfg, who, template, pairs, names, VerdictCache(root, who), options, reporter)
    info(
        f"kag: judge: {len(pairs)} pair(s) x {len(names)} criteria x 2 orders: {run.cached} verdict(s) "
        f"from the cache, {run.requests} request(s) sent, {run.failures} failed; {run.seconds:.1f}s"
    )
    if run.requests and run.failures == run.requests:
        raise InputError(f"no judge request got an answer ({run.failures} failed); see the warnings above")
    summary = PairwiseReport(a, b, len(pairs), summarize_pairwise(run.outcomes, names))
    return JudgeReport(who, template.sha256, (), pairwise=summary)


def register(stats_app: typer.Typer) -> None:
    kag_command(stats_app, "judge", "Ask a model whether each answer matches the reference.", EXAMPLES)(judge)
