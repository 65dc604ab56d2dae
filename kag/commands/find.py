"""`kag stats find` (not yet available)."""

from __future__ import annotations

import typer

from kag.errors import UsageError


def register(stats_app: typer.Typer) -> None:
    @stats_app.command("find", help="(not yet available)")
    def find() -> None:
        raise UsageError("'kag stats find' is not yet available")
