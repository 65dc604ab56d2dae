"""The overview of `kag view` (``/api/setups`` and the page) equals `kag stats --format json`,
`kag stats compare --format json` and `kag stats impact --format json` on the same inputs,
field for field, for every registered measure; its tables have the cells and its charts
the drawing of the `kag stats compare --format html` page. On the example tree, the
Med-KAG tree and an epochs tree, with ``--extract letter``; on the example and epochs trees
also with a judge's cached verdicts (`kag view --judge-provider --judge-model` against
`kag stats --judge PROVIDER/MODEL`)."""

from __future__ import annotations

import html
import re
import shutil
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
    config: Path | None = None  # naming the judge whose verdicts are cached in the tree


JUDGE = ("oa", "judge-model")


def _case(name: str, tmp: Path) -> Case:
    tree_name, _, judged = name.partition("+")
    if tree_name == "examples":
        case = Case(EXAMPLES / "dataset" / "datasets.json", EXAMPLES / "results")
        if judged:  # the verdicts are cached in the tree: a copy of it
            shutil.copytree(case.tree, tmp / "results", symlinks=True)
            case = Case(case.datasets, tmp / "results")
    elif tree_name == "med-kag":
        root = med_kag_root()
        if root is None:
            pytest.skip("the Med-KAG data is not here")
        case = Case(root / "datasets" / "mirage.json", root / "results", "wekgr-")
    else:
        case = Case(*_epoch_tree(tmp))
    if judged:
        case = Case(case.datasets, case.tree, case.prefix, seed_verdicts(case.datasets, case.tree, tmp))
    return case


def seed_verdicts(datasets: Path, tree: Path, folder: Path) -> Path:
    """Cache the verdicts of :data:`JUDGE` as `kag stats judge --mcq` keys them (its own items,
    keys and cache) for most answers of ``tree``: one in four has none, some are UNUSABLE,
    and some disagree with the strict grade; returns the configuration file naming the judge."""
    from kag.generation.config import load_config
    from kag.grading.judge import Judge, Verdict, VerdictCache, collect_items, judge_endpoint, verdict_key
    from kag.grading.judge_prompt import load_judge_prompt

    config = folder / "config.toml"
    config.write_text('[providers.oa]\ntype = "OpenAI"\nurl = "http://127.0.0.1:9/v1"\nkey = ""\n')
    judge = Judge(*JUDGE)
    endpoint = judge_endpoint(load_config(config), judge)
    prompt = load_judge_prompt(None).sha256
    cache = VerdictCache(tree, judge)
    items = collect_items(load_datasets(datasets), tree, with_mcq=True).items
    assert items
    for i, item in enumerate(items):
        if i % 4 == 3:
            continue
        if i % 7 == 5:
            verdict = Verdict.UNUSABLE
        else:
            verdict = Verdict.CORRECT if item.exact == (i % 5 != 0) else Verdict.INCORRECT
        cache.write(verdict_key(judge, prompt, item, endpoint), verdict, f"{verdict.value} (seeded)")
    return config


def judge_args(case: Case) -> list[str]:
    """`kag stats --judge` for the judge of ``case`` (none without one)."""
    if case.config is None:
        return []
    return ["--judge", "/".join(JUDGE), "--config", str(case.config)]


@dataclass(frozen=True)
class Seen:
    """What the viewer and the commands show of one case."""

    api: dict[str, Any]
    page: str
    stats: dict[str, Any]
    compare: dict[str, Any]
    impacts: list[dict[str, Any]]
    compare_page: str
    stats_page: str
    judged: bool


def _cli(case: Case, *args: str) -> str:
    common = ["stats", "-d", str(case.datasets), "-r", str(case.tree), "--prefix", case.prefix]
    result = runner.invoke(app, [*common, "--extract", "letter", *judge_args(case), *args])
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


@pytest.fixture(scope="module", params=["examples", "med-kag", "epochs", "examples+judge", "epochs+judge"])
def seen(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seen]:
    tmp = tmp_path_factory.mktemp(request.param.replace("+", "-"))
    case = _case(request.param, tmp)
    trees = [Tree("", str(case.tree.resolve()))]
    verdicts = None
    if case.config is not None:  # as `kag view --judge-provider oa --judge-model judge-model`
        from kag.view.verdicts import VerdictReader

        verdicts = VerdictReader(*JUDGE, case.config, None)
    judge = verdicts.key if verdicts is not None else None
    datasets = load_datasets(case.datasets)
    index = Index(tmp / "index.sqlite", datasets, trees, case.prefix, "letter", judge=judge)
    view = View(index, verdicts, scan=True)
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
        _cli(case, "--format", "html"),
        case.config is not None,
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
    if measure == "judge":  # with a judge, its verdicts of every setup; without, no block
        judged = [v for _, v in _values(seen.stats, keys)]
        assert (len(judged) > 0) == seen.judged
        assert not seen.judged or any(block["judged"] for block in judged)  # type: ignore[index]


def _cells(table: str) -> list[tuple[str, ...]]:
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.DOTALL)
    return [
        tuple(html.unescape(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.DOTALL)) for r in rows
    ]


def _part(page: str, start: str, end: str) -> str:
    at = page.index(start)
    return page[at : page.index(end, at)]


def test_the_page_has_the_tables_of_the_html_report(seen: Seen) -> None:
    # `kag stats compare` names no judge: with one, the ranking of `kag stats --judge`'s page.
    report = seen.stats_page if seen.judged else seen.compare_page
    ranking = _cells(_part(report, '<table class="ranking">', "</table>"))
    setups = _cells(_part(seen.page, '<div id="setups">', "</table>"))
    per_dataset = _cells(_part(seen.page, '<div id="per-dataset">', "</table>"))
    assert setups[0] == ranking[0] and per_dataset[0] == ranking[0][1:]
    assert setups[1:] == [r for r in ranking[1:] if not r[1].startswith("└ ")]
    assert [r[1:] for r in per_dataset[1:]] == [r[2:] for r in ranking[1:] if r[1].startswith("└ ")]
    assert "XACC%" in ranking[0]  # --extract letter shows the extracted accuracy
    assert ("JUDGE%" in ranking[0] and "AGREE%" in ranking[0]) == seen.judged


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
