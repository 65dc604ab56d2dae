"""Translations: a `Subgraph` rendered as text for the prompt's ``{{RETRIEVAL}}``.

Two strategies (``translation = {type = ...}`` of a retriever's ``extra.<database>``
table), each writing the compatible prompt text (docs/architecture.md):

``FormalTriplet`` (the default) writes one line per relationship and one per property::

    (129620460)-[:MAPPED_TO]->(39239927)
    (129620460)-[name]->("Intubation")
    (8434707)-[:HAS_CONCEPT { isPreferred: true }]->(129620460)

Relationships come in `ordered_relationships` order; after each relationship line come
the property lines of its start node, then of its end node, the first time each node is
met. Values are JSON (serde_json's compact form: strings quoted, lists ``["a","b"]``,
floats as :func:`ryu_float` writes them). ``property_filters`` maps a label set (``"A:B"``,
the node's exact set of labels, in any order) to the property keys to write, in that
order; ``relationship_property_filters`` does the same per relationship type. Nodes and
relationships without a filter write every property, keys sorted, so that
every run writes the same text.

``TextualTriplet`` writes sentences from templates written with single braces
(``{name}``, ``{FROM}``, ``{TO}``; blocks are ``{: if x :}...{: endif :}``):
``relation_formats`` per relationship type (a relationship without one is skipped),
``node_formats`` per label set (what ``{FROM}``/``{TO}`` become; a node without one is
its key), ``property_formats`` per label set (sentences written once per node, after the
first relationship row that meets it; ``{FROM}`` is the node's text). A property missing
from the node or relationship renders ``null``. Values render as minijinja prints them
(``true``, ``none``, ``1.0``, ``["a", "b"]``).

Counts (the result file's ``vertices``, ``relationships``, ``properties``) are of what was
rendered: relationship lines or sentences written; nodes that appear in a written line or
sentence; property values written. For a template, that is the number of distinct
properties it names that the element has, not the number of reads: ``{name} {name}``
counts 1 (2 in compatible files), and a property inside an untaken ``{: if :}`` branch
counts 1 (0 there); templates that name each property once outside conditionals count
the same in both.
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import jinja2

from kag.errors import ConfigError, toml_type_name
from kag.retrieval.base import RetrievalError
from kag.retrieval.subgraph import Node, Subgraph, ordered_relationships

log = logging.getLogger(__name__)

LabelSet = frozenset[str]
TRANSLATION_TYPES = ("FormalTriplet", "TextualTriplet")


def parse_label_set(text: str) -> LabelSet:
    """``"A:B"`` -> {A, B}: split on ``:``, trim, drop empty parts (``""`` is no label)."""
    return frozenset(part.strip() for part in text.split(":") if part.strip())


def format_label_set(labels: LabelSet) -> str:
    return ":".join(sorted(labels))


# ---------------------------------------------------------------- value formatting


def _shortest_digits(value: float) -> tuple[str, int]:
    """(digits, exponent) of the shortest decimal that round-trips ``abs(value)``:
    ``abs(value) == int(digits) * 10**exponent``, digits without trailing zeros."""
    _, digits, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    return "".join(map(str, digits)), exponent


def ryu_float(value: float) -> str:
    """A finite float as serde_json writes it (shortest round-trip digits): ``1.0``,
    ``0.001234``, ``1e-7``, ``1.234e33``, ``12340000000.0``; positional while the decimal
    exponent ``kk`` (value < 10**kk) is in (-5, 16], scientific otherwise."""
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    digits, k = _shortest_digits(value)
    length = len(digits)
    kk = length + k
    if 0 <= k and kk <= 16:
        body = digits + "0" * k + ".0"
    elif 0 < kk <= 16:
        body = digits[:kk] + "." + digits[kk:]
    elif -5 < kk <= 0:
        body = "0." + "0" * (-kk) + digits
    elif length == 1:
        body = f"{digits}e{kk - 1}"
    else:
        body = f"{digits[0]}.{digits[1:]}e{kk - 1}"
    return sign + body


def minijinja_float(value: float) -> str:
    """A float as minijinja prints it: positional, never scientific, plus ``.0`` for whole
    numbers (``1.0``, ``100000000000000000000.0``, ``0.0000001``, ``NaN``, ``-inf``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "-inf" if value < 0 else "inf"
    text = format(Decimal(repr(value)), "f")
    if "." not in text:
        text += ".0"
    return text


def _formal_float(value: float) -> str:
    # serde_json writes a NaN or an infinity as null.
    return ryu_float(value) if math.isfinite(value) else "null"


def _formal_other(value: Any) -> str:
    if isinstance(value, bytes):
        return "[" + ",".join(str(b) for b in value) + "]"
    # Dates, times, points...: their ISO text, quoted.
    return json.dumps(str(value), ensure_ascii=False)


@dataclass(frozen=True)
class _Convention:
    """How one display convention spells the parts of a property value; booleans, integers
    and strings (quoted as JSON, not ASCII-escaped) are the same in both."""

    null: str
    number: Callable[[float], str]
    comma: str  # between list items and between object members
    colon: str  # between an object's key and its value
    other: Callable[[Any], str]  # any other type (dates, points, bytes...)


_SERDE_JSON = _Convention("null", _formal_float, ",", ":", _formal_other)
_MINIJINJA = _Convention("none", minijinja_float, ", ", ": ", str)


def _display(value: Any, convention: _Convention) -> str:
    if value is None:
        return convention.null
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return convention.number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + convention.comma.join(_display(item, convention) for item in value) + "]"
    if isinstance(value, Mapping):
        members = (
            f"{json.dumps(str(k), ensure_ascii=False)}{convention.colon}{_display(value[k], convention)}"
            for k in sorted(value, key=str)
        )
        return "{" + convention.comma.join(members) + "}"
    return convention.other(value)


def formal_value(value: Any) -> str:
    """A property value as serde_json's ``Value`` displays it (compact JSON)."""
    return _display(value, _SERDE_JSON)


def textual_value(value: Any) -> str:
    """A property value as minijinja prints it into a template: a string as it is (quoted
    inside a list or an object)."""
    return value if isinstance(value, str) else _display(value, _MINIJINJA)


# ---------------------------------------------------------------- templates


class _Null(jinja2.Undefined):
    """A property the node or relationship lacks: prints ``null``, not an empty string."""

    __slots__ = ()

    def __str__(self) -> str:
        return "null"


# The names printed as ``null`` during the current render (warned about once each).
_printed_missing: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "_printed_missing", default=None
)


