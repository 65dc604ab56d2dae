"""The codec of a result file: the canonical reader and writer, and the fast readers.

:func:`result_from_json` / :func:`parse_result` hold the rules (which shapes are a result
file, and the messages for those that are not); :func:`result_to_json` /
:func:`dump_result` write the compatible layout (docs/architecture.md). Beside them, the
fast readers used on every file of a tree: :func:`grading_fields` (what `kag stats`
grades, without building the model) and :func:`parse_response` (the response alone, for
`kag stats find`, through simdjson). Both give exactly the canonical verdict; tests/results/test_codec.py checks it
with hypothesis.
"""

from __future__ import annotations

__all__ = [
    "GradingFields",
    "RetrievalSample",
    "dump_result",
    "grading_fields",
    "parse_grading_fields",
    "parse_response",
    "parse_result",
    "result_from_json",
    "result_to_json",
    "utf8_length",
]

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson
import simdjson

from kag.results.model import (
    AugmentedGeneration,
    DatabaseStats,
    ErrorResult,
    ModelConfig,
    OkResult,
    OkStats,
    Result,
    Retrieval,
    RetrievedGraph,
    RetrievedNode,
    RetrievedRelationship,
    Seed,
    Timing,
    UnreadableResult,
    Usage,
)

# ---------------------------------------------------------------- the canonical reader (lenient on optionals)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _timing(value: Any) -> Timing | None:
    if not isinstance(value, dict):
        return None
    secs, nanos = _int(value.get("secs")), _int(value.get("nanos"))
    if secs is None or nanos is None:
        return None
    return Timing(secs, nanos)


def _seed(value: Any) -> Seed | None:
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        return None
    score = _number(value.get("score"))
    return Seed(value["id"], score)


def _node(value: Any) -> RetrievedNode | None:
    if not isinstance(value, dict) or not isinstance(value.get("id"), str):
        return None
    labels = value.get("labels")
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        labels = []
    return RetrievedNode(value["id"], tuple(labels), _str(value.get("name")))


def _relationship(value: Any) -> RetrievedRelationship | None:
    if not isinstance(value, dict):
        return None
    start, kind, end = _str(value.get("start")), _str(value.get("type")), _str(value.get("end"))
    if start is None or kind is None or end is None:
        return None
    return RetrievedRelationship(start, kind, end)


def graph_from_json(value: Any) -> RetrievedGraph | None:
    """``ok.stats.retrieval.graph`` as a model; None when absent or not an object with the
    three arrays (an optional field: a mistyped one counts as absent, as the others do).
    Mistyped items of an array are left out."""
    if not isinstance(value, dict):
        return None
    seeds, nodes, rels = value.get("seeds"), value.get("nodes"), value.get("relationships")
    if not (isinstance(seeds, list) and isinstance(nodes, list) and isinstance(rels, list)):
        return None
    return RetrievedGraph(
        tuple(s for s in map(_seed, seeds) if s is not None),
        tuple(n for n in map(_node, nodes) if n is not None),
        tuple(r for r in map(_relationship, rels) if r is not None),
    )


def graph_to_json(graph: RetrievedGraph) -> dict[str, Any]:
    """The JSON object of ``ok.stats.retrieval.graph`` (a graph read from text, without
    seeds, writes an empty seed list)."""
    return {
        "seeds": [{"id": s.id, "score": s.score} for s in graph.seeds or ()],
        "nodes": [{"id": n.id, "labels": list(n.labels), "name": n.name} for n in graph.nodes],
        "relationships": [{"start": r.start, "type": r.type, "end": r.end} for r in graph.relationships],
    }


