"""The prepared retrieval text finds exactly what the plain formulas find: names in the
normalized text, names of nodes among every name line, and the retrieval-quality record of
a file against the reading of every line, on the example tree and on randomized texts."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kag.datasets import load_datasets
from kag.grading import retrieval_scan, retrieval_text
from kag.grading.evidence import evidence_found
from kag.grading.retrieval_quality import (
    _STARTS_SOUGHT,
    QualityRecord,
    _exact,
    file_quality,
    parts_quality,
    similarity_for,
)
from kag.grading.retrieval_text import _RUN, _TRIES, RetrievalText
from kag.grading.triplets.normalize import contains_words, normalize_prompt, normalize_title
from kag.results.codec import parse_grading_fields
from kag.results.graph_text import formal_names, formal_parts

EXACT = similarity_for("exact")


@pytest.fixture(autouse=True, scope="module", params=["stringzilla", "standard library"])
def search_engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test of this module twice: with StringZilla lowering the text and finding first
    words (the ``fast`` extra), and with the standard library alone."""
    if request.param == "stringzilla":
        pytest.importorskip("stringzilla")
    saved = retrieval_text._stringzilla
    retrieval_text._stringzilla = retrieval_text._NOT_LOADED if request.param == "stringzilla" else None
    try:
        yield request.param
    finally:
        retrieval_text._stringzilla = saved


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "retrieval"

Triple = tuple[str, str, str]


def plain_contains(text: str, name: str) -> bool:
    return contains_words(normalize_prompt(text), normalize_title(name))


def plain_named(text: str, name: str, keys: tuple[str, ...]) -> bool:
    return normalize_title(name) in {normalize_title(n) for n in formal_names(text, keys).values() if n}


def plain_quality(
    entities: Sequence[str],
    triples: Sequence[Triple],
    text: str,
    correct: bool,
    keys: tuple[str, ...],
    relationships: int | None,
) -> QualityRecord | None:
    """`file_quality` in exact mode as it read every name line: the set of every node's
    normalized name decides whether the relationship lines are read."""
    if not (entities or triples):
        return None
    if relationships is not None:
        names = formal_names(text, keys)
        present = {normalize_title(n) for n in names.values() if n}
        if not any(normalize_title(t[0]) in present and normalize_title(t[2]) in present for t in triples):
            normalized = {node: normalize_title(name) if name else "" for node, name in names.items()}
            record = _exact([normalize_title(e) for e in entities], triples, normalized, [], None, correct)
            return replace(record, relationships=relationships)
    nodes, rels = formal_parts(text, keys)
    record = parts_quality(entities, triples, nodes, rels, None, correct, EXACT)
    if relationships is None:
        return record
    return replace(record, relationships=max(relationships, record.relationships_matched))


def check_text(
    text: str, entities: Sequence[str], triples: Sequence[Triple], keys: tuple[str, ...], count: int | None
) -> None:
    names = [*entities, *(t[0] for t in triples), *(t[2] for t in triples)]
    prepared = RetrievalText(text)
    assert evidence_found(names, prepared) == tuple(plain_contains(text, n) for n in names)
    assert [prepared.names_a_node(normalize_title(n), keys) for n in names] == [
        plain_named(text, n, keys) for n in names
    ]
    every = formal_names(text, keys)
    for n in names:
        expected = {
            node for node, value in every.items() if value and normalize_title(value) == normalize_title(n)
        }
        assert RetrievalText(text).nodes_named(normalize_title(n), keys) == expected
        assert prepared.nodes_named(normalize_title(n), keys) == expected  # after the first node found
    for c in (count, None):
        expected = plain_quality(entities, triples, text, True, keys, c)
        assert file_quality(entities, triples, text, None, True, EXACT, keys, c) == expected
        assert file_quality(entities, triples, RetrievalText(text), None, True, EXACT, keys, c) == expected
        # As the grader asks: the record first, then the names in the text, of one prepared text
        # (a name's one reading answers both).
        graded = RetrievalText(text)
        assert file_quality(entities, triples, graded, None, True, EXACT, keys, c) == expected
        assert evidence_found(names, graded) == tuple(plain_contains(text, n) for n in names)


