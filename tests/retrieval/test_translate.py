"""FormalTriplet and TextualTriplet: golden renderings of a fixed subgraph (filters, label
sets written ``A:B``, single-brace templates, counts of what was rendered), the value
formats of the Rust tool, the configuration errors, and the real Rust-tool retrievals of
../shared/data/med-kag re-rendered line for line."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kag.errors import ConfigError
from kag.retrieval.base import RetrievalError
from kag.retrieval.subgraph import Node, Relationship, Subgraph
from kag.retrieval.translate import (
    FormalTriplet,
    FormatTemplate,
    formal_value,
    minijinja_float,
    parse_label_set,
    parse_translation,
    ryu_float,
    textual_value,
)

WHERE = "config.toml: retrievers.r.extra.db.translation"


def einstein() -> Subgraph:
    """Five nodes, five relationships; node 1 is the seed.

    Rendering order (see kag.retrieval.subgraph): nodes 1, 4, 3, 2, 5 (breadth-first from
    1, neighbours by relationship type: award, bornIn, educatedAt, spouse); relationships
    by start node then end node: award, bornIn, educatedAt (from 1), then spouse (5 -> 1)
    and educatedAt (5 -> 2).
    """
    nodes = {
        "1": Node(
            "1",
            frozenset({"Person", "Scientist"}),
            {"name": "Albert Einstein", "age": 76, "born": 1879, "tags": ["physics", "relativity"]},
        ),
        "2": Node("2", frozenset({"University"}), {"name": "University of Zurich", "founded": 1833}),
        "3": Node("3", frozenset({"City"}), {"name": "Ulm", "area": 118.68}),
        "4": Node("4", frozenset({"Prize"}), {"name": "Nobel Prize in Physics", "note": 'He said "E=mc²"'}),
        "5": Node("5", frozenset({"Person"}), {"name": "Mileva Marić"}),
    }
    rels = (
        Relationship("11", "educatedAt", "1", "2", {"during": 1896, "degree": "diploma"}),
        Relationship("12", "bornIn", "1", "3", {}),
        Relationship("13", "award", "1", "4", {"year": 1921, "shared": False}),
        Relationship("14", "spouse", "5", "1", {"since": 1903}),
        Relationship("15", "educatedAt", "5", "2", {"during": 1896}),
    )
    return Subgraph(seeds=("1",), nodes=nodes, relationships=rels)


# ---------------------------------------------------------------- FormalTriplet


def test_formal_without_filters_writes_every_property_keys_sorted() -> None:
    rendered = FormalTriplet().render(einstein())
    assert rendered.text == (
        "(1)-[:award { shared: false, year: 1921 }]->(4)\n"
        "(1)-[age]->(76)\n"
        "(1)-[born]->(1879)\n"
        '(1)-[name]->("Albert Einstein")\n'
        '(1)-[tags]->(["physics","relativity"])\n'
        '(4)-[name]->("Nobel Prize in Physics")\n'
        '(4)-[note]->("He said \\"E=mc²\\"")\n'
        "(1)-[:bornIn]->(3)\n"
        "(3)-[area]->(118.68)\n"
        '(3)-[name]->("Ulm")\n'
        '(1)-[:educatedAt { degree: "diploma", during: 1896 }]->(2)\n'
        "(2)-[founded]->(1833)\n"
        '(2)-[name]->("University of Zurich")\n'
        "(5)-[:spouse { since: 1903 }]->(1)\n"
        '(5)-[name]->("Mileva Marić")\n'
        "(5)-[:educatedAt { during: 1896 }]->(2)\n"
    )
    # 5 relationships; 5 nodes; properties: 2+0+2+1+1 on relationships, 4+2+2+2+1 on nodes.
    assert (rendered.vertices, rendered.relationships, rendered.properties) == (5, 5, 17)


def test_formal_filters_by_exact_label_set_and_relationship_type() -> None:
    translation = parse_translation(
        {
            "type": "FormalTriplet",
            # "Scientist:Person" is the same set as "Person:Scientist"; "missing" is absent
            # from node 1 and is skipped; [] writes no property at all.
            "property_filters": {
                " Scientist : Person ": ["name", "missing", "age"],
                "City": [],
                "Person": ["name"],
            },
            "relationship_property_filters": {"educatedAt": ["during"], "award": []},
        },
        WHERE,
    )
    rendered = translation.render(einstein())
    assert rendered.text == (
        "(1)-[:award]->(4)\n"
        '(1)-[name]->("Albert Einstein")\n'
        "(1)-[age]->(76)\n"
        '(4)-[name]->("Nobel Prize in Physics")\n'
        '(4)-[note]->("He said \\"E=mc²\\"")\n'
        "(1)-[:bornIn]->(3)\n"
        "(1)-[:educatedAt { during: 1896 }]->(2)\n"
        "(2)-[founded]->(1833)\n"
        '(2)-[name]->("University of Zurich")\n'
        "(5)-[:spouse { since: 1903 }]->(1)\n"
        '(5)-[name]->("Mileva Marić")\n'
        "(5)-[:educatedAt { during: 1896 }]->(2)\n"
    )
    # Node 3 (City, filtered to nothing) still counts: it is in a relationship line.
    # Properties: relationships 0+0+1+1+1, nodes 2 (1) + 2 (4) + 0 (3) + 2 (2) + 1 (5).
    assert (rendered.vertices, rendered.relationships, rendered.properties) == (5, 5, 10)


def test_formal_label_set_of_one_label_does_not_match_a_node_with_two() -> None:
    translation = parse_translation({"property_filters": {"Person": []}}, WHERE)
    text = translation.render(einstein()).text
    assert '(1)-[name]->("Albert Einstein")' in text  # {Person, Scientist} != {Person}
    assert '(5)-[name]->("Mileva Marić")' not in text


def test_formal_empty_subgraph_and_seed_without_relationships_render_nothing() -> None:
    assert FormalTriplet().render(Subgraph()).text == ""
    lonely = Subgraph(seeds=("1",), nodes={"1": Node("1", frozenset({"A"}), {"name": "x"})})
    rendered = FormalTriplet().render(lonely)
    assert (rendered.text, rendered.vertices, rendered.relationships, rendered.properties) == ("", 0, 0, 0)


# ---------------------------------------------------------------- TextualTriplet


TEXTUAL = {
    "type": "TextualTriplet",
    "node_formats": {
        "Person:Scientist": "the physicist {name}",
        "Person": "{name}",
        "University": "the {name}",
    },
    "property_formats": {
        "Scientist:Person": ["{FROM} was born in {born}.", "{FROM} is {age} years old."],
        "City": ["{FROM} covers {area} km²."],
    },
    "relation_formats": {
        "educatedAt": "{FROM} studied at {TO} from {during}.",
        "spouse": "{FROM} married {TO} in {since}.",
        "award": "{FROM} won {TO} in {year}{: if shared :} (shared){: endif :}.",
    },
}


def test_textual_golden() -> None:
    rendered = parse_translation(TEXTUAL, WHERE).render(einstein())
    assert rendered.text == (
        "the physicist Albert Einstein won 4 in 1921.\n"  # Prize has no node format: its key
        "the physicist Albert Einstein was born in 1879.\n"
        "the physicist Albert Einstein is 76 years old.\n"
        "3 covers 118.68 km².\n"  # bornIn has no relation format: skipped, but 3's statements come
        "the physicist Albert Einstein studied at the University of Zurich from 1896.\n"
        "Mileva Marić married the physicist Albert Einstein in 1903.\n"
        "Mileva Marić studied at the University of Zurich from 1896.\n"
    )
    # Relationships written: 4 (bornIn skipped). Vertices: 1, 4 (award), 3 (its statement),
    # 2, 5. Properties: award 2 (year, shared) + source 1, statements 1 + 1, City 1,
    # educatedAt 1 + 1 + 1, spouse 1 + 1 + 1, educatedAt 1 + 1 + 1.
    assert (rendered.vertices, rendered.relationships, rendered.properties) == (5, 4, 15)


def test_textual_missing_property_renders_null_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    translation = parse_translation(
        {"type": "TextualTriplet", "relation_formats": {"educatedAt": "{FROM} studied {subject} at {TO}."}},
        WHERE,
    )
    with caplog.at_level(logging.WARNING, logger="kag.retrieval.translate"):
        rendered = translation.render(einstein())
    assert rendered.text == "1 studied null at 2.\n5 studied null at 2.\n"
    assert rendered.properties == 0
    warnings = [r.getMessage() for r in caplog.records if "subject" in r.getMessage()]
    assert len(warnings) <= 1  # once per template and property for the whole process


def test_textual_values_print_as_minijinja_does() -> None:
    template = FormatTemplate.compile("{a} {b} {c} {d} {e} {f}", WHERE)
    text, reads = template.render(
        {"a": True, "b": None, "c": 2.0, "d": ["x", 1, None], "e": 1e21, "f": "plain"}
    )
    assert text == 'true none 2.0 ["x", 1, none] 1000000000000000000000.0 plain'
    assert reads == 6


def test_template_blocks_filters_and_special_names() -> None:
    template = FormatTemplate.compile(
        "{FROM} -> {TO}: {: if n > 1 :}{n} items{: else :}one item{: endif :}, {s | upper}", WHERE
    )
    assert template.render({"n": 3, "s": "ok"}, {"FROM": "a", "TO": "b"}) == ("a -> b: 3 items, OK", 2)
    assert template.render({"n": 1, "s": "ok"}, {"FROM": "a", "TO": "b"})[0] == "a -> b: one item, OK"


def test_template_runtime_error_is_a_retrieval_error() -> None:
    template = FormatTemplate.compile("{n + 1}", WHERE)
    with pytest.raises(RetrievalError, match="failed to render"):
        template.render({"n": "text"})


# ---------------------------------------------------------------- value formats


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1.0"),
        (0.1, "0.1"),
        (-2.5, "-2.5"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e16"),
        (1.234e33, "1.234e33"),
        (12340000000.0, "12340000000.0"),
        (123456.789, "123456.789"),
        (1e-5, "0.00001"),
        (1e-6, "1e-6"),
        (1.5e-7, "1.5e-7"),
        (0.001234, "0.001234"),
    ],
)
def test_ryu_float_matches_serde_json(value: float, expected: str) -> None:
    assert ryu_float(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Intubation", '"Intubation"'),
        ('a"b\\c\nd\te\x01', '"a\\"b\\\\c\\nd\\te\\u0001"'),
        ("Marić", '"Marić"'),
        (True, "true"),
        (False, "false"),
        (None, "null"),
        (76, "76"),
        (-3, "-3"),
        (2.0, "2.0"),
        (float("nan"), "null"),
        (["a", 1, True], '["a",1,true]'),
        ({"b": 1, "a": "x"}, '{"a":"x","b":1}'),
    ],
)
def test_formal_value_matches_serde_json_display(value: Any, expected: str) -> None:
    assert formal_value(value) == expected


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_formats_read_back_as_the_same_float(value: float) -> None:
    assert float(ryu_float(value)) == value
    assert float(minijinja_float(value)) == value
    assert "e" not in minijinja_float(value) and "." in minijinja_float(value)


def test_textual_value_of_special_floats() -> None:
    assert [textual_value(v) for v in (float("nan"), float("inf"), float("-inf"))] == ["NaN", "inf", "-inf"]


# ---------------------------------------------------------------- configuration


def test_label_sets_ignore_order_spaces_and_empty_parts() -> None:
    assert (
        parse_label_set("MeSH:MeSHConcept")
        == parse_label_set(" MeSHConcept : MeSH :")
        == {"MeSH", "MeSHConcept"}
    )
    assert parse_label_set("") == frozenset()


def test_default_translation_is_formal_without_filters() -> None:
    assert parse_translation(None, WHERE) == FormalTriplet()
    assert parse_translation({"type": "FormalTriplet"}, WHERE) == FormalTriplet()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("FormalTriplet", "translation: must be a table (got string)"),
        (
            {"type": "Formal"},
            "unknown translation type 'Formal' (expected one of FormalTriplet, TextualTriplet)",
        ),
        ({"property_filters": {"A": "name"}}, "property_filters.'A': must be an array of property names"),
        ({"property_filters": ["A"]}, "property_filters: must be a table (got array)"),
        ({"property_filters": {"A:B": [], "B:A": []}}, "label sets 'A:B' and 'B:A' are the same set"),
        ({"relationship_property_filters": {"R": [1]}}, "relationship_property_filters.R: must be an array"),
        ({"type": "TextualTriplet"}, "needs 'relation_formats' (or 'property_formats')"),
        (
            {"type": "TextualTriplet", "relation_formats": {"R": "{FROM"}},
            "relation_formats.R: template '{FROM' does not parse",
        ),
        (
            {"type": "TextualTriplet", "relation_formats": {"R": 3}},
            "relation_formats.R: must be a template string",
        ),
        (
            {"type": "TextualTriplet", "relation_formats": {"R": "x"}, "node_formats": {"A": ["x"]}},
            "node_formats.'A': must be a template string",
        ),
        (
            {"type": "TextualTriplet", "property_formats": {"A": "{FROM}"}},
            "property_formats.'A': must be an array",
        ),
        (
            {"type": "TextualTriplet", "property_formats": {"A": ["{: if x :}"]}},
            "property_formats.'A'[0]: template",
        ),
    ],
)
def test_translation_errors_name_the_key(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_translation(raw, WHERE)
    assert str(info.value).startswith(WHERE)
    assert message in str(info.value)


def test_unknown_translation_keys_are_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kag.retrieval.translate"):
        parse_translation({"type": "FormalTriplet", "property_filter": {}}, WHERE)
    assert "ignored unknown key(s) 'property_filter'" in caplog.text


# ---------------------------------------------------------------- invariants


@st.composite
def subgraphs(draw: st.DrawFn) -> Subgraph:
    n = draw(st.integers(1, 8))
    keys = [str(i) for i in range(n)]
    labels = st.frozensets(st.sampled_from(["A", "B", "C"]), max_size=2)
    values = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.booleans())
    nodes = {
        k: Node(k, draw(labels), draw(st.dictionaries(st.sampled_from("xyz"), values, max_size=3)))
        for k in keys
    }
    rels = draw(
        st.lists(
            st.tuples(st.sampled_from(keys), st.sampled_from(keys), st.sampled_from(["R", "S"])), max_size=12
        )
    )
    relationships = tuple(Relationship(str(100 + i), t, a, b, {"w": i}) for i, (a, b, t) in enumerate(rels))
    seeds = tuple(draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)))
    return Subgraph(seeds, nodes, relationships)


@settings(max_examples=60, deadline=None)
@given(subgraphs(), st.randoms())
def test_rendering_does_not_depend_on_the_order_rows_arrived_in(subgraph: Subgraph, rnd: Any) -> None:
    shuffled = list(subgraph.relationships)
    rnd.shuffle(shuffled)
    items = list(subgraph.nodes.items())
    rnd.shuffle(items)
    other = Subgraph(subgraph.seeds, dict(items), tuple(shuffled))
    for translation in (
        FormalTriplet(),
        parse_translation(TEXTUAL | {"relation_formats": {"R": "{FROM} r {TO} {w}"}}, WHERE),
    ):
        assert translation.render(subgraph) == translation.render(other)


@settings(max_examples=60, deadline=None)
@given(subgraphs())
def test_formal_counts_are_the_lines_written(subgraph: Subgraph) -> None:
    rendered = FormalTriplet().render(subgraph)
    # Lines are "\n"-separated; values may hold other line breaks (U+0085, U+2028).
    lines = rendered.text.split("\n")
    lines = lines[:-1] if lines and lines[-1] == "" else lines
    rel_lines = [line for line in lines if re.match(r"^\(\d+\)-\[:", line)]
    assert rendered.relationships == len(rel_lines) == len(subgraph.relationships)
    keys = {k for line in rel_lines for k in re.findall(r"\((\d+)\)", line)}
    assert rendered.vertices == len(keys)
    # Unfiltered: every property of every written node, and of every relationship.
    expected = sum(len(subgraph.nodes[k].properties) for k in keys) + sum(
        len(r.properties) for r in subgraph.relationships
    )
    assert rendered.properties == expected == len(lines) - len(rel_lines) + len(subgraph.relationships)


# ---------------------------------------------------------------- the Rust tool's real retrievals

_REL_LINE = re.compile(r"^\((\d+)\)-\[:(\w+)(?: \{ (.*) \})?\]->\((\d+)\)$")
_PROP_LINE = re.compile(r"^\((\d+)\)-\[(\w+)\]->\((.*)\)$")


def _rel_props(text: str | None) -> dict[str, Any]:
    props: dict[str, Any] = {}
    decoder = json.JSONDecoder()
    rest = text or ""
    while rest:
        key, _, rest = rest.partition(": ")
        value, end = decoder.raw_decode(rest)
        props[key] = value
        rest = rest[end:].removeprefix(", ")
    return props


def _canonical(line: str) -> str:
    """A line with its relationship properties in key order (the Rust tool wrote them in
    hash order)."""
    m = _REL_LINE.match(line)
    if not m or not m.group(3):
        return line
    start, rel_type, props, end = m.groups()
    inner = ", ".join(f"{k}: {formal_value(v)}" for k, v in sorted(_rel_props(props).items()))
    return f"({start})-[:{rel_type} {{ {inner} }}]->({end})"


def _parse_rust_text(text: str) -> tuple[Subgraph, set[str]]:
    """The subgraph a Rust FormalTriplet text shows, and the nodes whose properties it
    filtered (MeSH nodes, whose lines show only `name`)."""
    nodes: dict[str, dict[str, Any]] = {}
    rels: list[Relationship] = []
    for i, line in enumerate(text.splitlines()):
        if m := _REL_LINE.match(line):
            start, rel_type, props, end = m.groups()
            nodes.setdefault(start, {})
            nodes.setdefault(end, {})
            rels.append(Relationship(str(i), rel_type, start, end, _rel_props(props)))
        elif m := _PROP_LINE.match(line):
            key, prop, value = m.groups()
            nodes.setdefault(key, {})[prop] = json.loads(value)
        else:  # pragma: no cover - a format change would show here
            raise AssertionError(f"unexpected line {line!r}")
    filtered = {k for k, props in nodes.items() if set(props) == {"name"}}
    built = {
        k: Node(
            k,
            frozenset({"MeSH", "MeSHDescriptor"}) if k in filtered else frozenset(),
            props | ({"extra": 1} if k in filtered else {}),
        )
        for k, props in nodes.items()
    }
    return Subgraph((), built, tuple(rels)), filtered


def _real_retrievals(med_kag: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted(
        (med_kag / "results" / "pubmedqa").glob(
            "*/wekgr-qwen35-9b-ollama-neo4j-embedding-triplet-formal.json"
        )
    ):
        data = json.loads(path.read_text())
        if "ok" in data:
            found.append(data["ok"]["stats"]["retrieval"])
    return found


def test_formal_reproduces_the_rust_tools_real_retrievals(med_kag: Path) -> None:
    """Every real retrieval, parsed back into a subgraph and rendered with the real
    configuration's filters, gives the same lines (as a multiset, relationship properties
    in key order: the Rust tool wrote properties in hash order) and the same three counts
    as the Rust tool recorded."""
    retrievals = _real_retrievals(med_kag)
    assert len(retrievals) == 99
    translation = parse_translation(
        {
            "type": "FormalTriplet",
            "property_filters": {"MeSH:MeSHDescriptor": ["name"], "MeSH:MeSHConcept": ["name"]},
        },
        WHERE,
    )
    for retrieval in retrievals:
        subgraph, _ = _parse_rust_text(retrieval["result"])
        rendered = translation.render(subgraph)
        assert sorted(rendered.text.splitlines()) == sorted(map(_canonical, retrieval["result"].splitlines()))
        stats = retrieval["stats"]["embedder"]["database"]["neo4j"]
        assert (rendered.vertices, rendered.relationships, rendered.properties) == (
            stats["vertices"],
            stats["relationships"],
            stats["properties"],
        )
        assert rendered.text.endswith("\n") and retrieval["result"].endswith("\n")


def test_rust_texts_put_node_properties_right_after_the_first_line_that_names_the_node(med_kag: Path) -> None:
    """The layout kag reproduces: a relationship line, then the properties of its start
    node and of its end node the first time each appears, and never elsewhere."""
    for retrieval in _real_retrievals(med_kag)[:30]:
        seen: set[str] = set()
        allowed: set[str] = set()
        for line in retrieval["result"].splitlines():
            if m := _REL_LINE.match(line):
                start, _, _, end = m.groups()
                allowed = {k for k in (start, end) if k not in seen}
                seen.update((start, end))
            else:
                m = _PROP_LINE.match(line)
                assert m and m.group(1) in allowed, line