def _retrieval(value: Any) -> Retrieval | None:
    if not isinstance(value, dict):
        return None
    text = _str(value.get("result")) or ""
    graph = graph_from_json(value.get("graph"))
    stats = value.get("stats")
    if not isinstance(stats, dict) or not stats:
        return Retrieval(result=text, graph=graph)
    retriever, inner = next(iter(stats.items()))
    if not isinstance(inner, dict):
        return Retrieval(result=text, retriever=retriever, graph=graph)
    embedding = inner.get("embedding")
    document = vector = None
    if isinstance(embedding, dict):
        document = _str(embedding.get("document"))
        vec = embedding.get("vec")
        vector = vec if isinstance(vec, list) else None
    database = None
    db = inner.get("database")
    if isinstance(db, dict) and db:
        backend, counts = next(iter(db.items()))
        if isinstance(counts, dict):
            database = DatabaseStats(
                backend=backend,
                vertices=_int(counts.get("vertices")),
                relationships=_int(counts.get("relationships")),
                properties=_int(counts.get("properties")),
                time=_timing(counts.get("time")),
            )
    return Retrieval(
        result=text,
        retriever=retriever,
        document=document,
        vector=vector,
        database=database,
        time=_timing(inner.get("time")),
        graph=graph,
    )


# The configs read, by their values: the files of a setup share one, built once per process
# rather than once per file (a frozen record: one object serves them all). Kept to a bound.
_CONFIGS: dict[tuple[Any, ...], ModelConfig] = {}
_CONFIGS_KEPT = 1024


def _config(value: Any) -> ModelConfig | None:
    if not isinstance(value, dict):
        return None
    aug = value.get("augmented_generation")
    retriever: str | None = None
    database: str | None = None
    if isinstance(aug, dict):
        retriever, database = aug.get("retriever"), aug.get("database")
        if not (isinstance(retriever, str) and isinstance(database, str)):
            retriever = database = None
    # _str(.) or "", _number(.) or 0.0 and _int(.), written out (a config is read per file)
    provider, model = value.get("provider"), value.get("model")
    provider = provider if isinstance(provider, str) else ""
    model = model if isinstance(model, str) else ""
    temperature = value.get("temperature")
    if type(temperature) is float and temperature - temperature == 0.0:  # a finite float
        temperature = temperature or 0.0  # -0.0 as 0.0
    else:
        temperature = _number(temperature) or 0.0
    tokens = value.get("tokens")
    if type(tokens) is not int:
        tokens = _int(tokens)
    key = (provider, model, temperature, tokens, retriever, database)
    config = _CONFIGS.get(key)
    if config is None:
        if len(_CONFIGS) >= _CONFIGS_KEPT:
            _CONFIGS.clear()
        augmented = None
        if retriever is not None and database is not None:
            augmented = AugmentedGeneration(retriever, database)
        config = _CONFIGS[key] = ModelConfig(provider, model, temperature, tokens, augmented)
    return config


def _usage(value: Any) -> Usage | None:
    if not isinstance(value, dict):
        return None
    return Usage(_int(value.get("prompt_tokens")), _int(value.get("completion_tokens")))


def result_from_json(raw: Any) -> Result:
    """Build the model from parsed JSON; raises UnreadableResult for any other shape."""
    if not isinstance(raw, dict) or len(raw) != 1:
        raise UnreadableResult("expected an object with exactly one key, 'ok' or 'error'")
    if "error" in raw:
        if not isinstance(raw["error"], str):
            raise UnreadableResult("'error' must be a string")
        return ErrorResult(raw["error"])
    ok = raw.get("ok")
    if not isinstance(ok, dict):
        raise UnreadableResult("expected an object with exactly one key, 'ok' or 'error'")
    if not isinstance(ok.get("result"), str):
        raise UnreadableResult("'ok.result' must be a string")
    stats = ok.get("stats")
    if not isinstance(stats, dict):
        return OkResult(ok["result"])
    return OkResult(
        ok["result"],
        OkStats(
            prompt=_str(stats.get("prompt")),
            retrieval=_retrieval(stats.get("retrieval")),
            config=_config(stats.get("config")),
            time=_timing(stats.get("time")),
            generation_time=_timing(stats.get("generation_time")),
            usage=_usage(stats.get("usage")),
            attempts=_int(stats.get("attempts")),
            fingerprint=_str(stats.get("fingerprint")),
            kag_version=_str(stats.get("kag_version")),
        ),
    )


