"""kag.grading.pairwise: combining both orders, the win rate, the sign test (against SciPy) and
Holm's adjustment, hand-computed, and the reply parser."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from kag.errors import UsageError
from kag.grading.pairwise import (
    Choice,
    Outcome,
    PairOutcome,
    check_criteria,
    combine,
    holm,
    parse_choice,
    position_consistent,
    sign_test,
    summarize_pairwise,
    win_rate,
)

F, S, T, U = Choice.FIRST, Choice.SECOND, Choice.TIE, Choice.UNUSABLE


@pytest.mark.parametrize(
    ("a_first", "b_first", "outcome", "consistent"),
    [
        (F, S, Outcome.WIN, True),  # A picked in both orders
        (S, F, Outcome.LOSS, True),
        (F, F, Outcome.TIE, False),  # the first shown, whichever it is: a flip
        (S, S, Outcome.TIE, False),
        (T, T, Outcome.TIE, True),
        (F, T, Outcome.TIE, False),
        (U, F, Outcome.UNUSABLE, None),
    ],
)
def test_combine_both_orders(
    a_first: Choice, b_first: Choice, outcome: Outcome, consistent: bool | None
) -> None:
    assert combine(a_first, b_first) is outcome
    assert position_consistent(a_first, b_first) is consistent


def test_parse_choice() -> None:
    assert parse_choice("ANSWER 2 is better") is S
    assert parse_choice("<think>ANSWER 1?</think> TIE") is T
    assert parse_choice("Answer 1") is U  # upper case only, as the prompt asks
    assert parse_choice("ANSWER 12") is U


def test_sign_test_equals_scipy() -> None:
    for wins, losses in [(7, 2), (0, 5), (3, 3), (36, 0), (1, 0)]:
        expected = binomtest(wins, wins + losses, 0.5).pvalue
        assert sign_test(wins, losses) == pytest.approx(expected, abs=1e-12)
    assert sign_test(0, 0) is None


def test_holm_hand_computed() -> None:
    # sorted: 0.01 (x3 = 0.03), 0.02 (x2 = 0.04), 0.04 (x1 = 0.04); None left alone.
    assert holm([0.04, None, 0.01, 0.02]) == pytest.approx([0.04, None, 0.03, 0.04])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1, kept monotone
    assert holm([]) == ()


def test_win_rate() -> None:
    rate = win_rate(2, 2, 0)  # scores 1, 1, .5, .5: mean .75, sd .25
    assert rate is not None and rate[0] == pytest.approx(0.75)
    assert rate[1] == pytest.approx(
        (0.75 - 1.959963984540054 * 0.25 / 2, 0.75 + 1.959963984540054 * 0.25 / 2)
    )
    assert win_rate(0, 0, 0) is None
    assert win_rate(1, 0, 0) == (1.0, None)
    all_wins = win_rate(5, 0, 0)
    assert all_wins is not None and all_wins[1] == (1.0, 1.0)


def test_summarize_pairwise_counts_and_rates() -> None:
    outcomes = [
        PairOutcome("d", "1", "x", F, S),  # win, consistent
        PairOutcome("d", "2", "x", F, F),  # flip: tie
        PairOutcome("d", "3", "x", U, F),  # unusable
        PairOutcome("d", "1", "y", S, F),  # loss
    ]
    x, y = summarize_pairwise(outcomes, ["x", "y"])
    assert (x.wins, x.ties, x.losses, x.unusable) == (1, 1, 0, 1)
    assert x.position_consistency == pytest.approx(0.5)
    assert x.first_position_rate == pytest.approx(4 / 5)  # F, S, F, F and the F of the unusable pair
    assert x.win_rate == pytest.approx(0.75) and x.p_value == pytest.approx(1.0)
    assert (y.wins, y.losses, y.p_holm) == (0, 1, pytest.approx(1.0))


def test_check_criteria() -> None:
    assert check_criteria(["Directness", " diversity", "directness"]) == ("directness", "diversity")
    with pytest.raises(UsageError, match="unknown criterion 'speed'"):
        check_criteria(["speed"])
    assert check_criteria(["speed"], custom_prompt=True) == ("speed",)
    with pytest.raises(UsageError, match="empty"):
        check_criteria(["x", ""], custom_prompt=True)
