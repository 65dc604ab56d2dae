"""The conversion of parameter values without pydantic: each value it converts comes out
as typer's pydantic adapter returns it, and every other value is left to the adapter."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer._coercion import build_runtime_param, resolve_type_descriptor
from typer.models import ArgumentInfo, OptionInfo

from kag.commands._values import _ADAPTER, _FLOAT, _INT, plain_value


class Color(str, Enum):
    red = "red"
    dark_blue = "dark-blue"


def adapter_value(annotation: Any, info: Any, value: Any) -> Any:
    runtime = build_runtime_param(resolve_type_descriptor(annotation, info))
    return runtime._coerce_value(value, param=None, ctx=None)  # type: ignore[arg-type]


CONVERTED = [
    (str, OptionInfo(), "B|C"),
    (str, OptionInfo(), ""),
    (str, OptionInfo(), "a\udcffb"),  # an undecodable argv byte
    (int, OptionInfo(), 40),
    (int, OptionInfo(), "0"),
    (int, OptionInfo(), "-12"),
    (int, OptionInfo(), "123456789012345678"),
    (float, OptionInfo(), 1.0),
    (float, OptionInfo(), "2.5"),
    (float, OptionInfo(), "-0"),
    (float, OptionInfo(), "0.100000000000001"),
    (int, OptionInfo(min=1), "3"),  # within its bounds
    (int, OptionInfo(min=0, max=65535), "0"),
    (int, OptionInfo(min=0, max=65535), "65535"),
    (int, OptionInfo(min=0, max=65535), 8765),
    (int, OptionInfo(max=5), "-7"),
    (float, OptionInfo(max=1.0), "0.5"),
    (float, OptionInfo(min=0.0), "0"),
    (float, OptionInfo(min=0.0), "-0"),
    (float, OptionInfo(min=0.001), 0.001),
    (Path, OptionInfo(), "results"),
    (Path, OptionInfo(), Path("results")),
    (Path, ArgumentInfo(), "a/../b/"),
    (list[str], OptionInfo(), ("gpt-*", "kag")),
    (list[str], OptionInfo(), ()),
    (list[Path], OptionInfo(), ["x", "y/z"]),
    (Color, OptionInfo(), "red"),
    (Color, OptionInfo(), Color.dark_blue),
    (Color, OptionInfo(case_sensitive=False), "RED"),
]


@pytest.mark.parametrize(("annotation", "info", "value"), CONVERTED)
def test_converted_as_the_adapter_does(annotation: Any, info: Any, value: Any) -> None:
    expected = adapter_value(annotation, info, value)
    got = plain_value(annotation, info, value)
    assert got == expected
    assert type(got) is type(expected)
    if isinstance(got, list):
        assert [type(v) for v in got] == [type(v) for v in expected]


LEFT = [
    (int, OptionInfo(), "1_000"),  # pydantic's own rules for these
    (int, OptionInfo(), " 5"),
    (int, OptionInfo(), "+5"),
    (int, OptionInfo(), "007"),
    (int, OptionInfo(), "abc"),
    (int, OptionInfo(), True),
    (int, OptionInfo(min=1), "0"),  # out of its bounds: the adapter words the refusal
    (int, OptionInfo(min=0, max=65535), "65536"),
    (int, OptionInfo(min=0, max=65535), -1),
    (int, OptionInfo(min=0, max=65535), "99999999999999999999"),
    (float, OptionInfo(min=0.0), "-0.5"),
    (float, OptionInfo(max=1.0), 1.5),
    (int, OptionInfo(min=1, clamp=True), "3"),  # clamped: the adapter's own rule
    (int, OptionInfo(min=1), True),
    (float, OptionInfo(min=0.0), 1),
    (list[int], OptionInfo(min=1), ("1", "2")),  # bounds on another type
    (str, OptionInfo(min=1), "x"),
    (float, OptionInfo(), 1),
    (float, OptionInfo(), "1e3"),
    (float, OptionInfo(), "nan"),
    (float, OptionInfo(parser=float), "1.5"),
    (str, OptionInfo(), 5),
    (Path, OptionInfo(), ""),
    (Path, OptionInfo(exists=True), "/no/such/path/here"),
    (list[str], OptionInfo(), "one"),
    (list[int], OptionInfo(), ("1", "x")),
    (Color, OptionInfo(), "green"),
    (Color, OptionInfo(), "RED"),
    (bool, OptionInfo(), "yes"),
]


@pytest.mark.parametrize(("annotation", "info", "value"), LEFT)
def test_left_to_the_adapter(annotation: Any, info: Any, value: Any) -> None:
    assert plain_value(annotation, info, value) is _ADAPTER


@given(st.from_regex(_INT, fullmatch=True))
def test_every_plain_integer_as_the_adapter_reads_it(text: str) -> None:
    assert plain_value(int, OptionInfo(), text) == adapter_value(int, OptionInfo(), text)


@given(st.from_regex(_FLOAT, fullmatch=True))
def test_every_plain_decimal_as_the_adapter_reads_it(text: str) -> None:
    got = plain_value(float, OptionInfo(), text)
    assert type(got) is float
    assert got == adapter_value(float, OptionInfo(), text)


@given(st.integers(min_value=-(10**20), max_value=10**20), st.integers(-5, 5), st.integers(-5, 5))
def test_every_bounded_integer_as_the_adapter_reads_or_refuses_it(value: int, low: int, span: int) -> None:
    info = OptionInfo(min=low, max=low + span)
    got = plain_value(int, info, str(value))
    try:
        expected = adapter_value(int, info, str(value))
    except typer.BadParameter:
        assert got is _ADAPTER
    else:
        # A plain integer is read here (a longer one is the adapter's alone).
        assert got == expected if _INT.fullmatch(str(value)) else got is _ADAPTER


@given(st.from_regex(_FLOAT, fullmatch=True), st.floats(-3, 3, allow_nan=False))
def test_every_bounded_decimal_as_the_adapter_reads_or_refuses_it(text: str, low: float) -> None:
    info = OptionInfo(min=low, max=low + 1.5)
    got = plain_value(float, info, text)
    try:
        expected = adapter_value(float, info, text)
    except typer.BadParameter:
        assert got is _ADAPTER
    else:
        assert type(got) is float
        assert got == expected
