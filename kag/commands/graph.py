"""`kag graph` (not yet available)."""

from __future__ import annotations

import typer

from kag.errors import UsageError


def register(app: typer.Typer) -> None:
    @app.command("graph", help="(not yet available)")
    def graph() -> None:
        raise UsageError("'kag graph' is not yet available")
