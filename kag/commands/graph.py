"""`kag graph import`: build an embedded graph database (Ladybug) from CSV files."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Self

import typer

from kag.commands._common import ConfigOpt, KagCommand, Quiet, Verbose
from kag.console import info, stderr_console, verbosity

if TYPE_CHECKING:
    from kag.retrieval.importer import ImportReport


PROGRESS_INTERVAL = 10.0  # seconds between plain progress lines when stderr is not a terminal
STAGES = {"embeddings": "embedding nodes", "nodes": "writing nodes", "relationships": "writing relationships"}


class PlainProgress:
    """Progress as plain lines on stderr (logs, CI): one line per stage at most every
    ``interval`` seconds, and one when a stage completes."""

    def __init__(self, interval: float = PROGRESS_INTERVAL) -> None:
        self.interval = interval
        self.last = time.monotonic()

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - self.last >= self.interval:
            self.last = now
            percent = 100 * done // total if total else 100
            info(f"kag: progress: {STAGES.get(stage, stage)} {done}/{total} ({percent}%)")


class RichProgress:
    """A rich progress bar per stage on stderr (a terminal), removed when the import ends."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("{task.description:>21}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=stderr_console(),
            transient=True,
        )
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> Self:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.bar.add_task(STAGES.get(stage, stage), total=total)
        self.bar.update(self.tasks[stage], completed=done)


IMPORT_EXAMPLES = """Examples:

\b
  cd examples/graph && kag graph import --database medgraph --nodes nodes.csv \\
      --relationships relationships.csv
  kag graph import -c config.toml --database medgraph --nodes drugs.csv --nodes diseases.csv \\
      --relationships treats.csv --replace
"""


def register(app: typer.Typer) -> None:
    graph_app = typer.Typer(
        name="graph",
        help="Embedded knowledge graphs (LadybugDB) for KAG setups that run without a Neo4j server.",
        short_help="Embedded knowledge graphs (LadybugDB) without a Neo4j server.",
        no_args_is_help=True,
        rich_markup_mode=None,
    )

    @graph_app.callback(epilog=IMPORT_EXAMPLES)
    def graph(verbose: Verbose = 0, quiet: Quiet = 0) -> None:
        """Embedded knowledge graphs (LadybugDB) for KAG setups that run without a Neo4j server."""

    @graph_app.command(
        "import",
        cls=KagCommand,
        short_help="Load CSV nodes and relationships into a Ladybug database.",
        epilog=IMPORT_EXAMPLES,
    )
    def import_(
        database: Annotated[
            str,
            typer.Option(
                "--database", metavar="NAME", help='The [databases.NAME] table (type = "Ladybug") to build.'
            ),
        ],
        nodes: Annotated[
            list[Path],
            typer.Option(
                "--nodes",
                metavar="FILE",
                help="Node CSV file (header: id:ID, :LABEL, properties); repeatable.",
            ),
        ],
        relationships: Annotated[
            list[Path] | None,
            typer.Option(
                "--relationships",
                metavar="FILE",
                help="Relationship CSV file (header: :START_ID, :END_ID, :TYPE, properties); repeatable.",
            ),
        ] = None,
        config: ConfigOpt = Path("config.toml"),
        embed_property: Annotated[
            str,
            typer.Option(
                "--embed-property", metavar="PROPERTY", help="Node property whose text is embedded."
            ),
        ] = "name",
        provider: Annotated[
            str | None,
            typer.Option(
                "--provider",
                metavar="NAME",
                help="Embedding provider of the configuration (default: FastEmbed).",
            ),
        ] = None,
        model: Annotated[
            str | None,
            typer.Option(
                "--model",
                metavar="MODEL",
                help="Embedding model (default: the bundled MiniLM, or the provider's).",
            ),
        ] = None,
        index: Annotated[
            str, typer.Option("--index", metavar="PROPERTY", help="Node property that stores the embedding.")
        ] = "embedding",
        replace: Annotated[
            bool, typer.Option("--replace", help="Rebuild the database if it exists.")
        ] = False,
        verbose: Verbose = 0,
        quiet: Quiet = 0,
    ) -> None:
        """Load nodes and relationships from CSV files (Neo4j admin-import style) into the
        Ladybug database of the configuration, with an embedding per node."""
        from kag.generation.graph_import import import_from_config
        from kag.render.graph import render_import_report

        def run(progress: Callable[[str, int, int], None]) -> ImportReport:
            return import_from_config(
                config,
                database,
                [str(p) for p in nodes],
                [str(p) for p in relationships or []],
                embed_property=embed_property,
                provider=provider,
                model=model,
                index=index,
                replace=replace,
                progress=progress,
            )

        if sys.stderr.isatty() and verbosity() >= 0:
            with RichProgress() as bar:
                report = run(bar)
        else:
            report = run(PlainProgress(PROGRESS_INTERVAL))
        sys.stdout.write(render_import_report(report, index))

    app.add_typer(graph_app)
