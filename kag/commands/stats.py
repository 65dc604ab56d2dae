"""`kag stats` (not yet available)."""

from __future__ import annotations

import typer

from kag.errors import UsageError

stats_app = typer.Typer(invoke_without_command=True, help="(not yet available)")


@stats_app.callback()
def stats() -> None:
    raise UsageError("'kag stats' is not yet available")


def register(app: typer.Typer, find: object) -> None:
    find.register(stats_app)  # type: ignore[attr-defined]
    app.add_typer(stats_app, name="stats")
