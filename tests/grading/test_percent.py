"""kag.grading.percent: the one percentage formatting of reports and messages."""

from __future__ import annotations

import pytest

from kag.grading.percent import pct


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((0.5,), {}, "50.00"),
        ((1 / 3,), {}, "33.33"),
        ((2 / 3, 1), {}, "66.7"),
        ((0.0,), {}, "0.00"),
        ((1.0, 0), {}, "100"),
        ((-0.2,), {"signed": True}, "-20.00"),
        ((0.2,), {"signed": True}, "+20.00"),
        ((0.0, 1), {"signed": True}, "+0.0"),
        ((0.125,), {"unit": "%"}, "12.50%"),
        ((None,), {}, "-"),
        ((None,), {"unit": "%", "missing": "no scored file"}, "no scored file"),
    ],
)
def test_a_fraction_as_a_percentage(args: tuple, kwargs: dict, expected: str) -> None:
    assert pct(*args, **kwargs) == expected


def test_it_equals_the_value_times_100_formatted() -> None:
    for value in (0.1, 0.7, 0.015, 0.999949, 123.456):
        assert pct(value, 3) == f"{value * 100.0:.3f}"