def parse_result(data: bytes) -> Result:
    """Parse the bytes of a result file; raises UnreadableResult."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UnreadableResult(f"not valid JSON ({exc})") from None
    return result_from_json(raw)


# ---------------------------------------------------------------- the writer


def _retrieval_json(retrieval: Retrieval) -> dict[str, Any]:
    inner: dict[str, Any] = {
        "embedding": {"document": retrieval.document, "vec": retrieval.vector},
    }
    if retrieval.database is not None:
        db = retrieval.database
        inner["database"] = {
            db.backend: {
                "vertices": db.vertices,
                "relationships": db.relationships,
                "properties": db.properties,
                "time": db.time.to_json() if db.time else None,
            }
        }
    else:
        inner["database"] = None
    inner["time"] = retrieval.time.to_json() if retrieval.time else None
    out: dict[str, Any] = {"result": retrieval.result, "stats": {retrieval.retriever: inner}}
    if retrieval.graph is not None:
        out["graph"] = graph_to_json(retrieval.graph)
    return out


def result_to_json(result: Result) -> dict[str, Any]:
    """The JSON object of a result file (compatible field order; additive fields only when set)."""
    if isinstance(result, ErrorResult):
        return {"error": result.error}
    s = result.stats
    config = None
    if s.config is not None:
        c = s.config
        aug = c.augmented_generation
        config = {
            "augmented_generation": {"retriever": aug.retriever, "database": aug.database} if aug else None,
            "provider": c.provider,
            "model": c.model,
            "temperature": c.temperature,
            "tokens": c.tokens,
        }
    stats: dict[str, Any] = {
        "prompt": s.prompt,
        "retrieval": _retrieval_json(s.retrieval) if s.retrieval else None,
        "config": config,
        "time": s.time.to_json() if s.time else None,
    }
    if s.generation_time is not None:
        stats["generation_time"] = s.generation_time.to_json()
    if s.usage is not None:
        stats["usage"] = {
            "prompt_tokens": s.usage.prompt_tokens,
            "completion_tokens": s.usage.completion_tokens,
        }
    if s.attempts is not None:
        stats["attempts"] = s.attempts
    if s.fingerprint is not None:
        stats["fingerprint"] = s.fingerprint
    if s.kag_version is not None:
        stats["kag_version"] = s.kag_version
    return {"ok": {"result": result.result, "stats": stats}}


def dump_result(result: Result) -> bytes:
    return orjson.dumps(result_to_json(result), option=orjson.OPT_INDENT_2)


# ---------------------------------------------------------------- the fast reader for grading

# `kag stats` grades the parsed JSON directly instead of building the full result model
# first (the model costs as much CPU as the JSON parse itself). `grading_fields` reads
# exactly the fields `result_from_json` reads for grading, with its validity rules and
# messages.

_SHAPE = "expected an object with exactly one key, 'ok' or 'error'"
NANOS_PER_SEC = 1_000_000_000
#: The largest count (tokens, vertices, relationships, properties) a result file is
#: believed: far above any model's context or retrieved subgraph, and small enough that the
#: sums over any tree stay within the 64-bit integers of JSON readers (orjson among them).
#: A larger count is treated as a negative one is: the file gives no sample of it.
MAX_COUNT = 2**32 - 1


@dataclass(frozen=True, slots=True)
class RetrievalSample:
    """Retrieval numbers of one file: the retriever's time and the database counts."""

    time_ns: int
    vertices: int
    relationships: int
    properties: int