def test_the_example_tree_gives_what_every_line_gives() -> None:
    datasets = load_datasets(EXAMPLE / "datasets.json")
    checked = 0
    for question in datasets.iter_questions():
        folder = EXAMPLE / "results" / question.dataset / question.id
        for path in sorted(folder.glob("*.json")):
            fields = parse_grading_fields(path.read_bytes(), retrieval_text=True)
            if fields.retrieval_text is None:
                continue
            count = fields.retrieval.relationships if fields.retrieval is not None else None
            check_text(fields.retrieval_text, question.evidence, question.evidence_triples, ("name",), count)
            checked += 1
    assert checked >= 6


# Pieces of FormalTriplet text with what makes a search go wrong: case, `_`, runs of spaces,
# rarer whitespace, punctuation around a name, a legal suffix, escapes, non-ASCII letters.
WORDS = ["vitamin", "Vitamin", "VITAMIN", "c", "C", "iron", "Iron", "deficiency", "vitamin_c", "vitaminc"]
SEPARATORS = [" ", "  ", "_", "\t", " \x1c", "\n"]
JUNK = ["", "", ".", " ", "(", '"', "!", ", Inc.", " ltd", "-", "+", ">", '(( "', "  \t.", "]->", "x]->("]
IDS = ["1", "2", "3", "10", "x y"]
KEYS = ["name", "label", "Name", "title"]

word = st.sampled_from(WORDS)
phrase = st.tuples(word, st.lists(st.tuples(st.sampled_from(SEPARATORS), word), max_size=2)).map(
    lambda p: p[0] + "".join(s + w for s, w in p[1])
)
value = st.tuples(st.sampled_from(JUNK), phrase, st.sampled_from(JUNK)).map("".join)
escaped = st.sampled_from(['"Vitamin \\"C\\""', '"\\u0049ron"', '"Vitamin\\tC"', '"Ir\\u00f6n"'])
raw = st.one_of(value.map(lambda v: f'"{v}"'), value, escaped)
ident = st.sampled_from(IDS)
property_line = st.tuples(ident, st.sampled_from(KEYS), raw).map(lambda p: f"({p[0]})-[{p[1]}]->({p[2]})")
relationship_line = st.tuples(
    ident, st.sampled_from(["CAUSED_BY", "DEFICIENCY_OF", "HAS_CONCEPT"]), ident
).map(lambda p: f"({p[0]})-[:{p[1]}]->({p[2]})")
other_line = st.sampled_from(
    ["", "Vitamin C is a vitamin.", "(1)-[name]->", "É vitamin c ﬁ", "x  vitamin   c"]
)
text = st.lists(st.one_of(property_line, relationship_line, other_line), max_size=10).map("\n".join)
gold = st.sampled_from(
    [
        "Vitamin C",
        "vitamin  c",
        "Iron",
        "Iron Inc.",
        "Vitamin_C",
        "C",
        "deficiency",
        "Iron deficiency",
        "!!",
        "Ｃ",
    ]
)
gold_triple = st.tuples(gold, st.sampled_from(["caused by", "DEFICIENCY_OF", "has concept"]), gold)
keys = st.sampled_from([("name",), ("name", "label"), ("label", "name"), ("title",), ("name]->(x", "name")])


@settings(max_examples=400)
@given(
    text, st.lists(gold, max_size=3), st.lists(gold_triple, max_size=2), keys, st.none() | st.integers(0, 5)
)
def test_randomized_texts_give_what_every_line_gives(
    text: str, entities: list[str], triples: list[Triple], keys: tuple[str, ...], count: int | None
) -> None:
    check_text(text, entities, triples, keys, count)


@pytest.mark.parametrize("hits", [_TRIES - 1, _TRIES + 5])
def test_a_name_occurring_very_often_is_still_found_exactly(hits: int) -> None:
    # Past _TRIES occurrences of the first word, the plain formulas answer.
    lines = [f'({i})-[name]->("vitamin d{i}")' for i in range(hits)]
    lines.append('(x)-[name]->("Vitamin  C.")')
    text = "\n".join(lines)
    check_text(text, ["Vitamin C", "Vitamin D"], [("Vitamin C", "r", "Vitamin C")], ("name",), 3)
    assert RetrievalText(text).contains("vitamin c")
    assert RetrievalText(text).names_a_node("vitamin c", ("name",))


