"""kag.render: every member of every format enum has exactly one renderer; the HTML
templates ship with the package and escape whatever they are given."""

from __future__ import annotations

from enum import StrEnum
from importlib import resources

import pytest
from markupsafe import Markup

from kag.commands.stats import FORMATS as STATS_FORMATS
from kag.render import benchmark, compare, export, find, irt2, judge, runs, stats, triplets
from kag.render.formats import (
    ExportFormat,
    FindFormat,
    GenerationFormat,
    Irt2Format,
    JudgeFormat,
    ReportFormat,
    RunsFormat,
    TableFormat,
    TripletsFormat,
)
from kag.render.table import Table, table_html
from kag.render.templating import environment

# (family enum, the mapping of its renderers): each must cover every member, and nothing else.
MAPPINGS = [
    (TableFormat, stats.RENDERERS),
    (TableFormat, compare.COMPARISON_RENDERERS),
    (TableFormat, compare.FLIP_RENDERERS),
    (TableFormat, compare.IMPACT_RENDERERS),
    (FindFormat, find.RENDERERS),
    (ExportFormat, export.RENDERERS),
    (TripletsFormat, triplets.RENDERERS),
    (Irt2Format, irt2.RENDERERS),
    (GenerationFormat, benchmark.GENERATION_RENDERERS),
    (JudgeFormat, judge.RENDERERS),
    (RunsFormat, runs.RENDERERS),
]


@pytest.mark.parametrize(("family", "renderers"), MAPPINGS)
def test_every_format_maps_to_one_renderer(family: type[StrEnum], renderers: dict[StrEnum, object]) -> None:
    assert set(renderers) == set(family)
    assert len({id(r) for r in renderers.values()}) == len(family)


def test_stats_formats_are_the_compare_formats_and_the_exports() -> None:
    """`kag stats --format` takes every format of `kag stats compare` and every per-question
    export, once (the families are separate enums: a new one of either forces no renderer
    on `flips` or `impact`)."""
    assert sorted(STATS_FORMATS) == sorted({f.value for f in ReportFormat} | {f.value for f in ExportFormat})
    assert not {f.value for f in ReportFormat} & {f.value for f in ExportFormat}


def test_templates_ship_in_the_package() -> None:
    names = {p.name for p in resources.files("kag.render").joinpath("templates").iterdir()}
    assert {"page.html.j2", "table.html.j2", "svg.html.j2"} <= names


def test_the_environment_autoescapes_every_template() -> None:
    env = environment()
    hostile = "<script>alert('x')</script> & \"q\""
    assert env.from_string("{{ v }}").render(v=hostile) == (
        "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;q&quot;"
    )
    assert env.from_string("{{ v }}").render(v=Markup("<b>ok</b>")) == "<b>ok</b>"


def test_table_html_escapes_headers_and_cells() -> None:
    table = Table(("<h>",), (("a<b>&'\"",), ("x",)), ("l",), (False, True))
    assert table_html(table, "c") == (
        '<table class="c"><thead><tr><th class="l">&lt;h&gt;</th></tr></thead><tbody>'
        '<tr><td class="l">a&lt;b&gt;&amp;&#x27;&quot;</td></tr><tr class="sub"><td class="l">x</td></tr>'
        "</tbody></table>"
    )
