"""The grid's choices (kag/view/choices.py): the parameters as links and the page's menus
send them, names checked against the index's with the valid ones named, the state links
keep, a question's neighbours, the option an answer names."""

from __future__ import annotations

import pytest

from kag.errors import UsageError
from kag.view.choices import (
    BadChoice,
    UnknownChoice,
    link_state,
    neighbours,
    option_key,
    read_choice,
    read_flip,
    read_page,
)

SETUPS = ("kag", "native", "a,b")


@pytest.mark.parametrize(
    ("values", "pair"),
    [
        (["kag,native"], ("kag", "native")),  # the overview's links and the API's form
        (["native", "kag"], ("native", "kag")),  # the page's two menus
        (["a,b", "kag"], ("a,b", "kag")),  # a name with a comma, from the menus
        (["a,b,kag"], ("a,b", "kag")),  # ... or written out: one split has a setup each side
        ([], None),
        (["", ""], None),  # both menus left at "-"
    ],
)
def test_a_flip_is_read_from_either_form(values: list[str], pair: tuple[str, str] | None) -> None:
    assert read_flip(values, SETUPS) == pair


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["kag", ""], "flip: choose two setups, the one right and the one not"),
        (["kag"], "flip: choose two setups, the one right and the one not"),
        (["kag", "kag"], "flip: choose two different setups (got 'kag' twice)"),
        (["kag,nativ"], "flip=nativ: no setup has that name (setups: kag, native, a,b)"),
        (["kag", "nope"], "flip=nope: no setup has that name (setups: kag, native, a,b)"),
        (["kag native"], "flip=A,B takes two graded setup names (got 'kag native')"),
    ],
)
def test_a_bad_flip_says_what_to_choose(values: list[str], message: str) -> None:
    with pytest.raises(BadChoice) as caught:
        read_flip(values, SETUPS)
    assert str(caught.value) == message and caught.value.key == "flip"


def test_an_unknown_name_is_refused_naming_the_valid_ones() -> None:
    with pytest.raises(UnknownChoice) as caught:
        read_choice({"dataset": ["nope"]}, SETUPS, ("med", "pubmedqa"))
    assert str(caught.value) == "dataset=nope: no dataset has that name (datasets: med, pubmedqa)"
    assert (caught.value.key, caught.value.value, caught.value.names) == (
        "dataset",
        "nope",
        ("med", "pubmedqa"),
    )
    with pytest.raises(
        UnknownChoice, match=r"^setup=nativ: no setup has that name \(setups: kag, native, a,b\)$"
    ):
        read_choice({"setup": ["kag", "nativ"]}, SETUPS, ("med",))
    with pytest.raises(UnknownChoice, match=r"outcomes: ok, wrong, err\)$"):
        read_choice({"outcome": ["right"]}, SETUPS, ("med",))
    with pytest.raises(UnknownChoice, match=r"sorts: question, -question, correct"):
        read_choice({"sort": ["name"]}, SETUPS, ("med",))
    many = [f"s{i:02d}" for i in range(25)]
    with pytest.raises(UnknownChoice, match=r"s19, … \(5 more\)\)$"):
        read_choice({"setup": ["x"]}, many, ())


def test_a_choice_is_the_same_whatever_form_it_came_in() -> None:
    one = read_choice({"flip": ["kag,native"], "disagree": ["yes"]}, SETUPS, ("med",))
    other = read_choice({"flip": ["kag", "native"], "disagree": ["1"], "dataset": [""]}, SETUPS, ("med",))
    assert one == other and one.setups == SETUPS and one.sort == "question"


def test_the_page_is_a_positive_number() -> None:
    assert read_page({}) == 1 and read_page({"page": ["3"]}) == 3
    for bad in ("-1", "x", "1" * 10):
        with pytest.raises(UsageError, match="page must be a positive whole number"):
            read_page({"page": [bad]})


def test_links_keep_the_state_and_nothing_else() -> None:
    params = {
        "flip": ["kag,native"],
        "setup": ["native", "kag"],
        "page": ["2"],
        "q": [""],
        "disagree": ["0"],
        "baseline": ["kag"],
        "other": ["x"],
    }
    assert link_state(params) == {"setup": ["native", "kag"], "flip": ["kag,native"], "baseline": "kag"}
    choice = read_choice(params, SETUPS, ("med",))
    assert link_state(params, choice)["flip"] == ["kag", "native"]  # the form any name survives
    assert "flip" not in link_state(params, drop="flip")


def test_a_question_knows_its_neighbours_in_the_list() -> None:
    keys = [("d", f"q{i}") for i in range(5)]
    assert neighbours(keys, ("d", "q0"), 2) == {
        "position": 1,
        "total": 5,
        "previous": None,
        "next": ("d", "q1"),
        "page": 1,
    }
    middle = neighbours(keys, ("d", "q2"), 2)
    assert (middle["previous"], middle["next"], middle["page"]) == (("d", "q1"), ("d", "q3"), 2)
    last = neighbours(keys, ("d", "q4"), 2)
    assert (last["position"], last["next"], last["page"]) == (5, None, 3)
    assert neighbours(keys, ("d", "nope"), 2)["position"] is None


@pytest.mark.parametrize(
    ("answer", "key"),
    [
        ("B", "B"),
        (" b\n", "B"),  # the strict rule: trimmed, ASCII case aside
        ("The answer is B.", None),
        ("\u212a", None),  # the Kelvin sign is not K
        ("", None),
        (None, None),
    ],
)
def test_the_option_an_answer_names(answer: str | None, key: str | None) -> None:
    assert option_key(answer, {"A": "yes", "B": "no", "K": "potassium"}) == key
    assert option_key(answer, None) is None


def test_retrieval_reached_or_missed_is_read_checked_and_kept_in_links() -> None:
    assert read_choice({"retrieval": ["missed"]}, SETUPS, ("med",)).retrieval == "missed"
    assert read_choice({"retrieval": [""]}, SETUPS, ("med",)).retrieval is None  # the menu's "any"
    with pytest.raises(UnknownChoice) as bad:
        read_choice({"retrieval": ["found"]}, SETUPS, ("med",))
    assert bad.value.key == "retrieval" and bad.value.names == ("reached", "missed")
    assert "retrieval=found" in str(bad.value) and "reached, missed" in str(bad.value)
    assert link_state({"retrieval": ["reached"], "page": ["2"]}) == {"retrieval": "reached"}