def _finalize(value: Any) -> Any:
    if isinstance(value, jinja2.Undefined):
        printed = _printed_missing.get()
        if printed is not None:
            printed.append(str(value._undefined_name))
        return "null"
    return textual_value(value)


_TEMPLATE_ENV = jinja2.Environment(
    variable_start_string="{",
    variable_end_string="}",
    block_start_string="{:",
    block_end_string=":}",
    comment_start_string="{#",
    comment_end_string="#}",
    autoescape=False,
    undefined=_Null,
    finalize=_finalize,
    auto_reload=False,
)


class _Scope(Mapping[str, Any]):
    """The names a template sees: the element's properties (each successful read counted)
    and the special names (``FROM``, ``TO``; not counted)."""

    def __init__(self, properties: Mapping[str, Any], special: Mapping[str, str]) -> None:
        self._properties = properties
        self._special = special
        self.reads = 0

    def __getitem__(self, key: str) -> Any:
        if key in self._special:
            return self._special[key]
        value = self._properties[key]
        self.reads += 1
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._special or key in self._properties

    def __iter__(self) -> Iterator[str]:
        yield from self._special
        yield from self._properties

    def __len__(self) -> int:
        return len(self._special) + len(self._properties)


@dataclass(frozen=True)
class FormatTemplate:
    """A single-brace template (``"{FROM} treats {TO}"``)."""

    source: str
    compiled: jinja2.Template = field(compare=False, repr=False)

    @classmethod
    def compile(cls, source: str, where: str) -> FormatTemplate:
        """Raise ConfigError naming ``where`` when ``source`` does not parse."""
        try:
            return cls(source, _TEMPLATE_ENV.from_string(source))
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"{where}: template {source!r} does not parse: {exc.message}") from None

    def render(
        self, properties: Mapping[str, Any], special: Mapping[str, str] | None = None
    ) -> tuple[str, int]:
        """(text, distinct properties read). A missing property renders ``null``."""
        scope = _Scope(properties, special or {})
        context = self.compiled.new_context(scope, shared=True)  # type: ignore[arg-type]
        printed: list[str] = []
        token = _printed_missing.set(printed)
        try:
            text = "".join(self.compiled.root_render_func(context))
        except jinja2.TemplateError as exc:
            raise RetrievalError(f"template {self.source!r} failed to render: {exc}") from None
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise RetrievalError(f"template {self.source!r} failed to render: {exc}") from None
        finally:
            _printed_missing.reset(token)
        for key in dict.fromkeys(printed):
            _warn_once(f"template {self.source!r}: property '{key}' is missing (rendered as null)")
        return text, scope.reads


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning("%s", message)


