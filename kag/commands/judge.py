"""`kag stats judge`: wiring only; the work is in :mod:`kag.grading.judge`, the report in
:mod:`kag.render.judge`. ``-d``, ``-r``, ``--prefix``, ``--setup`` and ``--format`` are
accepted before or after the sub-command name; after wins."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kag.commands._before import pick_datasets, pick_format, pick_option
from kag.commands._globs import check_globs, tree_place
from kag.commands._help import kag_command
from kag.commands._options import (
    BackoffOpt,
    ConfigOpt,
    DatasetsOpt,
    PrefixOpt,
    Quiet,
    ResultsOpt,
    RetriesOpt,
    SetupOpt,
    TextOrJsonFormatOpt,
    TimeoutOpt,
    Verbose,
)
from kag.commands._trees import one_tree
from kag.console import info, warn
from kag.errors import InputError, UsageError
from kag.render.formats import JudgeFormat

EXAMPLES = """Examples:

\b
  kag stats judge -d datasets.json -r results -p openai -m gpt-4o-mini
  kag stats judge -d datasets.json -r results -p ollama -m llama3 --mcq --format json
"""


def judge(
    ctx: typer.Context,
    provider: Annotated[
        str, typer.Option("--provider", "-p", metavar="NAME", help="Provider of the judging model.")
    ],
    model: Annotated[str, typer.Option("--model", "-m", metavar="MODEL", help="The judging model.")],
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
            help="Judge prompt template (uses {{QUESTION}}, {{REFERENCE}}, {{RESPONSE}}).",
        ),
    ] = None,
    mcq: Annotated[bool, typer.Option("--mcq", help="Judge MCQ answers too, not only open ones.")] = False,
    format: TextOrJsonFormatOpt = None,
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
    from kag.grading.judge import (
        Judge,
        JudgeOptions,
        VerdictCache,
        collect_items,
        run_judge,
        summarize_verdicts,
    )
    from kag.grading.judge_prompt import load_judge_prompt
    from kag.render.judge import RENDERERS, JudgeReport, no_verdict_note
    from kag.render.progress import run_progress

    fmt = pick_format(ctx, format, JudgeFormat)
    datasets_path = pick_datasets(ctx, datasets)
    root = one_tree(pick_option(ctx, "--results", results, None), "kag stats judge")
    pfx = pick_option(ctx, "--prefix", prefix, "")
    globs = tuple(pick_option(ctx, "--setup", setup, ()))
    cfg = load_config(config)
    template = load_judge_prompt(prompt)
    answer_key = load_datasets(datasets_path)
    collected = collect_items(answer_key, root, pfx, globs, with_mcq=mcq)
    check_globs("--setup", globs, "setup", tree_place(root, ()), list(collected.setups_in_tree))
    for message in collected.unreadable:
        warn(f"{message}: not judged")
    if not collected.items:
        kinds = "open or MCQ answer" if mcq else "open answer (--mcq judges MCQ answers too)"
        raise UsageError(f"{root}: no {kinds} to judge (prefix {pfx!r}, setups {list(globs) or 'all'})")
    who = Judge(provider, model)
    options = JudgeOptions(
        parallel=parallel, timeout=timeout, retry=RetryPolicy(retries=retries, backoff=backoff)
    )
    cache = VerdictCache(root, who)
    total = len(collected.items)
    with run_progress("judge", total) as reporter:
        run = run_judge(cfg, who, template, collected.items, cache, options, reporter)
    info(
        f"kag: judge: {total} answer(s): {run.cached} verdict(s) from the cache, "
        f"{run.requests} request(s) sent, {run.failures} failed; {run.seconds:.1f}s"
    )
    if run.requests and run.failures == run.requests:
        raise InputError(f"no judge request got an answer ({run.failures} failed); see the warnings above")
    summaries = summarize_verdicts(run.judged)
    note = no_verdict_note(summaries)
    if note is not None:
        warn(note)
    sys.stdout.write(RENDERERS[fmt](JudgeReport(who, template.sha256, summaries)))
    sys.stdout.flush()


def register(stats_app: typer.Typer) -> None:
    kag_command(stats_app, "judge", "Ask a model whether each answer matches the reference.", EXAMPLES)(judge)
