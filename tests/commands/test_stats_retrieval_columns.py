"""Retrieval quality in the formats besides JSON: the markdown and HTML columns and the
JUnit suite properties carry the figures of the JSON block, on the example tree."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from typer.testing import CliRunner

from kag.cli import app

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "retrieval"
ARGS = ["stats", "-d", str(EXAMPLE / "datasets.json"), "-r", str(EXAMPLE / "results"), "-q"]
runner = CliRunner()


def _run(*extra: str) -> str:
    out = runner.invoke(app, [*ARGS, *extra])
    assert out.exit_code == 0, out.output
    return out.stdout


def _blocks() -> dict[str, dict[str, object] | None]:
    doc = json.loads(_run("--format", "json"))
    return {s["setup"]: s["overall"]["retrieval_quality"] for s in doc["setups"]}


def _pct(x: object) -> str:
    return "" if x is None else f"{100 * float(x):.2f}"  # type: ignore[arg-type]


def test_the_markdown_columns_are_the_json_block_s_figures() -> None:
    blocks = _blocks()
    md = _run("--format", "markdown").splitlines()
    header = next(line for line in md if line.startswith("| Setup"))
    heads = [h.strip() for h in header.strip("|").split("|")]
    seen = 0
    for line in md:
        m = re.match(r"\| \*\*(.+?)\*\* \|", line)
        if not m:
            continue
        cells = dict(zip(heads, (c.strip() for c in line.strip("|").split("|")), strict=True))
        block = blocks[m.group(1)]
        if block is None:  # a setup without retrieval leaves them blank
            assert cells["REACHED%"] == cells["E-RECALL%"] == cells["T-RECALL%"] == ""
            continue
        seen += 1
        assert cells["REACHED%"] == _pct(block["reached"] / block["questions"])  # type: ignore[operator]
        assert cells["E-RECALL%"] == _pct(block["entity_recall"])
        assert cells["T-RECALL%"] == _pct(block["triple_recall"])
    assert seen == 2


def test_the_html_page_has_the_columns() -> None:
    page = _run("--format", "html")
    for head in ("REACHED%", "E-RECALL%", "T-RECALL%"):
        assert head in page


def test_the_junit_suites_carry_the_block_as_properties() -> None:
    blocks = _blocks()
    root = ET.fromstring(_run("--format", "junit"))
    checked = 0
    for suite in root.iter("testsuite"):
        setup = suite.get("name", "").split("/")[0]
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        block = blocks.get(setup)
        if block is None:  # null in JSON: the key with an empty value
            assert {k: v for k, v in props.items() if str(k).startswith("retrieval_quality")} == {
                "retrieval_quality": ""
            }
            continue
        checked += 1
        assert json.loads(props["retrieval_quality.questions"] or "") == block["questions"]
        assert json.loads(props["retrieval_quality.entity_recall"] or "") == block["entity_recall"]
        assert json.loads(props["retrieval_quality.outcomes"] or "") == block["outcomes"]
    assert checked == 2


def test_kag_view_s_overview_shows_the_same_columns(tmp_path: Path) -> None:
    from kag.render.view_overview import overview_context
    from tests.view.helpers import open_view

    view = open_view(EXAMPLE / "datasets.json", EXAMPLE / "results", tmp_path / "i.sqlite")
    page = str(overview_context(view, None, wait=True)["setups_table"])
    blocks = _blocks()
    for head in ("REACHED%", "E-RECALL%", "T-RECALL%"):
        assert head in page
    rust = blocks["rust-kag"]
    assert rust is not None
    assert _pct(rust["entity_recall"]) in page
