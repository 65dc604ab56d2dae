"""Output of ``kag stats find``: grep-like lines, JSON Lines, or one JSON document.

One renderer per :class:`~kag.render.formats.FindFormat` member (``RENDERERS``; a test
checks the mapping is exhaustive): a stream part called for each searched file as it
finishes, and a final part once the search is over. Every response is flattened to one
printable line, so no model output can drive the terminal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import regex

from kag.grading.search.options import FileOutcome, FileStatus, Hit, SearchResult
from kag.render.formats import FindFormat
from kag.results.tree import relative_path
from kag.textsafe import escape_controls

_LINE_BREAK = regex.compile(r"\r\n|[\r\n]")
_COLOR = {"path": "\x1b[35m", "offset": "\x1b[32m", "match": "\x1b[1;31m", "reset": "\x1b[0m"}


def flatten(text: str) -> str:
    """One printable line: newlines become ``⏎``, tabs spaces, and other control
    characters (a model may emit ESC) ``\\xNN`` (:func:`kag.textsafe.escape_controls`) so
    no response can drive the terminal."""
    return escape_controls(_LINE_BREAK.sub("⏎", text).replace("\t", " "))


def format_hit(hit: Hit, root: str, color: bool = False) -> str:
    """``<dataset>/<question>/<file>:<offset>: …before[match]after…`` (``…`` marks cut
    context); with ``color`` the path, offset and match get grep's colours."""
    rel = escape_controls(relative_path(root, hit.file.path))
    # An inverted hit shows the head of the response, with no brackets.
    body = "" if hit.match is None else f"[{flatten(hit.match)}]"
    if color and body:
        body = f"{_COLOR['match']}{body}{_COLOR['reset']}"
    lead, tail = ("…" if hit.cut_before else ""), ("…" if hit.cut_after else "")
    text = f"{lead}{flatten(hit.before)}{body}{flatten(hit.after)}{tail}"
    if color:
        return (
            f"{_COLOR['path']}{rel}{_COLOR['reset']}:{_COLOR['offset']}{hit.offset}{_COLOR['reset']}: {text}"
        )
    return f"{rel}:{hit.offset}: {text}"


def hit_to_json(hit: Hit) -> dict[str, Any]:
    """The ``--format jsonl`` object (and an item of the JSON document's ``hits``)."""
    return {
        "path": hit.file.path,
        "dataset": hit.file.dataset,
        "question": hit.file.question,
        "setup": hit.file.setup,
        "offset": hit.offset,
        "match": hit.match,
        "context": hit.context,
    }


def result_to_json(result: SearchResult, counts: bool = False) -> dict[str, Any]:
    """The compatible document ``{matches, total, paths}`` (docs/architecture.md) plus
    additive ``hits``, ``unreadable_files``, ``error_files``, ``timed_out`` and, with
    ``counts``, per-setup ``counts``."""
    doc: dict[str, Any] = {
        "matches": result.matches,
        "total": result.total,
        "paths": list(result.paths),
        "hits": [hit_to_json(h) for h in result.hits],
        "unreadable_files": len(result.unreadable),
        "error_files": result.error_files,
        "timed_out": list(result.timed_out),
    }
    if counts:
        doc["counts"] = {s: {"matches": c.matched, "total": c.total} for s, c in result.per_setup.items()}
    return doc


@dataclass(frozen=True)
class View:
    """How a search is shown: the format, and the ``-c``/``-l``/colour choices."""

    format: FindFormat
    root: str
    color: bool = False
    files_only: bool = False
    counts: bool = False
    null: bool = False  # -0: the paths of -l, each ended by NUL instead of a newline


def _text_stream(outcome: FileOutcome, view: View) -> list[str]:
    if view.counts:
        return []
    if view.files_only:  # for xargs: the exact path (shown escaped, it would name no file)
        return [outcome.file.path]
    return [format_hit(hit, view.root, view.color) for hit in outcome.hits]


def _text_finish(result: SearchResult, view: View) -> list[str]:
    if not view.counts:
        return []
    return [f"{escape_controls(setup)}:{count.matched}" for setup, count in result.per_setup.items()]


def _jsonl_stream(outcome: FileOutcome, view: View) -> list[str]:
    return [] if view.counts else [orjson.dumps(hit_to_json(hit)).decode() for hit in outcome.hits]


def _jsonl_finish(result: SearchResult, view: View) -> list[str]:
    if not view.counts:
        return []
    return [
        orjson.dumps({"setup": setup, "matches": count.matched, "total": count.total}).decode()
        for setup, count in result.per_setup.items()
    ]


def _json_stream(outcome: FileOutcome, view: View) -> list[str]:
    return []  # one document at the end


def _json_finish(result: SearchResult, view: View) -> list[str]:
    return [orjson.dumps(result_to_json(result, counts=view.counts), option=orjson.OPT_INDENT_2).decode()]


Renderer = tuple[Callable[[FileOutcome, View], list[str]], Callable[[SearchResult, View], list[str]]]

RENDERERS: dict[FindFormat, Renderer] = {
    FindFormat.TEXT: (_text_stream, _text_finish),
    FindFormat.JSON: (_json_stream, _json_finish),
    FindFormat.JSONL: (_jsonl_stream, _jsonl_finish),
}


def stream_lines(outcome: FileOutcome, view: View) -> list[str]:
    """Output lines for one file as it is searched (only selected files have any)."""
    if outcome.status is not FileStatus.MATCHED:
        return []
    return RENDERERS[view.format][0](outcome, view)


def final_lines(result: SearchResult, view: View) -> list[str]:
    """Output lines once the search is over (the JSON document, the ``-c`` counts)."""
    return RENDERERS[view.format][1](result, view)


def summary_line(result: SearchResult, invert: bool) -> str:
    """The one-line summary of a search (stderr): files selected out of files searched, and
    the ``error`` files among them, which hold no response to search."""
    if not result.total:
        return "No result file was searched."
    verb = "did not match" if invert else "matched"
    line = f"{result.matches} file(s) {verb} out of {result.total}"
    if result.error_files:
        line += f" ({error_files_note(result)})"
    return line + "."


def error_files_note(result: SearchResult) -> str:
    """What the search could not look at: the ``error`` files (said once per search)."""
    return f"{result.error_files} error file(s) skipped: no response to search; kag -v stats find lists them"
