"""`kag generation` and `kag benchmark`: parse flags, call ``kag.generation``, render."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kag.commands._globs import select_names
from kag.commands._help import kag_command
from kag.commands._options import (
    BackoffOpt,
    ConfigOpt,
    Quiet,
    RetriesOpt,
    RunDatasetOpt,
    RunDatasetsOpt,
    RunPrefixOpt,
    RunSetupOpt,
    TimeoutOpt,
    Verbose,
    split_list,
)
from kag.console import info, warn
from kag.errors import ExitCode, GateFailed, InputError, KagError, UsageError
from kag.render.formats import GenerationFormat
from kag.render.progress import PlainProgress, run_progress

if TYPE_CHECKING:
    from kag.generation.plan import Plan
    from kag.generation.run_record import RunRecorder
    from kag.generation.shard import Shard


class GenerationFailed(KagError):
    """The model call (or the retrieval) failed for `kag generation`."""

    exit_code = ExitCode.GATE


def _read_prompt(prompt: str) -> str:
    if prompt != "-":
        return prompt
    text = sys.stdin.read()
    if not text.strip():
        raise UsageError("PROMPT: '-' reads the prompt from standard input, which was empty")
    return text


GENERATION_EXAMPLES = """Examples:

\b
  kag generation -c examples/benchmark/config.toml -p local -m smollm2-135m -t 0 'What is 2 + 2?'
  echo 'What is 2 + 2?' | kag generation -p local -m smollm2-135m -t 0 --format json -
  cd examples/graph && kag generation -p local -m smollm2-135m -t 0 -r minilm-textual -d medgraph \\
      'Which drug treats gout?'
"""

BENCHMARK_EXAMPLES = """Examples:

\b
  kag benchmark -d datasets.json -b benchmark.toml -o results --dry-run
  kag benchmark -d datasets.json -b benchmark.toml -o results --parallel 4
  kag benchmark -d datasets.json -b benchmark.toml -o results --setup 'gpt-*' --skip gpt-4o
  kag benchmark -d datasets.json -b benchmark.toml -o results --continue --retry-errors
