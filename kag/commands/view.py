"""`kag view`: a local web viewer of a result tree (or of several labelled trees)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from kag.commands._help import kag_command
from kag.commands._options import ConfigOpt, DatasetsOpt, ExtractOpt, PrefixOpt, Quiet, TreesOpt, Verbose
from kag.commands._trees import parse_trees
from kag.console import info, warn
from kag.errors import UsageError

EXAMPLES = """Examples:

\b
  kag view -d datasets.json -r results
  kag view -d datasets.json -r base=run1 -r kag=run2 --port 8765 --no-open
  kag view -d datasets.json -r results --export snapshot --flip kag,native
  kag view -d datasets.json -r results --judge-provider openai --judge-model gpt-4o-mini
  kag view -d datasets.json -r results --judge-provider openai --judge-model gpt-4o-mini \\
    --judge-model gpt-4.1-mini --labels labels.csv
"""


def register(app: typer.Typer) -> None:
    kag_command(app, "view", "Browse a result tree in a local web page.", EXAMPLES)(view)


def view(
    datasets: DatasetsOpt = None,
    results: TreesOpt = None,
    prefix: PrefixOpt = None,
    extract: ExtractOpt = None,
    host: Annotated[
        str, typer.Option("--host", metavar="HOST", help="Address to listen on (loopback unless told).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, metavar="N", help="Port (0: a free one).")
    ] = 0,
    no_open: Annotated[bool, typer.Option("--no-open", help="Do not open a browser.")] = False,
    index: Annotated[
        Path | None,
        typer.Option(
            "--index",
            metavar="FILE",
            help="Index file [default: in the user cache folder]",
            show_default=False,
        ),
    ] = None,
    export: Annotated[
        Path | None,
        typer.Option(
            "--export",
            metavar="DIR",
            help="Write a static snapshot (HTML, JSON) to DIR, no server.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, metavar="N", help="Most question pages --export writes.")
    ] = 2000,
    dataset: Annotated[
        str | None,
        typer.Option("--dataset", metavar="NAME", help="--export: only this dataset.", show_default=False),
    ] = None,
    setup: Annotated[
        list[str] | None,
        typer.Option(
            "--setup",
            metavar="SETUP",
            help="--export: the grid's columns (repeatable).",
            show_default=False,
        ),
    ] = None,
    outcome: Annotated[
        str | None,
        typer.Option("--outcome", metavar="OUTCOME", help="--export: ok, wrong or err.", show_default=False),
    ] = None,
    retrieval: Annotated[
        str | None,
        typer.Option(
            "--retrieval",
            metavar="REACHED",
            help="--export: reached or missed (a column's retrieval and the gold evidence).",
            show_default=False,
        ),
    ] = None,
    flip: Annotated[
        str | None,
        typer.Option("--flip", metavar="A,B", help="--export: A right and B not.", show_default=False),
    ] = None,
    disagree: Annotated[
        bool, typer.Option("--disagree", help="--export: the questions whose answers differ.")
    ] = False,
    search: Annotated[
        str | None,
        typer.Option(
            "--search",
            metavar="REGEX",
            help="--export: the questions where a response matches (as `kag stats find`).",
            show_default=False,
        ),
    ] = None,
    judge_provider: Annotated[
        list[str] | None,
        typer.Option(
            "--judge-provider",
            metavar="NAME",
            help="Show the cached verdicts of `kag stats judge -p NAME` (with --judge-model; repeatable);"
            " the overview counts the first judge's.",
            show_default=False,
        ),
    ] = None,
    judge_model: Annotated[
        list[str] | None,
        typer.Option(
            "--judge-model", metavar="MODEL", help="The judging model (repeatable).", show_default=False
        ),
    ] = None,
    judge_repeats: Annotated[
        int,
        typer.Option("--judge-repeats", min=1, metavar="N", help="As `kag stats judge --repeats N`."),
    ] = 1,
    judge_temperature: Annotated[
        float,
        typer.Option(
            "--judge-temperature", min=0.0, metavar="T", help="As `kag stats judge --temperature T`."
        ),
    ] = 0.0,
    judge_prompt: Annotated[
        Path | None,
        typer.Option(
            "--judge-prompt",
            metavar="FILE",
            help="The judge's prompt file, as given to `kag stats judge --prompt`.",
            show_default=False,
        ),
    ] = None,
    labels: Annotated[
        Path | None,
        typer.Option(
            "--labels",
            metavar="FILE",
            help="Human labels (CSV or JSON Lines, as `kag stats judge --labels`) shown by the verdicts.",
            show_default=False,
        ),
    ] = None,
    config: ConfigOpt = Path("config.toml"),
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            metavar="FILE",
            help="Token prices per model (TOML, as `kag stats --prices`): the overview's cost column.",
            show_default=False,
        ),
    ] = None,
    _verbose: Verbose = 0,
    _quiet: Quiet = 0,
) -> None:
    """Index the result files, then serve the overview, the paired question grid and each
    question's detail at http://HOST:PORT/ until Ctrl-C.

    Exit codes: 0 success (Ctrl-C included), 2 bad usage or input.
    """
    if datasets is None:
        raise UsageError("missing option '--datasets' / '-d': the datasets file with the answers")
    from kag.datasets import load_datasets
    from kag.grading.mcq.extracted import compile_spec
    from kag.view.index import Index, Tree, default_index_path
    from kag.view.query import View
    from kag.view.verdict_rows import judge_fingerprint

    if extract is not None:
        compile_spec(extract)
    source = parse_trees(results)
    trees = [Tree(t.label or "", os.path.realpath(t.root)) for t in source]
    judged = bool(judge_provider or judge_model or judge_prompt is not None)
    # The pages read a question's texts from the file when they show it; a judge's verdicts
    # are found by them, in every file the index reads.
    loaded = load_datasets(datasets, texts=judged)
    verdicts = None
    if judged:
        if not judge_provider or not judge_model:
            raise UsageError("--judge-provider and --judge-model name the judge together")
        if len(judge_provider) > 1 and len(judge_model) > 1 and len(judge_provider) != len(judge_model):
            raise UsageError(
                f"{len(judge_provider)} --judge-provider and {len(judge_model)} --judge-model: give one "
                "--judge-provider for every --judge-model, or a single one of either"
            )
        from kag.grading.judge_stats import pair_judges
        from kag.view.verdicts import VerdictReader

        first, *others = pair_judges(judge_provider, judge_model)
        verdicts = VerdictReader(
            first.provider,
            first.model,
            config,
            judge_prompt,
            others=others,
            repeats=judge_repeats,
            temperature=judge_temperature,
        )
    judge = verdicts.key if verdicts is not None else None
    place = index
    if place is None:
        by = f"|{judge_fingerprint(judge)}" if judge is not None else ""  # each judge its own index
        place = default_index_path(
            [f"{t.label}={t.root}" for t in trees],
            f"{os.path.realpath(datasets)}|{prefix or ''}|{extract}{by}",
        )
    idx = Index(place, loaded, trees, prefix or "", extract, on_wait=info, judge=judge)
    human = None
    if labels is not None:
        from kag.grading.judge_labels import read_labels

        human = read_labels(labels)
    from kag.gcpause import collector_paused
    from kag.pricing import load_prices

    # The collector stays paused from the build to the address: it would otherwise walk
    # every object of the first snapshot, twice, before the address is printed.
    with collector_paused():
        data = View(
            idx,
            verdicts,
            load_prices(prices) if prices is not None else None,
            scan=True,
            labels=human,
            meanwhile=_load_pages,
        )
        stats = data.stats
        assert stats is not None
        for message in stats.warnings:
            warn(message)
        info(f"index {place}: {stats.seen} file(s), {stats.read} read, {stats.removed} gone")
        title = ", ".join(f"{t.label}={t.root}" if t.label else t.root for t in trees)
        from kag.render.view import ViewApp
        from kag.view.server import Server, is_loopback

        if export is None:
            if not is_loopback(host):
                warn(f"--host {host} is not a loopback address: anyone who can reach it can read the results")
            server = Server(ViewApp(data, title), host, port, on_error=lambda exc: warn(f"view: {exc!r}"))
            typer.echo(server.url)
            sys.stdout.flush()
    if export is not None:
        from kag.render.view import export as export_site

        params: dict[str, list[str]] = {}
        chosen = (
            ("dataset", dataset),
            ("outcome", outcome),
            ("retrieval", retrieval),
            ("flip", flip),
            ("disagree", "1" if disagree else None),
            ("q", search),
        )
        for key, value in chosen:
            if value is not None:
                params[key] = [value]
        if setup:
            params["setup"] = list(setup)
        data.search_seconds = float("inf")  # an export waits for its search: Ctrl-C stops it
        count = export_site(data, export, title, params, limit)
        typer.echo(f"{export}: {count} question page(s); open {export / 'index.html'}")
        return
    if not no_open and sys.stdout.isatty():
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        idx.close()


def _load_pages() -> None:
    """Import the pages' modules (their templates, the comparisons, the server): done while
    the index's workers read the files, rather than before they start or after the last."""
    import kag.render.view
    import kag.view.search  # noqa: F401
