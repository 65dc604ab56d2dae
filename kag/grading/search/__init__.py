"""Regex search over the model responses of a result tree (`kag stats find`).

:mod:`.options` (what to search, what it gives), :mod:`.match` (one file), :mod:`.walk`
(the tree in chunks, in this process or in the worker pool), :mod:`.run` (the search and
its tally). The public names are re-exported here.
"""

from kag.grading.search.match import literal_of
from kag.grading.search.options import (
    DEFAULT_CONTEXT,
    DEFAULT_TIMEOUT,
    FileOutcome,
    FileStatus,
    Hit,
    SearchOptions,
    SearchResult,
    SetupCount,
    compile_pattern,
)
from kag.grading.search.run import search
from kag.grading.search.walk import list_search_files, undecodable_part
from kag.results.codec import parse_response
from kag.results.tree import iter_units, iter_walk, relative_path

__all__ = [
    "DEFAULT_CONTEXT",
    "DEFAULT_TIMEOUT",
    "FileOutcome",
    "FileStatus",
    "Hit",
    "SearchOptions",
    "SearchResult",
    "SetupCount",
    "compile_pattern",
    "iter_units",
    "iter_walk",
    "list_search_files",
    "literal_of",
    "parse_response",
    "relative_path",
    "search",
    "undecodable_part",
]
