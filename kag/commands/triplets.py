"""`kag triplets` (not yet available)."""

from __future__ import annotations

import typer

from kag.errors import UsageError


def register(app: typer.Typer) -> None:
    @app.command("triplets", help="(not yet available)")
    def triplets() -> None:
        raise UsageError("'kag triplets' is not yet available")