# ---------------------------------------------------------------- the translations


@dataclass(frozen=True)
class Rendered:
    """The text and the counts of what it holds (see the module docstring)."""

    text: str
    vertices: int
    relationships: int
    properties: int


@dataclass(frozen=True)
class FormalTriplet:
    property_filters: Mapping[LabelSet, tuple[str, ...]] = field(default_factory=dict)
    relationship_property_filters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def render(self, subgraph: Subgraph) -> Rendered:
        lines: list[str] = []
        seen: set[str] = set()
        properties = relationships = 0
        for rel in ordered_relationships(subgraph):
            keys = self.relationship_property_filters.get(rel.type)
            if keys is None:
                keys = tuple(sorted(rel.properties))
            parts = []
            for key in keys:
                if key in rel.properties:
                    parts.append(f"{key}: {formal_value(rel.properties[key])}")
                else:
                    log.debug("property %r requested but missing on relationship %s", key, rel.type)
            properties += len(parts)
            relationships += 1
            props = f" {{ {', '.join(parts)} }}" if parts else ""
            lines.append(f"({rel.start})-[:{rel.type}{props}]->({rel.end})")
            for key in (rel.start, rel.end):
                if key in seen:
                    continue
                seen.add(key)
                properties += self._node_lines(subgraph.nodes[key], lines)
        return Rendered("".join(line + "\n" for line in lines), len(seen), relationships, properties)

    def _node_lines(self, node: Node, lines: list[str]) -> int:
        keys = self.property_filters.get(node.labels)
        if keys is None:
            keys = tuple(sorted(node.properties))
        written = 0
        for key in keys:
            if key in node.properties:
                lines.append(f"({node.key})-[{key}]->({formal_value(node.properties[key])})")
                written += 1
            else:
                log.debug("property %r requested but missing on node %s", key, node.key)
        return written


@dataclass(frozen=True)
class TextualTriplet:
    node_formats: Mapping[LabelSet, FormatTemplate] = field(default_factory=dict)
    property_formats: Mapping[LabelSet, tuple[FormatTemplate, ...]] = field(default_factory=dict)
    relation_formats: Mapping[str, FormatTemplate] = field(default_factory=dict)

    def _node_text(self, node: Node) -> tuple[str, int]:
        template = self.node_formats.get(node.labels)
        if template is None:
            return node.key, 0
        return template.render(node.properties)

    def render(self, subgraph: Subgraph) -> Rendered:
        out: list[str] = []
        processed: set[str] = set()
        displayed: set[str] = set()
        properties = relationships = 0
        for rel in ordered_relationships(subgraph):
            source, target = subgraph.nodes[rel.start], subgraph.nodes[rel.end]
            source_text, source_props = self._node_text(source)
            target_text, target_props = self._node_text(target)
            template = self.relation_formats.get(rel.type)
            if template is not None:
                text, rel_props = template.render(rel.properties, {"FROM": source_text, "TO": target_text})
                out.append(text + "\n")
                relationships += 1
                properties += rel_props + source_props + target_props
                displayed.update((source.key, target.key))
            else:
                _warn_once(
                    f"no relation format for relationship type {rel.type!r}: its relationships are skipped"
                )
            for node, base in ((source, source_text), (target, target_text)):
                if node.key in processed:
                    continue
                processed.add(node.key)
                templates = self.property_formats.get(node.labels, ())
                for statement in templates:
                    text, reads = statement.render(node.properties, {"FROM": base})
                    out.append(text + "\n")
                    properties += reads
                if templates:
                    displayed.add(node.key)
        return Rendered("".join(out), len(displayed), relationships, properties)


