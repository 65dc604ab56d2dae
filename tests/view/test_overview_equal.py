"""The overview of `kag view` (``/api/setups`` and the page) equals `kag stats --format json`,
`kag stats compare --format json` and `kag stats impact --format json` on the same inputs,
field for field, for every registered measure; its tables have the cells and its charts
the drawing of the `kag stats compare --format html` page. On the example tree, the
Med-KAG tree and an epochs tree, with ``--extract letter``."""

from __future__ import annotations

import html
import re
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from kag.cli import app
from kag.datasets import load_datasets
from kag.grading.measures import registered
from kag.view.index import Index, Tree
from kag.view.query import View
from tests.conftest import med_kag_root
from tests.view.helpers import serving
from tests.view.test_query import _epoch_tree

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass(frozen=True)
class Case:
    datasets: Path
    tree: Path
    prefix: str = ""


def _case(name: str, tmp: Path) -> Case:
    if name == "examples":
        return Case(EXAMPLES / "dataset" / "datasets.json", EXAMPLES / "results")
    if name == "med-kag":
        root = med_kag_root()
        if root is None:
            pytest.skip("the Med-KAG data is not here")
        return Case(root / "datasets" / "mirage.json", root / "results", "wekgr-")
    datasets, tree = _epoch_tree(tmp)
    return Case(datasets, tree)


@dataclass(frozen=True)
class Seen:
    """What the viewer and the commands show of one case."""

    api: dict[str, Any]
    page: str
    stats: dict[str, Any]
    compare: dict[str, Any]
    impacts: list[dict[str, Any]]
    compare_page: str


def _cli(case: Case, *args: str) -> str:
    common = ["stats", "-d", str(case.datasets), "-r", str(case.tree), "--prefix", case.prefix]
    result = runner.invoke(app, [*common, "--extract", "letter", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def _impacts(case: Case) -> list[dict[str, Any]]:
    """`kag stats impact`'s blocks; none when no setup retrieves (the command refuses)."""
    common = ["stats", "-d", str(case.datasets), "-r", str(case.tree), "--prefix", case.prefix]
    result = runner.invoke(app, [*common, "--extract", "letter", "impact", "--format", "json"])
    if result.exit_code == 2 and "no setup retrieves" in result.output:
        return []
    assert result.exit_code == 0, result.output
    impacts: list[dict[str, Any]] = orjson.loads(result.stdout)["impacts"]
    return impacts


@pytest.fixture(scope="module", params=["examples", "med-kag", "epochs"])
def seen(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seen]:
    tmp = tmp_path_factory.mktemp(request.param)
    case = _case(request.param, tmp)
    trees = [Tree("", str(case.tree.resolve()))]
    index = Index(tmp / "index.sqlite", load_datasets(case.datasets), trees, case.prefix, "letter")
    view = View(index, scan=True)
    with serving(view) as url:
        with urllib.request.urlopen(url + "api/setups") as reply:  # waits for the comparisons
            api = orjson.loads(reply.read())
        view.analysis(None).done.wait()  # the page then shows them too
        with urllib.request.urlopen(url) as reply:
            page = reply.read().decode()
    yield Seen(
        api,
        page,
        orjson.loads(_cli(case, "--format", "json")),
        orjson.loads(_cli(case, "compare", "--format", "json")),
        _impacts(case),
        _cli(case, "compare", "--format", "html"),
    )
    index.close()


def test_the_api_equals_the_commands_documents(seen: Seen) -> None:
    assert seen.api["stats"] == seen.stats
    assert seen.api["compare"] == seen.compare
    assert seen.api["impacts"] == seen.impacts
    assert seen.stats["setups"] and seen.compare["comparisons"]


def _values(doc: object, keys: frozenset[str], path: str = "") -> list[tuple[str, object]]:
    """Every (path, value) of ``doc`` under one of ``keys``, in document order."""
    found: list[tuple[str, object]] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k in keys:
                found.append((f"{path}/{k}", v))
            found += _values(v, keys, f"{path}/{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += _values(v, keys, f"{path}/{i}")
    return found


@pytest.mark.parametrize("measure", [m.name for m in registered()])
def test_every_measure_has_its_values_of_kag_stats(seen: Seen, measure: str) -> None:
    m = next(m for m in registered() if m.name == measure)
    keys = frozenset(m.json_keys)
    assert _values(seen.api["stats"], keys) == _values(seen.stats, keys)
    if measure in ("accuracy", "extracted"):  # the measures every tree of these has
        assert _values(seen.stats, keys)


def _cells(table: str) -> list[tuple[str, ...]]:
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.DOTALL)
    return [
        tuple(html.unescape(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.DOTALL)) for r in rows
    ]


def _part(page: str, start: str, end: str) -> str:
    at = page.index(start)
    return page[at : page.index(end, at)]


def test_the_page_has_the_tables_of_the_html_report(seen: Seen) -> None:
    ranking = _cells(_part(seen.compare_page, '<table class="ranking">', "</table>"))
    setups = _cells(_part(seen.page, '<div id="setups">', "</table>"))
    per_dataset = _cells(_part(seen.page, '<div id="per-dataset">', "</table>"))
    assert setups[0] == ranking[0] and per_dataset[0] == ranking[0][1:]
    assert setups[1:] == [r for r in ranking[1:] if not r[1].startswith("└ ")]
    assert [r[1:] for r in per_dataset[1:]] == [r[2:] for r in ranking[1:] if r[1].startswith("└ ")]
    assert "XACC%" in ranking[0]  # --extract letter shows the extracted accuracy


def _svgs(page: str) -> list[str]:
    return re.findall(r'<svg class="chart".*?</svg>', page, re.DOTALL)


def test_the_page_draws_the_charts_of_the_html_report(seen: Seen) -> None:
    charts = _svgs(seen.compare_page)
    assert charts and _svgs(seen.page) == charts
    labels = [re.search(r'aria-label="([^"]*)"', c).group(1) for c in charts]  # type: ignore[union-attr]
    assert "Accuracy with 95% CI per setup and dataset" in labels
    assert any(label.startswith("Accuracy difference to ") for label in labels)
    hurt = [
        line
        for line in re.findall(r'<p class="legend">(.*?)</p>', seen.compare_page)
        if "hurt questions" in line
    ]
    assert all(line in seen.page for line in hurt)
    if seen.impacts:
        assert "Questions helped and hurt by retrieval per size bucket" in labels
