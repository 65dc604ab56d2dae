"""`kag benchmark` (not yet available)."""

from __future__ import annotations

import typer

from kag.errors import UsageError


def register(app: typer.Typer) -> None:
    @app.command("benchmark", help="(not yet available)")
    def benchmark() -> None:
        raise UsageError("'kag benchmark' is not yet available")