"""


def generation(
    prompt: Annotated[
        str,
        typer.Argument(metavar="PROMPT", help="The input (fills {{INPUT}}); '-' reads standard input."),
    ],
    provider: Annotated[
        str, typer.Option("--provider", "-p", metavar="NAME", help="Provider component name.")
    ],
    model: Annotated[str, typer.Option("--model", "-m", metavar="MODEL", help="Model name at the provider.")],
    temperature: Annotated[
        float, typer.Option("--temperature", "-t", metavar="TEMP", help="Sampling temperature.")
    ],
    config: ConfigOpt = Path("config.toml"),
    tokens: Annotated[
        int | None,
        typer.Option("--tokens", "-n", min=1, metavar="N", help="Ollama: num_ctx; OpenAI: max_tokens."),
    ] = None,
    system_prompt: Annotated[
        Path | None,
        typer.Option("--system-prompt", "-s", metavar="FILE", help="Prompt template file (uses {{INPUT}})."),
    ] = None,
    retriever: Annotated[
        str | None, typer.Option("--retriever", "-r", metavar="NAME", help="Retriever (KAG).")
    ] = None,
    database: Annotated[
        str | None, typer.Option("--database", "-d", metavar="NAME", help="Database (KAG).")
    ] = None,
    output_format: Annotated[
        GenerationFormat, typer.Option("--format", metavar="FORMAT", help="text or json.")
    ] = GenerationFormat.TEXT,
    retries: RetriesOpt = 3,
    timeout: TimeoutOpt = 300.0,
    backoff: BackoffOpt = 1.0,
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    """Run one prompt through one model (optionally with graph retrieval); print the answer."""
    from kag.generation.config import generation_setup, load_config
    from kag.generation.generator import RunOptions, generate_once
    from kag.generation.retry import RetryPolicy
    from kag.render.benchmark import GENERATION_RENDERERS
    from kag.results import ErrorResult

    if (retriever is None) != (database is None):
        raise UsageError("--retriever and --database go together")
    text = _read_prompt(prompt)
    cfg = load_config(config)
    setup = generation_setup(
        cfg, provider, model, temperature, tokens, system_prompt, retriever, database, text
    )
    options = RunOptions(parallel=1, timeout=timeout, retry=RetryPolicy(retries=retries, backoff=backoff))
    result, _ = generate_once(cfg, setup, text, options, PlainProgress.for_run("generation", 1))
    sys.stdout.write(GENERATION_RENDERERS[output_format](result))
    if isinstance(result, ErrorResult):
        raise GenerationFailed(result.error)


def benchmark(
    datasets: RunDatasetsOpt,
    benchmark_file: Annotated[
        Path, typer.Option("--benchmark", "-b", metavar="FILE", help="Benchmark file (TOML).")
    ],
    config: ConfigOpt = Path("config.toml"),
    parallel: Annotated[
        int, typer.Option("--parallel", "-p", min=1, metavar="N", help="Tasks in flight.")
    ] = 1,
    resume: Annotated[
        bool, typer.Option("--continue", help="Keep existing results; run missing (and unreadable) ones.")
    ] = False,
    output: Annotated[
        Path, typer.Option("--output", "-o", metavar="DIR", help="Root of the result tree.")
    ] = Path("."),
    prefix: RunPrefixOpt = "",
    skip: Annotated[
        list[str],
        typer.Option(
            "--skip",
            metavar="GLOB",
            help="Setups not to run (repeatable; commas separate several).",
            show_default=False,
        ),
    ] = [],  # noqa: B006
    retry_errors: Annotated[
        bool,
        typer.Option("--retry-errors", help="Re-run tasks whose result is an error (implies --continue)."),
    ] = False,
    rerun_stale: Annotated[
        bool,
        typer.Option("--rerun-stale", help="Re-run results whose setup changed (implies --continue)."),
    ] = False,
    setup: RunSetupOpt = [],  # noqa: B006
    dataset: RunDatasetOpt = [],  # noqa: B006
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, metavar="N", help="First N questions per dataset.")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; send nothing.")] = False,
    epochs: Annotated[
        int,
        typer.Option(
            "--epochs", min=1, metavar="N", help="Ask each question N times per setup (repeated samples)."
        ),
    ] = 1,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="K/N",
            help=(
                "Run only the K-th of N disjoint slices of the tasks (1 <= K <= N); 'auto': K and N"
                " of the Slurm array task or Kubernetes indexed Job this runs as."
            ),
        ),
    ] = None,
    retries: RetriesOpt = 3,
    timeout: TimeoutOpt = 300.0,
    backoff: BackoffOpt = 1.0,
    max_connection_failures: Annotated[
        int,
        typer.Option(
            "--max-connection-failures",
            min=0,
            metavar="N",
            help="Stop after this many tasks in a row could not reach their server (0: never).",
        ),
    ] = 20,
    fail_on_error: Annotated[
        bool, typer.Option("--fail-on-error", help="Exit 1 when any task ended in error.")
    ] = False,
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    """Run every setup of the benchmark file over the datasets; one result file per task."""
    from kag.datasets import load_datasets
    from kag.generation.config import load_benchmark, load_config
    from kag.generation.plan import PlanOptions, check_output, plan_benchmark
    from kag.generation.shard import check_other_slicings, lock_part
    from kag.results import lock_tree

    slice_ = _shard(shard)
    resume = resume or retry_errors or rerun_stale
    cfg = load_config(config)
    bench = load_benchmark(benchmark_file, cfg)
    data = load_datasets(datasets)
    plan_options = PlanOptions(
        output=output,
        prefix=prefix,
        resume=resume,
        retry_errors=retry_errors,
        rerun_stale=rerun_stale,
        setups=select_names("--setup", setup, list(bench.setups), "setup", f"in {benchmark_file}"),
        datasets=select_names("--dataset", dataset, list(data.datasets), "dataset", f"in {datasets}"),
        skip=select_names("--skip", split_list(skip), list(bench.setups), "setup", f"in {benchmark_file}"),
        limit=limit,
        inspect=dry_run,
        shard=slice_,
        epochs=epochs,
    )
    if dry_run:
        plan = plan_benchmark(cfg, bench, data, plan_options)
        from kag.render.benchmark import render_plan

        sys.stdout.write(render_plan(plan, resume) + "\n")
        return
    # Every check of the plan (names, lengths, links, prompts) before the output folder
    # is created; the files are read only under the lock, below.
    plan_benchmark(cfg, bench, data, dataclasses.replace(plan_options, resume=False, check_only=True))
    check_output(output)
    # One writer per shard: two runs of the same shard refuse each other, different
    # shards of one N share the tree (each writes only its own files), runs cut into other
    # slices refuse each other. The lock is taken before the plan reads the tree: a run
    # that waited for another plans from its results.
    lock = lock_tree(output, part=lock_part(slice_))
    try:
        check_other_slicings(output, slice_)
        plan = plan_benchmark(cfg, bench, data, plan_options)
        recorder = _start_record(
            output, cfg, bench, datasets, plan, data, limit, epochs, str(slice_) if slice_ else None
        )
        _run(
            plan,
            cfg,
            parallel,
            timeout,
            retries,
            backoff,
            max_connection_failures,
            fail_on_error,
            recorder,
        )
    finally:
        lock.release()


def register(app: typer.Typer) -> None:
    kag_command(
        app, "generation", "Run one prompt through one model; print the answer.", GENERATION_EXAMPLES
    )(generation)
    kag_command(
        app, "benchmark", "Run every setup of a benchmark file over the datasets.", BENCHMARK_EXAMPLES
    )(benchmark)


def _shard(text: str | None) -> Shard | None:
    """``--shard``: K/N as given, or with ``auto`` the scheduler's (said on stderr, so the
    job's log tells which slice it ran)."""
    from kag.generation.shard import AUTO, parse_shard, shard_from_environment

    if text is None:
        return None
    if text.strip() != AUTO:
        return parse_shard(text)
    shard, source = shard_from_environment(os.environ)
    info(f"kag: benchmark: --shard auto: shard {shard} ({source})")
    return shard


