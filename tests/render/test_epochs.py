"""The epochs section of the text report: which k it shows."""

from __future__ import annotations

import pytest

from kag.render.columns import shown_ks


@pytest.mark.parametrize(
    ("n", "ks"),
    [
        (1, [1]),
        (2, [1, 2]),
        (3, [1, 2, 3]),
        (8, [1, 2, 4, 8]),
        (10, [1, 2, 4, 8, 10]),
        (100, [1, 2, 4, 8, 16, 32, 64, 100]),
    ],
)
def test_powers_of_two_and_n(n: int, ks: list[int]) -> None:
    assert shown_ks(n) == ks
