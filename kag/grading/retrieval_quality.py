"""Retrieval quality against gold evidence: did the retrieved graph hold the facts a
question needs, and how much of it was relevant?

A question's gold evidence (:class:`~kag.datasets.Question`) is a list of entity names and a
list of triples (subject, relation, object); a retrieval is a
:class:`~kag.results.model.RetrievedGraph` (recorded by kag, or read back from the Rust
tool's ``FormalTriplet`` text by :mod:`kag.results.graph_text`). Names, relation types and
triples are compared in the triplet grader's canonical form (:mod:`kag.grading.triplets.normalize`:
case folded, ``_`` as a space, spaces collapsed, so ``MAPPED_TO`` reads ``mapped to``), with
its matching (:mod:`kag.grading.triplets.similarity`: ``exact``, ``fuzzy`` or ``embedding``,
gated as there; two strings match when their similarity reaches ``ACCEPT_THRESHOLD``).

Per-question records come first (:func:`quality_record`), one function per figure after
(:func:`entity_recall`, :func:`triple_recall`, :func:`triple_precision`, :func:`triple_f1`,
:func:`is_reached`, :func:`seed_recall_at_k`, :func:`seed_reciprocal_rank`), as in
ir_measures; :mod:`kag.grading.measures.retrieval_quality` sums them per block.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from kag.grading.irt2.metrics import hits_at_k, reciprocal_rank
from kag.grading.retrieval_text import RetrievalText
from kag.grading.triplets.model import ACCEPT_THRESHOLD, MatchMode
from kag.grading.triplets.normalize import normalize_relation, normalize_title
from kag.grading.triplets.similarity import Similarity, make_similarity
from kag.results.graph_text import (
    DEFAULT_NAME_KEYS,
    formal_parts,
    formal_relationships,
    formal_relationships_from,
)
from kag.results.model import RetrievedGraph

Triple = tuple[str, str, str]

# The most nodes whose relationship lines are sought one by one (each a search of the text).
_STARTS_SOUGHT = 8
# Looked up once: an enum member read from its class costs a lookup every file.
_EXACT = MatchMode.EXACT


@dataclass(frozen=True, slots=True)
class QualityRecord:
    """One question's retrieval against its gold evidence.

    - ``entities`` / ``entities_found``: the gold entities, and those found among the
      retrieved nodes' names;
    - ``triples`` / ``triples_found``: the gold triples, and those found among the
      retrieved relationships (start's name, type, end's name);
    - ``relationships`` / ``relationships_matched``: the retrieved relationships, and those
      that match a gold triple;
    - ``seed_ranks``: per gold entity, the 1-based rank of the first seed whose name
      matches it, 0 when none does; None when the file holds no seeds;
    - ``correct``: the strict grade of the answer (MCQ) or its exact match (open).
    """

    entities: int
    entities_found: int
    triples: int
    triples_found: int
    relationships: int
    relationships_matched: int
    seed_ranks: tuple[int, ...] | None
    correct: bool


def entity_recall(r: QualityRecord) -> float | None:
    """``entities_found / entities``; None when the question lists no gold entity."""
    return r.entities_found / r.entities if r.entities else None


def triple_recall(r: QualityRecord) -> float | None:
    """``triples_found / triples``; None when the question lists no gold triple."""
    return r.triples_found / r.triples if r.triples else None


def triple_precision(r: QualityRecord) -> float | None:
    """``relationships_matched / relationships``: the share of the retrieved relationships
    that match a gold triple; 0.0 when nothing was retrieved (nothing relevant was); None
    when the question lists no gold triple."""
    if not r.triples:
        return None
    return r.relationships_matched / r.relationships if r.relationships else 0.0


def triple_f1(r: QualityRecord) -> float | None:
    """``2·P·R / (P + R)`` of :func:`triple_precision` and :func:`triple_recall`; 0.0 when
    both are 0; None when the question lists no gold triple."""
    p, rec = triple_precision(r), triple_recall(r)
    if p is None or rec is None:
        return None
    return 2 * p * rec / (p + rec) if p + rec else 0.0


def is_reached(r: QualityRecord) -> bool:
    """Whether retrieval reached the gold: every gold triple found; for a question without
    triples, every gold entity found."""
    if r.triples:
        return r.triples_found == r.triples
    return r.entities_found == r.entities


def seed_recall_at_k(r: QualityRecord) -> float | None:
    """``(1/E) Σ_e hits@k(rank_e)``: the share of the gold entities among the seeds, ``k``
    being the number of seeds (the retrieval's top k; IRT2's ``hits_at_k``, a miss is rank 0).
    None when the file holds no seeds or the question lists no gold entity."""
    if r.seed_ranks is None or not r.seed_ranks:
        return None
    ranks = np.asarray(r.seed_ranks, dtype=np.float64)
    k = max(1, int(ranks.max()))  # every found rank is within the seeds: any k >= them hits
    return float(hits_at_k(ranks, k).sum()) / len(ranks)


def seed_reciprocal_rank(r: QualityRecord) -> float | None:
    """``max_e RR(rank_e)`` = 1 / the rank of the best-ranked seed naming a gold entity, 0
    when no seed does (IRT2's ``reciprocal_rank``); averaged over questions it is the MRR.
    None when the file holds no seeds or the question lists no gold entity."""
    if r.seed_ranks is None or not r.seed_ranks:
        return None
    return float(reciprocal_rank(np.asarray(r.seed_ranks, dtype=np.float64)).max())


def _index(values: Sequence[str]) -> tuple[list[str], npt.NDArray[np.intp]]:
    """The distinct values in first-seen order, and each value's position among them."""
    positions: dict[str, int] = {}
    at = [positions.setdefault(v, len(positions)) for v in values]
    return list(positions), np.asarray(at, dtype=np.intp)


def _matches(similarity: Similarity, left: Sequence[str], right: Sequence[str]) -> npt.NDArray[np.bool_]:
    """``out[i, j]``: whether ``left[i]`` and ``right[j]`` match (non-empty, similarity at
    least the accept threshold)."""
    if not left or not right:
        return np.zeros((len(left), len(right)), dtype=bool)
    out = similarity.matrix(left, right) >= ACCEPT_THRESHOLD
    empty = np.asarray([not s for s in right], dtype=bool)
    out[:, empty] = False
    return out


def quality_record(
    entities: Sequence[str],
    triples: Sequence[Triple],
    graph: RetrievedGraph,
    correct: bool,
    similarity: Similarity,
) -> QualityRecord:
    """The record of one question (see :class:`QualityRecord`) from its gold evidence and
    the retrieved ``graph``; a node without a name matches nothing."""
    names = {n.id: n.name for n in graph.nodes}
    rels = [(r.start, r.type, r.end) for r in graph.relationships]
    seeds = None if graph.seeds is None else [s.id for s in graph.seeds]
    return parts_quality(entities, triples, names, rels, seeds, correct, similarity)


def parts_quality(
    entities: Sequence[str],
    triples: Sequence[Triple],
    names: Mapping[str, str | None],
    rels: Sequence[Triple],
    seeds: Sequence[str] | None,
    correct: bool,
    similarity: Similarity,
) -> QualityRecord:
    """:func:`quality_record` of a graph given as its parts: node id -> name, relationships
    (start, type, end) and seed ids (None: the file holds none). Relationships whose ends
    are not nodes are left out."""
    normalized = {node: normalize_title(name) if name else "" for node, name in names.items()}
    gold_entities = [normalize_title(e) for e in entities]
    kept = [r for r in rels if r[0] in normalized and r[2] in normalized]
    if similarity.mode is MatchMode.EXACT:
        return _exact(gold_entities, triples, normalized, kept, seeds, correct)
    return _similar(gold_entities, triples, normalized, kept, seeds, correct, similarity)


def _seed_ranks(
    gold_entities: Sequence[str], seeds: Sequence[str] | None, found: Callable[[int, str], bool]
) -> tuple[int, ...] | None:
    """Per gold entity, the rank of the first seed that ``found(entity index, seed id)``, 0 when none."""
    if seeds is None or not gold_entities:
        return None
    ranks = [0] * len(gold_entities)
    for rank, seed in enumerate(seeds, start=1):
        for i in range(len(gold_entities)):
            if ranks[i] == 0 and found(i, seed):
                ranks[i] = rank
    return tuple(ranks)


def normalized_triple(triple: Triple) -> Triple:
    """A gold triple as the ``exact`` mode compares it: its ends normalized as names, its
    predicate as a relation type."""
    s, p, o = triple
    return (normalize_title(s), normalize_relation(p), normalize_title(o))


def _exact(
    gold_entities: Sequence[str],
    triples: Sequence[Triple],
    names: Mapping[str, str],
    rels: Sequence[Triple],
    seeds: Sequence[str] | None,
    correct: bool,
) -> QualityRecord:
    """The ``exact`` mode with sets: equal normalized strings match."""
    retrieved_names = set(names.values())
    retrieved_names.discard("")
    entities_found = sum(1 for e in gold_entities if e in retrieved_names)
    listed = [normalized_triple(t) for t in triples]
    gold = set(listed)
    retrieved = [(names[s], normalize_relation(t), names[e]) for s, t, e in rels]
    matched = sum(1 for r in retrieved if r in gold)
    found = len(gold.intersection(retrieved))
    # Gold triples may repeat after normalization: count each listed one.
    if found and len(gold) != len(triples):
        present = set(retrieved)
        found = sum(1 for t in listed if t in present)
    ranks = _seed_ranks(gold_entities, seeds, lambda i, seed: names.get(seed) == gold_entities[i] != "")
    return QualityRecord(
        len(gold_entities), entities_found, len(triples), found, len(rels), matched, ranks, correct
    )


def _similar(
    gold_entities: Sequence[str],
    triples: Sequence[Triple],
    normalized: Mapping[str, str],
    rels: Sequence[Triple],
    seeds: Sequence[str] | None,
    correct: bool,
    similarity: Similarity,
) -> QualityRecord:
    """The ``fuzzy`` and ``embedding`` modes, on similarity matrices over distinct strings."""
    names, name_at = _index(list(normalized.values()))
    node_index = dict(zip(normalized, name_at.tolist(), strict=True))
    entity_hits = _matches(similarity, gold_entities, names)
    entities_found = int(entity_hits.any(axis=1).sum()) if names else 0
    found = matched = 0
    if triples and rels:
        types, type_at = _index([normalize_relation(t) for _, t, _ in rels])
        starts = np.asarray([node_index[s] for s, _, _ in rels], dtype=np.intp)
        ends = np.asarray([node_index[e] for _, _, e in rels], dtype=np.intp)
        subjects = _matches(similarity, [normalize_title(t[0]) for t in triples], names)
        relations = _matches(similarity, [normalize_relation(t[1]) for t in triples], types)
        objects = _matches(similarity, [normalize_title(t[2]) for t in triples], names)
        # hit[t, m]: retrieved relationship m matches gold triple t on all three parts.
        hit = subjects[:, starts] & relations[:, type_at] & objects[:, ends]
        found = int(hit.any(axis=1).sum())
        matched = int(hit.any(axis=0).sum())
    ranks = _seed_ranks(
        gold_entities, seeds, lambda i, seed: seed in node_index and bool(entity_hits[i, node_index[seed]])
    )
    return QualityRecord(
        len(gold_entities), entities_found, len(triples), found, len(rels), matched, ranks, correct
    )


class QuestionGold:
    """A question's gold evidence with its names normalized once for all of its result
    files (:func:`gold_quality` reads it for each): the gold ``entities`` and ``triples``
    as listed, each entity normalized as a name (``names``, in order) and the two ends of
    each triple so normalized (``ends``)."""

    __slots__ = ("ends", "ends_named", "entities", "names", "triples")

    def __init__(self, entities: Sequence[str], triples: Sequence[Triple]) -> None:
        self.entities = entities
        self.triples = triples
        self.names = tuple([normalize_title(e) for e in entities])
        self.ends = tuple([(normalize_title(s), normalize_title(o)) for s, _, o in triples])
        #: Whether no end of a gold triple normalizes to ``""``.
        self.ends_named = all(s and o for s, o in self.ends)


def file_quality(
    entities: Sequence[str],
    triples: Sequence[Triple],
    text: str | RetrievalText | None,
    graph: RetrievedGraph | None,
    correct: bool,
    similarity: Similarity,
    name_keys: tuple[str, ...] = DEFAULT_NAME_KEYS,
    relationships: int | None = None,
) -> QualityRecord | None:
    """The record of one result file, or None when it does not count: the question lists
    no gold, or the file has no retrieval (an error file, a setup that did not retrieve).
    The graph is the file's recorded one, else read back from its text (given as is, or
    prepared once for both evidence measures; ``name_keys`` naming the nodes).

    ``relationships``: the file's own count of rendered relationship lines (its retrieval
    stats), when it has one. In ``exact`` mode with that count, the gold names are looked up
    among the nodes' names without reading every name line where the text allows it
    (:meth:`RetrievalText.nodes_named`); when no gold triple has both its ends among them,
    none can be found and the relationship lines are not read, else only those between
    nodes so named are held against the gold. The retrieved relationships are that count
    whenever the file has one (on every path)."""
    gold = QuestionGold(entities, triples)
    return gold_quality(gold, text, graph, correct, similarity, tuple(name_keys), relationships)


def gold_quality(
    gold: QuestionGold,
    text: str | RetrievalText | None,
    graph: RetrievedGraph | None,
    correct: bool,
    similarity: Similarity,
    name_keys: tuple[str, ...] = DEFAULT_NAME_KEYS,
    relationships: int | None = None,
) -> QualityRecord | None:
    """:func:`file_quality` of a question's gold normalized once (:class:`QuestionGold`)."""
    entities, triples = gold.entities, gold.triples
    if not (entities or triples) or text is None:
        return None
    if graph is not None:
        return quality_record(entities, triples, graph, correct, similarity)
    prepared = RetrievalText(text) if isinstance(text, str) else text
    if relationships is not None and similarity.mode is _EXACT:
        record = _exact_by_gold_names(gold, prepared, name_keys, correct, relationships)
        if record is not None:
            return record
    nodes, rels = formal_parts(prepared.text, name_keys)
    record = parts_quality(entities, triples, nodes, rels, None, correct, similarity)
    if relationships is None:
        return record
    # The same count on both paths (a file whose count disagrees with its lines is not
    # believed below what matched).
    return replace(record, relationships=max(relationships, record.relationships_matched))


def _exact_by_gold_names(
    gold: QuestionGold,
    text: RetrievalText,
    name_keys: tuple[str, ...],
    correct: bool,
    relationships: int,
) -> QualityRecord | None:
    """:func:`file_quality` in ``exact`` mode from the nodes named like a gold name
    (:meth:`RetrievalText.nodes_named`) rather than from every node: a relationship can
    match a gold triple only between two of them. None, for the reading of every line, when
    one can be found and an end of a gold triple normalizes to ``""`` (which the names of
    nodes without one equal there)."""
    names_a_node = text.names_a_node
    found = 0
    for name in gold.names:
        if name and names_a_node(name, name_keys):
            found += 1
    reachable = [(s, o) for s, o in gold.ends if names_a_node(s, name_keys) and names_a_node(o, name_keys)]
    if not reachable:
        # No gold triple has both ends among the nodes: none can be found, no line is read.
        return _unreached(len(gold.entities), found, len(gold.triples), relationships, correct)
    if not gold.ends_named:
        return None
    # Only the nodes named like the ends of a reachable triple can match one.
    named = {name: text.nodes_named(name, name_keys) for name in {n for pair in reachable for n in pair}}
    names = {node: name for name, nodes in named.items() if name for node in nodes}
    # The lines that begin with one of a few nodes are found by a search each; past that,
    # every relationship line is read once.
    lines = (
        formal_relationships_from(text.text, names, text.find)
        if len(names) <= _STARTS_SOUGHT
        else formal_relationships(text.text)
    )
    rels = [r for r in lines if r[0] in names and r[2] in names]
    record = _exact([], gold.triples, names, rels, None, correct)
    # The file's count, not believed below what matched (as on the reading of every line).
    matched = record.relationships_matched
    return QualityRecord(
        len(gold.entities),
        found,
        record.triples,
        record.triples_found,
        max(relationships, matched),
        matched,
        record.seed_ranks,
        correct,
    )


# The records of files where no gold triple was reachable, by their counts: they take few
# values (a file's gold, its count of relationships, whether its answer was right), and one
# object for each spares making a frozen record for every file (most files are such).
_UNREACHED: dict[tuple[int, int, int, int, bool], QualityRecord] = {}
_UNREACHED_KEPT = 8192


def _unreached(entities: int, found: int, triples: int, relationships: int, correct: bool) -> QualityRecord:
    """``QualityRecord(entities, found, triples, 0, relationships, 0, None, correct)``, the
    object already made when an equal one was (records are frozen)."""
    key = (entities, found, triples, relationships, correct)
    record = _UNREACHED.get(key)
    if record is None:
        if len(_UNREACHED) >= _UNREACHED_KEPT:
            _UNREACHED.clear()
        record = _UNREACHED[key] = QualityRecord(entities, found, triples, 0, relationships, 0, None, correct)
    return record


_SIMILARITIES: dict[str, Similarity] = {}


def similarity_for(mode: str) -> Similarity:
    """The triplet grader's similarity for ``--evidence-match`` ``mode`` (exact, fuzzy or
    embedding, with its default gate), made once per process (an embedding model loads once)."""
    found = _SIMILARITIES.get(mode)
    if found is None:
        found = _SIMILARITIES[mode] = make_similarity(MatchMode(mode))
    return found