def _start_record(
    output: Path,
    cfg: Any,
    bench: Any,
    datasets: Path,
    plan: Plan,
    data: Any,
    limit: int | None,
    epochs: int,
    shard: str | None,
) -> RunRecorder:
    """Write the run record of a run that starts now (``<output>/.kag/runs/``)."""
    from kag.generation.run_record import RunRecorder, Selection

    setups = list(dict.fromkeys(r.setup for r in plan.rows))
    names = list(dict.fromkeys(r.dataset for r in plan.rows))
    counts = {n: min(len(data.datasets.get(n, {})), limit or len(data.datasets.get(n, {}))) for n in names}
    selection = Selection(setups, counts, epochs, shard)
    return RunRecorder.start(
        output, sys.argv, cfg, bench, datasets, selection, tasks=len(plan.tasks), kept=plan.skipped
    )


def _run(
    plan: Plan,
    cfg: Any,
    parallel: int,
    timeout: float,
    retries: int,
    backoff: float,
    max_connection_failures: int,
    fail_on_error: bool,
    recorder: RunRecorder,
) -> None:
    """The run itself, with the tree's lock held: clean-up, tasks, summary, exit code."""
    from kag.generation.generator import RunOptions
    from kag.generation.plan import remove_leftovers
    from kag.generation.retry import RetryPolicy
    from kag.generation.runner import run_benchmark

    removed = remove_leftovers(plan)
    if removed:
        info(f"kag: removed {removed} leftover .tmp file(s) of interrupted writes")
    if plan.stale_kept:
        warn(
            f"{plan.stale_kept} result file(s) are stale (their setup, prompt template or question "
            "changed); --rerun-stale re-runs them"
        )
    if plan.replaced_ok:
        warn(
            f"{plan.replaced_ok} ok result(s) in {plan.root} will be replaced by this run;"
            " --continue keeps them and runs only the missing ones"
        )
    if plan.kept_errors:
        warn(
            f"{plan.kept_errors} kept result file(s) are errors (graded as ERR);"
            " --retry-errors runs them again"
        )
    info(f"kag: benchmark: {len(plan.tasks)} task(s) to run ({plan.skipped} kept) with --parallel {parallel}")
    options = RunOptions(
        parallel=parallel,
        timeout=timeout,
        retry=RetryPolicy(retries=retries, backoff=backoff),
        max_connection_failures=max_connection_failures,
    )
    with run_progress("benchmark", len(plan.tasks)) as reporter:
        summary = run_benchmark(plan, cfg, options, reporter)
    problem = recorder.finish(summary)
    if problem is not None:
        warn(f"the run record was not completed: {problem}")
    from kag.render.benchmark import endpoint_lines, summary_line

    info(summary_line(summary))
    for line in endpoint_lines(summary):
        info(line)
    if summary.disk_full:
        raise InputError(
            f"disk full: {summary.not_run} task(s) not run; free space and run again with --continue"
        )
    if summary.fatal is not None:
        raise InputError(summary.fatal)
    if summary.interrupted:
        raise typer.Exit(int(ExitCode.INTERRUPTED))
    if summary.unreachable is not None:
        raise InputError(
            f"{summary.unreachable}: unreachable for {max_connection_failures} task(s) in a row;"
            f" {summary.not_run} task(s) not run: start the server and run again with --continue"
        )
    if summary.unreached:
        raise InputError(
            f"{summary.unreached} task(s) not run: their request reached no server (no result file"
            " written); start the server and run again with --continue"
        )
    if summary.no_answer:
        raise InputError(
            f"no task got an answer ({summary.errors + summary.kept} failed); see the warnings above"
        )
    if fail_on_error and summary.errors + summary.kept:
        raise GateFailed(f"{summary.errors + summary.kept} task(s) ended in error (--fail-on-error)")