Translation = FormalTriplet | TextualTriplet


def render(translation: Translation, subgraph: Subgraph) -> Rendered:
    """Render ``subgraph`` with ``translation`` (see the module docstring)."""
    return translation.render(subgraph)


# ---------------------------------------------------------------- configuration


def _table(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be a table (got {toml_type_name(value)})")
    return value


def _keys(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: must be an array of property names (got {toml_type_name(value)})")
    return tuple(value)


def _label_key(text: str, where: str, seen: dict[LabelSet, str]) -> LabelSet:
    labels = parse_label_set(text)
    if labels in seen:
        raise ConfigError(f"{where}: label sets {seen[labels]!r} and {text!r} are the same set")
    seen[labels] = text
    return labels


def _warn_unknown(table: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    extra = sorted(set(table) - set(known))
    if extra:
        log.warning("%s: ignored unknown key(s) %s", where, ", ".join(repr(k) for k in extra))


def parse_translation(raw: Any, where: str) -> Translation:
    """The ``translation`` table (``None``: the default FormalTriplet without filters).

    ``where`` prefixes every ConfigError (``config.toml: retrievers.x.extra.db.translation``).
    """
    if raw is None:
        return FormalTriplet()
    table = _table(raw, where)
    kind = table.get("type", "FormalTriplet")
    if kind == "FormalTriplet":
        _warn_unknown(table, ("type", "property_filters", "relationship_property_filters"), where)
        filters: dict[LabelSet, tuple[str, ...]] = {}
        seen: dict[LabelSet, str] = {}
        inner = f"{where}.property_filters"
        for text, keys in _table(table.get("property_filters", {}), inner).items():
            filters[_label_key(text, inner, seen)] = _keys(keys, f"{inner}.{text!r}")
        rel_filters: dict[str, tuple[str, ...]] = {}
        inner = f"{where}.relationship_property_filters"
        for rel_type, keys in _table(table.get("relationship_property_filters", {}), inner).items():
            rel_filters[rel_type] = _keys(keys, f"{inner}.{rel_type}")
        return FormalTriplet(filters, rel_filters)
    if kind == "TextualTriplet":
        _warn_unknown(table, ("type", "node_formats", "property_formats", "relation_formats"), where)
        node_formats: dict[LabelSet, FormatTemplate] = {}
        seen = {}
        inner = f"{where}.node_formats"
        for text, source in _table(table.get("node_formats", {}), inner).items():
            if not isinstance(source, str):
                raise ConfigError(
                    f"{inner}.{text!r}: must be a template string (got {toml_type_name(source)})"
                )
            node_formats[_label_key(text, inner, seen)] = FormatTemplate.compile(source, f"{inner}.{text!r}")
        property_formats: dict[LabelSet, tuple[FormatTemplate, ...]] = {}
        seen = {}
        inner = f"{where}.property_formats"
        for text, sources in _table(table.get("property_formats", {}), inner).items():
            if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
                raise ConfigError(f"{inner}.{text!r}: must be an array of template strings")
            property_formats[_label_key(text, inner, seen)] = tuple(
                FormatTemplate.compile(s, f"{inner}.{text!r}[{i}]") for i, s in enumerate(sources)
            )
        relation_formats: dict[str, FormatTemplate] = {}
        inner = f"{where}.relation_formats"
        for rel_type, source in _table(table.get("relation_formats", {}), inner).items():
            if not isinstance(source, str):
                raise ConfigError(
                    f"{inner}.{rel_type}: must be a template string (got {toml_type_name(source)})"
                )
            relation_formats[rel_type] = FormatTemplate.compile(source, f"{inner}.{rel_type}")
        if not relation_formats and not property_formats:
            raise ConfigError(
                f"{where}: a TextualTriplet translation needs 'relation_formats' (or 'property_formats'):"
                " without them nothing is rendered"
            )
        return TextualTriplet(node_formats, property_formats, relation_formats)
    raise ConfigError(
        f"{where}: unknown translation type {kind!r} (expected one of {', '.join(TRANSLATION_TYPES)})"
    )