class GradingFields(NamedTuple):
    """What grading reads from a result file. ``error`` is the text of an ``error`` file
    (``response`` None); the others describe an ``ok`` file: ``response`` is ``ok.result``
    verbatim, ``generation_ns`` ``ok.stats.time``, ``context_length`` the UTF-8 byte length
    of ``ok.stats.prompt``, ``retrieval`` the retriever's time with all three database
    counts (>= 0); absent or mistyped values are None. ``retrieval_text`` is
    ``ok.stats.retrieval.result`` of the model (``""`` when the retrieval object has no
    string ``result``, None without a retrieval object), read only when asked, and
    ``retrieval_graph`` its structured ``graph`` (None when the file has none), read with it."""

    error: str | None
    response: str | None
    generation_ns: int | None = None
    context_length: int | None = None
    retrieval: RetrievalSample | None = None
    config: ModelConfig | None = None
    usage: Usage | None = None
    retrieval_text: str | None = None
    retrieval_graph: RetrievedGraph | None = None


def utf8_length(text: str) -> int:
    """The UTF-8 byte length of ``text`` (lone surrogates count 3 bytes)."""
    # `isascii` is O(1) on CPython's compact strings: no copy for the common case.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _raw_timing_ns(value: Any) -> int | None:
    if not isinstance(value, dict):
        return None
    secs, nanos = _int(value.get("secs")), _int(value.get("nanos"))
    if secs is None or nanos is None or secs < 0 or nanos < 0:
        return None
    return secs * NANOS_PER_SEC + nanos


def _raw_retrieval(value: Any) -> RetrievalSample | None:
    if not isinstance(value, dict):
        return None
    stats = value.get("stats")
    if not isinstance(stats, dict) or not stats:
        return None
    inner = next(iter(stats.values()))
    if not isinstance(inner, dict):
        return None
    db = inner.get("database")
    if not isinstance(db, dict) or not db:
        return None
    counts = next(iter(db.values()))
    if not isinstance(counts, dict):
        return None
    time_ns = _raw_timing_ns(inner.get("time"))
    v, r, p = _int(counts.get("vertices")), _int(counts.get("relationships")), _int(counts.get("properties"))
    if time_ns is None or v is None or r is None or p is None:
        return None
    if not (0 <= v <= MAX_COUNT and 0 <= r <= MAX_COUNT and 0 <= p <= MAX_COUNT):
        return None
    return RetrievalSample(time_ns, v, r, p)


