"""The HTML pieces of a question's page (kag/render/view.py): the triplet table and the
drawn subgraph, escaped whatever the retrieved text holds."""

from __future__ import annotations

import html
import os
from pathlib import Path

import pytest

from kag.render.view import svg_graph, triplet_table
from kag.view.graph import build_graph


def _cell_by_cell(text: str) -> str:
    graph = build_graph(text)
    e, prop = html.escape, ' class="prop"'
    return "".join(
        f"<tr{prop if t.property else ''}><td>{e(t.subject)}</td><td>{e(t.relation)}</td>"
        f"<td>{e(t.object)}</td></tr>"
        for t in graph.triplets
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        '(1)-[:TREATS]->(2)\n(1)-[name]->("Vitamin C")\n',
        '(<b>&)-[:R"\']->(<script>window.pwned=1</script>)\n(x)-[k]->("a & b < c")\n',
        '(a\x00b)-[:R]->(c)\n(d)-[:S\x01]->(e)\n(f)-[g]->("\x02")\n',  # the table's own separators
    ],
)
def test_the_triplet_table_is_each_cell_escaped(text: str) -> None:
    assert str(triplet_table(build_graph(text))) == _cell_by_cell(text)


def test_the_drawn_graph_escapes_its_labels() -> None:
    svg = str(svg_graph(build_graph('(1)-[:R]->(2)\n(2)-[name]->("<script>window.pwned=1</script>")\n')))
    assert "<script>" not in svg and "&lt;script&gt;" in svg and svg.count('<g class="node"') == 2


@pytest.mark.parametrize("selected", [{"q": ["^no response reads like this$"]}, {}])
def test_an_export_never_removes_through_a_link_at_its_q_folder(
    tmp_path: Path, selected: dict[str, list[str]]
) -> None:
    from kag.errors import InputError
    from kag.render.view import export
    from tests.view.helpers import make_tree, open_view

    view = open_view(*make_tree(tmp_path), tmp_path / "index.sqlite")
    out = tmp_path / "site"
    assert export(view, out, "t", {}, 10) == 8
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "q").rename(elsewhere / "q")  # the earlier pages, and a link to them where q/ was
    (out / "q").symlink_to(elsewhere / "q")
    kept = sorted(os.listdir(elsewhere / "q"))
    with pytest.raises(InputError, match=r"site/q: a symbolic link"):
        export(view, out, "t", selected, 10)
    assert sorted(os.listdir(elsewhere / "q")) == kept and len(kept) == 8
    assert (out / "q").is_symlink()


def test_a_graph_s_json_cannot_close_its_element_and_reads_back_unchanged() -> None:
    import json

    from kag.render.view import json_in_html

    hostile = {
        "label": "</script><script>window.pwned=1</script><!-- & ' \" \u2028 <img src=x onerror=alert(1)>"
    }
    text = str(json_in_html(hostile))
    assert not {"<", ">", "&", "'"} & set(text)
    assert json.loads(text) == hostile
