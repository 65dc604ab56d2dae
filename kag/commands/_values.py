"""typer's conversion of option and argument values, without pydantic for the plain ones.

typer converts every value (defaults and unset options included) through a pydantic
``TypeAdapter`` built on first use; importing pydantic and building the adapters is about
a third of the start-up of ``kag stats find``. The values kag's parameters take (strings,
plain decimals within their bounds, paths, lists of them, enum choices) are converted here
into what the adapter returns; any other value, and every value that fails, goes to
typer's adapter, so that each error message stays typer's own.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

import typer
from typer._click.core import Context, Parameter
from typer._coercion import RuntimeParam, build_runtime_param
from typer._param_types import coerce_cli_choice, coerce_cli_path
from typer.core import TyperGroup, _TyperParameter

# The decimals converted here, as pydantic converts them; others go to the adapter.
_INT = re.compile(r"-?(0|[1-9][0-9]{0,17})")
_FLOAT = re.compile(r"-?(0|[1-9][0-9]{0,14})(\.[0-9]{1,15})?")
_ADAPTER = object()  # "only typer's adapter can say"


class _Deferred(RuntimeParam):
    """A parameter's conversion that builds typer's adapter only for a value it needs."""

    def _coerce_value(self, value: Any, param: _TyperParameter, ctx: Any) -> Any:
        converted = plain_value(self.annotation, self.parameter_info, value, param, ctx)
        if converted is not _ADAPTER:
            return converted
        param._runtime_param = build_runtime_param(param.type_descriptor)
        return param._runtime_param._coerce_value(value, param=param, ctx=ctx)


def plain_value(annotation: Any, info: Any, value: Any, param: Any = None, ctx: Any = None) -> Any:
    """What typer's adapter for ``annotation`` turns ``value`` into, or ``_ADAPTER`` when
    only the adapter can tell (a parser, a number out of its bounds, bounds on another type,
    another type, a value it may reject)."""
    bounded = info.min is not None or info.max is not None
    if (
        info.parser is not None
        or info.clamp
        or (bounded and annotation is not int and annotation is not float)
    ):
        return _ADAPTER
    kind = type(value)
    if get_origin(annotation) is list:
        if kind is not list and kind is not tuple:
            return _ADAPTER
        (item,) = get_args(annotation)
        items = [plain_value(item, info, v, param, ctx) for v in value]
        return _ADAPTER if any(v is _ADAPTER for v in items) else items
    if annotation is str:
        return value if kind is str else _ADAPTER
    if annotation is int or annotation is float:
        pattern = _INT if annotation is int else _FLOAT
        if kind is not annotation and not (kind is str and pattern.fullmatch(value)):
            return _ADAPTER
        number = value if kind is annotation else annotation(value)
        # Within its bounds (the adapter's ge and le); else the adapter words the refusal.
        if (info.min is not None and number < info.min) or (info.max is not None and number > info.max):
            return _ADAPTER
        return number
    try:
        if (
            annotation is Path
            and info.path_type is None
            and ((kind is str and value) or isinstance(value, Path))
        ):
            return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
        if isinstance(annotation, type) and issubclass(annotation, Enum):
            return coerce_cli_choice(
                value, choices=list(annotation), case_sensitive=info.case_sensitive, ctx=ctx
            )
    except (ValueError, TypeError, typer.BadParameter):  # rejected: the adapter words the message
        return _ADAPTER
    return _ADAPTER


class DeferredValues:
    """Mixin for a typer command or group: its parameters (``--help`` included) convert
    their values through :class:`_Deferred`."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        params: list[Parameter] = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if isinstance(param, _TyperParameter) and param._runtime_param is None:
                described = param.type_descriptor
                param._runtime_param = _Deferred(
                    parameter_info=described.parameter_info, annotation=described.annotation
                )
        return params


class KagSubGroup(DeferredValues, TyperGroup):
    """A group of sub-commands (``kag stats``, ``kag graph``, ``kag datasets``)."""