def test_a_node_is_named_by_its_first_line_of_its_first_key() -> None:
    text = '(1)-[label]->("Iron")\n(1)-[name]->("Zinc")\n(2)-[name]->("Lead")\n(2)-[name]->("Iron")'
    prepared = RetrievalText(text)
    # Node 1 is named by `name` before `label`; node 2 by its first `name` line.
    assert not prepared.names_a_node("iron", ("name", "label"))
    assert prepared.names_a_node("zinc", ("name", "label"))
    assert RetrievalText(text).names_a_node("iron", ("label", "name"))
    assert not RetrievalText(text).names_a_node("lead", ("label",))


@pytest.mark.parametrize(
    "separator", [" ", "  ", "_", " _ ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "\n\n"]
)
def test_words_are_found_across_every_run_of_separators(separator: str) -> None:
    # Each run of whitespace or `_` is one space once normalized, inside a name line or not.
    for text in (f'(1)-[name]->("Vitamin{separator}C")', f"low vitamin{separator}c levels"):
        check_text(text, ["Vitamin C", "vitamin c levels"], [("Vitamin C", "r", "Vitamin C")], ("name",), 0)
        assert RetrievalText(text).contains("vitamin c")
    named = RetrievalText(f'(1)-[name]->("Vitamin{separator}C")').names_a_node("vitamin c", ("name",))
    assert named == ("\n" not in separator)  # a newline ends the name line


@pytest.mark.parametrize("separator", ["  ", "_", " _ ", "\t", "\x1c "])
def test_a_node_named_across_a_run_of_separators_is_found_whatever_its_last_letter(separator: str) -> None:
    # The name's end in the line is past the run, not one space past its first word.
    text = f'(1)-[name]->("Iron{separator}Deficiency")\n(2)-[:CAUSES]->(1)\n(2)-[name]->("Diet")'
    assert RetrievalText(text).names_a_node("iron deficiency", ("name",))
    triples = [("Diet", "causes", "Iron deficiency")]
    check_text(text, ["Iron Deficiency"], triples, ("name",), 1)
    record = file_quality(["Iron Deficiency"], triples, text, None, True, EXACT, ("name",), 1)
    assert record is not None and (record.entities_found, record.triples_found) == (1, 1)


@pytest.mark.parametrize("run", [0, 1, _RUN - 1, _RUN, _RUN + 1, _RUN + 4])
@pytest.mark.parametrize("stripped", [" ", '"', "(", "\t", ".-"])
def test_a_name_line_value_after_any_run_of_stripped_characters_names_its_node(
    run: int, stripped: str
) -> None:
    # The naming search checks short runs after `]->(` itself and hands longer ones on.
    before = (stripped * run)[:run]
    value = f"{before}Iron Deficiency{before[::-1]}"
    for head in ("(1)-[name]->(", "(1)-[name]-(", "(1)-[name]>(", "(1)-[name]->", ""):
        text = f'{head}{value})\n(2)-[name]->("Iron")\n(2)-[:R]->(1)'
        check_text(text, ["Iron Deficiency", "Iron"], [("Iron", "r", "Iron Deficiency")], ("name",), 1)
    assert RetrievalText(f"(1)-[name]->({value})").names_a_node("iron deficiency", ("name",))
    assert not RetrievalText(f"(1)-[name]-({value})").names_a_node("iron deficiency", ("name",))


@pytest.mark.parametrize("nodes", [1, _STARTS_SOUGHT // 2, _STARTS_SOUGHT, _STARTS_SOUGHT + 3])
def test_the_relationships_between_nodes_named_like_gold_ends_are_all_read(nodes: int) -> None:
    # Few such nodes: only their lines are sought; many: every relationship line is read.
    lines = []
    for i in range(nodes):
        lines += [
            f'(i{i})-[name]->("Iron")',
            f'(z{i})-[name]->("Zinc")',
            f"(i{i})-[:BINDS {{ w: 1 }}]->(z{i})",
        ]
        lines += [f"(z{i})-[:BINDS]->(i{i})", f"(i{i})-[:BINDS]->(x)", f"(i{i})-[:BINDS]->(z{i}) trailing"]
    text = "\n".join(lines)
    triples = [("Iron", "binds", "Zinc"), ("Zinc", "binds", "Iron"), ("Iron", "binds", "Iron")]
    check_text(text, ["Iron", "Zinc"], triples, ("name",), 4 * nodes)
    record = file_quality(["Iron"], triples, text, None, True, EXACT, ("name",), 4 * nodes)
    assert record is not None and (record.triples_found, record.relationships_matched) == (2, 2 * nodes)


def test_a_gold_end_without_letters_is_held_against_every_line_as_before() -> None:
    # "!!" normalizes to "": the reading of every line matches it with a node without a name.
    text = '(1)-[:CAUSED_BY]->(2)\n(1)-[name]->("Scurvy")\n(3)-[:R]->(2)\n(2)-[name]->("Vitamin C")'
    triples = [("Scurvy", "caused by", "Vitamin C"), ("!!", "r", "Vitamin C")]
    check_text(text, ["Scurvy"], triples, ("name",), 2)
    record = file_quality(["Scurvy"], triples, text, None, True, EXACT, ("name",), 2)
    assert record is not None and (record.triples_found, record.relationships_matched) == (2, 2)


def test_many_nodes_of_one_name_are_all_found_in_a_bounded_number_of_searches() -> None:
    # Each naming line is checked to be its node's first by a search from the text's start:
    # past a few such lines, every line is read once instead.
    text = "\n".join(f'({i})-[name]->("Lung")\n({i})-[:PART_OF]->(body)' for i in range(3 * _TRIES))
    finds = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal finds
        if event == "c_call" and getattr(arg, "__name__", "") == "find":
            finds += 1

    prepared = RetrievalText(text)
    sys.setprofile(profile)
    try:
        nodes = prepared.nodes_named("lung", ("name",))
    finally:
        sys.setprofile(None)
    assert nodes == {str(i) for i in range(3 * _TRIES)}
    # Two per occurrence (the name, its line's end); not two more searches from the start.
    assert finds <= 7 * _TRIES
    check_text(text, ["Lung"], [("Lung", "part of", "Lung")], ("name",), 3 * _TRIES)


def test_the_med_kag_tree_gives_what_every_line_gives(med_kag: Path) -> None:
    # Gold names from the retrieved nodes' own names (as written, shouted, with `_` and runs of
    # spaces, cut to their first word), the question's words and names retrieved nowhere.
    datasets = load_datasets(med_kag / "datasets" / "mirage.json")
    checked = 0
    for path in sorted((med_kag / "results").glob("*/*/*.json")):
        fields = parse_grading_fields(path.read_bytes(), retrieval_text=True)
        text = fields.retrieval_text
        if not text:
            continue
        question = datasets.get(path.parent.parent.name, path.parent.name)
        names = sorted({n for n in formal_names(text).values() if n})[:: max(1, checked % 7 + 1)][:6]
        variants = [n.upper() for n in names[:2]] + [n.replace(" ", "_") for n in names[2:4]]
        variants += [n.replace(" ", "  ") + "." for n in names[4:]] + [n.split(" ")[0] for n in names[:3]]
        words = (question.input.split() if question is not None else [])[:4]
        entities = [*names, *variants, *words, "Helicopter Emergency", "scurvy"]
        triples = [(a, "has concept", b) for a, b in pairwise(names)][:3]
        triples.append((names[0] if names else "x", "mapped to", "Helicopter Emergency"))
        count = fields.retrieval.relationships if fields.retrieval is not None else None
        check_text(text, entities, triples, ("name",), count)
        checked += 1
    assert checked >= 50


@pytest.mark.parametrize(
    ("text", "names"),
    [
        # Unicode case and compatibility forms: the text is not ASCII, the normalized form answers.
        ('(1)-[name]->("CAFÉ Noir")\n(2)-[name]->("Straße")', ["café noir", "STRASSE", "strasse", "Cafe"]),
        ('(1)-[name]->("ﬁbrin")\n(2)-[name]->("Ｃ")', ["fibrin", "c", "Ｃ", "ﬁbrin"]),
        # Combining marks: "é" spelled e + U+0301 is NFKC-composed on both sides.
        ('(1)-[name]->("Cafe\u0301")', ["café", "Cafe\u0301", "cafe"]),
        # Names that are regular-expression syntax.
        (
            '(1)-[name]->("a+b")\n(2)-[name]->("(x)")\n(3)-[name]->("c++ [y] .* \\\\d")',
            ["a+b", "(x)", "c++", "[y]", ".*", "\\d", "a", "x"],
        ),
        (
            '(1)-[name]->("C++")\n(2)-[name]->("c.+")\n(3)-[name]->("a|b")',
            ["c++", "c.+", "c", "a|b", "a", "b", "c+"],
        ),
        # Overlapping names and names that overlap themselves.
        (
            '(1)-[name]->("Lung Cancer")\n(2)-[name]->("Cancer")\nlung lung cancer',
            ["lung", "lung cancer", "cancer", "lung lung"],
        ),
        ('a a a\n(1)-[name]->("a a")\n(2)-[name]->("a")', ["a a", "a", "a a a", "a a a a"]),
        ('--x-- --x\n(1)-[name]->("--x")', ["--x", "x--", "--x--", "x"]),
    ],
)
def test_hostile_names_and_texts_give_what_the_plain_formulas_give(text: str, names: list[str]) -> None:
    triples = [(a, "r", b) for a, b in pairwise(names)]
    for count in (0, 3):
        check_text(text, names, triples, ("name",), count)


@settings(max_examples=500)
@example("a+++ b", "++ b")  # a first word overlapping itself after an occurrence refused
@given(
    st.text(st.characters(max_codepoint=127), max_size=40)
    | st.text(st.sampled_from("aAB+ b_\n(-]>"), max_size=40),
    st.sampled_from(["a", "ab", "a b", "b_a", "(", "a a", "++ b", "aa b", "+a+", "-]->"]),
)
def test_the_lowered_text_and_each_search_are_those_of_the_standard_library(text: str, name: str) -> None:
    engine = retrieval_text.accelerator()
    lowered = retrieval_text._lowered(text, engine)
    assert lowered == text.lower()
    first, *rest = name.split(" ")
    pattern = retrieval_text._name_search(name)[0]
    for at in range(len(lowered)):
        if lowered.startswith(first, at):  # the name read without its expression
            match = pattern.match(lowered, at)
            assert retrieval_text._occurrence_end(lowered, at, first, rest) == (match.end() if match else -1)
    for pattern in (retrieval_text._name_search(name)[0],):
        for at in range(len(lowered) + 2):
            expected = pattern.search(lowered, at)
            found = retrieval_text._search(pattern, name.split(" ")[0], lowered, at, engine)
            assert (found and found.span()) == (expected and expected.span())


def test_a_first_word_met_more_often_than_tried_is_searched_on_by_the_expression(search_engine: str) -> None:
    text = "vitamin d " * (2 * retrieval_text._CANDIDATES) + "vitamin_c"
    pattern = retrieval_text._name_search("vitamin c")[0]
    found = retrieval_text._search(pattern, "vitamin", text, 0, retrieval_text.accelerator())
    assert found is not None and found.start() == len(text) - len("vitamin_c")
    assert (retrieval_text.accelerator() is None) == (search_engine == "standard library")


def _one_separator_a_run(text: str) -> str:
    """``text`` with each run of separators cut to its first character: a *plain* text."""
    return re.sub(r"([ \t\n\r\x0b\x0c\x1c-\x1f_])[ \t\n\r\x0b\x0c\x1c-\x1f_]+", r"\1", text)


@settings(max_examples=400)
@given(
    text.map(_one_separator_a_run),
    st.lists(gold, max_size=3),
    st.lists(gold_triple, max_size=2),
    keys,
    st.none() | st.integers(0, 5),
)
def test_randomized_plain_texts_give_what_every_line_gives(
    text: str, entities: list[str], triples: list[Triple], keys: tuple[str, ...], count: int | None
) -> None:
    # No two separators follow each other: with StringZilla, names are sought as they are.
    check_text(text, entities, triples, keys, count)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        # Names at the text's two ends, the first line naming its node.
        ('Iron Deficiency)-[name]->("Iron Deficiency")', ["iron deficiency", "iron", "deficiency"]),
        ('(1)-[name]->("Iron Deficiency")\n(1)-[:R]->(2)\n(2)-[name]->("Iron")', ["iron", "iron deficiency"]),
        ('(2)-[name]->("Zinc")\n(1)-[name]->("Iron Deficiency")', ["iron deficiency", "zinc", "deficiency"]),
        ("(1)-[name]->(Iron Deficiency)\niron", ["iron", "iron deficiency"]),
        # Words joined by `_`, a tab, a newline, one separator each (a plain text) or two.
        ('(1)-[name]->("Iron_Deficiency")\n(2)-[name]->("Iron\tZinc")', ["iron deficiency", "iron zinc"]),
        ('(1)-[name]->("Iron  Deficiency")\n(2)-[name]->("Zinc")', ["iron deficiency", "zinc", "iron"]),
        (
            '(1)-[name]->("Iron")\nDeficiency_\t(2)-[name]->("Zinc")',
            ["iron deficiency", "deficiency", "zinc"],
        ),
        ("iron\ndeficiency\n(1)-[name]->(\tIron\t)", ["iron deficiency", "iron"]),
        # Legal suffixes, and words that begin like one.
        (
            '(1)-[name]->("Acme Co., Ltd.")\n(2)-[name]->("Acme Corp")\n(3)-[name]->("Beta Incorporated")',
            ["acme", "acme co", "beta", "beta incorporated", "acme corp"],
        ),
        (
            '(1)-[name]->("Chronic Inhibitor")\n(2)-[name]->("Lung Cohort")\n(3)-[name]->("Gene Inc")',
            ["chronic", "lung", "gene", "chronic inhibitor", "gene inc"],
        ),
        (
            '(1)-[name]->("Iron, Inc.")\n(2)-[name]->("Zinc,Ltd")\n(3)-[name]->("Lead GmbH.")',
            ["iron", "zinc", "lead"],
        ),
        # Escaped values: every name line is read.
        ('(1)-[name]->("Iron\\u0020Deficiency")\n(2)-[name]->("Zinc")', ["iron deficiency", "zinc"]),
        # A node with two name lines (its first names it), one of them not a property line.
        ('(1)-[name]->("Zinc")\n(1)-[name]->("Iron")\n(2)-[name]->("Iron")', ["iron", "zinc"]),
        ('(1)-[name]->("Zinc")\n(1)-[name]->("Iron")', ["iron", "zinc"]),
        ('(1)-[name]->("Iron") x\n(1)-[name]->("Zinc")\n(2)-[name]->("Lead")', ["iron", "zinc", "lead"]),
        ('(2)-[name]->("Lead")\n(1)-[name]->("Iron")x\n(1)-[name]->("Zinc")', ["iron", "zinc", "lead"]),
        # Words glued to a name, and a name inside another's value.
        ('(1)-[name]->("Ironic Zinc")\n(2)-[name]->("Zinc Iron")', ["iron", "zinc", "zinc iron", "ironic"]),
        # Non-ASCII text.
        ('(1)-[name]->("Iron Défi")\n(2)-[name]->("Zinc")', ["iron défi", "zinc", "iron"]),
        # ... with relationship lines after a non-ASCII character (a search that counted
        # offsets in UTF-8 bytes would read them at the wrong place).
        ('(1)-[name]->("Café")\n(2)-[name]->("Tea")\n(1)-[:R]->(2)\n(2)-[:R]->(1)', ["café", "tea"]),
        # Lines of the usual shape `(node)-[key]->("value")` and near it: a node holding `(` or
        # `]`, a key that is not one, a value over two lines, text after the line, a line of
        # two relationships, a name at the text's end without its closing.
        (
            '((1)-[name]->("Iron")\n(2])-[name]->("Iron")\n(3)-[nam]->("Iron")\n(4)-[:R]->(x)-[name]->("Iron")',
            ["iron"],
        ),
        ('(1)-[name]->("Iron\nZinc")\n(2)-[name]->("Iron")x\n(3)-[name]->("Iron") ', ["iron", "iron zinc"]),
        ('(1)-[name]->("Zinc")\n(1)-[name]->("Iron")\n(2)-[name]->("Iron', ["iron", "zinc"]),
        (
            '(1)-[name]->("Iron")\n(1)-[name]->("Iron")\n()-[name]->("Zinc")\n)-[name]->("Lead")',
            ["iron", "zinc", "lead"],
        ),
        (
            '-[name]->("Iron")\n(1)-[name]->("Iron Inc")\n(2)-[name]->("Zinc Ltd")',
            ["iron", "zinc", "iron inc"],
        ),
        # Names longer than a scan reads.
        ('(1)-[name]->("' + "Iron " * 30 + 'Zinc")\n(2)-[name]->("Zinc")', ["iron " * 30 + "zinc", "zinc"]),
    ],
)
@pytest.mark.parametrize("name_keys", [("name",), ("name", "label"), ("label", "name"), ("name]->(", "name")])
def test_edges_of_the_literal_search_give_what_the_plain_formulas_give(
    text: str, names: list[str], name_keys: tuple[str, ...]
) -> None:
    triples = [(a, "r", b) for a, b in pairwise(names)]
    for variant in (text, text.replace("[name]", "[label]", 1)):
        for count in (0, 3):
            check_text(variant, names, triples, name_keys, count)


def test_a_plain_text_is_searched_by_its_literal_scans(search_engine: str) -> None:
    text = '(1)-[name]->("Iron Deficiency")\n(2)-[name]->("Zinc")\n(1)-[:R]->(2)'
    prepared = RetrievalText(text)
    assert prepared.names_a_node("iron deficiency", ("name",))
    assert prepared.contains("zinc") and not prepared.contains("iron zinc")
    assert bool(prepared._scans or prepared._bounded) == (search_engine == "stringzilla")
    # Two separators in a row: names of several words are sought the general way.
    double = RetrievalText(text.replace("Iron ", "Iron  "))
    assert double.names_a_node("iron deficiency", ("name",)) and double.names_a_node("zinc", ("name",))
    literal = set(double._scans) | set(double._bounded)
    assert literal == ({"zinc"} if search_engine == "stringzilla" else set())


@pytest.mark.parametrize("repeat", [_TRIES - 2, _TRIES + 2])
def test_a_name_met_more_often_than_a_scan_reads_is_found_by_the_general_search(repeat: int) -> None:
    text = "c-c " * repeat + '\n(1)-[name]->("C")\n(2)-[name]->("C Inc")'
    check_text(text, ["C", "C Inc"], [("C", "r", "C")], ("name",), 1)
    assert RetrievalText(text).nodes_named("c", ("name",)) == {"1", "2"}


@settings(max_examples=400)
@example('(1)-[name]->("Iron")\n(1)-[label]->("iron")\n(2)-[name]->("Iron Inc")', ("label", "name"), "iron")
@given(
    text.map(lambda t: t.replace("\\", "")),
    keys,
    st.sampled_from(["iron", "vitamin c", "c", "vitamin", "iron inc"]),
)
def test_a_name_line_of_the_usual_shape_is_read_as_its_expression_reads_it(
    text: str, keys: tuple[str, ...], name: str
) -> None:
    # Wherever the name stands between `]->("` and `")`, the line read without its expression
    # is the one the expression reads, or the reading is left to it (False).
    at = text.find(']->("')
    while at != -1:
        start, end = at + 5, at + 5 + len(name)
        if text.startswith('")', end):
            quoted = retrieval_scan.quoted_naming_line(text, start, end, name, keys)
            if quoted is not False and retrieval_scan._bracketless(keys):  # only asked then
                assert quoted == retrieval_scan.naming_line(text, start, name, keys)
        at = text.find(']->("', at + 1)
