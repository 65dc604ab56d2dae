"""The grading fields of a result file read through simdjson, for a reader of many long files.

:func:`kag.results.codec.parse_grading_fields` builds every value of the file with orjson,
the 768 floats of a KAG file's embedding among them, to keep a dozen. Here simdjson
validates the whole document (syntax, UTF-8, numbers) and only the objects that grading
reads become Python values: a skeleton of the file, which the same
:func:`~kag.results.codec.grading_fields` then reads, so the rules and the messages stay
in one place. Any document this is not sure of goes to ``parse_grading_fields``: one with
a byte order mark (simdjson accepts it, orjson does not), a repeated key in an object read
here (simdjson's lookup finds the first, orjson keeps the last), a number or a nesting
depth simdjson refuses, and every shape that is not a well-formed result.
"""

from __future__ import annotations

from typing import Any

import simdjson

from kag.results.codec import GradingFields, grading_fields, parse_grading_fields, simd_result_object

# From this size on simdjson is the faster reader (a KAG file with its embedding); below
# it, the cost of its calls from Python outweighs what it saves on a short file.
SIMD_FROM = 16 * 1024


def read_grading_fields(data: bytes, details: bool, retrieval_text: bool) -> GradingFields:
    """``parse_grading_fields(data, details, retrieval_text)``, through simdjson for a long
    file; raises what it raises."""
    if len(data) < SIMD_FROM:
        return parse_grading_fields(data, details, retrieval_text)
    return simd_grading_fields(data, details, retrieval_text)


def simd_grading_fields(data: bytes, details: bool, retrieval_text: bool) -> GradingFields:
    """``parse_grading_fields(data, details, retrieval_text)`` through simdjson (orjson when
    it is not sure); raises what it raises."""
    skeleton = _skeleton(data, retrieval_text)
    if skeleton is None:
        return parse_grading_fields(data, details, retrieval_text)
    return grading_fields(skeleton, details, retrieval_text)


def _skeleton(data: bytes, retrieval_text: bool) -> dict[str, Any] | None:
    """What grading reads of a well-formed result file, as plain values (None: not sure).
    The parser's proxies die with this call, as simdjson requires before its next parse."""
    doc = simd_result_object(data)
    if doc is None:
        return None
    error = doc.get("error")
    if error is not None:
        return {"error": error} if type(error) is str else None
    ok = doc.get("ok")
    if type(ok) is not simdjson.Object or not _unique(ok):
        return None
    result = ok.get("result")
    if type(result) is not str:
        return None
    stats = ok.get("stats")
    if type(stats) is not simdjson.Object:
        return {"ok": {"result": result}}
    if not _unique(stats):
        return None
    prompt = stats.get("prompt")
    skeleton = {
        "prompt": prompt if type(prompt) is str else None,
        "time": _small(stats.get("time")),
        "config": _small(stats.get("config")),
        "usage": _small(stats.get("usage")),
    }
    retrieval = stats.get("retrieval")
    if type(retrieval) is simdjson.Object:
        if not _unique(retrieval):
            return None
        found = _retrieval_stats(retrieval.get("stats"))
        if found is False:
            return None
        text = retrieval.get("result") if retrieval_text else None
        skeleton["retrieval"] = {"result": text if type(text) is str else None, "stats": found}
        if retrieval_text and retrieval.get("graph") is not None:
            return None  # a recorded graph (kag.results.codec reads it): orjson decides
    return {"ok": {"result": result, "stats": skeleton}}


def _retrieval_stats(stats: Any) -> dict[str, Any] | None | bool:
    """``retrieval.stats`` as grading reads it: its first retriever's ``database`` (the
    first backend's counts) and ``time``; False when not sure."""
    if type(stats) is not simdjson.Object or len(stats) == 0:
        return None
    if not _unique(stats):
        return False
    name = next(iter(stats.keys()))
    inner = stats[name]
    if type(inner) is not simdjson.Object:
        return {name: None}
    if not _unique(inner):
        return False
    db = inner.get("database")
    database: dict[str, Any] | None = None
    if type(db) is simdjson.Object and len(db) > 0:
        if not _unique(db):
            return False
        backend = next(iter(db.keys()))
        database = {backend: _small(db[backend])}
    return {name: {"database": database, "time": _small(inner.get("time"))}}


def _unique(value: Any) -> bool:
    """Whether ``value`` is an object with no key twice."""
    if type(value) is not simdjson.Object:
        return False
    return len(set(value.keys())) == len(value)


def _small(value: Any) -> Any:
    """A small object as a dict (its repeated keys as orjson reads them: the last value at
    the first place); any other value as None, which grading reads as it reads any non-object."""
    return value.as_dict() if type(value) is simdjson.Object else None
