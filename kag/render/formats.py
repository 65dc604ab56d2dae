"""The output formats, one enum per command family.

Cheap to import (no renderer is loaded), so the commands can declare their ``--format``
options with these types and ``kag --help`` stays fast. Each renderer module maps every
member of its family's enum to one renderer (``RENDERERS``); a test checks that every
mapping is exhaustive.
"""

from __future__ import annotations

from enum import StrEnum


class StatsFormat(StrEnum):
    """``kag stats``: text, JSON and markdown of the numbers, the HTML page, JUnit XML, and
    one row per graded file (CSV, JSON Lines). What each needs and which renderer draws it
    is one line of ``kag.commands._plans.STATS_PLANS``."""

    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"
    HTML = "html"
    JUNIT = "junit"
    CSV = "csv"
    JSONL = "jsonl"


class ReportFormat(StrEnum):
    """``kag stats compare``: text, JSON and markdown of the comparisons, or the HTML page
    (:mod:`kag.render.html`), or JUnit XML; one line each of
    ``kag.commands._plans.COMPARE_PLANS``."""

    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"
    HTML = "html"
    JUNIT = "junit"  # JUnit XML for CI systems (:mod:`kag.render.junit`)


class TableFormat(StrEnum):
    """``kag stats flips`` and ``kag stats impact``: what a comparison, a flip list or an
    impact renders as on its own (and ``compare --epochs all``)."""

    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"


class ExportFormat(StrEnum):
    """The per-file exports of ``kag stats --format csv|jsonl``: one row per graded file
    (:mod:`kag.render.export`)."""

    CSV = "csv"
    JSONL = "jsonl"


class FindFormat(StrEnum):
    """The output formats of ``kag stats find``; each has one renderer in ``kag.render.find.RENDERERS``."""

    TEXT = "text"
    JSON = "json"
    JSONL = "jsonl"


class TripletsFormat(StrEnum):
    """``kag triplets``."""

    TEXT = "text"
    JSON = "json"


class Irt2Format(StrEnum):
    """``kag irt2``."""

    TEXT = "text"
    JSON = "json"


class GenerationFormat(StrEnum):
    """``kag generation``: the answer, or the result file's JSON (:mod:`kag.render.benchmark`)."""

    TEXT = "text"
    JSON = "json"


class JudgeFormat(StrEnum):
    """``kag stats judge`` (:mod:`kag.render.judge`)."""

    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"
    HTML = "html"
    JUNIT = "junit"


class RunsFormat(StrEnum):
    """``kag stats runs`` (:mod:`kag.render.runs`)."""

    TEXT = "text"
    JSON = "json"
