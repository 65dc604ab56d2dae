"""`kag irt2` (not yet available)."""

from __future__ import annotations

import typer

from kag.errors import UsageError


def register(app: typer.Typer) -> None:
    @app.command("irt2", help="(not yet available)")
    def irt2() -> None:
        raise UsageError("'kag irt2' is not yet available")