def _raw_retrieval_text(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    text = value.get("result")
    return text if isinstance(text, str) else ""


def _raw_retrieval_graph(value: Any) -> RetrievedGraph | None:
    return graph_from_json(value.get("graph")) if isinstance(value, dict) else None


def grading_fields(raw: Any, details: bool = True, retrieval_text: bool = False) -> GradingFields:
    """The grading fields of ``result_from_json(raw)``, without building the model.

    ``details=False`` leaves ``config`` None: a caller that keeps only sums (`kag stats`)
    need not build it for every file. ``usage`` is always read: its token counts are sums
    of `kag stats` too, and two integers cost next to nothing. ``retrieval_text=True`` also
    reads the rendered retrieval text (the evidence measures need it; it can be long, so it
    is not kept otherwise). Raises UnreadableResult with the messages of :func:`result_from_json`.
    """
    if not isinstance(raw, dict) or len(raw) != 1:
        raise UnreadableResult(_SHAPE)
    if "error" in raw:
        error = raw["error"]
        if not isinstance(error, str):
            raise UnreadableResult("'error' must be a string")
        return GradingFields(error, None)
    ok = raw.get("ok")
    if not isinstance(ok, dict):
        raise UnreadableResult(_SHAPE)
    response = ok.get("result")
    if not isinstance(response, str):
        raise UnreadableResult("'ok.result' must be a string")
    stats = ok.get("stats")
    if not isinstance(stats, dict):
        return GradingFields(None, response)
    prompt = stats.get("prompt")
    return GradingFields(
        None,
        response,
        _raw_timing_ns(stats.get("time")),
        utf8_length(prompt) if isinstance(prompt, str) else None,
        _raw_retrieval(stats.get("retrieval")),
        _config(stats.get("config")) if details else None,
        _usage(stats.get("usage")),
        _raw_retrieval_text(stats.get("retrieval")) if retrieval_text else None,
        _raw_retrieval_graph(stats.get("retrieval")) if retrieval_text else None,
    )


def parse_grading_fields(data: bytes, details: bool = True, retrieval_text: bool = False) -> GradingFields:
    """:func:`grading_fields` of the bytes of a result file; raises UnreadableResult like
    :func:`parse_result`. Every byte is parsed (orjson): a file that is not valid JSON is
    unreadable, wherever the defect is."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UnreadableResult(f"not valid JSON ({exc})") from None
    return grading_fields(raw, details, retrieval_text)


# ---------------------------------------------------------------- the fast reader for search

_BOM = b"\xef\xbb\xbf"
_simd_parser: simdjson.Parser | None = None


def simd_result_object(data: bytes) -> simdjson.Object | None:
    """The document ``data`` parsed by simdjson when it is an object of one key (the shape
    of every result file), else None (not one, or not sure: a byte order mark, which
    simdjson accepts and orjson refuses, or a document simdjson refuses). The object is a
    proxy into the one parser's buffer: it must die before the next call."""
    global _simd_parser
    if data.startswith(_BOM):
        return None
    if _simd_parser is None:
        _simd_parser = simdjson.Parser()
    try:
        doc = _simd_parser.parse(data)
    except (ValueError, RuntimeError):  # UnicodeDecodeError is a ValueError
        return None
    if type(doc) is not simdjson.Object or len(doc) != 1:
        return None
    return doc


def simd_response(data: bytes) -> str | ErrorResult | None:
    """The two well-formed shapes read through simdjson, which validates the whole
    document (syntax, UTF-8, numbers) without building a Python object for anything but
    the response: no list of 768 floats per KAG file. None = not sure, ask orjson.

    simdjson rejects some documents orjson accepts (integers past 64 bits, nesting near
    1,024 levels): those come back None. It accepts two that orjson rejects or reads
    otherwise, and both are left to orjson here: a leading UTF-8 byte order mark, and a
    repeated key (simdjson's lookup finds the first, orjson keeps the last; ``len``
    counts both). The proxies into the parser's buffer die with this call's frame, as
    simdjson requires before the next parse (a leaked one makes it refuse, and orjson
    takes over).
    """
    doc = simd_result_object(data)
    if doc is None:
        return None
    ok = doc.get("ok")
    if type(ok) is simdjson.Object:
        if list(ok.keys()).count("result") == 1:
            text = ok["result"]
            if type(text) is str:
                return text
        return None
    error = doc.get("error")
    return ErrorResult(error) if type(error) is str else None


def parse_response(data: bytes) -> str | ErrorResult:
    """The response (``ok.result``, untrimmed) or the ``error`` of a result file, with
    exactly the verdict of :func:`parse_result`: it raises UnreadableResult with the same
    message for the same files.

    Faster (no ``ok.stats`` model is built and, through :func:`simd_response`, no Python
    object for the stats at all): the two well-formed shapes are recognised here, and
    anything else goes to :func:`result_from_json`, which holds the rules and the
    messages. Exact because readability never depends on ``ok.stats`` (missing or
    mistyped optional fields count as absent), and orjson builds plain ``dict``/``str``
    objects.
    """
    fast = simd_response(data)
    if fast is not None:
        return fast
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError:
        parse_result(data)  # raises UnreadableResult with the canonical message
        raise  # not reached: parse_result rejects what orjson rejects
    if type(raw) is dict and len(raw) == 1:
        ok = raw.get("ok")
        if type(ok) is dict:
            text = ok.get("result")
            if type(text) is str:
                return text
        else:
            error = raw.get("error")
            if type(error) is str:
                return ErrorResult(error)
    result = result_from_json(raw)
    return result if isinstance(result, ErrorResult) else result.result
