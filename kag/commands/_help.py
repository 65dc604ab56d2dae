"""The help layout of kag's commands: the one-line summary the command list shows, the
examples after the options, and arguments named as the options are (``REGEX``, ``PRED...``)."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand

from kag.commands._values import DeferredValues


def kag_command(app: typer.Typer, name: str, short_help: str, epilog: str, **settings: Any) -> Any:
    """``app.command`` for a kag command: the help layout of :class:`KagCommand`, the one-line
    summary the command list shows, and the examples printed after the options."""
    return app.command(name, cls=KagCommand, short_help=short_help, epilog=epilog, **settings)


class KagCommand(DeferredValues, TyperCommand):
    """A command whose help names its arguments as the options do (``REGEX``, ``PRED...``),
    without typer's ``{REGEX}`` in the usage line and ``<str>`` beside the name."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                pieces.append(_argument_name(param, usage=True))
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx: typer.Context, formatter: Any) -> None:  # type: ignore[override]
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((_argument_name(param), record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _argument_name(param: Any, usage: bool = False) -> str:
    name = str(param.metavar or param.name).upper()
    if usage and not param.required:
        name = f"[{name}]"
    return name + ("..." if param.nargs != 1 else "")
