"""extract: letter extraction on table-driven replies, regex extraction, and --extract parsing."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from kag.errors import KagError, UsageError
from kag.grading.extract import (
    ExtractKind,
    ExtractSpec,
    RegexTimeout,
    extract_letter,
    extract_regex,
    parse_extract_spec,
    strip_think,
)
from kag.grading.mcq import is_correct
from tests.conftest import TEST_DATA

CASES = json.loads((TEST_DATA / "extract" / "letter_cases.json").read_text("utf-8"))["cases"]
# Replies in the styles models write, each with the key a reader takes from it (null: none).
REPLIES = [
    json.loads(line) for line in (TEST_DATA / "extract" / "replies.jsonl").read_text("utf-8").splitlines()
]


@pytest.mark.parametrize(("response", "keys", "expected", "why"), CASES, ids=[case[3] for case in CASES])
def test_letter_table(response: str, keys: list[str], expected: str | None, why: str) -> None:
    assert extract_letter(response, keys) == expected


@pytest.mark.parametrize("case", REPLIES, ids=[f"{n}-{case['style']}" for n, case in enumerate(REPLIES)])
def test_letter_replies(case: dict[str, Any]) -> None:
    # With "options" the reply is read with the options' texts, as a datasets file gives them.
    assert extract_letter(case["reply"], case.get("options", case["keys"])) == case["expected"], case["reply"]


def test_letter_corpus_is_large_and_varied() -> None:
    assert len(REPLIES) >= 300
    assert sum(case["expected"] is None for case in REPLIES) >= 60
    assert len({case["style"] for case in REPLIES}) >= 15


def _calls(function: Callable[[], object]) -> int:
    """How many Python and C functions ``function`` calls: an operation count, not a time."""
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        function()
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.parametrize(
    "unit",
    ["B ", "The answer is B. ", "A or B, ", "not C; ", "<think>B ", "vitamin C i.e. ", "b" + " " * 99],
)
def test_letter_work_grows_linearly(unit: str) -> None:
    small, large = unit * 200, unit * 2000
    keys = ["A", "B", "C", "D"]
    assert (
        _calls(lambda: extract_letter(large, keys)) <= 12 * _calls(lambda: extract_letter(small, keys)) + 100
    )


def test_letter_reads_a_bounded_window() -> None:
    # Whatever lies beyond the window around a key does not change how it is read.
    filler = "x " * 5000
    assert extract_letter("B" + " " * 60_000 + "x", ["A", "B"]) == "B"
    assert extract_letter(filler + "The answer is not B." + filler + "C", ["A", "B", "C"]) == "C"
    assert extract_letter("I pick A" + " " * 100 + "; option B is a distractor.", ["A", "B"]) == "A"


def test_real_replies_extract_to_their_strict_grade(med_kag: Path) -> None:
    """On the real tree every reply is a bare key: extraction must agree with the strict grade."""
    datasets = orjson.loads((med_kag / "datasets" / "mirage.json").read_bytes())
    seen = 0
    for path in sorted((med_kag / "results").glob("*/*/*.json")):
        dataset, question = path.parent.parent.name, path.parent.name
        data = orjson.loads(path.read_bytes())
        if "ok" not in data:
            continue
        output = datasets[dataset][question]["output"]
        response = data["ok"]["result"]
        extracted = extract_letter(response, output["options"])
        assert extracted == response.strip()
        assert is_correct(extracted, output["answer"]) == is_correct(response, output["answer"])
        seen += 1
    assert seen == 199


def test_strip_think() -> None:
    assert strip_think("<think>a</think>B<think>c</think>").split() == ["B"]
    assert strip_think("<think>unfinished").strip() == ""
    assert strip_think("reasoning</think>C").strip() == "C"
    assert strip_think("no tags") == "no tags"


@pytest.mark.parametrize(
    ("reply", "kept"),
    [
        ("<thinking>A?</thinking>B", "B"),  # as the triplets parser removes them
        ("<reasoning>A?</reasoning> B", "B"),
        ("<Thinking>A</Thinking><think>C</think>D", "D"),
        ('<think type="x">A</think>B', "B"),  # attributes in the opening tag
        ("<thinking>A</think>B", "B"),  # a closing tag of another name: its opening was in the prompt
        ("<think>a <think>b</think> c", "c"),  # nearest closing tag
        ("x</thinking>y</think>z", "z"),  # after the last closing tag
        ("B<reasoning>A?", "B"),  # cut off before its end
        ("<think" * 5 + "B", "<think<think<think<think<thinkB"),  # not a tag
        ("<think>" * 3 + "B", ""),
    ],
)
def test_strip_think_reasoning_blocks(reply: str, kept: str) -> None:
    assert strip_think(reply).strip() == kept


@pytest.mark.parametrize(
    "unit", ["<think", "<think>", "</think>", "<thinking><reasoning>x", "<think>a</think>"]
)
def test_strip_think_work_grows_linearly(unit: str) -> None:
    small, large = unit * 500, unit * 5000
    assert _calls(lambda: strip_think(large)) <= 12 * _calls(lambda: strip_think(small)) + 100


def test_keys_as_spelled_in_the_dataset() -> None:
    assert extract_letter("answer: B", ["a", "b"]) == "b"
    assert extract_letter("The answer is Yes.", ["Yes", "No"]) == "Yes"
    assert extract_letter("B", []) is None
    assert extract_letter("B", ["", " "]) is None


def test_longer_key_is_not_read_as_a_shorter_one() -> None:
    assert extract_letter("The answer is AB.", ["A", "AB"]) == "AB"
    assert extract_letter("The answer is A.", ["A", "AB"]) == "A"


key_strategy = st.sampled_from(["A", "B", "C", "D", "yes", "no", "maybe"])
decoration = st.sampled_from(
    ["{}", "({})", "**{}**", "{}.", " {} ", "[{}]", "Answer: {}", "The answer is {}."]
)


@given(key_strategy, decoration, st.booleans())
def test_decorated_key_is_extracted(key: str, template: str, upper: bool) -> None:
    keys = ["A", "B", "C", "D", "yes", "no", "maybe"]
    written = key.upper() if upper else key.lower()
    assert extract_letter(template.format(written), keys) == key


@given(st.text(max_size=80))
def test_result_is_a_key_or_none(response: str) -> None:
    keys = ["A", "B", "C", "D"]
    extracted = extract_letter(response, keys)
    assert extracted is None or extracted in keys
    if extracted is not None:
        assert extract_letter(extracted, keys) == extracted


# ---------------------------------------------------------------- regex


@pytest.mark.parametrize(
    ("pattern", "response", "expected"),
    [
        (r"ANSWER:\s*(\w)", "Reasoning.\nANSWER: C\nANSWER: D", "C"),  # first match
        (r"[A-D](?=\)$)", "Pick B)", "B"),  # no group: the whole match
        (r"(?i)answer is (\w+)", "The Answer is Maybe.", "Maybe"),
        (r"(x)|(y)", "y", "y"),  # the first group that took part (lm-evaluation-harness' RegexFilter)
        (r"(x)|y", "y", None),  # no group took part in the first match
        (r"answer is (.*)", "The answer is  B  ", "B"),  # white space around it stripped
        (r"answer is(\s*)(\w?)", "answer is  ", None),  # only white space captured: nothing
        (r"\s+B\s+", "A  B  C", "B"),  # the whole match, stripped
        (r"ANSWER: (\w)", "no marker", None),
        (r"(\p{Lu})\)", "é) É)", "É"),  # regex syntax: Unicode properties
    ],
)
def test_regex(pattern: str, response: str, expected: str | None) -> None:
    assert extract_regex(response, regex.compile(pattern)) == expected


def test_regex_source_is_compiled() -> None:
    assert extract_regex("Final: B", r"Final: (\w)") == "B"
    with pytest.raises(UsageError, match=r"--extract regex:\(: invalid pattern"):
        extract_regex("x", "(")


def test_regex_timeout_is_a_user_error() -> None:
    # (?:a|aa)+$ against 60 a's and a b backtracks through ~fib(60) paths: it never ends.
    with pytest.raises(
        RegexTimeout, match=r"--extract regex:\(\?:a\|aa\)\+\$: the search took more than 0.05 s"
    ):
        extract_regex("a" * 60 + "b", regex.compile(r"(?:a|aa)+$"), timeout=0.05)
    assert issubclass(RegexTimeout, KagError)


# ---------------------------------------------------------------- --extract values


def test_parse_letter() -> None:
    spec = parse_extract_spec("letter")
    assert spec == ExtractSpec(ExtractKind.LETTER)
    assert spec.text == "letter"
    assert spec.extract("<think>A?</think>The answer is (c).", ["A", "B", "C"]) == "C"


def test_parse_regex() -> None:
    spec = parse_extract_spec(r"regex:Final: (\w+)")
    assert spec.kind is ExtractKind.REGEX
    assert spec.text == r"regex:Final: (\w+)"
    # reasoning is removed before the search, as for letter
    assert spec.extract("<think>Final: A</think> Final: B", ["A", "B"]) == "B"
    assert parse_extract_spec("regex:a:b").extract("xa:by", []) == "a:b"  # only the first colon splits


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", r"--extract: expected 'letter' or 'regex:PATTERN' \(got ''\)"),
        ("Letter", r"--extract: expected 'letter' or 'regex:PATTERN' \(got 'Letter'\)"),
        ("regex", r"--extract: expected 'letter' or 'regex:PATTERN' \(got 'regex'\)"),
        ("re:(a)", r"--extract: expected 'letter' or 'regex:PATTERN'"),
        ("regex:", r"--extract regex:PATTERN: the pattern is empty"),
        ("regex:(a", r"--extract regex:\(a: invalid pattern: missing \) at position 2"),
        ("regex:[z-a]", r"--extract regex:\[z-a\]: invalid pattern: bad character range"),
        # patterns whose compilation or search would exhaust memory are refused before either
        (
            "regex:(?:a{1000000}){1000000}",
            r": counted repeats may ask for at most 100,000 repetitions in all$",
        ),
        ("regex:a{4294967294}", r"at most 100,000 repetitions"),
        ("regex:(?:(?:a{100}){100}){11}", r"at most 100,000 repetitions"),
        ("regex:(x|(?:a{1000}){101})", r"at most 100,000 repetitions"),
        ("regex:((?R)|a)", r"--extract regex:\(\(\?R\)\|a\): recursive patterns"),
        ("regex:(a(?1)?)", r"recursive patterns"),
        ("regex:(?P<x>a(?&x)?)", r"recursive patterns"),
        ("regex:(?P<x>a(?P>x)?)", r"recursive patterns"),
    ],
)
def test_parse_errors_name_the_option(value: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_extract_spec(value)


@pytest.mark.parametrize(
    "pattern",
    [r"(?:a{100}){1000}", r"a{100000}", r"[{]{5}", r"\{1000000\}", r"[a{]1000000}", r"a{,5}", r"x{}",
     r"(?:[^)]{300}){300}", r"(?i-s:x){3}", r"\(?R\)", r"[(?R)]"],
)  # fmt: skip
def test_bounded_patterns_compile(pattern: str) -> None:
    assert parse_extract_spec(f"regex:{pattern}").pattern is not None


# ---------------------------------------------------------------- options named by their text

TEXTS = {"A": "Hypokalemia", "B": "Hyperkalemia", "C": "Vitamin C deficiency", "D": "The liver"}


@pytest.mark.parametrize(
    "unit", ["hyperkalemia ", "not hyperkalemia. ", "the liver, ", "vitamin C deficiency? "]
)
def test_option_text_work_grows_linearly(unit: str) -> None:
    small, large = unit * 200, unit * 2000
    extract_letter(unit, TEXTS)  # the texts' patterns compiled once, outside the count
    assert (
        _calls(lambda: extract_letter(large, TEXTS))
        <= 12 * _calls(lambda: extract_letter(small, TEXTS)) + 100
    )


@given(st.text(max_size=80), st.sampled_from(["", "hyperkalemia", "Vitamin C", "liver", "B"]))
def test_with_texts_the_result_is_a_key_or_none_and_a_key_wins(response: str, tail: str) -> None:
    extracted = extract_letter(response + " " + tail, TEXTS)
    assert extracted is None or extracted in TEXTS
    # a reply naming a key is read as without the texts: the texts only fill in when no key is named
    keyed = extract_letter(response + " " + tail, list(TEXTS))
    if keyed is not None:
        assert extracted == keyed


@pytest.mark.parametrize(
    ("reply", "texts", "expected"),
    [
        ("Hyperkalemia", {"A": "Hyperkalemia", "B": "hyperkalemia"}, None),  # two options share the text
        ("C", {"A": "C", "B": "D", "C": "E"}, "C"),  # a text that is a key is never read: the key is
        ("e", {"A": "C", "B": "D", "C": "E"}, None),
        ("Straße", {"A": "STRASSE", "B": "Weg"}, "A"),  # case folded in full
    ],
)
def test_option_texts_that_cannot_name_an_option(
    reply: str, texts: dict[str, str], expected: str | None
) -> None:
    assert extract_letter(reply, texts) == expected
