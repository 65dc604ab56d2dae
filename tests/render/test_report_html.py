"""The HTML report: self-contained, escaped, and readable in a real browser (headless Chromium)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from kag.datasets import load_datasets
from kag.grading.compare import AnswerSet, analyse, load_source_answers
from kag.render.html import PageMeta, render_html
from kag.render.table import Table, pvalue, table_markdown, table_text
from kag.results import ErrorResult, OkResult, result_path, write_result
from tests.commands.test_compare_cli import PREFIX, build_tree
from tests.conftest import REPO

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("html")
    datasets, results = build_tree(root)
    loaded = load_source_answers(load_datasets(datasets), results, PREFIX)
    analysis = analyse(loaded, "native", n_resamples=500, seed=5)
    meta = PageMeta(datasets="datasets.json", results="results", prefix=PREFIX, version="test")
    return render_html(loaded.summary.setups, analysis.comparisons, analysis.flips, analysis.impacts, meta)


def _load(tmp_path: Path, names: tuple[str, ...]) -> AnswerSet:
    datasets, results = build_tree(tmp_path, names=names)
    return load_source_answers(load_datasets(datasets), results, PREFIX)


def _page(loaded: AnswerSet, baseline: str | None = None, **kwargs: int) -> str:
    a = analyse(loaded, baseline, n_resamples=100, seed=1)
    return render_html(loaded.summary.setups, a.comparisons, a.flips, a.impacts, **kwargs)


# ---------------------------------------------------------------- the page itself


def test_page_is_self_contained(page: str) -> None:
    lowered = page.lower()
    for forbidden in ("http://", "https://", "<script", "src=", "<link", "@import", "url("):
        assert forbidden not in lowered, forbidden
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert '<meta charset="utf-8">' in page
    assert page.count("<svg") == 3  # accuracy, differences, one impact chart


def test_page_sections_and_numbers(page: str) -> None:
    text = re.sub(r"<[^>]+>", " ", page)
    for heading in (
        "Ranking",
        "Accuracy with 95% CI",
        "Comparisons against native",
        "Retrieval impact",
        "Per-question flips",
    ):
        assert heading in text
    # the ranking: other 30/40, native 25/40, kag 17/39 in that order
    ranking = page[page.index('class="ranking"') : page.index("</table>", page.index('class="ranking"'))]
    assert [ranking.index(f">{s}<") for s in ("other", "native", "kag")] == sorted(
        ranking.index(f">{s}<") for s in ("other", "native", "kag")
    )
    assert ">75.00<" in ranking and ">62.50<" in ranking and ">43.59<" in ranking
    assert "seed 5" in text and "500 resamples" in text
    assert "helped 7 | hurt 15 | no change 17" in text


def test_page_is_deterministic(tmp_path: Path) -> None:
    loaded = _load(tmp_path, ("native", "kag"))
    assert _page(loaded) == _page(loaded)


def test_names_and_responses_are_escaped(tmp_path: Path) -> None:
    evil = "<img onerror=x>"
    data = {
        "d&1": {
            "0": {"input": "?", "output": {"type": "MCQ", "options": {"A": "a", "B": "b"}, "answer": "A"}}
        }
    }
    (tmp_path / "ds.json").write_bytes(orjson.dumps(data))
    write_result(result_path(tmp_path / "r", "d&1", "0", "", evil), OkResult("A"))
    write_result(result_path(tmp_path / "r", "d&1", "0", "", "plain"), OkResult("<script>alert(1)</script>"))
    write_result(result_path(tmp_path / "r", "d&1", "0", "", "broken"), ErrorResult("<b>boom</b>"))
    loaded = load_source_answers(load_datasets(tmp_path / "ds.json"), tmp_path / "r")
    out = _page(loaded, evil)
    assert "<img" not in out and "<script>" not in out and "<b>" not in out
    assert "&lt;img onerror=x&gt;" in out and "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "d&amp;1" in out and "&lt;b&gt;boom&lt;/b&gt;" in out  # the error message of an ERR flip


def test_flip_lists_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kag.render.html.OPEN_FLIPS", 10)
    out = _page(_load(tmp_path, ("native", "kag")), "native", max_flips=4)
    assert "11 more not shown" in out  # 15 flips native-only, 4 shown
    assert "<code>kag stats flips kag native</code>" in out
    assert "<details open><summary>A right, B not: 7 question(s)" in out  # short lists unfolded (<= 10)
    assert "<details><summary>B right, A not: 15 question(s)" in out


def test_empty_and_single_setup_pages(tmp_path: Path) -> None:
    assert "No graded result file." in render_html([])
    loaded = _load(tmp_path, ("kag",))
    a = analyse(loaded)
    assert a.comparisons is None and a.flips == ()
    out = render_html(loaded.summary.setups, a.comparisons, a.flips, a.impacts)
    assert ">kag<" in out and "Comparisons" not in out and "Per-question flips" not in out
    # the impact section is still there, without a native setup
    assert "No setup without retrieval to compare with" in out


# ---------------------------------------------------------------- tables and numbers


def test_table_renderers() -> None:
    table = Table(("NAME", "N"), (("a|b", "1"), ("long name", "100")), ("l", "r"))
    assert table_text(table) == "NAME         N\na|b          1\nlong name  100"
    assert table_markdown(table) == "| NAME | N |\n|---|---:|\n| a\\|b | 1 |\n| long name | 100 |"


def test_pvalue_format() -> None:
    assert [pvalue(p) for p in (None, 0.0, 1.0, 0.0072095, 0.00001234)] == [
        "-",
        "0",
        "1.0000",
        "0.0072",
        "1.2e-05",
    ]


# ---------------------------------------------------------------- in a real browser


def _chromium(*args: str, user_dir: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={user_dir}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(
    CHROMIUM is None, reason="Debian package 'chromium' is not installed (apt-get install chromium)"
)
def test_chromium_renders_the_report(page: str, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    report.write_text(page, encoding="utf-8")
    dumped = _chromium("--dump-dom", report.as_uri(), user_dir=tmp_path / "profile")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    text = " ".join(re.sub(r"<[^>]+>", " ", dom).split())
    # What the browser parsed: setup names, the hand-computed numbers, each section.
    assert "kag stats report" in text
    for expected in (
        "other",
        "native",
        "kag",
        "75.00",
        "62.50",
        "43.59",
        "-20.51",
        "0.1338",
        "0.2676",
        "no significant difference",
        "helped 7 | hurt 15 | no change 17",
        "Per-question flips",
        "I think C because the graph | says so",
    ):
        assert expected in text, expected
    assert dom.count("<svg") == 3 and dom.count("<circle") >= 3

    artifacts = REPO / "artifacts"
    artifacts.mkdir(exist_ok=True)
    shot = artifacts / "report.png"
    shot.unlink(missing_ok=True)
    taken = _chromium(
        f"--screenshot={shot}", "--window-size=1280,2000", report.as_uri(), user_dir=tmp_path / "profile2"
    )
    assert taken.returncode == 0, taken.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 2000)
