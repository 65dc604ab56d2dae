"""`kag graph import`: build a graph database (Ladybug file or Neo4j server) from CSV files."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kag.commands._help import kag_command
from kag.commands._options import ConfigOpt, Quiet, Verbose
from kag.commands._values import KagSubGroup

if TYPE_CHECKING:
    from kag.retrieval.importer import ImportReport


IMPORT_EXAMPLES = """Examples:

\b
  cd examples/graph && kag graph import --database medgraph --nodes nodes.csv \\
      --relationships relationships.csv
  kag graph import -c config.toml --database medgraph --nodes drugs.csv --nodes diseases.csv \\
      --relationships treats.csv --replace
"""


def graph(verbose: Verbose = 0, quiet: Quiet = 0) -> None:
    """Knowledge graphs for KAG setups: an embedded LadybugDB file, or a Neo4j server."""


def import_(
    database: Annotated[
        str,
        typer.Option(
            "--database",
            metavar="NAME",
            help='The [databases.NAME] table (type = "Ladybug" or "Neo4j") to build.',
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
        typer.Option("--embed-property", metavar="PROPERTY", help="Node property whose text is embedded."),
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
        str,
        typer.Option(
            "--index",
            metavar="PROPERTY",
            help="Node property that stores the embedding (Neo4j: also the vector index's name).",
        ),
    ] = "embedding",
    replace: Annotated[
        bool,
        typer.Option(
            "--replace", help="Rebuild the database if it exists (Neo4j: delete everything in it first)."
        ),
    ] = False,
    verbose: Verbose = 0,
    quiet: Quiet = 0,
) -> None:
    """Load nodes and relationships from CSV files (Neo4j admin-import style) into the
    Ladybug or Neo4j database of the configuration, with an embedding per node."""
    from kag.generation.graph_import import import_from_config
    from kag.render.graph import render_import_report
    from kag.render.progress import IMPORT_STAGES, stage_progress

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

    with stage_progress(IMPORT_STAGES) as progress:
        report = run(progress)
    sys.stdout.write(render_import_report(report, index))


def register(app: typer.Typer) -> None:
    graph_app = typer.Typer(
        cls=KagSubGroup,
        name="graph",
        help="Knowledge graphs for KAG setups: an embedded LadybugDB file, or a Neo4j server.",
        short_help="Knowledge graphs from CSV files: LadybugDB or Neo4j.",
        no_args_is_help=True,
        rich_markup_mode=None,
    )
    graph_app.callback(epilog=IMPORT_EXAMPLES)(graph)
    kag_command(
        graph_app,
        "import",
        "Load CSV nodes and relationships into a Ladybug or Neo4j database.",
        IMPORT_EXAMPLES,
    )(import_)
    app.add_typer(graph_app)
